"""nv_full's CDP in FP16 (verif/model/cdp.py ``cdp_compute_fp16``) against a per-element
plain-Python reference, and a layer through the registers.

The reference follows the rules of the model's docstring (settled on NVIDIA's nv_full RTL) one
element at a time: Python loops over channels, the linear LUT index from exact ``Fraction``
arithmetic, the fixed addition order of the window written out; the fp operators it composes
(fp32/fp17 add and mul, the conversions) are the model's, tested on their own in test_fp.py.
"""
from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest

from hdl.config import get_config
from verif.gen.common import fp16_of as f16, fp32_of as f32
from verif.model import Nvdla, fp
from verif.model.cdp import cdp_compute_fp16
from verif.model.lut import LutParams

FULL = get_config("nv_full+feature_data_type=int8_int16_fp16")


def I(x) -> int:                       # noqa: E743 - a scalar bit pattern from a 0-d array
    return int(x)


def add32(a, b):
    return I(fp.fp_add(a, b, 8, 23))


def sub32(a, b):
    return I(fp.fp_sub(a, b, 8, 23))


def ref_index(d: int, entries: int, exponential: bool, offset: int, select: int):
    """('u'|'o'|'h', index, fraction) of one table for fp32 ``d = s - START``."""
    sign, e, m = d >> 31, (d >> 23) & 255, d & 0x7FFFFF
    if (e == 255 and m) or d == 0 or sign:
        return "u", 0, 0
    if exponential:
        if e - 127 < offset:
            return "u", 0, 0
        i, frac = e - 127 - offset, (m >> 7) & 0xFFFF
    else:
        v = Fraction(m | 1 << 23, 1 << 23) * Fraction(2) ** (e - 127 - select)
        i = v.numerator // v.denominator
        frac = int((v - i) * 65536)
    return ("o", 0, 0) if i >= entries - 1 else ("h", i, frac)


def ref_value(s, state, i, frac, T, vmin, vend, uscale, oscale):
    def chain(a, b, k17, t0):
        d17 = I(fp.fp32_to_fp17(sub32(a, b)))
        return I(fp.fp17_add(fp.fp17_mul(d17, k17), fp.fp16_to_fp17(t0)))
    if state == "h":
        return chain(I(fp.fp16_to_fp32(T[i + 1])), I(fp.fp16_to_fp32(T[i])),
                     I(fp.frac_to_fp17(frac, 16)), T[i])
    if state == "u":
        return chain(s, vmin, I(fp.fp16_to_fp17(uscale)), T[0])
    return chain(s, vend, I(fp.fp16_to_fp17(oscale)), T[-1])


