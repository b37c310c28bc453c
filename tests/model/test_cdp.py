"""CDP model (verif/model/cdp.py, verif/model/lut.py) against a naive plain-Python LRN.

The reference below is written from the documents (v1_ias_unit_description.rst CDP formula,
v1_ias_lut-programming.rst, v1_ias_precision.rst convertors) plus the widths/edge rules settled
from NVIDIA's RTL (listed in the model's docstrings), one sample at a time with Python integers
and ``fractions.Fraction`` rounding, so it shares no code with the vectorised model.
"""
from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest

from hdl.config import NV_SMALL
from verif.model import Nvdla
from verif.model.cdp import cdp_compute, check_lut_limits
from verif.model.formats import LimitationWarning
from verif.model.lut import LutParams, lut_lookup


# ------------------------------------------------------------------ naive reference
def s_ext(v, bits):
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


def rnd_half_away(num, shift):
    """num / 2**shift rounded half away from zero; num * 2**-shift for a negative shift."""
    if shift < 0:
        return num * 2 ** (-shift)
    q = Fraction(num, 2 ** shift)
    r = math.floor(abs(q) + Fraction(1, 2))
    return r if q >= 0 else -r


def clamp(v, bits):
    return max(-(2 ** (bits - 1)), min(2 ** (bits - 1) - 1, v))


def naive_table(x, T, p, which, index_bits=22):
    """(state, value) of one table for sample x: state in {'hit', 'uf', 'of'}; START seen in
    ``index_bits`` bits (22 for INT8, 38 for INT16)."""
    n = len(T) - 1
    exp = which == "le" and p.le_function == 0
    start = p.le_start if which == "le" else p.lo_start
    end = p.le_end if which == "le" else p.lo_end
    sel = p.le_index_select if which == "le" else p.lo_index_select
    start22 = s_ext(start, index_bits)
    state, idx, frac = None, 0, 0
    if x <= start22:
        state = "uf"
    else:
        dlt = x - start22
        if exp:
            i = dlt.bit_length() - 1
            frac = (dlt - 2 ** i) * 2 ** 16 // 2 ** i
            idx = i - p.le_index_offset
            if p.le_index_offset >= 0 and i < p.le_index_offset:
                state = "uf"
        elif sel >= 0:
            idx, frac = dlt // 2 ** sel, (dlt % 2 ** sel) * 2 ** 16 // 2 ** sel
        else:
            idx = dlt * 2 ** (-sel)
        if state is None:
            state = "of" if idx >= n else "hit"
    pre = "le" if which == "le" else "lo"
    if state == "hit":
        y = T[idx] + rnd_half_away((T[idx + 1] - T[idx]) * frac, 16)
    elif state == "uf":
        # MIN keeps 39 bits (NV_NVDLA_CDP_DP_intp.v lut_le_min[38:0])
        lo_edge = s_ext(start + (2 ** p.le_index_offset if exp and p.le_index_offset >= 0 else 0), 39)
        y = T[0] + rnd_half_away((x - lo_edge) * getattr(p, pre + "_uflow_scale"),
                                 getattr(p, pre + "_uflow_shift"))
    else:
        y = T[n] + rnd_half_away((x - end) * getattr(p, pre + "_oflow_scale"),
                                 getattr(p, pre + "_oflow_shift"))
    return state, clamp(y, 16)


def naive_lut(x, le, lo, p, index_bits=22):
    """(value, statistic name) for one sample (lut-programming.rst Hit/Miss + statistics)."""
    xs, xv = naive_table(x, le, p, "le", index_bits)
    ys, yv = naive_table(x, lo, p, "lo", index_bits)
    if xs == "hit" and ys != "hit":
        return xv, "LE_HIT"
    if ys == "hit" and xs != "hit":
        return yv, "LO_HIT"
    if xs == ys == "uf":
        return (yv if p.uflow_priority else xv), "UFLOW"
    if xs == ys == "of":
        return (yv if p.oflow_priority else xv), "OFLOW"
    return (yv if p.hybrid_priority else xv), "HYBRID"


