"""SDP X sub-unit RTL (hdl.sdp.x.XSubUnit): ALU MAX/MIN/SUM/EQL with its operand shifter,
multiplier with shift and truncation, PReLU, ReLU, each bypassed or not, against plain-Python
formulas (and the numpy model's x_subunit as a second opinion), with random stalls."""
import random

import numpy as np
import pytest

from amaranth.sim import Simulator

from hdl.sdp.x import XSubUnit
from streams import simulate_streams, stream_get, stream_put
from verif.model.sdp import x_subunit as model_x_subunit

I32 = (-(1 << 31), (1 << 31) - 1)


def sat(v, bits):
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return max(lo, min(hi, v))


def rshift_round(v, s, width=49):
    """v / 2**s rounded half away from zero; 0 for s >= width (NVIDIA's shifter rule)."""
    if s == 0:
        return v
    if s >= width:
        return 0
    q, r = divmod(abs(v), 1 << s)
    q += 1 if 2 * r >= (1 << s) else 0
    return q if v >= 0 else -q


def ref(x, alu_op, mul_op, c):
    """Plain-Python X sub-unit (v1_ias_precision.rst shifter/truncate; widths in hdl/sdp/x.py)."""
    if c["bypass"]:
        return x
    a = x
    if not c["alu_bypass"]:
        op = sat(alu_op << min(c["alu_shift"], 40), 32)
        a = max(x, op) if c["alu_algo"] == 0 else min(x, op) if c["alu_algo"] == 1 else x + op
    p = a if c["mul_bypass"] else a * mul_op
    y = sat(rshift_round(p, c["mul_shift"]), 32)
    if c["mul_prelu"] and not c["mul_bypass"] and a >= 0:
        y = ((a + (1 << 31)) % (1 << 32)) - (1 << 31)
    if not c["relu_bypass"]:
        y = max(y, 0)
    return y


def rand_cfg(rng):
    return {"bypass": int(rng.random() < 0.1), "alu_bypass": rng.randrange(2),
            "alu_algo": rng.randrange(4), "alu_shift": rng.choice([0, 1, 5, 16, 31, 32, 40, 63]),
            "mul_bypass": rng.randrange(2), "mul_prelu": rng.randrange(2),
            "mul_shift": rng.choice([0, 1, 3, 15, 31, 32, 48, 49, 63]),
            "relu_bypass": rng.randrange(2)}


def rand_x(rng):
    return rng.choice([rng.randrange(-128, 128), rng.randrange(*I32), I32[0], I32[1], 0, -1])


def rand_op(rng):
    return rng.choice([rng.randrange(-(1 << 15), 1 << 15), -(1 << 15), (1 << 15) - 1, 0, 1, -1])


def _run(layers, lanes, *, p_in, p_out, seed):
    """layers: [(cfg dict, [(xs, alus, muls)] items)]; returns received x lists per layer."""
    dut = XSubUnit(lanes)
    rng = random.Random(seed)
    results = []

    async def producer(ctx):
        for k, (c, items) in enumerate(layers):
            while len(results) < k:        # configuration changes only when the unit is empty
                await ctx.tick()
            for name, v in c.items():
                ctx.set(getattr(dut.cfg, name), v)
            payloads = [{"x": xs, "op": [{"alu": a, "mul": mm} for a, mm in zip(al, mu)]}
                        for xs, al, mu in items]
            await stream_put(ctx, dut.i, payloads, rng=rng, p_stall=p_in)

    async def consumer(ctx):
        for c, items in layers:
            got = await stream_get(ctx, dut.o, len(items), rng=rng, p_stall=p_out,
                                   timeout=30 * len(items) + 100)
            results.append([[int(v) for v in g.x] for g in got])

    simulate_streams(dut, [producer], [consumer], [("i", dut.i), ("o", dut.o)])
    return results


def _layers(rng, lanes, n_layers, n_items, cfgs=None):
    layers = []
    for k in range(n_layers):
        c = cfgs[k] if cfgs else rand_cfg(rng)
        items = [([rand_x(rng) for _ in range(lanes)], [rand_op(rng) for _ in range(lanes)],
                  [rand_op(rng) for _ in range(lanes)]) for _ in range(n_items)]
        layers.append((c, items))
    return layers


def _check(layers, results):
    for (c, items), got in zip(layers, results):
        want = [[ref(x, a, mm, c) for x, a, mm in zip(*it)] for it in items]
        assert got == want, c


