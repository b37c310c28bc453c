"""PDP's INT16 and FP16 pooling of the model (nv_full: verif/model/pdp.py pool_plane with
INT_WIDTHS, pool_plane_fp16) against plain per-window formulas.

INT16 reference: the window's real elements plus ``v`` per padded position (PAD_VALUE_nX
programmed as n * v), times RECIP_KERNEL_WIDTH then RECIP_KERNEL_HEIGHT (16 fraction bits each,
rounded half away from zero after each): no intermediate width overflows for int16 data.

FP16 reference: exact rational arithmetic rounded to fp17 (11 significant bits, ties to even)
after each operation, in the order nv_full's RTL adds (each real row left to right plus its
width padding, rows top to bottom, the height padding times the kernel width, the two
reciprocals), the smaller addend cut to 12 guard bits; numpy's float16 for the final rounding.
MAX / MIN: Python's max / min of the real elements' values, +0 above -0, a NaN winning (the
bottom-most row's, left-most first).
"""
from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest

from verif.gen.common import fp17_bits
from verif.model.pdp import INT_WIDTHS, POOL_AVE, POOL_MAX, pool_plane, pool_plane_fp16

from model.test_fp import ref_add17, ref_mul17, round17, value16, value17


def rnd(num, den):
    q = (2 * abs(num) + den) // (2 * den)
    return q if num >= 0 else -q


def windows(cube, kw, kh, sx, sy, pl, pt, ow, oh):
    """Per (c, oy, ox): the window as rows of (value or None for padding)."""
    c, h, w = cube.shape
    for ci in range(c):
        for oy in range(oh):
            for ox in range(ow):
                rows = []
                for ky in range(kh):
                    y = oy * sy - pt + ky
                    rows.append([int(cube[ci, y, x]) if 0 <= y < h and 0 <= x < w else None
                                 for x in (ox * sx - pl + kx for kx in range(kw))])
                yield (ci, oy, ox), rows


def geometry(rng):
    while True:
        kw, kh = rng.randint(1, 8), rng.randint(1, 8)
        sx, sy = rng.randint(1, kw + 1), rng.randint(1, kh + 1)
        pl, pt = rng.randint(0, kw - 1), rng.randint(0, kh - 1)
        ow, oh = rng.randint(1, 4), rng.randint(1, 3)
        w = (ow - 1) * sx + kw - pl - rng.randint(0, kw - 1)
        h = (oh - 1) * sy + kh - pt - rng.randint(0, kh - 1)
        pr, pb = (ow - 1) * sx + kw - pl - w, (oh - 1) * sy + kh - pt - h
        if w >= 1 and h >= 1 and 0 <= pr < kw and 0 <= pb < kh:
            return dict(kw=kw, kh=kh, sx=sx, sy=sy, pl=pl, pt=pt, pr=pr, pb=pb, ow=ow, oh=oh), w, h


@pytest.mark.parametrize("seed", range(12))
def test_int16(seed):
    rng = random.Random(seed)
    g, w, h = geometry(rng)
    cube = np.array([[[rng.randint(-32768, 32767) for _ in range(w)] for _ in range(h)] for _ in range(3)])
    v = rng.randint(-32768, 32767)
    pads = [(n * v) & 0x7FFFF for n in range(1, 8)]
    rw, rh = round(65536 / g["kw"]), round(65536 / g["kh"])
    for method in (0, 1, 2):
        got = pool_plane(cube, method, g["kw"], g["kh"], g["sx"], g["sy"], g["pl"], g["pt"],
                         g["pr"], g["pb"], g["ow"], g["oh"], pads, rw, rh, widths=INT_WIDTHS[("v1", 1)])
        for (ci, oy, ox), rows in windows(cube, g["kw"], g["kh"], g["sx"], g["sy"], g["pl"], g["pt"], g["ow"], g["oh"]):
            real = [x for r in rows for x in r if x is not None]
            if method == 0:
                total = sum(real) + v * (g["kw"] * g["kh"] - len(real))
                want = rnd(rnd(total * rw, 1 << 16) * rh, 1 << 16)
            else:
                want = max(real) if method == 1 else min(real)
            assert got[ci, oy, ox] == want, (method, ci, oy, ox)


