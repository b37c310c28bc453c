"""SDP model: MRDMA / on-the-fly input, BS (X1), BN (X2) and EW (Y) sub-units, output converter,
WDMA or hand-off to PDP.

Specification: v1_ias_unit_description.rst "Single Data Point Processor" (block diagram: M -> X1
-> X2 -> Y -> C -> WDMA/PDP), v1_ias_programming_guide.rst "SDP programming" and its "Limitation /
SDP" section, v1_ias_precision.rst (convertor, truncate, shifter), format.rst "Bias Data Format" /
"Batch Normalization Data Format", v1_ias_lut-programming.rst (LUT of the Y sub-unit).

Integer datapath widths and rounding rules that the documents leave open were settled from NVIDIA's
nv_small RTL (vmod/nvdla/sdp/NV_NVDLA_SDP_HLS_*.v, vmod/vlibs/NV_NVDLA_HLS_shift*.v) and C model
(cmod/hls/sdp/sdp_x.cpp, sdp_c.cpp, cmod/sdp/NV_NVDLA_sdp.cpp); every such fact is cited where it
is used. All arithmetic is on int64 numpy arrays of shape (C, H, W).
"""
from __future__ import annotations

import numpy as np

from verif.model.memory import ram
from verif.model.fp import (fp16_isnan, fp16_to_fp17, fp16_to_fp32, fp16_to_int16, fp17_add,
                            fp17_mul, fp17_to_fp32, fp32_to_fp16, fp32_to_fp17, fp_add, fp_isnan,
                            fp_mul, fp_pick, fp_sub, frac_to_fp17)
from verif.model.formats import (ModelConfigError, cube_addresses, flying_cube, read_cube, saturate,
                                 warn_limitation)
from verif.model.lut import EXPONENT, LINEAR, LutParams, fp_table_index, sext, slope_and_priority_fields

# ---------------------------------------------------------------------------------------------
# integer primitives (v1_ias_precision.rst; bit-exact with NVIDIA's RTL)
# ---------------------------------------------------------------------------------------------


def sign_extend(x, bits: int):
    """Two's complement value of the low ``bits`` bits of ``x`` (int or int64 array)."""
    if isinstance(x, np.ndarray):
        x = x.astype(np.int64) & ((1 << bits) - 1)
        return np.where(x >> (bits - 1) != 0, x - (1 << bits), x)
    x &= (1 << bits) - 1
    return x - (1 << bits) if x >> (bits - 1) else x


def shift_right_round(x: np.ndarray, shift: int, in_bits: int, out_bits: int) -> np.ndarray:
    """``saturate_round(x >> shift)`` (v1_ias_precision.rst "Truncate"/"Convertor").

    Round half away from zero, then saturate to the signed ``out_bits`` range. Observed in
    NVIDIA's RTL (vlibs/NV_NVDLA_HLS_shiftrightsu.v): the rounding increment is the first
    dropped bit, for negative values only when some lower dropped bit is also set; a shift of
    ``in_bits`` or more gives 0. ``x`` is an int64 array holding ``in_bits``-bit values.
    """
    x = np.asarray(x, dtype=np.int64)
    if shift >= in_bits:
        return np.zeros_like(x)
    if shift == 0:
        return saturate(x, out_bits)
    q = x >> shift
    guide = (x >> (shift - 1)) & 1
    sticky = (x & ((1 << (shift - 1)) - 1)) != 0
    q = q + (guide & ((x >= 0) | sticky))
    return saturate(q, out_bits)


def shift_left_sat(op, shift: int, out_bits: int = 32):
    """``saturate(op << shift)`` to ``out_bits`` signed bits (v1_ias_precision.rst "Shifter").

    Observed in NVIDIA's RTL (vlibs/NV_NVDLA_HLS_shiftleftsu.v): the 16-bit ALU operand is
    shifted left by up to 63 into 32 bits with saturation.
    """
    op = np.asarray(op, dtype=np.int64)
    if shift >= 40:     # any non-zero 16-bit operand saturates; avoid int64 overflow
        return np.where(op > 0, (1 << (out_bits - 1)) - 1, np.where(op < 0, -(1 << (out_bits - 1)), 0))
    return saturate(op << shift, out_bits)


ALU_MAX, ALU_MIN, ALU_SUM, ALU_EQL = 0, 1, 2, 3


def x_subunit(x: np.ndarray, *, alu_bypass: bool, alu_algo: int, alu_op, alu_shift: int,
              mul_bypass: bool, mul_prelu: bool, mul_op, mul_shift: int,
              relu_bypass: bool) -> np.ndarray:
    """One BS (X1) or BN (X2) sub-unit on 32-bit input ``x`` (int64 array, any shape).

    ``alu_op``/``mul_op``: 16-bit signed operands (scalar or broadcastable array).
    Order ALU -> MUL -> truncate -> ReLU (unit description "Function Description": "Block X1/X2
    ... Bias addition, BatchNorm, PReLU, ReLU"). Facts from NVIDIA's nv_small RTL
    (NV_NVDLA_SDP_HLS_X_int_alu/mul/trt/relu.v):
      * ALU: operand = saturate32(op16 << ALU_SHIFT_VALUE); MAX/MIN/SUM on 33 bits; any algo
        other than MAX/MIN is SUM. Bypassed ALU passes x (sign-extended to 33 bits).
      * MUL: 33-bit ALU output ``a`` times 16-bit op = 49-bit product. PReLU: non-negative
        ``a`` passes as its low 32 bits (wrapping, no truncation: X_int_mul.v ``bypass_trt =
        cfg_mul_prelu & !mul_data_sync[32]``, X_int_trt.v takes ``mul_data_out[31:0]``);
        negative ``a`` is multiplied. The ALU is not told about PReLU (X_int_alu.v has no PReLU
        input; NV_NVDLA_SDP_HLS_x1_int.v/x2_int.v chain ALU -> MUL -> TRT -> RELU whatever
        cfg_mul_prelu is), so PReLU with the ALU on — a programming-guide limitation that
        NVIDIA's RTL runs — applies PReLU to the ALU's 33-bit MAX/MIN/SUM result.
      * truncate: the 49-bit value (the product, or the sign-extended ALU output when MUL is
        bypassed — the shift applies even then) is shifted right by MUL_SHIFT_VALUE[5:0] with
        round-half-away-from-zero and saturated to 32 bits.
      * ReLU: max(x, 0) on 32 bits.
    Returns int64 32-bit values.
    """
    x = np.asarray(x, dtype=np.int64)
    if alu_bypass:
        a = x
    else:
        op = shift_left_sat(alu_op, alu_shift, 32)
        if alu_algo == ALU_MAX:
            a = np.maximum(x, op)
        elif alu_algo == ALU_MIN:
            a = np.minimum(x, op)
        else:
            a = x + op
    if mul_bypass:
        y = shift_right_round(a, mul_shift & 0x3F, 49, 32)
    else:
        prod = a * np.asarray(mul_op, dtype=np.int64)
        y = shift_right_round(prod, mul_shift & 0x3F, 49, 32)
        if mul_prelu:
            y = np.where(a >= 0, sign_extend(a, 32), y)
    if not relu_bypass:
        y = np.maximum(y, 0)
    return y



def x_subunit_fp(x: np.ndarray, *, alu_bypass: bool, alu_algo: int, alu_op, mul_bypass: bool,
                 mul_prelu: bool, mul_op, relu_bypass: bool, nan_to_zero: bool) -> np.ndarray:
    """One BS (X1) or BN (X2) sub-unit of nv_full's FP16 pipeline on fp32 bit patterns ``x``
    (int64 array, any shape). Facts from NVIDIA's nvdlav1 SDP (generated from its
    cmod/hls/sdp/sdp_x.cpp; operators of :mod:`verif.model.fp`, not IEEE-754):

    * ``alu_op`` / ``mul_op``: 16-bit operands (register or memory), read as fp16 (a NaN one
      becomes 0 with NAN_TO_ZERO), widened to fp32; ALU_SHIFT_VALUE, MUL_SHIFT_VALUE ignored;
    * ALU: MAX / MIN (sign-magnitude compare, a NaN wins), SUM (fp32 add, ``x`` first); the
      other algorithm (EQL) is not modelled here (ModelConfigError by the caller);
    * MUL: fp32 ``x * op``; PReLU passes ``x`` whose sign bit is 0 (a positive NaN too);
    * ReLU: a NaN or a value with sign 0 passes, anything else becomes +0.
    """
    x = np.asarray(x, dtype=np.int64)

    def op32(op):
        op = np.asarray(op, dtype=np.int64) & 0xFFFF
        if nan_to_zero:
            op = np.where(fp16_isnan(op), 0, op)
        return fp16_to_fp32(op)

    if not alu_bypass:
        o = op32(alu_op)
        if alu_algo == ALU_MAX:
            x = fp_pick(x, o, 8, 23, True)
        elif alu_algo == ALU_MIN:
            x = fp_pick(x, o, 8, 23, False)
        else:
            x = fp_add(x, o, 8, 23)
    if not mul_bypass:
        prod = fp_mul(x, op32(mul_op), 8, 23)
        x = np.where(mul_prelu & ((x >> 31) & 1 == 0), x, prod) if mul_prelu else prod
    if not relu_bypass:
        x = np.where(fp_isnan(x, 8, 23) | ((x >> 31) & 1 == 0), x, 0)
    return x


