"""SDP unit with INT16 layers (hdl/sdp on a configuration whose precisions include int16, nv_full's
``int8_int16_fp16``): the unit alone in Amaranth's simulator against a random-timing fake MCIF
(as tests/hdl/test_pdp_perf.py ``run_unit``, here with waits between programs so that several
programs share one simulation: elaborating nv_full's SDP costs ~20 s of CPU), compared with the
numpy model (verif.model.Nvdla; verif/model/sdp.py computes INT16 end to end: int16 inputs
sign-extended, INT8's arithmetic, 16 channels per 32-byte atom, two-byte operands, the output
saturated to int16).

* generated programs (verif.gen.sdp.generate; each seed's drawn precisions asserted): INT16
  layers with BS / BN operands from memory (per element, per kernel, DATA_USE ALU / MUL / BOTH)
  and from the registers, EW with its LUT (every program loads the LUT) and compare mode, mixed
  with INT8 layers in the other register group; D_PERF_ENABLE.PERF_LUT_EN is set in every
  layer (the generator leaves it 0) so that D_PERF_LUT_* count; compared: every output byte
  after each program, D_STATUS and D_PERF_LUT_* of both groups;
* a hand-written INT16 layer through the converter alone: output bytes against the model,
  D_PERF_OUT_SATURATION (not in the model) against a plain-Python count of the elements whose
  17-bit intermediate saturated, every lane of the whole atoms (the model's docstrings:
  verif/model/sdp.py ``output_convert``; NV_NVDLA_SDP_HLS_C_int.v);
* a second geometry (4 elements per cycle: 8 groups per INT8 atom, 4 per INT16 atom):
  generated programs, and input on the fly from CACC (FLYING_MODE = ON): an INT16 layer (int32
  atoms of 16 channels in lanes 0..15, the lanes above ignored; a BN operand from memory, so
  SDP_RDMA runs too) and an INT8 one, against the model's ``SdpCore.run`` on the same cube;
* a geometry whose datapath is wider than an INT16 atom (8-byte atoms, 8 lanes: an INT16 atom
  has 4 elements, lanes 4..7 carry no channel and are left out of the counters): generated
  programs, the converter layer, an INT16 layer on the fly;
* (slow) more generated programs on nv_full (SWEEP).

The whole design still refuses these configurations (hdl/support.py: int16/fp16 data is not
built in every unit); FP16 layers are not built in SDP."""
from __future__ import annotations

import random
import re
from collections import deque

import numpy as np
import pytest
from amaranth.sim import Simulator

from hdl.config import get_config
from hdl.regmap import REGMAP
from hdl.sdp import Sdp
from streams import mcif_read_client, mcif_write_client, stream_put
from unit_programs import LOAD, WRITE
from verif.gen.sdp import generate
from verif.mem import SparseMemory
from verif.model import Nvdla

SPEC = "nv_full+feature_data_type=int8_int16_fp16"
SPEC_T4 = SPEC + "+sdp_bs_throughput=4+sdp_bn_throughput=4+sdp_ew_throughput=2"
SPEC_A8 = SPEC + "+memory_atomic=8+sdp_bs_throughput=8+sdp_bn_throughput=8+sdp_ew_throughput=4"
STATS = ("D_STATUS", "D_PERF_LUT_UFLOW", "D_PERF_LUT_OFLOW", "D_PERF_LUT_HYBRID",
         "D_PERF_LUT_LE_HIT", "D_PERF_LUT_LO_HIT")
PERF_LUT_EN = 2
_INIT = re.compile(r"mem_init\(pri_mem, (0x[0-9a-fA-F]+), (0x[0-9a-fA-F]+), ALL_ZERO\);")


def _reg(unit: str, reg: str):
    return next(r for r in REGMAP.unit(unit).registers if r.name == reg)


# ---- the bench: CSB steps, fake MCIF, CACC's on-the-fly stream ----------------------------

