"""NVIDIA's fp17 arithmetic for the model, on numpy integer arrays of bit patterns.

nv_full's PDP averages fp16 data in "fp17" (v1_ias_precision.rst names the converters; the
arithmetic was read from NVIDIA's nvdlav1 HLS sources, cmod/hls/include/nvdla_float.h, whose
Catapult builds are vmod/vlibs/HLS_fp16_to_fp17.v, HLS_fp17_add.v, HLS_fp17_mul.v and
HLS_fp17_to_fp16.v, and checked on NVIDIA's nv_full RTL through PDP programs):

* fp17 = sign (bit 16), exponent (bits 15:10, bias 31), mantissa (bits 9:0, hidden 1). Exponent
  63 with a mantissa is NaN; exponent 63 without is never produced (add and mul treat it as the
  number 2**32); the largest finite value ``MAX17`` = 0xFBFF. No results are denormal or
  infinite: underflow gives a signed zero, overflow the largest finite value.
* :func:`fp16_to_fp17` is exact (fp16 denormals become normal), fp16 infinity becomes
  ``MAX17``, a NaN keeps its sign and payload.
* :func:`fp17_add` and :func:`fp17_mul` round to nearest even; a NaN operand is returned
  unchanged (``a`` first); an exact cancellation keeps the sign of the operand with the larger
  magnitude (``a`` on a tie), not IEEE's +0; the smaller addend is aligned on 12 guard bits
  and the bits shifted out below them are dropped before rounding (no sticky bit).
* :func:`fp17_to_fp16` rounds to nearest even, into fp16 denormals where needed; overflow
  gives +-65504 (0x7BFF), never infinity.

Every function takes and returns int64 arrays (any shape) of bit patterns. The RTL has its own
implementation (hdl/lib); nothing here is shared with it.
"""
from __future__ import annotations

import numpy as np

__all__ = ["MAX17", "fp16_to_fp17", "fp17_to_fp16", "fp17_add", "fp17_mul", "fp17_of_int",
           "fp16_isnan", "fp_add", "fp_mul", "fp16_to_fp32", "fp32_to_fp16", "fp16_to_int16",
           "fp_pick", "fp_isnan", "fp_sub", "FLT_MAX", "fp17_to_fp32", "fp32_to_fp17", "frac_to_fp17"]

MAX17 = 0xFBFF          # largest finite fp17 magnitude: exponent 62, mantissa 0x3FF


def _i64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def _fields(x: np.ndarray, ebits: int, mbits: int):
    m = x & ((1 << mbits) - 1)
    e = (x >> mbits) & ((1 << ebits) - 1)
    s = (x >> (ebits + mbits)) & 1
    return s, e, m


def _bit_length(x: np.ndarray) -> np.ndarray:
    """Bit length of non-negative int64 values (0 for 0)."""
    x = _i64(x)
    n = np.zeros(x.shape, np.int64)
    v = x.copy()
    for sh in (32, 16, 8, 4, 2, 1):
        big = v >= (1 << sh)
        n += np.where(big, sh, 0)
        v = np.where(big, v >> sh, v)
    return n + (v > 0)


def fp16_isnan(x) -> np.ndarray:
    """Whether fp16 bit patterns are NaN (exponent 31, mantissa non-zero)."""
    x = _i64(x)
    return ((x >> 10) & 31 == 31) & (x & 0x3FF != 0)


def fp16_to_fp17(x) -> np.ndarray:
    """fp16 bit patterns to fp17 (exact; infinity to +-MAX17; NaN keeps sign and payload)."""
    s, e, m = _fields(_i64(x), 5, 10)
    sign = s << 16
    normal = sign | ((e + 16) << 10) | m
    z = 10 - _bit_length(m)                                   # leading zeros of m in 10 bits
    den = sign | ((16 - z) << 10) | ((m << (z + 1)) & 0x3FF)
    out = np.where(e == 0, np.where(m == 0, sign, den), normal)
    out = np.where((e == 31) & (m == 0), sign | MAX17, out)
    return np.where((e == 31) & (m != 0), sign | (63 << 10) | m, out)


def fp17_to_fp16(x) -> np.ndarray:
    """fp17 bit patterns to fp16, round to nearest even (denormal results included); exponents
    47 and above (and the unused infinity pattern) give +-0x7BFF, below 6 a signed zero."""
    s, e, m = _fields(_i64(x), 6, 10)
    sign = s << 15
    normal = sign | ((e - 16) << 10) | m
    sh = np.clip(17 - e, 1, 11)                              # denormal: 6 <= e <= 16
    M = m | 0x400
    q = M >> sh
    g = (M >> (sh - 1)) & 1
    st = (M & ((1 << (sh - 1)) - 1)) != 0
    q = q + (g & (st | (q & 1)))
    out = np.where(e >= 17, normal, sign | q)
    out = np.where(e < 6, sign, out)
    out = np.where(e >= 47, sign | 0x7BFF, out)
    return np.where((e == 63) & (m != 0), sign | 0x7C00 | m, out)


