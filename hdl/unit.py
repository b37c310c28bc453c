"""The port convention every NVDLA datapath unit follows, so that ``hdl/top.py`` hooks each one
up the same way (CSB register files, MCIF clients, GLB done interrupt).

A datapath unit is a :class:`amaranth.lib.wiring.Component` that owns its register files and
declares, as class attributes:

* ``REGISTER_FILES``: the register-map units it owns (``("PDP_RDMA", "PDP")``); it has one port
  ``csb_<name lower>`` In(:class:`hdl.regfile.RegBusSignature`) per register file;
* ``READ_CLIENTS`` / ``WRITE_CLIENTS``: its DMA engines, by their names in the MCIF client table
  (``hdl/dma/clients.py``); one port per engine named like it, Out(DmaReadSignature) or
  Out(DmaWriteSignature); on a configuration with the secondary memory interface its requests
  carry ``cv``, the memory the engine's ``*_RAM_TYPE`` register field names (the unit drives it
  through :func:`connect_dma`; ``hdl/top.py`` routes each request to MCIF or CVIF);
* ``INTERRUPT``: its GLB interrupt source (``"pdp"`` for S_INTR_STATUS.PDP_DONE_STATUS<g>); the
  port ``done_grp`` Out(2) pulses bit g for one cycle when register group g completes;

and a ``busy`` Out(1) port. :func:`unit_members` builds those members; :class:`DatapathUnit` is
the base class that declares them and provides the register files and the hardware-layer control
every unit shares.
"""
from __future__ import annotations

from functools import reduce

from amaranth.hdl import Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.axi import DmaReadSignature, DmaWriteSignature
from hdl.config import NvdlaConfig
from hdl.regfile import RegBusSignature, UnitRegFile
from hdl.regmap import REGMAP, regmap_for

__all__ = ["unit_members", "connect_dma", "DatapathUnit", "perf_stall_counter", "rdma_read_stall",
           "wdma_write_stall"]


def unit_members(cfg: NvdlaConfig, register_files, read_clients, write_clients) -> dict:
    """Signature members of a datapath unit (see the module docstring): ``csb_<rf>`` per
    register file, one DMA port per read/write client (cfg.mem_address_width address bits,
    cfg.primary_memif_width data bits, requests with ``cv`` when cfg.secondary_memif),
    ``done_grp`` Out(2), ``busy`` Out(1)."""
    aw, dw, cv = cfg.mem_address_width, cfg.primary_memif_width, cfg.secondary_memif
    members = {f"csb_{rf.lower()}": In(RegBusSignature()) for rf in register_files}
    members.update({c: Out(DmaReadSignature(aw, dw, cv)) for c in read_clients})
    members.update({c: Out(DmaWriteSignature(aw, dw, cv)) for c in write_clients})
    members.update(done_grp=Out(2), busy=Out(1))
    return members


def connect_dma(m: Module, engine, port, ram_type) -> None:
    """Connect a DMA engine's memory port ``engine`` (a DmaRead/WriteSignature without ``cv``,
    e.g. ``ReadDma.dma``) to the unit's client port ``port`` (its own member).

    ``ram_type``: the engine's ``*_RAM_TYPE`` register field (1 bit, NVIDIA's encoding CV = 0,
    MC = 1; e.g. SDP_RDMA ``D_SRC_DMA_CFG.SRC_RAM_TYPE``) of the running register group. When
    ``port`` carries ``cv`` (cfg.secondary_memif) every request goes to the memory it names
    (``cv = ~ram_type``); otherwise the field is ignored and everything goes to MCIF, as in
    NVIDIA's configurations without CVIF (nv_small). The running group's value holds for every
    request of a layer: the engines issue requests only while their layer runs.
    """
    if not getattr(port.signature, "cv", False):
        wiring.connect(m, engine, wiring.flipped(port))
        return
    m.d.comb += [port.req.valid.eq(engine.req.valid), engine.req.ready.eq(port.req.ready),
                 port.req.payload.addr.eq(engine.req.payload.addr),
                 port.req.payload.len.eq(engine.req.payload.len),
                 port.req.payload.cv.eq(~Value.cast(ram_type))]
    if "rsp" in port.signature.members:          # read client
        m.d.comb += [engine.rsp.valid.eq(port.rsp.valid), engine.rsp.payload.eq(port.rsp.payload),
                     port.rsp.ready.eq(engine.rsp.ready)]
    else:                                        # write client
        m.d.comb += [port.data.valid.eq(engine.data.valid),
                     port.data.payload.eq(engine.data.payload),
                     engine.data.ready.eq(port.data.ready), engine.done.eq(port.done)]


