# amaranth: UnusedElaboratable=no
# (test_read_dma_rejects_small_depth constructs a ReadDma that raises and is never elaborated.)
"""hdl.dma.ReadDma against a behavioural read-client memory (MCIF's side of
hdl.axi.DmaReadSignature): the right atoms in traversal order under random request stalls,
random response delays and gaps, atom back-pressure; bursts of 1, 2 and 4 beats, several atoms per
beat, odd widths, lines crossing 4 KB, contiguous lines and surfaces read in bursts across them;
one request per maximal run, every request beat aligned, within max_burst and 4 KB; the credit
rule (read data always accepted); full throughput when nothing stalls."""
import random
from collections import deque

import pytest
from amaranth.hdl import unsigned
from streams import as_bits, stream_get
from test_dma_walker import (ADDR_WIDTH, DMA_SHAPES, LONG_CUBES, check_requests, dma_cubes,
                             dma_setup, expected_atoms, expected_runs, run_sim, start_cube)

from hdl.dma import ReadDma


def make_memory_bench(dut, mem, rng, log, *, p_ready=0.7, max_latency=20, p_gap=0.2):
    """Background testbench: accept requests (ready with probability ``p_ready``), return their
    beats in order after 0..max_latency cycles with random gaps. Appends every request
    (addr, len) to ``log["reqs"]``; records credit-rule violations in ``log["errors"]``."""
    beat_bytes = dut.beat_bytes
    size = len(mem)

    async def memory(ctx):
        q = deque()        # (due cycle, data)
        cycle = 0
        holding = False
        while True:
            ctx.set(dut.dma.req.ready, rng.random() < p_ready)
            rv = holding or (bool(q) and q[0][0] <= cycle and rng.random() >= p_gap)
            ctx.set(dut.dma.rsp.valid, rv)
            if rv:
                ctx.set(dut.dma.rsp.payload, q[0][1])
            _, _, rq_v, rq_r, addr, length, rs_r = await ctx.tick().sample(
                dut.dma.req.valid, dut.dma.req.ready, dut.dma.req.payload.addr,
                dut.dma.req.payload.len, dut.dma.rsp.ready)
            holding = rv and not rs_r
            if rv and not rs_r:
                log["errors"].append(f"cycle {cycle}: read data refused (credit rule)")
            if rv and rs_r:
                q.popleft()
            if rq_v and rq_r:
                log["reqs"].append((addr, length))
                due = cycle + 1 + rng.randrange(0, max_latency + 1)
                if q:
                    due = max(due, q[-1][0])      # one ID: in order
                for i in range(length + 1):
                    a = (addr + i * beat_bytes) % size
                    q.append((due + i, int.from_bytes(mem[a:a + beat_bytes], "little")))
            cycle += 1
    return memory


def atom_values(mem, addrs, atom_bytes):
    return [int.from_bytes(mem[a:a + atom_bytes], "little") for a in addrs]


@pytest.mark.parametrize("atom_bytes,beat_bytes,max_burst", DMA_SHAPES)
def test_read_dma_random(atom_bytes, beat_bytes, max_burst):
    rng, dut, mem, cubes, log = dma_setup(ReadDma, atom_bytes, beat_bytes, max_burst, depth=16,
                                          seed=atom_bytes * 10 + max_burst, n_cubes=12, gap=0)
    mem = bytes(mem)

    run_cubes(dut, mem, rng, log, cubes,
              lambda cube: atom_values(mem, expected_atoms(cube, atom_bytes, atom_bytes),
                                       atom_bytes))


def run_cubes(dut, mem, rng, log, cubes, expect, convert=lambda p: p):
    """Read each cube of ``cubes``: its transfers (``convert``-ed) equal ``expect(cube)``, then
    ``busy`` drops and the requests are one per maximal run."""
    async def bench(ctx):
        for cube in cubes:
            log["reqs"].clear()
            await start_cube(ctx, dut, cube)
            want = expect(cube)
            got = await stream_get(ctx, dut.atoms, len(want), rng=rng, p_stall=0.3)
            assert [convert(p) for p in got] == want, cube
            for _ in range(3):
                await ctx.tick()
            assert not ctx.get(dut.busy) and not ctx.get(dut.atoms.valid)
            check_requests(log["reqs"], cube, dut.atom_bytes, dut.beat_bytes, dut.max_burst)
        assert not log["errors"], log["errors"][:3]

    run_sim(dut, bench, background=[make_memory_bench(dut, mem, rng, log)],
            stable=[("req", dut.dma.req), ("atoms", dut.atoms)])


