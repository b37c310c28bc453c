"""SDP D_PERF_* registers on NvdlaCore (Amaranth simulator, nv_small, random memory timing):
D_PERF_OUT_SATURATION counts the converter outputs whose 17-bit intermediate saturated
(plain-Python formula over every lane the layer writes), D_PERF_WDMA_WRITE_STALL counts cycles
in which MCIF did not take the WDMA's request or beat (> 0 under random stalls); both only
while their D_PERF_ENABLE bit is set (otherwise the live counters hold their value), and each
register group shows the value of its own last layer (NV_NVDLA_SDP_reg.v: a group's copy is
loaded when its layer completes and cleared when its OP_EN is set)."""
import random

from hdl.config import NV_SMALL
from hdl.regmap import REGMAP
from verif.axi_slave import MemTiming
from verif.trace.amaranth_engine import simulate

SRC, DST = 0x8000_0000, 0x9000_0000
W, H, C = 3, 2, 12
SAT, WST, DMA_EN, SAT_EN = "SDP.D_PERF_OUT_SATURATION", "SDP.D_PERF_WDMA_WRITE_STALL", 1, 4


def a(reg):
    return REGMAP.lookup(reg).addr


def rnd(v, s):
    if s == 0:
        return v
    q = (abs(v) + (1 << (s - 1))) >> s
    return q if v >= 0 else -q


def test_perf_saturation_and_stall():
    rng = random.Random(5)
    atom = NV_SMALL.memory_atomic
    surfaces = -(-C // atom)
    line, surf = W * atom, W * H * atom
    src = bytes(rng.randrange(256) for _ in range(surf * surfaces))
    off, scale, shift = -3, 0x7fff, 4
    # every lane of every atom passes the converter (the last surface's padding lanes too)
    want_sat = sum(not -(1 << 16) <= rnd((b - 256 * (b > 127) - off) * scale, shift) < (1 << 16)
                   for b in src)
    assert 0 < want_sat < len(src)
    regs = [("SDP_RDMA.D_FEATURE_MODE_CFG", 0), ("SDP.D_FEATURE_MODE_CFG", 0),
            ("SDP.D_DATA_FORMAT", 0), ("SDP.D_DP_BS_CFG", 1), ("SDP.D_DP_BN_CFG", 1),
            ("SDP_RDMA.D_BRDMA_CFG", 1), ("SDP_RDMA.D_NRDMA_CFG", 1)]
    for unit in ("SDP_RDMA", "SDP"):
        regs += [(f"{unit}.D_DATA_CUBE_WIDTH", W - 1), (f"{unit}.D_DATA_CUBE_HEIGHT", H - 1),
                 (f"{unit}.D_DATA_CUBE_CHANNEL", C - 1)]
    regs += [("SDP_RDMA.D_SRC_BASE_ADDR_LOW", SRC), ("SDP_RDMA.D_SRC_LINE_STRIDE", line),
             ("SDP_RDMA.D_SRC_SURFACE_STRIDE", surf), ("SDP.D_DST_BASE_ADDR_LOW", DST),
             ("SDP.D_DST_LINE_STRIDE", line), ("SDP.D_DST_SURFACE_STRIDE", surf),
             ("SDP.D_CVT_OFFSET", off & 0xFFFFFFFF), ("SDP.D_CVT_SCALE", scale),
             ("SDP.D_CVT_SHIFT", shift)]
    out = {}

    async def layer(h, group, perf_enable, tag):
        for unit in ("SDP_RDMA", "SDP"):
            await h.reg_write(a(f"{unit}.S_POINTER"), group)
        for reg, v in regs:
            await h.reg_write(a(reg), v)
        await h.reg_write(a("SDP.D_PERF_ENABLE"), perf_enable)
        await h.reg_write(a("SDP_RDMA.D_OP_ENABLE"), 1)
        await h.reg_write(a("SDP.D_OP_ENABLE"), 1)
        out[f"{tag}_cleared"] = [await h.reg_read(a(r)) for r in (SAT, WST)]
        for _ in range(20000):
            await h.tick()
            status = await h.reg_read(a("GLB.S_INTR_STATUS"))
            if status:
                await h.reg_write(a("GLB.S_INTR_STATUS"), status)
                break
        out[tag] = [await h.reg_read(a(r)) for r in (SAT, WST)]

    async def bench(h):
        await h.mem_write(SRC, src)
        await layer(h, 0, SAT_EN | DMA_EN, "g0")       # counts
        await layer(h, 1, 0, "g1")                      # counting off: the counters hold
        await layer(h, 0, SAT_EN, "g0_sat_only")        # saturation counted, stall held
        for unit in ("SDP_RDMA", "SDP"):
            await h.reg_write(a(f"{unit}.S_POINTER"), 1)
        out["g1_again"] = [await h.reg_read(a(r)) for r in (SAT, WST)]

    simulate(NV_SMALL, bench, timing=MemTiming.named("random", seed=2))
    sat0, stall0 = out["g0"]
    assert sat0 == want_sat
    assert stall0 > 0
    assert out["g0_cleared"] == [0, 0]          # setting OP_EN cleared the group's copy
    assert out["g1"] == [sat0, stall0]          # held live counters, loaded at completion
    assert out["g0_sat_only"] == [want_sat, stall0]
    assert out["g1_again"] == [sat0, stall0]
