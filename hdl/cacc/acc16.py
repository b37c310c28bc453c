"""CACC's FP16 arithmetic (docs/conv16.md "CACC"; NVIDIA's NV_NVDLA_CACC_CALC_fp_48b,
observed facts as verif/model/conv_fp16.py ``cacc_add``/``cacc_to_fp32`` state them): the FP48
accumulator of one output element, the CMAC word it adds, and its conversion to fp32.

Numbers. Every value is an integer in units of 2**-50 (a CMAC word is ``S * 2**(4T)`` in those
units, ``S`` signed(32 + log2(atomic_c)), ``T`` 0..15; the model: ``S << 4T``).

* :data:`FP48` (48 bits, NVIDIA's FP48 width): ``mag`` (39 bits), ``exp`` (7 bits), ``nan``,
  ``sign``; the value is ``(-1)**sign * mag * 2**exp`` with ``mag`` in [2**38, 2**39) when
  ``exp`` > 0 and any ``mag`` < 2**39 when ``exp`` = 0 (the integers below 2**39 are exact,
  like denormals). This holds exactly every number of at most 39 significant bits from 0 to
  below 2**166, so every value ``_round_mag(v, 39)`` takes. When ``nan``: the first NaN word's
  fp16 sign in ``sign`` and payload in ``mag[0:10]``.
* Range argument for the 7-bit exponent: a word is at most 2**(37 + 4*15) = 2**97 (T is 4 bits;
  CMAC's reachable T is at most 14), so after N steps ``|acc| < N * 2**97`` and its exponent
  is below log2(N) + 59: 127 needs N > 2**68 steps, while a layer has at most
  ceil(8192/64) * 32 * 32 = 2**17 steps per output. The fp32 result then has an exponent of
  at most 127 + 39 + 76 = 242 and at least 77 (the value 1): no fp32 overflow or denormal.
* :data:`FPW` (49 bits): a CMAC word normalized before the accumulation loop (off the
  read-modify-write path): ``mag`` (39 bits, bit 38 set, or 0 for a zero word), ``exp``
  (signed(8): ``4T - 38 + floor(log2|S|)``, in -38..59; -64 for a zero word), ``sign``,
  ``nan`` (then ``mag[0:10]``/``sign`` as in FP48).

The add (:func:`fp48_add`): ``round39(acc + word)``, rounded to 39 significant bits to nearest,
ties away from zero, exact otherwise; a NaN accumulator stays, a NaN word makes the
accumulator that NaN. It is one combinational block (the accumulation loop of CACC's assembly
stage must close in one cycle for one psum per cycle on a stripe of one pixel) built as the
classic two paths:

* far path (effective addition, or exponents two or more apart, or a result that needs no
  left shift): the operand with the larger exponent X keeps its 39 bits, three bits below
  them (guard, round, sticky) receive the other operand Y shifted right by the exponent
  difference with every shifted-out bit ORed into the sticky bit; ``r = |X +- Y|`` (43 bits)
  then has its leading one in bit 40, 41 or 42 (X is normalized), or X has exponent 0 and
  everything is exact; the result drops 2, 3 or 4 bits, rounding half up on the magnitude
  (the sticky bit keeps every tie exact: an odd ``r`` is never a rounding boundary), with a
  carry out of 39 bits renormalized;
* close path (effective subtraction with exponents at most one apart, both >= 0): the exact
  difference, normalized by its leading zeros but never below exponent 0; used when it has at
  most 39 bits (otherwise the far path's rounding is needed and right).

Critical path (far path): exponent difference, operand swap, a 6-level right shift with its
sticky OR, a 44-bit add/subtract and its sign, a 3-way select and a 40-bit increment, then one
2:1 mux (NaN and close results are selected before it). This closes CACC's read-modify-write
loop in one cycle, which one psum per cycle on a stripe of one pixel needs; it is the unit's
longest path. Measured (``hdl.synth.place_and_route``: ECP5 LFE5U-85F-8, out of context) on
one lane as a register loop (acc register -> ``first`` mux -> :class:`Fp48Add` -> acc
register): 46.0 MHz (21.8 ns), 2,026 LUT4 per lane. In CACC the loop also passes the
assembly RAM's read and its write-forwarding mux, so the unit is slower still: an fmax risk
far below 100 MHz. Ways out, not built: compound rounding (add the three possible rounding
constants in parallel adders instead of the increment after the select; estimated, not
measured: a few ns for about 1.5k LUT4 more per lane), or a two-cycle loop that stalls only
an FP16 op on the ``pos`` the previous op wrote (breaks one psum per cycle on stripes of one
pixel).
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["FP48", "FPW", "FP32N", "fp_word_normalize", "FpWordNormalize", "fp48_add", "Fp48Add",
           "fp48_normalize", "fp48_pack", "MAG_BITS", "EXP_BITS"]

MAG_BITS = 39          # significant bits of NVIDIA's FP48 accumulator after each rounding
EXP_BITS = 7           # exponent of the magnitude (units of 2**-50), see the range argument
ZERO_WORD_EXP = -64    # exponent of a zero word (below any other: it never takes the close path)

FP48 = data.StructLayout({"mag": MAG_BITS, "exp": EXP_BITS, "nan": 1, "sign": 1})
FPW = data.StructLayout({"mag": MAG_BITS, "exp": signed(8), "nan": 1, "sign": 1})
#: :func:`fp48_normalize`'s result: 24 fp32 significant bits and the rounding bit below them
FP32N = data.StructLayout({"top": 25, "exp": 8, "sign": 1, "zero": 1, "nan": 1, "payload": 10})


def _leading_zeros(m, value: Value, name: str) -> Signal:
    """Leading zeros of unsigned ``value`` in its width (its width for 0): a priority encoder."""
    n = len(value)
    z = Signal(range(n + 1), name=name)
    m.d.comb += z.eq(n)
    for b in range(n):                  # the highest set bit wins (last assignment)
        with m.If(value[b]):
            m.d.comb += z.eq(n - 1 - b)
    return z


def fp_word_normalize(m, fp, name: str = "fpw") -> data.View:
    """One CMAC FP16 word (``cell_layout(atomic_c).fp``: ``s`` signed(32 + log2 C), ``t`` 4,
    ``nan``, ``nan_bits`` 16) as an :data:`FPW`: ``|s|`` shifted left to bit 38, exponent
    ``4t - 38 + floor(log2|s|)``; a NaN keeps ``nan_bits[15]`` and ``nan_bits[0:10]``.
    Comb logic added to ``m``. Raises ValueError when ``s`` has more than 39 bits."""
    s = Value.cast(fp.s)
    sb = len(s)
    if sb > MAG_BITS:
        raise ValueError(f"CMAC word of {sb} bits: at most {MAG_BITS} (atomic_c <= 128)")
    neg = s[-1]
    a = Signal(sb, name=f"{name}_abs")
    m.d.comb += a.eq(Mux(neg, -s, s))             # |-2**(sb-1)| = 2**(sb-1) fits sb bits
    lz = _leading_zeros(m, a, f"{name}_lz")
    res = Signal(FPW, name=name)
    shifted = (a << lz)[:sb]
    m.d.comb += [
        res.mag.eq(Cat(Const(0, MAG_BITS - sb), shifted)),
        res.exp.eq(Mux(a == 0, ZERO_WORD_EXP,
                       (fp.t << 2) - lz - (MAG_BITS - sb))),
        res.sign.eq(neg),
        res.nan.eq(fp.nan),
    ]
    with m.If(fp.nan):
        m.d.comb += [res.mag.eq(fp.nan_bits[:10]), res.sign.eq(fp.nan_bits[15])]
    return res


class FpWordNormalize(wiring.Component):
    """:func:`fp_word_normalize` as its own (combinational) module, one per MAC cell (see
    :class:`Fp48Add` on operand isolation).

    Ports: word In(``cell_layout(atomic_c).fp``), norm Out(:data:`FPW`)."""

    def __init__(self, word_layout):
        super().__init__({"word": In(word_layout), "norm": Out(FPW)})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.norm.eq(fp_word_normalize(m, self.word))
        return m


def fp48_add(m, acc, word, name: str = "fpacc") -> data.View:
    """``acc`` (:data:`FP48`) plus ``word`` (:data:`FPW`), rounded to 39 significant bits, to
    nearest, ties away from zero (see the module docstring: far and close paths); NaN rules of
    ``cacc_add``. Comb logic added to ``m``; returns an :data:`FP48` View."""
    acc, word = data.View(FP48, Value.cast(acc)), data.View(FPW, Value.cast(word))
    ma, ea, sa = acc.mag, acc.exp, acc.sign
    mw, ew, sw = word.mag, word.exp, word.sign
    sub = sa ^ sw
    d1 = Signal(signed(10), name=f"{name}_d1")      # ea - ew in -59..191
    d2 = Signal(signed(10), name=f"{name}_d2")
    m.d.comb += [d1.eq(ea - ew), d2.eq(ew - ea)]
    swap = d1[-1]                                     # the word has the larger exponent

    # ---- far path
    mx = Mux(swap, mw, ma)
    my = Mux(swap, ma, mw)
    ex = Signal(EXP_BITS, name=f"{name}_ex")          # >= 0: ea >= 0, and ew > ea on a swap
    sh = Signal(6, name=f"{name}_sh")
    dd = Mux(swap, d2, d1)
    m.d.comb += [ex.eq(Mux(swap, ew[:EXP_BITS], ea)),
                 sh.eq(Mux(dd[6:].any(), 63, dd[:6]))]          # dd >= 0: no comparator
    sx = Mux(swap, sw, sa)
    y42 = Cat(Const(0, 3), my)                        # guard, round, sticky positions below
    sticky = Cat(*[y42[i] & (sh > i) for i in range(3, len(y42))]).any()
    yal = Signal(42, name=f"{name}_yal")
    m.d.comb += yal.eq((y42 >> sh) | sticky)
    x42 = Cat(Const(0, 3), mx)
    dif1 = Signal(signed(44), name=f"{name}_dif")
    m.d.comb += dif1.eq(x42 - yal)
    neg = sub & dif1[-1]
    r = Signal(43, name=f"{name}_r")
    m.d.comb += r.eq(Mux(sub, Mux(dif1[-1], yal - x42, dif1), x42 + yal))
    # drop 4 bits (r[42]), 3 (r[41], or X at exponent 0: exact) or 2; round half up
    r4, r3 = r[42], ~r[42] & (r[41] | (ex == 0))
    q = Mux(r4, r[3:43], Mux(r3, r[2:42], r[1:41]))  # 40 bits: 39 + the rounding bit
    inc = Signal(40, name=f"{name}_inc")
    m.d.comb += inc.eq((q + 1)[1:])
    ovf = inc[MAG_BITS]
    ex_p = [Signal(EXP_BITS, name=f"{name}_ex{i + 1}") for i in range(4)]   # ex - 1 .. ex + 2
    m.d.comb += [e.eq(ex + i - 1) for i, e in enumerate(ex_p)]
    far = Signal(FP48, name=f"{name}_far")
    m.d.comb += [
        far.mag.eq(Mux(ovf, 1 << (MAG_BITS - 1), inc[:MAG_BITS])),
        far.exp.eq(Mux(r4, Mux(ovf, ex_p[3], ex_p[2]),          # selected after the increment,
                       Mux(r3, Mux(ovf, ex_p[2], ex_p[1]),      # not added to it
                           Mux(ovf, ex_p[1], ex_p[0])))),
        far.sign.eq(sx ^ neg),
    ]

    # ---- close path: |d| <= 1 and an effective subtraction, exact
    up_a = d1 == 1
    up_w = d1 == -1
    a40 = Mux(up_a, Cat(Const(0, 1), ma), ma)
    w40 = Mux(up_w, Cat(Const(0, 1), mw), mw)
    emin = Signal(EXP_BITS, name=f"{name}_emin")
    m.d.comb += emin.eq(Mux(up_a, ew[:EXP_BITS], ea))
    rc1 = Signal(signed(41), name=f"{name}_rc1")
    m.d.comb += rc1.eq(a40 - w40)
    rc = Signal(40, name=f"{name}_rc")
    m.d.comb += rc.eq(Mux(rc1[-1], w40 - a40, rc1))
    # min(leading zeros, emin) in one priority encoder: a sentinel bit at 38 - emin
    sentinel = Cat(*[emin == MAG_BITS - 1 - i for i in range(MAG_BITS)])
    lsh = _leading_zeros(m, rc[:MAG_BITS] | sentinel, f"{name}_lsh")
    zero = rc == 0
    use_close = sub & ((d1 == 0) | up_w | (up_a & ~ew[-1])) & ~rc[MAG_BITS]
    close = Signal(FP48, name=f"{name}_close")
    m.d.comb += [
        close.mag.eq((rc[:MAG_BITS] << lsh)[:MAG_BITS]),
        close.exp.eq(Mux(zero, 0, emin - lsh)),
        close.sign.eq(Mux(rc1[-1], sw, sa) & ~zero),
    ]

    # the far path arrives last: one 2:1 mux after it
    other = Signal(FP48, name=f"{name}_other")
    with m.If(acc.nan):
        m.d.comb += other.eq(acc)
    with m.Elif(word.nan):
        m.d.comb += [other.nan.eq(1), other.sign.eq(sw), other.mag.eq(mw[:10])]
    with m.Else():
        m.d.comb += other.eq(close)
    res = Signal(FP48, name=f"{name}_new")
    m.d.comb += res.eq(Mux(~acc.nan & ~word.nan & ~use_close, far, other))
    return res


class Fp48Add(wiring.Component):
    """:func:`fp48_add` as its own (combinational) module, one per accumulator lane: its
    logic stays apart, and a caller that holds the inputs at 0 in INT8/INT16 layers (operand
    isolation) keeps it still.

    Ports: acc In(:data:`FP48`), word In(:data:`FPW`), new Out(:data:`FP48`)."""

    def __init__(self):
        super().__init__({"acc": In(FP48), "word": In(FPW), "new": Out(FP48)})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.new.eq(fp48_add(m, self.acc, self.word, name="fpacc"))
        return m


def fp48_normalize(m, acc, name: str = "fp32n") -> data.View:
    """First half of the fp32 conversion of an :data:`FP48` accumulator: its magnitude shifted
    to bit 38 (only an exponent-0 value has leading zeros), the fp32 exponent
    ``exp + bitlen(mag) + 76`` and the 25 top bits (24 kept + the rounding bit), as
    :data:`FP32N`. Comb logic added to ``m``."""
    acc = data.View(FP48, Value.cast(acc))
    lz = _leading_zeros(m, acc.mag, f"{name}_lz")
    nm = (acc.mag << lz)[:MAG_BITS]
    res = Signal(FP32N, name=name)
    m.d.comb += [
        res.top.eq(nm[MAG_BITS - 25:]),
        res.exp.eq(acc.exp + 115 - lz),
        res.sign.eq(acc.sign),
        res.zero.eq(acc.mag == 0),
        res.nan.eq(acc.nan),
        res.payload.eq(acc.mag[:10]),
    ]
    return res


def fp48_pack(n) -> Value:
    """Second half of the fp32 conversion (``cacc_to_fp32``): an :data:`FP32N` rounded to 24
    significant bits, half away from zero (a carry to 2**24 adds one to the exponent), as an
    fp32 bit pattern (32 bits); a zero gives +0, a NaN sign, exponent 255 and the fp16 payload
    in bits 9:0."""
    n = data.View(FP32N, Value.cast(n))
    rnd = (n.top + 1)[1:]                              # 25 bits
    ovf = rnd[24]
    num = Cat(Mux(ovf, 0, rnd[:23]), (n.exp + ovf)[:8], n.sign)
    nan = Cat(n.payload, Const(0, 13), Const(0xFF, 8), n.sign)
    return Mux(n.nan, nan, Mux(n.zero, 0, num))