def _nan(x: np.ndarray, e: int, m: int) -> np.ndarray:
    return ((x >> m) & ((1 << e) - 1) == (1 << e) - 1) & (x & ((1 << m) - 1) != 0)


def _nan17(x: np.ndarray) -> np.ndarray:
    return _nan(x, 6, 10)


def _max_finite(e: int, m: int) -> int:
    return (((1 << e) - 2) << m) | ((1 << m) - 1)


def fp_add(a, b, e: int, m: int) -> np.ndarray:
    """``a + b`` in a format of ``e`` exponent and ``m`` mantissa bits (module docstring's
    rules, the smaller operand aligned on ``m + 2`` guard bits): fp17 is (6, 10), fp32 (8, 23)."""
    a, b = np.broadcast_arrays(_i64(a), _i64(b))
    k, w = m + 2, 2 * m + 3
    top = (1 << e) - 2
    sa, ea, ma = _fields(a, e, m)
    sb, eb, mb = _fields(b, e, m)
    hid = 1 << m
    Ma = np.where((ea == 0) & (ma == 0), 0, ma | hid)
    Mb = np.where((eb == 0) & (mb == 0), 0, mb | hid)
    a_large = (ea > eb) | ((ea == eb) & (ma >= mb))
    eL, eS = np.where(a_large, ea, eb), np.where(a_large, eb, ea)
    ML, MS = np.where(a_large, Ma, Mb), np.where(a_large, Mb, Ma)
    so = np.where(a_large, sa, sb)
    d = eL - eS
    XL = ML << k
    XS = np.where(d > w, 0, (MS << k) >> np.minimum(d, w))
    T = np.where(sa == sb, XL + XS, XL - XS)
    eo = eL.copy()
    carry = T >= (1 << w)
    sat = carry & (eo >= top)
    eo = np.where(carry, eo + 1, eo)
    T = np.where(carry, T >> 1, T)
    z = w - _bit_length(T)                                    # leading zeros in w bits
    zero = ~carry & ((T == 0) | (eo <= z))
    eo = np.where(~carry & ~zero, eo - z, eo)
    T = np.where(~carry & ~zero, T << np.clip(z, 0, w), T)
    q = T >> (w - m - 1)
    g = (T >> (w - m - 2)) & 1
    st = (T & ((1 << (w - m - 2)) - 1)) != 0
    q = q + (g & (st | (q & 1)))
    over = q == (2 << m)
    sat |= over & (eo >= top)
    eo = np.where(over, eo + 1, eo)
    q = np.where(over, hid, q)
    sign = so << (e + m)
    out = np.where(sat, sign | _max_finite(e, m), sign | (eo << m) | (q & (hid - 1)))
    out = np.where(zero, sign, out)
    out = np.where(_nan(b, e, m), b, out)
    return np.where(_nan(a, e, m), a, out)


def fp_sub(a, b, e: int, m: int) -> np.ndarray:
    """``a - b`` as NVIDIA's HLS subtractors compute it: ``a + (b with its sign flipped)`` (so
    a NaN ``b`` comes back with its sign flipped)."""
    return fp_add(a, _i64(b) ^ (1 << (e + m)), e, m)


def fp_mul(a, b, e: int, m: int) -> np.ndarray:
    """``a * b`` in a format of ``e`` exponent and ``m`` mantissa bits (module docstring's
    rules): fp17 is (6, 10), fp32 (8, 23)."""
    a, b = np.broadcast_arrays(_i64(a), _i64(b))
    bias, top = (1 << (e - 1)) - 1, (1 << e) - 2
    sa, ea, ma = _fields(a, e, m)
    sb, eb, mb = _fields(b, e, m)
    za = (ea == 0) & (ma == 0)
    zb = (eb == 0) & (mb == 0)
    sign = (sa ^ sb) << (e + m)
    es = ea + eb
    P = (ma | (1 << m)) * (mb | (1 << m))
    pe = es - bias
    hi = P >= (1 << (2 * m + 1))
    sat = hi & (pe >= top)
    pe = np.where(hi, pe + 1, pe)
    f = np.where(hi, P, P << 1) & ((1 << (2 * m + 1)) - 1)
    Q = (1 << m) | (f >> (m + 1))
    g = (f >> m) & 1
    st = (f & ((1 << m) - 1)) != 0
    Q = Q + (g & (st | (Q & 1)))
    over = Q == (2 << m)
    pe = np.where(over, pe + 1, pe)
    Q = np.where(over, 1 << m, Q)
    sat |= pe > top
    out = np.where(sat, sign | _max_finite(e, m),
                   sign | (np.clip(pe, 0, (1 << e) - 1) << m) | (Q & ((1 << m) - 1)))
    out = np.where(pe <= 0, sign, out)
    out = np.where(es >= (1 << e) - 1 + bias, sign | _max_finite(e, m), out)
    out = np.where(za | zb | (es < bias), sign, out)
    out = np.where(_nan(b, e, m), b, out)
    return np.where(_nan(a, e, m), a, out)


