"""PDP model against an independent per-window formula (plain Python loops, small cubes).

Reference: each output element covers a kernel window at stride steps over the zero-based input
extended by PAD_LEFT/TOP/RIGHT/BOTTOM. MAX/MIN take the extreme of the real elements; AVE sums the
window with every padded position worth ``v`` (PAD_VALUE_nX programmed as n*v, as the programming
guide intends), then scales by RECIP_KERNEL_WIDTH and RECIP_KERNEL_HEIGHT (16 fraction bits each,
round half away from zero after each). Covers padding, strides, kernels 1-8, split width (must equal
non-split) and the programming-guide limitations.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

from hdl.config import NV_SMALL
from hdl.regmap import REGMAP
from verif.model.formats import ModelConfigError
from verif.model.memory import Memory
from verif.model.pdp import PdpCore
from verif.model.regs import UnitRegs

ATOM = NV_SMALL.memory_atomic


def unit(name):
    return UnitRegs(next(u for u in REGMAP.units if u.name == name))


def setf(ur, reg, **fields):
    r = ur.by_name[reg]
    v = ur.groups[0][reg]
    for f, val in fields.items():
        fd = r.field(f)
        v = (v & ~fd.mask) | ((val << fd.lsb) & fd.mask)
    ur.write(r.offset, v)


def rnd(num, den):
    """round half away from zero of num/den (den > 0)."""
    q = (2 * abs(num) + den) // (2 * den)
    return q if num >= 0 else -q


def ref_pool(cube, method, kw, kh, sx, sy, pl, pt, ow, oh, v, rw, rh):
    c, h, w = cube.shape
    out = np.zeros((c, oh, ow), np.int64)
    for ci in range(c):
        for oy in range(oh):
            for ox in range(ow):
                real, total = [], 0
                for ky in range(kh):
                    for kx in range(kw):
                        y, x = oy * sy - pt + ky, ox * sx - pl + kx
                        if 0 <= y < h and 0 <= x < w:
                            real.append(int(cube[ci, y, x]))
                            total += int(cube[ci, y, x])
                        else:
                            total += v
                if method == 1:
                    out[ci, oy, ox] = max(real)
                elif method == 2:
                    out[ci, oy, ox] = min(real)
                else:
                    out[ci, oy, ox] = rnd(rnd(total * rw, 1 << 16) * rh, 1 << 16)
    return out


def recip(k):
    return round(65536 / k)


def program(w, h, c, method, kw, kh, sx, sy, pl, pt, pr, pb, v=0, split=None):
    pdp, rdma = unit("PDP"), unit("PDP_RDMA")
    ow = (w + pl + pr - kw) // sx + 1
    oh = (h + pt + pb - kh) // sy + 1
    for ur, pre in ((pdp, ""), (rdma, "")):
        setf(ur, "D_DATA_CUBE_IN_WIDTH", CUBE_IN_WIDTH=w - 1)
        setf(ur, "D_DATA_CUBE_IN_HEIGHT", CUBE_IN_HEIGHT=h - 1)
        setf(ur, "D_DATA_CUBE_IN_CHANNEL", CUBE_IN_CHANNEL=c - 1)
    setf(rdma, "D_FLYING_MODE", FLYING_MODE=1)
    setf(rdma, "D_DATA_FORMAT", INPUT_DATA=0)
    setf(pdp, "D_DATA_FORMAT", INPUT_DATA=0)
    setf(pdp, "D_DATA_CUBE_OUT_WIDTH", CUBE_OUT_WIDTH=ow - 1)
    setf(pdp, "D_DATA_CUBE_OUT_HEIGHT", CUBE_OUT_HEIGHT=oh - 1)
    setf(pdp, "D_DATA_CUBE_OUT_CHANNEL", CUBE_OUT_CHANNEL=c - 1)
    setf(pdp, "D_OPERATION_MODE_CFG", POOLING_METHOD=method, FLYING_MODE=1, SPLIT_NUM=0)
    setf(pdp, "D_POOLING_KERNEL_CFG", KERNEL_WIDTH=kw - 1, KERNEL_HEIGHT=kh - 1,
         KERNEL_STRIDE_WIDTH=sx - 1, KERNEL_STRIDE_HEIGHT=sy - 1)
    setf(pdp, "D_POOLING_PADDING_CFG", PAD_LEFT=pl, PAD_TOP=pt, PAD_RIGHT=pr, PAD_BOTTOM=pb)
    for n in range(1, 8):
        setf(pdp, f"D_POOLING_PADDING_VALUE_{n}_CFG", **{f"PAD_VALUE_{n}X": (n * v) & 0x7FFFF})
    setf(pdp, "D_RECIP_KERNEL_WIDTH", RECIP_KERNEL_WIDTH=recip(kw))
    setf(pdp, "D_RECIP_KERNEL_HEIGHT", RECIP_KERNEL_HEIGHT=recip(kh))
    setf(rdma, "D_OPERATION_MODE_CFG", SPLIT_NUM=0)
    if split is not None:
        n = len(split)
        ins = [b[0] for b in split]
        outs = [b[1] for b in split]
        for ur in (pdp, rdma):
            setf(ur, "D_PARTIAL_WIDTH_IN", PARTIAL_WIDTH_IN_FIRST=ins[0] - 1, PARTIAL_WIDTH_IN_LAST=ins[-1] - 1,
                 PARTIAL_WIDTH_IN_MID=(ins[1] - 1) if n > 2 else 0)
            setf(ur, "D_OPERATION_MODE_CFG", SPLIT_NUM=n - 1)
        setf(pdp, "D_PARTIAL_WIDTH_OUT", PARTIAL_WIDTH_OUT_FIRST=outs[0] - 1, PARTIAL_WIDTH_OUT_LAST=outs[-1] - 1,
             PARTIAL_WIDTH_OUT_MID=(outs[1] - 1) if n > 2 else 0)
    return pdp, rdma, ow, oh


def run_layer(pdp, rdma, cube, ow, oh):
    c, h, w = cube.shape
    mem = Memory()
    src, dst = 0x10000, 0x80000
    line, surf = w * ATOM + 16, (w * ATOM + 16) * h
    oline, osurf = ow * ATOM, ow * ATOM * oh + 8
    for ci in range(c):
        for y in range(h):
            for x in range(w):
                mem.write(src + (ci // ATOM) * surf + y * line + x * ATOM + ci % ATOM, bytes([int(cube[ci, y, x]) & 0xFF]))
    setf(rdma, "D_SRC_BASE_ADDR_LOW", SRC_BASE_ADDR_LOW=src)
    setf(rdma, "D_SRC_LINE_STRIDE", SRC_LINE_STRIDE=line)
    setf(rdma, "D_SRC_SURFACE_STRIDE", SRC_SURFACE_STRIDE=surf)
    setf(pdp, "D_DST_BASE_ADDR_LOW", DST_BASE_ADDR_LOW=dst)
    setf(pdp, "D_DST_LINE_STRIDE", DST_LINE_STRIDE=oline)
    setf(pdp, "D_DST_SURFACE_STRIDE", DST_SURFACE_STRIDE=osurf)
    PdpCore(NV_SMALL, mem).run(rdma.view(), pdp.view(), None)
    out = np.zeros((c, oh, ow), np.int64)
    for ci in range(c):
        for y in range(oh):
            for x in range(ow):
                b = int(mem.read(dst + (ci // ATOM) * osurf + y * oline + x * ATOM + ci % ATOM, 1)[0])
                out[ci, y, x] = b - 256 if b > 127 else b
    return out


def random_geometry(rng):
    """A geometry that satisfies the programming guide's PDP limitations."""
    while True:
        kw, kh = rng.randint(1, 8), rng.randint(1, 8)
        sx, sy = rng.randint(1, min(kw + 2, 16)), rng.randint(1, min(kh + 2, 16))
        pl, pt = rng.randint(0, kw - 1), rng.randint(0, kh - 1)
        ow, oh = rng.randint(1, 5), rng.randint(1, 4)
        w = (ow - 1) * sx + kw - pl - rng.randint(0, kw - 1)
        h = (oh - 1) * sy + kh - pt - rng.randint(0, kh - 1)
        pr = (ow - 1) * sx + kw - pl - w
        pb = (oh - 1) * sy + kh - pt - h
        if w >= 1 and h >= 1 and 0 <= pr < kw and 0 <= pb < kh:
            return kw, kh, sx, sy, pl, pt, pr, pb, w, h


