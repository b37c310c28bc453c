"""CDP's two-table hybrid LUT as combinational Amaranth functions (v1_ias_lut-programming.rst):
table index in three steps (:func:`index_prep`, :func:`index_shift`, :func:`table_index`),
interpolation in stages around one multiplier (:func:`interp_operands`, :func:`interp_bias`,
:func:`interp_shift`, :func:`interp_round`, :func:`interp_finish`) and table selection (:func:`select`). The pipeline
registers around them are in :mod:`hdl.cdp.core`.

Facts (NVIDIA nv_small RTL, vmod/nvdla/cdp NV_NVDLA_CDP_DP_LUT_CTRL_unit.v / _INTP_unit.v /
_lut.v / _intp.v, facts only; the same facts are documented in verif/model/lut.py; the INT16
widths read from NVIDIA's nv_full RTL, recorded in verif/model/cdp.py ``WIDTHS``):

* a sample ``x`` underflows a table when ``x <= START`` (START sign-extended from its low
  ``index_bits`` bits: 22 in INT8, 38 = the whole register in INT16); otherwise
  ``d = x - START``;
* exponential LE: ``i = floor(log2 d)``, fraction = the 16 bits below the leading one,
  index ``i - LE_INDEX_OFFSET``, an underflow also when ``i < LE_INDEX_OFFSET`` for
  LE_INDEX_OFFSET >= 0; linear: ``d >> SELECT`` with the next 16 bits as fraction for
  SELECT >= 0, ``d << -SELECT`` with fraction 0 otherwise (SELECT = INDEX_SELECT[5:0] in INT8,
  INDEX_SELECT[6:0] in INT16, signed); an index >= entries - 1 is an overflow;
* hit ``y = T[i] + rnd((T[i+1] - T[i]) * frac, 16)``; underflow ``y = T[0] + rnd((x - MIN) *
  UFLOW_SCALE, UFLOW_SHIFT)``; overflow ``y = T[N] + rnd((x - END) * OFLOW_SCALE,
  OFLOW_SHIFT)``; ``rnd`` rounds half away from zero for a shift >= 0 and shifts left for a
  negative (5-bit signed) shift; the result saturates to int16. MIN = START, plus
  ``2**LE_INDEX_OFFSET`` for an exponential LE table with LE_INDEX_OFFSET >= 0 (39 bits);
* selection: one table hits -> that one; both underflow -> UFLOW_PRIORITY; both overflow ->
  OFLOW_PRIORITY; otherwise (both hit, or one under- and one overflow) HYBRID_PRIORITY
  (0 = LE, 1 = LO).

The precision-dependent widths are parameters: ``index_bits`` (the subtractor's START bits, also
the signed LUT input's width: 22 / 38) and ``select_bits`` (INDEX_SELECT bits: 6 / 7); the
interpolation's widths (``OPA_BITS`` ... ``RND_BITS``) hold for both (:func:`interp_operands`).
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data

from hdl.lib.fixed import floor_log2, round_bias, round_shift, saturate

__all__ = ["FRAC_BITS", "LE_ENTRIES", "LO_ENTRIES", "index_layout",
           "shift_layout", "index_shift",
           "params_layout", "prep_layout", "index_prep", "table_index", "interp_operands",
           "clamp_product", "interp_bias", "interp_shift", "interp_round", "interp_finish", "select", "STAT_NAMES",
           "OPA_BITS", "OPB_BITS", "SH_BITS", "RND_BITS", "PRE_BITS"]

LE_ENTRIES, LO_ENTRIES = 65, 257
FRAC_BITS = 16
WIDE_BITS = 38            # START/END registers: LOW 32 bits + HIGH 6 bits, signed
#: statistics categories, one-hot in this order (D_PERF_LUT_* registers)
STAT_NAMES = ("uflow", "oflow", "hybrid", "le_hit", "lo_hit")


def index_layout(entries: int) -> data.StructLayout:
    """Index of one sample in one table: ``addr`` (entry T[addr] is the interpolation base:
    the index on a hit, 0 on an underflow, entries-1 on an overflow), ``frac`` (16 bits, 0 unless
    a hit), ``uf``, ``of``."""
    return data.StructLayout({"addr": range(entries), "frac": unsigned(FRAC_BITS), "uf": 1,
                              "of": 1})


def params_layout(select_bits: int = 6) -> data.StructLayout:
    """LUT register values as the datapath sees them (CDP S_LUT_*; held stable in a layer).
    ``select_bits``: INDEX_SELECT bits used (6 in INT8: INDEX_SELECT[5:0]; 7 in INT16)."""
    return data.StructLayout({
        "le_exp": 1,                                  # S_LUT_CFG.LUT_LE_FUNCTION == EXPONENT
        "le_index_offset": signed(8),
        "le_index_select": signed(select_bits),       # INDEX_SELECT[select_bits-1:0]
        "lo_index_select": signed(select_bits),
        "le_start": signed(WIDE_BITS), "le_end": signed(WIDE_BITS),
        "lo_start": signed(WIDE_BITS), "lo_end": signed(WIDE_BITS),
        "le_uflow_scale": signed(16), "le_oflow_scale": signed(16),
        "le_uflow_shift": signed(5), "le_oflow_shift": signed(5),
        "lo_uflow_scale": signed(16), "lo_oflow_scale": signed(16),
        "lo_uflow_shift": signed(5), "lo_oflow_shift": signed(5),
        "uflow_priority": 1, "oflow_priority": 1, "hybrid_priority": 1,
    })


def prep_layout(index_bits: int) -> data.StructLayout:
    """First step of a sample's index in one table (:func:`index_prep`): ``d`` = x - START
    (``index_bits`` + 1 bits, positive unless an underflow), ``uf0`` (x <= START), ``lg``
    (floor(log2 d), for the exponential LE table)."""
    return data.StructLayout({"d": unsigned(index_bits + 1), "uf0": 1,
                              "lg": range(index_bits + 1)})


def index_prep(m: Module, x, start, *, index_bits: int, exponential: bool = False) -> dict:
    """First step of a sample's index in one table: the subtraction and, for the LE table
    (``exponential`` True: the table may be exponential), the leading-one position.
    ``x``: the sample (signed, at most ``index_bits`` bits: the square sum plus a sign bit);
    ``start``: the table's START register (signed, >= ``index_bits`` bits; its low
    ``index_bits`` bits are used). ``d`` = x - START is exact in ``index_bits`` + 1 bits
    whenever x > START (both signed ``index_bits``). Returns a dict of
    :func:`prep_layout` fields. ValueError: ``x`` wider than ``index_bits``."""
    if len(Value.cast(x)) > index_bits:
        raise ValueError(f"index_prep: a {len(Value.cast(x))}-bit sample does not fit the "
                         f"{index_bits}-bit index subtractor")
    start_idx = Value.cast(start)[:index_bits].as_signed()
    d = Signal(index_bits + 1, name="d")        # x - START, positive unless underflow
    m.d.comb += d.eq((x - start_idx)[:index_bits + 1])
    lg = floor_log2(m, d, index_bits + 1) if exponential else 0
    return {"d": d, "uf0": x <= start_idx, "lg": lg}


def shift_layout(exponential: bool, index_bits: int) -> data.StructLayout:
    """Second step of a sample's index in one table (:func:`index_shift`): ``uf0``, the linear
    index's low 9 bits ``lin_idx`` and ``lin_hi`` (any higher bit set), its fraction
    ``lin_frac``; for the LE table (``exponential``) also ``lg`` (range(``index_bits`` + 1),
    as :func:`prep_layout`) and the exponential fraction ``exp_frac``."""
    f = {"uf0": 1, "lin_idx": 9, "lin_hi": 1, "lin_frac": unsigned(FRAC_BITS)}
    if exponential:
        f.update(lg=range(index_bits + 1), exp_frac=unsigned(FRAC_BITS))
    return data.StructLayout(f)


def index_shift(prep, *, select, exponential: bool = False) -> dict:
    """Second step of a sample's index in one table: the shifts, from its :func:`index_prep`
    step ``prep`` (a :func:`prep_layout` view). ``select``: INDEX_SELECT of a linear table
    (signed, its width the precision's: signed(6) in INT8, signed(7) in INT16);
    ``exponential``: the LE table (the exponential fraction too). Returns a dict of
    :func:`shift_layout` fields (issue 10: the shifts and the limits were one stage, CDP's
    critical path on ECP5). Exact for any ``select``: a right shift of ``d`` (index_bits + 1
    bits, below 2**index_bits when the table does not underflow) by up to 2**(b-1) - 1 and a
    left shift by up to 2**(b-1) (b = the select's width) keep every bit."""
    d, uf0 = prep.d, prep.uf0
    # linear, SELECT >= 0: t = (d << 16) >> SELECT: index above the fraction
    sel = select
    sb = len(Value.cast(sel))
    sel_pos = sel.as_unsigned()[:sb - 1]        # 0..2**(sb-1)-1 when select >= 0
    t_lin = (Cat(Const(0, FRAC_BITS), d) >> sel_pos)
    # SELECT < 0: d << -SELECT, -SELECT in 1..2**(sb-1) (sb bits unsigned)
    lin_idx = Mux(sel < 0, d << (-sel).as_unsigned()[:sb], t_lin[FRAC_BITS:])
    out = {"uf0": uf0, "lin_idx": lin_idx[:9], "lin_hi": lin_idx[9:].any(),
           "lin_frac": Mux(sel < 0, 0, t_lin[:FRAC_BITS])}
    if exponential:
        out.update(lg=prep.lg, exp_frac=(Cat(Const(0, FRAC_BITS), d) >> prep.lg)[:FRAC_BITS])
    return out


def table_index(sh, entries: int, *, exponential=None, index_offset=None):
    """Index of a sample in one table from its :func:`index_shift` step ``sh`` (a
    :func:`shift_layout` view): the limits.

    ``entries``: table size; the LE table gives ``exponential`` (1 bit, the table is
    exponential) and ``index_offset`` (signed(8)). Returns a ``data.View``-assignable dict of
    :func:`index_layout` fields.
    """
    uf0 = sh.uf0
    lin_of = ~uf0 & (sh.lin_hi | (sh.lin_idx >= entries - 1))
    if exponential is not None:
        lg = sh.lg
        exp_idx = lg - index_offset                # signed, ~10 bits
        exp_uf = uf0 | ((index_offset >= 0) & (lg < index_offset))
        exp_of = ~exp_uf & (exp_idx >= entries - 1)
        uf = Mux(exponential, exp_uf, uf0)
        of = Mux(exponential, exp_of, lin_of)
        idx = Mux(exponential, exp_idx.as_unsigned()[:9], sh.lin_idx)
        frac = Mux(exponential, sh.exp_frac, sh.lin_frac)
    else:
        uf, of, idx, frac = uf0, lin_of, sh.lin_idx, sh.lin_frac
    hit = ~uf & ~of
    return {"addr": Mux(uf, 0, Mux(of, entries - 1, idx)), "frac": Mux(hit, frac, 0),
            "uf": uf, "of": of}


#: widths of the interpolation operands (:func:`interp_operands`): ``a`` holds x - MIN / x - END
#: (a signed sample of at most 38 bits, INT16's, minus a 39-bit origin: 40 bits) or
#: T[i+1] - T[i]; ``b`` a 16-bit scale or the 16-bit fraction (zero-extended); ``sh`` the
#: rounding shift -16..16. The same for INT8 (22-bit samples) and INT16.
OPA_BITS, OPB_BITS, SH_BITS = 41, 17, 6


def interp_operands(x, idx, y0, y1, vmin, vmax, uscale, ushift, oscale, oshift):
    """First half of one table's output (module docstring: hit, underflow and overflow
    formulas), chosen before the multiplier so that each sample needs one product:
    ``y = saturate16(base + rnd(a * b, sh))``; returns the dict ``{"a", "b", "sh", "base"}``
    (signed OPA_BITS / OPB_BITS / SH_BITS, signed 16). A hit gives ``a = T[i+1] - T[i]``,
    ``b = frac``, ``sh = 16``; an underflow ``x - vmin``, UFLOW_SCALE, UFLOW_SHIFT; an overflow
    ``x - vmax``, OFLOW_SCALE, OFLOW_SHIFT; ``base`` is ``y0`` (T[idx.addr]).

    ``x``: the sample (signed, 22 bits in INT8, 38 in INT16); ``idx``: its
    :func:`index_layout` view; ``y0``/``y1``: T[idx.addr] and T[idx.addr + 1] (signed 16);
    ``vmin``/``vmax``: underflow and overflow origins (signed, <= 39 bits);
    ``uscale``/``oscale`` signed(16), ``ushift``/``oshift`` signed(5). ValueError: ``a``
    would not fit OPA_BITS (a sample wider than 39 bits).
    """
    hit_a = y1 - y0
    a = Mux(idx.uf, x - vmin, Mux(idx.of, x - vmax, hit_a))
    if len(a) > OPA_BITS:
        raise ValueError(f"interp_operands: x - MIN / x - END need {len(a)} bits, "
                         f"more than OPA_BITS = {OPA_BITS}")
    b = Mux(idx.uf, uscale, Mux(idx.of, oscale, idx.frac))
    sh = Mux(idx.uf, ushift, Mux(idx.of, oshift, FRAC_BITS))
    return {"a": a, "b": b, "sh": sh, "base": y0}


#: the rounded product kept between the last two stages, saturated to this many bits: with a
#: 16-bit ``base`` every saturated value still saturates the sum the same way
RND_BITS = 18
#: interp_round's clamped product: RND_BITS + a right shift of up to 16 + 2
PRE_BITS = RND_BITS + 16 + 2


def clamp_product(prod):
    """``a * b`` of :func:`interp_operands` clamped to signed(PRE_BITS), for
    :func:`interp_round` (issue 10: the shifts and rounding at the product's full 58 bits were
    CDP's critical path). Exact: a right shift is at most 16 (FRAC_BITS, or a 5-bit signed
    UFLOW/OFLOW_SHIFT), so a product of magnitude 2**(PRE_BITS-1) or more, shifted either way,
    is beyond RND_BITS and saturates to the same bound as its clamped value."""
    return saturate(prod, PRE_BITS)


def interp_bias(prod, sh):
    """Third step of one table's output, first half: ``prod`` plus its rounding bias for a
    right shift by ``sh >= 0`` (:func:`hdl.lib.fixed.round_bias`); ``prod`` itself for a negative
    ``sh`` (a left shift). Register the result with ``sh`` and finish with :func:`interp_round`
    (issue 10: the bias adder, the barrel shifter and the saturation in one stage were CDP's
    critical path on ECP5, 13.3 ns). ``prod``: signed(PRE_BITS) (:func:`clamp_product`); ``sh``:
    signed(SH_BITS). Returns ``round_bias_shape(signed(PRE_BITS))``."""
    return round_bias(prod, Mux(sh < 0, 0, sh.as_unsigned()[:SH_BITS - 1]))


#: :func:`interp_shift`'s result: PRE_BITS shifted left by up to 16
SHIFTED_BITS = PRE_BITS + 16


def interp_shift(biased, sh):
    """Third step, second half: ``prod`` shifted by ``sh`` from ``biased`` = :func:`interp_bias`
    of ``prod``: rounding half away from zero for ``sh >= 0`` (``prod >> sh``) and shifting left
    for a negative ``sh`` (signed SH_BITS, -16..16); ``prod`` is ``a * b`` of
    :func:`interp_operands` clamped by :func:`clamp_product`. Register the result and saturate
    it with :func:`interp_round` (issue 10: the shifts and the saturation's comparisons in one
    stage were CDP's critical path on ECP5, 10.1 ns). Returns signed(SHIFTED_BITS), exact."""
    pre = signed(PRE_BITS)
    right = round_shift(biased, sh.as_unsigned()[:SH_BITS - 1], pre)
    # a negative sh added no bias: the low PRE_BITS bits are prod itself; -sh <= 16
    left = (biased[:PRE_BITS].as_signed() << (-sh).as_unsigned()[:SH_BITS - 1])[:SHIFTED_BITS]
    return Mux(sh < 0, left.as_signed(), right)


def interp_round(shifted):
    """Third step, last part: :func:`interp_shift`'s ``shifted`` saturated to RND_BITS (exact
    for :func:`interp_finish`: |base| < 2**15, so a sum with a value beyond 2**17 saturates to
    the same int16 bound). Returns signed(RND_BITS)."""
    return saturate(shifted, RND_BITS)


def interp_finish(rnd, base):
    """Last quarter of one table's output: ``saturate16(base + rnd)`` (``rnd`` from
    :func:`interp_round`, ``base`` = T[addr]). Returns signed(16)."""
    return saturate(base + rnd, 16)


def select(le, lo, p):
    """Table choice and statistics: returns ``(use_lo, stats)`` with ``stats`` a 5-bit one-hot
    value in :data:`STAT_NAMES` order. ``le``/``lo``: :func:`index_layout` views; ``p``: a
    :func:`params_layout` view."""
    le_hit, lo_hit = ~le.uf & ~le.of, ~lo.uf & ~lo.of
    le_only, lo_only = le_hit & ~lo_hit, lo_hit & ~le_hit
    both_uf, both_of = le.uf & lo.uf, le.of & lo.of
    hybrid = ~(le_only | lo_only | both_uf | both_of)
    use_lo = lo_only | (both_uf & p.uflow_priority) | (both_of & p.oflow_priority) | \
        (hybrid & p.hybrid_priority)
    return use_lo, Cat(both_uf, both_of, hybrid, le_only, lo_only)
