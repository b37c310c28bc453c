"""Small image-input convolution register programs (issue 9 item 3): one hardware layer
CDMA (image fetch) -> CBUF -> CSC (image mode) -> CMAC -> CACC -> SDP (flying, bypassed) -> memory,
programmed like NVIDIA's trace ``img_51x96x4_1x10x4x32_A8B8G8R8_int8_0`` but tiny (W 4..12,
H 3..8, K 8..16, R 1..3), for what no NVIDIA trace exercises: T_R8, the semi-planar N444
formats (second plane D_DAIN_ADDR_*_1 with D_LINE_UV_STRIDE), every int8 pixel format,
channel post-extension (CSC D_POST_Y_EXTENSION), X offsets, mean vs converter, padding.

Legality follows the model's rules (``verif/model/conv.py`` ``ConvCore.run`` image branch):
kernel width S folded into channels (CSC WEIGHT_CHANNEL_EXT+1 = S * Cpix, WEIGHT_WIDTH_EXT 0),
left/right padding < S, top/bottom padding < R, post-extension ``ext`` needs S*Cpix*ext <= the
MAC atomic channel count, ENTRY_PER_SLICE covers one padded line, the output window stays in the
padded input. Weights are random bytes (their layout, including the post-extension one, is
what the model reads; any bytes are legal).

:func:`generate` returns a :class:`verif.gen.common.Program` (kind ``img``) drawn from a seed
and an :class:`ImgCase` (fixed options; ``None`` fields are drawn).
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from verif.gen.common import (Alloc, Layer, Program, ceil_div, draw_precision, field_writes,
                              fp16_bytes, fp16_conv_bytes, padded_past_entries,
                              weight_bytes_reg)
from verif.gen.writer import TraceWriter

__all__ = ["ImgCase", "PIXEL_FORMATS", "draw_case", "generate"]

#: PIXEL_FORMAT code -> (name, bytes per pixel of each plane) for the 13 int8 formats
#: (format.rst tab_pixel_formats; the model's PIXEL_FORMATS_INT8)
PIXEL_FORMATS = {
    0: ("T_R8", (1,)),
    12: ("T_A8B8G8R8", (4,)), 13: ("T_A8R8G8B8", (4,)), 14: ("T_B8G8R8A8", (4,)),
    15: ("T_R8G8B8A8", (4,)), 16: ("T_X8B8G8R8", (4,)), 17: ("T_X8R8G8B8", (4,)),
    18: ("T_B8G8R8X8", (4,)), 19: ("T_R8G8B8X8", (4,)), 26: ("T_A8Y8U8V8", (4,)),
    27: ("T_V8U8Y8A8", (4,)), 28: ("T_Y8___U8V8_N444", (1, 2)), 29: ("T_Y8___V8U8_N444", (1, 2)),
}


#: nv_full's 16-bit pixel formats (format.rst tab_pixel_formats): code -> (name, bytes per pixel
#: of each plane, container precision 1 INT16 / 2 FP16, channels)
PIXEL_FORMATS_16 = {
    1: ("T_R10", (2,), 1, 1), 2: ("T_R12", (2,), 1, 1), 3: ("T_R16", (2,), 1, 1),
    4: ("T_R16_I", (2,), 1, 1), 5: ("T_R16_F", (2,), 2, 1), 6: ("T_A16B16G16R16", (8,), 1, 4),
    7: ("T_X16B16G16R16", (8,), 1, 4), 8: ("T_A16B16G16R16_F", (8,), 2, 4),
    9: ("T_A16Y16U16V16", (8,), 1, 4), 10: ("T_V16U16Y16A16", (8,), 1, 4),
    11: ("T_A16Y16U16V16_F", (8,), 2, 4),
    **{c: (n, (4,), 1, 4) for c, n in ((20, "T_A2B10G10R10"), (21, "T_A2R10G10B10"),
                                       (22, "T_B10G10R10A2"), (23, "T_R10G10B10A2"),
                                       (24, "T_A2Y10U10V10"), (25, "T_V10U10Y10A2"))},
    **{c: (n, (2, 4), 1, 3) for c, n in ((30, "T_Y10___U10V10_N444"), (31, "T_Y10___V10U10_N444"),
                                         (32, "T_Y12___U12V12_N444"), (33, "T_Y12___V12U12_N444"),
                                         (34, "T_Y16___U16V16_N444"), (35, "T_Y16___V16U16_N444"))},
}


def _format(fmt: int) -> tuple[str, tuple, int, int]:
    """(name, bytes per pixel of each plane, container precision, channels) of ``fmt``."""
    if fmt in PIXEL_FORMATS:
        name, bpp = PIXEL_FORMATS[fmt]
        return name, bpp, 0, 1 if bpp == (1,) else (3 if len(bpp) == 2 else 4)
    return PIXEL_FORMATS_16[fmt]


@dataclass
class ImgCase:
    """Options of one image layer; ``None``: drawn from the seed.

    ``fmt``: PIXEL_FORMAT code; ``ext``: post-extension lines (1, 2, 4); ``s``: kernel width;
    ``xoff``: PIXEL_X_OFFSET; ``mode``: ``mean`` (CVT_EN, MEAN_FORMAT), ``offset`` (CVT_EN,
    CVT_OFFSET) or ``nocvt``; ``pad``: allow padding; ``prec``: PROC_PRECISION (0 INT8, 1
    INT16, 2 FP16: nv_full; 16-bit CBUF elements, any pixel container converted to it)."""
    fmt: int
    ext: int = 1
    s: int | None = None
    xoff: int | None = None
    mode: str | None = None
    pad: bool = True
    prec: int = 0


def draw_case(seed: int, cfg) -> ImgCase:
    """The options of the sweep's image layer ``seed`` (``scripts/sweep.py --unit img``): any of
    the 13 int8 pixel formats, a post-extension the format allows (S*Cpix*ext <= the MAC atomic
    channel count with S >= 1; ext 4 only for 1-channel T_R8 at 8 atomic channels), X offset,
    conversion mode and padding drawn; the rest is drawn by :func:`generate`."""
    rng = random.Random(0x1A6E + seed)
    fmt = rng.choice(sorted(PIXEL_FORMATS))
    prec = 0
    if len(cfg.precisions) > 1:
        # nv_full: the precision, then a format of any container that converts to it (own
        # random stream: an int8-only configuration's draws are unchanged)
        rp = random.Random(f"img-prec-{seed}")
        prec = draw_precision(rp, cfg)
        if prec:
            fmt = rp.choice(sorted(PIXEL_FORMATS) + [f for f, v in PIXEL_FORMATS_16.items()
                                                     if v[2] == 1 or prec == 2])
    _, bpp, cont, cpix = _format(fmt)
    exts = [e for e in (1, 2, 4) if e == 1 or cpix * e <= cfg.mac_atomic_c]
    case = ImgCase(fmt, ext=rng.choice(exts), xoff=rng.choice((0, 0, rng.randint(1, 31))),
                   mode=rng.choice(("mean", "offset", "nocvt")), pad=rng.random() < 0.8, prec=prec)
    if cont != prec and case.mode == "nocvt":
        case.mode = "offset"            # a conversion needs the converter (format.rst)
    return case


def generate(seed: int, cfg, case: ImgCase | None = None) -> Program:
    """One image layer drawn from ``seed`` with ``case``'s fixed options (module docstring);
    ``case`` None: :func:`draw_case`."""
    if case is None:
        case = draw_case(seed, cfg)
    rng = random.Random(seed * 1000 + case.fmt * 7 + case.ext)
    name, bpp, cont, cpix = _format(case.fmt)
    prec = case.prec
    eb = 2 if prec else 1                      # bytes per CBUF element
    atom_c, bank_w = cfg.mac_atomic_c, cfg.cbuf_bank_width
    ext = case.ext
    smax = max(1, atom_c // (cpix * ext)) if ext > 1 else 3
    s = case.s or rng.randint(1, min(3, smax))
    if ext > 1 and s * cpix * ext > atom_c:
        raise ValueError(f"{name}: {ext}-line post-extension needs S*Cpix*ext = {s * cpix * ext} "
                         f"<= {atom_c} (the atomic channel count)")
    # post-extension: R from 2 to 2*ext-1, i.e. full groups of ext lines and a partial last one
    r = rng.randint(2, 2 * ext - 1) if ext > 1 else rng.randint(1, 3)
    W, H, K = rng.randint(4, 12), rng.randint(3, 8), rng.choice((8, 9, 12, 16))
    pl = rng.randint(0, s - 1) if case.pad else 0
    pr = rng.randint(0, s - 1) if case.pad else 0
    pt = rng.randint(0, r - 1) if case.pad else 0
    pb = rng.randint(0, r - 1) if case.pad else 0
    H = max(H, r - pt - pb)        # at least one output line (R up to 7 at 4-line extension)
    sx, sy = rng.choice((1, 1, 2)), rng.choice((1, 1, 2))
    if ext > 1 and sx * cpix * ext > atom_c:
        sx = 1      # post-extension limit on the x stride (model ConvCore.run)
    cw = s * cpix
    wo = (pl + W + pr - s) // sx + 1
    ho = (pt + H + pb - r) // sy + 1
    xoff = case.xoff if case.xoff is not None else rng.randint(0, 31)
    a = cfg.atom_bytes // bpp[0]        # plane-0 pixels per atom
    if cont:
        xoff %= a                       # nv_full's RTL asserts a smaller offset (model)
    if len(bpp) == 2 and (W - 1 + xoff) // a + 1 > (pl + W - 1 + pr) // a + 2 - (xoff < pl):
        # semi-planar: plane 0 must not fetch more atoms than the padded line holds (model
        # ConvCore._check_semi_planar_x_offset); the in-atom part of the offset never does
        xoff &= a - 1
    mode = case.mode or rng.choice(("mean", "offset", "nocvt"))
    sign = rng.random() < 0.5
    trunc = rng.randint(0, 6)
    cvt_scale = rng.randint(-300, 300)
    cvt_offset = rng.randint(-100, 100)
    means = [rng.randint(-200, 200) for _ in range(4)]
    pad_cdma, pad_csc = rng.randrange(256), rng.randrange(256)
    clip = rng.randint(7, 10)     # accumulations of int8 products: keep the int8 output unsaturated
    if prec:
        # 16-bit components need larger shifts and offsets; the pads are 16 bits (fp16 patterns
        # in FP16); shifts and CLIP_TRUNCATE keep most outputs of int16 weights (INT16) or fp16
        # weights of about 2**-6..2**4 (FP16) inside the output's range
        if cont:
            trunc = rng.randint(0, 14)
            cvt_offset = rng.randint(-3000, 3000)
            means = [rng.randint(-3000, 3000) for _ in range(4)]
        if prec == 2:
            pad_cdma, pad_csc = (int.from_bytes(fp16_conv_bytes(rng, 2, scale=0), "little")
                                 for _ in range(2))
            trunc = rng.randint(14, 20) if cont else rng.randint(8, 12)
        else:
            pad_cdma, pad_csc = rng.getrandbits(16), rng.getrandbits(16)
        clip = rng.randint(17, 20) if cont else rng.randint(14, 18)

    alloc = Alloc(rng)
    w = TraceWriter(f"img_{name[2:]}_e{ext}_s{seed}")
    # pixel planes: line stride >= the bytes one line reads (x offset inside one atom included)
    planes = []
    for b in bpp:
        need = (W + cfg.atom_bytes // b) * b
        ls = ceil_div(need, 32) * 32 + rng.choice((0, 0, 32))
        size = ls * H
        base = alloc.take(size)
        w.mem_load(base, fp16_bytes(rng, size, rng.choice((-4, 0, 4))) if cont == 2
                   else rng.randbytes(size))
        planes.append((base, ls))
    wbytes = weight_bytes_reg(r * cw * K * eb)
    wbase = alloc.take(wbytes, 128)
    # fp16 weights small enough for converted pixels (tens to hundreds) to stay below 65504
    w.mem_load(wbase, fp16_conv_bytes(rng, wbytes, scale=-7 if cont != 2 else rng.choice((-4, -2, 0)))
               if prec == 2 else rng.randbytes(wbytes))
    out_line = wo * cfg.atom_bytes
    out_surf = out_line * ho
    out_size = ceil_div(K, cfg.atom_bytes // eb) * out_surf
    obase = alloc.take(out_size)
    # a CBUF line of (PL + W + PR) * Cpix elements, 64 to an entry in every precision (nv_full:
    # 128-byte entries of 16-bit elements, model ``entry_bytes``)
    entries = ceil_div((pl + W + pr) * cpix, bank_w)
    ebytes = bank_w * eb
    bank_bytes = cfg.cbuf_bank_depth * bank_w
    data_bank = max(1, ceil_div(entries * H, bank_bytes // ebytes)) - 1
    # padded weights stay in CBUF when they fit (released, they would put NVIDIA's weight ring
    # out of step for the next program run in the same simulation)
    weight_bank = max(data_bank + 1, ceil_div(wbytes + 128, bank_bytes) - 1)
    skip_wt = (padded_past_entries(wbytes, r * cw * K * eb, ebytes)
               and data_bank + weight_bank + 2 <= cfg.cbuf_bank_number)
    if not skip_wt:
        weight_bank = data_bank + 1
    (p0, ls0), (p1, ls1) = planes[0], planes[-1] if len(planes) == 2 else (0, 0)

    common = dict(DATAIN_FORMAT=1, DATAIN_WIDTH_EXT=W - 1, DATAIN_HEIGHT_EXT=H - 1,
                  CONV_MODE=0, IN_PRECISION=cont, PROC_PRECISION=prec, ENTRIES=entries - 1,
                  WEIGHT_BYTES=wbytes, DATA_BANK=data_bank, WEIGHT_BANK=weight_bank,
                  SKIP_WEIGHT_RLS=int(skip_wt),
                  WEIGHT_FORMAT=0, BATCHES=0)
    cdma = dict(common, PIXEL_FORMAT=case.fmt, PIXEL_MAPPING=0, PIXEL_SIGN_OVERRIDE=int(sign),
                DATAIN_WIDTH=W - 1, DATAIN_HEIGHT=H - 1, DATAIN_CHANNEL=cpix - 1,
                PIXEL_X_OFFSET=xoff, PIXEL_Y_OFFSET=0, DATAIN_RAM_TYPE=1,
                DATAIN_ADDR_HIGH_0=0, DATAIN_ADDR_LOW_0=p0, DATAIN_ADDR_HIGH_1=0,
                DATAIN_ADDR_LOW_1=p1, LINE_STRIDE=ls0, UV_LINE_STRIDE=ls1, SURF_STRIDE=ls0 * H,
                LINE_PACKED=0, SURF_PACKED=0, GRAINS=0, WEIGHT_RAM_TYPE=1,
                BYTE_PER_KERNEL=r * cw * eb - 1, WEIGHT_KERNEL=K - 1, WEIGHT_ADDR_HIGH=0,
                WEIGHT_ADDR_LOW=wbase, MEAN_FORMAT=int(mode == "mean"),
                MEAN_RY=means[0], MEAN_GU=means[1], MEAN_BV=means[2], MEAN_AX=means[3],
                CVT_EN=int(mode != "nocvt"), CVT_TRUNCATE=trunc, CVT_OFFSET=cvt_offset,
                CVT_SCALE=cvt_scale, CONV_X_STRIDE=sx - 1, CONV_Y_STRIDE=sy - 1,
                PAD_LEFT=pl, PAD_RIGHT=pr, PAD_TOP=pt, PAD_BOTTOM=pb, PAD_VALUE=pad_cdma,
                **({"NAN_TO_ZERO": int(rng.random() < 0.5)} if prec == 2 else {}))
    csc = dict(common, DATAIN_CHANNEL_EXT=cpix - 1, WEIGHT_WIDTH_EXT=0, WEIGHT_HEIGHT_EXT=r - 1,
               WEIGHT_CHANNEL_EXT=cw - 1, WEIGHT_KERNEL=K - 1, DATAOUT_WIDTH=wo - 1,
               DATAOUT_HEIGHT=ho - 1, DATAOUT_CHANNEL=K - 1, ATOMICS=wo * ho - 1,
               CONV_X_STRIDE_EXT=sx - 1, CONV_Y_STRIDE_EXT=sy - 1, X_DILATION_EXT=0,
               Y_DILATION_EXT=0, PAD_LEFT=pl, PAD_TOP=pt, PAD_VALUE=pad_csc, RLS_SLICES=H,
               Y_EXTENSION={1: 0, 2: 1, 4: 2}[ext])
    cmac = dict(CONV_MODE=0, PROC_PRECISION=prec)
    cacc = dict(DATAOUT_WIDTH=wo - 1, DATAOUT_HEIGHT=ho - 1, DATAOUT_CHANNEL=K - 1,
                DATAOUT_ADDR=obase, LINE_STRIDE=out_line, SURF_STRIDE=out_surf,
                CLIP_TRUNCATE=clip, LINE_PACKED=0, SURF_PACKED=0, CONV_MODE=0,
                PROC_PRECISION=prec, BATCHES=0)
    sdp = dict(WIDTH=wo - 1, HEIGHT=ho - 1, CHANNEL=K - 1, DST_BASE_ADDR_HIGH=0,
               DST_BASE_ADDR_LOW=obase, DST_LINE_STRIDE=out_line, DST_SURFACE_STRIDE=out_surf,
               PROC_PRECISION=prec, OUT_PRECISION=prec, CVT_SCALE=1, CVT_SHIFT=0, CVT_OFFSET=0,
               FLYING_MODE=1, OUTPUT_DST=0, WINOGRAD=0, NAN_TO_ZERO=0, BATCH_NUMBER=0,
               DST_RAM_TYPE=1, BS_BYPASS=1, BS_ALU_BYPASS=1, BS_MUL_BYPASS=1, BS_RELU_BYPASS=1,
               BN_BYPASS=1, BN_ALU_BYPASS=1, BN_MUL_BYPASS=1, BN_RELU_BYPASS=1,
               EW_BYPASS=1, EW_ALU_BYPASS=1, EW_MUL_BYPASS=1, EW_LUT_BYPASS=1)
    units = ("SDP", "CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA")
    writes = []
    for unit, fields in (("SDP", sdp), ("CDMA", cdma), ("CSC", csc), ("CMAC_A", cmac),
                         ("CMAC_B", cmac), ("CACC", cacc)):
        writes += field_writes(unit, fields)
    desc = (f"{('', 'int16 ', 'fp16 ')[prec]}{name} ext={ext} W{W} H{H} K{K} R{r} S{s} stride {sx},{sy} pad l{pl} r{pr} t{pt} "
            f"b{pb} xoff={xoff} {mode} sign={int(sign)} cvt(off {cvt_offset}, scale {cvt_scale}, "
            f"trunc {trunc}) means {means} pad {pad_cdma}/{pad_csc} clip {clip}")
    lay = Layer(units, writes, [(obase, out_size)], desc)
    prog = Program("img", seed, w, [lay])

    w.mem_init(obase, out_size)
    # as NVIDIA's image traces: mask CDMA's DATA_DONE/WEIGHT_DONE (and every non-SDP) interrupt
    w.reg_write(("GLB", "S_INTR_MASK"), 0x3F03FC)
    for unit in units:
        w.reg_write((unit, "S_POINTER"), 0)
    w.comment(f"layer 0 (group 0): {desc}")
    for unit, reg, value in writes:
        w.reg_write((unit, reg), value)
    w.poll(("CDMA", "S_CBUF_FLUSH_STATUS"), 1)
    for unit in units:
        w.reg_write((unit, "D_OP_ENABLE"), 1)
    w.intr_notify("SDP_0", "layer0")
    w.check_crc("layer0", obase, out_size)
    return prog
