"""Two SDP layers queued in both ping-pong register groups run back to back (v1_hwarch.rst
"Ping-pong synchronization"), each raising its own SDP_DONE_STATUS<g>; exercises the converter
with a non-trivial scale/shift on the full path."""
import numpy as np

from hdl.config import NV_SMALL
from hdl.regmap import REGMAP
from verif.model.sdp import output_convert   # the independent numpy model is the reference
from verif.trace.amaranth_engine import simulate

SRC, DST0, DST1 = 0x8000_0000, 0x9000_0000, 0x9100_0000
W, H, C = 3, 2, 12          # two surfaces, the last one partial (4 of 8 channels)


def a(name):
    return REGMAP.lookup(name).addr


def test_two_groups_back_to_back():
    cfg = NV_SMALL
    atom = cfg.atom_bytes
    line, surf = W * atom, W * H * atom
    surfaces = -(-C // cfg.memory_atomic)
    src = bytes((i * 37 + 11) & 0xFF for i in range(surf * surfaces))
    groups = [(DST0, 0, 1, 0), (DST1, -20, 3, 2)]      # (dst, cvt offset, scale, shift)
    result = {}

    async def bench(h):
        await h.mem_write(SRC, src)
        for g, (dst, off, scale, shift) in enumerate(groups):
            await h.reg_write(a("SDP_RDMA.S_POINTER"), g)
            await h.reg_write(a("SDP.S_POINTER"), g)
            for unit in ("SDP_RDMA", "SDP"):
                await h.reg_write(a(f"{unit}.D_DATA_CUBE_WIDTH"), W - 1)
                await h.reg_write(a(f"{unit}.D_DATA_CUBE_HEIGHT"), H - 1)
                await h.reg_write(a(f"{unit}.D_DATA_CUBE_CHANNEL"), C - 1)
            await h.reg_write(a("SDP_RDMA.D_SRC_BASE_ADDR_LOW"), SRC)
            await h.reg_write(a("SDP_RDMA.D_SRC_LINE_STRIDE"), line)
            await h.reg_write(a("SDP_RDMA.D_SRC_SURFACE_STRIDE"), surf)
            await h.reg_write(a("SDP.D_DST_BASE_ADDR_LOW"), dst)
            await h.reg_write(a("SDP.D_DST_LINE_STRIDE"), line)
            await h.reg_write(a("SDP.D_DST_SURFACE_STRIDE"), surf)
            await h.reg_write(a("SDP.D_CVT_OFFSET"), off & 0xFFFFFFFF)
            await h.reg_write(a("SDP.D_CVT_SCALE"), scale)
            await h.reg_write(a("SDP.D_CVT_SHIFT"), shift)
        for g in range(2):
            await h.reg_write(a("SDP_RDMA.S_POINTER"), g)
            await h.reg_write(a("SDP.S_POINTER"), g)
            await h.reg_write(a("SDP_RDMA.D_OP_ENABLE"), 1)
            await h.reg_write(a("SDP.D_OP_ENABLE"), 1)
        seen = 0
        for _ in range(2000):
            await h.tick()
            seen |= await h.reg_read(a("GLB.S_INTR_STATUS"))
            if seen & 3 == 3:
                break
        result["status"] = seen
        result["sdp_status"] = await h.reg_read(a("SDP.S_STATUS"))
        result["pointer"] = await h.reg_read(a("SDP.S_POINTER"))

    mem = simulate(cfg, bench).mem

    assert result["status"] & 3 == 3
    assert result["sdp_status"] == 0                  # both groups idle again
    assert result["pointer"] >> 16 == 0               # consumer back at group 0
    for dst, off, scale, shift in groups:
        want = (output_convert(np.frombuffer(bytes(src), np.int8).astype(np.int64), off, scale, shift) & 0xFF).astype(np.uint8).tobytes()
        assert mem.read_bytes(dst, len(src)) == want
