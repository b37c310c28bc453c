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
           "fp16_isnan"]

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


def _nan17(x: np.ndarray) -> np.ndarray:
    return ((x >> 10) & 63 == 63) & (x & 0x3FF != 0)


def fp17_add(a, b) -> np.ndarray:
    """fp17 ``a + b`` (module docstring: round to nearest even after dropping the bits below 12
    guard bits of the aligned smaller operand, overflow to +-MAX17, underflow to a signed zero,
    cancellation signed as the larger operand, NaN operand returned, ``a`` first)."""
    a, b = np.broadcast_arrays(_i64(a), _i64(b))
    sa, ea, ma = _fields(a, 6, 10)
    sb, eb, mb = _fields(b, 6, 10)
    Ma = np.where((ea == 0) & (ma == 0), 0, ma | 0x400)
    Mb = np.where((eb == 0) & (mb == 0), 0, mb | 0x400)
    a_large = (ea > eb) | ((ea == eb) & (ma >= mb))
    eL, eS = np.where(a_large, ea, eb), np.where(a_large, eb, ea)
    ML, MS = np.where(a_large, Ma, Mb), np.where(a_large, Mb, Ma)
    so = np.where(a_large, sa, sb)
    d = eL - eS
    XL = ML << 12
    XS = np.where(d > 23, 0, (MS << 12) >> np.minimum(d, 23))
    T = np.where(sa == sb, XL + XS, XL - XS)
    eo = eL.copy()
    sat = np.zeros(T.shape, bool)
    zero = np.zeros(T.shape, bool)
    carry = T >= (1 << 23)
    sat |= carry & (eo >= 62)
    eo = np.where(carry, eo + 1, eo)
    T = np.where(carry, T >> 1, T)
    z = 23 - _bit_length(T)                                   # leading zeros in 23 bits
    norm = ~carry
    zero |= norm & ((T == 0) | (eo <= z))
    eo = np.where(norm & ~zero, eo - z, eo)
    T = np.where(norm & ~zero, T << np.clip(z, 0, 23), T)
    q = T >> 12
    g = (T >> 11) & 1
    st = (T & 0x7FF) != 0
    q = q + (g & (st | (q & 1)))
    over = q == 0x800
    sat |= over & (eo >= 62)
    eo = np.where(over, eo + 1, eo)
    q = np.where(over, 0x400, q)
    sign = so << 16
    out = np.where(sat, sign | MAX17, sign | (eo << 10) | (q & 0x3FF))
    out = np.where(zero, sign, out)
    out = np.where(_nan17(b), b, out)
    return np.where(_nan17(a), a, out)


def fp17_mul(a, b) -> np.ndarray:
    """fp17 ``a * b`` (module docstring: round to nearest even, overflow to +-MAX17, underflow
    to a signed zero, NaN operand returned, ``a`` first)."""
    a, b = np.broadcast_arrays(_i64(a), _i64(b))
    sa, ea, ma = _fields(a, 6, 10)
    sb, eb, mb = _fields(b, 6, 10)
    za = (ea == 0) & (ma == 0)
    zb = (eb == 0) & (mb == 0)
    sign = (sa ^ sb) << 16
    es = ea + eb
    P = (ma | 0x400) * (mb | 0x400)
    pe = es - 31
    hi = P >= (1 << 21)
    sat = hi & (pe >= 62)
    pe = np.where(hi, pe + 1, pe)
    f = np.where(hi, P, P << 1) & ((1 << 21) - 1)
    Q = 0x400 | (f >> 11)
    g = (f >> 10) & 1
    st = (f & 0x3FF) != 0
    Q = Q + (g & (st | (Q & 1)))
    over = Q == 0x800
    pe = np.where(over, pe + 1, pe)
    Q = np.where(over, 0x400, Q)
    sat |= pe >= 63
    out = np.where(sat, sign | MAX17, sign | (np.clip(pe, 0, 63) << 10) | (Q & 0x3FF))
    out = np.where(pe <= 0, sign, out)
    out = np.where(es >= 94, sign | MAX17, out)
    out = np.where(za | zb | (es < 31), sign, out)
    out = np.where(_nan17(b), b, out)
    return np.where(_nan17(a), a, out)


def fp17_of_int(n: int) -> int:
    """fp17 bit pattern of a small positive integer (exact for up to 11 significant bits)."""
    e = n.bit_length() - 1
    return ((e + 31) << 10) | ((n << (10 - e)) & 0x3FF) if e <= 10 else \
        ((e + 31) << 10) | ((n >> (e - 10)) & 0x3FF)
