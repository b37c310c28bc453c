# amaranth: UnusedElaboratable=no
"""CACC in cfg.conv16 configurations (hdl/cacc; docs/conv16.md "CACC", "CACC -> SDP"): one
``cell_layout`` word per MAC cell, read per D_MISC_CFG.PROC_PRECISION.

* FP48 arithmetic alone (combinational): CMAC words normalized, added into the accumulator
  and converted to fp32, against verif/model/conv_fp16.py ``_round_mag``/``cacc_to_fp32`` on
  random, cancelling, tying, NaN and widely spread values;
* the unit at geometries A (nv_full, atomic C 64, K 32: 16 cells) and B (nv_small+
  int8_int16_fp16, C 8, K 8: 4 cells), with random stalls on both streams: INT8 pairs against
  the int8 formula (test_cacc ``round_ref``), INT16 against a 48-bit saturating sum and
  ``cacc_truncate(..., acc_bits=48)`` (saturation reached, every CLIP_TRUNCATE), FP16 against
  ``cacc_add``/``cacc_to_fp32`` on words of ``cmac_words`` and crafted ones;
* the layer's atom count per precision (groups of K in INT8, K/2 otherwise), done/busy,
  sat_count, and one psum per cycle at full rate: INT8/INT16 on any stripe (one pixel
  included), FP16 on stripes of at least FP_DEPTH pixels (3: the pipelined FP add loop; a
  shorter stripe takes FP_DEPTH cycles per step, exactly as :func:`accept_cycles` predicts);
* FP16 ops on one pos back to back with random stalls (the hazard check and the forwarding
  from the FP pipeline's result register).
"""
from __future__ import annotations

import functools
import random

import numpy as np
import pytest
from amaranth.hdl import Module, Signal, signed
from amaranth.lib import data
from amaranth.sim import Simulator

from hdl.cacc import Cacc
from hdl.cacc.acc import cacc_round
from hdl.cacc.acc16 import (FP48, FP_DEPTH, fp48_add, fp48_normalize, fp48_pack,
                            fp_word_normalize)
from hdl.cmac.layouts import PREC_FP16, PREC_INT8, PREC_INT16, cell_layout, psum16_layout
from hdl.config import get_config
from streams import simulate_streams, stream_get, stream_put
from test_cacc import round_ref
from verif.model.conv import cacc_truncate
from verif.model.conv_fp16 import _round_mag, cacc_add, cacc_to_fp32, cmac_words

GEOM_A = "nv_full+winograd=False+batch=False+weight_compression=False+" \
         "feature_data_type=int8_int16_fp16"
GEOM_B = "nv_small+feature_data_type=int8_int16_fp16"
I32_MAX, I32_MIN = (1 << 31) - 1, -(1 << 31)


@functools.lru_cache(maxsize=None)
def cfg_of(name):
    cfg = get_config(name)
    assert cfg.conv16
    return cfg


def s_bits(cfg) -> int:
    """Width of a CMAC INT16 sum / FP16 S: 32 + log2(atomic C) (38 at A, 35 at B)."""
    return 32 + (cfg.mac_atomic_c - 1).bit_length()


def to_i32(pattern: int) -> int:
    return pattern - (1 << 32) if pattern >> 31 else pattern


# ---------------------------------------------------------------- FP16 words
def fp16_nan(rng) -> int:
    return (rng.getrandbits(1) << 15) | 0x7C00 | rng.randint(1, 0x3FF)


