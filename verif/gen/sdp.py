"""Random SDP register programs (v1_ias_programming_guide.rst "SDP programming" and
"Limitation / SDP"; unit description "Single Data Point Processor").

Drawn per layer: cube size (1..24 x 1..8 x 1..40, or one long line), input/output strides with
gaps, and for each of the BS (X1) and BN (X2) sub-units: bypass, ALU (bypass, MAX/MIN/SUM,
operand from register or memory, shift 0..63), multiplier (bypass, operand from register or
memory, shift 0..63 or any 8-bit value, PReLU with the ALU bypassed as the guide requires), ReLU;
operands from memory per channel (PER_KERNEL) or per element (PER_ELEMENT, own strides), 1 or 2
bytes per operand; the output converter (offset, scale, shift). Registers with no effect on
nv_small (EW sub-unit fields behind EW_BYPASS, batch strides, NAN_TO_ZERO, perf enables) get
random values, as NVIDIA's traces do. The BRDMA/NRDMA configuration is derived from what the
sub-units take from memory: disabled when nothing, DATA_USE = MUL / ALU / BOTH exactly.
On a configuration with the EW (Y) sub-unit, half the layers run it (``_ew``: MUL, ALU with
EQL's compare mode, operand converters, the LUT that ``lut_prologue`` loads once per program
on a configuration with the SDP LUT), ERDMA derived as BRDMA/NRDMA; the random stream of a
configuration without EW is unchanged by that. The precision (INT8/INT16/FP16 where the
configuration has them) is drawn per layer.

``mismatch=True`` (issue 36 item 1; kind ``sdp_operands``) draws one layer in which the BRDMA /
NRDMA settings (DISABLE, DATA_USE) are drawn independently of what the BS / BN sub-units take
from memory, so that every combination occurs: an operand taken from memory that the DMA does
not fetch (NVIDIA's RTL never finishes), an operand fetched that nothing takes (NVIDIA's RTL
finishes the layer, and hangs when DATA_USE = BOTH also delivers a taken operand and the
untaken one does not fit its FIFOs), and matching ones. Whether NVIDIA's hardware completes
such a program is the model's decision (``Program.legal`` None): the model's output where it
completes, its ``ModelConfigError`` where it does not (verif/model/sdp.py ``SdpCore._check``).
"""
from __future__ import annotations

import random

from verif.gen.common import (FP16_SCALES, PRECISIONS, Alloc, Layer, Program, ceil_div, cube_extent,
                              cube_strides, draw_precision, emit, fp16_bytes, fp16_of, fp16_values,
                              fp32_of, rand_bytes, regs, signed, small_biased)
from verif.gen.writer import TraceWriter

USE_MUL, USE_ALU, USE_BOTH = 0, 1, 2
SUBS = (("BS", "BRDMA"), ("BN", "NRDMA"))
DMAS = dict(SUBS + (("EW", "ERDMA"),))
LE_ENTRIES, LO_ENTRIES = 65, 257


def _size(rng: random.Random) -> tuple[int, int, int]:
    r = rng.random()
    if r < 0.1:
        return rng.randint(1, 96), 1, rng.randint(1, 8)           # one long line
    if r < 0.2:
        return 1, rng.randint(1, 40), rng.randint(1, 8)           # one tall column
    return rng.randint(1, 12), rng.randint(1, 8), rng.randint(1, 40)


