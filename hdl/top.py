"""NVDLA top level ``NV_nvdla`` with NVIDIA's port list (vmod/nvdla/top/NV_nvdla.v, nv_small).

Two components:

* :class:`NvdlaCore`: everything in the ``sync`` clock domain (CSB slave, GLB, all register
  files, MCIF, the datapath units of ``DATAPATH_UNITS``: the convolution pipeline, SDP, CDP, PDP,
  BDMA, RUBIK)
  but, with ``csb_clock=True``, the CSB port in the ``csb`` domain crossed by
  :class:`hdl.csb_cdc.CsbCdc`. Its ports are NVIDIA's CSB, DBB (``nvdla_core2dbb_*``), CV SRAM
  (``nvdla_core2cvsram_*``, only when cfg.secondary_memif) and ``dla_intr`` ports with NVIDIA's
  names. Used directly by the Amaranth-simulator tests.
* :class:`NV_nvdla`: the chip-level wrapper with NVIDIA's full port list: clocks, resets,
  test/clock-gating controls and the ``nvdla_pwrbus_ram_*_pd`` power-bus inputs (accepted,
  unused: there are no power-gated RAM macros here).

Clocking: two clock domains, as NVIDIA's port list implies. ``sync`` (clocked by ``dla_core_clk``)
holds all the logic: CSB slave, GLB, register files, MCIF, the datapath units. ``csb`` (clocked
by ``dla_csb_clk``) holds only the CSB port side of :class:`hdl.csb_cdc.CsbCdc`, which carries
requests into ``sync`` and responses back through two ``amaranth.lib.fifo.AsyncFIFO`` (NVIDIA's
csb_master also crosses its port from the CSB clock into the core clock). The two clocks may be
unrelated or the same (NVIDIA's nv_small testbench toggles both together); the crossing costs
3 cycles of CSB latency for a request and 4 for a response (equal clocks). :class:`NvdlaCore` puts its CSB port in the ``csb`` domain
only when built with ``csb_clock=True`` (``NV_nvdla`` does; the Amaranth-simulator unit tests use
the default, one ``sync`` domain, with the slave's exact 2-cycle CSB timing).
``global_clk_ovr_on`` and ``tmc2slcg_disable_clock_gating`` only control clock gating, which this
design does not have; they are unused.

Reset (NVIDIA's NV_NVDLA_reset / sync_reset): active-low ``dla_reset_rstn`` asserts the reset of
both domains asynchronously and is released through a 2-flop synchroniser on each clock
(``sync_ff`` on ``dla_core_clk``, ``csb_rst_sync`` - Amaranth's ``AsyncFFSynchronizer`` - on
``dla_csb_clk``); when ``test_mode`` is 1, ``direct_reset_`` (active low) is used instead,
bypassing the synchronisers.
"""
from __future__ import annotations

from amaranth.hdl import Cat, ClockDomain, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.cdc import AsyncFFSynchronizer
from amaranth.lib.wiring import In, Out

from hdl.axi import AxiMasterSignature
from hdl.bdma import Bdma
from hdl.cdp import Cdp
from hdl.config import NvdlaConfig
from hdl.conv import ConvPipeline
from hdl.csb import CsbSignature, CsbSlave
from hdl.csb_cdc import CsbCdc
from hdl.dma import read_client, read_dma_params, write_client
from hdl.dma.route import ReadRoute, WriteRoute
from hdl.glb import Glb
from hdl.mcif import Mcif
from hdl.regfile import UnitRegFile
from hdl.regmap import regmap_for
from hdl.pdp import Pdp
from hdl.rubik import Rubik
from hdl.sdp import Sdp

#: datapath units, each following the port convention of hdl/unit.py (register files, MCIF
#: clients, GLB interrupt); a unit whose register files are not in cfg.units() is left out
DATAPATH_UNITS = (ConvPipeline, Sdp, Cdp, Pdp, Bdma, Rubik)

__all__ = ["NvdlaCore", "DATAPATH_UNITS", "NV_nvdla", "DBB_PREFIX", "CVSRAM_PREFIX", "PWRBUS_PORTS",
           "CSB_DOMAIN"]

#: clock domain of the CSB port when it has its own clock (``dla_csb_clk``)
CSB_DOMAIN = "csb"

DBB_PREFIX = "nvdla_core2dbb_"
CVSRAM_PREFIX = "nvdla_core2cvsram_"
PWRBUS_PORTS = ("nvdla_pwrbus_ram_c_pd", "nvdla_pwrbus_ram_ma_pd", "nvdla_pwrbus_ram_mb_pd",
                "nvdla_pwrbus_ram_p_pd", "nvdla_pwrbus_ram_o_pd", "nvdla_pwrbus_ram_a_pd")


def _flat(prefix: str, sig: wiring.Signature) -> dict:
    return {prefix + name: member for name, member in sig.members.items()}


