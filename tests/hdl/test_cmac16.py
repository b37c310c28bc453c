# amaranth: UnusedElaboratable=no
"""CMAC INT8/INT16 engine of 16-bit configurations (hdl/cmac/mac16.py, docs/conv16.md "CMAC"):
exact sums against plain-Python formulas, in both precisions, with random stalls on both sides,
garbage high bytes in INT8, the extremes, and one op per cycle at full rate, on geometries A
(nv_full int8_int16_fp16: atomic C 64, K 32, one CMAC half of 8 cells) and B (nv_small
int8_int16_fp16: atomic C 8, K 8) and tiny ones."""
from __future__ import annotations

import functools
import random
import sys

import pytest

from hdl.cmac import Cmac16Int, cmac16_int_latency
from hdl.cmac.layouts import PREC_INT8, PREC_INT16, cell_layout, psum16_layout
from hdl.config import get_config
from streams import simulate_streams, stream_get, stream_put

GEOMETRY_A = ("nv_full+winograd=False+batch=False+weight_compression=False"
              "+feature_data_type=int8_int16_fp16")
GEOMETRY_B = "nv_small+feature_data_type=int8_int16_fp16"

# Amaranth's Python simulator writes each signal's mask as a decimal literal: geometry A's op
# (16 x 64 16-bit weight lanes) needs more than Python's default 4,300 digits
sys.set_int_max_str_digits(0)


@functools.cache
def _geometry(spec):
    cfg = get_config(spec)
    assert cfg.conv16
    return cfg.mac_atomic_c, cfg.mac_atomic_k


