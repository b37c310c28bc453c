"""hdl.cdma.expand.WtExpand: compressed weights (``verif.gen.compress.compress_weights``) and
their WMB in, the uncompressed bytes out as CBUF entries, under random stalls on every stream;
the reference is the uncompressed bytes themselves, with the rest of the last entry 0 (the
surfaces' unused rest random). Layers follow one another (the drop of the unused WMB and
compressed bytes between them is checked by the next layer's bytes), bypass layers
(uncompressed weights) among them. Geometries: nv_small's 8-byte atoms and entries, nv_full's
32-byte atoms in 64-byte entries with 16-bit elements, and 4 atoms an entry; the full-rate
cases check one entry per cycle at half zeros (R times the atoms' rate) and one per R cycles
without zeros."""
import random

import pytest
from amaranth.sim import Simulator
from streams import stream_get, stream_put

from hdl.cdma.expand import WtExpand
from verif.gen.compress import compress_weights


def _atoms(b: bytes, ab: int) -> list[int]:
    b = b + bytes(-len(b) % ab)
    return [int.from_bytes(b[i:i + ab], "little") for i in range(0, len(b), ab)]


def _layer(rng, ab, elem16, entry_atoms):
    """One layer: (dense bytes, wt atoms, wmb atoms, atoms out, expected out, bypass, wide)."""
    wide = elem16 and rng.random() < 0.5
    eb = 2 if wide else 1
    n = rng.choice([1, 3, 64, 200, rng.randrange(1, 1500)])
    zeros = rng.choice([0.0, 0.5, 0.9, 1.0, rng.random()])
    dense = bytearray()
    for _ in range(n):
        z = rng.random() < zeros
        e = bytes(eb) if z else bytes(rng.randrange(256) for _ in range(eb))
        dense += e
    dense = bytes(dense)
    entry = ab * entry_atoms
    nout = -(-len(dense) // entry)
    want = _atoms(dense + bytes(nout * entry - len(dense)), entry)
    bypass = rng.random() < 0.2
    if bypass:
        raw = dense + bytes(rng.randrange(256) for _ in range(-len(dense) % entry))
        return dense, _atoms(raw, ab), [], nout, _atoms(raw, entry), True, wide
    cw = compress_weights(dense, [n], eb)
    # the surfaces' rest (past the WMB's n bits and the non-zero bytes) is not used: random
    wmb = bytearray(cw.wmb)
    for i in range(n, 8 * len(wmb)):
        wmb[i // 8] |= rng.randrange(2) << (i % 8)
    nz = cw.group_bytes[0]
    wts = cw.weights[:nz] + bytes(rng.randrange(256) for _ in range(len(cw.weights) - nz))
    return dense, _atoms(wts, ab), _atoms(bytes(wmb), ab), nout, want, False, wide


@pytest.mark.parametrize("ab,elem16,entry_atoms", [(8, False, 1), (32, True, 2), (8, True, 4)])
@pytest.mark.parametrize("seed", [1, 2])
def test_expand(ab, elem16, entry_atoms, seed):
    rng = random.Random(seed * 100 + ab + entry_atoms)
    dut = WtExpand(ab, entry_atoms, elem16=elem16)
    layers = [_layer(rng, ab, elem16, entry_atoms) for _ in range(12)]
    got = []

    async def bench(ctx):
        for dense, wt, wmb, nout, want, bypass, wide in layers:
            await ctx.tick().until(~dut.busy)
            ctx.set(dut.entries, nout)
            ctx.set(dut.dense_bytes, len(dense))
            ctx.set(dut.wt_atoms, len(wt))
            ctx.set(dut.wmb_atoms, len(wmb))
            ctx.set(dut.bypass, bypass)
            if elem16:
                ctx.set(dut.wide, wide)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            ctx.set(dut.entries, rng.randrange(1 << 20))        # sampled at start only
            ctx.set(dut.bypass, rng.randrange(2))
            got.append(await stream_get(ctx, dut.o, nout, rng=rng))
        await ctx.tick().until(~dut.busy)

    def feeder(name, idx):
        async def feed(ctx):
            for layer in layers:
                await stream_put(ctx, getattr(dut, name), layer[idx], rng=rng)
        return feed

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(feeder("wt", 1), background=True)
    sim.add_testbench(feeder("wmb", 2), background=True)
    sim.add_testbench(bench)
    sim.run()
    for i, (layer, g) in enumerate(zip(layers, got)):
        want = layer[4]
        bad = [j for j, (a, b) in enumerate(zip(g, want)) if a != b]
        assert not bad, (f"layer {i} ({len(layer[0])} bytes, bypass {layer[5]}): entry {bad[0]} "
                         f"expected {want[bad[0]]:#x} got {g[bad[0]]:#x}")


@pytest.mark.parametrize("ab,r,zeros", [(8, 1, False), (32, 2, True), (32, 2, False),
                                         (8, 4, True)])
def test_expand_full_rate(ab, r, zeros):
    """Streams that never stall: with one element in R non-zero (every other one on nv_full's
    geometry, R = 2), an entry of E = R x A bytes needs A compressed bytes and goes out every
    cycle; without zeros (R > 1) one entry per R cycles, the rate of the compressed atoms."""
    rng = random.Random(ab + r)
    dut = WtExpand(ab, r)
    e, n = ab * r, 32
    dense = bytes((rng.randrange(1, 256) if (i % r == 0 or not zeros) else 0)
                  for i in range(n * e))
    cw = compress_weights(dense, [len(dense)])
    wt, wmb = _atoms(cw.weights, ab), _atoms(cw.wmb, ab)
    stamps = []

    async def bench(ctx):
        ctx.set(dut.entries, n)
        ctx.set(dut.dense_bytes, len(dense))
        ctx.set(dut.wt_atoms, len(wt))
        ctx.set(dut.wmb_atoms, len(wmb))
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        got = await stream_get(ctx, dut.o, n, rng=rng, p_stall=0, timestamps=stamps)
        assert got == _atoms(dense, e)
        await ctx.tick().until(~dut.busy)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for name, items in (("wt", wt), ("wmb", wmb)):
        async def feed(ctx, name=name, items=items):
            await stream_put(ctx, getattr(dut, name), items, rng=rng, p_stall=0)
        sim.add_testbench(feed, background=True)
    sim.add_testbench(bench)
    sim.run()
    per = 1 if zeros or r == 1 else r
    # after the first entry, which waits for the buffer to fill
    assert stamps[-1] - stamps[1] <= per * (n - 2) + 1, stamps
