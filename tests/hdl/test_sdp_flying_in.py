"""SDP input on the fly from CACC (docs/conv.md "SDP on the fly"; SDP D_FEATURE_MODE_CFG.FLYING_MODE
= ON_FLYING): int32 atoms driven with random stalls into the ``cacc_flying`` port of the SDP
inside NvdlaCore (Amaranth simulator; built without the convolution pipeline, whose CACC
drives the port, so that the test drives it), SDP
programmed like NVIDIA's dc_* traces program it (X1/X2 with register operands, ReLU, the output
converter), the bytes written to memory compared with the numpy model's SDP run on the same
flying cube (verif.model.sdp.SdpCore.run with ``flying_input``, as verif/model/nvdla.py calls it
with the convolution output). Values near the int32 limits exercise the saturations.

SDP_RDMA takes no part (no operand from memory): only SDP's D_OP_ENABLE is written, MRDMA must
not read anything."""
import random

import numpy as np
import pytest
from amaranth.sim import Simulator

import hdl.top
from hdl.config import NV_SMALL, get_config
from hdl.regmap import REGMAP
from hdl.sdp import Sdp
from streams import stream_put
from verif.axi_slave import MemTiming
from verif.model import Nvdla
from verif.trace.amaranth_engine import PERIOD, AmaranthEngine

DST = 0x9000_0000
I32 = (-(1 << 31), (1 << 31) - 1)


def x_cfg(*, bypass=0, alu_bypass=0, algo=2, mul_bypass=0, prelu=0, relu_bypass=1):
    return bypass | alu_bypass << 1 | algo << 2 | mul_bypass << 4 | prelu << 5 | relu_bypass << 6


def a(reg):
    return REGMAP.lookup(reg).addr