@pytest.mark.parametrize("lanes,p_in,p_out,seed", [(1, 0.3, 0.4, 1), (8, 0.3, 0.4, 2),
                                                   (8, 0.0, 0.6, 3), (1, 0.6, 0.0, 4)])
def test_x_random_configs(lanes, p_in, p_out, seed):
    rng = random.Random(seed)
    layers = _layers(rng, lanes, 12, 12)
    _check(layers, _run(layers, lanes, p_in=p_in, p_out=p_out, seed=seed))


BASE = {"bypass": 0, "alu_bypass": 1, "alu_algo": 2, "alu_shift": 0, "mul_bypass": 1,
        "mul_prelu": 0, "mul_shift": 0, "relu_bypass": 1}
ONE_FEATURE = [
    dict(BASE),                                                   # identity
    dict(BASE, bypass=1, relu_bypass=0),                          # whole unit bypassed
    dict(BASE, alu_bypass=0, alu_algo=0, alu_shift=3),            # MAX
    dict(BASE, alu_bypass=0, alu_algo=1, alu_shift=20),           # MIN
    dict(BASE, alu_bypass=0, alu_algo=2, alu_shift=31),           # SUM (33-bit, saturating trt)
    dict(BASE, alu_bypass=0, alu_algo=3, alu_shift=1),            # EQL sums in X
    dict(BASE, mul_bypass=0, mul_shift=7),                        # MUL + truncate
    dict(BASE, mul_shift=5),                                      # truncate with MUL bypassed
    dict(BASE, mul_bypass=0, mul_prelu=1, mul_shift=4),           # PReLU
    dict(BASE, relu_bypass=0),                                    # ReLU
]


@pytest.mark.parametrize("lanes", [1, 8])
def test_x_each_feature(lanes):
    """Each function alone, against the formula and against the numpy model."""
    rng = random.Random(10 + lanes)
    layers = _layers(rng, lanes, len(ONE_FEATURE), 10, ONE_FEATURE)
    results = _run(layers, lanes, p_in=0.2, p_out=0.2, seed=lanes)
    _check(layers, results)
    for (c, items), got in zip(layers, results):
        if c["bypass"]:
            continue
        for (xs, al, mu), g in zip(items, got):
            want = model_x_subunit(
                np.array(xs), alu_bypass=bool(c["alu_bypass"]), alu_algo=c["alu_algo"],
                alu_op=np.array(al), alu_shift=c["alu_shift"], mul_bypass=bool(c["mul_bypass"]),
                mul_prelu=bool(c["mul_prelu"]), mul_op=np.array(mu), mul_shift=c["mul_shift"],
                relu_bypass=bool(c["relu_bypass"]))
            assert g == [int(v) for v in want], c


def test_x_formula_spot_values():
    """Hand-checked values of the reference formula itself."""
    c = dict(BASE, alu_bypass=0, alu_algo=2, alu_shift=2, mul_bypass=0, mul_shift=3)
    assert ref(5, 3, -7, c) == rshift_round((5 + 12) * -7, 3) == -15      # -119/8 = -14.875
    assert rshift_round(-20, 3) == -3 and rshift_round(20, 3) == 3         # +-2.5 away from 0
    assert ref(-100, 0, 3, dict(BASE, mul_bypass=0, mul_prelu=1)) == -300
    assert ref(100, 0, 3, dict(BASE, mul_bypass=0, mul_prelu=1, mul_shift=5)) == 100
    assert ref(I32[1], 1, 0, dict(BASE, alu_bypass=0, alu_shift=40)) == I32[1]   # sat 33->32


def test_x_full_throughput():
    """No stalls: one item per cycle after a 6-cycle latency."""
    lanes, n = 2, 40
    rng = random.Random(5)
    layers = _layers(rng, lanes, 1, n, [dict(BASE, alu_bypass=0, mul_bypass=0, mul_shift=9)])
    dut = XSubUnit(lanes)
    stamps, got = [], []
    c, items = layers[0]

    async def producer(ctx):
        for name, v in c.items():
            ctx.set(getattr(dut.cfg, name), v)
        await stream_put(ctx, dut.i, [{"x": xs, "op": [{"alu": a, "mul": mm} for a, mm in
                                                       zip(al, mu)]} for xs, al, mu in items],
                         rng=rng, p_stall=0)

    async def consumer(ctx):
        got.extend(await stream_get(ctx, dut.o, n, rng=rng, p_stall=0, timestamps=stamps))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(producer)
    sim.add_testbench(consumer)
    sim.run()
    assert stamps == list(range(6, 6 + n))
    _check(layers, [[[int(v) for v in g.x] for g in got]])
