# amaranth: UnusedElaboratable=no
# (test_sdp_ports_per_configuration constructs Sdp units only to inspect their ports.)
"""End to end on NvdlaCore (Amaranth simulator, nv_small_ew): SDP layers with the Y (EW)
sub-unit taking its operands from memory through ERDMA (per element / per kernel, 1 / 2 bytes,
one or both operands, with and without the operand converters), the LUT programmed through
S_LUT_ACCESS_CFG/DATA (and read back), compared byte for byte and on D_PERF_LUT_* with the numpy
model (verif.model.Nvdla) given the same registers and memory.

hdl/top.py connects each unit's class-level READ_CLIENTS; until it connects the instance's
(which has ``sdp_erdma`` on configurations with cfg.sdp_ew), the test gives SDP a subclass
that lists ERDMA at class level, and the AXI monitor's allowed IDs are taken from the
configuration's client table (hdl.dma.clients.read_clients)."""
import random

import pytest

import hdl.top
import verif.trace.amaranth_engine
from hdl.dma.clients import WRITE_CLIENTS, read_clients
from hdl.config import NV_SMALL_EW
from hdl.regmap import REGMAP
from hdl.sdp import Sdp
from needs import one_profile_in_ci
from verif.axi_slave import MemTiming
from verif.model import Nvdla
from verif.trace.amaranth_engine import simulate

SRC, DST, EW = 0x8000_0000, 0x9000_0000, 0x8100_0000
W, H, C = 3, 2, 12          # two surfaces, the last one partial (4 of 8 channels)
USE = {"MUL": 0, "ALU": 1, "BOTH": 2}


class SdpEw(Sdp):
    READ_CLIENTS = Sdp.READ_CLIENTS + ("sdp_erdma",)


def _our_ids(cfg):
    """AXI IDs of the RTL with the configuration's client table (verif/monitors.py our_ids
    bounds them by the 7 base read clients: ERDMA's ID 7 is missing there)."""
    return {"read": frozenset(range(len(read_clients(cfg)))),
            "write": frozenset(range(min(len(WRITE_CLIENTS), cfg.num_dma_write_clients)))}


def a(reg):
    return REGMAP.lookup(reg).addr


def ew_cfg(*, bypass=0, alu_bypass=0, algo=2, mul_bypass=0, prelu=0, lut_bypass=1):
    return bypass | alu_bypass << 1 | algo << 2 | mul_bypass << 4 | prelu << 5 | lut_bypass << 6


