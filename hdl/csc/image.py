"""CSC image mode (docs/conv.md "CSC"; v1_ias_unit_description.rst "Convolution with Image
Input"; format.rst "Weight Channel Post-extension for image input"; programming guide
CSC.WEIGHT_SIZE_EXT "Image input: 1 x R x C*S").

In image mode (CSC D_DATAIN_FORMAT.DATAIN_FORMAT = PIXEL) each CBUF slice is one input line
stored as bytes: (PAD_LEFT + W + PAD_RIGHT) pixels of C bytes (CDMA has reordered, converted
and padded them left/right), entry-packed from the slice's first entry, slice y at
``(dat_base + y*EPS) mod DCAP`` as in direct convolution. The weights are pre-extended: the
kernel is 1 x R x cw with cw = WEIGHT_CHANNEL_EXT+1 = S*C bytes, so

    out[k, yo, xo] = sum over r, j < cw of wts[k, r, j] * line[yo*sy - pt + r][xo*sx*C + j]

and the data atom of an op is ``atomic_c`` bytes at byte offset ``xo*sx*C + cb*atomic_c`` of
one line: in general not aligned to a CBUF entry (then two entries are read and shifted).
Lines outside [0, H) read CSC's pad value. With channel post-extension (D_POST_Y_EXTENSION:
ext = 2 or 4 lines, cw*ext <= atomic_c) one op combines ``ext`` kernel rows: lanes
``[j*cw, (j+1)*cw)`` come from line ``yo*sy - pt + rg*ext + j`` of row group ``rg`` (the last
group has R % ext lines when R is not a multiple of ext).

Lanes of an op that no weight multiplies (past the op's channels: the last channel block, the
missing lines of the last row group) read 0. Because the output window lies inside the padded
line (programming guide Limitation: (Output-1)*stride + S <= PL + Input + PR), every other
lane is a byte inside the padded line, so no byte past it is ever used (the model reads those
as 0; ``verif/model/conv.py`` ``_conv_img``).

Op sequence (shared with the weight sequencer :class:`hdl.csc.seq.WtSeq`, whose parameters
:func:`img_wt_params` derives): for kernel group g, stripe, *set* (cb, r), pixel of the stripe,
where without post-extension the sets are (channel block cb of the cw bytes, kernel row r)
and with post-extension (row group cb, r = 0). Weight set (g, cb, r) = kg kernels x n bytes,
kernel-major, at consecutive positions of the weight stream: n = the op's channels (atomic_c,
or cw - (ncb-1)*atomic_c for the last block; ext*cw, or (R % ext)*cw for the last row group),
the direct-convolution layout with S = 1 and C = cw (format.rst "Basic Weight for Direct
Convolution") or the post-extension layout (model ``read_weights_post_ext``).

Structure::

  ImgOpSeq ─► skid ─► ImgReads ─► stage ─► wait dat_slices ─► Fork ─► dat_rd_req ─► CBUF ─┐
                                                                └──► tag FIFO ────────────┴► ImgAssemble ─► o

One CBUF read per op when its bytes lie in one entry per line (NVIDIA's img_* traces: C = 4,
sx = 2, every op aligned), so such layers run at one op per cycle; two reads per line
otherwise.

INT16/FP16 image layers (``cfg.conv16`` configurations, nv_full; docs/conv16.md "CSC",
"CDMA"): a CBUF line is the same sequence of (PAD_LEFT + W + PAD_RIGHT) x C elements, 2-byte
ones, atomic_c to a 16-bit entry (64 per 128-B entry on nv_full; entry E of the data ring is
CBUF units 2E, 2E+1). Everything above holds with "byte" read as "element": the element
offsets (``xo*sx*C + cb*atomic_c``, NVIDIA nvdlav1 NV_NVDLA_CSC_dl ``pixel_x_byte_stride``
doubled in bytes) and the post-extension limits (``cw*ext <= atomic_c``, ``sx*C*ext <=
atomic_c``, model ``ConvCore.run``) count elements; only the entry addresses count two units
per entry, the kernel groups hold atomic_k / 2 kernels, the lanes are 16 bits and the pad is
all 16 bits of PAD_VALUE. The op grouping is FP16's accumulation order (model
``conv_img_fp16``): chunks of atomic_c elements outermost, then kernel rows; with
post-extension one op per row group, its lanes the windows of the group's lines in order.
In these configurations the path always carries 16-bit lanes (INT8: the byte in bits 7:0).

Facts from NVIDIA (cited, not copied): the pad value is the low byte of CSC's
D_ZERO_PADDING_VALUE (nv_small NV_NVDLA_CSC_dl pad_value[7:0]; all 16 bits in nvdlav1's
INT16/FP16); CSC's PAD_LEFT is not used in image mode (CDMA inserted the left/right padding;
model ``ConvCore.run``).
"""
from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from hdl.cbuf import CbufGeometry, rd_req_layout, rd_resp_layout
from hdl.cmac.layouts import PREC_FP16, PREC_INT16
from hdl.csc.seq import DIM, stripe_counter
from hdl.lib.gearbox import Fork, Join
from hdl.lib.stream import PipelineStage, SkidBuffer
from hdl.regmap.types import field_enum

