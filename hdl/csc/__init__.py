"""CSC: the convolution sequence controller (docs/conv.md "CSC"; v1_ias_unit_description.rst
"Convolution Sequence Controller").

CSC turns one direct-convolution layer into the stream of atomic operations CMAC executes: for
kernel group g, stripe of up to ``stripe_max`` output pixels, (channel block, kernel row, kernel
column), pixel of the stripe: the data atom (from CBUF, or the pad value outside the input) and
the weight set of the (g, cb, r, s).

Structure (every valid/ready stage from ``hdl.lib``)::

  OpSeq ─► addr Maps ─► skid ─► wait dat_slices ─► Fork ─► dat_rd_req ─► CBUF ─► dat_rd_resp ─┐
                                                     └────► tag FIFO ──────────────────────────┤
  WtSeq ─► wait wt_entries ─► Fork ─► wt_rd_req ─► CBUF ─► wt_rd_resp ─┐                       ├─► op
                               └────► tag FIFO ────────────────────────┴─ Join ─►              │
        WtCollect ─► stage ─► WtUnpack ─► (current set, consumed by its last op) ──────────────┘
        (sets of 1,024 bytes and more: WtUnpackSerial ─► stage ─► current set; one kernel
        per cycle, hdl/csc/wtset.py serial_unpack)

Image input (D_DATAIN_FORMAT = PIXEL; hdl/csc/image.py): the data path is
:class:`hdl.csc.image.ImgData` instead of OpSeq .. dat_rd_resp (its own op sequence over kernel
rows / row groups, one or two CBUF entries per line of an op, atom assembly), its atoms join
the weight sets in place of the CBUF responses; the weight path is shared, ``WtSeq``
walking the image weight sets (:func:`hdl.csc.image.img_wt_params`).

The weight path runs ahead of the ops: while the ops of one set run, the next sets are read,
collected (aligned as they are written, straight into WtCollect's output register), staged and
unpacked in the registers behind the current one (the "shadow": the set in WtCollect, complete
or being collected, and one in the stage), so a stripe of at least
ceil(kg*cw/entry_bytes)+1 pixels runs at one op per cycle. CBUF read latency is covered by the
tag FIFOs (4 deep).

INT16/FP16 (``cfg.conv16`` configurations, docs/conv16.md "CSC"): the same structure on CBUF
row pairs; addresses count CBUF units (a 16-bit entry is two), the weight path is WtSeq over
rows -> WtUnpack16 (one MAC cell per cycle) -> stage -> current set, and ``op`` carries 16-bit
lanes with the op's channel count ``n`` (:class:`Csc`); image input too (ImgData in
16-bit lanes, the INT8 half or the 16-bit row pair of each read).

Facts from NVIDIA (cited, not copied): CSC's own PAD_LEFT/PAD_TOP, strides and dilations drive
the positions (nv_small RTL NV_NVDLA_CSC_dl: datain_w_cnt_st = -pad_left); the pad value is the
low byte of D_ZERO_PADDING_VALUE, signed (NV_NVDLA_CSC_dl pad_value[7:0]; model
``verif/model/conv.py``).
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from hdl.cbuf import CbufGeometry, rd_req_layout, rd_resp_layout
from hdl.cbuf.keep import keep_layout
from hdl.cmac.layouts import PREC_FP16, PREC_INT16, op16_layout, op_layout
from hdl.config import NvdlaConfig
from hdl.lib.gearbox import Fork, Join
from hdl.lib.stream import Map, PipelineStage, SkidBuffer
from hdl.regfile import unit_layout
from hdl.regmap import REGMAP
from hdl.csc.seq import BATCH_MAX, DIM, OpSeq, WtSeq, dop_layout, params_layout, wreq_layout
from hdl.csc.wtset import (WtCollect, WtUnpack, WtUnpack16, WtUnpackSerial,
                           aligned_set_layout, entry_tag_layout, serial_unpack, wt16_layout,
                           wt_layout)
from hdl.csc.image import ImgData, img_params, img_wt_params, is_image

#: output pixels per stripe at most (CSC's stripe, CACC's assembly buffer entries; the
#: convolution pipeline, hdl.conv, builds CSC and CACC with it). A stripe of n pixels re-uses
#: one weight set for n atomic operations; 32 hides the loading of the next set (at most
#: atomic_k + 1 CBUF entries, docs/conv.md "CSC") behind the current one.
STRIPE_MAX = 32

__all__ = ["Csc", "STRIPE_MAX"]

TAG_FIFO_DEPTH = 4


def _ceil_log2_small(m: Module, v, nvals: int, name: str) -> Signal:
    """ceil(log2(v + 1)) of a value ``v`` below ``nvals`` (a small Switch; combinational)."""
    out = Signal(range(max(2, nvals.bit_length() + 1)), name=name)
    with m.Switch(v):
        for x in range(nvals):
            with m.Case(x):
                m.d.comb += out.eq(x.bit_length())
    return out


def _gate(m: Module, name: str, i, o, ok):
    """Pass stream ``i`` to ``o`` only while ``ok`` (a condition that, once true for the item
    at the head, stays true: the counters it compares only grow during a layer)."""
    m.d.comb += [o.valid.eq(i.valid & ok), i.ready.eq(o.ready & ok), o.payload.eq(i.payload)]


class Csc(wiring.Component):
    """Convolution sequence controller (docs/conv.md "CSC"): direct convolution and image
    input (D_DATAIN_FORMAT = PIXEL, hdl/csc/image.py; same ports and handshakes).

    Configurations computing INT16/FP16 beside INT8 (``cfg.conv16``, nv_full; docs/conv16.md
    "CSC", "Interface changes"): the precision is CSC's D_MISC_CFG.PROC_PRECISION (0 INT8, 1
    INT16, 2 FP16). CBUF read responses are row pairs (2 x cbuf_bank_width bytes: unit
    ``u & ~1``, then ``u | 1``); ``op`` carries :func:`hdl.cmac.layouts.op16_layout`.

    * INT16/FP16 direct convolution: 2-byte elements, a 16-bit entry E of 2 x cbuf_bank_width
      bytes (one channel block of atomic_c elements) is units 2E, 2E+1, read at 2E; slice y,
      block cb, column x at entry ``y*EPS + cb*W + x`` from unit ``dat_base`` (the last block
      packed as in INT8 with R = 2 x entry / atom lanes: ``feature_entries_per_slice(...,
      elem_bytes=2)``); kernel groups of atomic_k / 2; weight sets of ``kg*cw*2`` bytes at the
      byte offsets of ``read_weights(elem_bytes=2)``; the pad value all 16 bits of
      PAD_VALUE (NVIDIA nvdlav1 NV_NVDLA_CSC_dl, model ``ConvCore.run``; for FP16 a bit
      pattern, an operand like any datum). Same loop order as INT8.
    * INT8: today's ops, re-packed (data lane c = byte c in bits 7:0; weight lane of cell j =
      kernels 2j (low byte) and 2j+1); the entry is half ``u & 1`` of the row.
    * Every op carries ``n`` = its channel block's channels (the weight set's ``cw``); lanes
      from ``n`` on are unspecified.
    * Weights are read as rows (two units) in every precision and unpacked one MAC cell per
      cycle (:class:`hdl.csc.wtset.WtUnpack16`: a 16-bit kernel, or an INT8 kernel pair of a
      full block; NVIDIA's rate, kg or ceil(kg/2) cycles per set); CDMA's counters
      (``wt_entries``, ``wt_released``, ``wt_read``, ``keep``) count units: row e is read once
      ``wt_entries > 2e + 1``, and released/read count whole rows.
    * Image input (hdl/csc/image.py) in every precision: a CBUF line is the same element
      sequence in INT8, INT16 and FP16 (atomic_c elements per entry; a 16-bit entry E is
      units 2E, 2E+1 from an even ``dat_base``, docs/conv16.md "CDMA"), so ImgData walks it in
      elements as in INT8 and assembles atomic_c 16-bit lanes (INT8: the byte in bits 7:0)
      with the 16-bit pad on pad lines; INT16/FP16 image weight sets are the INT8 ones with
      2-byte elements in kernel groups of atomic_k / 2 (model ``read_weights(elem_bytes=2)``
      with S = 1, ``read_weights_post_ext(elem_bytes=2)``), ``n`` the set's lanes (ext x cw
      with post-extension). The op order is the INT8 one: kernel group, stripe, (channel
      chunk of atomic_c elements, kernel row) or row group, pixel: ``conv_img_fp16``'s
      accumulation order, and with post-extension one op per row group whose lanes are the
      windows of its lines (the FP16 words' shared exponents depend on that grouping).

    Args:
        cfg: the configuration; needs int8 features (or ``cfg.conv16``), ``cbuf_bank_width ==
            mac_atomic_c >= memory_atomic`` and ``mac_atomic_k == memory_atomic``
            (docs/conv.md).
        stripe_max: most output pixels of a stripe (CACC's assembly buffer entries), >= 1;
            default :data:`STRIPE_MAX`, the pipeline's (so that ``python -m hdl.synth
            --unit hdl.csc.Csc`` builds the unit as the pipeline does).
        wt_serial: build the weight path as :class:`hdl.csc.wtset.WtUnpackSerial` (one kernel
            per cycle) rather than WtCollect + WtUnpack; default
            :func:`hdl.csc.wtset.serial_unpack` of atomic C and K (sets of 1,024 bytes and more).
            Ignored in ``cfg.conv16`` configurations (always :class:`hdl.csc.wtset.WtUnpack16`).

    Ports:
        regs: In(CSC register file ``cfg`` view), stable for the whole layer.
        start: In(1) one-cycle pulse: begin the layer (counters restart).
        busy: Out(1) from ``start`` until the layer's last op has been taken.
        done: Out(1) one-cycle pulse when the layer's last op has been taken on ``op``.
        dat_rd_req / wt_rd_req: Out(stream of :func:`hdl.cbuf.rd_req_layout`), CBUF read
            requests; dat_rd_resp / wt_rd_resp: In(stream of :func:`hdl.cbuf.rd_resp_layout`;
            ``cfg.conv16``: ``{data: 2 x entry_bits}``, the row pair of the requested unit).
        dat_slices: In(14) input slices CDMA has completely written this layer.
        band_end, band_cbs: In(14) CDMA's first band (docs/conv.md "CDMA"): slices
            ``[dat_slices, band_end)`` hold their first ``band_cbs`` channel blocks already
            (``band_end <= dat_slices``: no band). An op reads slice y, channel block cb once
            ``y < dat_slices`` or ``y < band_end and cb < band_cbs``.
        wt_entries: In(32) weight entries CDMA has completely written this layer.
        wt_released: Out(32) weight entries CSC no longer needs (cumulative this layer).
        wt_read: Out(32) one past the furthest weight entry read this layer (CDMA fetches at
            most its WT_AHEAD entries beyond it while feature data remains to be fetched).
        op: Out(stream of :func:`hdl.cmac.layouts.op_layout`; ``cfg.conv16``:
            :func:`hdl.cmac.layouts.op16_layout`) one atomic operation per transfer, in the
            order of docs/conv.md.
        keep: In(:func:`hdl.cbuf.keep.keep_layout`) what the layer finds in CBUF, stable for
            the layer (:class:`hdl.cbuf.keep.CbufKeep`); CSC uses ``dat_base``: slice y starts
            at entry ``(dat_base + y * EPS) mod DCAP`` of the data-bank ring, DCAP =
            (DATA_BANK+1) x depth (all zero: slice y at ``y * EPS``). Kept slices count in
            ``dat_slices`` like fetched ones (CDMA reports them at once).

    Raises:
        NotImplementedError: a configuration the contract excludes.
        ValueError: stripe_max < 1.
    """

    def __init__(self, cfg: NvdlaConfig, stripe_max: int | None = None, *,
                 wt_serial: bool | None = None):
        if stripe_max is None:
            stripe_max = STRIPE_MAX
        self.conv16 = cfg.conv16
        if not self.conv16 and (cfg.feature_data_type != "int8"
                                or cfg.weight_data_type != "int8"):
            raise NotImplementedError("CSC: int8 only (docs/conv.md)")
        if not (cfg.cbuf_bank_width == cfg.mac_atomic_c >= cfg.memory_atomic
                and cfg.mac_atomic_k == cfg.memory_atomic):
            raise NotImplementedError(
                f"CSC needs cbuf_bank_width == mac_atomic_c >= memory_atomic == mac_atomic_k, "
                f"got {cfg.cbuf_bank_width}, {cfg.mac_atomic_c}, {cfg.memory_atomic}, "
                f"{cfg.mac_atomic_k} (docs/conv.md)")
        if stripe_max < 1:
            raise ValueError(f"stripe_max must be >= 1, not {stripe_max}")
        if cfg.batch and stripe_max < cfg.max_batch:
            raise ValueError(f"stripe_max {stripe_max} below max_batch {cfg.max_batch}: a "
                             f"multi-batch stripe holds a pixel of every batch")
        self.batch = cfg.batch
        self.cfg = cfg
        self.stripe_max = stripe_max
        self.geom = g = CbufGeometry.from_config(cfg)
        self.ac, self.ak = cfg.mac_atomic_c, cfg.mac_atomic_k
        self.wt_serial = (serial_unpack(self.ac, self.ak) if wt_serial is None
                          else bool(wt_serial))
        self.atom_elems = cfg.memory_atomic
        if self.conv16:
            # reads return row pairs; the responses are laid out here, not by hdl.cbuf
            resp_l = data.StructLayout({"data": 2 * g.entry_bits})
            op_l = op16_layout(self.ac, self.ak, stripe_max)
        else:
            resp_l = rd_resp_layout(g)
            op_l = op_layout(self.ac, self.ak, stripe_max)
        super().__init__({
            "regs": In(unit_layout(REGMAP.unit("CSC"), "cfg")),
            "start": In(1),
            "busy": Out(1),
            "done": Out(1),
            "dat_rd_req": Out(stream.Signature(rd_req_layout(g))),
            "dat_rd_resp": In(stream.Signature(resp_l)),
            "wt_rd_req": Out(stream.Signature(rd_req_layout(g))),
            "wt_rd_resp": In(stream.Signature(resp_l)),
            "dat_slices": In(14),
            "band_end": In(14),
            "band_cbs": In(14),
            "wt_entries": In(32),
            "wt_released": Out(32),
            "wt_read": Out(32),
            "op": Out(stream.Signature(op_l)),
            "keep": In(keep_layout(g)),
        })

    def _params(self, m: Module):
        """Layer parameters from the registers, registered every cycle (stable one cycle after
        the registers are)."""
        g, ac, ak = self.geom, self.ac, self.ak
        rg = self.regs
        p = Signal(params_layout(g, ac, ak, self.conv16, self.batch))
        if self.conv16:
            return self._params16(m, p)
        c = Signal(DIM)
        k = Signal(DIM)
        m.d.comb += [c.eq(rg.d_datain_size_ext_1.datain_channel_ext + 1),
                     k.eq(rg.d_weight_size_ext_1.weight_kernel + 1)]
        eps = rg.d_entry_per_slice.entries + 1
        if self.batch:
            self._batch_params(m, p, eps)
        sy = rg.d_conv_stride_ext.conv_y_stride_ext + 1
        dy = rg.d_dilation_ext.y_dilation_ext + 1
        pt = rg.d_zero_padding.pad_top
        wo = rg.d_dataout_size_0.dataout_width + 1
        ho = rg.d_dataout_size_0.dataout_height + 1
        lc, lk = (ac - 1).bit_length(), (ak - 1).bit_length()
        m.d.sync += [
            p.w.eq(rg.d_datain_size_ext_0.datain_width_ext + 1),
            p.h.eq(rg.d_datain_size_ext_0.datain_height_ext + 1),
            p.wo.eq(wo), p.ho.eq(ho),
            p.r.eq(rg.d_weight_size_ext_0.weight_height_ext + 1),
            p.s.eq(rg.d_weight_size_ext_0.weight_width_ext + 1),
            p.eps.eq(eps),
            p.sx.eq(rg.d_conv_stride_ext.conv_x_stride_ext + 1), p.sy.eq(sy),
            p.dx.eq(rg.d_dilation_ext.x_dilation_ext + 1), p.dy.eq(dy),
            p.pl.eq(rg.d_zero_padding.pad_left), p.pt.eq(pt),
            p.ncb.eq((c + ac - 1) >> lc), p.cw_last.eq(((c - 1) & (ac - 1)) + 1),
            p.ng.eq((k + ak - 1) >> lk), p.kg_last.eq(((k - 1) & (ak - 1)) + 1),
            p.npix.eq(wo * ho), p.sye.eq(sy * eps), p.dye.eq(dy * eps), p.pte.eq(pt * eps),
            p.wt_base.eq(g.wt_base(rg.d_bank.data_bank)),
            p.dat_base.eq(self.keep.dat_base),
            p.wcap.eq(g.wt_cap(rg.d_bank.weight_bank)),
            # NVIDIA nv_small RTL NV_NVDLA_CSC_dl: pad_value[7:0], a signed byte
            p.pad.eq(rg.d_zero_padding_value.pad_value[:8]),
            p.cw_full.eq(ac),
        ]
        return p

    def _batch_params(self, m: Module, p, eps_u):
        """The multi-batch parameters of ``p`` (:func:`hdl.csc.seq.params_layout` ``batch``;
        docs/conv.md "Multi-batch"): N = D_BATCH_NUMBER.BATCHES+1 (1 in image mode, which has
        no batches: unit description "Image input"), the stripe's pixels ``stripe_max`` // N,
        a cube's entries H x EPS in CBUF units ``eps_u`` per slice and the N x H slices,
        registered as the other parameters."""
        rg, sm = self.regs, self.stripe_max
        nb = Signal(range(BATCH_MAX + 1))
        m.d.comb += nb.eq(Mux(is_image(rg), 1, rg.d_batch_number.batches + 1))
        spx = Signal(DIM)
        with m.Switch(nb):
            for n in range(1, BATCH_MAX + 1):
                with m.Case(n):
                    m.d.comb += spx.eq(max(1, sm // n))
        h = rg.d_datain_size_ext_0.datain_height_ext + 1
        m.d.sync += [p.nb.eq(nb), p.spx.eq(spx), p.hep.eq(h * eps_u), p.nsl.eq(h * nb)]

    def _params16(self, m: Module, p):
        """:meth:`_params` of ``cfg.conv16`` configurations: ``wide`` (an INT16/FP16 direct
        convolution layer, from CSC's D_MISC_CFG.PROC_PRECISION) selects kernel groups of
        atomic_k / 2 and entry sizes in CBUF units doubled (``params_layout`` conv16)."""
        g, ac, ak = self.geom, self.ac, self.ak
        rg = self.regs
        c, k = Signal(DIM), Signal(DIM)
        prec = rg.d_misc_cfg.proc_precision.as_value()
        wide = Signal()
        m.d.comb += [c.eq(rg.d_datain_size_ext_1.datain_channel_ext + 1),
                     k.eq(rg.d_weight_size_ext_1.weight_kernel + 1),
                     # INT16/FP16, direct convolution or image (the image path has its own
                     # parameters, hdl/csc/image.py; the weight path takes these)
                     wide.eq((prec == PREC_INT16) | (prec == PREC_FP16))]
        eps = rg.d_entry_per_slice.entries + 1
        eps_u = Signal(16)                         # entries per slice in CBUF units
        m.d.comb += eps_u.eq(eps << wide)
        if self.batch:
            self._batch_params(m, p, eps_u)
        sy = rg.d_conv_stride_ext.conv_y_stride_ext + 1
        dy = rg.d_dilation_ext.y_dilation_ext + 1
        dx = rg.d_dilation_ext.x_dilation_ext + 1
        w = rg.d_datain_size_ext_0.datain_width_ext + 1
        pt = rg.d_zero_padding.pad_top
        wo = rg.d_dataout_size_0.dataout_width + 1
        ho = rg.d_dataout_size_0.dataout_height + 1
        lc, lk = (ac - 1).bit_length(), (ak - 1).bit_length()
        ak2 = ak // 2
        m.d.sync += [
            p.w.eq(w),
            p.h.eq(rg.d_datain_size_ext_0.datain_height_ext + 1),
            p.wo.eq(wo), p.ho.eq(ho),
            p.r.eq(rg.d_weight_size_ext_0.weight_height_ext + 1),
            p.s.eq(rg.d_weight_size_ext_0.weight_width_ext + 1),
            p.eps.eq(eps),
            p.sx.eq(rg.d_conv_stride_ext.conv_x_stride_ext + 1), p.sy.eq(sy),
            p.dx.eq(dx), p.dy.eq(dy),
            p.pl.eq(rg.d_zero_padding.pad_left), p.pt.eq(pt),
            # channel blocks of atomic_c elements in every precision
            p.ncb.eq((c + ac - 1) >> lc), p.cw_last.eq(((c - 1) & (ac - 1)) + 1),
            p.ng.eq(Mux(wide, (k + ak2 - 1) >> (lk - 1), (k + ak - 1) >> lk)),
            p.kg_last.eq(Mux(wide, ((k - 1) & (ak2 - 1)) + 1, ((k - 1) & (ak - 1)) + 1)),
            p.kg_full.eq(Mux(wide, ak2, ak)),
            p.wide.eq(wide),
            p.dxu.eq(dx << wide), p.wu.eq(w << wide),
            p.npix.eq(wo * ho), p.sye.eq(sy * eps_u), p.dye.eq(dy * eps_u),
            p.pte.eq(pt * eps_u),
            p.wt_base.eq(g.wt_base(rg.d_bank.data_bank)),
            p.dat_base.eq(self.keep.dat_base),
            p.wcap.eq(g.wt_cap(rg.d_bank.weight_bank)),
            # NVIDIA nvdlav1 NV_NVDLA_CSC_dl: pad_value[7:0] in INT8 (the low byte of the
            # lane), all 16 bits in INT16/FP16 (model ConvCore.run pad_csc)
            p.pad.eq(rg.d_zero_padding_value.pad_value),
            p.cw_full.eq(ac),
        ]
        return p

    def elaborate(self, platform):
        m = Module()
        g, ac, ak, sm = self.geom, self.ac, self.ak, self.stripe_max
        c16 = self.conv16
        # the image path and the tags see entries of one unit (a geometry without row pairs,
        # whatever hdl.cbuf's from_config says)
        gi = CbufGeometry(g.banks, g.depth, g.entry_bytes, g.atoms) if c16 else g
        p = self._params(m)
        # image mode (D_DATAIN_FORMAT = PIXEL, hdl/csc/image.py): its own data path; the
        # weight path is shared, with the image parameters of the weight sets
        img = Signal()
        m.d.sync += img.eq(is_image(self.regs))
        q = img_params(m, self.regs, self.keep.dat_base, gi, ac, ak, c16)

        # layer control: the sequencers start two cycles after `start` (parameters settled)
        start_d = Signal(2)
        busy = Signal()
        m.d.sync += start_d.eq(start_d << 1 | self.start)
        with m.If(self.start):
            m.d.sync += busy.eq(1)
        m.d.comb += self.busy.eq(busy)

        # ---------------------------------------------------------------- data path
        opseq = m.submodules.opseq = (OpSeq(gi, ac, ak, sm, conv16=True, batch=self.batch)
                                      if c16 else OpSeq(g, ac, ak, sm, batch=self.batch))
        m.d.comb += [opseq.params.eq(p), opseq.start.eq(start_d[1] & ~img)]
        R, lr = g.atoms, g.atom_shift
        tag_fields = {"pad": 1, "pos": range(sm), "first": 1, "last": 1, "set_last": 1, "end": 1}
        if c16:
            # the atom lane of the row pair where the op's pixel starts (lr + 1 bits): INT8
            # the unit's half and its lane, 16-bit the lane of the packed last block
            tag_fields["lane"] = lr + 1
            lsh = self._last_block_shift16(m, p)
        elif R > 1:
            # the atom lane where the op's pixel starts in its entry (packed last block)
            tag_fields["off"] = lr
            # the last block's L = ceil(cw_last / atom) atoms (CDMA packs them so)
            lm1 = Signal(lr)
            m.d.comb += lm1.eq((p.cw_last - 1) >> (self.atom_elems - 1).bit_length())
            lsh = g.last_block_shift(m, lm1)
        tag_l = data.StructLayout(tag_fields)
        daddr_l = data.StructLayout({"addr": g.addr_bits, "y": DIM, "cb": DIM, "tag": tag_l})

        # two stages (issue 10: the sums, then the bounds and the CBUF ring in one stage were
        # CSC's critical path on ECP5): the position and entry sums, then padding and ring
        dsum_l = data.StructLayout({"x": signed(21), "y": signed(21),
                                    "addr": g.addr_bits + 1,    # modulo 2**(addr_bits+1)
                                    "cb": DIM, "tag": tag_l})

        def dsum(mm, d):
            tag = Signal(tag_l)
            mm.d.comb += [tag.pos.eq(d.pos), tag.first.eq(d.first), tag.last.eq(d.last),
                          tag.set_last.eq(d.set_last), tag.end.eq(d.end)]
            # d.ye includes dat_base: addr < 2 * DCAP inside the input (hdl/cbuf/keep.py)
            if R == 1:
                return {"x": d.xb + d.xs, "y": d.yb + d.yr, "addr": d.ye + d.xb + d.rs_off,
                        "cb": d.cb, "tag": tag}
            # R atoms per entry: the last block's pixels are packed P = 2**sh to an entry
            # (docs/conv.md "Where things live in CBUF"): pixel x in entry x >> sh, from
            # lane (x mod P) * R / P; rs_off - xs = r*dy*eps + cb*w
            x = Signal(signed(21))
            sh = Signal(range(lr + 1))
            mm.d.comb += [x.eq(d.xb + d.xs), sh.eq(Mux(d.cb == p.ncb - 1, lsh, 0))]
            xu = x[:DIM]
            xo, off = xu, Const(0, lr)
            for k in range(1, lr + 1):
                xo = Mux(sh == k, xu >> k, xo)
                off = Mux(sh == k, (xu[:k] << (lr - k))[:lr], off)
            mm.d.comb += tag.off.eq(off)
            return {"x": x, "y": d.yb + d.yr, "addr": d.ye + (d.rs_off - d.xs) + xo,
                    "cb": d.cb, "tag": tag}

        def daddr(mm, d):
            pad = Signal()
            ring = Signal(g.addr_bits)
            mm.d.comb += [pad.eq((d.x < 0) | (d.x >= p.w) | (d.y < 0) | (d.y >= p.h)),
                          ring.eq(Mux(d.addr >= p.wt_base, d.addr - p.wt_base, d.addr))]
            tag = Signal(tag_l)
            mm.d.comb += [tag.eq(d.tag), tag.pad.eq(pad)]
            return {"addr": Mux(pad, 0, ring), "y": d.y[:DIM], "cb": d.cb, "tag": tag}
        dsum_fn, daddr_fn = ((self._dsum16(p, tag_l, lsh), self._daddr16(p, tag_l)) if c16
                             else (dsum, daddr))
        dsmap = m.submodules.dsum = Map(dop_layout(sm, g.addr_bits + 1), dsum_l, dsum_fn)
        dmap = m.submodules.daddr = Map(dsum_l, daddr_l, daddr_fn)
        wiring.connect(m, opseq.o, dsmap.i)
        wiring.connect(m, dsmap.o, dmap.i)
        # a skid buffer before the wait (issue 10: the wait's comparisons and the CBUF's ready
        # ran back through both Map stages into the op sequencer, CSC's critical path on ECP5)
        dskid = m.submodules.dskid = SkidBuffer(daddr_l)
        wiring.connect(m, dmap.o, dskid.i)
        dgated = stream.Signature(daddr_l).create()
        dq = dskid.o.payload
        ok = (dq.tag.pad | (dq.y < self.dat_slices)
              | ((dq.y < self.band_end) & (dq.cb < self.band_cbs)))
        if self.batch:
            # a multi-batch layer's ops wait for all N cubes (each op's pixel is read in every
            # cube at once; docs/conv.md "Multi-batch")
            ok = Mux(p.nb == 1, ok, self.dat_slices >= p.nsl)
        _gate(m, "dat", dskid.o, dgated, ok)
        dfork = m.submodules.dfork = Fork(daddr_l, 2)
        wiring.connect(m, dgated, dfork.i)
        imgd = m.submodules.img = ImgData(gi, ac, ak, sm, c16)
        m.d.comb += [imgd.params.eq(q), imgd.start.eq(start_d[1] & img),
                     imgd.dat_slices.eq(self.dat_slices)]
        if c16:
            self._img_halves(m, img, imgd, dfork.o_0, q.wide)
        else:
            m.d.comb += [
                self.dat_rd_req.valid.eq(Mux(img, imgd.dat_rd_req.valid, dfork.o_0.valid)),
                self.dat_rd_req.payload.addr.eq(Mux(img, imgd.dat_rd_req.payload.addr,
                                                    dfork.o_0.payload.addr)),
                dfork.o_0.ready.eq(self.dat_rd_req.ready & ~img),
                imgd.dat_rd_req.ready.eq(self.dat_rd_req.ready & img),
                imgd.dat_rd_resp.valid.eq(self.dat_rd_resp.valid & img),
                imgd.dat_rd_resp.payload.eq(self.dat_rd_resp.payload),
            ]
        dtag = m.submodules.dtag = SyncFIFO(width=tag_l.size, depth=TAG_FIFO_DEPTH)
        m.d.comb += [dtag.w_en.eq(dfork.o_1.valid), dtag.w_data.eq(dfork.o_1.payload.tag),
                     dfork.o_1.ready.eq(dtag.w_rdy)]
        dtag_v = data.View(tag_l, dtag.r_data)

        # ---------------------------------------------------------------- weight path
        if c16:
            unpack = self._weights16(m, p, q, img, start_d)
        else:
            wtseq = m.submodules.wtseq = WtSeq(g, ac, ak, sm, batch=self.batch)
            pw = Signal.like(p)
            iw = img_wt_params(q, ac)
            # the weight sequencer's parameters registered once more (still settled at its
            # start, two cycles after ``start``; issue 10: the image-mode products fed its
            # set-size products in the same cycle, CSC's critical path)
            m.d.comb += [wtseq.start.eq(start_d[1]), wtseq.params.eq(pw)]
            m.d.sync += pw.eq(p)
            m.d.sync += [pw[f].eq(Mux(img, iw[f], p[f])) for f in iw]
            wreq_l = wreq_layout(g, ac, ak)
            wgated = stream.Signature(wreq_l).create()
            _gate(m, "wt", wtseq.o, wgated, wtseq.o.payload.e < self.wt_entries)
            wfork = m.submodules.wfork = Fork(wreq_l, 2)
            wiring.connect(m, wgated, wfork.i)
            m.d.comb += [self.wt_rd_req.valid.eq(wfork.o_0.valid),
                         self.wt_rd_req.payload.addr.eq(wfork.o_0.payload.addr),
                         wfork.o_0.ready.eq(self.wt_rd_req.ready)]
            etag_l, wjoin = self._weight_reads(m, wfork, ac, ak, g.entry_bytes, g.entry_bits)
            if self.wt_serial:
                # large sets: unpacked kernel by kernel from the entries into the unpacker's
                # register, then two stages (the next set, the current one) as below
                sunp = m.submodules.wunpack = WtUnpackSerial(ac, ak, g.entry_bytes)
                wiring.connect(m, wjoin.o, sunp.i)
                wstage = m.submodules.wstage = PipelineStage(wt_layout(ac, ak))
                wiring.connect(m, sunp.o, wstage.i)
                unpack = m.submodules.wcur = PipelineStage(wt_layout(ac, ak))
                wiring.connect(m, wstage.o, unpack.i)
            else:
                coll = m.submodules.wcollect = WtCollect(ac, ak, g.entry_bytes)
                wiring.connect(m, wjoin.o, coll.i)
                # WtCollect aligns the sets as it writes them into its output register (it takes
                # the next set's entries once its set has moved on); this stage keeps one more set
                # in flight, so that collecting goes on while the next set waits for the current one
                wstage = m.submodules.wstage = PipelineStage(aligned_set_layout(ac, ak))
                wiring.connect(m, coll.o, wstage.i)
                unpack = m.submodules.wunpack = WtUnpack(ac, ak, aligned_set_layout(ac, ak))
                wiring.connect(m, wstage.o, unpack.i)

        # ---------------------------------------------------------------- op join
        out_l = data.StructLayout({"op": op16_layout(ac, ak, sm) if c16 else op_layout(ac, ak, sm),
                                   "end": 1})
        out = m.submodules.out = PipelineStage(out_l)
        resp = self.dat_rd_resp
        wset = unpack.o
        # the data side: CBUF response + tag (direct convolution) or ImgData's atoms (image)
        itag = imgd.o.payload.tag
        dv, jv = Signal(), Signal()
        dsel = Signal(tag_l)
        m.d.comb += [
            dv.eq(Mux(img, imgd.o.valid, resp.valid & dtag.r_rdy)),
            dsel.pad.eq(dtag_v.pad & ~img),
            *[dsel[f].eq(Mux(img, itag[f], dtag_v[f]))
              for f in ("pos", "first", "last", "set_last", "end")],
            jv.eq(dv & wset.valid),
            out.i.valid.eq(jv),
            resp.ready.eq(Mux(img, self._img_resp_ready if c16 else imgd.dat_rd_resp.ready,
                              out.i.ready & jv)),
            dtag.r_en.eq(out.i.ready & jv & ~img),
            imgd.o.ready.eq(out.i.ready & jv & img),
            wset.ready.eq(out.i.ready & jv & dsel.set_last),
            out.i.payload.op.wt.eq(wset.payload.wt if c16 else wset.payload),
            out.i.payload.op.pos.eq(dsel.pos),
            out.i.payload.op.first.eq(dsel.first),
            out.i.payload.op.last.eq(dsel.last),
            out.i.payload.end.eq(dsel.end),
        ]
        if c16:
            self._op_data16(m, p, out.i.payload.op, resp.payload.data, dtag_v, img,
                            imgd.o.payload.data)
            m.d.comb += out.i.payload.op.n.eq(wset.payload.n)
        elif R == 1:
            dat = resp.payload.data
        else:
            # the pixel's atoms down to lane 0 (lanes past its channels meet zero weights)
            dat = Signal(g.entry_bits)
            rd = resp.payload.data
            abits8 = g.entry_bits // R
            m.d.comb += dat.eq((Cat(rd, rd) >> (dtag_v.off * abits8))[:g.entry_bits])
        for c in range(ac if not c16 else 0):
            m.d.comb += out.i.payload.op.data[c].eq(
                Mux(img, imgd.o.payload.data[c * 8:(c + 1) * 8],
                    Mux(dtag_v.pad, p.pad, dat[c * 8:(c + 1) * 8])))
        m.d.comb += [self.op.valid.eq(out.o.valid), self.op.payload.eq(out.o.payload.op),
                     out.o.ready.eq(self.op.ready)]
        fin = out.o.valid & self.op.ready & out.o.payload.end
        m.d.comb += self.done.eq(fin)
        with m.If(fin & ~self.start):
            m.d.sync += busy.eq(0)
        return m

    # ------------------------------------------------------------ cfg.conv16 pieces
    def _last_block_shift16(self, m: Module, p) -> Signal:
        """log2 P of the last channel block (P pixels share an entry, docs/conv.md "Where
        things live in CBUF") in the layer's precision: an INT8 entry holds R = g.atoms
        memory atoms, a 16-bit one 2R (model ``feature_entries_per_slice``: the L = 3 rule
        at R = 4 too); L = ceil(cw_last / atom elements), atom elements memory_atomic or half
        that. A register following the parameters (log2(2R) + 1 values)."""
        lr = self.geom.atom_shift
        la = (self.atom_elems - 1).bit_length()              # log2(memory_atomic)
        lm8, lm16 = Signal(max(1, lr)), Signal(lr + 1)
        m.d.comb += [lm8.eq((p.cw_last - 1) >> la), lm16.eq((p.cw_last - 1) >> (la - 1))]
        cl8 = _ceil_log2_small(m, lm8, 1 << lr, "last_block_log2_l8")
        cl16 = _ceil_log2_small(m, lm16, 2 << lr, "last_block_log2_l16")
        lsh = Signal(range(lr + 2), name="last_block_shift")
        m.d.sync += lsh.eq(Mux(p.wide, lr + 1 - cl16, lr - cl8))
        return lsh

    def _dsum16(self, p, tag_l, lsh):
        """The first address stage (``dsum`` of :meth:`elaborate`) in CBUF units: the
        pixel's position, and its unit address ``ye + rs_off - xs*u + (x >> sh)*u`` (u = 2
        units per entry in 16-bit layers, 1 in INT8; x >> sh the entry of a packed last
        block, its lane ``(x mod P) << (lr16 - sh)`` in 16-bit lanes of the row)."""
        lr16 = self.geom.atom_shift + 1

        def dsum(mm, d):
            tag = Signal(tag_l)
            mm.d.comb += [tag.pos.eq(d.pos), tag.first.eq(d.first), tag.last.eq(d.last),
                          tag.set_last.eq(d.set_last), tag.end.eq(d.end)]
            x = Signal(signed(21))
            sh = Signal(range(lr16 + 1))
            mm.d.comb += [x.eq(d.xb + d.xs), sh.eq(Mux(d.cb == p.ncb - 1, lsh, 0))]
            xu = x[:DIM]
            xo, off = xu, Const(0, lr16)
            for k in range(1, lr16 + 1):
                xo = Mux(sh == k, xu >> k, xo)
                off = Mux(sh == k, (xu[:k] << (lr16 - k))[:lr16], off)
            mm.d.comb += tag.lane.eq(off)
            xs_u, xo_u = Signal(12), Signal(DIM + 1)
            mm.d.comb += [xs_u.eq(Mux(p.wide, d.xs << 1, d.xs)),
                          xo_u.eq(Mux(p.wide, xo << 1, xo))]
            return {"x": x, "y": d.yb + d.yr, "addr": d.ye + (d.rs_off - xs_u) + xo_u,
                    "cb": d.cb, "tag": tag}
        return dsum

    def _daddr16(self, p, tag_l):
        """The second address stage (``daddr``): bounds, the data-bank ring, and the lane of
        the row pair: 16-bit the packed lane of :meth:`_dsum16`; INT8 its lane (half of it:
        R lanes of a unit) in the half ``u & 1`` (DCAP is even: the ring keeps u's parity)."""
        g = self.geom

        def daddr(mm, d):
            pad = Signal()
            ring = Signal(g.addr_bits)
            mm.d.comb += [pad.eq((d.x < 0) | (d.x >= p.w) | (d.y < 0) | (d.y >= p.h)),
                          ring.eq(Mux(d.addr >= p.wt_base, d.addr - p.wt_base, d.addr))]
            tag = Signal(tag_l)
            mm.d.comb += [tag.eq(d.tag), tag.pad.eq(pad),
                          tag.lane.eq(Mux(p.wide, d.tag.lane, Cat(d.tag.lane[1:], ring[0])))]
            return {"addr": Mux(pad, 0, ring), "y": d.y[:DIM], "cb": d.cb, "tag": tag}
        return daddr

    def _img_halves(self, m: Module, img, imgd, dc_req, wide):
        """Image input on row-pair reads: ImgData reads units and takes entries as atomic_c
        16-bit lanes (:class:`hdl.csc.image.ImgData` ``conv16``). ``wide`` (an INT16/FP16
        layer): the row pair is the 16-bit entry (ImgData reads its even unit 2E), lane c its
        element c. INT8: each request's ``addr & 1`` waits in a FIFO (8 deep, more than
        ImgData's reads in flight; a request waits while it is full) and selects the half of
        its response, byte c going to bits 7:0 of lane c (bits 15:8 are the row's, unused).
        Drives the data read port's valid/addr/ready from ``img``, ImgData and the DC fork
        output ``dc_req``; sets ``self._img_resp_ready`` (the response's ready in image
        mode)."""
        eb8 = self.geom.entry_bits
        hq = m.submodules.img_half = SyncFIFO(width=1, depth=8)
        req, resp = self.dat_rd_req, self.dat_rd_resp
        row = resp.payload.data
        half = Signal(eb8, name="img_half_data")
        m.d.comb += half.eq(Mux(hq.r_data, row[eb8:], row[:eb8]))
        lanes = Cat(*[Cat(Mux(wide, row[16 * c:16 * c + 8], half[8 * c:8 * c + 8]),
                          row[16 * c + 8:16 * c + 16]) for c in range(self.ac)])
        m.d.comb += [
            req.valid.eq(Mux(img, imgd.dat_rd_req.valid & hq.w_rdy, dc_req.valid)),
            req.payload.addr.eq(Mux(img, imgd.dat_rd_req.payload.addr, dc_req.payload.addr)),
            dc_req.ready.eq(req.ready & ~img),
            imgd.dat_rd_req.ready.eq(req.ready & img & hq.w_rdy),
            hq.w_en.eq(imgd.dat_rd_req.valid & req.ready & img & hq.w_rdy),
            hq.w_data.eq(imgd.dat_rd_req.payload.addr[0]),
            imgd.dat_rd_resp.valid.eq(resp.valid & img & hq.r_rdy),
            imgd.dat_rd_resp.payload.data.eq(lanes),
            hq.r_en.eq(resp.valid & img & imgd.dat_rd_resp.ready),
        ]
        self._img_resp_ready = Signal(name="img_resp_ready")
        m.d.comb += self._img_resp_ready.eq(imgd.dat_rd_resp.ready & hq.r_rdy)

    def _weight_reads(self, m: Module, wfork, ac: int, ak: int, entry_bytes: int,
                      entry_bits: int, rows: bool = False):
        """The weight reads' bookkeeping shared by the INT8 and 16-bit weight paths: the
        released / read counters CDMA sees (``wt_released``, ``wt_read``: entries, or with
        ``rows`` rows of two units reported in units), the entry tags of ``wfork``'s second
        output queued in a FIFO and joined with CBUF's responses. Returns ``(tag layout,
        Join)``."""
        released = Signal(32)
        read = Signal(32)
        wt_req_fire = wfork.o_0.valid & self.wt_rd_req.ready
        m.d.comb += [self.wt_released.eq(released << 1 if rows else released),
                     self.wt_read.eq(read << 1 if rows else read)]
        with m.If(self.start):
            m.d.sync += [released.eq(0), read.eq(0)]
        with m.Else():
            with m.If(wt_req_fire & wfork.o_0.payload.rls):
                m.d.sync += released.eq(wfork.o_0.payload.e + wfork.o_0.payload.rls_inc)
            with m.If(wt_req_fire & (wfork.o_0.payload.e >= read)):
                m.d.sync += read.eq(wfork.o_0.payload.e + 1)
        etag_l = entry_tag_layout(ac, ak, entry_bytes)
        wtag = m.submodules.wtag = SyncFIFO(width=etag_l.size, depth=TAG_FIFO_DEPTH)
        wp = wfork.o_1.payload
        m.d.comb += [wtag.w_en.eq(wfork.o_1.valid), wfork.o_1.ready.eq(wtag.w_rdy)]
        wtag_w = data.View(etag_l, wtag.w_data)
        m.d.comb += [wtag_w.set_first.eq(wp.set_first), wtag_w.set_last.eq(wp.set_last),
                     wtag_w.off.eq(wp.off), wtag_w.kg.eq(wp.kg), wtag_w.cw.eq(wp.cw)]
        wjoin = m.submodules.wjoin = Join({"data": entry_bits, "tag": etag_l})
        m.d.comb += [wjoin.en.eq(0b11),
                     wjoin.i_data.valid.eq(self.wt_rd_resp.valid),
                     wjoin.i_data.payload.eq(self.wt_rd_resp.payload.data),
                     self.wt_rd_resp.ready.eq(wjoin.i_data.ready),
                     wjoin.i_tag.valid.eq(wtag.r_rdy), wjoin.i_tag.payload.eq(wtag.r_data),
                     wtag.r_en.eq(wjoin.i_tag.ready)]
        return etag_l, wjoin

    def _weights16(self, m: Module, p, q, img, start_d):
        """The weight path of ``cfg.conv16`` configurations: :class:`hdl.csc.seq.WtSeq` over
        CBUF rows (two units, the same weight-stream bytes in every precision; the ring's
        base and size are even), gated by ``wt_entries`` (units: row e needs units 2e, 2e+1),
        row reads at unit 2e, the released/read counters in units, then
        :class:`hdl.csc.wtset.WtUnpack16` and two set stages. Returns the last stage (its
        ``o``: :func:`hdl.csc.wtset.wt16_layout` sets, in op order)."""
        g, ac, ak, sm = self.geom, self.ac, self.ak, self.stripe_max
        gr = CbufGeometry(g.banks, g.depth // 2, 2 * g.entry_bytes, 2 * g.atoms)
        wtseq = m.submodules.wtseq = WtSeq(gr, ac, ak, sm, conv16=True, batch=self.batch)
        pw = Signal(params_layout(gr, ac, ak, True, self.batch))
        iw = img_wt_params(q, ac)
        # registered once more (as the INT8 path), the ring in rows
        m.d.comb += [wtseq.start.eq(start_d[1]), wtseq.params.eq(pw)]
        for f in pw.shape().members:
            if f in iw:
                m.d.sync += pw[f].eq(Mux(img, iw[f], p[f]))
            elif f in ("wt_base", "wcap"):
                m.d.sync += pw[f].eq(p[f] >> 1)
            else:
                m.d.sync += pw[f].eq(p[f])
        wreq_l = wreq_layout(gr, ac, ak)
        wgated = stream.Signature(wreq_l).create()
        _gate(m, "wt", wtseq.o, wgated, Cat(Const(1, 1), wtseq.o.payload.e) < self.wt_entries)
        wfork = m.submodules.wfork = Fork(wreq_l, 2)
        wiring.connect(m, wgated, wfork.i)
        m.d.comb += [self.wt_rd_req.valid.eq(wfork.o_0.valid),
                     self.wt_rd_req.payload.addr.eq(Cat(Const(0, 1), wfork.o_0.payload.addr)),
                     wfork.o_0.ready.eq(self.wt_rd_req.ready)]
        # counters in rows of two units, reported in units
        etag_l, wjoin = self._weight_reads(m, wfork, ac, ak, gr.entry_bytes, gr.entry_bits,
                                           rows=True)
        unp = m.submodules.wunpack = WtUnpack16(ac, ak, gr.entry_bytes)
        m.d.comb += unp.wide.eq(pw.wide)
        wiring.connect(m, wjoin.o, unp.i)
        wstage = m.submodules.wstage = PipelineStage(wt16_layout(ac, ak))
        wiring.connect(m, unp.o, wstage.i)
        cur = m.submodules.wcur = PipelineStage(wt16_layout(ac, ak))
        wiring.connect(m, wstage.o, cur.i)
        return cur

    def _op_data16(self, m: Module, p, op, rd, dtag_v, img, img_data):
        """The op's data lanes (``op16_layout``): the row pair ``rd`` rotated down by the
        tag's lane (an INT8 entry's half and lane, a 16-bit entry's packed lane; no wrap: the
        pixel's atoms end inside the row); lane c = 16-bit element c (INT16/FP16) or byte c
        in bits 7:0 (INT8; bits 15:8 unspecified), ImgData's lane c in image mode (16-bit
        lanes, hdl/csc/image.py), and the 16-bit PAD_VALUE outside the input (INT8: its low
        byte)."""
        g, ac = self.geom, self.ac
        bits = 2 * g.entry_bits
        abits = g.entry_bits // g.atoms                   # one memory atom
        dat = Signal(bits)
        m.d.comb += dat.eq((rd >> (dtag_v.lane * abits))[:bits])
        pad = p.pad.as_unsigned()
        lanes = []
        for c in range(ac):
            lo = Mux(img, img_data[16 * c:16 * c + 8],
                     Mux(dtag_v.pad, pad[:8],
                         Mux(p.wide, dat[16 * c:16 * c + 8], dat[8 * c:8 * c + 8])))
            hi = Mux(img, img_data[16 * c + 8:16 * c + 16],
                     Mux(dtag_v.pad, pad[8:], dat[16 * c + 8:16 * c + 16]))
            lanes.append(Cat(lo, hi))
        m.d.comb += op.data.eq(Cat(*lanes))
