# amaranth: UnusedElaboratable=no
# (test_write_dma_rejects_small_depth constructs a WriteDma that raises and is never elaborated.)
"""hdl.dma.WriteDma against a behavioural write-client memory (MCIF's side of
hdl.axi.DmaWriteSignature): after random cubes of random atoms, under random producer stalls,
request/data back-pressure and response delays, the memory image equals the expected one (atoms
at the format.rst "Feature data" addresses, every other byte untouched: strobes); bursts of 1, 2
and 4 beats, several atoms per beat, lines crossing 4 KB, contiguous lines and surfaces written in
bursts across them (one request per maximal run); each burst's beats are all buffered when
it is requested; ``done`` pulses once, after the last write response; one atom per cycle when
nothing stalls."""
import random
from collections import deque

import pytest
from streams import stream_put
from test_dma_walker import (ADDR_WIDTH, DMA_SHAPES, LONG_CUBES, check_requests, dma_cubes,
                             dma_setup, expected_atoms, random_cube, run_sim, start_cube)

from hdl.dma import WriteDma


def make_memory_bench(dut, mem, rng, log, *, p_ready=0.7, max_latency=15):
    """Background testbench: accepts requests and data beats with probability ``p_ready`` each
    cycle, writes each beat with its strobes into ``mem`` (a bytearray), and pulses ``done``
    0..max_latency cycles after a burst's last beat. Logs requests and protocol errors."""
    beat_bytes = dut.beat_bytes
    size = len(mem)

    async def memory(ctx):
        bursts = deque()     # [addr, beats left]
        resp = []            # due cycles of write responses
        cycle = 0
        while True:
            ctx.set(dut.dma.req.ready, rng.random() < p_ready)
            w_ready = bool(bursts) and rng.random() < p_ready    # W only after its request
            ctx.set(dut.dma.data.ready, w_ready)
            due = [d for d in resp if d <= cycle]
            ctx.set(dut.dma.done, bool(due))
            if due:
                resp.remove(due[0])
            _, _, rq_v, rq_r, addr, length, d_v, d_r, data, strb = await ctx.tick().sample(
                dut.dma.req.valid, dut.dma.req.ready, dut.dma.req.payload.addr,
                dut.dma.req.payload.len, dut.dma.data.valid, dut.dma.data.ready,
                dut.dma.data.payload.data, dut.dma.data.payload.strb)
            if rq_v and rq_r:
                log["reqs"].append((addr, length))
                bursts.append([addr, length + 1])
            if d_r and not d_v:
                # a burst is requested only once all its beats are queued: no W bubble
                log["errors"].append(f"cycle {cycle}: no data beat for a requested burst")
            if d_v and d_r:
                b = bursts[0]
                raw = data.to_bytes(beat_bytes, "little")
                for i in range(beat_bytes):
                    if strb >> i & 1:
                        mem[(b[0] + i) % size] = raw[i]
                b[0] += beat_bytes
                b[1] -= 1
                if b[1] == 0:
                    bursts.popleft()
                    resp.append(cycle + 1 + rng.randrange(max_latency + 1))
            cycle += 1
    return memory


def run_cubes(dut, mem, rng, log, cubes, *, groups=None, pipelined=False, wait=200):
    """Write each cube of ``cubes`` (random atom values; ``groups(values)``: the transfers of a
    wide DMA) and check the memory image (every other byte untouched), the requests and one
    ``done`` per cube within ``wait`` cycles of its last atom."""
    atom_bytes, beat_bytes, max_burst = dut.atom_bytes, dut.beat_bytes, dut.max_burst

    async def bench(ctx):
        for cube in cubes:
            log["reqs"].clear()
            addrs = expected_atoms(cube, atom_bytes, atom_bytes)
            # no two atoms of one cube at the same address (else the expected image is ambiguous)
            assert len(set(addrs)) == len(addrs)
            values = [rng.randrange(1 << (8 * atom_bytes)) for _ in addrs]
            want = bytearray(mem)
            for a, v in zip(addrs, values):
                want[a:a + atom_bytes] = v.to_bytes(atom_bytes, "little")
            await start_cube(ctx, dut, cube)
            assert ctx.get(dut.busy)
            await stream_put(ctx, dut.atoms, groups(values) if groups else values, rng=rng,
                             p_stall=0.3)
            dones = 0
            for _ in range(wait):
                done, busy = ctx.get(dut.done), ctx.get(dut.busy)
                dones += done
                await ctx.tick()
                if not busy and (dones or not pipelined):
                    break
            assert dones == 1
            assert not ctx.get(dut.busy)
            assert mem == want, cube
            check_requests(log["reqs"], cube, atom_bytes, beat_bytes, max_burst)
        assert not log["errors"], log["errors"][:3]

    run_sim(dut, bench, background=[make_memory_bench(dut, mem, rng, log)],
            stable=[("req", dut.dma.req), ("data", dut.dma.data)])