def output_convert(x: np.ndarray, offset: int, scale: int, shift: int, out_bits: int = 8,
                   mid_bits: int = 17) -> np.ndarray:
    """SDP output converter C (v1_ias_precision.rst "Convertor"):
    ``saturate(round((x - offset) * scale >> shift))``.

    Observed in NVIDIA's RTL (NV_NVDLA_SDP_HLS_C_int.v): 32-bit x minus 32-bit signed CVT_OFFSET
    on 33 bits, times 16-bit signed CVT_SCALE on 49 bits, shifted right by CVT_SHIFT (6 bits)
    with round-half-away-from-zero and saturation to 17 bits, then saturated to int8/int16.
    The EW operand converters (cmod sdp_y_cvt.cpp) are the same with ``mid_bits=49`` and
    ``out_bits=32``.
    """
    d = (np.asarray(x, dtype=np.int64) - offset) * scale
    t = shift_right_round(d, shift, 49, min(mid_bits, 49))
    return saturate(t, out_bits)


# ---------------------------------------------------------------------------------------------
# LUT (Y sub-unit) — v1_ias_lut-programming.rst
# ---------------------------------------------------------------------------------------------
LE_ENTRIES, LO_ENTRIES = 65, 257
# Widths of SDP's int8/int16 LUT path, observed in NVIDIA's C model (cmod/hls/sdp/sdp.h, the HLS
# source of nvdlav1 vmod/nvdla/sdp/NV_NVDLA_SDP_CORE_Y_idx.v / _inp.v): LUT input and output are
# 32-bit signed (yLutInSize, yInpOutSize), the fraction handed from index to interpolation is 35
# bits (yLutFracSize), the table index is 9 bits unsigned (yLutIndexSize; the linear index
# saturates there), START/END are 32-bit signed registers.
LUT_FRAC_BITS = 35
LUT_OUT_BITS = 32
LUT_INDEX_MAX = (1 << 9) - 1
# programming guide "Limitation / LUT", SDP INT8
SDP_LE_SELECT_RANGE = (-6, 25)
SDP_LO_SELECT_RANGE = (-8, 23)
SDP_LE_OFFSET_RANGE = (-64, 31)
# statistics keys of sdp_lut -> SDP D_PERF_LUT_* field names
SDP_LUT_PERF_FIELDS = {"UFLOW": "LUT_UFLOW", "OFLOW": "LUT_OFLOW", "HYBRID": "LUT_HYBRID",
                       "LE_HIT": "LUT_LE_HIT", "LO_HIT": "LUT_LO_HIT"}


def sdp_lut_params(sdp) -> LutParams:
    """LUT registers of SDP (GroupView) as a :class:`verif.model.lut.LutParams`.

    SDP's S_LUT_LE/LO_START/END are single 32-bit signed registers (CDP's are 38-bit LOW/HIGH
    pairs); LE_INDEX_OFFSET / LE_INDEX_SELECT / LO_INDEX_SELECT are 8-bit signed (cmod sdp.h
    yLutRegIdxType), slope scales 16-bit signed, slope shifts 5-bit signed.
    """
    return LutParams(
        le_function=sdp.f("LUT_LE_FUNCTION"),
        le_index_offset=sext(sdp.f("LUT_LE_INDEX_OFFSET"), 8),
        le_index_select=sext(sdp.f("LUT_LE_INDEX_SELECT"), 8),
        lo_index_select=sext(sdp.f("LUT_LO_INDEX_SELECT"), 8),
        le_start=sext(sdp.f("LUT_LE_START"), 32), le_end=sext(sdp.f("LUT_LE_END"), 32),
        lo_start=sext(sdp.f("LUT_LO_START"), 32), lo_end=sext(sdp.f("LUT_LO_END"), 32),
        **slope_and_priority_fields(sdp))


def check_sdp_lut_limits(p: LutParams) -> None:
    """Programming guide "Limitation / LUT" rules for SDP INT8; a
    :class:`verif.model.formats.LimitationWarning` naming the first rule broken.

    The hardware runs such tables: the index path (nvdlav1 cmod/hls/sdp/sdp_y_idx.cpp, the HLS
    source of vmod/nvdla/sdp/NV_NVDLA_SDP_HLS_Y_int_idx.v) computes the index from START and the
    8-bit signed INDEX_SELECT / LE_INDEX_OFFSET for any value (the index saturates at 9 bits) and
    uses END only as the overflow extrapolation origin (sdp_y_inp.cpp), which :func:`sdp_lut`
    models for every register value; so a breach is a warning, not an error.

    Linear mode: LE_END-LE_START == 1<<(LE_INDEX_SELECT+6), LO_END-LO_START ==
    1<<(LO_INDEX_SELECT+8), INDEX_SELECT within LE [-6, 25] / LO [-8, 23]. Exponential mode:
    LE_INDEX_OFFSET within [-64, 31] and LE_END-LE_START == 1<<(LE_INDEX_OFFSET+64), where an end
    beyond INT32 is INT32_MAX ("use INT32_MAX instead").
    """
    msg = _sdp_lut_breach(p)
    if msg is not None:
        warn_limitation(msg + "; computing what the hardware computes", stacklevel=3)


def _sdp_lut_breach(p: LutParams) -> str | None:
    """The first programming-guide Limitation/LUT rule (SDP INT8) ``p`` breaks, or None."""
    def rng(name, v, bounds, mode):
        lo, hi = bounds
        if not lo <= v <= hi:
            return (f"SDP.S_LUT_INFO.{name}={v} outside [{lo}, {hi}] "
                    f"(programming guide Limitation/LUT, SDP INT8, {mode} mode)")
        return None
    if p.le_function == LINEAR:
        bad = rng("LUT_LE_INDEX_SELECT", p.le_index_select, SDP_LE_SELECT_RANGE, "linear")
        want = 1 << max(p.le_index_select + 6, 0)
        rule, got = "1<<(LUT_LE_INDEX_SELECT+6)", p.le_end - p.le_start
    else:
        bad = rng("LUT_LE_INDEX_OFFSET", p.le_index_offset, SDP_LE_OFFSET_RANGE, "exponential")
        want = min(p.le_start + (1 << max(p.le_index_offset + 64, 0)), (1 << 31) - 1) - p.le_start
        rule, got = "1<<(LUT_LE_INDEX_OFFSET+64) (capped at INT32_MAX)", p.le_end - p.le_start
    if bad:
        return bad
    if got != want:
        return (f"SDP.S_LUT_LE_END-S_LUT_LE_START={got} must equal {rule}={want} "
                "(programming guide Limitation/LUT)")
    bad = rng("LUT_LO_INDEX_SELECT", p.lo_index_select, SDP_LO_SELECT_RANGE, "linear")
    if bad:
        return bad
    if p.lo_end - p.lo_start != 1 << (p.lo_index_select + 8):
        return (f"SDP.S_LUT_LO_END-S_LUT_LO_START={p.lo_end - p.lo_start} must equal "
                f"1<<(LUT_LO_INDEX_SELECT+8)={1 << (p.lo_index_select + 8)} (programming guide Limitation/LUT)")
    return None


def _lut_index(x: np.ndarray, start: int, n: int, exponential: bool, offset: int, select: int):
    """Index, 35-bit fraction, underflow and overflow of one table for 32-bit ``x`` (int64).

    Observed in NVIDIA's C model (cmod/hls/sdp/sdp_y_idx.cpp, int path): underflow when
    ``x <= START``; else ``d = x - START`` (1 .. 2**32-1).
      * exponential (LE only): ``e = floor(log2 d)``; underflow when ``e < LE_INDEX_OFFSET``;
        index ``e - LE_INDEX_OFFSET``; fraction = the bits below the leading one as a 35-bit
        fraction (exact: ``(d - 2**e) << (35 - e)``).
      * linear: SELECT (8-bit signed) >= 0: index ``d >> SELECT``, fraction = the SELECT low
        bits of d as a 35-bit fraction (truncated when SELECT > 35); SELECT < 0: index
        ``d << -SELECT`` and fraction 0. The index saturates at 511 (9-bit unsigned).
    An index >= n-1 is an overflow (read address n-1); underflows read address 0.
    """
    uf = x <= start
    d = np.where(uf, 1, x - start)
    if exponential:
        e = (np.frexp(d.astype(np.float64))[1] - 1).astype(np.int64)      # exact below 2**53
        uf = uf | (e < offset)
        idx = e - offset
        frac = (d - (np.int64(1) << e)) << (LUT_FRAC_BITS - e)
    elif select >= 0:
        idx = np.minimum(d >> min(select, 40), LUT_INDEX_MAX)
        low = d & ((np.int64(1) << min(select, 40)) - 1)
        frac = low << (LUT_FRAC_BITS - select) if select <= LUT_FRAC_BITS \
            else low >> min(select - LUT_FRAC_BITS, 40)
    else:
        idx = np.minimum(d << min(-select, 10), LUT_INDEX_MAX)
        frac = np.zeros_like(d)
    of = ~uf & (idx >= n - 1)
    hit = ~uf & ~of
    addr = np.where(hit, idx, np.where(of, n - 1, 0))
    return addr, np.where(hit, frac, 0), uf, of


