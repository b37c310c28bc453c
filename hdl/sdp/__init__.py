"""SDP: single data point processor, memory-to-memory mode (v1_ias_unit_description.rst "SDP").

Hardware layer = SDP_RDMA MRDMA -> SDP core (BS/BN/EW bypassed, output converter) -> SDP WDMA,
joined by ``amaranth.lib.stream`` interfaces. SDP_RDMA and SDP keep separate register files and
ping-pong pointers (v1_hwarch.rst "Ping-pong synchronization"); a layer starts when the consumer
groups of both are enabled (D_OP_ENABLE) and completes when WDMA has all write responses; then
both register files see ``done`` and SDP's per-group done pulse goes to GLB
(S_INTR_STATUS.SDP_DONE_STATUS<g>).

Not implemented yet (the registers exist and read back): BS/BN/EW ALU/multiplier/LUT, BRDMA,
NRDMA, ERDMA, flying mode (input from CACC), output to PDP, batches, int16/fp16.
"""
from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from hdl.config import NvdlaConfig
from hdl.dma import cube_from_regs
from hdl.regfile import UnitRegFile
from hdl.regmap import REGMAP
from hdl.sdp.core import SdpCore
from hdl.sdp.rdma import SdpRdma, atom_layout
from hdl.sdp.wdma import SdpWdma
from hdl.unit import unit_members

__all__ = ["Sdp", "SdpRdma", "SdpCore", "SdpWdma", "atom_layout"]


class Sdp(wiring.Component):
    """SDP unit with its SDP_RDMA and SDP register files (port convention: :mod:`hdl.unit`).

    Ports: ``csb_sdp_rdma``/``csb_sdp`` In(:class:`hdl.regfile.RegBusSignature`) (CSB side of the
    SDP_RDMA and SDP register files); ``sdp_mrdma`` Out(DmaReadSignature) (MRDMA client);
    ``sdp_wdma`` Out(DmaWriteSignature) (WDMA client); ``done_grp`` Out(2) per-group done pulse to
    GLB; ``busy`` Out(1).
    """

    REGISTER_FILES = ("SDP_RDMA", "SDP")
    READ_CLIENTS = ("sdp_mrdma",)
    WRITE_CLIENTS = ("sdp_wdma",)
    INTERRUPT = "sdp"

    def __init__(self, cfg: NvdlaConfig):
        self.cfg = cfg
        super().__init__(unit_members(cfg, self.REGISTER_FILES, self.READ_CLIENTS, self.WRITE_CLIENTS))

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        m.submodules.rf_rdma = rf_rdma = UnitRegFile(REGMAP.unit("SDP_RDMA"))
        m.submodules.rf_sdp = rf_sdp = UnitRegFile(REGMAP.unit("SDP"))
        wiring.connect(m, wiring.flipped(self.csb_sdp_rdma), rf_rdma.bus)
        wiring.connect(m, wiring.flipped(self.csb_sdp), rf_sdp.bus)

        m.submodules.rdma = rdma = SdpRdma(cfg)
        m.submodules.core = core = SdpCore(cfg)
        m.submodules.wdma = wdma = SdpWdma(cfg)
        wiring.connect(m, rdma.atoms, core.i)
        wiring.connect(m, core.o, wdma.atoms)
        wiring.connect(m, rdma.dma, wiring.flipped(self.sdp_mrdma))
        wiring.connect(m, wdma.dma, wiring.flipped(self.sdp_wdma))

        aw = cfg.mem_address_width
        sc = rf_sdp.cfg
        m.d.comb += [
            rdma.cube.eq(cube_from_regs(
                rf_rdma.cfg, base="d_src_base_addr", line_stride="d_src_line_stride",
                surface_stride="d_src_surface_stride", width="d_data_cube_width",
                height="d_data_cube_height", channel="d_data_cube_channel", addr_width=aw)),
            wdma.cube.eq(cube_from_regs(
                sc, base="d_dst_base_addr", line_stride="d_dst_line_stride",
                surface_stride="d_dst_surface_stride", width="d_data_cube_width",
                height="d_data_cube_height", channel="d_data_cube_channel", addr_width=aw)),
            # typed fields (hdl/regmap/types.py): offset and scale are signed
            core.cvt_offset.eq(sc.d_cvt_offset.cvt_offset),
            core.cvt_scale.eq(sc.d_cvt_scale.cvt_scale),
            core.cvt_shift.eq(sc.d_cvt_shift.cvt_shift),
        ]

        # layer control: start when both consumer groups are armed, finish on WDMA done
        running = Signal()
        start = Signal()
        m.d.comb += start.eq(~running & rf_rdma.op_en & rf_sdp.op_en)
        m.d.comb += [rdma.start.eq(start), wdma.start.eq(start)]
        with m.If(start):
            m.d.sync += running.eq(1)
        with m.If(wdma.done):
            m.d.sync += running.eq(0)
        m.d.comb += [rf_rdma.done.eq(wdma.done), rf_sdp.done.eq(wdma.done),
                     self.done_grp.eq(rf_sdp.done_grp), self.busy.eq(running)]
        return m
