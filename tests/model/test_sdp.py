"""SDP model against an independent per-element formula (plain Python integers, small cubes).

The reference below restates the rules of v1_ias_precision.rst and the datapath widths observed in
NVIDIA's nv_small RTL (see verif/model/sdp.py) element by element; the model computes them with
numpy. Covers what the traces do not: random ALU algorithms, shifts, PReLU, ReLU, register and
memory operands (per kernel / per element, 1 / 2 bytes, ALU / MUL / BOTH), the converter,
on-the-fly input and the programming-guide limitations.
"""
from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from hdl.config import NV_SMALL
from hdl.regmap import REGMAP
from verif.model.formats import ModelConfigError
from verif.model.memory import Memory
from verif.model.regs import UnitRegs
from verif.model.sdp import SdpCore

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
        y = a
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
    if p["MUL_PRELU"] and not p["MUL_BYPASS"]:
        p["ALU_BYPASS"] = True                     # limitation: PReLU needs the ALU bypassed
    return p


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
            if p["MUL_PRELU"]:
                p["MUL_PRELU"] = False
        if use in (0, 2):
            p["MUL_BYPASS"], p["MUL_SRC"] = False, 1
        if p["MUL_PRELU"] and not p["ALU_BYPASS"]:
            p["MUL_PRELU"] = False
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


def test_prelu_needs_alu_bypass():
    sdp, rdma = layer(1, 1, 8)
    program_sub(sdp, "BS", dict(BYPASS=0, ALU_BYPASS=0, ALU_ALGO=2, ALU_SHIFT=0, MUL_BYPASS=0,
                                MUL_PRELU=1, MUL_SHIFT=0, RELU_BYPASS=1, ALU_SRC=0, MUL_SRC=0), 1, 2)
    with pytest.raises(ModelConfigError, match="BS_MUL_PRELU"):
        SdpCore(NV_SMALL, Memory()).run(rdma.view(), sdp.view(), None)


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
