"""GLB: global registers and the interrupt controller (v1_hwarch.rst "Interrupt"; GLB registers of
v1_ias_programming_guide / REGMAP unit ``GLB``).

* ``S_NVDLA_HW_VERSION``: constant, REGMAP reset value.
* ``S_INTR_MASK``: 1 = source masked (status still records the event).
* ``S_INTR_SET``: writing 1 to a bit sets the matching status bit (software-triggered interrupt).
* ``S_INTR_STATUS``: set by the units' one-cycle done pulses (per unit, per register group),
  write 1 to clear; a set in the same cycle wins over the clear (as NVIDIA's GLB_ic).
* ``dla_intr`` = ``|(status & ~mask)``, active high, registered once (NVIDIA registers it and then
  passes it through a 3-flop synchroniser into the CSB clock domain; with one clock here the
  synchroniser is not needed).

Interrupt sources are derived from REGMAP field names ``<SRC>_DONE_STATUS<g>``: the component has
one ``done_<src>`` In(2) port per source (bit g = register group g), e.g. ``done_sdp``,
``done_cdma_dat``.
"""
from __future__ import annotations

import re

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.regfile import RegBusSignature
from hdl.regmap import REGMAP

__all__ = ["Glb", "interrupt_sources"]


def interrupt_sources() -> dict[str, tuple[int, int]]:
    """``{source lower-case: (status bit of group 0, status bit of group 1)}`` from REGMAP."""
    st = REGMAP.unit("GLB").registers
    reg = next(r for r in st if r.name == "S_INTR_STATUS")
    out: dict[str, list] = {}
    for f in reg.fields:
        mt = re.fullmatch(r"(.*)_DONE_STATUS([01])", f.name)
        assert mt, f"unexpected S_INTR_STATUS field {f.name}"
        out.setdefault(mt.group(1).lower(), [None, None])[int(mt.group(2))] = f.lsb
    return {k: (v[0], v[1]) for k, v in out.items()}


class Glb(wiring.Component):
    """GLB register block + interrupt controller.

    Ports: ``bus`` In(RegBusSignature) (CSB side), ``done_<src>`` In(2) per interrupt source,
    ``intr`` Out(1) (NVIDIA's ``dla_intr``, active high).
    """

    def __init__(self):
        self.sources = interrupt_sources()
        members = {"bus": In(RegBusSignature()), "intr": Out(1)}
        for s in self.sources:
            members[f"done_{s}"] = In(2)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        unit = REGMAP.unit("GLB")
        regs = {r.name: r for r in unit.registers}
        bus = self.bus

        def sel(name):
            return bus.addr == (regs[name].offset >> 2)

        mask_reg = regs["S_INTR_MASK"]
        mask = Signal(32, init=mask_reg.reset)
        status = Signal(32)
        status_bits = 0
        for s, (b0, b1) in self.sources.items():
            status_bits |= (1 << b0) | (1 << b1)

        with m.If(bus.we & sel("S_INTR_MASK")):
            m.d.sync += mask.eq(bus.wdata & mask_reg.write_mask)

        set_vec = Signal(32)
        for s, (b0, b1) in self.sources.items():
            done = getattr(self, f"done_{s}")
            m.d.comb += [set_vec[b0].eq(done[0]), set_vec[b1].eq(done[1])]
        sw_set = Signal(32)
        clr = Signal(32)
        with m.If(bus.we & sel("S_INTR_SET")):
            m.d.comb += sw_set.eq(bus.wdata & status_bits)
        with m.If(bus.we & sel("S_INTR_STATUS")):
            m.d.comb += clr.eq(bus.wdata & status_bits)
        m.d.sync += status.eq(((status & ~clr) | set_vec | sw_set) & status_bits)

        m.d.sync += self.intr.eq((status & ~mask & status_bits).any())

        with m.Switch(bus.addr):
            with m.Case(regs["S_NVDLA_HW_VERSION"].offset >> 2):
                m.d.comb += bus.rdata.eq(regs["S_NVDLA_HW_VERSION"].reset)
            with m.Case(mask_reg.offset >> 2):
                m.d.comb += bus.rdata.eq(mask)
            with m.Case(regs["S_INTR_STATUS"].offset >> 2):
                m.d.comb += bus.rdata.eq(status)
            with m.Default():   # S_INTR_SET is write-only; unused offsets: 0
                m.d.comb += bus.rdata.eq(0)
        return m