__all__ = ["PIXEL", "is_image", "img_params_layout", "img_params", "img_wt_params",
           "img_op_layout", "img_tag_layout", "op_tag_layout", "ImgOpSeq", "ImgReads",
           "ImgAssemble", "ImgData"]

PIXEL = field_enum("CSC", "D_DATAIN_FORMAT", "DATAIN_FORMAT").PIXEL
TAG_FIFO_DEPTH = 4
MAX_EXT = 4                     # D_POST_Y_EXTENSION: 1, 2 or 4 lines


def is_image(regs):
    """1 when CSC's registers select image input (D_DATAIN_FORMAT.DATAIN_FORMAT = PIXEL)."""
    return regs.d_datain_format.datain_format == PIXEL


def img_params_layout(geom: CbufGeometry, atomic_c: int, atomic_k: int,
                      conv16: bool = False) -> data.StructLayout:
    """Image-mode layer parameters (sizes, not minus-one values), stable for a layer:

    ``h`` input lines, ``wo``/``ho`` output size, ``npix`` = wo*ho, ``eps`` entries per slice,
    ``sy`` and ``sye`` = sy*eps, ``pt`` and ``pte`` = pt*eps, ``sxc`` = sx*C (bytes between
    output pixels), ``ng``/``kg_last`` kernel groups, ``ncb``/``nr`` the two set dimensions
    (cb, r), ``ext`` 1 when post-extension is on, ``cw`` bytes per kernel line (WEIGHT_CHANNEL
    _EXT+1), ``cw_last`` channels of the last channel block (no post-extension), ``nl_full`` /
    ``nl_last`` lines of a row group / of the last one (post-extension), ``ext_e`` = ext*eps
    (``sye``, ``pte``, ``ext_e`` modulo 2**(addr_bits+1), as entry addresses: see
    :func:`img_op_layout`),
    ``wt_base`` (= DCAP), ``dat_base``, ``pad``.

    ``conv16`` (configurations computing INT16/FP16 beside INT8, ``cfg.conv16``): ``pad`` is
    all 16 bits of PAD_VALUE and one more field, ``wide`` (1 in an INT16/FP16 image layer);
    the entry addresses ``eps``, ``sye``, ``pte``, ``ext_e`` (and ``dat_base``, ``wt_base``)
    count CBUF units, two per 16-bit entry when ``wide``; ``ng``/``kg_last`` count kernel
    groups of atomic_k / 2 when ``wide``. Everything else counts elements in every
    precision (a 16-bit line is the same element sequence as an INT8 one, atomic_c elements
    per entry: docs/conv16.md "CSC", "CDMA")."""
    fields = {
        "h": DIM, "wo": DIM, "ho": DIM, "npix": 2 * DIM, "eps": 15,
        "sy": 4, "sye": geom.addr_bits + 1, "pt": 5, "pte": geom.addr_bits + 1, "sxc": 7,
        "ng": DIM, "kg_last": range(atomic_k + 1), "ncb": DIM, "nr": 6,
        "ext": 1, "cw": DIM, "cw_last": range(atomic_c + 1),
        "nl_full": range(MAX_EXT + 1), "nl_last": range(MAX_EXT + 1),
        "ext_e": geom.addr_bits + 1,
        "wt_base": geom.addr_bits + 1, "dat_base": geom.addr_bits,
        "pad": signed(16 if conv16 else 8),
    }
    if conv16:
        fields["wide"] = 1
    return data.StructLayout(fields)