def _subunit(rng: random.Random, sub: str, need_mem: bool = False) -> tuple[dict, bool, bool]:
    """Random fields of D_DP_<sub>_CFG/_ALU_CFG/_MUL_CFG/_SRC_VALUE; returns (fields per
    register, ALU operand from MEM, MUL operand from MEM). ``need_mem``: at least one operand
    from memory."""
    bypass = rng.random() < 0.25
    alu_bypass = rng.random() < 0.35
    mul_bypass = rng.random() < 0.35
    prelu = rng.random() < 0.25
    if prelu and not mul_bypass:
        alu_bypass = True       # Limitation/SDP: PReLU needs the ALU bypassed
    alu_src = rng.random() < 0.5
    mul_src = rng.random() < 0.5
    if need_mem:
        bypass = False
        if not (not alu_bypass and alu_src or not mul_bypass and mul_src):
            if mul_bypass or rng.random() < 0.5:
                alu_bypass, alu_src, prelu = False, True, prelu and mul_bypass
            else:
                mul_src = True
    mul_shift = small_biased(rng, 63, 12) if rng.random() < 0.9 else rng.randint(0, 255)
    f = {
        "D_DP_{s}_CFG": dict(BYPASS=int(bypass), ALU_BYPASS=int(alu_bypass),
                             ALU_ALGO=rng.randint(0, 2), MUL_BYPASS=int(mul_bypass),
                             MUL_PRELU=int(prelu), RELU_BYPASS=int(rng.random() < 0.6)),
        "D_DP_{s}_ALU_CFG": dict(ALU_SRC=int(alu_src), ALU_SHIFT_VALUE=small_biased(rng, 63, 10)),
        "D_DP_{s}_ALU_SRC_VALUE": dict(ALU_OPERAND=signed(rng, 16)),
        "D_DP_{s}_MUL_CFG": dict(MUL_SRC=int(mul_src), MUL_SHIFT_VALUE=mul_shift),
        "D_DP_{s}_MUL_SRC_VALUE": dict(MUL_OPERAND=signed(rng, 16)),
    }
    on = not bypass
    return f, on and not alu_bypass and alu_src, on and not mul_bypass and mul_src


def _mismatch_use(rng: random.Random, alu_mem: bool, mul_mem: bool) -> tuple[int, int, str]:
    """(DISABLE, DATA_USE, description) drawn independently of what the sub-unit takes from
    memory (``alu_mem``, ``mul_mem``): every DMA setting in about equal shares."""
    disable = int(rng.random() < 0.2)
    use = rng.randint(0, 2)
    take = "+".join(k for k, t in (("alu", alu_mem), ("mul", mul_mem)) if t) or "none"
    fetch = "none" if disable else ["mul", "alu", "alu+mul"][use]
    return disable, use, f"takes {take} from MEM, fetches {fetch}"


def operand_image(rng: random.Random, cfg, alloc: Alloc, w: TraceWriter, sub: str,
                  cube: tuple[int, int, int], use: int, size: int, mode: int,
                  disable: int, atom: int | None = None, fp16: bool = False) -> tuple[list, list]:
    """Sub-unit ``sub``'s (BS, BN or EW) operands in memory for a ``cube`` = (W, H, C) layer:
    DATA_USE ``use`` (one operand, or both interleaved), DATA_SIZE ``size`` (1 or 2 bytes),
    DATA_MODE ``mode`` (PER_KERNEL: one element per channel, contiguous; PER_ELEMENT: a cube of
    such elements with its own strides; ``atom`` channels per group, default
    ``cfg.memory_atomic``; ``fp16``: fp16 values, else random bytes). Loads the operands into
    ``w`` unless ``disable``; returns
    (SDP_RDMA base address / stride writes, description)."""
    atom, ab = atom or cfg.memory_atomic, cfg.atom_bytes
    W, H, C = cube
    bpe = (2 if size else 1) * (2 if use == USE_BOTH else 1)
    if mode:        # PER_ELEMENT: a feature cube of bpe-byte elements
        oline, osurf = cube_strides(rng, W, H, ab, bpe)
        on = cube_extent(W, H, C, oline, osurf, atom, ab, bpe)
    else:           # PER_KERNEL: one element per channel, contiguous
        oline, osurf = rng.getrandbits(32) & ~31, rng.getrandbits(32) & ~31
        on = ceil_div(C, atom) * atom * bpe
    desc = []
    if not disable:
        ob = alloc.take(on)
        w.mem_load(ob, fp16_bytes(rng, on) if fp16 else rand_bytes(rng, on))
        dma = DMAS[sub]
        desc.append(f"{dma}:{['mul', 'alu', 'both'][use]},{bpe}B,{'elem' if mode else 'chan'}")
    else:
        ob = rng.getrandbits(32) & ~31
    return [("SDP_RDMA", f"D_{sub}_BASE_ADDR_LOW", ob),
            regs("SDP_RDMA", f"D_{sub}_BASE_ADDR_HIGH", **{f"{sub}_BASE_ADDR_HIGH": 0}),
            ("SDP_RDMA", f"D_{sub}_LINE_STRIDE", oline),
            ("SDP_RDMA", f"D_{sub}_SURFACE_STRIDE", osurf)], desc


