# amaranth: UnusedElaboratable=no
"""CMAC FP16 engine of 16-bit configurations (hdl/cmac/fp16.py, docs/conv16.md "CMAC"): every
psum word (nan, nan_bits, T, S) against verif/model/conv_fp16.py ``cmac_words`` (bit-exact with
NVIDIA's RTL), on ops of ``verif.gen.common.fp16_values`` (zeros, +-0, denormals, infinities,
NaNs, large and small exponents) with random lane counts and random stalls on both sides; NaN
priority (weights before data, lowest lane first), NaNs and huge values in lanes >= n ignored,
all-zero and inactive ops, the largest sums, one op per cycle at full rate; geometries B
(nv_small int8_int16_fp16: atomic C 8, K 8, CMAC_A and CMAC_B), a tiny one and A (nv_full
int8_int16_fp16: atomic C 64, K 32, one CMAC half of 8 cells, a few ops). The Booth pair
building block against ``booth_product`` on a combinational simulation."""
from __future__ import annotations

import functools
import random
import sys

import numpy as np
import pytest
from amaranth.hdl import Cat, Module, Signal
from amaranth.sim import Simulator

from hdl.cmac.fp16 import PAIR_BITS, Cmac16Fp, booth_pairs
from hdl.cmac.layouts import psum16_layout
from hdl.config import get_config
from streams import simulate_streams, stream_get, stream_put
from verif.gen.common import FP16_SCALES, fp16_values
from verif.model.conv_fp16 import booth_product, cmac_words

GEOMETRY_A = ("nv_full+winograd=False+batch=False+weight_compression=False"
              "+feature_data_type=int8_int16_fp16")
GEOMETRY_B = "nv_small+feature_data_type=int8_int16_fp16"

# Amaranth's Python simulator writes each signal's mask as a decimal literal: geometry A's op
# needs more than Python's default 4,300 digits
sys.set_int_max_str_digits(0)

#: the largest product's operands: e = 27 (e & 3 = 3), f = 1023: mantissa 2047 << 3 = 16376
F16_MAXM = 0x6FFF
#: a NaN with the largest mantissa (it still multiplies: S and T count it)
F16_NAN_MAXM = 0x7FFF


@functools.cache
def _geometry(spec):
    cfg = get_config(spec)
    assert cfg.conv16
    return cfg.mac_atomic_c, cfg.mac_atomic_k


def _random_op(rng, atomic_c, atomic_k, stripe_max, kind="mixed"):
    """An op of fp16 lanes: ``mixed`` fp16_values operands (one scale per op for data and one
    for weights), ``sparse`` the same with many +-0 operands, ``wide`` any exponent."""
    cells = atomic_k // 2
    if kind == "wide":
        data = [rng.getrandbits(16) for _ in range(atomic_c)]
        wt = [[rng.getrandbits(16) for _ in range(atomic_c)] for _ in range(cells)]
    else:
        sw, sd = rng.choice(FP16_SCALES), rng.choice(FP16_SCALES)
        data = fp16_values(rng, atomic_c, sd)
        wt = [fp16_values(rng, atomic_c, sw) for _ in range(cells)]
    if kind == "sparse":
        data = [v if rng.random() < 0.5 else rng.choice((0, 0x8000)) for v in data]
        wt = [[v if rng.random() < 0.5 else rng.choice((0, 0x8000)) for v in row] for row in wt]
    n = atomic_c if rng.random() < 0.5 else rng.randrange(atomic_c + 1)
    return {"data": data, "wt": wt, "n": n, "pos": rng.randrange(stripe_max),
            "first": rng.randrange(2), "last": rng.randrange(2)}


def _words(op, first_cell, cells):
    """cmac_words' (nan, nan_bits, T, S) per cell of the op's first n lanes."""
    n = op["n"]
    if n == 0:                          # no operand: the model needs at least one lane
        return [(False, 0, 0, 0)] * cells
    w = np.array([op["wt"][first_cell + k][:n] for k in range(cells)], np.int64)
    d = np.array([op["data"][:n]], np.int64)
    nan, bits, t, s = cmac_words(w, d)
    return [(bool(nan[k, 0]), int(bits[k, 0]) if nan[k, 0] else 0, int(t[k, 0]), int(s[k, 0]))
            for k in range(cells)]


def _expected(op, first_cell, cells, atomic_c, stripe_max):
    """The psum atom as a ``psum16_layout`` constant (nan_bits 0 when not nan)."""
    sums = [{"fp": {"s": s, "t": t, "nan": int(nan), "nan_bits": bits}}
            for nan, bits, t, s in _words(op, first_cell, cells)]
    return psum16_layout(atomic_c, cells, stripe_max).const(
        {"sum": sums, "pos": op["pos"], "first": op["first"], "last": op["last"]})


