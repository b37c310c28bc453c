"""nv_full's FP16 direct convolution: CMAC's block-floating-point dot products and CACC's
FP48 accumulation, to the fp32 values CACC delivers to SDP (issue 33).

Facts read from NVIDIA's nvdlav1 sources (C model cmod/cmac/NV_NVDLA_cmac.h, cmod/cacc; RTL
vmod/nvdla/cmac/NV_NVDLA_CMAC_CORE_MAC_exp.v, _MAC_mul.v, _MAC_nan.v, _mac.v and
vmod/nvdla/cacc/NV_NVDLA_CACC_CALC_fp_48b.v; the fact sheet of this session, in our words):

* **CMAC, one kernel x one atomic operation** (up to 64 channels of one channel group at one
  kernel tap). A channel takes part when its weight and its data are both non-zero (CSC's
  masks: +-0 never reaches a multiplier). Each fp16 operand splits into ``hi = e >> 2`` and a
  mantissa ``m = (1024 | f) << (e & 3)`` (``f << 1`` for a denormal), so that
  ``|x| = m * 2**(4*hi - 25)``; infinity is the number 2**16. The channels share the exponent
  ``T = max(hi_w + hi_d)``; each product is formed by a radix-4 Booth multiplier (weight
  recoded, data the multiplicand) as a carry-save pair that is shifted right by
  ``4 * (T - t)`` bits vector by vector (dropped from 32 bits on), then compensated for the
  Booth rows' constant: within one unit of the truncated product, not equal to it. The
  channels' contributions add exactly into ``S``; the word's value is ``S * 2**(4*T - 50)``.
  A NaN among the cell's 64 weights (lowest channel first), else among its 64 data, makes the
  word that NaN (sign and 10-bit payload).
* **CACC**: per output element the words of every channel group (outermost), kernel row and
  kernel column (innermost) are added one at a time into the FP48 accumulator, each sum
  rounded to 39 significant bits, to nearest with ties away from zero; a NaN accumulator
  stays. At the end the value is rounded to fp32's 24 bits, ties away from zero (no overflow
  or denormal is reachable), zero as +0, a NaN as exponent 255 with the fp16 payload in bits
  9:0. CLIP_TRUNCATE does not apply.

Values are exact integers: a word is ``S << 4*T`` in units of 2**-50, and so is every rounded
accumulator value (Python integers in object arrays: sums reach 2**91).
"""
from __future__ import annotations

import numpy as np

from verif.model.fp import fp16_isnan

__all__ = ["cmac_words", "cacc_add", "cacc_to_fp32", "conv_dc_fp16", "conv_img_fp16", "booth_product"]

#: sum of the Booth rows' 0x10000 sign-extension constants, 2**16 + 2**18 + ... + 2**30
BOOTH_BIAS = 0x55550000
#: the accumulator's significant bits, fp32's
ACC_BITS, FP32_BITS = 39, 24


def _decode(x: np.ndarray):
    """fp16 patterns -> (sign, hi, m, nan): ``|x| = m * 2**(4*hi - 25)`` (infinity is 2**16)."""
    x = np.asarray(x, np.int64)
    s, e, f = (x >> 15) & 1, (x >> 10) & 31, x & 1023
    m = np.where(e != 0, (1024 | f) << (e & 3), f << 1)
    return s, e >> 2, m, fp16_isnan(x)


def _csa(vectors: list) -> tuple:
    """3:2 reduction to two vectors: the first floor(n/3) triples of the list become (sum,
    carry << 1) pairs, left-over vectors follow in order, until two remain."""
    while len(vectors) > 2:
        out = []
        k = len(vectors) // 3
        for i in range(k):
            x, y, z = vectors[3 * i:3 * i + 3]
            out += [x ^ y ^ z, ((x & y) | (x & z) | (y & z)) << 1]
        vectors = out + vectors[3 * k:]
    return vectors[0], vectors[1]


def booth_product(y: np.ndarray, z: np.ndarray, neg: np.ndarray) -> tuple:
    """The carry-save pair (U0, U1) of the signed product +-y*z (y the weight mantissa, the
    recoded operand; z the data mantissa; ``neg`` the product's sign), with
    U0 + U1 = +-y*z + BOOTH_BIAS."""
    y, z, neg = (np.asarray(a, np.int64) for a in (y, z, neg))
    rows_q, rows_n = [], []
    for i in range(8):
        tri = ((y << 1) >> (2 * i)) & 7
        tri = np.where(neg != 0, tri ^ 7, tri)
        q = np.select([(tri == 0) | (tri == 7), (tri == 1) | (tri == 2), tri == 3, tri == 4],
                      [0x10000, 0x10000 + z, 0x10000 + 2 * z, 0xFFFF - 2 * z], 0xFFFF - z)
        rows_q.append(q)
        rows_n.append(((tri >= 4) & (tri <= 6)).astype(np.int64))

    def group(q, n):
        return _csa([q[0], 4 * q[1] + n[0], 16 * q[2] + 4 * n[1], 64 * q[3] + 16 * n[2], 64 * n[3]])
    a0, a1 = group(rows_q[:4], rows_n[:4])
    b0, b1 = group(rows_q[4:], rows_n[4:])
    return _csa([a0, a1, b0 << 8, b1 << 8])


