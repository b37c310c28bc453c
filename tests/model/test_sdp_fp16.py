"""nv_full's SDP EW (Y) sub-unit and LUT in FP16 (verif/model/sdp.py ``sdp_lut_fp``,
``SdpCore._y_subunit_fp``) against per-sample plain-Python references.

The references follow the rules of the model's docstrings (from NVIDIA's nvdlav1 SDP) one sample
at a time: the linear LUT index from exact ``Fraction`` arithmetic, the table choice written out
as the lookup-table guide's cases; the fp operators they compose are the model's (verif/model/
fp.py), tested on their own in test_fp.py.
"""
from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest

from hdl.config import get_config
from verif.gen.common import fp16_of as f16, fp32_of as f32
from verif.model import Nvdla, fp
from verif.model.lut import LutParams
from verif.model.sdp import sdp_lut_fp

FULL = get_config("nv_full+feature_data_type=int8_int16_fp16")


def I(x) -> int:                       # noqa: E743 - a scalar bit pattern from a 0-d array
    return int(x)


def sub32(a, b):
    return I(fp.fp_sub(a, b, 8, 23))


def ref_index(x, start, n, exponential, offset, select):
    """('u'|'o'|'h', address, 35-bit fraction) of one table."""
    d = sub32(x, start)
    sign, e, m = d >> 31, (d >> 23) & 255, d & 0x7FFFFF
    if (e == 255 and m) or d & 0x7FFFFFFF == 0 or sign:
        return "u", 0, 0
    if exponential:
        if e - 127 < offset:
            return "u", 0, 0
        i, frac = e - 127 - offset, m << 12
    else:
        q = Fraction(m | 1 << 23, 1 << 23) * Fraction(2) ** (e - 127 - select)
        i = q.numerator // q.denominator
        frac = int((q - i) * 2 ** 35)
    return ("o", n - 1, 0) if i >= n - 1 else ("h", i, frac)


def ref_table(x, state, a, frac, T, start, end, uscale, oscale, bias):
    t0 = I(fp.fp16_to_fp17(T[a]))
    if state == "h":
        t1 = I(fp.fp16_to_fp17(T[a + 1]))
        a0 = 31 << 10 if frac == 0 else I(fp.frac_to_fp17((1 << 35) - frac, 35))
        a1 = I(fp.frac_to_fp17(frac, 35))
        y = fp.fp17_add(fp.fp17_mul(a0, t0), fp.fp17_mul(a1, t1))
    else:
        origin = I(fp.fp_add(start, bias, 8, 23)) if state == "u" else end
        k = I(fp.fp16_to_fp17(uscale if state == "u" else oscale))
        y = fp.fp17_add(t0, fp.fp17_mul(fp.fp32_to_fp17(sub32(x, origin)), k))
    return I(fp.fp17_to_fp32(y))


def ref_lut(x, le, lo, p):
    exp = p.le_function == 0
    bias = ((p.le_index_offset + 127) & 0xFF) << 23 if exp else 0
    a = ref_index(x, p.le_start, 65, exp, p.le_index_offset, p.le_index_select)
    b = ref_index(x, p.lo_start, 257, False, 0, p.lo_index_select)
    if a[0] == "h" and b[0] != "h":
        lo_sel = False
    elif b[0] == "h" and a[0] != "h":
        lo_sel = True
    elif a[0] == b[0] == "u":
        lo_sel = bool(p.uflow_priority)
    elif a[0] == b[0] == "o":
        lo_sel = bool(p.oflow_priority)
    else:
        lo_sel = bool(p.hybrid_priority)
    if lo_sel:
        y = ref_table(x, *b, lo, p.lo_start, p.lo_end, p.lo_uflow_scale, p.lo_oflow_scale, 0)
    else:
        # the LE table's underflow origin is START + 2**OFFSET in exponential mode (a fp32
        # addition; its bias is only ever added on the LE side)
        y = ref_table(x, *a, le, p.le_start, p.le_end, p.le_uflow_scale, p.le_oflow_scale, bias)
    sel = b if lo_sel else a
    return y, sel[0], a[0] == "h", b[0] == "h"