def _run(dut, ops, *, seed, p_in, p_out, timestamps=None, then=()):
    """Stream ``ops`` through ``dut`` with stall probabilities ``p_in`` / ``p_out`` (transfer
    cycles of the psums into ``timestamps``), then each ``(ops, p_in, p_out)`` of ``then`` in
    the same simulation (one elaboration); returns all psums."""
    rng_in, rng_out = random.Random(seed), random.Random(seed + 1)
    phases = [(ops, p_in, p_out, timestamps)] + [(o, pi, po, None) for o, pi, po in then]
    got = []

    async def producer(ctx):
        for o, pi, _, _ in phases:
            await stream_put(ctx, dut.op, o, rng=rng_in, p_stall=pi)

    async def consumer(ctx):
        for o, _, po, ts in phases:
            got.extend(await stream_get(ctx, dut.psum, len(o), rng=rng_out, p_stall=po,
                                        timestamps=ts))

    simulate_streams(dut, [producer], [consumer], [("op", dut.op), ("psum", dut.psum)])
    return got


def _check(ops, got, first_cell, cells, atomic_c, stripe_max):
    assert len(got) == len(ops)
    for i, (g, op) in enumerate(zip(got, ops)):
        e = _expected(op, first_cell, cells, atomic_c, stripe_max)
        assert g == e, f"op {i} ({op}): got {g}, expected {e}"


