"""SDP in FP16 (hdl/sdp/fp16.py: SDP D_DATA_FORMAT.PROC_PRECISION = 2 on nv_full's
``int8_int16_fp16``) against the bit-exact numpy model (verif/model/sdp.py ``SdpCore.run``,
``x_subunit_fp``, ``_y_subunit_fp``, ``sdp_lut_fp``; verif/model/fp.py).

* hdl.lib.fp's operators where SDP uses them, against the model's: fp16 -> fp32 and fp16 ->
  int16 on every pattern, fp32 -> fp16 on every exponent (rounding, denormals, overflow, NaN,
  infinity), fp32 add / multiply / MAX / MIN on random and extreme operands (NaN, infinity,
  fp32 denormals, zeros, cancellations), fp17 add / multiply, fp32 <-> fp17 and the 35-bit
  fraction to fp17 of the FP16 LUT; SDP's FP16 table index (:func:`hdl.sdp.lut.fp_table_index`)
  in linear and exponential modes;
* the core alone (geometry B's datapath, 1 and 4 lanes) at full rate: an FP16 atom every
  ``max(1, elements / lanes)`` cycles (one element per cycle per lane), results against the
  model's functions;
* the SDP unit (SDP_RDMA + core + WDMA, random memory stalls, as tests/hdl/test_sdp_int16.py's
  bench, which this file reuses) on geometry B (nv_small+feature_data_type=int8_int16_fp16, one
  lane, no EW) and A (nv_full, 16 lanes, EW and its LUT): programs of verif.gen.sdp drawing FP16
  layers (BS / BN operands from registers and memory, fp16 data with zeros, denormals,
  infinities and NaNs, NAN_TO_ZERO either way, FP16 or INT16 output) beside INT8 / INT16 ones,
  FP16 programs drawn here from the generator's pieces with an FP16 LUT (EW operands from
  memory, compare mode), and layers on the fly from CACC (fp32 patterns in lanes 0..15: NaN,
  infinity, fp32 denormals, values beyond fp16's range) against the model's ``SdpCore.run``:
  every output byte, D_STATUS and D_PERF_LUT_* of both register groups.
"""
from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth.hdl import Const, Module, Signal, signed
from amaranth.sim import Simulator

import test_sdp_int16 as bench          # the unit bench: programs, fake MCIF, CACC stream
from hdl.config import get_config
from hdl.lib import fp as L
from hdl.sdp.core import SdpCore, core_lanes
from hdl.sdp.lut import fp_table_index
from streams import check_stream_stable, stream_get, stream_put
from unit_programs import LOAD, WRITE
from verif.gen.common import FP16_SCALES, Alloc, Program, emit, fp16_values, regs
from verif.gen.sdp import lut_prologue, sdp_layer
from verif.gen.writer import TraceWriter
from verif.model import Nvdla
from verif.model import fp as F
from verif.model.lut import fp_table_index as ref_table_index
from verif.model.sdp import x_subunit_fp

GEOM_A = ("nv_full+winograd=False+batch=False+weight_compression=False"
          "+feature_data_type=int8_int16_fp16")
GEOM_B = "nv_small+feature_data_type=int8_int16_fp16"


# ---- hdl.lib.fp against the model's operators ------------------------------------------------

def evaluate(builds, vectors, widths, out_width=32):
    """Outputs of combinational ``builds`` (``build(m, *inputs) -> Value``, sharing inputs of
    ``widths``) on ``vectors`` (tuples of input values): one list per build."""
    m = Module()
    ins = [Signal(w, name=f"in{k}") for k, w in enumerate(widths)]
    outs = []
    for k, build in enumerate(builds):
        o = Signal(out_width, name=f"out{k}")
        m.d.comb += o.eq(build(m, *ins))
        outs.append(o)
    got = [[] for _ in builds]

    async def tb(ctx):
        for v in vectors:
            for s, x in zip(ins, v):
                ctx.set(s, x)
            for k, o in enumerate(outs):
                got[k].append(ctx.get(o))

    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()
    return got


