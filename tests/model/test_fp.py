"""fp17 operators of the model (verif/model/fp.py) against exact rational arithmetic.

Reference: every fp17 / fp16 value as a Fraction; a result is the exact sum or product rounded
to 11 significant bits, ties to even, with fp17's exponent range (no denormals: a signed zero
below, the largest finite value above). For the addition, the smaller operand is first cut to
the 12 guard bits below the larger one's mantissa (the hardware's alignment drops the bits
beyond, verif/model/fp.py), which only differs from exact rounding in rare ties.
"""
from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest

from verif.model.fp import MAX17, fp16_isnan, fp16_to_fp17, fp17_add, fp17_mul, fp17_of_int, fp17_to_fp16


def value17(x: int) -> Fraction:
    s, e, m = (x >> 16) & 1, (x >> 10) & 63, x & 0x3FF
    if e == 0 and m == 0:
        return Fraction(0)
    v = Fraction(m | 0x400, 1 << 10) * Fraction(2) ** (e - 31)
    return -v if s else v


def value16(x: int) -> Fraction:
    s, e, m = (x >> 15) & 1, (x >> 10) & 31, x & 0x3FF
    v = Fraction(m, 1 << 24) if e == 0 else Fraction(m | 0x400, 1 << 10) * Fraction(2) ** (e - 15)
    return -v if s else v


def round17(v: Fraction, sign_of_zero: int = 0) -> int:
    if v == 0:
        return sign_of_zero << 16
    s = 1 if v < 0 else 0
    a, e = abs(v), 0
    while a >= 2:
        a, e = a / 2, e + 1
    while a < 1:
        a, e = a * 2, e - 1
    q = a * 1024
    fl = int(q)
    r = q - fl
    if r > Fraction(1, 2) or (r == Fraction(1, 2) and fl & 1):
        fl += 1
    if fl == 2048:
        fl, e = 1024, e + 1
    E = e + 31
    if E >= 63:
        return (s << 16) | MAX17
    if E <= 0:
        return s << 16
    return (s << 16) | (E << 10) | (fl & 0x3FF)


