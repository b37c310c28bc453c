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
accumulator that NaN. Built as the classic two paths:

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

Pipeline (:class:`Fp48AccPipe`: FP_DEPTH = 3 register stages, the loop of CACC's FP16
accumulation closed through its result register; every step is still one exact ``round39``,
in order: only the loop's depth changes, not the arithmetic):

1. :func:`fp48_add_align`: the exponent differences, computed for both accumulator candidates
   (the forwarded result and the RAM entry) and selected after the subtractors; both
   alignments at once (the word shifted right by ``ea - ew``, the accumulator by
   ``ew - ea``, each shifter driven straight by the difference's low 6 bits, each sticky bit
   a prefix OR of the operand selected by the same bits; stage 2 picks one), the larger
   operand; the close path's four candidate differences (``ma - mw``, ``mw - ma``,
   ``2ma - mw``, ``2mw - ma``) straight from the operands; the NaN result;
2. :func:`fp48_add_sum`: the aligned operand chosen, the 44-bit add/subtract and its sign,
   the 2/3/4 dropped bits; the close path's difference and its leading-zero count (a
   balanced tree, limited by ``emin``);
3. :func:`fp48_add_round`: the 40-bit increment and its carry, the close path's left shift,
   the choice among far, close and NaN.

Measured (``hdl.synth.place_and_route``: ECP5 LFE5U-85F-8, out of context;
scripts/cacc_fp_timing.py), one lane:

* the loop as CACC builds it (``--loop ram``: assembly RAM of 32 FP48 entries with its
  transparent read, the ``first``/forward select, write-back from the result register):
  119.2 MHz (8.4 ns), 2,277 LUT4 and 665 FF; critical path in stage 1 (word exponent,
  exponent difference, shifter and sticky);
* the bare register loop (``--loop reg``, as the first measurement): 123.7 MHz (8.1 ns),
  1,963 LUT4, 585 FF;
* two stages (``--depth 2``, cut after stage 1): 92.1 MHz (10.9 ns), critical in stages 2+3:
  3 is the smallest depth that reaches 100 MHz;
* one stage (``--depth 1 --loop reg``): 50.8 MHz (19.7 ns), 2,311 LUT4;
* before (one combinational add, the loop closed in one cycle): 46.0 MHz (21.8 ns), 2,026
  LUT4 per lane.

The whole :class:`hdl.cacc.Cacc` of nv_small+int8_int16_fp16 (4 FP lanes, all three
precisions, stripe_max 32, ``--unit B``): 100.8 MHz (9.9 ns; critical path the INT8/INT16
one-cycle read-modify-write), 18,553 LUT4, 5,008 FF, 8 DP16KD. At nv_full (``--unit A``: 16
FP lanes, 32 INT8 lanes, an assembly entry of 1,088 bits): 64.6 MHz (15.5 ns), 75,687 LUT4,
19,430 FF, 29 DP16KD; its critical path is not the FP loop but the assembly RAM's write
address and transparent-read bypass fanning out over the 1,088-bit LUTRAM entry (12 of the
15.5 ns are routing), shared with the INT8/INT16 one-cycle read-modify-write: the next thing
to rebuild for 100 MHz at nv_full (registered read data with explicit forwarding, replicated
selects, or a RAM per precision).
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["FP48", "FPW", "FP32N", "FP48_ALIGNED", "FP48_SUMMED", "FP_DEPTH", "MAG_BITS",
           "EXP_BITS", "fpa_layout", "fp_word_prenorm", "fp_word_finish", "fp_word_normalize",
           "fp48_add_align", "fp48_add_sum", "fp48_add_round", "fp48_add", "Fp48AccPipe",
           "fp48_normalize", "fp48_pack"]

MAG_BITS = 39          # significant bits of NVIDIA's FP48 accumulator after each rounding
EXP_BITS = 7           # exponent of the magnitude (units of 2**-50), see the range argument
ZERO_WORD_EXP = -64    # exponent of a zero word (below any other: it never takes the close path)

FP48 = data.StructLayout({"mag": MAG_BITS, "exp": EXP_BITS, "nan": 1, "sign": 1})
FPW = data.StructLayout({"mag": MAG_BITS, "exp": signed(8), "nan": 1, "sign": 1})
#: :func:`fp48_normalize`'s result: the magnitude, its leading zeros (39: zero), the fp32
#: exponent and that plus one (for a rounding carry), sign and NaN flag (the payload in
#: ``mag[0:10]``)
FP32N = data.StructLayout({"mag": MAG_BITS, "lz": range(MAG_BITS + 1), "exp": 8, "exp1": 8,
                           "sign": 1, "nan": 1})