def ref_cdp_fp16(d, C, le, lo, p, normalz, sq_bp, mul_bp, n2z):
    """Per-element reference: ``d`` [c][h][w] fp16 patterns (Cp channels)."""
    Cp, H, W = len(d), len(d[0]), len(d[0][0])

    def x17(c, h, w):
        if not 0 <= c < C:
            return 0
        v = d[c][h][w]
        if n2z and (v >> 10) & 31 == 31 and v & 0x3FF:
            v = 0
        return I(fp.fp16_to_fp17(v))

    def sq(c, h, w):
        v = I(fp.fp17_to_fp32(x17(c, h, w)))
        return I(fp.fp_mul(v, v, 8, 23))
    exp = p.le_function == 0
    off = p.le_index_offset
    le_min = add32(((off + 127) << 23) if exp and off not in (-128, -127) else 0, p.le_start & 0xFFFFFFFF)
    stats = dict(UFLOW=0, OFLOW=0, HYBRID=Cp * H * W, LE_HIT=0, LO_HIT=0, OUT_SATURATION=0)
    out = [[[0] * W for _ in range(H)] for _ in range(Cp)]
    for h in range(H):
        for w in range(W):
            for c in range(Cp):
                x = x17(c, h, w)
                if sq_bp:
                    s = I(fp.fp17_to_fp32(x))
                else:
                    s = add32(add32(sq(c - 1, h, w), sq(c + 1, h, w)), sq(c, h, w))
                    for k in range(2, normalz + 2):
                        s = add32(s, add32(sq(c - k, h, w), sq(c + k, h, w)))
                a = ref_index(sub32(s, p.le_start & 0xFFFFFFFF), 65, exp, off, p.le_index_select)
                b = ref_index(sub32(s, p.lo_start & 0xFFFFFFFF), 257, False, 0, p.lo_index_select)
                if a[0] == "h" and b[0] != "h":
                    use_lo, k = False, "LE_HIT"
                elif b[0] == "h" and a[0] != "h":
                    use_lo, k = True, "LO_HIT"
                elif a[0] == b[0] == "u":
                    use_lo, k = bool(p.uflow_priority), "UFLOW"
                elif a[0] == b[0] == "o":
                    use_lo, k = bool(p.oflow_priority), "OFLOW"
                else:
                    use_lo, k = bool(p.hybrid_priority), "HYBRID"
                stats[k] += 1
                if use_lo:
                    f = ref_value(s, *b, lo, p.lo_start & 0xFFFFFFFF, p.lo_end & 0xFFFFFFFF,
                                  p.lo_uflow_scale & 0xFFFF, p.lo_oflow_scale & 0xFFFF)
                else:
                    f = ref_value(s, *a, le, le_min, p.le_end & 0xFFFFFFFF,
                                  p.le_uflow_scale & 0xFFFF, p.le_oflow_scale & 0xFFFF)
                if (s >> 23) & 255 == 255 and s & 0x7FFFFF:        # NaN sum: NaN out of the LUT
                    f = ((s >> 31) << 16) | (63 << 10) | (s & 0x3FF)
                x_nan = (x >> 10) & 63 == 63 and x & 0x3FF
                o17 = (x if x_nan else f) if mul_bp else I(fp.fp17_mul(x, f))
                o = I(fp.fp17_to_fp16(o17))
                out[c][h][w] = o
                stats["OUT_SATURATION"] += (o & 0x7FFF) == 0x7BFF
    return out, stats