def _check(name, vectors, got, want):
    bad = [i for i in range(len(vectors)) if got[i] != int(want[i])]
    assert not bad, (name, len(bad), [(tuple(hex(x) for x in vectors[i]), hex(got[i]),
                                       hex(int(want[i]))) for i in bad[:4]])


def fp32_edge(rng) -> int:
    """An fp32 pattern: normal values near 1 and far, the extreme exponents, zeros, FLT_MAX,
    infinities, NaNs and denormals."""
    r = rng.random()
    s = rng.getrandbits(1) << 31
    if r < 0.08:
        return s | rng.choice((0, 0x7F800000, 0x7F7FFFFF, 0x00800000, 0x3F800000))
    if r < 0.14:
        return s | 0x7F800000 | rng.randint(1, (1 << 23) - 1)           # NaN
    if r < 0.22:
        return s | rng.randint(1, (1 << 23) - 1)                         # denormal
    if r < 0.3:
        return s | (rng.choice((1, 2, 3, 253, 254)) << 23) | rng.getrandbits(23)
    spread = rng.choice((2, 25, 60, 130))
    e = min(max(127 + rng.randint(-spread, spread), 0), 255)
    return s | (e << 23) | rng.getrandbits(23)


def test_fp16_conversions_every_pattern():
    """fp16 -> fp32 (MRDMA's input, the operands) and fp16 -> int16 (OUT_PRECISION INT16) on
    every fp16 pattern, against verif/model/fp.py."""
    xs = list(range(1 << 16))
    to32, toi16 = evaluate([lambda m, x: L.fp16_to_fp32(m, x),
                            lambda m, x: L.fp16_to_int16(m, x)], [(x,) for x in xs], [16])
    vec = [(x,) for x in xs]
    _check("fp16_to_fp32", vec, to32, F.fp16_to_fp32(np.array(xs)))
    _check("fp16_to_int16", vec, [v & 0xFFFF for v in toi16],
           F.fp16_to_int16(np.array(xs)) & 0xFFFF)


def test_fp32_to_fp16_every_exponent():
    """fp32 -> fp16 (the output): every exponent with random and rounding-edge mantissas
    (ties, fp16 denormals, the overflow to 65504, infinity, NaN payloads)."""
    rng = random.Random(1)
    xs = [(s << 31) | (e << 23) | rng.getrandbits(rng.choice((1, 12, 13, 14, 23)))
          for e in range(256) for s in (0, 1) for _ in range(6)]
    xs += [(s << 31) | (e << 23) | (k << 12) | rng.choice((0, 0, 1, 0xFFF))
           for e in range(100, 146) for s in (0, 1) for k in range(0, 1 << 11, 211)]
    xs += [fp32_edge(rng) for _ in range(1000)]
    got, = evaluate([lambda m, x: L.fp32_to_fp16(m, x)], [(x,) for x in xs], [32])
    _check("fp32_to_fp16", [(x,) for x in xs], got, F.fp32_to_fp16(np.array(xs)))


def test_fp32_add_mul_pick_match_model():
    """fp32 add, multiply, MAX and MIN (X1 / X2 / Y) on extreme operands: the library's
    rounding, saturation, flush to zero, NaN passing and denormal reading are the model's."""
    rng = random.Random(2)
    vec = []
    for _ in range(2000):
        a, b = fp32_edge(rng), fp32_edge(rng)
        r = rng.random()
        if r < 0.05:
            b = a ^ (1 << 31)                                      # exact cancellation
        elif r < 0.1:
            b = ((a ^ (1 << 31)) + rng.randint(-3, 3)) & 0xFFFFFFFF
        vec.append((a, b))
    A, B = np.array([v[0] for v in vec]), np.array([v[1] for v in vec])
    got = evaluate([lambda m, a, b: L.fp_add(m, a, b, 8, 23),
                    lambda m, a, b: L.fp_mul(m, a, b, 8, 23),
                    lambda m, a, b: L.fp_pick(m, a, b, 8, 23, 1),
                    lambda m, a, b: L.fp_pick(m, a, b, 8, 23, 0)], vec, [32, 32])
    for name, g, w in zip(("add", "mul", "max", "min"), got,
                          (F.fp_add(A, B, 8, 23), F.fp_mul(A, B, 8, 23),
                           F.fp_pick(A, B, 8, 23, True), F.fp_pick(A, B, 8, 23, False))):
        _check(name, vec, g, w)