def fp17_add(a, b) -> np.ndarray:
    """fp17 ``a + b`` (module docstring: round to nearest even after dropping the bits below 12
    guard bits of the aligned smaller operand, overflow to +-MAX17, underflow to a signed zero,
    cancellation signed as the larger operand, NaN operand returned, ``a`` first)."""
    return fp_add(a, b, 6, 10)


def fp17_mul(a, b) -> np.ndarray:
    """fp17 ``a * b`` (module docstring: round to nearest even, overflow to +-MAX17, underflow
    to a signed zero, NaN operand returned, ``a`` first)."""
    return fp_mul(a, b, 6, 10)


def fp17_of_int(n: int) -> int:
    """fp17 bit pattern of a small positive integer (exact for up to 11 significant bits)."""
    e = n.bit_length() - 1
    return ((e + 31) << 10) | ((n << (10 - e)) & 0x3FF) if e <= 10 else \
        ((e + 31) << 10) | ((n >> (e - 10)) & 0x3FF)


# ---- fp16 <-> fp32 and fp16 -> int16 (nv_full's SDP: NVIDIA's cmod/hls Fp16ToFp32,
# Fp32ToFp16, Fp16ToInt16 and MRDMA's fp16 input conversion) -------------------------------

FLT_MAX = 0x7F7FFFFF


def _round_even(M: np.ndarray, sh) -> np.ndarray:
    """``M >> sh`` rounded to nearest, ties to even (``sh`` >= 1; int64 arrays)."""
    q = M >> sh
    g = (M >> (sh - 1)) & 1
    st = (M & ((np.int64(1) << (sh - 1)) - 1)) != 0
    return q + (g & (st | (q & 1)))


# ---- fp17 <-> fp32 and a fraction to fp17 (nv_full's CDP in FP16: NVIDIA's HLS
# fp17_to_fp32, fp32_to_fp17 and uint16_to_fp17, each verilated alone from vmod/vlibs and
# compared with these rules on 20,000 vectors, all 65,536 for the 16-bit fraction) -----------------

def fp17_to_fp32(x) -> np.ndarray:
    """fp17 bit patterns to fp32 (exact): a signed zero stays one, exponent + 96 and mantissa
    shifted up 13 bits; the unused fp17 infinity pattern gives +-FLT_MAX; a NaN's sign and
    10-bit payload kept in the low mantissa bits."""
    s, e, m = _fields(_i64(x), 6, 10)
    sign = s << 31
    out = np.where((e == 0) & (m == 0), sign, sign | ((e + 96) << 23) | (m << 13))
    out = np.where((e == 63) & (m == 0), sign | FLT_MAX, out)
    return np.where((e == 63) & (m != 0), sign | (0xFF << 23) | m, out)


def fp32_to_fp17(x) -> np.ndarray:
    """fp32 bit patterns to fp17, nearest with ties to even: 2**32 and above (exponent >= 159,
    or rounding up into fp17 exponent 63) give +-MAX17; below fp17's smallest normal 2**-30 a
    signed zero, except values that round (on the grid of fp17's denormals, which it does not
    produce) up to exactly 2**-30; a NaN as (sign, 63, low 10 mantissa bits)."""
    xi = _i64(x)
    s, e, m = _fields(xi, 8, 23)
    sign = s << 16
    M = m | (1 << 23)
    q = _round_even(M, 13)
    eo = e - 96 + (q >> 11)
    normal = np.where(eo >= 63, sign | MAX17, sign | (np.clip(eo, 0, 63) << 10) | (q & 0x3FF))
    qd = _round_even(M, 13 + np.clip(97 - e, 1, 11))          # 86 <= e <= 96
    out = np.where(e >= 97, normal, np.where(qd >= 1024, sign | (1 << 10), sign))
    out = np.where(e < 86, sign, out)
    out = np.where(e >= 159, sign | MAX17, out)
    return np.where(_nan(xi, 8, 23), sign | (63 << 10) | (m & 0x3FF), out)


