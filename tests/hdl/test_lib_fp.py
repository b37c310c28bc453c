"""hdl.lib.fp against exact rational arithmetic (the plain formulas of tests/model/test_fp.py:
a value rounded to 11 significant bits, ties to even, after each operation; numpy's float16
for fp17 -> fp16), not against the model's numpy implementation: fp16 -> fp17 on every fp16
pattern, fp17 -> fp16 on every exponent with random mantissas, add and multiply on random
operands of near, far and extreme exponents, exact cancellations, zeros and NaNs."""
from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from hdl.lib.fp import fp_add, fp_mul, fp_narrow, fp_widen
from model.test_fp import ref_add17 as ref_add, ref_mul17 as ref_mul, round17, value16, value17

MAX17 = 0xFBFF


def evaluate(build, vectors, width_in=17, width_out=17):
    """Run combinational ``build(m, a, b) -> Value`` on (a, b) vectors; returns the outputs."""
    m = Module()
    a, b = Signal(width_in, name="a"), Signal(width_in, name="b")
    out = Signal(width_out, name="out")
    m.d.comb += out.eq(build(m, a, b))
    got = []

    async def bench(ctx):
        for va, vb in vectors:
            ctx.set(a, va)
            ctx.set(b, vb)
            got.append(ctx.get(out))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    return got


def operands(rng, n):
    out = []
    for _ in range(n):
        def one():
            r = rng.random()
            if r < 0.03:
                return rng.choice((0, 1 << 16, MAX17, MAX17 | 1 << 16, (63 << 10) | rng.randint(1, 1023)))
            spread = rng.choice((2, 12, 30))
            e = min(max(31 + rng.randint(-spread, spread), 1), 62)
            return (rng.getrandbits(1) << 16) | (e << 10) | rng.getrandbits(10)
        a, b = one(), one()
        if rng.random() < 0.1:                     # near the smallest exponent: underflow
            a = (rng.getrandbits(1) << 16) | (rng.randint(1, 3) << 10) | rng.getrandbits(10)
            b = ((a >> 16 ^ 1) << 16) | (rng.randint(1, 3) << 10) | rng.getrandbits(10)
        if rng.random() < 0.05:
            b = a ^ (1 << 16)                      # exact cancellation
        out.append((a, b))
    return out


@pytest.mark.parametrize("seed", range(2))
def test_fp17_add_mul(seed):
    rng = random.Random(seed)
    vec = operands(rng, 3000)
    got_add = evaluate(lambda m, a, b: fp_add(m, a, b, 6, 10), vec)
    got_mul = evaluate(lambda m, a, b: fp_mul(m, a, b, 6, 10), vec)
    for (a, b), s, p in zip(vec, got_add, got_mul):
        assert s == ref_add(a, b), ("add", hex(a), hex(b), hex(s), hex(ref_add(a, b)))
        assert p == ref_mul(a, b), ("mul", hex(a), hex(b), hex(p), hex(ref_mul(a, b)))


def test_fp16_to_fp17_every_pattern():
    vec = [(x, 0) for x in range(1 << 16)]
    got = evaluate(lambda m, a, b: fp_widen(m, a[:16], 5, 6, 10), vec)
    for (x, _), y in zip(vec, got):
        s, e, mant = x >> 15, (x >> 10) & 31, x & 0x3FF
        if e == 31:
            want = (s << 16) | ((63 << 10) | mant if mant else MAX17)
        else:
            want = round17(value16(x), s)
        assert y == want, (hex(x), hex(y), hex(want))


def test_fp17_to_fp16_every_exponent():
    rng = random.Random(5)
    vec = [((s << 16) | (e << 10) | m, 0) for e in range(64) for s in (0, 1)
           for m in [0, 1, 0x200, 0x3FF] + [rng.getrandbits(10) for _ in range(40)]]
    got = evaluate(lambda m, a, b: fp_narrow(m, a, 6, 5, 10), vec)
    for (x, _), y in zip(vec, got):
        s, e, mant = x >> 16, (x >> 10) & 63, x & 0x3FF
        if e == 63 and mant:
            want = (s << 15) | 0x7C00 | mant
        elif abs(value17(x)) >= 65536:
            want = (s << 15) | 0x7BFF
        else:
            want = int(np.float16(float(abs(value17(x)))).view(np.uint16)) | (s << 15)
        assert y == want, (hex(x), hex(y), hex(want))