def test_fp_lut_operators_match_model():
    """The FP16 LUT's operators: fp17 add and multiply (NaN operands included), fp32 -> fp17,
    fp17 -> fp32, fp16 -> fp17 and the 35-bit fraction to fp17, against the model's."""
    rng = random.Random(3)

    def fp17(r=None):
        r = rng.random() if r is None else r
        s = rng.getrandbits(1) << 16
        if r < 0.05:
            return s | rng.choice((0, 0xFBFF, 63 << 10))
        if r < 0.1:
            return s | (63 << 10) | rng.randint(1, 1023)
        return s | (min(max(31 + rng.randint(-20, 20), 1), 62) << 10) | rng.getrandbits(10)
    vec = [(fp17(), fp17(), fp32_edge(rng), rng.getrandbits(rng.randint(1, 35)),
            rng.getrandbits(16)) for _ in range(1500)]
    vec += [(0, 0, 0, 0, 0), (0, 0, 0, (1 << 35) - 1, 0)]
    cols = [np.array([v[k] for v in vec]) for k in range(5)]
    got = evaluate([lambda m, a, b, x, f, h: L.fp_add(m, a, b, 6, 10),
                    lambda m, a, b, x, f, h: L.fp_mul(m, a, b, 6, 10),
                    lambda m, a, b, x, f, h: L.fp_shorten(m, x, 8, 23, 6, 10),
                    lambda m, a, b, x, f, h: L.fp_extend(m, a, 6, 10, 8, 23),
                    lambda m, a, b, x, f, h: L.fp_of_fraction(m, f, 6, 10),
                    lambda m, a, b, x, f, h: L.fp_widen(m, h, 5, 6, 10),
                    lambda m, a, b, x, f, h: _fraction_in_phases(m, f)],
                   vec, [17, 17, 32, 35, 16])
    want = (F.fp17_add(cols[0], cols[1]), F.fp17_mul(cols[0], cols[1]),
            F.fp32_to_fp17(cols[2]), F.fp17_to_fp32(cols[0]), F.frac_to_fp17(cols[3], 35),
            F.fp16_to_fp17(cols[4]), F.frac_to_fp17(cols[3], 35))
    for name, g, w in zip(("fp17_add", "fp17_mul", "fp32_to_fp17", "fp17_to_fp32",
                           "frac_to_fp17", "fp16_to_fp17", "frac_to_fp17 in phases"), got, want):
        _check(name, vec, g, w)


def _fraction_in_phases(m, f):
    """The 35-bit fraction to fp17 as the FP16 LUT computes it (:func:`hdl.lib.fp.
    fp_leading_zeros`, the shift, :func:`hdl.lib.fp.fp_of_fraction_round`; registered between
    them there)."""
    z = L.fp_leading_zeros(m, f)
    return L.fp_of_fraction_round(m, (f << z)[:35], z, 6, 10)


@pytest.mark.parametrize("exp,entries,select,offset", [
    (False, 257, 0, 0), (False, 65, -5, 0), (False, 257, 20, 0), (False, 257, -60, 0),
    (False, 257, 127, 0), (True, 65, 0, -10), (True, 65, 0, 5), (True, 65, 0, -128)])
