"""Two SDP layers queued in both ping-pong register groups run back to back (v1_hwarch.rst
"Ping-pong synchronization"), each raising its own SDP_DONE_STATUS<g>; exercises the converter
with a non-trivial scale/shift on the full path."""
import numpy as np
from amaranth.sim import Simulator

from hdl.config import NV_SMALL
from hdl.regmap import REGMAP
from hdl.top import NvdlaCore
from hdl_harness import Harness, Memory
from verif.model.sdp import output_convert   # the independent numpy model is the reference

SRC, DST0, DST1 = 0x8000_0000, 0x9000_0000, 0x9100_0000
W, H, C = 3, 2, 12          # two surfaces, the last one partial (4 of 8 channels)


def a(name):
    return REGMAP.lookup(name).addr


def test_two_groups_back_to_back():
    cfg = NV_SMALL
    atom = cfg.atom_bytes
    line, surf = W * atom, W * H * atom
    surfaces = -(-C // cfg.memory_atomic)
    mem = Memory()
    src = bytes((i * 37 + 11) & 0xFF for i in range(surf * surfaces))
    mem.write(SRC, src)
    dut = NvdlaCore(cfg)
    h = Harness(dut, mem)
    groups = [(DST0, 0, 1, 0), (DST1, -20, 3, 2)]      # (dst, cvt offset, scale, shift)
    result = {}

    async def bench(ctx):
        for g, (dst, off, scale, shift) in enumerate(groups):
            await h.csb_write(ctx, a("SDP_RDMA.S_POINTER"), g)
            await h.csb_write(ctx, a("SDP.S_POINTER"), g)
            for unit in ("SDP_RDMA", "SDP"):
                await h.csb_write(ctx, a(f"{unit}.D_DATA_CUBE_WIDTH"), W - 1)
                await h.csb_write(ctx, a(f"{unit}.D_DATA_CUBE_HEIGHT"), H - 1)
                await h.csb_write(ctx, a(f"{unit}.D_DATA_CUBE_CHANNEL"), C - 1)
            await h.csb_write(ctx, a("SDP_RDMA.D_SRC_BASE_ADDR_LOW"), SRC)
            await h.csb_write(ctx, a("SDP_RDMA.D_SRC_LINE_STRIDE"), line)
            await h.csb_write(ctx, a("SDP_RDMA.D_SRC_SURFACE_STRIDE"), surf)
            await h.csb_write(ctx, a("SDP.D_DST_BASE_ADDR_LOW"), dst)
            await h.csb_write(ctx, a("SDP.D_DST_LINE_STRIDE"), line)
            await h.csb_write(ctx, a("SDP.D_DST_SURFACE_STRIDE"), surf)
            await h.csb_write(ctx, a("SDP.D_CVT_OFFSET"), off & 0xFFFFFFFF)
            await h.csb_write(ctx, a("SDP.D_CVT_SCALE"), scale)
            await h.csb_write(ctx, a("SDP.D_CVT_SHIFT"), shift)
        for g in range(2):
            await h.csb_write(ctx, a("SDP_RDMA.S_POINTER"), g)
            await h.csb_write(ctx, a("SDP.S_POINTER"), g)
            await h.csb_write(ctx, a("SDP_RDMA.D_OP_ENABLE"), 1)
            await h.csb_write(ctx, a("SDP.D_OP_ENABLE"), 1)
        seen = 0
        for _ in range(2000):
            await h.step(ctx)
            seen |= await h.csb_read(ctx, a("GLB.S_INTR_STATUS"))
            if seen & 3 == 3:
                break
        result["status"] = seen
        result["sdp_status"] = await h.csb_read(ctx, a("SDP.S_STATUS"))
        result["pointer"] = await h.csb_read(ctx, a("SDP.S_POINTER"))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()

    assert result["status"] & 3 == 3
    assert result["sdp_status"] == 0                  # both groups idle again
    assert result["pointer"] >> 16 == 0               # consumer back at group 0
    for dst, off, scale, shift in groups:
        want = (output_convert(np.frombuffer(bytes(src), np.int8).astype(np.int64), off, scale, shift) & 0xFF).astype(np.uint8).tobytes()
        assert mem.read(dst, len(src)) == want