def img_params(m: Module, regs, dat_base, geom: CbufGeometry, atomic_c: int, atomic_k: int,
               conv16: bool = False):
    """The image-mode parameters of :func:`img_params_layout` from CSC's typed ``cfg`` view
    ``regs`` and ``dat_base`` (hdl/cbuf/keep.py), registered every cycle (stable one cycle
    after the registers). Returns the Signal.

    ``conv16``: ``wide`` from CSC's D_MISC_CFG.PROC_PRECISION (1 INT16 or 2 FP16); a 16-bit
    entry is two CBUF units (``dat_base`` must then be even, as CDMA writes a 16-bit entry
    E at units 2E, 2E+1), kernel groups hold atomic_k / 2 kernels (docs/conv16.md "CSC")."""
    ac, ak = atomic_c, atomic_k
    q = Signal(img_params_layout(geom, ac, ak, conv16))
    lc, lk = (ac - 1).bit_length(), (ak - 1).bit_length()
    cw, k, r, c = Signal(DIM), Signal(DIM), Signal(6), Signal(DIM)
    ys = Signal(2)
    m.d.comb += [cw.eq(regs.d_weight_size_ext_1.weight_channel_ext + 1),
                 k.eq(regs.d_weight_size_ext_1.weight_kernel + 1),
                 r.eq(regs.d_weight_size_ext_0.weight_height_ext + 1),
                 c.eq(regs.d_datain_size_ext_1.datain_channel_ext + 1),
                 ys.eq(Mux(regs.d_post_y_extension.y_extension == 3, 0,
                           regs.d_post_y_extension.y_extension))]
    eps = regs.d_entry_per_slice.entries + 1
    sy = regs.d_conv_stride_ext.conv_y_stride_ext + 1
    sx = regs.d_conv_stride_ext.conv_x_stride_ext + 1
    pt = regs.d_zero_padding.pad_top
    wo = regs.d_dataout_size_0.dataout_width + 1
    ho = regs.d_dataout_size_0.dataout_height + 1
    ext = Const(1, 3) << ys
    post = ys != 0
    if conv16:
        return _img_params16(m, regs, q, dat_base, geom, ac, ak, cw, k, r, c, ys, eps, sy, sx,
                             pt, wo, ho, ext, post)
    m.d.sync += [
        q.h.eq(regs.d_datain_size_ext_0.datain_height_ext + 1),
        q.wo.eq(wo), q.ho.eq(ho), q.npix.eq(wo * ho), q.eps.eq(eps),
        q.sy.eq(sy), q.sye.eq(sy * eps), q.pt.eq(pt), q.pte.eq(pt * eps),
        q.sxc.eq(sx * c[:3]),
        q.ng.eq((k + ak - 1) >> lk), q.kg_last.eq(((k - 1) & (ak - 1)) + 1),
        q.ncb.eq(Mux(post, (r + ext - 1) >> ys, (cw + ac - 1) >> lc)),
        q.nr.eq(Mux(post, 1, r)),
        q.ext.eq(post), q.cw.eq(cw), q.cw_last.eq(((cw - 1) & (ac - 1)) + 1),
        q.nl_full.eq(ext), q.nl_last.eq(((r - 1) & (ext - 1)) + 1),
        q.ext_e.eq(eps << ys),
        q.wt_base.eq(geom.wt_base(regs.d_bank.data_bank)),
        q.dat_base.eq(dat_base),
        # NVIDIA nv_small RTL NV_NVDLA_CSC_dl: pad_value[7:0], a signed byte
        q.pad.eq(regs.d_zero_padding_value.pad_value[:8]),
    ]
    return q


def _img_params16(m: Module, regs, q, dat_base, geom: CbufGeometry, ac: int, ak: int,
                  cw, k, r, c, ys, eps, sy, sx, pt, wo, ho, ext, post):
    """:func:`img_params`' registers in ``cfg.conv16`` configurations (INT8 as there; INT16 and
    FP16 with entry sizes in units doubled, kernel groups of atomic_k / 2, the 16-bit pad)."""
    lc, lk = (ac - 1).bit_length(), (ak - 1).bit_length()
    ak2 = ak // 2
    prec = regs.d_misc_cfg.proc_precision.as_value()
    wide = Signal(name="img_wide")
    eps_u = Signal(16, name="img_eps_units")
    m.d.comb += [wide.eq((prec == PREC_INT16) | (prec == PREC_FP16)),
                 eps_u.eq(eps << wide)]
    m.d.sync += [
        q.h.eq(regs.d_datain_size_ext_0.datain_height_ext + 1),
        q.wo.eq(wo), q.ho.eq(ho), q.npix.eq(wo * ho), q.eps.eq(eps_u),
        q.sy.eq(sy), q.sye.eq(sy * eps_u), q.pt.eq(pt), q.pte.eq(pt * eps_u),
        q.sxc.eq(sx * c[:3]),
        q.ng.eq(Mux(wide, (k + ak2 - 1) >> (lk - 1), (k + ak - 1) >> lk)),
        q.kg_last.eq(Mux(wide, ((k - 1) & (ak2 - 1)) + 1, ((k - 1) & (ak - 1)) + 1)),
        q.ncb.eq(Mux(post, (r + ext - 1) >> ys, (cw + ac - 1) >> lc)),
        q.nr.eq(Mux(post, 1, r)),
        q.ext.eq(post), q.cw.eq(cw), q.cw_last.eq(((cw - 1) & (ac - 1)) + 1),
        q.nl_full.eq(ext), q.nl_last.eq(((r - 1) & (ext - 1)) + 1),
        q.ext_e.eq(eps_u << ys),
        q.wt_base.eq(geom.wt_base(regs.d_bank.data_bank)),
        q.dat_base.eq(dat_base),
        # NVIDIA nvdlav1 NV_NVDLA_CSC_dl: pad_value[7:0] in INT8 (the low byte of a lane), all
        # 16 bits in INT16/FP16 (model ConvCore.run pad_csc, conv_img_fp16's pad)
        q.pad.eq(regs.d_zero_padding_value.pad_value),
        q.wide.eq(wide),
    ]
    return q


