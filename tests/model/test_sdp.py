"""SDP model against an independent per-element formula (plain Python integers, small cubes).

The reference below restates the rules of v1_ias_precision.rst and the datapath widths observed in
NVIDIA's nv_small RTL (see verif/model/sdp.py) element by element; the model computes them with
numpy. Covers what the traces do not: random ALU algorithms, shifts, PReLU, ReLU, register and
memory operands (per kernel / per element, 1 / 2 bytes, ALU / MUL / BOTH), the converter,
on-the-fly input and the programming-guide limitations; and the SDP LUT of the Y sub-unit
(v1_ias_lut-programming.rst: exponential edges, linear interpolation, under/overflow slopes,
hit/miss priorities, statistics, LUT limitations) on an EW/LUT-enabled configuration.
"""
from __future__ import annotations

import math
import random
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest

from hdl.config import NV_SMALL
from hdl.regmap import REGMAP
from verif.model.formats import LimitationWarning, ModelConfigError
from verif.model.lut import LutParams
from verif.model.memory import Memory
from verif.model.regs import UnitRegs
from verif.model.sdp import SdpCore, check_sdp_lut_limits, sdp_lut

ATOM = NV_SMALL.memory_atomic


# ---------------------------------------------------------------- naive reference
def clamp(v, bits):
    return max(-(1 << (bits - 1)), min((1 << (bits - 1)) - 1, v))


def round_shift(v, s, in_bits, out_bits):
    """round half away from zero of v / 2**s, saturated; 0 when s >= in_bits (RTL)."""
    if s >= in_bits:
        return 0
    mag = (abs(v) * 2 + (1 << s)) // (1 << (s + 1))      # floor(|v|/2^s + 1/2)
    return clamp(mag if v >= 0 else -mag, out_bits)


def ref_x(x, p, alu_op, mul_op):
    """One BS/BN sub-unit on one element (dict p of register fields)."""
    if p["BYPASS"]:
        return x
    a = x
    if not p["ALU_BYPASS"]:
        op = clamp(alu_op * 2 ** p["ALU_SHIFT"], 32)
        a = max(x, op) if p["ALU_ALGO"] == 0 else min(x, op) if p["ALU_ALGO"] == 1 else x + op
    if p["MUL_BYPASS"]:
        y = round_shift(a, p["MUL_SHIFT"] % 64, 49, 32)
    elif p["MUL_PRELU"] and a >= 0:
        y = (a + 2 ** 31) % 2 ** 32 - 2 ** 31     # the low 32 bits of the 33-bit ALU output
    else:
        y = round_shift(a * mul_op, p["MUL_SHIFT"] % 64, 49, 32)
    if not p["RELU_BYPASS"]:
        y = max(y, 0)
    return y


def ref_cvt(x, off, scale, shift):
    return clamp(round_shift((x - off) * scale, shift, 49, 17), 8)


# ---------------------------------------------------------------- register helpers
def unit(name):
    return UnitRegs(next(u for u in REGMAP.units if u.name == name))


def setf(ur, reg, **fields):
    r = ur.by_name[reg]
    v = ur.groups[0][reg] if r.double_buffered else ur.single[reg]
    for f, val in fields.items():
        fd = r.field(f)
        v = (v & ~fd.mask) | ((val << fd.lsb) & fd.mask)
    ur.write(r.offset, v)


def s16(v):
    return v & 0xFFFF


def random_sub(rng, sub):
    p = dict(BYPASS=rng.random() < 0.2, ALU_BYPASS=rng.random() < 0.3, ALU_ALGO=rng.randrange(3),
             ALU_SHIFT=rng.choice([0, 1, 5, 17, 40, 63]), MUL_BYPASS=rng.random() < 0.3,
             MUL_PRELU=rng.random() < 0.3, MUL_SHIFT=rng.choice([0, 3, 8, 15, 30, 50, 200]),
             RELU_BYPASS=rng.random() < 0.5, ALU_SRC=0, MUL_SRC=0)
    return p                # PReLU with the ALU on included (a limitation the RTL runs)


def program_sub(sdp, sub, p, alu_op, mul_op):
    setf(sdp, f"D_DP_{sub}_CFG", **{f"{sub}_BYPASS": p["BYPASS"], f"{sub}_ALU_BYPASS": p["ALU_BYPASS"],
                                   f"{sub}_ALU_ALGO": p["ALU_ALGO"], f"{sub}_MUL_BYPASS": p["MUL_BYPASS"],
                                   f"{sub}_MUL_PRELU": p["MUL_PRELU"], f"{sub}_RELU_BYPASS": p["RELU_BYPASS"]})
    setf(sdp, f"D_DP_{sub}_ALU_CFG", **{f"{sub}_ALU_SRC": p.get("ALU_SRC", 0), f"{sub}_ALU_SHIFT_VALUE": p["ALU_SHIFT"]})
    setf(sdp, f"D_DP_{sub}_MUL_CFG", **{f"{sub}_MUL_SRC": p.get("MUL_SRC", 0), f"{sub}_MUL_SHIFT_VALUE": p["MUL_SHIFT"]})
    setf(sdp, f"D_DP_{sub}_ALU_SRC_VALUE", **{f"{sub}_ALU_OPERAND": s16(alu_op)})
    setf(sdp, f"D_DP_{sub}_MUL_SRC_VALUE", **{f"{sub}_MUL_OPERAND": s16(mul_op)})