def naive_cvt(v, offset, scale, shifter, in_bits, out_bits):
    if shifter >= in_bits:
        return 0
    return clamp(rnd_half_away((v - offset) * scale, shifter), out_bits)


#: INT8 / INT16 (nv_full): data bits, input converter output bits, DATOUT_OFFSET bits, output
#: converter product bits, START bits of the LUT index (v1_ias_precision.rst "CDP convertors";
#: nv_full's widths as NVIDIA's nvdlav1 sources give them)
NAIVE_WIDTHS = {0: (8, 9, 25, 42, 22), 1: (16, 17, 32, 50, 38)}


def naive_cdp(d, valid_c, le, lo, p, normalz_len, sqsum_bypass, mul_bypass, datin, datout, prec=0):
    """LRN one element at a time: d is a nested list [c][h][w] of int8 (int16 with prec 1)."""
    db, ob, offb, pb, ib = NAIVE_WIDTHS[prec]
    C, H, W = len(d), len(d[0]), len(d[0][0])
    x = [[[0] * W for _ in range(H)] for _ in range(C)]
    for c in range(C):
        for h in range(H):
            for w in range(W):
                if c < valid_c:
                    x[c][h][w] = naive_cvt(d[c][h][w], s_ext(datin[0], db), s_ext(datin[1], 16),
                                           datin[2], ob + 16, ob)
    half = normalz_len + 1
    out = [[[0] * W for _ in range(H)] for _ in range(C)]
    stats = {"UFLOW": 0, "OFLOW": 0, "HYBRID": 0, "LE_HIT": 0, "LO_HIT": 0}
    for c in range(C):
        for h in range(H):
            for w in range(W):
                if sqsum_bypass:
                    s = x[c][h][w]
                else:
                    s = sum(x[i][h][w] ** 2 for i in range(max(0, c - half), min(C, c + half + 1)))
                f, kind = naive_lut(s, le, lo, p, ib)
                stats[kind] += 1
                v = f if mul_bypass else f * x[c][h][w]
                out[c][h][w] = naive_cvt(v, s_ext(datout[0], offb), s_ext(datout[1], 16),
                                         datout[2], pb, db)
    return out, stats


# ------------------------------------------------------------------ random configurations
def make_params(rng, exp=None, **kw):
    """Random LUT parameters meeting the programming guide's CDP INT8 limitations."""
    exp = rng.random() < 0.5 if exp is None else exp
    lo_sel = rng.randint(-8, 13)
    lo_start = rng.randint(-300, 3000)
    le_sel = rng.randint(-6, 15)
    le_off = rng.randint(-64, 20)
    le_start = rng.randint(-300, 3000)
    if exp:
        le_end = le_start + 2 ** max(0, min(le_off + 64, 30))
    else:
        le_end = le_start + 2 ** (le_sel + 6)
    base = dict(
        le_function=0 if exp else 1, le_index_offset=le_off if exp else rng.randint(-128, 127),
        le_index_select=le_sel, lo_index_select=lo_sel,
        le_start=le_start, le_end=le_end, lo_start=lo_start, lo_end=lo_start + 2 ** (lo_sel + 8),
        le_uflow_scale=rng.randint(-32768, 32767), le_oflow_scale=rng.randint(-32768, 32767),
        le_uflow_shift=rng.randint(-16, 15), le_oflow_shift=rng.randint(-16, 15),
        lo_uflow_scale=rng.randint(-32768, 32767), lo_oflow_scale=rng.randint(-32768, 32767),
        lo_uflow_shift=rng.randint(-16, 15), lo_oflow_shift=rng.randint(-16, 15),
        uflow_priority=rng.randint(0, 1), oflow_priority=rng.randint(0, 1),
        hybrid_priority=rng.randint(0, 1))
    base.update(kw)
    return LutParams(**base)