def cmac_words(w: np.ndarray, d: np.ndarray):
    """CMAC's words for kernels x positions: ``w`` (K, n) and ``d`` (P, n) fp16 patterns of
    the same n <= 64 channels. Returns (nan, nan_bits, T, S), each (K, P): ``nan`` whether the
    word is a NaN and its fp16 pattern ``nan_bits``; else the value S * 2**(4T - 50)."""
    w, d = np.asarray(w, np.int64), np.asarray(d, np.int64)
    sw, hw, mw, nw = (a[:, None, :] for a in _decode(w))
    sd, hd, md, nd = (a[None, :, :] for a in _decode(d))
    active = ((w[:, None, :] & 0x7FFF) != 0) & ((d[None, :, :] & 0x7FFF) != 0)
    t = np.where(active, hw + hd, 0)
    T = t.max(axis=2)
    sh = 4 * (T[:, :, None] - t)
    u0, u1 = booth_product(mw, md, sw ^ sd)
    ok = active & (sh < 32)
    shc = np.minimum(sh, 31)
    c = (u0 >> shc) + (u1 >> shc) - (BOOTH_BIAS >> shc)
    S = np.where(ok, c, 0).sum(axis=2)
    # NaN priority: the lowest NaN weight, then the lowest NaN data
    wn, dn = nw[:, 0, :], nd[0, :, :]
    w_first = np.where(wn.any(axis=1), w[np.arange(len(w)), wn.argmax(axis=1)], -1)
    d_first = np.where(dn.any(axis=1), d[np.arange(len(d)), dn.argmax(axis=1)], -1)
    nan_bits = np.where(w_first[:, None] >= 0, w_first[:, None], d_first[None, :])
    return nan_bits >= 0, nan_bits, T, S


def _round_mag(v: int, bits: int) -> int:
    """``v`` rounded to ``bits`` significant bits, to nearest, ties away from zero."""
    a = abs(v)
    drop = a.bit_length() - bits
    if drop <= 0:
        return v
    q = (a + (1 << (drop - 1))) >> drop << drop
    return q if v >= 0 else -q


_round39 = np.frompyfunc(lambda v: _round_mag(v, ACC_BITS), 1, 1)
#: a word's value in units of 2**-50: S << 4T (Python integers)
_word_value = np.frompyfunc(lambda s, t: int(s) << (4 * int(t)), 2, 1)


def cacc_add(acc: np.ndarray, acc_nan: np.ndarray, words) -> tuple:
    """One accumulation step: ``acc`` (object array of Python ints, units of 2**-50) and
    ``acc_nan`` (-1, or the fp16 NaN pattern kept) plus CMAC ``words`` (cmac_words' tuple)."""
    nan, nan_bits, T, S = words
    acc = np.where(nan | (acc_nan >= 0), acc, _round39(acc + _word_value(S, T)))
    acc_nan = np.where(acc_nan >= 0, acc_nan, np.where(nan, nan_bits, -1))
    return acc, acc_nan


def _fp32(v: int) -> int:
    if v == 0:
        return 0
    q = _round_mag(v, FP32_BITS)
    a = abs(q)
    n = a.bit_length()                   # value a * 2**-50, a < 2**(n)
    exp = (n - 1) - 50 + 127
    frac = (a << (24 - n) if n <= 24 else a >> (n - 24)) & 0x7FFFFF
    return (int(q < 0) << 31) | (exp << 23) | frac


_to_fp32 = np.frompyfunc(_fp32, 1, 1)


def cacc_to_fp32(acc: np.ndarray, acc_nan: np.ndarray) -> np.ndarray:
    """The fp32 patterns CACC delivers (int64): the rounded value, or a NaN as sign, exponent
    255 and the fp16 payload in bits 9:0."""
    nanv = ((acc_nan >> 15) & 1) << 31 | 0x7F800000 | (acc_nan & 0x3FF)
    return np.where(acc_nan >= 0, nanv, _to_fp32(acc).astype(np.int64)).astype(np.int64)


