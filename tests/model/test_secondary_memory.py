"""The model's two memories (issue 30 item 4): every DMA engine reads and writes the memory its
``*_RAM_TYPE`` field names (CV = 0: the secondary memory behind CVIF, MC = 1: the primary one) on
a configuration with the secondary memory interface, and ignores the field without it (NVIDIA's
nv_small); the trace engines map ``sec_mem`` to it and refuse it on a configuration without."""
from __future__ import annotations

import asyncio

import numpy as np
import pytest

from hdl.config import NV_SMALL, get_config
from verif.model import Nvdla
from verif.trace.model_engine import ModelEngine
from verif.trace.player import TraceFailure

SRC, DST = 0x8000_0000, 0x8010_0000


def _pdp_passthrough(dla, src_ram: int, dst_ram: int, atom: int) -> None:
    """A 4 x 2 x atom PDP layer, 1 x 1 max pooling (a copy), off the fly."""
    w = dla.write
    for unit in ("PDP_RDMA", "PDP"):
        w(f"NVDLA_{unit}.S_POINTER_0", 0)
    for unit in ("PDP_RDMA", "PDP"):
        w(f"NVDLA_{unit}.D_DATA_CUBE_IN_WIDTH_0", 3)
        w(f"NVDLA_{unit}.D_DATA_CUBE_IN_HEIGHT_0", 1)
        w(f"NVDLA_{unit}.D_DATA_CUBE_IN_CHANNEL_0", atom - 1)
    w("NVDLA_PDP.D_DATA_CUBE_OUT_WIDTH_0", 3)
    w("NVDLA_PDP.D_DATA_CUBE_OUT_HEIGHT_0", 1)
    w("NVDLA_PDP.D_DATA_CUBE_OUT_CHANNEL_0", atom - 1)
    w("NVDLA_PDP_RDMA.D_SRC_BASE_ADDR_LOW_0", SRC)
    w("NVDLA_PDP_RDMA.D_SRC_LINE_STRIDE_0", 4 * atom)
    w("NVDLA_PDP_RDMA.D_SRC_SURFACE_STRIDE_0", 8 * atom)
    w("NVDLA_PDP_RDMA.D_SRC_RAM_CFG_0", src_ram)
    w("NVDLA_PDP_RDMA.D_FLYING_MODE_0", 1)                # off the fly
    w("NVDLA_PDP.D_OPERATION_MODE_CFG_0", 0x11)          # max pooling, off the fly
    w("NVDLA_PDP.D_DST_BASE_ADDR_LOW_0", DST)
    w("NVDLA_PDP.D_DST_LINE_STRIDE_0", 4 * atom)
    w("NVDLA_PDP.D_DST_SURFACE_STRIDE_0", 8 * atom)
    w("NVDLA_PDP.D_DST_RAM_CFG_0", dst_ram)
    w("NVDLA_PDP_RDMA.D_OP_ENABLE_0", 1)
    w("NVDLA_PDP.D_OP_ENABLE_0", 1)
    assert dla.intr


@pytest.mark.parametrize("src_ram,dst_ram", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_ram_type_picks_the_memory(src_ram, dst_ram):
    cfg = get_config("nv_small_256_full")
    atom = cfg.memory_atomic
    dla = Nvdla(cfg)
    n = 8 * atom
    pri = np.arange(n, dtype=np.uint8)
    sec = (np.arange(n, dtype=np.uint8) * 7 + 3).astype(np.uint8)
    dla.mem.write(SRC, pri)
    dla.cv_mem.write(SRC, sec)
    _pdp_passthrough(dla, src_ram, dst_ram, atom)
    src = sec if src_ram == 0 else pri
    written, untouched = (dla.cv_mem, dla.mem) if dst_ram == 0 else (dla.mem, dla.cv_mem)
    assert np.array_equal(written.read(DST, n), src)
    assert not untouched.read(DST, n).any()


def test_without_cvif_the_field_is_ignored():
    dla = Nvdla(NV_SMALL)
    assert dla.cv_mem is None
    n = 8 * NV_SMALL.memory_atomic
    data = np.arange(n, dtype=np.uint8)
    dla.mem.write(SRC, data)
    _pdp_passthrough(dla, 0, 0, NV_SMALL.memory_atomic)       # CV everywhere: MCIF anyway
    assert np.array_equal(dla.mem.read(DST, n), data)


def test_engine_memories():
    eng = ModelEngine(get_config("nv_small_256_full"))
    asyncio.run(eng.mem_write(0x100, b"\x01\x02", mem="sec_mem"))
    assert asyncio.run(eng.mem_read(0x100, 2, mem="sec_mem")) == b"\x01\x02"
    assert asyncio.run(eng.mem_read(0x100, 2)) == b"\x00\x00"
    with pytest.raises(TraceFailure, match="configuration nv_small has no secondary memory"):
        asyncio.run(ModelEngine(NV_SMALL).mem_write(0x100, b"\x01", mem="sec_mem"))