def make_tables(rng):
    return ([rng.randint(-32768, 32767) for _ in range(65)],
            [rng.randint(-32768, 32767) for _ in range(257)])


# ------------------------------------------------------------------ LUT engine
@pytest.mark.parametrize("seed", range(12))
def test_lut_lookup_random(seed):
    rng = random.Random(seed)
    p = make_params(rng)
    le, lo = make_tables(rng)
    xs = [rng.randint(-256, 589824) for _ in range(300)]
    # the edges of both tables, in exponential mode also the powers of two around START
    for s in (p.le_start, p.le_end, p.lo_start, p.lo_end):
        xs += [s - 1, s, s + 1]
    xs += [p.le_start + 2 ** k + e for k in range(0, 21) for e in (-1, 0, 1)]
    xs = [x for x in xs if -256 <= x < 2 ** 21]
    y, stats = lut_lookup(np.array(xs, np.int64), np.array(le, np.int64), np.array(lo, np.int64),
                          p, 22, 21)
    want_stats = {"UFLOW": 0, "OFLOW": 0, "HYBRID": 0, "LE_HIT": 0, "LO_HIT": 0}
    for x, got in zip(xs, y.tolist()):
        want, kind = naive_lut(x, le, lo, p)
        want_stats[kind] += 1
        assert got == want, (x, p)
    assert stats == want_stats


def _only_le(p_kw):
    """Parameters where LO always underflows (start above every input) and LE wins on uflow
    as well, so the output is LE's alone."""
    return dict(lo_start=2 ** 20 + 100, lo_end=2 ** 20 + 100 + 256, lo_index_select=0,
                uflow_priority=0, hybrid_priority=0, **p_kw)


def test_lut_exponential_edges():
    """Exponential LE: at START (underflow: x <= START), START+1 (log2 = 0), exact powers of two,
    below START, above END, zero and negative inputs, with LE_INDEX_OFFSET positive and negative."""
    le = [100 * i - 3000 for i in range(65)]
    lo = [7] * 257
    for off, start in ((3, 10), (0, 0), (-5, -20), (-14, 0)):
        p = LutParams(**_only_le(dict(
            le_function=0, le_index_offset=off, le_index_select=0,
            le_start=start, le_end=start + 2 ** 20, le_uflow_scale=3, le_oflow_scale=-2,
            le_uflow_shift=1, le_oflow_shift=-2, lo_uflow_scale=0, lo_oflow_scale=0,
            lo_uflow_shift=0, lo_oflow_shift=0, oflow_priority=0)))
        xs = [start - 5, start - 1, start, start + 1, start + 2, start + 3, 0, -1, -256,
              start + 2 ** 20, start + 2 ** 20 + 7, 2 ** 20 + 100]
        xs += [start + 2 ** k for k in range(21)] + [start + 2 ** k - 1 for k in range(1, 21)]
        xs = [x for x in xs if x <= 2 ** 20 + 100]
        y, _ = lut_lookup(np.array(xs, np.int64), np.array(le, np.int64), np.array(lo, np.int64),
                          p, 22, 21)
        for x, got in zip(xs, y.tolist()):
            assert got == naive_lut(x, le, lo, p)[0], (off, start, x)
        # spot facts independent of the reference: at START it is an underflow from MIN
        at_start = y[xs.index(start)]
        lo_edge = start + (2 ** off if off >= 0 else 0)
        assert at_start == le[0] + rnd_half_away((start - lo_edge) * 3, 1)
        # START + 2**k with k >= offset hits entry k - offset exactly (fraction 0)
        for k in range(max(off, 0), 21):
            if 0 <= k - off < 64 and start + 2 ** k in xs:
                assert y[xs.index(start + 2 ** k)] == le[k - off]


