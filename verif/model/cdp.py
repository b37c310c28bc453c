"""CDP model: cross-channel data processor (LRN) with its two-table LUT.

v1_ias_unit_description.rst "Cross Channel Data Processor": CDP_RDMA reads a feature cube
(format.rst feature layout, D_SRC_* strides); per element the pipeline is

1. input converter (v1_ias_precision.rst "CDP convertors", cdp_in_cvt):
   ``x = sat9(rnd((d - DATIN_OFFSET[7:0]) * DATIN_SCALE >> DATIN_SHIFTER))``;
2. square sum over the local window of ``n = 3/5/7/9`` channels (D_LRN_CFG.NORMALZ_LEN) centred on
   the channel, channels outside the cube counting 0 (the formula's max(0, c-n/2)..min(C-1, c+n/2));
   D_FUNC_BYPASS.SQSUM_BYPASS feeds ``x`` itself instead;
3. the LUT (v1_ias_lut-programming.rst; engine in verif/model/lut.py) gives ``f``, a 16-bit value;
4. ``f * x`` unless D_FUNC_BYPASS.MUL_BYPASS;
5. output converter (cdp_out_cvt): ``sat8(rnd((v - DATOUT_OFFSET[24:0]) * DATOUT_SCALE >>
   DATOUT_SHIFTER))``;

and CDP's WDMA writes the cube with D_DST_* strides. ``rnd`` is round half away from zero
(v1_ias_precision.rst "Convertor").

Widths settled from NVIDIA's nv_small RTL (vmod/nvdla/cdp + vmod/vlibs, facts only, own code) and
C model (nvdlav1 cmod/cdp/NV_NVDLA_cdp.cpp ``lookup_lut_int8``), which agree on all of them:

* input converter (HLS_cdp_icvt.v): 8-bit data minus the low 8 bits of DATIN_OFFSET (signed) in 9
  bits, times the int16 DATIN_SCALE (25 bits), NV_NVDLA_HLS_shiftrightsu to 9 bits: round half away
  from zero, saturate, and 0 for a shift >= 25.
* channels of the cube's last atom beyond C ("invalid" lanes) are forced to 0 after the input
  converter (NV_NVDLA_CDP_DP_cvtin.v ``invalid_flag``; the C model pads with DATIN_OFFSET, which
  converts to 0 as well); they still run through the pipe, so the whole atom is written and the
  LUT statistics count them.
* square sum: 21 bits unsigned (``2*9-1+4``, LUT_CTRL ``pPP_BW``), sign-extended 9-bit x in
  SQSUM_BYPASS; the LUT index subtractor uses START[21:0] (22 bits with sign).
* multiplier (NV_NVDLA_CDP_DP_MUL_unit.v): int16 LUT result times the 9-bit x, 25 bits.
* output converter (HLS_cdp_ocvt.v): 25-bit value minus DATOUT_OFFSET[24:0] (signed) in 26 bits,
  times int16 DATOUT_SCALE (42 bits), shiftrightsu to 8 bits (round half away, saturate, 0 for a
  shift >= 42).
* D_OUT_SATURATION and the FP16 NaN/Inf counters read 0 on nv_small (NV_NVDLA_CDP_dp.v ties
  dp2reg_d*_out_saturation to 0).
* LUT statistics (D_PERF_LUT_*) are latched into the group that completed, at layer end, and are
  not gated by D_PERF_ENABLE.LUT_EN (NV_NVDLA_CDP_DP_intp.v).

INT16 (nv_full) widens every stage (``WIDTHS``); FP16 (nv_full) is another datapath,
:func:`cdp_compute_fp16`. Known difference in INT16: NVIDIA's nv_full RTL's D_PERF_LUT_HYBRID
is not the model's (three random INT16 programs: D_PERF_LUT_UFLOW and _OFLOW equal, HYBRID not;
its counter logic examines 8 lanes per beat, and the lanes beyond the data's carry flags of
their own, as FP16's phantom hybrids: not settled; the output bytes are the model's). D_NAN_INPUT_NUM and D_INF_INPUT_NUM stay 0, as NVIDIA's nv_full RTL
read them after FP16 layers with NaN and infinite inputs; D_NAN_OUTPUT_NUM is not modelled
(NVIDIA's RTL read 0 after one such layer and 9 after two layers of 5 and 14 NaN outputs).
"""
from __future__ import annotations