def test_fp32_add_mul_match_ieee_on_normal_results():
    """At fp32's widths (SDP): numpy's binary32 sum and product wherever the exact result is
    a normal finite number (there the hardware's rounding is IEEE's), a's sign on a cancellation."""
    rng = np.random.default_rng(7)
    n = 1500
    a = (rng.standard_normal(n) * 2.0 ** rng.integers(-40, 40, n)).astype(np.float32)
    b = (rng.standard_normal(n) * 2.0 ** rng.integers(-40, 40, n)).astype(np.float32)
    b[:50] = -a[:50]
    vec = list(zip(a.view(np.uint32).tolist(), b.view(np.uint32).tolist()))

    def run(op):
        got = evaluate(lambda m, x, y: op(m, x, y, 8, 23), vec, 32, 32)
        return np.array(got, np.uint64).astype(np.uint32)

    s, p = a + b, a * b
    ok_s = (np.abs(s) >= 2.0 ** -126) & np.isfinite(s)
    ok_p = (np.abs(p) >= 2.0 ** -126) & np.isfinite(p)
    got_s, got_p = run(fp_add), run(fp_mul)
    assert np.array_equal(got_s[ok_s], s[ok_s].view(np.uint32))
    assert np.array_equal(got_p[ok_p], p[ok_p].view(np.uint32))
    assert np.array_equal(got_s[:50], a[:50].view(np.uint32) & 0x80000000)


# ---- fp17 <-> fp32 and fractions (nv_full's CDP/SDP LUTs in FP16) -------------------------

from hdl.lib.fp import fp_extend, fp_of_fraction, fp_shorten  # noqa: E402
from model.test_fp import ref_fp32_to_fp17  # noqa: E402


def test_fp17_to_fp32_every_pattern():
    vec = [(x, 0) for x in range(1 << 17)]
    got = evaluate(lambda m, a, b: fp_extend(m, a, 6, 10, 8, 23), vec, 17, 32)
    for (x, _), y in zip(vec, got):
        s, e, mant = x >> 16, (x >> 10) & 63, x & 0x3FF
        if e == 63:
            want = (s << 31) | ((0xFF << 23) | mant if mant else 0x7F7FFFFF)
        elif e == 0 and mant == 0:
            want = s << 31
        else:
            want = int(np.float32(float(value17(x))).view(np.uint32)) | (s << 31)
        assert y == want, (hex(x), hex(y), hex(want))


def test_fp32_to_fp17_rounding():
    rng = random.Random(8)
    xs = [rng.getrandbits(32) for _ in range(2000)]
    for e in list(range(84, 99)) + list(range(155, 162)) + [0, 1, 127, 254, 255]:
        xs += [(rng.getrandbits(1) << 31) | (e << 23) | rng.getrandbits(23) for _ in range(40)]
        xs += [(e << 23) | (0x7FE000 + rng.randrange(0x2000)) for _ in range(15)]
        xs += [(e << 23) | (k << 13) | 0x1000 for k in (0, 1, 2, 3)]
    got = evaluate(lambda m, a, b: fp_shorten(m, a, 8, 23, 6, 10), [(x, 0) for x in xs], 32, 17)
    for x, y in zip(xs, got):
        assert y == ref_fp32_to_fp17(x), (hex(x), hex(y), hex(ref_fp32_to_fp17(x)))


@pytest.mark.parametrize("bits", [16, 35])
def test_fraction_to_fp17(bits):
    rng = random.Random(bits)
    fs = list(range(1 << 16)) if bits == 16 else \
        [rng.getrandbits(rng.randint(1, 35)) for _ in range(6000)] + list(range(100)) + [(1 << 35) - 1]
    got = evaluate(lambda m, a, b: fp_of_fraction(m, a, 6, 10), [(f, 0) for f in fs], bits, 17)
    for f, y in zip(fs, got):
        from fractions import Fraction
        v = Fraction(f, 1 << bits)
        want = 0 if v < Fraction(1, 1 << 30) else round17(v)
        assert y == want, (f, hex(y), hex(want))


# ---- fp_add in registered phases (pipelines put registers between them) ----------------------

