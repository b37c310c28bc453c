"""hdl.dma.WriteDma against a behavioural write-client memory (MCIF's side of
hdl.axi.DmaWriteSignature): after random cubes of random atoms, under random producer stalls,
request/data back-pressure and response delays, the memory image equals the expected one (atoms
at the format.rst "Feature data" addresses, every other byte untouched: strobes); bursts of 1, 2
and 4 beats, several atoms per beat, lines crossing 4 KB; each burst's beats are all buffered when
it is requested; ``done`` pulses once, after the last write response; one atom per cycle when
nothing stalls."""
import random
from collections import deque

import pytest
from amaranth.sim import Simulator
from streams import check_stream_stable, stream_put
from test_dma_walker import ADDR_WIDTH, expected_atoms, random_cube

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


@pytest.mark.parametrize("atom_bytes,beat_bytes,max_burst",
                         [(8, 8, 1), (8, 8, 4), (4, 8, 2), (2, 8, 4), (4, 8, 1)])
def test_write_dma_random(atom_bytes, beat_bytes, max_burst):
    rng = random.Random(atom_bytes * 10 + max_burst + 7)
    atom_elems = atom_bytes
    dut = WriteDma(addr_width=ADDR_WIDTH, atom_bytes=atom_bytes, atom_elems=atom_elems,
                   beat_bytes=beat_bytes, max_burst=max_burst, depth=2 * max_burst + 1)
    mem = bytearray(rng.randrange(256) for _ in range(1 << ADDR_WIDTH))
    cubes = [random_cube(rng, atom_bytes, atom_elems) for _ in range(10)]
    cubes.append(dict(base=0x1000 - 5 * atom_bytes, line_stride=0x300, surface_stride=0x1000,
                      width=30, height=1, channel=0))          # lines crossing 4 KB
    cubes.append(dict(base=0x2000 + atom_bytes, line_stride=15 * atom_bytes, surface_stride=0x400,
                      width=12, height=2, channel=2 * atom_elems - 1))   # odd width, gaps
    log = {"reqs": [], "errors": []}

    async def bench(ctx):
        for cube in cubes:
            log["reqs"].clear()
            addrs = expected_atoms(cube, atom_bytes, atom_elems)
            # no two atoms of one cube at the same address (else the expected image is ambiguous)
            assert len(set(addrs)) == len(addrs)
            values = [rng.randrange(1 << (8 * atom_bytes)) for _ in addrs]
            want = bytearray(mem)
            for a, v in zip(addrs, values):
                want[a:a + atom_bytes] = v.to_bytes(atom_bytes, "little")
            ctx.set(dut.cube, cube)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            assert ctx.get(dut.busy)
            await stream_put(ctx, dut.atoms, values, rng=rng, p_stall=0.3)
            dones = 0
            for _ in range(200):
                done, busy = ctx.get(dut.done), ctx.get(dut.busy)
                dones += done
                await ctx.tick()
                if not busy:
                    break
            assert dones == 1
            assert not ctx.get(dut.busy)
            assert mem == want, cube
            for addr, length in log["reqs"]:
                assert addr % beat_bytes == 0 and length < max_burst
                assert addr // 4096 == (addr + (length + 1) * beat_bytes - 1) // 4096
        assert not log["errors"], log["errors"][:3]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(make_memory_bench(dut, mem, rng, log), background=True)
    sim.add_process(check_stream_stable(dut.dma.req, name="req"))
    sim.add_process(check_stream_stable(dut.dma.data, name="data"))
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("max_burst", [1, 4])
def test_write_dma_bursts_and_throughput(max_burst):
    """A long line at full rate: one atom accepted per cycle, bursts of max_burst beats, each
    requested only when all its beats are queued, done after the last response."""
    rng = random.Random(max_burst)
    dut = WriteDma(addr_width=ADDR_WIDTH, atom_bytes=8, atom_elems=8, beat_bytes=8,
                   max_burst=max_burst, depth=4 * max_burst)
    mem = bytearray(1 << ADDR_WIDTH)
    cube = dict(base=0x0f00, line_stride=0x400, surface_stride=0x800, width=127, height=0,
                channel=7)
    log = {"reqs": [], "errors": []}

    async def bench(ctx):
        ctx.set(dut.cube, cube)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        values = [rng.randrange(1 << 64) for _ in range(128)]
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

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(make_memory_bench(dut, mem, rng, log, p_ready=1.0, max_latency=3),
                      background=True)
    sim.add_testbench(bench)
    sim.run()