def _simulate(unit, steps, *, mem: SparseMemory, seed: int, p_ready: float = 0.5,
              max_wait: int = 60_000):
    """Play ``steps`` on ``unit`` (an :class:`hdl.sdp.Sdp`), one CSB access per cycle:
    ``("w", rf, reg, value)`` a register write; ``("r", rf, reg)`` a read (its value recorded);
    ``("wait", n)`` until ``n`` layers in all are done (``done_grp``), at most ``max_wait``
    cycles; ``("load", base, bytes)`` into ``mem``; ``("snap", key, regions)`` records the
    bytes of ``regions`` ((base, size) pairs); ``("fly", atoms)`` queues int32 atoms (lists of
    cfg.memory_atomic values) on ``cacc_flying``, driven with random gaps. Read clients answer
    from ``mem`` and write clients store into it, every ready / valid of the fake MCIF random
    (``p_ready``), write responses 1..5 cycles after a burst's last beat. Returns
    ``(reads, snaps)``: the read values in order, ``{key: [bytes per region]}``."""
    rng = random.Random(seed)
    beat = unit.cfg.primary_memif_width // 8
    state = {"layers": 0}
    reads, snaps, fly = [], {}, deque()
    sim = Simulator(unit)
    sim.add_clock(1e-8)

    async def csb(ctx):
        def bus(rf):
            return getattr(unit, f"csb_{rf.lower()}")
        for step in steps:
            kind = step[0]
            if kind == "w":
                _, rf, reg, value = step
                b = bus(rf)
                ctx.set(b.addr, _reg(rf, reg).offset >> 2)
                ctx.set(b.wdata, value)
                ctx.set(b.we, 1)
                await ctx.tick()
                ctx.set(b.we, 0)
            elif kind == "r":
                b = bus(step[1])
                ctx.set(b.addr, _reg(step[1], step[2]).offset >> 2)
                reads.append(ctx.get(b.rdata))
            elif kind == "wait":
                for _ in range(max_wait):
                    if state["layers"] >= step[1]:
                        break
                    await ctx.tick()
                assert state["layers"] >= step[1], \
                    f"only {state['layers']} of {step[1]} layers done"
            elif kind == "load":
                mem.write(step[1], step[2])
            elif kind == "snap":
                snaps[step[1]] = [mem.read_bytes(b, n) for b, n in step[2]]
            elif kind == "fly":
                fly.extend(step[1])
            else:
                raise ValueError(step)

    async def monitor(ctx):
        async for _, _, done_grp in ctx.tick().sample(unit.done_grp):
            if done_grp:
                state["layers"] += 1

    async def cacc(ctx):
        port = unit.cacc_flying
        while True:
            if fly:
                await stream_put(ctx, port, [fly.popleft()], rng=rng, p_stall=0.3)
            else:
                await ctx.tick()

    sim.add_testbench(csb)
    sim.add_process(monitor)
    sim.add_testbench(cacc, background=True)
    for c in unit.READ_CLIENTS:
        sim.add_process(mcif_read_client(getattr(unit, c), mem, beat, rng, p_ready))
    for c in unit.WRITE_CLIENTS:
        sim.add_process(mcif_write_client(getattr(unit, c), mem, beat, rng, p_ready))
    sim.run()
    return reads, snaps


def _model_play(model: Nvdla, steps):
    """The model's side of ``steps`` (see :func:`_simulate`; no ``fly``, at most one ``snap``):
    returns ``(reads, regions)``: the read values and the snapshot's bytes per region."""
    reads, snaps = [], {}
    for step in steps:
        kind = step[0]
        if kind == "w":
            model.write(f"NVDLA_{step[1]}.{step[2]}_0", step[3])
        elif kind == "r":
            reads.append(model.read(f"NVDLA_{step[1]}.{step[2]}_0"))
        elif kind == "load":
            model.mem.write(step[1], step[2])
        elif kind == "snap":
            snaps[step[1]] = [model.mem.read_bytes(b, n) for b, n in step[2]]
        elif kind != "wait":
            raise ValueError(step)
    return reads, next(iter(snaps.values()), [])


