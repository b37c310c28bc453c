"""Random CDP (LRN) register programs (unit description "Cross Channel Data Processor",
v1_ias_lut-programming.rst, programming guide "LUT" limitations for CDP INT8).

Drawn per program: the two LUT tables (LE 65 and LO 257 int16 entries: random, smooth or
constant), S_LUT_CFG (LE exponential or linear, underflow/overflow/hybrid priorities),
S_LUT_INFO within the guide's CDP INT8 ranges (LE select [-6, 15], LO select [-8, 13],
LE offset [-64, 20]), START/END (38-bit) with END-START = 1<<(select+6) / 1<<(select+8) in
linear mode, slopes (int16 scales, 5-bit signed shifts). Per layer: cube 1..12 x 1..6 x
1..48, strides with gaps, NORMALZ_LEN (3/5/7/9 channels), SQSUM/MUL bypasses, the input
converter (offset, scale, shifter 0..31) and output converter (offset, scale, shifter 0..63).
The LUT registers are single registers shared by both groups: written once before the layers.
On a configuration with int16/fp16 the program's precision is drawn (INT16: wider START/END and
select ranges; FP16: fp16 tables and data of one magnitude, fp32 START/END, ``_fp16_lut``).
"""
from __future__ import annotations

import random

from verif.gen.common import (FP16_SCALES, Alloc, Layer, Program, cube_extent, cube_strides, draw_precision,
                              emit, fp16_bytes, fp16_of, fp16_values, fp32_of, rand_bytes, signed,
                              small_biased)
from verif.gen.writer import TraceWriter, reg_value

LE_ENTRIES, LO_ENTRIES = 65, 257


def _table(rng: random.Random, n: int) -> list[int]:
    kind = rng.randrange(3)
    if kind == 0:
        return [rng.randint(-32768, 32767) for _ in range(n)]
    if kind == 1:       # smooth and decreasing, as an LRN table
        top = rng.randint(1, 32767)
        return [int(top / (1 + i / rng.randint(1, 64))) for i in range(n)]
    return [rng.randint(-32768, 32767)] * n


def _fp16_table(rng: random.Random, n: int) -> list[int]:
    """LUT entries as fp16 patterns: random (specials included), smooth and decreasing as an
    LRN table ``top * (1 + a*i) ** -beta``, or constant."""
    kind = rng.randrange(3)
    if kind == 0:
        return fp16_values(rng, n, rng.choice(FP16_SCALES[:4]))
    if kind == 1:
        top, a, beta = 2.0 ** rng.randint(-4, 4), 2.0 ** rng.randint(-6, 2), rng.uniform(0.5, 1.0)
        return [fp16_of(top * (1 + a * i) ** -beta) for i in range(n)]
    return fp16_values(rng, 1, 0) * n


def _fp16_lut(rng: random.Random, scale: int) -> tuple[list, str]:
    """FP16 LUT registers (verif/model/cdp.py cdp_compute_fp16) for data of magnitude about
    ``2**scale``: window sums s near 2**(2*scale); START/END fp32 patterns in the LOW words
    (HIGH words and slope shifts random: unused), 8-bit signed INDEX_SELECT / LE_INDEX_OFFSET
    mostly placing s inside the tables, sometimes anywhere; slope scales fp16 (specials
    included)."""
    lg = 2 * scale + rng.randint(-2, 4)                   # log2 of the sums' magnitude
    wild = rng.random() < 0.15
    linear = rng.random() < 0.5
    le_sel = rng.randint(-128, 127) if wild else max(-128, min(127, lg - 6 + rng.randint(-3, 3)))
    lo_sel = rng.randint(-128, 127) if wild else max(-128, min(127, lg - 8 + rng.randint(-3, 3)))
    le_off = rng.randint(-128, 127) if wild else max(-128, min(127, lg - 30 + rng.randint(-12, 12)))

    def start() -> float:
        r = rng.random()
        return 0.0 if r < 0.3 else rng.uniform(-1, 1) * 2.0 ** (lg + rng.randint(-6, 1))
    le_start, lo_start = start(), start()
    le_end = le_start + 64 * 2.0 ** le_sel if linear and rng.random() < 0.7 else \
        le_start + rng.uniform(0, 2) * 2.0 ** lg
    lo_end = lo_start + 256 * 2.0 ** lo_sel if rng.random() < 0.7 else lo_start + rng.uniform(0, 2) * 2.0 ** lg
    w = [("CDP", "S_LUT_CFG", reg_value("CDP", "S_LUT_CFG", LUT_LE_FUNCTION=int(linear),
          LUT_UFLOW_PRIORITY=rng.randint(0, 1), LUT_OFLOW_PRIORITY=rng.randint(0, 1),
          LUT_HYBRID_PRIORITY=rng.randint(0, 1))),
         ("CDP", "S_LUT_INFO", reg_value("CDP", "S_LUT_INFO", LUT_LE_INDEX_OFFSET=le_off & 0xFF,
          LUT_LE_INDEX_SELECT=le_sel & 0xFF, LUT_LO_INDEX_SELECT=lo_sel & 0xFF))]
    for name, v in (("LE_START", le_start), ("LE_END", le_end), ("LO_START", lo_start), ("LO_END", lo_end)):
        v = max(-3e38, min(3e38, v))
        w += [("CDP", f"S_LUT_{name}_LOW", fp32_of(v)), ("CDP", f"S_LUT_{name}_HIGH", rng.getrandbits(6))]
    for t in ("LE", "LO"):
        u, o = fp16_values(rng, 2, rng.choice((-8, -4, 0)))
        w.append(("CDP", f"S_LUT_{t}_SLOPE_SCALE", u | (o << 16)))
        w.append(("CDP", f"S_LUT_{t}_SLOPE_SHIFT", rng.getrandbits(10)))
    desc = (f"fp16 LUT {'linear' if linear else 'exp'} le_sel={le_sel} le_off={le_off} lo_sel={lo_sel} "
            f"le_start={le_start:.4g} lo_start={lo_start:.4g}")
    return w, desc