import numpy as np

from hdl.regmap import decode
from verif.model.memory import ram
from verif.model.formats import ModelConfigError, read_cube, warn_limitation, write_cube
from verif.model import fp
from verif.model.lut import (EXPONENT, LINEAR, LutParams, LutStorage, fp_table_index, lut_lookup,
                             round_shift, select_table, sext)

LE_ENTRIES, LO_ENTRIES = 65, 257
ICVT_OUT_BITS = 9                    # NVDLA_CDP_ICVTO_BWPE for int8 (BPE + 1)
SQSUM_BITS = 2 * ICVT_OUT_BITS - 1 + 4   # LUT_CTRL pPP_BW: square of 9 bits, sum of up to 9
INDEX_BITS = SQSUM_BITS + 1          # START bits the index subtractor sees (with sign)

# programming guide "LUT" limitation table, CDP INT8 column
LE_SELECT_RANGE = (-6, 15)
LO_SELECT_RANGE = (-8, 13)
LE_OFFSET_RANGE = (-64, 20)

PERF_FIELDS = {"UFLOW": "PERF_LUT_UFLOW", "OFLOW": "PERF_LUT_OFLOW", "HYBRID": "PERF_LUT_HYBRID",
               "LE_HIT": "PERF_LUT_LE_HIT", "LO_HIT": "PERF_LUT_LO_HIT",
               "OUT_SATURATION": "OUT_SATURATION"}


def shift_round_sat(v: np.ndarray, shift: int, in_bits: int, out_bits: int) -> np.ndarray:
    """NVDLA's shiftrightsu: ``v >> shift`` rounded half away from zero, saturated to
    ``out_bits`` signed; 0 when ``shift >= in_bits`` (v an int64 array of ``in_bits`` values)."""
    if shift >= in_bits:
        return np.zeros_like(v)
    lim = 1 << (out_bits - 1)
    return np.clip(round_shift(v, shift), -lim, lim - 1)


#: per INPUT_DATA (0 INT8, 1 INT16): (data bits, input-converter output bits, DATOUT_OFFSET
#: bits used, output-converter product bits, LUT index subtractor bits, square-sum bits,
#: INDEX_SELECT bits). INT8: settled on NVIDIA's nv_small RTL; INT16: read from nv_full's
#: (NVIDIA's nvdlav1 cmod/hls cdp_icvt.cpp / cdp_ocvt.cpp widths, NV_NVDLA_CDP_DP_LUT_ctrl_unit
#: START at 38 bits and INDEX_SELECT[6:0]); NVIDIA's CDP_L0_0 loadable and one random two-layer
#: program give NVIDIA's bytes
WIDTHS = {0: (8, 9, 25, 42, 22, 21, 6), 1: (16, 17, 32, 50, 38, 37, 7)}


def input_convert(d: np.ndarray, offset: int, scale: int, shifter: int, prec: int = 0) -> np.ndarray:
    """cdp_in_cvt: int8 (int16) data (int64 array) -> 9-bit (17-bit) values (int64).

    ``offset`` DATIN_OFFSET (16-bit field; its low 8 bits are used for INT8), ``scale``
    DATIN_SCALE (16-bit field, signed), ``shifter`` DATIN_SHIFTER (5 bits).
    """
    db, ob = WIDTHS[prec][:2]
    v = (d - sext(offset, db)) * sext(scale, 16)
    return shift_round_sat(v, shifter, ob + 16, ob)


def output_convert(v: np.ndarray, offset: int, scale: int, shifter: int, prec: int = 0) -> np.ndarray:
    """cdp_out_cvt: 25-bit (33-bit) values (int64 array) -> int8 (int16) values (int64).

    ``offset`` DATOUT_OFFSET (32-bit field; its low 25 bits are used for INT8, signed),
    ``scale`` DATOUT_SCALE (int16), ``shifter`` DATOUT_SHIFTER (6 bits).
    """
    db, _, offb, pb = WIDTHS[prec][:4]
    w = (v - sext(offset, offb)) * sext(scale, 16)
    return shift_round_sat(w, shifter, pb, db)