def _program(rng, case):
    atom = NV_SMALL_EW.memory_atomic
    surfaces = -(-C // atom)
    line, surf = W * atom, W * H * atom
    mem = {SRC: bytes(rng.randrange(256) for _ in range(surf * surfaces))}
    regs = [("SDP_RDMA.D_FEATURE_MODE_CFG", 0), ("SDP.D_FEATURE_MODE_CFG", 0),
            ("SDP.D_DATA_FORMAT", 0), ("SDP_RDMA.D_BRDMA_CFG", 1), ("SDP_RDMA.D_NRDMA_CFG", 1),
            ("SDP.D_DP_BS_CFG", 1), ("SDP.D_DP_BN_CFG", 1)]
    for unit in ("SDP_RDMA", "SDP"):
        regs += [(f"{unit}.D_DATA_CUBE_WIDTH", W - 1), (f"{unit}.D_DATA_CUBE_HEIGHT", H - 1),
                 (f"{unit}.D_DATA_CUBE_CHANNEL", C - 1)]
    regs += [("SDP_RDMA.D_SRC_BASE_ADDR_LOW", SRC), ("SDP_RDMA.D_SRC_LINE_STRIDE", line),
             ("SDP_RDMA.D_SRC_SURFACE_STRIDE", surf), ("SDP.D_DST_BASE_ADDR_LOW", DST),
             ("SDP.D_DST_LINE_STRIDE", line), ("SDP.D_DST_SURFACE_STRIDE", surf),
             ("SDP.D_DST_DMA_CFG", 1),
             ("SDP.D_CVT_OFFSET", case.get("cvt_offset", 0) & 0xFFFFFFFF),
             ("SDP.D_CVT_SCALE", case.get("cvt_scale", 1)), ("SDP.D_CVT_SHIFT", case.get("cvt_shift", 0)),
             ("SDP.D_DP_EW_CFG", case["cfg"]), ("SDP.D_DP_EW_TRUNCATE_VALUE", case.get("truncate", 0)),
             ("SDP.D_PERF_ENABLE", case.get("perf", 0))]
    for k in ("ALU", "MUL"):
        src, cvt_bypass = case[k.lower()]
        regs += [(f"SDP.D_DP_EW_{k}_CFG", src | cvt_bypass << 1),
                 (f"SDP.D_DP_EW_{k}_SRC_VALUE", rng.randrange(-3000, 3000) & 0xFFFFFFFF if k == "ALU" else
                  rng.randrange(-9, 9) & 0xFFFFFFFF),
                 (f"SDP.D_DP_EW_{k}_CVT_OFFSET_VALUE", rng.randrange(-500, 500) & 0xFFFFFFFF),
                 (f"SDP.D_DP_EW_{k}_CVT_SCALE_VALUE", rng.randrange(-300, 300) & 0xFFFF),
                 (f"SDP.D_DP_EW_{k}_CVT_TRUNCATE_VALUE", rng.randrange(0, 6))]
    use, two_byte, per_element = case.get("fmt", ("BOTH", 0, 0))
    k = (2 if use == "BOTH" else 1) * (2 if two_byte else 1)
    if per_element:
        oline, osurf = W * atom * k, W * H * atom * k
        size = osurf * surfaces
    else:
        oline = osurf = 0x40
        size = surfaces * atom * k
    mem[EW] = bytes(rng.randrange(256) for _ in range(size))
    regs += [("SDP_RDMA.D_ERDMA_CFG", int("fmt" not in case) | USE[use] << 1 | two_byte << 3 |
              per_element << 4),
             ("SDP_RDMA.D_EW_BASE_ADDR_LOW", EW), ("SDP_RDMA.D_EW_LINE_STRIDE", oline),
             ("SDP_RDMA.D_EW_SURFACE_STRIDE", osurf)]
    if "lut" in case:
        regs += case["lut"]
        for tid, n in ((0, 65), (1, 257)):
            regs.append(("SDP.S_LUT_ACCESS_CFG", 1 << 17 | tid << 16))
            regs += [("SDP.S_LUT_ACCESS_DATA", rng.randrange(1 << 16)) for _ in range(n)]
    return regs, mem, surf * surfaces


LUT_REGS = [("SDP.S_LUT_CFG", 1 | 1 << 4 | 0 << 5 | 1 << 6),     # LE linear; priorities
            ("SDP.S_LUT_INFO", 0 | 7 << 8 | 8 << 16),              # LE select 7, LO select 8
            ("SDP.S_LUT_LE_START", -4096 & 0xFFFFFFFF), ("SDP.S_LUT_LE_END", -4096 + (1 << 13)),
            ("SDP.S_LUT_LO_START", -20000 & 0xFFFFFFFF),
            ("SDP.S_LUT_LO_END", (-20000 + (1 << 16)) & 0xFFFFFFFF),
            ("SDP.S_LUT_LE_SLOPE_SCALE", 0x0101_ff37), ("SDP.S_LUT_LE_SLOPE_SHIFT", 3 | 30 << 5),
            ("SDP.S_LUT_LO_SLOPE_SCALE", 0x7000_0020), ("SDP.S_LUT_LO_SLOPE_SHIFT", 1 | 2 << 5)]

CASES = {
    # ALU from memory through its converter, MUL from memory raw; both per element, 2 bytes
    "elem_both_2b_lut": {"cfg": ew_cfg(lut_bypass=0), "alu": (1, 0), "mul": (1, 1), "truncate": 9,
                         "fmt": ("BOTH", 1, 1), "lut": LUT_REGS, "perf": 2, "cvt_shift": 14},
    # per kernel 1-byte MUL with converter, ALU (MAX) from the register
    "kernel_mul_1b": {"cfg": ew_cfg(algo=0), "alu": (0, 1), "mul": (1, 0), "truncate": 3,
                      "fmt": ("MUL", 0, 0), "cvt_shift": 8},
    # per element 1-byte ALU (MIN) raw, MUL bypassed, PReLU-free; LUT on, counting disabled
    "elem_alu_1b_lut": {"cfg": ew_cfg(algo=1, mul_bypass=1, lut_bypass=0), "alu": (1, 1),
                        "mul": (0, 1), "fmt": ("ALU", 0, 1), "lut": LUT_REGS, "perf": 0,
                        "cvt_shift": 6},
    # register operands only (ERDMA disabled), like sdp_3x3x33_ew_int8_reg_0
    "reg_only": {"cfg": ew_cfg(), "alu": (0, 1), "mul": (0, 1), "truncate": 2, "cvt_shift": 4},
}
PERF = ["SDP.D_PERF_LUT_UFLOW", "SDP.D_PERF_LUT_OFLOW", "SDP.D_PERF_LUT_HYBRID",
        "SDP.D_PERF_LUT_LE_HIT", "SDP.D_PERF_LUT_LO_HIT"]


# each case under one memory profile in CI, both under ``slow`` (random EW programs also run
# on the Verilator RTL of nv_small_256_full in CI: tests/test_gen_programs.py)
@pytest.mark.parametrize("name, profile", one_profile_in_ci(list(CASES)))
def test_ew_layer_matches_model(name, profile, monkeypatch):
    rng = random.Random(name)
    regs, mem, out_size = _program(rng, CASES[name])
    model = Nvdla(NV_SMALL_EW)
    for addr, blob in mem.items():
        model.mem.write(addr, blob)
    for reg, v in regs:
        model.write(a(reg), v)
    model.write(a("SDP_RDMA.D_OP_ENABLE"), 1)
    model.write(a("SDP.D_OP_ENABLE"), 1)
    want = bytes(model.mem.read(DST, out_size))
    want_perf = [model.read(a(r)) for r in PERF]
    result = {}

    async def bench(h):
        for addr, blob in mem.items():
            await h.mem_write(addr, blob)
        for reg, v in regs:
            await h.reg_write(a(reg), v)
        if "lut" in CASES[name]:           # read back LO entry 3 (reads do not advance)
            await h.reg_write(a("SDP.S_LUT_ACCESS_CFG"), 1 << 16 | 3)
            result["lut3"] = await h.reg_read(a("SDP.S_LUT_ACCESS_DATA"))
        await h.reg_write(a("SDP_RDMA.D_OP_ENABLE"), 1)
        await h.reg_write(a("SDP.D_OP_ENABLE"), 1)
        for _ in range(40000):
            await h.tick()
            if await h.reg_read(a("GLB.S_INTR_STATUS")) & 1:
                result["done"] = True
                break
        result["perf"] = [await h.reg_read(a(r)) for r in PERF]

    units = tuple(SdpEw if u is Sdp else u for u in hdl.top.DATAPATH_UNITS)
    monkeypatch.setattr(hdl.top, "DATAPATH_UNITS", units)
    monkeypatch.setattr(verif.trace.amaranth_engine, "our_ids", _our_ids)
    eng = simulate(NV_SMALL_EW, bench, timing=MemTiming.named(profile, seed=len(name)))
    assert result.get("done"), "no SDP done interrupt"
    assert eng.mem.read_bytes(DST, out_size) == want
    assert result["perf"] == want_perf
    if "lut" in CASES[name]:
        lut_writes = [v for r, v in regs if r == "SDP.S_LUT_ACCESS_DATA"]
        assert result["lut3"] == lut_writes[65 + 3] & 0xFFFF
    if CASES[name]["cfg"] >> 6 & 1 == 0 and CASES[name].get("perf", 0) & 2:
        assert sum(want_perf[:3]) == W * H * 16          # every sample of the padded cube


def test_sdp_ports_per_configuration():
    """ERDMA's client port only with cfg.sdp_ew; the on-the-fly input from CACC always."""
    from hdl.config import NV_SMALL
    small, ew = Sdp(NV_SMALL).signature.members, Sdp(NV_SMALL_EW).signature.members
    assert "sdp_erdma" not in small and "sdp_erdma" in ew
    assert "cacc_flying" in small and "cacc_flying" in ew
    assert Sdp(NV_SMALL).READ_CLIENTS == ("sdp_mrdma", "sdp_brdma", "sdp_nrdma")