def _ew(rng: random.Random, prec: int, lut: bool) -> tuple[dict, bool, bool, str]:
    """Random EW (Y) sub-unit fields by register (D_DP_EW_*), whether its ALU / MUL take their
    operand from memory, and a description. MUL then ALU then (``lut``: when the program loaded
    one) the LUT; the ALU's EQL (compare mode: nothing written) in one layer of ten; memory
    operands through their converters (offset, scale, truncate; ignored in FP16) or not;
    register operands 32 bits (fp32 patterns in FP16); EW_TRUNCATE 0..63 mostly."""
    alu_bypass, mul_bypass = rng.random() < 0.3, rng.random() < 0.3
    algo = 3 if rng.random() < 0.1 else rng.randint(0, 2)
    alu_src, mul_src = int(rng.random() < 0.5), int(rng.random() < 0.5)
    lut_on = lut and algo != 3 and rng.random() < 0.6

    def operand() -> int:
        if prec == 2:
            return fp32_of(rng.choice((-1, 1)) * rng.uniform(0.25, 4) * 2.0 ** rng.randint(-8, 8))
        return signed(rng, rng.choice((8, 16, 24, 32))) & 0xFFFF_FFFF
    f = {"D_DP_EW_CFG": dict(EW_BYPASS=0, EW_ALU_BYPASS=int(alu_bypass), EW_ALU_ALGO=algo,
                             EW_MUL_BYPASS=int(mul_bypass), EW_MUL_PRELU=int(rng.random() < 0.25),
                             EW_LUT_BYPASS=int(not lut_on)),
         "D_DP_EW_ALU_CFG": dict(EW_ALU_SRC=alu_src, EW_ALU_CVT_BYPASS=int(rng.random() < 0.4)),
         "D_DP_EW_ALU_SRC_VALUE": dict(EW_ALU_OPERAND=operand()),
         "D_DP_EW_ALU_CVT_OFFSET_VALUE": dict(EW_ALU_CVT_OFFSET=signed(rng, 16) & 0xFFFF_FFFF),
         "D_DP_EW_ALU_CVT_SCALE_VALUE": dict(EW_ALU_CVT_SCALE=signed(rng, 16) & 0xFFFF),
         "D_DP_EW_ALU_CVT_TRUNCATE_VALUE": dict(EW_ALU_CVT_TRUNCATE=small_biased(rng, 63, 12)),
         "D_DP_EW_MUL_CFG": dict(EW_MUL_SRC=mul_src, EW_MUL_CVT_BYPASS=int(rng.random() < 0.4)),
         "D_DP_EW_MUL_SRC_VALUE": dict(EW_MUL_OPERAND=operand()),
         "D_DP_EW_MUL_CVT_OFFSET_VALUE": dict(EW_MUL_CVT_OFFSET=signed(rng, 16) & 0xFFFF_FFFF),
         "D_DP_EW_MUL_CVT_SCALE_VALUE": dict(EW_MUL_CVT_SCALE=signed(rng, 16) & 0xFFFF),
         "D_DP_EW_MUL_CVT_TRUNCATE_VALUE": dict(EW_MUL_CVT_TRUNCATE=small_biased(rng, 63, 12)),
         "D_DP_EW_TRUNCATE_VALUE": dict(EW_TRUNCATE=small_biased(rng, 63, 20))}
    desc = (f"EW:mul={'-' if mul_bypass else 'prelu' if f['D_DP_EW_CFG']['EW_MUL_PRELU'] else 'mul'}"
            f"{'(mem)' if mul_src and not mul_bypass else ''},"
            f"alu={'-' if alu_bypass else ['max', 'min', 'sum', 'eql'][algo]}"
            f"{'(mem)' if alu_src and not alu_bypass else ''},lut={int(lut_on)}")
    return f, not alu_bypass and bool(alu_src), not mul_bypass and bool(mul_src), desc


