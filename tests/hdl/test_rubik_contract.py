"""hdl/rubik/contract.py ContractBuffer and hdl/dma/group.py Ungroup (Amaranth simulator, random
stalls on both sides): the atoms of contract's chunked read order leave in the output line's
order, two per transfer, against a plain-Python list of (line, w, dx)."""
from __future__ import annotations

import random

import pytest
from amaranth.sim import Simulator

from hdl.dma.group import Ungroup
from hdl.rubik.contract import ContractBuffer

AB = 32            # atom bytes
BITS = 8 * AB


def atom(layer: int, line: int, w: int, dx: int) -> int:
    """A distinct atom value for (layer, line, pixel, phase)."""
    return int.from_bytes(random.Random(f"{layer}/{line}/{w}/{dx}").randbytes(AB), "little")


def read_order(layer, lines, W, sx, chunk, rng, p_odd=0.5):
    """Transfers (count, [atoms]) as a wide read DMA gives them: per line, per chunk of
    ``chunk`` pixels, per phase one run cut into pieces of 1 or 2 atoms (the run starts on an
    odd lane, a first piece of 1, with probability ``p_odd``)."""
    out = []
    for line in range(lines):
        for c0 in range(0, W, chunk):
            n = min(chunk, W - c0)
            for dx in range(sx):
                run = [atom(layer, line, c0 + i, dx) for i in range(n)]
                i = 1 if rng.random() < p_odd else 0     # odd first lane: a first piece of 1
                pieces = [run[:i]] if i else []
                while i < n:
                    pieces.append(run[i:i + 2])
                    i += 2
                out += [p for p in pieces if p]
    return out


async def cycle(ctx, dut, rng, src, lanes, p_in, p_out):
    """One clock cycle of a random-stall producer of wide transfers on ``dut.i`` (``src`` a
    list of atom lists: the head offered with garbage in its unused lanes, popped when taken)
    and a random-stall consumer on ``dut.o``: returns the payload taken, or None."""
    offer = bool(src) and rng.random() < p_in
    ctx.set(dut.i.valid, offer)
    if offer:
        g = src[0]
        data = 0
        for k in range(lanes):
            data |= (g[k] if k < len(g) else rng.getrandbits(BITS)) << (BITS * k)
        ctx.set(dut.i.payload.data, data)
        ctx.set(dut.i.payload.count, len(g))
    take = rng.random() < p_out
    ctx.set(dut.o.ready, take)
    await ctx.delay(1e-9)
    if offer and ctx.get(dut.i.ready):
        src.pop(0)
    out = ctx.get(dut.o.payload) if take and ctx.get(dut.o.valid) else None
    await ctx.tick()
    return out


def write_order(layer, lines, W, sx):
    return [atom(layer, line, w, dx) for line in range(lines) for w in range(W) for dx in range(sx)]


def run_buffer(chunk, max_stride, layers, p_in, p_out, seed, p_odd=0.5):
    """Play ``layers`` [(W, sx, lines)] through a ContractBuffer; returns (cycles, got per
    layer as (counts, atoms))."""
    rng = random.Random(seed)
    dut = ContractBuffer(AB, chunk, max_stride)
    got = []
    cycles = []

    async def bench(ctx):
        for li, (W, sx, lines) in enumerate(layers):
            ctx.set(dut.sx1, sx - 1)
            ctx.set(dut.w1, W - 1)
            ctx.set(dut.go, 1)
            await ctx.tick()
            ctx.set(dut.go, 0)
            ctx.set(dut.sx1, rng.randrange(max_stride))   # latched at go: anything now
            ctx.set(dut.w1, rng.randrange(100))
            src = read_order(li, lines, W, sx, chunk, rng, p_odd)
            want_n = W * sx * lines
            counts, atoms = [], []
            t = 0
            while len(atoms) < want_n:
                t += 1
                assert t < 50 * want_n + 100, f"layer {li}: stuck after {len(atoms)} atoms"
                out = await cycle(ctx, dut, rng, src, 2, p_in, p_out)
                if out is not None:
                    counts.append(out.count)
                    atoms += [(out.data >> (BITS * k)) & ((1 << BITS) - 1)
                              for k in range(out.count)]
            ctx.set(dut.i.valid, 0)
            ctx.set(dut.o.ready, 0)
            assert not src, f"layer {li}: {len(src)} transfers not taken"
            for _ in range(4):
                assert not ctx.get(dut.o.valid), f"layer {li}: atoms after the last"
                await ctx.tick()
            got.append((counts, atoms))
            cycles.append(t)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return cycles, got


