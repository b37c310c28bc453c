"""Random PDP register programs, offline (PDP_RDMA reads the input cube; v1_ias_programming_guide.rst
"PDP programming", "Limitation / PDP").

Drawn per layer: pooling method (AVE/MAX/MIN), kernel 1..8 x 1..8, strides 1..16 (mostly
small), padding left/right < kernel width and top/bottom < kernel height (3-bit fields), the
seven pad values of AVE (``PAD_VALUE_nX = n * pad`` as the guide programs them, or a random
19-bit value), RECIP_KERNEL_WIDTH/HEIGHT (2**16 / kernel rounded, or random), channels 1..40,
output size 1..12 (the input width and height follow from ``in + pads == (out-1)*stride +
kernel``), strides with gaps; split width (SPLIT_NUM 1..4: first/mid/last bands whose
widths satisfy the guide's split rules, including bands narrower than the kernel or, against
"Limitation / PDP", than the overlap: see ``_bands``) for wide outputs; every band's output width
within the share line buffer (``verif.model.pdp.line_buffer_width``: 16 to 128 columns by
kernel height and vertical stride). PDP_RDMA's registers mirror PDP's.
Random values in the registers nv_small ignores (D_CYA, NaN counters' enables).
"""
from __future__ import annotations

import random

from verif.gen.common import (PRECISIONS, Alloc, Layer, Program, cube_extent, cube_strides,
                               draw_precision, emit, fp16_bytes, fp17_bits, rand_bytes, regs)
from verif.gen.writer import TraceWriter
from verif.model.pdp import line_buffer_width

METHODS = ("ave", "max", "min")