def lut_prologue(rng: random.Random, prec: int, scale: int = 0) -> tuple[list, str]:
    """SDP's LUT (v1_ias_lut-programming.rst; single registers, written once before the
    layers): both tables (LE 65, LO 257 entries: random, smooth or constant; fp16 patterns in
    FP16), S_LUT_CFG, S_LUT_INFO and START/END placed so that most samples hit a table: around
    ``2**k`` for a drawn k (INT: 32-bit integers; FP16: fp32 patterns, data of magnitude
    ``2**scale``), slopes (int16 scales and 5-bit shifts; fp16 scales in FP16)."""
    w = []
    for tid, n in ((0, LE_ENTRIES), (1, LO_ENTRIES)):
        w.append(regs("SDP", "S_LUT_ACCESS_CFG", LUT_ADDR=0, LUT_TABLE_ID=tid, LUT_ACCESS_TYPE=1))
        kind = rng.randrange(3)
        if prec == 2:
            vals = (fp16_values(rng, n, rng.choice((-4, 0, 4))) if kind == 0 else
                    [fp16_of(2.0 ** rng.randint(-4, 4) * (1 + i / rng.randint(1, 64)) ** -0.75)
                     for i in range(n)] if kind == 1 else fp16_values(rng, 1, 0) * n)
        else:
            top = rng.randint(1, 32767)
            vals = ([rng.randint(-32768, 32767) for _ in range(n)] if kind == 0 else
                    [int(top / (1 + i / rng.randint(1, 64))) for i in range(n)] if kind == 1 else
                    [rng.randint(-32768, 32767)] * n)
        w += [("SDP", "S_LUT_ACCESS_DATA", v & 0xFFFF) for v in vals]
    linear = rng.random() < 0.5
    k = (scale + rng.randint(-3, 6)) if prec == 2 else rng.randint(4, 26)
    s8 = lambda v: max(-128, min(127, v))                     # noqa: E731
    le_sel, lo_sel = s8(k - 6 + rng.randint(-3, 3)), s8(k - 8 + rng.randint(-3, 3))
    le_off = s8(k - (30 if prec == 2 else 6) + rng.randint(-8, 4))
    if prec != 2:
        le_sel, lo_sel, le_off = max(le_sel, -6), max(lo_sel, -8), max(le_off, -64)

    def point(base: float) -> int:
        if prec == 2:
            return fp32_of(max(-3e38, min(3e38, base)))
        return max(-(1 << 31), min((1 << 31) - 1, int(base))) & 0xFFFF_FFFF
    le_start = 0.0 if rng.random() < 0.3 else -rng.uniform(0, 1) * 2.0 ** k
    lo_start = 0.0 if rng.random() < 0.3 else -rng.uniform(0, 1) * 2.0 ** k
    le_end = le_start + (64 * 2.0 ** le_sel if linear else rng.uniform(0.5, 2) * 2.0 ** k)
    lo_end = lo_start + 256 * 2.0 ** lo_sel
    w += [regs("SDP", "S_LUT_CFG", LUT_LE_FUNCTION=int(linear), LUT_UFLOW_PRIORITY=rng.randint(0, 1),
               LUT_OFLOW_PRIORITY=rng.randint(0, 1), LUT_HYBRID_PRIORITY=rng.randint(0, 1)),
          regs("SDP", "S_LUT_INFO", LUT_LE_INDEX_OFFSET=le_off & 0xFF,
               LUT_LE_INDEX_SELECT=le_sel & 0xFF, LUT_LO_INDEX_SELECT=lo_sel & 0xFF),
          ("SDP", "S_LUT_LE_START", point(le_start)), ("SDP", "S_LUT_LE_END", point(le_end)),
          ("SDP", "S_LUT_LO_START", point(lo_start)), ("SDP", "S_LUT_LO_END", point(lo_end))]
    for t in ("LE", "LO"):
        if prec == 2:
            u, o = fp16_values(rng, 2, rng.choice((-8, -4, 0)))
        else:
            u, o = signed(rng, rng.choice((4, 8, 16))) & 0xFFFF, signed(rng, rng.choice((4, 8, 16))) & 0xFFFF
        w += [("SDP", f"S_LUT_{t}_SLOPE_SCALE", u | (o << 16)),
              ("SDP", f"S_LUT_{t}_SLOPE_SHIFT", rng.getrandbits(10))]
    return w, (f"LUT {'linear' if linear else 'exp'} k={k} le_sel={le_sel} le_off={le_off} "
               f"lo_sel={lo_sel}")