def _special_ops(atomic_c, atomic_k, stripe_max):
    """Named ops: all-zero and inactive ones, the largest sums, NaN priority (``nan_w<k>``: NaN
    weights in cell k's lanes C/2 and C-1 beside NaN data in lanes 0 and C-1), lanes >= n, and
    lanes shifted by T - t = 7 and out (>= 8)."""
    c, cells = atomic_c, atomic_k // 2
    ops = {}

    def op(name, data, wt, n=c, pos=0):
        ops[name] = {"data": list(data), "wt": [list(r) for r in wt], "n": n,
                     "pos": pos % stripe_max, "first": 1, "last": 1}

    one = 0x3C00
    # all zero (+0 and -0), and everything inactive (non-zero weights, zero data and back)
    op("zero", [0] * c, [[0x8000] * c] * cells)
    op("zero_data", [0x8000] * c, [[0x7BFF] * c] * cells)
    op("zero_wt", [0x7C00] * c, [[0] * c] * cells)
    # the largest sums: every product 16376**2 (and negative), T = 12; infinities: T = 14
    op("max", [F16_MAXM] * c, [[F16_MAXM] * c] * cells)
    op("max_neg", [F16_MAXM | 0x8000] * c, [[F16_MAXM] * c] * cells)
    op("inf", [0x7C00] * c, [[0xFC00] * c] * cells)
    # NaN weights in two lanes of one cell, NaN data: the weight in the lowest lane wins
    for k in range(cells):
        wt = [[one] * c for _ in range(cells)]
        d = [one] * c
        d[0] = 0xFE01
        if c > 1:
            wt[k][c - 1] = 0x7D55
            d[c - 1] = 0x7C01
        wt[k][c // 2] = 0xFFFF
        op(f"nan_w{k}", d, wt, pos=k)
    # no NaN weight: the lowest NaN datum in every cell (a NaN datum against a zero weight too)
    d = [one] * c
    d[c - 1] = F16_NAN_MAXM
    if c > 1:
        d[c // 2] = 0xFC3F
    op("nan_d", d, [[0] * c] + [[one] * c] * (cells - 1))
    if c > 1:
        # NaNs and huge values past n: ignored (T from lanes < n only, NaN in lane n ignored)
        n = c // 2
        d = [one] * n + [0x7E00] + [0x7BFF] * (c - n - 1)
        wt = [[0x0001] * n + [0xFC01] + [0x7BFF] * (c - n - 1)] * cells
        op("past_n", d, wt, n=n)
        # n = 0: nothing counts at all
        op("n0", [0x7E00] * c, [[0x7BFF] * c] * cells, n=0)
        # tiny against huge: lane 1 at T - t = 7 (shifted by 28), then shifted out (14)
        wt = [[0x7BFF, 0x0001] + [0] * (c - 2)] * cells
        op("shift7", [0x7BFF, 0x73FF] + [0] * (c - 2), wt)
        op("shift_out", [0x7BFF, 0x0001] + [0] * (c - 2), wt)
    return ops


def _shifts(op, first_cell, cells):
    """The set of min(T - t, 8) over the active lanes of the op's cells (8: dropped)."""
    out = set()
    n = op["n"]

    def hi(x):
        return (x >> 12) & 7
    for k in range(cells):
        w = op["wt"][first_cell + k]
        ts = [hi(w[c]) + hi(op["data"][c]) for c in range(n)
              if w[c] & 0x7FFF and op["data"][c] & 0x7FFF]
        out |= {min(max(ts) - t, 8) for t in ts}
    return out


def _t_sweep_ops(atomic_c, atomic_k, stripe_max):
    """One op per T = 0..14: lane 0 has hi_w + hi_d = T, the other lanes hold the same pair
    with the data halved (a lower t or the same, never higher)."""
    c, cells = atomic_c, atomic_k // 2
    ops = []
    for t in range(15):
        hw = min(t, 7)
        w, d = (4 * hw + 1) << 10 | 0x155, (4 * (t - hw) + 1) << 10 | 0x2AA
        data = [d] + [max(d - 0x400 * (i % 3), 0x0001) for i in range(1, c)]
        ops.append({"data": data, "wt": [[w | 0x8000 * (k % 2)] * c for k in range(cells)],
                    "n": c, "pos": t % stripe_max, "first": 0, "last": 1})
    return ops


def _booth_sim(samples, lanes=256):
    """Evaluate :func:`booth_pairs` in a combinational simulation on ``(y, z, neg)``
    samples, ``lanes`` at a time; returns [(U0, U1)]."""
    m = Module()
    ys, zs, ns = Signal(14 * lanes), Signal(14 * lanes), Signal(lanes)
    u0, u1 = booth_pairs(m, [ys[14 * i:14 * i + 14] for i in range(lanes)],
                         [zs[14 * i:14 * i + 14] for i in range(lanes)], list(ns))
    o0, o1 = Signal(PAIR_BITS * lanes), Signal(PAIR_BITS * lanes)
    m.d.comb += [o0.eq(Cat(*u0)), o1.eq(Cat(*u1))]
    got = []

    def pack(vals, width):
        return sum(v << (width * i) for i, v in enumerate(vals))

    async def tb(ctx):
        mask = (1 << PAIR_BITS) - 1
        for i0 in range(0, len(samples), lanes):
            chunk = samples[i0:i0 + lanes]
            y, z, n = zip(*chunk)
            ctx.set(ys, pack(y, 14))
            ctx.set(zs, pack(z, 14))
            ctx.set(ns, pack(n, 1))
            g0, g1 = ctx.get(o0), ctx.get(o1)
            got.extend((g0 >> (PAIR_BITS * i) & mask, g1 >> (PAIR_BITS * i) & mask)
                       for i in range(len(chunk)))

    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()
    return got


#: mantissas at the edges: 0, 1, the smallest and largest of each e & 3 and of denormals,
#: alternating bits, all ones
EDGE_MANTISSAS = [0, 1, 2, 3, 0x7FE, 0x400, 0x7FF, 0x800, 0xFFE, 0x1000, 0x1FFC, 0x2000,
                  0x3FF8, 0x2AAA, 0x1555, 0x3FFF, 0x3FFE, 0x2001]
#: every mantissa an fp16 operand can have: f << 1 (e = 0) and (1024 | f) << (e & 3)
ALL_MANTISSAS = sorted({f << 1 for f in range(1024)}
                       | {(1024 | f) << s for f in range(1024) for s in range(4)})


def _check_booth(samples):
    got = _booth_sim(samples)
    y, z, n = (np.array(a, np.int64) for a in zip(*samples))
    u0, u1 = booth_product(y, z, n)
    for i, (g, s) in enumerate(zip(got, samples)):
        assert g == (int(u0[i]), int(u1[i])), f"(y, z, neg) = {s}: got {g}"


def test_booth_pairs_against_model():
    """booth_pairs' (U0, U1) equals booth_product's for every pair of edge mantissas, both
    signs, and a random sample of fp16 mantissas and of arbitrary 14-bit values (~7,000
    pairs, 256 lanes per evaluation)."""
    rng = random.Random(5)
    samples = [(y, z, n) for y in EDGE_MANTISSAS for z in EDGE_MANTISSAS for n in (0, 1)]
    samples += [(rng.choice(ALL_MANTISSAS), rng.choice(ALL_MANTISSAS), rng.randrange(2))
                for _ in range(5000)]
    samples += [(rng.randrange(1 << 14), rng.randrange(1 << 14), rng.randrange(2))
                for _ in range(1500)]
    _check_booth(samples)
    assert len(ALL_MANTISSAS) == 4608 and max(ALL_MANTISSAS) == 16376     # 512 shared


@pytest.mark.slow
def test_booth_pairs_all_mantissas():
    """Every fp16 mantissa as the weight against each edge data mantissa and back, both signs
    (332k pairs; several minutes)."""
    samples = [(a, b, n) for a in ALL_MANTISSAS for b in EDGE_MANTISSAS for n in (0, 1)]
    samples += [(b, a, n) for a, b, n in samples]
    _check_booth(samples)


@pytest.mark.parametrize("atomic_c,atomic_k,cells,first_cell,stripe_max", [
    ("B", "B", 2, 0, 16),     # geometry B, CMAC_A (cells 0, 1)
    ("B", "B", 2, 2, 16),     # geometry B, CMAC_B (cells 2, 3)
    (2, 4, 2, 0, 3),          # tiny: the whole op in one instance
    (1, 2, 1, 0, 1),          # one lane: no adder tree
])
def test_cmac16_fp_random_ops_with_stalls(atomic_c, atomic_k, cells, first_cell, stripe_max):
    if atomic_c == "B":
        atomic_c, atomic_k = _geometry(GEOMETRY_B)
        assert (atomic_c, atomic_k) == (8, 8)
    rng = random.Random(atomic_c * 100 + first_cell)
    kinds = ("mixed", "mixed", "sparse", "wide")
    ops = [_random_op(rng, atomic_c, atomic_k, stripe_max, kinds[i % 4]) for i in range(100)]
    ops += list(_special_ops(atomic_c, atomic_k, stripe_max).values())
    ops += _t_sweep_ops(atomic_c, atomic_k, stripe_max)
    rng.shuffle(ops)
    dut = Cmac16Fp(atomic_c, cells, stripe_max, first_cell, atomic_k=atomic_k)
    got = _run(dut, ops, seed=7, p_in=0.3, p_out=0.4)
    _check(ops, got, first_cell, cells, atomic_c, stripe_max)
    words = [w for op in ops for w in _words(op, first_cell, cells)]
    # the draws reach NaN words, both signs of S, every T from 0 to 14
    assert {w[0] for w in words} == {True, False}
    assert min(w[3] for w in words) < 0 < max(w[3] for w in words)
    assert {w[2] for w in words} == set(range(15))
    if atomic_c > 1:        # every shift 4(T - t) from 0 to 28, and dropped lanes
        assert set().union(*(_shifts(op, first_cell, cells) for op in ops)) == set(range(9))


def test_cmac16_fp_one_op_per_cycle():
    """Geometry B at full rate: one psum per cycle after the latency (5 cycles)."""
    atomic_c, atomic_k = _geometry(GEOMETRY_B)
    rng = random.Random(3)
    ops = [_random_op(rng, atomic_c, atomic_k, 16) for _ in range(40)]
    dut = Cmac16Fp(atomic_c, 2, 16, 0, atomic_k=atomic_k)
    assert dut.latency == 5
    ts = []
    got = _run(dut, ops, seed=1, p_in=0, p_out=0, timestamps=ts)
    _check(ops, got, 0, 2, atomic_c, 16)
    assert ts[-1] - ts[0] == len(ops) - 1           # no bubble
    assert ts[0] == dut.latency


def test_cmac16_fp_geometry_a_half():
    """Geometry A, CMAC_B's half (cells 8..15 of 64 lanes; elaboration ~10 s): a few ops at
    full rate (the largest sums, NaN priority in cell 9, NaN data, lanes past n, a shifted-out
    lane, random draws), then a few with random stalls, in one simulation."""
    atomic_c, atomic_k = _geometry(GEOMETRY_A)
    assert (atomic_c, atomic_k) == (64, 32)
    cells, first_cell, sm = 8, 8, 32
    rng = random.Random(11)
    specials = _special_ops(atomic_c, atomic_k, sm)
    fast = [specials[n] for n in ("max", "max_neg", "nan_w9", "nan_d", "past_n", "shift7")]
    fast += [_random_op(rng, atomic_c, atomic_k, sm, k) for k in ("mixed", "sparse", "wide")]
    stalled = [specials[n] for n in ("zero_data", "inf", "nan_w15", "shift_out")]
    stalled += [_random_op(rng, atomic_c, atomic_k, sm, k) for k in ("mixed", "sparse")]
    dut = Cmac16Fp(atomic_c, cells, sm, first_cell, atomic_k=atomic_k)
    assert dut.latency == 6
    ts = []
    got = _run(dut, fast, seed=2, p_in=0, p_out=0, timestamps=ts, then=[(stalled, 0.3, 0.4)])
    _check(fast + stalled, got, first_cell, cells, atomic_c, sm)
    assert ts[-1] - ts[0] == len(fast) - 1 and ts[0] == dut.latency
    big = _words(specials["max"], first_cell, cells)[0]
    assert big == (False, 0, 12, 64 * 16376 ** 2)         # needs 35 of S's 38 bits


def test_cmac16_fp_rejects_bad_sizes():
    with pytest.raises(ValueError):
        Cmac16Fp(8, 3, 16, 2, atomic_k=8)       # cells 2..4 of 4
    with pytest.raises(ValueError):
        Cmac16Fp(8, 2, 16, atomic_k=7)
    with pytest.raises(ValueError):
        Cmac16Fp(0, 2, 16, atomic_k=8)
