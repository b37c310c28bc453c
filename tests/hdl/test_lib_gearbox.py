"""hdl.lib.gearbox stream stages (Split, Merge, Repeat, Join, Fork) against plain-Python formulas,
with random-stall producers and consumers."""
import random

import pytest

from amaranth.hdl import signed, unsigned
from amaranth.lib import data

from hdl.lib.gearbox import Fork, Join, Merge, Repeat, Split
from streams import simulate_streams as _sim, stream_get, stream_put


@pytest.mark.parametrize("n,ratio,p,seed", [(8, 8, 0.3, 1), (8, 2, 0.5, 2), (8, 1, 0.3, 3),
                                            (4, 4, 0.0, 4)])
def test_split(n, ratio, p, seed):
    rng = random.Random(seed)
    layout = data.StructLayout({"a": data.ArrayLayout(signed(8), n),
                                "b": data.ArrayLayout(unsigned(3), n)})
    dut = Split(layout, ratio)
    items = [{"a": [rng.randrange(-128, 128) for _ in range(n)],
              "b": [rng.randrange(8) for _ in range(n)]} for _ in range(30)]
    got, stamps = [], []
    k = n // ratio

    async def prod(ctx):
        await stream_put(ctx, dut.i, items, rng=rng, p_stall=p)

    async def cons(ctx):
        got.extend(await stream_get(ctx, dut.o, len(items) * ratio, rng=rng, p_stall=p,
                                    timestamps=stamps))

    _sim(dut, [prod], [cons], [("i", dut.i), ("o", dut.o)])
    want = [{"a": it["a"][g * k:(g + 1) * k], "b": it["b"][g * k:(g + 1) * k]}
            for it in items for g in range(ratio)]
    assert [{"a": [int(v) for v in x.a], "b": [int(v) for v in x.b]} for x in got] == want
    if p == 0:
        assert stamps == list(range(1, 1 + len(want)))       # one group per cycle, no bubble


@pytest.mark.parametrize("n,counts,p,seed", [(4, [4, 2, 1, 3], 0.3, 1), (8, [8], 0.0, 2),
                                             (1, [1], 0.4, 3), (4, [1, 4], 0.6, 4)])
def test_merge(n, counts, p, seed):
    rng = random.Random(seed)
    dut = Merge(signed(8), n)
    layers = [(c, [rng.randrange(-128, 128) for _ in range(c * 12)]) for c in counts]
    got = []

    async def prod(ctx):
        for k, (c, items) in enumerate(layers):
            while len(got) < k:                # count changes when the merger is empty
                await ctx.tick()
            ctx.set(dut.count, c)
            await stream_put(ctx, dut.i, items, rng=rng, p_stall=p)

    async def cons(ctx):
        for c, items in layers:
            stamps = []
            res = await stream_get(ctx, dut.o, len(items) // c, rng=rng, p_stall=p,
                                   timestamps=stamps)
            got.append([[int(v) for v in r][:c] for r in res])
            if p == 0:
                assert [b - a for a, b in zip(stamps, stamps[1:])] == [c] * (len(res) - 1)

    _sim(dut, [prod], [cons], [("i", dut.i), ("o", dut.o)])
    for (c, items), res in zip(layers, got):
        assert res == [items[j:j + c] for j in range(0, len(items), c)]


@pytest.mark.parametrize("registered", [False, True])
@pytest.mark.parametrize("counts,p,seed", [([1, 3, 7], 0.3, 1), ([2], 0.0, 2), ([1], 0.5, 3),
                                           ([1], 0.0, 4)])
def test_repeat(counts, p, seed, registered):
    rng = random.Random(seed)
    dut = Repeat(unsigned(8), 5, registered_ready=registered)
    layers = [(c, [rng.randrange(256) for _ in range(10)]) for c in counts]
    got = []

    async def prod(ctx):
        for k, (c, items) in enumerate(layers):
            while len(got) < k:
                await ctx.tick()
            ctx.set(dut.count, c)
            await stream_put(ctx, dut.i, items, rng=rng, p_stall=p)

    async def cons(ctx):
        for c, items in layers:
            stamps = []
            got.append(await stream_get(ctx, dut.o, len(items) * c, rng=rng, p_stall=p,
                                        timestamps=stamps))
            if p == 0 and not registered:
                assert stamps == list(range(1, 1 + len(items) * c))
            elif p == 0:     # a cycle between the last copy of an item and the next item
                assert stamps == [1 + j + j // c for j in range(len(items) * c)]

    _sim(dut, [prod], [cons], [("i", dut.i), ("o", dut.o)])
    for (c, items), res in zip(layers, got):
        assert res == [v for v in items for _ in range(c)]


@pytest.mark.parametrize("en", [0b111, 0b101, 0b001, 0b011])
def test_join(en):
    rng = random.Random(en)
    dut = Join({"d": unsigned(8), "x": unsigned(4), "y": signed(6)})
    n = 40
    items = {"d": [rng.randrange(256) for _ in range(n)], "x": [rng.randrange(16) for _ in range(n)],
             "y": [rng.randrange(-32, 32) for _ in range(n)]}
    got = []
    names = ["d", "x", "y"]

    def prod(name, k):
        async def run(ctx):
            ctx.set(dut.en, en)
            if en >> k & 1:
                await stream_put(ctx, getattr(dut, f"i_{name}"), items[name], rng=rng, p_stall=0.4)
        return run

    async def cons(ctx):
        got.extend(await stream_get(ctx, dut.o, n, rng=rng, p_stall=0.3))

    _sim(dut, [prod(nm, k) for k, nm in enumerate(names)], [cons],
         [("o", dut.o)] + [(nm, getattr(dut, f"i_{nm}")) for nm in names])
    for k, nm in enumerate(names):
        if en >> k & 1:
            assert [int(g[nm]) for g in got] == items[nm], nm


@pytest.mark.parametrize("n", [1, 2, 3])
def test_fork(n):
    """Every consumer gets every item, in order, under independent random stalls."""
    rng = random.Random(n)
    dut = Fork(unsigned(8), n)
    items = [rng.randrange(256) for _ in range(50)]
    got = [[] for _ in range(n)]

    async def prod(ctx):
        await stream_put(ctx, dut.i, items, rng=rng, p_stall=0.3)

    def cons(k):
        async def run(ctx):
            got[k].extend(await stream_get(ctx, getattr(dut, f"o_{k}"), len(items), rng=rng, p_stall=0.4))
        return run

    _sim(dut, [prod], [cons(k) for k in range(n)],
         [("i", dut.i)] + [(f"o_{k}", getattr(dut, f"o_{k}")) for k in range(n)])
    for k in range(n):
        assert [int(v) for v in got[k]] == items, k


def test_fork_rejects_zero():
    with pytest.raises(ValueError, match="at least one consumer"):
        Fork.__init__(object.__new__(Fork), unsigned(8), 0)
