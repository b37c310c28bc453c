# amaranth: UnusedElaboratable=no
"""The MAC array of 16-bit configurations (hdl/cmac/array16.py, docs/conv16.md "CMAC"): layers of
INT8, INT16 and FP16 ops one after the other through CMAC_A + CMAC_B, each op routed to its
half's engine by the precision registers, the words of all cells against plain-Python sums
(INT8/INT16) and the model's ``cmac_words`` (FP16), with random stalls on both sides, on
geometry B (nv_small int8_int16_fp16: atomic C 8, K 8)."""
from __future__ import annotations

import random

import numpy as np

from hdl.cmac.array16 import CmacArray16
from hdl.cmac.layouts import PREC_FP16, PREC_INT8, PREC_INT16
from hdl.config import get_config
from streams import simulate_streams, stream_get, stream_put
from verif.gen.common import fp16_values
from verif.model.conv_fp16 import cmac_words

STRIPE = 6


def _s(v, bits):
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _op(rng, ac, cells, prec):
    if prec == PREC_FP16:
        scale = rng.choice((-6, 0, 5))
        data = fp16_values(rng, ac, scale)
        wt = [fp16_values(rng, ac, scale) for _ in range(cells)]
        n = rng.choice((ac, ac, rng.randrange(ac + 1)))
    else:
        data = [rng.getrandbits(16) for _ in range(ac)]
        wt = [[rng.getrandbits(16) for _ in range(ac)] for _ in range(cells)]
        n = ac
    return {"data": data, "wt": wt, "n": n, "pos": rng.randrange(STRIPE),
            "first": rng.randrange(2), "last": rng.randrange(2)}


def _word(op, j, prec):
    d, w = op["data"], op["wt"][j]
    if prec == PREC_INT16:
        return {"i16": sum(_s(a, 16) * _s(b, 16) for a, b in zip(d, w))}
    if prec == PREC_INT8:
        return {"i8": [sum(_s(a, 8) * _s(b, 8) for a, b in zip(d, w)),
                       sum(_s(a, 8) * _s(b >> 8, 8) for a, b in zip(d, w))]}
    n = op["n"]
    if n == 0:                                    # no operand at all: 0 * 2**(4*0 - 50)
        return {"fp": {"s": 0, "t": 0}}
    nan, nan_bits, t, s = (int(v[0, 0]) for v in cmac_words(np.array([w[:n]]), np.array([d[:n]])))
    if nan:
        return {"fp": {"nan": 1, "nan_bits": nan_bits}}
    return {"fp": {"s": s, "t": t}}


def _check(got, op, prec, cells):
    assert (got.pos, got.first, got.last) == (op["pos"], op["first"], op["last"])
    for j in range(cells):
        want = _word(op, j, prec)
        word = got.sum[j]
        if "i16" in want:
            assert word.i16 == want["i16"], j
        elif "i8" in want:
            assert [word.i8[0], word.i8[1]] == want["i8"], j
        elif want["fp"].get("nan"):
            assert (word.fp.nan, word.fp.nan_bits) == (1, want["fp"]["nan_bits"]), j
        else:
            assert (word.fp.nan, word.fp.s, word.fp.t) == (0, want["fp"]["s"], want["fp"]["t"]), j


def test_layers_of_every_precision_with_stalls():
    cfg = get_config("nv_small+feature_data_type=int8_int16_fp16")
    ac, ak = cfg.mac_atomic_c, cfg.mac_atomic_k
    cells = ak // 2
    dut = CmacArray16(ac, ak, STRIPE)
    rng = random.Random(33)
    layers = [(prec, [_op(rng, ac, cells, prec) for _ in range(40)])
              for prec in (PREC_FP16, PREC_INT8, PREC_INT16, PREC_FP16, PREC_INT8)]
    got = {i: [] for i in range(len(layers))}
    turn = {"layer": 0, "done": -1}

    async def producer(ctx):
        prng = random.Random(1)
        for i, (prec, ops) in enumerate(layers):
            while turn["done"] != i - 1:           # the previous layer has drained
                await ctx.tick()
            ctx.set(dut.prec_a, prec)
            ctx.set(dut.prec_b, prec)
            await stream_put(ctx, dut.op, ops, rng=prng, p_stall=0.3)

    async def consumer(ctx):
        crng = random.Random(2)
        for i, (_, ops) in enumerate(layers):
            got[i] = await stream_get(ctx, dut.psum, len(ops), rng=crng, p_stall=0.3)
            turn["done"] = i

    simulate_streams(dut, [producer], [consumer], [("op", dut.op), ("psum", dut.psum)])
    for i, (prec, ops) in enumerate(layers):
        assert len(got[i]) == len(ops)
        for g, op in zip(got[i], ops):
            _check(g, op, prec, cells)
