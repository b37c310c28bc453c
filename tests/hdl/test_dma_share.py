"""hdl.dma.share.ReadShare: two and three read clients on one port under random stalls on every
stream, at nv_small's geometry (32-bit addresses, 64-bit data) and a wide one (64, 512): every
client's requests reach the port, in its own order, and each gets exactly its bursts' beats
in order; no client waits for ever while another keeps requesting (round-robin)."""
import random

import pytest
from amaranth.sim import Simulator
from streams import stream_get, stream_put

from hdl.dma.share import ReadShare


def _data(addr: int, beat: int, width: int) -> int:
    return ((addr * 131 + beat * 7) * 0x9E3779B97F4A7C15) & ((1 << width) - 1)


@pytest.mark.parametrize("aw,dw", [(32, 64), (64, 512)])
@pytest.mark.parametrize("n", [2, 3])
def test_read_share(aw, dw, n):
    rng = random.Random(aw + n)
    dut = ReadShare(aw, dw, n=n, requests=4)
    reqs = [[{"addr": (c << 20) + 0x40 * i, "len": rng.randint(0, 15)} for i in range(25)]
            for c in range(n)]
    expected = [[_data(r["addr"], b, dw) for r in rs for b in range(r["len"] + 1)] for rs in reqs]
    got = [None] * n
    seen = []                   # the client of each request the port took

    def client(c):
        async def req(ctx):
            await stream_put(ctx, dut.clients[c].req, reqs[c], rng=rng, p_stall=0.1 * c)

        async def rsp(ctx):
            got[c] = await stream_get(ctx, dut.clients[c].rsp, len(expected[c]), rng=rng)
        return req, rsp

    async def memory(ctx):
        pending = []
        port = dut.port
        while True:
            ctx.set(port.req.ready, rng.random() < 0.7)
            ctx.set(port.rsp.valid, 0)
            if pending and rng.random() < 0.7:
                ctx.set(port.rsp.valid, 1)
                ctx.set(port.rsp.payload, _data(*pending[0], dw))
            _, _, rv, rr, qv, qr, q, *offer = await ctx.tick().sample(
                port.rsp.valid, port.rsp.ready, port.req.valid, port.req.ready, port.req.payload,
                *[cl.req.valid for cl in dut.clients])
            if rv and rr:
                pending.pop(0)
            if qv and qr:
                seen.append((q.addr >> 20, tuple(offer)))
                pending += [(q.addr, b) for b in range(q.len + 1)]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for c in range(n):
        for tb in client(c):
            sim.add_testbench(tb)
    sim.add_process(memory)
    sim.run_until(2e-4)
    assert got == expected
    # round-robin: each request taken is the first client offering one after the last taken
    last = n - 1
    for i, (c, offer) in enumerate(seen):
        first = next(k % n for k in range(last + 1, last + 1 + n) if offer[k % n])
        assert c == first, f"take {i}: client {c}, offers {offer}, last taken {last}"
        last = c
    assert sorted(c for c, _ in seen) == sorted(c for c in range(n) for _ in range(25))


def test_read_share_takes_data_at_once():
    """Clients that always take their data (the credit rule) and a memory answering from the
    cycle after a request: the port's data is never refused, the first beat included (the
    request's tag is readable by then)."""
    rng = random.Random(5)
    dut = ReadShare(32, 64, n=2, requests=8)
    reqs = [[{"addr": (c << 20) + 0x40 * i, "len": rng.randint(0, 3)} for i in range(30)]
            for c in range(2)]
    refused = []

    def client(c):
        async def req(ctx):
            await stream_put(ctx, dut.clients[c].req, reqs[c], rng=rng, p_stall=0.2)

        async def rsp(ctx):
            ctx.set(dut.clients[c].rsp.ready, 1)
        return req, rsp

    async def memory(ctx):
        pending, cycle = [], 0
        port = dut.port
        ctx.set(port.req.ready, 1)
        while True:
            ctx.set(port.rsp.valid, 0)
            if pending and pending[0][2] <= cycle:
                ctx.set(port.rsp.valid, 1)
                ctx.set(port.rsp.payload, _data(*pending[0][:2], 64))
            _, _, rv, rr, qv, qr, q = await ctx.tick().sample(
                port.rsp.valid, port.rsp.ready, port.req.valid, port.req.ready, port.req.payload)
            if rv and not rr:
                refused.append(cycle)
            if rv and rr:
                pending.pop(0)
            if qv and qr:
                due = max([cycle + 1] + [p[2] for p in pending[-1:]])
                pending += [(q.addr, b, due + b) for b in range(q.len + 1)]
            cycle += 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for c in range(2):
        for tb in client(c):
            sim.add_testbench(tb)
    sim.add_process(memory)
    sim.run_until(2e-5)
    assert not refused, f"data refused at cycles {refused[:5]}"