def _lzc_tree(m, value: Value, name: str) -> Signal:
    """Leading zeros of unsigned ``value`` in its width (its width for 0): a balanced tree of
    2:1 muxes (log2 depth), so that the synthesizer does not get a priority chain."""
    n = len(value)
    p = 1 << n.bit_length()                             # > n: room for the sentinel
    # pad below with a 1 then zeros: a zero value counts exactly n
    v = Cat(Const(1 << (p - n - 1), p - n), value)

    def tree(bits):                     # -> (any bit set, leading zeros: log2(len) bits)
        if len(bits) == 2:
            return bits[1] | bits[0], ~bits[1]
        half = len(bits) // 2
        (ah, ch), (al, cl) = tree(bits[half:]), tree(bits[:half])
        return ah | al, Cat(Mux(ah, ch, cl), ~ah)

    _, count = tree(v)
    z = Signal(range(n + 1), name=name)
    m.d.comb += z.eq(count)
    return z


def fpa_layout(s_bits: int) -> data.StructLayout:
    """:func:`fp_word_prenorm`'s result for words of ``s_bits``-bit ``S``: ``a`` = ``|S|``
    (the NaN payload when ``nan``), its leading zeros ``lz``, ``t``, ``sign``, ``nan``."""
    return data.StructLayout({"a": s_bits, "lz": range(s_bits + 1), "t": 4, "sign": 1,
                              "nan": 1})


def fp_word_prenorm(m, fp, name: str = "fpw") -> data.View:
    """First half of :func:`fp_word_normalize` (CACC's accept cycle): ``|s|`` and its leading
    zeros (a balanced tree), sign and NaN as a :func:`fpa_layout` View. Comb logic added to
    ``m``. Raises ValueError when ``s`` has more than 39 bits."""
    s = Value.cast(fp.s)
    sb = len(s)
    if sb > MAG_BITS:
        raise ValueError(f"CMAC word of {sb} bits: at most {MAG_BITS} (atomic_c <= 128)")
    neg = s[-1]
    a = Signal(sb, name=f"{name}_abs")
    m.d.comb += a.eq(Mux(neg, -s, s))             # |-2**(sb-1)| = 2**(sb-1) fits sb bits
    res = Signal(fpa_layout(sb), name=f"{name}_pre")
    m.d.comb += [
        res.a.eq(Mux(fp.nan, fp.nan_bits[:10], a)),
        res.lz.eq(_lzc_tree(m, a, f"{name}_lz")),
        res.t.eq(fp.t),
        res.sign.eq(Mux(fp.nan, fp.nan_bits[15], neg)),
        res.nan.eq(fp.nan),
    ]
    return res


def fp_word_finish(m, pre, s_bits: int, name: str = "fpw") -> data.View:
    """Second half of :func:`fp_word_normalize` (one cycle later in CACC): a
    ``fpa_layout(s_bits)`` value as an :data:`FPW`: ``|s|`` shifted
    left by its leading zeros to bit 38, exponent ``4t - 38 + floor(log2|s|)`` (-64 for 0);
    a NaN keeps its payload and sign. Comb logic added to ``m``."""
    sb = s_bits
    p = data.View(fpa_layout(sb), Value.cast(pre))
    res = Signal(FPW, name=name)
    shifted = (p.a << p.lz)[:sb]
    m.d.comb += [
        res.mag.eq(Mux(p.nan, p.a[:10], Cat(Const(0, MAG_BITS - sb), shifted))),
        res.exp.eq(Mux(p.lz == sb, ZERO_WORD_EXP, (p.t << 2) - p.lz - (MAG_BITS - sb))),
        res.sign.eq(p.sign),
        res.nan.eq(p.nan),
    ]
    return res


def fp_word_normalize(m, fp, name: str = "fpw") -> data.View:
    """One CMAC FP16 word (``cell_layout(atomic_c).fp``: ``s`` signed(32 + log2 C), ``t`` 4,
    ``nan``, ``nan_bits`` 16) as an :data:`FPW`: ``|s|`` shifted left to bit 38, exponent
    ``4t - 38 + floor(log2|s|)``; a NaN keeps ``nan_bits[15]`` and ``nan_bits[0:10]``
    (:func:`fp_word_prenorm` then :func:`fp_word_finish`). Comb logic added to ``m``. Raises
    ValueError when ``s`` has more than 39 bits."""
    return fp_word_finish(m, fp_word_prenorm(m, fp, name), len(Value.cast(fp.s)), name)