def draw(rng):
    k = rng.randint(-6, 8)
    exp = rng.random() < 0.5
    p = LutParams(
        le_function=0 if exp else 1, le_index_offset=max(-128, k - 30 + rng.randint(-8, 8)),
        le_index_select=k - 6 + rng.randint(-3, 3), lo_index_select=k - 8 + rng.randint(-3, 3),
        le_start=f32(rng.choice((0.0, -rng.uniform(0, 1) * 2.0 ** k))),
        le_end=f32(rng.uniform(0.5, 2) * 2.0 ** k),
        lo_start=f32(rng.choice((0.0, -rng.uniform(0, 1) * 2.0 ** k))),
        lo_end=f32(rng.uniform(0.5, 2) * 2.0 ** (k + 2)),
        le_uflow_scale=f16(rng.uniform(-1, 1)), le_oflow_scale=f16(rng.uniform(-1, 1) / 64),
        le_uflow_shift=0, le_oflow_shift=0,
        lo_uflow_scale=rng.choice((f16(0.5), 0x7C00)), lo_oflow_scale=f16(rng.uniform(-1, 1)),
        lo_uflow_shift=0, lo_oflow_shift=0, uflow_priority=rng.randint(0, 1),
        oflow_priority=rng.randint(0, 1), hybrid_priority=rng.randint(0, 1))
    le = [f16(2.0 ** rng.randint(-2, 2) * (1 + i / 8) ** -0.75) for i in range(65)]
    lo = [f16(rng.uniform(-3, 3)) for _ in range(257)]
    xs = [f32(rng.choice((-1, 1)) * rng.uniform(0, 2) * 2.0 ** (k + rng.randint(-4, 3)))
          for _ in range(300)] + [0, 1 << 31, 0x7FC00001, 0xFFC00002, 0x7F7FFFFF, 0xFF7FFFFF, 1]
    return p, le, lo, xs


@pytest.mark.parametrize("seed", range(8))
def test_lut_fp_random(seed):
    p, le, lo, xs = draw(random.Random(400 + seed))
    y, stats = sdp_lut_fp(np.array(xs, np.int64), np.array(le, np.int64), np.array(lo, np.int64), p)
    want = [ref_lut(x, le, lo, p) for x in xs]
    assert y.tolist() == [w[0] for w in want]
    assert stats == {"UFLOW": sum(w[1] == "u" for w in want), "OFLOW": sum(w[1] == "o" for w in want),
                     "HYBRID": sum(w[1] == "h" for w in want), "LE_HIT": sum(w[2] for w in want),
                     "LO_HIT": sum(w[3] for w in want)}


def test_lut_fp_cases_reach_every_outcome():
    seen = {"u": 0, "o": 0, "h": 0, "le": 0, "lo": 0}
    for seed in range(8):
        p, le, lo, xs = draw(random.Random(400 + seed))
        for x in xs:
            _, s, a, b = ref_lut(x, le, lo, p)
            seen[s] += 1
            seen["le"] += a and not b
            seen["lo"] += b and not a
    assert all(v > 20 for v in seen.values()), seen


