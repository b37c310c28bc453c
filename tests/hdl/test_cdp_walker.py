"""CDP traversal order (hdl.cdp.dma.CdpWalker) against plain-Python formulas, with random stalls:
line, group of up to P positions (never across a burst window of the grouping line address),
surface, position; every atom of the cube exactly once; every run inside one burst window; runs
split only where a surface's (or the destination's) piece crosses a window; with P = 1 the
line / position / surface order of one-atom runs."""
import random

import pytest

from amaranth.sim import Simulator

from hdl.cdp.dma import CdpWalker
from streams import check_stream_stable, stream_get

# (atom_bytes, beat_bytes, max_burst): nv_small burst 1 and 4, atoms narrower than beats
GEOMETRIES = [(8, 8, 1), (8, 8, 4), (8, 16, 4), (32, 64, 4), (8, 32, 1)]


def pieces(cube, group, atom_bytes, positions):
    """The CDP order as (group, s) pieces (y, w0, n, s), plain Python: for each line, groups of
    positions w0..w0+n-1 with n = min(P - (grouping line address / atom + w0) mod P, positions
    left), each over every surface s."""
    out = []
    W, H, S = cube["width"] + 1, cube["height"] + 1, cube["channel"] // 8 + 1
    for y in range(H):
        gline = (group["base"] + y * group["line_stride"]) // atom_bytes
        w0 = 0
        while w0 < W:
            n = min(positions - (gline + w0) % positions, W - w0)
            out += [(y, w0, n, s) for s in range(S)]
            w0 += n
    return out


def expected_runs(cube, group, atom_bytes, positions):
    """Runs of the order: one per (group, s), split at the burst window of its own address."""
    window = positions * atom_bytes
    runs = []
    for y, x, n, s in pieces(cube, group, atom_bytes, positions):
        a = cube["base"] + y * cube["line_stride"] + x * atom_bytes + s * cube["surface_stride"]
        room = positions - (a % window) // atom_bytes
        runs += [(a, n)] if n <= room else [(a, room), (a + room * atom_bytes, n - room)]
    return [(a, n, int(i == len(runs) - 1)) for i, (a, n) in enumerate(runs)]


def random_cube(rng, atom_bytes, aligned):
    w, h, c = rng.randrange(1, 14), rng.randrange(1, 4), rng.randrange(1, 40)
    unit = atom_bytes * (8 if aligned else 1)
    ls = (rng.randrange(w, w + 3) * atom_bytes + unit - 1) // unit * unit
    return dict(base=rng.randrange(0, 1 << 20) * unit, line_stride=ls,
                surface_stride=ls * h + rng.randrange(0, 3) * atom_bytes * (0 if aligned else 1),
                width=w - 1, height=h - 1, channel=c - 1)


def run_walker(geometry, jobs, *, seed, p_stall=0.3):
    """jobs: [(cube, group)]; returns the runs of each as (addr, count, last)."""
    atom_bytes, beat_bytes, max_burst = geometry
    dut = CdpWalker(addr_width=32, atom_bytes=atom_bytes, atom_elems=8, beat_bytes=beat_bytes,
                    max_burst=max_burst)
    rng = random.Random(seed)
    got, errors = [], []

    async def bench(ctx):
        for cube, group in jobs:
            ctx.set(dut.cube, cube)
            ctx.set(dut.group, {"base": group["base"] % 4096,
                                "line_stride": group["line_stride"] % 4096})
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            ctx.set(dut.cube, {k: 0 for k in cube})            # latched at start
            ctx.set(dut.group, {"base": 0, "line_stride": 0})
            runs = []
            while not runs or not runs[-1].last:
                runs += await stream_get(ctx, dut.runs, 1, rng=rng, p_stall=p_stall,
                                         timeout=1000)
            await ctx.tick()
            assert not ctx.get(dut.busy)
            got.append([(r.addr, r.count, r.last) for r in runs])

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.add_process(check_stream_stable(dut.runs, errors=errors, name="runs"))
    sim.run()
    assert errors == []
    return got, dut.max_atoms


@pytest.mark.parametrize("geometry", GEOMETRIES)
@pytest.mark.parametrize("seed", [1, 2])
def test_walker_runs(geometry, seed):
    """Read side (grouped by its own cube) and write side (grouped by another cube)."""
    rng = random.Random(seed * 100 + geometry[2])
    atom_bytes = geometry[0]
    jobs = []
    for k in range(6):
        cube = random_cube(rng, atom_bytes, aligned=k % 3 == 0)
        group = cube if k % 2 == 0 else random_cube(rng, atom_bytes, aligned=False)
        jobs.append((cube, group))
    got, P = run_walker(geometry, jobs, seed=seed)
    assert P == geometry[2] * geometry[1] // atom_bytes
    window = P * atom_bytes
    for (cube, group), runs in zip(jobs, got):
        assert runs == expected_runs(cube, group, atom_bytes, P), (cube, group)
        # independent checks: each run inside one window; every atom exactly once
        atoms = []
        for addr, count, _ in runs:
            assert 1 <= count <= P and addr // window == (addr + count * atom_bytes - 1) // window
            atoms += [addr + i * atom_bytes for i in range(count)]
        W, H, S = cube["width"] + 1, cube["height"] + 1, cube["channel"] // 8 + 1
        want = {cube["base"] + y * cube["line_stride"] + x * atom_bytes
                + s * cube["surface_stride"] for x in range(W) for y in range(H) for s in range(S)}
        assert len(atoms) == len(want) == len(set(atoms)) and set(atoms) == want
        if group is cube:
            # grouped by its own addresses: surface 0's pieces are never split
            s0 = [r for r in runs if r[0] < cube["base"] + cube["surface_stride"]]
            assert len(s0) == sum(p[3] == 0 for p in pieces(cube, group, atom_bytes, P))


def test_walker_groups_order():
    """Order, spelled out for one cube: 10 positions, grouping line starting 3 atoms into a
    4-atom window: groups w 0 (1), 1-4, 5-8, 9, each over surfaces 0..1."""
    cube = dict(base=0x1000 + 3 * 8, line_stride=0x100, surface_stride=0x800, width=9, height=0,
                channel=15)
    (runs,), _ = run_walker((8, 8, 4), [(cube, cube)], seed=3)
    b, ss = cube["base"], cube["surface_stride"]
    want = [(b, 1), (b + ss, 1), (b + 8, 4), (b + 8 + ss, 4), (b + 40, 4), (b + 40 + ss, 4),
            (b + 72, 1), (b + 72 + ss, 1)]
    assert [r[:2] for r in runs] == want and runs[-1][2] == 1


@pytest.mark.parametrize("seed", [1, 2])
def test_walker_burst1_order(seed):
    """P = 1: today's line / position / surface order, one atom per run, no stall needed."""
    rng = random.Random(seed)
    jobs = [(c, c) for c in (random_cube(rng, 8, aligned=False) for _ in range(4))]
    got, P = run_walker((8, 8, 1), jobs, seed=seed, p_stall=0.0)
    assert P == 1
    for (cube, _), runs in zip(jobs, got):
        want = [(cube["base"] + y * cube["line_stride"] + x * 8 + s * cube["surface_stride"], 1, 0)
                for y in range(cube["height"] + 1) for x in range(cube["width"] + 1)
                for s in range(cube["channel"] // 8 + 1)]
        want[-1] = want[-1][:2] + (1,)
        assert runs == want
