"""hdl.dma.walker.CubeWalker: every atom address of random small cubes against the plain formula
of format.rst "Feature data", in traversal order (surface, line, atom), grouped into maximal runs
inside burst windows (never across 4 KB), under random consumer stalls; one run per cycle when
never stalled."""
import random

import pytest
from amaranth.sim import Simulator
from streams import stream_get

from hdl.dma.walker import CubeWalker, check_dma_params

ADDR_WIDTH = 16


def expected_atoms(cube, atom_bytes, atom_elems):
    """Plain-Python atom addresses of ``cube`` in traversal order."""
    out = []
    for s in range(cube["channel"] // atom_elems + 1):
        for h in range(cube["height"] + 1):
            for w in range(cube["width"] + 1):
                out.append((cube["base"] + s * cube["surface_stride"] + h * cube["line_stride"]
                            + w * atom_bytes) % (1 << ADDR_WIDTH))
    return out


def random_cube(rng, atom_bytes, atom_elems):
    width = rng.randrange(0, 24)
    height = rng.randrange(0, 4)
    channel = rng.randrange(0, 3 * atom_elems)
    line_stride = (width + 1 + rng.randrange(0, 3)) * atom_bytes
    surface_stride = (height + 1) * line_stride + rng.randrange(0, 3) * atom_bytes
    # bases near a 4 KB boundary or the top of the address space (wrap) now and then
    base = rng.choice([rng.randrange(0, 1 << ADDR_WIDTH), 0x1000 - rng.randrange(1, 8) * atom_bytes,
                       (1 << ADDR_WIDTH) - rng.randrange(1, 8) * atom_bytes])
    base -= base % atom_bytes
    return dict(base=base, line_stride=line_stride, surface_stride=surface_stride, width=width,
                height=height, channel=channel)


def check_runs(runs, cube, atom_bytes, atom_elems, beat_bytes, max_burst):
    """Expand runs into atoms and check them against the formula, run shapes and maximality."""
    window = max_burst * beat_bytes
    max_atoms = window // atom_bytes
    want = expected_atoms(cube, atom_bytes, atom_elems)
    line_len = cube["width"] + 1
    got, w = [], 0
    for k, r in enumerate(runs):
        addr, count, last = r["addr"], r["count"], r["last"]
        assert 1 <= count <= max_atoms
        end = addr + count * atom_bytes - 1
        assert addr // window == end // window, f"run {k} leaves its burst window: {r}"
        assert addr // 4096 == end // 4096, f"run {k} crosses 4 KB: {r}"
        w += count
        assert w <= line_len, f"run {k} spans two lines"
        # maximal: a run ends at the end of its line or of its burst window
        assert w == line_len or (end + 1) % window == 0, f"run {k} is not maximal: {r}"
        if w == line_len:
            w = 0
        assert last == (k == len(runs) - 1)
        got += [addr + i * atom_bytes for i in range(count)]
    assert got == want


@pytest.mark.parametrize("atom_bytes,atom_elems,beat_bytes,max_burst",
                         [(8, 8, 8, 1), (8, 8, 8, 4), (4, 4, 8, 2), (2, 2, 8, 4), (1, 1, 2, 1)])
def test_walker_random_cubes(atom_bytes, atom_elems, beat_bytes, max_burst):
    rng = random.Random(atom_bytes * 100 + max_burst)
    dut = CubeWalker(addr_width=ADDR_WIDTH, atom_bytes=atom_bytes, atom_elems=atom_elems,
                     beat_bytes=beat_bytes, max_burst=max_burst)
    cubes = [random_cube(rng, atom_bytes, atom_elems) for _ in range(25)]
    cubes.append(dict(base=0x0ff0, line_stride=0x200, surface_stride=0x1000, width=40, height=1,
                      channel=atom_elems))   # lines crossing 4 KB
    max_atoms = max_burst * beat_bytes // atom_bytes

    async def bench(ctx):
        for n, cube in enumerate(cubes):
            ctx.set(dut.cube, cube)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            assert ctx.get(dut.busy)
            # number of runs: sum over lines of the windows each line touches
            n_runs = 0
            atoms = expected_atoms(cube, atom_bytes, atom_elems)
            line_len = cube["width"] + 1
            for i in range(0, len(atoms), line_len):
                line = atoms[i:i + line_len]
                n_runs += len({a // (max_atoms * atom_bytes) for a in line})
            stall = 0.0 if n % 3 == 0 else 0.4
            stamps = []
            runs = await stream_get(ctx, dut.runs, n_runs, rng=rng, p_stall=stall,
                                    timestamps=stamps)
            runs = [{"addr": r.addr, "count": r.count, "last": r.last} for r in runs]
            check_runs(runs, cube, atom_bytes, atom_elems, beat_bytes, max_burst)
            if stall == 0.0:
                assert stamps == list(range(stamps[0], stamps[0] + n_runs)), "not one run per cycle"
            assert not ctx.get(dut.busy) and not ctx.get(dut.runs.valid)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_walker_start_ignored_while_busy():
    dut = CubeWalker(addr_width=ADDR_WIDTH, atom_bytes=8, atom_elems=8, beat_bytes=8, max_burst=1)
    cube = dict(base=0x100, line_stride=0x40, surface_stride=0x200, width=3, height=1, channel=7)
    other = dict(base=0x8000, line_stride=0x40, surface_stride=0x200, width=0, height=0, channel=0)
    rng = random.Random(5)

    async def bench(ctx):
        ctx.set(dut.cube, cube)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.cube, other)      # a second start while busy changes nothing
        runs = await stream_get(ctx, dut.runs, 8, rng=rng, p_stall=0.3)
        ctx.set(dut.start, 0)
        check_runs([{"addr": r.addr, "count": r.count, "last": r.last} for r in runs],
                   cube, 8, 8, 8, 1)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("args", [(16, 8, 1), (8, 8, 3), (8, 8, 32), (8, 4096, 2)])
def test_bad_parameters(args):
    with pytest.raises(ValueError):
        check_dma_params(*args)