#: :func:`fp48_add_align`'s result (register cut 1 of :class:`Fp48AccPipe`): the far path's
#: larger operand ``x`` (exponent ``ex``, sign ``sx``) and both alignments of the other one
#: (39 bits + guard, round, sticky: ``yw`` the word, ``ya`` the accumulator; ``swap`` picks
#: ``ya``, in stage 2); the close path's four candidate differences
#: (``ma - mw`` signed, ``mw - ma``, ``2ma - mw``, ``2mw - ma``) and which one applies; the NaN
#: result, if any.
FP48_ALIGNED = data.StructLayout({
    "x": MAG_BITS, "yw": MAG_BITS + 3, "ya": MAG_BITS + 3, "swap": 1, "ex": EXP_BITS, "sx": 1,
    "sub": 1,
    "c_eq": signed(MAG_BITS + 1), "c_eqn": MAG_BITS, "c_upa": MAG_BITS + 1,
    "c_upw": MAG_BITS + 1, "up_a": 1, "up_w": 1, "close_ok": 1, "emin": EXP_BITS,
    "sa": 1, "sw": 1, "nan": 1, "nan_sign": 1, "nan_pay": 10})

#: :func:`fp48_add_sum`'s result (register cut 2): the far path's 40 kept bits ``q`` (39 + the
#: rounding bit) with its two possible exponents (``ovf`` of the rounding picks ``e1``) and
#: sign; the close path's exact difference ``rc`` (39 bits, ``use_close`` when it applies), its
#: normalizing shift ``lsh``, exponent ``emin`` and sign; the NaN result.
FP48_SUMMED = data.StructLayout({
    "q": MAG_BITS + 1, "e0": EXP_BITS, "e1": EXP_BITS, "sf": 1,
    "rc": MAG_BITS, "lsh": range(MAG_BITS + 1), "emin": EXP_BITS, "sc": 1, "zero": 1,
    "use_close": 1, "nan": 1, "nan_sign": 1, "nan_pay": 10})


def _shift_sticky(m, mag: Value, amount: Value, name: str) -> Value:
    """``mag`` (39 bits) above three zero bits (guard, round, sticky), shifted right by the
    non-negative ``amount`` (signed(10), < 2**9), every shifted-out bit ORed into bit 0: 42
    bits. The shift uses the low 6 bits of ``amount`` directly (no mux before the shifter);
    an amount of 64 or more gives the sticky bit only. The sticky bit is a prefix OR of
    ``mag`` (computed beside the exponent difference) selected by the same 6 bits, so it is as
    deep as the shifter."""
    y42 = Cat(Const(0, 3), mag)
    s = amount[:6]
    big = amount[6:].any()
    shifted = Signal(MAG_BITS + 3, name=f"{name}_sh")
    m.d.comb += shifted.eq(y42 >> s)
    # lost[s]: the bits a shift by s drops (y42[0:s], bits 0..2 being zero), s in 0..63
    lost = Signal(64, name=f"{name}_lost")
    m.d.comb += lost.eq(Cat(Const(0, 4), *[mag[:i].any() for i in range(1, MAG_BITS + 1)],
                            *[mag.any()] * (64 - 4 - MAG_BITS)))
    sticky = Signal(name=f"{name}_st")
    m.d.comb += sticky.eq(Mux(big, mag.any(), lost.bit_select(s, 1)))
    return Mux(big, 0, shifted) | sticky