def test_lut_linear_edges():
    """Linear tables: START is an underflow, END is an overflow, the last entry before END
    interpolates towards entry N, a negative INDEX_SELECT steps one entry per 2**-sel... inputs."""
    le = [(-1) ** i * 37 * i for i in range(65)]
    lo = [5 * i - 600 for i in range(257)]
    for le_sel, lo_sel in ((0, 0), (3, -2), (-2, 5)):
        p = LutParams(le_function=1, le_index_offset=0, le_index_select=le_sel,
                      lo_index_select=lo_sel, le_start=100, le_end=100 + 2 ** (le_sel + 6),
                      lo_start=-50, lo_end=-50 + 2 ** (lo_sel + 8), le_uflow_scale=-7,
                      le_oflow_scale=11, le_uflow_shift=2, le_oflow_shift=0, lo_uflow_scale=9,
                      lo_oflow_scale=-5, lo_uflow_shift=-3, lo_oflow_shift=4, uflow_priority=1,
                      oflow_priority=0, hybrid_priority=1)
        xs = list(range(-80, 100 + 2 ** (le_sel + 6) + 40))
        xs += [p.lo_end - 1, p.lo_end, p.lo_end + 1, 2 ** 21 - 1]
        y, stats = lut_lookup(np.array(xs, np.int64), np.array(le, np.int64),
                              np.array(lo, np.int64), p, 22, 21)
        kinds = []
        for x, got in zip(xs, y.tolist()):
            want, kind = naive_lut(x, le, lo, p)
            kinds.append(kind)
            assert got == want, (le_sel, lo_sel, x)
        assert stats == {k: kinds.count(k) for k in stats}


def test_round_half_away_and_saturation_of_slopes():
    """Underflow slopes with huge START distances saturate to int16 either way."""
    le, lo = [0] * 65, [0] * 257
    p = LutParams(le_function=1, le_index_offset=0, le_index_select=0, lo_index_select=0,
                  le_start=-(2 ** 37), le_end=-(2 ** 37) + 64, lo_start=2 ** 21 - 256,
                  lo_end=2 ** 21, le_uflow_scale=32767, le_oflow_scale=32767, le_uflow_shift=-16,
                  le_oflow_shift=-16, lo_uflow_scale=-32768, lo_oflow_scale=1, lo_uflow_shift=-16,
                  lo_oflow_shift=0, uflow_priority=0, oflow_priority=0, hybrid_priority=0)
    xs = np.array([-256, 0, 5, 1000, 2 ** 20], np.int64)
    y, _ = lut_lookup(xs, np.array(le, np.int64), np.array(lo, np.int64), p, 22, 21)
    assert y.tolist() == [naive_lut(int(x), le, lo, p)[0] for x in xs]