def square_sum(x: np.ndarray, half: int) -> np.ndarray:
    """LRN window sum of squares along axis 0 of ``x`` ((C, H, W) int64): for each channel c the
    sum of ``x[i]**2`` for ``|i - c| <= half``, channels outside 0..C-1 counting 0."""
    sq = x * x
    c = sq.shape[0]
    cs = np.zeros((c + 2 * half + 1,) + sq.shape[1:], np.int64)
    cs[half + 1:half + 1 + c] = sq
    cs = np.cumsum(cs, axis=0)
    return cs[2 * half + 1:] - cs[:c]


def check_lut_limits(p: LutParams) -> None:
    """Programming guide "LUT" limitations for CDP INT8; a :class:`LimitationWarning` for the
    first breach.

    NVIDIA's RTL runs such tables (NV_NVDLA_CDP_DP_LUT_CTRL_unit.v): the linear index shifts the
    start-relative sample by the 6-bit signed INDEX_SELECT[5:0] (``shift_bits[5]`` chooses a left
    shift by up to 32 in a 55-bit word, so nothing is lost, else a right shift) and compares the
    whole shifted value with 64/256 for overflow; the exponential index works for any 8-bit
    LE_INDEX_OFFSET; END is used only as the overflow extrapolation origin
    (NV_NVDLA_CDP_DP_intp.v). :func:`verif.model.lut.lut_lookup` computes all of that for every
    register value, so a breach is a warning, not an error. The exponential-mode rule
    LE_END-LE_START == 1<<(LE_INDEX_OFFSET+64) is not even warned about: NVIDIA's own trace
    cdp_8x8x64_lrn3_int8_0 breaks it (LE_INDEX_OFFSET=0, END-START=18).
    """
    msg = _lut_breach(p)
    if msg is not None:
        warn_limitation(msg + "; computing what the hardware computes", stacklevel=3)


def _lut_breach(p: LutParams) -> str | None:
    """The first programming-guide LUT rule (CDP INT8) ``p`` breaks, or None."""
    if p.le_function == LINEAR:
        lo, hi = LE_SELECT_RANGE
        if not lo <= p.le_index_select <= hi:
            return (f"CDP.S_LUT_INFO.LUT_LE_INDEX_SELECT={p.le_index_select} outside [{lo}, {hi}] "
                    "(programming guide LUT limitation, CDP INT8, linear mode)")
        if p.le_end - p.le_start != 1 << (p.le_index_select + 6):
            return (f"CDP.S_LUT_LE_END-S_LUT_LE_START={p.le_end - p.le_start} must equal "
                    f"1<<(LUT_LE_INDEX_SELECT+6)={1 << (p.le_index_select + 6)} "
                    "(programming guide LUT limitation, linear mode)")
    else:
        lo, hi = LE_OFFSET_RANGE
        if not lo <= p.le_index_offset <= hi:
            return (f"CDP.S_LUT_INFO.LUT_LE_INDEX_OFFSET={p.le_index_offset} outside [{lo}, {hi}] "
                    "(programming guide LUT limitation, CDP INT8, exponential mode)")
    lo, hi = LO_SELECT_RANGE
    if not lo <= p.lo_index_select <= hi:
        return (f"CDP.S_LUT_INFO.LUT_LO_INDEX_SELECT={p.lo_index_select} outside [{lo}, {hi}] "
                "(programming guide LUT limitation, CDP INT8)")
    if p.lo_end - p.lo_start != 1 << (p.lo_index_select + 8):
        return (f"CDP.S_LUT_LO_END-S_LUT_LO_START={p.lo_end - p.lo_start} must equal "
                f"1<<(LUT_LO_INDEX_SELECT+8)={1 << (p.lo_index_select + 8)} "
                "(programming guide LUT limitation, linear mode)")
    return None


