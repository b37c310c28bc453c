"""PDP: planar data processor, offline mode (input from memory through PDP_RDMA)
(v1_ias_unit_description.rst "Planar Data Processor"; v1_ias_programming_guide.rst "PDP
programming").

Hardware layer = PDP_RDMA (:class:`hdl.dma.ReadDma`, one read cube per split band) ->
:class:`hdl.pdp.core.PdpCore` (width pass, height pass, reciprocal multiplies, at
cfg.pdp_throughput elements per cycle) -> PDP WDMA (:class:`hdl.dma.WriteDma`, one write cube per
band), joined by ``amaranth.lib.stream`` interfaces. PDP_RDMA and PDP keep separate register
files and ping-pong pointers; a layer starts when the consumer groups of both are enabled and
completes when WDMA has every write response of the last band; then both register files see
``done`` and PDP's per-group done pulse goes to GLB (S_INTR_STATUS.PDP_DONE_STATUS<g>).

Geometry: the pooling parameters, band widths and output cube come from PDP's registers; the
input cube's address, strides, height and channels from PDP_RDMA's (D_SRC_*, D_DATA_CUBE_IN_*),
as the numpy model (verif/model/pdp.py) does. Split width: :mod:`hdl.pdp.bands`; both DMAs walk
all bands in one run (:mod:`hdl.pdp.dma`), the core's width pass follows the bands with its own
:class:`hdl.pdp.bands.Bands` sequencer.

On-the-fly input (D_OPERATION_MODE_CFG.FLYING_MODE = ON_FLYING, programming guide "PDP"): the
atoms come from SDP's output (port ``pdp_flying``, in the same surface/line/column order) instead
of PDP_RDMA; the layer then starts on PDP's group alone and completes only PDP's group, as
verif/model/nvdla.py sequences a fused SDP->PDP layer.

D_PERF_WRITE_STALL: cycles the WDMA's write request to MCIF was stalled while D_PERF_ENABLE.DMA_EN;
PDP_RDMA's D_PERF_READ_STALL: cycles PDP_RDMA's read request waited for MCIF while PDP_RDMA's
D_PERF_ENABLE.DMA_EN; both on 32-bit wrapping counters that no layer clears, copied into the
group that ran (:func:`hdl.unit.perf_stall_counter`, see ``elaborate``).

INT16 and FP16 (a configuration whose ``cfg.precisions`` include them, e.g.
``nv_full+feature_data_type=int8_int16_fp16``): :class:`hdl.pdp.core16.PdpCore16` sits beside
PdpCore and a layer whose PDP D_DATA_FORMAT.INPUT_DATA is not INT8 goes through it (FP16 when 2,
else INT16), with 16-bit elements, ``atom_bytes // 2`` channels per atom; on a configuration
counting int8 elements (cfg.bpe 8) the same flag makes both DMA walkers count such atoms
(hdl/pdp/dma.py ``half``), so the read and write sides agree; PDP_RDMA's own D_DATA_FORMAT is
not read (the model refuses a program where it differs). D_NAN_FLUSH_TO_ZERO.NAN_TO_ZERO turns
FP16 NaN inputs read by PDP_RDMA into +0 (not on the fly: verif/model/pdp.py, NVIDIA's
NV_NVDLA_PDP_nan.v). On the fly, a 16-bit layer takes SDP's atoms as 16-bit elements in their
memory layout (two bytes per channel); this design's SDP has no 16-bit output yet, so such a
fused layer is not produced today (and hdl/support.py refuses int16/fp16 configurations for the
whole design). On an int8-only configuration (nv_small) nothing of this is built: the Verilog
is the INT8 unit's.

Not implemented: NaN/Inf counters (D_NAN_INPUT_NUM, D_INF_INPUT_NUM, D_NAN_OUTPUT_NUM), output
widths per band above :data:`MAX_WIDTH` atoms. On nv_small NVIDIA's share line buffer holds at
most 128, 64, 32 or 16 output columns per band depending on kernel height and vertical stride
(NV_NVDLA_PDP_CORE_cal2d.v, observed on its RTL: wider bands hang or write values that follow no
window); the model rejects such programs (``verif.model.pdp.line_buffer_width``), and this design
computes them correctly up to :data:`MAX_WIDTH`.
"""
from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In

from hdl.dma import atom_layout, cube_from_regs
from hdl.dma.walker import log2
from hdl.pdp.bands import Bands, band_regs_layout
from hdl.pdp.core import PdpCore
from hdl.pdp.core16 import PdpCore16, core16_geometry
from hdl.pdp.dma import PdpReadDma, PdpWriteDma
from hdl.regmap import REGMAP
from hdl.unit import DatapathUnit, connect_dma, rdma_read_stall, wdma_write_stall