def test_fp_table_index_matches_model(exp, entries, select, offset):
    """SDP's FP16 table index (35-bit fraction) against verif/model/lut.py's on ``d = x -
    START`` patterns of every sign, zeros, NaN, infinity and exponents around the index."""
    rng = random.Random(f"{exp}{entries}{select}{offset}")

    def one():
        s = int(rng.random() < 0.15) << 31
        if rng.random() < 0.05:
            return s | rng.choice((0, 0x7F800000, 0x7F800001))
        return s | (rng.randint(90, 170) << 23) | rng.getrandbits(23)
    ds = [one() for _ in range(800)]
    m = Module()
    d = Signal(32)
    res = fp_table_index(m, d, entries, Const(select, signed(8)),
                         exponential=Const(int(exp), 1) if entries == 65 else None,
                         index_offset=Const(offset, signed(8)))
    outs = {k: Signal(36, name=k) for k in res}
    m.d.comb += [outs[k].eq(v) for k, v in res.items()]
    got = []

    async def tb(ctx):
        for x in ds:
            ctx.set(d, x)
            got.append(tuple(ctx.get(outs[k]) for k in ("addr", "frac", "uf", "of")))
    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()
    idx, frac, uf, of = ref_table_index(np.array(ds), entries, exp, offset, select, 35)
    want = list(zip(np.where(of, entries - 1, idx), frac, uf, of))
    bad = [i for i in range(len(ds)) if got[i] != tuple(int(v) for v in want[i])]
    assert not bad, [(hex(ds[i]), got[i], want[i]) for i in bad[:3]]


# ---- the core at full rate -------------------------------------------------------------------

def _x_cfg(**kw):
    c = {"bypass": 0, "alu_bypass": 0, "alu_algo": 2, "alu_shift": 0, "mul_bypass": 0,
         "mul_prelu": 0, "mul_shift": 0, "relu_bypass": 1}
    return c | kw


