"""BN (X2) with PReLU on and the ALU not bypassed, as a register program on ``verif.model.Nvdla``.

The programming guide ("Limitation / SDP") says the ALU of a sub-unit with PReLU MUST be bypassed,
but NVIDIA's RTL runs the combination (one of NVIDIA's own nv_small traces does) and writes a
defined result. Settled from NVIDIA's nv_small RTL (vmod/nvdla/sdp): NV_NVDLA_SDP_HLS_x2_int.v
chains ALU -> MUL -> TRT -> RELU whatever cfg_mul_prelu is; the ALU (X_int_alu.v) has no PReLU
input and outputs 33 bits (alu_data_out[32:0]); the MUL (X_int_mul.v) passes a non-negative
33-bit ALU output (``bypass_trt = cfg_mul_prelu & !mul_data_sync[32]``) and the truncation stage
(X_int_trt.v) then takes its low 32 bits (``mul_data_out[31:0]``) without shifting; a negative ALU
output is multiplied and shifted right with rounding and 32-bit saturation. The expected bytes
below come from that rule written in plain Python, element by element.
"""
from __future__ import annotations

import random
import warnings

import pytest

from hdl.config import NV_SMALL
from hdl.regmap import REGMAP
from verif.model import Nvdla
from verif.model.formats import LimitationWarning, ModelConfigError

ATOM = NV_SMALL.memory_atomic
SRC, DST = 0x80000000, 0x80100000


def clamp(v, bits):
    return max(-(1 << (bits - 1)), min((1 << (bits - 1)) - 1, v))


def rshift_round(v, s, in_bits, out_bits):
    """v / 2**s rounded half away from zero, saturated to out_bits; 0 for s >= in_bits."""
    if s >= in_bits:
        return 0
    mag = (abs(v) * 2 + (1 << s)) // (1 << (s + 1))
    return clamp(mag if v >= 0 else -mag, out_bits)


def wrap32(v):
    return (v + 2 ** 31) % 2 ** 32 - 2 ** 31


def ref_element(x, bs_mul, bn):
    """One element: BS multiplies (ALU bypassed, shift 0), BN runs ALU then PReLU, converter."""
    v = rshift_round(x * bs_mul, 0, 49, 32)
    op = clamp(bn["alu_op"] * 2 ** bn["alu_shift"], 32)
    a = {0: max(v, op), 1: min(v, op)}.get(bn["algo"], v + op)      # 33 bits, no saturation
    if a >= 0:
        y = wrap32(a)                                                 # low 32 bits, no shift
    else:
        y = rshift_round(a * bn["mul_op"], bn["mul_shift"], 49, 32)
    if not bn["relu_bypass"]:
        y = max(y, 0)
    off, scale, shift = bn["cvt"]
    return clamp(rshift_round((y - off) * scale, shift, 49, 17), 8)


def write(dla, name, **fields):
    """Write register ``UNIT.REG`` with the given fields (others 0)."""
    ref = REGMAP.lookup(f"NVDLA_{name}_0")
    v = 0
    for f, val in fields.items():
        fd = ref.reg.field(f)
        v |= (val << fd.lsb) & fd.mask
    dla.write(ref.addr, v)