__all__ = ["Pdp", "PdpCore", "MAX_WIDTH"]

#: output columns per band held by each of the 8 line-buffer banks: NVIDIA's share line buffer
#: has 512 entries of one atom (v1_ias_unit_description.rst "Planar Data Processor",
#: total_buf_entry), here split evenly over the 8 banks
MAX_WIDTH = 512 // 8

_PDP = REGMAP.unit("PDP")


def _u(field) -> Value:
    """Raw unsigned bits of a typed register field (enum, signed or unsigned)."""
    return Value.cast(field).as_unsigned()


class Pdp(DatapathUnit):
    """PDP unit with its PDP_RDMA and PDP register files (port convention: :mod:`hdl.unit`).

    Ports: ``csb_pdp_rdma``/``csb_pdp`` In(:class:`hdl.regfile.RegBusSignature`);
    ``pdp_rdma`` Out(DmaReadSignature); ``pdp_wdma`` Out(DmaWriteSignature); ``done_grp`` Out(2)
    per-group done pulse to GLB; ``busy`` Out(1); ``pdp_flying`` In(stream of
    :func:`hdl.dma.atom_layout`) SDP's on-the-fly output (taken only while an ON_FLYING layer
    runs).
    """

    REGISTER_FILES = ("PDP_RDMA", "PDP")
    READ_CLIENTS = ("pdp_rdma",)
    WRITE_CLIENTS = ("pdp_wdma",)
    INTERRUPT = "pdp"

    def extra_members(self, cfg) -> dict:
        return {"pdp_flying": In(stream.Signature(atom_layout(cfg)))}

    def _wide_datapath(self, m, rf_pdp, rdma, wdma, flying, core, half: bool):
        """The 16-bit core (:class:`hdl.pdp.core16.PdpCore16`) beside the INT8 ``core`` (None
        on a configuration without int8) and the routing of the atoms: a layer whose PDP
        D_DATA_FORMAT.INPUT_DATA is not INT8 (0) goes through the 16-bit core (2: FP16, any
        other: INT16; 3 is no value of the field, the model refuses it), the other layers
        through ``core``; with ``half`` the same flag makes both DMAs count 16-bit elements
        (the model's elem_bytes 2). The value is PDP's, also for PDP_RDMA's side (the model
        refuses a PDP_RDMA D_DATA_FORMAT that differs). On the fly the 16-bit core takes SDP's
        atoms as 16-bit elements in their memory layout (two bytes per channel, as PDP_RDMA
        would read them); NaN flush is off then (see ``elaborate``). Returns ``(core16,
        is16)``."""
        cfg = self.cfg
        m.submodules.core16 = core16 = PdpCore16(*core16_geometry(cfg), MAX_WIDTH)
        is16 = Signal()
        if core is None:
            m.d.comb += is16.eq(1)
        else:
            m.d.comb += is16.eq(_u(rf_pdp.cfg.d_data_format.input_data) != 0)
        if half:
            m.d.comb += [rdma.half.eq(is16), wdma.half.eq(is16)]
        fly = self.pdp_flying
        src_valid, src_ready = Signal(), Signal()
        src = Signal(atom_layout(cfg))
        m.d.comb += [
            src_valid.eq(Mux(flying, fly.valid & self.busy, rdma.atoms.valid)),
            src.eq(Mux(flying, fly.payload, rdma.atoms.payload)),
            rdma.atoms.ready.eq(~flying & src_ready),
            fly.ready.eq(flying & self.busy & src_ready),
            core16.i.valid.eq(src_valid & is16), core16.i.payload.eq(src),
        ]
        if core is None:
            m.d.comb += src_ready.eq(core16.i.ready)
            wiring.connect(m, core16.o, wdma.atoms)
        else:
            m.d.comb += [
                core.i.valid.eq(src_valid & ~is16), core.i.payload.eq(src),
                src_ready.eq(Mux(is16, core16.i.ready, core.i.ready)),
                wdma.atoms.valid.eq(Mux(is16, core16.o.valid, core.o.valid)),
                wdma.atoms.payload.eq(Mux(is16, core16.o.payload.as_value(),
                                          core.o.payload.as_value())),
                core.o.ready.eq(wdma.atoms.ready & ~is16),
                core16.o.ready.eq(wdma.atoms.ready & is16),
            ]
        return core16, is16

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        aw = cfg.mem_address_width
        rf_rdma = self.add_register_file(m, "PDP_RDMA")
        rf_pdp = self.add_register_file(m, "PDP")

        has8 = "int8" in cfg.precisions
        wide = any(p in cfg.precisions for p in ("int16", "fp16"))
        # a configuration counting int8 elements (cfg.bpe 8) reads and writes 16-bit layers
        # with half as many channels per atom (the DMAs' ``half``)
        half = {"half": True} if has8 and wide else {}
        m.submodules.rdma = rdma = PdpReadDma(cfg, atom_layout(cfg), **half)
        if has8:
            # the AVE total wraps to 14 bits in nvdlav1 (nv_full's v1 register map), 15 in
            # nv_small (verif/model/pdp.py INT_WIDTHS; found by a random nv_full program)
            m.submodules.core = core = PdpCore(cfg.memory_atomic, cfg.pdp_throughput,
                                               MAX_WIDTH,
                                               tot_bits=14 if cfg.register_map == "v1" else 15)
        m.submodules.wdma = wdma = PdpWriteDma(cfg, atom_layout(cfg), **half)
        # core input: PDP_RDMA, or SDP's output when FLYING_MODE = ON_FLYING (0)
        flying = Signal()
        fly = self.pdp_flying
        if not wide:
            m.d.comb += [
                core.i.valid.eq(Mux(flying, fly.valid & self.busy, rdma.atoms.valid)),
                core.i.payload.eq(Mux(flying, fly.payload, rdma.atoms.payload)),
                rdma.atoms.ready.eq(~flying & core.i.ready),
                fly.ready.eq(flying & self.busy & core.i.ready),
            ]
            wiring.connect(m, core.o, wdma.atoms)
            cores = [core]
        else:
            core16, is16 = self._wide_datapath(m, rf_pdp, rdma, wdma, flying,
                                               core if has8 else None, bool(half))
            cores = ([core] if has8 else []) + [core16]
        connect_dma(m, rdma.dma, self.pdp_rdma, rf_rdma.cfg.d_src_ram_cfg.src_ram_type)
        connect_dma(m, wdma.dma, self.pdp_wdma, rf_pdp.cfg.d_dst_ram_cfg.dst_ram_type)

        pc = rf_pdp.cfg
        mode, kern, pad = pc.d_operation_mode_cfg, pc.d_pooling_kernel_cfg, pc.d_pooling_padding_cfg
        m.d.comb += flying.eq(_u(mode.flying_mode) == 0)
        kw, sx = Signal(4), Signal(5)
        m.d.comb += [kw.eq(_u(kern.kernel_width) + 1), sx.eq(_u(kern.kernel_stride_width) + 1)]
        pads = Signal(data.ArrayLayout(19, 8))
        m.d.comb += [pads[k].eq(_u(getattr(pc, f"d_pooling_padding_value_{k}_cfg")
                                   .as_value()[:19])) for k in range(1, 8)]
        for core in cores:
            # channels per atom: cfg.memory_atomic int8 elements, cfg.atom_bytes // 2 16-bit
            # ones (format.rst; the model's atom_bytes // elem_bytes)
            per_atom = cfg.memory_atomic if isinstance(core, PdpCore) else cfg.atom_bytes // 2
            m.d.comb += [
                core.method.eq(_u(mode.pooling_method)), core.kw.eq(kw), core.sx.eq(sx),
                core.kh.eq(_u(kern.kernel_height) + 1),
                core.sy.eq(_u(kern.kernel_stride_height) + 1),
                core.pad_top.eq(_u(pad.pad_top)),
                core.height.eq(_u(pc.d_data_cube_in_height.cube_in_height) + 1),
                core.out_height.eq(_u(pc.d_data_cube_out_height.cube_out_height) + 1),
                core.surfaces.eq((_u(pc.d_data_cube_in_channel.cube_in_channel)
                                  >> log2(per_atom)) + 1),
                core.pads.eq(pads),
                core.recip_w.eq(_u(pc.d_recip_kernel_width.recip_kernel_width)),
                core.recip_h.eq(_u(pc.d_recip_kernel_height.recip_kernel_height)),
            ]
        if wide:
            # PDP's D_DATA_FORMAT.INPUT_DATA: 2 FP16 (1 INT16); NAN_TO_ZERO only for input read
            # by PDP_RDMA (verif/model/pdp.py, NVIDIA's NV_NVDLA_PDP_nan.v: not on the fly)
            fmt = _u(pc.d_data_format.input_data)
            m.d.comb += [core16.fp.eq(fmt == 2),
                         core16.nan_to_zero.eq(_u(pc.d_nan_flush_to_zero.nan_to_zero) & ~flying)]

        # split-width bands: the DMAs walk them (hdl/pdp/dma.py), the core's width pass follows
        # them with its own sequencer
        band = Signal(band_regs_layout())
        pw_in, pw_out = pc.d_partial_width_in, pc.d_partial_width_out
        m.d.comb += [
            band.split_num.eq(_u(mode.split_num)),
            band.cube_width.eq(_u(pc.d_data_cube_in_width.cube_in_width)),
            band.cube_out_width.eq(_u(pc.d_data_cube_out_width.cube_out_width)),
            band.in_first.eq(_u(pw_in.partial_width_in_first)),
            band.in_mid.eq(_u(pw_in.partial_width_in_mid)),
            band.in_last.eq(_u(pw_in.partial_width_in_last)),
            band.out_first.eq(_u(pw_out.partial_width_out_first)),
            band.out_mid.eq(_u(pw_out.partial_width_out_mid)),
            band.out_last.eq(_u(pw_out.partial_width_out_last)),
            band.kw.eq(kw), band.sx.eq(sx), band.pad_left.eq(_u(pad.pad_left)),
        ]
        m.submodules.bands = cb = Bands()
        m.d.comb += [cb.regs.eq(band), rdma.band.eq(band), wdma.band.eq(band)]
        for core in cores:
            m.d.comb += [core.last_col.eq(cb.last_col), core.pad_left.eq(cb.pad_left_b),
                         core.out_width.eq(cb.out_width),
                         core.next_last_col.eq(cb.next_last_col),
                         core.next_pad_left.eq(cb.next_pad_left_b)]
        if not wide:
            m.d.comb += cb.next.eq(core.band_next)
        elif has8:
            m.d.comb += cb.next.eq(Mux(is16, core16.band_next, cores[0].band_next))
        else:
            m.d.comb += cb.next.eq(core16.band_next)

        aw = cfg.mem_address_width
        m.d.comb += [
            rdma.cube.eq(cube_from_regs(
                rf_rdma.cfg, base="d_src_base_addr", line_stride="d_src_line_stride",
                surface_stride="d_src_surface_stride", width="d_data_cube_in_width",
                height="d_data_cube_in_height", channel="d_data_cube_in_channel", addr_width=aw)),
            wdma.cube.eq(cube_from_regs(
                pc, base="d_dst_base_addr", line_stride="d_dst_line_stride",
                surface_stride="d_dst_surface_stride", width="d_data_cube_out_width",
                height="d_data_cube_out_height", channel="d_data_cube_out_channel",
                addr_width=aw)),
        ]

        # layer control: both consumer groups armed -> start; the last write response -> done
        # (PDP_RDMA takes no part in an on-the-fly layer)
        start = self.add_layer_control(m, [rf_rdma, rf_pdp], wdma.done,
                                       uses={"PDP_RDMA": ~flying})
        m.d.comb += [rdma.start.eq(start & ~flying), wdma.start.eq(start),
                     *[core.start.eq(start) for core in cores], cb.restart.eq(start)]

        # ---- D_PERF_WRITE_STALL (D_PERF_ENABLE.DMA_EN) ----
        # nv_small NV_NVDLA_PDP_wdma.v (facts only): the write-stall counter advances in every
        # cycle in which DMA_EN of the consumer group (NV_NVDLA_PDP_reg.v muxes the field by
        # the consumer pointer) is set and the WDMA's one DMA write request (a command or a
        # data beat) is valid but not accepted; it is 32 bits and wraps (no saturation). Its
        # clear (the cube's last data beat accepted) only acts in an enabled, i.e. stalled,
        # cycle, which never is that cycle: the count is cumulative from reset, as PDP_RDMA's.
        # At the last data beat it is copied into the D_PERF_WRITE_STALL of the group that ran
        # (a flag toggled per layer, equal to the consumer pointer); CSB reads see the producer
        # group's copy. Here: hdl.unit.wdma_write_stall, the copy at the layer's done (the
        # last write response; nothing is requested after the last beat, same value).
        wdma_write_stall(m, "PDP", rf_pdp, self.csb_pdp, self.pdp_wdma)

        # ---- PDP_RDMA D_PERF_READ_STALL (PDP_RDMA's D_PERF_ENABLE.DMA_EN) ----
        # nv_small NV_NVDLA_PDP_RDMA_ig.v (facts only): one 32-bit counter, enabled in every
        # cycle in which DMA_EN of PDP_RDMA's running group is set and the read request to the
        # DMA interface is valid but not accepted; it adds 1 and wraps at 2**32. Its clear
        # (the cube's last request accepted) only acts in an enabled, i.e. stalled, cycle, which
        # never coincides with an accepted request: the count is cumulative from reset. When
        # the cube's last request is accepted it is copied into the D_PERF_READ_STALL of the
        # group that ran (a flag toggled per PDP_RDMA layer, equal to its consumer pointer);
        # the copies are not cleared by OP_EN. Here the copy is taken at the layer's done,
        # which sees the same value (PDP_RDMA requests nothing after its last request), and
        # the stall is on the ``pdp_rdma`` request stream to MCIF.
        rdma_read_stall(m, "PDP_RDMA", rf_rdma, self.csb_pdp_rdma, self.pdp_rdma.req)
        return m
