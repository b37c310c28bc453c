"""Two-table hybrid LUT of NVDLA (v1_ias_lut-programming.rst), model side only.

The LUT has an LE table (X: linear or exponential index, ``le_entries`` = 65 entries) and an LO
table (Y: linear index only, ``lo_entries`` = 257 entries) of 16-bit signed entries. For each input
sample both tables are indexed; each reports *hit* (index inside the table, linear interpolation
between two entries), *underflow* or *overflow* (linear extrapolation from the first/last entry
with the table's slope scale/shift). The priority bits choose the table when both hit or both
miss ("Hit/Miss behavior"), and five statistics counters count the cases ("LUT Statistics").

This module holds what SDP (nv_large, 32-bit pipeline) and CDP (37/38-bit pipeline) share: the
table storage with its auto-incrementing CSB access port (:class:`LutStorage`), the register
parameters (:class:`LutParams`) and a vectorised lookup (:func:`lut_lookup`) whose index-path
width is a parameter (``index_bits``: how many low bits of START the index subtractor sees).

Facts settled from NVIDIA's nv_small RTL (vmod/nvdla/cdp, facts only, own code):

* Access port (NV_NVDLA_CDP_reg.v): a write of S_LUT_ACCESS_CFG loads the address; each
  S_LUT_ACCESS_DATA write with ACCESS_TYPE=WRITE stores the entry and each S_LUT_ACCESS_DATA read
  with ACCESS_TYPE=READ returns it, and both then advance the address by one, except that the
  address stays put on the table's last entry (64 for LE, 256 for LO). Reading an address outside
  the table returns entry 0 (NV_NVDLA_CDP_DP_lut.v default case).
* Index (NV_NVDLA_CDP_DP_LUT_CTRL_unit.v): a sample x underflows a table when
  ``x <= START`` (equality included) where START is sign-extended from its low ``index_bits``
  bits; otherwise ``d = x - START``. Exponential LE: ``i = floor(log2 d)``, fraction = the 16 bits
  below the leading one (truncated), index = ``i - LE_INDEX_OFFSET``; an index below 0 is an
  underflow only for LE_INDEX_OFFSET >= 0 (bit 7 clear). Linear: ``d >> SELECT`` for SELECT >= 0
  (fraction = the next 16 bits, truncated) or ``d << -SELECT`` with fraction 0; SELECT is the 6-bit
  signed value of INDEX_SELECT[5:0]. An index >= entries-1 is an overflow.
* Interpolation (NV_NVDLA_CDP_DP_INTP_unit.v): hit: ``y = T[i] + rnd((T[i+1]-T[i]) * frac, 16)``;
  underflow: ``y = T[0] + rnd((x - MIN) * UFLOW_SCALE, UFLOW_SHIFT)``; overflow:
  ``y = T[N] + rnd((x - END) * OFLOW_SCALE, OFLOW_SHIFT)``. ``rnd(v, s)`` shifts right by s with
  round-half-away-from-zero, or left by -s when the 5-bit signed shift is negative; the result
  saturates to int16. MIN is the full START register, plus ``2**LE_INDEX_OFFSET`` for an
  exponential LE table with LE_INDEX_OFFSET >= 0 (NV_NVDLA_CDP_DP_intp.v ``lut_le_min``; NVIDIA's
  C model does the same: "le_index_offset_uflow").
* Selection and statistics (NV_NVDLA_CDP_DP_lut.v, _intp.v): exactly one table hits -> that table
  (LE_HIT / LO_HIT counter); both underflow -> UFLOW_PRIORITY (UFLOW counter); both overflow ->
  OFLOW_PRIORITY (OFLOW counter); both hit, or one underflows while the other overflows ->
  HYBRID_PRIORITY (HYBRID counter). Priority 0 selects LE, 1 selects LO.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LE, LO = 0, 1                    # S_LUT_ACCESS_CFG.LUT_TABLE_ID
ACCESS_READ, ACCESS_WRITE = 0, 1  # S_LUT_ACCESS_CFG.LUT_ACCESS_TYPE
EXPONENT, LINEAR = 0, 1          # S_LUT_CFG.LUT_LE_FUNCTION


def sext(v: int, bits: int) -> int:
    """Two's-complement value of the low ``bits`` bits of ``v`` (Python int)."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


