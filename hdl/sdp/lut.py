"""SDP's two-table LUT (Y sub-unit, int8/int16 pipeline) as combinational Amaranth functions:
table index (:func:`table_index`), one table's output (:func:`table_output`) and the table
choice with its statistics (:func:`select`); the pipeline registers around them and the table
RAMs are in :mod:`hdl.sdp.y`.

v1_ias_lut-programming.rst (exponential / linear index, out-of-range control, hit/miss
priorities), with the integer rules NVIDIA's nvdlav1 SDP follows (C model cmod/hls/sdp/
sdp_y_idx.cpp, sdp_y_inp.cpp, the HLS source of vmod/nvdla/sdp/NV_NVDLA_SDP_HLS_Y_int_idx.v /
_inp.v, and NV_NVDLA_SDP_CORE_Y_lut.v; facts only, recorded with citations in the bit-exact
model's docstrings, verif/model/sdp.py ``_lut_index`` and ``sdp_lut``). They differ from CDP's
LUT (hdl/cdp/lut.py: 22-bit index path, 16-bit fraction, 16-bit output), so SDP has its own:

* input ``x`` and START/END are signed 32 bits; ``x`` underflows a table when ``x <= START``,
  else ``d = x - START`` (1 .. 2**32 - 1);
* exponential LE: ``e = floor(log2 d)``, an underflow also when ``e < LE_INDEX_OFFSET``
  (8-bit signed), index ``e - LE_INDEX_OFFSET``, fraction = the bits of ``d`` below its
  leading one as a 35-bit fraction;
* linear: INDEX_SELECT (8-bit signed) ``s >= 0``: index ``d >> s``, fraction = the ``s`` low
  bits of ``d`` as a 35-bit fraction (``floor(d * 2**35 / 2**s) mod 2**35``); ``s < 0``: index
  ``d << min(-s, 10)``, fraction 0;
* an index >= entries - 1 is an overflow (base entry entries - 1), an underflow's base entry is
  0, and a hit interpolates ``round((T[i] * (2**35 - f) + T[i+1] * f) / 2**35)``;
* underflow / overflow: ``sat32(T[a] + sat32(rnd((x - ORIGIN) * SCALE, SHIFT)))`` with the
  5-bit signed SHIFT (a negative one shifts left), ORIGIN = START (+ ``1 << LE_INDEX_OFFSET``
  as a 32-bit value for an exponential LE table with 0 <= LE_INDEX_OFFSET < 32) or END;
* choice: one table hits -> it; both underflow -> UFLOW_PRIORITY; both overflow ->
  OFLOW_PRIORITY; otherwise HYBRID_PRIORITY (0 = LE, 1 = LO). Statistics (Y_lut.v counters):
  the chosen table underflowed / overflowed / hit (UFLOW / OFLOW / HYBRID), LE hit, LO hit.

Rounding is half away from zero as NVIDIA's (:func:`hdl.lib.fixed.shift_right_round`).
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data

from hdl.lib.fixed import floor_log2, saturate, shift_left_sat, truncate

__all__ = ["LE_ENTRIES", "LO_ENTRIES", "FRAC_BITS", "LUT_BITS", "STAT_NAMES", "index_layout",
           "params_layout", "table_index", "table_output", "select", "fp_table_index"]

LE_ENTRIES, LO_ENTRIES = 65, 257
FRAC_BITS = 35            # fraction handed from the index to the interpolation (yLutFracSize)
LUT_BITS = 32             # LUT input / output, START / END (signed)
#: statistics, one-hot in this order (SDP D_PERF_LUT_UFLOW/OFLOW/HYBRID/LE_HIT/LO_HIT)
STAT_NAMES = ("uflow", "oflow", "hybrid", "le_hit", "lo_hit")


def index_layout(entries: int) -> data.StructLayout:
    """Index of one sample in one table: ``addr`` (base entry: the index on a hit, 0 on an
    underflow, entries - 1 on an overflow), ``frac`` (35 bits, 0 unless a hit), ``uf``, ``of``."""
    return data.StructLayout({"addr": range(entries), "frac": unsigned(FRAC_BITS), "uf": 1,
                              "of": 1})


def params_layout() -> data.StructLayout:
    """SDP's LUT registers as the datapath sees them (S_LUT_*; stable during a layer):
    ``le_exp`` (S_LUT_CFG.LUT_LE_FUNCTION = EXPONENT), ``le_index_offset`` /
    ``le_index_select`` / ``lo_index_select`` (8-bit signed), START / END (32-bit signed), slope
    scales (16-bit signed) and shifts (5-bit signed), the three priorities (0 LE, 1 LO)."""
    return data.StructLayout({
        "le_exp": 1,
        "le_index_offset": signed(8), "le_index_select": signed(8), "lo_index_select": signed(8),
        "le_start": signed(32), "le_end": signed(32), "lo_start": signed(32), "lo_end": signed(32),
        "le_uflow_scale": signed(16), "le_oflow_scale": signed(16),
        "le_uflow_shift": signed(5), "le_oflow_shift": signed(5),
        "lo_uflow_scale": signed(16), "lo_oflow_scale": signed(16),
        "lo_uflow_shift": signed(5), "lo_oflow_shift": signed(5),
        "uflow_priority": 1, "oflow_priority": 1, "hybrid_priority": 1,
    })


def table_index(m: Module, x, start, entries: int, select, *, exponential=None,
                index_offset=None) -> dict:
    """Index of the signed 32-bit sample ``x`` in one table (see the module docstring).

    ``start``: signed(32) START; ``select``: signed(8) INDEX_SELECT (linear mode);
    ``entries``: table size; the LE table also gives ``exponential`` (1 bit) and
    ``index_offset`` (signed(8)). Returns a dict of :func:`index_layout` field values.
    """
    uf0 = x <= start
    d = Signal(32, name="d")                    # x - START: 1 .. 2**32 - 1 unless underflow
    m.d.comb += d.eq((x - start)[:32])
    wide = Cat(Const(0, FRAC_BITS), d)          # d * 2**35
    # linear, SELECT >= 0: index d >> s, fraction the bits below (floor(d*2**35 >> s) mod 2**35)
    s_pos = select.as_unsigned()[:7]
    lin_pos = wide >> s_pos
    neg_amt = Mux(select < -10, 10, -select)[:4]
    lin_idx = Mux(select < 0, d << neg_amt, lin_pos[FRAC_BITS:])       # <= 42 bits, unsigned
    lin_frac = Mux(select < 0, 0, lin_pos[:FRAC_BITS])
    lin_of = ~uf0 & (lin_idx >= entries - 1)
    if exponential is None:
        uf, of, idx, frac = uf0, lin_of, lin_idx[:9], lin_frac
    else:
        e = floor_log2(m, d, 32)
        e8 = Cat(e, Const(0, 3)).as_signed()    # 0..31 as signed(8)
        exp_uf = uf0 | (e8 < index_offset)
        exp_idx = e8 - index_offset              # signed(9), >= 0 unless an underflow
        exp_of = ~exp_uf & (exp_idx >= entries - 1)
        exp_frac = (wide >> e)[:FRAC_BITS]       # the leading one lands at bit 35: dropped
        uf = Mux(exponential, exp_uf, uf0)
        of = Mux(exponential, exp_of, lin_of)
        idx = Mux(exponential, exp_idx.as_unsigned()[:9], lin_idx[:9])
        frac = Mux(exponential, exp_frac, lin_frac)
    hit = ~uf & ~of
    return {"addr": Mux(uf, 0, Mux(of, entries - 1, idx)), "frac": Mux(hit, frac, 0),
            "uf": uf, "of": of}


def _slope(v, shift):
    """``sat32(rnd(v >> shift))`` for a signed(5) ``shift``: a right shift rounds half away
    from zero, a negative shift is an exact left shift; saturated to 32 bits."""
    right = truncate(v, shift.as_unsigned()[:4], LUT_BITS)
    left = shift_left_sat(v, (-shift).as_unsigned()[:5], LUT_BITS)
    return Mux(shift < 0, left, right)


def table_output(x, idx, y0, y1, umin, vmax, uscale, ushift, oscale, oshift):
    """Signed 32-bit output of one table for sample ``x`` (signed 32).

    ``idx``: its :func:`index_layout` view; ``y0`` / ``y1``: T[idx.addr] / T[idx.addr + 1]
    (signed 16; T[entries-1] twice at the end); ``umin``: the underflow origin (signed, START
    plus the exponential bias, at least 34 bits); ``vmax``: END (signed 32); scales signed(16),
    shifts signed(5).
    """
    f = idx.frac
    # T[i]*(2**35 - f) + T[i+1]*f = T[i]*2**35 + (T[i+1] - T[i])*f, exact (54 bits)
    hit_sum = (y0 << FRAC_BITS) + (y1 - y0) * f
    hit_y = truncate(hit_sum, FRAC_BITS, LUT_BITS)
    uf_y = saturate(y0 + _slope((x - umin) * uscale, ushift), LUT_BITS)
    of_y = saturate(y0 + _slope((x - vmax) * oscale, oshift), LUT_BITS)
    return Mux(idx.uf, uf_y, Mux(idx.of, of_y, hit_y))


def select(le, lo, p):
    """Table choice and statistics: ``(use_lo, stats)``, ``stats`` a 5-bit one-hot-per-kind
    value in :data:`STAT_NAMES` order (uflow/oflow/hybrid of the chosen table, LE hit, LO hit).
    ``le`` / ``lo``: :func:`index_layout` views; ``p``: a :func:`params_layout` view."""
    le_hit, lo_hit = ~le.uf & ~le.of, ~lo.uf & ~lo.of
    both_uf, both_of = le.uf & lo.uf, le.of & lo.of
    hybrid = ~both_uf & ~both_of & (le_hit == lo_hit)
    use_lo = (both_uf & p.uflow_priority) | (both_of & p.oflow_priority) | \
        (hybrid & p.hybrid_priority) | (lo_hit & ~le_hit)
    sel_uf = Mux(use_lo, lo.uf, le.uf)
    sel_of = Mux(use_lo, lo.of, le.of)
    return use_lo, Cat(sel_uf, sel_of, ~sel_uf & ~sel_of, le_hit, lo_hit)


def fp_table_index(m: Module, d, entries: int, select, *, exponential=None,
                   index_offset=None, name: str = "fidx") -> dict:
    """Index of one sample in one table in FP16 mode (nv_full; the model's ``_fp_lut_index``
    and :func:`verif.model.lut.fp_table_index` with SDP's 35-bit fraction, after nvdlav1
    cmod/hls/sdp/sdp_y_idx.cpp), from ``d`` = the fp32 pattern of ``x - START``: a dict of
    :func:`index_layout` fields (``addr`` the index on a hit, 0 on an underflow, ``entries - 1``
    on an overflow; ``frac`` the 35-bit fraction on a hit, else 0; ``uf``, ``of``) and
    ``addr1``, the next entry's address (``addr + 1`` capped at ``entries - 1``).

    Underflow: ``d`` a NaN, a zero or negative. Linear (``select`` signed(8)): ``d * 2**-select``
    exactly, i.e. the 24-bit mantissa M (2**23 <= M < 2**24) shifted right by ``r = 150 +
    select - e``: the index ``M >> r`` and the fraction the next 35 bits (truncated; both 0 from
    ``r = 59`` on); it overflows (index >= ``entries - 1`` = 2**k) exactly when ``r <= 23 - k``,
    decided from ``r`` alone, so the shifter only serves ``r > 23 - k`` (a 9-bit index).
    Exponential (the LE table: ``exponential`` 1 bit, ``index_offset`` signed(8)): ``L = e -
    127``, an underflow when ``L < index_offset``, index ``L - index_offset``, fraction = the 23
    mantissa bits followed by 12 zeros. ``entries - 1`` must be a power of two."""
    d = Value.cast(d)
    k = (entries - 1).bit_length() - 1
    if 1 << k != entries - 1:
        raise ValueError(f"{entries} entries: entries - 1 must be a power of two")
    sign, e, mant = d[31], d[23:31], d[:23]
    uf0 = Signal(name=f"{name}_uf0")
    m.d.comb += uf0.eq((e.all() & mant.any()) | ~d[:31].any() | sign)
    r = Signal(signed(11), name=f"{name}_r")
    m.d.comb += r.eq(150 + select - e)
    r0 = 24 - k                                     # the smallest r without an overflow
    lin_of = ~uf0 & (r < r0)
    # r0 <= r <= 59 (larger shifts give 0): M * 2**35 >> r, from M * 2**35 >> r0 (exact)
    rs = Signal(range(60 - r0), name=f"{name}_rs")
    m.d.comb += rs.eq(Mux(r > 59, 59 - r0, (r - r0)[:6]))
    t = Signal(FRAC_BITS + k + 1, name=f"{name}_t")
    m.d.comb += t.eq(Cat(Const(0, FRAC_BITS), mant, Const(1, 1))[r0:] >> rs)
    lin_idx = t[FRAC_BITS:]                        # < 2**k when r >= r0
    if exponential is not None:
        lg = Signal(signed(9), name=f"{name}_lg")
        m.d.comb += lg.eq(e - 127)
        exp_idx = Signal(signed(10), name=f"{name}_xi")
        m.d.comb += exp_idx.eq(lg - index_offset)
        exp_uf = uf0 | (lg < index_offset)
        exp_of = ~exp_uf & (exp_idx >= entries - 1)
        uf = Mux(exponential, exp_uf, uf0)
        of = Mux(exponential, exp_of, lin_of)
        idx = Mux(exponential, exp_idx.as_unsigned()[:k], lin_idx[:k])
        frac = Mux(exponential, Cat(Const(0, FRAC_BITS - 23), mant), t[:FRAC_BITS])
    else:
        uf, of, idx, frac = uf0, lin_of, lin_idx[:k], t[:FRAC_BITS]
    ufs, ofs = Signal(name=f"{name}_uf"), Signal(name=f"{name}_of")
    m.d.comb += [ufs.eq(uf), ofs.eq(of)]
    hit = ~ufs & ~ofs
    return {"addr": Mux(ufs, 0, Mux(ofs, entries - 1, idx)), "frac": Mux(hit, frac, 0),
            "uf": ufs, "of": ofs,
            "addr1": Mux(ufs, 1, Mux(ofs, entries - 1, Cat(idx, Const(0, 1)) + 1))}
