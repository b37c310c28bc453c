# amaranth: UnusedElaboratable=no
"""SDP compare mode (EW ALU EQL, nv_small_ew) and D_STATUS.STATUS_UNEQUAL on NvdlaCore
(Amaranth simulator), against the numpy model (verif.model.Nvdla) given the same CSB program and
memory (hdl/sdp/__init__.py and verif/model/sdp.py ``_latch_status`` give NVIDIA's RTL facts).

* compare-mode layers, operand from the register or from memory through ERDMA, equal and
  unequal (also a difference only in a padding lane of the last channel atom, which NVIDIA's
  WDMA sees too), with the MUL, the operand converter, the LUT and a non-identity output
  converter in the way: the layer completes with its interrupt, writes nothing (the
  destination keeps its old bytes) and D_STATUS reads what the model says;
* a compare layer with OUTPUT_DST = PDP (on the fly, 1x1 pooling): PDP writes the 0/1
  comparison results, SDP's WDMA takes zero atoms so STATUS_UNEQUAL stays 0;
* ping-pong: a compare layer in group 0 and an ordinary layer in group 1 (whose status is 1
  when any written byte is non-zero), each group read through S_POINTER; setting a group's
  OP_EN clears its copy.

Programs come from tests/hdl/test_sdp_ew_unit.py ``_program``."""
import random

import numpy as np

import pytest

import hdl.top
import verif.trace.amaranth_engine
from hdl.config import NV_SMALL_EW
from hdl.sdp import Sdp
from needs import one_profile_in_ci
from test_sdp_ew_unit import DST, EW, LUT_REGS, SRC, SdpEw, _our_ids, _program, a, ew_cfg
from verif.axi_slave import MemTiming
from verif.model import Nvdla
from verif.trace.amaranth_engine import simulate

EQL = 3
PATTERN = 0xA5          # the destination's bytes before the layers


def _sext8(b):
    return b - 256 if b > 127 else b


def _eql_case(name):
    """(case for ``_program``, fix(regs, mem) adjusting the random program, want_unequal or
    None when the model alone decides)."""
    reg_only = {"cfg": ew_cfg(algo=EQL, mul_bypass=1), "alu": (0, 1), "mul": (0, 1)}
    from_mem = {"cfg": ew_cfg(algo=EQL, mul_bypass=1), "alu": (1, 1), "mul": (0, 1),
                "fmt": ("ALU", 0, 1)}

    def const_src(poke=None):
        def fix(regs, mem):
            src = bytearray([0x37] * len(mem[SRC]))
            if poke is not None:
                src[poke] ^= 0x10
            mem[SRC] = bytes(src)
            regs.append(("SDP.D_DP_EW_ALU_SRC_VALUE", 0x37))
        return fix

    def same_operands(poke=None):
        def fix(regs, mem):
            ew = bytearray(mem[SRC])            # per element, 1 byte: the layout of the data
            if poke is not None:
                ew[poke] ^= 0x01
            mem[EW] = bytes(ew)
        return fix

    atom = NV_SMALL_EW.memory_atomic
    pad_lane = 3 * 2 * atom + 5          # surface 1, pixel 0, lane 5: channel 13 of 12
    cases = {
        "reg_equal": (reg_only, const_src(), False),
        "reg_unequal": (reg_only, const_src(poke=17), True),
        "reg_unequal_padding": (reg_only, const_src(poke=pad_lane), True),
        "mem_equal": (from_mem, same_operands(), False),
        "mem_unequal": (from_mem, same_operands(poke=9), True),
        # MUL (register operand 1, no shift) before the ALU; ignored output converter
        "mul_then_eql": ({**reg_only, "cfg": ew_cfg(algo=EQL), "cvt_offset": 5, "cvt_scale": 3,
                          "cvt_shift": 1},
                         lambda regs, mem: (const_src()(regs, mem),
                                            regs.append(("SDP.D_DP_EW_MUL_SRC_VALUE", 1)),
                                            regs.append(("SDP.D_DP_EW_TRUNCATE_VALUE", 0))),
                         False),
        # operands from memory through their converters (random), both ALU and MUL
        "mem_cvt": ({"cfg": ew_cfg(algo=EQL), "alu": (1, 0), "mul": (1, 0), "truncate": 4,
                     "fmt": ("BOTH", 1, 1)}, None, None),
        # the LUT after the comparison: its output's low 8 bits are what WDMA sees
        "eql_lut": ({"cfg": ew_cfg(algo=EQL, mul_bypass=1, lut_bypass=0), "alu": (1, 1),
                     "mul": (0, 1), "fmt": ("ALU", 1, 0), "lut": LUT_REGS, "perf": 2},
                    None, None),
    }
    return cases[name]