class LutStorage:
    """LUT RAM of the two tables plus the CSB access port state (address, table, access type).

    ``tables[LE]`` has ``le_entries`` and ``tables[LO]`` ``lo_entries`` int64 entries holding the
    16-bit signed values. One storage is shared by both register groups (lut-programming.rst).
    """

    def __init__(self, le_entries: int = 65, lo_entries: int = 257):
        self.tables = [np.zeros(le_entries, np.int64), np.zeros(lo_entries, np.int64)]
        self.addr = 0
        self.table_id = LE
        self.access_type = ACCESS_READ

    def set_access(self, addr: int, table_id: int, access_type: int) -> None:
        """A write of S_LUT_ACCESS_CFG."""
        self.addr, self.table_id, self.access_type = addr, table_id, access_type

    def _advance(self) -> None:
        if self.addr != len(self.tables[self.table_id]) - 1:   # sticks on the last entry
            self.addr = (self.addr + 1) & 0x3FF

    def current(self) -> int:
        """The 16-bit entry at the access address (entry 0 when the address is outside)."""
        t = self.tables[self.table_id]
        return int(t[self.addr] if self.addr < len(t) else t[0]) & 0xFFFF

    def write_data(self, value: int) -> None:
        """A write of S_LUT_ACCESS_DATA (effective only with ACCESS_TYPE=WRITE)."""
        if self.access_type != ACCESS_WRITE:
            return
        t = self.tables[self.table_id]
        if self.addr < len(t):
            t[self.addr] = sext(value, 16)
        self._advance()

    def read_data(self) -> int:
        """A read of S_LUT_ACCESS_DATA: the entry; advances with ACCESS_TYPE=READ."""
        v = self.current()
        if self.access_type == ACCESS_READ:
            self._advance()
        return v


def slope_and_priority_fields(v) -> dict[str, int]:
    """The slope (16-bit signed scale, 5-bit signed shift) and priority fields shared by CDP's and
    SDP's LUT registers (lut-programming.rst "LUT Registers"), as LutParams keyword arguments."""
    out = {}
    for table in ("le", "lo"):
        for flow in ("uflow", "oflow"):
            t, f = table.upper(), flow.upper()
            out[f"{table}_{flow}_scale"] = sext(v.f(f"LUT_{t}_SLOPE_{f}_SCALE"), 16)
            out[f"{table}_{flow}_shift"] = sext(v.f(f"LUT_{t}_SLOPE_{f}_SHIFT"), 5)
    for prio in ("uflow", "oflow", "hybrid"):
        out[f"{prio}_priority"] = v.f(f"LUT_{prio.upper()}_PRIORITY")
    return out


@dataclass(frozen=True)
class LutParams:
    """LUT register values (signed where the hardware treats them as signed).

    ``le_start``..``lo_end``: the 38-bit START/END registers sign-extended; ``le_index_offset``:
    LE_INDEX_OFFSET as int8; ``le_index_select`` / ``lo_index_select``: INDEX_SELECT[5:0] as a
    6-bit signed value; slope scales int16, slope shifts 5-bit signed; priorities 0 (LE) / 1 (LO).
    """
    le_function: int
    le_index_offset: int
    le_index_select: int
    lo_index_select: int
    le_start: int
    le_end: int
    lo_start: int
    lo_end: int
    le_uflow_scale: int
    le_oflow_scale: int
    le_uflow_shift: int
    le_oflow_shift: int
    lo_uflow_scale: int
    lo_oflow_scale: int
    lo_uflow_shift: int
    lo_oflow_shift: int
    uflow_priority: int
    oflow_priority: int
    hybrid_priority: int

    @classmethod
    def from_view(cls, v, select_bits: int = 6) -> "LutParams":
        """From a GroupView of a unit with CDP/SDP-style ``S_LUT_*`` / ``D_LUT_*`` fields;
        INDEX_SELECT read as ``select_bits``-bit signed (CDP: 6 in INT8, 7 in INT16)."""
        def wide(lo: str, hi: str) -> int:
            return sext((v.f(hi) << 32) | v.f(lo), 38)
        return cls(
            le_function=v.f("LUT_LE_FUNCTION"),
            le_index_offset=sext(v.f("LUT_LE_INDEX_OFFSET"), 8),
            le_index_select=sext(v.f("LUT_LE_INDEX_SELECT"), select_bits),
            lo_index_select=sext(v.f("LUT_LO_INDEX_SELECT"), select_bits),
            le_start=wide("LUT_LE_START_LOW", "LUT_LE_START_HIGH"),
            le_end=wide("LUT_LE_END_LOW", "LUT_LE_END_HIGH"),
            lo_start=wide("LUT_LO_START_LOW", "LUT_LO_START_HIGH"),
            lo_end=wide("LUT_LO_END_LOW", "LUT_LO_END_HIGH"),
            **slope_and_priority_fields(v),
        )