def conv_dc_fp16(cube: np.ndarray, wts: np.ndarray, ho: int, wo: int, sx: int, sy: int,
                 dx: int, dy: int, pl: int, pt: int, pad: int, atom_c: int = 64,
                 chunk: int = 512) -> np.ndarray:
    """FP16 direct convolution of the (C, H, W) fp16 ``cube`` with (K, R, S, C) fp16 ``wts``
    (bit patterns), outside positions reading the fp16 ``pad``: per output element the CMAC
    words of channel groups of ``atom_c`` (outermost), kernel rows, kernel columns, accumulated
    in that order. Returns (K, ho, wo) int64 fp32 patterns."""
    c, h, w = cube.shape
    k, r, s, _ = wts.shape
    ys = (np.arange(ho) * sy)[:, None].repeat(wo, 1).ravel() - pt
    xs = (np.arange(wo) * sx)[None, :].repeat(ho, 0).ravel() - pl
    out = np.empty((k, ho * wo), np.int64)
    for p0 in range(0, ho * wo, chunk):
        py, px = ys[p0:p0 + chunk], xs[p0:p0 + chunk]
        acc = np.zeros((k, len(py)), object)            # Python int 0s
        acc_nan = np.full((k, len(py)), -1, np.int64)
        for c0 in range(0, c, atom_c):
            c1 = min(c, c0 + atom_c)
            for ri in range(r):
                for si in range(s):
                    yy, xx = py + ri * dy, px + si * dx
                    inside = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
                    d = np.where(inside[:, None],
                                 cube[c0:c1, np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)].T, pad)
                    acc, acc_nan = cacc_add(acc, acc_nan, cmac_words(wts[:, ri, si, c0:c1], d))
        out[:, p0:p0 + chunk] = cacc_to_fp32(acc, acc_nan)
    return out.reshape(k, ho, wo)


def conv_img_fp16(cube: np.ndarray, wts: np.ndarray, ho: int, wo: int, sx: int, sy: int,
                  pt: int, pad: int, ext: int = 1, atom_c: int = 64, chunk: int = 512) -> np.ndarray:
    """FP16 image convolution: ``cube`` (Cpix, H, Wpx) fp16 patterns of the padded CBUF lines
    (pixel-major, channel-minor), ``wts`` (K, R, 1, cw) the pre-extended kernels; lines
    outside 0..H-1 read CSC's 16-bit ``pad`` in every element. Per output element (x, y) the
    CMAC words come, as NVIDIA's nvdlav1 CSC sequences them (NV_NVDLA_CSC_sg / _dl; facts of
    this issue): without post-extension (``ext`` 1) chunks of ``atom_c`` elements of the
    cw-element window at ``x*sx*Cpix`` (outermost), then kernel rows; with ``ext`` 2 or 4 lines,
    one word per group of ``ext`` kernel rows whose atom is the windows of its existing lines
    one after the other (the slot spacing in CBUF changes nothing: a word depends on the
    non-zero (weight, data) pairs in order). Accumulated as :func:`conv_dc_fp16`'s. Returns
    (K, ho, wo) int64 fp32 patterns."""
    cpix, h, wpx = cube.shape
    k, r, _, cw = wts.shape
    lines = np.asarray(cube, np.int64).transpose(1, 2, 0).reshape(h, wpx * cpix)
    n = wpx * cpix
    ys = (np.arange(ho) * sy)[:, None].repeat(wo, 1).ravel() - pt
    xs = (np.arange(wo) * sx * cpix)[None, :].repeat(ho, 0).ravel()
    if ext == 1:
        parts = [(c0, min(cw, c0 + atom_c)) for c0 in range(0, cw, atom_c)]
        groups = [[ri] for ri in range(r)]
    else:
        parts, groups = [(0, cw)], [list(range(g, min(r, g + ext))) for g in range(0, r, ext)]
    out = np.empty((k, ho * wo), np.int64)
    for p0 in range(0, ho * wo, chunk):
        py, px = ys[p0:p0 + chunk], xs[p0:p0 + chunk]
        acc = np.zeros((k, len(py)), object)
        acc_nan = np.full((k, len(py)), -1, np.int64)
        for c0, c1 in parts:
            idx = np.minimum(px[:, None] + np.arange(c0, c1)[None, :], n - 1)
            for rows in groups:
                ds, ws = [], []
                for ri in rows:
                    yy = py + ri
                    inside = ((yy >= 0) & (yy < h))[:, None]
                    ds.append(np.where(inside, lines[np.clip(yy, 0, h - 1)[:, None], idx], pad))
                    ws.append(wts[:, ri, 0, c0:c1])
                acc, acc_nan = cacc_add(acc, acc_nan, cmac_words(np.concatenate(ws, 1),
                                                                 np.concatenate(ds, 1)))
        out[:, p0:p0 + chunk] = cacc_to_fp32(acc, acc_nan)
    return out.reshape(k, ho, wo)