@pytest.mark.parametrize("seed", range(30))
def test_pool_random(seed):
    rng = random.Random(seed)
    kw, kh, sx, sy, pl, pt, pr, pb, w, h = random_geometry(rng)
    c = rng.randint(1, 12)
    method = seed % 3
    v = rng.randint(-20, 20)
    cube = np.array([[[rng.randint(-128, 127) for _ in range(w)] for _ in range(h)] for _ in range(c)])
    pdp, rdma, ow, oh = program(w, h, c, method, kw, kh, sx, sy, pl, pt, pr, pb, v)
    got = run_layer(pdp, rdma, cube, ow, oh)
    exp = ref_pool(cube, method, kw, kh, sx, sy, pl, pt, ow, oh, v, recip(kw), recip(kh))
    assert (got == exp).all()


@pytest.mark.parametrize("method", [0, 1, 2])
def test_split_width_equals_non_split(method):
    """W=16, kernel 4 stride 2, pads 2/2: 3 bands (out 1 + 6 + 2) like pdp_16x6x16_4x2_split."""
    rng = random.Random(7 + method)
    w, h, c = 16, 6, 16
    cube = np.array([[[rng.randint(-128, 127) for _ in range(w)] for _ in range(h)] for _ in range(c)])
    args = (w, h, c, method, 4, 2, 2, 2, 2, 1, 2, 1, 3)
    pdp, rdma, ow, oh = program(*args)
    whole = run_layer(pdp, rdma, cube, ow, oh)
    pdp, rdma, ow, oh = program(*args, split=[(2, 1), (12, 6), (2, 2)])
    split = run_layer(pdp, rdma, cube, ow, oh)
    assert (whole == split).all()
    assert (whole == ref_pool(cube, method, 4, 2, 2, 2, 2, 1, ow, oh, 3, recip(4), recip(2))).all()