def _stat_reads():
    return [s for g in range(2) for s in [("w", "SDP", "S_POINTER", g)]
            + [("r", "SDP", r) for r in STATS]]


# ---- generated programs --------------------------------------------------------------------

def _generated(seed: int, cfg, done: int):
    """Steps of generated program ``seed`` (verif.gen.sdp.generate, its own draw of 1..3 layers;
    at most 2 here: no waits inside), PERF_LUT_EN set in every D_PERF_ENABLE write, after
    ``done`` layers of earlier programs (its groups swapped when ``done`` is odd: the consumer
    pointers then point at group 1): loads (output regions zeroed), writes, wait for its
    layers, snapshot of its outputs (key ``seed``), the groups' STATS. Returns ``(steps,
    precisions, layers)``."""
    prog = generate(seed, cfg)
    assert len(prog.layers) <= 2, f"seed {seed}: {len(prog.layers)} layers"
    steps, precs = [], []
    for line in prog.writer.lines:
        if not isinstance(line, str):
            continue
        if mw := WRITE.fullmatch(line.split("    //")[0]):
            unit, reg, value = mw[1], mw[2], int(mw[3], 16)
            if reg == "D_PERF_ENABLE":
                value |= PERF_LUT_EN
            if reg == "D_DATA_FORMAT":
                precs.append(value & 3)             # PROC_PRECISION
            if reg == "S_POINTER":
                value ^= done & 1
            steps.append(("w", unit, reg, value))
        elif ml := LOAD.fullmatch(line):
            steps.append(("load", int(ml[1], 16), bytes(prog.writer.images[ml[2]])))
        elif mi := _INIT.fullmatch(line):
            steps.append(("load", int(mi[1], 16), bytes(int(mi[2], 16))))
        else:       # the layers' interrupt waits: done here by "wait"
            assert line.startswith(("//", "intr_notify(")), line
    n = done + len(prog.layers)
    outs = [o for lay in prog.layers for o in lay.out]
    return steps + [("wait", n), ("snap", seed, outs)] + _stat_reads(), precs, len(prog.layers)


def _batch(cfg, cases, extra=()):
    """Generated programs ``cases`` ((seed, drawn PROC_PRECISION per layer)) in one simulation,
    then the hand-written ``extra`` cases: callables ``make(group, key)`` giving ``(steps,
    layers, expect)`` for a case in register group ``group`` whose snapshot key is ``key``
    (``expect`` None plays the steps on the shared model too, else a callable giving the
    expected ``(reads, regions)``). Returns ``(got, want)``, each ``{key: (reads, regions)}``
    per case (key: the seed, or the extra case's index as a string)."""
    steps, done, spans = [], 0, []
    model = Nvdla(cfg)
    want = {}
    for seed, precs in cases:
        st, drawn, layers = _generated(seed, cfg, done)
        assert drawn == list(precs), f"seed {seed} drew PROC_PRECISION {drawn}, expected {precs}"
        want[seed] = _model_play(model, st)
        spans.append((seed, len(steps), len(st)))
        steps += st
        done += layers
    for k, make in enumerate(extra):
        st, layers, expect = make(done & 1, str(k))
        st = [("wait", done + layers) if s == ("wait",) else s for s in st]
        want[str(k)] = _model_play(model, st) if expect is None else expect()
        spans.append((str(k), len(steps), len(st)))
        steps += st
        done += layers
    reads, snaps = _simulate(Sdp(cfg), steps, mem=SparseMemory(cfg.mem_address_width),
                             seed=len(cases))
    got, pos = {}, 0
    for key, start, n in spans:
        nr = sum(s[0] == "r" for s in steps[start:start + n])
        got[key] = (reads[pos:pos + nr], snaps.get(key, []))
        pos += nr
    return got, want


