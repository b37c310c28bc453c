"""PDP D_PERF_ENABLE / D_PERF_WRITE_STALL (hdl/pdp/__init__.py; NVIDIA's meaning from nv_small
NV_NVDLA_PDP_wdma.v): the number of cycles, cumulative over layers (never cleared), in which
the write DMA's request to MCIF (a burst request or a data beat) was valid and not accepted,
counted only while D_PERF_ENABLE.DMA_EN of the running group is set, latched into the register
group that ran and read through the CSB producer group (S_POINTER.PRODUCER).

The unit runs alone in Amaranth's simulator against a fake MCIF written here (random ready on
every request/data/response stream, B responses a few cycles after a burst's last beat), which
counts the stalled cycles itself; two max-pooling layers are queued in both ping-pong groups,
DMA_EN on in one and off in the other. ``run_unit`` is also used by tests/hdl/test_cdp_unit.py.
"""
from __future__ import annotations

import random

import pytest
from amaranth.sim import Simulator

from hdl.config import NV_SMALL
from hdl.pdp import Pdp
from hdl.regmap import REGMAP
from streams import mcif_read_client, mcif_write_client
from verif.mem import SparseMemory

A = NV_SMALL.memory_atomic
BEAT = NV_SMALL.primary_memif_width // 8


def _reg(unit: str, reg: str):
    return next(r for r in REGMAP.unit(unit).registers if r.name == reg)


def run_unit(unit, program, *, mem: SparseMemory, layers: int, reads=(), seed: int = 1,
             p_ready: float = 0.5, max_cycles: int = 200_000, read_stalls: list | None = None):
    """Simulate datapath unit ``unit`` (an :class:`hdl.unit.DatapathUnit`) against a fake MCIF.

    ``program``: ``(register file, register, value)`` writes on the unit's ``csb_<rf>`` buses,
    in order, one per cycle; then the bench waits for ``layers`` ``done_grp`` pulses (at most
    ``max_cycles`` cycles) and plays ``reads``: 3-tuples ``(rf, reg, value)`` are writes (e.g.
    S_POINTER), 2-tuples ``(rf, reg)`` reads.
    Read clients answer from ``mem``; write clients store into it. Every ready/valid of the fake
    MCIF is random (``p_ready``). Returns ``(stalls, values)``: per layer, the cycles in which a
    write client's request or data stream was valid and not ready while the unit was busy; and
    the read register values in order. ``read_stalls``, when given, is filled with the same
    per-layer count for the read clients' request streams.
    """
    rng = random.Random(seed)
    beat = unit.cfg.primary_memif_width // 8          # AXI data bytes
    stalls = [0] * layers
    state = {"layers": 0, "cycle": 0}
    values = []
    sim = Simulator(unit)
    sim.add_clock(1e-8)
    rd_ports = [getattr(unit, c) for c in unit.READ_CLIENTS]
    wr_ports = [getattr(unit, c) for c in unit.WRITE_CLIENTS]

    async def csb(ctx):
        def bus(rf):
            return getattr(unit, f"csb_{rf.lower()}")
        for rf, reg, value in program:
            b = bus(rf)
            ctx.set(b.addr, _reg(rf, reg).offset >> 2)
            ctx.set(b.wdata, value)
            ctx.set(b.we, 1)
            await ctx.tick()
            ctx.set(b.we, 0)
        while state["layers"] < layers:
            assert state["cycle"] < max_cycles, f"only {state['layers']} of {layers} layers done"
            await ctx.tick()
        for item in reads:
            b = bus(item[0])
            ctx.set(b.addr, _reg(item[0], item[1]).offset >> 2)
            if len(item) == 3:
                ctx.set(b.wdata, item[2])
                ctx.set(b.we, 1)
                await ctx.tick()
                ctx.set(b.we, 0)
            else:
                values.append(ctx.get(b.rdata))

    if read_stalls is not None:
        read_stalls[:] = [0] * layers
    n_wr = 4 * len(wr_ports)

    async def monitor(ctx):
        async for _, _, done_grp, busy, *streams in ctx.tick().sample(
                unit.done_grp, unit.busy,
                *[s for p in wr_ports for s in (p.req.valid, p.req.ready, p.data.valid, p.data.ready)],
                *[s for p in rd_ports for s in (p.req.valid, p.req.ready)]):
            state["cycle"] += 1
            wr, rd = streams[:n_wr], streams[n_wr:]
            if state["layers"] < layers and busy and any(
                    v and not r for v, r in zip(wr[0::2], wr[1::2])):
                stalls[state["layers"]] += 1
            if read_stalls is not None and state["layers"] < layers and busy and any(
                    v and not r for v, r in zip(rd[0::2], rd[1::2])):
                read_stalls[state["layers"]] += 1
            if done_grp:
                state["layers"] += 1

    sim.add_testbench(csb)
    sim.add_process(monitor)
    for p in rd_ports:
        sim.add_process(mcif_read_client(p, mem, beat, rng, p_ready))
    for p in wr_ports:
        sim.add_process(mcif_write_client(p, mem, beat, rng, p_ready))
    sim.run()
    return stalls, values