def _connect_flat(m: Module, outer, prefix: str, inner_port, sig: wiring.Signature):
    """Connect the flat ports ``outer.<prefix><name>`` to ``inner_port.<name>`` (same direction
    as ``sig``'s members from the inner component's point of view)."""
    for name, member in sig.members.items():
        o, i = getattr(outer, prefix + name), getattr(inner_port, name)
        if member.flow == wiring.Out:
            m.d.comb += o.eq(i)
        else:
            m.d.comb += i.eq(o)


def _core_members(cfg: NvdlaConfig) -> dict:
    members = {}
    members.update(CsbSignature().members)
    members.update(_flat(DBB_PREFIX, AxiMasterSignature(cfg.mem_address_width, cfg.primary_memif_width)))
    if cfg.secondary_memif:
        members.update(_flat(CVSRAM_PREFIX, AxiMasterSignature(cfg.mem_address_width,
                                                              cfg.secondary_memif_width)))
    members["dla_intr"] = Out(1)
    return members


class NvdlaCore(wiring.Component):
    """NVDLA core logic in the ``sync`` domain with NVIDIA's CSB / DBB / CV SRAM / dla_intr ports.

    ``cfg``: :class:`hdl.config.NvdlaConfig`. ``csb_clock``: the CSB port (``csb2nvdla_*``,
    ``nvdla2csb_*``) is in the ``csb`` clock domain (``CSB_DOMAIN``, to be defined or clocked
    by the user) and crosses into ``sync`` through :class:`hdl.csb_cdc.CsbCdc` (default False:
    the port is in ``sync``, no crossing). Register files exist for every unit of
    ``cfg.units()`` (functional or not); the working datapaths are the ``DATAPATH_UNITS`` (SDP
    X1/X2 and converter from and to memory, CDP, PDP from memory). DBB data width cfg.primary_memif_width, address width
    cfg.mem_address_width.
    """

    def __init__(self, cfg: NvdlaConfig, *, csb_clock: bool = False):
        self.cfg = cfg
        self.csb_clock = csb_clock
        super().__init__(_core_members(cfg))

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        regmap = regmap_for(cfg)
        units = {u: regmap.unit(u).base for u in cfg.units()}
        m.submodules.csb = csb = CsbSlave(units)
        port = csb.csb
        if self.csb_clock:
            # the CSB port in the ``csb`` domain, crossed into ``sync`` (hdl/csb_cdc.py)
            m.submodules.csb_cdc = cdc = CsbCdc(host_domain=CSB_DOMAIN, core_domain="sync")
            wiring.connect(m, cdc.core, csb.csb)
            port = cdc.host
        for name in CsbSignature().members:
            if CsbSignature().members[name].flow == wiring.In:
                m.d.comb += getattr(port, name).eq(getattr(self, name))
            else:
                m.d.comb += getattr(self, name).eq(getattr(port, name))

        m.submodules.glb = glb = Glb(cfg)
        wiring.connect(m, csb.glb, glb.bus)
        m.d.comb += self.dla_intr.eq(glb.intr)

        m.submodules.mcif = mcif = Mcif(cfg)
        _connect_flat(m, self, DBB_PREFIX, mcif.axi, mcif.axi.signature)
        cvif = None
        if cfg.secondary_memif:
            # CVIF: the same memory client interface on the CV SRAM port (hdl/mcif.py); every
            # client reaches both through a router choosing by the request's RAM type
            m.submodules.cvif = cvif = Mcif(cfg)
            _connect_flat(m, self, CVSRAM_PREFIX, cvif.axi, cvif.axi.signature)

        def hook(port, name, read):
            """Unit client port ``port`` (client ``name``) to MCIF, or through a router to
            MCIF and CVIF."""
            i = read_client(name) if read else write_client(name)
            mc_port = (mcif.rd if read else mcif.wr)[i]
            if cvif is None:
                wiring.connect(m, port, mc_port)
                return
            route = (ReadRoute(cfg.mem_address_width, cfg.primary_memif_width,
                               2 * read_dma_params(cfg)["depth"]) if read else
                     WriteRoute(cfg.mem_address_width, cfg.primary_memif_width))
            m.submodules[f"route_{name}"] = route
            wiring.connect(m, port, route.client)
            wiring.connect(m, route.mc, mc_port)
            wiring.connect(m, route.cv, (cvif.rd if read else cvif.wr)[i])

        owned = {"GLB"}           # register files that live inside a unit (or GLB)
        built = {}
        for unit_cls in DATAPATH_UNITS:
            if not set(unit_cls.REGISTER_FILES) <= set(cfg.units()):
                continue          # unit disabled in this configuration
            unit = unit_cls(cfg)
            built[unit_cls.INTERRUPT] = unit
            m.submodules[unit_cls.INTERRUPT] = unit
            for rf in unit_cls.REGISTER_FILES:
                wiring.connect(m, getattr(csb, rf.lower()), getattr(unit, f"csb_{rf.lower()}"))
            owned |= set(unit_cls.REGISTER_FILES)
            for c in unit.READ_CLIENTS:
                hook(getattr(unit, c), c, True)
            for c in unit.WRITE_CLIENTS:
                hook(getattr(unit, c), c, False)
            m.d.comb += getattr(glb, f"done_{unit_cls.INTERRUPT}").eq(unit.done_grp)

        # SDP's output on the fly to PDP (SDP OUTPUT_DST = PDP, PDP FLYING_MODE = ON_FLYING)
        if "sdp" in built and "pdp" in built:
            wiring.connect(m, built["sdp"].pdp_flying, built["pdp"].pdp_flying)
            m.d.comb += built["sdp"].pdp_done.eq(built["pdp"].done_grp.any())

        # the convolution pipeline: CACC's atoms on the fly into SDP (docs/conv.md); CDMA's two
        # interrupt sources (CACC's is the unit's own)
        if "cacc" in built:
            conv = built["cacc"]
            m.d.comb += [glb.done_cdma_dat.eq(conv.done_cdma_dat), glb.done_cdma_wt.eq(conv.done_cdma_wt)]
            if "sdp" in built:
                wiring.connect(m, conv.sdp_flying, built["sdp"].cacc_flying)

        for u in cfg.units():
            if u in owned:
                continue
            rf = UnitRegFile(regmap.unit(u), read_only=(u == "CFGROM"))
            m.submodules[f"rf_{u.lower()}"] = rf
            wiring.connect(m, getattr(csb, u.lower()), rf.bus)
            if u == "CDMA":
                # no convolution buffer to flush: the flush is always done (programming guide)
                m.d.comb += rf.hw.s_cbuf_flush_status["flush_done"].eq(1)
            elif u == "MCIF":
                m.d.comb += rf.hw.status["idle"].eq(mcif.idle)
            elif u == "CVIF":
                m.d.comb += rf.hw.status["idle"].eq(cvif.idle)
        return m