def test_padding_not_smaller_than_kernel_rejected():
    pdp, rdma, ow, oh = program(4, 4, 8, 1, 2, 2, 2, 2, 0, 0, 0, 0)
    setf(pdp, "D_POOLING_PADDING_CFG", PAD_LEFT=2)
    with pytest.raises(ModelConfigError, match="PAD_LEFT"):
        PdpCore(NV_SMALL, Memory()).run(rdma.view(), pdp.view(), None)


def test_output_size_mismatch_rejected():
    pdp, rdma, ow, oh = program(8, 8, 8, 1, 3, 3, 2, 2, 0, 0, 1, 1)
    setf(pdp, "D_DATA_CUBE_OUT_WIDTH", CUBE_OUT_WIDTH=ow)        # one too many
    with pytest.raises(ModelConfigError, match="CUBE_OUT_WIDTH"):
        PdpCore(NV_SMALL, Memory()).run(rdma.view(), pdp.view(), None)


def test_bad_split_rejected():
    pdp, rdma, ow, oh = program(16, 6, 16, 1, 4, 2, 2, 2, 2, 1, 2, 1, split=[(2, 1), (12, 6), (2, 1)])
    with pytest.raises(ModelConfigError, match="PARTIAL_WIDTH_OUT"):
        PdpCore(NV_SMALL, Memory()).run(rdma.view(), pdp.view(), None)


def test_on_the_fly_input():
    rng = random.Random(3)
    cube = np.array([[[rng.randint(-128, 127) for _ in range(6)] for _ in range(4)] for _ in range(8)])
    pdp, rdma, ow, oh = program(6, 4, 8, 0, 2, 2, 2, 2, 0, 0, 0, 0)
    setf(pdp, "D_OPERATION_MODE_CFG", FLYING_MODE=0)
    mem = Memory()
    setf(pdp, "D_DST_BASE_ADDR_LOW", DST_BASE_ADDR_LOW=0x100)
    setf(pdp, "D_DST_LINE_STRIDE", DST_LINE_STRIDE=ow * ATOM)
    setf(pdp, "D_DST_SURFACE_STRIDE", DST_SURFACE_STRIDE=ow * ATOM * oh)
    PdpCore(NV_SMALL, mem).run(None, pdp.view(), cube)
    got = mem.read(0x100, ow * oh * ATOM).view(np.int8).reshape(oh, ow, ATOM).transpose(2, 0, 1)
    assert (got == ref_pool(cube, 0, 2, 2, 2, 2, 0, 0, ow, oh, 0, recip(2), recip(2))).all()
