"""hdl.lib.stream (PipelineStage, Map, SkidBuffer, chain) with random-stall producers and consumers
(tests/hdl/streams.py): every item passes, in order, none lost or duplicated; full throughput
without stalls (cycles measured); payload stable under back-pressure; SkidBuffer's ready has no
combinational path from o.ready."""
import random

import pytest
from amaranth.hdl import Cat, Module, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from hdl.lib.stream import Map, PipelineStage, SkidBuffer, chain
from streams import as_bits, check_stream_stable, simulate_streams, stream_get, stream_put

ATOM = data.ArrayLayout(signed(8), 4)


def _run(dut, items, *, seed, p_in, p_out, expect=None, timestamps=None):
    """Feed ``items`` through ``dut`` (ports i/o) with random stalls; return what came out.
    Checks the stream rule on both sides of the DUT while running."""
    rng_in, rng_out = random.Random(seed), random.Random(seed + 1000)
    got = []

    async def producer(ctx):
        await stream_put(ctx, dut.i, items, rng=rng_in, p_stall=p_in)

    async def consumer(ctx):
        got.extend(await stream_get(ctx, dut.o, len(items), rng=rng_out, p_stall=p_out,
                                    timestamps=timestamps))
        # nothing more may come out: run a few cycles with ready high and see no valid
        ctx.set(dut.o.ready, 1)
        for _ in range(4):
            _, _, valid = await ctx.tick().sample(dut.o.valid)
            assert not valid, "DUT produced more items than it was given"

    simulate_streams(dut, [producer], [consumer], [("i", dut.i), ("o", dut.o)])
    return got


STALLS = [(0.0, 0.0), (0.5, 0.0), (0.0, 0.5), (0.3, 0.3), (0.7, 0.2), (0.2, 0.7)]


@pytest.mark.parametrize("cls", [PipelineStage, SkidBuffer])
@pytest.mark.parametrize("p_in,p_out", STALLS)
def test_passes_all_in_order_plain(cls, p_in, p_out):
    rng = random.Random(7)
    items = [rng.randrange(1 << 12) for _ in range(300)]
    assert _run(cls(unsigned(12)), items, seed=3, p_in=p_in, p_out=p_out) == items


@pytest.mark.parametrize("cls", [PipelineStage, SkidBuffer])
@pytest.mark.parametrize("p_in,p_out", STALLS[2:4])
def test_passes_all_in_order_layout(cls, p_in, p_out):
    rng = random.Random(8)
    items = [[rng.randrange(-128, 128) for _ in range(4)] for _ in range(200)]
    got = _run(cls(ATOM), items, seed=4, p_in=p_in, p_out=p_out)
    assert len(got) == len(items)
    assert all(isinstance(g, data.Const) for g in got)
    assert [list(g) for g in got] == items          # data.Const of an array layout iterates
    assert got == items                              # and compares equal to a list


@pytest.mark.parametrize("cls", [PipelineStage, SkidBuffer])
def test_full_throughput(cls):
    """No stalls: n items leave on n consecutive cycles, the first one cycle after it entered."""
    items = list(range(100))
    stamps = []
    assert _run(cls(unsigned(8)), items, seed=0, p_in=0, p_out=0, timestamps=stamps) == items
    assert stamps == list(range(1, 101))


def test_skid_full_throughput_after_stall():
    """After the consumer stalls with both entries full, the output drains back to back and the
    input resumes at one item per cycle (no bubble on the output)."""
    dut = SkidBuffer(unsigned(8))
    out_stamps = []

    async def bench(ctx):
        ctx.set(dut.i.valid, 1)
        ctx.set(dut.o.ready, 0)
        sent = 0
        n = 20
        for cycle in range(40):
            ctx.set(dut.i.payload, sent)
            ctx.set(dut.i.valid, sent < n)
            ctx.set(dut.o.ready, cycle >= 5)
            _, _, iv, ir, ov, orr, op = await ctx.tick().sample(
                dut.i.valid, dut.i.ready, dut.o.valid, dut.o.ready, dut.o.payload)
            if iv and ir:
                sent += 1
            if ov and orr:
                out_stamps.append((cycle, op))
        assert [p for _, p in out_stamps] == list(range(n))
        cycles = [c for c, _ in out_stamps]
        assert cycles == list(range(5, 5 + n))        # back to back from the first ready cycle

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def _ready_follows_o_ready(dut, seed):
    """Drive random traffic; at every cycle, toggle o.ready without a clock edge and report
    whether i.ready changed (a combinational path from o.ready to i.ready)."""
    rng = random.Random(seed)
    seen = []

    async def bench(ctx):
        for _ in range(300):
            ctx.set(dut.i.valid, rng.random() < 0.7)
            ctx.set(dut.i.payload, rng.randrange(256))
            ctx.set(dut.o.ready, 0)
            r0 = ctx.get(dut.i.ready)
            ctx.set(dut.o.ready, 1)
            r1 = ctx.get(dut.i.ready)
            seen.append(r0 != r1)
            ctx.set(dut.o.ready, rng.random() < 0.4)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return any(seen)


