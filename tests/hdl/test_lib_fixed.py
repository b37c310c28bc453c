"""hdl.lib.fixed against plain-Python formulas written here (not the numpy model, not the code
under test): exhaustive where the input space is small (10-bit values x every shift 0..15),
random samples plus edge values at the SDP converter's widths (49-bit product, 6-bit shift)."""
import random

import pytest
from amaranth.hdl import Module, Signal, signed, unsigned
from amaranth.sim import Simulator

from hdl.lib.fixed import (in_range, partial_products, partial_products_shapes, round_bias,
                           round_bias_shape, round_shift, saturate, shift_left_sat,
                           shift_right_round, sign_extend, sum_partial_products, truncate)


# ------------------------------------------------------------------ reference formulas (Python)

def ref_round_shift(x: int, s: int, w: int) -> int:
    """x / 2**s rounded half away from zero; 0 when s >= w (the documented NVIDIA rule)."""
    if s >= w:
        return 0
    q, r = divmod(abs(x), 1 << s)          # magnitude quotient and remainder
    if 2 * r >= (1 << s) and s > 0:        # at or above one half: away from zero
        q += 1
    return q if x >= 0 else -q


def ref_clamp(x: int, bits: int, is_signed: bool) -> int:
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if is_signed else (0, (1 << bits) - 1)
    return min(max(x, lo), hi)


def ref_sext(raw: int, bits: int) -> int:
    raw &= (1 << bits) - 1
    return raw - (1 << bits) if raw >= 1 << (bits - 1) else raw


def _values(shape):
    s = shape
    return range(-(1 << (s.width - 1)), 1 << (s.width - 1)) if s.signed else range(1 << s.width)


# ------------------------------------------------------------------ evaluation harness

def evaluate(inputs: dict, outputs: dict, vectors, comb=()):
    """Combinational evaluation in the Amaranth simulator.

    ``inputs``: name -> Signal; ``outputs``: name -> (expression, expected shape);
    ``vectors``: iterable of dicts name -> int; ``comb``: extra combinational statements
    (intermediate signals). Returns a list of dicts name -> int (the outputs read back as their
    shapes' integers), one per vector."""
    m = Module()
    m.d.comb += list(comb)
    sigs = {}
    for name, (expr, shape) in outputs.items():
        assert expr.shape() == shape, (name, expr.shape(), shape)
        sigs[name] = Signal(shape, name=f"out_{name}")
        m.d.comb += sigs[name].eq(expr)
    results = []

    async def bench(ctx):
        for vec in vectors:
            for k, v in vec.items():
                ctx.set(inputs[k], v)
            results.append({k: ctx.get(s) for k, s in sigs.items()})

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    return results


# ------------------------------------------------------------------ shift_right_round / truncate

@pytest.mark.parametrize("shape", [signed(10), unsigned(9)])
def test_shift_right_round_exhaustive(shape):
    """Every value x every variable shift 0..15 (a 4-bit shift field, so shifts >= the width
    too), and every fixed (int) shift 0..12, with truncation to 6 signed / unsigned bits."""
    w = shape.width
    x, sh = Signal(shape), Signal(4)
    outs = {"var": (shift_right_round(x, sh), shape),
            "t6": (truncate(x, sh, 6), signed(6) if shape.signed else unsigned(6)),
            "t6u": (truncate(x, sh, 6, signed=False), unsigned(6)),
            "t6s": (truncate(x, sh, 6, signed=True), signed(6))}
    for s in range(13):
        outs[f"fix{s}"] = (shift_right_round(x, s), shape)
    vecs = [{"x": v, "sh": s} for v in _values(shape) for s in range(16)]
    res = evaluate({"x": x, "sh": sh}, outs, vecs)
    for vec, r in zip(vecs, res):
        v, s = vec["x"], vec["sh"]
        want = ref_round_shift(v, s, w)
        assert r["var"] == want, (v, s)
        assert r["t6"] == ref_clamp(want, 6, shape.signed), (v, s)
        assert r["t6u"] == ref_clamp(want, 6, False), (v, s)
        assert r["t6s"] == ref_clamp(want, 6, True), (v, s)
        if s < 13:
            assert r[f"fix{s}"] == want, (v, s)