def _regs(case, w, h, c, cfg=NV_SMALL, nb=1, bstride=0, gap=0):
    """SDP's registers for ``case`` on a w x h x c cube (``nb`` batches ``bstride`` bytes
    apart: D_FEATURE_MODE_CFG.BATCH_NUMBER, D_DST_BATCH_STRIDE; ``gap`` atoms between
    surfaces). Returns (regs, bytes of one cube)."""
    atom = cfg.memory_atomic
    line, surf = w * atom, (w * h + gap) * atom
    regs = [("SDP.D_FEATURE_MODE_CFG", 1 | (nb - 1) << 8), ("SDP.D_DATA_FORMAT", 0),
            ("SDP.D_DST_BATCH_STRIDE", bstride),                          # on the fly, int8 out
            ("SDP.D_DATA_CUBE_WIDTH", w - 1), ("SDP.D_DATA_CUBE_HEIGHT", h - 1),
            ("SDP.D_DATA_CUBE_CHANNEL", c - 1), ("SDP.D_DST_BASE_ADDR_LOW", DST),
            ("SDP.D_DST_LINE_STRIDE", line), ("SDP.D_DST_SURFACE_STRIDE", surf),
            ("SDP.D_DST_DMA_CFG", 1),
            ("SDP.D_CVT_OFFSET", case["cvt"][0] & 0xFFFFFFFF), ("SDP.D_CVT_SCALE", case["cvt"][1] & 0xFFFF),
            ("SDP.D_CVT_SHIFT", case["cvt"][2])]
    for sub in ("BS", "BN"):
        c_ = case.get(sub)
        if c_ is None:
            regs.append((f"SDP.D_DP_{sub}_CFG", x_cfg(bypass=1)))
            continue
        regs += [(f"SDP.D_DP_{sub}_CFG", c_["cfg"]),
                 (f"SDP.D_DP_{sub}_ALU_CFG", c_.get("alu_shift", 0) << 8),        # SRC = REG
                 (f"SDP.D_DP_{sub}_MUL_CFG", c_.get("mul_shift", 0) << 8),
                 (f"SDP.D_DP_{sub}_ALU_SRC_VALUE", c_.get("alu", 0) & 0xFFFF),
                 (f"SDP.D_DP_{sub}_MUL_SRC_VALUE", c_.get("mul", 1) & 0xFFFF)]
    return regs, surf * -(-c // atom)


CASES = {
    # dc_*-like: BS bias (SUM, shifted operand), BN scale + ReLU, converter scaling down
    "bs_bn_relu": dict(BS={"cfg": x_cfg(mul_bypass=1), "alu": -1234, "alu_shift": 3},
                       BN={"cfg": x_cfg(alu_bypass=1, relu_bypass=0), "mul": 0x2d1,
                           "mul_shift": 9},
                       cvt=(-17, 3, 26)),
    # values near INT32 limits through a saturating ALU and multiplier
    "saturating": dict(BS={"cfg": x_cfg(), "alu": 0x7fff, "alu_shift": 20, "mul": -3,
                           "mul_shift": 2},
                       BN={"cfg": x_cfg(algo=0), "alu": -0x8000, "alu_shift": 16, "mul": 0x7fff,
                           "mul_shift": 15},
                       cvt=(0, 1, 24)),
    # everything bypassed: the converter alone on int32 (saturation to int8 and its 17-bit stage)
    "cvt_only": dict(cvt=((1 << 31) - 1, -1, 0)),
    "cvt_shift": dict(cvt=(-(1 << 31), 0x7fff, 40)),
}


def _cube(rng, cp, h, w):
    """(cp, h, w) int32 values: random, near the limits, small."""
    pool = [I32[0], I32[0] + 1, I32[1], I32[1] - 1, 0, -1, 1, 127, -128, 1 << 30, -(1 << 30)]
    x = np.empty((cp, h, w), np.int64)
    for idx in np.ndindex(x.shape):
        r = rng.random()
        x[idx] = rng.choice(pool) if r < 0.35 else (rng.randrange(-300, 300) if r < 0.6 else
                                                     rng.randrange(I32[0], I32[1] + 1))
    return x


def _model(regs, cube, cfg=NV_SMALL):
    dla = Nvdla(cfg)
    for reg, v in regs:
        dla.write(a(reg), v)
    # the SDP layer on a flying input, as verif/model/nvdla.py runs it with CACC's output
    dla.sdp.run(None, dla.units["SDP"].view(), cube)
    return dla


def _run_rtl(regs, cube, *, seed, p_stall, timing, cfg=NV_SMALL):
    """The SDP of ``cfg`` in NvdlaCore on the flying ``cube`` (C, H, W), or (N, C, H, W) in a
    multi-batch layer (its atoms then batch fastest, as CACC delivers them)."""
    sdps = []

    class RecordingSdp(Sdp):
        def __init__(self, cfg):
            super().__init__(cfg)
            sdps.append(self)

    # without the convolution pipeline, whose CACC drives the port in NvdlaCore
    units = tuple(RecordingSdp if u is Sdp else u for u in hdl.top.DATAPATH_UNITS
                  if "CACC" not in u.REGISTER_FILES)
    mp = pytest.MonkeyPatch()
    mp.setattr(hdl.top, "DATAPATH_UNITS", units)
    try:
        dut = hdl.top.NvdlaCore(cfg)
        eng = AmaranthEngine(dut, timing=timing)
        sim = Simulator(dut)
    finally:
        mp.undo()
    sim.add_clock(PERIOD)
    sim.add_testbench(eng.axi_testbench, background=True)
    atom = cfg.memory_atomic
    cubes = cube if cube.ndim == 4 else cube[None]
    _, cp, h, w = cubes.shape
    atoms = [[int(cb[s * atom + k, y, x]) for k in range(atom)]
             for s in range(cp // atom) for y in range(h) for x in range(w) for cb in cubes]
    started, result = [], {}
    rng = random.Random(seed)

    async def main(ctx):
        eng.ctx = ctx
        ctx.set(dut.csb2nvdla_valid, 0)
        for reg, v in regs:
            await eng.reg_write(a(reg), v)
        await eng.reg_write(a("SDP.D_OP_ENABLE"), 1)
        started.append(eng.cycle)
        for _ in range(len(atoms) * 40 + 2000):
            await eng.tick()
            if await eng.reg_read(a("GLB.S_INTR_STATUS")) & 1:
                result["done"] = True
                break

    async def cacc(ctx):
        port = sdps[0].cacc_flying
        while not started:
            await ctx.tick()
        await stream_put(ctx, port, atoms, rng=rng, p_stall=p_stall)
        result["sent"] = True

    sim.add_testbench(main)
    sim.add_testbench(cacc, background=True)
    sim.run()
    return eng, result


@pytest.mark.parametrize("name,profile,p_stall", [("bs_bn_relu", "nvidia", 0.3),
                                                  ("saturating", "random", 0.5),
                                                  ("cvt_only", "nvidia", 0.0),
                                                  ("cvt_shift", "random", 0.3)])
def test_flying_input_matches_model(name, profile, p_stall):
    rng = random.Random(name)
    w, h, c = 3, 2, 12                 # two surfaces, the last partial (4 of 8 channels)
    atom = NV_SMALL.memory_atomic
    cp = -(-c // atom) * atom
    cube = _cube(rng, cp, h, w)
    regs, size = _regs(CASES[name], w, h, c)
    want = bytes(_model(regs, cube).mem.read(DST, size))
    eng, result = _run_rtl(regs, cube, seed=len(name), p_stall=p_stall,
                           timing=MemTiming.named(profile, seed=3))
    assert result.get("done"), "no SDP done interrupt"
    assert result.get("sent"), "SDP did not take every flying atom"
    assert eng.mem.read_bytes(DST, size) == want
    assert eng.axi.rd_beats == 0          # MRDMA (and every operand DMA) stayed idle


BATCH_CFGS = {"nv_small": NV_SMALL.derive(name="nv_small+batch", batch=True, max_batch=32),
              "nv_small_256": get_config("nv_small_256", ["batch=True", "max_batch=32"])}


@pytest.mark.parametrize("preset,nb,w,h,c", [("nv_small", 3, 3, 2, 12), ("nv_small", 5, 1, 1, 16),
                                             ("nv_small_256", 4, 2, 2, 40),
                                             ("nv_small_256", 2, 1, 1, 32)])
def test_flying_batches(preset, nb, w, h, c):
    """Multi-batch on the fly (docs/conv.md "Multi-batch"): CACC's atoms batch fastest, cube
    b written D_DST_BATCH_STRIDE x b after the first (gaps between the cubes and between
    surfaces, which stay untouched); a 1 x 1 cube is not packed (its surfaces at their
    stride, two atoms apart): the model's bytes,
    at nv_small's 8-byte and nv_small_256's 32-byte atoms."""
    cfg = BATCH_CFGS[preset]
    rng = random.Random(nb * 100 + w)
    atom = cfg.memory_atomic
    cp = -(-c // atom) * atom
    cube = np.stack([_cube(rng, cp, h, w) for _ in range(nb)])
    regs, size = _regs(CASES["bs_bn_relu"], w, h, c, cfg, nb, 0, gap=2)
    bstride = size + 3 * atom
    regs, size = _regs(CASES["bs_bn_relu"], w, h, c, cfg, nb, bstride, gap=2)
    want = bytes(_model(regs, cube, cfg).mem.read(DST, nb * bstride))
    eng, result = _run_rtl(regs, cube, seed=nb, p_stall=0.3,
                           timing=MemTiming.named("random", seed=nb), cfg=cfg)
    assert result.get("done"), "no SDP done interrupt"
    assert result.get("sent"), "SDP did not take every flying atom"
    got = eng.mem.read_bytes(DST, nb * bstride)
    for b in range(nb):
        assert got[b * bstride:(b + 1) * bstride] == want[b * bstride:(b + 1) * bstride], f"batch {b}"