def _bench_program(name):
    case, fix, want = _eql_case(name)
    rng = random.Random(name)
    regs, mem, out_size = _program(rng, case)
    if fix is not None:
        fix(regs, mem)
    mem[DST] = bytes([PATTERN]) * out_size
    return regs, mem, out_size, want


def _run(steps, mem, profile, seed):
    """Play ``steps`` on the model and on NvdlaCore(nv_small_ew). Steps: ("w", reg, value),
    ("r", reg), ("done", bit) (wait for GLB.S_INTR_STATUS bit ``bit``, e.g. SDP's done of
    group ``bit`` for bits 0/1, and acknowledge it).
    Returns (model reads, RTL reads, model engine memory reader, RTL engine)."""
    model = Nvdla(NV_SMALL_EW)
    for addr, blob in mem.items():
        model.mem.write(addr, blob)
    want = []
    for st in steps:
        if st[0] == "w":
            model.write(a(st[1]), st[2])
        elif st[0] == "r":
            want.append(model.read(a(st[1])))
        else:
            assert model.read(a("GLB.S_INTR_STATUS")) >> st[1] & 1
            model.write(a("GLB.S_INTR_STATUS"), 1 << st[1])
    got = []

    async def bench(h):
        for addr, blob in mem.items():
            await h.mem_write(addr, blob)
        for st in steps:
            if st[0] == "w":
                await h.reg_write(a(st[1]), st[2])
            elif st[0] == "r":
                got.append(await h.reg_read(a(st[1])))
            else:
                for _ in range(20000):
                    await h.tick()
                    if await h.reg_read(a("GLB.S_INTR_STATUS")) >> st[1] & 1:
                        break
                else:
                    raise AssertionError(f"no interrupt S_INTR_STATUS bit {st[1]}")
                await h.reg_write(a("GLB.S_INTR_STATUS"), 1 << st[1])

    eng = _simulate(bench, profile, seed)
    return want, got, model, eng


def _simulate(bench, profile, seed):
    mp = pytest.MonkeyPatch()
    try:
        units = tuple(SdpEw if u is Sdp else u for u in hdl.top.DATAPATH_UNITS)
        mp.setattr(hdl.top, "DATAPATH_UNITS", units)
        mp.setattr(verif.trace.amaranth_engine, "our_ids", _our_ids)
        return simulate(NV_SMALL_EW, bench, timing=MemTiming.named(profile, seed=seed))
    finally:
        mp.undo()


def _layer(regs, group):
    return ([("w", "SDP_RDMA.S_POINTER", group), ("w", "SDP.S_POINTER", group)]
            + [("w", r, v) for r, v in regs]
            + [("w", "SDP_RDMA.D_OP_ENABLE", 1), ("w", "SDP.D_OP_ENABLE", 1), ("done", group)])


NAMES = ["reg_equal", "reg_unequal", "reg_unequal_padding", "mem_equal", "mem_unequal",
         "mul_then_eql", "mem_cvt", "eql_lut"]


# each case under one memory profile in CI, both under ``slow`` (random EW programs with EQL
# also run on the Verilator RTL of nv_small_256_full in CI: tests/test_gen_programs.py)
@pytest.mark.parametrize("name, profile", one_profile_in_ci(NAMES))
def test_compare_layer_matches_model(name, profile):
    regs, mem, out_size, want_unequal = _bench_program(name)
    steps = _layer(regs, 0) + [("r", "SDP.D_STATUS"), ("r", "SDP.D_PERF_WDMA_WRITE_STALL")]
    want, got, model, eng = _run(steps, mem, profile, seed=len(name))
    if want_unequal is not None:                    # the program tests what it means to
        assert want[0] == int(want_unequal)
    assert got == want
    assert bytes(model.mem.read(DST, out_size)) == mem[DST]      # nothing written
    assert eng.mem.read_bytes(DST, out_size) == mem[DST]