def layer(w, h, c, *, flying=False, out_pdp=False, cvt=(0, 1, 0)):
    sdp, rdma = unit("SDP"), unit("SDP_RDMA")
    for ur in (sdp, rdma):
        setf(ur, "D_DATA_CUBE_WIDTH", WIDTH=w - 1)
        setf(ur, "D_DATA_CUBE_HEIGHT", HEIGHT=h - 1)
        setf(ur, "D_DATA_CUBE_CHANNEL", CHANNEL=c - 1)
    setf(sdp, "D_FEATURE_MODE_CFG", FLYING_MODE=int(flying), OUTPUT_DST=int(out_pdp))
    setf(rdma, "D_FEATURE_MODE_CFG", FLYING_MODE=int(flying), IN_PRECISION=0, PROC_PRECISION=0,
         OUT_PRECISION=0)
    setf(sdp, "D_DATA_FORMAT", PROC_PRECISION=0, OUT_PRECISION=0)
    setf(rdma, "D_BRDMA_CFG", BRDMA_DISABLE=1)
    setf(rdma, "D_NRDMA_CFG", NRDMA_DISABLE=1)
    setf(rdma, "D_ERDMA_CFG", ERDMA_DISABLE=1)
    setf(sdp, "D_DP_EW_CFG", EW_BYPASS=1)
    off, scale, shift = cvt
    setf(sdp, "D_CVT_OFFSET", CVT_OFFSET=off & 0xFFFFFFFF)
    setf(sdp, "D_CVT_SCALE", CVT_SCALE=s16(scale))
    setf(sdp, "D_CVT_SHIFT", CVT_SHIFT=shift)
    return sdp, rdma