def test_ew_layer_fp16_through_registers():
    """An FP16 EW layer (BS/BN bypassed): MUL by a memory operand (fp16, NaN flushed with
    NAN_TO_ZERO), ALU SUM with the fp32 register operand, no LUT; the converters' registers
    ignored; output fp16."""
    rng = random.Random(9)
    dla = Nvdla(FULL)
    wr = dla.write
    w, h, c = 2, 2, 20
    cp, line, surf = 32, 2 * 32, 2 * 2 * 32
    src, op, dst = 0x80000000, 0x80010000, 0x80100000
    x16 = np.array([[[f16(rng.uniform(-4, 4)) for _ in range(w)] for _ in range(h)] for _ in range(cp)])
    m16 = np.array([[[f16(rng.uniform(-2, 2)) for _ in range(w)] for _ in range(h)] for _ in range(cp)])
    m16[3, 0, 0] = 0x7E01                                        # NaN operand: flushed to +0
    for arr, base in ((x16, src), (m16, op)):
        for ci in range(cp):
            for hi in range(h):
                for wi in range(w):
                    a = base + (ci // 16) * surf + hi * line + wi * 32 + (ci % 16) * 2
                    dla.mem.write(a, int(arr[ci, hi, wi]).to_bytes(2, "little"))
    alu = f32(0.375)
    for u in ("SDP", "SDP_RDMA"):
        wr(f"NVDLA_{u}.D_DATA_CUBE_WIDTH_0", w - 1)
        wr(f"NVDLA_{u}.D_DATA_CUBE_HEIGHT_0", h - 1)
        wr(f"NVDLA_{u}.D_DATA_CUBE_CHANNEL_0", c - 1)
    for r, v in {"D_SRC_BASE_ADDR_LOW": src, "D_SRC_LINE_STRIDE": line, "D_SRC_SURFACE_STRIDE": surf,
                 "D_FEATURE_MODE_CFG": (2 << 2) | (2 << 4) | (2 << 6), "D_BRDMA_CFG": 1,
                 "D_NRDMA_CFG": 1, "D_SRC_DMA_CFG": 1,                              # MC memory
                 "D_ERDMA_CFG": (0 << 1) | (1 << 3) | (1 << 4) | (1 << 5),       # MUL, 2 B, elem
                 "D_EW_BASE_ADDR_LOW": op, "D_EW_LINE_STRIDE": line, "D_EW_SURFACE_STRIDE": surf,
                 }.items():
        wr(f"NVDLA_SDP_RDMA.{r}_0", v)
    for r, v in {"D_DST_BASE_ADDR_LOW": dst, "D_DST_LINE_STRIDE": line, "D_DST_SURFACE_STRIDE": surf,
                 "D_DST_DMA_CFG": 1, "D_FEATURE_MODE_CFG": 1 << 3, "D_DATA_FORMAT": 2 | (2 << 2), "D_DP_BS_CFG": 1,
                 "D_DP_BN_CFG": 1, "D_DP_EW_CFG": 0b1001000,                # ALU SUM, MUL, no LUT
                 "D_DP_EW_ALU_CFG": 0, "D_DP_EW_ALU_SRC_VALUE": alu, "D_DP_EW_MUL_CFG": 1,
                 "D_DP_EW_MUL_CVT_OFFSET_VALUE": 77, "D_DP_EW_MUL_CVT_SCALE_VALUE": 3,
                 "D_DP_EW_MUL_CVT_TRUNCATE_VALUE": 5, "D_DP_EW_TRUNCATE_VALUE": 9,
                 "D_CVT_SCALE": 5, "D_CVT_SHIFT": 3}.items():
        wr(f"NVDLA_SDP.{r}_0", v)
    wr("NVDLA_SDP.D_OP_ENABLE_0", 1)
    wr("NVDLA_SDP_RDMA.D_OP_ENABLE_0", 1)
    for ci in range(cp):
        for hi in range(h):
            for wi in range(w):
                m = 0 if ci == 3 and hi == wi == 0 else int(m16[ci, hi, wi])
                x = I(fp.fp16_to_fp32(int(x16[ci, hi, wi])))
                y = I(fp.fp_add(fp.fp_mul(x, fp.fp16_to_fp32(m), 8, 23), alu, 8, 23))
                a = dst + (ci // 16) * surf + hi * line + wi * 32 + (ci % 16) * 2
                got = int.from_bytes(dla.mem.read(a, 2), "little")
                assert got == I(fp.fp32_to_fp16(y)), (ci, hi, wi)
