"""hdl.dma.walker.CubeWalker: every atom address of random small cubes (random strides, often
exactly contiguous lines and surfaces) against the plain formula of format.rst "Feature data", in
traversal order (surface, line, atom), grouped into maximal runs of consecutive addresses inside
burst windows (across lines and surfaces when they are contiguous; never across 4 KB), under
random consumer stalls; one line-piece per cycle when never stalled.

Also the helpers the DMA tests share: :func:`expected_atoms`, :func:`expected_runs`,
:func:`random_cube`, :func:`dma_cubes`, :func:`start_cube`."""
import random

import pytest
from amaranth.sim import Simulator
from streams import check_stream_stable, stream_get

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


def expected_runs(cube, atom_bytes, atom_elems, window):
    """The maximal runs ``[addr, count]`` of ``cube``: atoms in traversal order, a run going on
    while the next atom is at the next address and not at the start of a ``window``-byte
    burst window (so never across a window, 4 KB or the wrap of the address space)."""
    runs = []
    for a in expected_atoms(cube, atom_bytes, atom_elems):
        if runs and a % window and a == runs[-1][0] + runs[-1][1] * atom_bytes:
            runs[-1][1] += 1
        else:
            runs.append([a, 1])
    return runs


def line_pieces(cube, atom_bytes, atom_elems, window):
    """How many (line, burst window) pairs the cube touches: the walker's cycles when never
    stalled (it advances one line-piece per cycle)."""
    atoms = expected_atoms(cube, atom_bytes, atom_elems)
    n = cube["width"] + 1
    return sum(len({a // window for a in atoms[i:i + n]}) for i in range(0, len(atoms), n))


def merge_kinds(cube, atom_bytes, atom_elems, window):
    """Where runs of ``cube`` go on across a line end: ``"line"`` (into the next line of the
    surface), ``"surface"`` (into the next surface, from a surface of several lines),
    ``"surface1"`` (the same with one line per surface)."""
    atoms = expected_atoms(cube, atom_bytes, atom_elems)
    n = cube["width"] + 1
    per_surf = n * (cube["height"] + 1)
    kinds = set()
    for i in range(n, len(atoms), n):
        if atoms[i] % window and atoms[i] == atoms[i - 1] + atom_bytes:
            kinds.add("line" if i % per_surf else "surface" if cube["height"] else "surface1")
    return kinds


def random_cube(rng, atom_bytes, atom_elems):
    """A random small cube; lines (surfaces) are exactly contiguous half of the time, else gaps
    of 1 or 2 atoms; atoms never overlap."""
    width = rng.randrange(0, 24)
    height = rng.randrange(0, 4)
    channel = rng.randrange(0, 3 * atom_elems)
    line_stride = (width + 1 + rng.choice([0, 0, 1, 2])) * atom_bytes
    surface_stride = (height + 1) * line_stride + rng.choice([0, 0, 1, 2]) * atom_bytes
    # bases near a 4 KB boundary or the top of the address space (wrap) now and then
    base = rng.choice([rng.randrange(0, 1 << ADDR_WIDTH), 0x1000 - rng.randrange(1, 8) * atom_bytes,
                       (1 << ADDR_WIDTH) - rng.randrange(1, 8) * atom_bytes])
    base -= base % atom_bytes
    return dict(base=base, line_stride=line_stride, surface_stride=surface_stride, width=width,
                height=height, channel=channel)


def dma_cubes(rng, atom_bytes, atom_elems, n, gap):
    """``n`` random cubes plus fixed ones: lines crossing 4 KB; an odd width with lines ``gap``
    atoms apart and unaligned base; one-atom lines all contiguous (a burst over many lines and
    surfaces, across 4 KB)."""
    cubes = [random_cube(rng, atom_bytes, atom_elems) for _ in range(n)]
    cubes.append(dict(base=0x1000 - 5 * atom_bytes, line_stride=0x300, surface_stride=0x1000,
                      width=30, height=1, channel=0))
    cubes.append(dict(base=0x2000 + atom_bytes, line_stride=(13 + gap) * atom_bytes,
                      surface_stride=0x400, width=12, height=2, channel=2 * atom_elems - 1))
    cubes.append(dict(base=0x1000 - 3 * atom_bytes, line_stride=atom_bytes,
                      surface_stride=6 * atom_bytes, width=0, height=5, channel=3 * atom_elems - 1))
    return cubes


# (atom_bytes, beat_bytes, max_burst) of the random DMA tests
DMA_SHAPES = [(8, 8, 1), (8, 8, 4), (4, 8, 2), (2, 8, 4), (4, 8, 1)]


def dma_setup(cls, atom_bytes, beat_bytes, max_burst, *, depth, seed, n_cubes, gap):
    """Common start of the random DMA tests: ``(rng, dut, mem, cubes, log)`` with ``dut`` a
    ``cls`` (ReadDma or WriteDma) of ``ADDR_WIDTH`` address bits and one channel per atom byte,
    ``mem`` a random ``bytearray`` of the whole address space, :func:`dma_cubes` and an empty
    request/error log for the memory bench."""
    rng = random.Random(seed)
    dut = cls(addr_width=ADDR_WIDTH, atom_bytes=atom_bytes, atom_elems=atom_bytes,
              beat_bytes=beat_bytes, max_burst=max_burst, depth=depth)
    mem = bytearray(rng.randrange(256) for _ in range(1 << ADDR_WIDTH))
    return rng, dut, mem, dma_cubes(rng, atom_bytes, atom_bytes, n_cubes, gap), \
        {"reqs": [], "errors": []}


def check_requests(reqs, cube, atom_bytes, beat_bytes, max_burst):
    """The burst requests ``(addr, len)`` of one cube: one per maximal run
    (:func:`expected_runs`, one channel per atom byte), at its beat-aligned address, as many
    beats as the run touches; so within max_burst beats and one 4 KB page."""
    want = []
    for a, count in expected_runs(cube, atom_bytes, atom_bytes, max_burst * beat_bytes):
        off = a % beat_bytes
        want.append((a - off, (off + count * atom_bytes - 1) // beat_bytes))
    assert reqs == want
    for addr, length in reqs:
        assert length < max_burst
        assert addr // 4096 == (addr + (length + 1) * beat_bytes - 1) // 4096


# 128 atoms (8 bytes each) at 0x0f00..0x12ff, crossing 4 KB: one 1 KB line; 128 one-atom lines,
# contiguous; 16 lines of 8 atoms in 8 contiguous surfaces of 2 lines (throughput tests)
LONG_CUBES = [dict(base=0x0f00, line_stride=0x400, surface_stride=0x800, width=127, height=0,
                   channel=7),
              dict(base=0x0f00, line_stride=8, surface_stride=0x800, width=0, height=127,
                   channel=7),
              dict(base=0x0f00, line_stride=64, surface_stride=128, width=7, height=1,
                   channel=63)]


def run_sim(dut, bench, *, background=(), stable=()):
    """Simulate ``dut`` with a 100 MHz clock until testbench ``bench`` returns, with the
    ``background`` testbenches (e.g. a memory model) and a :func:`check_stream_stable` process
    on each ``(name, stream)`` of ``stable``."""
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for testbench in background:
        sim.add_testbench(testbench, background=True)
    for name, strm in stable:
        sim.add_process(check_stream_stable(strm, name=name))
    sim.add_testbench(bench)
    sim.run()


async def start_cube(ctx, dut, cube):
    """Pulse ``start`` of ``dut`` (a walker or DMA) for one cycle with ``cube`` on its port."""
    ctx.set(dut.cube, cube)
    ctx.set(dut.start, 1)
    await ctx.tick()
    ctx.set(dut.start, 0)


def check_runs(runs, cube, atom_bytes, atom_elems, beat_bytes, max_burst):
    """Check runs (dicts addr/count/last) against :func:`expected_runs`, and each run's shape:
    inside one burst window and one 4 KB page, ``last`` on the final one only."""
    window = max_burst * beat_bytes
    for k, r in enumerate(runs):
        addr, count = r["addr"], r["count"]
        assert 1 <= count <= window // atom_bytes
        end = addr + count * atom_bytes - 1
        assert addr // window == end // window, f"run {k} leaves its burst window: {r}"
        assert addr // 4096 == end // 4096, f"run {k} crosses 4 KB: {r}"
        assert r["last"] == (k == len(runs) - 1)
    assert [[r["addr"], r["count"]] for r in runs] == expected_runs(cube, atom_bytes, atom_elems,
                                                                    window)


@pytest.mark.parametrize("atom_bytes,atom_elems,beat_bytes,max_burst",
                         [(8, 8, 8, 1), (8, 8, 8, 4), (4, 4, 8, 2), (2, 2, 8, 4), (1, 1, 2, 1),
                          (1, 1, 2, 4)])
def test_walker_random_cubes(atom_bytes, atom_elems, beat_bytes, max_burst):
    rng = random.Random(atom_bytes * 100 + max_burst)
    dut = CubeWalker(addr_width=ADDR_WIDTH, atom_bytes=atom_bytes, atom_elems=atom_elems,
                     beat_bytes=beat_bytes, max_burst=max_burst)
    cubes = dma_cubes(rng, atom_bytes, atom_elems, 30, gap=0)
    # contiguous lines and surfaces (line_stride == width + 1 atoms), several lines per surface
    # and one line per surface: runs across both kinds of surface ends
    cubes += [dict(base=0x3000 + atom_bytes, line_stride=3 * atom_bytes,
                   surface_stride=6 * atom_bytes, width=2, height=1, channel=3 * atom_elems - 1),
              dict(base=0x5000 - 3 * atom_bytes, line_stride=0x400, surface_stride=2 * atom_bytes,
                   width=1, height=0, channel=5 * atom_elems - 1)]
    window = max_burst * beat_bytes
    merged = 0
    kinds = set()

    async def bench(ctx):
        nonlocal merged, kinds
        for n, cube in enumerate(cubes):
            await start_cube(ctx, dut, cube)
            assert ctx.get(dut.busy)
            n_runs = len(expected_runs(cube, atom_bytes, atom_elems, window))
            pieces = line_pieces(cube, atom_bytes, atom_elems, window)
            merged += n_runs < pieces
            kinds |= merge_kinds(cube, atom_bytes, atom_elems, window)
            stall = 0.0 if n % 3 == 0 else 0.4
            stamps = []
            runs = await stream_get(ctx, dut.runs, n_runs, rng=rng, p_stall=stall,
                                    timestamps=stamps)
            runs = [{"addr": r.addr, "count": r.count, "last": r.last} for r in runs]
            check_runs(runs, cube, atom_bytes, atom_elems, beat_bytes, max_burst)
            if stall == 0.0:
                # one line-piece per cycle, looking ahead: a run leaves at the cycle of its
                # last piece, so the last run at the walk's last cycle
                assert stamps[-1] == pieces - 1, "not one line-piece per cycle"
                if n_runs == pieces:
                    assert stamps == list(range(n_runs)), "not one run per cycle"
            assert not ctx.get(dut.busy) and not ctx.get(dut.runs.valid)

    run_sim(dut, bench, stable=[("runs", dut.runs)])
    if window > atom_bytes:
        assert merged >= 5, "too few cubes with runs across lines or surfaces"
        assert kinds == {"line", "surface", "surface1"}


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

    run_sim(dut, bench)


@pytest.mark.parametrize("args", [(16, 8, 1), (8, 8, 3), (8, 8, 32), (8, 4096, 2)])
def test_bad_parameters(args):
    with pytest.raises(ValueError):
        check_dma_params(*args)