@pytest.mark.parametrize("profile", ["nvidia", pytest.param("random", marks=pytest.mark.slow)])
def test_status_per_group(profile):
    """Group 0: compare layer, unequal; group 1: an ordinary layer (ALU SUM, written to memory);
    each group's D_STATUS through S_POINTER; then SDP's OP_EN for group 0 alone (SDP_RDMA not
    armed, so the layer does not start) clears group 0's copy, not group 1's."""
    regs0, mem, out_size, _ = _bench_program("reg_unequal")
    rng = random.Random(7)
    regs1, _, _ = _program(rng, {"cfg": ew_cfg(algo=2, mul_bypass=1), "alu": (0, 1),
                                    "mul": (0, 1), "cvt_shift": 3})
    steps = (_layer(regs0, 0) + _layer(regs1, 1)
             + [("w", "SDP.S_POINTER", 0), ("r", "SDP.D_STATUS"),
                ("w", "SDP.S_POINTER", 1), ("r", "SDP.D_STATUS"),
                ("w", "SDP.S_POINTER", 0), ("w", "SDP.D_OP_ENABLE", 1), ("r", "SDP.D_STATUS"),
                ("w", "SDP.S_POINTER", 1), ("r", "SDP.D_STATUS")])
    want, got, model, eng = _run(steps, mem, profile, seed=11)
    assert want == [1, 1, 0, 1]
    assert got == want
    written = bytes(model.mem.read(DST, out_size))
    assert written != mem[DST]                      # the ordinary layer wrote
    assert eng.mem.read_bytes(DST, out_size) == written


PDST = 0x9100_0000
PDP_DONE0 = 4           # GLB.S_INTR_STATUS.PDP_DONE_STATUS0


@pytest.mark.parametrize("profile", [pytest.param("nvidia", marks=pytest.mark.slow), "random"])
def test_compare_on_the_fly_to_pdp(profile):
    """Compare mode with OUTPUT_DST = PDP (NV_NVDLA_SDP_core.v: PDP gets the converter's output,
    which passes the comparison's 0/1 results; WDMA gets zero atoms): PDP (1x1 max pooling on
    the fly) writes the results, D_STATUS.STATUS_UNEQUAL stays 0."""
    from test_sdp_ew_unit import C, H, W
    regs, mem, out_size, _ = _bench_program("reg_unequal")
    atom = NV_SMALL_EW.memory_atomic
    regs += [("SDP.D_FEATURE_MODE_CFG", 2)]                    # OUTPUT_DST = PDP
    regs += [("PDP.S_POINTER", 0), ("PDP.D_DATA_CUBE_IN_WIDTH", W - 1),
             ("PDP.D_DATA_CUBE_IN_HEIGHT", H - 1), ("PDP.D_DATA_CUBE_IN_CHANNEL", C - 1),
             ("PDP.D_DATA_CUBE_OUT_WIDTH", W - 1), ("PDP.D_DATA_CUBE_OUT_HEIGHT", H - 1),
             ("PDP.D_DATA_CUBE_OUT_CHANNEL", C - 1),
             ("PDP.D_OPERATION_MODE_CFG", 1),                  # MAX, ON_FLYING, no split
             ("PDP.D_POOLING_KERNEL_CFG", 0), ("PDP.D_RECIP_KERNEL_WIDTH", 0x10000),
             ("PDP.D_RECIP_KERNEL_HEIGHT", 0x10000), ("PDP.D_DST_BASE_ADDR_LOW", PDST),
             ("PDP.D_DST_LINE_STRIDE", W * atom), ("PDP.D_DST_SURFACE_STRIDE", W * H * atom),
             ("PDP.D_DST_RAM_CFG", 1)]
    mem[PDST] = bytes([PATTERN]) * out_size
    steps = ([("w", r, v) for r, v in regs]
             + [("w", "PDP.D_OP_ENABLE", 1), ("w", "SDP_RDMA.D_OP_ENABLE", 1),
                ("w", "SDP.D_OP_ENABLE", 1), ("done", 0), ("done", PDP_DONE0),
                ("r", "SDP.D_STATUS")])
    want, got, model, eng = _run(steps, mem, profile, seed=3)
    assert want == [0] and got == want
    pooled = bytes(model.mem.read(PDST, out_size))
    assert sorted(set(pooled)) == [0, 1] and pooled.count(1) == 1
    assert eng.mem.read_bytes(PDST, out_size) == pooled
    assert eng.mem.read_bytes(DST, out_size) == mem[DST]       # SDP's WDMA wrote nothing