def _select(le_u, le_o, lo_u, lo_o, p: LutParams) -> tuple[np.ndarray, dict[str, int]]:
    """SDP's table choice (see :func:`sdp_lut`) from both tables' underflow/overflow flags:
    whether LO is used, and Y_lut.v's statistics (``UFLOW``/``OFLOW``/``HYBRID``: the selected
    table under/overflowed/hit; ``LE_HIT``/``LO_HIT``: samples hitting each table)."""
    le_hit, lo_hit = ~(le_u | le_o), ~(lo_u | lo_o)
    both_u, both_o = le_u & lo_u, le_o & lo_o
    hybrid_case = ~both_u & ~both_o & (le_hit == lo_hit)      # both hit, or u/o mix
    use_lo = (both_u & bool(p.uflow_priority)) | (both_o & bool(p.oflow_priority)) \
        | (hybrid_case & bool(p.hybrid_priority)) | (lo_hit & ~le_hit)
    sel_u = np.where(use_lo, lo_u, le_u)
    sel_o = np.where(use_lo, lo_o, le_o)
    stats = {"UFLOW": int(sel_u.sum()), "OFLOW": int(sel_o.sum()),
             "HYBRID": int((~sel_u & ~sel_o).sum()), "LE_HIT": int(le_hit.sum()),
             "LO_HIT": int(lo_hit.sum())}
    return use_lo, stats


def _signed_shift_round(v: np.ndarray, shift: int, out_bits: int) -> np.ndarray:
    """``v >> shift`` for a 5-bit signed ``shift``: right shifts round half away from zero,
    negative shifts are exact left shifts; saturated to ``out_bits`` (cmod nvdla_int.h
    IntSignedShiftRight: ac_fixed AC_RND_INF / AC_SAT)."""
    v = np.asarray(v, np.int64)
    if shift >= 0:
        return shift_right_round(v, shift, 64, out_bits)
    return saturate(np.clip(v, -(1 << 40), 1 << 40) << (-shift), out_bits)


def sdp_lut(x: np.ndarray, le_table: np.ndarray, lo_table: np.ndarray,
            p: LutParams) -> tuple[np.ndarray, dict[str, int]]:
    """SDP LUT (Y sub-unit, int8/int16 pipeline) on 32-bit ``x`` (int64 array, any shape).

    v1_ias_lut-programming.rst (exponential/linear modes, out-of-range control, hit/miss
    priorities) with the integer rules of NVIDIA's C model (cmod/hls/sdp/sdp_y_idx.cpp,
    sdp_y_inp.cpp, hls_wrapper/sdp_hls_wrapper.cpp; HLS source of the nvdlav1 Y RTL) and nvdlav1
    RTL vmod/nvdla/sdp/NV_NVDLA_SDP_CORE_Y_lut.v:

    * selection (sdp_y_idx.cpp): both underflow -> UFLOW_PRIORITY; both overflow ->
      OFLOW_PRIORITY; both hit, or one underflows while the other overflows -> HYBRID_PRIORITY;
      else the table that hits. Priority 0 = LE, 1 = LO.
    * hit (sdp_y_inp.cpp): ``y = (T[i]*(2**35-f) + T[i+1]*f) / 2**35``, rounded half away from
      zero, saturated to 32 bits.
    * under/overflow: ``y = sat32(T[a] + sat32(rnd((x - OFFSET - BIAS) * SCALE >> SHIFT)))``
      with ``a`` = 0 / N-1, OFFSET = START / END of the selected table, SCALE/SHIFT its
      UFLOW/OFLOW slope (SHIFT 5-bit signed, negative = left shift), and BIAS =
      ``1 << LE_INDEX_OFFSET`` only for an exponential LE underflow with LE_INDEX_OFFSET >= 0
      (Y_lut.v: 32-bit ``1 << offset``, so 0 for offsets >= 32; NVIDIA's C model uses ``> 0``
      and differs for offset 0 — the RTL is followed).

    Returns the 32-bit results (int64, shape of x) and the statistics of Y_lut.v's counters:
    ``UFLOW``/``OFLOW`` = samples whose selected table under/overflowed, ``HYBRID`` = samples
    whose selected table hit (interpolated output), ``LE_HIT``/``LO_HIT`` = samples hitting
    LE / LO (whatever was selected). NB: lut-programming.rst "LUT Statistics" describes other
    counts (X only / Y only / both); the hardware's are modelled.
    """
    x = np.asarray(x, np.int64)
    exp = p.le_function == EXPONENT
    le_a, le_f, le_u, le_o = _lut_index(x, p.le_start, len(le_table), exp, p.le_index_offset,
                                        p.le_index_select)
    lo_a, lo_f, lo_u, lo_o = _lut_index(x, p.lo_start, len(lo_table), False, 0, p.lo_index_select)
    use_lo, stats = _select(le_u, le_o, lo_u, lo_o, p)

    def table_out(table, a, f, u, o, start, end, us, ush, os_, osh, bias):
        n = len(table)
        y0 = table[a]
        y1 = table[np.minimum(a + 1, n - 1)]
        hit_y = shift_right_round(y0 * ((1 << LUT_FRAC_BITS) - f) + y1 * f, LUT_FRAC_BITS, 64,
                                  LUT_OUT_BITS)
        uf_y = saturate(y0 + _signed_shift_round((x - (start + bias)) * us, ush, LUT_OUT_BITS),
                        LUT_OUT_BITS)
        of_y = saturate(y0 + _signed_shift_round((x - end) * os_, osh, LUT_OUT_BITS), LUT_OUT_BITS)
        return np.where(u, uf_y, np.where(o, of_y, hit_y))

    bias = sext(1 << p.le_index_offset, 32) if exp and 0 <= p.le_index_offset < 32 else 0
    ly = table_out(le_table, le_a, le_f, le_u, le_o, p.le_start, p.le_end, p.le_uflow_scale,
                   p.le_uflow_shift, p.le_oflow_scale, p.le_oflow_shift, bias)
    oy = table_out(lo_table, lo_a, lo_f, lo_u, lo_o, p.lo_start, p.lo_end, p.lo_uflow_scale,
                   p.lo_uflow_shift, p.lo_oflow_scale, p.lo_oflow_shift, 0)
    return np.where(use_lo, oy, ly), stats


FP17_ONE = 31 << 10          # fp17 1.0


def _fp_lut_index(x: np.ndarray, start: int, n: int, exponential: bool, offset: int, select: int):
    """Read address, 35-bit fraction, underflow and overflow of one table in FP16 mode for
    fp32 ``x`` (int64 bit patterns): :func:`verif.model.lut.fp_table_index` of
    ``d = x - START`` in fp32 (START the register's fp32 pattern) with a 35-bit fraction;
    overflows read address n-1, underflows address 0 (nvdlav1 cmod/hls/sdp/sdp_y_idx.cpp, the
    source of NV_NVDLA_SDP_CORE_Y_idx.v)."""
    idx, frac, uf, of = fp_table_index(fp_sub(x, start & 0xFFFFFFFF, 8, 23), n, exponential,
                                       offset, select, LUT_FRAC_BITS)
    return np.where(of, n - 1, idx), frac, uf, of


def sdp_lut_fp(x: np.ndarray, le_table: np.ndarray, lo_table: np.ndarray,
               p: LutParams) -> tuple[np.ndarray, dict[str, int]]:
    """SDP LUT (Y sub-unit) in FP16 mode on fp32 ``x`` (int64 bit patterns): table entries and
    slope scales are fp16 patterns, START/END fp32 patterns, slope shifts unused (nvdlav1
    cmod/hls/sdp/sdp_y_idx.cpp, sdp_y_inp.cpp and NV_NVDLA_SDP_CORE_Y_lut.v; operators of
    :mod:`verif.model.fp`). Hit: ``fp17_to_fp32(fp17_add(fp17_mul(a0, T[i]), fp17_mul(a1,
    T[i+1])))`` with ``a1`` the fraction and ``a0`` its complement ``1 - f`` (1.0 for f = 0) in
    fp17; under/overflow: ``fp17_to_fp32(fp17_add(T[a], fp17_mul(fp32_to_fp17(x - (START|END
    + BIAS)), SCALE)))``, BIAS the fp32 ``{0, LE_INDEX_OFFSET + 127, 0}`` for an exponential LE
    underflow (else +0). Selection and statistics as :func:`sdp_lut`."""
    x = np.asarray(x, np.int64)
    exp = p.le_function == EXPONENT
    le_a, le_f, le_u, le_o = _fp_lut_index(x, p.le_start, len(le_table), exp, p.le_index_offset,
                                           p.le_index_select)
    lo_a, lo_f, lo_u, lo_o = _fp_lut_index(x, p.lo_start, len(lo_table), False, 0,
                                           p.lo_index_select)
    use_lo, stats = _select(le_u, le_o, lo_u, lo_o, p)

    def table_out(table, a, f, u, o, start, end, uscale, oscale, bias):
        t = np.asarray(table, np.int64) & 0xFFFF
        n = len(t)
        t0, t1 = fp16_to_fp17(t[a]), fp16_to_fp17(t[np.minimum(a + 1, n - 1)])
        a0 = np.where(f == 0, FP17_ONE, frac_to_fp17((np.int64(1) << 35) - f, 35))
        hit_y = fp17_add(fp17_mul(a0, t0), fp17_mul(frac_to_fp17(f, 35), t1))
        origin = np.where(u, fp_add(start & 0xFFFFFFFF, bias, 8, 23), end & 0xFFFFFFFF)
        scale = fp16_to_fp17(np.where(u, uscale & 0xFFFF, oscale & 0xFFFF))
        diff = fp32_to_fp17(fp_sub(x, origin, 8, 23))
        flow_y = fp17_add(t0, fp17_mul(diff, scale))
        return fp17_to_fp32(np.where(u | o, flow_y, hit_y))

    bias = (((p.le_index_offset + 127) & 0xFF) << 23) if exp else 0
    ly = table_out(le_table, le_a, le_f, le_u, le_o, p.le_start, p.le_end, p.le_uflow_scale,
                   p.le_oflow_scale, bias)
    oy = table_out(lo_table, lo_a, lo_f, lo_u, lo_o, p.lo_start, p.lo_end, p.lo_uflow_scale,
                   p.lo_oflow_scale, 0)
    return np.where(use_lo, oy, ly), stats


