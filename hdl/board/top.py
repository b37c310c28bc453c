"""NV_nvdla on a board: the UART bridge (:mod:`hdl.board.bridge`) on its CSB port, block RAM
(:class:`hdl.board.axi_ram.AxiRam`) on its DBB port, ``dla_intr`` on an LED. docs/fpga.md,
"Board top".
"""
from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.axi import AxiMasterSignature
from hdl.board.axi_ram import AxiRam
from hdl.board.bridge import UartBridge
from hdl.board.uart import UartRx, UartTx, check_divisor
from hdl.config import NvdlaConfig
from hdl.csb import CsbSignature, CsbSlave
from hdl.glb import Glb
from hdl.regmap import REGMAP
from hdl.top import DBB_PREFIX, NvdlaCore

__all__ = ["NvdlaBoard", "GlbOnlyCore", "CORES", "DEFAULT_MEM_BYTES"]

#: on-chip memory of the board top: 128 KiB (64 of the GW5A-138's 340 BSRAM blocks)
DEFAULT_MEM_BYTES = 128 * 1024


class GlbOnlyCore(wiring.Component):
    """The reduced core of a board build that proves the flow in minutes (``core="glb"``): the
    CSB slave and GLB (register block and interrupt controller; nv_small's 256 LUT4) with
    :class:`hdl.top.NvdlaCore`'s port names, the DBB master idle (no unit reads memory). Its
    interrupt rises only through GLB's software interrupt registers."""

    def __init__(self, cfg: NvdlaConfig):
        self.cfg = cfg
        members = dict(CsbSignature().members)
        members.update({DBB_PREFIX + k: v for k, v in AxiMasterSignature(
            cfg.mem_address_width, cfg.primary_memif_width).members.items()})
        members["dla_intr"] = Out(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.csb = csb = CsbSlave({"GLB": REGMAP.unit("GLB").base})
        m.submodules.glb = glb = Glb(self.cfg)
        wiring.connect(m, csb.glb, glb.bus)
        for name, member in CsbSignature().members.items():
            if member.flow == wiring.In:
                m.d.comb += getattr(csb.csb, name).eq(getattr(self, name))
            else:
                m.d.comb += getattr(self, name).eq(getattr(csb.csb, name))
        m.d.comb += [self.dla_intr.eq(glb.intr), getattr(self, DBB_PREFIX + "b_bready").eq(1),
                     getattr(self, DBB_PREFIX + "r_rready").eq(1)]
        return m


#: the cores a board top can hold: the whole design, or GLB alone (:class:`GlbOnlyCore`)
CORES = {"nvdla": NvdlaCore, "glb": GlbOnlyCore}


class NvdlaBoard(wiring.Component):
    """NV_nvdla's core (:class:`hdl.top.NvdlaCore`, one clock domain ``sync``: the CSB port in
    the core clock) with a UART bridge and ``mem_bytes`` of block RAM.

    Ports: ``rx`` (In(1), the UART line from the host, idle high), ``tx`` (Out(1), to the host),
    ``intr`` (Out(1), ``dla_intr``), ``busy`` (Out(1): the bridge is working on a command).
    ``cfg``: the configuration (:class:`hdl.config.NvdlaConfig`; one without the secondary
    memory interface: ValueError otherwise); ``divisor``: clock cycles per UART bit (>= 2);
    ``mem_bytes``: the RAM's size (a power of two; addresses wrap at it,
    :class:`hdl.board.axi_ram.AxiRam`); ``core``: a key of :data:`CORES` (``"nvdla"``, the
    default, or ``"glb"``, the reduced build :class:`GlbOnlyCore`; ValueError otherwise)."""

    def __init__(self, cfg: NvdlaConfig, *, divisor: int, mem_bytes: int = DEFAULT_MEM_BYTES,
                 core: str = "nvdla"):
        self._MustUse__silence = True          # until the arguments are checked
        if cfg.secondary_memif:
            raise ValueError(f"NvdlaBoard: configuration {cfg.name} has a secondary memory "
                             "interface (CV SRAM); the board top serves the DBB port only")
        if core not in CORES:
            raise ValueError(f"NvdlaBoard: core {core!r} is not one of {', '.join(CORES)}")
        AxiRam.check_size(mem_bytes, cfg.primary_memif_width)
        self.cfg, self.divisor, self.mem_bytes, self.core = cfg, check_divisor(divisor), mem_bytes, core
        self._MustUse__silence = False
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), "intr": Out(1)})

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        m.submodules.nvdla = core = CORES[self.core](cfg)
        m.submodules.uart_rx = urx = UartRx(self.divisor)
        m.submodules.uart_tx = utx = UartTx(self.divisor)
        m.submodules.bridge = br = UartBridge()
        m.submodules.ram = ram = AxiRam(self.mem_bytes, addr_width=cfg.mem_address_width,
                                        data_width=cfg.primary_memif_width)
        m.d.comb += [urx.rx.eq(self.rx), self.tx.eq(utx.tx), self.intr.eq(core.dla_intr),
                     br.intr.eq(core.dla_intr)]
        wiring.connect(m, urx.o, br.rx)
        wiring.connect(m, br.tx, utx.i)
        wiring.connect(m, br.mem, ram.host)
        for name, member in CsbSignature().members.items():
            if member.flow == wiring.In:        # into NVDLA
                m.d.comb += getattr(core, name).eq(getattr(br.csb, name))
            else:
                m.d.comb += getattr(br.csb, name).eq(getattr(core, name))
        for name, member in ram.axi.signature.members.items():
            # ram.axi is the flipped master signature: its In members are NVDLA's outputs
            if member.flow == wiring.In:
                m.d.comb += getattr(ram.axi, name).eq(getattr(core, DBB_PREFIX + name))
            else:
                m.d.comb += getattr(core, DBB_PREFIX + name).eq(getattr(ram.axi, name))
        return m