def to17(x16: int) -> int:
    """fp16 to fp17: exact; infinity the largest finite value; NaN keeps sign and payload."""
    s, e, m = (x16 >> 15) & 1, (x16 >> 10) & 31, x16 & 0x3FF
    if e == 31:
        return (s << 16) | ((63 << 10) | m if m else 0xFBFF)
    return round17(value16(x16), s)


def to16(x17: int) -> int:
    s, e, m = (x17 >> 16) & 1, (x17 >> 10) & 63, x17 & 0x3FF
    if e == 63 and m:
        return (s << 15) | 0x7C00 | m
    v = abs(value17(x17))
    return (s << 15) | (0x7BFF if v >= 65536 else int(np.float16(float(v)).view(np.uint16)))


def isnan16(x):
    return (x >> 10) & 31 == 31 and x & 0x3FF


def pick16(vals, method):
    """MAX/MIN of fp16 patterns in the hardware's order (NaN: the last row's first)."""
    def key(x):
        v = value16(x & 0x7FFF) if (x >> 10) & 31 != 31 else Fraction(1 << 20)
        v = -v if x >> 15 else v
        return (v, 0 if x >> 15 else 1)        # +0 above -0
    return max(vals, key=key) if method == POOL_MAX else min(vals, key=key)


def fp16_cube(rng, shape, specials):
    vals = []
    for _ in range(int(np.prod(shape))):
        r = rng.random()
        if r < specials:
            v = rng.choice((0x0000, 0x8000, 0x7C00, 0xFC00, 0x7C00 | rng.randint(1, 1023), 0x0001))
        else:
            v = (rng.getrandbits(1) << 15) | (rng.randint(10, 20) << 10) | rng.getrandbits(10)
        vals.append(v)
    return np.array(vals, np.int64).reshape(shape)


@pytest.mark.parametrize("seed", range(16))
def test_fp16(seed):
    rng = random.Random(100 + seed)
    g, w, h = geometry(rng)
    cube = fp16_cube(rng, (2, h, w), specials=(0, 0.05, 0.4)[seed % 3])
    v = rng.choice((0.0, rng.uniform(-8, 8)))
    pads = [fp17_bits(n * v) for n in range(1, 8)]
    rw, rh = fp17_bits(1 / g["kw"]), fp17_bits(1 / g["kh"])
    kw, kh = g["kw"], g["kh"]
    for method in (0, 1, 2):
        got = pool_plane_fp16(cube, method, kw, kh, g["sx"], g["sy"], g["pl"], g["pt"], g["pr"],
                              g["pb"], g["ow"], g["oh"], pads, rw, rh)
        for (ci, oy, ox), rows in windows(cube, kw, kh, g["sx"], g["sy"], g["pl"], g["pt"], g["ow"], g["oh"]):
            real_rows = [[x for x in r if x is not None] for r in rows]
            real_rows = [r for r in real_rows if r]
            if method != POOL_AVE:
                flat = [x for r in real_rows for x in r]
                nans = [r for r in real_rows if any(isnan16(x) for x in r)]
                want = next(x for x in nans[-1] if isnan16(x)) if nans else pick16(flat, method)
            else:
                acc = None
                for r in real_rows:
                    s = to17(r[0])
                    for x in r[1:]:
                        s = ref_add17(s, to17(x))
                    s = ref_add17(s, pads[kw - len(r) - 1] if len(r) < kw else 0)
                    acc = s if acc is None else ref_add17(s, acc)
                m = len(real_rows)
                acc = ref_add17(acc, ref_mul17(pads[kh - m - 1] if m < kh else 0, fp17_bits(kw)))
                want = to16(ref_mul17(ref_mul17(acc, rw), rh))
            assert got[ci, oy, ox] == want, (method, ci, oy, ox, hex(int(got[ci, oy, ox])), hex(want))