# ------------------------------------------------------------------ whole datapath
def _datapath_case(rng, prec):
    """A random cube, LUT and converters (INT8, or nv_full's INT16 with the LUT's START, ranges
    and INDEX_SELECT scaled up to its square sums of up to 2**36): cdp_compute against
    naive_cdp, outputs and statistics."""
    epa, lim = (8, 128) if prec == 0 else (16, 32768)
    C, H, W = rng.randint(1, 20), rng.randint(1, 3), rng.randint(1, 3)
    Cp = -(-C // epa) * epa
    d = [[[rng.randint(-lim, lim - 1) for _ in range(W)] for _ in range(H)] for _ in range(Cp)]
    p = make_params(rng)
    if prec:
        sc = rng.randint(0, 20)
        p = LutParams(**{**p.__dict__, "le_start": p.le_start << sc, "le_end": p.le_end << sc,
                         "lo_start": p.lo_start << sc, "lo_end": p.lo_end << sc,
                         "le_index_select": p.le_index_select + sc,
                         "lo_index_select": p.lo_index_select + sc})
    le, lo = make_tables(rng)
    normalz, sq_bp, mul_bp = rng.randint(0, 3), rng.random() < 0.25, rng.random() < 0.3
    datin = (rng.randint(0, 0xFFFF), rng.choice([1, 2, 3, rng.randint(0, 0xFFFF)]),
             rng.choice([0, 1, 4, rng.randint(0, 31)]))
    datout = (rng.randint(0, 0xFFFFFFFF), rng.randint(0, 0xFFFF), rng.randint(0, 45 + 10 * prec))
    got, stats = cdp_compute(np.array(d, np.int64), C, np.array(le, np.int64),
                             np.array(lo, np.int64), p, normalz, sq_bp, mul_bp, datin, datout, prec)
    want, want_stats = naive_cdp(d, C, le, lo, p, normalz, sq_bp, mul_bp, datin, datout, prec)
    assert got.tolist() == want
    assert stats == want_stats


@pytest.mark.parametrize("seed", range(10))
def test_cdp_datapath_random(seed):
    _datapath_case(random.Random(100 + seed), 0)


@pytest.mark.parametrize("seed", range(10))
def test_cdp_datapath_int16(seed):
    """nv_full's INT16 pipeline: int16 data, 17-bit converted values, int16 output."""
    _datapath_case(random.Random(200 + seed), 1)


def test_window_uses_cube_channel_edges():
    """With an identity-like LUT the output is the square sum itself: check the window at the
    first and last channels and that invalid lanes of the last atom contribute nothing."""
    C = 11
    d = np.zeros((16, 1, 1), np.int64)
    d[:C, 0, 0] = np.arange(1, C + 1)
    d[C:, 0, 0] = 100                       # garbage in the invalid lanes: must be ignored
    lo = np.arange(257, dtype=np.int64) * 4   # LO linear, select 2: f(s) = s for s in 0..1024
    p = LutParams(le_function=1, le_index_offset=0, le_index_select=0, lo_index_select=2,
                  le_start=2 ** 21 - 100, le_end=2 ** 21 - 36, lo_start=0, lo_end=1024,
                  le_uflow_scale=0, le_oflow_scale=0, le_uflow_shift=0, le_oflow_shift=0,
                  lo_uflow_scale=1, lo_oflow_scale=0, lo_uflow_shift=0, lo_oflow_shift=0,
                  uflow_priority=1, oflow_priority=1, hybrid_priority=1)
    for normalz in range(4):
        out, _ = cdp_compute(d, C, np.zeros(65, np.int64), lo, p, normalz, False, True,
                             (0, 1, 0), (0, 1, 3))
        half = normalz + 1
        for c in range(16):
            s = sum(v * v for v in range(max(1, c + 1 - half), min(C, c + 1 + half) + 1))
            assert out[c, 0, 0] == clamp(rnd_half_away(s, 3), 8), (normalz, c)


# ------------------------------------------------------------------ limitations
def test_limitations_warn_and_compute():
    """Programming-guide LUT limitations (CDP INT8): NVIDIA's RTL runs such tables
    (NV_NVDLA_CDP_DP_LUT_CTRL_unit.v shifts by any 6-bit signed INDEX_SELECT and compares the
    whole shifted value for overflow), so a breach warns and computes like the reference."""
    rng = random.Random(5)
    good = make_params(rng, exp=False)
    check_lut_limits(good)
    le, lo = make_tables(rng)
    bad = [
        dict(le_end=good.le_start + 2 ** (good.le_index_select + 6) + 1),
        dict(lo_end=good.lo_start + 3),
        dict(le_index_select=16, le_end=good.le_start + 2 ** 22),
        dict(lo_index_select=14, lo_end=good.lo_start + 2 ** 22),
        dict(le_index_select=31, lo_index_select=-32),
        dict(le_index_select=-32, lo_index_select=31),
        dict(le_index_select=-20, lo_index_select=-9, le_end=5, lo_end=-7),
    ]
    xs = [rng.randint(-256, 2 ** 21 - 1) for _ in range(200)] + list(range(-3, 600, 5))
    cases = [LutParams(**{**good.__dict__, **kw}) for kw in bad]
    cases += [make_params(rng, exp=True, le_index_offset=o) for o in (21, 40, 127, -128)]
    for p in cases:
        with pytest.warns(LimitationWarning, match="CDP"):
            check_lut_limits(p)
        pts = xs + [s + e for s in (p.le_start, p.lo_start, p.le_end, p.lo_end) for e in (-1, 0, 1)]
        pts = [x for x in pts if -256 <= x < 2 ** 21]
        y, stats = lut_lookup(np.array(pts, np.int64), np.array(le, np.int64),
                              np.array(lo, np.int64), p, 22, 21)
        kinds = []
        for x, got in zip(pts, y.tolist()):
            want, kind = naive_lut(x, le, lo, p)
            kinds.append(kind)
            assert got == want, (x, p)
        assert stats == {k: kinds.count(k) for k in stats}


# ------------------------------------------------------------------ through the CSB
def _w(dla, reg, v):
    dla.write(f"NVDLA_{reg}_0", v)


def test_lut_access_port_autoincrement():
    dla = Nvdla(NV_SMALL)
    _w(dla, "CDP.S_LUT_ACCESS_CFG", (1 << 17) | (0 << 16) | 0)          # write LE from 0
    for i in range(70):                                                # 5 past the end: stick
        _w(dla, "CDP.S_LUT_ACCESS_DATA", (1000 + i) & 0xFFFF)
    _w(dla, "CDP.S_LUT_ACCESS_CFG", (1 << 17) | (1 << 16) | 250)        # LO from entry 250
    for i in range(10):
        _w(dla, "CDP.S_LUT_ACCESS_DATA", 0xFFF0 + i)
    cdp = dla.cdp.lut
    assert cdp.tables[0][:64].tolist() == [1000 + i for i in range(64)]
    assert cdp.tables[0][64] == 1069                                  # last write stuck on 64
    assert cdp.tables[1][250:256].tolist() == [-16 + i for i in range(6)]
    assert cdp.tables[1][256] == -16 + 9
    # read back LE from 62 with auto-increment, sticking on 64
    _w(dla, "CDP.S_LUT_ACCESS_CFG", 62)
    got = [dla.read("NVDLA_CDP.S_LUT_ACCESS_DATA_0") for _ in range(4)]
    assert got == [1062, 1063, 1069, 1069]
    assert dla.read("NVDLA_CDP.S_LUT_ACCESS_CFG_0") & 0x3FF == 64
    _w(dla, "CDP.S_LUT_ACCESS_CFG", (1 << 16) | 255)
    assert dla.read("NVDLA_CDP.S_LUT_ACCESS_DATA_0") == (0xFFF0 + 5)
    assert dla.read("NVDLA_CDP.S_LUT_ACCESS_CFG_0") == (1 << 16) | 256


def test_layer_through_registers_with_statistics():
    """Program a layer over CSB with strides, run it, compare memory and D_PERF_LUT_* (per group)."""
    rng = random.Random(77)
    dla = Nvdla(NV_SMALL)
    W, H, C = 3, 2, 13
    Cp = 16
    src, dst = 0x80000000, 0x80100000
    ls, ss = 0x40, 0x100
    d = [[[rng.randint(-128, 127) for _ in range(W)] for _ in range(H)] for _ in range(Cp)]
    for c in range(Cp):
        for h in range(H):
            for w in range(W):
                dla.mem.write(src + (c // 8) * ss + h * ls + w * 8 + c % 8, bytes([d[c][h][w] & 0xFF]))
    le, lo = make_tables(rng)
    for tid, tab in ((0, le), (1, lo)):
        _w(dla, "CDP.S_LUT_ACCESS_CFG", (1 << 17) | (tid << 16))
        for v in tab:
            _w(dla, "CDP.S_LUT_ACCESS_DATA", v & 0xFFFF)
    # exponential LE (offset -3), LO linear select 4
    regs = {
        "CDP.S_LUT_CFG": 0x0 | (1 << 4) | (0 << 5) | (1 << 6),
        "CDP.S_LUT_INFO": (0xFD) | (0 << 8) | (4 << 16),
        "CDP.S_LUT_LE_START_LOW": 2, "CDP.S_LUT_LE_END_LOW": 2 + 2 ** 30,
        "CDP.S_LUT_LO_START_LOW": 500, "CDP.S_LUT_LO_END_LOW": 500 + 4096,
        "CDP.S_LUT_LE_SLOPE_SCALE": 0x0003FFF9, "CDP.S_LUT_LE_SLOPE_SHIFT": 1 | (2 << 5),
        "CDP.S_LUT_LO_SLOPE_SCALE": 0xFFFE0005, "CDP.S_LUT_LO_SLOPE_SHIFT": 0x1F | (3 << 5),
        "CDP.D_LRN_CFG": 1, "CDP.D_FUNC_BYPASS": 0, "CDP.D_DATA_FORMAT": 0,
        "CDP.D_DATIN_OFFSET": 0x0005, "CDP.D_DATIN_SCALE": 3, "CDP.D_DATIN_SHIFTER": 1,
        "CDP.D_DATOUT_OFFSET": 0xFFFFF000, "CDP.D_DATOUT_SCALE": 5, "CDP.D_DATOUT_SHIFTER": 12,
        "CDP.D_DST_BASE_ADDR_LOW": dst, "CDP.D_DST_LINE_STRIDE": ls, "CDP.D_DST_SURFACE_STRIDE": ss,
        "CDP_RDMA.D_DATA_CUBE_WIDTH": W - 1, "CDP_RDMA.D_DATA_CUBE_HEIGHT": H - 1,
        "CDP_RDMA.D_DATA_CUBE_CHANNEL": C - 1, "CDP_RDMA.D_SRC_BASE_ADDR_LOW": src,
        "CDP_RDMA.D_SRC_LINE_STRIDE": ls, "CDP_RDMA.D_SRC_SURFACE_STRIDE": ss,
    }
    for g in (0, 1):            # the same layer on both register groups
        _w(dla, "CDP.S_POINTER", g)
        _w(dla, "CDP_RDMA.S_POINTER", g)
        for r, v in regs.items():
            _w(dla, r, v)
    _w(dla, "CDP.S_POINTER", 0)
    _w(dla, "CDP_RDMA.S_POINTER", 0)
    _w(dla, "CDP.D_OP_ENABLE", 1)
    _w(dla, "CDP_RDMA.D_OP_ENABLE", 1)
    assert dla.intr
    p = LutParams.from_view(dla.units["CDP"].view(0))
    want, stats = naive_cdp(d, C, le, lo, p, 1, False, False, (5, 3, 1), (0xFFFFF000, 5, 12))
    for c in range(Cp):
        for h in range(H):
            for w in range(W):
                b = int(dla.mem.read(dst + (c // 8) * ss + h * ls + w * 8 + c % 8, 1)[0])
                assert s_ext(b, 8) == want[c][h][w], (c, h, w)
    assert sum(stats.values()) == Cp * H * W
    names = {"UFLOW": "D_PERF_LUT_UFLOW", "OFLOW": "D_PERF_LUT_OFLOW",
             "HYBRID": "D_PERF_LUT_HYBRID", "LE_HIT": "D_PERF_LUT_LE_HIT",
             "LO_HIT": "D_PERF_LUT_LO_HIT"}
    assert {k: dla.read(f"NVDLA_CDP.{r}_0") for k, r in names.items()} == stats
    # group 1 has not run yet: its statistics read 0
    _w(dla, "CDP.S_POINTER", 1)
    assert all(dla.read(f"NVDLA_CDP.{r}_0") == 0 for r in names.values())
    assert dla.read("NVDLA_CDP.D_OUT_SATURATION_0") == 0
