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
from hdl.cmac.layouts import op_layout
from hdl.config import NvdlaConfig
from hdl.lib.gearbox import Fork, Join
from hdl.lib.stream import Map, PipelineStage, SkidBuffer
from hdl.regfile import unit_layout
from hdl.regmap import REGMAP
from hdl.csc.seq import DIM, OpSeq, WtSeq, dop_layout, params_layout, wreq_layout
from hdl.csc.wtset import (WtCollect, WtUnpack, WtUnpackSerial, aligned_set_layout,
                           entry_tag_layout, serial_unpack, wt_layout)
from hdl.csc.image import ImgData, img_params, img_wt_params, is_image

#: output pixels per stripe at most (CSC's stripe, CACC's assembly buffer entries; the
#: convolution pipeline, hdl.conv, builds CSC and CACC with it). A stripe of n pixels re-uses
#: one weight set for n atomic operations; 32 hides the loading of the next set (at most
#: atomic_k + 1 CBUF entries, docs/conv.md "CSC") behind the current one.
STRIPE_MAX = 32

__all__ = ["Csc", "STRIPE_MAX"]

TAG_FIFO_DEPTH = 4


def _gate(m: Module, name: str, i, o, ok):
    """Pass stream ``i`` to ``o`` only while ``ok`` (a condition that, once true for the item
    at the head, stays true: the counters it compares only grow during a layer)."""
    m.d.comb += [o.valid.eq(i.valid & ok), i.ready.eq(o.ready & ok), o.payload.eq(i.payload)]


