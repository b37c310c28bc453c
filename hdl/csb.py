"""CSB (configuration space bus) slave: NVIDIA's csb2nvdla / nvdla2csb port and unit decode.

v1_hwarch.rst "Configuration space bus"; port facts from NVIDIA's NV_NVDLA_csb_master:

* request: ``csb2nvdla_valid``/``csb2nvdla_ready`` handshake with ``csb2nvdla_addr[15:0]`` (WORD
  address = byte address >> 2), ``csb2nvdla_wdat[31:0]``, ``csb2nvdla_write``,
  ``csb2nvdla_nposted``.
* response: one-cycle pulses with no back-pressure: ``nvdla2csb_valid`` with
  ``nvdla2csb_data[31:0]`` for reads, ``nvdla2csb_wr_complete`` for non-posted writes; posted
  writes get no response. Both outputs are registered (as in NVIDIA's csb_master).

Timing here: a request accepted in cycle t is decoded in t+1 (the write takes effect at the end of
t+1) and its response is on the outputs in cycle t+2. ``csb2nvdla_ready`` is always 1 (one
response per request, at most one request per cycle). ``nvdla2csb_data`` holds its value until the
next read response.

In ``NV_nvdla`` this slave runs in ``dla_core_clk`` behind :class:`hdl.csb_cdc.CsbCdc`, which
takes NVIDIA's port in ``dla_csb_clk`` and adds the clock-domain crossing's latency (3 cycles
for a request, 4 for a response with equal clocks); the timing above is the slave's own
(``NvdlaCore(cfg)`` without ``csb_clock``).

Decode: byte address bits [17:12] select the unit (4 KiB per unit, bases from the configuration's map: ``hdl.regmap.regmap_for``), bits [11:2]
the register. Addresses with no unit: writes are ignored, reads return 0.
"""
from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.regfile import REG_OFFSET_BITS, RegBusSignature
from hdl.regmap import UNIT_SPAN

__all__ = ["CsbSignature", "CsbSlave"]


class CsbSignature(wiring.Signature):
    """NVIDIA's CSB port as seen from NVDLA (names exactly as NV_nvdla.v)."""

    def __init__(self):
        super().__init__({
            "csb2nvdla_valid": In(1),
            "csb2nvdla_ready": Out(1),
            "csb2nvdla_addr": In(16),
            "csb2nvdla_wdat": In(32),
            "csb2nvdla_write": In(1),
            "csb2nvdla_nposted": In(1),
            "nvdla2csb_valid": Out(1),
            "nvdla2csb_data": Out(32),
            "nvdla2csb_wr_complete": Out(1),
        })


class CsbSlave(wiring.Component):
    """CSB slave decoding to one :class:`hdl.regfile.RegBusSignature` per unit.

    ``units``: dict of unit name -> byte base address (multiples of 4 KiB). Ports: ``csb``
    (In(:class:`CsbSignature`) flipped: NVIDIA's csb port) and ``<unit lower-case>``:
    Out(RegBusSignature) for each unit.
    """

    def __init__(self, units: dict[str, int]):
        self.units = dict(units)
        members = {"csb": Out(CsbSignature())}
        for name in self.units:
            members[name.lower()] = Out(RegBusSignature())
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        csb = self.csb
        m.d.comb += csb.csb2nvdla_ready.eq(1)

        # stage 1: registered request
        s1_valid = Signal()
        s1_addr = Signal(16)
        s1_wdat = Signal(32)
        s1_write = Signal()
        s1_nposted = Signal()
        m.d.sync += s1_valid.eq(csb.csb2nvdla_valid)
        with m.If(csb.csb2nvdla_valid):
            m.d.sync += [s1_addr.eq(csb.csb2nvdla_addr), s1_wdat.eq(csb.csb2nvdla_wdat),
                         s1_write.eq(csb.csb2nvdla_write), s1_nposted.eq(csb.csb2nvdla_nposted)]

        unit_sel = s1_addr[REG_OFFSET_BITS:]          # byte address [17:12]
        rdata = Signal(32)
        for name, base in self.units.items():
            assert base % UNIT_SPAN == 0, f"unit {name} base {base:#x} is not 4 KiB aligned"
            rb = getattr(self, name.lower())
            hit = unit_sel == base // UNIT_SPAN
            m.d.comb += [rb.addr.eq(s1_addr[:REG_OFFSET_BITS]), rb.wdata.eq(s1_wdat),
                         rb.we.eq(s1_valid & s1_write & hit), rb.re.eq(s1_valid & ~s1_write & hit)]
            with m.If(hit):
                m.d.comb += rdata.eq(rb.rdata)

        # stage 2: registered responses (NVIDIA registers nvdla2csb_* too)
        m.d.sync += [
            csb.nvdla2csb_valid.eq(s1_valid & ~s1_write),
            csb.nvdla2csb_wr_complete.eq(s1_valid & s1_write & s1_nposted),
        ]
        with m.If(s1_valid & ~s1_write):
            m.d.sync += csb.nvdla2csb_data.eq(rdata)
        return m