@pytest.mark.parametrize("max_burst", [1, 4])
@pytest.mark.parametrize("cube", LONG_CUBES)
def test_read_dma_bursts_and_throughput(max_burst, cube):
    """128 contiguous atoms in one line or over many lines and surfaces: bursts of max_burst
    beats (windows aligned), one atom per cycle."""
    rng = random.Random(max_burst)
    dut = ReadDma(addr_width=ADDR_WIDTH, atom_bytes=8, atom_elems=8, beat_bytes=8,
                  max_burst=max_burst, depth=32)
    mem = bytes(rng.randrange(256) for _ in range(1 << ADDR_WIDTH))
    log = {"reqs": [], "errors": []}

    async def bench(ctx):
        await start_cube(ctx, dut, cube)
        addrs = expected_atoms(cube, 8, 8)
        stamps = []
        got = await stream_get(ctx, dut.atoms, len(addrs), rng=rng, p_stall=0.0,
                               timestamps=stamps)
        assert got == atom_values(mem, addrs, 8)
        assert [n for _, n in log["reqs"]] == [max_burst - 1] * (128 // max_burst)
        assert stamps[-1] - stamps[0] == len(addrs) - 1       # no bubble once data flows
        assert stamps[-1] <= len(addrs) + 12
        assert not log["errors"]

    run_sim(dut, bench, background=[make_memory_bench(dut, mem, rng, log, p_ready=1.0,
                                                      max_latency=0, p_gap=0.0)])


def test_read_dma_rejects_small_depth():
    with pytest.raises(ValueError):
        ReadDma(addr_width=16, atom_bytes=8, atom_elems=8, beat_bytes=8, max_burst=4, depth=2)


# wide atom streams (one beat of atoms per transfer): nv_small's one atom per beat, 2 and 4
# atoms per beat, and nv_full's BDMA/RUBIK geometry (32-byte atoms on 64-byte beats)
WIDE_SHAPES = [(8, 8, 4), (4, 8, 2), (2, 8, 4), (32, 64, 4), (32, 64, 1)]


def expected_groups(mem, cube, atom_bytes, beat_bytes, max_burst):
    """The transfers of a wide ReadDma for ``cube``: per run, per beat it touches, the run's
    atoms in that beat as ``(count, [atom values])``."""
    lanes = beat_bytes // atom_bytes
    out = []
    for a, count in expected_runs(cube, atom_bytes, atom_bytes, max_burst * beat_bytes):
        lane = a % beat_bytes // atom_bytes
        while count:
            n = min(lanes - lane, count)
            out.append((n, atom_values(mem, [a + i * atom_bytes for i in range(n)], atom_bytes)))
            a, count, lane = a + n * atom_bytes, count - n, 0
    return out


def group_atoms(payload, atom_bytes):
    """``(count, [atom values])`` of one wide transfer (hdl.dma.walker.atom_group_layout)."""
    n, bits = int(payload.count), as_bits(payload.data)
    mask = (1 << 8 * atom_bytes) - 1
    return n, [bits >> (8 * atom_bytes * i) & mask for i in range(n)]


@pytest.mark.parametrize("atom_bytes,beat_bytes,max_burst", WIDE_SHAPES)
def test_read_dma_wide_random(atom_bytes, beat_bytes, max_burst):
    """``wide``: each transfer holds the atoms of one run in one beat, from its first lane."""
    rng = random.Random(atom_bytes * 100 + beat_bytes + max_burst)
    dut = ReadDma(addr_width=ADDR_WIDTH, atom_bytes=atom_bytes, atom_elems=atom_bytes,
                  beat_bytes=beat_bytes, max_burst=max_burst, depth=16, wide=True)
    mem = bytes(rng.randrange(256) for _ in range(1 << ADDR_WIDTH))
    cubes = dma_cubes(rng, atom_bytes, atom_bytes, 12, 0)
    log = {"reqs": [], "errors": []}

    run_cubes(dut, mem, rng, log, cubes,
              lambda cube: expected_groups(mem, cube, atom_bytes, beat_bytes, max_burst),
              lambda p: group_atoms(p, atom_bytes))


@pytest.mark.parametrize("beat_bytes", [8, 16])
def test_read_dma_wide_throughput(beat_bytes):
    """``wide``: 256 contiguous 4-byte atoms in one line come out at one beat per cycle."""
    rng = random.Random(beat_bytes)
    dut = ReadDma(addr_width=ADDR_WIDTH, atom_bytes=4, atom_elems=4, beat_bytes=beat_bytes,
                  max_burst=4, depth=32, wide=True)
    mem = bytes(rng.randrange(256) for _ in range(1 << ADDR_WIDTH))
    cube = dict(base=0x0f00, line_stride=0x400, surface_stride=0x800, width=255, height=0,
                channel=3)
    log = {"reqs": [], "errors": []}

    async def bench(ctx):
        await start_cube(ctx, dut, cube)
        want = expected_groups(mem, cube, 4, beat_bytes, 4)
        stamps = []
        got = await stream_get(ctx, dut.atoms, len(want), rng=rng, p_stall=0.0,
                               timestamps=stamps)
        assert [group_atoms(p, 4) for p in got] == want
        assert len(want) == 1024 // beat_bytes
        assert stamps[-1] - stamps[0] == len(want) - 1       # one beat per cycle
        assert not log["errors"]

    run_sim(dut, bench, background=[make_memory_bench(dut, mem, rng, log, p_ready=1.0,
                                                      max_latency=0, p_gap=0.0)])


def test_wide_rejects_atom_shape():
    with pytest.raises(ValueError, match="wide"):
        ReadDma(addr_width=16, atom_bytes=8, atom_elems=8, beat_bytes=8, max_burst=4, depth=8,
                atom_shape=unsigned(64), wide=True)