def test_skid_ready_is_registered():
    """SkidBuffer: i.ready never changes when o.ready changes within a cycle, in any state the
    random traffic reaches (both entries full, one, none). The same probe detects the path in
    PipelineStage (whose i.ready = ~o.valid | o.ready), so it is able to fail. By structure,
    SkidBuffer drives i.ready from the skid_valid register only."""
    assert not _ready_follows_o_ready(SkidBuffer(unsigned(8)), seed=5)
    assert _ready_follows_o_ready(PipelineStage(unsigned(8)), seed=5)


@pytest.mark.parametrize("p_in,p_out", [(0.0, 0.0), (0.3, 0.5)])
def test_map_applies_function(p_in, p_out):
    """Map(i_shape, o_shape, fn): each output is fn(input), in order, under random stalls."""
    out = data.ArrayLayout(signed(10), 4)

    def fn(m, atom):                                  # lane k: 3 * x - k, as 4 x signed(10)
        return Cat(*[(atom[k] * 3 - k)[:10] for k in range(4)])

    rng = random.Random(11)
    items = [[rng.randrange(-128, 128) for _ in range(4)] for _ in range(150)]
    got = _run(Map(ATOM, out, fn), items, seed=12, p_in=p_in, p_out=p_out)
    assert got == [[v * 3 - k for k, v in enumerate(it)] for it in items]


def test_map_list_and_dict_results():
    """fn may return a list (array layout: one value per element, each truncated/extended to
    the element) or a dict (struct layout: one value per field)."""
    wide = data.ArrayLayout(signed(12), 4)
    pair = data.StructLayout({"lo": unsigned(4), "sum": signed(10)})
    rng = random.Random(13)
    items = [[rng.randrange(-128, 128) for _ in range(4)] for _ in range(60)]
    got = _run(Map(ATOM, wide, lambda m, a: [a[k] * 16 for k in range(4)]),
               items, seed=14, p_in=0.3, p_out=0.3)
    assert got == [[ref_wrap(v * 16, 12) for v in it] for it in items]
    got = _run(Map(ATOM, pair, lambda m, a: {"lo": a[0], "sum": a[1] + a[2] + a[3]}),
               items, seed=15, p_in=0.3, p_out=0.3)
    assert got == [{"lo": it[0] & 15, "sum": it[1] + it[2] + it[3]} for it in items]


def test_map_list_length_checked():
    with pytest.raises(ValueError, match="returned 1 elements for an output of 4"):
        _run(Map(ATOM, ATOM, lambda m, a: [a[0]]), [[0] * 4], seed=0, p_in=0, p_out=0)


def ref_wrap(v, bits):
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def test_as_bits():
    c = ATOM.const([1, -1, 0, 2])
    assert as_bits(c) == 0x02_00_ff_01
    assert as_bits(5) == 5


def test_stability_checker_catches_violations():
    """check_stream_stable (tests/hdl/streams.py) reports a payload change and a valid drop
    under back-pressure, and nothing for a legal producer."""
    dut = PipelineStage(unsigned(8))
    errors = []

    async def bench(ctx):
        ctx.set(dut.o.ready, 0)
        ctx.set(dut.i.valid, 1)
        ctx.set(dut.i.payload, 1)
        await ctx.tick()                      # item 1 accepted (stage was empty)
        await ctx.tick()                      # offered item 1 again, not taken (stage full)
        assert errors == []
        ctx.set(dut.i.payload, 2)             # illegal: payload changes while waiting
        await ctx.tick()
        assert len(errors) == 1 and "payload changed" in errors[0]
        ctx.set(dut.i.valid, 0)               # illegal: valid drops while waiting
        await ctx.tick()
        await ctx.tick()
        assert len(errors) == 2 and "valid dropped" in errors[1]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.add_process(check_stream_stable(dut.i, errors=errors, name="i"))
    sim.run()


class _Chained(wiring.Component):
    """i -> Map(x + 1) -> SkidBuffer -> Map(2 * x) -> o, built with :func:`chain`."""

    def __init__(self):
        super().__init__({"i": In(stream.Signature(unsigned(8))),
                          "o": Out(stream.Signature(unsigned(8)))})

    def elaborate(self, platform):
        m = Module()
        last = chain(m, wiring.flipped(self.i),
                     inc=Map(unsigned(8), unsigned(8), lambda m, x: (x + 1)[:8]),
                     skid=SkidBuffer(unsigned(8)),
                     dbl=Map(unsigned(8), unsigned(8), lambda m, x: (x << 1)[:8]))
        wiring.connect(m, last.o, wiring.flipped(self.o))
        return m


@pytest.mark.parametrize("p_in,p_out", [(0.0, 0.0), (0.4, 0.4)])
def test_chain_connects_stages_in_order(p_in, p_out):
    rng = random.Random(21)
    items = [rng.randrange(256) for _ in range(100)]
    got = _run(_Chained(), items, seed=22, p_in=p_in, p_out=p_out)
    assert got == [((v + 1) * 2) % 256 for v in items]


def test_chain_needs_a_stage():
    with pytest.raises(ValueError, match="at least one stage"):
        chain(None, None)
