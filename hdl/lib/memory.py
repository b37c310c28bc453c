"""Block-RAM conventions shared by every unit (issue 10: FPGA synthesis).

``lib.memory.Memory`` read ports are either transparent or return the old entry when the same
entry is written in the same cycle, and Amaranth emits every read port with Yosys'
``COLLISION_X_MASK`` 0 (the collision result is defined). Block RAMs in simple dual-port mode
(ECP5 PDPW16KD, Xilinx RAMB36 SDP) leave the collision undefined, so Yosys emulates the defined
result beside each RAM: the write delayed by a register (data, address, enable) and a bypass
mux on the read data -- on nv_small's CBUF 32 x (139 flip-flops, ~90 LUTs), a third of its
logic, all of it at the RAM pins.

A memory whose users never read an entry in the cycle it is written (a producer/consumer
protocol guarantees it) declares so with ``attrs=RDWR_UNDEFINED``;
:func:`hdl.synth.sanitize_rtlil` then sets its read ports' ``COLLISION_X_MASK`` so Yosys maps
it to bare block RAM. Simulation is unchanged (the old entry is returned).
"""

__all__ = ["RDWR_UNDEFINED_ATTR", "RDWR_UNDEFINED"]

#: Memory attribute: a read and a write of the same entry never happen in one cycle.
RDWR_UNDEFINED_ATTR = "nvdla_rdwr_undefined"
#: ``attrs`` argument of ``lib.memory.Memory`` for such memories.
RDWR_UNDEFINED = {RDWR_UNDEFINED_ATTR: 1}
