"""PDP core RTL (hdl.pdp.core: unpack -> width pass -> height pass -> reciprocal multiplies ->
pack) against the numpy model's ``pool_plane`` (verif.model.pdp), with random stalls on both
streams, at throughput 1 (nv_small) and 8 elements per cycle: borders with padding on every side,
padding values in average mode, max/min/ave, strides, 1x1 and 8x8 kernels, several surfaces."""
import random

import numpy as np
import pytest

from amaranth.sim import Simulator

from hdl.pdp.core import PdpCore
from streams import check_stream_stable, stream_get, stream_put
from verif.model.pdp import INT_WIDTHS, POOL_AVE, POOL_MAX, POOL_MIN, pool_plane  # the reference

ATOM = 8


def _recip(k):
    return (1 << 16) // k


# (name, method, w, h, surfaces, kw, kh, sx, sy, pl, pt, pr, pb)
CASES = [
    ("1x1_max", POOL_MAX, 3, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0),
    ("2x2_max_pad_rb", POOL_MAX, 4, 3, 2, 2, 2, 1, 1, 0, 0, 1, 1),
    ("2x2_min_pad_rb", POOL_MIN, 4, 3, 2, 2, 2, 1, 1, 0, 0, 1, 1),
    ("3x3_ave_pad_all", POOL_AVE, 5, 5, 2, 3, 3, 2, 2, 1, 1, 1, 1),
    ("3x3_ave_s1_pad2", POOL_AVE, 3, 4, 1, 3, 3, 1, 1, 2, 2, 2, 2),
    ("2x2_max_s4", POOL_MAX, 8, 4, 1, 2, 2, 4, 4, 1, 1, 1, 1),
    ("8x8_ave", POOL_AVE, 2, 4, 1, 8, 8, 1, 3, 5, 6, 6, 7),
    ("4x2_max_s2", POOL_MAX, 4, 4, 2, 4, 2, 2, 2, 2, 1, 2, 1),
    # one output column: with one channel group (lanes = atom) every item of the height pass
    # reads and writes the same line-buffer address as the two before it (issue 10: its read,
    # registered, misses their writes; both are forwarded), and the flush of the bottom padding
    # reads the address the surface's last item wrote: its first (synchronous) read is
    # presented in the cycle that write is made (it must see it: the read port is transparent
    # for the write port)
    ("1x3_ave_1col", POOL_AVE, 1, 5, 2, 1, 3, 1, 1, 0, 1, 0, 1),
    # likewise, three windows in the bottom padding flushed from three banks while the next
    # surface's first lines wait for them (their writes must not reach a bank being flushed)
    ("1x4_max_1col_pb3", POOL_MAX, 1, 5, 3, 1, 4, 1, 1, 0, 2, 0, 3),
    # eight windows starting in the top padding (the height pass's init_n = 8, its first line
    # 8 * sy), and more of them than output lines (init_n_c = out_height)
    ("1x8_max_pt7", POOL_MAX, 2, 10, 2, 1, 8, 1, 1, 0, 7, 0, 7),
    ("1x8_ave_pt7_few", POOL_AVE, 2, 2, 2, 1, 8, 1, 1, 0, 7, 0, 0),
    ("1x5_min_pt4_s2_few", POOL_MIN, 2, 1, 2, 1, 5, 1, 2, 0, 4, 0, 0),
    # every window starts in the top padding (init_n = out_height: none starts later, though
    # the next one's first line would be a real line)
    ("1x5_max_pt4_s2_all_top", POOL_MAX, 2, 5, 2, 1, 5, 1, 2, 0, 4, 0, 0),
]