def ref_add17(a: int, b: int) -> int:
    """Reference fp17 ``a + b``: a NaN operand returned (``a``'s first); else the exact sum of
    the larger operand and the smaller one cut to the larger one's 12 guard bits, rounded, a
    zero signed as the larger operand (``a`` on a tie)."""
    for x in (a, b):
        if (x >> 10) & 63 == 63 and x & 0x3FF:
            return x
    ea, eb = (a >> 10) & 63, (b >> 10) & 63
    big, small = (a, b) if (ea, a & 0x3FF) >= (eb, b & 0x3FF) else (b, a)
    q = Fraction(2) ** (max(ea, eb) - 31 - 22)
    vs = value17(small)
    cut = (abs(vs) // q) * q * (1 if vs >= 0 else -1)
    return round17(value17(big) + cut, (big >> 16) & 1)


def ref_mul17(a: int, b: int) -> int:
    """Reference fp17 ``a * b``: a NaN operand returned (``a``'s first); else the exact product
    rounded, a zero signed as the product."""
    for x in (a, b):
        if (x >> 10) & 63 == 63 and x & 0x3FF:
            return x
    return round17(value17(a) * value17(b), ((a ^ b) >> 16) & 1)


def finite17(rng, n, spread=8):
    """Random finite non-zero fp17 patterns around exponent 31 (+-spread)."""
    e = np.clip(rng.integers(31 - spread, 31 + spread + 1, n), 1, 62)
    return (rng.integers(0, 2, n) << 16) | (e << 10) | rng.integers(0, 1024, n)


def test_fp16_to_fp17_exact_and_back():
    """Every fp16 pattern: exact conversion (denormals normalised), infinity to the largest
    finite fp17, NaN keeping sign and payload; and fp17_to_fp16 gives the pattern back."""
    x = np.arange(1 << 16, dtype=np.int64)
    y = fp16_to_fp17(x)
    nan = fp16_isnan(x)
    inf = ((x >> 10) & 31 == 31) & ~nan
    for xi, yi in zip(x[~nan & ~inf].tolist(), y[~nan & ~inf].tolist()):
        assert value17(yi) == value16(xi) and (yi >> 16) == (xi >> 15), hex(xi)
    assert np.all(y[inf] & 0xFFFF == MAX17) and np.all((y[inf] >> 16) == (x[inf] >> 15))
    assert np.all(y[nan] == (((x[nan] >> 15) << 16) | (63 << 10) | (x[nan] & 0x3FF)))
    back = fp17_to_fp16(y)
    assert np.array_equal(back[~inf], x[~inf])
    assert np.all(back[inf] & 0x7FFF == 0x7BFF)


def test_fp17_to_fp16_rounding():
    """Random fp17 values over the whole exponent range: numpy's nearest fp16 (ties to even,
    fp16 denormals included; the fp17 value is exact in a float64), +-65504 from 2**16 up
    (never infinity), the sign kept on zeros."""
    rng = np.random.default_rng(1)
    n = 20000
    x = (rng.integers(0, 2, n) << 16) | (rng.integers(0, 63, n) << 10) | rng.integers(0, 1024, n)
    got = fp17_to_fp16(x)
    for xi, gi in zip(x.tolist(), got.tolist()):
        v, s = value17(xi), (xi >> 16) & 1
        if abs(v) >= 65536:
            want = (s << 15) | 0x7BFF
        else:
            want = int(np.float16(abs(float(v))).view(np.uint16)) | (s << 15)
        assert gi == want, (hex(xi), hex(gi), hex(want))


@pytest.mark.parametrize("spread", [2, 12, 40])
def test_fp17_add_and_mul(spread):
    rng = np.random.default_rng(spread)
    a = finite17(rng, 4000, spread)
    b = finite17(rng, 4000, spread)
    b[:200] = a[:200] ^ (1 << 16)                  # exact cancellations
    b[200:300] = 0
    s, p = fp17_add(a, b), fp17_mul(a, b)
    for ai, bi, si, pi in zip(a.tolist(), b.tolist(), s.tolist(), p.tolist()):
        assert si == ref_add17(ai, bi), (hex(ai), hex(bi), hex(si))
        assert pi == ref_mul17(ai, bi), (hex(ai), hex(bi), hex(pi))


def test_fp17_nan_and_saturation():
    nan_a, nan_b, one = (63 << 10) | 5, (1 << 16) | (63 << 10) | 9, fp17_of_int(1)
    assert fp17_add(nan_a, nan_b) == nan_a and fp17_add(one, nan_b) == nan_b
    assert fp17_mul(nan_b, nan_a) == nan_b and fp17_mul(one, nan_a) == nan_a
    assert fp17_add(MAX17, MAX17) == MAX17 and fp17_mul(MAX17, fp17_of_int(2)) == MAX17
    tiny = 1 << 10                                   # exponent 1
    assert fp17_mul(tiny, tiny) == 0 and fp17_mul(tiny | (1 << 16), tiny) == 1 << 16
    assert [fp17_of_int(k) for k in range(1, 9)] == [0x7C00, 0x8000, 0x8200, 0x8400, 0x8500,
                                                      0x8600, 0x8700, 0x8800]


# ---- fp32 (SDP) operators and conversions against numpy's IEEE binary32 / binary16 where the
# hardware agrees with IEEE (finite normal results), and their documented departures --------

from verif.model.fp import fp16_to_fp32, fp16_to_int16, fp32_to_fp16, fp_add, fp_mul, fp_pick  # noqa: E402


def test_fp16_fp32_conversions():
    x = np.arange(1 << 16, dtype=np.int64)
    h = x.astype(np.uint16).view(np.float16)
    fin = np.isfinite(h)
    f = fp16_to_fp32(x)
    assert np.array_equal(f[fin].astype(np.uint32).view(np.float32), h[fin].astype(np.float32))
    assert np.array_equal(f[np.isinf(h)] & 0x7FFFFFFF, np.full(2, 0x7F7FFFFF))
    nan = np.isnan(h)
    assert np.all(f[nan] & 0x7FFFFF == x[nan] & 0x3FF)                  # payload not shifted
    assert np.array_equal(fp32_to_fp16(f)[fin], x[fin])
    rng = np.random.default_rng(3)
    v = (rng.standard_normal(100000) * 2.0 ** rng.integers(-30, 18, 100000)).astype(np.float32)
    got = fp32_to_fp16(v.view(np.uint32).astype(np.int64))
    small = np.abs(v) < 65520
    assert np.array_equal(got[small], v[small].astype(np.float16).view(np.uint16))
    assert np.all(got[~small] & 0x7FFF == 0x7BFF)                       # never infinity
    r = v[small].astype(np.float16).astype(np.float64)
    want = np.clip(np.sign(r) * np.floor(np.abs(r) + 0.5), -32768, 32767)  # half away from zero
    norm = np.abs(r) >= 2.0 ** -14
    assert np.array_equal(fp16_to_int16(got[small])[norm], want[norm])
    assert fp16_to_int16(0x7E01) == -32768 and fp16_to_int16(0x7C00) == 32767


def test_fp32_add_mul_max_min():
    rng = np.random.default_rng(4)
    n = 100000
    a = (rng.standard_normal(n) * 2.0 ** rng.integers(-60, 60, n)).astype(np.float32)
    b = (rng.standard_normal(n) * 2.0 ** rng.integers(-60, 60, n)).astype(np.float32)
    b[:500] = -a[:500]
    ai, bi = a.view(np.uint32).astype(np.int64), b.view(np.uint32).astype(np.int64)
    with np.errstate(over="ignore", under="ignore"):
        s, p = a + b, a * b
    ok = lambda r: (np.abs(r) >= 2.0 ** -126) & np.isfinite(r)        # noqa: E731
    assert np.array_equal(fp_add(ai, bi, 8, 23)[ok(s)], s[ok(s)].view(np.uint32))
    assert np.array_equal(fp_mul(ai, bi, 8, 23)[ok(p)], p[ok(p)].view(np.uint32))
    zero = fp_add(ai[:500], bi[:500], 8, 23)                           # cancellations: a's sign
    assert np.array_equal(zero, (ai[:500] >> 31) << 31)
    assert np.array_equal(fp_pick(ai, bi, 8, 23, True), np.maximum(a, b).view(np.uint32))
    assert np.array_equal(fp_pick(ai, bi, 8, 23, False), np.minimum(a, b).view(np.uint32))
    assert fp_pick(0, 1 << 31, 8, 23, True) == 0 and fp_pick(0, 1 << 31, 8, 23, False) == 1 << 31


# ---- fp17 <-> fp32 and a 16-bit fraction to fp17 (nv_full's CDP in FP16) -------------------

from verif.model.fp import fp17_to_fp32, fp32_to_fp17, frac_to_fp17  # noqa: E402


def value32(x: int) -> Fraction:
    s, e, m = (x >> 31) & 1, (x >> 23) & 255, x & 0x7FFFFF
    v = Fraction(m, 1 << 23) * Fraction(2) ** -126 if e == 0 else \
        Fraction(m | 1 << 23, 1 << 23) * Fraction(2) ** (e - 127)
    return -v if s else v


def ref_fp32_to_fp17(x: int) -> int:
    """Reference: NaN as (sign, 63, low 10 bits); otherwise the value rounded to fp17 (11
    significant bits, ties to even, +-MAX17 from 2**32 up); below 2**-30, a signed zero unless
    the value rounds on the 2**-40 grid of fp17's (absent) denormals to exactly 2**-30."""
    s, e, m = (x >> 31) & 1, (x >> 23) & 255, x & 0x7FFFFF
    if e == 255 and m:
        return (s << 16) | (63 << 10) | (m & 0x3FF)
    v = abs(value32(x)) if e != 255 else Fraction(2) ** 128
    if v < Fraction(2) ** -30:
        q = v * 2 ** 40
        n = int(q)
        if q - n > Fraction(1, 2) or (q - n == Fraction(1, 2) and n & 1):
            n += 1
        return (s << 16) | (1 << 10) if n == 1024 else s << 16
    return (s << 16) | round17(v)


def test_fp32_to_fp17_rounding():
    rng = random.Random(5)
    xs = [rng.getrandbits(32) for _ in range(3000)]
    for e in list(range(84, 99)) + list(range(155, 162)) + [0, 1, 127, 254, 255]:
        xs += [(rng.getrandbits(1) << 31) | (e << 23) | rng.getrandbits(23) for _ in range(60)]
        xs += [(e << 23) | (0x7FE000 + rng.randrange(0x2000)) for _ in range(20)]   # carries
        xs += [(e << 23) | (k << 13) | 0x1000 for k in (0, 1, 2, 3)]                  # ties
    got = fp32_to_fp17(np.array(xs, np.int64)).tolist()
    assert got == [ref_fp32_to_fp17(x) for x in xs]


def test_fp17_to_fp32_exact():
    x = np.arange(1 << 17, dtype=np.int64)
    got = fp17_to_fp32(x)
    e, m = (x >> 10) & 63, x & 0x3FF
    num = (e < 63) & ~((e == 0) & (m == 0))
    want = np.array([float(value17(int(v))) for v in x[num]], np.float32).view(np.uint32)
    assert np.array_equal(got[num], want)
    assert np.array_equal(got[(e == 0) & (m == 0)], [0, 1 << 31])            # signed zeros
    assert np.array_equal(got[(e == 63) & (m == 0)] & 0x7FFFFFFF, [0x7F7FFFFF] * 2)
    nan = (e == 63) & (m != 0)
    assert np.array_equal(got[nan], ((x[nan] >> 16) << 31) | (0xFF << 23) | m[nan])


def test_frac_to_fp17():
    """Every 16-bit fraction (CDP), random 35-bit ones (SDP's LUT) and the values near fp17's
    smallest normal 2**-30 (below it: +0)."""
    f = np.arange(1 << 16, dtype=np.int64)
    assert frac_to_fp17(f, 16).tolist() == [0] + [round17(Fraction(int(v), 1 << 16)) for v in f[1:]]
    rng = random.Random(6)
    f = [rng.getrandbits(rng.randint(1, 35)) for _ in range(20000)] + list(range(200)) + [(1 << 35) - 1]
    assert frac_to_fp17(np.array(f, np.int64), 35).tolist() == \
        [0 if v < 32 else round17(Fraction(v, 1 << 35)) for v in f]