@pytest.mark.parametrize("spec", [GEOM_B, GEOM_B + "+sdp_bs_throughput=4+sdp_bn_throughput=4"])
def test_core_fp16_full_rate(spec):
    """SdpCore with an FP16 layer from memory (fp16 in the low bits of lanes 0..e-1): X1 SUM
    with per-element memory operands then MUL by a register operand, X2 MAX with a register
    operand and ReLU, NAN_TO_ZERO; no stall anywhere: an atom leaves every ``max(1, e /
    lanes)`` cycles (``e`` = atom_bytes / 2 elements, one element per cycle per lane), each
    fp16 output as the model computes it."""
    cfg = get_config(spec)
    dut = SdpCore(cfg)
    lanes, atom, e = core_lanes(cfg), cfg.memory_atomic, cfg.atom_bytes // 2
    rng = random.Random(5)
    n = 24
    xs = [fp16_values(rng, e, 0) for _ in range(n)]
    ops = [fp16_values(rng, e, 0) for _ in range(n)]
    mul, mx = 0x3E00, 0xB800                     # 1.5, -0.5
    bs, bn = _x_cfg(), _x_cfg(alu_algo=0, mul_bypass=1, relu_bypass=0)

    def sext(v):
        return v - (1 << 16) if v >> 15 else v

    atoms = [[sext(x[k]) if k < e else rng.randrange(-(1 << 31), 1 << 31)
              for k in range(atom)] for x in xs]
    groups = [[{"alu": sext(o[k]) if k < e else 0, "mul": 0} for k in range(atom)] for o in ops]
    stamps, got = [], []

    async def config(ctx):
        for sub, c in (("bs", bs), ("bn", bn)):
            for k, v in c.items():
                ctx.set(getattr(getattr(dut, f"{sub}_cfg"), k), v)
        ctx.set(dut.bs_sel.alu_mem, 1)
        ctx.set(dut.bs_sel.mul, sext(mul))
        ctx.set(dut.bn_sel.alu, sext(mx))
        ctx.set(dut.ew_cfg.bypass, 1)
        ctx.set(dut.int16, 0)
        for k, v in {"fp16": 1, "in_fp32": 0, "nan_to_zero": 1, "out_int16": 0}.items():
            ctx.set(getattr(dut.fp_cfg, k), v)
        await ctx.tick().repeat(3)
        await stream_put(ctx, dut.i, atoms, rng=rng, p_stall=0)

    async def operands(ctx):
        await ctx.tick().repeat(3)
        await stream_put(ctx, dut.bs_op, groups, rng=rng, p_stall=0)

    async def consumer(ctx):
        got.extend(await stream_get(ctx, dut.o, n, rng=rng, p_stall=0, timestamps=stamps,
                                    timeout=2000))

    errors = []
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for tb in (config, operands, consumer):
        sim.add_testbench(tb)
    for name in ("i", "o", "bs_op"):
        sim.add_process(check_stream_stable(getattr(dut, name), errors=errors, name=name))
    sim.run()
    assert errors == []
    x = F.fp16_to_fp32(np.array(xs, np.int64))
    x = np.where(F.fp_isnan(x, 8, 23), 0, x)
    x = x_subunit_fp(x, alu_bypass=False, alu_algo=2, alu_op=np.array(ops), mul_bypass=False,
                     mul_prelu=False, mul_op=mul, relu_bypass=True, nan_to_zero=True)
    x = x_subunit_fp(x, alu_bypass=False, alu_algo=0, alu_op=mx, mul_bypass=True,
                     mul_prelu=False, mul_op=0, relu_bypass=False, nan_to_zero=True)
    want = F.fp32_to_fp16(x)
    out = [[(int(a[2 * k]) & 0xFF) | (int(a[2 * k + 1]) & 0xFF) << 8 for k in range(e)]
           for a in got]
    assert out == want.tolist()
    period = max(1, e // lanes)
    assert [b - a for a, b in zip(stamps, stamps[1:])] == [period] * (n - 1)


# ---- the unit: programs ------------------------------------------------------------------------

PREC = {"int8": 0, "int16": 1, "fp16": 2}


def program_case(prog):
    """A case of :func:`bench._batch` (``make(group, key) -> (steps, layers, None)``) playing
    ``prog``: the bench's steps (tests/hdl/test_sdp_int16.py ``_simulate``) with its groups
    swapped when ``group`` is 1, D_PERF_ENABLE.PERF_LUT_EN set in every layer: loads (outputs
    zeroed), writes, wait, snapshot of its outputs (``key``), both groups' D_STATUS and
    D_PERF_LUT_*; compared with the shared model playing the same steps."""
    def make(group, key):
        steps = _steps(prog, group, key)[0]
        return steps, len(prog.layers), None
    return make


def _steps(prog, group: int, key):
    """The steps of :func:`program_case`; returns ``(steps, PROC_PRECISION per layer)``."""
    steps, precs = [], []
    for line in prog.writer.lines:
        if not isinstance(line, str):
            continue
        if mw := WRITE.fullmatch(line.split("    //")[0]):
            unit, reg, value = mw[1], mw[2], int(mw[3], 16)
            if reg == "D_PERF_ENABLE":
                value |= bench.PERF_LUT_EN
            if reg == "D_DATA_FORMAT":
                precs.append(value & 3)
            if reg == "S_POINTER":
                value ^= group
            steps.append(("w", unit, reg, value))
        elif ml := LOAD.fullmatch(line):
            steps.append(("load", int(ml[1], 16), bytes(prog.writer.images[ml[2]])))
        elif mi := bench._INIT.fullmatch(line):
            steps.append(("load", int(mi[1], 16), bytes(int(mi[2], 16))))
        else:
            assert line.startswith(("//", "intr_notify(")), line
    outs = [o for lay in prog.layers for o in lay.out]
    return steps + [("wait",), ("snap", key, outs)] + bench._stat_reads(), precs


def fp16_program(cfg, seed: int, want, layers: int = 1, patch=None):
    """An FP16 program drawn from verif.gen.sdp's pieces: with the SDP LUT, an FP16 LUT
    (``lut_prologue`` in FP16), then ``layers`` FP16 layers (``sdp_layer(prec=2)``), the first
    draw whose layers satisfy ``want(layers)``; ``patch(rng, layers)`` may then change their
    writes."""
    for attempt in range(2000):
        rng = random.Random(f"sdp-fp16-{seed}-{attempt}")
        prog = Program("sdp", seed, TraceWriter(f"sdp_fp16_{seed}"))
        alloc = Alloc(rng)
        scale = rng.choice(FP16_SCALES)
        prologue = lut_prologue(rng, 2, scale)[0] if cfg.sdp_lut else []
        prog.layers = [sdp_layer(rng, cfg, alloc, prog.writer, lut=cfg.sdp_lut, prec=2,
                                 scale=scale) for _ in range(layers)]
        if want(prog.layers):
            if patch:
                patch(rng, prog.layers)
            emit(prog, prologue)
            return prog
    raise AssertionError("no draw")


FLY_DST = 0x5000_0000


def fp32_data(rng, scale: int) -> int:
    """An on-the-fly fp32 pattern: mostly of magnitude ``2**scale``, else extremes (NaN,
    infinity, zeros, fp32 denormals, beyond fp16's range, below its denormals)."""
    r = rng.random()
    if r < 0.25:
        return fp32_edge(rng)
    s = rng.getrandbits(1) << 31
    if r < 0.3:
        return s | (rng.choice((142, 143, 110, 103, 101)) << 23) | rng.getrandbits(23)
    return s | (min(max(127 + scale + rng.randint(-3, 3), 1), 254) << 23) | rng.getrandbits(23)


def fly_layer(cfg, rng, group: int, key: str, *, nan_to_zero: int, out_int16: int,
              ew: bool = False, lut: list = ()):
    """An FP16 layer on the fly from CACC (FLYING_MODE = ON): fp32 patterns in lanes 0 ..
    e - 1 of each atom (the lanes above random, ignored); BS ALU SUM and MUL with register
    operands (fp16), BN MAX with a NaN register operand (+0 with NAN_TO_ZERO) and ReLU; with
    ``ew``, EW MUL by an fp32 register operand then ALU MIN with an infinity, and the LUT
    (registers ``lut``, written here too). Returns ``(steps, 1, expect)`` for
    :func:`bench._batch`: ``expect()`` plays the registers on a fresh model and runs its
    ``SdpCore.run`` on the same cube."""
    e = cfg.atom_bytes // 2
    w, h, c = 3, 2, e + e // 2 + 1
    surfaces = -(-c // e)
    cp = surfaces * e
    cube = np.array([[[fp32_data(rng, 2) for _ in range(w)] for _ in range(h)]
                     for _ in range(cp)], np.int64)

    def signed32(v):
        return v - (1 << 32) if v >> 31 else v
    atoms = [[signed32(int(cube[s * e + k, y, x])) if k < e else rng.randrange(-(1 << 31), 1 << 31)
              for k in range(cfg.memory_atomic)]
             for s in range(surfaces) for y in range(h) for x in range(w)]
    line, surf = bench._strides(cfg, w, h)
    wr = [regs("SDP", "D_FEATURE_MODE_CFG", FLYING_MODE=1, NAN_TO_ZERO=nan_to_zero),
          regs("SDP", "D_DATA_FORMAT", PROC_PRECISION=2, OUT_PRECISION=1 if out_int16 else 2),
          ("SDP", "D_DATA_CUBE_WIDTH", w - 1), ("SDP", "D_DATA_CUBE_HEIGHT", h - 1),
          ("SDP", "D_DATA_CUBE_CHANNEL", c - 1), ("SDP", "D_DST_BASE_ADDR_LOW", FLY_DST),
          ("SDP", "D_DST_LINE_STRIDE", line), ("SDP", "D_DST_SURFACE_STRIDE", surf),
          ("SDP", "D_DST_DMA_CFG", 1), ("SDP", "D_CVT_OFFSET", 77), ("SDP", "D_CVT_SCALE", 3),
          ("SDP", "D_CVT_SHIFT", 5),
          regs("SDP", "D_DP_BS_CFG", BS_BYPASS=0, BS_ALU_BYPASS=0, BS_ALU_ALGO=2,
               BS_MUL_BYPASS=0, BS_MUL_PRELU=0, BS_RELU_BYPASS=1),
          regs("SDP", "D_DP_BS_ALU_CFG", BS_ALU_SRC=0, BS_ALU_SHIFT_VALUE=9),
          ("SDP", "D_DP_BS_ALU_SRC_VALUE", 0xC100),                      # -2.5
          regs("SDP", "D_DP_BS_MUL_CFG", BS_MUL_SRC=0, BS_MUL_SHIFT_VALUE=3),
          ("SDP", "D_DP_BS_MUL_SRC_VALUE", 0x5A00),                      # 192
          regs("SDP", "D_DP_BN_CFG", BN_BYPASS=0, BN_ALU_BYPASS=0, BN_ALU_ALGO=0,
               BN_MUL_BYPASS=1, BN_MUL_PRELU=0, BN_RELU_BYPASS=0),
          regs("SDP", "D_DP_BN_ALU_CFG", BN_ALU_SRC=0, BN_ALU_SHIFT_VALUE=0),
          ("SDP", "D_DP_BN_ALU_SRC_VALUE", 0xFE01),                      # a NaN
          ("SDP", "D_PERF_ENABLE", bench.PERF_LUT_EN)]
    if ew:
        wr += [regs("SDP", "D_DP_EW_CFG", EW_BYPASS=0, EW_ALU_BYPASS=0, EW_ALU_ALGO=1,
                    EW_MUL_BYPASS=0, EW_MUL_PRELU=1, EW_LUT_BYPASS=0 if lut else 1),
               regs("SDP", "D_DP_EW_MUL_CFG", EW_MUL_SRC=0, EW_MUL_CVT_BYPASS=0),
               ("SDP", "D_DP_EW_MUL_SRC_VALUE", 0x3D000001),             # ~1/32
               regs("SDP", "D_DP_EW_ALU_CFG", EW_ALU_SRC=0, EW_ALU_CVT_BYPASS=1),
               ("SDP", "D_DP_EW_ALU_SRC_VALUE", 0x7F800000),             # +infinity
               ("SDP", "D_DP_EW_TRUNCATE_VALUE", 9)]
    elif cfg.sdp_ew:
        wr.append(regs("SDP", "D_DP_EW_CFG", EW_BYPASS=1))
    pre = list(lut)
    steps = [("w", *r) for r in pre] + [("w", "SDP", "S_POINTER", group)]
    steps += [("w", *r) for r in wr] + [("w", "SDP", "D_OP_ENABLE", 1)]
    steps += [("fly", atoms), ("wait",), ("snap", key, [(FLY_DST, surf * surfaces)]),
              ("w", "SDP", "S_POINTER", group)] + [("r", "SDP", r) for r in bench.STATS]

    def expect():
        dla = Nvdla(cfg)
        for r in pre:
            dla.write(f"NVDLA_{r[0]}.{r[1]}_0", r[2])
        dla.write("NVDLA_SDP.S_POINTER_0", group)
        for r in wr:
            dla.write(f"NVDLA_{r[0]}.{r[1]}_0", r[2])
        dla.sdp.run(None, dla.units["SDP"].view(group), cube)
        return ([dla.read(f"NVDLA_SDP.{r}_0") for r in bench.STATS],
                [dla.mem.read_bytes(FLY_DST, surf * surfaces)])
    return steps, 1, expect


# ---- the unit on geometries B and A --------------------------------------------------------

# (seed, PROC_PRECISION per layer) of verif.gen.sdp programs on geometry B (asserted):
#  24: 3x1x7 to INT16, BS / BN bypassed; 12: 1x1x2 BS MAX, BN MUL per element, then INT16;
#  29: 7x3x14 BS MAX + MUL + ReLU; 31: 1x26x7 BN MUL + ReLU, then 1x4x2 BS MUL per element
B_CASES = [(24, [2]), (12, [2, 1]), (29, [2]), (31, [2, 2])]


def test_geometry_b():
    """Geometry B (one lane, no EW): generated FP16 programs beside INT16 ones, FP16 layers on
    the fly (NaN -> +0 or kept, FP16 or INT16 output)."""
    cfg = get_config(GEOM_B)
    rng = random.Random(11)
    got, want = bench._batch(cfg, B_CASES, extra=[
        lambda g, k: fly_layer(cfg, rng, g, k, nan_to_zero=1, out_int16=1),
        lambda g, k: fly_layer(cfg, rng, g, k, nan_to_zero=0, out_int16=0)])
    for key in [s for s, _ in B_CASES] + ["0", "1"]:
        bench._check(got, want, key)


def _small(layers, limit: int = 700) -> bool:
    """Every layer's W x H x C (from its description) at most ``limit`` elements."""
    for lay in layers:
        w, h, c = (int(v) for v in lay.desc.split("; ")[-1].split()[1].split("x"))
        if w * h * c > limit:
            return False
    return True


def _has(*parts):
    """``want`` of :func:`fp16_program`: small layers, layer k's description holding every
    string of ``parts[k]``."""
    return lambda layers: _small(layers) and all(all(p in lay.desc for p in ps)
                                                 for lay, ps in zip(layers, parts))


def test_geometry_a():
    """Geometry A (nv_full, 16 lanes, EW and its LUT), one simulation: an FP16 program whose
    LUT is loaded in FP16 (EW operands from memory, LUT on; then a layer in compare mode), an
    FP16 layer on the fly through BS / BN / EW and the LUT (the generated programs of
    ``test_generated_sweep`` mix FP16 layers with INT8 / INT16 ones on A)."""
    cfg = get_config(GEOM_A)
    rng = random.Random(12)
    lut = fp16_program(cfg, 0, _has(("EW:", "lut=1", "ERDMA:"), ("alu=eql",)), layers=2)
    lut_regs = [w for w in _steps(lut, 0, "x")[0] if w[0] == "w" and w[2].startswith("S_LUT")]
    got, want = bench._batch(cfg, [], extra=[
        program_case(lut),
        lambda g, k: fly_layer(cfg, rng, g, k, nan_to_zero=1, out_int16=0, ew=True,
                               lut=[w[1:] for w in lut_regs])])
    for key in ("0", "1"):
        bench._check(got, want, key)
    # the LUT interpolated (samples hit its tables: D_PERF_LUT_LE_HIT / LO_HIT, both groups)
    reads = got["0"][0] + got["1"][0]
    assert sum(reads[4:6] + reads[10:12]) > 0 and sum(reads[16:18]) > 0, reads


# more generated programs drawing FP16 layers (at most two layers each), INT8 / INT16 layers
# between them
# (38: INT8 1x5x28, then FP16 1x15x5 with BN MIN per kernel from memory, EW PReLU per element
# from memory, ALU SUM and the LUT loaded with INT16 entries)
SWEEP_A = [(38, [0, 2]), (8, [2, 2]), (27, [1, 2]), (36, [0, 2]), (46, [0, 2]), (58, [1, 2]),
           (85, [0, 2]), (101, [2, 2]), (103, [1, 2])]
SWEEP_B = [(14, [2]), (15, [0, 2]), (16, [2]), (20, [1, 2]), (27, [2, 2]), (32, [2]),
           (33, [2, 0])]


@pytest.mark.slow
@pytest.mark.parametrize("spec,cases", [(GEOM_A, SWEEP_A), (GEOM_B, SWEEP_B)],
                         ids=["A", "B"])
def test_generated_sweep(spec, cases):
    cfg = get_config(spec)
    got, want = bench._batch(cfg, cases)
    for seed, _ in cases:
        bench._check(got, want, seed)