def one_by_one(w: int, h: int) -> bool:
    """A W x H = 1 x 1 data cube: NVIDIA's SDP DMAs move it as one contiguous run of its
    channel atoms from the base address, ignoring the surface stride (nv_small RTL:
    NV_NVDLA_SDP_MRDMA_ig.v, NV_NVDLA_SDP_RDMA_ig.v and NV_NVDLA_SDP_WDMA_cmd.v
    ``cfg_mode_1x1_pack = (width == 0) & (height == 0)`` make the whole cube one request;
    observed: a 1x1x16 layer with a 32-byte destination surface stride writes its second atom
    at base + 8). Applies to MRDMA's input, the PER_ELEMENT operands and WDMA's output."""
    return w == 1 and h == 1


def untaken_operand_fits(w: int, h: int, catoms: int, *, two_byte: bool, per_element: bool) -> bool:
    """Whether all of an untaken DATA_USE = BOTH operand stream fits NVIDIA's SDP operand DMA
    (``w`` x ``h`` pixels, ``catoms`` channel atoms; DATA_SIZE two bytes or one, DATA_MODE), so
    that the layer completes (issue 36 item 1). Settled on NVIDIA's nv_small RTL: 720 programs
    over DATA_SIZE, DATA_MODE, which operand is untaken, W 1..6, H 1..3, C 8..48, under the
    ``nvidia`` memory profile.

    What NVIDIA's RTL does (nv_small NV_NVDLA_SDP_RDMA_ig.v, NV_NVDLA_SDP_RDMA_eg.v,
    NV_NVDLA_SDP_RDMA_EG_ro.v, NV_NVDLA_SDP_core.v), step by step as simulated here:

    * the DMA reads one request per line (PER_ELEMENT: ``w`` atoms of 2 or 4 bytes per element)
      or one for the whole cube (PER_KERNEL, or a 1 x 1 cube); the egress cuts each request into
      groups of up to four 8-byte beats and writes a group's untaken half into the re-order
      FIFOs together with its taken half: one-byte operands put two atoms in a group (re-order
      FIFOs rod0, rod1), two-byte operands one atom across rod0 and rod1;
    * a group waits until every re-order FIFO it writes has room; the taken operand then moves
      on, the untaken one stays. A re-order FIFO takes one more entry only in the cycle right
      after the one before (registered ready): with a group at most every few cycles, each
      holds one atom;
    * the untaken stream's output stage and the core's operand packer hold two outputs, three
      when three follow back to back from atoms already waiting (the first group's atoms
      repeated, PER_KERNEL); an atom's entry is freed after its last output: one per atom
      PER_ELEMENT, W x H per atom PER_KERNEL (one per data atom of its surface).

    The layer completes when every group got written (the taken operand then has all of its
    atoms); otherwise it hangs. Observed limits, e.g.: one-byte PER_KERNEL 4 atoms with
    W x H = 1, 3 with 2 or 3 (2 when the last group is full), 2 from 4 on; two-byte PER_KERNEL 3,
    2, 2, 1; one-byte PER_ELEMENT 4 with an even W, 3 with W = 1 or 3.
    Near these limits the outcome depends on the egress's cycle timing (when groups and outputs
    meet), which this untimed rule fixes to what the ``nvidia`` memory profile showed.
    """
    per_atom = 1 if per_element else w * h
    atoms = catoms * (w * h if per_element else 1)
    if atoms > 8:       # the room for it, FIFOs and tail together, is at most 5 atoms
        return False
    # groups: lists of atoms (in stream order); the atom's re-order FIFOs
    if per_element and not one_by_one(w, h):
        runs = [w] * (h * catoms)                       # one request per line
    else:
        runs = [atoms]                                  # one request
    step = 1 if two_byte else 2                         # atoms per group
    groups, n = [], 0
    for run in runs:
        for k in range(0, run, step):
            groups.append(list(range(n + k, n + min(k + step, run))))
        n += run
    rods_of = (lambda pos: (0, 1)) if two_byte else (lambda pos: (pos,))
    first = len(groups[0]) * per_atom
    room = 3 if first >= 3 else 2                       # outputs the stream's tail holds
    busy: dict[int, int] = {}                           # rod -> atom waiting in it
    outputs = {}                                        # atom -> outputs taken downstream
    taken = 0
    order = []
    g = 0
    while True:
        progress = False
        if g < len(groups):
            need = [r for pos, a in enumerate(groups[g]) for r in rods_of(pos)]
            if not any(r in busy for r in need):
                for pos, a in enumerate(groups[g]):
                    for r in rods_of(pos):
                        busy[r] = a
                    order.append(a)
                g += 1
                progress = True
        # outputs of the oldest waiting atom while the tail has room
        while order and taken < room:
            a = order[0]
            outputs[a] = outputs.get(a, 0) + 1
            taken += 1
            progress = True
            if outputs[a] == per_atom:
                order.pop(0)
                for r in [r for r, x in busy.items() if x == a]:
                    del busy[r]
        if g == len(groups):
            return True
        if not progress:
            return False