def program(dla, w, h, c, bs_mul, bn):
    line, surf = w * ATOM, w * h * ATOM
    for u in ("SDP_RDMA", "SDP"):
        write(dla, f"{u}.D_DATA_CUBE_WIDTH", WIDTH=w - 1)
        write(dla, f"{u}.D_DATA_CUBE_HEIGHT", HEIGHT=h - 1)
        write(dla, f"{u}.D_DATA_CUBE_CHANNEL", CHANNEL=c - 1)
    dla.write("NVDLA_SDP_RDMA.D_SRC_BASE_ADDR_LOW_0", SRC)
    dla.write("NVDLA_SDP_RDMA.D_SRC_LINE_STRIDE_0", line)
    dla.write("NVDLA_SDP_RDMA.D_SRC_SURFACE_STRIDE_0", surf)
    write(dla, "SDP_RDMA.D_SRC_DMA_CFG", SRC_RAM_TYPE=1)     # MC: nv_small has no SRAM port
    write(dla, "SDP_RDMA.D_BRDMA_CFG", BRDMA_DISABLE=1)
    write(dla, "SDP_RDMA.D_NRDMA_CFG", NRDMA_DISABLE=1)
    write(dla, "SDP_RDMA.D_ERDMA_CFG", ERDMA_DISABLE=1)
    write(dla, "SDP_RDMA.D_FEATURE_MODE_CFG", FLYING_MODE=0)
    dla.write("NVDLA_SDP.D_DST_BASE_ADDR_LOW_0", DST)
    dla.write("NVDLA_SDP.D_DST_LINE_STRIDE_0", line)
    dla.write("NVDLA_SDP.D_DST_SURFACE_STRIDE_0", surf)
    write(dla, "SDP.D_DST_DMA_CFG", DST_RAM_TYPE=1)
    write(dla, "SDP.D_FEATURE_MODE_CFG", FLYING_MODE=0, OUTPUT_DST=0)
    write(dla, "SDP.D_DP_BS_CFG", BS_BYPASS=0, BS_ALU_BYPASS=1, BS_MUL_BYPASS=0, BS_MUL_PRELU=0,
          BS_RELU_BYPASS=1)
    write(dla, "SDP.D_DP_BS_MUL_CFG", BS_MUL_SRC=0, BS_MUL_SHIFT_VALUE=0)
    write(dla, "SDP.D_DP_BS_MUL_SRC_VALUE", BS_MUL_OPERAND=bs_mul & 0xFFFF)
    write(dla, "SDP.D_DP_BN_CFG", BN_BYPASS=0, BN_ALU_BYPASS=0, BN_ALU_ALGO=bn["algo"],
          BN_MUL_BYPASS=0, BN_MUL_PRELU=1, BN_RELU_BYPASS=int(bn["relu_bypass"]))
    write(dla, "SDP.D_DP_BN_ALU_CFG", BN_ALU_SRC=0, BN_ALU_SHIFT_VALUE=bn["alu_shift"])
    write(dla, "SDP.D_DP_BN_ALU_SRC_VALUE", BN_ALU_OPERAND=bn["alu_op"] & 0xFFFF)
    write(dla, "SDP.D_DP_BN_MUL_CFG", BN_MUL_SRC=0, BN_MUL_SHIFT_VALUE=bn["mul_shift"])
    write(dla, "SDP.D_DP_BN_MUL_SRC_VALUE", BN_MUL_OPERAND=bn["mul_op"] & 0xFFFF)
    write(dla, "SDP.D_DP_EW_CFG", EW_BYPASS=1)
    off, scale, shift = bn["cvt"]
    dla.write("NVDLA_SDP.D_CVT_OFFSET_0", off & 0xFFFFFFFF)
    dla.write("NVDLA_SDP.D_CVT_SCALE_0", scale & 0xFFFF)
    dla.write("NVDLA_SDP.D_CVT_SHIFT_0", shift)