from hdl.lib.fp import (fp_add_align, fp_add_finish, fp_add_normalise, fp_add_round,  # noqa: E402
                        fp_add_sum)


def staged_add(vectors, ebits, mbits, split_finish=False):
    """``fp_add_align`` -> register -> ``fp_add_sum`` -> register -> ``fp_add_finish`` ->
    register (with ``split_finish``, ``fp_add_normalise`` -> register -> ``fp_add_round`` ->
    register instead of the finish), one (a, b) pair per cycle in the simulator; returns the
    outputs in order."""
    bits = 1 + ebits + mbits
    m = Module()
    a, b = Signal(bits, name="a"), Signal(bits, name="b")
    al = fp_add_align(m, a, b, ebits, mbits)
    al_q = Signal.like(al, name="al_q")
    sm = fp_add_sum(m, al_q, ebits, mbits)
    sm_q = Signal.like(sm, name="sm_q")
    out = Signal(bits, name="out")
    m.d.sync += [al_q.eq(al), sm_q.eq(sm)]
    if split_finish:
        nm = fp_add_normalise(m, sm_q, ebits, mbits)
        nm_q = Signal.like(nm, name="nm_q")
        m.d.sync += [nm_q.eq(nm), out.eq(fp_add_round(m, nm_q, ebits, mbits))]
    else:
        m.d.sync += out.eq(fp_add_finish(m, sm_q, ebits, mbits))
    return play_pipeline(m, a, b, out, vectors, 3 if split_finish else 2)


def play_pipeline(m, a, b, out, vectors, lat):
    """Simulate ``m``, feeding one ``(a, b)`` pair of ``vectors`` per cycle; returns ``out``
    ``lat`` cycles after each pair, in order."""
    got = []

    async def bench(ctx):
        for k in range(len(vectors) + lat):
            if k < len(vectors):
                ctx.set(a, vectors[k][0])
                ctx.set(b, vectors[k][1])
            await ctx.tick()
            if k >= lat:
                got.append(ctx.get(out))

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return got


def edge_operands(rng, ebits, mbits, n):
    """Random pairs of near and far exponents, plus zeros, the largest finite value, the
    infinity pattern, NaNs, the smallest exponents, exact cancellations and equal operands."""
    top, sgn = (1 << ebits) - 1, 1 << (ebits + mbits)
    edges = [0, 1 << mbits, ((top - 1) << mbits) | ((1 << mbits) - 1), top << mbits,
             (top << mbits) | 1, (top << mbits) | rng.getrandbits(mbits) | 1]
    edges += [e | sgn for e in edges]
    out = [(x, y) for x in edges for y in edges]
    for _ in range(n):
        ea = rng.randint(1, top - 1)
        eb = min(max(ea + rng.choice((0, 1, -1, 3, -7, mbits + 2, -(mbits + 3), 40)), 1), top - 1)
        x = (rng.getrandbits(1) * sgn) | (ea << mbits) | rng.getrandbits(mbits)
        y = (rng.getrandbits(1) * sgn) | (eb << mbits) | rng.getrandbits(mbits)
        r = rng.random()
        if r < 0.05:
            y = x ^ sgn
        elif r < 0.1:
            y = x
        elif r < 0.15:
            x = rng.choice(edges)
        out.append((x, y))
    return out


@pytest.mark.parametrize("ebits,mbits", [(6, 10), (8, 23)])
def test_fp_add_registered_phases_equal_fp_add(ebits, mbits):
    vec = edge_operands(random.Random(ebits), ebits, mbits, 3000)
    bits = 1 + ebits + mbits
    want = evaluate(lambda m, a, b: fp_add(m, a, b, ebits, mbits), vec, bits, bits)
    assert staged_add(vec, ebits, mbits) == want
    assert staged_add(vec, ebits, mbits, split_finish=True) == want
    if (ebits, mbits) == (6, 10):                # the exact reference, infinity patterns aside
        inf = lambda x: x & 0xFFFF == 0xFC00       # noqa: E731 (ref_add reads them as MAX17)
        for (a, b), s in zip(vec, want):
            if not (inf(a) or inf(b)):
                assert s == ref_add(a, b), (hex(a), hex(b), hex(s), hex(ref_add(a, b)))


# ---- fp_mul in registered phases -------------------------------------------------------------

import fractions  # noqa: E402