class SdpCore:
    """SDP data path of one NVDLA (``cfg``: NvdlaConfig, ``mem``: Memory).

    ``run(rdma, sdp, flying_input)``: ``rdma``/``sdp`` are GroupViews of SDP_RDMA (None when
    SDP_RDMA is not part of the layer) and SDP; ``flying_input`` is the (K, H, W) int64 cube from
    CACC when D_FEATURE_MODE_CFG.FLYING_MODE=ON (32-bit values: unit description "Convolution
    Accumulator": "The bit width between CACC and SDP is 32"). Returns the output cube (int8 values
    in int64, shape (C', H, W) with C' = C rounded up to whole atoms of cfg.memory_atomic
    channels, the atom's padding lanes included) when OUTPUT_DST=PDP, else writes it through WDMA
    and returns None.
    """

    def __init__(self, cfg, mem, cv_mem=None):
        # cv_mem: the secondary memory (CVIF) or None (verif.model.memory.ram)
        self.cfg, self.mem, self.cv_mem = cfg, mem, cv_mem
        self.lut_le = np.zeros(LE_ENTRIES, np.int64)   # 16-bit signed entries
        self.lut_lo = np.zeros(LO_ENTRIES, np.int64)
        self.lut_addr = 0
        self.lut_stats = dict.fromkeys(SDP_LUT_PERF_FIELDS, 0)      # samples of the last layer
        #: why the last layer's SDP_RDMA group never completes (an operand DMA fetching an
        #: operand nothing takes: see ``_check``), or None
        self.rdma_wedge = None
        #: (sub-unit, "ALU" / "MUL") whose operand packer holds an output of an earlier layer's
        #: fetch that nothing took (see ``_check``)
        self.stale_ops: set[tuple[str, str]] = set()
        self.lut_counters = dict.fromkeys(SDP_LUT_PERF_FIELDS, 0)   # live D_PERF_LUT_* counters

    # ---- CSB hooks: LUT access (v1_ias_lut-programming.rst) and status ----------------------
    def _lut_table(self, regs):
        tid = (regs.single["S_LUT_ACCESS_CFG"] >> 16) & 1
        return (self.lut_lo, LO_ENTRIES) if tid else (self.lut_le, LE_ENTRIES)

    def on_write(self, regs, name: str, value: int) -> None:
        """S_LUT_ACCESS_CFG sets the table (LE/LO) and start address; each S_LUT_ACCESS_DATA
        write stores one 16-bit entry and advances the address ("automatic address incremental
        mechanism", v1_ias_lut-programming.rst)."""
        if name == "S_LUT_ACCESS_CFG":
            self.lut_addr = value & 0x3FF
        elif name == "S_LUT_ACCESS_DATA":
            table, n = self._lut_table(regs)
            if (regs.single["S_LUT_ACCESS_CFG"] >> 17) & 1 and self.lut_addr < n:   # WRITE
                table[self.lut_addr] = sign_extend(value & 0xFFFF, 16)
            self.lut_addr += 1
        elif name == "D_OP_ENABLE" and value & 1:
            # NV_NVDLA_SDP_reg.v (nvdlav1 and nv_small): setting a group's OP_EN clears its
            # D_STATUS.STATUS_UNEQUAL and D_PERF_LUT_* copies
            clear = {"STATUS_UNEQUAL": 0}
            if self.cfg.sdp_lut:
                clear.update(dict.fromkeys(SDP_LUT_PERF_FIELDS.values(), 0))
            regs.group_hw_fields[regs.producer].update(clear)

    def on_read(self, regs, name: str):
        """S_LUT_ACCESS_DATA reads the entry at the current address (the address advances).
        (D_STATUS.STATUS_UNEQUAL is a per-group hardware field: see ``_latch_status``.)"""
        if name == "S_LUT_ACCESS_DATA":
            table, n = self._lut_table(regs)
            v = int(table[self.lut_addr]) & 0xFFFF if self.lut_addr < n else 0
            # nvdlav1 NV_NVDLA_SDP_reg.v: every S_LUT_ACCESS_DATA read or write advances the
            # address, whatever LUT_ACCESS_TYPE is (only the RAM write is gated by WRITE)
            self.lut_addr += 1
            return v
        return None

    # ---- operand sources -------------------------------------------------------------------
    def _subunits(self):
        subs = []
        if self.cfg.sdp_bs:
            subs.append(("BS", "BRDMA"))
        if self.cfg.sdp_bn:
            subs.append(("BN", "NRDMA"))
        if self.cfg.sdp_ew:
            subs.append(("EW", "ERDMA"))
        return subs

    @staticmethod
    def _uses(sdp, sub: str) -> tuple[bool, bool]:
        """(ALU takes its operand from memory, MUL takes its operand from memory) for ``sub``."""
        if sdp.f(f"{sub}_BYPASS"):
            return False, False
        alu = not sdp.f(f"{sub}_ALU_BYPASS") and sdp.f(f"{sub}_ALU_SRC") == 1
        mul = not sdp.f(f"{sub}_MUL_BYPASS") and sdp.f(f"{sub}_MUL_SRC") == 1
        return alu, mul

    def needs_memory_operands(self, sdp) -> bool:
        """True when a non-bypassed BS/BN (and EW when configured) ALU or MUL takes its operand
        from memory (``*_SRC = MEM``), i.e. SDP_RDMA must run with the layer even on the fly."""
        return any(any(self._uses(sdp, sub)) for sub, _ in self._subunits())

    def _read_operands(self, rdma, sdp, sub: str, dma: str, c: int, h: int, w: int):
        """Operands of sub-unit ``sub`` read by ``dma`` (BRDMA/NRDMA/ERDMA).

        Returns ``(alu, mul)``: each None or an int64 array broadcastable to (c, h, w) (c already
        padded to whole atoms). Memory layout (format.rst "Bias Data Format", "Batch
        Normalization Data Format"; settled from NVIDIA's cmod NV_NVDLA_sdp.cpp
        SdpRdmaCore/ExtractRdmaResponsePayloadCore): an element is 1 or 2 bytes per component
        (DATA_SIZE; little endian, sign-extended to 16 bits) and has 2 components (ALU first, then
        MUL) when DATA_USE=BOTH. PER_KERNEL: element c at ``base + c * bpe`` (one contiguous
        read). PER_ELEMENT: feature layout with ``bpe``-byte elements:
        ``base + (c // atom) * SURFACE_STRIDE + h * LINE_STRIDE + (w * atom + c % atom) * bpe``.
        """
        alu_mem, mul_mem = self._uses(sdp, sub)
        if not (alu_mem or mul_mem):
            return None, None
        if rdma is None:
            raise ModelConfigError(f"SDP {sub}: operand from MEM but SDP_RDMA is not part of the layer")
        # Kept as errors: programs NVIDIA's RTL cannot finish. NV_NVDLA_SDP_core.v enables the
        # operand stream of a sub-unit (bs/bn_alu_in_en, *_mul_in_en) when its ALU/MUL takes the
        # operand from MEM, and the X unit's sync2data (X_int_alu.v / X_int_mul.v) then waits for
        # an operand with every data element; a disabled DMA (NV_NVDLA_SDP_rdma.v
        # nrdma_op_en = op_en & ~nrdma_disable) or a DATA_USE that does not deliver that
        # operand (NV_NVDLA_SDP_RDMA_eg.v cfg_alu_en / cfg_mul_en: MUL=0, ALU=1, BOTH=2; 3
        # enables neither) never sends one, so the layer hangs.
        if rdma.f(f"{dma}_DISABLE"):
            raise ModelConfigError(
                f"SDP_RDMA.D_{dma}_CFG.{dma}_DISABLE=YES while SDP.D_DP_{sub}_*_SRC=MEM "
                f"(programming guide 'SDP programming': operands from memory need the {dma})")
        use = rdma.f(f"{dma}_DATA_USE")   # 0 MUL, 1 ALU, 2 BOTH
        if use == 3:
            raise ModelConfigError(f"SDP_RDMA.D_{dma}_CFG.{dma}_DATA_USE=3 is not a defined value")
        if alu_mem and use == 0 or mul_mem and use == 1:
            raise ModelConfigError(
                f"SDP_RDMA.D_{dma}_CFG.{dma}_DATA_USE={['MUL', 'ALU', 'BOTH'][use]} does not supply "
                f"the {'ALU' if alu_mem and use == 0 else 'MUL'} operand SDP.D_DP_{sub} takes from MEM")
        bpc = 2 if rdma.f(f"{dma}_DATA_SIZE") else 1
        ncomp = 2 if use == 2 else 1
        bpe = bpc * ncomp
        per_element = rdma.f(f"{dma}_DATA_MODE") == 1
        base = rdma.addr(f"D_{sub}_BASE_ADDR_HIGH", f"D_{sub}_BASE_ADDR_LOW")
        atom = self._epa(sdp)               # channels per operand group
        if per_element:
            line = rdma.reg(f"D_{sub}_LINE_STRIDE")
            surf = rdma.reg(f"D_{sub}_SURFACE_STRIDE")
            if one_by_one(w, h):
                surf = atom * bpe       # a 1x1 cube is read as one run (see one_by_one)
            cc = np.arange(c, dtype=np.int64)
            off = ((cc // atom) * surf + (cc % atom) * bpe)[:, None, None] \
                + (np.arange(h, dtype=np.int64) * line)[None, :, None] \
                + (np.arange(w, dtype=np.int64) * atom * bpe)[None, None, :]
            addr = base + off
        else:
            addr = (base + np.arange(c, dtype=np.int64) * bpe)[:, None, None]

        mem = ram(self.mem, self.cv_mem, rdma.f(f"{dma}_RAM_TYPE"))

        def comp(k):
            a0 = addr + k * bpc
            v = mem.gather(a0).astype(np.int64)
            if bpc == 2:
                v = v | (mem.gather(a0 + 1).astype(np.int64) << 8)
                return sign_extend(v, 16)
            return sign_extend(v, 8)

        if use == 2:
            return (comp(0) if alu_mem else None), (comp(1) if mul_mem else None)
        if use == 1:
            return comp(0), None
        return None, comp(0)

    # ---- checks ---------------------------------------------------------------------------
    def _check(self, rdma, sdp) -> None:
        """Programming guide "Limitation / SDP" rules and what this model implements.

        Errors left here: features the configuration does not have (Winograd, batch, PDP, the
        LUT), or precisions / orderings the model does not implement (nv_small's RTL is built
        for INT8: NV_NVDLA_SDP_core.v packs operands by ``cfg_dp_8 = ~|proc_precision`` and
        NV_NVDLA_SDP_WDMA_cmd.v compiles batch/Winograd addressing out under
        NVDLA_BATCH_ENABLE/NVDLA_WINOGRAD_ENABLE while NV_NVDLA_SDP_MRDMA_ig.v still counts
        batches: no defined result was settled for those). The one documented limitation
        NVIDIA's RTL runs to a defined result (PReLU with the ALU on) is computed with a
        :class:`verif.model.formats.LimitationWarning`.
        """
        cfg = self.cfg
        if sdp.f("WINOGRAD") and not cfg.winograd:
            raise ModelConfigError("SDP.D_FEATURE_MODE_CFG.WINOGRAD=ON but the configuration has no Winograd")
        if sdp.f("BATCH_NUMBER") and not cfg.batch:
            raise ModelConfigError("SDP.D_FEATURE_MODE_CFG.BATCH_NUMBER != 0 but the configuration has no batch mode")
        if sdp.f("WINOGRAD"):
            raise ModelConfigError("SDP Winograd output ordering is not modelled")
        if sdp.f("BATCH_NUMBER"):
            self._check_batch(rdma, sdp)
        proc, out = sdp.field("D_DATA_FORMAT", "PROC_PRECISION"), sdp.field("D_DATA_FORMAT", "OUT_PRECISION")
        # nv_full (int8_int16_fp16): INT16 end to end is modelled; its arithmetic is INT8's
        # (NVIDIA's nvdlav1 SDP, generated from cmod/hls/sdp, tests only "precision == FP16"),
        # with two-byte elements, 16 channels per atom and the output saturated to int16
        # FP16 processing to FP16 or INT16 output (NVIDIA's cmod/hls/sdp/sdp_c.cpp: fp32 ->
        # fp16, then fp16 -> int16); the other conversions are not modelled
        ok = [(0, 0)] + ([(1, 1)] if "int16" in cfg.precisions else []) + \
            ([(2, 2), (2, 1)] if "fp16" in cfg.precisions else [])
        if (proc, out) not in ok:
            names = ("INT8", "INT16", "FP16", "3")
            raise ModelConfigError(
                f"SDP.D_DATA_FORMAT PROC_PRECISION={names[proc]} OUT_PRECISION={names[out]}: the "
                f"model computes {', '.join(f'{names[p]} to {names[o]}' for p, o in ok)} "
                f"(configuration feature_data_type={cfg.feature_data_type})")
        if proc == 2:
            for sub in ("BS", "BN"):
                if not sdp.f(f"{sub}_BYPASS") and not sdp.f(f"{sub}_ALU_BYPASS") \
                        and sdp.f(f"{sub}_ALU_ALGO") == ALU_EQL:
                    raise ModelConfigError(f"SDP.D_DP_{sub}_ALU_CFG.{sub}_ALU_ALGO=EQL in FP16 is "
                                           "not modelled")
        if rdma is not None and sdp.f("FLYING_MODE") == 0:
            rin = rdma.field("D_FEATURE_MODE_CFG", "IN_PRECISION")
            rproc = rdma.field("D_FEATURE_MODE_CFG", "PROC_PRECISION")
            rout = rdma.field("D_FEATURE_MODE_CFG", "OUT_PRECISION")
            if (rin, rproc, rout) != (proc, proc, out):
                raise ModelConfigError(
                    f"SDP_RDMA.D_FEATURE_MODE_CFG IN/PROC/OUT_PRECISION={rin}/{rproc}/{rout} must "
                    f"equal SDP's PROC_PRECISION {proc} (the conversions between precisions are "
                    "not modelled)")
            if rdma.field("D_FEATURE_MODE_CFG", "FLYING_MODE") != 0:
                # a hang on NVIDIA's RTL: NV_NVDLA_SDP_rdma.v disables MRDMA when SDP_RDMA's
                # FLYING_MODE is ON (mrdma_disable), while NV_NVDLA_SDP_cmux.v takes the input
                # from MRDMA when SDP's FLYING_MODE is OFF: the core waits for data forever
                raise ModelConfigError("SDP_RDMA.D_FEATURE_MODE_CFG.FLYING_MODE=ON while SDP's is OFF "
                                       "(MRDMA disabled, SDP waits for its input: the layer hangs)")
        rproc = rdma.field("D_FEATURE_MODE_CFG", "PROC_PRECISION") if rdma is not None else 0
        if rproc and len(cfg.precisions) > 1:
            for dma in ("BRDMA", "NRDMA", "ERDMA"):
                if not rdma.f(f"{dma}_DISABLE") and rdma.f(f"{dma}_DATA_SIZE") == 0:
                    # NVIDIA's nvdlav1 RTL: NV_NVDLA_SDP_{B,N,E}RDMA_ig.v size the fetch for
                    # two-byte elements whenever PROC_PRECISION is not INT8 (size_of_width and
                    # the request sizes ignore DATA_SIZE there) and assert never "NO SIZE of
                    # 1Byte supported if proc precision is INT16" (op_en & proc_int16 &
                    # size_1byte; FP16 has no assertion); run anyway, its one-byte reads fetch
                    # twice what the core takes, the surplus reaches the next layers' operands
                    # or hangs them: seen on random INT16 programs (settled by simulating
                    # NVIDIA's BRDMA) and on an FP16 one whose next layer used the same DMA
                    name = ("INT8", "INT16", "FP16", "3")[rproc]
                    raise ModelConfigError(
                        f"SDP_RDMA.D_{dma}_CFG.{dma}_DATA_SIZE=ONE_BYTE with PROC_PRECISION={name}: "
                        "NVIDIA's RTL fetches two-byte elements for INT16 and FP16 (its assertion 'NO "
                        "SIZE of 1Byte supported if proc precision is INT16'; format.rst: two bytes "
                        "per element with INT16/FP16)")
        for sub, _ in self._subunits():
            if sdp.f(f"{sub}_BYPASS"):
                continue
            if sdp.f(f"{sub}_MUL_PRELU") and not sdp.f(f"{sub}_MUL_BYPASS") and not sdp.f(f"{sub}_ALU_BYPASS"):
                # Documented limitation, but NVIDIA's nv_small RTL runs it (see x_subunit): the
                # ALU (NV_NVDLA_SDP_HLS_X_int_alu.v) has no PReLU input and always computes
                # alu_data_out[32:0]; the MUL (NV_NVDLA_SDP_HLS_X_int_mul.v) applies PReLU to
                # that 33-bit ALU output. Computed as the RTL does, with a warning.
                warn_limitation(
                    f"SDP.D_DP_{sub}_CFG: {sub}_MUL_PRELU=YES with {sub}_ALU_BYPASS=NO breaks the "
                    "programming guide Limitation/SDP ('If PReLU is enabled for one sub-unit, the "
                    "ALU in that unit MUST be bypassed'); computing what NVIDIA's RTL computes: "
                    "PReLU on the 33-bit ALU output", stacklevel=4)
        # An operand DMA that fetches an operand its sub-unit does not take from memory (issue 36
        # item 1; facts from NVIDIA's nv_small RTL, settled by running generated programs on it,
        # verif/gen/sdp.py ``mismatch``). NV_NVDLA_SDP_core.v accepts an operand stream only
        # while the sub-unit's ALU/MUL is on and takes it from MEM (bs_alu_in_prdy = bs_alu_in_en
        # & ..., bs_alu_in_en = cfg_bs_en & !alu_bypass & alu_src; MUL, BN, EW alike), so the
        # stream the DMA's DATA_USE selects but nothing takes stops at its first element:
        # * the data path does not need it: the layer runs as if the operand were not fetched
        #   (the sub-unit uses its register operand or its ALU/MUL is bypassed) and SDP's done
        #   interrupt comes from WDMA as usual;
        # * but the DMA's egress never sees that stream's cube end (NV_NVDLA_SDP_RDMA_EG_ro.v
        #   layer_end needs the core to take the last element), so the DMA never reports done
        #   and SDP_RDMA's register group never completes (NV_NVDLA_SDP_rdma.v dp2reg_done ANDs
        #   every enabled DMA's done): :attr:`rdma_wedge` names it, and the next layer that
        #   needs SDP_RDMA waits forever (verif/model/nvdla.py);
        # * with DATA_USE = BOTH and the other operand taken, both operands leave the unpacker
        #   together (NV_NVDLA_SDP_RDMA_eg.v: unpack_out_prdy = alu_rod_rdy & mul_rod_rdy), so
        #   the taken stream also stops once the untaken one's re-order FIFOs are full: the layer
        #   hangs unless all of the untaken stream fits (:func:`untaken_operand_fits`);
        # * the core's operand packer (NV_NVDLA_SDP_core.v u_bs_alu_pack ...) takes one output of
        #   the stream whatever the sub-unit does, so a stream of a single output (W x H x
        #   channel atoms = 1) does reach its cube end and the DMA finishes; that output then
        #   waits in the packer (:attr:`stale_ops`), so the next fetch of that operand that
        #   nothing takes wedges the DMA at once, and a later layer that takes that operand
        #   would first take the stale one with its cube end (rejected: observed to hang when
        #   it needs more than one operand; a layer of one operand is not settled).
        self.rdma_wedge = None
        stale = set(self.stale_ops)
        w, h = sdp.f("WIDTH") + 1, sdp.f("HEIGHT") + 1
        catoms = -(-(sdp.f("CHANNEL") + 1) // self._epa(sdp))
        outputs = w * h * catoms            # of an untaken stream, either DATA_MODE
        for sub, dma in self._subunits():
            if rdma is None:
                continue
            alu_mem, mul_mem = self._uses(sdp, sub)
            taken = {"ALU": alu_mem, "MUL": mul_mem}
            for k in ("ALU", "MUL"):
                if taken[k] and (sub, k) in self.stale_ops:
                    raise ModelConfigError(
                        f"SDP.D_DP_{sub}_{k}_CFG takes the {k} operand from MEM while SDP's {sub} "
                        f"{k} operand packer still holds the last operand of an earlier layer's "
                        f"fetch that nothing took: the core takes that one with its cube end "
                        f"first and the layer hangs")
            if rdma.f(f"{dma}_DISABLE"):
                continue
            use = rdma.f(f"{dma}_DATA_USE")
            fed = {"ALU": use in (1, 2), "MUL": use in (0, 2)}
            extra = [k for k in ("ALU", "MUL") if fed[k] and not taken[k]]
            if not extra:
                continue
            why = (f"SDP_RDMA.D_{dma}_CFG.{dma}_DATA_USE={['MUL', 'ALU', 'BOTH'][use]} with "
                   f"{dma}_DISABLE=NO fetches the {extra[0]} operand that SDP.D_DP_{sub}_CFG / "
                   f"D_DP_{sub}_{extra[0]}_CFG do not take from MEM (sub-unit, {extra[0]} bypassed "
                   f"or {sub}_{extra[0]}_SRC=REG)")
            if use == 2 and any(taken.values()) and not untaken_operand_fits(
                    w, h, catoms, two_byte=bool(rdma.f(f"{dma}_DATA_SIZE")),
                    per_element=rdma.f(f"{dma}_DATA_MODE") == 1):
                raise ModelConfigError(
                    f"{why}, while it delivers the other operand with it: the untaken operand "
                    f"fills the DMA's re-order FIFOs and stops the taken one: the layer hangs")
            for k in extra:
                if outputs == 1 and (sub, k) not in self.stale_ops:
                    stale.add((sub, k))         # its one output waits in the packer
                else:
                    self.rdma_wedge = self.rdma_wedge or why
        self.stale_ops = stale
        if sdp.f("OUTPUT_DST") == 1 and not cfg.pdp:
            raise ModelConfigError("SDP.D_FEATURE_MODE_CFG.OUTPUT_DST=PDP but the configuration has no PDP")

    def _check_batch(self, rdma, sdp) -> None:
        """A multi-batch layer (D_FEATURE_MODE_CFG.BATCH_NUMBER = N-1 > 0): programming guide
        Limitation "Winograd/Batch" (SDP on the fly with the convolution; EW_ALU_ALGO != EQL);
        what is not modelled is refused: output to PDP, and operands from memory (nvdlav1 RTL:
        NV_NVDLA_SDP_BRDMA_ig.v has its batch mode commented out and the E/NRDMA none: their
        operand streams do not follow the N cubes; not settled)."""
        n = sdp.f("BATCH_NUMBER")
        if sdp.f("FLYING_MODE") != 1:
            raise ModelConfigError(f"SDP.D_FEATURE_MODE_CFG.BATCH_NUMBER={n} with FLYING_MODE=OFF: "
                                   "multi-batch SDP works on the fly only (programming guide "
                                   "Limitation: Winograd/Batch)")
        if self._eql_mode(sdp):
            raise ModelConfigError(f"SDP.D_FEATURE_MODE_CFG.BATCH_NUMBER={n} with EW_ALU_ALGO=EQL "
                                   "(programming guide Limitation: Winograd/Batch)")
        if sdp.f("OUTPUT_DST") == 1:
            raise ModelConfigError(f"SDP.D_FEATURE_MODE_CFG.BATCH_NUMBER={n} with OUTPUT_DST=PDP: "
                                   "not modelled")
        if rdma is not None:
            raise ModelConfigError(f"SDP.D_FEATURE_MODE_CFG.BATCH_NUMBER={n} with operands from "
                                   "memory (SDP_RDMA): not modelled")

    def _epa(self, sdp) -> int:
        """Channels per atom (and per operand group) of the layer's PROC_PRECISION: 16 for
        INT16 on nv_full's 32-byte atoms (NVIDIA's cmod/sdp: 32 channels per group for INT8,
        16 otherwise), ``memory_atomic`` for INT8."""
        if sdp.field("D_DATA_FORMAT", "PROC_PRECISION") and len(self.cfg.precisions) > 1:
            return self.cfg.atom_bytes // 2
        return self.cfg.memory_atomic

    # ---- main ------------------------------------------------------------------------------
    def run(self, rdma, sdp, flying_input):
        """Execute one SDP hardware layer (see class docstring). INT16 (nv_full): two-byte
        elements (``atom_bytes // 2`` channels per atom and operand group), INT8's arithmetic,
        the output saturated to int16."""
        self._check(rdma, sdp)
        cfg = self.cfg
        atom = self._epa(sdp)
        eb = cfg.atom_bytes // atom                  # bytes per element
        fp = sdp.field("D_DATA_FORMAT", "PROC_PRECISION") == 2
        out_prec = sdp.field("D_DATA_FORMAT", "OUT_PRECISION")
        atom_b = atom * eb
        w = sdp.f("WIDTH") + 1
        h = sdp.f("HEIGHT") + 1
        c = sdp.f("CHANNEL") + 1
        cp = -(-c // atom) * atom          # the hardware processes whole atoms

        nb = sdp.f("BATCH_NUMBER") + 1
        if sdp.f("FLYING_MODE") == 1:
            if flying_input is None:
                raise ModelConfigError("SDP.D_FEATURE_MODE_CFG.FLYING_MODE=ON without a convolution layer")
            cubes = flying_input if np.ndim(flying_input) == 4 else [flying_input]
            if len(cubes) != nb:
                raise ModelConfigError(f"SDP.D_FEATURE_MODE_CFG.BATCH_NUMBER+1={nb} but the convolution "
                                       f"delivers {len(cubes)} cube(s) (CACC.D_BATCH_NUMBER)")
            # a multi-batch layer's cubes side by side along the width: with register operands
            # (_check_batch) every step below is per element or per channel, so the N cubes
            # go through it as one cube N x W wide
            x = np.concatenate([flying_cube(fi, w, h, c, cp, "SDP.D_DATA_CUBE_WIDTH/HEIGHT/CHANNEL",
                                            "the convolution output") for fi in cubes], axis=2)
        else:
            if rdma is None:
                raise ModelConfigError("SDP.D_FEATURE_MODE_CFG.FLYING_MODE=OFF needs SDP_RDMA (MRDMA)")
            rw, rh, rc = (rdma.field("D_DATA_CUBE_WIDTH", "WIDTH") + 1,
                          rdma.field("D_DATA_CUBE_HEIGHT", "HEIGHT") + 1,
                          rdma.field("D_DATA_CUBE_CHANNEL", "CHANNEL") + 1)
            if (rw, rh, rc) != (w, h, c):
                # a narrower SDP_RDMA cube hangs NVIDIA's RTL (observed: width 3 for 4)
                raise ModelConfigError(
                    f"SDP_RDMA.D_DATA_CUBE_* {rw}x{rh}x{rc} differ from SDP.D_DATA_CUBE_* {w}x{h}x{c}")
            base = rdma.addr("D_SRC_BASE_ADDR_HIGH", "D_SRC_BASE_ADDR_LOW")
            src_surf = atom_b if one_by_one(w, h) else rdma.reg("D_SRC_SURFACE_STRIDE")
            x = read_cube(ram(self.mem, self.cv_mem, rdma.f("SRC_RAM_TYPE")), base, w, h, cp,
                          rdma.reg("D_SRC_LINE_STRIDE"), src_surf, atom_b, eb)
            if fp:
                x = fp16_to_fp32(x.astype(np.int64))
            else:
                x = x.view(np.int8 if eb == 1 else np.int16).astype(np.int64)
        if fp and sdp.f("NAN_TO_ZERO"):
            # NV_NVDLA_SDP_cmux.v: NaN inputs (from memory or CACC) become +0
            x = np.where(fp_isnan(x, 8, 23), 0, x)

        self.lut_stats = dict.fromkeys(SDP_LUT_PERF_FIELDS, 0)
        for sub, dma in self._subunits():
            if sdp.f(f"{sub}_BYPASS"):
                continue
            alu_m, mul_m = self._read_operands(rdma, sdp, sub, dma, cp, h, w)
            if sub == "EW":
                x = self._y_subunit(sdp, x, alu_m, mul_m)
                continue
            alu_op = alu_m if alu_m is not None else sdp.fs(f"{sub}_ALU_OPERAND")
            mul_op = mul_m if mul_m is not None else sdp.fs(f"{sub}_MUL_OPERAND")
            if fp:
                x = x_subunit_fp(
                    x, alu_bypass=bool(sdp.f(f"{sub}_ALU_BYPASS")), alu_algo=sdp.f(f"{sub}_ALU_ALGO"),
                    alu_op=alu_op, mul_bypass=bool(sdp.f(f"{sub}_MUL_BYPASS")),
                    mul_prelu=bool(sdp.f(f"{sub}_MUL_PRELU")), mul_op=mul_op,
                    relu_bypass=bool(sdp.f(f"{sub}_RELU_BYPASS")),
                    nan_to_zero=bool(sdp.f("NAN_TO_ZERO")))
                continue
            x = x_subunit(
                x, alu_bypass=bool(sdp.f(f"{sub}_ALU_BYPASS")), alu_algo=sdp.f(f"{sub}_ALU_ALGO"),
                alu_op=alu_op, alu_shift=sdp.f(f"{sub}_ALU_SHIFT_VALUE"),
                mul_bypass=bool(sdp.f(f"{sub}_MUL_BYPASS")), mul_prelu=bool(sdp.f(f"{sub}_MUL_PRELU")),
                mul_op=mul_op, mul_shift=sdp.f(f"{sub}_MUL_SHIFT_VALUE"),
                relu_bypass=bool(sdp.f(f"{sub}_RELU_BYPASS")))

        self._latch_lut_stats(sdp)
        eql = self._eql_mode(sdp)
        if fp and eql:
            # compare mode in FP16 (cmod/hls/sdp/sdp_c.cpp): the output is the low 16 bits of
            # the EW result, 0 or 1, not converted
            out = x & 0xFFFF
        elif fp:
            # cmod/hls/sdp/sdp_c.cpp: CVT_* ignored; fp32 -> fp16, then -> int16 for INT16
            out = fp32_to_fp16(x)
            if out_prec == 1:
                out = fp16_to_int16(out)
        elif eql:
            # compare mode (nv_small NV_NVDLA_SDP_HLS_C_int.v with cfg_mode_eql): the output
            # converter passes its input's low 16 bits, of which an int8 output keeps the low
            # 8 (NV_NVDLA_SDP_HLS_c.v), and flags no saturation
            out = sign_extend(x & 0xFF, 8) if eb == 1 else sign_extend(x & 0xFFFF, 16)
        else:
            out = output_convert(x, sdp.fs("CVT_OFFSET"), sdp.fs("CVT_SCALE"), sdp.f("CVT_SHIFT"), 8 * eb)

        if sdp.f("OUTPUT_DST") == 1:
            # all lanes of the last atom go to PDP (it writes whole atoms too); WDMA gets
            # zero atoms (NV_NVDLA_SDP_core.v core2wdma_pd), so STATUS_UNEQUAL stays 0
            self._latch_status(sdp, False)
            return out
        # WDMA sees every byte of the whole atoms (padding lanes included)
        self._latch_status(sdp, bool(np.any(out & (0xFF if eb == 1 else 0xFFFF))))
        if eql:
            # compare mode: WDMA takes the data without any memory request, and the layer's
            # done interrupt does not wait for write responses (NV_NVDLA_SDP_WDMA_DAT_out.v
            # dma_wr_req_vld / dma_wr_rdy with cfg_mode_quite, NV_NVDLA_SDP_WDMA_dmaif.v
            # intr0_internal); nothing is written to memory
            return None
        dst = sdp.addr("D_DST_BASE_ADDR_HIGH", "D_DST_BASE_ADDR_LOW")
        # WDMA writes whole atoms (channels c..cp-1 of the last surface carry the pipeline's
        # values for the atom's padding lanes). Multi-batch: cube b at D_DST_BATCH_STRIDE * b
        # from the base, each with the line and surface strides, and no 1x1 packing (nvdlav1
        # RTL NV_NVDLA_SDP_WDMA_cmd.v: base_addr_batch steps by the batch stride,
        # cfg_mode_1x1_nbatch = 1x1 & !batch)
        dst_surf = atom_b if one_by_one(w, h) and nb == 1 else sdp.reg("D_DST_SURFACE_STRIDE")
        dmem = ram(self.mem, self.cv_mem, sdp.f("DST_RAM_TYPE"))
        for b in range(nb):
            addrs = cube_addresses(dst + b * sdp.bytes("DST_BATCH_STRIDE"), w, h, cp,
                                   sdp.reg("D_DST_LINE_STRIDE"), dst_surf, atom_b, eb)
            ob = out[:, :, b * w:(b + 1) * w]
            dmem.scatter(addrs, ob & 0xFF)
            if eb == 2:
                dmem.scatter(addrs + 1, (ob >> 8) & 0xFF)
        return None

    @staticmethod
    def _latch_status(sdp, unequal: bool) -> None:
        """D_STATUS.STATUS_UNEQUAL of the group that ran (NVIDIA's RTL, nv_small and nvdlav1
        alike; facts from NV_NVDLA_SDP_WDMA_DAT_out.v and NV_NVDLA_SDP_reg.v):

        * a live flag in WDMA, cleared when a layer loads (op_load), ORs every byte of every
          atom WDMA takes from the core: in every layer, not only in compare mode (EW ALU
          EQL), so after an ordinary layer it reads 1 when any written byte (padding lanes of
          the last channel atom included) is non-zero; with OUTPUT_DST = PDP WDMA takes zero
          atoms and the flag stays 0. In compare mode the bytes are the low 8 bits of the Y
          output, i.e. 1 where the element and the ALU operand differ (LUT bypassed);
        * NV_NVDLA_SDP_reg.v copies the flag into the running group's D_STATUS when its layer
          completes and clears a group's copy when its OP_EN is set; a CSB read shows the
          group S_POINTER selects, as for the D_PERF_* registers.
        (NVIDIA's C model sets it only in compare mode; the RTL is the reference here.)
        """
        sdp.regs.group_hw_fields[sdp.group]["STATUS_UNEQUAL"] = int(unequal)

    def _eql_mode(self, sdp) -> bool:
        """Compare mode: cfg.sdp_ew and the EW ALU on with EW_ALU_ALGO = EQL
        (NV_NVDLA_SDP_core.v cfg_mode_eql; nv_small ties it to 0 without NVDLA_SDP_EW_ENABLE)."""
        return bool(self.cfg.sdp_ew and not sdp.f("EW_BYPASS") and not sdp.f("EW_ALU_BYPASS")
                    and sdp.f("EW_ALU_ALGO") == ALU_EQL)

    # ---- Y (EW) sub-unit: only when cfg.sdp_ew ---------------------------------------------
    @staticmethod
    def _ew_operand(sdp, kind: str, mem_op):
        """EW ``kind`` (ALU or MUL) operand: from memory through its converter (unless
        EW_<kind>_CVT_BYPASS), or the 32-bit register operand EW_<kind>_OPERAND."""
        if mem_op is None:
            return sdp.fs(f"EW_{kind}_OPERAND")
        if sdp.f(f"EW_{kind}_CVT_BYPASS"):
            return mem_op
        return output_convert(mem_op, sdp.fs(f"EW_{kind}_CVT_OFFSET"), sdp.fs(f"EW_{kind}_CVT_SCALE"),
                              sdp.f(f"EW_{kind}_CVT_TRUNCATE"), 32, mid_bits=49)

    def _y_subunit(self, sdp, x, alu_m, mul_m):
        """Y (EW) sub-unit on 32-bit ``x``: MUL -> ALU -> LUT (unit description "Function
        Description": "Block Y is primarily designed for element-wise ... An extra LUT").

        Facts from NVIDIA's C model (cmod/hls/sdp/sdp_y.cpp, sdp_y_core.cpp, sdp_y_cvt.cpp), the
        source of the Y RTL: operands from memory (16 bits) pass a converter
        ``round((op - EW_*_CVT_OFFSET) * EW_*_CVT_SCALE >> EW_*_CVT_TRUNCATE)`` (33/49 bits,
        saturated to 32) unless EW_*_CVT_BYPASS; register operands are 32 bits and are not
        converted. MUL comes first: 32x32-bit product shifted right by EW_TRUNCATE with
        round-half-away-from-zero and saturation to 32 bits (PReLU passes non-negative x);
        then ALU MAX/MIN/SUM/EQL on 33 bits saturated to 32 (EQL gives 0 when equal, else 1).
        """
        if sdp.field("D_DATA_FORMAT", "PROC_PRECISION") == 2:
            return self._y_subunit_fp(sdp, x, alu_m, mul_m)
        if not sdp.f("EW_MUL_BYPASS"):
            op = self._ew_operand(sdp, "MUL", mul_m)
            t = sdp.f("EW_TRUNCATE")
            prod = x * np.asarray(op, dtype=np.int64)
            y = shift_right_round(prod, min(t, 64), 64, 32) if t < 64 else np.zeros_like(prod)
            if sdp.f("EW_MUL_PRELU"):
                y = np.where(x >= 0, x, y)
            x = y
        if not sdp.f("EW_ALU_BYPASS"):
            op = self._ew_operand(sdp, "ALU", alu_m)
            op = np.asarray(op, dtype=np.int64)
            algo = sdp.f("EW_ALU_ALGO")
            if algo == ALU_MAX:
                x = np.maximum(x, op)
            elif algo == ALU_MIN:
                x = np.minimum(x, op)
            elif algo == ALU_EQL:
                x = (x != op).astype(np.int64)
            else:
                x = saturate(x + op, 32)
        if not sdp.f("EW_LUT_BYPASS"):
            if not self.cfg.sdp_lut:
                raise ModelConfigError("SDP.D_DP_EW_CFG.EW_LUT_BYPASS=NO but the configuration has no SDP LUT")
            x = self._lut(sdp, x)
        return x

    def _y_subunit_fp(self, sdp, x, alu_m, mul_m):
        """Y (EW) sub-unit in FP16 on fp32 bit patterns ``x``: MUL -> ALU -> LUT as in INT, with
        nvdlav1's fp operators (cmod/hls/sdp/sdp_y_cvt.cpp, sdp_y_core.cpp, the source of the Y
        RTL): a memory operand (16 bits) is an fp16 pattern (a NaN one +0 with NAN_TO_ZERO)
        widened to fp32, its converter registers (EW_*_CVT_*) unused; a register operand is the
        32-bit EW_*_OPERAND as an fp32 pattern; MUL is the fp32 product (PReLU passes ``x``
        whose sign bit is 0; EW_TRUNCATE unused); ALU MAX / MIN / SUM as BS/BN's, EQL 0 for
        equal bit patterns, else 1; the LUT in fp (:func:`sdp_lut_fp`)."""
        def operand(kind, mem_op):
            if mem_op is None:
                return np.int64(sdp.f(f"EW_{kind}_OPERAND"))
            op = np.asarray(mem_op, np.int64) & 0xFFFF
            if sdp.f("NAN_TO_ZERO"):
                op = np.where(fp16_isnan(op), 0, op)
            return fp16_to_fp32(op)
        if not sdp.f("EW_MUL_BYPASS"):
            prod = fp_mul(x, operand("MUL", mul_m), 8, 23)
            x = np.where((x >> 31) & 1 == 0, x, prod) if sdp.f("EW_MUL_PRELU") else prod
        if not sdp.f("EW_ALU_BYPASS"):
            op = operand("ALU", alu_m)
            algo = sdp.f("EW_ALU_ALGO")
            if algo == ALU_MAX:
                x = fp_pick(x, op, 8, 23, True)
            elif algo == ALU_MIN:
                x = fp_pick(x, op, 8, 23, False)
            elif algo == ALU_EQL:
                x = (x != op).astype(np.int64)
            else:
                x = fp_add(x, op, 8, 23)
        if not sdp.f("EW_LUT_BYPASS"):
            if not self.cfg.sdp_lut:
                raise ModelConfigError("SDP.D_DP_EW_CFG.EW_LUT_BYPASS=NO but the configuration has no SDP LUT")
            x, self.lut_stats = sdp_lut_fp(x, self.lut_le, self.lut_lo, sdp_lut_params(sdp))
        return x

    def _lut(self, sdp, x):
        """LUT lookup and interpolation of the Y sub-unit (:func:`sdp_lut`) on the tables loaded
        through S_LUT_ACCESS_CFG/DATA; the programming-guide LUT limitations are checked first.
        The statistics of the layer are kept in ``self.lut_stats`` (see ``_latch_lut_stats``)."""
        p = sdp_lut_params(sdp)
        check_sdp_lut_limits(p)
        y, stats = sdp_lut(x, self.lut_le, self.lut_lo, p)
        self.lut_stats = stats
        return y

    def _latch_lut_stats(self, sdp) -> None:
        """D_PERF_LUT_* of the group that ran (lut-programming.rst "LUT Statistics").

        Observed in nvdlav1 RTL: the counters (NV_NVDLA_SDP_CORE_Y_lut.v) are cleared when a
        layer's OP_EN loads and count only while D_PERF_ENABLE.PERF_LUT_EN is set (otherwise they
        hold their value); each saturates at 2**32-1; NV_NVDLA_SDP_reg.v copies them into the
        running group's D_PERF_LUT_* when the layer is done and clears a group's copy when its
        OP_EN is set. The model counts every LUT sample of the layer once, the padding lanes of
        the last channel atom included (the RTL counter adds the flags of the sample held on its
        input on every clock while enabled, which no cycle-free model can reproduce).
        """
        if not self.cfg.sdp_lut:
            return
        if sdp.f("PERF_LUT_EN"):
            self.lut_counters = {k: min(v, 0xFFFFFFFF) for k, v in self.lut_stats.items()}
        sdp.regs.group_hw_fields[sdp.group].update(
            {SDP_LUT_PERF_FIELDS[k]: v for k, v in self.lut_counters.items()})
