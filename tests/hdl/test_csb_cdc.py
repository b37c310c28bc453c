# amaranth: UnusedElaboratable=no
"""CsbCdc (hdl/csb_cdc.py): NVIDIA's CSB port crossed between two clock domains, in Amaranth's
simulator with two clocks of unrelated periods (and equal ones), random request gaps on the host
side and random stalls (``csb2nvdla_ready`` low) and response delays on the core side.

Outcome checked: every request the host's valid/ready handshake hands over arrives on the core
side exactly once, in order, with its payload; every read gets exactly one ``nvdla2csb_valid``
with the data the core side answered, every non-posted write one ``nvdla2csb_wr_complete``, in
request order; posted writes get nothing; at most one response per host cycle.
"""
from __future__ import annotations

import random
from collections import deque

import pytest
from amaranth.sim import Simulator

from hdl.csb_cdc import CsbCdc

NS = 1e-9


def _requests(rng: random.Random, n: int) -> list[dict]:
    out = []
    for _ in range(n):
        kind = rng.choice(["read", "read", "posted", "posted", "nposted"])
        out.append({"addr": rng.getrandbits(16), "wdat": rng.getrandbits(32),
                    "write": int(kind != "read"), "nposted": int(kind == "nposted")})
    return out


def _answer(req: dict) -> int:
    """The data the core side returns for a read (any function of the request)."""
    return (req["addr"] * 0x9E3779B1 + 0x1234567) & 0xFFFFFFFF


def _run(host_period: float, core_period: float, seed: int, n: int = 200, *,
         p_gap: float = 0.3, p_stall: float = 0.3, max_delay: int = 6, **cdc_kw):
    rng = random.Random(seed)
    reqs = _requests(rng, n)
    expect_resp = [("read", _answer(r)) if not r["write"] else ("write", None)
                   for r in reqs if not r["write"] or r["nposted"]]
    dut = CsbCdc(**cdc_kw)
    h, c = dut.host, dut.core
    arrived, responses = [], []
    state = {"host_done": False}

    async def host_driver(ctx):
        for r in reqs:
            ctx.set(h.csb2nvdla_valid, 0)
            while rng.random() < p_gap:
                await ctx.tick("csb")
            ctx.set(h.csb2nvdla_valid, 1)
            ctx.set(h.csb2nvdla_addr, r["addr"])
            ctx.set(h.csb2nvdla_wdat, r["wdat"])
            ctx.set(h.csb2nvdla_write, r["write"])
            ctx.set(h.csb2nvdla_nposted, r["nposted"])
            while True:              # hold the request until the edge where ready is high
                *_, ready = await ctx.tick("csb").sample(h.csb2nvdla_ready)
                if ready:
                    break
        ctx.set(h.csb2nvdla_valid, 0)
        state["host_done"] = True

    async def host_monitor(ctx):
        while True:
            *_, v, w, d = await ctx.tick("csb").sample(
                h.nvdla2csb_valid, h.nvdla2csb_wr_complete, h.nvdla2csb_data)
            assert not (v and w), "read response and write completion in the same cycle"
            if v:
                responses.append(("read", d))
            if w:
                responses.append(("write", None))

    async def core_side(ctx):
        due = deque()              # (cycle, kind, data): responses in request order
        cycle = 0
        last_due = 0
        while True:
            ready = int(rng.random() >= p_stall)
            ctx.set(c.csb2nvdla_ready, ready)
            # one response pulse at most per cycle, no back-pressure
            if due and due[0][0] <= cycle:
                _, kind, data = due.popleft()
                ctx.set(c.nvdla2csb_valid, kind == "read")
                ctx.set(c.nvdla2csb_wr_complete, kind == "write")
                if kind == "read":
                    ctx.set(c.nvdla2csb_data, data)
            else:
                ctx.set(c.nvdla2csb_valid, 0)
                ctx.set(c.nvdla2csb_wr_complete, 0)
            *_, v, a, wd, w, npd = await ctx.tick("sync").sample(
                c.csb2nvdla_valid, c.csb2nvdla_addr, c.csb2nvdla_wdat, c.csb2nvdla_write,
                c.csb2nvdla_nposted)
            cycle += 1
            if v and ready:
                r = {"addr": a, "wdat": wd, "write": w, "nposted": npd}
                arrived.append(r)
                if not w or npd:
                    last_due = max(last_due + 1, cycle + 1 + rng.randrange(max_delay))
                    due.append((last_due, "read" if not w else "write",
                                _answer(r) if not w else None))

    async def main(ctx):
        # run until everything is delivered and answered, then a while longer (extra responses)
        limit = 200 * n
        for _ in range(limit):
            await ctx.tick("csb")
            if state["host_done"] and len(arrived) == n and len(responses) >= len(expect_resp):
                break
        else:
            pytest.fail(f"timeout: {len(arrived)}/{n} requests arrived, "
                        f"{len(responses)}/{len(expect_resp)} responses")
        for _ in range(50):
            await ctx.tick("csb")

    sim = Simulator(dut)
    sim.add_clock(host_period * NS, domain="csb")
    sim.add_clock(core_period * NS, domain="sync")
    sim.add_testbench(host_driver)
    sim.add_testbench(host_monitor, background=True)
    sim.add_testbench(core_side, background=True)
    sim.add_testbench(main)
    sim.run()
    assert arrived == reqs
    assert responses == expect_resp
    return len(reqs)