def cdp_compute(d: np.ndarray, valid_c: int, le_table: np.ndarray, lo_table: np.ndarray,
                p: LutParams, normalz_len: int, sqsum_bypass: bool, mul_bypass: bool,
                datin: tuple[int, int, int], datout: tuple[int, int, int], prec: int = 0
                ) -> tuple[np.ndarray, dict[str, int]]:
    """CDP datapath on a whole cube (v1_ias_unit_description.rst "Cross Channel Data Processor").

    ``d``: int8 input as int64 array (Cp, H, W), Cp >= ``valid_c`` (channels >= valid_c are the
    invalid lanes of the last atom); ``datin``/``datout``: (offset, scale, shifter) register
    values. Returns the int8 output (Cp, H, W) int64 and the LUT statistics.
    """
    x = input_convert(d, *datin, prec)
    x[valid_c:] = 0
    lut_in = x if sqsum_bypass else square_sum(x, normalz_len + 1)
    index_bits, sqsum_bits = WIDTHS[prec][4:6]
    f, stats = lut_lookup(lut_in, le_table, lo_table, p, index_bits, sqsum_bits)
    v = f if mul_bypass else f * x
    return output_convert(v, *datout, prec), stats


# ---- FP16 (nv_full): facts from NVIDIA's nvdlav1 RTL (vmod/nvdla/cdp, vmod/vlibs HLS_* blocks),
# each HLS block verilated alone and compared with verif/model/fp.py, and 7 CDP FP16 programs on
# NVIDIA's whole nv_full RTL bit-exact with a reference of these rules (outputs and counters)

def _fp_table_index(d, n_entries, exponential, index_offset, select):
    """Index, 16-bit fraction, underflow and overflow flags of one table in FP16 mode
    (NV_NVDLA_CDP_DP_LUT_CTRL_unit "FP16 mode": :func:`verif.model.lut.fp_table_index` with a
    16-bit fraction, the mantissa's bits 22:7 in exponential mode); ``d`` = fp32 ``s - START``."""
    return fp_table_index(d, n_entries, exponential, index_offset, select, 16)


def _fp_interp(table, s, idx, frac, uf, of, vmin, vend, uscale, oscale):
    """fp17 table output (NV_NVDLA_CDP_DP_INTP_unit fp path): ``fp17_add(fp17_mul(
    fp32_to_fp17(fp32_sub(A, B)), K), T0)`` with (A, B, K, T0) = (T[i+1], T[i], fraction,
    T[i]) on a hit, (s, MIN, UFLOW_SCALE, T[0]) on underflow, (s, END, OFLOW_SCALE, T[last])
    on overflow; entries and scales are fp16 patterns, MIN/END fp32."""
    t = np.asarray(table, np.int64) & 0xFFFF
    n = len(t)
    y0, y1 = t[idx], t[np.minimum(idx + 1, n - 1)]

    def chain(a, b, k, t0):
        return fp.fp17_add(fp.fp17_mul(fp.fp32_to_fp17(fp.fp_sub(a, b, 8, 23)), k), fp.fp16_to_fp17(t0))
    hit_y = chain(fp.fp16_to_fp32(y1), fp.fp16_to_fp32(y0), fp.frac_to_fp17(frac, 16), y0)
    uf_y = chain(s, vmin, fp.fp16_to_fp17(uscale), t[0])
    of_y = chain(s, vend, fp.fp16_to_fp17(oscale), t[n - 1])
    return np.where(uf, uf_y, np.where(of, of_y, hit_y))


def fp16_square_sum(x17: np.ndarray, half: int) -> np.ndarray:
    """LRN window sum in fp32 of fp17 values ``x17`` ((Cp, H, W) patterns, channels outside
    counting +0): each value to fp32 and squared (fp32 mul), then added in NVIDIA's fixed order
    (NV_NVDLA_CDP_DP_sum / fp_sum_block): ``s = (sq[c-1] + sq[c+1]) + sq[c]``, then
    ``s = s + (sq[c-k] + sq[c+k])`` for k = 2..``half``."""
    c = x17.shape[0]
    pad = np.zeros((c + 8,) + x17.shape[1:], np.int64)
    pad[4:4 + c] = x17
    x32 = fp.fp17_to_fp32(pad)
    sq = fp.fp_mul(x32, x32, 8, 23)

    def at(k):
        return sq[4 + k:4 + k + c]
    s = fp.fp_add(fp.fp_add(at(-1), at(1), 8, 23), at(0), 8, 23)
    for k in range(2, half + 1):
        s = fp.fp_add(s, fp.fp_add(at(-k), at(k), 8, 23), 8, 23)
    return s