CASES = {
    # SUM with an operand saturated to INT32_MAX-ish: positive x overflows 32 bits, PReLU passes
    # the wrapped low 32 bits (negative), negative x stays in range and passes
    "sum_wraps": dict(algo=2, alu_op=0x7FF0, alu_shift=16, mul_op=-3, mul_shift=2,
                      relu_bypass=True, cvt=(0, 1, 24)),
    # SUM with a negative operand: mostly negative ALU outputs -> multiplied and truncated
    "sum_negative": dict(algo=2, alu_op=-0x4000, alu_shift=8, mul_op=-5, mul_shift=3,
                         relu_bypass=True, cvt=(-100, 3, 20)),
    # MAX against a negative operand: ALU output >= op; negatives multiplied, then ReLU
    "max_relu": dict(algo=0, alu_op=-0x100, alu_shift=10, mul_op=7, mul_shift=1,
                     relu_bypass=False, cvt=(0, 1, 16)),
    # MIN against a positive operand, EQL (3) is SUM in X (X_int_alu.v: not MAX/MIN -> sum)
    "min": dict(algo=1, alu_op=0x1234, alu_shift=4, mul_op=-32768, mul_shift=20,
                relu_bypass=True, cvt=(5, -2, 12)),
    "eql_is_sum": dict(algo=3, alu_op=-0x7FFF, alu_shift=63, mul_op=9, mul_shift=0,
                       relu_bypass=True, cvt=(0, 1, 26)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bn_prelu_with_alu_through_registers(case):
    bn = CASES[case]
    rng = random.Random(case)
    w, h, c = 4, 3, 13
    bs_mul = 0x7FFF
    dla = Nvdla(NV_SMALL)
    cp = -(-c // ATOM) * ATOM
    cube = [[[rng.randint(-128, 127) for _ in range(w)] for _ in range(h)] for _ in range(cp)]
    line, surf = w * ATOM, w * h * ATOM
    for ci in range(cp):
        for y in range(h):
            for x in range(w):
                addr = SRC + (ci // ATOM) * surf + y * line + x * ATOM + ci % ATOM
                dla.mem.write(addr, bytes([cube[ci][y][x] & 0xFF]))
    program(dla, w, h, c, bs_mul, bn)
    dla.write("NVDLA_SDP_RDMA.D_OP_ENABLE_0", 1)
    with pytest.warns(LimitationWarning, match="BN_MUL_PRELU=YES with BN_ALU_BYPASS=NO"):
        dla.write("NVDLA_SDP.D_OP_ENABLE_0", 1)
    assert dla.intr and dla.layers_run == 1
    for ci in range(cp):                      # whole atoms: the padding lanes too
        for y in range(h):
            for x in range(w):
                b = int(dla.mem.read(DST + (ci // ATOM) * surf + y * line + x * ATOM + ci % ATOM, 1)[0])
                got = b - 256 if b > 127 else b
                assert got == ref_element(cube[ci][y][x], bs_mul, bn), (case, ci, y, x)


def test_sum_wrap_case_really_wraps():
    """The wrap case distinguishes the RTL's low-32-bit pass from a saturating one."""
    bn = CASES["sum_wraps"]
    a = 100 * 0x7FFF + (0x7FF0 << 16)          # BS output + shifted BN operand: above INT32_MAX
    assert a > 2 ** 31 - 1 and wrap32(a) < 0
    assert ref_element(100, 0x7FFF, bn) == rshift_round(wrap32(a), 24, 49, 8) < 0


def test_warning_can_be_made_an_error_and_other_rules_stay_errors():
    """LimitationWarning is a real warning class (filterable); programs the hardware cannot run
    (an operand from memory with its DMA disabled: the X unit waits for it forever) still raise
    ModelConfigError."""
    bn = CASES["sum_negative"]
    dla = Nvdla(NV_SMALL)
    program(dla, 1, 1, 8, 1, bn)
    dla.write("NVDLA_SDP_RDMA.D_OP_ENABLE_0", 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LimitationWarning)
        with pytest.raises(LimitationWarning):
            dla.write("NVDLA_SDP.D_OP_ENABLE_0", 1)
    dla = Nvdla(NV_SMALL)
    program(dla, 1, 1, 8, 1, bn)
    write(dla, "SDP.D_DP_BN_ALU_CFG", BN_ALU_SRC=1, BN_ALU_SHIFT_VALUE=0)
    dla.write("NVDLA_SDP_RDMA.D_OP_ENABLE_0", 1)
    with pytest.raises(ModelConfigError, match="NRDMA_DISABLE"), warnings.catch_warnings():
        warnings.simplefilter("ignore", LimitationWarning)
        dla.write("NVDLA_SDP.D_OP_ENABLE_0", 1)
