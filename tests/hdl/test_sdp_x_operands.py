"""SDP X-operand plumbing RTL: the stream gearboxes of hdl.sdp.gearbox (Split, Merge, Repeat,
Join) and the BRDMA/NRDMA operand unpacker hdl.sdp.brdma.OperandUnpack (every DATA_USE /
DATA_SIZE / DATA_MODE), against plain-Python formulas, with random stalls."""
import random

import pytest

from amaranth.hdl import ClockDomain, Module, signed, unsigned
from amaranth.lib import data
from amaranth.sim import Simulator

from hdl.sdp.brdma import OperandUnpack
from hdl.sdp.gearbox import Join, Merge, Repeat, Split
from streams import check_stream_stable, stream_get, stream_put


def _sim(dut, producers, consumers, streams_to_check):
    errors = []
    top = Module()                      # a sync domain also for combinational DUTs (Join)
    top.domains.sync = ClockDomain()
    top.submodules.dut = dut
    sim = Simulator(top)
    sim.add_clock(1e-8)
    for p in producers + consumers:
        sim.add_testbench(p)
    for name, s in streams_to_check:
        sim.add_process(check_stream_stable(s, errors=errors, name=name))
    sim.run()
    assert errors == []


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


@pytest.mark.parametrize("counts,p,seed", [([1, 3, 7], 0.3, 1), ([2], 0.0, 2), ([1], 0.5, 3)])
def test_repeat(counts, p, seed):
    rng = random.Random(seed)
    dut = Repeat(unsigned(8), 5)
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
            if p == 0:
                assert stamps == list(range(1, 1 + len(items) * c))

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


def _s(v, bits):
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def unpack_ref(group_bytes, use, two_byte, lanes):
    """(alu, mul) per lane from the bytes of one element group (format.rst Bias / Batch
    Normalization data format: ALU component first, little endian, sign-extended)."""
    out = []
    for e in range(lanes):
        if use == 2 and two_byte:
            b = group_bytes[4 * e:4 * e + 4]
            out.append((_s(b[0] | b[1] << 8, 16), _s(b[2] | b[3] << 8, 16)))
        elif use == 2:
            out.append((_s(group_bytes[2 * e], 8), _s(group_bytes[2 * e + 1], 8)))
        elif two_byte:
            v = _s(group_bytes[2 * e] | group_bytes[2 * e + 1] << 8, 16)
            out.append((v, v))
        else:
            v = _s(group_bytes[e], 8)
            out.append((v, v))
    return out


@pytest.mark.parametrize("use", [0, 1, 2])
@pytest.mark.parametrize("two_byte", [0, 1])
@pytest.mark.parametrize("per_element,repeat", [(1, 1), (0, 3)])
def test_operand_unpack(use, two_byte, per_element, repeat):
    lanes = 8
    rng = random.Random(use * 4 + two_byte * 2 + per_element)
    dut = OperandUnpack(lanes, lanes)
    k = (2 if use == 2 else 1) * (2 if two_byte else 1)
    n_groups = 9
    stream_bytes = [rng.randrange(256) for _ in range(n_groups * k * lanes)]
    atoms = [int.from_bytes(bytes(stream_bytes[a * lanes:(a + 1) * lanes]), "little")
             for a in range(n_groups * k)]
    got = []

    async def prod(ctx):
        ctx.set(dut.fmt.use, use)
        ctx.set(dut.fmt.two_byte, two_byte)
        ctx.set(dut.fmt.per_element, per_element)
        ctx.set(dut.repeat, repeat)
        await stream_put(ctx, dut.i, atoms, rng=rng, p_stall=0.3)

    async def cons(ctx):
        got.extend(await stream_get(ctx, dut.o, n_groups * repeat, rng=rng, p_stall=0.3))

    _sim(dut, [prod], [cons], [("i", dut.i), ("o", dut.o)])
    gb = k * lanes
    want = [unpack_ref(stream_bytes[g * gb:(g + 1) * gb], use, two_byte, lanes)
            for g in range(n_groups) for _ in range(repeat)]
    assert [[(int(x.alu), int(x.mul)) for x in g] for g in got] == want
