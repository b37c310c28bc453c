"""hdl.dma.route: one DMA client between MCIF and CVIF by its requests' ``cv`` bit, under random
stalls on every stream, at nv_small's geometry and a wide one (64-bit addresses, 256-bit data).

Reads: every burst goes to the memory it names, its beats come back to the client in request
order with that memory's data, and a request for the other memory is never issued while beats
of the current one are in flight. Writes: every burst and its beats reach the memory it names,
in order, and the client sees one ``done`` per burst; a switch waits for the acknowledgements.
"""
import random

import pytest
from amaranth.sim import Simulator
from streams import stream_get, stream_put

from hdl.dma.route import ReadRoute, WriteRoute

GEOMETRIES = [(32, 64), (64, 256)]


def _data(mem: int, addr: int, beat: int, width: int) -> int:
    """The word memory ``mem`` (0 MC, 1 CV) returns for beat ``beat`` of a burst at ``addr``."""
    return ((addr * 131 + beat * 7 + mem * 0x5A5A) * 0x9E3779B97F4A7C15) & ((1 << width) - 1)


def _requests(rng, n):
    reqs, cv = [], rng.randint(0, 1)
    for i in range(n):
        if rng.random() < 0.3:
            cv ^= 1
        reqs.append({"addr": 0x1000 + 0x40 * i, "len": rng.randint(0, 3), "cv": cv})
    return reqs


@pytest.mark.parametrize("aw,dw", GEOMETRIES)
@pytest.mark.parametrize("seed", [1, 2])
def test_read_route(aw, dw, seed):
    rng = random.Random(seed)
    dut = ReadRoute(aw, dw, max_beats=64)
    reqs = _requests(rng, 40)
    expected = [_data(r["cv"], r["addr"], b, dw) for r in reqs for b in range(r["len"] + 1)]
    got = []
    inflight = [0, 0]           # beats requested from each memory, not yet returned

    async def client_req(ctx):
        await stream_put(ctx, dut.client.req, reqs, rng=rng)

    async def client_rsp(ctx):
        got.extend(await stream_get(ctx, dut.client.rsp, len(expected), rng=rng))

    def memory(mem):
        port = dut.cv if mem else dut.mc

        async def serve(ctx):
            pending = []
            while True:
                # take requests (random stalls), return beats in order (random gaps)
                ctx.set(port.req.ready, rng.random() < 0.6)
                ctx.set(port.rsp.valid, 0)
                if pending and rng.random() < 0.6:
                    addr, beat = pending[0]
                    ctx.set(port.rsp.valid, 1)
                    ctx.set(port.rsp.payload, _data(mem, addr, beat, dw))
                _, _, rv, rr, qv, qr, q = await ctx.tick().sample(
                    port.rsp.valid, port.rsp.ready, port.req.valid, port.req.ready,
                    port.req.payload)
                if rv and rr:
                    pending.pop(0)
                    inflight[mem] -= 1
                if qv and qr:
                    assert inflight[1 - mem] == 0, "request while the other memory has beats out"
                    pending += [(q.addr, b) for b in range(q.len + 1)]
                    inflight[mem] += q.len + 1
        return serve

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(client_req)
    sim.add_testbench(client_rsp)
    sim.add_process(memory(0))
    sim.add_process(memory(1))
    sim.run_until(2e-4)
    assert got == expected


@pytest.mark.parametrize("aw,dw", GEOMETRIES)
@pytest.mark.parametrize("seed", [1, 2])
def test_write_route(aw, dw, seed):
    rng = random.Random(seed)
    dut = WriteRoute(aw, dw)
    reqs = _requests(rng, 30)
    beats = [{"data": _data(0, r["addr"], b, dw), "strb": (1 << dw // 8) - 1}
             for r in reqs for b in range(r["len"] + 1)]
    seen = {0: [], 1: []}       # (addr, [beats]) per memory
    done = [0]

    async def client_req(ctx):
        await stream_put(ctx, dut.client.req, reqs, rng=rng)

    async def client_data(ctx):
        await stream_put(ctx, dut.client.data, beats, rng=rng)

    async def count_done(ctx):
        async for _, _, d in ctx.tick().sample(dut.client.done):
            done[0] += d

    def memory(mem):
        port = dut.cv if mem else dut.mc

        async def serve(ctx):
            bursts, acks = [], []         # bursts taken, awaiting beats; B delays
            while True:
                ctx.set(port.req.ready, rng.random() < 0.6)
                ctx.set(port.data.ready, bool(bursts) and rng.random() < 0.7)
                ctx.set(port.done, bool(acks) and acks[0] <= 0)
                _, _, qv, qr, q, dv, dr, d, dn = await ctx.tick().sample(
                    port.req.valid, port.req.ready, port.req.payload,
                    port.data.valid, port.data.ready, port.data.payload, port.done)
                if dn:
                    acks.pop(0)
                acks = [a - 1 for a in acks]
                if dv and dr:
                    addr, n, got = bursts[0]
                    got.append(d.data)
                    if len(got) == n:
                        bursts.pop(0)
                        seen[mem].append((addr, got))
                        acks.append(rng.randint(0, 6))
                if qv and qr:
                    bursts.append((q.addr, q.len + 1, []))
        return serve

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(client_req)
    sim.add_testbench(client_data)
    sim.add_process(count_done)
    sim.add_process(memory(0))
    sim.add_process(memory(1))
    sim.run_until(2e-4)
    for mem in (0, 1):
        want = [(r["addr"], [_data(0, r["addr"], b, dw) for b in range(r["len"] + 1)])
                for r in reqs if r["cv"] == mem]
        assert seen[mem] == want
    assert done[0] == len(reqs)