def _run(lanes, case, seed, p_stall=0.3, tot_bits=15, x_value=None, pad=None):
    name, method, w, h, surf, kw, kh, sx, sy, pl, pt, pr, pb = case
    assert (pl + w + pr - kw) % sx == 0 and (pt + h + pb - kh) % sy == 0
    ow = (pl + w + pr - kw) // sx + 1
    oh = (pt + h + pb - kh) // sy + 1
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    c = surf * ATOM
    x = nrng.integers(-128, 128, size=(c, h, w))
    pads = [int(nrng.integers(0, 1 << 19)) for _ in range(7)]
    if x_value is not None:
        x[...] = x_value
    if pad is not None:
        pads = [pad] * 7
    recip_w, recip_h = _recip(kw), _recip(kh)
    want = pool_plane(x, method, kw, kh, sx, sy, pl, pt, pr, pb, ow, oh, pads, recip_w, recip_h,
                      widths=INT_WIDTHS[("v2" if tot_bits == 15 else "v1", 0)])
    items = [[int(v) for v in x[s * ATOM:(s + 1) * ATOM, yy, xx]]
             for s in range(surf) for yy in range(h) for xx in range(w)]
    expect = [[int(v) for v in want[s * ATOM:(s + 1) * ATOM, yy, xx]]
              for s in range(surf) for yy in range(oh) for xx in range(ow)]

    dut = PdpCore(ATOM, lanes, 16, tot_bits)
    got = []

    async def producer(ctx):
        for sig, v in ((dut.method, method), (dut.kw, kw), (dut.kh, kh), (dut.sx, sx),
                       (dut.sy, sy), (dut.pad_top, pt), (dut.height, h), (dut.out_height, oh),
                       (dut.surfaces, surf), (dut.last_col, w - 1), (dut.pad_left, pl),
                       (dut.out_width, ow), (dut.recip_w, recip_w), (dut.recip_h, recip_h)):
            ctx.set(sig, v)
        ctx.set(dut.pads, [0] + pads)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        await stream_put(ctx, dut.i, items, rng=rng, p_stall=p_stall)

    async def consumer(ctx):
        got.extend(await stream_get(ctx, dut.o, len(expect), rng=rng, p_stall=p_stall))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(producer)
    sim.add_testbench(consumer)
    sim.add_process(check_stream_stable(dut.o))
    # without forwards (four or more items per line) the line-buffer banks are bare block RAM
    # (hdl.lib.memory.RDWR_UNDEFINED): no read whose data are used may be presented in the
    # cycle its entry is written (issue 10; hdl/pdp/pool2d.py)
    p2 = dut.pool2d
    collisions = []
    if not p2.forwards:
        async def no_collision(ctx):
            async for _, _, c in ctx.tick().sample(p2.collision):
                if c:
                    collisions.append(1)
        sim.add_process(no_collision)
    sim.run_until(1e-8 * (len(items) * 8 * 8 + len(expect) * 8 * 8 + 2000))
    assert not collisions, f"{name}: {len(collisions)} reads of a bank entry being written"
    got = [[int(v) for v in atom] for atom in got]
    assert len(got) == len(expect), f"{name}: {len(got)} of {len(expect)} atoms"
    for k, (a, b) in enumerate(zip(expect, got)):
        assert a == b, f"{name} lanes={lanes}: atom {k} expected {a} got {b}"


@pytest.mark.parametrize("lanes", [1, 8])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_pdp_core_vs_model(lanes, case):
    _run(lanes, case, seed=CASES.index(case) * 10 + lanes)


# nvdlav1 (nv_full) wraps the AVE total to 14 bits, nv_small to 15 (random program pdp 2042 on
# nv_full found it): 8x8 windows of 127s, every column real, one or two lines missing,
# PAD_VALUE 500 ((500 x 8)[13:0] = 4000 added) take totals past 8191 (6 x 1016 + 4000 =
# 10096), which only 15 bits keep
WRAP_CASE = ("8x8_ave_wrap", POOL_AVE, 8, 8, 1, 8, 8, 1, 1, 0, 2, 0, 2)


@pytest.mark.parametrize("tot_bits", [14, 15])
def test_pdp_core_ave_total_width(tot_bits):
    _run(8, WRAP_CASE, seed=900 + tot_bits, tot_bits=tot_bits, x_value=127, pad=500)


# one output column without stalls, so the height pass's items follow back to back: with one
# channel group (lanes = atom) each is taken while the next moves in, which reads the oldest
# window's bank before the taken item's write reaches it (issue 10: the oldest window's read data
# are registered a cycle ahead, ``lo_rdr``; ``lo_fd`` forwards the taken item's update, and when
# it ends the oldest window while the next is open, kh > sy, the move waits a cycle)
BACK_TO_BACK = [
    ("1x3_ave_1col_s1", POOL_AVE, 1, 7, 2, 1, 3, 1, 1, 0, 1, 0, 1),
    ("1x4_max_1col_s2", POOL_MAX, 1, 8, 2, 1, 4, 1, 2, 0, 1, 0, 1),
    ("1x5_min_1col_s3", POOL_MIN, 1, 9, 2, 1, 5, 1, 3, 0, 1, 0, 1),
    ("1x2_ave_1col_s2", POOL_AVE, 1, 6, 2, 1, 2, 1, 2, 0, 0, 0, 0),
    ("2x8_max_s1", POOL_MAX, 2, 9, 1, 2, 8, 1, 1, 0, 3, 0, 4),
    # windows ending in the right padding: the width pass's flush starts the cycle after a
    # line's last item, reading the history register before its snapshot is loaded
    ("3x3_ave_pr2", POOL_AVE, 5, 4, 2, 3, 3, 1, 1, 1, 1, 2, 1),
    ("8x2_max_pr7", POOL_MAX, 3, 3, 2, 8, 2, 1, 1, 0, 0, 7, 1),
    ("4x3_min_s2_pr1", POOL_MIN, 6, 6, 2, 4, 3, 2, 2, 1, 1, 1, 0),
]


@pytest.mark.parametrize("lanes", [1, 8])
@pytest.mark.parametrize("case", BACK_TO_BACK, ids=[c[0] for c in BACK_TO_BACK])
def test_pdp_core_back_to_back(lanes, case):
    _run(lanes, case, seed=BACK_TO_BACK.index(case) * 10 + lanes + 500, p_stall=0)