def round_shift(v: np.ndarray, shift: int) -> np.ndarray:
    """``v / 2**shift`` rounded half away from zero (shift >= 0), or ``v << -shift`` (int64).

    Left shifts are done on values clipped to +-2**40 so that they cannot wrap int64; every
    caller saturates the result to 16 bits, which the clip does not change.
    """
    v = np.asarray(v, np.int64)
    if shift < 0:
        return np.clip(v, -(1 << 40), 1 << 40) << (-shift)
    if shift == 0:
        return v
    half = np.int64(1) << (shift - 1)
    mag = (np.abs(v) + half) >> shift
    return np.where(v < 0, -mag, mag)


def _floor_log2(d: np.ndarray) -> np.ndarray:
    """floor(log2 d) for positive int64 d < 2**53 (exact through float64)."""
    return (np.frexp(d.astype(np.float64))[1] - 1).astype(np.int64)


def _table_index(x, start_idx, n_entries, exponential, index_offset, select, frac_bits):
    """Index, 16-bit fraction, underflow and overflow flags of one table (arrays like x)."""
    uf = x <= start_idx
    d = np.where(uf, 1, x - start_idx)                     # >= 1 where not underflowed
    if exponential:
        lg = _floor_log2(d)
        rem = d - (np.int64(1) << lg)
        # the bits below the leading one, left-aligned in frac_bits bits, top 16 kept
        sh = frac_bits - lg
        aligned = np.where(sh >= 0, rem << np.maximum(sh, 0), rem >> np.maximum(-sh, 0))
        frac = aligned >> (frac_bits - 16)
        idx = lg - index_offset
        if index_offset >= 0:
            uf = uf | (lg < index_offset)
    elif select >= 0:
        idx = d >> select
        frac = ((d & ((np.int64(1) << select) - 1)) << 16) >> select
    else:
        idx = d << min(-select, 9)     # any d >= 1 shifted by 9 or more overflows (int64-safe)
        frac = np.zeros_like(d)
    of = ~uf & (idx >= n_entries - 1)
    hit = ~uf & ~of
    idx = np.where(hit, idx, 0)
    frac = np.where(hit, frac, 0)
    return idx, frac, uf, of


def _interp(table, x, idx, frac, uf, of, vmin, vmax, uscale, ushift, oscale, oshift):
    """16-bit table output (int64 array) for hits, underflows and overflows."""
    n = len(table)
    y0 = table[idx]
    y1 = table[np.minimum(idx + 1, n - 1)]
    hit_y = y0 + round_shift((y1 - y0) * frac, 16)
    uf_y = table[0] + round_shift((x - vmin) * uscale, ushift)
    of_y = table[n - 1] + round_shift((x - vmax) * oscale, oshift)
    y = np.where(uf, uf_y, np.where(of, of_y, hit_y))
    return np.clip(y, -32768, 32767)