def cdp_compute_fp16(d: np.ndarray, valid_c: int, le_table: np.ndarray, lo_table: np.ndarray,
                     p: LutParams, normalz_len: int, sqsum_bypass: bool, mul_bypass: bool,
                     nan_to_zero: bool) -> tuple[np.ndarray, dict[str, int]]:
    """CDP datapath in FP16 (nv_full) on a whole cube.

    ``d``: fp16 bit patterns (int64 array (Cp, H, W)); channels >= ``valid_c`` are the invalid
    lanes of the last atom (+0 after the converter, still computed and written); ``p`` read
    with 8-bit INDEX_SELECT (LutParams.from_view(view, 8)). Returns the fp16 output patterns
    (Cp, H, W) int64 and the statistics (the five LUT counters and ``OUT_SATURATION``).

    NAN_TO_ZERO turns fp16 NaN data into +0 (infinities pass); the input converter is a format
    change (fp16 to fp17, exact; DATIN_* unused); the square sum or (SQSUM_BYPASS) x itself is
    fp32; START/END are the fp32 patterns of the registers' low words (the HIGH words unused),
    LUT entries and slope scales fp16 patterns (SLOPE_SHIFT unused); MIN of the LE table is
    ``fp32_add(2**LE_INDEX_OFFSET, START)`` in exponential mode (2**OFFSET = +0 for offsets
    -128 and -127; added for negative offsets too), ``fp32_add(+0, START)`` in linear mode; a
    NaN sum gives the fp17 NaN of its sign and low 10 bits; the result is ``fp17_mul(x, f)``
    (MUL_BYPASS: ``f``, or ``x`` when x is NaN), rounded to fp16 (DATOUT_* unused).
    Counters as NVIDIA's RTL gives them: the table choice and the five counts as in INT
    (:func:`verif.model.lut.lut_lookup`) over all lanes, plus W*H*Cp phantom hybrids (its
    counter logic examines 8 lanes per 4-element beat; the empty four read as both-hit: +192
    on a 3x2x20 layer, +96 on 2x1x33); OUT_SATURATION counts written values of magnitude
    exactly 65504 (0x7BFF), saturated or not.
    """
    d = np.asarray(d, np.int64)
    if nan_to_zero:
        d = np.where(fp.fp16_isnan(d), 0, d)
    x = fp.fp16_to_fp17(d)
    x[valid_c:] = 0
    s = fp.fp17_to_fp32(x) if sqsum_bypass else fp16_square_sum(x, normalz_len + 1)
    exp = p.le_function == EXPONENT
    le_start, lo_start = p.le_start & 0xFFFFFFFF, p.lo_start & 0xFFFFFFFF
    off = p.le_index_offset
    two_o = ((off + 127) << 23) if exp and off > -127 else 0
    le_min = int(fp.fp_add(two_o, le_start, 8, 23))
    xi, xf, xu, xo = _fp_table_index(fp.fp_sub(s, le_start, 8, 23), len(le_table), exp, off,
                                     p.le_index_select)
    yi, yf, yu, yo = _fp_table_index(fp.fp_sub(s, lo_start, 8, 23), len(lo_table), False, 0,
                                     p.lo_index_select)
    ly = _fp_interp(le_table, s, xi, xf, xu, xo, le_min, p.le_end & 0xFFFFFFFF,
                    p.le_uflow_scale & 0xFFFF, p.le_oflow_scale & 0xFFFF)
    oy = _fp_interp(lo_table, s, yi, yf, yu, yo, lo_start, p.lo_end & 0xFFFFFFFF,
                    p.lo_uflow_scale & 0xFFFF, p.lo_oflow_scale & 0xFFFF)
    use_lo, stats = select_table(xu, xo, yu, yo, p)
    f = np.where(use_lo, oy, ly)
    f = np.where(fp.fp_isnan(s, 8, 23), (((s >> 31) & 1) << 16) | (63 << 10) | (s & 0x3FF), f)
    if mul_bypass:
        o17 = np.where(fp.fp_isnan(x, 6, 10), x, f)
    else:
        o17 = fp.fp17_mul(x, f)
    out = fp.fp17_to_fp16(o17)
    stats["HYBRID"] += d.size                                   # the phantom hybrids
    stats["OUT_SATURATION"] = int(((out & 0x7FFF) == 0x7BFF).sum())
    return out, stats