@pytest.mark.parametrize("atom_bytes,beat_bytes,max_burst", DMA_SHAPES)
def test_write_dma_random(atom_bytes, beat_bytes, max_burst):
    rng, dut, mem, cubes, log = dma_setup(WriteDma, atom_bytes, beat_bytes, max_burst,
                                          depth=2 * max_burst + 1,
                                          seed=atom_bytes * 10 + max_burst + 7, n_cubes=10, gap=2)
    run_cubes(dut, mem, rng, log, cubes)


@pytest.mark.parametrize("max_burst", [1, 4])
@pytest.mark.parametrize("cube", LONG_CUBES)
def test_write_dma_bursts_and_throughput(max_burst, cube):
    """128 contiguous atoms in one line or over many lines and surfaces, at full rate: one atom
    accepted per cycle (from the second cycle after start, the run passing the walker's skid
    buffer, or max_burst - 1 cycles later when the first run spans max_burst one-atom lines and
    is known at its last line),
    bursts of max_burst beats, each requested only when all its beats are queued, done after
    the last response."""
    rng = random.Random(max_burst)
    dut = WriteDma(addr_width=ADDR_WIDTH, atom_bytes=8, atom_elems=8, beat_bytes=8,
                   max_burst=max_burst, depth=4 * max_burst)
    mem = bytearray(1 << ADDR_WIDTH)
    log = {"reqs": [], "errors": []}

    async def bench(ctx):
        await start_cube(ctx, dut, cube)
        values = [rng.randrange(1 << 64) for _ in range(128)]
        ctx.set(dut.atoms.valid, 1)
        ctx.set(dut.atoms.payload, values[0])
        wait = 0
        while not ctx.get(dut.atoms.ready):            # until the first run is known
            await ctx.tick()
            wait += 1
        assert wait == 1 + (0 if cube["width"] else max_burst - 1)   # + the run skid buffer
        t0 = 0
        for v in values:
            ctx.set(dut.atoms.valid, 1)
            ctx.set(dut.atoms.payload, v)
            assert ctx.get(dut.atoms.ready), f"stalled at atom {t0}"
            await ctx.tick()
            t0 += 1
        ctx.set(dut.atoms.valid, 0)
        for _ in range(30):
            if ctx.get(dut.done):
                break
            await ctx.tick()
        else:
            raise AssertionError("no done")
        assert [n for _, n in log["reqs"]] == [max_burst - 1] * (128 // max_burst)
        assert mem[0x0f00:0x1300] == b"".join(v.to_bytes(8, "little") for v in values)
        assert not log["errors"]

    run_sim(dut, bench, background=[make_memory_bench(dut, mem, rng, log, p_ready=1.0,
                                                      max_latency=3)])


@pytest.mark.parametrize("atom_bytes,beat_bytes,max_burst,wide",
                         [(8, 8, 1, False), (4, 8, 2, False), (8, 8, 4, False), (4, 8, 2, True),
                          (32, 64, 4, True)])
def test_write_dma_pipelined(atom_bytes, beat_bytes, max_burst, wide):
    """``pipelined=True``: the cubes follow each other (each started as soon as ``busy`` drops,
    before the previous one's write responses), one ``done`` per cube in order, after its last
    response; the memory image is the plain formula's; some cube starts before the previous
    one's ``done``. ``wide``: the next cube's atoms are offered without a gap, before its
    start (as BDMA's read engine gives them)."""
    rng = random.Random(atom_bytes * 3 + max_burst)
    dut = WriteDma(addr_width=ADDR_WIDTH, atom_bytes=atom_bytes, atom_elems=atom_bytes,
                   beat_bytes=beat_bytes, max_burst=max_burst, depth=2 * max_burst + 1,
                   pipelined=True, wide=wide)
    mem = bytearray(rng.randrange(256) for _ in range(1 << ADDR_WIDTH))
    log = {"reqs": [], "errors": []}
    cubes, taken = [], set()
    while len(cubes) < 8:
        c = random_cube(rng, atom_bytes, atom_bytes)
        addrs = set(expected_atoms(c, atom_bytes, atom_bytes))
        if not addrs & taken:             # cubes never overlap: the final image is defined
            cubes.append(c)
            taken |= addrs
    want = bytearray(mem)
    values = []
    for c in cubes:
        vs = [rng.randrange(1 << (8 * atom_bytes)) for _ in expected_atoms(c, atom_bytes, atom_bytes)]
        for a, v in zip(expected_atoms(c, atom_bytes, atom_bytes), vs):
            want[a:a + atom_bytes] = v.to_bytes(atom_bytes, "little")
        values.append(vs)
    events = []

    async def watch(ctx):
        cycle = 0
        async for _, _, done, start in ctx.tick().sample(dut.done, dut.start):
            if done:
                events.append(("done", cycle))
            if start:
                events.append(("start", cycle))
            cycle += 1

    async def feeder(ctx):
        for vs in values:
            await stream_put(ctx, dut.atoms, random_groups(dut, vs, rng) if wide else vs,
                             rng=rng, p_stall=0.2)

    async def bench(ctx):
        for k, c in enumerate(cubes):
            for _ in range(3000):
                if not ctx.get(dut.busy):
                    break
                await ctx.tick()
            else:
                raise AssertionError(f"busy never dropped before cube {k}")
            await start_cube(ctx, dut, c)
        for _ in range(2000):
            if sum(e[0] == "done" for e in events) == len(cubes):
                break
            await ctx.tick()
        assert sum(e[0] == "done" for e in events) == len(cubes), events
        assert mem == want
        assert not log["errors"], log["errors"][:3]
        # cube k's done after cube k's start, in order; some start precedes the previous done
        starts = [t for k, t in events if k == "start"]
        dones = [t for k, t in events if k == "done"]
        assert all(d > s for s, d in zip(starts, dones))
        assert any(s < d for s, d in zip(starts[1:], dones))

    run_sim(dut, bench, background=[make_memory_bench(dut, mem, rng, log, max_latency=25), feeder,
                                    watch])


@pytest.mark.parametrize("max_burst,depth", [(1, 1), (4, 4), (4, 2)])
def test_write_dma_rejects_small_depth(max_burst, depth):
    """A burst is queued whole before its request, so the data FIFO needs one beat more."""
    with pytest.raises(ValueError, match="depth"):
        WriteDma(addr_width=16, atom_bytes=8, atom_elems=8, beat_bytes=8, max_burst=max_burst,
                 depth=depth)


# wide atom streams (see test_dma_read.WIDE_SHAPES)
WIDE_SHAPES = [(8, 8, 4), (4, 8, 2), (2, 8, 4), (32, 64, 4), (32, 64, 1)]


def random_groups(dut, values, rng, *, full=False):
    """``values`` (atoms) as wide transfers of 1..lanes atoms each (``full``: ``lanes`` each but
    the last), random bits in the lanes above the count (the DMA must ignore them)."""
    lanes, ab = dut.lanes, 8 * dut.atom_bytes
    layout = dut.atoms.payload.shape()
    out, i = [], 0
    while i < len(values):
        n = min(len(values) - i, lanes if full else rng.randint(1, lanes))
        bits = rng.getrandbits(ab * lanes)
        for j, v in enumerate(values[i:i + n]):
            bits = bits & ~(((1 << ab) - 1) << ab * j) | v << ab * j
        out.append(layout.const({"data": bits, "count": n}))
        i += n
    return out


@pytest.mark.parametrize("pipelined", [False, True])
@pytest.mark.parametrize("atom_bytes,beat_bytes,max_burst", WIDE_SHAPES)
def test_write_dma_wide_random(atom_bytes, beat_bytes, max_burst, pipelined):
    """``wide``: atoms arriving in transfers of any 1..lanes atoms (as a wide ReadDma of another
    alignment gives them) land at the plain formula's addresses, every other byte untouched;
    one request per maximal run; one ``done`` per cube."""
    rng = random.Random(atom_bytes * 100 + beat_bytes + max_burst + pipelined)
    dut = WriteDma(addr_width=ADDR_WIDTH, atom_bytes=atom_bytes, atom_elems=atom_bytes,
                   beat_bytes=beat_bytes, max_burst=max_burst, depth=2 * max_burst + 1,
                   wide=True, pipelined=pipelined)
    mem = bytearray(rng.randrange(256) for _ in range(1 << ADDR_WIDTH))
    # no two atoms of one cube at the same address (else the expected image is ambiguous;
    # dma_cubes' 4 KB-crossing cube overlaps its own lines with 32-byte atoms)
    cubes = [c for c in dma_cubes(rng, atom_bytes, atom_bytes, 10, 2)
             if len(set(expected_atoms(c, atom_bytes, atom_bytes)))
             == len(expected_atoms(c, atom_bytes, atom_bytes))]
    assert len(cubes) >= 10
    log = {"reqs": [], "errors": []}

    run_cubes(dut, mem, rng, log, cubes, groups=lambda vs: random_groups(dut, vs, rng),
              pipelined=pipelined, wait=300)


@pytest.mark.parametrize("lane0", [0, 1])
@pytest.mark.parametrize("beat_bytes", [8, 16])
def test_write_dma_wide_throughput(beat_bytes, lane0):
    """``wide``: 256 contiguous 4-byte atoms in full transfers are taken one per cycle once the
    first run is known, also when the destination starts at lane 1 (every transfer then
    straddles two beats): one beat per cycle."""
    rng = random.Random(beat_bytes + lane0)
    dut = WriteDma(addr_width=ADDR_WIDTH, atom_bytes=4, atom_elems=4, beat_bytes=beat_bytes,
                   max_burst=4, depth=16, wide=True)
    mem = bytearray(1 << ADDR_WIDTH)
    log = {"reqs": [], "errors": []}
    base = 0x0f00 + 4 * lane0
    cube = dict(base=base, line_stride=0x400, surface_stride=0x800, width=255, height=0,
                channel=3)

    async def bench(ctx):
        await start_cube(ctx, dut, cube)
        values = [rng.randrange(1 << 32) for _ in range(256)]
        groups = random_groups(dut, values, rng, full=True)
        ctx.set(dut.atoms.valid, 1)
        ctx.set(dut.atoms.payload, groups[0])
        wait = 0
        while not ctx.get(dut.atoms.ready):
            await ctx.tick()
            wait += 1
        assert wait <= 2
        for i, g in enumerate(groups):
            ctx.set(dut.atoms.valid, 1)
            ctx.set(dut.atoms.payload, g)
            assert ctx.get(dut.atoms.ready), f"stalled at transfer {i}"
            await ctx.tick()
        ctx.set(dut.atoms.valid, 0)
        for _ in range(40):
            if ctx.get(dut.done):
                break
            await ctx.tick()
        else:
            raise AssertionError("no done")
        assert mem[base:base + 1024] == b"".join(v.to_bytes(4, "little") for v in values)
        assert not log["errors"]

    run_sim(dut, bench, background=[make_memory_bench(dut, mem, rng, log, p_ready=1.0,
                                                      max_latency=3)])
