"""End to end on NvdlaCore (Amaranth simulator): SDP layers whose X1 (BS) / X2 (BN) operands
come from memory through BRDMA / NRDMA in every format NVIDIA's nv_small traces do not cover
(PER_KERNEL, TWO_BYTE, DATA_USE=BOTH / MUL), compared byte for byte with the numpy model
(verif.model.Nvdla) given the same registers and memory, at SDP throughput 1 (NVIDIA's memory timing) and 8 (4-beat
bursts, random memory latency, stalls and out-of-order responses)."""
import random

import pytest

from hdl.config import NV_SMALL
from hdl.regmap import REGMAP
from verif.axi_slave import MemTiming
from verif.model import Nvdla
from verif.trace.amaranth_engine import simulate

SRC, DST, OPS = 0x8000_0000, 0x9000_0000, {"BS": 0x8100_0000, "BN": 0x8200_0000}
W, H, C = 3, 2, 12          # two surfaces, the last one partial (4 of 8 channels)
USE = {"MUL": 0, "ALU": 1, "BOTH": 2}


def x_cfg(*, bypass=0, alu_bypass=0, algo=2, mul_bypass=0, prelu=0, relu_bypass=1):
    return bypass | alu_bypass << 1 | algo << 2 | mul_bypass << 4 | prelu << 5 | relu_bypass << 6


def dma_cfg(use, two_byte, per_element):
    return USE[use] << 1 | two_byte << 3 | per_element << 4