@pytest.mark.parametrize("host_period,core_period", [
    (27.027, 10.0),       # CSB 37 MHz, core 100 MHz
    (10.0, 27.027),       # CSB faster than the core
    (10.0, 10.0),         # equal clocks (the same edges)
    (7.3, 11.9),          # unrelated, both ways odd
])
@pytest.mark.parametrize("seed", [1, 2])
def test_crossing_random_stalls(host_period, core_period, seed):
    _run(host_period, core_period, seed)


def test_back_to_back_full_rate_and_small_fifos():
    """No gaps, no stalls: requests one per host cycle through the smallest FIFOs (the response
    credits throttle reads); and heavy stalls with long response delays."""
    _run(10.0, 10.0, 3, p_gap=0.0, p_stall=0.0, max_delay=1, req_depth=2, resp_depth=2)
    _run(13.1, 10.0, 4, p_gap=0.0, p_stall=0.8, max_delay=20, req_depth=4, resp_depth=2)


def test_equal_clocks_posted_writes_full_rate():
    """Equal clocks, posted writes only: the host side accepts one request per cycle
    (the request FIFO is deeper than the pointer round trip), and they arrive in order."""
    dut = CsbCdc()
    h, c = dut.host, dut.core
    n = 64
    ticks, arrived = [], []

    async def host(ctx):
        ctx.set(h.csb2nvdla_valid, 1)
        ctx.set(h.csb2nvdla_write, 1)
        k = 0
        for i in range(n):
            ctx.set(h.csb2nvdla_addr, i)
            while True:
                k += 1
                *_, ready = await ctx.tick("csb").sample(h.csb2nvdla_ready)
                if ready:
                    break
        ctx.set(h.csb2nvdla_valid, 0)
        ticks.append(k)
        for _ in range(20):
            await ctx.tick("csb")

    async def core(ctx):
        ctx.set(c.csb2nvdla_ready, 1)
        while True:
            *_, v, a = await ctx.tick("sync").sample(c.csb2nvdla_valid, c.csb2nvdla_addr)
            if v:
                arrived.append(a)

    sim = Simulator(dut)
    sim.add_clock(10 * NS, domain="csb")
    sim.add_clock(10 * NS, domain="sync")
    sim.add_testbench(core, background=True)
    sim.add_testbench(host)
    sim.run()
    assert ticks == [n]
    assert arrived == list(range(n))


def test_bad_depth():
    with pytest.raises(ValueError, match="power of 2"):
        CsbCdc(req_depth=6)
    with pytest.raises(ValueError, match="power of 2"):
        CsbCdc(resp_depth=1)
