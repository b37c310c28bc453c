"""CDMA image input (D_DATAIN_FORMAT = PIXEL): the pixel fetch of the first layer of a network
(v1_ias_unit_description.rst "Convolution with Image Input"; format.rst "Pixel Format";
v1_ias_programming_guide.rst CDMA.PIXEL_*, D_MEAN_*, D_CVT_*; v1_ias_precision.rst
"Convertor").

:class:`PixelFetch` reads the image line by line through one :class:`hdl.dma.ReadDma` master
port (MCIF client ``cdma_dat``) and produces the CBUF entries of each input line (*slice*):

* A line of the image is ``W = DATAIN_WIDTH+1`` pixels of ``bpp`` bytes in one plane
  (packed formats: 4 bytes, T_R8: 1 byte) or in two planes (semi-planar N444 formats: a
  1-byte Y plane at ``D_DAIN_ADDR_*_0`` with ``D_LINE_STRIDE`` and a 2-byte UV plane at
  ``D_DAIN_ADDR_*_1`` with ``D_LINE_UV_STRIDE``). Line y of plane p starts at
  ``addr_p + y * stride_p + xo_p * bpp_p``, ``xo_p = PIXEL_X_OFFSET mod (atom_bytes / bpp_p)``:
  only the pixel offset inside one memory atom is used (fact recorded by the model,
  ``verif/model/conv.py`` ``ConvCore._fetch_pixels``: NVIDIA's NV_NVDLA_CDMA_IMG_ctrl masks the
  offset so), except that plane 0 starts one atom later (``+ atom_bytes``) when
  ``xo_0 < (PAD_LEFT & mask) <= PIXEL_X_OFFSET`` (``mask`` = pixels per atom - 1): NVIDIA's
  count of left-padding atoms compares the whole offset there (observed on its nv_small and
  nv_small_256 RTL through ``--rtl-filelist``). The start may be anywhere inside an atom: whole
  atoms are read and the bytes outside the line dropped.
* Each pixel's bytes (plane 0, then plane 1) are reordered to the channels R/Y, G/U, B/V, A/X
  (:data:`PIXEL_FORMATS`), then, with D_CVT_CFG.CVT_EN, converted:
  ``sat_int8(round_half_away((x - off) * CVT_SCALE >> CVT_TRUNCATE))`` with ``x`` the byte
  zero-extended (sign-extended with PIXEL_SIGN_OVERRIDE = SIGNED_INT) and ``off`` the channel's
  mean (D_MEAN_GLOBAL_*, when D_MEAN_FORMAT = ENABLE) or CVT_OFFSET otherwise, never both (the
  precedence the model records from NVIDIA's cmod and RTL, NV_NVDLA_CDMA_CVT_cell: 18-bit
  difference, 34-bit product, a shift of 34 or more gives 0); without CVT_EN the byte passes
  unchanged (no mean).
* PAD_LEFT pixels before and PAD_RIGHT pixels after each line hold, in every channel, the low
  byte of D_ZERO_PADDING_VALUE, not converted (model: NVIDIA's cvt_out_pad_mask).
* The line's ``(PAD_LEFT + W + PAD_RIGHT) * C`` channel bytes (C = 4, 1 or 3 channels) are
  packed into ``ceil(... / entry_bytes)`` CBUF entries, bytes past the line in the last entry
  are 0; ``slice_last`` marks the last entry of a line.

Fetch order: line after line; for the two-plane formats the pieces of the two planes of a line
are interleaved so that neither plane runs ahead of the other by more than one burst of
pixels (:class:`PixelWalker`), which bounds the per-plane buffers.

Structure: :class:`PixelReadDma` (a ReadDma in :class:`PixelWalker` order) -> per-atom byte
ranges from a second :class:`PixelWalker` walking the same runs (runs are deterministic, so a
replica of the walker labels the atoms: plane, first and last valid byte) -> per-plane atom
FIFO and byte gearbox (:class:`PlaneUnpacker`) -> pixel sequencer (padding, one pixel per
cycle) -> :class:`hdl.lib.stream.SkidBuffer` -> four :class:`hdl.lib.stream.Map` stages
(reorder and converter difference, product, rounding bias, shift and saturation) ->
:class:`EntryPacker`. The walker's run labels reach the plane FIFOs through a SkidBuffer.
Throughput: one pixel per cycle when memory keeps up.

16-bit layers (``cfg.conv16`` configurations only, nv_full's ``int8_int16_fp16``;
docs/conv16.md "CDMA", Image; the model's ``ConvCore._fetch_pixels``, bit-exact with NVIDIA's
nvdlav1 RTL on 15 INT16 and 11 FP16 random image layers): with D_MISC_CFG.PROC_PRECISION INT16
or FP16 the formats of :data:`PIXEL_FORMATS_16` (16-bit containers of 2 or 8 bytes per pixel;
semi-planar planes of 2 and 4 bytes) and :data:`PIXEL_FORMATS_10` (packed 10-bit words) are
decoded besides the int8 ones, and every channel is a 16-bit element:

* component ``x``: the 16-bit word (a 10-bit field ``f << 6``, the 2-bit alpha ``a << 14``)
  or, for int8 formats, the byte; zero-extended, or sign-extended from its top bit with
  PIXEL_SIGN_OVERRIDE, to 17 bits;
* INT16 container (or int8) with CVT_EN: the same converter cell (mean or offset, scale,
  truncate), saturated to int16 (PROC INT16) or to int17, clipped to +-65504 and rounded to
  the nearest fp16, ties to even, never -0 (PROC FP16; :func:`fp16_of_int_prepare`,
  :func:`fp16_of_int_finish`); without CVT_EN the word unchanged;
* FP16 container: the bits unchanged whatever CVT_EN says, a NaN made +0 with
  D_NAN_FLUSH_TO_ZERO.NAN_TO_ZERO;
* pads: all 16 bits of D_ZERO_PADDING_VALUE (not converted, not flushed);
* a line's ``(PAD_LEFT + W + PAD_RIGHT) * C`` elements, 2 bytes each little-endian, fill
  16-bit CBUF entries of ``2 x entry_bytes`` bytes (64 elements per 128-byte entry on nv_full,
  the model's ``entry_bytes(cfg, 2)``), the last one zero-filled; each 16-bit entry leaves as
  two entries of ``entry_bytes`` (CBUF units 2E and 2E+1 from the slice's first unit), so a
  line always has an even number of them (:class:`EntryPacker` ``pairs``).

Two more :class:`hdl.lib.stream.Map` stages (the fp16 rounding in two halves) follow the four
on those configurations, for every layer; one pixel per cycle still, plus one cycle for a line
whose last 16-bit entry ends in its first half (the zero unit). Behaviour for programs the
model refuses is listed in :class:`PixelFetch`.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.axi import DmaReadSignature
from hdl.config import NvdlaConfig
from hdl.dma import ReadDma, read_dma_params
from hdl.dma.cube import CUBE_DIM_BITS, STRIDE_BITS
from hdl.dma.walker import RunWalker, log2
from hdl.lib.fixed import round_bias, round_bias_shape, round_shift, saturate, shift_right_round
from hdl.lib.stream import Map, SkidBuffer
from hdl.regfile import unit_layout
from hdl.regmap import REGMAP
from hdl.regmap.types import field_enum

__all__ = ["PIXEL_FORMATS", "PixelFetch", "PixelWalker", "PixelReadDma", "PlaneUnpacker",
           "EntryPacker", "cvt_diff", "cvt_product", "cvt_finish", "cvt_bias", "cvt_saturate",
           "CVT_PRODUCT_SHAPE", "CVT_BIASED_SHAPE", "pixel_geom_layout", "pixel_info_layout",
           "image_atom_layout", "LINE_BYTES_BITS"]

PixelFormat = field_enum("CDMA", "D_DATAIN_FORMAT", "PIXEL_FORMAT")
SignOverride = field_enum("CDMA", "D_DATAIN_FORMAT", "PIXEL_SIGN_OVERRIDE")
ProcPrecision = field_enum("CDMA", "D_MISC_CFG", "PROC_PRECISION")
NanToZero = field_enum("CDMA", "D_NAN_FLUSH_TO_ZERO", "NAN_TO_ZERO")
MeanFormat = field_enum("CDMA", "D_MEAN_FORMAT", "MEAN_FORMAT")
CvtEn = field_enum("CDMA", "D_CVT_CFG", "CVT_EN")


def cvt_diff(m: Module, x, offset, name: str):
    """CDMA input converter's difference ``x - offset`` (one byte lane; ``x`` the byte as a
    signed value, ``offset`` a signed 16-bit register) as a signed 18-bit signal named
    ``name``: the multiplicand of :func:`cvt_product`, for a pipeline register before the
    multiplier."""
    diff = Signal(signed(18), name=name)
    m.d.comb += diff.eq(x - offset)
    return diff


def cvt_product(m: Module, x, offset, scale, name: str):
    """CDMA input converter, first half, one byte lane: ``(x - offset) * scale`` (``x`` the
    byte as a signed value, ``offset`` and ``scale`` signed 16-bit registers). Returns the
    34-bit signed product (NVIDIA's NV_NVDLA_CDMA_CVT_cell as the model records it: 18-bit
    difference, 34-bit product; v1_ias_precision.rst "Convertor")."""
    diff = Signal(signed(18), name=name)
    m.d.comb += diff.eq(x - offset)
    return diff * scale


#: the converter's product (:func:`cvt_product`) and that product plus its rounding bias
#: (:func:`cvt_bias`, the register between the two halves of :func:`cvt_finish`)
CVT_PRODUCT_SHAPE = signed(34)
CVT_BIASED_SHAPE = round_bias_shape(CVT_PRODUCT_SHAPE)


def cvt_bias(prod, truncate):
    """:func:`cvt_finish` split for a pipeline register, first half: the 34-bit ``prod`` plus
    its rounding bias for a shift of ``truncate`` (:func:`hdl.lib.fixed.round_bias`; a
    :data:`CVT_BIASED_SHAPE` value). Finish with :func:`cvt_saturate` in the next stage (issue
    10: the bias adder, the shifter and the saturation in one cycle were CDMA's critical path,
    12.5 ns on ECP5)."""
    return round_bias(prod, truncate)


def cvt_saturate(biased, truncate):
    """:func:`cvt_finish`, second half: ``biased`` (:func:`cvt_bias`) shifted right by
    ``truncate`` (a shift of 34 or more gives 0), saturated to int8. Returns a signed 8-bit
    value, equal to ``cvt_finish(prod, truncate)``."""
    return saturate(round_shift(biased, truncate, CVT_PRODUCT_SHAPE), 8)


def cvt_finish(prod, truncate):
    """CDMA input converter, second half: the 34-bit ``prod`` shifted right by ``truncate``
    (6 bits) with rounding half away from zero, saturated to int8 (a shift of 34 or more
    gives 0). Returns a signed 8-bit value."""
    return saturate(shift_right_round(prod, truncate), 8)

#: The int8 pixel formats (format.rst tab_pixel_formats): name -> (bytes per pixel of each
#: plane, channel order). ``order[i]`` is the byte of the pixel (plane-0 bytes, then plane-1
#: bytes) that becomes channel i (R/Y, G/U, B/V, A/X; means MEAN_RY, MEAN_GU, MEAN_BV,
#: MEAN_AX). Facts recorded by the model (verif/model/conv.py PIXEL_FORMATS_INT8, from NVIDIA's
#: cmod "Store to CBUF in the order of RGBA" and nv_small RTL NV_NVDLA_CDMA_IMG_ctrl
#: pixel_order, confirmed by NVIDIA's img_* traces): the YUV formats are byte orders only; the
#: X byte of X8 formats is channel 3 exactly like alpha. Other PIXEL_FORMAT values (10/12/16-bit
#: formats, which int8 hardware does not run) are read as T_A8B8G8R8.
PIXEL_FORMATS = {
    "T_R8": ((1,), (0,)),
    "T_A8B8G8R8": ((4,), (0, 1, 2, 3)),
    "T_X8B8G8R8": ((4,), (0, 1, 2, 3)),
    "T_A8R8G8B8": ((4,), (2, 1, 0, 3)),
    "T_X8R8G8B8": ((4,), (2, 1, 0, 3)),
    "T_A8Y8U8V8": ((4,), (2, 1, 0, 3)),
    "T_B8G8R8A8": ((4,), (1, 2, 3, 0)),
    "T_B8G8R8X8": ((4,), (1, 2, 3, 0)),
    "T_V8U8Y8A8": ((4,), (1, 2, 3, 0)),
    "T_R8G8B8A8": ((4,), (3, 2, 1, 0)),
    "T_R8G8B8X8": ((4,), (3, 2, 1, 0)),
    "T_Y8___U8V8_N444": ((1, 2), (0, 2, 1)),
    "T_Y8___V8U8_N444": ((1, 2), (0, 1, 2)),
}
_DEFAULT_FORMAT = "T_A8B8G8R8"

#: nv_full's 16-bit-container pixel formats (format.rst tab_pixel_formats; the facts the model
#: records from NVIDIA's nvdlav1 RTL NV_NVDLA_CDMA_IMG_ctrl/_IMG_sg, verif/model/conv.py
#: PIXEL_FORMATS_16): name -> (bytes per pixel of each plane, container (1 INT16, 2 FP16),
#: channel order). ``order[i]`` is the 16-bit little-endian element of the pixel (plane-0
#: elements, then plane-1 elements) that becomes channel i; the whole word is the component
#: (10/12-bit formats are not shifted). Built on ``cfg.conv16`` configurations only.
PIXEL_FORMATS_16 = {
    "T_R10": ((2,), 1, (0,)), "T_R12": ((2,), 1, (0,)), "T_R16": ((2,), 1, (0,)),
    "T_R16_I": ((2,), 1, (0,)), "T_R16_F": ((2,), 2, (0,)),
    "T_A16B16G16R16": ((8,), 1, (0, 1, 2, 3)), "T_X16B16G16R16": ((8,), 1, (0, 1, 2, 3)),
    "T_A16B16G16R16_F": ((8,), 2, (0, 1, 2, 3)),
    "T_A16Y16U16V16": ((8,), 1, (2, 1, 0, 3)), "T_V16U16Y16A16": ((8,), 1, (1, 2, 3, 0)),
    "T_A16Y16U16V16_F": ((8,), 2, (2, 1, 0, 3)),
    "T_Y10___U10V10_N444": ((2, 4), 1, (0, 2, 1)), "T_Y10___V10U10_N444": ((2, 4), 1, (0, 1, 2)),
    "T_Y12___U12V12_N444": ((2, 4), 1, (0, 2, 1)), "T_Y12___V12U12_N444": ((2, 4), 1, (0, 1, 2)),
    "T_Y16___U16V16_N444": ((2, 4), 1, (0, 2, 1)), "T_Y16___V16U16_N444": ((2, 4), 1, (0, 1, 2)),
}
#: nv_full's packed 10-bit formats (one 32-bit little-endian word per pixel, INT16 container;
#: verif/model/conv.py PIXEL_FORMATS_10, from NVIDIA's nvdlav1 NV_NVDLA_CDMA_IMG_pack): name ->
#: (``a2low``, channel order). The word's three 10-bit fields f and its 2-bit alpha a become
#: 16-bit components ``f << 6`` and ``a << 14``: elements e0, e1, e2 are the fields from the
#: word's bit 0, 10, 20 and e3 the alpha at bit 30 (``a2low`` 0), or the fields from bit 2, 12,
#: 22 and the alpha at bit 0 (``a2low`` 1); ``order[i]`` is the element of channel i.
PIXEL_FORMATS_10 = {
    "T_A2B10G10R10": (0, (0, 1, 2, 3)),
    "T_A2R10G10B10": (0, (2, 1, 0, 3)),
    "T_A2Y10U10V10": (0, (2, 1, 0, 3)),
    "T_B10G10R10A2": (1, (0, 1, 2, 3)),
    "T_V10U10Y10A2": (1, (0, 1, 2, 3)),
    "T_R10G10B10A2": (1, (2, 1, 0, 3)),
}

#: bits of a plane line's byte count (W * 4 <= 8192 * 4)
LINE_BYTES_BITS = 16
#: the same with 16-bit pixel formats (W * 8 <= 8192 * 8)
LINE_BYTES_BITS_16 = 17
#: most bytes of a pixel (all planes) and most channels
PIXEL_BYTES = 4
#: most bytes of a pixel with 16-bit pixel formats (4 channels of 2 bytes)
PIXEL_BYTES_16 = 8


def pixel_geom_layout(addr_width: int, line_bytes_bits: int = LINE_BYTES_BITS) -> data.StructLayout:
    """The image geometry :class:`PixelWalker` walks (sampled at ``start``).

    Fields: ``base`` (2 x ``addr_width`` bits: byte address of the first byte of line 0 of
    plane 0 / 1, x offset included, any alignment), ``stride`` (2 x 32 bits: line strides,
    bytes), ``bytes`` (2 x ``line_bytes_bits``, :data:`LINE_BYTES_BITS` or, with 16-bit pixel
    formats, :data:`LINE_BYTES_BITS_16`: bytes of one line of each plane, W x bytes per pixel,
    >= 1), ``pix_log2`` (2 x 2 bits: log2 of each plane's bytes per pixel, 0..3, for the
    balance between planes), ``planes2`` (1: two planes, else plane 1 is ignored), ``height``
    (lines minus one, 13 bits).
    """
    return data.StructLayout({
        "base": data.ArrayLayout(unsigned(addr_width), 2),
        "stride": data.ArrayLayout(unsigned(STRIDE_BITS), 2),
        "bytes": data.ArrayLayout(unsigned(line_bytes_bits), 2),
        "pix_log2": data.ArrayLayout(unsigned(2), 2),
        "planes2": 1,
        "height": unsigned(CUBE_DIM_BITS),
    })


def pixel_info_layout(atom_bytes: int) -> data.StructLayout:
    """What :class:`PixelWalker` tells about its current run (``info``, valid with ``runs``):
    ``plane`` (0/1), ``skip`` (bytes to drop at the start of the run's first atom: the line's
    start inside its atom on the first run of a plane line, else 0), ``tail`` (valid bytes of
    the run's last atom, 1..atom_bytes: less than a whole atom only on the last run of a plane
    line)."""
    return data.StructLayout({"plane": 1, "skip": unsigned(log2(atom_bytes)),
                              "tail": unsigned(log2(atom_bytes) + 1)})


def image_atom_layout(entry_bytes: int) -> data.StructLayout:
    """A CBUF entry of image data: ``data`` (entry_bytes*8 bits, byte i = channel byte i of the
    entry) and ``slice_last`` (the last entry of an input line)."""
    return data.StructLayout({"data": unsigned(entry_bytes * 8), "slice_last": 1})


class PixelWalker(RunWalker):
    """Runs of an image in CDMA's image fetch order (a :class:`hdl.dma.walker.RunWalker`).

    Parameters as RunWalker. The ``cube`` port is not used (tie it to 0); the geometry is the
    extra input signal ``geom`` (:func:`pixel_geom_layout`, sampled at ``start``), and the
    extra output signal ``info`` (:func:`pixel_info_layout`) describes the run on ``runs``
    (valid with it, stable while it waits).

    Order: line y = 0..height; in each line the atoms covering the line's bytes of each plane
    (from the atom holding its first byte to the atom holding its last), as pieces that stay in
    one burst window (one run each, so at most ``max_burst`` beats). With two planes the next
    piece is plane 1's when plane 1 has delivered fewer whole pixels of the line than plane 0
    (or plane 0 is done), else plane 0's: no plane gets ahead by more than one piece. Runs do
    not continue across lines. One run per cycle, plus one setup cycle per line; the first run
    two cycles after ``start``. Addresses wrap modulo ``2**addr_width``.
    """

    #: bits of a plane line's byte count (``geom.bytes``)
    line_bytes_bits = LINE_BYTES_BITS
    #: most bytes of one plane's pixel (an atom must hold whole pixels)
    max_pixel_bytes = PIXEL_BYTES

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.geom = Signal(pixel_geom_layout(self.addr_width, self.line_bytes_bits), name="geom")
        self.info = Signal(pixel_info_layout(self.atom_bytes), name="info")

    def elaborate(self, platform):
        m = Module()
        A = self.atom_bytes
        a_sh = log2(A)
        win_sh = log2(self.max_burst * self.beat_bytes)
        aw = self.addr_width
        g = Signal.like(self.geom, name="g")    # latched geometry
        walking = Signal()
        setup = Signal()                        # first cycle of a line: atom addresses
        y = Signal(CUBE_DIM_BITS)
        line = [Signal(aw, name=f"line{p}") for p in (0, 1)]     # line start (byte address)
        cur = [Signal(aw, name=f"cur{p}") for p in (0, 1)]       # next atom (aligned)
        first = [Signal(name=f"first{p}") for p in (0, 1)]
        # Per plane, registers updated with every run of the plane (issue 10: derived from one
        # covered-bytes count they were CDMA's critical path): ``natoms`` atoms of the plane line
        # not yet issued (the first atom counted whole), ``done`` none left, ``tail`` valid
        # bytes of the line's last atom (1..A, fixed for the line: the atoms issued are whole).
        # A run of ``count`` atoms covers count * A >> pix_log2 pixels (an atom holds whole
        # pixels: pix_log2 <= log2(A)). ``cov_diff``: plane 1's whole pixels covered minus
        # plane 0's (each negative at the line start: the first atom's part before the line),
        # kept as one register so that the plane choice is its sign (issue 10: comparing two
        # counts started CDMA's critical path). Each plane's next run (``seg_end``, ``count``)
        # comes from its own registers, the plane choice only selects between the two (issue
        # 10: choice -> count -> subtract-compare was CDMA's critical path, 13.4 ns on ECP5).
        lbb = self.line_bytes_bits
        cov_diff = Signal(signed(lbb + 3))
        natoms = [Signal(lbb + 1, name=f"natoms{p}") for p in (0, 1)]
        tail = [Signal(range(A + 1), name=f"tail{p}") for p in (0, 1)]
        done = [Signal(name=f"done{p}") for p in (0, 1)]
        fin = [Signal(name=f"fin{p}") for p in (0, 1)]
        avail = [Signal(range(self.max_atoms + 1), name=f"avail{p}") for p in (0, 1)]
        p_end = [Signal(name=f"seg_end{p}") for p in (0, 1)]          # plane p's run ends its line
        p_count = [Signal(range(self.max_atoms + 1), name=f"count{p}") for p in (0, 1)]
        assert A >= self.max_pixel_bytes, \
            f"an atom must hold a whole pixel of up to {self.max_pixel_bytes} bytes"
        pix_sh = [Signal(range(a_sh + 1), name=f"pix_sh{p}") for p in (0, 1)]   # log2(A / pixel)
        m.d.comb += [pix_sh[p].eq(a_sh - g.pix_log2[p]) for p in (0, 1)]
        for p in (0, 1):
            if win_sh > a_sh:
                m.d.comb += avail[p].eq(self.max_atoms - cur[p][a_sh:win_sh])
            else:
                m.d.comb += avail[p].eq(1)
            m.d.comb += [p_end[p].eq(natoms[p] <= avail[p]),
                         p_count[p].eq(Mux(p_end[p], natoms[p], avail[p]))]
        m.d.comb += [fin[0].eq(done[0]), fin[1].eq(done[1] | ~g.planes2)]
        sel = Signal()                          # plane of the next piece
        m.d.comb += sel.eq(~fin[1] & (fin[0] | cov_diff[-1]))
        s_cur = Mux(sel, cur[1], cur[0])
        s_first = Mux(sel, first[1], first[0])
        s_line = Mux(sel, line[1], line[0])
        count = Signal(range(self.max_atoms + 1))
        seg_end = Signal()                      # the piece ends the plane's line
        line_end = Signal()
        y_last = Signal()                       # y == height, registered at the line's setup
        m.d.comb += [
            seg_end.eq(Mux(sel, p_end[1], p_end[0])),
            count.eq(Mux(sel, p_count[1], p_count[0])),
            line_end.eq(seg_end & Mux(sel, fin[0], fin[1])),
            self.runs.valid.eq(walking & ~setup),
            self.runs.payload.addr.eq(s_cur),
            self.runs.payload.count.eq(count),
            self.runs.payload.last.eq(line_end & y_last),
            self.info.plane.eq(sel),
            self.info.skip.eq(Mux(s_first, s_line[:a_sh], 0)),
            self.info.tail.eq(Mux(seg_end, Mux(sel, tail[1], tail[0]), A)),
            self.busy.eq(walking),
        ]
        with m.If(self.runs.valid & self.runs.ready):
            for p in (0, 1):
                with m.If(sel == p):
                    # done: natoms <= count, i.e. this run ends the line
                    m.d.sync += [cur[p].eq(cur[p] + (p_count[p] << a_sh)),
                                 natoms[p].eq(natoms[p] - p_count[p]),
                                 done[p].eq(p_end[p]), first[p].eq(0)]
            m.d.sync += cov_diff.eq(Mux(sel, cov_diff + (p_count[1] << pix_sh[1]),
                                        cov_diff - (p_count[0] << pix_sh[0])))
            with m.If(line_end):
                with m.If(y_last):
                    m.d.sync += walking.eq(0)
                with m.Else():
                    m.d.sync += [y.eq(y + 1), setup.eq(1)]
                    m.d.sync += [line[p].eq(line[p] + g.stride[p]) for p in (0, 1)]
        with m.If(setup):
            m.d.sync += [setup.eq(0), y_last.eq(y == g.height)]
            cov0 = []
            for p in (0, 1):
                lo = line[p][:a_sh]
                nbytes = g.bytes[p] + lo        # from the first atom's start to the line's end
                m.d.sync += [cur[p].eq(Cat(Const(0, a_sh), line[p][a_sh:])),
                             done[p].eq(0),
                             natoms[p].eq((nbytes + (A - 1)) >> a_sh),
                             tail[p].eq((nbytes - 1)[:a_sh] + 1),
                             first[p].eq(1)]
                cov0.append((-lo).as_signed() >> g.pix_log2[p])
            m.d.sync += cov_diff.eq(cov0[1] - cov0[0])
        with m.If(self.start & ~walking):
            m.d.sync += [walking.eq(1), setup.eq(1), y.eq(0), g.eq(self.geom)]
            m.d.sync += [line[p].eq(self.geom.base[p]) for p in (0, 1)]
        return m


class PixelWalker16(PixelWalker):
    """:class:`PixelWalker` for the 16-bit pixel formats too (``cfg.conv16`` configurations):
    pixels of up to 8 bytes in a plane, lines of up to 8192 x 8 bytes (``geom.bytes`` of
    :data:`LINE_BYTES_BITS_16`)."""

    line_bytes_bits = LINE_BYTES_BITS_16
    max_pixel_bytes = PIXEL_BYTES_16


class PixelReadDma(ReadDma):
    """CDMA_DAT image fetch: :class:`hdl.dma.ReadDma` in :class:`PixelWalker` order.
    Parameters and ports as ReadDma (``cube`` unused: tie to 0) plus ``geom``
    In(:func:`pixel_geom_layout`), sampled at ``start``."""

    walker_class = PixelWalker

    def dma_members(self):
        return {**super().dma_members(),
                "geom": In(pixel_geom_layout(self.addr_width, self.walker_class.line_bytes_bits))}

    def add_walker(self, m: Module):
        walker, *rest = super().add_walker(m)
        m.d.comb += walker.geom.eq(self.geom)
        return (walker, *rest)


class PixelReadDma16(PixelReadDma):
    """:class:`PixelReadDma` walking with :class:`PixelWalker16` (16-bit pixel formats)."""

    walker_class = PixelWalker16


class PlaneUnpacker(wiring.Component):
    """The bytes of one plane's lines out of its atoms: a byte gearbox.

    Parameters: ``atom_bytes`` (A), ``out_bytes`` (bytes on ``o``, the most bytes per pixel of
    a plane).

    Ports:
      ``i`` In(stream of {data: A*8, lo: log2(A) bits, hi: log2(A)+1 bits}): an atom of which
      bytes ``[lo, hi)`` (0 <= lo < hi <= A) belong to the plane's byte stream;
      ``pix_log2`` In(2): log2 of the bytes taken per transfer of ``o`` (b = 1, 2, 4 or 8,
      b <= ``out_bytes`` and b <= A), stable while items flow;
      ``o`` Out(stream of out_bytes*8 bits): the next b bytes of the stream (byte 0 first) in
      the low bytes, the bytes above 0.

    Buffer: 2A bytes; an atom is taken when at most A bytes are buffered, so b bytes leave
    every cycle (at least one atom per A/b cycles enters). Bytes of an atom are never split
    across two outputs incorrectly: a pixel may span two atoms.
    """

    def __init__(self, atom_bytes: int, out_bytes: int = PIXEL_BYTES):
        self.atom_bytes, self.out_bytes = atom_bytes, out_bytes
        a_sh = log2(atom_bytes)
        self.in_layout = data.StructLayout({"data": unsigned(atom_bytes * 8),
                                            "lo": unsigned(a_sh), "hi": unsigned(a_sh + 1)})
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "pix_log2": In(2),
            "o": Out(stream.Signature(unsigned(out_bytes * 8))),
        })

    def elaborate(self, platform):
        m = Module()
        A = self.atom_bytes
        cap = 2 * A
        buf = Signal(cap * 8)
        cnt = Signal(range(cap + 1))
        b = Signal(range(self.out_bytes + 1))
        m.d.comb += b.eq(1 << self.pix_log2)
        take = Signal()
        push = Signal()
        m.d.comb += [
            self.o.valid.eq(cnt >= b),
            self.o.payload.eq(Cat(*[Mux(b > j, buf[8 * j:8 * j + 8], 0)
                                    for j in range(self.out_bytes)])),
            take.eq(self.o.valid & self.o.ready),
            self.i.ready.eq(cnt <= A),
            push.eq(self.i.valid & self.i.ready),
        ]
        cnt_after = Signal(range(cap + 1))
        buf_after = Signal(cap * 8)
        m.d.comb += [cnt_after.eq(cnt - Mux(take, b, 0)),
                     buf_after.eq(Mux(take, buf >> (b << 3), buf))]
        ip = self.i.payload
        hi_mask = Signal(A * 8)
        m.d.comb += hi_mask.eq((Const(1, A * 8 + 1) << (ip.hi << 3)) - 1)   # 2**(8*hi) - 1
        valid_bytes = Signal(A * 8)
        m.d.comb += valid_bytes.eq((ip.data & hi_mask) >> (ip.lo << 3))
        new = Signal(cap * 8)
        m.d.comb += new.eq(valid_bytes << (cnt_after << 3))
        with m.If(take | push):
            m.d.sync += [buf.eq(Mux(push, buf_after | new, buf_after)),
                         cnt.eq(cnt_after + Mux(push, ip.hi - ip.lo, 0))]
        return m


class EntryPacker(wiring.Component):
    """Pixels of ``channels`` bytes packed into CBUF entries, line by line.

    Parameters: ``entry_bytes`` (E), ``pixel_bytes`` (P: bytes of the input pixel word, the
    most channels).

    Ports:
      ``i`` In(stream of {data: P*8, last: 1}): a pixel (channel i in byte i; only the low
      ``channels`` bytes are used) and whether it ends its line;
      ``channels`` In(range(P+1)): bytes per pixel C (1..P), stable while items flow;
      ``o`` Out(stream of :func:`image_atom_layout` (E)): the line's bytes, E per entry, the
      last entry of a line zero-filled and marked ``slice_last``.

    Throughput: one pixel per cycle (an entry leaves in the cycle a pixel enters); the last
    entry of a line and the line's next pixel share a cycle.

    ``pairs`` (16-bit configurations): an extra port ``pair`` In(1), stable while items flow.
    With ``pair`` set a line always takes an even number of entries (the 16-bit CBUF entry of
    2E bytes is two entries, docs/conv16.md "CBUF"): when its bytes end in the first entry of a
    pair, one more all-zero entry follows, carrying ``slice_last`` (one cycle in which no
    pixel enters).
    """

    def __init__(self, entry_bytes: int, pixel_bytes: int = PIXEL_BYTES, pairs: bool = False):
        if pixel_bytes > entry_bytes:
            raise ValueError(f"pixel of {pixel_bytes} B wider than the entry ({entry_bytes} B)")
        self.entry_bytes, self.pixel_bytes, self.pairs = entry_bytes, pixel_bytes, pairs
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({"data": unsigned(pixel_bytes * 8),
                                                        "last": 1}))),
            "channels": In(range(pixel_bytes + 1)),
            **({"pair": In(1)} if pairs else {}),
            "o": Out(stream.Signature(image_atom_layout(entry_bytes))),
        })

    def elaborate(self, platform):
        m = Module()
        E, P = self.entry_bytes, self.pixel_bytes
        cap = E + P
        buf = Signal(cap * 8)
        cnt = Signal(range(cap + 1))
        flush = Signal()                        # the line's last pixel is in the buffer
        pop = Signal()
        push = Signal()
        end = Signal()
        if not self.pairs:
            m.d.comb += [
                end.eq(flush & (cnt <= E)),
                self.o.valid.eq((cnt >= E) | (flush & (cnt != 0))),
            ]
        else:
            second = Signal()                   # the next entry is the second of its pair
            fill = Signal()                     # a zero entry still owed to the line's pair
            m.d.comb += [
                fill.eq(self.pair & second),
                end.eq(flush & (cnt <= E) & (~self.pair | second)),
                self.o.valid.eq((cnt >= E) | (flush & ((cnt != 0) | fill))),
            ]
            with m.If(pop):
                m.d.sync += second.eq(~second & ~end)
        m.d.comb += [
            self.o.payload.data.eq(buf[:E * 8]),
            self.o.payload.slice_last.eq(end),
            pop.eq(self.o.valid & self.o.ready),
            self.i.ready.eq((~flush & ((cnt < E) | pop)) | (pop & end)),
            push.eq(self.i.valid & self.i.ready),
        ]
        cnt_after = Signal(range(cap + 1))
        buf_after = Signal(cap * 8)
        if not self.pairs:
            m.d.comb += [cnt_after.eq(Mux(pop, Mux(end, 0, cnt - E), cnt)),
                         buf_after.eq(Mux(pop, Mux(end, 0, buf >> (E * 8)), buf))]
        else:                                   # the first of a pair may end a line's bytes
            short = cnt <= E
            m.d.comb += [cnt_after.eq(Mux(pop, Mux(short, 0, cnt - E), cnt)),
                         buf_after.eq(Mux(pop, Mux(short, 0, buf >> (E * 8)), buf))]
        mask = Signal(P * 8)
        m.d.comb += mask.eq((Const(1, P * 8 + 1) << (self.channels << 3)) - 1)
        new = Signal(cap * 8)
        m.d.comb += new.eq((self.i.payload.data & mask) << (cnt_after << 3))
        with m.If(push | pop):
            m.d.sync += [buf.eq(Mux(push, buf_after | new, buf_after)),
                         cnt.eq(cnt_after + Mux(push, self.channels, 0))]
        with m.If(push & self.i.payload.last):
            m.d.sync += flush.eq(1)
        with m.Elif(pop & end):
            m.d.sync += flush.eq(0)
        return m


def _format_table():
    """[(PixelFormat member, planes2, (bpp0, bpp1), channels, order)] of :data:`PIXEL_FORMATS`."""
    rows = []
    for name, (bpp, order) in PIXEL_FORMATS.items():
        rows.append((PixelFormat[name], len(bpp) == 2, (bpp + (1,))[:2], len(order), order))
    return rows


def _format_table16():
    """[(PixelFormat member, planes2, (bpp0, bpp1), channels, order, container, packed10,
    a2low)] of :data:`PIXEL_FORMATS_16` and :data:`PIXEL_FORMATS_10` (container 1 INT16, 2
    FP16; ``packed10``: a :data:`PIXEL_FORMATS_10` word)."""
    rows = []
    for name, (bpp, cont, order) in PIXEL_FORMATS_16.items():
        rows.append((PixelFormat[name], len(bpp) == 2, (bpp + (1,))[:2], len(order), order,
                     cont, 0, 0))
    for name, (a2low, order) in PIXEL_FORMATS_10.items():
        rows.append((PixelFormat[name], False, (4, 1), len(order), order, 1, 1, a2low))
    return rows


#: :func:`fp16_of_int_prepare`'s result (the register between the two halves)
FP16_PREP_LAYOUT = data.StructLayout({"sign": 1, "mag": 16, "lz": range(17)})


def fp16_of_int_prepare(m: Module, v, name: str):
    """The int17 -> fp16 rounding of CDMA's converter in FP16 image layers (the model's
    ``ConvCore._fetch_pixels``: ``clip(v, -65504, 65504)`` to the nearest fp16, ties to even,
    never -0; from NVIDIA's nvdlav1 NV_NVDLA_CDMA_cvt), first half: ``v`` (signed(17)) as its
    sign, its magnitude clipped to 65504 (16 bits) and the magnitude's leading zeros in 16 bits
    (16 for 0). Returns a :data:`FP16_PREP_LAYOUT` value (combinational; signals named
    ``name``...)."""
    v = Value.cast(v)
    neg = v[-1]
    mag = Signal(17, name=f"{name}_abs")
    m.d.comb += mag.eq(Mux(neg, -v, v))
    clip = Signal(16, name=f"{name}_mag")
    m.d.comb += clip.eq(Mux(mag > 65504, 65504, mag))
    lz = Signal(range(17), name=f"{name}_lz")
    m.d.comb += lz.eq(16)
    for b in range(16):                 # the highest set bit wins (the last assignment)
        with m.If(clip[b]):
            m.d.comb += lz.eq(15 - b)
    return Cat(neg, clip, lz)


def fp16_of_int_finish(m: Module, p, name: str):
    """Second half of :func:`fp16_of_int_prepare`: ``p`` (a :data:`FP16_PREP_LAYOUT` view) to
    the fp16 pattern (16 bits): the magnitude normalised, rounded to 11 significant bits to
    nearest with ties to even, exponent ``30 - lz`` (+1 when the rounding carries); +0 for a
    zero magnitude. Magnitudes up to 65504 never round past the largest finite value."""
    norm = Signal(16, name=f"{name}_norm")          # the leading one at bit 15
    m.d.comb += norm.eq(p.mag << p.lz)
    q = Signal(12, name=f"{name}_q")
    m.d.comb += q.eq(norm[5:] + (norm[4] & (norm[:4].any() | norm[5])))
    exp = Signal(5, name=f"{name}_exp")
    m.d.comb += exp.eq(30 - p.lz + q[11])
    res = Cat(Mux(q[11], q[1:11], q[:10]), exp, p.sign)
    return Mux(p.mag == 0, 0, res)


class PixelFetch(wiring.Component):
    """CDMA's image fetch (module docstring): the CBUF entries of an image layer's lines.

    Parameter: ``cfg`` (:class:`hdl.config.NvdlaConfig`): atom bytes (memory reads), CBUF entry
    bytes (``cfg.cbuf_bank_width``), memory interface (:func:`hdl.dma.read_dma_params`).

    Ports:
      ``regs`` In(unit_layout(CDMA, "cfg")): CDMA's registers, stable while ``busy``; used:
      D_DATAIN_FORMAT (PIXEL_FORMAT, PIXEL_SIGN_OVERRIDE), D_DATAIN_SIZE_0 (width, height),
      D_PIXEL_OFFSET.PIXEL_X_OFFSET, D_DAIN_ADDR_*_0/1, D_LINE_STRIDE, D_LINE_UV_STRIDE,
      D_MEAN_FORMAT, D_MEAN_GLOBAL_*, D_CVT_*, D_ZERO_PADDING (PAD_LEFT/RIGHT),
      D_ZERO_PADDING_VALUE;
      ``start`` In(1): one-cycle pulse, begins the fetch (ignored while ``busy``);
      ``busy`` Out(1): from the cycle after ``start`` until the last entry has been taken;
      ``dma`` Out(DmaReadSignature(mem_address_width, primary_memif_width)): the ``cdma_dat``
      MCIF read client;
      ``atoms`` Out(stream of :func:`image_atom_layout` (cbuf_bank_width)): the CBUF entries
      of lines 0..DATAIN_HEIGHT in order, ``ceil((PAD_LEFT + W + PAD_RIGHT) * C /
      entry_bytes)`` per line (C = 4, 1 or 3 channels by the format), ``slice_last`` on each
      line's last entry.

    PIXEL_Y_OFFSET and PIXEL_MAPPING must be 0 (pitch linear; programming guide Limitation:
    Image); a PIXEL_FORMAT outside :data:`PIXEL_FORMATS` reads as T_A8B8G8R8.

    On ``cfg.conv16`` configurations (module docstring, "16-bit layers"): D_MISC_CFG
    PROC_PRECISION and D_NAN_FLUSH_TO_ZERO are read too; IN_PRECISION is not (the container
    comes from PIXEL_FORMAT; the model refuses an IN_PRECISION that differs from it). In a
    16-bit layer ``atoms`` carries ``2 x ceil((PAD_LEFT + W + PAD_RIGHT) * C / entry_bytes)``
    entries per line. Programs the model refuses (``ConvCore._check_image_precision``) get
    this behaviour, chosen here, not compared with NVIDIA's RTL:

    * an INT8 layer with a 16-bit or 10-bit format (NVIDIA's converter "shrink" path, not
      modelled: docs/conv16.md open question 5) reads it as T_A8B8G8R8, as int8-only
      hardware does, so INT8 layers are exactly as on other configurations;
    * an int8 format in a 16-bit layer without CVT_EN: each byte zero-extended (sign-extended
      with PIXEL_SIGN_OVERRIDE) to 16 bits;
    * an INT16 container in an FP16 layer without CVT_EN: the word unchanged (as in INT16);
    * an FP16 container in an INT16 layer: the fp16 bits (NaN flush included) unchanged;
    * a PIXEL_X_OFFSET of a 16-bit format beyond one atom's pixels: its in-atom part, with the
      int8 formats' one-atom-later rule.

    Raises ValueError: a configuration whose CBUF entry is narrower than a pixel (4 bytes; on
    ``cfg.conv16`` configurations 8 bytes, also the memory atom).
    """

    def __init__(self, cfg: NvdlaConfig):
        self.cfg = cfg
        self.conv16 = cfg.conv16
        self.dma_params = read_dma_params(cfg)
        super().__init__({
            "regs": In(unit_layout(REGMAP.unit("CDMA"), "cfg")),
            "start": In(1),
            "busy": Out(1),
            "dma": Out(DmaReadSignature(cfg.mem_address_width, cfg.primary_memif_width)),
            "atoms": Out(stream.Signature(image_atom_layout(cfg.cbuf_bank_width))),
        })
        most = PIXEL_BYTES_16 if self.conv16 else PIXEL_BYTES
        if cfg.cbuf_bank_width < most or (self.conv16 and cfg.atom_bytes < most):
            raise ValueError(f"{cfg.name}: CBUF entry of {cfg.cbuf_bank_width} B, memory atom "
                             f"of {cfg.atom_bytes} B: a pixel has up to {most} B")

    def elaborate(self, platform):
        m = Module()
        cfg, regs = self.cfg, self.regs
        A = cfg.atom_bytes
        aw = cfg.mem_address_width
        params = self.dma_params
        begin = Signal()
        m.d.comb += begin.eq(self.start & ~self.busy)

        # ---------------- format decode ----------------
        fmt = regs.d_datain_format.pixel_format
        planes2 = Signal()
        bpp_log2 = [Signal(2, name=f"bpp{p}_log2") for p in (0, 1)]
        channels = Signal(range(PIXEL_BYTES + 1))
        order = [Signal(2, name=f"order{i}") for i in range(PIXEL_BYTES)]
        table = _format_table()
        default = next(r for r in table if r[0] == PixelFormat[_DEFAULT_FORMAT])

        def decode(row):
            _, two, bpp, nch, ordr = row[:5]
            ordr = tuple(ordr) + tuple(range(len(ordr), PIXEL_BYTES))
            return [planes2.eq(two), bpp_log2[0].eq(log2(bpp[0])), bpp_log2[1].eq(log2(bpp[1])),
                    channels.eq(nch), *[order[i].eq(ordr[i]) for i in range(PIXEL_BYTES)]]
        if not self.conv16:
            with m.Switch(fmt):
                for row in table:
                    with m.Case(row[0]):
                        m.d.comb += decode(row)
                with m.Default():
                    m.d.comb += decode(default)
        else:
            # 16-bit layers (PROC_PRECISION INT16/FP16) also decode the 16-bit and packed
            # 10-bit formats; INT8 layers read them as T_A8B8G8R8, as int8-only hardware does
            # (the 16-bit-container-to-INT8 "shrink" is not modelled: class docstring)
            prec = regs.d_misc_cfg.proc_precision
            layer16 = Signal(name="img16")
            cont = Signal(2, name="container")      # 0 bytes, 1 INT16, 2 FP16 elements
            packed10 = Signal(name="packed10")
            a2low = Signal(name="a2low")
            m.d.comb += layer16.eq(prec != ProcPrecision.INT8)
            with m.Switch(fmt):
                for row in table:
                    with m.Case(row[0]):
                        m.d.comb += decode(row)
                for row in _format_table16():
                    with m.Case(row[0]):
                        with m.If(layer16):
                            m.d.comb += [*decode(row), cont.eq(row[5]), packed10.eq(row[6]),
                                         a2low.eq(row[7])]
                        with m.Else():
                            m.d.comb += decode(default)
                with m.Default():
                    m.d.comb += decode(default)

        # ---------------- geometry ----------------
        w = regs.d_datain_size_0.datain_width[:CUBE_DIM_BITS]
        h = regs.d_datain_size_0.datain_height[:CUBE_DIM_BITS]
        xoff = regs.d_pixel_offset.pixel_x_offset
        geom = Signal(pixel_geom_layout(aw, LINE_BYTES_BITS_16 if self.conv16
                                        else LINE_BYTES_BITS))
        bases = [Cat(regs.d_dain_addr_low_0.as_value(), regs.d_dain_addr_high_0.as_value()),
                 Cat(regs.d_dain_addr_low_1.as_value(), regs.d_dain_addr_high_1.as_value())]
        strides = [regs.d_line_stride.as_value(), regs.d_line_uv_stride.as_value()]
        a_sh = log2(A)
        pad_left = regs.d_zero_padding.pad_left
        for p in (0, 1):
            # pixel offset inside one atom: the low log2(A / bpp) bits of PIXEL_X_OFFSET
            xmask = Signal(a_sh, name=f"xmask{p}")
            m.d.comb += xmask.eq(Const(A - 1, a_sh) >> bpp_log2[p])
            start = bases[p][:aw] + ((xoff & xmask) << bpp_log2[p])
            if p == 0:
                # plane 0 starts one atom later when PAD_LEFT's in-atom part lies between the
                # in-atom offset and the whole PIXEL_X_OFFSET (NVIDIA's left-padding atom count
                # compares the whole offset: module docstring)
                late = Signal(name="late_atom0")
                m.d.comb += late.eq(((xoff & xmask) < (pad_left & xmask))
                                    & ((pad_left & xmask) <= xoff))
                start = start + Mux(late, A, 0)
            m.d.comb += [
                geom.base[p].eq(start),
                geom.stride[p].eq(strides[p]),
                geom.bytes[p].eq((w + 1) << bpp_log2[p]),
                geom.pix_log2[p].eq(bpp_log2[p]),
            ]
        m.d.comb += [geom.planes2.eq(planes2), geom.height.eq(h)]

        # ---------------- memory: the DMA and a replica walker labelling its atoms ----------------
        m.submodules.dma = dma = (PixelReadDma16 if self.conv16 else PixelReadDma)(**params)
        wiring.connect(m, wiring.flipped(self.dma), dma.dma)
        walker_args = {k: params[k] for k in ("addr_width", "atom_bytes", "atom_elems",
                                              "beat_bytes", "max_burst")}
        m.submodules.labels = lab = (PixelWalker16 if self.conv16 else PixelWalker)(**walker_args)
        m.d.comb += [dma.start.eq(begin), dma.geom.eq(geom), dma.cube.eq(0),
                     lab.start.eq(begin), lab.geom.eq(geom), lab.cube.eq(0)]

        unp = []
        fifos = []
        for p in (0, 1):
            # 16-bit formats: plane 0 pixels of up to 8 bytes, plane 1 (UV) up to 4
            u = PlaneUnpacker(A, PIXEL_BYTES_16 if self.conv16 and p == 0 else PIXEL_BYTES)
            m.submodules[f"unpack{p}"] = u
            q = fifo.SyncFIFOBuffered(width=u.in_layout.size,
                                      depth=cfg.primary_memif_max_burst + 2)
            m.submodules[f"plane_fifo{p}"] = q
            m.d.comb += [u.pix_log2.eq(bpp_log2[p]),
                         u.i.valid.eq(q.r_rdy), u.i.payload.eq(q.r_data), q.r_en.eq(u.i.ready)]
            unp.append(u)
            fifos.append(q)

        # the labels (run and its info) through a skid buffer: the walker's plane choice no
        # longer runs through the plane FIFOs' ready into its own registers' enables (issue 10)
        label_layout = data.StructLayout({"run": lab.runs.payload.shape(),
                                          "info": pixel_info_layout(A)})
        m.submodules.label_skid = label_skid = SkidBuffer(label_layout)
        m.d.comb += [label_skid.i.valid.eq(lab.runs.valid),
                     label_skid.i.payload.run.eq(lab.runs.payload),
                     label_skid.i.payload.info.eq(lab.info),
                     lab.runs.ready.eq(label_skid.i.ready)]
        labels = label_skid.o
        idx = Signal(range(max(2, lab.max_atoms)))  # atom of the labelled run
        run = labels.payload.run
        info = labels.payload.info
        at_first = idx == 0
        at_last = idx == run.count - 1
        lo = Mux(at_first, info.skip, 0)
        hi = Mux(at_last, info.tail, A)
        plane = info.plane
        rdy = Mux(plane, fifos[1].w_rdy, fifos[0].w_rdy)
        tagged = Signal(unp[0].in_layout)
        fire = Signal()
        m.d.comb += [tagged.data.eq(dma.atoms.payload), tagged.lo.eq(lo), tagged.hi.eq(hi),
                     fire.eq(dma.atoms.valid & labels.valid & rdy),
                     dma.atoms.ready.eq(labels.valid & rdy),
                     labels.ready.eq(fire & at_last)]
        for p in (0, 1):
            m.d.comb += [fifos[p].w_data.eq(tagged),
                         fifos[p].w_en.eq(dma.atoms.valid & labels.valid & (plane == p))]
        with m.If(fire):
            m.d.sync += idx.eq(Mux(at_last, 0, idx + 1))
        with m.If(begin):
            m.d.sync += idx.eq(0)

        # ---------------- pixel sequencer: pad, pixels, pad ----------------
        zp = regs.d_zero_padding
        pl, pr = zp.pad_left, zp.pad_right
        x = Signal(CUBE_DIM_BITS + 1)           # padded column
        y = Signal(CUBE_DIM_BITS)
        seq_active = Signal()
        # the line's bounds as registers of the (stable) registers: the first pixel leaves many
        # cycles after ``start`` (issue 10: their adders ran into the sequencer's ready path)
        x_last = Signal(CUBE_DIM_BITS + 1)      # PAD_LEFT + W - 1 + PAD_RIGHT
        x_data_end = Signal(CUBE_DIM_BITS + 1)  # PAD_LEFT + W - 1, the line's last pixel
        m.d.sync += [x_last.eq(pl + w + pr), x_data_end.eq(pl + w)]
        in_data = Signal()                      # x is a pixel of the line (not padding): a
        # register following x (issue 10: x against the bounds was on the unpackers' ready path)
        raw_bytes = PIXEL_BYTES_16 if self.conv16 else PIXEL_BYTES
        pix_layout = data.StructLayout({"raw": unsigned(raw_bytes * 8), "pad": 1, "last": 1})
        pix = stream.Signature(pix_layout).create()
        both = Signal()
        if not self.conv16:
            raw = Mux(planes2, Cat(unp[0].o.payload[:8], unp[1].o.payload[:24]),
                      unp[0].o.payload)
        else:
            # the pixel's elements: bytes (int8 formats), 16-bit words, or a packed 10-bit
            # word's fields as 16-bit elements e0..e3 (PIXEL_FORMATS_10)
            u0, u1 = unp[0].o.payload, unp[1].o.payload
            wd = u0[:32]
            z6, z14 = Const(0, 6), Const(0, 14)
            hi2 = Cat(z6, wd[0:10], z6, wd[10:20], z6, wd[20:30], z14, wd[30:32])
            lo2 = Cat(z6, wd[2:12], z6, wd[12:22], z6, wd[22:32], z14, wd[0:2])
            sp8 = Cat(u0[:8], u1[:24])
            sp16 = Cat(u0[:16], u1[:32])
            raw = Signal(raw_bytes * 8, name="pix_raw")
            with m.If(packed10):
                m.d.comb += raw.eq(Mux(a2low, lo2, hi2))
            with m.Elif(planes2):
                m.d.comb += raw.eq(Mux(cont != 0, sp16, sp8))
            with m.Else():
                m.d.comb += raw.eq(u0)
        m.d.comb += [
            both.eq(unp[0].o.valid & (unp[1].o.valid | ~planes2)),
            pix.valid.eq(seq_active & (~in_data | both)),
            pix.payload.raw.eq(raw),
            pix.payload.pad.eq(~in_data),
            pix.payload.last.eq(x == x_last),
            unp[0].o.ready.eq(seq_active & in_data & both & pix.ready),
            unp[1].o.ready.eq(seq_active & in_data & both & pix.ready & planes2),
        ]
        with m.If(pix.valid & pix.ready):
            with m.If(x == x_last):
                m.d.sync += [x.eq(0), y.eq(y + 1), in_data.eq(pl == 0)]
                with m.If(y == h):
                    m.d.sync += seq_active.eq(0)
            with m.Else():
                m.d.sync += [x.eq(x + 1),
                             in_data.eq(Mux(in_data, x != x_data_end, x + 1 == pl))]
        with m.If(begin):
            m.d.sync += [x.eq(0), y.eq(0), seq_active.eq(1), in_data.eq(pl == 0)]

        if self.conv16:
            self.convert16(m, pix, order, channels, cont, layer16)
        else:
            # ---------------- reorder and converter: four register stages ----------------
            df = regs.d_datain_format
            signed_in = df.pixel_sign_override == SignOverride.SIGNED_INT
            mean_on = regs.d_mean_format.mean_format == MeanFormat.ENABLE
            means = [regs.d_mean_global_0.mean_ry, regs.d_mean_global_0.mean_gu,
                     regs.d_mean_global_1.mean_bv, regs.d_mean_global_1.mean_ax]
            cvt = regs.d_cvt_cfg
            cvt_on = cvt.cvt_en == CvtEn.ENABLE
            diff_layout = data.StructLayout({
                "byte": data.ArrayLayout(unsigned(8), PIXEL_BYTES),
                "diff": data.ArrayLayout(signed(18), PIXEL_BYTES),
                "pad": 1, "last": 1})
            mid_layout = data.StructLayout({
                "byte": data.ArrayLayout(unsigned(8), PIXEL_BYTES),
                "prod": data.ArrayLayout(CVT_PRODUCT_SHAPE, PIXEL_BYTES),
                "pad": 1, "last": 1})
            biased_layout = data.StructLayout({
                "byte": data.ArrayLayout(unsigned(8), PIXEL_BYTES),
                "biased": data.ArrayLayout(CVT_BIASED_SHAPE, PIXEL_BYTES),
                "pad": 1, "last": 1})

            # the reorder and the mean/offset difference in a stage before the multiplier (issue
            # 10: reorder, difference and product in one cycle were CDMA's critical path)
            def stage0(mm, p):
                out = {"pad": p.pad, "last": p.last}
                byte = []
                diff = []
                for i in range(PIXEL_BYTES):
                    b = Signal(8, name=f"ch{i}")
                    mm.d.comb += b.eq(p.raw.word_select(order[i], 8))
                    xv = Mux(signed_in, b.as_signed(), Cat(b, Const(0, 1)).as_signed())
                    off = Mux(mean_on, means[i], regs.d_cvt_offset.cvt_offset)
                    byte.append(b)
                    diff.append(cvt_diff(mm, xv, off, f"diff{i}"))
                out["byte"] = Cat(*byte)
                out["diff"] = Cat(*diff)
                return out

            def stage1(mm, p):
                return {"byte": p.byte, "pad": p.pad, "last": p.last,
                        "prod": Cat(*(p.diff[i] * regs.d_cvt_scale.cvt_scale
                                      for i in range(PIXEL_BYTES)))}

            pad_byte = regs.d_zero_padding_value.pad_value[:8]

            def stage2(mm, p):
                return {"byte": p.byte, "pad": p.pad, "last": p.last,
                        "biased": Cat(*(cvt_bias(p.prod[i], cvt.cvt_truncate)
                                        for i in range(PIXEL_BYTES)))}

            def stage3(mm, p):
                lanes = []
                for i in range(PIXEL_BYTES):
                    conv = cvt_saturate(p.biased[i], cvt.cvt_truncate)
                    v = Mux(p.pad, pad_byte, Mux(cvt_on, conv.as_unsigned(), p.byte[i]))
                    lanes.append(Mux(i < channels, v, 0))
                return {"data": Cat(*lanes), "last": p.last}

            m.submodules.cvt0 = s0 = Map(pix_layout, diff_layout, stage0)
            m.submodules.cvt1 = s1 = Map(diff_layout, mid_layout, stage1)
            pk_layout = data.StructLayout({"data": unsigned(PIXEL_BYTES * 8), "last": 1})
            m.submodules.cvt2 = s2 = Map(mid_layout, biased_layout, stage2)
            m.submodules.cvt3 = s3 = Map(biased_layout, pk_layout, stage3)
            m.submodules.packer = pk = EntryPacker(cfg.cbuf_bank_width, PIXEL_BYTES)
            # a skid buffer between the sequencer and the converter: the packer's ready no longer
            # runs through the converter stages into the plane unpackers' byte shifters (issue 10)
            m.submodules.pix_skid = pix_skid = SkidBuffer(pix_layout)
            wiring.connect(m, pix, pix_skid.i)
            wiring.connect(m, pix_skid.o, s0.i)
            wiring.connect(m, s0.o, s1.i)
            wiring.connect(m, s1.o, s2.i)
            wiring.connect(m, s2.o, s3.i)
            wiring.connect(m, s3.o, pk.i)
            wiring.connect(m, pk.o, wiring.flipped(self.atoms))
            m.d.comb += pk.channels.eq(channels)

        # ---------------- busy: until the last line's last entry is taken ----------------
        active = Signal()
        out_y = Signal(CUBE_DIM_BITS)
        with m.If(self.atoms.valid & self.atoms.ready & self.atoms.payload.slice_last):
            m.d.sync += out_y.eq(out_y + 1)
            with m.If(out_y == h):
                m.d.sync += active.eq(0)
        with m.If(begin):
            m.d.sync += [active.eq(1), out_y.eq(0)]
        m.d.comb += self.busy.eq(active)
        return m

    def convert16(self, m: Module, pix, order, channels, cont, layer16):
        """The reorder, converter and packer of ``cfg.conv16`` configurations (INT8 layers
        as :meth:`elaborate` builds them elsewhere, plus the 16-bit layers: class docstring):
        ``pix`` (the sequencer's stream of 8-byte raw pixels) through a skid buffer and six
        register stages (reorder and difference; product; rounding bias; shift and
        saturation; the fp16 rounding's leading zeros; its normalisation, rounding and the
        lane packing) to an :class:`EntryPacker` of 8-byte pixels with ``pairs``, whose
        entries drive ``atoms``. One pixel per cycle."""
        cfg, regs = self.cfg, self.regs
        N = PIXEL_BYTES                          # channels (lanes)
        df = regs.d_datain_format
        signed_in = df.pixel_sign_override == SignOverride.SIGNED_INT
        mean_on = regs.d_mean_format.mean_format == MeanFormat.ENABLE
        means = [regs.d_mean_global_0.mean_ry, regs.d_mean_global_0.mean_gu,
                 regs.d_mean_global_1.mean_bv, regs.d_mean_global_1.mean_ax]
        cvt = regs.d_cvt_cfg
        cvt_on = cvt.cvt_en == CvtEn.ENABLE
        prec = regs.d_misc_cfg.proc_precision
        wide = Signal(name="cont16")            # 16-bit components (INT16 or FP16 container)
        fp_cont = Signal(name="cont_fp16")      # fp16 components: never converted
        flush = Signal(name="img_nan_flush")
        to_fp = Signal(name="cvt_to_fp16")      # converted values rounded to fp16
        to_16 = Signal(name="cvt_to_int16")     # converted values saturated to int16
        m.d.comb += [
            wide.eq(cont != 0),
            fp_cont.eq(cont == 2),
            flush.eq(regs.d_nan_flush_to_zero.nan_to_zero == NanToZero.ENABLE),
            to_fp.eq(layer16 & cvt_on & ~fp_cont & (prec == ProcPrecision.FP16)),
            to_16.eq(layer16 & cvt_on & ~fp_cont & (prec != ProcPrecision.FP16)),
        ]
        elem = data.ArrayLayout(unsigned(16), N)
        diff_layout = data.StructLayout({"elem": elem, "diff": data.ArrayLayout(signed(18), N),
                                         "pad": 1, "last": 1})
        mid_layout = data.StructLayout({"elem": elem,
                                        "prod": data.ArrayLayout(CVT_PRODUCT_SHAPE, N),
                                        "pad": 1, "last": 1})
        biased_layout = data.StructLayout({"elem": elem,
                                           "biased": data.ArrayLayout(CVT_BIASED_SHAPE, N),
                                           "pad": 1, "last": 1})
        val_layout = data.StructLayout({"val": data.ArrayLayout(unsigned(17), N), "fp": 1,
                                        "last": 1})
        prep_layout = data.StructLayout({"low": elem,
                                         "prep": data.ArrayLayout(FP16_PREP_LAYOUT, N),
                                         "fp": 1, "last": 1})
        pk_layout = data.StructLayout({"data": unsigned(PIXEL_BYTES_16 * 8), "last": 1})

        def stage0(mm, p):
            # channel i: byte order[i] (int8 formats) or 16-bit element order[i], zero- or
            # (PIXEL_SIGN_OVERRIDE) sign-extended to 17 bits; the mean or offset subtracted
            diffs, elems = [], []
            for i in range(N):
                b = Signal(8, name=f"ch{i}")
                e = Signal(16, name=f"el{i}")
                x = Signal(signed(17), name=f"x{i}")
                mm.d.comb += [b.eq(p.raw.word_select(order[i], 8)),
                              e.eq(p.raw.word_select(order[i], 16)),
                              x.eq(Mux(wide, Mux(signed_in, e.as_signed(), e),
                                       Mux(signed_in, b.as_signed(), b)))]
                off = Mux(mean_on, means[i], regs.d_cvt_offset.cvt_offset)
                elems.append(Mux(wide, e, x[:16]))
                diffs.append(cvt_diff(mm, x, off, f"diff{i}"))
            return {"elem": Cat(*elems), "diff": Cat(*diffs), "pad": p.pad, "last": p.last}

        def stage1(mm, p):
            return {"elem": p.elem, "pad": p.pad, "last": p.last,
                    "prod": Cat(*(p.diff[i] * regs.d_cvt_scale.cvt_scale for i in range(N)))}

        def stage2(mm, p):
            return {"elem": p.elem, "pad": p.pad, "last": p.last,
                    "biased": Cat(*(cvt_bias(p.prod[i], cvt.cvt_truncate) for i in range(N)))}

        pad16 = regs.d_zero_padding_value.pad_value[:16]

        def stage3(mm, p):
            lanes = []
            for i in range(N):
                q = round_shift(p.biased[i], cvt.cvt_truncate, CVT_PRODUCT_SHAPE)
                e = p.elem[i]
                nan = (e[10:15] == 0x1F) & (e[:10] != 0)
                v = Signal(17, name=f"val{i}")
                with mm.If(p.pad):
                    mm.d.comb += v.eq(Mux(layer16, pad16, pad16[:8]))
                with mm.Elif(~layer16):
                    mm.d.comb += v.eq(Mux(cvt_on, saturate(q, 8).as_unsigned(), e[:8]))
                with mm.Elif(to_fp):
                    mm.d.comb += v.eq(saturate(q, 17))
                with mm.Elif(to_16):
                    mm.d.comb += v.eq(saturate(q, 16).as_unsigned())
                with mm.Else():
                    mm.d.comb += v.eq(Mux(fp_cont & flush & nan, 0, e))
                lanes.append(Mux(i < channels, v, 0))
            return {"val": Cat(*lanes), "fp": to_fp & ~p.pad, "last": p.last}

        def stage4(mm, p):
            return {"low": Cat(*(p.val[i][:16] for i in range(N))),
                    "prep": Cat(*(fp16_of_int_prepare(mm, p.val[i].as_signed(), f"f16_{i}")
                                  for i in range(N))),
                    "fp": p.fp, "last": p.last}

        def stage5(mm, p):
            lanes = [Mux(p.fp, fp16_of_int_finish(mm, p.prep[i], f"f16_{i}"), p.low[i])
                     for i in range(N)]
            return {"data": Mux(layer16, Cat(*lanes), Cat(*(p.low[i][:8] for i in range(N)))),
                    "last": p.last}

        m.submodules.pix_skid = pix_skid = SkidBuffer(pix.payload.shape())
        m.submodules.cvt0 = s0 = Map(pix.payload.shape(), diff_layout, stage0)
        m.submodules.cvt1 = s1 = Map(diff_layout, mid_layout, stage1)
        m.submodules.cvt2 = s2 = Map(mid_layout, biased_layout, stage2)
        m.submodules.cvt3 = s3 = Map(biased_layout, val_layout, stage3)
        m.submodules.cvt4 = s4 = Map(val_layout, prep_layout, stage4)
        m.submodules.cvt5 = s5 = Map(prep_layout, pk_layout, stage5)
        m.submodules.packer = pk = EntryPacker(cfg.cbuf_bank_width, PIXEL_BYTES_16, pairs=True)
        chain = [pix, pix_skid.i, pix_skid.o, s0.i, s0.o, s1.i, s1.o, s2.i, s2.o, s3.i, s3.o,
                 s4.i, s4.o, s5.i, s5.o, pk.i]
        for a, b in zip(chain[::2], chain[1::2]):
            wiring.connect(m, a, b)
        wiring.connect(m, pk.o, wiring.flipped(self.atoms))
        m.d.comb += [pk.channels.eq(Mux(layer16, channels << 1, channels)),
                     pk.pair.eq(layer16)]