def place_cube(mem, base, cube, line, surf):
    c, h, w = cube.shape
    for ci in range(c):
        for y in range(h):
            for x in range(w):
                mem.write(base + (ci // ATOM) * surf + y * line + x * ATOM + ci % ATOM,
                          bytes([int(cube[ci, y, x]) & 0xFF]))


def fetch(mem, base, c, h, w, line, surf):
    out = np.zeros((c, h, w), np.int64)
    for ci in range(c):
        for y in range(h):
            for x in range(w):
                b = int(mem.read(base + (ci // ATOM) * surf + y * line + x * ATOM + ci % ATOM, 1)[0])
                out[ci, y, x] = b - 256 if b > 127 else b
    return out


# ---------------------------------------------------------------- tests
@pytest.mark.filterwarnings("ignore::verif.model.formats.LimitationWarning")
@pytest.mark.parametrize("seed", range(12))
def test_register_operands_random(seed):
    """BS then BN with register operands, offline int8 input, output to memory."""
    rng = random.Random(seed)
    w, h, c = rng.randint(1, 4), rng.randint(1, 3), rng.randint(1, 19)
    cvt = (rng.randint(-3000, 3000), rng.randint(-400, 400), rng.randint(0, 20))
    sdp, rdma = layer(w, h, c, cvt=cvt)
    subs = {}
    for sub in ("BS", "BN"):
        p = random_sub(rng, sub)
        ops = (rng.randint(-32768, 32767), rng.randint(-32768, 32767))
        program_sub(sdp, sub, p, *ops)
        subs[sub] = (p, ops)
    mem = Memory()
    src, dst, line, surf = 0x1000, 0x8000, w * ATOM + 8, (w * ATOM + 8) * h + 16
    cube = np.array([[[rng.randint(-128, 127) for _ in range(w)] for _ in range(h)] for _ in range(c)])
    place_cube(mem, src, cube, line, surf)
    setf(rdma, "D_SRC_BASE_ADDR_LOW", SRC_BASE_ADDR_LOW=src)
    setf(rdma, "D_SRC_LINE_STRIDE", SRC_LINE_STRIDE=line)
    setf(rdma, "D_SRC_SURFACE_STRIDE", SRC_SURFACE_STRIDE=surf)
    setf(sdp, "D_DST_BASE_ADDR_LOW", DST_BASE_ADDR_LOW=dst)
    setf(sdp, "D_DST_LINE_STRIDE", DST_LINE_STRIDE=line)
    setf(sdp, "D_DST_SURFACE_STRIDE", DST_SURFACE_STRIDE=surf)
    core = SdpCore(NV_SMALL, mem)
    assert not core.needs_memory_operands(sdp.view())
    assert core.run(rdma.view(), sdp.view(), None) is None
    got = fetch(mem, dst, c, h, w, line, surf)
    for ci in range(c):
        for y in range(h):
            for x in range(w):
                v = int(cube[ci, y, x])
                for sub in ("BS", "BN"):
                    p, (a, m) = subs[sub]
                    v = ref_x(v, p, a, m)
                assert got[ci, y, x] == ref_cvt(v, *cvt), (ci, y, x)


@pytest.mark.filterwarnings("ignore::verif.model.formats.LimitationWarning")
@pytest.mark.parametrize("seed", range(10))
def test_memory_operands_random(seed):
    """BRDMA/NRDMA operands: per kernel or per element, 1 or 2 bytes, ALU/MUL/BOTH (format.rst
    bias / batch-normalization layouts), on-the-fly 32-bit input, output to PDP."""
    rng = random.Random(100 + seed)
    w, h, c = rng.randint(1, 3), rng.randint(1, 3), rng.randint(1, 17)
    cvt = (rng.randint(-10 ** 6, 10 ** 6), rng.randint(1, 300), rng.randint(8, 24))
    sdp, rdma = layer(w, h, c, flying=True, out_pdp=True, cvt=cvt)
    mem = Memory()
    cp = -(-c // ATOM) * ATOM
    operands = {}
    for sub, dma, base in (("BS", "BRDMA", 0x20000), ("BN", "NRDMA", 0x40000)):
        p = random_sub(rng, sub)
        p["BYPASS"] = False
        use = rng.randrange(3)                            # 0 MUL 1 ALU 2 BOTH
        size = rng.randrange(2) + 1
        per_elem = rng.random() < 0.5
        if use in (1, 2):
            p["ALU_BYPASS"], p["ALU_SRC"] = False, 1
        if use in (0, 2):
            p["MUL_BYPASS"], p["MUL_SRC"] = False, 1
        program_sub(sdp, sub, p, 0, 0)
        setf(rdma, f"D_{dma}_CFG", **{f"{dma}_DISABLE": 0, f"{dma}_DATA_USE": use,
                                      f"{dma}_DATA_SIZE": size - 1, f"{dma}_DATA_MODE": int(per_elem)})
        ncomp = 2 if use == 2 else 1
        bpe = size * ncomp
        line = w * ATOM * bpe + 32
        surf = line * h + 64
        setf(rdma, f"D_{sub}_BASE_ADDR_LOW", **{f"{sub}_BASE_ADDR_LOW": base})
        setf(rdma, f"D_{sub}_LINE_STRIDE", **{f"{sub}_LINE_STRIDE": line})
        setf(rdma, f"D_{sub}_SURFACE_STRIDE", **{f"{sub}_SURFACE_STRIDE": surf})
        lo, hi = (-128, 127) if size == 1 else (-32768, 32767)
        vals = {}
        for ci in range(cp):
            for y in range(h if per_elem else 1):
                for x in range(w if per_elem else 1):
                    comp = [rng.randint(lo, hi) for _ in range(ncomp)]
                    vals[ci, y, x] = comp
                    addr = (base + (ci // ATOM) * surf + y * line + (x * ATOM + ci % ATOM) * bpe
                            if per_elem else base + ci * bpe)
                    raw = b"".join(int(v & ((1 << (8 * size)) - 1)).to_bytes(size, "little") for v in comp)
                    mem.write(addr, raw)
        operands[sub] = (p, use, per_elem, vals)
    core = SdpCore(NV_SMALL, mem)
    assert core.needs_memory_operands(sdp.view())
    conv = np.array([[[rng.randint(-2 ** 31, 2 ** 31 - 1) if rng.random() < 0.3 else rng.randint(-5000, 5000)
                       for _ in range(w)] for _ in range(h)] for _ in range(c)], dtype=np.int64)
    out = core.run(rdma.view(), sdp.view(), conv)
    assert out.shape == (cp, h, w)
    for ci in range(c):
        for y in range(h):
            for x in range(w):
                v = int(conv[ci, y, x])
                for sub in ("BS", "BN"):
                    p, use, per_elem, vals = operands[sub]
                    comp = vals[(ci, y, x) if per_elem else (ci, 0, 0)]
                    alu = comp[0] if use in (1, 2) else 0
                    mul = comp[-1] if use in (0, 2) else 0
                    v = ref_x(v, p, alu, mul)
                assert out[ci, y, x] == ref_cvt(v, *cvt), (ci, y, x)


def test_prelu_with_alu_on_warns_and_runs():
    """Limitation/SDP 'PReLU needs the ALU bypassed': NVIDIA's RTL runs it (PReLU on the 33-bit
    ALU output), so the model computes it and warns instead of refusing the program."""
    sdp, rdma = layer(1, 1, 8)
    program_sub(sdp, "BS", dict(BYPASS=0, ALU_BYPASS=0, ALU_ALGO=2, ALU_SHIFT=0, MUL_BYPASS=0,
                                MUL_PRELU=1, MUL_SHIFT=0, RELU_BYPASS=1, ALU_SRC=0, MUL_SRC=0), -3, 2)
    mem = Memory()
    place_cube(mem, 0, np.arange(-4, 4).reshape(8, 1, 1), 8, 8)
    setf(rdma, "D_SRC_LINE_STRIDE", SRC_LINE_STRIDE=8)
    setf(rdma, "D_SRC_SURFACE_STRIDE", SRC_SURFACE_STRIDE=8)
    setf(sdp, "D_DST_BASE_ADDR_LOW", DST_BASE_ADDR_LOW=0x100)
    with pytest.warns(LimitationWarning, match="BS_MUL_PRELU=YES with BS_ALU_BYPASS=NO"):
        SdpCore(NV_SMALL, mem).run(rdma.view(), sdp.view(), None)
    got = fetch(mem, 0x100, 8, 1, 1, 8, 8)[:, 0, 0].tolist()
    # x - 3: negative values doubled, non-negative passed
    assert got == [2 * (x - 3) if x < 3 else x - 3 for x in range(-4, 4)]


def test_mem_operand_needs_rdma_enabled():
    sdp, rdma = layer(1, 1, 8)
    program_sub(sdp, "BN", dict(BYPASS=0, ALU_BYPASS=0, ALU_ALGO=2, ALU_SHIFT=0, MUL_BYPASS=1,
                                MUL_PRELU=0, MUL_SHIFT=0, RELU_BYPASS=1, ALU_SRC=1, MUL_SRC=0), 0, 0)
    with pytest.raises(ModelConfigError, match="NRDMA_DISABLE"):
        SdpCore(NV_SMALL, Memory()).run(rdma.view(), sdp.view(), None)


def test_ew_ignored_without_ew_hardware():
    """nv_small has no Y sub-unit: EW registers have no effect (README: nv_small's RTL output)."""
    sdp, rdma = layer(2, 1, 8, flying=True, out_pdp=True)
    setf(sdp, "D_DP_EW_CFG", EW_BYPASS=0, EW_ALU_BYPASS=0, EW_ALU_ALGO=2, EW_MUL_BYPASS=1,
         EW_LUT_BYPASS=1)
    setf(sdp, "D_DP_EW_ALU_SRC_VALUE", EW_ALU_OPERAND=50)
    program_sub(sdp, "BS", dict(BYPASS=1, ALU_BYPASS=1, ALU_ALGO=0, ALU_SHIFT=0, MUL_BYPASS=1,
                                MUL_PRELU=0, MUL_SHIFT=0, RELU_BYPASS=1), 0, 0)
    program_sub(sdp, "BN", dict(BYPASS=1, ALU_BYPASS=1, ALU_ALGO=0, ALU_SHIFT=0, MUL_BYPASS=1,
                                MUL_PRELU=0, MUL_SHIFT=0, RELU_BYPASS=1), 0, 0)
    x = np.arange(16, dtype=np.int64).reshape(8, 1, 2) - 8
    small = SdpCore(NV_SMALL, Memory()).run(None, sdp.view(), x)
    assert (small == x).all()
    ew_cfg = replace(NV_SMALL, name="ew", sdp_ew=True, sdp_ew_throughput=1)
    ew = SdpCore(ew_cfg, Memory()).run(None, sdp.view(), x)
    assert (ew == np.clip(x + 50, -128, 127)).all()


def test_lut_access_autoincrement():
    from verif.model.nvdla import Nvdla
    dla = Nvdla(replace(NV_SMALL, name="lut", sdp_ew=True, sdp_lut=True, sdp_ew_throughput=1))
    dla.write("NVDLA_SDP.S_LUT_ACCESS_CFG_0", (1 << 17) | (1 << 16) | 3)     # write LO from 3
    for v in (5, 0xFFFF, 7):
        dla.write("NVDLA_SDP.S_LUT_ACCESS_DATA_0", v)
    assert list(dla.sdp.lut_lo[3:6]) == [5, -1, 7]
    dla.write("NVDLA_SDP.S_LUT_ACCESS_CFG_0", (1 << 16) | 4)                 # read LO from 4
    assert dla.read("NVDLA_SDP.S_LUT_ACCESS_DATA_0") == 0xFFFF
    assert dla.read("NVDLA_SDP.S_LUT_ACCESS_DATA_0") == 7


# ---------------------------------------------------------------- SDP LUT (Y sub-unit)
# Naive restatement of v1_ias_lut-programming.rst with the integer rules cited in
# verif/model/sdp.py (sdp_lut): exact Fractions, bit_length() for log2, one sample at a time.


def rnd_half_away(q: Fraction) -> int:
    """Round half away from zero."""
    m = math.floor(abs(q) + Fraction(1, 2))
    return m if q >= 0 else -m


def ref_table(x, start, n, exponential, offset, select):
    """('u'|'o'|'h', address, 35-bit fraction) of one table for sample x."""
    if x <= start:
        return "u", 0, 0
    d = x - start
    if exponential:
        e = d.bit_length() - 1
        if e < offset:
            return "u", 0, 0
        i = e - offset
        f = math.floor(Fraction(d - 2 ** e, 2 ** e) * 2 ** 35)
    elif select >= 0:
        i = min(d // 2 ** select, 511)
        f = math.floor(Fraction(d % 2 ** select, 2 ** select) * 2 ** 35)
    else:
        i, f = min(d * 2 ** -select, 511), 0
    if i >= n - 1:
        return "o", n - 1, 0
    return "h", i, f


def ref_out(x, table, kind, a, f, offset, scale, shift):
    if kind == "h":
        v = table[a] * (2 ** 35 - f) + table[a + 1] * f
        return clamp(rnd_half_away(Fraction(v, 2 ** 35)), 32)
    c = clamp(rnd_half_away(Fraction((x - offset) * scale) * Fraction(2) ** -shift), 32)
    return clamp(table[a] + c, 32)


def ref_lut(x, le, lo, p: LutParams):
    """(output, selected table 'LE'/'LO', LE kind, LO kind) of one sample."""
    exp = p.le_function == 0
    lk, la, lf = ref_table(x, p.le_start, len(le), exp, p.le_index_offset, p.le_index_select)
    ok, oa, of = ref_table(x, p.lo_start, len(lo), False, 0, p.lo_index_select)
    if lk == "h" and ok != "h":
        sel = "LE"
    elif ok == "h" and lk != "h":
        sel = "LO"
    elif lk == ok == "u":                 # case c
        sel = "LO" if p.uflow_priority else "LE"
    elif lk == ok == "o":                 # case b
        sel = "LO" if p.oflow_priority else "LE"
    else:                                 # case a (both hit) / d (one under, one over)
        sel = "LO" if p.hybrid_priority else "LE"
    if sel == "LE":
        if lk == "u":
            # 2**offset for an exponential LE (offset >= 0), a 32-bit signed value in the RTL
            # (NV_NVDLA_SDP_CORE_Y_lut.v out_bias): 2**31 wraps to -2**31
            # (NV_NVDLA_SDP_CORE_Y_lut.v: 32-bit `1 << offset`, so 0 for offsets >= 32)
            bias = 2 ** p.le_index_offset % 2 ** 32 if exp and p.le_index_offset >= 0 else 0
            bias = bias - 2 ** 32 if bias >= 2 ** 31 else bias
            y = ref_out(x, le, lk, la, lf, p.le_start + bias, p.le_uflow_scale, p.le_uflow_shift)
        else:
            y = ref_out(x, le, lk, la, lf, p.le_end, p.le_oflow_scale, p.le_oflow_shift)
    else:
        y = ref_out(x, lo, ok, oa, of, p.lo_start if ok == "u" else p.lo_end,
                    p.lo_uflow_scale if ok == "u" else p.lo_oflow_scale,
                    p.lo_uflow_shift if ok == "u" else p.lo_oflow_shift)
    return y, sel, lk, ok


def lut_params(**kw) -> LutParams:
    base = dict(le_function=1, le_index_offset=0, le_index_select=0, lo_index_select=0,
                le_start=0, le_end=64, lo_start=0, lo_end=256, le_uflow_scale=1, le_oflow_scale=1,
                le_uflow_shift=0, le_oflow_shift=0, lo_uflow_scale=1, lo_oflow_scale=1,
                lo_uflow_shift=0, lo_oflow_shift=0, uflow_priority=0, oflow_priority=0,
                hybrid_priority=0)
    base.update(kw)
    return LutParams(**base)


def check_against_ref(xs, le, lo, p):
    got, stats = sdp_lut(np.array(xs, np.int64), np.array(le, np.int64), np.array(lo, np.int64), p)
    want = {"UFLOW": 0, "OFLOW": 0, "HYBRID": 0, "LE_HIT": 0, "LO_HIT": 0}
    for i, x in enumerate(xs):
        y, sel, lk, ok = ref_lut(x, le, lo, p)
        assert got[i] == y, (x, sel, lk, ok, int(got[i]), y)
        kind = lk if sel == "LE" else ok
        want["UFLOW"] += kind == "u"
        want["OFLOW"] += kind == "o"
        want["HYBRID"] += kind == "h"
        want["LE_HIT"] += lk == "h"
        want["LO_HIT"] += ok == "h"
    assert stats == want
    return got


def rand_tables(rng):
    return ([rng.randint(-32768, 32767) for _ in range(65)],
            [rng.randint(-32768, 32767) for _ in range(257)])


@pytest.mark.parametrize("offset", [-64, -20, -1, 0, 1, 5, 31])
def test_lut_exponential_edges(offset):
    """LE exponential: samples at START, just below/at 2**offset above START (underflow / index
    0), each power of two (index boundaries), the top entry and overflow; exact fractions."""
    rng = random.Random(offset)
    le, lo = rand_tables(rng)
    start = -(2 ** 31) + 5 if offset >= 30 else rng.randint(-1000, 1000)
    p = lut_params(le_function=0, le_index_offset=offset, le_start=start,
                   le_end=min(start + 2 ** (offset + 64), 2 ** 31 - 1),
                   lo_start=2 ** 31 - 300, lo_end=2 ** 31 - 300 + 256,   # LO underflows: LE wins
                   le_uflow_scale=rng.randint(-3000, 3000), le_uflow_shift=rng.randint(-4, 15),
                   le_oflow_scale=rng.randint(-3000, 3000), le_oflow_shift=rng.randint(-4, 15),
                   uflow_priority=0, hybrid_priority=0)
    check_sdp_lut_limits(p)
    xs = [start - 7, start - 1, start, start + 1]
    for e in range(max(offset - 1, 0), 32):
        for dx in (-1, 0, 1, 2 ** e // 3):
            xs.append(start + 2 ** e + dx)
    xs += [rng.randint(-2 ** 31, 2 ** 31 - 1) for _ in range(200)]
    xs = [x for x in xs if -2 ** 31 <= x < 2 ** 31]
    got = check_against_ref(xs, le, lo, p)
    if offset >= 0 and start + 2 ** offset < 2 ** 31:
        # index 0 with fraction 0 returns LE[0] exactly (lut-programming.rst exponential mode)
        assert got[xs.index(start + 2 ** offset)] == le[0]


@pytest.mark.parametrize("seed", range(8))
def test_lut_linear_random(seed):
    """LE and LO linear with random selects/starts: hits interpolate between two entries, misses
    extrapolate with the slope scale/shift (negative shifts included) and saturate to 32 bits."""
    rng = random.Random(1000 + seed)
    le, lo = rand_tables(rng)
    ls, os_ = rng.randint(-6, 25), rng.randint(-8, 23)
    le_start, lo_start = rng.randint(-2 ** 20, 2 ** 20), rng.randint(-2 ** 20, 2 ** 20)
    p = lut_params(le_function=1, le_index_select=ls, lo_index_select=os_, le_start=le_start,
                   le_end=le_start + 2 ** (ls + 6), lo_start=lo_start, lo_end=lo_start + 2 ** (os_ + 8),
                   le_uflow_scale=rng.randint(-32768, 32767), le_uflow_shift=rng.randint(-16, 15),
                   le_oflow_scale=rng.randint(-32768, 32767), le_oflow_shift=rng.randint(-16, 15),
                   lo_uflow_scale=rng.randint(-32768, 32767), lo_uflow_shift=rng.randint(-16, 15),
                   lo_oflow_scale=rng.randint(-32768, 32767), lo_oflow_shift=rng.randint(-16, 15),
                   uflow_priority=rng.randrange(2), oflow_priority=rng.randrange(2),
                   hybrid_priority=rng.randrange(2))
    check_sdp_lut_limits(p)
    xs = []
    for s, sel in ((le_start, ls), (lo_start, os_)):
        span = 2 ** (sel + 8)
        xs += [s + rng.randint(-span // 4, span + span // 4) for _ in range(150)]
        xs += [s - 1, s, s + 1, s + span - 1, s + span, s + span + 1]
    xs += [rng.randint(-2 ** 31, 2 ** 31 - 1) for _ in range(50)] + [-2 ** 31, 2 ** 31 - 1]
    xs = [min(max(x, -2 ** 31), 2 ** 31 - 1) for x in xs]
    check_against_ref(xs, le, lo, p)


def test_lut_under_overflow_slopes():
    """Out-of-range control: LUT[0] + (X-START)*SCALE>>SHIFT below, LUT[N] + (X-END)*SCALE>>SHIFT
    above (round half away from zero; negative SHIFT multiplies), saturating at 32 bits."""
    le, lo = [100] + [0] * 63 + [-200], [7] * 257
    for ush, osh in ((3, 1), (0, 0), (-2, -16), (15, -1)):
        p = lut_params(le_function=1, le_index_select=0, le_start=0, le_end=64, lo_start=10 ** 6,
                       lo_end=10 ** 6 + 256, le_uflow_scale=-5, le_uflow_shift=ush,
                       le_oflow_scale=3, le_oflow_shift=osh)
        xs = [-1, -2, -3, -4, -5, -11, -12, -13, -2 ** 31, 0, 64, 65, 66, 67, 99, 2 ** 31 - 1]
        got = check_against_ref(xs, le, lo, p)
        assert got[0] == 100 + rnd_half_away(Fraction(5) * Fraction(2) ** -ush)
    # 32-bit saturation of the slope term and of the sum
    p = lut_params(le_function=1, le_start=0, le_end=64, lo_start=10 ** 6, lo_end=10 ** 6 + 256,
                   le_uflow_scale=32767, le_uflow_shift=-16, le_oflow_scale=32767, le_oflow_shift=-16)
    got = check_against_ref([-2 ** 31, -1, 2 ** 31 - 1], le, lo, p)
    assert list(got) == [100 - 2 ** 31, 100 - 32767 * 65536, 2 ** 31 - 1 - 200]
    p = replace(p, le_uflow_scale=-32768, le_oflow_scale=-32768)
    got = check_against_ref([-2 ** 31, 2 ** 31 - 1], le, lo, p)
    assert list(got) == [2 ** 31 - 1, -2 ** 31]          # LUT[0]+sat32(..) saturates again


@pytest.mark.parametrize("prio", range(8))
def test_lut_priorities(prio):
    """Hit/Miss behavior: exactly one table hit -> that table; both hit / under+over -> HYBRID
    priority; both under -> UFLOW priority; both over -> OFLOW priority (0 = LE, 1 = LO); and the
    D_PERF_LUT statistics of each case."""
    rng = random.Random(prio)
    le, lo = rand_tables(rng)
    # LE covers [0, 64], LO covers [32, 288]: both-hit overlap, LE-only, LO-only, both under,
    # both over; a second LO window [1000, 1256] gives "LE over, LO under" samples
    up, op, hp = prio & 1, (prio >> 1) & 1, (prio >> 2) & 1
    for lo_start in (32, 1000):
        p = lut_params(le_function=1, le_start=0, le_end=64, lo_start=lo_start, lo_end=lo_start + 256,
                       le_uflow_scale=11, le_oflow_scale=-13, lo_uflow_scale=17, lo_oflow_scale=-19,
                       uflow_priority=up, oflow_priority=op, hybrid_priority=hp)
        xs = list(range(-5, 300, 3)) + list(range(990, 1300, 7))
        got = check_against_ref(xs, le, lo, p)
        ys = dict(zip(xs, got))
        if lo_start == 32:
            assert ys[40] == (lo[8] if hp else le[40])           # both hit
            assert ys[-5] == (lo[0] + 17 * (-37) if up else le[0] + 11 * (-5))   # both under
            assert ys[295] == (lo[256] - 19 * 7 if op else le[64] - 13 * 231)   # both over
            assert ys[16] == le[16]                              # LE only
            assert ys[100] == lo[68]                             # LO only
        else:
            x = 502                                              # LE over, LO under
            y, _ = sdp_lut(np.array([x]), np.array(le), np.array(lo), p)
            assert y[0] == (lo[0] + 17 * (x - 1000) if hp else le[64] - 13 * (x - 64))


def test_lut_limitations():
    """Programming guide Limitation/LUT (SDP INT8) breaches warn (the hardware's index and
    interpolation run for any register value) and compute as the reference does."""
    ok = lut_params(le_function=1, le_index_select=0, le_end=64, lo_index_select=0, lo_end=256)
    check_sdp_lut_limits(ok)
    bad = [replace(ok, le_index_select=26, le_end=2 ** 32),
           replace(ok, lo_index_select=-9),
           replace(ok, le_end=65),
           replace(ok, lo_end=255),
           replace(ok, le_function=0, le_index_offset=32, le_end=2 ** 31 - 1),
           replace(ok, le_function=0, le_index_offset=-60, le_end=15)]
    rng = random.Random(7)
    le, lo = rand_tables(rng)
    for p in bad:
        with pytest.warns(LimitationWarning, match="Limitation/LUT"):
            check_sdp_lut_limits(p)
        xs = [rng.randint(-2 ** 31, 2 ** 31 - 1) for _ in range(100)] + list(range(-3, 300, 7))
        check_against_ref(xs, le, lo, p)
    for p in (replace(ok, le_index_select=-100, lo_index_select=100),
              replace(ok, le_index_select=60, lo_index_select=-128),
              replace(ok, le_function=0, le_index_offset=100),
              replace(ok, le_function=0, le_index_offset=-128)):
        with pytest.warns(LimitationWarning):
            check_sdp_lut_limits(p)
        check_against_ref([rng.randint(-2 ** 31, 2 ** 31 - 1) for _ in range(100)]
                          + [-2 ** 31, -1, 0, 1, 2, 63, 64, 65, 2 ** 31 - 1], le, lo, p)
    check_sdp_lut_limits(replace(ok, le_function=0, le_index_offset=-60, le_end=16))
    check_sdp_lut_limits(replace(ok, le_function=0, le_index_offset=3, le_end=2 ** 31 - 1))


def test_lut_layer_and_perf_registers():
    """A whole EW layer through CSB writes on an EW/LUT configuration: LE linear table loaded with
    S_LUT_ACCESS_*, signed 32-bit START/END registers, output converter after the LUT, and
    D_PERF_LUT_* of the group that ran (cleared when OP_EN is set, counted with PERF_LUT_EN)."""
    from verif.model.nvdla import Nvdla
    cfg = NV_SMALL.derive(name="nv_small_ew", sdp_ew=True, sdp_lut=True, sdp_ew_throughput=1)
    dla = Nvdla(cfg)
    rng = random.Random(7)
    le, lo = rand_tables(rng)
    wr = dla.write
    wr("NVDLA_SDP.S_LUT_ACCESS_CFG_0", 1 << 17)                      # LE, write, address 0
    for v in le:
        wr("NVDLA_SDP.S_LUT_ACCESS_DATA_0", v & 0xFFFF)
    wr("NVDLA_SDP.S_LUT_ACCESS_CFG_0", (1 << 17) | (1 << 16))        # LO
    for v in lo:
        wr("NVDLA_SDP.S_LUT_ACCESS_DATA_0", v & 0xFFFF)
    le_start, lo_start = -40, -60                                    # LE select -2, LO select -1
    p = lut_params(le_function=1, le_index_select=-2, lo_index_select=-1, le_start=le_start,
                   le_end=le_start + 16, lo_start=lo_start, lo_end=lo_start + 128,
                   le_uflow_scale=-300, le_uflow_shift=2, le_oflow_scale=77, le_oflow_shift=-1,
                   lo_uflow_scale=5, lo_uflow_shift=0, lo_oflow_scale=-9, lo_oflow_shift=3,
                   uflow_priority=1, oflow_priority=0, hybrid_priority=1)
    wr("NVDLA_SDP.S_LUT_CFG_0", 1 | (1 << 4) | (1 << 6))
    wr("NVDLA_SDP.S_LUT_INFO_0", (0xFE << 8) | (0xFF << 16))
    for reg, v in (("LE_START", le_start), ("LE_END", le_start + 16), ("LO_START", lo_start),
                   ("LO_END", lo_start + 128)):
        wr(f"NVDLA_SDP.S_LUT_{reg}_0", v & 0xFFFFFFFF)
    wr("NVDLA_SDP.S_LUT_LE_SLOPE_SCALE_0", (-300 & 0xFFFF) | (77 << 16))
    wr("NVDLA_SDP.S_LUT_LE_SLOPE_SHIFT_0", 2 | ((-1 & 0x1F) << 5))
    wr("NVDLA_SDP.S_LUT_LO_SLOPE_SCALE_0", 5 | ((-9 & 0xFFFF) << 16))
    wr("NVDLA_SDP.S_LUT_LO_SLOPE_SHIFT_0", 0 | (3 << 5))
    w, h, c = 3, 2, 11
    cp = -(-c // ATOM) * ATOM
    line, surf = w * ATOM, w * ATOM * h
    src, dst = 0x80000000, 0x80100000
    cube = np.array([[[rng.randint(-128, 127) for _ in range(w)] for _ in range(h)] for _ in range(cp)])
    place_cube(dla.mem, src, cube, line, surf)
    cvt = (-3, 3, 4)
    for u in ("SDP", "SDP_RDMA"):
        wr(f"NVDLA_{u}.D_DATA_CUBE_WIDTH_0", w - 1)
        wr(f"NVDLA_{u}.D_DATA_CUBE_HEIGHT_0", h - 1)
        wr(f"NVDLA_{u}.D_DATA_CUBE_CHANNEL_0", c - 1)
    wr("NVDLA_SDP_RDMA.D_SRC_BASE_ADDR_LOW_0", src)
    wr("NVDLA_SDP_RDMA.D_SRC_LINE_STRIDE_0", line)
    wr("NVDLA_SDP_RDMA.D_SRC_SURFACE_STRIDE_0", surf)
    wr("NVDLA_SDP_RDMA.D_FEATURE_MODE_CFG_0", 0)
    wr("NVDLA_SDP.D_FEATURE_MODE_CFG_0", 0)
    wr("NVDLA_SDP.D_DATA_FORMAT_0", 0)
    wr("NVDLA_SDP_RDMA.D_BRDMA_CFG_0", 1)
    wr("NVDLA_SDP_RDMA.D_NRDMA_CFG_0", 1)
    wr("NVDLA_SDP_RDMA.D_ERDMA_CFG_0", 1)
    wr("NVDLA_SDP.D_DST_BASE_ADDR_LOW_0", dst)
    wr("NVDLA_SDP.D_DST_LINE_STRIDE_0", line)
    wr("NVDLA_SDP.D_DST_SURFACE_STRIDE_0", surf)
    wr("NVDLA_SDP.D_DP_BS_CFG_0", 1)
    wr("NVDLA_SDP.D_DP_BN_CFG_0", 1)
    wr("NVDLA_SDP.D_DP_EW_CFG_0", 0b0010010)        # EW on, ALU and MUL bypassed, LUT on
    wr("NVDLA_SDP.D_CVT_OFFSET_0", cvt[0] & 0xFFFFFFFF)
    wr("NVDLA_SDP.D_CVT_SCALE_0", cvt[1])
    wr("NVDLA_SDP.D_CVT_SHIFT_0", cvt[2])
    wr("NVDLA_SDP.D_PERF_ENABLE_0", 2)               # PERF_LUT_EN
    wr("NVDLA_SDP.D_OP_ENABLE_0", 1)
    wr("NVDLA_SDP_RDMA.D_OP_ENABLE_0", 1)
    assert dla.layers_run == 1
    got = fetch(dla.mem, dst, c, h, w, line, surf)
    counts = {"UFLOW": 0, "OFLOW": 0, "HYBRID": 0, "LE_HIT": 0, "LO_HIT": 0}
    for ci in range(cp):
        for y in range(h):
            for x in range(w):
                v, sel, lk, ok = ref_lut(int(cube[ci, y, x]), le, lo, p)
                if ci < c:
                    assert got[ci, y, x] == ref_cvt(v, *cvt), (ci, y, x)
                kind = lk if sel == "LE" else ok
                counts["UFLOW"] += kind == "u"
                counts["OFLOW"] += kind == "o"
                counts["HYBRID"] += kind == "h"
                counts["LE_HIT"] += lk == "h"
                counts["LO_HIT"] += ok == "h"
    assert all(counts.values()), counts
    wr("NVDLA_SDP.S_POINTER_0", 0)                   # the group that ran
    for k, v in counts.items():
        assert dla.read(f"NVDLA_SDP.D_PERF_LUT_{k}_0") == v, k
    # setting OP_EN of that group again clears its copy until the layer completes
    wr("NVDLA_SDP.D_PERF_ENABLE_0", 0)
    dla.sdp.on_write(dla.units["SDP"], "D_OP_ENABLE", 1)
    assert dla.read("NVDLA_SDP.D_PERF_LUT_HYBRID_0") == 0


@pytest.mark.parametrize("w,h", [(1, 1), (3, 2)])
def test_multi_batch_output_layout_nv_full(w, h):
    """A multi-batch layer on nv_full (v1 register map; D_FEATURE_MODE_CFG.BATCH_NUMBER = N-1):
    CACC's N cubes through BS/BN with register operands and the converter, cube b written
    D_DST_BATCH_STRIDE * b after the base with the line and surface strides, a 1 x 1 cube
    included (no 1 x 1 packing in batch mode: NVIDIA's WDMA_cmd cfg_mode_1x1_nbatch); memory
    operands and an N other than the convolution's are refused."""
    from hdl.config import get_config
    from hdl.regmap import REGMAP_V1
    cfg = get_config("nv_full+winograd=False+weight_compression=False")
    n, c, atom = 4, 40, cfg.memory_atomic
    rng = random.Random(f"sdp-batch-{w}x{h}")
    sdp = UnitRegs(next(u for u in REGMAP_V1.units if u.name == "SDP"))
    setf(sdp, "D_DATA_CUBE_WIDTH", WIDTH=w - 1)
    setf(sdp, "D_DATA_CUBE_HEIGHT", HEIGHT=h - 1)
    setf(sdp, "D_DATA_CUBE_CHANNEL", CHANNEL=c - 1)
    setf(sdp, "D_FEATURE_MODE_CFG", FLYING_MODE=1, BATCH_NUMBER=n - 1)
    setf(sdp, "D_DP_EW_CFG", EW_BYPASS=1)
    cvt = (rng.randint(-3000, 3000), rng.randint(-400, 400), rng.randint(0, 12))
    setf(sdp, "D_CVT_OFFSET", CVT_OFFSET=cvt[0] & 0xFFFFFFFF)
    setf(sdp, "D_CVT_SCALE", CVT_SCALE=s16(cvt[1]))
    setf(sdp, "D_CVT_SHIFT", CVT_SHIFT=cvt[2])
    subs = {}
    for sub in ("BS", "BN"):
        p = random_sub(rng, sub)
        p["MUL_PRELU"] = p["MUL_PRELU"] and p["ALU_BYPASS"]
        ops = (rng.randint(-32768, 32767), rng.randint(-32768, 32767))
        program_sub(sdp, sub, p, *ops)
        subs[sub] = (p, ops)
    dst, line, surf, bstride = 0x8000, 64 * w, 64 * w * h + 64, 1 << 12
    setf(sdp, "D_DST_BASE_ADDR_LOW", DST_BASE_ADDR_LOW=dst >> 5)
    setf(sdp, "D_DST_LINE_STRIDE", DST_LINE_STRIDE=line >> 5)
    setf(sdp, "D_DST_SURFACE_STRIDE", DST_SURFACE_STRIDE=surf >> 5)
    setf(sdp, "D_DST_BATCH_STRIDE", DST_BATCH_STRIDE=bstride >> 5)
    xs = np.array([[[[rng.randint(-(1 << 20), 1 << 20) for _ in range(w)] for _ in range(h)]
                    for _ in range(c)] for _ in range(n)])
    mem = Memory()
    assert SdpCore(cfg, mem).run(None, sdp.view(), xs) is None
    for b in range(n):
        for ci in range(c):
            for y in range(h):
                for x in range(w):
                    a = dst + b * bstride + (ci // atom) * surf + y * line + x * atom + ci % atom
                    got = int(mem.read(a, 1)[0])
                    v = int(xs[b, ci, y, x])
                    for sub in ("BS", "BN"):
                        p, (al, ml) = subs[sub]
                        v = ref_x(v, p, al, ml)
                    assert (got - 256 if got > 127 else got) == ref_cvt(v, *cvt), (b, ci, y, x)
    with pytest.raises(ModelConfigError, match="BATCH_NUMBER\\+1=4 but the convolution delivers 3"):
        SdpCore(cfg, mem).run(None, sdp.view(), xs[:3])
    rdma = UnitRegs(next(u for u in REGMAP_V1.units if u.name == "SDP_RDMA"))
    with pytest.raises(ModelConfigError, match="operands from memory"):
        SdpCore(cfg, mem).run(rdma.view(), sdp.view(), xs)