def fp48_add_align(m, acc, word, name: str = "fpacc", diffs=None) -> data.View:
    """Stage 1 of :func:`fp48_add`: exponent difference, both alignments of the far path in
    parallel (the word right-shifted for when the accumulator's exponent is not smaller, the
    accumulator for the other case; stage 2 picks one), the larger operand, the close path's
    differences, the NaN result. ``diffs``: ``(ea - ew, ew - ea)`` when the caller computes
    them (:class:`Fp48AccPipe` does, before its accumulator select). Returns an
    :data:`FP48_ALIGNED` View (comb logic in ``m``)."""
    acc, word = data.View(FP48, Value.cast(acc)), data.View(FPW, Value.cast(word))
    ma, ea, sa = acc.mag, acc.exp, acc.sign
    mw, ew, sw = word.mag, word.exp, word.sign
    res = Signal(FP48_ALIGNED, name=f"{name}_al")
    d1 = Signal(signed(10), name=f"{name}_d1")      # ea - ew in -59..191
    d2 = Signal(signed(10), name=f"{name}_d2")
    m.d.comb += [d1.eq(ea - ew), d2.eq(ew - ea)] if diffs is None else \
        [d1.eq(diffs[0]), d2.eq(diffs[1])]
    swap = d1[-1]                                     # the word has the larger exponent
    yw = _shift_sticky(m, mw, d1, f"{name}_yw")       # used when d1 >= 0
    ya = _shift_sticky(m, ma, d2, f"{name}_ya")       # used when d2 > 0
    up_a = d1 == 1
    up_w = d1 == -1
    m.d.comb += [
        res.x.eq(Mux(swap, mw, ma)),
        res.yw.eq(yw),
        res.ya.eq(ya),
        res.swap.eq(swap),
        res.ex.eq(Mux(swap, ew[:EXP_BITS], ea)),      # >= 0: ea >= 0, and ew > ea on a swap
        res.sx.eq(Mux(swap, sw, sa)),
        res.sub.eq(sa ^ sw),
        # close path: |d| <= 1 and an effective subtraction (exact); 2ma - mw > 0 and
        # 2mw - ma > 0 there (the larger-exponent operand is normalized, exponent >= 1)
        res.c_eq.eq(ma - mw),
        res.c_eqn.eq(mw - ma),
        res.c_upa.eq((ma << 1) - mw),
        res.c_upw.eq((mw << 1) - ma),
        res.up_a.eq(up_a),
        res.up_w.eq(up_w),
        res.close_ok.eq((sa ^ sw) & ((d1 == 0) | up_w | (up_a & ~ew[-1]))),
        res.emin.eq(Mux(up_a, ew[:EXP_BITS], ea)),
        res.sa.eq(sa),
        res.sw.eq(sw),
        res.nan.eq(acc.nan | word.nan),
        res.nan_sign.eq(Mux(acc.nan, sa, sw)),
        res.nan_pay.eq(Mux(acc.nan, ma[:10], mw[:10])),
    ]
    return res


def fp48_add_sum(m, al, name: str = "fpacc") -> data.View:
    """Stage 2 of :func:`fp48_add`: the far path's aligned operand chosen, its 44-bit add or
    subtract, its sign, the choice
    of 2, 3 or 4 dropped bits (``q``); the close path's difference and its normalizing shift
    (a leading-zero count limited to ``emin`` by a sentinel bit). Returns an
    :data:`FP48_SUMMED` View (comb logic in ``m``)."""
    al = data.View(FP48_ALIGNED, Value.cast(al))
    res = Signal(FP48_SUMMED, name=f"{name}_sum")
    x42 = Cat(Const(0, 3), al.x)
    ex, sub = al.ex, al.sub
    yal = Signal(MAG_BITS + 3, name=f"{name}_yal")
    m.d.comb += yal.eq(Mux(al.swap, al.ya, al.yw))
    dif1 = Signal(signed(44), name=f"{name}_dif")
    m.d.comb += dif1.eq(x42 - yal)
    neg = sub & dif1[-1]
    r = Signal(43, name=f"{name}_r")
    m.d.comb += r.eq(Mux(sub, Mux(dif1[-1], yal - x42, dif1), x42 + yal))
    # drop 4 bits (r[42]), 3 (r[41], or X at exponent 0: exact) or 2; round half up (stage 3)
    r4, r3 = r[42], ~r[42] & (r[41] | (ex == 0))
    ex_p = [Signal(EXP_BITS, name=f"{name}_ex{i + 1}") for i in range(4)]   # ex - 1 .. ex + 2
    m.d.comb += [e.eq(ex + i - 1) for i, e in enumerate(ex_p)]
    m.d.comb += [
        res.q.eq(Mux(r4, r[3:43], Mux(r3, r[2:42], r[1:41]))),
        res.e0.eq(Mux(r4, ex_p[2], Mux(r3, ex_p[1], ex_p[0]))),
        res.e1.eq(Mux(r4, ex_p[3], Mux(r3, ex_p[2], ex_p[1]))),
        res.sf.eq(al.sx ^ neg),
    ]
    # close path
    eq = ~al.up_a & ~al.up_w
    eq_neg = al.c_eq[-1]
    rc = Signal(MAG_BITS + 1, name=f"{name}_rc")
    m.d.comb += rc.eq(Mux(al.up_a, al.c_upa, Mux(al.up_w, al.c_upw,
                                                  Mux(eq_neg, al.c_eqn, al.c_eq))))
    emin = al.emin
    # min(leading zeros, emin) in one count: a sentinel bit at 38 - emin
    sentinel = Cat(*[emin == MAG_BITS - 1 - i for i in range(MAG_BITS)])
    lsh = _lzc_tree(m, rc[:MAG_BITS] | sentinel, f"{name}_lsh")
    zero = rc == 0
    m.d.comb += [
        res.rc.eq(rc[:MAG_BITS]),
        res.lsh.eq(lsh),
        res.emin.eq(emin),
        res.zero.eq(zero),
        res.sc.eq(Mux(al.up_a | (eq & ~eq_neg), al.sa, al.sw) & ~zero),
        res.use_close.eq(al.close_ok & ~rc[MAG_BITS]),
        res.nan.eq(al.nan),
        res.nan_sign.eq(al.nan_sign),
        res.nan_pay.eq(al.nan_pay),
    ]
    return res