def _program(rng, case):
    """Register writes [(name, value)] and memory regions {addr: bytes} of one layer."""
    atom = NV_SMALL.memory_atomic
    surfaces = -(-C // atom)
    line, surf = W * atom, W * H * atom
    mem = {SRC: bytes(rng.randrange(256) for _ in range(surf * surfaces))}
    regs = [("SDP_RDMA.D_FEATURE_MODE_CFG", 0), ("SDP.D_FEATURE_MODE_CFG", 0),   # int8, memory
            ("SDP.D_DATA_FORMAT", 0)]
    for unit in ("SDP_RDMA", "SDP"):
        regs += [(f"{unit}.D_DATA_CUBE_WIDTH", W - 1), (f"{unit}.D_DATA_CUBE_HEIGHT", H - 1),
                 (f"{unit}.D_DATA_CUBE_CHANNEL", C - 1)]
    regs += [("SDP_RDMA.D_SRC_BASE_ADDR_LOW", SRC), ("SDP_RDMA.D_SRC_LINE_STRIDE", line),
             ("SDP_RDMA.D_SRC_SURFACE_STRIDE", surf), ("SDP.D_DST_BASE_ADDR_LOW", DST),
             ("SDP.D_DST_LINE_STRIDE", line), ("SDP.D_DST_SURFACE_STRIDE", surf),
             ("SDP.D_CVT_OFFSET", case.get("cvt_offset", 0) & 0xFFFFFFFF),
             ("SDP.D_CVT_SCALE", case.get("cvt_scale", 1)), ("SDP.D_CVT_SHIFT", case.get("cvt_shift", 0))]
    for sub, dma in (("BS", "BRDMA"), ("BN", "NRDMA")):
        c = case.get(sub)
        if c is None:
            regs.append((f"SDP.D_DP_{sub}_CFG", x_cfg(bypass=1)))
            continue
        regs += [(f"SDP.D_DP_{sub}_CFG", c["cfg"]),
                 (f"SDP.D_DP_{sub}_ALU_CFG", c["alu_src"] | c["alu_shift"] << 8),
                 (f"SDP.D_DP_{sub}_MUL_CFG", c["mul_src"] | c["mul_shift"] << 8),
                 (f"SDP.D_DP_{sub}_ALU_SRC_VALUE", rng.randrange(1 << 16)),
                 (f"SDP.D_DP_{sub}_MUL_SRC_VALUE", rng.randrange(1 << 16))]
        if "fmt" in c:
            use, two_byte, per_element = c["fmt"]
            k = (2 if use == "BOTH" else 1) * (2 if two_byte else 1)
            if per_element:
                oline, osurf = W * atom * k, W * H * atom * k
                size = osurf * surfaces
            else:
                oline = osurf = 0x40
                size = surfaces * atom * k
            mem[OPS[sub]] = bytes(rng.randrange(256) for _ in range(size))
            regs += [(f"SDP_RDMA.D_{dma}_CFG", dma_cfg(use, two_byte, per_element)),
                     (f"SDP_RDMA.D_{sub}_BASE_ADDR_LOW", OPS[sub]),
                     (f"SDP_RDMA.D_{sub}_LINE_STRIDE", oline),
                     (f"SDP_RDMA.D_{sub}_SURFACE_STRIDE", osurf)]
    return regs, mem, surf * surfaces


CASES = {
    # BS: per-kernel, both operands, two bytes each
    "bs_kernel_both_2b": {"BS": {"cfg": x_cfg(), "alu_src": 1, "alu_shift": 0, "mul_src": 1,
                                 "mul_shift": 23, "fmt": ("BOTH", 1, 0)}},
    # BN: per-element, both operands, one byte each; BS from registers
    "bn_elem_both_1b": {"BS": {"cfg": x_cfg(algo=0, relu_bypass=0), "alu_src": 0, "alu_shift": 2,
                               "mul_src": 0, "mul_shift": 0},
                        "BN": {"cfg": x_cfg(), "alu_src": 1, "alu_shift": 1, "mul_src": 1,
                               "mul_shift": 9, "fmt": ("BOTH", 0, 1)},
                        "cvt_scale": 3, "cvt_shift": 2},
    # BS: per-element 2-byte MUL (PReLU); BN: per-kernel 1-byte ALU (MIN)
    "bs_elem_mul_2b_bn_kernel_alu": {
        "BS": {"cfg": x_cfg(alu_bypass=1, prelu=1), "alu_src": 0, "alu_shift": 0, "mul_src": 1,
               "mul_shift": 10, "fmt": ("MUL", 1, 1)},
        "BN": {"cfg": x_cfg(algo=1, mul_bypass=1, relu_bypass=0), "alu_src": 1, "alu_shift": 4,
               "mul_src": 0, "mul_shift": 0, "fmt": ("ALU", 0, 0)},
        "cvt_offset": -5},
    # both per-kernel 2-byte single operands, BS MAX, BN multiplier
    "both_kernel_2b": {
        "BS": {"cfg": x_cfg(algo=0, mul_bypass=1), "alu_src": 1, "alu_shift": 0, "mul_src": 0,
               "mul_shift": 0, "fmt": ("ALU", 1, 0)},
        "BN": {"cfg": x_cfg(alu_bypass=1), "alu_src": 0, "alu_shift": 0, "mul_src": 1,
               "mul_shift": 7, "fmt": ("MUL", 1, 0)},
        "cvt_shift": 17},
}


# throughput 8 with 4-beat bursts (contiguous PER_KERNEL operand surfaces read in one burst)
NV_SMALL_T8 = NV_SMALL.derive(name="nv_small_t8_b4", sdp_bs_throughput=8, sdp_bn_throughput=8,
                              primary_memif_max_burst=4)


@pytest.mark.parametrize("cfg,profile", [(NV_SMALL, "nvidia"), (NV_SMALL_T8, "random")],
                         ids=["t1", "t8_burst4_random"])
@pytest.mark.parametrize("name", list(CASES))
def test_memory_operands_match_model(name, cfg, profile):
    rng = random.Random(name)
    regs, mem, out_size = _program(rng, CASES[name])

    def a(reg):
        return REGMAP.lookup(reg).addr

    model = Nvdla(NV_SMALL)
    for addr, blob in mem.items():
        model.mem.write(addr, blob)
    for reg, v in regs:
        model.write(a(reg), v)
    model.write(a("SDP_RDMA.D_OP_ENABLE"), 1)
    model.write(a("SDP.D_OP_ENABLE"), 1)
    want = bytes(model.mem.read(DST, out_size))
    result = {}

    async def bench(h):
        for addr, blob in mem.items():
            await h.mem_write(addr, blob)
        for reg, v in regs:
            await h.reg_write(a(reg), v)
        await h.reg_write(a("SDP_RDMA.D_OP_ENABLE"), 1)
        await h.reg_write(a("SDP.D_OP_ENABLE"), 1)
        for _ in range(20000):
            await h.tick()
            if await h.reg_read(a("GLB.S_INTR_STATUS")) & 1:
                result["done"] = True
                break

    eng = simulate(cfg, bench, timing=MemTiming.named(profile, seed=len(name)))
    assert result.get("done"), "no SDP done interrupt"
    got = eng.mem.read_bytes(DST, out_size)
    assert got == want