def _check(got, want, key):
    (gr, gs), (wr, ws) = got[key], want[key]
    for k, (g, w) in enumerate(zip(gs, ws)):
        if g != w:
            bad = [i for i in range(len(w)) if g[i] != w[i]]
            raise AssertionError(f"case {key} output region {k}: {len(bad)} bytes differ, "
                                 f"first at {bad[0]}: {g[bad[0]]:#x} != {w[bad[0]]:#x}")
    assert len(gs) == len(ws)
    assert gr == wr, f"case {key}: registers {gr} != model {wr}"


# ---- hand-written INT16 layers ---------------------------------------------------------------

SAT_SRC, SAT_DST = 0x4000_0000, 0x4100_0000


def _rnd(v, s):
    """round half away from zero of v / 2**s (v1_ias_precision.rst "Convertor")"""
    if s == 0:
        return v
    q = (abs(v) + (1 << (s - 1))) >> s
    return q if v >= 0 else -q


def _strides(cfg, w: int, h: int):
    """(line, surface) strides of a packed w x h cube of whole atoms, each a multiple of 32
    bytes (NVDLA's stride registers hold bits [31:5], the low bits read 0)."""
    line = -(-w * cfg.atom_bytes // 32) * 32
    return line, h * line


def _cvt_layer(cfg, rng, group: int, key: str):
    """An INT16 layer through the output converter alone (BS / BN / EW bypassed) with
    PERF_SAT_EN, on a 3 x 2 x 20 cube (the last atom partial): its steps and the expected
    D_PERF_OUT_SATURATION (elements of the whole atoms whose (x - offset) * scale rounded by
    the shift leaves 17 bits): ``(steps, 1, None, count)``."""
    e16 = cfg.atom_bytes // 2
    w, h, c = 3, 2, 20
    surfaces = -(-c // e16)
    line, surf = _strides(cfg, w, h)
    vals = [rng.choice((-32768, 32767, 0, -1, 1)) if rng.random() < 0.2 else
            rng.randrange(-32768, 32768) for _ in range(surf * surfaces // 2)]
    src = b"".join(v.to_bytes(2, "little", signed=True) for v in vals)
    # the elements read: whole atoms (padding lanes included) at their addresses
    read = [vals[(s * surf + y * line + x * cfg.atom_bytes) // 2 + k] for s in range(surfaces)
            for y in range(h) for x in range(w) for k in range(e16)]
    off, scale, shift = -77, 0x1234, 10
    sat = sum(not -(1 << 16) <= _rnd((v - off) * scale, shift) < (1 << 16) for v in read)
    assert 0 < sat < len(read)
    regs = [("SDP_RDMA", "D_FEATURE_MODE_CFG", 1 << 2 | 1 << 4 | 1 << 6),    # INT16 in/proc/out
            ("SDP", "D_FEATURE_MODE_CFG", 0), ("SDP", "D_DATA_FORMAT", 1 | 1 << 2),
            ("SDP", "D_DP_BS_CFG", 1), ("SDP", "D_DP_BN_CFG", 1), ("SDP", "D_DP_EW_CFG", 1),
            ("SDP_RDMA", "D_BRDMA_CFG", 1), ("SDP_RDMA", "D_NRDMA_CFG", 1),
            ("SDP_RDMA", "D_ERDMA_CFG", 1)]
    for unit in ("SDP_RDMA", "SDP"):
        regs += [(unit, "D_DATA_CUBE_WIDTH", w - 1), (unit, "D_DATA_CUBE_HEIGHT", h - 1),
                 (unit, "D_DATA_CUBE_CHANNEL", c - 1)]
    regs += [("SDP_RDMA", "D_SRC_BASE_ADDR_LOW", SAT_SRC), ("SDP_RDMA", "D_SRC_LINE_STRIDE", line),
             ("SDP_RDMA", "D_SRC_SURFACE_STRIDE", surf), ("SDP_RDMA", "D_SRC_DMA_CFG", 1),
             ("SDP", "D_DST_BASE_ADDR_LOW", SAT_DST), ("SDP", "D_DST_LINE_STRIDE", line),
             ("SDP", "D_DST_SURFACE_STRIDE", surf), ("SDP", "D_DST_DMA_CFG", 1),
             ("SDP", "D_CVT_OFFSET", off & 0xFFFFFFFF), ("SDP", "D_CVT_SCALE", scale),
             ("SDP", "D_CVT_SHIFT", shift), ("SDP", "D_PERF_ENABLE", 4 | PERF_LUT_EN)]
    steps = [("load", SAT_SRC, src)]
    for unit in ("SDP_RDMA", "SDP"):
        steps.append(("w", unit, "S_POINTER", group))
    steps += [("w", *r) for r in regs]
    steps += [("w", "SDP_RDMA", "D_OP_ENABLE", 1), ("w", "SDP", "D_OP_ENABLE", 1), ("wait",),
              ("snap", key, [(SAT_DST, surf * surfaces)])] + _stat_reads()
    steps += [("w", "SDP", "S_POINTER", group), ("r", "SDP", "D_PERF_OUT_SATURATION")]
    return steps, 1, None, sat


FLY_DST = 0x5000_0000
FLY_BN = 0x5100_0000


def _fly_layer(cfg, rng, prec: int, group: int, key: str):
    """A layer on the fly from CACC (FLYING_MODE = ON) in group ``group``: INT16 (``prec`` 1:
    BN's MUL operand per element from memory, its ALU a register operand, so that SDP_RDMA runs
    for NRDMA) or INT8 (``prec`` 0: BS and BN on register operands); converter to int16 / int8.
    Returns ``(steps, 1, expect)`` (one layer): ``expect()`` the model's ``SdpCore.run`` on the
    same cube (verif/model/nvdla.py runs it so with CACC's output), as ``(reads, regions)``."""
    e = cfg.atom_bytes // 2 if prec else cfg.memory_atomic
    w, h, c = 3, 2, e + e // 2 + 1                    # the last surface partial
    surfaces = -(-c // e)
    cp = surfaces * e
    lim = (-(1 << 31), (1 << 31) - 1)
    cube = np.array([[[rng.choice(lim + (0, -1, 1 << 20)) if rng.random() < 0.2 else
                       rng.randrange(-(1 << 24), 1 << 24) for _ in range(w)] for _ in range(h)]
                     for _ in range(cp)], np.int64)
    atoms = [[int(cube[s * e + k, y, x]) if k < e else rng.randrange(-(1 << 31), 1 << 31)
              for k in range(cfg.memory_atomic)]
             for s in range(surfaces) for y in range(h) for x in range(w)]
    line, surf = _strides(cfg, w, h)
    # every X field the layer's sub-units read (the group may hold an earlier layer's values:
    # the truncation shift applies with the multiplier bypassed too)
    regs = [("SDP", f"D_DP_{sub}_{r}", 0) for sub in ("BS", "BN")
            for r in ("ALU_CFG", "ALU_SRC_VALUE", "MUL_CFG", "MUL_SRC_VALUE")]
    regs += [("SDP", "D_FEATURE_MODE_CFG", 1), ("SDP", "D_DATA_FORMAT", prec | prec << 2),
            ("SDP", "D_DATA_CUBE_WIDTH", w - 1), ("SDP", "D_DATA_CUBE_HEIGHT", h - 1),
            ("SDP", "D_DATA_CUBE_CHANNEL", c - 1), ("SDP", "D_DST_BASE_ADDR_LOW", FLY_DST),
            ("SDP", "D_DST_LINE_STRIDE", line), ("SDP", "D_DST_SURFACE_STRIDE", surf),
            ("SDP", "D_DST_DMA_CFG", 1), ("SDP", "D_DP_EW_CFG", 1),
            ("SDP", "D_CVT_OFFSET", -1000 & 0xFFFFFFFF), ("SDP", "D_CVT_SCALE", 3),
            ("SDP", "D_CVT_SHIFT", 10 if prec else 18),
            # BS: bias (ALU SUM, register operand shifted by 4), no multiplier, ReLU off
            ("SDP", "D_DP_BS_CFG", 2 << 2 | 1 << 4 | 1 << 6), ("SDP", "D_DP_BS_ALU_CFG", 4 << 8),
            ("SDP", "D_DP_BS_ALU_SRC_VALUE", -1234 & 0xFFFF)]
    mem_steps = []
    rdma = prec == 1
    if rdma:
        # BN: MUL from memory per element (two-byte), ALU MAX with a register operand, ReLU
        oline, osurf = line, surf
        ops = bytes(rng.randrange(256) for _ in range(osurf * surfaces))
        mem_steps = [("load", FLY_BN, ops)]
        regs += [("SDP", "D_DP_BN_CFG", 0), ("SDP", "D_DP_BN_ALU_CFG", 0),
                 ("SDP", "D_DP_BN_ALU_SRC_VALUE", -300 & 0xFFFF),
                 ("SDP", "D_DP_BN_MUL_CFG", 1 | 7 << 8),
                 ("SDP_RDMA", "D_FEATURE_MODE_CFG", 1 | 1 << 2 | 1 << 4 | 1 << 6),
                 ("SDP_RDMA", "D_BRDMA_CFG", 1), ("SDP_RDMA", "D_ERDMA_CFG", 1),
                 # MUL, two bytes, per element, MC
                 ("SDP_RDMA", "D_NRDMA_CFG", 0 << 1 | 1 << 3 | 1 << 4 | 1 << 5),
                 ("SDP_RDMA", "D_BN_BASE_ADDR_LOW", FLY_BN),
                 ("SDP_RDMA", "D_BN_LINE_STRIDE", oline),
                 ("SDP_RDMA", "D_BN_SURFACE_STRIDE", osurf)]
        for unit in ("SDP_RDMA",):
            regs += [(unit, "D_DATA_CUBE_WIDTH", w - 1), (unit, "D_DATA_CUBE_HEIGHT", h - 1),
                     (unit, "D_DATA_CUBE_CHANNEL", c - 1)]
    else:
        regs += [("SDP", "D_DP_BN_CFG", 0 << 2 | 1 << 1 | 0 << 6),      # MUL (register) + ReLU
                 ("SDP", "D_DP_BN_MUL_CFG", 5 << 8), ("SDP", "D_DP_BN_MUL_SRC_VALUE", 77)]
    units = ("SDP_RDMA", "SDP") if rdma else ("SDP",)
    steps = list(mem_steps) + [("w", u, "S_POINTER", group) for u in units]
    steps += [("w", *r) for r in regs] + [("w", u, "D_OP_ENABLE", 1) for u in units]
    steps += [("fly", atoms), ("wait",), ("snap", key, [(FLY_DST, surf * surfaces)]),
              ("w", "SDP", "S_POINTER", group), ("r", "SDP", "D_STATUS")]

    def expect():
        dla = Nvdla(cfg)
        for s in mem_steps:
            dla.mem.write(s[1], s[2])
        for r in regs:
            dla.write(f"NVDLA_{r[0]}.{r[1]}_0", r[2])
        # the whole atoms CACC delivers (padding lanes included, as the RTL takes them)
        dla.sdp.run(dla.units["SDP_RDMA"].view() if rdma else None, dla.units["SDP"].view(),
                    cube)
        return ([dla.units["SDP"].group_hw_fields[0]["STATUS_UNEQUAL"]],
                [dla.mem.read_bytes(FLY_DST, surf * surfaces)])
    return steps, 1, expect


# ---- tests ---------------------------------------------------------------------------------

# (seed, PROC_PRECISION of each layer): the seeds' draws (asserted)
#   0: 4x1x31, BN ALU per element from memory, EW MUL per element from memory, LUT (exponential)
#   1: 1x16x5, BS ALU per kernel from memory, EW LUT alone (linear)
#  33: 7x3x27, BS ALU+MUL per element (BOTH), EW MUL per element, LUT; then INT8 5x6x29
#  47: INT8 1x1x3; then 4x6x2, BS ALU+MUL per kernel (BOTH), BN MUL per element
#  53: 6x4x18, BS/BN ALU per element, EW ALU per element + LUT; then INT8 9x6x32
#  56: 11x7x20, BS MUL (PReLU) per element, BN ALU per kernel; then 6x6x37 compare mode (EQL)
CASES = [(0, [1]), (1, [1]), (33, [1, 0]), (47, [0, 1]), (53, [1, 0]), (56, [1, 1])]


@pytest.fixture(scope="module")
def full_batch():
    cfg = get_config(SPEC)
    sat = []

    def cvt(group, key):
        *case, n = _cvt_layer(cfg, random.Random(3), group, key)
        sat.append(n)
        return case
    got, want = _batch(cfg, CASES, extra=[cvt])
    return got, want, sat[0]


@pytest.mark.parametrize("seed", [s for s, _ in CASES])
def test_generated_program(full_batch, seed):
    got, want, _ = full_batch
    _check(got, want, seed)


def test_converter_saturation(full_batch):
    """The converter's INT16 outputs (16-bit saturation) and D_PERF_OUT_SATURATION per
    element of the whole atoms."""
    got, want, sat = full_batch
    *regs, perf_sat = got["0"][0]
    got_one = (regs, got["0"][1])
    assert got_one == (want["0"][0][:len(regs)], want["0"][1])
    out = np.frombuffer(want["0"][1][0], np.int16)
    assert out.min() == -32768 and out.max() == 32767 and (abs(out.astype(int)) > 127).any()
    assert perf_sat == sat


CASES_T4 = [(57, [1, 1]), (47, [0, 1])]


def test_second_geometry():
    """4 elements per cycle (an INT8 atom in 8 groups, an INT16 atom in 4): generated programs,
    then layers on the fly from CACC in INT16 (with an operand from memory) and in INT8."""
    cfg = get_config(SPEC_T4)
    rng = random.Random(7)
    got, want = _batch(cfg, CASES_T4, extra=[lambda g, k: _fly_layer(cfg, rng, 1, g, k),
                                             lambda g, k: _fly_layer(cfg, rng, 0, g, k)])
    for key in [s for s, _ in CASES_T4] + ["0", "1"]:
        _check(got, want, key)


def test_datapath_wider_than_int16_atom():
    """8-byte atoms and 8 elements per cycle: an INT16 atom (4 elements) fills half a group;
    the other lanes carry no channel and stay out of D_PERF_LUT_* and the saturation count."""
    cfg = get_config(SPEC_A8)
    rng = random.Random(9)
    sat = []

    def cvt(group, key):
        *case, n = _cvt_layer(cfg, rng, group, key)
        sat.append(n)
        return case
    got, want = _batch(cfg, [(0, [1]), (53, [1, 0])],
                       extra=[cvt, lambda g, k: _fly_layer(cfg, rng, 1, g, k)])
    for key in (0, 53, "1"):
        _check(got, want, key)
    *regs, perf_sat = got["0"][0]
    assert (regs, got["0"][1]) == (want["0"][0][:len(regs)], want["0"][1])
    assert perf_sat == sat[0]


# more seeds whose programs (at most two layers, INT8 / INT16 only) draw INT16 layers
SWEEP = [(14, [1]), (17, [1]), (22, [1]), (23, [1, 0]), (25, [1, 0]), (32, [1]), (34, [1]),
         (39, [0, 1]), (41, [1]), (42, [1]), (49, [1, 0]), (51, [0, 1]), (57, [1, 1])]


@pytest.mark.slow
def test_generated_sweep():
    """More generated programs on nv_full in one simulation (see CASES)."""
    cfg = get_config(SPEC)
    got, want = _batch(cfg, SWEEP)
    for seed, _ in SWEEP:
        _check(got, want, seed)