def _bands(rng, ow: int, kw: int, sx: int, pl: int, pr: int):
    """Split-width bands (SPLIT_NUM, first/mid/last input and output widths) of an output of
    ``ow`` columns, or None when ``ow`` is too small to split or a band would have no input
    column or more than 1024 (the 10-bit D_PARTIAL_WIDTH_IN fields). Band output widths: first,
    ``n - 2`` mids, last (sum ``ow``); input widths: first ``(out-1)*sx + kw - pl``, mid
    ``out*sx``, last ``out*sx - pr`` (they tile the input width: ``(ow-1)*sx + kw - pl - pr``).

    Bands narrower than the kernel are drawn: the split rules hold for them. A first or mid
    band narrower than the overlap ``kw - sx`` breaks the programming guide's "Limitation /
    PDP" (``kernel_w - stride_x <= first|mid_in_width``), but NVIDIA's nv_small RTL computes a
    defined result (a later band pools the memory left of the cube's base; verif/model/pdp.py
    ``_check_split``, hdl/pdp/bands.py), so such programs stay legal (the model warns)."""
    if ow < 2:
        return None
    n = rng.randint(2, min(5, ow))
    mid = rng.randint(1, max(1, (ow - 2) // max(1, n - 2))) if n > 2 else 0
    rest = ow - mid * (n - 2)
    if rest < 2:
        return None
    first = rng.randint(1, rest - 1)
    last = rest - first
    ins = [(first - 1) * sx + kw - pl, mid * sx, last * sx - pr]
    if min(ins[0], ins[2]) < 1 or max(ins) > 1024:
        return None
    return n - 1, ins, [first, mid, last]


def left_margin(kw: int, sx: int, bands) -> int:
    """Columns left of the cube's first column that the split ``bands`` (as :func:`_bands`
    returns, or None) read: a band after one narrower than the overlap ``kw - sx`` starts
    there (see :func:`_bands`); 0 for legal bands."""
    if not bands:
        return 0
    split_num, ins, _ = bands
    widths = [ins[0]] + [ins[1]] * (split_num - 1) + [ins[2]]
    start, lowest = 0, 0
    for wi in widths[:-1]:
        start += wi
        lowest = min(lowest, start - (kw - sx))
    return -lowest


def draw_geometry(rng: random.Random) -> dict:
    """A random PDP layer geometry (module docstring): ``method``, ``kw``, ``kh``, ``sx``, ``sy``,
    ``pl``, ``pr``, ``pt``, ``pb``, ``ow``, ``oh``, ``W``, ``H`` and ``bands`` (see
    :func:`_bands`, or None without split)."""
    for _ in range(1000):
        method = rng.randrange(3)
        kw, kh = rng.randint(1, 8), rng.randint(1, 8)
        sx = rng.randint(1, 16) if rng.random() < 0.15 else rng.randint(1, min(4, kw + 1))
        sy = rng.randint(1, 16) if rng.random() < 0.15 else rng.randint(1, min(4, kh + 1))
        pl, pr = (rng.randint(0, min(kw - 1, 7)) for _ in range(2))
        pt, pb = (rng.randint(0, min(kh - 1, 7)) for _ in range(2))
        split = rng.random() < 0.3
        ow = rng.randint(2, 24) if split else rng.randint(1, 12)
        oh = rng.randint(1, 8)
        W = (ow - 1) * sx + kw - pl - pr
        H = (oh - 1) * sy + kh - pt - pb
        if not (1 <= W <= 200 and 1 <= H <= 64):
            continue
        bands = _bands(rng, ow, kw, sx, pl, pr) if split else None
        if split and bands is None:
            continue
        if max(bands[2] if bands else [ow]) > line_buffer_width(kh, sy):
            continue            # wider than the share line buffer: NVIDIA's RTL hangs or errs
        return dict(method=method, kw=kw, kh=kh, sx=sx, sy=sy, pl=pl, pr=pr, pt=pt, pb=pb,
                    ow=ow, oh=oh, W=W, H=H, bands=bands)
    raise RuntimeError("no PDP geometry found")


def pdp_layer(rng: random.Random, cfg, alloc: Alloc, w: TraceWriter, geom: dict | None = None,
              C: int | None = None, prec: int | None = None) -> Layer:
    """One random offline PDP layer (module docstring); ``geom`` (as :func:`draw_geometry`
    returns) and ``C`` fix the geometry and channels instead of drawing them; ``prec`` the
    INPUT_DATA (drawn from the configuration's precisions when None)."""
    prec = draw_precision(rng, cfg) if prec is None else prec
    eb = 1 if prec == 0 else 2                          # bytes per element
    ab = cfg.atom_bytes
    atom = ab // eb                                     # channels per atom
    g = geom or draw_geometry(rng)
    method, kw, kh, sx, sy = g["method"], g["kw"], g["kh"], g["sx"], g["sy"]
    pl, pr, pt, pb, ow, oh, W, H = (g[k] for k in ("pl", "pr", "pt", "pb", "ow", "oh", "W", "H"))
    bands = g["bands"]
    if C is None:
        C = rng.randint(1, 40) if W * H < 400 else rng.randint(1, 8)
    line, surf = cube_strides(rng, W, H, ab)
    n = cube_extent(W, H, C, line, surf, atom, ab)
    # random bytes in the columns left of the cube that narrow bands read (see _bands)
    margin = -(-left_margin(kw, sx, bands) * ab // 32) * 32
    src = alloc.take(n + margin) + margin
    w.mem_load(src - margin, fp16_bytes(rng, n + margin) if prec == 2 else rand_bytes(rng, n + margin))
    dline, dsurf = cube_strides(rng, ow, oh, ab)
    dn = cube_extent(ow, oh, C, dline, dsurf, atom, ab)
    dst = alloc.take(dn)
    if prec == 2:
        # FP16: PAD_VALUE_nX and RECIP_KERNEL_* are fp17 bit patterns (NVIDIA's nvdlav1 RTL,
        # NV_NVDLA_PDP_CORE_cal1d.v / _cal2d.v; verif/model/pdp.py pool_plane_fp16), the
        # pad values sign-extended from bit 16 as its assertion wants (NV_NVDLA_PDP_core.v)
        pad = rng.choice((0.0, 0.0, rng.uniform(-4, 4), rng.uniform(-1000, 1000)))
        pads = [fp17_bits(k * pad) if rng.random() < 0.85 else rng.getrandbits(17) for k in range(1, 8)]
        pads = [v - (1 << 17) if v >> 16 else v for v in pads]
        rw = fp17_bits(1 / kw) if rng.random() < 0.85 else fp17_bits(rng.uniform(-2, 2))
        rh = fp17_bits(1 / kh) if rng.random() < 0.85 else fp17_bits(rng.uniform(-2, 2))
    else:
        pbits = 8 if prec == 0 else 16
        pad = rng.randint(-(1 << (pbits - 1)), (1 << (pbits - 1)) - 1)
        pads = [(k * pad) if rng.random() < 0.8 else rng.randint(-(1 << 18), (1 << 18) - 1) for k in range(1, 8)]
        rw = round(65536 / kw) if rng.random() < 0.85 else rng.getrandbits(17)
        rh = round(65536 / kh) if rng.random() < 0.85 else rng.getrandbits(17)
    split_num, ins, outs = bands if bands else (0, [W, 0, 0], [ow, 0, 0])
    wr = [regs("PDP", "D_DATA_CUBE_IN_WIDTH", CUBE_IN_WIDTH=W - 1),
          regs("PDP", "D_DATA_CUBE_IN_HEIGHT", CUBE_IN_HEIGHT=H - 1),
          regs("PDP", "D_DATA_CUBE_IN_CHANNEL", CUBE_IN_CHANNEL=C - 1),
          regs("PDP", "D_DATA_CUBE_OUT_WIDTH", CUBE_OUT_WIDTH=ow - 1),
          regs("PDP", "D_DATA_CUBE_OUT_HEIGHT", CUBE_OUT_HEIGHT=oh - 1),
          regs("PDP", "D_DATA_CUBE_OUT_CHANNEL", CUBE_OUT_CHANNEL=C - 1),
          regs("PDP", "D_OPERATION_MODE_CFG", POOLING_METHOD=method, FLYING_MODE=1, SPLIT_NUM=split_num),
          regs("PDP", "D_PARTIAL_WIDTH_IN", PARTIAL_WIDTH_IN_FIRST=ins[0] - 1,
               PARTIAL_WIDTH_IN_MID=max(ins[1] - 1, 0), PARTIAL_WIDTH_IN_LAST=max(ins[2] - 1, 0)),
          regs("PDP", "D_PARTIAL_WIDTH_OUT", PARTIAL_WIDTH_OUT_FIRST=outs[0] - 1,
               PARTIAL_WIDTH_OUT_MID=max(outs[1] - 1, 0), PARTIAL_WIDTH_OUT_LAST=max(outs[2] - 1, 0)),
          regs("PDP", "D_POOLING_KERNEL_CFG", KERNEL_WIDTH=kw - 1, KERNEL_HEIGHT=kh - 1,
               KERNEL_STRIDE_WIDTH=sx - 1, KERNEL_STRIDE_HEIGHT=sy - 1),
          regs("PDP", "D_RECIP_KERNEL_WIDTH", RECIP_KERNEL_WIDTH=rw),
          regs("PDP", "D_RECIP_KERNEL_HEIGHT", RECIP_KERNEL_HEIGHT=rh),
          regs("PDP", "D_POOLING_PADDING_CFG", PAD_LEFT=pl, PAD_TOP=pt, PAD_RIGHT=pr, PAD_BOTTOM=pb),
          regs("PDP", "D_SRC_BASE_ADDR_LOW", SRC_BASE_ADDR_LOW=src),
          regs("PDP", "D_SRC_LINE_STRIDE", SRC_LINE_STRIDE=line),
          regs("PDP", "D_SRC_SURFACE_STRIDE", SRC_SURFACE_STRIDE=surf),
          regs("PDP", "D_DST_BASE_ADDR_LOW", DST_BASE_ADDR_LOW=dst),
          regs("PDP", "D_DST_BASE_ADDR_HIGH", DST_BASE_ADDR_HIGH=0),
          regs("PDP", "D_DST_LINE_STRIDE", DST_LINE_STRIDE=dline),
          regs("PDP", "D_DST_SURFACE_STRIDE", DST_SURFACE_STRIDE=dsurf),
          regs("PDP", "D_DST_RAM_CFG", DST_RAM_TYPE=1),
          regs("PDP", "D_DATA_FORMAT", INPUT_DATA=prec),
          ("PDP", "D_CYA", rng.getrandbits(32))]
    wr += [regs("PDP", f"D_POOLING_PADDING_VALUE_{k}_CFG", **{f"PAD_VALUE_{k}X": v & 0x7FFFF})
           for k, v in enumerate(pads, 1)]
    wr += [regs("PDP_RDMA", "D_DATA_CUBE_IN_WIDTH", CUBE_IN_WIDTH=W - 1),
           regs("PDP_RDMA", "D_DATA_CUBE_IN_HEIGHT", CUBE_IN_HEIGHT=H - 1),
           regs("PDP_RDMA", "D_DATA_CUBE_IN_CHANNEL", CUBE_IN_CHANNEL=C - 1),
           regs("PDP_RDMA", "D_FLYING_MODE", FLYING_MODE=1),
           regs("PDP_RDMA", "D_SRC_BASE_ADDR_LOW", SRC_BASE_ADDR_LOW=src),
           regs("PDP_RDMA", "D_SRC_BASE_ADDR_HIGH", SRC_BASE_ADDR_HIGH=0),
           regs("PDP_RDMA", "D_SRC_LINE_STRIDE", SRC_LINE_STRIDE=line),
           regs("PDP_RDMA", "D_SRC_SURFACE_STRIDE", SRC_SURFACE_STRIDE=surf),
           regs("PDP_RDMA", "D_SRC_RAM_CFG", SRC_RAM_TYPE=1),
           regs("PDP_RDMA", "D_DATA_FORMAT", INPUT_DATA=prec),
           regs("PDP_RDMA", "D_OPERATION_MODE_CFG", SPLIT_NUM=split_num),
           regs("PDP_RDMA", "D_POOLING_KERNEL_CFG", KERNEL_WIDTH=kw - 1, KERNEL_STRIDE_WIDTH=sx - 1),
           regs("PDP_RDMA", "D_POOLING_PADDING_CFG", PAD_WIDTH=pl),
           regs("PDP_RDMA", "D_PARTIAL_WIDTH_IN", PARTIAL_WIDTH_IN_FIRST=ins[0] - 1,
                PARTIAL_WIDTH_IN_MID=max(ins[1] - 1, 0), PARTIAL_WIDTH_IN_LAST=max(ins[2] - 1, 0)),
           ("PDP_RDMA", "D_CYA", rng.getrandbits(32))]
    rng.shuffle(wr)
    if prec == 2 and rng.random() < 0.5:
        wr.append(regs("PDP", "D_NAN_FLUSH_TO_ZERO", NAN_TO_ZERO=1))
    desc = (f"{PRECISIONS[prec]} {W}x{H}x{C} {METHODS[method]} k{kw}x{kh} s{sx}x{sy} pad(l{pl},t{pt},r{pr},b{pb})={pad}"
            f" out {ow}x{oh}" + (f" split {split_num + 1} in{ins} out{outs}" if split_num else ""))
    return Layer(("PDP", "PDP_RDMA"), wr, [(dst, dn)], desc)


def generate(seed: int, cfg, *, layers: int | None = None) -> Program:
    """A random offline PDP program from ``seed``: 1..3 layers in alternating register groups."""
    rng = random.Random(f"pdp-{seed}")
    prog = Program("pdp", seed, TraceWriter(f"pdp_{seed}"))
    alloc = Alloc(rng)
    n = layers or rng.choice((1, 1, 2, 2, 3))
    prog.layers = [pdp_layer(rng, cfg, alloc, prog.writer) for _ in range(n)]
    emit(prog)
    return prog