def test_round_half_away_from_zero_examples():
    """The rule spelled out on hand-picked halves (v1_ias_precision.rst "round half away from
    zero") and NVIDIA's "shift >= width gives 0" (also for the most negative value)."""
    x, sh = Signal(signed(8)), Signal(4)
    cases = {(5, 1): 3, (-5, 1): -3, (-3, 1): -2, (3, 1): 2, (-9, 2): -2, (-10, 2): -3,
             (-11, 2): -3, (6, 2): 2, (-6, 2): -2, (-128, 7): -1, (-128, 8): 0, (-128, 15): 0,
             (127, 7): 1, (127, 8): 0, (-64, 7): -1, (-63, 7): 0, (64, 7): 1}
    vecs = [{"x": v, "sh": s} for v, s in cases]
    res = evaluate({"x": x, "sh": sh}, {"y": (shift_right_round(x, sh), signed(8))}, vecs)
    assert [r["y"] for r in res] == list(cases.values())


def test_converter_widths_random():
    """The SDP converter's widths: a 49-bit signed product, a 6-bit shift (0..63, so also >= 49),
    truncated to int8; random values, every shift, plus the extremes."""
    rng = random.Random(6)
    w = 49
    x, sh = Signal(signed(w)), Signal(6)
    edge = [-(1 << 48), (1 << 48) - 1, -1, 0, 1, -(1 << 47), 1 << 47, 255, -256, -257, 383]
    vals = edge + [rng.randrange(-(1 << 48), 1 << 48) >> rng.randrange(49) for _ in range(300)]
    vecs = [{"x": v, "sh": s} for v in vals for s in range(64)]
    res = evaluate({"x": x, "sh": sh},
                   {"y": (truncate(x, sh, 8), signed(8)), "r": (shift_right_round(x, sh), signed(w))},
                   vecs)
    for vec, r in zip(vecs, res):
        want = ref_round_shift(vec["x"], vec["sh"], w)
        assert r["r"] == want, vec
        assert r["y"] == ref_clamp(want, 8, True), vec


@pytest.mark.parametrize("shape", [signed(49), signed(8), unsigned(8)])
def test_round_bias_then_shift_through_a_register_width(shape):
    """The two halves of shift_right_round as a pipeline uses them: round_bias's result kept
    in a signal of its stated width (w + 3 signed, w + 2 unsigned: the stage registers of the
    SDP/CDP converters), then round_shift; random values (every value for 8 bits) and every
    6-bit shift."""
    rng = random.Random(7)
    w = shape.width
    x, sh = Signal(shape), Signal(6)
    biased = round_bias(x, sh)
    mid_shape = signed(w + 3) if shape.signed else unsigned(w + 2)
    assert biased.shape() == mid_shape
    assert round_bias_shape(shape) == mid_shape
    mid = Signal(mid_shape)
    vals = list(_values(shape)) if w <= 8 else \
        [rng.randrange(-(1 << (w - 1)), 1 << (w - 1)) >> rng.randrange(w) for _ in range(200)]
    vecs = [{"x": v, "sh": s} for v in vals for s in range(64)]
    res = evaluate({"x": x, "sh": sh}, {"y": (round_shift(mid, sh, shape), shape)}, vecs,
                   comb=[mid.eq(biased)])
    for vec, r in zip(vecs, res):
        assert r["y"] == ref_round_shift(vec["x"], vec["sh"], w), vec


# ------------------------------------------------------------------ partial products