W, H, C = 6, 4, 12
SRC, DST = 0x8000_0000, (0x8010_0000, 0x8020_0000)


def _pdp_program(g: int, dma_en: int):
    """Layer of group ``g``: MAX pooling 2x2 stride 2 of the W x H x C cube at SRC to DST[g]."""
    ow, oh = W // 2, H // 2
    line, surf = W * A, W * H * A
    p = [("PDP_RDMA", "S_POINTER", g), ("PDP", "S_POINTER", g)]
    for u in ("PDP_RDMA", "PDP"):
        p += [(u, "D_DATA_CUBE_IN_WIDTH", W - 1), (u, "D_DATA_CUBE_IN_HEIGHT", H - 1),
              (u, "D_DATA_CUBE_IN_CHANNEL", C - 1)]
    kern = _reg("PDP", "D_POOLING_KERNEL_CFG")
    k = (1 << kern.field("KERNEL_WIDTH").lsb) | (1 << kern.field("KERNEL_HEIGHT").lsb) \
        | (1 << kern.field("KERNEL_STRIDE_WIDTH").lsb) | (1 << kern.field("KERNEL_STRIDE_HEIGHT").lsb)
    mode = _reg("PDP", "D_OPERATION_MODE_CFG")
    p += [("PDP_RDMA", "D_FLYING_MODE", 1), ("PDP_RDMA", "D_SRC_BASE_ADDR_LOW", SRC),
          ("PDP_RDMA", "D_SRC_LINE_STRIDE", line), ("PDP_RDMA", "D_SRC_SURFACE_STRIDE", surf),
          ("PDP", "D_DATA_CUBE_OUT_WIDTH", ow - 1), ("PDP", "D_DATA_CUBE_OUT_HEIGHT", oh - 1),
          ("PDP", "D_DATA_CUBE_OUT_CHANNEL", C - 1),
          ("PDP", "D_OPERATION_MODE_CFG", (1 << mode.field("POOLING_METHOD").lsb)
           | (1 << mode.field("FLYING_MODE").lsb)),
          ("PDP", "D_POOLING_KERNEL_CFG", k),
          ("PDP", "D_DST_BASE_ADDR_LOW", DST[g]), ("PDP", "D_DST_LINE_STRIDE", ow * A),
          ("PDP", "D_DST_SURFACE_STRIDE", ow * oh * A), ("PDP", "D_DST_RAM_CFG", 1),
          ("PDP", "D_PERF_ENABLE", dma_en)]
    return p


@pytest.mark.parametrize("seed, dma_en", [(1, (1, 0)), (2, (0, 1)), (3, (1, 1))])
def test_write_stall_per_group(seed, dma_en):
    rng = random.Random(seed)
    S = -(-C // A)
    src = bytes(rng.randrange(256) for _ in range(W * H * A * S))
    mem = SparseMemory(NV_SMALL.mem_address_width)
    mem.write(SRC, src)
    program = _pdp_program(0, dma_en[0]) + _pdp_program(1, dma_en[1])
    for g in range(2):
        program += [("PDP_RDMA", "S_POINTER", g), ("PDP", "S_POINTER", g),
                    ("PDP_RDMA", "D_OP_ENABLE", 1), ("PDP", "D_OP_ENABLE", 1)]
    reads = [("PDP", "S_POINTER", 0), ("PDP", "D_PERF_WRITE_STALL"),
             ("PDP", "S_POINTER", 1), ("PDP", "D_PERF_WRITE_STALL")]
    stalls, got = run_unit(Pdp(NV_SMALL), program, mem=mem, layers=2, reads=reads, seed=seed)
    assert all(s > 0 for s in stalls)                 # random ready: the WDMA did wait
    # cumulative (never cleared, nv_small NV_NVDLA_PDP_wdma.v; tests/hdl/test_wdma_perf.py):
    # the second group shows the first layer's count plus its own
    assert got == [stalls[0] * dma_en[0], stalls[0] * dma_en[0] + stalls[1] * dma_en[1]]
    ow, oh = W // 2, H // 2
    for g in range(2):
        for ci in range(S * A):
            for y in range(oh):
                for x in range(ow):
                    def px(yy, xx):
                        b = src[(ci // A) * W * H * A + yy * W * A + xx * A + ci % A]
                        return b - 256 if b > 127 else b
                    want = max(px(2 * y + j, 2 * x + i) for j in range(2) for i in range(2))
                    b = mem.read_bytes(DST[g] + (ci // A) * ow * oh * A + y * ow * A + x * A + ci % A, 1)[0]
                    assert (b - 256 if b > 127 else b) == want, (g, ci, y, x)
