"""PDP split width with a band narrower than the overlap (issue 11, open mismatch pdp_1103 /
pdp_1120): the programming guide's "Limitation / PDP" asks ``kernel_w - stride_x <=
first|mid_in_width``; NVIDIA's nv_small RTL runs such programs and pools, for the band after a
narrow one, the memory left of the cube's first column as data (NV_NVDLA_PDP_RDMA_ig.v starts
band b > 0 ``overlap`` columns left of its first column). The model computes that with a
``LimitationWarning`` naming D_PARTIAL_WIDTH_IN (verif/model/pdp.py ``_check_split``/``run``).

Expected values here are window maxima/minima written out in plain Python over the bytes in
memory (columns < 0 read at ``base + column * atom``), padding only in the first band's left
and the last band's right. Every geometry below was also played as a trace on NVIDIA's own
nv_small RTL through our player (../shared/tools/nvidia-rtl) and its output bytes equal the
model's (MAX k6 s3 PAD_LEFT 4 first band 2 columns; MIN k7 s1 PAD_LEFT 5 bands 3/3/4; also AVE
versions, and the generated programs pdp seeds 12, 14, 21, 29, 76 and the pdp_1103 / pdp_1120
programs).
"""
from __future__ import annotations

import random
import warnings

import pytest

from hdl.config import NV_SMALL
from hdl.regmap import REGMAP
from verif.gen.pdp import _bands, left_margin
from verif.model import LimitationWarning, Nvdla

ATOM = NV_SMALL.memory_atomic
SRC, DST = 0x8000_1000, 0x8010_0000


def write(dla, name, **fields):
    ref = REGMAP.lookup(f"NVDLA_{name}_0")
    v = 0
    for f, val in fields.items():
        fd = ref.reg.field(f)
        v |= (val << fd.lsb) & fd.mask
    dla.write(ref.addr, v)