@pytest.mark.parametrize("a_shape, b_shape, piece, n", [
    (signed(33), signed(16), 17, 2),      # SDP X multiplier's operand widths
    (signed(41), signed(17), 17, 3),      # CDP LUT interpolation (hdl/cdp/core.py)
    (unsigned(20), signed(9), 8, 3),
    (signed(12), unsigned(5), 4, 3),
    (unsigned(7), unsigned(6), 17, 1),
])
def test_partial_products_through_registers_of_their_shapes(a_shape, b_shape, piece, n):
    """a * b as partial_products kept in signals of partial_products_shapes (the pipeline
    register), then sum_partial_products: equal to the Python product for the extreme values
    of both operands and random ones; each part fits an 18 x 18 signed multiplier at piece 17."""
    rng = random.Random(11)
    a, b = Signal(a_shape), Signal(b_shape)
    shapes = partial_products_shapes(a_shape, b_shape, piece)
    parts = partial_products(a, b, piece)
    assert len(parts) == len(shapes) == n
    assert [p.shape() for p in parts] == shapes
    if piece == 17:
        assert all(sh.width <= 36 for sh in shapes)
    regs = [Signal(sh) for sh in shapes]
    full = Signal(signed(a_shape.width + b_shape.width + 1))

    def edge(shape):
        v = _values(shape)
        return [v[0], v[0] + 1, -1 if shape.signed else 1, 0, v[-1] - 1, v[-1]]
    vecs = [{"a": x, "b": y} for x in edge(a_shape) for y in edge(b_shape)]
    vecs += [{"a": rng.choice(_values(a_shape)), "b": rng.choice(_values(b_shape))}
             for _ in range(300)]
    res = evaluate({"a": a, "b": b}, {"p": (full, full.shape())}, vecs,
                   comb=[r.eq(v) for r, v in zip(regs, parts)]
                   + [full.eq(sum_partial_products(regs, piece))])
    for vec, r in zip(vecs, res):
        assert r["p"] == vec["a"] * vec["b"], vec


def test_partial_products_piece_must_be_positive():
    with pytest.raises(ValueError, match="piece"):
        partial_products(Signal(8), Signal(8), 0)


# ------------------------------------------------------------------ saturate

@pytest.mark.parametrize("shape", [signed(10), unsigned(10)])
def test_saturate_exhaustive(shape):
    """Every 10-bit value clamped to 1..12 signed bits and 1..11 unsigned bits."""
    x = Signal(shape)
    outs = {}
    for b in range(1, 13):
        outs[f"s{b}"] = (saturate(x, b, signed=True), signed(b))
    for b in range(1, 12):
        outs[f"u{b}"] = (saturate(x, b, signed=False), unsigned(b))
    outs["keep"] = (saturate(x, 7), signed(7) if shape.signed else unsigned(7))
    vecs = [{"x": v} for v in _values(shape)]
    for vec, r in zip(vecs, evaluate({"x": x}, outs, vecs)):
        v = vec["x"]
        for b in range(1, 13):
            assert r[f"s{b}"] == ref_clamp(v, b, True), (v, b)
        for b in range(1, 12):
            assert r[f"u{b}"] == ref_clamp(v, b, False), (v, b)
        assert r["keep"] == ref_clamp(v, 7, shape.signed)


# ------------------------------------------------------------------ shift_left_sat

@pytest.mark.parametrize("shape", [signed(7), unsigned(7)])
def test_shift_left_sat_exhaustive(shape):
    """Every 7-bit value x every variable shift 0..15 into 8 and 12 bits, and fixed shifts."""
    x, sh = Signal(shape), Signal(4)
    outs = {"v8": (shift_left_sat(x, sh, 8), signed(8) if shape.signed else unsigned(8)),
            "v12s": (shift_left_sat(x, sh, 12, signed=True), signed(12)),
            "v12u": (shift_left_sat(x, sh, 12, signed=False), unsigned(12))}
    for s in (0, 1, 3, 7, 12, 20):
        outs[f"f{s}"] = (shift_left_sat(x, s, 8), signed(8) if shape.signed else unsigned(8))
    vecs = [{"x": v, "sh": s} for v in _values(shape) for s in range(16)]
    for vec, r in zip(vecs, evaluate({"x": x, "sh": sh}, outs, vecs)):
        v, s = vec["x"], vec["sh"]
        assert r["v8"] == ref_clamp(v << s, 8, shape.signed), (v, s)
        assert r["v12s"] == ref_clamp(v << s, 12, True), (v, s)
        assert r["v12u"] == ref_clamp(v << s, 12, False), (v, s)
        if s == 0:
            for f in (0, 1, 3, 7, 12, 20):
                assert r[f"f{f}"] == ref_clamp(v << f, 8, shape.signed), (v, f)