from hdl.lib.fp import fp_mul_finish, fp_mul_product  # noqa: E402


def staged_mul(vectors, ebits, mbits):
    """``fp_mul_product`` -> register -> ``fp_mul_finish`` -> register, one (a, b) pair per
    cycle in the simulator; returns the outputs in order."""
    bits = 1 + ebits + mbits
    m = Module()
    a, b = Signal(bits, name="a"), Signal(bits, name="b")
    pr = fp_mul_product(m, a, b, ebits, mbits)
    pr_q = Signal.like(pr, name="pr_q")
    out = Signal(bits, name="out")
    m.d.sync += [pr_q.eq(pr), out.eq(fp_mul_finish(m, pr_q, ebits, mbits))]
    return play_pipeline(m, a, b, out, vectors, 1)


def ref_mul_exact(a, b, ebits, mbits):
    """The exact product of ``a`` and ``b`` (``ebits``/``mbits``, a hidden one on every
    pattern but the zeros, the exponent-all-ones-zero-mantissa pattern read as its number)
    rounded to ``mbits + 1`` significant bits, ties to even; the largest finite value above
    the range, a zero signed as the product below; a NaN operand returned, ``a``'s first."""
    bias, top, sgn = (1 << (ebits - 1)) - 1, (1 << ebits) - 1, 1 << (ebits + mbits)

    def fields(x):
        return x >> (ebits + mbits) & 1, x >> mbits & top, x & ((1 << mbits) - 1)

    for x in (a, b):
        if fields(x)[1] == top and fields(x)[2]:
            return x
    s = fields(a)[0] ^ fields(b)[0]
    (_, ea, ma), (_, eb, mb) = fields(a), fields(b)
    if not (ea or ma) or not (eb or mb):
        return s * sgn
    v = fractions.Fraction((ma | 1 << mbits) * (mb | 1 << mbits), 1 << 2 * mbits) * \
        fractions.Fraction(2) ** (ea + eb - 2 * bias)
    e = 0
    while v >= 2:
        v, e = v / 2, e + 1
    while v < 1:
        v, e = v * 2, e - 1
    q = v * (1 << mbits)
    fl = int(q)
    r = q - fl
    if r > fractions.Fraction(1, 2) or (r == fractions.Fraction(1, 2) and fl & 1):
        fl += 1
    if fl == 2 << mbits:
        fl, e = 1 << mbits, e + 1
    if e + bias >= top:
        return s * sgn | ((top - 1) << mbits) | ((1 << mbits) - 1)
    if e + bias <= 0:
        return s * sgn
    return s * sgn | ((e + bias) << mbits) | (fl & ((1 << mbits) - 1))


@pytest.mark.parametrize("ebits,mbits", [(6, 10), (8, 23)])
def test_fp_mul_registered_phases_equal_fp_mul(ebits, mbits):
    """Random and edge pairs (zeros, the largest finite value, the infinity pattern, NaNs,
    exponents that overflow or underflow): ``fp_mul``, its two registered phases and the exact
    reference agree (and ``ref_mul`` at fp17)."""
    rng = random.Random(100 + ebits)
    vec = edge_operands(rng, ebits, mbits, 3000)
    bias, top = (1 << (ebits - 1)) - 1, (1 << ebits) - 1
    for _ in range(1500):                        # exponent sums near the range's ends
        ea = rng.randint(1, top - 1)
        eb = min(max(rng.choice((bias, 2 * bias + 1, bias - 1, bias + 1, 2 * bias)) - ea
                     + rng.randint(-2, 2), 0), top)
        vec.append(tuple(rng.getrandbits(1) << (ebits + mbits) | e << mbits
                         | rng.getrandbits(mbits) for e in (ea, eb)))
    bits = 1 + ebits + mbits
    want = evaluate(lambda m, a, b: fp_mul(m, a, b, ebits, mbits), vec, bits, bits)
    assert staged_mul(vec, ebits, mbits) == want
    for (a, b), p in zip(vec, want):
        r = ref_mul_exact(a, b, ebits, mbits)
        assert p == r, (hex(a), hex(b), hex(p), hex(r))
        if (ebits, mbits) == (6, 10):
            assert p == ref_mul(a, b), (hex(a), hex(b), hex(p), hex(ref_mul(a, b)))