def run_split(method, kw, sx, pl, pr, ins, outs, h=2, c=12, seed=1, kh=1):
    """One offline MAX (1) / MIN (2) layer, kernel ``kw`` x ``kh`` (``kh`` <= ``h``), stride
    ``sx`` x 1, no vertical padding, bands ``ins``/``outs`` (full lists, first..last), random
    bytes in the cube and in the 64 bytes before it. Returns (output[c][y][x], memory reader,
    LimitationWarning texts); expectations below are for ``kh`` = 1."""
    w, ow = sum(ins), sum(outs)
    h = max(h, kh)
    oh = h - kh + 1
    cp = -(-c // ATOM) * ATOM
    line, surf = (w + 1) * ATOM, (w + 1) * h * ATOM + 2 * ATOM      # gaps after lines/surfaces
    rng = random.Random(seed)
    dla = Nvdla(NV_SMALL)
    dla.mem.write(SRC - 64, rng.randbytes(64 + surf * (cp // ATOM)))
    for u in ("PDP_RDMA", "PDP"):
        write(dla, f"{u}.D_DATA_CUBE_IN_WIDTH", CUBE_IN_WIDTH=w - 1)
        write(dla, f"{u}.D_DATA_CUBE_IN_HEIGHT", CUBE_IN_HEIGHT=h - 1)
        write(dla, f"{u}.D_DATA_CUBE_IN_CHANNEL", CUBE_IN_CHANNEL=c - 1)
        write(dla, f"{u}.D_PARTIAL_WIDTH_IN", PARTIAL_WIDTH_IN_FIRST=ins[0] - 1,
              PARTIAL_WIDTH_IN_MID=ins[1] - 1 if len(ins) > 2 else 0,
              PARTIAL_WIDTH_IN_LAST=ins[-1] - 1)
    write(dla, "PDP_RDMA.D_FLYING_MODE", FLYING_MODE=1)
    write(dla, "PDP_RDMA.D_OPERATION_MODE_CFG", SPLIT_NUM=len(ins) - 1)
    write(dla, "PDP_RDMA.D_POOLING_KERNEL_CFG", KERNEL_WIDTH=kw - 1, KERNEL_STRIDE_WIDTH=sx - 1)
    write(dla, "PDP_RDMA.D_POOLING_PADDING_CFG", PAD_WIDTH=pl)
    dla.write("NVDLA_PDP_RDMA.D_SRC_BASE_ADDR_LOW_0", SRC)
    dla.write("NVDLA_PDP_RDMA.D_SRC_LINE_STRIDE_0", line)
    dla.write("NVDLA_PDP_RDMA.D_SRC_SURFACE_STRIDE_0", surf)
    write(dla, "PDP_RDMA.D_SRC_RAM_CFG", SRC_RAM_TYPE=1)
    write(dla, "PDP.D_DATA_CUBE_OUT_WIDTH", CUBE_OUT_WIDTH=ow - 1)
    write(dla, "PDP.D_DATA_CUBE_OUT_HEIGHT", CUBE_OUT_HEIGHT=oh - 1)
    write(dla, "PDP.D_DATA_CUBE_OUT_CHANNEL", CUBE_OUT_CHANNEL=c - 1)
    write(dla, "PDP.D_OPERATION_MODE_CFG", POOLING_METHOD=method, FLYING_MODE=1,
          SPLIT_NUM=len(ins) - 1)
    write(dla, "PDP.D_PARTIAL_WIDTH_OUT", PARTIAL_WIDTH_OUT_FIRST=outs[0] - 1,
          PARTIAL_WIDTH_OUT_MID=outs[1] - 1 if len(outs) > 2 else 0,
          PARTIAL_WIDTH_OUT_LAST=outs[-1] - 1)
    write(dla, "PDP.D_POOLING_KERNEL_CFG", KERNEL_WIDTH=kw - 1, KERNEL_HEIGHT=kh - 1,
          KERNEL_STRIDE_WIDTH=sx - 1, KERNEL_STRIDE_HEIGHT=0)
    write(dla, "PDP.D_POOLING_PADDING_CFG", PAD_LEFT=pl, PAD_RIGHT=pr)
    dla.write("NVDLA_PDP.D_DST_BASE_ADDR_LOW_0", DST)
    dla.write("NVDLA_PDP.D_DST_LINE_STRIDE_0", ow * ATOM)
    dla.write("NVDLA_PDP.D_DST_SURFACE_STRIDE_0", ow * oh * ATOM)
    write(dla, "PDP.D_DST_RAM_CFG", DST_RAM_TYPE=1)

    def px(ci, y, x):                   # the int8 at column x (may be < 0) of line y
        b = int(dla.mem.read(SRC + (ci // ATOM) * surf + y * line + x * ATOM + ci % ATOM, 1)[0])
        return b - 256 if b > 127 else b

    inputs = [[[px(ci, y, x) for x in range(-8, w)] for y in range(h)] for ci in range(cp)]
    dla.write("NVDLA_PDP_RDMA.D_OP_ENABLE_0", 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dla.write("NVDLA_PDP.D_OP_ENABLE_0", 1)
    assert dla.layers_run == 1
    msgs = [str(x.message) for x in caught if issubclass(x.category, LimitationWarning)]
    out = [[[None] * ow for _ in range(oh)] for _ in range(cp)]
    for ci in range(cp):
        for y in range(oh):
            for x in range(ow):
                b = int(dla.mem.read(DST + (ci // ATOM) * ow * oh * ATOM + y * ow * ATOM
                                     + x * ATOM + ci % ATOM, 1)[0])
                out[ci][y][x] = b - 256 if b > 127 else b
    return out, (lambda ci, y, x: inputs[ci][y][x + 8]), msgs


def want(method, kw, sx, pl, pr, ins, outs, inp, ci, y):
    """Plain-Python split pooling of line ``y``: band by band, band b > 0 from its first column
    minus ``kw - sx`` (reading memory left of column 0 if that is negative), padding (ignored
    by MAX/MIN) only left of the first band and right of the last."""
    f = max if method == 1 else min
    res, start = [], 0
    for b, (wi, wo) in enumerate(zip(ins, outs)):
        c0 = -pl if b == 0 else start - (kw - sx)
        lo = 0 if b == 0 else c0                        # first real column of the band's reads
        hi = start + wi                                 # columns >= hi are padding (last band)
        for j in range(wo):
            cols = [c for c in range(c0 + j * sx, c0 + j * sx + kw) if lo <= c < hi]
            res.append(f(inp(ci, y, c) for c in cols))
        start += wi
    return res


# (method, kw, sx, pl, pr, ins, outs); the first two are the geometries checked on NVIDIA's RTL
NARROW = [
    (1, 6, 3, 4, 0, [2, 9], [1, 3]),                    # band 1 starts at column -1
    (2, 7, 1, 5, 0, [3, 3, 4], [2, 3, 4]),              # band 1 at -3, band 2 at 0
    (1, 8, 2, 7, 1, [1, 2, 2, 3], [1, 1, 1, 2]),        # bands at -5, -3, -1
]


@pytest.mark.parametrize("case", NARROW)
def test_narrow_band_reads_memory_left_of_the_cube(case):
    method, kw, sx, pl, pr, ins, outs = case
    out, inp, msgs = run_split(*case)
    assert len(msgs) == 1 and "PDP.D_PARTIAL_WIDTH_IN" in msgs[0] and "overlap" in msgs[0], msgs
    for ci in range(len(out)):
        for y in range(len(out[0])):
            assert out[ci][y] == want(method, kw, sx, pl, pr, ins, outs, inp, ci, y), (ci, y)
    # and this is not the unsplit pooling: the windows over columns < 0 see memory, not padding
    unsplit = [[want(method, kw, sx, pl, pr, [sum(ins)], [sum(outs)], inp, ci, y)
                for y in range(len(out[0]))] for ci in range(len(out))]
    assert out != unsplit


LEGAL = [
    (1, 4, 2, 2, 2, [2, 12, 2], [1, 6, 2]),             # NVIDIA's pdp_16x6x16_4x2_split geometry
    (2, 4, 11, 2, 2, [2, 11, 31], [1, 1, 3]),           # stride > kernel (band starts skip)
    (1, 5, 2, 1, 0, [4, 6], [1, 3]),                    # first band narrower than the kernel
]


@pytest.mark.parametrize("case", LEGAL)
def test_legal_split_is_the_unsplit_pooling(case):
    method, kw, sx, pl, pr, ins, outs = case
    out, inp, msgs = run_split(*case)
    assert msgs == []
    for ci in range(len(out)):
        for y in range(len(out[0])):
            assert out[ci][y] == want(method, kw, sx, pl, pr, [sum(ins)], [sum(outs)], inp, ci, y)


def test_generator_margin_and_draws():
    """The generator's left margin is the lowest band start, and it draws narrow bands."""
    assert left_margin(6, 3, (1, [2, 0, 9], [1, 0, 3])) == 1
    assert left_margin(7, 1, (2, [3, 3, 4], [2, 3, 4])) == 3
    assert left_margin(4, 2, (2, [2, 12, 2], [1, 6, 2])) == 0
    assert left_margin(4, 11, (2, [2, 11, 31], [1, 1, 3])) == 0
    assert left_margin(8, 1, None) == 0
    rng = random.Random(3)
    seen = 0
    for _ in range(3000):
        kw, sx = rng.randint(2, 8), rng.randint(1, 3)
        b = _bands(rng, rng.randint(2, 24), kw, sx, rng.randint(0, kw - 1), rng.randint(0, kw - 1))
        if b and left_margin(kw, sx, b):
            seen += 1
    assert seen > 50