def test_shift_left_sat_operand_widths_random():
    """The SDP ALU operand shifter's widths: a 16-bit signed operand shifted by a 6-bit field
    (0..63) into 32 signed bits; random operands and every shift, plus the extremes."""
    rng = random.Random(9)
    x, sh = Signal(signed(16)), Signal(6)
    vals = [-32768, 32767, -1, 0, 1, 2, -2] + [rng.randrange(-32768, 32768) for _ in range(150)]
    vecs = [{"x": v, "sh": s} for v in vals for s in range(64)]
    res = evaluate({"x": x, "sh": sh}, {"y": (shift_left_sat(x, sh, 32), signed(32))}, vecs)
    for vec, r in zip(vecs, res):
        assert r["y"] == ref_clamp(vec["x"] << vec["sh"], 32, True), vec


# ------------------------------------------------------------------ sign_extend

def test_sign_extend_exhaustive():
    """Every 10-bit raw word read as a bits-wide two's complement number, bits 1..10, also
    extended to 14 bits."""
    raw = Signal(10)
    outs = {}
    for b in range(1, 11):
        outs[f"b{b}"] = (sign_extend(raw, b), signed(b))
        outs[f"w{b}"] = (sign_extend(raw, b, 14), signed(14))
    vecs = [{"raw": v} for v in range(1 << 10)]
    for vec, r in zip(vecs, evaluate({"raw": raw}, outs, vecs)):
        for b in range(1, 11):
            assert r[f"b{b}"] == ref_sext(vec["raw"], b)
            assert r[f"w{b}"] == ref_sext(vec["raw"], b)


def test_argument_errors():
    x = Signal(signed(8))
    with pytest.raises(ValueError):
        shift_right_round(x, -1)
    with pytest.raises(TypeError):
        shift_right_round(x, Signal(signed(4)))
    with pytest.raises(ValueError):
        saturate(x, 0)
    with pytest.raises(ValueError):
        sign_extend(x, 9)
    with pytest.raises(ValueError):
        sign_extend(x, 4, 3)
    with pytest.raises(ValueError):
        shift_left_sat(x, 2, 0)


def test_floor_log2():
    """floor(log2 v) for every 9-bit value against Python's int.bit_length."""
    from amaranth.hdl import Module, Signal
    from amaranth.sim import Simulator
    from hdl.lib.fixed import floor_log2
    m = Module()
    v = Signal(9)
    lg = floor_log2(m, v, 9)
    sim = Simulator(m)
    got = {}

    async def bench(ctx):
        for x in range(512):
            ctx.set(v, x)
            got[x] = ctx.get(lg)
    sim.add_testbench(bench)
    sim.run()
    assert got == {x: max(x.bit_length() - 1, 0) for x in range(512)}


@pytest.mark.parametrize("shape", [signed(6), unsigned(6)])
def test_in_range_exhaustive(shape):
    """in_range of every 6-bit value against 1..8 signed and unsigned bits (the formula)."""
    x = Signal(shape)
    outs = {f"{'s' if sg else 'u'}{b}": (in_range(x, b, signed=sg), unsigned(1))
            for b in range(1, 9) for sg in (True, False)}
    vecs = [{"x": v} for v in _values(shape)]
    for vec, r in zip(vecs, evaluate({"x": x}, outs, vecs)):
        v = vec["x"]
        for b in range(1, 9):
            assert r[f"s{b}"] == (-(1 << (b - 1)) <= v < (1 << (b - 1))), (v, b)
            assert r[f"u{b}"] == (0 <= v < (1 << b)), (v, b)
    with pytest.raises(ValueError, match="bits"):
        in_range(x, 0)
