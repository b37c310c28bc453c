"""CDP unit RTL (hdl.cdp): the CDP traversal order of CdpWalker with one atom per burst window
(line / position / surface; groups of positions: test_cdp_walker.py) vs the address formula with
random stalls; and on the whole NvdlaCore in Amaranth's simulator: the LUT access port
(S_LUT_ACCESS_CFG/DATA through CSB, against the model's LutStorage) and two LRN layers queued in
both ping-pong groups, output and per-group D_PERF_LUT_* statistics against the numpy model."""
import random

import numpy as np
import pytest

from amaranth.sim import Simulator

from hdl.cdp.dma import CdpWalker
from hdl.config import NV_SMALL, get_config
from hdl.regmap import REGMAP
from streams import stream_get
from verif.model.cdp import cdp_compute
from verif.model.lut import LutParams, LutStorage
from verif.trace.amaranth_engine import simulate


def a(name):
    return REGMAP.lookup(name).addr


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_walker_order(seed):
    rng = random.Random(seed)
    dut = CdpWalker(addr_width=32, atom_bytes=8, atom_elems=8, beat_bytes=8, max_burst=1)
    cubes = []
    for _ in range(4):
        w, h, c = rng.randrange(1, 5), rng.randrange(1, 4), rng.randrange(1, 30)
        ls = rng.randrange(w, w + 3) * 8
        cubes.append(dict(base=rng.randrange(0, 1 << 20) * 8, line_stride=ls,
                          surface_stride=ls * h + rng.randrange(0, 3) * 8,
                          width=w - 1, height=h - 1, channel=c - 1))
    got = []

    async def bench(ctx):
        for cube in cubes:
            ctx.set(dut.cube, cube)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            n = (cube["width"] + 1) * (cube["height"] + 1) * (cube["channel"] // 8 + 1)
            runs = await stream_get(ctx, dut.runs, n, rng=rng, p_stall=0.3)
            await ctx.tick()
            assert not ctx.get(dut.busy)
            got.append([(r.addr, r.count, r.last) for r in runs])

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    for cube, runs in zip(cubes, got):
        want = [(cube["base"] + y * cube["line_stride"] + x * 8 + s * cube["surface_stride"], 1, 0)
                for y in range(cube["height"] + 1) for x in range(cube["width"] + 1)
                for s in range(cube["channel"] // 8 + 1)]
        want[-1] = want[-1][:2] + (1,)
        assert runs == want


def test_lut_access_port():
    """CSB programming of both tables vs LutStorage: auto-increment, sticking on the last entry,
    writes with ACCESS_TYPE=READ ignored, live S_LUT_ACCESS_CFG, 0 outside / entry 0 readback."""
    rng = random.Random(4)
    ref = LutStorage()
    ops = []                                   # (cfg value, data values)
    for table, addr, typ, n in ((0, 0, 1, 65), (1, 0, 1, 257), (0, 60, 1, 9), (1, 250, 1, 12),
                                (0, 5, 0, 3), (1, 100, 1, 4)):
        ops.append(((typ << 17) | (table << 16) | addr, [rng.randrange(1 << 16) for _ in range(n)]))
    reads = {}

    async def bench(h):
        for cfgv, vals in ops:
            await h.reg_write(a("CDP.S_LUT_ACCESS_CFG"), cfgv)
            ref.set_access(cfgv & 0x3FF, (cfgv >> 16) & 1, (cfgv >> 17) & 1)
            for v in vals:
                await h.reg_write(a("CDP.S_LUT_ACCESS_DATA"), v)
                ref.write_data(v)
            reads.setdefault("cfg", []).append((await h.reg_read(a("CDP.S_LUT_ACCESS_CFG")),
                                                (ref.access_type << 17) | (ref.table_id << 16)
                                                | ref.addr))
        out = []
        for table, n in ((0, 65), (1, 257)):
            for addr in list(range(n)) + [n, 1023]:
                await h.reg_write(a("CDP.S_LUT_ACCESS_CFG"), (table << 16) | addr)
                out.append(await h.reg_read(a("CDP.S_LUT_ACCESS_DATA")))
        reads["data"] = out

    simulate(NV_SMALL, bench)
    for got, want in reads["cfg"]:
        assert got == want
    want = []
    for table, n in ((0, 65), (1, 257)):
        t = ref.tables[table]
        want += [int(t[i]) & 0xFFFF for i in range(n)] + [int(t[0]) & 0xFFFF] * 2
    assert reads["data"] == want


SRC, DST = 0x8000_0000, (0x9000_0000, 0x9100_0000)
W, H, C = 2, 2, 13           # two surfaces, the last one partial


@pytest.mark.parametrize("spec", ["nv_small", "nv_small+primary_memif_max_burst=4+cdp_throughput=8"])
def test_two_layers_pingpong_stats(spec):
    """Also with bursts of 4 atoms: groups of positions in both walkers and the core."""
    cfg = get_config(spec)
    rng = random.Random(9)
    A = cfg.memory_atomic
    S = -(-C // A)
    line, surf = W * A, W * H * A
    src = bytes(rng.randrange(256) for _ in range(surf * S))
    le = [rng.randrange(-2000, 2000) for _ in range(65)]
    lo = [rng.randrange(-2000, 2000) for _ in range(257)]
    lut_regs = {"S_LUT_CFG": 0x0 | (1 << 5), "S_LUT_INFO": (8 << 16) | 4,
                "S_LUT_LE_START_LOW": 0, "S_LUT_LE_END_LOW": 1 << 20,
                "S_LUT_LO_START_LOW": 1000, "S_LUT_LO_END_LOW": 1000 + (1 << 16),
                "S_LUT_LE_SLOPE_SCALE": (5 << 16) | 3, "S_LUT_LE_SLOPE_SHIFT": (2 << 5) | 1,
                "S_LUT_LO_SLOPE_SCALE": ((-7 & 0xFFFF) << 16) | 2,
                "S_LUT_LO_SLOPE_SHIFT": (3 << 5) | 31}
    p = LutParams(0, 4, 0, 8, 0, 1 << 20, 1000, 1000 + (1 << 16), 3, 5, 1, 2, 2, -7, -1, 3,
                  0, 1, 0)
    groups = [dict(normalz=0, datout_shift=10), dict(normalz=3, datout_shift=12)]
    res = {}

    async def bench(h):
        await h.mem_write(SRC, src)
        await h.reg_write(a("CDP.S_LUT_ACCESS_CFG"), 1 << 17)
        for v in le:
            await h.reg_write(a("CDP.S_LUT_ACCESS_DATA"), v & 0xFFFF)
        await h.reg_write(a("CDP.S_LUT_ACCESS_CFG"), (1 << 17) | (1 << 16))
        for v in lo:
            await h.reg_write(a("CDP.S_LUT_ACCESS_DATA"), v & 0xFFFF)
        for r, v in lut_regs.items():
            await h.reg_write(a(f"CDP.{r}"), v)
        for g, gp in enumerate(groups):
            await h.reg_write(a("CDP_RDMA.S_POINTER"), g)
            await h.reg_write(a("CDP.S_POINTER"), g)
            for r, v in (("D_DATA_CUBE_WIDTH", W - 1), ("D_DATA_CUBE_HEIGHT", H - 1),
                         ("D_DATA_CUBE_CHANNEL", C - 1), ("D_SRC_BASE_ADDR_LOW", SRC),
                         ("D_SRC_LINE_STRIDE", line), ("D_SRC_SURFACE_STRIDE", surf)):
                await h.reg_write(a(f"CDP_RDMA.{r}"), v)
            for r, v in (("D_DST_BASE_ADDR_LOW", DST[g]), ("D_DST_LINE_STRIDE", line),
                         ("D_DST_SURFACE_STRIDE", surf), ("D_LRN_CFG", gp["normalz"]),
                         ("D_DATIN_SCALE", 1), ("D_DATOUT_SCALE", 1),
                         ("D_DATOUT_SHIFTER", gp["datout_shift"])):
                await h.reg_write(a(f"CDP.{r}"), v)
        for g in range(2):
            await h.reg_write(a("CDP_RDMA.S_POINTER"), g)
            await h.reg_write(a("CDP.S_POINTER"), g)
            await h.reg_write(a("CDP_RDMA.D_OP_ENABLE"), 1)
            await h.reg_write(a("CDP.D_OP_ENABLE"), 1)
        seen = 0
        st = REGMAP.lookup("GLB.S_INTR_STATUS").reg
        mask = sum(1 << st.field(f"CDP_DONE_STATUS{g}").lsb for g in range(2))
        for _ in range(4000):
            await h.tick()
            seen |= await h.reg_read(a("GLB.S_INTR_STATUS"))
            if seen & mask == mask:
                break
        res["done"] = seen & mask == mask
        stats = []
        for g in range(2):
            await h.reg_write(a("CDP.S_POINTER"), g)
            stats.append([await h.reg_read(a(f"CDP.D_PERF_LUT_{k}"))
                          for k in ("UFLOW", "OFLOW", "HYBRID", "LE_HIT", "LO_HIT")])
        res["stats"] = stats

    mem = simulate(cfg, bench).mem
    assert res["done"]
    d = np.frombuffer(src, np.int8).astype(np.int64).reshape(S, H, W, A)
    d = d.transpose(0, 3, 1, 2).reshape(S * A, H, W)
    for g, gp in enumerate(groups):
        out, stats = cdp_compute(d, C, np.array(le), np.array(lo), p, gp["normalz"], False,
                                 False, (0, 1, 0), (0, 1, gp["datout_shift"]))
        want = (out.reshape(S, A, H, W).transpose(0, 2, 3, 1) & 0xFF).astype(np.uint8).tobytes()
        assert mem.read_bytes(DST[g], len(src)) == want
        assert res["stats"][g] == [stats[k] for k in ("UFLOW", "OFLOW", "HYBRID", "LE_HIT",
                                                       "LO_HIT")]
    assert sum(sum(s) for s in res["stats"]) == 2 * S * A * H * W


@pytest.mark.parametrize("seed, dma_en", [(1, (1, 0)), (2, (0, 1))])
def test_perf_write_stall_per_group(seed, dma_en):
    """D_PERF_WRITE_STALL (hdl/cdp/__init__.py; nv_small NV_NVDLA_CDP_wdma.v): the cycles in
    which the WDMA's request or data beat to MCIF waited, counted while D_PERF_ENABLE.DMA_EN of
    the running group is set, cumulative over layers, copied per group, read through the CSB
    producer group; the CDP unit alone against the fake MCIF of tests/hdl/test_pdp_perf.py,
    which counts the stalls itself."""
    from hdl.cdp import Cdp
    from test_pdp_perf import run_unit
    from verif.mem import SparseMemory
    cfg = NV_SMALL
    A = cfg.memory_atomic
    S = -(-C // A)
    line, surf = W * A, W * H * A
    rng = random.Random(seed)
    mem = SparseMemory(cfg.mem_address_width)
    mem.write(SRC, bytes(rng.randrange(256) for _ in range(surf * S)))
    program = []
    for g in range(2):
        program += [("CDP_RDMA", "S_POINTER", g), ("CDP", "S_POINTER", g),
                    ("CDP_RDMA", "D_DATA_CUBE_WIDTH", W - 1), ("CDP_RDMA", "D_DATA_CUBE_HEIGHT", H - 1),
                    ("CDP_RDMA", "D_DATA_CUBE_CHANNEL", C - 1), ("CDP_RDMA", "D_SRC_BASE_ADDR_LOW", SRC),
                    ("CDP_RDMA", "D_SRC_LINE_STRIDE", line), ("CDP_RDMA", "D_SRC_SURFACE_STRIDE", surf),
                    ("CDP", "D_DST_BASE_ADDR_LOW", DST[g]), ("CDP", "D_DST_LINE_STRIDE", line),
                    ("CDP", "D_DST_SURFACE_STRIDE", surf), ("CDP", "D_DATIN_SCALE", 1),
                    ("CDP", "D_DATOUT_SCALE", 1), ("CDP", "D_PERF_ENABLE", dma_en[g])]
    for g in range(2):
        program += [("CDP_RDMA", "S_POINTER", g), ("CDP", "S_POINTER", g),
                    ("CDP_RDMA", "D_OP_ENABLE", 1), ("CDP", "D_OP_ENABLE", 1)]
    reads = [("CDP", "S_POINTER", 0), ("CDP", "D_PERF_WRITE_STALL"),
             ("CDP", "S_POINTER", 1), ("CDP", "D_PERF_WRITE_STALL")]
    stalls, got = run_unit(Cdp(cfg), program, mem=mem, layers=2, reads=reads, seed=seed)
    assert all(s > 0 for s in stalls)
    # cumulative, never cleared (tests/hdl/test_wdma_perf.py): the second group shows the first
    # layer's count plus its own
    assert got == [stalls[0] * dma_en[0], stalls[0] * dma_en[0] + stalls[1] * dma_en[1]]