def sdp_layer(rng: random.Random, cfg, alloc: Alloc, w: TraceWriter, *,
              mismatch: bool = False, force: dict | None = None, lut: bool = False,
              prec: int | None = None, scale: int | None = None) -> Layer:
    """One random SDP layer (module docstring): its input and operand images are loaded into
    ``w``; returns the Layer (writes of SDP_RDMA and SDP, output region).

    ``force`` fixes parts of the draw (for targeted programs, e.g. the size at which an untaken
    operand stops fitting): ``cube`` (W, H, C), and per sub-unit (``BS`` / ``BN``) a dict with
    ``take`` (ALU from MEM, MUL from MEM: the sub-unit on, each of its ALU / MUL on with its
    operand from memory, or bypassed), ``disable``, ``use``, ``size``, ``mode`` (the DMA's
    DISABLE, DATA_USE, DATA_SIZE, DATA_MODE)."""
    force = force or {}
    # INT16 end to end on nv_full (two-byte elements, 16 channels per atom and operand group);
    # the other precisions and conversions are not modelled yet (verif/model/sdp.py)
    if prec is None:
        prec = force.get("prec", draw_precision(rng, cfg))
    # FP16 processing writes FP16 or INT16 (verif/model/sdp.py)
    out_prec = (2 if rng.random() < 0.7 else 1) if prec == 2 else prec
    ab = cfg.atom_bytes
    atom = cfg.memory_atomic if prec == 0 else ab // 2
    W, H, C = _size(rng)
    if mismatch and rng.random() < 0.4:
        # small cubes too: whether an untaken operand fits NVIDIA's FIFOs depends on its size
        W, H, C = rng.randint(1, 4), rng.randint(1, 3), rng.randint(1, 24)
    W, H, C = force.get("cube", (W, H, C))
    writes = []
    # input cube
    line, surf = cube_strides(rng, W, H, ab)
    n = cube_extent(W, H, C, line, surf, atom, ab)
    src = alloc.take(n)
    w.mem_load(src, fp16_bytes(rng, n, scale) if prec == 2 else rand_bytes(rng, n))
    # output cube
    dline, dsurf = cube_strides(rng, W, H, ab)
    dn = cube_extent(W, H, C, dline, dsurf, atom, ab)
    dst = alloc.take(dn)
    for unit in ("SDP_RDMA", "SDP"):
        writes += [regs(unit, "D_DATA_CUBE_WIDTH", WIDTH=W - 1),
                   regs(unit, "D_DATA_CUBE_HEIGHT", HEIGHT=H - 1),
                   regs(unit, "D_DATA_CUBE_CHANNEL", CHANNEL=C - 1)]
    writes += [regs("SDP_RDMA", "D_SRC_BASE_ADDR_LOW", SRC_BASE_ADDR_LOW=src),
               regs("SDP_RDMA", "D_SRC_BASE_ADDR_HIGH", SRC_BASE_ADDR_HIGH=0),
               regs("SDP_RDMA", "D_SRC_LINE_STRIDE", SRC_LINE_STRIDE=line),
               regs("SDP_RDMA", "D_SRC_SURFACE_STRIDE", SRC_SURFACE_STRIDE=surf),
               regs("SDP_RDMA", "D_SRC_DMA_CFG", SRC_RAM_TYPE=1),
               regs("SDP_RDMA", "D_FEATURE_MODE_CFG", FLYING_MODE=0, WINOGRAD=0, IN_PRECISION=prec,
                    PROC_PRECISION=prec, OUT_PRECISION=out_prec, BATCH_NUMBER=0),
               regs("SDP_RDMA", "D_ERDMA_CFG", ERDMA_DISABLE=1, ERDMA_DATA_USE=rng.randint(0, 2),
                    ERDMA_DATA_SIZE=rng.randint(0, 1), ERDMA_DATA_MODE=rng.randint(0, 1),
                    ERDMA_RAM_TYPE=1)]
    erdma_at = len(writes) - 1          # replaced in place when EW runs (the random stream and
    # the order of the other writes stay those of a configuration without EW)
    for r in ("D_BS_BATCH_STRIDE", "D_BN_BATCH_STRIDE", "D_EW_BATCH_STRIDE", "D_EW_BASE_ADDR_LOW",
              "D_EW_LINE_STRIDE", "D_EW_SURFACE_STRIDE"):
        writes.append(("SDP_RDMA", r, rng.getrandbits(32) & ~31))
    desc = [f"{PRECISIONS[prec]}->{PRECISIONS[out_prec]} {W}x{H}x{C}" if len(cfg.precisions) > 1
            else f"{W}x{H}x{C}"]
    for sub, dma in SUBS:
        fields, alu_mem, mul_mem = _subunit(rng, sub, need_mem=mismatch and rng.random() < 0.5)
        if prec == 2:            # register operands read as fp16
            a16, m16 = fp16_values(rng, 2)
            fields["D_DP_{s}_ALU_SRC_VALUE"]["ALU_OPERAND"] = a16 - (a16 >> 15 << 16)
            fields["D_DP_{s}_MUL_SRC_VALUE"]["MUL_OPERAND"] = m16 - (m16 >> 15 << 16)
        fs = force.get(sub, {})
        if "take" in fs:
            alu_mem, mul_mem = fs["take"]
            fields["D_DP_{s}_CFG"].update(BYPASS=0, ALU_BYPASS=int(not alu_mem),
                                          MUL_BYPASS=int(not mul_mem), MUL_PRELU=0)
            fields["D_DP_{s}_ALU_CFG"]["ALU_SRC"] = 1
            fields["D_DP_{s}_MUL_CFG"]["MUL_SRC"] = 1
        for reg, fl in fields.items():
            writes.append(regs("SDP", reg.format(s=sub), **{f"{sub}_{k}": v for k, v in fl.items()}))
        cfgf = fields["D_DP_{s}_CFG"]
        desc.append(f"{sub}:" + ("bypass" if cfgf["BYPASS"] else
                    f"alu={'-' if cfgf['ALU_BYPASS'] else ['max', 'min', 'sum'][cfgf['ALU_ALGO']]}"
                    f"{'(mem)' if alu_mem else ''},mul={'-' if cfgf['MUL_BYPASS'] else 'prelu' if cfgf['MUL_PRELU'] else 'mul'}"
                    f"{'(mem)' if mul_mem else ''},relu={0 if cfgf['RELU_BYPASS'] else 1}"))
        size, mode = rng.randint(0, 1), rng.randint(0, 1)
        if prec == 2 and rng.random() < 0.8:
            size = 1             # fp16 operands (one-byte ones are sign-extended bit patterns)
        if mismatch:
            disable, use, why = _mismatch_use(rng, alu_mem, mul_mem)
            desc.append(f"{dma}: {why}")
        else:
            disable = int(not (alu_mem or mul_mem))
            use = USE_BOTH if alu_mem and mul_mem else USE_ALU if alu_mem else USE_MUL
            if disable:
                use = rng.randint(0, 2)
        disable, use = fs.get("disable", disable), fs.get("use", use)
        if prec and not disable:
            size = 1             # INT16/FP16: two-byte operands only (model Sdp._check)
        size, mode = fs.get("size", size), fs.get("mode", mode)
        writes.append(regs("SDP_RDMA", f"D_{dma}_CFG", **{f"{dma}_DISABLE": disable,
                      f"{dma}_DATA_USE": use, f"{dma}_DATA_SIZE": size, f"{dma}_DATA_MODE": mode,
                      f"{dma}_RAM_TYPE": 1}))
        ow, od = operand_image(rng, cfg, alloc, w, sub, (W, H, C), use, size, mode, disable, atom,
                               fp16=prec == 2 and size == 1)
        writes += ow
        desc += od
    # EW: bypassed and its fields don't-cares (nv_small has no EW) unless drawn below
    writes.append(regs("SDP", "D_DP_EW_CFG", EW_BYPASS=1, EW_ALU_BYPASS=rng.randint(0, 1),
                       EW_ALU_ALGO=rng.randint(0, 3), EW_MUL_BYPASS=rng.randint(0, 1),
                       EW_MUL_PRELU=rng.randint(0, 1), EW_LUT_BYPASS=1))
    for r in ("D_DP_EW_ALU_SRC_VALUE", "D_DP_EW_MUL_SRC_VALUE", "D_DP_EW_ALU_CVT_OFFSET_VALUE",
              "D_DP_EW_MUL_CVT_OFFSET_VALUE", "D_DST_BATCH_STRIDE"):
        writes.append(("SDP", r, rng.getrandbits(32)))
    if cfg.sdp_ew and not mismatch and rng.random() < 0.5:
        # EW (Y) on a configuration that has it, in half the layers, its operands fetched by
        # ERDMA as BS/BN's by their DMAs
        fields, alu_mem, mul_mem, ed = _ew(rng, prec, lut)
        ew_regs = {reg: regs("SDP", reg, **fl) for reg, fl in fields.items()}
        writes = [ew_regs.pop(wr[1]) if wr[0] == "SDP" and wr[1] in ew_regs else wr for wr in writes]
        writes += ew_regs.values()
        desc.append(ed)
        disable = int(not (alu_mem or mul_mem))
        use = USE_BOTH if alu_mem and mul_mem else USE_ALU if alu_mem else USE_MUL
        size = 1 if prec or rng.random() < 0.5 else 0      # two-byte operands in INT16/FP16
        mode = rng.randint(0, 1)
        if disable:
            use = rng.randint(0, 2)
        writes[erdma_at] = regs("SDP_RDMA", "D_ERDMA_CFG", ERDMA_DISABLE=disable,
                                ERDMA_DATA_USE=use, ERDMA_DATA_SIZE=size, ERDMA_DATA_MODE=mode,
                                ERDMA_RAM_TYPE=1)
        ow, od = operand_image(rng, cfg, alloc, w, "EW", (W, H, C), use, size, mode, disable, atom,
                               fp16=prec == 2 and size == 1)
        addr = {wr[1]: wr for wr in ow}
        writes = [addr.pop(wr[1]) if wr[0] == "SDP_RDMA" and wr[1] in addr else wr for wr in writes]
        writes += addr.values()
        desc += od
    off = signed(rng, 32) if rng.random() < 0.3 else rng.randint(-300, 300)
    scale = signed(rng, 16)
    shift = small_biased(rng, 63, 16)
    writes += [regs("SDP", "D_DST_BASE_ADDR_LOW", DST_BASE_ADDR_LOW=dst),
               regs("SDP", "D_DST_BASE_ADDR_HIGH", DST_BASE_ADDR_HIGH=0),
               regs("SDP", "D_DST_LINE_STRIDE", DST_LINE_STRIDE=dline),
               regs("SDP", "D_DST_SURFACE_STRIDE", DST_SURFACE_STRIDE=dsurf),
               regs("SDP", "D_DST_DMA_CFG", DST_RAM_TYPE=1),
               regs("SDP", "D_FEATURE_MODE_CFG", FLYING_MODE=0, OUTPUT_DST=0, WINOGRAD=0,
                    NAN_TO_ZERO=rng.randint(0, 1), BATCH_NUMBER=0),
               regs("SDP", "D_DATA_FORMAT", PROC_PRECISION=prec, OUT_PRECISION=out_prec),
               regs("SDP", "D_CVT_OFFSET", CVT_OFFSET=off),
               regs("SDP", "D_CVT_SCALE", CVT_SCALE=scale),
               regs("SDP", "D_CVT_SHIFT", CVT_SHIFT=shift),
               regs("SDP", "D_PERF_ENABLE", PERF_DMA_EN=rng.randint(0, 1), PERF_LUT_EN=0,
                    PERF_SAT_EN=rng.randint(0, 1), PERF_NAN_INF_COUNT_EN=rng.randint(0, 1))]
    desc.append(f"cvt({off},{scale},>>{shift})")
    rng.shuffle(writes)      # the order of a group's register writes does not matter
    return Layer(("SDP", "SDP_RDMA"), writes, [(dst, dn)], " ".join(desc))


