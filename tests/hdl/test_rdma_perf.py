"""PDP_RDMA and CDP_RDMA D_PERF_READ_STALL (hdl/pdp/__init__.py, hdl/cdp/__init__.py; NVIDIA's
meaning from nv_small NV_NVDLA_PDP_RDMA_ig.v / NV_NVDLA_CDP_RDMA_ig.v): the cycles in which the
read DMA's request to MCIF was valid and not accepted, counted only while D_PERF_ENABLE.DMA_EN of
the RDMA's running group is set, on one 32-bit counter that no layer clears (cumulative from
reset), copied into the register group that ran at the end of its layer and read through the
RDMA's CSB producer group (S_POINTER.PRODUCER).

Each unit runs alone in Amaranth's simulator against the fake MCIF of tests/hdl/test_pdp_perf.py
(random ready on every stream), which counts the stalled read-request cycles per layer itself;
two layers are queued in both ping-pong groups with DMA_EN on in one, the other or both, so
that the second group shows the first layer's count plus its own (nothing cleared it).
"""
from __future__ import annotations

import random

import pytest

from hdl.cdp import Cdp
from hdl.config import NV_SMALL
from hdl.pdp import Pdp
from test_pdp_perf import SRC, C, H, W, _pdp_program, run_unit
from verif.mem import SparseMemory

A = NV_SMALL.memory_atomic
S = -(-C // A)
CDP_DST = (0x8030_0000, 0x8040_0000)


def _want(read_stalls, dma_en):
    """Group g's D_PERF_READ_STALL after the two layers: the cumulative count up to its layer."""
    total, out = 0, []
    for s, en in zip(read_stalls, dma_en):
        total += s if en else 0
        out.append(total & 0xFFFF_FFFF)
    return out


def _kick(rdma: str, unit: str):
    return [x for g in range(2) for x in ((rdma, "S_POINTER", g), (unit, "S_POINTER", g),
                                          (rdma, "D_OP_ENABLE", 1), (unit, "D_OP_ENABLE", 1))]


def _reads(rdma: str):
    return [(rdma, "S_POINTER", 0), (rdma, "D_PERF_READ_STALL"),
            (rdma, "S_POINTER", 1), (rdma, "D_PERF_READ_STALL")]


def _mem(seed):
    rng = random.Random(seed)
    mem = SparseMemory(NV_SMALL.mem_address_width)
    mem.write(SRC, bytes(rng.randrange(256) for _ in range(W * H * A * S)))
    return mem


@pytest.mark.parametrize("seed, dma_en", [(1, (1, 0)), (2, (0, 1)), (3, (1, 1))])
def test_pdp_read_stall_per_group(seed, dma_en):
    program = []
    for g in range(2):
        # PDP's DMA_EN off: only PDP_RDMA's enables the read-stall counter
        program += _pdp_program(g, 0) + [("PDP_RDMA", "D_PERF_ENABLE", dma_en[g])]
    program += _kick("PDP_RDMA", "PDP")
    rd = []
    _, got = run_unit(Pdp(NV_SMALL), program, mem=_mem(seed), layers=2,
                      reads=_reads("PDP_RDMA") + [("PDP", "D_PERF_WRITE_STALL")],
                      seed=seed, read_stalls=rd)
    assert all(s > 0 for s in rd)                     # random ready: the RDMA did wait
    assert got[:2] == _want(rd, dma_en)
    assert got[2] == 0                                 # PDP's own DMA_EN was off


def _cdp_program(g, dma_en):
    """LRN layer of group ``g`` (identity converters) of the W x H x C cube at SRC to CDP_DST[g];
    CDP_RDMA's D_PERF_ENABLE = ``dma_en``, CDP's off."""
    line, surf = W * A, W * H * A
    return [("CDP_RDMA", "S_POINTER", g), ("CDP", "S_POINTER", g),
            ("CDP_RDMA", "D_DATA_CUBE_WIDTH", W - 1), ("CDP_RDMA", "D_DATA_CUBE_HEIGHT", H - 1),
            ("CDP_RDMA", "D_DATA_CUBE_CHANNEL", C - 1), ("CDP_RDMA", "D_SRC_BASE_ADDR_LOW", SRC),
            ("CDP_RDMA", "D_SRC_LINE_STRIDE", line), ("CDP_RDMA", "D_SRC_SURFACE_STRIDE", surf),
            ("CDP_RDMA", "D_PERF_ENABLE", dma_en),
            ("CDP", "D_DST_BASE_ADDR_LOW", CDP_DST[g]), ("CDP", "D_DST_LINE_STRIDE", line),
            ("CDP", "D_DST_SURFACE_STRIDE", surf), ("CDP", "D_DATIN_SCALE", 1),
            ("CDP", "D_DATOUT_SCALE", 1), ("CDP", "D_PERF_ENABLE", 0)]


@pytest.mark.parametrize("seed, dma_en", [(4, (1, 0)), (5, (1, 1))])
def test_cdp_read_stall_per_group(seed, dma_en):
    program = _cdp_program(0, dma_en[0]) + _cdp_program(1, dma_en[1]) + _kick("CDP_RDMA", "CDP")
    rd = []
    _, got = run_unit(Cdp(NV_SMALL), program, mem=_mem(seed), layers=2,
                      reads=_reads("CDP_RDMA") + [("CDP", "D_PERF_WRITE_STALL")],
                      seed=seed, read_stalls=rd)
    assert all(s > 0 for s in rd)
    assert got[:2] == _want(rd, dma_en)
    assert got[2] == 0