def perf_stall_counter(m: Module, name: str, unit: str, rf: UnitRegFile, bus, stall,
                       reg: str) -> None:
    """A DMA stall performance counter of nv_small's post-processing units, as their DMA engines
    count it (NV_NVDLA_PDP_RDMA_ig.v, NV_NVDLA_CDP_RDMA_ig.v, NV_NVDLA_PDP_wdma.v,
    NV_NVDLA_CDP_wdma.v; facts only): one 32-bit counter per engine that adds 1 in every cycle
    in which ``stall`` (1 bit: the engine's memory request valid and not accepted) is high while
    the running (consumer) group's D_PERF_ENABLE.DMA_EN of ``rf`` is set, and wraps at 2**32.
    NVIDIA's engines clear it at the end of a cube, but the clear only takes effect in a cycle
    in which the counter is enabled, i.e. a stalled one, and the end of a cube is the cycle its
    last request (read) or data beat (write) is accepted: the count is cumulative from reset,
    no layer or OP_EN clears it. At the end of a layer the count is copied into ``reg`` (the
    register-file ``hw`` field name, e.g. ``d_perf_write_stall``) of the group that ran (NVIDIA:
    a flag toggled per cube, equal to the consumer pointer); here at the layer's done
    (``rf.done``), which sees the same value since the engine requests nothing after its last
    request/beat. CSB reads see the producer group's copy (S_POINTER.PRODUCER, tracked from the
    register bus ``bus`` of register-map unit ``unit``: the register file's status input is not
    per group). ``name`` prefixes the signal names."""
    stalls = Signal(32, name=f"{name}_stalls")
    with m.If(Value.cast(rf.cfg.d_perf_enable.dma_en) & stall):
        m.d.sync += stalls.eq(stalls + 1)
    grp = [Signal(32, name=f"{name}_g{g}") for g in range(2)]
    for g in range(2):
        with m.If(rf.done & (rf.consumer == g)):
            m.d.sync += grp[g].eq(stalls)
    ptr = next(r for r in REGMAP.unit(unit).registers if r.name == "S_POINTER")
    producer = Signal(name=f"{name}_producer")
    with m.If(bus.we & (bus.addr == ptr.offset >> 2)):
        m.d.sync += producer.eq(bus.wdata[ptr.field("PRODUCER").lsb])
    m.d.comb += getattr(rf.hw, reg).as_value().eq(Mux(producer, grp[1], grp[0]))


def rdma_read_stall(m: Module, unit: str, rf: UnitRegFile, bus, req) -> None:
    """D_PERF_READ_STALL of a post-processing read DMA's register file ``rf`` (unit ``unit``:
    PDP_RDMA or CDP_RDMA), as nv_small's NV_NVDLA_PDP_RDMA_ig.v / NV_NVDLA_CDP_RDMA_ig.v count
    it: :func:`perf_stall_counter` of the cycles in which the read request stream ``req`` (to
    MCIF) is valid and not ready; ``bus`` is the unit's CSB register bus."""
    perf_stall_counter(m, f"{unit.lower()}_read_stall", unit, rf, bus,
                       req.valid & ~req.ready, "d_perf_read_stall")


def wdma_write_stall(m: Module, unit: str, rf: UnitRegFile, bus, port) -> None:
    """D_PERF_WRITE_STALL of a post-processing unit's register file ``rf`` (unit ``unit``: PDP or
    CDP), as nv_small's NV_NVDLA_PDP_wdma.v / NV_NVDLA_CDP_wdma.v count it:
    :func:`perf_stall_counter` (cumulative from reset, 32-bit wrapping, copied into the group
    that ran, gated by the running group's DMA_EN) of the cycles in which the write DMA's memory
    request is valid and not accepted. NVIDIA's WDMA has one request port carrying both burst
    commands and data beats; ``port`` (a DmaWriteSignature client port to MCIF) has two
    streams, so a cycle counts when either ``port.req`` or ``port.data`` is valid and not
    ready. ``bus`` is the unit's CSB register bus."""
    perf_stall_counter(m, f"{unit.lower()}_write_stall", unit, rf, bus,
                       (port.req.valid & ~port.req.ready) | (port.data.valid & ~port.data.ready),
                       "d_perf_write_stall")