def generate(seed: int, cfg, *, mismatch: bool = False, layers: int | None = None,
             force: dict | None = None) -> Program:
    """A random SDP program from ``seed``: 1..3 layers in alternating register groups (one when
    ``mismatch`` unless ``layers`` says otherwise; the model decides whether it completes: see the
    module docstring); ``force``: see :func:`sdp_layer` (every layer)."""
    rng = random.Random(f"sdp-{seed}-{'mismatch' if mismatch else False}")
    kind = "sdp_operands" if mismatch else "sdp"
    prog = Program(kind, seed, TraceWriter(f"{kind}_{seed}"), legal=None if mismatch else True)
    alloc = Alloc(rng)
    n = (layers or 1) if mismatch else (layers or rng.choice((1, 1, 2, 2, 3)))
    prologue, lut, scale = [], False, None
    if cfg.sdp_ew and cfg.sdp_lut and not mismatch:
        # the LUT of EW layers: programmed once, in one precision (a layer of another one
        # reads its entries and registers as its own precision does)
        lut_prec = draw_precision(rng, cfg)
        scale = rng.choice(FP16_SCALES)
        prologue, lut_desc = lut_prologue(rng, lut_prec, scale)
        lut = True
    prog.layers = [sdp_layer(rng, cfg, alloc, prog.writer, mismatch=mismatch, force=force,
                             lut=lut, scale=scale) for _ in range(n)]
    if lut:
        prog.layers[0].desc = f"{lut_desc}; {prog.layers[0].desc}"
    emit(prog, prologue)
    return prog