def fp48_add_round(m, sm, name: str = "fpacc") -> data.View:
    """Stage 3 of :func:`fp48_add`: the far path's rounding (half up on the magnitude: an
    increment, a carry out of 39 bits renormalized), the close path's left shift, and the
    choice among far, close and NaN. Returns an :data:`FP48` View (comb logic in ``m``)."""
    sm = data.View(FP48_SUMMED, Value.cast(sm))
    inc = Signal(MAG_BITS + 1, name=f"{name}_inc")
    m.d.comb += inc.eq((sm.q + 1)[1:])
    ovf = inc[MAG_BITS]
    far = Signal(FP48, name=f"{name}_far")
    m.d.comb += [
        far.mag.eq(Mux(ovf, 1 << (MAG_BITS - 1), inc[:MAG_BITS])),
        far.exp.eq(Mux(ovf, sm.e1, sm.e0)),
        far.sign.eq(sm.sf),
    ]
    other = Signal(FP48, name=f"{name}_other")
    with m.If(sm.nan):
        m.d.comb += [other.nan.eq(1), other.sign.eq(sm.nan_sign), other.mag.eq(sm.nan_pay)]
    with m.Else():
        m.d.comb += [
            other.mag.eq((sm.rc << sm.lsh)[:MAG_BITS]),
            other.exp.eq(Mux(sm.zero, 0, sm.emin - sm.lsh)),
            other.sign.eq(sm.sc),
        ]
    res = Signal(FP48, name=f"{name}_new")
    m.d.comb += res.eq(Mux(~sm.nan & ~sm.use_close, far, other))
    return res


def fp48_add(m, acc, word, name: str = "fpacc") -> data.View:
    """``acc`` (:data:`FP48`) plus ``word`` (:data:`FPW`), rounded to 39 significant bits, to
    nearest, ties away from zero (see the module docstring: far and close paths); NaN rules of
    ``cacc_add``. Comb logic added to ``m`` (the three stages of :class:`Fp48AccPipe` without
    their registers); returns an :data:`FP48` View."""
    return fp48_add_round(m, fp48_add_sum(m, fp48_add_align(m, acc, word, name), name), name)

#: the FP add loop's depth (cycles from an op's accumulator read to its result, the minimum
#: distance between two FP16 ops on one ``pos`` at full rate): :class:`Fp48AccPipe`'s default
FP_DEPTH = 3