class DatapathUnit(wiring.Component):
    """Base of the datapath units: ports from the class attributes (see the module docstring),
    register files and hardware-layer control.

    A subclass sets REGISTER_FILES, READ_CLIENTS, WRITE_CLIENTS and INTERRUPT and writes
    ``elaborate`` with :meth:`add_register_file` and :meth:`add_layer_control`.
    """

    REGISTER_FILES: tuple = ()
    READ_CLIENTS: tuple = ()
    WRITE_CLIENTS: tuple = ()
    INTERRUPT: str = ""
    #: the register file whose group raises INTERRUPT (default INTERRUPT upper-cased)
    INTERRUPT_UNIT: str = ""

    def __init__(self, cfg: NvdlaConfig):
        self.cfg = cfg
        members = unit_members(cfg, self.REGISTER_FILES, self.READ_CLIENTS, self.WRITE_CLIENTS)
        members.update(self.extra_members(cfg))
        super().__init__(members)

    def extra_members(self, cfg: NvdlaConfig) -> dict:
        """Signature members a unit adds to the convention's (e.g. SDP's on-the-fly output to
        PDP); ``hdl/top.py`` connects them itself. None by default."""
        return {}

    def add_register_file(self, m: Module, name: str, *, connect_bus: bool = True) -> UnitRegFile:
        """Add the register file of register-map unit ``name`` (one of REGISTER_FILES) to ``m``
        as ``rf_<name>``, its bus connected to the ``csb_<name>`` port unless ``connect_bus`` is
        False (a unit that decodes some registers itself connects it). Returns it."""
        rf = UnitRegFile(regmap_for(self.cfg).unit(name))
        m.submodules[f"rf_{name.lower()}"] = rf
        if connect_bus:
            wiring.connect(m, wiring.flipped(getattr(self, f"csb_{name.lower()}")), rf.bus)
        return rf

    def add_layer_control(self, m: Module, rfs: list, done, uses: dict | None = None,
                          completes: dict | None = None) -> Signal:
        """Hardware-layer sequencing (v1_hwarch.rst "Ping-pong synchronization"): a layer
        starts when the consumer group of every register file in ``rfs`` is armed (D_OP_ENABLE)
        and no layer runs; the one-cycle pulse ``done`` (e.g. the write DMA's last B response;
        ignored while no layer runs) completes the consumer group of each (their OP_EN clears, the consumer pointers flip)
        and pulses ``done_grp`` from the register file named INTERRUPT (to GLB); ``busy`` is
        high while a layer runs. Returns ``start``, a one-cycle pulse in the first cycle.

        ``uses`` maps a register file of ``rfs`` (by unit name) to a 1-bit value, 1 when it takes part in
        the layer, read from register files that always do (e.g. PDP_RDMA is not used
        when PDP's FLYING_MODE = ON_FLYING); such a file is neither waited for nor completed
        when it is 0. Files not in ``uses`` always take part.

        ``completes`` maps a register file (by unit name) to a 1-bit value read at ``done``
        instead of its ``uses`` value: 1 completes that file's group with the layer, 0 leaves it
        armed (a DMA of it that never finishes: SDP_RDMA in hdl/sdp). A register taken at the
        layer's start keeps the configuration's decode off the path from ``done`` into the
        register files' load enables."""
        uses = uses or {}
        completes = completes or {}
        running = Signal(name="layer_running")
        start = Signal(name="layer_start")
        finish = Signal(name="layer_done")
        armed = reduce(lambda a, b: a & b,
                       [rf.op_en | ~uses[rf.unit.name] if rf.unit.name in uses else rf.op_en
                        for rf in rfs])
        m.d.comb += [start.eq(~running & armed), finish.eq(running & done)]
        with m.If(start):
            m.d.sync += running.eq(1)
        with m.If(finish):
            m.d.sync += running.eq(0)
        own_name = self.INTERRUPT_UNIT or self.INTERRUPT.upper()
        own = next(rf for rf in rfs if rf.unit.name == own_name)
        m.d.comb += [rf.done.eq(finish & completes.get(rf.unit.name, uses.get(rf.unit.name, 1)))
                     for rf in rfs]
        m.d.comb += [self.done_grp.eq(own.done_grp), self.busy.eq(running)]
        return start