@pytest.mark.parametrize("lanes,seed", [(1, 21), (2, 22)])
def test_y_compare_mode_keeps_output_bits(lanes, seed):
    """YSubUnit alone, random stalls: in compare mode its output is the (LUT's) result's low
    8 bits sign-extended (what NVIDIA's converter passes to an int8 output); two layers, LUT
    bypassed (0/1) and LUT on (random 16-bit tables), against the model's ``sdp_lut``."""
    from test_sdp_y import _run, layout
    from hdl.sdp import lut
    from hdl.sdp.y import YSubUnit
    from verif.model.lut import LutParams
    from verif.model.sdp import sdp_lut
    rng = random.Random(seed)
    le_t = [rng.randrange(-(1 << 15), 1 << 15) for _ in range(lut.LE_ENTRIES)]
    lo_t = [rng.randrange(-(1 << 15), 1 << 15) for _ in range(lut.LO_ENTRIES)]
    p = LutParams(le_function=1, le_index_offset=0, le_index_select=0, lo_index_select=0,
                  le_start=-2, le_end=30, lo_start=-1, lo_end=200, le_uflow_scale=5,
                  le_oflow_scale=7, le_uflow_shift=0, le_oflow_shift=0, lo_uflow_scale=3,
                  lo_oflow_scale=2, lo_uflow_shift=0, lo_oflow_shift=0, uflow_priority=0,
                  oflow_priority=0, hybrid_priority=seed & 1)
    lut_p = {n: getattr(p, n) for n in (
        "le_index_offset", "le_index_select", "lo_index_select", "le_start", "le_end",
        "lo_start", "lo_end", "le_uflow_scale", "le_oflow_scale", "le_uflow_shift",
        "le_oflow_shift", "lo_uflow_scale", "lo_oflow_scale", "lo_uflow_shift", "lo_oflow_shift",
        "uflow_priority", "oflow_priority", "hybrid_priority")}
    lut_p["le_exp"] = 0
    oc = {"mem": 1, "cvt_bypass": 1, "operand": 0, "cvt_offset": 0, "cvt_scale": 1,
          "cvt_truncate": 0}
    base = {"bypass": 0, "alu_bypass": 0, "alu_algo": EQL, "mul_bypass": 1, "mul_prelu": 0,
            "truncate": 0, "alu": oc, "mul": oc}
    layers = []
    for lut_bypass in (1, 0):
        items = [([rng.randrange(-2, 3) for _ in range(lanes)],
                  [rng.randrange(-2, 3) for _ in range(lanes)], [0] * lanes) for _ in range(30)]
        layers.append(({**base, "lut_bypass": lut_bypass}, items))
    dut = YSubUnit(lanes, layout(lanes), "ew", lut=True)
    results, _ = _run(dut, layers, lanes, p_in=0.3, p_out=0.3, seed=seed, tables=(le_t, lo_t),
                      lut_p=lut_p)
    for (c, items), got in zip(layers, results):
        neq = np.array([[int(x != a) for x, a in zip(xs, al)] for xs, al, _ in items], np.int64)
        if c["lut_bypass"]:
            want = neq
        else:
            y, _ = sdp_lut(neq, np.array(le_t, np.int64), np.array(lo_t, np.int64), p)
            want = np.vectorize(lambda v: _sext8(int(v) & 0xFF))(y)
            assert np.any(np.abs(y) > 127)          # the low 8 bits are what matters
        assert got == want.tolist(), c["lut_bypass"]