class Csc(wiring.Component):
    """Convolution sequence controller (docs/conv.md "CSC"): direct convolution and image
    input (D_DATAIN_FORMAT = PIXEL, hdl/csc/image.py; same ports and handshakes).

    Args:
        cfg: the configuration; needs int8 features, ``cbuf_bank_width == mac_atomic_c ==
            memory_atomic`` and ``mac_atomic_k == memory_atomic`` (docs/conv.md).
        stripe_max: most output pixels of a stripe (CACC's assembly buffer entries), >= 1;
            default :data:`STRIPE_MAX`, the pipeline's (so that ``python -m hdl.synth
            --unit hdl.csc.Csc`` builds the unit as the pipeline does).
        wt_serial: build the weight path as :class:`hdl.csc.wtset.WtUnpackSerial` (one kernel
            per cycle) rather than WtCollect + WtUnpack; default
            :func:`hdl.csc.wtset.serial_unpack` of atomic C and K (sets of 1,024 bytes and more).

    Ports:
        regs: In(CSC register file ``cfg`` view), stable for the whole layer.
        start: In(1) one-cycle pulse: begin the layer (counters restart).
        busy: Out(1) from ``start`` until the layer's last op has been taken.
        done: Out(1) one-cycle pulse when the layer's last op has been taken on ``op``.
        dat_rd_req / wt_rd_req: Out(stream of :func:`hdl.cbuf.rd_req_layout`), CBUF read
            requests; dat_rd_resp / wt_rd_resp: In(stream of :func:`hdl.cbuf.rd_resp_layout`).
        dat_slices: In(14) input slices CDMA has completely written this layer.
        band_end, band_cbs: In(14) CDMA's first band (docs/conv.md "CDMA"): slices
            ``[dat_slices, band_end)`` hold their first ``band_cbs`` channel blocks already
            (``band_end <= dat_slices``: no band). An op reads slice y, channel block cb once
            ``y < dat_slices`` or ``y < band_end and cb < band_cbs``.
        wt_entries: In(32) weight entries CDMA has completely written this layer.
        wt_released: Out(32) weight entries CSC no longer needs (cumulative this layer).
        wt_read: Out(32) one past the furthest weight entry read this layer (CDMA fetches at
            most its WT_AHEAD entries beyond it while feature data remains to be fetched).
        op: Out(stream of :func:`hdl.cmac.layouts.op_layout`) one atomic operation per
            transfer, in the order of docs/conv.md.
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
        if cfg.feature_data_type != "int8" or cfg.weight_data_type != "int8":
            raise NotImplementedError("CSC: int8 only (docs/conv.md)")
        if not (cfg.cbuf_bank_width == cfg.mac_atomic_c >= cfg.memory_atomic
                and cfg.mac_atomic_k == cfg.memory_atomic):
            raise NotImplementedError(
                f"CSC needs cbuf_bank_width == mac_atomic_c >= memory_atomic == mac_atomic_k, "
                f"got {cfg.cbuf_bank_width}, {cfg.mac_atomic_c}, {cfg.memory_atomic}, "
                f"{cfg.mac_atomic_k} (docs/conv.md)")
        if stripe_max < 1:
            raise ValueError(f"stripe_max must be >= 1, not {stripe_max}")
        self.cfg = cfg
        self.stripe_max = stripe_max
        self.geom = g = CbufGeometry.from_config(cfg)
        self.ac, self.ak = cfg.mac_atomic_c, cfg.mac_atomic_k
        self.wt_serial = (serial_unpack(self.ac, self.ak) if wt_serial is None
                          else bool(wt_serial))
        self.atom_elems = cfg.memory_atomic
        super().__init__({
            "regs": In(unit_layout(REGMAP.unit("CSC"), "cfg")),
            "start": In(1),
            "busy": Out(1),
            "done": Out(1),
            "dat_rd_req": Out(stream.Signature(rd_req_layout(g))),
            "dat_rd_resp": In(stream.Signature(rd_resp_layout(g))),
            "wt_rd_req": Out(stream.Signature(rd_req_layout(g))),
            "wt_rd_resp": In(stream.Signature(rd_resp_layout(g))),
            "dat_slices": In(14),
            "band_end": In(14),
            "band_cbs": In(14),
            "wt_entries": In(32),
            "wt_released": Out(32),
            "wt_read": Out(32),
            "op": Out(stream.Signature(op_layout(self.ac, self.ak, stripe_max))),
            "keep": In(keep_layout(g)),
        })

    def _params(self, m: Module):
        """Layer parameters from the registers, registered every cycle (stable one cycle after
        the registers are)."""
        g, ac, ak = self.geom, self.ac, self.ak
        rg = self.regs
        p = Signal(params_layout(g, ac, ak))
        c = Signal(DIM)
        k = Signal(DIM)
        m.d.comb += [c.eq(rg.d_datain_size_ext_1.datain_channel_ext + 1),
                     k.eq(rg.d_weight_size_ext_1.weight_kernel + 1)]
        eps = rg.d_entry_per_slice.entries + 1
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

    def elaborate(self, platform):
        m = Module()
        g, ac, ak, sm = self.geom, self.ac, self.ak, self.stripe_max
        p = self._params(m)
        # image mode (D_DATAIN_FORMAT = PIXEL, hdl/csc/image.py): its own data path; the
        # weight path is shared, with the image parameters of the weight sets
        img = Signal()
        m.d.sync += img.eq(is_image(self.regs))
        q = img_params(m, self.regs, self.keep.dat_base, g, ac, ak)

        # layer control: the sequencers start two cycles after `start` (parameters settled)
        start_d = Signal(2)
        busy = Signal()
        m.d.sync += start_d.eq(start_d << 1 | self.start)
        with m.If(self.start):
            m.d.sync += busy.eq(1)
        m.d.comb += self.busy.eq(busy)

        # ---------------------------------------------------------------- data path
        opseq = m.submodules.opseq = OpSeq(g, ac, ak, sm)
        m.d.comb += [opseq.params.eq(p), opseq.start.eq(start_d[1] & ~img)]
        R, lr = g.atoms, g.atom_shift
        tag_fields = {"pad": 1, "pos": range(sm), "first": 1, "last": 1, "set_last": 1, "end": 1}
        if R > 1:
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
        dsmap = m.submodules.dsum = Map(dop_layout(sm, g.addr_bits + 1), dsum_l, dsum)
        dmap = m.submodules.daddr = Map(dsum_l, daddr_l, daddr)
        wiring.connect(m, opseq.o, dsmap.i)
        wiring.connect(m, dsmap.o, dmap.i)
        # a skid buffer before the wait (issue 10: the wait's comparisons and the CBUF's ready
        # ran back through both Map stages into the op sequencer, CSC's critical path on ECP5)
        dskid = m.submodules.dskid = SkidBuffer(daddr_l)
        wiring.connect(m, dmap.o, dskid.i)
        dgated = stream.Signature(daddr_l).create()
        dq = dskid.o.payload
        _gate(m, "dat", dskid.o, dgated,
              dq.tag.pad | (dq.y < self.dat_slices)
              | ((dq.y < self.band_end) & (dq.cb < self.band_cbs)))
        dfork = m.submodules.dfork = Fork(daddr_l, 2)
        wiring.connect(m, dgated, dfork.i)
        imgd = m.submodules.img = ImgData(g, ac, ak, sm)
        m.d.comb += [imgd.params.eq(q), imgd.start.eq(start_d[1] & img),
                     imgd.dat_slices.eq(self.dat_slices)]
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
        wtseq = m.submodules.wtseq = WtSeq(g, ac, ak, sm)
        pw = Signal.like(p)
        iw = img_wt_params(q, ac)
        # the weight sequencer's parameters registered once more (still settled at its start,
        # two cycles after ``start``; issue 10: the image-mode products fed its set-size products
        # in the same cycle, CSC's critical path)
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
        released = Signal(32)
        read = Signal(32)
        wt_req_fire = wfork.o_0.valid & self.wt_rd_req.ready
        m.d.comb += [self.wt_released.eq(released), self.wt_read.eq(read)]
        with m.If(self.start):
            m.d.sync += [released.eq(0), read.eq(0)]
        with m.Else():
            with m.If(wt_req_fire & wfork.o_0.payload.rls):
                m.d.sync += released.eq(wfork.o_0.payload.e + wfork.o_0.payload.rls_inc)
            with m.If(wt_req_fire & (wfork.o_0.payload.e >= read)):
                m.d.sync += read.eq(wfork.o_0.payload.e + 1)
        etag_l = entry_tag_layout(ac, ak, g.entry_bytes)
        wtag = m.submodules.wtag = SyncFIFO(width=etag_l.size, depth=TAG_FIFO_DEPTH)
        wp = wfork.o_1.payload
        m.d.comb += [wtag.w_en.eq(wfork.o_1.valid), wfork.o_1.ready.eq(wtag.w_rdy)]
        wtag_w = data.View(etag_l, wtag.w_data)
        m.d.comb += [wtag_w.set_first.eq(wp.set_first), wtag_w.set_last.eq(wp.set_last),
                     wtag_w.off.eq(wp.off), wtag_w.kg.eq(wp.kg), wtag_w.cw.eq(wp.cw)]
        wjoin = m.submodules.wjoin = Join({"data": g.entry_bits, "tag": etag_l})
        m.d.comb += [wjoin.en.eq(0b11),
                     wjoin.i_data.valid.eq(self.wt_rd_resp.valid),
                     wjoin.i_data.payload.eq(self.wt_rd_resp.payload.data),
                     self.wt_rd_resp.ready.eq(wjoin.i_data.ready),
                     wjoin.i_tag.valid.eq(wtag.r_rdy), wjoin.i_tag.payload.eq(wtag.r_data),
                     wtag.r_en.eq(wjoin.i_tag.ready)]
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
        out_l = data.StructLayout({"op": op_layout(ac, ak, sm), "end": 1})
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
            resp.ready.eq(Mux(img, imgd.dat_rd_resp.ready, out.i.ready & jv)),
            dtag.r_en.eq(out.i.ready & jv & ~img),
            imgd.o.ready.eq(out.i.ready & jv & img),
            wset.ready.eq(out.i.ready & jv & dsel.set_last),
            out.i.payload.op.wt.eq(wset.payload),
            out.i.payload.op.pos.eq(dsel.pos),
            out.i.payload.op.first.eq(dsel.first),
            out.i.payload.op.last.eq(dsel.last),
            out.i.payload.end.eq(dsel.end),
        ]
        if R == 1:
            dat = resp.payload.data
        else:
            # the pixel's atoms down to lane 0 (lanes past its channels meet zero weights)
            dat = Signal(g.entry_bits)
            rd = resp.payload.data
            abits8 = g.entry_bits // R
            m.d.comb += dat.eq((Cat(rd, rd) >> (dtag_v.off * abits8))[:g.entry_bits])
        for c in range(ac):
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

