"""PDP split width: the band walker of the PDP DMAs (hdl.pdp.dma.BandWalker, with
hdl.pdp.bands.Bands) against the band geometry of the programming guide written out in Python,
and the pooling core fed band after band against the numpy model's unsplit ``pool_plane``
(the bands' outputs are the columns of the unsplit pooling), with random stalls."""
import random

import numpy as np
import pytest

from amaranth.sim import Simulator

from hdl.pdp.bands import Bands
from hdl.pdp.core import PdpCore
from hdl.pdp.dma import BandWalker, _OutBandWalker
from streams import check_stream_stable, stream_get, stream_put
from verif.model.pdp import POOL_AVE, POOL_MAX, pool_plane  # the reference

ATOM = 8


def _bands(w, ow, kw, sx, pl, ins, outs):
    """[(first input column read, columns read, pad_left, first output column, out width)]."""
    overlap = kw - sx
    res, i0, o0 = [], 0, 0
    for b, (wi, wo) in enumerate(zip(ins, outs)):
        if b == 0:
            res.append((0, wi, pl, 0, wo))
        else:
            res.append((i0 - overlap, wi + overlap, 0, o0, wo))
        i0, o0 = i0 + wi, o0 + wo
    assert i0 == w and o0 == ow
    return res


# the split trace's geometry (pdp_16x6x16_4x2_split_max_int8_0): 16 columns, kernel 4x2,
# stride 2x2, padding l/t/r/b 2/1/2/1, bands in 2/12/2 out 1/6/2; and a stride > kernel case
SPLITS = [
    ("trace", POOL_MAX, 16, 6, 2, 4, 2, 2, 2, 2, 1, 2, 1, [2, 12, 2], [1, 6, 2]),
    ("ave_4bands", POOL_AVE, 13, 3, 1, 3, 3, 2, 2, 1, 1, 1, 1, [4, 2, 2, 5], [2, 1, 1, 3]),
]


def _regs(case):
    name, method, w, h, surf, kw, kh, sx, sy, pl, pt, pr, pb, ins, outs = case
    n = len(ins)
    return dict(split_num=n - 1, cube_width=w - 1, cube_out_width=sum(outs) - 1,
                in_first=ins[0] - 1, in_mid=ins[1] - 1 if n > 2 else 0, in_last=ins[-1] - 1,
                out_first=outs[0] - 1, out_mid=outs[1] - 1 if n > 2 else 0,
                out_last=outs[-1] - 1, kw=kw, sx=sx, pad_left=pl)


@pytest.mark.parametrize("output", [False, True])
@pytest.mark.parametrize("max_burst", [1, 4])
@pytest.mark.parametrize("case", SPLITS, ids=[c[0] for c in SPLITS])
def test_band_walker(case, max_burst, output):
    name, method, w, h, surf, kw, kh, sx, sy, pl, pt, pr, pb, ins, outs = case
    ow = sum(outs)
    bands = _bands(w, ow, kw, sx, pl, ins, outs)
    base, ls, ss = 0x1000, 0x100, 0x1000
    expect = []
    for c0, cw, _, o0, owb in bands:
        col, width = (o0, owb) if output else (c0, cw)
        expect += [base + s * ss + y * ls + (col + x) * ATOM
                   for s in range(surf) for y in range(h) for x in range(width)]
    cls = _OutBandWalker if output else BandWalker
    dut = cls(addr_width=32, atom_bytes=ATOM, atom_elems=ATOM, beat_bytes=ATOM,
              max_burst=max_burst)
    rng = random.Random(7)
    runs = []

    async def bench(ctx):
        ctx.set(dut.cube, {"base": base, "line_stride": ls, "surface_stride": ss,
                           "width": 0, "height": h - 1, "channel": surf * ATOM - 1})
        ctx.set(dut.band, _regs(case))
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        while True:
            ctx.set(dut.runs.ready, rng.random() < 0.7)
            _, _, valid, ready, payload = await ctx.tick().sample(
                dut.runs.valid, dut.runs.ready, dut.runs.payload)
            if valid and ready:
                runs.append((payload.addr, payload.count, payload.last))
                if payload.last:
                    break
            assert len(runs) <= len(expect)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run_until(1e-8 * 20 * len(expect))
    got = [a + k * ATOM for a, n, _ in runs for k in range(n)]
    assert got == expect
    assert [last for *_, last in runs] == [0] * (len(runs) - 1) + [1]


