"""MCIF (hdl.mcif): round-robin arbitration between DMA clients, AXI bursts (arlen/awlen from the
request), read data routed by ID when a behavioural AXI slave returns different IDs out of order
and interleaved beat by beat, W beats of one burst kept together and in AW order with a correct
wlast, B responses completing bursts per client, and ``idle`` (MCIF STATUS.IDLE) low whenever a
transaction is outstanding -- all under random stalls on every channel."""
import random
from collections import deque

import pytest
from amaranth.sim import Simulator
from streams import stream_get, stream_put

from hdl.config import NV_SMALL
from hdl.mcif import Mcif

BEAT = NV_SMALL.primary_memif_width // 8


def test_read_round_robin_and_routing():
    dut = Mcif(NV_SMALL, n_read=3, n_write=2)
    ax = dut.axi

    async def bench(ctx):
        for i in range(3):
            ctx.set(dut.rd[i].req.valid, 1)
            ctx.set(dut.rd[i].req.payload.addr, 0x1000 * (i + 1))
            ctx.set(dut.rd[i].req.payload.len, i)
            ctx.set(dut.rd[i].rsp.ready, 1)
        ctx.set(ax.ar_arready, 1)
        seen = []
        for _ in range(8):
            await ctx.tick()
            if ctx.get(ax.ar_arvalid):
                seen.append((ctx.get(ax.ar_arid), ctx.get(ax.ar_araddr), ctx.get(ax.ar_arlen)))
        ids = [s[0] for s in seen]
        assert len(ids) >= 6
        assert all(b == (a + 1) % 3 for a, b in zip(ids, ids[1:]))   # strict rotation
        assert all(a == 0x1000 * (i + 1) and n == i for i, a, n in seen)
        # read data is routed by rid
        ctx.set(ax.r_rvalid, 1)
        ctx.set(ax.r_rid, 2)
        ctx.set(ax.r_rdata, 0xABCD)
        assert [ctx.get(dut.rd[i].rsp.valid) for i in range(3)] == [0, 0, 1]
        assert ctx.get(dut.rd[2].rsp.payload) == 0xABCD
        ctx.set(dut.rd[2].rsp.ready, 0)
        assert ctx.get(ax.r_rready) == 0

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_rready_high_while_no_beat_is_offered():
    """``rready`` is high while ``rvalid`` is low, whatever the stale ``rid`` and that client's
    ``rsp.ready``, and follows the addressed client's ``rsp.ready`` while a beat is offered. An
    in-order memory that offers its next beat only to a ready master (NVIDIA's trace player's;
    verif/axi_slave.py ``nvidia``/``fast``) otherwise deadlocks: client 1 (all its beats
    received, its buffer full, ``rid`` still 1) held ``rready`` low while client 0's beats
    waited (random nv_small dc programs with SDP operands from memory, seeds 62014 and 7 more of
    62000..62199, ``--mem-profile nvidia``)."""
    dut = Mcif(NV_SMALL, n_read=2, n_write=1)
    ax = dut.axi

    async def bench(ctx):
        for i in range(2):
            ctx.set(dut.rd[i].rsp.ready, 1)
        ctx.set(ax.r_rvalid, 1)
        ctx.set(ax.r_rid, 1)
        await ctx.tick()
        ctx.set(ax.r_rvalid, 0)
        ctx.set(dut.rd[1].rsp.ready, 0)      # client 1 full, its last beat taken
        for _ in range(3):
            await ctx.tick()
            assert ctx.get(ax.r_rready) == 1
        # a memory offering beats only when rready is high now offers client 0's
        ctx.set(ax.r_rvalid, 1)
        ctx.set(ax.r_rid, 0)
        assert ctx.get(ax.r_rready) == 1 and ctx.get(dut.rd[0].rsp.valid) == 1
        ctx.set(dut.rd[0].rsp.ready, 0)
        assert ctx.get(ax.r_rready) == 0     # offered to a client that cannot take it: held
        ctx.set(ax.r_rid, 1)
        ctx.set(dut.rd[0].rsp.ready, 1)
        assert ctx.get(ax.r_rready) == 0     # client 1's beat waits for client 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def axi_slave(dut, mem, rng, state, *, p_ready=0.6, max_latency=30):
    """Background testbench: a behavioural AXI4 memory slave on ``dut.axi`` (byte dict ``mem``).

    Reads: every ARID has its own queue of bursts, each due 0..max_latency cycles after its AR;
    each cycle one due beat of a randomly chosen ID is offered (IDs interleave beat by beat, same
    ID in order). Writes: W beats are matched to AWs in AW order, written with their strobes;
    ``wlast`` must mark exactly the burst's last beat; B responses of completed bursts come back
    after 0..max_latency cycles in random order. ``state`` collects ``errors`` and ``pending``
    (transactions accepted and not finished)."""
    ax = dut.axi

    async def slave(ctx):
        rq = {}             # id -> deque of [due, addr, beats left]
        aw = deque()        # [id, addr, beats left]
        bq = []             # (due, id)
        cycle = 0
        r_hold = b_hold = None
        while True:
            ctx.set(ax.ar_arready, rng.random() < p_ready)
            ctx.set(ax.aw_awready, rng.random() < p_ready)
            ctx.set(ax.w_wready, rng.random() < p_ready)
            if r_hold is None:
                due = [i for i, q in rq.items() if q and q[0][0] <= cycle]
                if due and rng.random() < 0.8:
                    i = rng.choice(due)
                    b = rq[i][0]
                    r_hold = (i, int.from_bytes(bytes(mem.get(b[1] + k, 0) for k in range(BEAT)),
                                                "little"), b[2] == 1)
            ctx.set(ax.r_rvalid, r_hold is not None)
            if r_hold is not None:
                ctx.set(ax.r_rid, r_hold[0])
                ctx.set(ax.r_rdata, r_hold[1])
                ctx.set(ax.r_rlast, r_hold[2])
            if b_hold is None:
                due = [x for x in bq if x[0] <= cycle]
                if due:
                    b_hold = rng.choice(due)
                    bq.remove(b_hold)
            ctx.set(ax.b_bvalid, b_hold is not None)
            if b_hold is not None:
                ctx.set(ax.b_bid, b_hold[1])
            (_, _, arv, arr, arid, araddr, arlen, rv, rr, awv, awr, awid, awaddr, awlen,
             wv, wr, wdata, wstrb, wlast, bv, br, idle) = await ctx.tick().sample(
                ax.ar_arvalid, ax.ar_arready, ax.ar_arid, ax.ar_araddr, ax.ar_arlen,
                ax.r_rvalid, ax.r_rready, ax.aw_awvalid, ax.aw_awready, ax.aw_awid,
                ax.aw_awaddr, ax.aw_awlen, ax.w_wvalid, ax.w_wready, ax.w_wdata, ax.w_wstrb,
                ax.w_wlast, ax.b_bvalid, ax.b_bready, dut.idle)
            if idle and state["pending"]:
                state["errors"].append(f"cycle {cycle}: idle with {state['pending']} pending")
            if arv and arr:
                state["ar"].append((arid, araddr, arlen))
                rq.setdefault(arid, deque()).append(
                    [cycle + 1 + rng.randrange(max_latency + 1), araddr, arlen + 1])
                state["pending"] += 1
            if rv and rr:
                b = rq[r_hold[0]][0]
                b[1] += BEAT
                b[2] -= 1
                if b[2] == 0:
                    rq[r_hold[0]].popleft()
                    state["pending"] -= 1
                r_hold = None
            if awv and awr:
                state["aw"].append((awid, awaddr, awlen))
                aw.append([awid, awaddr, awlen + 1])
                state["pending"] += 1
            if wv and wr:
                if not aw:
                    state["errors"].append(f"cycle {cycle}: W beat without AW")
                else:
                    b = aw[0]
                    raw = wdata.to_bytes(BEAT, "little")
                    for k in range(BEAT):
                        if wstrb >> k & 1:
                            mem[b[1] + k] = raw[k]
                    b[1] += BEAT
                    b[2] -= 1
                    if bool(wlast) != (b[2] == 0):
                        state["errors"].append(f"cycle {cycle}: wlast={wlast}, {b[2]} beats left")
                    if b[2] == 0:
                        aw.popleft()
                        bq.append((cycle + 1 + rng.randrange(max_latency + 1), b[0]))
            if bv and br:
                state["pending"] -= 1
                b_hold = None
            cycle += 1
    return slave