GEOMS = [(8, 32), (2, 4), (4, 8)]      # (chunk, max_stride): nv_full's and narrower ones


@pytest.mark.parametrize("chunk,max_stride", GEOMS)
@pytest.mark.parametrize("seed", [1, 2])
def test_contract_buffer_random(chunk, max_stride, seed):
    """Random W (within and across chunks), every sx parity, 1-3 lines per layer, back to back
    layers; random stalls both sides: the output atoms are the output lines' in order, every
    transfer 2 atoms but a chunk's odd last one."""
    rng = random.Random(seed * 100 + chunk)
    layers = [(rng.choice((1, 2, chunk - 1 or 1, chunk, chunk + 1, 3 * chunk + 1,
                           rng.randint(1, 40))),
               rng.choice((1, 2, 3, max_stride - 1 or 1, max_stride, rng.randint(1, max_stride))),
               rng.randint(1, 3)) for _ in range(6)]
    _, got = run_buffer(chunk, max_stride, layers, 0.7, 0.6, seed)
    for li, ((W, sx, lines), (counts, atoms)) in enumerate(zip(layers, got)):
        want = write_order(li, lines, W, sx)
        assert len(atoms) == len(want), f"layer {li} W={W} sx={sx}: {len(atoms)} atoms"
        for k, (a, b) in enumerate(zip(atoms, want)):
            assert a == b, (f"layer {li} W={W} sx={sx}: atom {k} (line {k // (W * sx)}, "
                            f"w {k % (W * sx) // sx}, dx {k % sx}) wrong")
        # chunks of n pixels leave as n*sx atoms in pairs (one odd last)
        pairs = []
        for _ in range(lines):
            for c0 in range(0, W, chunk):
                n = min(chunk, W - c0) * sx
                pairs += [2] * (n // 2) + [1] * (n % 2)
        assert counts == pairs, f"layer {li} W={W} sx={sx}: transfer sizes {counts[:20]}"


@pytest.mark.parametrize("sx", [1, 2, 3, 4])
def test_contract_buffer_throughput(sx):
    """No stalls, runs on even lanes (two atoms per input transfer): a layer of 4 lines of 64
    pixels leaves at two atoms per cycle, after the first chunk has filled (4 * sx cycles)."""
    W, lines = 64, 4
    cycles, _ = run_buffer(8, 32, [(W, sx, lines)], 1.0, 1.0, 5, p_odd=0.0)
    atoms = W * sx * lines
    assert cycles[0] <= atoms // 2 + 4 * sx + 2, f"{cycles[0]} cycles for {atoms} atoms"


@pytest.mark.parametrize("lanes", [1, 2, 4])
def test_ungroup_random(lanes):
    """Transfers of 1..lanes atoms (garbage above ``count``) in, their atoms one by one out, in
    order, under random stalls; one atom per cycle without stalls."""
    rng = random.Random(lanes)
    dut = Ungroup(AB, lanes)
    groups = []
    for _ in range(60):
        n = rng.randint(1, lanes)
        groups.append([rng.getrandbits(BITS) for _ in range(n)])
    want = [a for g in groups for a in g]

    async def bench(ctx):
        for p_in, p_out in ((0.7, 0.6), (1.0, 1.0)):
            src = list(groups)
            got = []
            t = 0
            while len(got) < len(want):
                t += 1
                assert t < 10 * len(want), "stuck"
                out = await cycle(ctx, dut, rng, src, lanes, p_in, p_out)
                if out is not None:
                    got.append(out)
            ctx.set(dut.i.valid, 0)
            assert got == want and not src
            if p_in == 1.0:
                assert t == len(want), f"{t} cycles for {len(want)} atoms"

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