def _s(v, bits):
    """The signed value of the ``bits``-bit pattern ``v``."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _random_op(rng, atomic_c, atomic_k, stripe_max, prec, *, extreme=False):
    """An op of raw 16-bit lanes; in INT8 the high byte of every data lane is garbage."""
    if prec == PREC_INT16:
        vals = [-32768, 32767, -32768, -1, 0, 1] if extreme else None
        pick = (lambda: rng.choice(vals) & 0xffff) if extreme else (lambda: rng.randrange(1 << 16))
        data = [pick() for _ in range(atomic_c)]
        wt = [[pick() for _ in range(atomic_c)] for _ in range(atomic_k // 2)]
    else:
        vals = [-128, 127, -128, -1, 0, 1]
        byte = (lambda: rng.choice(vals) & 0xff) if extreme else (lambda: rng.randrange(256))
        data = [byte() | rng.randrange(256) << 8 for _ in range(atomic_c)]      # garbage 15:8
        wt = [[byte() | byte() << 8 for _ in range(atomic_c)] for _ in range(atomic_k // 2)]
    return {"data": data, "wt": wt, "n": rng.randrange(atomic_c + 1),
            "pos": rng.randrange(stripe_max), "first": rng.randrange(2),
            "last": rng.randrange(2)}


def _expected(op, prec, first_cell, cells, atomic_c, stripe_max):
    """The psum atom as a ``psum16_layout`` constant (plain-Python sums)."""
    words = []
    for k in range(cells):
        w = op["wt"][first_cell + k]
        if prec == PREC_INT16:
            words.append({"i16": sum(_s(d, 16) * _s(x, 16) for d, x in zip(op["data"], w))})
        else:
            lo = sum(_s(d, 8) * _s(x, 8) for d, x in zip(op["data"], w))
            hi = sum(_s(d, 8) * _s(x >> 8, 8) for d, x in zip(op["data"], w))
            words.append({"i8": [lo, hi]})
    return psum16_layout(atomic_c, cells, stripe_max).const(
        {"sum": words, "pos": op["pos"], "first": op["first"], "last": op["last"]})


def _run(dut, prec, ops, *, seed, p_in, p_out, timestamps=None):
    rng_in, rng_out = random.Random(seed), random.Random(seed + 1)
    got = []

    async def producer(ctx):
        ctx.set(dut.prec, prec)
        await stream_put(ctx, dut.op, ops, rng=rng_in, p_stall=p_in)

    async def consumer(ctx):
        got.extend(await stream_get(ctx, dut.psum, len(ops), rng=rng_out, p_stall=p_out,
                                    timestamps=timestamps))

    simulate_streams(dut, [producer], [consumer], [("op", dut.op), ("psum", dut.psum)])
    return got


def _extreme_ops(atomic_c, atomic_k, stripe_max, prec):
    """Every product at its largest and at its smallest value."""
    if prec == PREC_INT16:
        lo, hi = 0x8000, 0x7fff                       # -32768, 32767
    else:
        lo, hi = 0x8080, 0x7f7f                       # -128 in both bytes, 127 in both
    cells = atomic_k // 2
    return [
        {"data": [lo] * atomic_c, "wt": [[lo] * atomic_c] * cells, "n": atomic_c,
         "pos": stripe_max - 1, "first": 1, "last": 1},
        {"data": [lo] * atomic_c, "wt": [[hi] * atomic_c] * cells, "n": atomic_c,
         "pos": 0, "first": 0, "last": 1},
        {"data": [hi] * atomic_c, "wt": [[hi] * atomic_c] * cells, "n": 0,
         "pos": 0, "first": 1, "last": 0},
    ]


def _check(dut, prec, ops, got, first_cell, cells, atomic_c, stripe_max):
    assert len(got) == len(ops)
    for i, (g, op) in enumerate(zip(got, ops)):
        e = _expected(op, prec, first_cell, cells, atomic_c, stripe_max)
        assert g == e, f"op {i}: got {g}, expected {e}"


@pytest.mark.parametrize("prec", [PREC_INT8, PREC_INT16])
@pytest.mark.parametrize("atomic_c,atomic_k,cells,first_cell,stripe_max", [
    ("B", "B", 2, 0, 16),     # geometry B, CMAC_A (cells 0, 1)
    ("B", "B", 2, 2, 16),     # geometry B, CMAC_B (cells 2, 3)
    (2, 4, 2, 0, 3),          # tiny: the whole op in one instance
    (2, 2, 1, 0, 1),          # tiny: one cell, one position
    (1, 2, 1, 0, 2),          # one lane: no adder tree, the combine level only
])
def test_cmac16_random_ops_with_stalls(prec, atomic_c, atomic_k, cells, first_cell, stripe_max):
    if atomic_c == "B":
        atomic_c, atomic_k = _geometry(GEOMETRY_B)
        assert (atomic_c, atomic_k) == (8, 8)
    rng = random.Random(atomic_c * 100 + first_cell * 10 + prec)
    ops = [_random_op(rng, atomic_c, atomic_k, stripe_max, prec, extreme=i % 3 == 0)
           for i in range(120)]
    ops += _extreme_ops(atomic_c, atomic_k, stripe_max, prec)
    dut = Cmac16Int(atomic_c, cells, stripe_max, first_cell, atomic_k=atomic_k)
    got = _run(dut, prec, ops, seed=7 + prec, p_in=0.3, p_out=0.4)
    _check(dut, prec, ops, got, first_cell, cells, atomic_c, stripe_max)
    # the extremes reach the word's range: C * 2**30 needs all 32 + log2(C) bits of i16
    big = _expected(ops[-3], prec, first_cell, cells, atomic_c, stripe_max).sum[0]
    if prec == PREC_INT16:
        assert big.i16 == atomic_c << 30
    else:
        assert list(big.i8) == [atomic_c << 14] * 2


@pytest.mark.parametrize("first_cell", [0, 8])
def test_cmac16_geometry_a_half(first_cell):
    """Geometry A, one CMAC half (8 cells of 64 lanes; elaborating it costs ~10 s, so one DUT
    runs three layers): INT16 at full rate (one psum per cycle after the latency), then INT8
    and INT16 with random stalls; the precision changes between layers (pipeline drained)."""
    atomic_c, atomic_k = _geometry(GEOMETRY_A)
    assert (atomic_c, atomic_k) == (64, 32)
    cells, sm = atomic_k // 4, 32
    dut = Cmac16Int(atomic_c, cells, sm, first_cell, atomic_k=atomic_k)
    rng = random.Random(first_cell)
    layers = []                                   # (prec, ops, p_stall)
    for prec, n_ops, p in ((PREC_INT16, 8, 0), (PREC_INT8, 4, 0.3), (PREC_INT16, 4, 0.3)):
        ops = [_random_op(rng, atomic_c, atomic_k, sm, prec, extreme=i == 1)
               for i in range(n_ops)]
        ops += _extreme_ops(atomic_c, atomic_k, sm, prec)[:2]
        layers.append((prec, ops, p))
    got = [[] for _ in layers]
    ts = []

    async def producer(ctx):
        for i, (prec, ops, p) in enumerate(layers):
            ctx.set(dut.prec, prec)
            await stream_put(ctx, dut.op, ops, rng=random.Random(i), p_stall=p)
            while len(got[i]) < len(ops):         # drain before the next layer
                await ctx.tick()

    async def consumer(ctx):
        for i, (prec, ops, p) in enumerate(layers):
            got[i].extend(await stream_get(ctx, dut.psum, len(ops), rng=random.Random(10 + i),
                                           p_stall=p, timestamps=ts if i == 0 else None))

    simulate_streams(dut, [producer], [consumer], [("op", dut.op), ("psum", dut.psum)])
    for (prec, ops, _), g in zip(layers, got):
        _check(dut, prec, ops, g, first_cell, cells, atomic_c, sm)
    assert ts == list(range(dut.latency, dut.latency + len(layers[0][1])))  # 1 op per cycle
    assert dut.latency == 5


def test_cmac16_one_op_per_cycle():
    """Geometry B at full rate: one psum per cycle, no bubble, after cmac16_int_latency
    cycles (the producer's first op is on the port before edge 0)."""
    atomic_c, atomic_k = _geometry(GEOMETRY_B)
    rng = random.Random(3)
    for prec in (PREC_INT8, PREC_INT16):
        ops = [_random_op(rng, atomic_c, atomic_k, 16, prec) for _ in range(64)]
        dut = Cmac16Int(atomic_c, 2, 16, 0, atomic_k=atomic_k)
        ts = []
        got = _run(dut, prec, ops, seed=1, p_in=0, p_out=0, timestamps=ts)
        _check(dut, prec, ops, got, 0, 2, atomic_c, 16)
        assert ts == list(range(dut.latency, dut.latency + len(ops)))
        assert dut.latency == cmac16_int_latency(atomic_c) == 3
    assert cmac16_int_latency(64) == 5 and cmac16_int_latency(2) == 2
    assert cmac16_int_latency(64, 1) == 8 and cmac16_int_latency(1) == 2


@pytest.mark.parametrize("levels_per_stage", [1, 3])
def test_cmac16_levels_per_stage(levels_per_stage):
    atomic_c, atomic_k = _geometry(GEOMETRY_B)
    rng = random.Random(levels_per_stage)
    for prec in (PREC_INT8, PREC_INT16):
        ops = [_random_op(rng, atomic_c, atomic_k, 4, prec, extreme=i % 2 == 0)
               for i in range(40)]
        dut = Cmac16Int(atomic_c, 4, 4, 0, atomic_k=atomic_k, levels_per_stage=levels_per_stage)
        ts = []
        got = _run(dut, prec, ops, seed=5, p_in=0, p_out=0, timestamps=ts)
        _check(dut, prec, ops, got, 0, 4, atomic_c, 4)
        assert ts[0] == dut.latency == {1: 5, 3: 3}[levels_per_stage]
        assert ts[-1] - ts[0] == len(ops) - 1


def test_cmac16_rejects_bad_sizes():
    with pytest.raises(ValueError):
        Cmac16Int(6, 2, 16, atomic_k=8)                 # atomic_c not a power of two
    with pytest.raises(ValueError):
        Cmac16Int(8, 2, 16, 3, atomic_k=8)              # cells 3..4 of 4
    with pytest.raises(ValueError):
        Cmac16Int(8, 2, 16, atomic_k=7)
    with pytest.raises(ValueError):
        Cmac16Int(8, 2, 16, atomic_k=8, levels_per_stage=0)
    # cell words: two 22-bit int8 sums or one 38-bit int16 sum at atomic_c 64
    assert cell_layout(64).size >= 44
