"""nv_full's FP16 convolution arithmetic (verif/model/conv_fp16.py) against independent facts:
the Booth carry-save pair sums to the exact product plus the rows' constant, a shifted product
is within one unit of the truncated exact one, CACC's rounding is the exact sum rounded to 39
bits (Python fractions), the fp32 conversion agrees with IEEE rounding away from ties, a word
whose products need no alignment is exact, and convolutions are close to exact."""
from __future__ import annotations

import random
import struct
from fractions import Fraction

import numpy as np
import pytest

from verif.model.conv_fp16 import (BOOTH_BIAS, booth_product, cacc_add, cacc_to_fp32, cmac_words,
                                   conv_dc_fp16)


def f16(v: float) -> int:
    return struct.unpack("<H", struct.pack("<e", v))[0]


def value16(b: int) -> Fraction:
    """Exact value of an fp16 pattern; infinity counts as 2**16 (the MAC cell's view)."""
    s, e, f = b >> 15, (b >> 10) & 31, b & 1023
    v = Fraction(f, 1 << 24) if e == 0 else Fraction(1024 + f, 1 << 10) * Fraction(2) ** (e - 15)
    return -v if s else v


def fp32_value(b: int) -> float:
    return struct.unpack("<f", struct.pack("<I", b))[0]


def test_booth_pair_is_the_product_plus_the_row_constant():
    rng = np.random.default_rng(3)
    y, z = rng.integers(0, 16377, 200_000), rng.integers(0, 16377, 200_000)
    neg = rng.integers(0, 2, 200_000)
    u0, u1 = booth_product(y, z, neg)
    assert np.array_equal(u0 + u1, np.where(neg == 1, -y * z, y * z) + BOOTH_BIAS)
    assert u0.min() >= 0 and u1.min() >= 0 and max(u0.max(), u1.max()) < 1 << 32
    off = 0
    for sh in range(4, 32, 4):      # each vector shifted alone: within one of the exact shift
        c = (u0 >> sh) + (u1 >> sh) - (BOOTH_BIAS >> sh)
        d = c - (np.where(neg == 1, -y * z, y * z) >> sh)
        assert set(np.unique(d)) <= {-1, 0, 1}
        off += np.count_nonzero(d)
    assert off > 0                  # not the truncated exact product


def test_word_of_aligned_products_is_exact():
    """Operands whose exponents share e >> 2: every product unshifted, the word exact."""
    rng = random.Random(5)
    w = [f16(rng.choice((1, -1)) * rng.randint(1024, 2047) / 1024) for _ in range(64)]
    d = [f16(rng.choice((1, -1)) * rng.randint(1024, 2047) / 1024) for _ in range(64)]
    nan, _, T, S = cmac_words(np.array([w]), np.array([d]))
    exact = sum(value16(a) * value16(b) for a, b in zip(w, d))
    assert not nan[0, 0] and Fraction(int(S[0, 0])) * Fraction(2) ** (4 * int(T[0, 0]) - 50) == exact


def test_word_nan_priority_and_infinity():
    nan_w, nan_d = 0x7E01, 0xFC05
    one = f16(1.0)
    w = np.full((2, 64), one)
    d = np.full((1, 64), one)
    w[0, 9], w[0, 3], d[0, 1] = nan_w, nan_w | 0x8000, nan_d
    nan, bits, _, _ = cmac_words(w, d)
    assert nan.all() and bits[0, 0] == nan_w | 0x8000 and bits[1, 0] == nan_d
    # infinity is the number 2**16; zeros (of either sign) are masked out
    w, d = np.array([[0x7C00, 0x8000, one]]), np.array([[f16(2.0), f16(5.0), f16(0.5)]])
    nan, _, T, S = cmac_words(w, d)
    assert not nan[0, 0] and Fraction(int(S[0, 0])) * Fraction(2) ** (4 * int(T[0, 0]) - 50) == 2 ** 17 + Fraction(1, 2)


def test_accumulation_rounds_to_39_bits_ties_away():
    rng = random.Random(11)
    for _ in range(300):
        acc = np.zeros((1, 1), object)
        acc[0, 0] = 0
        nan = np.full((1, 1), -1, np.int64)
        exact = Fraction(0)
        for _ in range(rng.randint(1, 6)):
            S, T = rng.randint(-(1 << 34), 1 << 34), rng.randint(0, 14)
            acc, nan = cacc_add(acc, nan, (np.array([[False]]), np.array([[-1]]), np.array([[T]]),
                                          np.array([[S]], np.int64)))
            exact += Fraction(S << (4 * T))
            a = abs(exact)
            if a:                               # round |exact| to 39 significant bits
                n = a.numerator.bit_length() - 39 if a.denominator == 1 else 0
                if n > 0:
                    q, r = divmod(a.numerator, 1 << n)
                    a = Fraction((q + (2 * r >= 1 << n)) << n)
            exact = a if exact >= 0 else -a
            assert acc[0, 0] == exact


def test_fp32_conversion():
    acc = np.array([[0, 3 << 50, -(1 << 40) - 1, (1 << 60) + (1 << 36)]], object)
    out = cacc_to_fp32(acc, np.full(acc.shape, -1, np.int64))
    # 2**10 + 2**-14 is half an fp32 unit above 2**10: a tie, rounded away from zero
    assert [fp32_value(int(b)) for b in out[0]] == [0.0, 3.0, -(2.0 ** -10), 2.0 ** 10 + 2.0 ** -13]
    # a tie rounds away from zero: 1 + 2**-24 (exactly between two fp32 values) -> 1 + 2**-23
    acc = np.array([[(1 << 50) + (1 << 26)]], object)
    assert fp32_value(int(cacc_to_fp32(acc, np.full((1, 1), -1, np.int64))[0, 0])) == 1 + 2.0 ** -23
    # a NaN: exponent 255, the fp16 payload in bits 9:0, the sign kept
    assert int(cacc_to_fp32(np.array([[0]], object), np.array([[0xFE05]]))[0, 0]) == 0xFF800205


@pytest.mark.parametrize("h, w, k, c, r, s", [(5, 6, 5, 70, 4, 2), (3, 3, 1, 5, 3, 2)])
def test_convolution_close_to_exact(h, w, k, c, r, s):
    """Two channel groups or one, within fp16's precision of the exact sum."""
    rng = random.Random(f"{h},{w},{k},{c},{r},{s}")
    x = np.array([[[f16(rng.uniform(-2, 2)) for _ in range(w)] for _ in range(h)] for _ in range(c)])
    wt = np.array([[[[f16(rng.uniform(-2, 2)) for _ in range(c)] for _ in range(s)]
                    for _ in range(r)] for _ in range(k)])
    ho, wo = h - r + 1, w - s + 1
    out = conv_dc_fp16(x, wt, ho, wo, 1, 1, 1, 1, 0, 0, 0)
    for kk in range(k):
        for yy in range(ho):
            for xx in range(wo):
                exact = sum(value16(int(wt[kk, ri, si, ci])) * value16(int(x[ci, yy + ri, xx + si]))
                            for ri in range(r) for si in range(s) for ci in range(c))
                got = fp32_value(int(out[kk, yy, xx]))
                assert abs(got - float(exact)) <= 2.0 ** -14 * max(1.0, abs(float(exact))) * 64