def img_wt_params(q, atomic_c: int) -> dict:
    """What the weight sequencer (:class:`hdl.csc.seq.WtSeq`) needs in image mode, from the
    image parameters ``q``: ``ncb``, ``r`` (= nr), ``s`` = 1, and the channels of a weight set
    ``cw_full`` (non-last cb) / ``cw_last`` (last cb): atomic_c / cw_last without
    post-extension, ext*cw / (R % ext)*cw lines with it. Values (combinational)."""
    # with post-extension cw*ext <= atomic_c, so cw < atomic_c / 2 + 1 fits these bits (3 on
    # nv_small; 5 on nv_small_256, whose S x C = 8 or 12 byte kernel lines lost their high
    # bits to a fixed 3-bit slice: found by random image programs, settled on NVIDIA's RTL)
    cwb = max(3, (atomic_c // 2).bit_length())
    return {
        "ncb": q.ncb, "r": q.nr, "s": 1,
        "cw_full": Mux(q.ext, q.nl_full * q.cw[:cwb], atomic_c),
        "cw_last": Mux(q.ext, q.nl_last * q.cw[:cwb], q.cw_last),
    }


def op_tag_layout(stripe_max: int) -> data.StructLayout:
    """What an op carries besides its data: ``pos``/``first``/``last`` (docs/conv.md op),
    ``set_last`` (last pixel of the weight set) and ``end`` (the layer's last op)."""
    return data.StructLayout({"pos": range(stripe_max), "first": 1, "last": 1,
                              "set_last": 1, "end": 1})


def img_op_layout(atomic_c: int, stripe_max: int, addr_w: int) -> data.StructLayout:
    """One image-mode op: first line ``line`` (signed, may be outside [0, h)), ``ye`` =
    dat_base + line*eps (its slice's entry, unwrapped, modulo ``2**addr_w``, ``addr_w`` = CBUF
    addr_bits + 1: a read inside the input is at entry < 2*DCAP <= ``2**addr_w`` (the input
    fits the data banks), so the truncated sums are exact there; pad lines read no address),
    byte offset ``bo`` in the line,
    ``nl`` lines (1 without post-extension), ``seg`` bytes per line (lanes ``[j*seg,
    (j+1)*seg)`` from line ``line + j``) and the op tag."""
    return data.StructLayout({
        "line": signed(20), "ye": addr_w, "bo": 20,
        "nl": range(MAX_EXT + 1), "seg": range(atomic_c + 1), "tag": op_tag_layout(stripe_max),
    })


def img_tag_layout(geom: CbufGeometry, atomic_c: int, stripe_max: int) -> data.StructLayout:
    """Per CBUF read of the image path: ``pad`` (line outside the input: data unused), byte
    offset ``off`` of the segment in its first entry, ``two`` (the segment spans two entries)
    and ``second`` (this is its second), first lane ``ls`` and length ``seg`` of the segment,
    ``j0`` (first line of the op: lanes outside the segment start at 0), ``op_last`` (the op's
    last read) and the op tag."""
    return data.StructLayout({
        "pad": 1, "off": max(1, geom.entry_shift), "two": 1, "second": 1,
        "ls": range(atomic_c), "seg": range(atomic_c + 1), "j0": 1, "op_last": 1,
        "tag": op_tag_layout(stripe_max),
    })


class ImgOpSeq(wiring.Component):
    """Image-mode op sequencer: one item of :func:`img_op_layout` per atomic operation, one per
    cycle, in the order (g, stripe, cb, r, pixel) of the module docstring. Stripes as the
    direct-convolution sequencer (:func:`hdl.csc.seq.stripe_len`). Addresses kept
    incrementally (adds only).

    Ports: ``params`` In(:func:`img_params_layout`) stable from the cycle before ``start`` to
    the layer's end (:func:`hdl.csc.seq.stripe_counter` registers what it derives from them);
    ``start`` In(1); ``o`` Out(stream of :func:`img_op_layout`); ``busy`` Out(1).

    ``conv16``: the parameters of ``img_params_layout(..., conv16=True)``; the same sequence
    (positions and offsets in elements, ``ye`` in CBUF units from the unit-counted ``eps``
    products).
    """

    def __init__(self, geom: CbufGeometry, atomic_c: int, atomic_k: int, stripe_max: int,
                 conv16: bool = False):
        self.ac, self.stripe_max = atomic_c, stripe_max
        super().__init__({
            "params": In(img_params_layout(geom, atomic_c, atomic_k, conv16)),
            "start": In(1),
            "o": Out(stream.Signature(img_op_layout(atomic_c, stripe_max, geom.addr_bits + 1))),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        p, o, ac = self.params, self.o, self.ac
        run = Signal()
        g, cb = Signal(DIM), Signal(DIM)
        r = Signal(6)
        i = Signal(range(self.stripe_max))
        # current pixel: xo, yo, xbyte = xo*sx*C, yb = yo*sy - pt, ye = dat_base + yb*eps
        xo, yo, xby = Signal(DIM), Signal(DIM), Signal(20)
        aw = len(o.payload.ye)                      # entry addresses modulo 2**aw
        yb, ye = Signal(signed(20)), Signal(aw)
        xo0, yo0, xby0 = Signal(DIM), Signal(DIM), Signal(20)
        yb0, ye0 = Signal(signed(20)), Signal(aw)
        # set offsets: lines (r + cb*ext with post-extension), lines*eps, bytes (cb*atomic_c)
        lo, loe, bof = Signal(8), Signal(aw), Signal(20)
        cbl, cble = Signal(8), Signal(aw)           # the cb part of lo, loe

        nxo, nyo, nxby = Signal(DIM), Signal(DIM), Signal(20)
        nyb, nye = Signal(signed(20)), Signal(aw)
        row_end = xo == p.wo - 1
        m.d.comb += [
            nxo.eq(Mux(row_end, 0, xo + 1)), nyo.eq(Mux(row_end, yo + 1, yo)),
            nxby.eq(Mux(row_end, 0, xby + p.sxc)), nyb.eq(Mux(row_end, yb + p.sy, yb)),
            nye.eq(Mux(row_end, ye + p.sye, ye)),
        ]
        cube_end = row_end & (yo == p.ho - 1)
        i_last, group_start, next_stripe = stripe_counter(m, p.npix, self.stripe_max)
        pix_end = (i == i_last) | cube_end
        r_end, cb_end, g_end = r == p.nr - 1, cb == p.ncb - 1, g == p.ng - 1
        last = cb_end & r_end

        cb_lines = Mux(p.ext, p.nl_full, 0)
        cb_lines_e = Mux(p.ext, p.ext_e, 0)
        cb_bytes = Mux(p.ext, 0, ac)
        m.d.comb += [
            o.valid.eq(run), self.busy.eq(run),
            o.payload.line.eq(yb + lo), o.payload.ye.eq(ye + loe), o.payload.bo.eq(xby + bof),
            o.payload.nl.eq(Mux(p.ext, Mux(cb_end, p.nl_last, p.nl_full), 1)),
            o.payload.seg.eq(Mux(p.ext, p.cw, Mux(cb_end, p.cw_last, ac))),
            o.payload.tag.pos.eq(i), o.payload.tag.first.eq((cb == 0) & (r == 0)),
            o.payload.tag.last.eq(last), o.payload.tag.set_last.eq(pix_end),
            o.payload.tag.end.eq(pix_end & last & cube_end & g_end),
        ]

        def cur_eq(vals):
            return [a.eq(b) for a, b in zip((xo, yo, xby, yb, ye), vals)]

        def stripe_start(vals):
            return cur_eq(vals) + [a.eq(b) for a, b in zip((xo0, yo0, xby0, yb0, ye0), vals)]

        first_pixel = (0, 0, 0, -p.pt, p.dat_base - p.pte)
        set_reset = [r.eq(0), cb.eq(0), lo.eq(0), loe.eq(0), bof.eq(0), cbl.eq(0), cble.eq(0)]
        with m.If(self.start):
            m.d.sync += [run.eq(1), g.eq(0), i.eq(0)] + set_reset + group_start
            m.d.sync += stripe_start(first_pixel)
        with m.Elif(o.valid & o.ready):
            with m.If(~pix_end):
                m.d.sync += [i.eq(i + 1)] + cur_eq((nxo, nyo, nxby, nyb, nye))
            with m.Else():
                m.d.sync += [i.eq(0)] + cur_eq((xo0, yo0, xby0, yb0, ye0))
                with m.If(~r_end):
                    m.d.sync += [r.eq(r + 1), lo.eq(lo + 1), loe.eq(loe + p.eps)]
                with m.Elif(~cb_end):
                    m.d.sync += [r.eq(0), cb.eq(cb + 1), cbl.eq(cbl + cb_lines),
                                 cble.eq(cble + cb_lines_e), lo.eq(cbl + cb_lines),
                                 loe.eq(cble + cb_lines_e), bof.eq(bof + cb_bytes)]
                with m.Else():                      # stripe done
                    m.d.sync += set_reset
                    with m.If(cube_end):
                        m.d.sync += stripe_start(first_pixel) + group_start
                        with m.If(g_end):
                            m.d.sync += run.eq(0)
                        with m.Else():
                            m.d.sync += g.eq(g + 1)
                    with m.Else():
                        m.d.sync += stripe_start((nxo, nyo, nxby, nyb, nye)) + next_stripe
        return m


class ImgReads(wiring.Component):
    """Expand each op into its CBUF reads: for line j < nl of the op, one entry (the segment's
    ``seg`` bytes at byte ``bo`` lie in one entry) or two; a line outside [0, h) is one read of
    entry 0 whose data is unused. Combinational: the op is consumed with its last read, so an
    op of one read passes at one per cycle.

    Ports: ``params`` In(:func:`img_params_layout`), settled a cycle before the first op (``h``
    is registered once more); ``i`` In(stream of :func:`img_op_layout`);
    ``o`` Out(stream of ``{addr, y, tag}``): CBUF entry address, line ``y`` (wait for
    ``dat_slices > y`` unless ``tag.pad``), tag :func:`img_tag_layout`.

    ``conv16``: the parameters of ``img_params_layout(..., conv16=True)``; when ``wide`` an
    entry is two CBUF units, so the entry offset ``(bo >> log2(atomic_c)) + second`` counts
    twice (``addr`` is the entry's first unit, even when ``dat_base`` is).
    """

    def __init__(self, geom: CbufGeometry, atomic_c: int, atomic_k: int, stripe_max: int,
                 conv16: bool = False):
        self.geom, self.ac, self.conv16 = geom, atomic_c, conv16
        self.o_layout = data.StructLayout({"addr": geom.addr_bits, "y": DIM,
                                           "tag": img_tag_layout(geom, atomic_c, stripe_max)})
        super().__init__({
            "params": In(img_params_layout(geom, atomic_c, atomic_k, conv16)),
            "i": In(stream.Signature(img_op_layout(atomic_c, stripe_max, geom.addr_bits + 1))),
            "o": Out(stream.Signature(self.o_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        p, op, o, geom = self.params, self.i.payload, self.o, self.geom
        es, eb = geom.entry_shift, geom.entry_bytes
        j = Signal(range(MAX_EXT))
        # j * seg, the line's first lane, kept as a sum (issue 10: the multiplier behind the op
        # sequencer's combinational segment width was CSC's critical path on ECP5)
        ls = Signal.like(self.o.payload.tag.ls)
        second = Signal()
        line = Signal(signed(21))
        ye = Signal(geom.addr_bits + 1)        # modulo 2**(addr_bits+1): img_op_layout
        addr = Signal(geom.addr_bits + 1)
        ring = Signal(geom.addr_bits)
        pad, two, seg_done, op_done = Signal(), Signal(), Signal(), Signal()
        off = Signal(max(1, es))
        # line j of the op is a pad line when op.line + j < 0 or >= h: op.line against
        # thresholds chosen by j (-j constants, registers h - j following the parameters), not
        # the sum (issue 10: j -> op.line + j -> the bound comparisons -> two -> op_done -> the
        # op skid buffer's registers was CSC's critical path on ECP5)
        h_j = Array(Signal(signed(DIM + 1), name=f"h_minus_{jj}") for jj in range(MAX_EXT))
        m.d.sync += [h_j[jj].eq(p.h - jj) for jj in range(MAX_EXT)]
        below = Array(op.line < -jj for jj in range(MAX_EXT))
        m.d.comb += [
            line.eq(op.line + j),
            ye.eq(op.ye + Mux(j[0], p.eps, 0) + Mux(j[1], p.eps << 1, 0)),
            pad.eq(below[j] | (op.line >= h_j[j])),
            off.eq(op.bo[:es] if es else 0),
            two.eq((off + op.seg > eb) & ~pad),
            addr.eq(ye + (((op.bo >> es) + second) << p.wide) if self.conv16 else
                    ye + (op.bo >> es) + second),
            # inside the input: dat_base + offset < 2*DCAP (hdl/cbuf/keep.py)
            ring.eq(Mux(addr >= p.wt_base, addr - p.wt_base, addr)),
            seg_done.eq(~two | second),
            op_done.eq(seg_done & (j == op.nl - 1)),
        ]
        t = o.payload.tag
        m.d.comb += [
            o.valid.eq(self.i.valid), self.i.ready.eq(o.ready & op_done),
            o.payload.addr.eq(Mux(pad, 0, ring)), o.payload.y.eq(line[:DIM]),
            t.pad.eq(pad), t.off.eq(off), t.two.eq(two), t.second.eq(second),
            t.ls.eq(ls), t.seg.eq(op.seg), t.j0.eq(j == 0), t.op_last.eq(op_done),
            t.tag.eq(op.tag),
        ]
        with m.If(o.valid & o.ready):
            with m.If(op_done):
                m.d.sync += [j.eq(0), ls.eq(0), second.eq(0)]
            with m.Elif(seg_done):
                m.d.sync += [j.eq(j + 1), ls.eq(ls + op.seg), second.eq(0)]
            with m.Else():
                m.d.sync += second.eq(1)
        return m


class ImgAssemble(wiring.Component):
    """Assemble the data atom of each op from its CBUF reads (in order): a segment's elements
    are the entry (or the two entries) shifted down by ``off`` lanes, or the pad value on a
    pad line, placed at lanes ``[ls, ls+seg)``; lanes outside every segment are 0. The op's
    last read outputs ``{data, tag}`` (registered; one read per cycle).

    An entry is ``atomic_c`` lanes of ``lane_bits`` bits: 8 (bytes, int8-only
    configurations) or 16 (``cfg.conv16``: a 16-bit entry's elements, or an INT8 entry's
    bytes in the lanes' bits 7:0, hdl/csc/__init__.py).

    Ports: ``pad`` In(signed(lane_bits)); ``i`` In(stream of ``{data: atomic_c lanes, tag:
    img_tag_layout}``); ``o`` Out(stream of ``{data: atomic_c lanes, tag: op_tag_layout}``).

    Raises:
        NotImplementedError: ``entry_bytes != atomic_c`` or ``lane_bits`` not 8 or 16.
    """

    def __init__(self, geom: CbufGeometry, atomic_c: int, stripe_max: int, lane_bits: int = 8):
        if geom.entry_bytes != atomic_c:
            raise NotImplementedError("ImgAssemble: entry_bytes must equal atomic_c")
        if lane_bits not in (8, 16):
            raise NotImplementedError("ImgAssemble: lanes of 8 or 16 bits")
        self.geom, self.ac, self.lb = geom, atomic_c, lane_bits
        self.i_layout = data.StructLayout({"data": lane_bits * atomic_c,
                                           "tag": img_tag_layout(geom, atomic_c, stripe_max)})
        self.o_layout = data.StructLayout({"data": lane_bits * atomic_c,
                                           "tag": op_tag_layout(stripe_max)})
        super().__init__({
            "pad": In(signed(lane_bits)),
            "i": In(stream.Signature(self.i_layout)),
            "o": Out(stream.Signature(self.o_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        ac, lb = self.ac, self.lb
        lsh = lb.bit_length() - 1             # log2(lane_bits)
        eb8 = lb * ac
        d, t = self.i.payload.data, self.i.payload.tag
        prev = Signal(eb8)
        acc = Signal(lb * ac)
        win = Signal(lb * ac)
        placed = Signal(lb * ac)
        new = Signal(lb * ac)
        m.d.comb += [
            win.eq(Mux(t.pad, self.pad.as_unsigned().replicate(ac),
                       (Cat(Mux(t.two, prev, d), d) >> Cat(Const(0, lsh), t.off))[:lb * ac])),
            placed.eq((win << Cat(Const(0, lsh), t.ls))[:lb * ac]),
        ]
        for lane in range(ac):
            inseg = lane < t.ls + t.seg
            if lane < ac - 1:                  # (ls <= ac-1 always: no constant compare)
                inseg = inseg & (t.ls <= lane)
            sl = slice(lb * lane, lb * lane + lb)
            m.d.comb += new[sl].eq(Mux(inseg, placed[sl], Mux(t.j0, 0, acc[sl])))
        m.d.comb += self.i.ready.eq(~self.o.valid | self.o.ready | ~t.op_last)
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(self.i.valid & self.i.ready):
            with m.If(t.two & ~t.second):
                m.d.sync += prev.eq(d)
            with m.Else():
                m.d.sync += acc.eq(new)
                with m.If(t.op_last):
                    m.d.sync += [self.o.valid.eq(1), self.o.payload.data.eq(new),
                                 self.o.payload.tag.eq(t.tag)]
        return m


class ImgData(wiring.Component):
    """The image-mode data path of CSC: op sequence, CBUF reads (waiting for ``dat_slices``)
    and data atoms, one op per cycle when each op is one read.

    Ports: ``params`` In(:func:`img_params_layout`); ``start`` In(1) (the sequencer starts);
    ``dat_slices`` In(14); ``dat_rd_req`` Out / ``dat_rd_resp`` In (CBUF data read port);
    ``o`` Out(stream of ``{data, tag}``, :class:`ImgAssemble`); ``busy`` Out(1) (ops left to
    sequence).

    ``conv16`` (``cfg.conv16`` configurations; docs/conv16.md "CSC"): the parameters of
    ``img_params_layout(..., conv16=True)``; requests address CBUF units (a 16-bit entry E
    read at unit ``2E``); ``dat_rd_resp`` carries an entry as atomic_c 16-bit lanes
    (``{data: 16 x atomic_c}``: a 16-bit entry's elements, or an INT8 entry's bytes in bits
    7:0 of each lane, the caller's choice by the request's unit); ``o``'s ``data`` is atomic_c
    16-bit lanes (INT8: the byte in bits 7:0), the pad all 16 bits of PAD_VALUE.
    """

    def __init__(self, geom: CbufGeometry, atomic_c: int, atomic_k: int, stripe_max: int,
                 conv16: bool = False):
        self.geom, self.ac, self.ak, self.sm = geom, atomic_c, atomic_k, stripe_max
        self.conv16 = conv16
        self.lb = lb = 16 if conv16 else 8
        self.o_layout = data.StructLayout({"data": lb * atomic_c,
                                           "tag": op_tag_layout(stripe_max)})
        resp_l = (data.StructLayout({"data": lb * atomic_c}) if conv16
                  else rd_resp_layout(geom))
        super().__init__({
            "params": In(img_params_layout(geom, atomic_c, atomic_k, conv16)),
            "start": In(1),
            "dat_slices": In(14),
            "dat_rd_req": Out(stream.Signature(rd_req_layout(geom))),
            "dat_rd_resp": In(stream.Signature(resp_l)),
            "o": Out(stream.Signature(self.o_layout)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        geom, ac, ak, sm = self.geom, self.ac, self.ak, self.sm
        c16 = self.conv16
        seq = m.submodules.seq = ImgOpSeq(geom, ac, ak, sm, c16)
        m.d.comb += [seq.params.eq(self.params), seq.start.eq(self.start),
                     self.busy.eq(seq.busy)]
        reads = m.submodules.reads = ImgReads(geom, ac, ak, sm, c16)
        m.d.comb += reads.params.eq(self.params)
        # the ops through a skid buffer: the op's line (yb + lo, an adder after the sequencer's
        # registers) does not reach ImgReads' line checks and read expansion in the same cycle,
        # nor ImgReads' op_done the sequencer's registers (issue 10: seq -> reads -> stage was
        # CSC's critical path on ECP5 once the stripe counter was registered)
        skid = m.submodules.op_skid = SkidBuffer(seq.o.payload.shape())
        wiring.connect(m, seq.o, skid.i)
        wiring.connect(m, skid.o, reads.i)
        stage = m.submodules.stage = PipelineStage(reads.o_layout)
        wiring.connect(m, reads.o, stage.i)
        s = stage.o
        ok = s.payload.tag.pad | (s.payload.y < self.dat_slices)
        gated = stream.Signature(reads.o_layout).create()
        m.d.comb += [gated.valid.eq(s.valid & ok), s.ready.eq(gated.ready & ok),
                     gated.payload.eq(s.payload)]
        fork = m.submodules.fork = Fork(reads.o_layout, 2)
        wiring.connect(m, gated, fork.i)
        m.d.comb += [self.dat_rd_req.valid.eq(fork.o_0.valid),
                     self.dat_rd_req.payload.addr.eq(fork.o_0.payload.addr),
                     fork.o_0.ready.eq(self.dat_rd_req.ready)]
        tag_l = img_tag_layout(geom, ac, sm)
        tags = m.submodules.tags = SyncFIFO(width=tag_l.size, depth=TAG_FIFO_DEPTH)
        m.d.comb += [tags.w_en.eq(fork.o_1.valid), tags.w_data.eq(fork.o_1.payload.tag),
                     fork.o_1.ready.eq(tags.w_rdy)]
        join = m.submodules.join = Join({"data": self.lb * ac, "tag": tag_l})
        m.d.comb += [join.en.eq(0b11),
                     join.i_data.valid.eq(self.dat_rd_resp.valid),
                     join.i_data.payload.eq(self.dat_rd_resp.payload.data),
                     self.dat_rd_resp.ready.eq(join.i_data.ready),
                     join.i_tag.valid.eq(tags.r_rdy), join.i_tag.payload.eq(tags.r_data),
                     tags.r_en.eq(join.i_tag.ready)]
        asm = m.submodules.assemble = ImgAssemble(geom, ac, sm, self.lb)
        m.d.comb += asm.pad.eq(self.params.pad)
        wiring.connect(m, join.o, asm.i)
        wiring.connect(m, asm.o, wiring.flipped(self.o))
        return m
