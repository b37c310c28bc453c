"""PDP and CDP D_PERF_WRITE_STALL (hdl.unit.wdma_write_stall; NVIDIA's meaning from nv_small
NV_NVDLA_PDP_wdma.v / NV_NVDLA_CDP_wdma.v and the consumer-muxed DMA_EN of NV_NVDLA_PDP_reg.v /
NV_NVDLA_CDP_reg.v): the cycles in which the write DMA's request to MCIF (a burst command or a
data beat) was valid and not accepted, counted only while D_PERF_ENABLE.DMA_EN of the running
group is set, on one 32-bit counter that no layer clears (its clear at the last data beat only
acts in a stalled cycle, which that cycle never is), copied into the register group that ran at
the end of its layer and read through the CSB producer group (S_POINTER.PRODUCER).

Each unit runs alone in Amaranth's simulator against the fake MCIF of tests/hdl/test_pdp_perf.py
(random ready on every stream), which counts the stalled write cycles per layer itself; two
layers are queued in both ping-pong groups with DMA_EN on in one, the other or both. The
expectation is the rule in plain Python: group g shows the running total of the stalls of the
layers with DMA_EN on, up to and including its own layer (so with DMA_EN only in the first
layer, the second group shows the first layer's count: copied, never cleared).
"""
from __future__ import annotations

import random

import pytest

from hdl.cdp import Cdp
from hdl.config import NV_SMALL
from hdl.pdp import Pdp
from test_pdp_perf import SRC, C, H, W, _pdp_program, run_unit
from test_rdma_perf import _cdp_program
from verif.mem import SparseMemory

A = NV_SMALL.memory_atomic
S = -(-C // A)


def _want(stalls, dma_en):
    """Group g's D_PERF_WRITE_STALL after the layers (layer k in group k % 2): the 32-bit
    cumulative count of the stalled cycles of DMA_EN layers up to its last layer."""
    total, out = 0, [0, 0]
    for k, (s, en) in enumerate(zip(stalls, dma_en)):
        total = (total + (s if en else 0)) & 0xFFFF_FFFF
        out[k % 2] = total
    return out


def _kick(rdma: str, unit: str):
    return [x for g in range(2) for x in ((rdma, "S_POINTER", g), (unit, "S_POINTER", g),
                                          (rdma, "D_OP_ENABLE", 1), (unit, "D_OP_ENABLE", 1))]


def _reads(unit: str):
    return [(unit, "S_POINTER", 0), (unit, "D_PERF_WRITE_STALL"),
            (unit, "S_POINTER", 1), (unit, "D_PERF_WRITE_STALL")]


def _mem(seed):
    rng = random.Random(seed)
    mem = SparseMemory(NV_SMALL.mem_address_width)
    mem.write(SRC, bytes(rng.randrange(256) for _ in range(W * H * A * S)))
    return mem


def test_want_rule():
    """The plain-Python rule itself: cumulative, DMA_EN-gated, 32-bit wrapping."""
    assert _want([5, 7], (1, 0)) == [5, 5]
    assert _want([5, 7], (0, 1)) == [0, 7]
    assert _want([5, 7], (1, 1)) == [5, 12]
    assert _want([0xFFFF_FFFF, 3], (1, 1)) == [0xFFFF_FFFF, 2]


@pytest.mark.parametrize("seed, dma_en", [(11, (1, 0)), (12, (0, 1)), (13, (1, 1))])
def test_pdp_write_stall_cumulative(seed, dma_en):
    program = []
    for g in range(2):
        # PDP_RDMA's DMA_EN stays off: only PDP's enables the write-stall counter
        program += _pdp_program(g, dma_en[g])
    program += _kick("PDP_RDMA", "PDP")
    stalls, got = run_unit(Pdp(NV_SMALL), program, mem=_mem(seed), layers=2,
                           reads=_reads("PDP") + [("PDP_RDMA", "D_PERF_READ_STALL")], seed=seed)
    assert all(s > 0 for s in stalls)                 # random ready: the WDMA did wait
    assert got[:2] == _want(stalls, dma_en)
    assert got[2] == 0                                 # PDP_RDMA's own DMA_EN was off


@pytest.mark.parametrize("seed, dma_en", [(14, (1, 0)), (15, (1, 1))])
def test_cdp_write_stall_cumulative(seed, dma_en):
    program = []
    for g in range(2):
        # CDP_RDMA's DMA_EN off, CDP's as drawn (the last write of _cdp_program is CDP's)
        program += _cdp_program(g, 0) + [("CDP", "D_PERF_ENABLE", dma_en[g])]
    program += _kick("CDP_RDMA", "CDP")
    stalls, got = run_unit(Cdp(NV_SMALL), program, mem=_mem(seed), layers=2,
                           reads=_reads("CDP") + [("CDP_RDMA", "D_PERF_READ_STALL")], seed=seed)
    assert all(s > 0 for s in stalls)
    assert got[:2] == _want(stalls, dma_en)
    assert got[2] == 0