def draw_case(rng: random.Random):
    scale = rng.choice((-6, -2, 0, 3, 6))
    C, H, W = rng.randint(1, 40), rng.randint(1, 2), rng.randint(1, 3)
    Cp = -(-C // 16) * 16
    specials = (0x7C00, 0xFC00, 0x7E01, 0xFD55, 0x0001, 0x8000, 0x7BFF, 0x0000)
    d = [[[rng.choice(specials) if rng.random() < 0.05 else
           f16(rng.uniform(-2, 2) * 2.0 ** (scale + rng.randint(-3, 2)))
           for _ in range(W)] for _ in range(H)] for _ in range(Cp)]
    lg = 2 * scale + rng.randint(-2, 4)
    wild = rng.random() < 0.2
    s8 = lambda v: max(-128, min(127, v))                          # noqa: E731
    p = LutParams(
        le_function=rng.randint(0, 1),
        le_index_offset=rng.randint(-128, 127) if wild else s8(lg - 30 + rng.randint(-10, 10)),
        le_index_select=rng.randint(-128, 127) if wild else s8(lg - 6 + rng.randint(-3, 3)),
        lo_index_select=rng.randint(-128, 127) if wild else s8(lg - 8 + rng.randint(-3, 3)),
        le_start=f32(rng.choice((0.0, rng.uniform(-1, 1) * 2.0 ** lg))) | (rng.getrandbits(6) << 32),
        le_end=f32(rng.uniform(0, 2) * 2.0 ** lg),
        lo_start=f32(rng.choice((0.0, rng.uniform(-1, 1) * 2.0 ** lg))),
        lo_end=f32(rng.uniform(0, 2) * 2.0 ** lg) | (rng.getrandbits(6) << 32),
        le_uflow_scale=f16(rng.uniform(-1, 1)), le_oflow_scale=rng.choice((f16(0.01), 0x7C00)),
        le_uflow_shift=rng.randint(-16, 15), le_oflow_shift=rng.randint(-16, 15),
        lo_uflow_scale=f16(rng.uniform(-4, 4)), lo_oflow_scale=f16(rng.uniform(-1, 1) * 2 ** -8),
        lo_uflow_shift=0, lo_oflow_shift=0, uflow_priority=rng.randint(0, 1),
        oflow_priority=rng.randint(0, 1), hybrid_priority=rng.randint(0, 1))
    top, a = 2.0 ** rng.randint(-3, 3), 2.0 ** rng.randint(-5, 1)
    le = [f16(top * (1 + a * i) ** -0.75) for i in range(65)]
    lo = [rng.choice(specials) if rng.random() < 0.02 else f16(rng.uniform(-3, 3)) for _ in range(257)]
    return d, C, le, lo, p, rng.randint(0, 3), rng.random() < 0.2, rng.random() < 0.2, rng.random() < 0.5


@pytest.mark.parametrize("seed", range(12))
def test_cdp_fp16_datapath_random(seed):
    d, C, le, lo, p, normalz, sq_bp, mul_bp, n2z = draw_case(random.Random(300 + seed))
    got, stats = cdp_compute_fp16(np.array(d, np.int64), C, np.array(le, np.int64),
                                  np.array(lo, np.int64), p, normalz, sq_bp, mul_bp, n2z)
    want, want_stats = ref_cdp_fp16(d, C, le, lo, p, normalz, sq_bp, mul_bp, n2z)
    assert got.tolist() == want
    assert stats == want_stats


def test_cdp_fp16_cases_cover_every_table_outcome():
    """The random cases above reach hits of both tables, underflows, overflows, hybrids, NaN
    sums and saturated outputs (else the comparison would prove little)."""
    seen = {}
    for seed in range(12):
        d, C, le, lo, p, normalz, sq_bp, mul_bp, n2z = draw_case(random.Random(300 + seed))
        out, stats = cdp_compute_fp16(np.array(d, np.int64), C, np.array(le, np.int64),
                                      np.array(lo, np.int64), p, normalz, sq_bp, mul_bp, n2z)
        stats["HYBRID"] -= out.size
        stats["NAN"] = int(fp.fp16_isnan(out).sum())
        for k, v in stats.items():
            seen[k] = seen.get(k, 0) + v
    assert all(v > 0 for v in seen.values()), seen


def test_cdp_fp16_layer_through_registers():
    """An FP16 layer programmed through CDP_RDMA/CDP registers: the converters' registers and
    the START/END HIGH words are ignored, the output cube is the datapath's, and the LUT
    counters (with W*H*Cp phantom hybrids) and D_OUT_SATURATION land in the group's
    registers."""
    rng = random.Random(7)
    W, H, C = 2, 2, 20
    _, _, le, lo, p, *_ = draw_case(rng)
    cube = np.array([[[f16(rng.uniform(-8, 8)) for _ in range(W)] for _ in range(H)] for _ in range(32)],
                    np.int64)
    m = Nvdla(FULL)
    src, dst, line, surf = 0x1000, 0x8000, W * 32, W * H * 32
    for c in range(32):
        for h in range(H):
            for w in range(W):
                a = src + (c // 16) * surf + h * line + w * 32 + (c % 16) * 2
                m.mem.write(a, int(cube[c, h, w]).to_bytes(2, "little"))

    def wr(unit, reg, v):
        m.write(f"NVDLA_{unit}.{reg}_0", v)
    wr("CDP", "S_LUT_ACCESS_CFG", 1 << 17)                                # LE table, write
    for v in le:
        wr("CDP", "S_LUT_ACCESS_DATA", v)
    wr("CDP", "S_LUT_ACCESS_CFG", (1 << 16) | (1 << 17))                  # LO table, write
    for v in lo:
        wr("CDP", "S_LUT_ACCESS_DATA", v)
    regs = {"S_LUT_CFG": p.le_function | (p.uflow_priority << 4) | (p.oflow_priority << 5)
            | (p.hybrid_priority << 6),
            "S_LUT_INFO": (p.le_index_offset & 0xFF) | ((p.le_index_select & 0xFF) << 8)
            | ((p.lo_index_select & 0xFF) << 16),
            "S_LUT_LE_SLOPE_SCALE": (p.le_uflow_scale & 0xFFFF) | ((p.le_oflow_scale & 0xFFFF) << 16),
            "S_LUT_LO_SLOPE_SCALE": (p.lo_uflow_scale & 0xFFFF) | ((p.lo_oflow_scale & 0xFFFF) << 16),
            "S_LUT_LE_SLOPE_SHIFT": 0x3FF, "S_LUT_LO_SLOPE_SHIFT": 0x155,
            "D_DATIN_OFFSET": 0x1234, "D_DATIN_SCALE": 0x8001, "D_DATIN_SHIFTER": 7,
            "D_DATOUT_OFFSET": 0x12345678, "D_DATOUT_SCALE": 0x4321, "D_DATOUT_SHIFTER": 33,
            "D_DATA_FORMAT": 2, "D_LRN_CFG": 1, "D_FUNC_BYPASS": 0, "D_NAN_FLUSH_TO_ZERO": 0,
            "D_DST_BASE_ADDR_LOW": dst, "D_DST_LINE_STRIDE": line, "D_DST_SURFACE_STRIDE": surf,
            "D_DST_DMA_CFG": 1}
    for name, v in (("LE_START", p.le_start), ("LE_END", p.le_end), ("LO_START", p.lo_start),
                    ("LO_END", p.lo_end)):
        regs[f"S_LUT_{name}_LOW"] = v & 0xFFFFFFFF
        regs[f"S_LUT_{name}_HIGH"] = 0x2A
    for r, v in regs.items():
        wr("CDP", r, v)
    for r, v in {"D_DATA_CUBE_WIDTH": W - 1, "D_DATA_CUBE_HEIGHT": H - 1, "D_DATA_CUBE_CHANNEL": C - 1,
                 "D_SRC_BASE_ADDR_LOW": src, "D_SRC_LINE_STRIDE": line, "D_SRC_SURFACE_STRIDE": surf,
                 "D_SRC_DMA_CFG": 1, "D_DATA_FORMAT": 2}.items():
        wr("CDP_RDMA", r, v)
    wr("CDP_RDMA", "D_OP_ENABLE", 1)
    wr("CDP", "D_OP_ENABLE", 1)
    want, stats = ref_cdp_fp16(cube.tolist(), C, le, lo, p, 1, False, False, False)
    for c in range(32):
        for h in range(H):
            for w in range(W):
                a = dst + (c // 16) * surf + h * line + w * 32 + (c % 16) * 2
                assert int.from_bytes(m.mem.read(a, 2), "little") == want[c][h][w], (c, h, w)
    for k, reg in (("LE_HIT", "D_PERF_LUT_LE_HIT"), ("LO_HIT", "D_PERF_LUT_LO_HIT"),
                   ("UFLOW", "D_PERF_LUT_UFLOW"), ("OFLOW", "D_PERF_LUT_OFLOW"),
                   ("HYBRID", "D_PERF_LUT_HYBRID"), ("OUT_SATURATION", "D_OUT_SATURATION")):
        assert m.read(f"NVDLA_CDP.{reg}_0") == stats[k], reg
    assert m.read("NVDLA_CDP.D_PERF_LUT_HYBRID_0") >= W * H * 32          # the phantom hybrids
