"""The convolution pipeline: CDMA -> CBUF -> CSC -> CMAC_A/CMAC_B -> CACC -> SDP on the fly.

Composition only (the contract between the units is ``docs/conv.md``; each unit is its own
folder: ``hdl/cdma``, ``hdl/cbuf``, ``hdl/csc``, ``hdl/cmac``, ``hdl/cacc``):

* the register files of CDMA, CSC, CMAC_A, CMAC_B and CACC, and one hardware-layer control for
  all five (v1_hwarch.rst "Ping-pong synchronization"): a layer starts when all five consumer
  groups are armed, and all five complete together when CACC has delivered the layer's last
  atom to SDP and CDMA has finished its fetches; CACC interrupts in that cycle (as
  ``verif/model/nvdla.py`` completes the layer), CDMA_DAT and CDMA_WT earlier, when CDMA's
  data fetch and weight fetch end (as NVIDIA's CDMA: its v1 traces wait for them one at a
  time). Layers of the pipeline never overlap.
* CDMA's two MCIF read clients ``cdma_dat`` / ``cdma_wt``, CBUF between CDMA and CSC, the
  atomic operations broadcast to CMAC_A (kernels ``[0, atomic_k/2)``) and CMAC_B (the other
  half; NVIDIA's split), their partial sums joined for CACC, and CACC's atoms to SDP
  (``sdp_flying``, connected by ``hdl/top.py`` to SDP's ``cacc_flying``).
* what CBUF keeps from one layer for the next (DATA_REUSE / WEIGHT_REUSE, SKIP_*_RLS,
  CSC D_RELEASE): ``CbufKeep`` (hdl/cbuf/keep.py) latches the layer's CSC registers at its
  start, updates its state at the layer's end and gives CDMA and CSC what the next layer finds
  in CBUF (docs/conv.md "Data and weight reuse across layers").
* S_CBUF_FLUSH_STATUS.FLUSH_DONE reads 1: CBUF needs no flush after reset (programming guide:
  software polls it before the first convolution).
* a layer NVIDIA's hardware cannot complete (D_WEIGHT_BYTES not a multiple of 128; issue 11
  item 9) is armed but never started: it stays busy until the player's cycle budget names it.
"""
from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import Out

from hdl.cacc import Cacc
from hdl.cbuf import Cbuf, CbufGeometry
from hdl.cbuf.keep import CbufKeep
from hdl.cdma import Cdma
from hdl.cdma.dma import BAND_BITS
from hdl.cmac import CmacArray
from hdl.cmac.array16 import CmacArray16
from hdl.config import NvdlaConfig
from hdl.csc import STRIPE_MAX, Csc
from hdl.unit import DatapathUnit

__all__ = ["ConvPipeline", "conv_unit", "CONV_UNITS", "STRIPE_MAX", "sdp_flying_layout",
           "first_band_lines", "weights_first"]


def weights_first(cfg: NvdlaConfig, stripe_max: int = STRIPE_MAX) -> bool:
    """Whether CDMA fetches kernel group 0's weights before the input lines after the band
    (:class:`hdl.cdma.Cdma` ``weights_first``): when CSC reads a weight set of atomic K x
    atomic C bytes per stripe of ``stripe_max`` operations at least as fast as one AXI beat per
    cycle delivers them, the first stripe waits for group 0's weights, and data fetched beside
    them only delays it (nv_small_256, nv_medium_512, nv_large; not nv_small, whose first
    stripe waits for its lines). docs/conv.md "How fast a layer can be"."""
    return cfg.mac_atomic_c * cfg.mac_atomic_k >= stripe_max * cfg.axi_data_bytes


