"""PDP 16-bit core RTL (hdl.pdp.core16: unpack -> NaN flush -> width pass -> height pass ->
reciprocal stages -> pack, INT16 and FP16 chosen at run time) against the numpy model's
``pool_plane`` with nv_full's INT16 widths and ``pool_plane_fp16`` (verif.model.pdp, bit-exact
with NVIDIA's nvdlav1 RTL), with random stalls on both streams: MAX, MIN and AVE, strides,
padding on every side with padding values, 1x1 and 8x8 kernels, several surfaces, fp16 data
with NaNs, infinities, denormals and signed zeros (and the NaN flush), random reciprocals.

Geometries (:func:`hdl.pdp.core16.core16_geometry`): nv_full with int16/fp16 (16 channels per
32-byte atom, 4 lanes: 4 items per atom) and nv_small's 8-byte atoms with int16/fp16 (4
channels, 1 lane: 4 items per atom, so a one-column line is 4 items). The unit-level programs
are tests/hdl/test_pdp_unit_16.py."""
from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from hdl.config import get_config
from hdl.pdp.core16 import PdpCore16, core16_geometry
from streams import check_stream_stable, stream_get, stream_put
from verif.gen.common import fp16_values, fp17_bits
from verif.model.fp import fp16_isnan, fp17_of_int
from verif.model.pdp import (INT_WIDTHS, POOL_AVE, POOL_MAX, POOL_MIN, pool_plane,  # reference
                             pool_plane_fp16)

GEOMETRIES = ["nv_full+feature_data_type=int8_int16_fp16",
              "nv_small+feature_data_type=int8_int16_fp16"]
INT16, FP16 = 1, 2

# (name, method, w, h, surfaces, kw, kh, sx, sy, pl, pt, pr, pb)
CASES = [
    ("2x2_max_pad_rb", POOL_MAX, 4, 3, 2, 2, 2, 1, 1, 0, 0, 1, 1),
    ("3x2_min_s2_pad_lt", POOL_MIN, 5, 3, 1, 3, 2, 2, 1, 2, 1, 0, 0),
    ("3x3_ave_pad_all", POOL_AVE, 5, 5, 2, 3, 3, 2, 2, 1, 1, 1, 1),
    # windows ending in the bottom padding: the height pass's flush of three windows
    ("2x4_ave_pb3", POOL_AVE, 3, 3, 2, 2, 4, 1, 1, 1, 2, 0, 3),
    ("1x1_max", POOL_MAX, 3, 2, 1, 1, 1, 1, 1, 0, 0, 0, 0),
    # a stride above the kernel (lines and columns in no window)
    ("2x2_min_s4", POOL_MIN, 6, 6, 1, 2, 2, 4, 4, 0, 0, 0, 0),
]
# the full kernel: 8 taps in both folds, 7 windows in the bottom padding
BIG = ("8x8_ave_pad", POOL_AVE, 2, 3, 1, 8, 8, 1, 2, 5, 6, 6, 7)


def _recip(prec, k, rng):
    if prec == FP16:
        return fp17_bits(1 / k) if rng.random() < 0.7 else fp17_bits(rng.uniform(-2, 2))
    return round(65536 / k) if rng.random() < 0.7 else rng.getrandbits(17)


def _layer(spec, prec, case, seed, nan_to_zero=False):
    """One layer's register values, input atoms and expected output atoms (the model's)."""
    name, method, w, h, surf, kw, kh, sx, sy, pl, pt, pr, pb = case
    ow = (pl + w + pr - kw) // sx + 1
    oh = (pt + h + pb - kh) // sy + 1
    elems, _ = core16_geometry(get_config(spec))
    rng = random.Random(seed)
    c = surf * elems
    if prec == FP16:
        x = np.array(fp16_values(rng, c * h * w, rng.choice((-4, 0, 4, 10))),
                     np.int64).reshape(c, h, w)
        pad = rng.uniform(-100, 100)
        pads = [fp17_bits(k * pad) if rng.random() < 0.7 else rng.getrandbits(19)
                for k in range(1, 8)]
    else:
        x = np.array([rng.randint(-32768, 32767) for _ in range(c * h * w)],
                     np.int64).reshape(c, h, w)
        pads = [rng.getrandbits(19) for _ in range(7)]
    recip_w, recip_h = _recip(prec, kw, rng), _recip(prec, kh, rng)
    args = (method, kw, kh, sx, sy, pl, pt, pr, pb, ow, oh, pads, recip_w, recip_h)
    if prec == FP16:
        xin = np.where(fp16_isnan(x), 0, x) if nan_to_zero else x
        want = pool_plane_fp16(xin, *args)
    else:
        want = pool_plane(x, *args, widths=INT_WIDTHS[("v1", 1)])
    # the input port's elements are signed(16): fp16 patterns as their two's complement
    items = [[(int(v) + 0x8000 & 0xFFFF) - 0x8000 for v in x[s * elems:(s + 1) * elems, yy, xx]]
             for s in range(surf) for yy in range(h) for xx in range(w)]
    expect = [[int(v) & 0xFFFF for v in want[s * elems:(s + 1) * elems, yy, xx]]
              for s in range(surf) for yy in range(oh) for xx in range(ow)]
    regs = dict(method=method, kw=kw, kh=kh, sx=sx, sy=sy, pad_top=pt, height=h, out_height=oh,
                surfaces=surf, last_col=w - 1, pad_left=pl, out_width=ow, recip_w=recip_w,
                recip_h=recip_h, fp=int(prec == FP16), nan_to_zero=int(nan_to_zero))
    return f"{name} prec={prec}", regs, pads, items, expect