def _lut_prologue(rng: random.Random, prec: int = 0, scale: int = 0) -> tuple[list, str]:
    w = []
    for tid, n in ((0, LE_ENTRIES), (1, LO_ENTRIES)):
        w.append(("CDP", "S_LUT_ACCESS_CFG", reg_value("CDP", "S_LUT_ACCESS_CFG", LUT_ADDR=0,
                                                        LUT_TABLE_ID=tid, LUT_ACCESS_TYPE=1)))
        w += [("CDP", "S_LUT_ACCESS_DATA", v & 0xFFFF)
              for v in (_fp16_table(rng, n) if prec == 2 else _table(rng, n))]
    if prec == 2:
        lut, desc = _fp16_lut(rng, scale)
        return w + lut, desc
    linear = rng.random() < 0.5
    le_sel, lo_sel = rng.randint(-6, 15), rng.randint(-8, 13)
    le_off = rng.randint(-64, 20) if rng.random() < 0.2 else rng.randint(-2, 12)
    le_start = rng.randint(-300, 3000) if rng.random() < 0.8 else signed(rng, 22)
    lo_start = rng.randint(-300, 3000) if rng.random() < 0.8 else signed(rng, 22)
    if prec == 1:
        # INT16: square sums up to 2**36, INDEX_SELECT 7-bit signed (verif/model/cdp.py WIDTHS)
        sc = rng.randint(0, 18)
        le_sel, lo_sel = le_sel + sc, lo_sel + sc
        le_off = rng.randint(-64, 40) if rng.random() < 0.2 else rng.randint(-2, 30)
        le_start, lo_start = le_start << sc, lo_start << sc
    le_end = le_start + (1 << (le_sel + 6)) if linear else le_start + rng.randint(1, 1 << (22 + 14 * prec))
    lo_end = lo_start + (1 << (lo_sel + 8))
    w.append(("CDP", "S_LUT_CFG", reg_value("CDP", "S_LUT_CFG", LUT_LE_FUNCTION=int(linear),
              LUT_UFLOW_PRIORITY=rng.randint(0, 1), LUT_OFLOW_PRIORITY=rng.randint(0, 1),
              LUT_HYBRID_PRIORITY=rng.randint(0, 1))))
    w.append(("CDP", "S_LUT_INFO", reg_value("CDP", "S_LUT_INFO", LUT_LE_INDEX_OFFSET=le_off,
              LUT_LE_INDEX_SELECT=le_sel, LUT_LO_INDEX_SELECT=lo_sel)))
    for name, v in (("LE_START", le_start), ("LE_END", le_end), ("LO_START", lo_start), ("LO_END", lo_end)):
        v &= (1 << 38) - 1
        w += [("CDP", f"S_LUT_{name}_LOW", v & 0xFFFF_FFFF), ("CDP", f"S_LUT_{name}_HIGH", v >> 32)]
    for t in ("LE", "LO"):
        w.append(("CDP", f"S_LUT_{t}_SLOPE_SCALE", (signed(rng, 16) & 0xFFFF) | ((signed(rng, 16) & 0xFFFF) << 16)))
        w.append(("CDP", f"S_LUT_{t}_SLOPE_SHIFT", rng.getrandbits(5) | (rng.getrandbits(5) << 5)))
    desc = (f"LUT {'linear' if linear else 'exp'} le_sel={le_sel} le_off={le_off} lo_sel={lo_sel} "
            f"le_start={le_start} lo_start={lo_start}")
    return w, desc