def random_bursts(rng, n, base, max_len=4):
    out, addr = [], base
    for _ in range(n):
        length = rng.randrange(max_len)
        if addr // 4096 != (addr + (length + 1) * BEAT - 1) // 4096:
            length = 0
        out.append((addr, length))
        addr += (length + 1) * BEAT + BEAT * rng.randrange(3)
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_mcif_random_bursts_out_of_order(seed):
    rng = random.Random(seed)
    n_read, n_write = 3, 2
    dut = Mcif(NV_SMALL, n_read=n_read, n_write=n_write)
    mem = {}
    for a in range(0x10000):           # read region 0x0000-0xffff
        mem[a] = rng.randrange(256)
    golden = dict(mem)
    rd_bursts = [random_bursts(rng, 25, 0x0ff0 + 0x4000 * i) for i in range(n_read)]
    wr_bursts = [random_bursts(rng, 20, 0x20ff0 + 0x4000 * j) for j in range(n_write)]
    wr_data = [[[(rng.randrange(1 << 64), rng.randrange(256)) for _ in range(n + 1)]
                for _, n in bursts] for bursts in wr_bursts]
    for bursts, beats in zip(wr_bursts, wr_data):
        for (addr, _), data in zip(bursts, beats):
            for k, (d, s) in enumerate(data):
                for b in range(BEAT):
                    if s >> b & 1:
                        golden[addr + k * BEAT + b] = (d >> (8 * b)) & 0xFF
    state = {"errors": [], "pending": 0, "ar": [], "aw": []}
    dones = [0] * n_write
    finished = []

    def reader(i):
        async def put(ctx):
            await stream_put(ctx, dut.rd[i].req, [{"addr": a, "len": n} for a, n in rd_bursts[i]],
                             rng=rng, p_stall=0.3)

        async def get(ctx):
            n_beats = sum(n + 1 for _, n in rd_bursts[i])
            got = await stream_get(ctx, dut.rd[i].rsp, n_beats, rng=rng, p_stall=0.2)
            want = [int.from_bytes(bytes(mem[a + k * BEAT + b] for b in range(BEAT)), "little")
                    for a, n in rd_bursts[i] for k in range(n + 1)]
            assert got == want, f"read client {i}"
            finished.append(("r", i))
        return put, get

    def writer(j):
        async def put_req(ctx):
            await stream_put(ctx, dut.wr[j].req, [{"addr": a, "len": n} for a, n in wr_bursts[j]],
                             rng=rng, p_stall=0.3)

        async def put_data(ctx):
            beats = [{"data": d, "strb": s} for burst in wr_data[j] for d, s in burst]
            await stream_put(ctx, dut.wr[j].data, beats, rng=rng, p_stall=0.3)
            finished.append(("w", j))
        return put_req, put_data

    async def count_done(ctx):
        async for _, _, *done in ctx.tick().sample(*[dut.wr[j].done for j in range(n_write)]):
            for j, d in enumerate(done):
                dones[j] += d

    async def main(ctx):
        assert ctx.get(dut.idle)
        for _ in range(20000):
            await ctx.tick()
            if len(finished) == n_read + n_write and dones == [len(b) for b in wr_bursts]:
                break
        for _ in range(5):
            await ctx.tick()
        assert ctx.get(dut.idle)
        assert state["pending"] == 0

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(axi_slave(dut, mem, rng, state), background=True)
    sim.add_process(count_done)
    for i in range(n_read):
        for fn in reader(i):
            sim.add_testbench(fn)
    for j in range(n_write):
        for fn in writer(j):
            sim.add_testbench(fn)
    sim.add_testbench(main)
    sim.run()

    assert not state["errors"], state["errors"][:5]
    assert dones == [len(b) for b in wr_bursts]
    assert {a: mem[a] for a in golden} == golden
    # requests went out with the clients' lengths, one AXI ID per client, per-client order kept
    for i in range(n_read):
        assert [(a, n) for c, a, n in state["ar"] if c == i] == rd_bursts[i]
    for j in range(n_write):
        assert [(a, n) for c, a, n in state["aw"] if c == j] == wr_bursts[j]
    assert any(n == 3 for _, _, n in state["ar"]) and any(n == 3 for _, _, n in state["aw"])