def word_of_value(v: int, sb: int):
    """A word (S, T) with S << 4T == v and S signed(sb), or None."""
    if v == 0:
        return 0, 0
    tz = (v & -v).bit_length() - 1
    for t in range(min(tz // 4, 15), -1, -1):
        s = v >> (4 * t)
        if -(1 << (sb - 1)) <= s < (1 << (sb - 1)) and s << (4 * t) == v:
            return s, t
    return None


def craft_word(rng, acc: int, sb: int):
    """A word aimed at ``acc`` (the lane's accumulator value, units of 2**-50): its exact
    negation (a cancellation to 0), a near-cancellation, a tie or near-tie of the 39-bit
    rounding, or None when no such word is representable."""
    e = max(0, abs(acc).bit_length() - 39)             # the accumulator's ulp: 2**e
    kind = rng.randrange(4)
    if kind == 0:
        v = -acc
    elif kind == 1:
        v = -acc + rng.choice([1, -1]) * (rng.randrange(1, 1 << 12) << rng.randrange(0, 40))
    elif kind == 2 and e > 0:
        v = rng.choice([1, -1]) << (e - 1)              # exactly half an ulp: a tie
    else:
        v = rng.choice([1, -1]) * ((rng.randrange(1, 1 << 20) << max(0, e - 1)) +
                                   rng.choice([0, 1 << max(0, e - 1), 0]))
    return word_of_value(v, sb)


def fp_word(rng, sb: int, acc: int | None = None):
    """A random FP16 word dict (cell_layout fp): NaN, zero, crafted against ``acc``, or a
    random (S, T) of any size."""
    r = rng.random()
    if r < 0.04:
        return {"s": 0, "t": 0, "nan": 1, "nan_bits": fp16_nan(rng)}
    if r < 0.08:
        return {"s": 0, "t": rng.randrange(16), "nan": 0, "nan_bits": 0}
    if acc is not None and r < 0.45:
        st = craft_word(rng, acc, sb)
        if st is not None:
            return {"s": st[0], "t": st[1], "nan": 0, "nan_bits": 0}
    bits = rng.choice([1, 4, 12, 24, sb - 2, sb - 1, sb])
    lim = 1 << (bits - 1)
    s = rng.choice([lim - 1, -lim]) if rng.random() < 0.1 else rng.randrange(-lim, lim)
    return {"s": s, "t": rng.choice([0, 0, 3, 7, 10, 14, 15, rng.randrange(16)]), "nan": 0,
            "nan_bits": 0}


def cmac_fp_words(rng, cells: int, n: int):
    """CMAC words of ``cells`` kernels for one pixel: ``cmac_words`` on random fp16 operands
    of ``n`` channels (zeros, denormals, infinities included; NaN operands mostly replaced by
    1.0, so that most sums stay numbers at 64 channels)."""
    from verif.gen.common import fp16_values

    def values(k):
        v = fp16_values(rng, k)
        return [x if (x & 0x7C00) != 0x7C00 or not x & 0x3FF or rng.random() < 0.05
                else 0x3C00 for x in v]
    w = np.array(values(cells * n), np.int64).reshape(cells, n)
    d = np.array(values(n), np.int64).reshape(1, n)
    nan, nan_bits, t, s = cmac_words(w, d)
    return [{"s": int(s[j, 0]), "t": int(t[j, 0]), "nan": int(nan[j, 0]),
             "nan_bits": int(nan_bits[j, 0]) & 0xFFFF if nan[j, 0] else 0}
            for j in range(cells)]


def fp_ref_step(acc, acc_nan, word):
    """``cacc_add`` on one lane (Python int acc, NaN pattern or -1)."""
    a, n = cacc_add(np.array([acc], object), np.array([acc_nan], np.int64),
                    (np.array([bool(word["nan"])]), np.array([word["nan_bits"]]),
                     np.array([word["t"]]), np.array([word["s"]], object)))
    return int(a[0]), int(n[0])


def fp_ref_out(acc, acc_nan) -> int:
    return to_i32(int(cacc_to_fp32(np.array([acc], object), np.array([acc_nan]))[0]))


# ---------------------------------------------------------------- FP48 arithmetic alone
def test_fp48_add_and_fp32_against_model():
    """fp_word_normalize -> fp48_add -> fp48_normalize -> fp48_pack, combinationally, on
    accumulators of every exponent (0: exact small integers) and words of every size, with
    crafted cancellations, ties (exactly half an ulp), NaNs (first wins) and zeros."""
    sb = 38
    m = Module()
    cell = Signal(cell_layout(64).members["fp"])
    acc = Signal(FP48)
    new = fp48_add(m, acc, fp_word_normalize(m, cell))
    out = Signal(32)
    m.d.comb += out.eq(fp48_pack(fp48_normalize(m, new)))
    rng = random.Random(33)
    cases = []
    for i in range(1000):
        e = rng.choice([0, 0, 1, 2, rng.randrange(60), rng.randrange(100)])
        mag = rng.randrange(1 << 38, 1 << 39) if e else rng.randrange(0, 1 << rng.randrange(1, 40))
        v = (-1) ** rng.randrange(2) * (mag << e)
        nan = fp16_nan(rng) if rng.random() < 0.03 else -1
        cases.append((v, nan, fp_word(rng, sb, v)))
    cases += [(0, -1, {"s": 0, "t": 3, "nan": 0, "nan_bits": 0}),            # 0 + 0 -> +0
              (5 << 40, -1, {"s": -5, "t": 10, "nan": 0, "nan_bits": 0}),   # exact cancellation
              (0, 0xFE01, {"s": 0, "t": 0, "nan": 1, "nan_bits": 0x7C02}),  # first NaN stays
              (0, -1, {"s": 0, "t": 0, "nan": 1, "nan_bits": 0xFFFF}),
              (-1, -1, {"s": -(1 << 37), "t": 15, "nan": 0, "nan_bits": 0}),
              (1, -1, {"s": (1 << 37) - 1, "t": 15, "nan": 0, "nan_bits": 0}),
              ((1 << 39) - 1, -1, {"s": 1, "t": 0, "nan": 0, "nan_bits": 0}),  # carry to 2**39
              (((1 << 39) - 1) << 30, -1, {"s": 1, "t": 7, "nan": 0, "nan_bits": 0}),  # tie
              (((1 << 39) - 1) << 30, -1, {"s": -1, "t": 7, "nan": 0, "nan_bits": 0}),
              ((1 << 38) << 60, -1, {"s": -1, "t": 0, "nan": 0, "nan_bits": 0})]
    got = []

    def enc(v, nan):
        if nan >= 0:
            return {"mag": nan & 0x3FF, "exp": 0, "nan": 1, "sign": nan >> 15}
        e = max(0, abs(v).bit_length() - 39)
        return {"mag": abs(v) >> e, "exp": e, "nan": 0, "sign": int(v < 0)}

    async def tb(ctx):
        for v, nan, word in cases:
            ctx.set(acc, enc(v, nan))
            ctx.set(cell, word)
            n = ctx.get(new)
            got.append((n.nan, n.sign, n.mag, n.exp, ctx.get(out)))

    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()
    kinds = {"tie": 0, "zero": 0, "nan": 0, "exp0": 0}
    for (v, nan, word), (gnan, gsign, gmag, gexp, gout) in zip(cases, got):
        rv, rnan = fp_ref_step(v, nan, word)
        if rnan >= 0:
            assert (gnan, gsign, gmag) == (1, rnan >> 15, rnan & 0x3FF), (v, nan, word)
            kinds["nan"] += 1
        else:
            assert not gnan and (-1) ** gsign * (gmag << gexp) == rv, (v, word, gmag, gexp, rv)
            assert gexp == 0 or gmag >> 38 == 1                 # normalized above exponent 0
            exact = v + (word["s"] << 4 * word["t"])
            drop = abs(exact).bit_length() - 39
            kinds["tie"] += drop > 0 and abs(exact) & ((1 << drop) - 1) == 1 << (drop - 1)
            kinds["zero"] += rv == 0
            kinds["exp0"] += gexp == 0 and rv != 0
        assert to_i32(gout) == fp_ref_out(rv, rnan), (v, nan, word)
    print(kinds)
    assert min(kinds.values()) >= 5, kinds


# ---------------------------------------------------------------- the unit
def make_layer16(rng, cfg, prec, w, h, c, stripe_max, sizes, steps, pick):
    """Ops of one layer of ``prec`` and the expected per-lane accumulators of each delivered
    atom: kernel groups (K in INT8, K/2 otherwise) of (w*h) pixels cut into stripes of
    ``sizes`` (clipped), each stripe ``steps(rng)`` steps; ``pick(rng, cell, acc)`` gives a
    cell's word (INT8: two sums; INT16: a sum; FP16: a word dict) knowing the lane's current
    reference accumulator. References: INT8 34-bit and INT16 48-bit saturation per step,
    FP16 ``cacc_add``."""
    cells = cfg.mac_atomic_k // 2
    group = cfg.mac_atomic_k if prec == PREC_INT8 else cells
    groups = -(-c // group)
    ops, accs = [], []
    if prec == PREC_INT8:
        top, lanes = 1 << 33, cfg.mac_atomic_k
    elif prec == PREC_INT16:
        top, lanes = 1 << 47, cells
    else:
        lanes = cells
    zero = (0, -1) if prec == PREC_FP16 else 0
    for _ in range(groups):
        left = w * h
        while left:
            n = min(rng.choice(sizes), stripe_max, left)
            left -= n
            ns = steps(rng)
            acc = [[zero] * lanes for _ in range(n)]
            for st in range(ns):
                for i in range(n):
                    cur = [zero] * lanes if st == 0 else acc[i]
                    cellw = []
                    for j in range(cells):
                        if prec == PREC_INT8:
                            pair = pick(rng, j, (cur[2 * j], cur[2 * j + 1]))
                            cellw.append({"i8": pair})
                            for e in range(2):
                                cur[2 * j + e] = min(max(cur[2 * j + e] + pair[e], -top),
                                                     top - 1)
                        elif prec == PREC_INT16:
                            v = pick(rng, j, cur[j])
                            cellw.append({"i16": v})
                            cur[j] = min(max(cur[j] + v, -top), top - 1)
                        else:
                            wd = pick(rng, j, cur[j][0])
                            cellw.append({"fp": wd})
                            cur[j] = fp_ref_step(*cur[j], wd)
                    acc[i] = list(cur)
                    ops.append({"sum": cellw, "pos": i, "first": int(st == 0),
                                "last": int(st == ns - 1)})
            accs.extend(acc)
    return ops, accs


def expected16(cfg, prec, accs, truncate, c):
    """(atoms as lists of k int32, saturation count) from the final accumulators. With the
    layer's channel count ``c``: in the atoms of the last kernel group (the last w*h of
    ``accs``) the lanes past channel c-1 are 0 (NVIDIA's nv_full RTL delivers zeros there, in
    FP16 too where a NaN datum makes a zero-weight cell's word NaN); their saturations still
    count (the accumulators convert before delivery)."""
    k = cfg.mac_atomic_k
    group = k if prec == PREC_INT8 else k // 2
    groups = -(-c // group)
    out, sat = [], 0
    for n, atom in enumerate(accs):
        if prec == PREC_FP16:
            row = [fp_ref_out(*a) for a in atom]
        else:
            vals = [round_ref(a, truncate) for a in atom]
            if prec == PREC_INT16:
                model = cacc_truncate(np.array(atom, np.int64), truncate, acc_bits=48)
                assert [v for v, _ in vals] == [int(x) for x in model]
            row = [v for v, _ in vals]
            sat += sum(s for _, s in vals)
        if n >= len(accs) // groups * (groups - 1):
            row = [v if j < c - group * (groups - 1) else 0 for j, v in enumerate(row)]
        out.append(row + [0] * (k - len(row)))
    return out, sat


def run_cacc16(cfg, stripe_max, ops, *, prec, w, h, c, truncate, seed=0, p_in=0.3, p_out=0.3,
               timestamps=None, p_start_gap=0, psum_log=None):
    """Run one layer; returns (atoms as lists of k ints, sat_count). Checks done (one pulse,
    the cycle after the last atom was taken) and busy. ``psum_log``: a list receiving
    (valid, ready, pos, first) of the psum port each cycle."""
    dut = Cacc(cfg, stripe_max)
    group = cfg.mac_atomic_k if prec == PREC_INT8 else cfg.mac_atomic_k // 2
    n_atoms = w * h * -(-c // group)
    rng_in, rng_out = random.Random(seed), random.Random(seed + 1)
    got, done_cycles, status = [], [], {}

    async def control(ctx):
        ctx.set(dut.regs.d_misc_cfg.proc_precision, prec)
        ctx.set(dut.regs.d_dataout_size_0.dataout_width, w - 1)
        ctx.set(dut.regs.d_dataout_size_0.dataout_height, h - 1)
        ctx.set(dut.regs.d_dataout_size_1.dataout_channel, c - 1)
        ctx.set(dut.regs.d_clip_cfg.clip_truncate, truncate)
        await ctx.tick()
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        assert ctx.get(dut.busy)
        cycle, taken = 0, 0
        async for _, _, valid, ready, done, busy, sat_count in ctx.tick().sample(
                dut.sdp.valid, dut.sdp.ready, dut.done, dut.busy, dut.sat_count):
            if done:
                done_cycles.append(cycle)
                status["n_at_done"] = taken
                status["sat_count"] = sat_count
                status["busy_at_done"] = busy
            elif done_cycles:
                status["busy_after"] = busy
                break
            else:
                assert busy
            taken += valid and ready
            cycle += 1
            if cycle > 100_000:
                break

    async def producer(ctx):
        await ctx.tick().repeat(2)
        await stream_put(ctx, dut.psum, ops, rng=rng_in, p_stall=p_in)

    async def consumer(ctx):
        await ctx.tick().repeat(2)
        got.extend(await stream_get(ctx, dut.sdp, n_atoms, rng=rng_out, p_stall=p_out,
                                    timestamps=timestamps))

    procs = []
    if psum_log is not None:
        async def log_psum(ctx):
            async for _, _, *v in ctx.tick().sample(dut.psum.valid, dut.psum.ready,
                                                     dut.psum.payload.pos,
                                                     dut.psum.payload.first):
                psum_log.append(tuple(v))
        procs.append(log_psum)
    simulate_streams(dut, [control, producer, consumer], [],
                     [("psum", dut.psum), ("sdp", dut.sdp)], processes=procs)
    assert len(done_cycles) == 1, "no done pulse"
    assert status["n_at_done"] == n_atoms
    assert not status["busy_at_done"] and not status["busy_after"]
    return [list(a) for a in got], status["sat_count"]


def picker(cfg, prec):
    """Random words of ``prec`` for make_layer16: INT8 pairs of full-range sums, INT16 sums
    of every size up to the full signed(32 + log2 C) range, FP16 words of cmac_words (half)
    and of :func:`fp_word` (crafted against the lane's accumulator)."""
    sb = s_bits(cfg)
    lim8 = 1 << (sb - 17)                            # int8 sums: signed(16 + log2 C)
    n = cfg.mac_atomic_c

    def pick(rng, j, cur):
        if prec == PREC_INT8:
            return [rng.choice([lim8 - 1, -lim8, rng.randrange(-lim8, lim8)]) for _ in range(2)]
        if prec == PREC_INT16:
            lim = 1 << rng.choice([8, 20, sb - 1, sb - 1])
            return rng.choice([lim - 1, -lim, rng.randrange(-lim, lim)])
        if rng.random() < 0.5:
            return cmac_fp_words(rng, 1, rng.randrange(1, n + 1))[0]
        return fp_word(rng, sb, cur)
    return pick


def check_layer(cfg, prec, *, seed, stripe_max, w, h, c, truncate, sizes, steps, p=0.3,
                pick=None):
    rng = random.Random(seed)
    ops, accs = make_layer16(rng, cfg, prec, w, h, c, stripe_max, sizes, steps,
                             pick or picker(cfg, prec))
    got, sat = run_cacc16(cfg, stripe_max, ops, prec=prec, w=w, h=h, c=c, truncate=truncate,
                          seed=seed, p_in=p, p_out=p)
    exp, exp_sat = expected16(cfg, prec, accs, truncate, c)
    assert got == exp
    assert sat == exp_sat
    return ops, exp, exp_sat


@pytest.mark.parametrize("prec,truncate,seed", [
    (PREC_INT8, 0, 1), (PREC_INT8, 7, 2),
    (PREC_INT16, 0, 3), (PREC_INT16, 13, 4), (PREC_INT16, 31, 5),
    (PREC_FP16, 0, 6), (PREC_FP16, 9, 7)])
def test_random_layers_b(prec, truncate, seed):
    """Geometry B: 3 kernel groups of 3x2 pixels (a channel count one past two groups:
    DATAOUT_CHANNEL counts groups of 8 in INT8, 4 otherwise), stripes of 1..4 pixels of 1..5
    steps, random stalls on both streams; FP16 ignores CLIP_TRUNCATE and never saturates."""
    cfg = cfg_of(GEOM_B)
    group = cfg.mac_atomic_k if prec == PREC_INT8 else cfg.mac_atomic_k // 2
    _, exp, exp_sat = check_layer(cfg, prec, seed=seed, stripe_max=4, w=3, h=2, c=2 * group + 1,
                                  truncate=truncate, sizes=(1, 2, 3, 4),
                                  steps=lambda r: r.choice([1, 2, 3, 5]))
    assert len(exp) == 18
    if prec == PREC_INT16 and truncate == 0:
        assert exp_sat > 0                            # int32 saturation counted


def test_fp16_crafted_lanes_b():
    """One stripe of one pixel, per lane: NaN then another NaN (the first stays; a negative
    NaN keeps its sign), words cancelling exactly (+0), all-zero words (+0), and a tie of
    the 39-bit rounding followed by words 2**56 times smaller (sticky only)."""
    cfg = cfg_of(GEOM_B)
    big = ((1 << 34) - 1, 14)                         # S, T: 2**34 * 2**56
    lanes = [
        [{"s": 5, "t": 2, "nan": 0, "nan_bits": 0},
         {"s": 0, "t": 0, "nan": 1, "nan_bits": 0xFE05},
         {"s": 0, "t": 0, "nan": 1, "nan_bits": 0x7C09},
         {"s": 77, "t": 9, "nan": 0, "nan_bits": 0}],
        [{"s": -(1 << 34), "t": 13, "nan": 0, "nan_bits": 0},
         {"s": (1 << 33), "t": 13, "nan": 0, "nan_bits": 0},
         {"s": (1 << 33), "t": 13, "nan": 0, "nan_bits": 0},
         {"s": 0, "t": 5, "nan": 0, "nan_bits": 0}],
        [{"s": 0, "t": t, "nan": 0, "nan_bits": 0} for t in (0, 14, 3, 15)],
        [{"s": big[0], "t": big[1], "nan": 0, "nan_bits": 0},
         {"s": big[0], "t": big[1], "nan": 0, "nan_bits": 0},     # 2**35 * big: 40 bits
         {"s": -3, "t": 0, "nan": 0, "nan_bits": 0},
         {"s": 1, "t": 0, "nan": 0, "nan_bits": 0}],
    ]
    ops, acc = [], [(0, -1)] * 4
    for st in range(4):
        ops.append({"sum": [{"fp": lanes[j][st]} for j in range(4)], "pos": 0,
                    "first": int(st == 0), "last": int(st == 3)})
        acc = [fp_ref_step(*acc[j], lanes[j][st]) for j in range(4)]
    got, sat = run_cacc16(cfg, 4, ops, prec=PREC_FP16, w=1, h=1, c=4, truncate=5, seed=3)
    exp = [fp_ref_out(*a) for a in acc]
    assert got == [exp + [0] * 4] and sat == 0
    assert exp[0] == to_i32(0xFF800205) and exp[1] == 0 and exp[2] == 0
    v = 2 * (((1 << 34) - 1) << 56)
    assert acc[3][0] == _round_mag(_round_mag(v - 3, 39) + 1, 39)


def test_int16_round_all_truncates():
    """cacc_round on 48-bit accumulators (the INT16 output path) for every CLIP_TRUNCATE
    against cacc_truncate(..., acc_bits=48) and the plain formula (value and sat flag)."""
    top = 1 << 47
    rng = random.Random(48)
    vals = [0, 1, -1, top - 1, -top, I32_MAX, I32_MIN, I32_MAX + 1, I32_MIN - 1]
    vals += [rng.randrange(-top, top) for _ in range(10)]
    vals += [(rng.choice([1, -1]) << rng.randrange(1, 47)) + rng.randrange(-2, 3)
             for _ in range(10)]
    acc, t = Signal(signed(48)), Signal(5)
    out, sat = Signal(signed(32)), Signal()
    m = Module()
    v, s = cacc_round(acc, t)
    m.d.comb += [out.eq(v), sat.eq(s)]
    got = []

    async def tb(ctx):
        for tt in range(32):
            for a in vals:
                ctx.set(acc, a)
                ctx.set(t, tt)
                got.append((ctx.get(out), bool(ctx.get(sat))))

    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()
    for tt in range(32):
        model = cacc_truncate(np.array(vals, np.int64), tt, acc_bits=48)
        for i, a in enumerate(vals):
            g = got[tt * len(vals) + i]
            assert g == round_ref(a, tt), (a, tt)
            assert g[0] == int(model[i])


def test_int16_48bit_saturation_a():
    """Geometry A, a stripe of one pixel, 1100 steps of words up to the full 38 bits
    (+-2**37): lanes saturating at 2**47 - 1 and -2**47 and staying there, a lane saturated
    then brought back (per-step saturation: not the clipped full sum), random big lanes;
    CLIP_TRUNCATE 17 makes the 48-bit values visible below the int32 limit."""
    cfg = cfg_of(GEOM_A)
    cells, n, top = cfg.mac_atomic_k // 2, 1100, (1 << 37)
    rng = random.Random(9)
    pattern = [lambda i: top - 1, lambda i: -top, lambda i: top - 1 if i < 1060 else -top,
               lambda i: -top if i < 1070 else top - 1]
    pattern += [lambda i, r=random.Random(j): r.randrange(-top, top) for j in range(cells - 4)]
    ops, acc = [], [0] * cells
    for i in range(n):
        words = [pattern[j](i) for j in range(cells)]
        acc = [min(max(a + w, -(1 << 47)), (1 << 47) - 1) for a, w in zip(acc, words)]
        ops.append({"sum": [{"i16": x} for x in words], "pos": 0, "first": int(i == 0),
                    "last": int(i == n - 1)})
    assert acc[0] == (1 << 47) - 1 and acc[1] == -(1 << 47)
    assert acc[2] == (1 << 47) - 1 - 40 * top and acc[3] == -(1 << 47) + 30 * (top - 1)
    got, sat = run_cacc16(cfg, 2, ops, prec=PREC_INT16, w=1, h=1, c=cells, truncate=17,
                          seed=rng.randrange(100), p_in=0.05, p_out=0.3)
    exp, exp_sat = expected16(cfg, PREC_INT16, [acc], 17, cells)
    assert got == exp and sat == exp_sat == 0
    assert got[0][:2] == [1 << 30, -(1 << 30)]


@pytest.mark.parametrize("prec", [PREC_INT8, PREC_INT16, PREC_FP16])
def test_random_layer_a(prec):
    """Geometry A (16 cells, 32 output lanes): 2 kernel groups of 2x1 pixels, random stalls."""
    cfg = cfg_of(GEOM_A)
    group = cfg.mac_atomic_k if prec == PREC_INT8 else cfg.mac_atomic_k // 2
    _, exp, _ = check_layer(cfg, prec, seed=20 + prec, stripe_max=2, w=2, h=1, c=group + 3,
                            truncate=3, sizes=(1, 2), steps=lambda r: r.choice([2, 3]))
    assert len(exp) == 4


def count_stalls(stream, log):
    """A process recording each cycle where ``stream`` offers an item that is not taken."""
    async def process(ctx):
        async for _, _, valid, ready in ctx.tick().sample(stream.valid, stream.ready):
            log.append(bool(valid and not ready))
    return process


def accept_cycles(ops, prec, depth=FP_DEPTH):
    """The cycle each op is accepted in when offered back to back with SDP always ready: one
    per cycle, except that in FP16 an op that is not ``first`` waits until ``depth`` cycles
    after the previous op on its ``pos`` (the FP add loop; INT8/INT16 forward in one
    cycle)."""
    cycles, last_on = [], {}
    for op in ops:
        c = cycles[-1] + 1 if cycles else 0
        if prec == PREC_FP16 and not op["first"] and op["pos"] in last_on:
            c = max(c, last_on[op["pos"]] + depth)
        cycles.append(c)
        last_on[op["pos"]] = c
    return cycles


@pytest.mark.parametrize("prec,stripe,steps", [
    (PREC_FP16, 1, 12), (PREC_FP16, 4, 1), (PREC_FP16, 3, 3),
    (PREC_FP16, 1, 1), (PREC_FP16, 2, 4),
    (PREC_INT16, 1, 8), (PREC_INT8, 1, 8), (PREC_INT16, 4, 1)])
def test_one_psum_per_cycle_b(prec, stripe, steps):
    """Full rate (no stalls on either side): INT8/INT16 take every psum in the cycle it is
    offered, stripes of one pixel included (each op adds to the sum the previous op just
    wrote). FP16 does so on stripes of at least FP_DEPTH (3) pixels; on shorter ones each step
    of a stripe takes FP_DEPTH cycles (an op waits for the result of the op FP_DEPTH ahead on
    its pos: a stripe of one pixel accepts one op every 3 cycles), except its first step (a
    ``first`` op reads nothing and never waits: (1, 1), all ops first and last on pos 0, runs
    at full rate). The psum stall cycles are exactly those of :func:`accept_cycles`. With one
    step per stripe one atom leaves per cycle. Latency from the last accept to the last atom:
    at most 6 cycles, FP_DEPTH + 1 more in FP16 (the words' normalization stage and the FP
    add pipeline)."""
    cfg = cfg_of(GEOM_B)
    group = cfg.mac_atomic_k if prec == PREC_INT8 else cfg.mac_atomic_k // 2
    w, h, c = 3 if stripe == 3 else 4, 2, group              # whole stripes
    rng = random.Random(stripe * 10 + steps + prec)
    ops, accs = make_layer16(rng, cfg, prec, w, h, c, stripe, (stripe,), lambda r: steps,
                             picker(cfg, prec))
    dut = Cacc(cfg, 4)
    ts, got, stalls = [], [], []

    async def control(ctx):
        ctx.set(dut.regs.d_misc_cfg.proc_precision, prec)
        ctx.set(dut.regs.d_dataout_size_0.dataout_width, w - 1)
        ctx.set(dut.regs.d_dataout_size_0.dataout_height, h - 1)
        ctx.set(dut.regs.d_dataout_size_1.dataout_channel, c - 1)
        ctx.set(dut.regs.d_clip_cfg.clip_truncate, 2)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)

    async def producer(ctx):
        await ctx.tick().repeat(2)
        await stream_put(ctx, dut.psum, ops, rng=random.Random(0), p_stall=0)

    async def consumer(ctx):
        await ctx.tick().repeat(2)
        got.extend(await stream_get(ctx, dut.sdp, w * h, rng=random.Random(0), p_stall=0,
                                    timestamps=ts))

    simulate_streams(dut, [control, producer, consumer], [],
                     [("psum", dut.psum), ("sdp", dut.sdp)],
                     processes=[count_stalls(dut.psum, stalls)])
    assert [list(a) for a in got] == expected16(cfg, prec, accs, 2, c)[0]
    last = accept_cycles(ops, prec)[-1]
    assert sum(stalls) == last - (len(ops) - 1)
    if prec != PREC_FP16 or stripe >= FP_DEPTH or steps == 1:
        assert not any(stalls)
    else:
        assert any(stalls)
    assert ts[-1] <= last + 6 + (FP_DEPTH + 1 if prec == PREC_FP16 else 0), (ts[-1], last)
    if steps == 1:
        assert ts[-1] - ts[0] == len(ts) - 1                  # one atom per cycle out


@pytest.mark.parametrize("p_in,p_out,seed", [(0, 0.5, 40), (0.2, 0.3, 41)])
def test_fp16_hazard_b(p_in, p_out, seed):
    """FP16 ops on one pos back to back (stripes of 1 and 2 pixels, 4..8 steps, and stripes
    of 3 and 4 between them) with random stalls on both streams: every word is accumulated in
    order (the hazard check holds an op while the op before it on its pos is in the FP add
    pipeline, then the result is forwarded from the pipeline's result register or read back
    from the assembly RAM), against ``cacc_add``/``cacc_to_fp32``. The producer offers ops
    back to back (p_in 0) or with gaps; ops offered within FP_DEPTH - 1 cycles of the previous
    op on their pos are held (the hazard path is taken), never taken there."""
    cfg = cfg_of(GEOM_B)
    rng = random.Random(seed)
    ops, accs = make_layer16(rng, cfg, PREC_FP16, 4, 2, cfg.mac_atomic_k // 2, 4,
                             (1, 1, 2, 3, 4), lambda r: r.randrange(4, 9),
                             picker(cfg, PREC_FP16))
    log = []
    got, sat = run_cacc16(cfg, 4, ops, prec=PREC_FP16, w=4, h=2, c=cfg.mac_atomic_k // 2,
                          truncate=0, seed=seed, p_in=p_in, p_out=p_out, psum_log=log)
    assert got == expected16(cfg, PREC_FP16, accs, 0, cfg.mac_atomic_k // 2)[0] and sat == 0
    # offered within FP_DEPTH - 1 cycles of the previous op on its pos: held (the hazard);
    # never accepted there
    accepted, held = {}, 0
    for cycle, (valid, ready, pos, first) in enumerate(log):
        window = not first and pos in accepted and cycle - accepted[pos] < FP_DEPTH
        if valid and window:
            assert not ready, cycle
            held += 1
        if valid and ready:
            accepted[pos] = cycle
    assert held >= 5, held


def test_ports_and_errors():
    cfg = cfg_of(GEOM_B)
    dut = Cacc(cfg, 16)
    assert dut.psum.payload.shape() == psum16_layout(cfg.mac_atomic_c, cfg.mac_atomic_k // 2, 16)
    assert dut.sdp.payload.shape() == data.ArrayLayout(signed(32), cfg.mac_atomic_k)
    with pytest.raises(ValueError):
        Cacc(cfg, 16, result_bits=30)


@pytest.mark.slow
def test_int8_int32_saturation_a():
    """Geometry A, INT8 in a conv16 build: 1100 full-scale steps (22-bit sums) on a stripe of
    one pixel pass 2**31 in half of the lanes (int32 saturation, counted per element); the
    34-bit sums stay exact. 10 s: slow."""
    cfg = cfg_of(GEOM_A)
    k, n, lim = cfg.mac_atomic_k, 1100, 1 << 21
    vals = [lim - 1, -lim, 1000, -77]
    ops = [{"sum": [{"i8": [vals[(2 * j) % 4], vals[(2 * j + 1) % 4]]} for j in range(k // 2)],
            "pos": 0, "first": int(i == 0), "last": int(i == n - 1)} for i in range(n)]
    acc = [n * vals[i % 4] for i in range(k)]
    got, sat = run_cacc16(cfg, 2, ops, prec=PREC_INT8, w=1, h=1, c=k, truncate=0, p_in=0.05,
                          p_out=0.3)
    exp, exp_sat = expected16(cfg, PREC_INT8, [acc], 0, k)
    assert got == exp and sat == exp_sat == k // 2
    assert got[0][:4] == [I32_MAX, I32_MIN, 1100000, -77 * 1100]