@pytest.mark.parametrize("gap", [0, 1, 3])
@pytest.mark.parametrize("case", SPLITS, ids=[c[0] for c in SPLITS])
def test_band_sequencer(case, gap):
    """Bands' current-band and next-band registers against the geometry, with ``next`` pulses
    ``gap`` cycles apart (0: in consecutive cycles, as a band of one item makes them)."""
    name, method, w, h, surf, kw, kh, sx, sy, pl, pt, pr, pb, ins, outs = case
    bands = _bands(w, sum(outs), kw, sx, pl, ins, outs)
    dut = Bands()
    seen = []

    async def bench(ctx):
        ctx.set(dut.regs, _regs(case))
        ctx.set(dut.restart, 1)
        await ctx.tick()
        ctx.set(dut.restart, 0)
        for b in range(len(bands)):
            for _ in range(gap):
                await ctx.tick()
            seen.append((ctx.get(dut.col), ctx.get(dut.width), ctx.get(dut.pad_left_b),
                         ctx.get(dut.out_col), ctx.get(dut.out_width), ctx.get(dut.last_col),
                         ctx.get(dut.last), ctx.get(dut.next_last_col),
                         ctx.get(dut.next_pad_left_b)))
            ctx.set(dut.next, 1)
            await ctx.tick()
            ctx.set(dut.next, 0)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    for b, (c0, cw, plb, o0, owb) in enumerate(bands):
        got = seen[b]
        assert got[:7] == (c0, cw, plb, o0, owb, cw - 1, b == len(bands) - 1), (b, got)
        if b + 1 < len(bands):
            assert got[7:] == (bands[b + 1][1] - 1, bands[b + 1][2]), (b, got)


@pytest.mark.parametrize("lanes", [1, 8])
@pytest.mark.parametrize("case", SPLITS, ids=[c[0] for c in SPLITS])
def test_core_bands(case, lanes):
    name, method, w, h, surf, kw, kh, sx, sy, pl, pt, pr, pb, ins, outs = case
    ow = sum(outs)
    oh = (pt + h + pb - kh) // sy + 1
    bands = _bands(w, ow, kw, sx, pl, ins, outs)
    nrng = np.random.default_rng(3)
    rng = random.Random(3)
    x = nrng.integers(-128, 128, size=(surf * ATOM, h, w))
    pads = [int(nrng.integers(0, 1 << 19)) for _ in range(7)]
    recip_w, recip_h = (1 << 16) // kw, (1 << 16) // kh
    want = pool_plane(x, method, kw, kh, sx, sy, pl, pt, pr, pb, ow, oh, pads, recip_w, recip_h)
    items, expect = [], []
    for c0, cw, _, o0, owb in bands:
        items += [[int(v) for v in x[s * ATOM:(s + 1) * ATOM, y, c0 + i]]
                  for s in range(surf) for y in range(h) for i in range(cw)]
        expect += [[int(v) for v in want[s * ATOM:(s + 1) * ATOM, y, o0 + i]]
                   for s in range(surf) for y in range(oh) for i in range(owb)]
    dut = PdpCore(ATOM, lanes, 16)
    got = []

    def set_band(ctx, b):
        c0, cw, plb, o0, owb = bands[b]
        ctx.set(dut.last_col, cw - 1)
        ctx.set(dut.pad_left, plb)
        ctx.set(dut.out_width, owb)
        # the next band's, as hdl.pdp.bands.Bands presents them (0 after the last band)
        _, ncw, nplb, _, _ = bands[b + 1] if b + 1 < len(bands) else (0, 1, 0, 0, 0)
        ctx.set(dut.next_last_col, ncw - 1)
        ctx.set(dut.next_pad_left, nplb)

    async def producer(ctx):
        for sig, v in ((dut.method, method), (dut.kw, kw), (dut.kh, kh), (dut.sx, sx),
                       (dut.sy, sy), (dut.pad_top, pt), (dut.height, h), (dut.out_height, oh),
                       (dut.surfaces, surf), (dut.recip_w, recip_w), (dut.recip_h, recip_h)):
            ctx.set(sig, v)
        ctx.set(dut.pads, [0] + pads)
        set_band(ctx, 0)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        await stream_put(ctx, dut.i, items, rng=rng)

    async def bander(ctx):
        b = 0
        async for _, _, band_next in ctx.tick().sample(dut.band_next):
            if band_next and b + 1 < len(bands):
                b += 1
                set_band(ctx, b)

    async def consumer(ctx):
        got.extend(await stream_get(ctx, dut.o, len(expect), rng=rng))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(producer)
    sim.add_process(bander)
    sim.add_testbench(consumer)
    sim.add_process(check_stream_stable(dut.o))
    sim.run_until(1e-8 * (len(items) + len(expect)) * 8 * 8)
    got = [[int(v) for v in a] for a in got]
    assert len(got) == len(expect)
    for k, (a, b) in enumerate(zip(expect, got)):
        assert a == b, f"{name} lanes={lanes}: atom {k} expected {a} got {b}"