def cdp_layer(rng: random.Random, cfg, alloc: Alloc, w: TraceWriter, prec: int = 0,
              scale: int = 0) -> Layer:
    """One random CDP layer (module docstring) of INPUT_DATA ``prec`` (0 INT8, 1 INT16: two-byte
    elements, ``atom_bytes // 2`` channels per atom; 2 FP16: as INT16, data of magnitude about
    ``2**scale`` with specials, the converters' registers random and unused)."""
    ab = cfg.atom_bytes
    atom = cfg.memory_atomic if prec == 0 else ab // 2
    W, H, C = rng.randint(1, 12), rng.randint(1, 6), rng.randint(1, 48)
    line, surf = cube_strides(rng, W, H, ab)
    n = cube_extent(W, H, C, line, surf, atom, ab)
    src = alloc.take(n)
    w.mem_load(src, fp16_bytes(rng, n, scale) if prec == 2 else rand_bytes(rng, n))
    dline, dsurf = cube_strides(rng, W, H, ab)
    dn = cube_extent(W, H, C, dline, dsurf, atom, ab)
    dst = alloc.take(dn)
    lrn = rng.randrange(4)
    sq_bypass, mul_bypass = int(rng.random() < 0.2), int(rng.random() < 0.2)
    din = ((rng.randint(-128, 127) if prec == 0 else signed(rng, 16)) & 0xFFFF,
           signed(rng, 16) & 0xFFFF, small_biased(rng, 31, 4))
    dout = (signed(rng, 25 if prec == 0 else 32) & 0xFFFF_FFFF, signed(rng, 16) & 0xFFFF,
            small_biased(rng, 63, 20))
    wr = [("CDP_RDMA", "D_DATA_CUBE_WIDTH", W - 1), ("CDP_RDMA", "D_DATA_CUBE_HEIGHT", H - 1),
          ("CDP_RDMA", "D_DATA_CUBE_CHANNEL", C - 1),
          ("CDP_RDMA", "D_SRC_BASE_ADDR_LOW", src), ("CDP_RDMA", "D_SRC_BASE_ADDR_HIGH", 0),
          ("CDP_RDMA", "D_SRC_LINE_STRIDE", line), ("CDP_RDMA", "D_SRC_SURFACE_STRIDE", surf),
          ("CDP_RDMA", "D_SRC_DMA_CFG", 1), ("CDP_RDMA", "D_SRC_COMPRESSION_EN", 0),
          ("CDP_RDMA", "D_OPERATION_MODE", 0), ("CDP_RDMA", "D_DATA_FORMAT", prec),
          ("CDP_RDMA", "D_CYA", rng.getrandbits(32)),
          ("CDP", "D_FUNC_BYPASS", sq_bypass | (mul_bypass << 1)),
          ("CDP", "D_DST_BASE_ADDR_LOW", dst), ("CDP", "D_DST_BASE_ADDR_HIGH", 0),
          ("CDP", "D_DST_LINE_STRIDE", dline), ("CDP", "D_DST_SURFACE_STRIDE", dsurf),
          ("CDP", "D_DST_DMA_CFG", 1), ("CDP", "D_DST_COMPRESSION_EN", 0),
          ("CDP", "D_DATA_FORMAT", prec), ("CDP", "D_LRN_CFG", lrn),
          ("CDP", "D_DATIN_OFFSET", din[0]), ("CDP", "D_DATIN_SCALE", din[1]),
          ("CDP", "D_DATIN_SHIFTER", din[2]),
          ("CDP", "D_DATOUT_OFFSET", dout[0]), ("CDP", "D_DATOUT_SCALE", dout[1]),
          ("CDP", "D_DATOUT_SHIFTER", dout[2]),
          ("CDP", "D_NAN_FLUSH_TO_ZERO", rng.randint(0, 1)),
          ("CDP", "D_PERF_ENABLE", rng.randint(0, 3)), ("CDP", "D_CYA", rng.getrandbits(32))]
    rng.shuffle(wr)
    desc = (("", "int16 ", "fp16 ")[prec] + f"{W}x{H}x{C} lrn{3 + 2 * lrn} sqsum_bypass={sq_bypass} mul_bypass={mul_bypass} "
            f"in_cvt{din} out_cvt{dout}")
    return Layer(("CDP", "CDP_RDMA"), wr, [(dst, dn)], desc)


def generate(seed: int, cfg, *, layers: int | None = None) -> Program:
    """A random CDP program from ``seed``: a LUT, then 1..3 layers in alternating groups."""
    rng = random.Random(f"cdp-{seed}")
    prog = Program("cdp", seed, TraceWriter(f"cdp_{seed}"))
    alloc = Alloc(rng)
    # one precision for the whole program (its LUT is programmed for one)
    prec = draw_precision(rng, cfg)
    scale = rng.choice(FP16_SCALES) if prec == 2 else 0
    prologue, lut = _lut_prologue(rng, prec, scale)
    n = layers or rng.choice((1, 1, 2, 2, 3))
    prog.layers = [cdp_layer(rng, cfg, alloc, prog.writer, prec, scale) for _ in range(n)]
    prog.layers[0].desc = f"{lut}; {prog.layers[0].desc}"
    emit(prog, prologue)
    return prog