def first_band_lines(m: Module, csc, stripe_max: int):
    """CDMA's band sizes (docs/conv.md "CDMA"), from CSC's registers ``csc`` (typed ``cfg``
    view), as two registered Signals ``(band, step)``: ``band``, the input lines CSC's first
    stripe reads, ``(rows - 1) * sy + (R - 1) * dy + 1 - pad_top`` (at least 1) for the
    ``rows`` = ceil(stripe_max / output width) output rows of the first stripe (CDMA clips it
    to the input height); ``step``, the lines of CDMA's later bands, ``rows * sy`` (the input
    lines a stripe of ``rows`` output rows moves on by). Only the fetch order depends on
    them, never a result."""
    wo = Signal(14)
    m.d.comb += wo.eq(csc.d_dataout_size_0.dataout_width + 1)
    # the smallest k with k * wo >= stripe_max: compare wo with ceil(stripe_max / k)
    rows = stripe_max
    for k in range(stripe_max, 0, -1):
        rows = Mux(wo >= -(-stripe_max // k), k, rows)
    sy = csc.d_conv_stride_ext.conv_y_stride_ext + 1
    dy = csc.d_dilation_ext.y_dilation_ext + 1
    r1 = csc.d_weight_size_ext_0.weight_height_ext
    need = Signal(signed(BAND_BITS + 8))
    m.d.comb += need.eq((rows - 1) * sy + r1 * dy + 1 - csc.d_zero_padding.pad_top)
    band = Signal(BAND_BITS)
    m.d.sync += band.eq(Mux(need < 1, 1, need))
    lines = Signal(BAND_BITS)
    m.d.sync += lines.eq(rows * sy)
    return band, lines


def sdp_flying_layout(cfg: NvdlaConfig) -> data.ArrayLayout:
    """Payload of CACC's output to SDP: one output atom of ``cfg.mac_atomic_k`` int32 values."""
    return data.ArrayLayout(signed(32), cfg.mac_atomic_k)


#: the pipeline's units by NVDLA name (CMAC_A and CMAC_B are one array, ``cmac``)
CONV_UNITS = ("cdma", "cbuf", "csc", "cmac", "cacc")


def conv_unit(cfg: NvdlaConfig, name: str):
    """A new component of the pipeline's unit ``name`` (one of :data:`CONV_UNITS`) for ``cfg``,
    as :class:`ConvPipeline` builds it; ``hdl.synth`` synthesizes one alone. KeyError for
    another name."""
    make = {"cdma": lambda: Cdma(cfg, weights_first(cfg)),
            "cbuf": lambda: Cbuf.from_config(cfg),
            "csc": lambda: Csc(cfg, STRIPE_MAX),
            "cmac": lambda: (CmacArray16(cfg.mac_atomic_c, cfg.mac_atomic_k, STRIPE_MAX)
                             if cfg.conv16 else
                             CmacArray(cfg.mac_atomic_c, cfg.mac_atomic_k, cfg.mac_result_width,
                                       STRIPE_MAX)),
            "cacc": lambda: Cacc(cfg, STRIPE_MAX)}
    return make[name]()


class ConvPipeline(DatapathUnit):
    """Direct convolution from memory into SDP (see the module docstring and docs/conv.md).

    Ports (hdl/unit.py convention): ``csb_cdma``, ``csb_csc``, ``csb_cmac_a``, ``csb_cmac_b``,
    ``csb_cacc``; read clients ``cdma_dat``, ``cdma_wt``; ``done_grp`` (CACC's interrupt),
    ``busy``; and ``done_cdma_dat`` / ``done_cdma_wt`` Out(2) (CDMA's two interrupt sources,
    pulsing when CDMA's data and weight fetches end), ``sdp_flying`` Out(stream of
    :func:`sdp_flying_layout`).

    Raises NotImplementedError (from the units) for configurations docs/conv.md excludes.
    """

    REGISTER_FILES = ("CDMA", "CSC", "CMAC_A", "CMAC_B", "CACC")
    READ_CLIENTS = ("cdma_dat", "cdma_wt")
    WRITE_CLIENTS = ()
    INTERRUPT = "cacc"

    def extra_members(self, cfg: NvdlaConfig) -> dict:
        return {"sdp_flying": Out(stream.Signature(sdp_flying_layout(cfg))),
                "done_cdma_dat": Out(2), "done_cdma_wt": Out(2)}

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        rfs = {n: self.add_register_file(m, n) for n in self.REGISTER_FILES}
        # CDMA's status fields: FLUSH_DONE = 1, D_PERF_* counters, NaN/Inf counts 0 (int8)

        m.submodules.cdma = cdma = conv_unit(cfg, "cdma")
        m.d.comb += rfs["CDMA"].hw.eq(cdma.hw)
        m.submodules.cbuf = cbuf = conv_unit(cfg, "cbuf")
        m.submodules.csc = csc = conv_unit(cfg, "csc")
        m.submodules.cmac = cmac = conv_unit(cfg, "cmac")
        m.submodules.cacc = cacc = conv_unit(cfg, "cacc")

        # register views and layer control
        m.d.comb += [cdma.regs.eq(rfs["CDMA"].cfg), csc.regs.eq(rfs["CSC"].cfg),
                     cacc.regs.eq(rfs["CACC"].cfg)]
        if cfg.conv16:
            # each CMAC half computes in its own D_MISC_CFG.PROC_PRECISION (docs/conv16.md)
            m.d.comb += [cmac.prec_a.eq(rfs["CMAC_A"].cfg.d_misc_cfg.proc_precision.as_value()),
                         cmac.prec_b.eq(rfs["CMAC_B"].cfg.d_misc_cfg.proc_precision.as_value())]
        # The layer is done when CACC has delivered its last atom AND CDMA has finished: CDMA
        # may still be fetching weight bytes no atomic operation uses (D_WEIGHT_BYTES rounded up
        # to 128 bytes: dc_1x1x8 fetches 128 bytes for its 8 weights), and the next layer's
        # start must not find it busy (found by the soak test: a layer after dc_1x1x8 hung).
        delivered = Signal()
        done = Signal()
        m.d.comb += done.eq((delivered | cacc.done) & ~cdma.busy)
        with m.If(done):
            m.d.sync += delivered.eq(0)
        with m.Elif(cacc.done):
            m.d.sync += delivered.eq(1)
        armed = self.add_layer_control(m, list(rfs.values()), done)
        # A program NVIDIA's hardware cannot complete (issue 11 item 9; model ConvCore.run):
        # D_WEIGHT_BYTES not a multiple of 128 never finishes on NVIDIA's nv_small RTL
        # (observed through --rtl-filelist, CDMA and CSC stay busy). Here the layer is armed but
        # never started: nothing is read or written, the units stay busy and the player's cycle
        # budget names them.
        stuck = Signal()
        m.d.comb += stuck.eq(rfs["CDMA"].cfg.d_weight_bytes.weight_bytes[:7] != 0)
        start = Signal()
        m.d.comb += start.eq(armed & ~stuck)
        m.d.comb += [cdma.start.eq(start), csc.start.eq(start), cacc.start.eq(start)]
        m.submodules.cbuf_keep = keep = CbufKeep(CbufGeometry.from_config(cfg))
        m.d.comb += [keep.regs.eq(rfs["CSC"].cfg), keep.start.eq(start), keep.done.eq(done),
                     cdma.keep.eq(keep.layer), csc.keep.eq(keep.layer)]
        # CDMA_DAT / CDMA_WT interrupt when CDMA's own fetch ends (NVIDIA's CDMA does: its
        # v1 traces wait for each), of the running layer's group: CDMA's consumer pointer flips
        # only at the layer's end, after both
        grp = Mux(rfs["CDMA"].consumer, 0b10, 0b01)
        m.d.comb += [self.done_cdma_dat.eq(Mux(cdma.dat_done, grp, 0)),
                     self.done_cdma_wt.eq(Mux(cdma.wt_done, grp, 0))]

        # memory -> CDMA -> CBUF -> CSC
        wiring.connect(m, cdma.dat_dma, wiring.flipped(self.cdma_dat))
        wiring.connect(m, cdma.wt_dma, wiring.flipped(self.cdma_wt))
        wiring.connect(m, cdma.dat_wr, cbuf.dat_wr)
        wiring.connect(m, cdma.wt_wr, cbuf.wt_wr)
        wiring.connect(m, csc.dat_rd_req, cbuf.dat_rd_req)
        wiring.connect(m, cbuf.dat_rd_resp, csc.dat_rd_resp)
        wiring.connect(m, csc.wt_rd_req, cbuf.wt_rd_req)
        wiring.connect(m, cbuf.wt_rd_resp, csc.wt_rd_resp)
        # every stripe's new lines as a band: CSC's later stripes start on their lines' first
        # channel block, as the first does, instead of waiting for whole lines (every
        # configuration: docs/conv.md "CDMA")
        band, step = first_band_lines(m, rfs["CSC"].cfg, STRIPE_MAX)
        m.d.comb += [cdma.band_step.eq(step), cdma.band_lines.eq(band),
                     csc.band_end.eq(cdma.band_end), csc.band_cbs.eq(cdma.band_cbs)]
        m.d.comb += [csc.dat_slices.eq(cdma.dat_slices), csc.wt_entries.eq(cdma.wt_entries),
                     cdma.wt_released.eq(csc.wt_released), cdma.wt_read.eq(csc.wt_read)]

        # CSC -> CMAC_A + CMAC_B -> CACC
        wiring.connect(m, csc.op, cmac.op)
        wiring.connect(m, cmac.psum, cacc.psum)
        m.d.comb += rfs["CACC"].hw.d_out_saturation.sat_count.eq(cacc.sat_count)

        # CACC -> SDP
        wiring.connect(m, cacc.sdp, wiring.flipped(self.sdp_flying))
        return m