@pytest.mark.parametrize("cfg_name", ["nv_small", "nv_large", "nv_small_256_full"])
def test_write_dma_into_mcif_one_beat_per_cycle(cfg_name):
    """A write DMA with write_dma_params' FIFO depth, writing a long cube through MCIF into a
    memory that is always ready, sends one W beat per cycle from its first beat to its last (a
    data FIFO of 4 beats gave 4 beats every 5 cycles: the loop through MCIF's AW and W stages)."""
    from amaranth.hdl import Module
    from amaranth.lib import wiring

    from hdl.config import get_config
    from hdl.dma import WriteDma, write_dma_params
    cfg = get_config(cfg_name)
    p = write_dma_params(cfg)
    m = Module()
    m.submodules.mcif = mcif = Mcif(cfg)
    m.submodules.wr = wr = WriteDma(**p)
    wiring.connect(m, wr.dma, mcif.wr[0])
    atoms, lines = 64, 8
    beats = atoms * lines * p["atom_bytes"] // p["beat_bytes"]
    seen = []

    async def bench(ctx):
        ab = p["atom_bytes"]
        ctx.set(wr.cube.base, 0x1000)
        ctx.set(wr.cube.width, atoms - 1)
        ctx.set(wr.cube.height, lines - 1)
        ctx.set(wr.cube.line_stride, atoms * ab)
        ctx.set(wr.cube.surface_stride, atoms * ab * lines)
        ctx.set(mcif.axi.aw_awready, 1)
        ctx.set(mcif.axi.w_wready, 1)
        ctx.set(wr.start, 1)
        await ctx.tick()
        ctx.set(wr.start, 0)
        ctx.set(wr.atoms.valid, 1)
        cycle = 0
        while len(seen) < beats and cycle < 10 * beats:
            _, _, wv = await ctx.tick().sample(mcif.axi.w_wvalid)
            cycle += 1
            if wv:
                seen.append(cycle)

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert len(seen) == beats
    assert seen[-1] - seen[0] + 1 == beats, f"{beats} beats in {seen[-1] - seen[0] + 1} cycles"