class NV_nvdla(wiring.Component):
    """Chip top with NVIDIA's NV_nvdla port list (see module docstring for clocks and reset).

    Inputs dla_core_clk, dla_csb_clk, global_clk_ovr_on, tmc2slcg_disable_clock_gating,
    dla_reset_rstn, direct_reset_, test_mode; the NvdlaCore ports (CSB, DBB AXI, CV SRAM AXI when
    cfg.secondary_memif, dla_intr); nvdla_pwrbus_ram_{c,ma,mb,p,o,a}_pd[31:0] inputs (unused).
    """

    def __init__(self, cfg: NvdlaConfig):
        self.cfg = cfg
        members = {
            "dla_core_clk": In(1), "dla_csb_clk": In(1), "global_clk_ovr_on": In(1),
            "tmc2slcg_disable_clock_gating": In(1), "dla_reset_rstn": In(1),
            "direct_reset_": In(1), "test_mode": In(1),
        }
        members.update(_core_members(cfg))
        for p in PWRBUS_PORTS:
            members[p] = In(32)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        # reset: async assert, synchronised release (NVIDIA sync_reset); test_mode -> direct_reset_
        m.domains.por = por = ClockDomain("por", async_reset=True, local=True)
        raw_rstn = Mux(self.test_mode, self.direct_reset_, self.dla_reset_rstn)
        m.d.comb += [por.clk.eq(self.dla_core_clk), por.rst.eq(~raw_rstn)]
        sync_ff = Signal(2)
        m.d.por += sync_ff.eq(Cat(1, sync_ff[0]))
        synced_rstn = Mux(self.test_mode, self.direct_reset_, sync_ff[1])

        m.domains.sync = cd = ClockDomain("sync", async_reset=True, local=True)
        m.d.comb += [cd.clk.eq(self.dla_core_clk), cd.rst.eq(~synced_rstn)]

        # the CSB port's domain: dla_csb_clk, the same reset released synchronously to that
        # clock (Amaranth's async-assert / sync-release synchroniser, 2 flops: csb_rst_sync)
        m.domains.csb = csb_cd = ClockDomain(CSB_DOMAIN, async_reset=True, local=True)
        csb_rst_synced = Signal()
        m.submodules.csb_rst_sync = AsyncFFSynchronizer(~raw_rstn, csb_rst_synced, o_domain=CSB_DOMAIN)
        m.d.comb += [csb_cd.clk.eq(self.dla_csb_clk),
                     csb_cd.rst.eq(Mux(self.test_mode, ~self.direct_reset_, csb_rst_synced))]

        m.submodules.core = core = NvdlaCore(self.cfg, csb_clock=True)
        for name, member in core.signature.members.items():
            if member.flow == wiring.In:
                m.d.comb += getattr(core, name).eq(getattr(self, name))
            else:
                m.d.comb += getattr(self, name).eq(getattr(core, name))
        return m