class CdpCore:
    """The CDP unit of the model (CDP_RDMA + CDP + its WDMA), with its LUT RAM.

    ``run(rdma_view, cdp_view)`` executes one hardware layer; ``on_write``/``on_read`` serve the
    LUT access port (S_LUT_ACCESS_CFG/DATA) for ``Nvdla``. LUT statistics of a layer go to
    ``UnitRegs.group_hw_fields`` of the group that ran.
    """

    def __init__(self, cfg, mem, cv_mem=None):
        # cv_mem: the secondary memory (CVIF) or None (verif.model.memory.ram)
        self.cfg, self.mem, self.cv_mem = cfg, mem, cv_mem
        self.lut = LutStorage(LE_ENTRIES, LO_ENTRIES)
        self.last_stats: dict[str, int] = {}

    # ---- CSB hooks ----
    def on_write(self, unit_regs, reg_name: str, value: int) -> None:
        """After a CSB write to CDP: LUT address/table/type and LUT data writes."""
        if reg_name == "S_LUT_ACCESS_CFG":
            f = decode(unit_regs.by_name[reg_name], value)
            self.lut.set_access(f["LUT_ADDR"], f["LUT_TABLE_ID"], f["LUT_ACCESS_TYPE"])
        elif reg_name == "S_LUT_ACCESS_DATA":
            self.lut.write_data(value & 0xFFFF)

    def on_read(self, unit_regs, reg_name: str) -> int | None:
        """CSB read of CDP: live LUT address in S_LUT_ACCESS_CFG, LUT data (auto-increment)."""
        if reg_name == "S_LUT_ACCESS_CFG":
            r = unit_regs.by_name[reg_name]
            return ((self.lut.addr << r.field("LUT_ADDR").lsb)
                    | (self.lut.table_id << r.field("LUT_TABLE_ID").lsb)
                    | (self.lut.access_type << r.field("LUT_ACCESS_TYPE").lsb))
        if reg_name == "S_LUT_ACCESS_DATA":
            return self.lut.read_data()
        return None

    # ---- hardware layer ----
    def _check(self, rdma, cdp) -> None:
        """Input data type (issue 7 item 6 review). On an INT8-only configuration (nv_small)
        NVIDIA's RTL reads neither type field: NV_NVDLA_cdp.v leaves CDP's
        reg2dp_input_data_type unconnected and NV_NVDLA_CDP_RDMA_ig.v / _eg.v take CDP_RDMA's
        reg2dp_input_data as a port they never use, so any INPUT_DATA / INPUT_DATA_TYPE (also two
        that disagree) runs the INT8 pipeline: computed as INT8 with a LimitationWarning. On a
        configuration with other types the INT16/FP16 pipelines are not modelled (kept as errors).
        The LUT limitations only warn (:func:`check_lut_limits`)."""
        ri, ci = rdma.f("INPUT_DATA"), cdp.f("INPUT_DATA_TYPE")
        if self.cfg.feature_data_type == "int8":
            if ri != 0 or ci != 0:
                warn_limitation(
                    f"CDP_RDMA.D_DATA_FORMAT.INPUT_DATA={ri} / CDP.D_DATA_FORMAT.INPUT_DATA_TYPE={ci}: "
                    f"{self.cfg.name} supports INT8 only and its RTL ignores both fields; computing "
                    "the INT8 pipeline", stacklevel=4)
            return
        if ri != ci:
            raise ModelConfigError(
                f"CDP_RDMA.D_DATA_FORMAT.INPUT_DATA={ri} differs from "
                f"CDP.D_DATA_FORMAT.INPUT_DATA_TYPE={ci}")
        if ci == 3 or ("int8", "int16", "fp16")[ci] not in self.cfg.precisions:
            raise ModelConfigError(f"CDP.D_DATA_FORMAT.INPUT_DATA_TYPE={ci} is not one of "
                                   f"{self.cfg.name}'s precisions {self.cfg.precisions}")
        # D_NAN_FLUSH_TO_ZERO.NAN_TO_ZERO changes nothing in INT16 (the NaN unit is FP16's):
        # four INT16 layers with it set give the model's bytes on NVIDIA's nv_full RTL once a
        # warm-up trace ran first (stop 50 saw them hang as the first layer after power-up)

    def run(self, rdma, cdp) -> None:
        """Run the layer of CDP_RDMA group view ``rdma`` and CDP group view ``cdp``: read the
        source cube, compute, write the destination cube (whole atoms) and the statistics."""
        self._check(rdma, cdp)
        prec = 0 if self.cfg.feature_data_type == "int8" else cdp.f("INPUT_DATA_TYPE")
        p = LutParams.from_view(cdp, 8 if prec == 2 else WIDTHS[prec][6])
        if prec == 0:
            check_lut_limits(p)
        eb = 1 if prec == 0 else 2                       # bytes per element
        atom_b = self.cfg.atom_bytes
        atom = atom_b // eb                              # channels per atom
        w, h, c = rdma.f("WIDTH") + 1, rdma.f("HEIGHT") + 1, rdma.f("CHANNEL") + 1
        cp = -(-c // atom) * atom
        src = rdma.addr("D_SRC_BASE_ADDR_HIGH", "D_SRC_BASE_ADDR_LOW")
        d = read_cube(ram(self.mem, self.cv_mem, rdma.f("SRC_RAM_TYPE")), src, w, h, cp, rdma.bytes("SRC_LINE_STRIDE"),
                      rdma.bytes("SRC_SURFACE_STRIDE"), atom_b, eb)
        if prec == 2:
            out, stats = cdp_compute_fp16(
                d.astype(np.int64), c, self.lut.tables[0], self.lut.tables[1], p,
                cdp.f("NORMALZ_LEN"), bool(cdp.f("SQSUM_BYPASS")), bool(cdp.f("MUL_BYPASS")),
                bool(cdp.f("NAN_TO_ZERO")))
        else:
            out, stats = self._compute_int(d, c, p, cdp, prec)
        dst = cdp.addr("D_DST_BASE_ADDR_HIGH", "D_DST_BASE_ADDR_LOW")
        write_cube(ram(self.mem, self.cv_mem, cdp.f("DST_RAM_TYPE")), out, dst, cdp.bytes("DST_LINE_STRIDE"),
                   cdp.bytes("DST_SURFACE_STRIDE"), atom_b, eb)
        self.last_stats = stats
        cdp.regs.group_hw_fields[cdp.group].update(
            {PERF_FIELDS[k]: min(v, 0xFFFFFFFF) for k, v in stats.items()})

    def _compute_int(self, d, c, p, cdp, prec):
        """The INT8/INT16 datapath on raw cube bytes ``d`` (:func:`cdp_compute`)."""
        d = d.view(np.int8 if prec == 0 else np.int16).astype(np.int64)
        return cdp_compute(
            d, c, self.lut.tables[0], self.lut.tables[1], p, cdp.f("NORMALZ_LEN"),
            bool(cdp.f("SQSUM_BYPASS")), bool(cdp.f("MUL_BYPASS")),
            (cdp.f("DATIN_OFFSET"), cdp.f("DATIN_SCALE"), cdp.f("DATIN_SHIFTER")),
            (cdp.f("DATOUT_OFFSET"), cdp.f("DATOUT_SCALE"), cdp.f("DATOUT_SHIFTER")), prec)
