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
one ``done_<src>`` In(2) port per source present in the configuration (bit g = register group g),
e.g. ``done_sdp``, ``done_cdma_dat``.

Only the bits of units the configuration has are implemented, as NVIDIA's GLB (nv_small branch,
vmod/nvdla/glb: NV_NVDLA_GLB_CSB_reg.v and NV_NVDLA_GLB_ic.v, under NVDLA_BDMA_ENABLE /
NVDLA_RUBIK_ENABLE / NVDLA_CDP_ENABLE / NVDLA_PDP_ENABLE):

* status bits of an absent unit read 0 and S_INTR_SET cannot set them (no status flop);
* mask bits of an absent BDMA or RUBIK read 0 and are not writable (no mask flop); the CDP and
  PDP mask flops exist whether or not the unit does (NVIDIA's register block has them
  unconditionally), so those mask bits stay writable and read back;
* S_INTR_SET reads 0 (write-only; NVIDIA ties its read value to zero).
"""
from __future__ import annotations

import re

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.config import NvdlaConfig
from hdl.regfile import RegBusSignature
from hdl.regmap import REGMAP

__all__ = ["Glb", "interrupt_sources", "SOURCE_UNIT", "MASK_WITHOUT_UNIT"]

#: register-file unit (``NvdlaConfig.units()`` name) that raises each interrupt source; a source
#: not listed is raised by the unit of its upper-case name (``sdp`` -> ``SDP``)
SOURCE_UNIT = {"rubik": "RBK", "cdma_dat": "CDMA", "cdma_wt": "CDMA"}
#: sources whose mask bits exist even without their unit (NVIDIA's NV_NVDLA_GLB_CSB_reg.v has the
#: CDP/PDP mask flops outside any ``ifdef``; only BDMA's and RUBIK's are compiled out)
MASK_WITHOUT_UNIT = ("cdp", "pdp")


def interrupt_sources(cfg: NvdlaConfig | None = None) -> dict[str, tuple[int, int]]:
    """``{source lower-case: (status bit of group 0, status bit of group 1)}`` from REGMAP, for
    the sources whose unit ``cfg`` has (every source of the register map when ``cfg`` is None)."""
    st = REGMAP.unit("GLB").registers
    reg = next(r for r in st if r.name == "S_INTR_STATUS")
    out: dict[str, list] = {}
    for f in reg.fields:
        mt = re.fullmatch(r"(.*)_DONE_STATUS([01])", f.name)
        assert mt, f"unexpected S_INTR_STATUS field {f.name}"
        out.setdefault(mt.group(1).lower(), [None, None])[int(mt.group(2))] = f.lsb
    units = None if cfg is None else set(cfg.units())
    return {k: (v[0], v[1]) for k, v in out.items()
            if units is None or SOURCE_UNIT.get(k, k.upper()) in units}


class Glb(wiring.Component):
    """GLB register block + interrupt controller of configuration ``cfg`` (None: every unit of
    the register map, i.e. every interrupt source).

    Ports: ``bus`` In(RegBusSignature) (CSB side), ``done_<src>`` In(2) per interrupt source
    present in ``cfg``, ``intr`` Out(1) (NVIDIA's ``dla_intr``, active high).
    """

    def __init__(self, cfg: NvdlaConfig | None = None):
        self.sources = interrupt_sources(cfg)
        # S_INTR_MASK bits implemented: fields <SRC>_DONE_MASK<g> of the present sources and of
        # MASK_WITHOUT_UNIT
        mreg = next(r for r in REGMAP.unit("GLB").registers if r.name == "S_INTR_MASK")
        self.mask_bits = 0
        for s in interrupt_sources():
            if s in self.sources or s in MASK_WITHOUT_UNIT:
                for g in (0, 1):
                    self.mask_bits |= 1 << mreg.field(f"{s.upper()}_DONE_MASK{g}").lsb
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

        status_bits = 0
        for b0, b1 in self.sources.values():
            status_bits |= (1 << b0) | (1 << b1)
        mask_reg = regs["S_INTR_MASK"]
        mask_bits = self.mask_bits & mask_reg.write_mask
        # one flop per implemented bit (1 = source masked); the others are constant 0
        mask = Signal(32, init=mask_reg.reset & mask_bits)
        status = Signal(32)

        with m.If(bus.we & sel("S_INTR_MASK")):
            m.d.sync += mask.eq(bus.wdata & mask_bits)

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