def frac_to_fp17(f, bits: int) -> np.ndarray:
    """An unsigned ``bits``-bit fraction ``f / 2**bits`` (int64 array, bits <= 52) to fp17,
    rounded to 11 significant bits, nearest with ties to even; values below fp17's smallest
    normal 2**-30 (exact there: ``f < 2**(bits-30)``) give +0 (NVIDIA's uint16_to_fp17 for
    CDP's 16-bit fraction, FpFractionToFloat<35,6,10> for SDP's 35-bit one)."""
    f = _i64(f)
    n = _bit_length(f)                                        # 1..bits for f > 0
    sh = np.maximum(n - 11, 0)
    q = np.where(sh > 0, _round_even(f, np.maximum(sh, 1)), f << np.clip(11 - n, 0, 11))
    e = n - 1 - bits + 31 + (q >> 11)
    q = np.where(q >> 11, q >> 1, q)
    return np.where((f == 0) | (e < 1), 0, (e << 10) | (q & 0x3FF))


def fp16_to_fp32(x) -> np.ndarray:
    """fp16 bit patterns to fp32: exact (denormals included), infinity to +-FLT_MAX, a NaN's
    sign and 10-bit payload kept in the low mantissa bits (not shifted up)."""
    s, e, m = _fields(_i64(x), 5, 10)
    sign = s << 31
    normal = sign | ((e + 112) << 23) | (m << 13)
    z = 10 - _bit_length(m)
    den = sign | ((113 - z - 1) << 23) | (((m << (z + 1)) & 0x3FF) << 13)
    out = np.where(e == 0, np.where(m == 0, sign, den), normal)
    out = np.where((e == 31) & (m == 0), sign | FLT_MAX, out)
    return np.where((e == 31) & (m != 0), sign | (0xFF << 23) | m, out)


def fp32_to_fp16(x) -> np.ndarray:
    """fp32 bit patterns to fp16, nearest with ties to even (fp16 denormals included), +-65504
    (0x7BFF) from 65520 up and for infinity, a NaN as (sign, 31, low 10 mantissa bits): with
    zero low bits that is the infinity pattern."""
    s, e, m = _fields(_i64(x), 8, 23)
    sign = s << 15
    M = m | (1 << 23)
    # normal: 10 of 23 mantissa bits kept
    q = M >> 13
    g = (M >> 12) & 1
    st = (M & 0xFFF) != 0
    q = q + (g & (st | (q & 1)))
    en = e - 112 + (q >> 11)
    normal = np.where(en >= 31, sign | 0x7BFF, sign | (en << 10) | (q & 0x3FF))
    # denormal: value / 2**-24 = M * 2**(e - 126 - 23 + 23) -> shift right by 126 - e
    sh = np.clip(126 - e, 1, 62)
    qd = M >> sh
    gd = (M >> (sh - 1)) & 1
    std = (M & ((np.int64(1) << (sh - 1)) - 1)) != 0
    qd = qd + (gd & (std | (qd & 1)))
    out = np.where(e >= 113, normal, sign | qd)
    out = np.where(e < 102, sign, out)
    out = np.where(e >= 143, sign | 0x7BFF, out)
    return np.where(_nan(_i64(x), 8, 23), sign | 0x7C00 | (m & 0x3FF), out)


def fp16_to_int16(x) -> np.ndarray:
    """fp16 bit patterns to int16: ``(1024 + m) * 2**(e - 25)`` (a hidden one even for e = 0),
    rounded half away from zero, saturated; NaN gives -32768."""
    s, e, m = _fields(_i64(x), 5, 10)
    M = m | 0x400
    big = e >= 25
    v = np.where(big, M << np.clip(e - 25, 0, 20), 0)
    sh = np.clip(25 - e, 1, 40)
    r = (M + (np.int64(1) << (sh - 1))) >> sh                  # half away from zero (magnitude)
    v = np.where(big, v, r)
    v = np.where(s == 1, -v, v)
    v = np.clip(v, -32768, 32767)
    return np.where((e == 31) & (m != 0), -32768, v)


def fp_pick(a, b, e: int, m: int, take_max: bool) -> np.ndarray:
    """MAX / MIN of two bit patterns as NVIDIA's FpCmp compares them: sign and magnitude of the
    raw bits (+0 above -0), one input passed unchanged; a NaN wins, ``a``'s first."""
    a, b = np.broadcast_arrays(_i64(a), _i64(b))
    sh = e + m
    mask = (1 << sh) - 1
    sa, sb = (a >> sh) & 1, (b >> sh) & 1
    gt = (a & mask) > (b & mask)
    if take_max:
        take_a = np.where(sa == sb, np.where(sa == 0, gt, ~gt), sa == 0)
    else:
        take_a = np.where(sa == sb, np.where(sa == 0, ~gt, gt), sa == 1)
    out = np.where(take_a, a, b)
    out = np.where(_nan(b, e, m), b, out)
    return np.where(_nan(a, e, m), a, out)


def fp_isnan(x, e: int, m: int) -> np.ndarray:
    """Whether bit patterns of a format of ``e`` exponent and ``m`` mantissa bits are NaN."""
    return _nan(_i64(x), e, m)