def _run(spec, layers, seed, *, p_stall=0.3):
    """Play ``layers`` (``(prec, case, nan_to_zero)``) one after another through one
    PdpCore16 of configuration ``spec`` (one simulation: the precision changes at run time)
    and compare every output atom with the model's."""
    elems, lanes = core16_geometry(get_config(spec))
    rng = random.Random(seed)
    runs = [_layer(spec, prec, case, seed * 1000 + k, nan)
            for k, (prec, case, nan) in enumerate(layers)]
    dut = PdpCore16(elems, lanes, 16)
    got = [[] for _ in runs]
    state = {"done": 0}

    async def producer(ctx):
        for k, (name, regs, pads, items, expect) in enumerate(runs):
            while state["done"] < k:
                await ctx.tick()
            for reg, v in regs.items():
                ctx.set(getattr(dut, reg), v)
            ctx.set(dut.pads, [0] + pads)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            await stream_put(ctx, dut.i, items, rng=rng, p_stall=p_stall)

    async def consumer(ctx):
        for k, run in enumerate(runs):
            got[k] = await stream_get(ctx, dut.o, len(run[4]), rng=rng, p_stall=p_stall)
            state["done"] = k + 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(producer)
    sim.add_testbench(consumer)
    sim.add_process(check_stream_stable(dut.o))
    groups = elems // lanes
    cycles = sum((len(r[3]) + len(r[4]) * 8) * groups * 4 + 400 for r in runs)
    sim.run_until(1e-8 * cycles)
    assert state["done"] == len(runs), f"{state['done']} of {len(runs)} layers done"
    for (name, _, _, _, expect), out in zip(runs, got):
        out = [[int(v) & 0xFFFF for v in atom] for atom in out]
        for k, (a, b) in enumerate(zip(expect, out)):
            assert a == b, (f"{name} {spec}: atom {k} expected {[hex(v) for v in a]} "
                            f"got {[hex(v) for v in b]}")


def test_fp17_of_kernel_widths():
    """The core's fp17 constants of the kernel width (the height pass's padding term) are the
    model's."""
    from hdl.pdp.fold import fp17_of_small_int
    assert [fp17_of_small_int(n) for n in range(1, 9)] == [fp17_of_int(n) for n in range(1, 9)]


@pytest.mark.parametrize("spec", GEOMETRIES, ids=["nv_full", "atom8"])
def test_pdp_core16_vs_model(spec):
    """Every case of CASES in INT16 and FP16, alternating in one simulation (the precision is
    a run-time choice); the full kernel and the NaN flush on nv_full's geometry."""
    layers = [(prec, case, False) for case in CASES for prec in (INT16, FP16)]
    if spec == GEOMETRIES[0]:
        layers += [(INT16, BIG, False), (FP16, BIG, False), (FP16, CASES[2], True),
                   (FP16, CASES[0], True)]
    _run(spec, layers, seed=GEOMETRIES.index(spec) + 1)


def test_pdp_core16_back_to_back():
    """No stalls: items follow each other (the height pass's flush right after a surface's
    last line, one-column lines)."""
    one_col = ("1x3_max_1col_pb2", POOL_MAX, 1, 4, 2, 1, 3, 1, 1, 0, 1, 0, 2)
    layers = [(FP16, CASES[3], False), (INT16, one_col, False), (FP16, one_col, True),
              (INT16, CASES[2], False)]
    _run(GEOMETRIES[1], layers, seed=9, p_stall=0)


@pytest.mark.slow
@pytest.mark.parametrize("spec", GEOMETRIES + ["nv_full+feature_data_type=int8_int16_fp16"
                                               "+pdp_throughput=2"])
@pytest.mark.parametrize("seed", range(3))
def test_pdp_core16_random(spec, seed):
    """Random geometries (kernels, strides, paddings) in both precisions, without stalls and
    with."""
    rng = random.Random(f"{spec}-{seed}")
    layers = []
    while len(layers) < 8:
        kw, kh = rng.randint(1, 8), rng.randint(1, 8)
        sx, sy = rng.randint(1, kw + 1), rng.randint(1, kh + 1)
        pl, pr, pt, pb = (rng.randint(0, kw - 1), rng.randint(0, kw - 1),
                          rng.randint(0, kh - 1), rng.randint(0, kh - 1))
        ow, oh = rng.randint(1, 4), rng.randint(1, 4)
        w, h = (ow - 1) * sx + kw - pl - pr, (oh - 1) * sy + kh - pt - pb
        if w < 1 or h < 1:
            continue
        case = ("rand", rng.randrange(3), w, h, rng.randint(1, 2), kw, kh, sx, sy,
                pl, pt, pr, pb)
        layers.append((rng.choice((INT16, FP16)), case, rng.random() < 0.3))
    _run(spec, layers, seed=seed, p_stall=rng.choice((0, 0.3)))
