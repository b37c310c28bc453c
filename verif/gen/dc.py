"""Random direct-convolution register programs (issue 11 item 1): one to three int8 DC hardware
layers CDMA -> CBUF -> CSC -> CMAC -> CACC -> SDP (on the fly) -> memory, in alternating ping-pong
groups, queued back to back (v1_ias_programming_guide.rst "Convolution pipeline programming",
"Limitation / Convolution"; docs/conv.md is our RTL's contract).

Drawn per layer, within nv_small's limits (``cfg``: atomic C/K, CBUF banks x depth x width):

* input W x H x C from 1 up (mostly small; one long line, one tall column, or an occasional
  larger layer), memory line/surface strides with gaps (packed for a 1x1xC cube, as the guide's
  Data Format limitation requires; D_DAIN_MAP's LINE/SURF_PACKED say which);
* kernel R x S (1..7, sometimes a long 1xN / Nx1 one), K kernels (1..48, more in larger layers),
  strides 1..8, dilation 1..8 per axis (dilated kernel at most 64 wide), padding left/right/top/
  bottom below the dilated kernel (CSC's 5-bit PAD_LEFT/PAD_TOP), an output window of at most the
  padded input (usually exactly ``(out-1)*stride + S' == PL + W + PR`` as the guide asks, else
  the largest output or a smaller one), CSC's pad value (16-bit, the low byte is used);
* D_ENTRY_PER_SLICE = W x ceil(C / atomic C) entries; DATA_BANK / WEIGHT_BANK: at least the
  slices (full-input mode: the only one the model and the RTL run; a multi-band input taller
  than the data banks is rejected by the model, so it is not generated) and at least one kernel
  group of weights plus 128 bytes (guide: "WEIGHT_BANK should be allocated large enough to store
  one kernel group weight plus 128Bytes"), spare banks spread at random, the two at most the
  CBUF's banks; weights larger than the weight banks stream through them ("full input, partial
  weight"); D_WEIGHT_BYTES rounded up to 128 (as NVIDIA's traces: NVIDIA's RTL hangs
  otherwise); FETCH_GRAIN with (GRAINS+1) x ENTRY_PER_SLICE within the data banks;
* CACC CLIP_TRUNCATE around the accumulator's magnitude (sometimes any 0..31), D_DATAOUT_MAP
  packed only for a 1x1 output (guide table);
* SDP on the fly: the BS and BN sub-units (bypass, ALU MAX/MIN/SUM with a register operand and
  shift, multiplier or PReLU with a register operand and shift, the ALU bypassed with PReLU as
  the SDP limitation asks, ReLU), the output converter (offset, scale, shift), output strides
  with gaps; EW bypassed (nv_small has none); in a quarter of the programs (every layer) BS
  and/or BN take the ALU operand, the multiplier operand or both from memory, per kernel or per
  element, 1 or 2 bytes (SDP_RDMA's BRDMA/NRDMA on the fly);
* CBUF reuse across consecutive layers (same CONV_MODE, DATAIN_FORMAT and D_BANK): after a
  SKIP_DATA_RLS layer, DATA_REUSE of all its slices (CDMA fetches nothing; D_DAIN_ADDR points
  at other bytes); after a layer that releases RLS_SLICES+1 of its slices, DATA_REUSE of the
  rest followed by new lines (partial reuse, CSC DATAIN_HEIGHT_EXT = kept + CDMA DATAIN_HEIGHT;
  or nothing kept when it released all); after a SKIP_WEIGHT_RLS layer whose weights fit the
  weight banks, WEIGHT_REUSE (same K x R x S x C; D_WEIGHT_ADDR points at other bytes).
  SKIP_WEIGHT_RLS is only set when the whole weights (plus 128 bytes) fit the weight banks.
  D_WEIGHT_BYTES reaching past the weights' last CBUF entry and a normal release put NVIDIA's
  CSC weight ring out of step (model ``ConvCore._weights``): the next layer then takes other
  banks, and the last layer of a program keeps such weights (SKIP_WEIGHT_RLS).
* registers a DC layer does not use get random values, as NVIDIA's dc_* traces give them:
  CDMA's pixel format/mapping/sign/offsets and means, WMB/WGS addresses, the second plane, CYA,
  NaN/perf enables, CSC D_PRA_CFG; CDMA's pad value is CSC's;
* CDMA's input converter (CVT_EN in a fifth of the layers; mostly a gain of 1/4..2 and an offset
  in the data's range, sometimes any offset/scale/truncate: ``_input_converter``): NVIDIA's
  RTL converts feature data with it too (observed through --rtl-filelist; model
  ``ConvCore._fetch_feature``).

On a configuration computing int8, int16 and fp16 (nv_full, ``int8_int16_fp16``) a program is
int8, int16 or fp16 (drawn): 16-bit layers have two-byte elements (16 per memory atom), kernel
groups of half the atomic K, 128-byte CBUF entries (model ``verif.model.conv.entry_bytes``), the
input converter on int16 data (saturating to int16) and on fp16 data (which it passes unchanged),
SDP operands from memory in groups of 16 channels; int16 layers have SDP in
INT16 with its converter aiming at the int16 range; fp16 layers have fp16 data and weights of
one magnitude (zeros and denormals among them; an infinity or NaN in one program of ten), an
fp16 pad value, and SDP in FP16 (fp16 register and memory operands) writing FP16 or INT16.

The first layer of a program never sets a reuse flag. CDMA's S_CBUF_FLUSH_STATUS is polled
first. A register group is programmed again only after every done interrupt of the layer that
used it (SDP, CDMA_DAT, CDMA_WT, CACC, unmasked in GLB): SDP's alone is not enough, CDMA may still
fetch input lines no output uses (a cropped output window, a stride leaving bottom lines) or
weight bytes past the last kernel after SDP wrote the layer's last byte, and programming the
group it still runs on changes its registers under it (a hang, found by this generator with
SDP's interrupt alone; NVIDIA's firmware waits for every unit's event too).

:func:`generate` returns a :class:`verif.gen.common.Program` of kind ``dc``.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

from verif.gen.common import (Alloc, Layer, Program, SameInBothMemories, ceil_div, cube_extent,
                              cube_strides,
                              draw_precision, emit, field_writes, fp16_conv_bytes, fp16_values,
                              padded_past_entries, rand_bytes, signed, small_biased,
                              weight_bytes_reg)
from verif.gen.sdp import SUBS, USE_ALU, USE_BOTH, USE_MUL, operand_image
from verif.gen.writer import TraceWriter

__all__ = ["generate", "generate_batch", "generate_compressed", "generate_batch_compressed",
           "DcKept", "dc_layer", "UNITS", "INTRS", "INTR_MASK_CONV"]

#: the pipeline's register files, in D_OP_ENABLE order (guide Limitation / Convolution /
#: General: reverse pipeline order; SDP first, it raises the interrupt waited for)
UNITS = ("SDP", "CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA")
#: the done interrupts of a DC layer, all waited for before its register group is programmed
#: again (GLB S_INTR_STATUS field prefixes; SDP's first: the output checks wait for it)
INTRS = ("SDP", "CDMA_DAT", "CDMA_WT", "CACC")
#: GLB S_INTR_MASK: every done interrupt masked except those (NVIDIA's dc_* traces, single
#: layers, keep SDP's alone: 0x3F03FC)
INTR_MASK_CONV = 0x3F03FC & ~(0x3F << 16)   # 0x3FC

#: probability that a program's SDP takes BS/BN operands from memory on the fly (SDP_RDMA)
SDP_MEM_RATE = 0.25
#: alignment (bytes) of a multi-batch layer's SDP destination base, line, surface and batch
#: strides (programming guide Limitation "Winograd/Batch": 64)
BATCH_DST_ALIGN = 64
SMALL_OPS = 6000          # atomic operations of a normal layer (a few seconds of simulation)
BIG_OPS = 40000           # of an occasional larger layer


@dataclass
class DcKept:
    """What a finished DC layer leaves in CBUF for the next layer (docs/conv.md "Data and
    weight reuse across layers"): input width ``W``, channels ``C``, entries per slice ``eps``,
    ``H`` slices of CSC (DATAIN_HEIGHT_EXT+1), ``kept`` slices left (all with ``skip_data``),
    banks ``db``/``wb`` (DATA_BANK+1, WEIGHT_BANK+1), the weights' shape ``(K, R, S, C)``,
    their D_WEIGHT_BYTES ``wbytes`` and whether they stay (``skip_wt``); ``drift``: padded
    weights were released normally, so the next layer must use other banks (NVIDIA's CSC weight
    ring is out of step until a bank change resets it; model ``ConvCore._weights``)."""
    W: int
    C: int
    eps: int
    H: int
    kept: int
    skip_data: bool
    db: int
    wb: int
    wshape: tuple[int, int, int, int]
    wbytes: int
    skip_wt: bool
    drift: bool = False


def _biased(rng: random.Random, lo: int, hi: int) -> int:
    """lo..hi, towards lo half of the time."""
    if hi <= lo:
        return lo
    return lo + small_biased(rng, hi - lo, max(1, (hi - lo) // 4))


def _kernel_1d(rng: random.Random, long: bool) -> int:
    if long:
        return rng.randint(8, 16)
    return rng.choice((1, 1, 2, 3, 3)) if rng.random() < 0.8 else rng.randint(1, 7)


def _dilation(rng: random.Random, k: int) -> int:
    if k == 1 or rng.random() < 0.75:
        return 1
    d = rng.randint(2, 3) if rng.random() < 0.8 else rng.randint(4, 8)
    while (k - 1) * d + 1 > 64:
        d -= 1
    return d


def _stride(rng: random.Random) -> int:
    r = rng.random()
    return 1 if r < 0.6 else 2 if r < 0.85 else rng.randint(3, 8)


def _pads_and_out(rng: random.Random, n: int, kd: int, st: int, pmax_lo: int, pmax_hi: int):
    """(pad before, pad after, output size) along one axis of ``n`` input elements, dilated
    kernel ``kd``, stride ``st``: pads below ``kd`` (and their fields' maxima), output window
    within the padded input; None when impossible."""
    lo_max, hi_max = min(kd - 1, pmax_lo), min(kd - 1, pmax_hi)
    for _ in range(20):
        r = rng.random()
        pb = 0 if r < 0.35 else rng.randint(0, lo_max)
        need = max(0, kd - pb - n)                      # the padded input holds one window
        if need > hi_max:
            continue
        pa = need if rng.random() < 0.35 else rng.randint(need, hi_max)
        omax = (pb + n + pa - kd) // st + 1
        # the guide's rule: (out-1)*stride + S' == PB + N + PA, when a pad after makes it exact
        exact = (omax - 1) * st + kd - pb - n
        if need <= exact <= hi_max and rng.random() < 0.5:
            pa = exact
        out = omax if rng.random() < 0.85 else rng.randint(1, omax)
        return pb, pa, out
    return None


def _size(rng: random.Random, big: bool) -> tuple[int, int, int]:
    """Input W, H, C of a freshly fetched cube."""
    r = rng.random()
    if big:
        return rng.randint(4, 40), rng.randint(4, 32), rng.randint(8, 130)
    if r < 0.08:
        return rng.randint(20, 200), rng.randint(1, 3), rng.randint(1, 8)      # a long line
    if r < 0.16:
        return rng.randint(1, 3), rng.randint(10, 60), rng.randint(1, 16)      # a tall column
    c = rng.randint(1, 16) if rng.random() < 0.6 else rng.randint(17, 48)
    return rng.randint(1, 12), rng.randint(1, 10), c


def _bits(v: int) -> float:
    return math.log2(abs(v) + 1)


def _sdp_fields(rng: random.Random, bits: float, mem: random.Random | None = None,
                wild: bool = True, out_bits: int = 5) -> tuple[dict, str, list]:
    """SDP BS/BN sub-units and output converter; (fields, description, memory operands).
    ``bits``: rough log2 magnitude of CACC's output; the converter's shift usually brings the
    result near the int8 range (tracking the sub-units' rough effect). Only in a ``wild`` layer
    may an ALU operand and shift, a multiplier shift, the converter's offset or shift be any
    value (a fifth of the time each): such values mostly make the output one constant, so they
    are kept to a quarter of the layers (``dc_layer``) and the others' outputs vary.
    Operands are the registers' unless ``mem`` (a generator of its own, so that the other
    draws stay those of the same seed without memory operands) is given: then at least one
    sub-unit takes its ALU operand, its multiplier operand or both from memory, and the third
    item lists them as (sub-unit, SDP_RDMA DATA_USE). ``out_bits``: the converter's usual
    target magnitude (log2; 5 for int8 output, 13 for int16)."""
    f, desc, mem_ops = {}, [], []
    any_rate = 0.2 if wild else 0.0
    plain = rng.random() < 0.3             # BS/BN bypassed
    if mem is not None:
        takes = {sub: mem.random() < 0.6 for sub in ("BS", "BN")}
        if not any(takes.values()):
            takes[mem.choice(("BS", "BN"))] = True
    for sub in ("BS", "BN"):
        bypass = plain or rng.random() < 0.3
        alu_bypass = rng.random() < 0.35
        mul_bypass = rng.random() < 0.35
        prelu = rng.random() < 0.25
        alu_src = mul_src = 0
        if mem is not None and takes[sub]:
            bypass = False
            use = mem.choice((USE_ALU, USE_MUL, USE_BOTH))
            if use != USE_MUL:
                alu_bypass, alu_src = False, 1
            if use != USE_ALU:
                mul_bypass, mul_src = False, 1
            mem_ops.append((sub, use))
        if prelu and not mul_bypass:
            if alu_src:
                prelu = False              # the ALU takes its memory operand: no PReLU
            else:
                alu_bypass = True          # Limitation / SDP: PReLU needs the ALU bypassed
        algo = rng.randint(0, 2)
        relu_bypass = rng.random() < 0.6
        mul_op = signed(rng, 16)
        if rng.random() < any_rate:
            alu_op, alu_shift = signed(rng, 16), small_biased(rng, 63, 10)
        else:                              # an operand of the data's magnitude
            alu_shift = min(63, max(0, int(bits) - 14))   # a 6-bit field
            # sum: up to twice the data's magnitude; max/min: within half of it, so that the
            # result is not mostly the operand itself
            m = min(1 << 15, 1 << max(1, int(bits) + (1 if algo == 2 else -1) - alu_shift))
            alu_op = rng.randint(-m, m - 1)
        # the truncation after the multiplier shifts by MUL_SHIFT_VALUE[5:0] even when the
        # multiplier is bypassed (model x_subunit, from NVIDIA's RTL)
        if rng.random() < any_rate:
            mul_shift = rng.randint(0, 255)
        elif mul_bypass or prelu:
            mul_shift = rng.choice((0, 0, 0, 1, 2, 3))
        else:
            mul_shift = max(0, int(_bits(mul_op)) + rng.randint(-3, 3))
        if not bypass:
            if not alu_bypass:
                bits = max(bits, _bits(alu_op) + alu_shift)
            bits += (0 if mul_bypass or prelu else _bits(mul_op)) - (mul_shift & 63)
            bits = max(bits, 0.0)
        f.update({f"{sub}_BYPASS": int(bypass), f"{sub}_ALU_BYPASS": int(alu_bypass),
                  f"{sub}_ALU_ALGO": algo, f"{sub}_MUL_BYPASS": int(mul_bypass),
                  f"{sub}_MUL_PRELU": int(prelu), f"{sub}_RELU_BYPASS": int(relu_bypass),
                  f"{sub}_ALU_SRC": alu_src, f"{sub}_ALU_SHIFT_VALUE": alu_shift,
                  f"{sub}_ALU_OPERAND": alu_op, f"{sub}_MUL_SRC": mul_src,
                  f"{sub}_MUL_SHIFT_VALUE": mul_shift, f"{sub}_MUL_OPERAND": mul_op})
        desc.append(f"{sub}:" + ("bypass" if bypass else
                    f"alu={'-' if alu_bypass else ['max', 'min', 'sum'][algo]}"
                    f"{'' if alu_bypass else f'(mem<<{alu_shift})' if alu_src else f'({alu_op}<<{alu_shift})'},"
                    f"mul={'-' if mul_bypass else 'prelu' if prelu else 'mul'}"
                    f"{'' if mul_bypass else f'(mem>>{mul_shift})' if mul_src else f'({mul_op}>>{mul_shift})'},"
                    f"relu={int(not relu_bypass)}"))
    if rng.random() < 0.15:
        off, scale, shift = 0, 1, 0
    else:
        m = 1 << min(31, int(bits) + 1)
        off = signed(rng, 32) if rng.random() < any_rate else rng.randint(-m, m - 1)
        bits = _bits((1 << int(bits)) + abs(off))
        scale = signed(rng, 16) if rng.random() < 0.6 else rng.choice((-4, -3, -2, -1, 1, 2, 3, 4))
        shift = small_biased(rng, 63, 16) if rng.random() < any_rate else \
            max(0, min(63, int(bits + _bits(scale)) - out_bits + rng.randint(-2, 2)))
    f.update(CVT_OFFSET=off, CVT_SCALE=scale, CVT_SHIFT=shift)
    desc.append(f"cvt({off},{scale},>>{shift})")
    return f, " ".join(desc), mem_ops


def _input_converter(rng: random.Random) -> dict:
    """CDMA's input converter fields (D_CVT_CFG, D_CVT_OFFSET, D_CVT_SCALE) of a DC layer: CVT_EN
    in a fifth of the layers, with its arithmetic (precision "cc_cvt": ((x - offset) * scale)
    >> truncate, saturated to int8) mostly kept in the int8 range: an offset within the data's
    range and a gain scale / 2**truncate of 1/4..2, so that the feature data stays varied (a
    converter saturating every pixel to one value made a layer's output a constant per kernel);
    one in eight converters takes any offset, scale and truncate."""
    en = int(rng.random() < 0.2)
    if rng.random() < 0.125:
        return dict(CVT_EN=en, CVT_TRUNCATE=rng.randint(0, 63), CVT_OFFSET=signed(rng, 16),
                    CVT_SCALE=signed(rng, 16))
    trunc = small_biased(rng, 14, 4)
    scale = rng.randint(max(1, (1 << trunc) // 4), min(32767, 2 << trunc))
    return dict(CVT_EN=en, CVT_TRUNCATE=trunc, CVT_OFFSET=rng.randint(-64, 63),
                CVT_SCALE=scale if rng.random() < 0.7 else -scale)


def _sdp_rdma_on_the_fly(mem: random.Random, cfg, alloc: Alloc, w: TraceWriter,
                         cube: tuple[int, int, int], uses: dict, prec: int = 0,
                         out_prec: int | None = None) -> tuple[list, str]:
    """SDP_RDMA's registers for SDP on the fly with operands from memory (programming guide
    "SDP programming": FLYING_MODE on, BRDMA/NRDMA fetch exactly what BS/BN take, ``uses``:
    sub-unit -> DATA_USE; ERDMA disabled), the operand images loaded into ``w`` (per kernel or
    per element, 1 or 2 bytes, ``verif.gen.sdp.operand_image``); (writes, description).
    The MRDMA source registers are unused on the fly: random values. ``prec`` 1 INT16, 2 FP16
    (operand groups of 16 channels, model ``Sdp._epa``; FP16 operands mostly two-byte fp16
    values); ``out_prec`` SDP's OUT_PRECISION (default ``prec``)."""
    W, H, C = cube
    out_prec = prec if out_prec is None else out_prec
    f = dict(WIDTH=W - 1, HEIGHT=H - 1, CHANNEL=C - 1, FLYING_MODE=1, WINOGRAD=0,
             IN_PRECISION=prec, PROC_PRECISION=prec, OUT_PRECISION=out_prec, BATCH_NUMBER=0,
             SRC_BASE_ADDR_LOW=mem.getrandbits(27), SRC_BASE_ADDR_HIGH=0,
             SRC_LINE_STRIDE=mem.getrandbits(27), SRC_SURFACE_STRIDE=mem.getrandbits(27),
             SRC_RAM_TYPE=1, ERDMA_DISABLE=1, ERDMA_DATA_USE=mem.randint(0, 2),
             ERDMA_DATA_SIZE=mem.randint(0, 1), ERDMA_DATA_MODE=mem.randint(0, 1),
             ERDMA_RAM_TYPE=1)
    writes, desc = [], []
    for sub, dma in SUBS:
        use = uses.get(sub)
        size, mode = mem.randint(0, 1), mem.randint(0, 1)
        if prec == 2 and mem.random() < 0.8:
            size = 1                 # fp16 operands (one-byte ones: sign-extended patterns)
        if prec and use is not None:
            size = 1                 # INT16/FP16: two-byte operands only (model Sdp._check)
        f.update({f"{dma}_DISABLE": int(use is None), f"{dma}_DATA_USE": use or 0,
                  f"{dma}_DATA_SIZE": size, f"{dma}_DATA_MODE": mode, f"{dma}_RAM_TYPE": 1})
        ow, od = operand_image(mem, cfg, alloc, w, sub, cube, use or 0, size, mode,
                               int(use is None), atom=cfg.memory_atomic // (2 if prec else 1),
                               fp16=prec == 2 and size == 1)
        writes += ow
        desc += od
    return field_writes("SDP_RDMA", f) + writes, " ".join(desc)


def dc_layer(rng: random.Random, cfg, alloc: Alloc, w: TraceWriter, prev: DcKept | None,
             allow_reuse: bool = True, max_ops: int | None = None,
             big_rate: float = 0.08, mem: random.Random | None = None,
             last: bool = True, prec: int = 0, batches: int = 1,
             fc: bool = False, compress: bool = False,
             shape: tuple[int, int, int, int] | None = None,
             sparsity: float | None = None) -> tuple[Layer, DcKept]:
    """One random DC layer (module docstring) after ``prev`` (what the previous layer of the
    program leaves in CBUF; None for the first layer). Its memory images are loaded into ``w``.
    ``big_rate``: probability of a larger layer (up to BIG_OPS atomic operations, C up to 130,
    K up to 80); ``max_ops``: the cap on atomic operations instead. ``mem``: SDP takes operands
    from memory on the fly, drawn from this generator (SDP_RDMA joins the layer).
    ``prec``: 0 INT8, 1 INT16 or 2 FP16 (two-byte elements; module docstring).
    ``batches`` > 1: a multi-batch layer of that many input cubes (:func:`generate_batch`; no
    reuse, no SDP operands from memory); ``fc``: its kernel covers the whole input (an
    inner-product layer, output 1 x 1). ``compress``: sparse weights stored compressed
    (:func:`generate_compressed`; no reuse; the last CBUF bank left to the WMB), with
    ``sparsity`` (0..1) of the elements zero, or a drawn sparsity when None. ``shape``:
    (W, H, C, K) instead of drawn ones (benchmarks, :func:`fc_program`; the other draws are
    made as without it).
    Returns the Layer (register writes of the six units, or seven with SDP_RDMA, output
    region) and what it leaves."""
    eb = 2 if prec else 1                        # bytes per element
    ac, ak = cfg.mac_atomic_c, cfg.mac_atomic_k // eb
    ab, atom = cfg.atom_bytes, cfg.memory_atomic // eb
    nbanks = cfg.cbuf_bank_number
    bank_bytes = cfg.cbuf_bank_depth * cfg.cbuf_bank_width
    ebytes = cfg.cbuf_bank_width * eb            # an int16 entry: both 64-byte halves
    depth = bank_bytes // ebytes
    big = rng.random() < big_rate
    budget = max_ops or (BIG_OPS if big else SMALL_OPS)

    data_mode, wt_reuse = "fetch", False
    if batches > 1:
        allow_reuse, mem = False, None
    if compress:
        allow_reuse = False
    # banks for data and weights (compressed weights: the last bank holds the WMB, programming
    # guide Limitation / Convolution / General)
    nbanks -= int(compress)
    if prev is not None and allow_reuse:
        if prev.skip_data and rng.random() < 0.7:
            data_mode = "full"
        elif not prev.skip_data and rng.random() < 0.6:
            data_mode = "partial"            # kept slices (possibly none) + new lines
        wt_reuse = prev.skip_wt and rng.random() < 0.7
        if prev.drift:                      # other banks: nothing is reused
            data_mode, wt_reuse = "fetch", False

    for attempt in range(400):
        if attempt == 200:                   # no geometry fits the kept CBUF contents
            data_mode, wt_reuse = "fetch", False
        fixed_banks = data_mode != "fetch" or wt_reuse
        # ---- input cube (CSC's view: H slices, of which ``kept`` are reused)
        if data_mode == "fetch":
            W, H, C = _size(rng, big)
            if wt_reuse:
                C = prev.wshape[3]
            kept, cdma_h = 0, H
        else:
            W, C = prev.W, prev.C
            if data_mode == "full":
                kept = H = cdma_h = prev.H
            else:
                kept = prev.kept
                cdma_h = rng.randint(1, 10) if rng.random() < 0.8 else rng.randint(1, 30)
                H = kept + cdma_h
        cb = ceil_div(C, ac)
        eps = nvidia_entries_per_slice(W, C, cfg, eb)
        # ---- kernel
        if wt_reuse:
            K, R, S, _ = prev.wshape
        else:
            long = rng.random() < 0.1
            R, S = _kernel_1d(rng, long and rng.random() < 0.5), _kernel_1d(rng, long)
            if big:
                K = rng.randint(1, 80)
            else:
                K = rng.randint(1, 16) if rng.random() < 0.6 else rng.randint(17, 48)
        if shape is not None:
            W, H, C, K = shape
            cb, cdma_h = ceil_div(C, ac), H
            eps = nvidia_entries_per_slice(W, C, cfg, eb)
        elif fc:
            W, H = min(W, 7), min(H, 7)
        if fc:
            R, S, cdma_h = H, W, H
        dx, dy = _dilation(rng, S), _dilation(rng, R)
        sx, sy = _stride(rng), _stride(rng)
        if fc:
            dx = dy = 1
        sd, rd = (S - 1) * dx + 1, (R - 1) * dy + 1
        hx = _pads_and_out(rng, W, sd, sx, 31, 63)
        vy = _pads_and_out(rng, H, rd, sy, 31, 63)
        if hx is None or vy is None:
            continue
        pl, pr, wo = hx
        pt, pb, ho = vy
        if fc:                              # the kernel covers the unpadded input
            pl = pr = pt = pb = 0
            wo = ho = 1
        ops = wo * ho * ceil_div(K, ak) * cb * R * S * batches
        if ops > budget or wo * ho * ceil_div(K, ak) * atom * batches > 4 * budget:
            continue
        # ---- CBUF banks
        wbytes = R * S * C * K * eb
        # (observed through --rtl-filelist: dc seed 30002, 246 bytes, hangs with CDMA and CSC
        # busy; 256 passes. The old exact-or-rounded draw is kept: the bank and reuse draws
        # that follow stay those of the same seed)
        rng.random()
        wreg = weight_bytes_reg(wbytes)
        db_need = ceil_div(eps * H * batches, depth)
        if compress and (R * S * C * min(K, ak) > 8 * (bank_bytes - 128)
                         or R * S * C * K * eb <= max(64, 128 - ebytes)):
            continue        # a kernel group's WMB fits the WMB bank (guide, as above); see
                            # _sparse_weights for the 64 (non-zero bytes must end in the last
                            # entry of their 128: more than 128 - entry bytes of weights)
        wb_need = ceil_div(R * S * C * min(K, ak) * eb + 128, bank_bytes)
        skip_wt = rng.random() < 0.35 and ceil_div(wreg + 128, bank_bytes) <= nbanks - db_need
        if skip_wt:
            wb_need = max(wb_need, ceil_div(wreg + 128, bank_bytes))
        if fixed_banks:
            db, wb = prev.db, prev.wb
            if db < db_need or wb < wb_need:
                continue
        else:
            if db_need + wb_need > nbanks:
                continue
            db = db_need if rng.random() < 0.4 else rng.randint(db_need, nbanks - wb_need)
            wb = wb_need if rng.random() < 0.4 else rng.randint(wb_need, nbanks - db)
            if prev is not None and prev.drift and (db, wb) == (prev.db, prev.wb):
                continue
        if batches > 1 and eps * H * batches > db * (cfg.cbuf_bank_depth // 2):
            continue        # the N cubes within 256 entries a bank (model ConvCore.run)
        if wt_reuse:
            wreg = prev.wbytes
        padded = padded_past_entries(wreg, wbytes, ebytes)
        if padded and not skip_wt and last:
            # Weights padded past their last CBUF entry and released normally put NVIDIA's CSC
            # weight ring out of step (it frees only the entries it read: the next layer with
            # the same banks reads its weights early; the model rejects that layer,
            # ConvCore._weights). Inside a program the next layer then takes other banks
            # (``drift``); the last layer keeps them (SKIP_WEIGHT_RLS: a later layer without
            # WEIGHT_REUSE frees all WEIGHT_BYTES), so that the next program run in the same
            # simulation starts in step.
            if ceil_div(wreg + 128, bank_bytes) > wb:
                continue
            skip_wt = True
        break
    else:
        raise RuntimeError("no DC geometry found")

    # ---- what this layer leaves in CBUF
    skip_data = rng.random() < 0.3
    r = rng.random()
    rls = H - 1 if r < 0.15 else 0 if r < 0.3 else rng.randint(0, H - 1)
    if batches > 1:                 # nothing kept (model ConvCore._check_batch)
        skip_data, rls = False, H - 1
    if skip_wt and ceil_div(wreg + 128, bank_bytes) > wb:
        skip_wt = False
    kept_next = H if skip_data else H - (rls + 1)
    leaves = DcKept(W, C, eps, H, kept_next, skip_data, db, wb, (K, R, S, C), wreg, skip_wt,
                    drift=padded and not skip_wt)

    # ---- memory: input (CDMA's lines), weights, output
    line, surf = cube_strides(rng, W, cdma_h, ab)
    if W == 1 and cdma_h == 1:
        line, surf = W * ab, W * ab * cdma_h     # Limitation / Data Format: 1x1xC is packed
    n = cube_extent(W, cdma_h, C, line, surf, atom, ab)
    # multi-batch: the cubes D_BATCH_STRIDE apart (a 32-byte multiple, sometimes with a gap)
    bstride = 0 if batches == 1 else ceil_div(n, 32) * 32 + 32 * small_biased(rng, 8, 2)
    n = n + bstride * (batches - 1)
    src = alloc.take(n)
    specials = 0.002 if prec == 2 and rng.random() < 0.1 else 0.0
    data_bytes = (lambda k: fp16_conv_bytes(rng, k, specials)) if prec == 2 else \
        (lambda k: rand_bytes(rng, k))
    w.mem_load(src, data_bytes(n))              # other bytes when everything is reused
    if compress:
        cw, sparsity = _sparse_weights(rng, data_bytes(wbytes), K, ak, R * S * C, eb, ebytes,
                                       sparsity)
        wreg = len(cw.weights)
        wsrc = alloc.take(wreg, 256)
        w.mem_load(wsrc, cw.weights)
        wmb_src, wgs_src = alloc.take(len(cw.wmb), 256), alloc.take(len(cw.wgs), 256)
        # the other memory gets other weight values under the same WMB and WGS (the counts
        # the compressed stream must follow; verif.gen.common.spread_over_memories)
        w.mem_load(wmb_src, SameInBothMemories(cw.wmb))
        w.mem_load(wgs_src, SameInBothMemories(cw.wgs))
    else:
        wsrc = alloc.take(wreg, 128)
        w.mem_load(wsrc, data_bytes(wreg))      # other bytes when the weights are reused
    dline, dsurf = cube_strides(rng, wo, ho, ab)
    if wo == 1 and ho == 1:
        dline, dsurf = ab, ab
    dbstride, dalign = 0, 32
    if batches > 1:
        # programming guide Limitation "Winograd/Batch": DST_BASE_ADDR, DST_LINE_STRIDE and
        # DST_SURFACE_STRIDE 64-byte aligned; WDMA does not pack a 1 x 1 output then (model
        # Sdp.run), so its surface stride is the register's
        dalign = BATCH_DST_ALIGN
        dline = ceil_div(dline, dalign) * dalign
        dsurf = max(ceil_div(dsurf, dalign) * dalign, dline * ho)
    dn = cube_extent(wo, ho, K, dline, dsurf, atom, ab)
    if batches > 1:
        dbstride = ceil_div(dn, dalign) * dalign + dalign * small_biased(rng, 4, 2)
    dst = alloc.take(dn + dbstride * (batches - 1), dalign)

    # ---- registers
    n_all = R * S * C
    # rough magnitude of a product of two random elements: ~74**2 in int8, ~18900**2 in int16
    acc_bits = math.log2((5500 if eb == 1 else 3.6e8) * math.sqrt(n_all) + 1)
    wild = rng.random() < 0.25       # extreme clip / SDP values allowed (_sdp_fields)
    clip = (rng.randint(0, 31) if rng.random() < (0.2 if wild else 0.0)
            else max(0, min(31, int(acc_bits) - rng.randint(0, 9))))
    pad_value = signed(rng, 16)
    if prec == 2:           # an fp16 pattern (CSC's pad value enters CMAC as data)
        pad_value = 0 if rng.random() < 0.5 else fp16_values(rng, 1)[0]
    misc = dict(CONV_MODE=0, IN_PRECISION=prec, PROC_PRECISION=prec,
                DATA_REUSE=int(data_mode != "fetch"), WEIGHT_REUSE=int(wt_reuse),
                SKIP_DATA_RLS=int(skip_data), SKIP_WEIGHT_RLS=int(skip_wt))
    common = dict(misc, DATAIN_FORMAT=0, ENTRIES=eps - 1, WEIGHT_BYTES=wreg, DATA_BANK=db - 1,
                  WEIGHT_BANK=wb - 1, WEIGHT_FORMAT=int(compress), BATCHES=batches - 1,
                  WMB_BYTES=rng.getrandbits(28))
    if compress:
        common["WMB_BYTES"] = len(cw.wmb)
    grain_max = max(0, min(4095, db * depth // eps - 1))
    cdma = dict(common, PIXEL_FORMAT=rng.randint(0, 35), PIXEL_MAPPING=rng.randint(0, 1),
                PIXEL_SIGN_OVERRIDE=rng.randint(0, 1),
                DATAIN_WIDTH=W - 1, DATAIN_HEIGHT=cdma_h - 1, DATAIN_CHANNEL=C - 1,
                DATAIN_WIDTH_EXT=W - 1, DATAIN_HEIGHT_EXT=cdma_h - 1,
                PIXEL_X_OFFSET=rng.randint(0, 31), PIXEL_Y_OFFSET=rng.randint(0, 7),
                DATAIN_RAM_TYPE=1, DATAIN_ADDR_HIGH_0=0, DATAIN_ADDR_LOW_0=src,
                DATAIN_ADDR_HIGH_1=rng.getrandbits(8), DATAIN_ADDR_LOW_1=rng.getrandbits(32) & ~31,
                LINE_STRIDE=line, UV_LINE_STRIDE=rng.getrandbits(32) & ~31, SURF_STRIDE=surf,
                LINE_PACKED=int(line == W * ab), SURF_PACKED=int(surf == line * cdma_h),
                GRAINS=_biased(rng, 0, grain_max), WEIGHT_RAM_TYPE=1,
                BYTE_PER_KERNEL=R * S * C * eb - 1, WEIGHT_KERNEL=K - 1, WEIGHT_ADDR_HIGH=0,
                WEIGHT_ADDR_LOW=wsrc, WGS_ADDR_HIGH=rng.getrandbits(8),
                WGS_ADDR_LOW=rng.getrandbits(32) & ~31, WMB_ADDR_HIGH=rng.getrandbits(8),
                WMB_ADDR_LOW=rng.getrandbits(32) & ~31,
                BATCH_STRIDE=(rng.getrandbits(32) & ~31) if batches == 1 else bstride,
                MEAN_FORMAT=rng.randint(0, 1), MEAN_RY=signed(rng, 16), MEAN_GU=signed(rng, 16),
                MEAN_BV=signed(rng, 16), MEAN_AX=signed(rng, 16),
                **_input_converter(rng),
                CONV_X_STRIDE=sx - 1, CONV_Y_STRIDE=sy - 1,
                PAD_LEFT=pl, PAD_RIGHT=pr, PAD_TOP=pt, PAD_BOTTOM=pb, PAD_VALUE=pad_value,
                NAN_TO_ZERO=rng.randint(0, 1), DMA_EN=rng.randint(0, 1),
                CYA=rng.getrandbits(32))
    if compress:
        cdma.update(WGS_ADDR_HIGH=0, WGS_ADDR_LOW=wgs_src, WMB_ADDR_HIGH=0, WMB_ADDR_LOW=wmb_src)
    csc = dict(common, DATAIN_WIDTH_EXT=W - 1, DATAIN_HEIGHT_EXT=H - 1, DATAIN_CHANNEL_EXT=C - 1,
               Y_EXTENSION=0, WEIGHT_WIDTH_EXT=S - 1, WEIGHT_HEIGHT_EXT=R - 1,
               WEIGHT_CHANNEL_EXT=C - 1, WEIGHT_KERNEL=K - 1, DATAOUT_WIDTH=wo - 1,
               DATAOUT_HEIGHT=ho - 1, DATAOUT_CHANNEL=K - 1, ATOMICS=wo * ho - 1,
               RLS_SLICES=rls, CONV_X_STRIDE_EXT=sx - 1, CONV_Y_STRIDE_EXT=sy - 1,
               X_DILATION_EXT=dx - 1, Y_DILATION_EXT=dy - 1, PAD_LEFT=pl, PAD_TOP=pt,
               PAD_VALUE=pad_value, PRA_TRUNCATE=rng.randint(0, 3), CYA=rng.getrandbits(32))
    cmac = dict(CONV_MODE=0, PROC_PRECISION=prec)
    one = int(wo == 1 and ho == 1 and batches == 1)   # guide D_DATAOUT_MAP table
    cacc = dict(CONV_MODE=0, PROC_PRECISION=prec, DATAOUT_WIDTH=wo - 1, DATAOUT_HEIGHT=ho - 1,
                DATAOUT_CHANNEL=K - 1, DATAOUT_ADDR=dst, BATCHES=batches - 1,
                LINE_STRIDE=dline & 0xFFFFFF, SURF_STRIDE=dsurf & 0xFFFFFF,
                LINE_PACKED=one, SURF_PACKED=one, CLIP_TRUNCATE=clip, CYA=rng.getrandbits(32))
    sdp_f, sdp_desc, mem_ops = _sdp_fields(rng, max(0.0, acc_bits - clip), mem, wild,
                                           5 if eb == 1 else 13)
    out_prec = prec
    if prec == 2:
        # FP16: register operands are fp16 patterns; FP16 or INT16 output (verif/model/sdp.py)
        for sub in ("BS", "BN"):
            a16, m16 = fp16_values(rng, 2)
            sdp_f[f"{sub}_ALU_OPERAND"] = a16 - (a16 >> 15 << 16)
            sdp_f[f"{sub}_MUL_OPERAND"] = m16 - (m16 >> 15 << 16)
            sdp_desc = sdp_desc.replace(f"{sub}:", f"{sub}(fp16 operands {a16:#06x},{m16:#06x}):", 1)
        out_prec = 2 if rng.random() < 0.7 else 1
    sdp = dict(sdp_f, WIDTH=wo - 1, HEIGHT=ho - 1, CHANNEL=K - 1, DST_BASE_ADDR_HIGH=0,
               DST_BASE_ADDR_LOW=dst, DST_LINE_STRIDE=dline, DST_SURFACE_STRIDE=dsurf,
               PROC_PRECISION=prec, OUT_PRECISION=out_prec, FLYING_MODE=1, OUTPUT_DST=0, WINOGRAD=0,
               NAN_TO_ZERO=rng.randint(0, 1), BATCH_NUMBER=batches - 1, DST_RAM_TYPE=1,
               DST_BATCH_STRIDE=(rng.getrandbits(32) & ~31) if batches == 1 else dbstride,
               EW_BYPASS=1, EW_ALU_BYPASS=rng.randint(0, 1), EW_ALU_ALGO=rng.randint(0, 3),
               EW_MUL_BYPASS=rng.randint(0, 1), EW_MUL_PRELU=rng.randint(0, 1), EW_LUT_BYPASS=1,
               PERF_DMA_EN=rng.randint(0, 1), PERF_LUT_EN=0, PERF_SAT_EN=rng.randint(0, 1),
               PERF_NAN_INF_COUNT_EN=rng.randint(0, 1))
    writes = []
    for unit, fields in (("SDP", sdp), ("CDMA", cdma), ("CSC", csc), ("CMAC_A", cmac),
                         ("CMAC_B", cmac), ("CACC", cacc)):
        writes += field_writes(unit, fields)
    units = UNITS
    if mem_ops:
        rdma_w, rdma_desc = _sdp_rdma_on_the_fly(mem, cfg, alloc, w, (wo, ho, K), dict(mem_ops),
                                                 prec, out_prec)
        writes += rdma_w
        sdp_desc += " " + rdma_desc
        units = ("SDP", "SDP_RDMA") + UNITS[1:]
    rng.shuffle(writes)     # the order of a group's register writes does not matter

    reuse = {"fetch": "", "full": " DATA_REUSE(all)",
             "partial": f" DATA_REUSE({kept} kept+{cdma_h} new)"}[data_mode]
    desc = (f"{('', 'int16 ', 'fp16 ')[prec]}{W}x{H}x{C} k{R}x{S}x{K} s{sx},{sy} d{dx},{dy} pad(l{pl},r{pr},t{pt},b{pb})"
            f"={pad_value & (0xFF if eb == 1 else 0xFFFF):#x} out {wo}x{ho} banks {db}+{wb} eps {eps} wbytes {wreg}"
            f" clip {clip}{reuse}{' WEIGHT_REUSE' if wt_reuse else ''}"
            f"{' SKIP_DATA_RLS' if skip_data else f' rls {rls + 1}'}"
            f"{' SKIP_WEIGHT_RLS' if skip_wt else ''} ops {ops}; {sdp_desc}")
    info = dict(W=W, H=H, C=C, K=K, R=R, S=S, sx=sx, sy=sy, dx=dx, dy=dy, pl=pl, pr=pr, pt=pt,
                pb=pb, wo=wo, ho=ho, db=db, wb=wb, eps=eps, wbytes=wreg, data=data_mode,
                kept=kept, cdma_h=cdma_h, wt_reuse=wt_reuse, skip_data=skip_data,
                skip_wt=skip_wt, rls=rls, clip=clip, ops=ops, sdp_mem=dict(mem_ops), prec=prec)
    if compress:
        desc = (f"compressed ({sparsity:.0%} zeros, {sum(cw.group_bytes)} of {wbytes} weight bytes, "
                f"WMB {len(cw.wmb)}) " + desc)
        info.update(compressed=True, sparsity=sparsity, nz_bytes=sum(cw.group_bytes))
    if batches > 1:
        desc = f"batch {batches} (src stride {bstride}, dst stride {dbstride}) " + desc
        info.update(batches=batches, fc=fc)
    return Layer(units, writes, [(dst + b * dbstride, dn) for b in range(batches)], desc,
                 info), leaves


def _sparse_weights(rng: random.Random, dense: bytes, k: int, ak: int, per_kernel: int, eb: int,
                    entry: int, sparsity: float | None = None):
    """Weights of ``k`` kernels of ``per_kernel`` elements (``eb`` bytes each, kernel groups of
    ``ak``) made sparse and compressed (:func:`verif.gen.compress.compress_weights`): a
    sparsity of 0..100 % drawn (mostly 30..90 %), each element zeroed with that probability;
    then elements made non-zero again (or, without 128 bytes of zeros, zero), one at a time,
    until the non-zero bytes end in the last CBUF entry D_WEIGHT_BYTES (their size rounded up
    to 128) covers, and are not none (a rounding that covers an entry the weights do not fill
    is not settled for compressed weights: the model refuses it, ConvCore._decompressed).
    Returns (the
    compressed surfaces, the sparsity drawn). ``sparsity`` given: exactly that share of the
    elements (rounded) is zeroed, chosen at random, instead of the draw."""
    from verif.gen.compress import compress_weights
    n = len(dense) // eb
    d = bytearray(dense)
    if sparsity is None:
        r = rng.random()
        sparsity = (0.0 if r < 0.05 else 1.0 if r < 0.08 else rng.uniform(0.3, 0.9) if r < 0.8
                    else rng.random())
        for i in range(n):
            if rng.random() < sparsity:
                d[i * eb:(i + 1) * eb] = bytes(eb)
    else:
        zero = set(rng.sample(range(n), round(sparsity * n)))
        for i in range(n):
            if i in zero:
                d[i * eb:(i + 1) * eb] = bytes(eb)
            elif not any(d[i * eb:(i + 1) * eb]):
                d[i * eb] = rng.randint(1, 255)     # the others non-zero
    zeros = [i for i in range(n) if not any(d[i * eb:(i + 1) * eb])]
    nonzeros = [i for i in range(n) if any(d[i * eb:(i + 1) * eb])]
    rng.shuffle(zeros)
    rng.shuffle(nonzeros)

    def padded() -> bool:
        b = len(nonzeros) * eb
        return b == 0 or padded_past_entries(ceil_div(b, 128) * 128, b, entry)

    # up (make zeros non-zero) when 128 bytes of zeros allow it or fewer than 128 bytes are
    # non-zero (dc_layer draws more than 64 weight bytes: enough to end past the first entry),
    # else down to a multiple of 128 bytes (more than 0)
    up = len(zeros) * eb >= 128 or len(nonzeros) * eb < 128
    while padded():
        if up:
            i = zeros.pop()
            d[i * eb] = rng.randint(1, 255)
            nonzeros.append(i)
        else:
            i = nonzeros.pop()
            d[i * eb:(i + 1) * eb] = bytes(eb)
    groups = [min(ak, k - g) * per_kernel for g in range(0, k, ak)]
    return compress_weights(bytes(d), groups, eb), sparsity


def nvidia_entries_per_slice(w: int, c: int, cfg, eb: int = 1) -> int:
    """D_ENTRY_PER_SLICE+1 as NVIDIA's compiler programs it (umd ConvCoreNode::calculateEPS,
    ../shared/nvdla/sw): R = entry bytes / memory atom atoms per entry; whole groups of R
    atoms take ``w`` entries, the last group's L atoms ceil(L*w/R), or ``w`` when L = 3. On
    nv_small (R = 1) that is w * ceil(c / 8); with R > 1 the packed minimum the hardware must
    fit (issue 30). ``eb`` 2: int16 elements in nv_full's 128-byte entries."""
    r = cfg.cbuf_bank_width * eb // cfg.atom_bytes
    atoms = ceil_div(c * eb, cfg.memory_atomic)
    last = atoms % r
    return atoms // r * w + (w if last == 3 else ceil_div(last * w, r))


def generate(seed: int, cfg, *, layers: int | None = None, max_ops: int | None = None,
             big_rate: float = 0.08, sdp_mem_rate: float = SDP_MEM_RATE) -> Program:
    """A random DC program from ``seed``: 1..3 layers in alternating register groups (module
    docstring); ``max_ops``: cap on each layer's atomic operations (default: a few thousand,
    an occasional larger layer); ``big_rate``: probability of a larger layer;
    ``sdp_mem_rate``: probability that every layer's SDP takes operands from memory on the fly
    (all layers or none: SDP_RDMA's register groups alternate with the others')."""
    rng = random.Random(f"dc-{seed}")
    mem = random.Random(f"dc-sdp-mem-{seed}")
    if mem.random() >= sdp_mem_rate:
        mem = None
    prec = draw_precision(rng, cfg)
    return _program("dc", seed, rng, lambda: layers or rng.choice((1, 1, 2, 2, 3)),
                    lambda alloc, w, prev, last: dc_layer(
                        rng, cfg, alloc, w, prev, max_ops=max_ops, big_rate=big_rate, mem=mem,
                        last=last, prec=prec))


def _program(kind: str, seed: int, rng: random.Random, count, make_layer) -> Program:
    """A program of ``kind`` from ``seed``: ``count()`` layers, each ``make_layer(alloc,
    writer, prev, last)`` -> (Layer, DcKept) after the previous one's DcKept ``prev``, then
    CDMA's CBUF flush poll first and the layers in alternating groups (``emit``)."""
    prog = Program(kind, seed, TraceWriter(f"{kind}_{seed}"))
    alloc = Alloc(rng)
    n = count()
    prev = None
    for i in range(n):
        lay, prev = make_layer(alloc, prog.writer, prev, i == n - 1)
        prog.layers.append(lay)
    prog.writer.poll(("CDMA", "S_CBUF_FLUSH_STATUS"), 1)
    emit(prog, prologue=[("GLB", "S_INTR_MASK", INTR_MASK_CONV)], intrs=INTRS)
    return prog


def fc_program(cfg, w: int, h: int, c: int, k: int, batches: int, prec: int = 0,
               seed: int = 0, sparsity: float | None = None) -> Program:
    """One inner-product layer (the kernel covers the W x H x C input, output 1 x 1 x K) of
    ``batches`` input cubes, ``prec`` 0 INT8 / 1 INT16 / 2 FP16, the other settings (SDP's
    operations, strides, banks) drawn from ``seed`` as :func:`generate_batch` draws them: the
    programs of the multi-batch benchmark (scripts/bench_batch.py). Kind ``fc<N>`` (named
    ``fc<N>_<seed>``). ``sparsity`` (0..1): compressed weights with that share of zeros
    (kind ``fc<N>c``; scripts/bench_compressed.py). Raises RuntimeError when no bank split
    holds the layer."""
    rng = random.Random(f"fc-{seed}")
    compress = sparsity is not None
    return _program(f"fc{batches}" + "c" * compress, seed, rng, lambda: 1,
                    lambda alloc, wr, prev, last: dc_layer(
                        rng, cfg, alloc, wr, prev, big_rate=0.0, max_ops=1 << 40, last=last,
                        prec=prec, batches=batches, fc=True, shape=(w, h, c, k),
                        compress=compress, sparsity=sparsity))


def generate_compressed(seed: int, cfg) -> Program:
    """A random DC program with compressed weights from ``seed`` (issue 34 item 3; format.rst
    "Sparse Compression option", unit description "Convolution DMA", programming guide
    Limitation "Convolution / General"): 1..3 layers as :func:`generate`'s (SDP operands from
    memory in some), each with sparse weights (0..100 % zeros) stored as compressed weights,
    WMB and WGS (:mod:`verif.gen.compress`), D_WEIGHT_BYTES and D_WMB_BYTES their sizes, data
    and weight banks leaving the last CBUF bank to the WMB; no CBUF reuse between layers.
    Kind ``compressed``: configurations with ``weight_compression``."""
    if not cfg.weight_compression:
        raise ValueError(f"{cfg.name} has no weight compression (configuration "
                         "weight_compression=False)")
    rng = random.Random(f"compressed-{seed}")
    mem = random.Random(f"compressed-sdp-mem-{seed}")
    if mem.random() >= SDP_MEM_RATE:
        mem = None
    prec = draw_precision(rng, cfg)
    return _program("compressed", seed, rng, lambda: rng.choice((1, 1, 2, 3)),
                    lambda alloc, w, prev, last: dc_layer(
                        rng, cfg, alloc, w, prev, mem=mem, last=last, prec=prec,
                        compress=True))


def generate_batch(seed: int, cfg) -> Program:
    """A random multi-batch DC program from ``seed`` (issue 34 item 2; unit description
    "Multi-Batch Mode", programming guide "Strategy selection" c and Limitation
    "Multi-batch", "Winograd/Batch"): 1..2 layers as :func:`generate`'s, each of N = 2..32
    input cubes D_BATCH_STRIDE apart (mostly few: 2..4 half of the time) sharing one set of
    kernels, SDP on the fly with register operands writing the N output cubes
    D_DST_BATCH_STRIDE apart (64-byte aligned base, strides); a third of the layers are
    inner-product layers (the kernel covers the input, output 1 x 1), for which the guide
    chooses multi-batch. No CBUF reuse into or out of a batch layer (not settled on NVIDIA's
    RTL; the model refuses it). Kind ``batch``: configurations with ``batch``."""
    if not cfg.batch:
        raise ValueError(f"{cfg.name} has no multi-batch mode (configuration batch=False)")
    rng = random.Random(f"batch-{seed}")
    prec = draw_precision(rng, cfg)

    def layer(alloc, w, prev, last):
        nb = rng.randint(2, 4) if rng.random() < 0.5 else rng.randint(2, cfg.max_batch)
        return dc_layer(rng, cfg, alloc, w, prev, big_rate=0.0, last=last, prec=prec,
                        batches=nb, fc=rng.random() < 0.33)
    return _program("batch", seed, rng, lambda: rng.choice((1, 1, 2)), layer)


def generate_batch_compressed(seed: int, cfg) -> Program:
    """A random multi-batch DC program with compressed weights from ``seed`` (issue 34: the
    modes' combinations): :func:`generate_batch`'s layers (N = 2..32 cubes, a third of them
    inner-product layers) with :func:`generate_compressed`'s weights (0..100 % zeros, WMB,
    WGS, the last CBUF bank left to the WMB). Kind ``batch_compressed``: configurations with
    both ``batch`` and ``weight_compression``."""
    if not (cfg.batch and cfg.weight_compression):
        raise ValueError(f"{cfg.name} lacks multi-batch or weight compression (configuration "
                         "batch, weight_compression)")
    rng = random.Random(f"batch-compressed-{seed}")
    prec = draw_precision(rng, cfg)

    def layer(alloc, w, prev, last):
        nb = rng.randint(2, 4) if rng.random() < 0.5 else rng.randint(2, cfg.max_batch)
        return dc_layer(rng, cfg, alloc, w, prev, big_rate=0.0, last=last, prec=prec,
                        batches=nb, fc=rng.random() < 0.33, compress=True)
    return _program("batch_compressed", seed, rng, lambda: rng.choice((1, 1, 2)), layer)