class Fp48AccPipe(wiring.Component):
    """One FP48 accumulator lane of CACC's assembly stage as a pipeline (:func:`fp48_add` in
    ``depth`` register stages: 3 cuts it after :func:`fp48_add_align` and
    :func:`fp48_add_sum`, 2 after the align stage only, 1 not at all), the accumulator chosen at
    its input: 0 (``zero``: an op's ``first``, or inputs held still outside FP16 layers),
    this pipeline's own result ``new`` (``fwd``: the op in the result register, ``depth``
    stages ahead, is on the same entry: its result is taken before it reaches the assembly
    RAM), else ``ram`` (the entry as read from the assembly buffer). The exponent differences
    are computed for the candidates and selected after the subtractors, so that the select
    (which fans out to every accumulator bit of every lane in CACC) overlaps the carry chains.
    All stages advance together when ``en``.

    Ports:
        ram: In(:data:`FP48`) the assembly entry of the op in the first stage.
        word: In(:data:`FPW`) that op's normalized CMAC word.
        zero, fwd: In(1) accumulator selection (``zero`` wins).
        en: In(1) advance every stage.
        new: Out(:data:`FP48`) the result register, ``depth`` advances after the op entered.

    Raises ValueError for a depth other than 1, 2 or 3."""

    def __init__(self, depth: int = FP_DEPTH):
        if depth not in (1, 2, 3):
            raise ValueError(f"depth must be 1, 2 or 3, not {depth}")
        self.depth = depth
        super().__init__({"ram": In(FP48), "word": In(FPW), "zero": In(1), "fwd": In(1),
                          "en": In(1), "new": Out(FP48)})

    def elaborate(self, platform):
        m = Module()
        acc = Signal(FP48, name="acc")
        m.d.comb += acc.eq(Mux(self.zero, 0, Mux(self.fwd, self.new.as_value(),
                                                     self.ram.as_value())))
        # the exponent differences of both candidates, selected after the subtractions: the
        # high-fanout select arrives while the carry chains run (late select)
        ew = self.word.exp
        d1, d2 = Signal(signed(10), name="d1_sel"), Signal(signed(10), name="d2_sel")
        m.d.comb += [
            d1.eq(Mux(self.zero, -ew, Mux(self.fwd, self.new.exp - ew, self.ram.exp - ew))),
            d2.eq(Mux(self.zero, ew, Mux(self.fwd, ew - self.new.exp, ew - self.ram.exp))),
        ]
        al = fp48_add_align(m, acc, self.word, diffs=(d1, d2))
        if self.depth >= 2:
            al_q = Signal(FP48_ALIGNED, name="al_q")
            with m.If(self.en):
                m.d.sync += al_q.eq(al)
            al = al_q
        sm = fp48_add_sum(m, al)
        if self.depth == 3:
            sm_q = Signal(FP48_SUMMED, name="sum_q")
            with m.If(self.en):
                m.d.sync += sm_q.eq(sm)
            sm = sm_q
        with m.If(self.en):
            m.d.sync += self.new.eq(fp48_add_round(m, sm))
        return m


def fp48_normalize(m, acc, name: str = "fp32n") -> data.View:
    """First half of the fp32 conversion of an :data:`FP48` accumulator (CACC's first output
    stage): the magnitude's leading zeros (only an exponent-0 value has any) and the fp32
    exponent ``exp + bitlen(mag) + 76`` (and that plus one), as :data:`FP32N`. Comb logic
    added to ``m``."""
    acc = data.View(FP48, Value.cast(acc))
    lz = _lzc_tree(m, acc.mag, f"{name}_lz")
    res = Signal(FP32N, name=name)
    m.d.comb += [
        res.mag.eq(acc.mag),
        res.lz.eq(lz),
        res.exp.eq(acc.exp + 115 - lz),
        res.exp1.eq(acc.exp + 116 - lz),
        res.sign.eq(acc.sign),
        res.nan.eq(acc.nan),
    ]
    return res


def fp48_pack(n) -> Value:
    """Second half of the fp32 conversion (``cacc_to_fp32``; CACC's second output stage): an
    :data:`FP32N`'s magnitude shifted to bit 38, rounded to 24 significant bits, half away from
    zero (a carry to 2**24 adds one to the exponent), as an fp32 bit pattern (32 bits); a zero
    gives +0, a NaN sign, exponent 255 and the fp16 payload in bits 9:0."""
    n = data.View(FP32N, Value.cast(n))
    top = (n.mag << n.lz)[MAG_BITS - 25:MAG_BITS]       # 24 kept bits + the rounding bit
    rnd = (top + 1)[1:]                                # 25 bits
    ovf = rnd[24]
    num = Cat(Mux(ovf, 0, rnd[:23]), Mux(ovf, n.exp1, n.exp), n.sign)
    nan = Cat(n.mag[:10], Const(0, 13), Const(0xFF, 8), n.sign)
    return Mux(n.nan, nan, Mux(n.lz == MAG_BITS, 0, num))