def lut_lookup(x: np.ndarray, le_table: np.ndarray, lo_table: np.ndarray, p: LutParams,
               index_bits: int, frac_bits: int) -> tuple[np.ndarray, dict[str, int]]:
    """Look every sample of ``x`` (int64 array, any shape) up in both tables and select.

    ``index_bits``: width of the index subtractor (START is sign-extended from that many low
    bits there; 22 for CDP int8: 2*9-1+4 bits of square sum plus sign). ``frac_bits``: width of
    the exponent fraction register (21 for CDP int8). Returns the selected 16-bit results (int64,
    shape of x) and the statistics ``{"UFLOW", "OFLOW", "HYBRID", "LE_HIT", "LO_HIT"}`` counted
    over all samples.
    """
    x = np.asarray(x, np.int64)
    exp = p.le_function == EXPONENT
    le_start_idx = sext(p.le_start, index_bits)
    lo_start_idx = sext(p.lo_start, index_bits)
    xi, xf, xu, xo = _table_index(x, le_start_idx, len(le_table), exp, p.le_index_offset,
                                  0 if exp else p.le_index_select, frac_bits)
    yi, yf, yu, yo = _table_index(x, lo_start_idx, len(lo_table), False, 0,
                                  p.lo_index_select, frac_bits)
    le_min = p.le_start + ((1 << (p.le_index_offset & 0x7F)) if exp and p.le_index_offset >= 0 else 0)
    le_min = sext(le_min, 39)
    ly = _interp(le_table, x, xi, xf, xu, xo, le_min, p.le_end, p.le_uflow_scale,
                 p.le_uflow_shift, p.le_oflow_scale, p.le_oflow_shift)
    oy = _interp(lo_table, x, yi, yf, yu, yo, p.lo_start, p.lo_end, p.lo_uflow_scale,
                 p.lo_uflow_shift, p.lo_oflow_scale, p.lo_oflow_shift)
    use_lo, stats = select_table(xu, xo, yu, yo, p)
    return np.where(use_lo, oy, ly), stats


def select_table(xu, xo, yu, yo, p: LutParams) -> tuple[np.ndarray, dict[str, int]]:
    """CDP's table choice (module docstring "Selection and statistics") from the LE (``xu``,
    ``xo``) and LO (``yu``, ``yo``) underflow/overflow flags (bool arrays): whether LO is used,
    and the five statistics counted over all samples."""
    xh, yh = ~xu & ~xo, ~yu & ~yo
    le_only, lo_only = xh & ~yh, yh & ~xh
    both_uf, both_of = xu & yu, xo & yo
    hybrid = ~(le_only | lo_only | both_uf | both_of)
    use_lo = lo_only | (both_uf & bool(p.uflow_priority)) | (both_of & bool(p.oflow_priority)) \
        | (hybrid & bool(p.hybrid_priority))
    stats = {"UFLOW": int(both_uf.sum()), "OFLOW": int(both_of.sum()), "HYBRID": int(hybrid.sum()),
             "LE_HIT": int(le_only.sum()), "LO_HIT": int(lo_only.sum())}
    return use_lo, stats


def fp_table_index(d: np.ndarray, n_entries: int, exponential: bool, index_offset: int,
                   select: int, frac_bits: int):
    """Index, ``frac_bits``-bit fraction, underflow and overflow flags of one table in FP16 mode
    (nv_full's CDP, NV_NVDLA_CDP_DP_LUT_CTRL_unit, 16-bit fraction; SDP, cmod/hls/sdp
    sdp_y_idx.cpp, 35-bit); ``d`` = fp32 ``x - START`` patterns (int64 array).

    Underflow: ``d`` NaN, a zero, or its sign set. Exponential: index = unbiased exponent of
    ``d`` minus LE_INDEX_OFFSET (below the offset underflows, for either sign of the offset),
    fraction = the 23 mantissa bits as a ``frac_bits``-bit fraction (truncated). Linear:
    ``d * 2**-SELECT`` exactly, index its integer part and the fraction its first ``frac_bits``
    fractional bits (truncated), SELECT the 8-bit signed field. An index >= entries-1
    overflows. Index and fraction are 0 where the table does not hit."""
    sign, e, m = (d >> 31) & 1, (d >> 23) & 0xFF, d & 0x7FFFFF
    nan = (e == 0xFF) & (m != 0)
    uf = nan | ((d & 0x7FFFFFFF) == 0) | (sign == 1)
    if exponential:
        lg = e - 127
        uf = uf | (lg < index_offset)
        idx = lg - index_offset
        frac = m << (frac_bits - 23) if frac_bits >= 23 else m >> (23 - frac_bits)
    else:
        M = m | (1 << 23)
        t = e - 150 - select                       # d * 2**-select = M * 2**t
        left, right = np.clip(t, 0, 20), np.clip(-t, 0, 62)   # t >= 10 overflows anyway
        idx = np.where(t >= 0, M << left, M >> right)
        frac = np.where(t >= 0, 0, ((M << frac_bits) >> right) & ((np.int64(1) << frac_bits) - 1))
    of = ~uf & (idx >= n_entries - 1)
    hit = ~uf & ~of
    return np.where(hit, idx, 0), np.where(hit, frac, 0), uf, of
