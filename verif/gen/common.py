"""What the per-unit generators share: the generated program, address allocation, feature-cube
geometry (format.rst "Feature Data Format": ``base + (c // atom) * surface_stride + h *
line_stride + w * atom_bytes + c % atom``), random draws, and the emission of layers into both
ping-pong register groups back to back (v1_hwarch.rst "Ping-pong synchronization").
"""
from __future__ import annotations

import math
import random
import struct
from dataclasses import dataclass, field

import numpy as np

from verif.gen.writer import TraceWriter, reg_value

MEM_BASE = 0x8000_0000       # generated regions live above this address (as NVIDIA's traces)


@dataclass
class Layer:
    """One hardware layer of a program.

    ``units``: the register files it arms, the one raising the interrupt first (``("SDP",
    "SDP_RDMA")``); ``writes``: ``(unit, reg, value)`` register writes of its group (D_
    registers); ``out``: ``(base, size)`` byte regions the layer writes (zeroed before, checked
    after); ``desc``: a one-line description of the drawn settings; ``info``: the drawn
    settings by name, for tests (generator-specific; may be empty)."""
    units: tuple[str, ...]
    writes: list[tuple[str, str, int]]
    out: list[tuple[int, int]]
    desc: str = ""
    info: dict = field(default_factory=dict)


@dataclass
class Program:
    """A generated register program: its trace writer, layer type (``sdp``, ``pdp``, ``cdp``,
    ``sdp_operands``, ...), seed, layers, and whether NVIDIA's hardware completes it (``legal``:
    True, False, or None when the model decides)."""
    kind: str
    seed: int
    writer: TraceWriter
    layers: list[Layer] = field(default_factory=list)
    legal: bool | None = True

    @property
    def name(self) -> str:
        return self.writer.name

    def describe(self) -> str:
        return "; ".join(f"L{i}(g{i % 2}) {lay.desc}" for i, lay in enumerate(self.layers))


class Alloc:
    """Byte regions above ``MEM_BASE``, each aligned to ``align`` bytes with a random gap."""

    def __init__(self, rng: random.Random, base: int = MEM_BASE):
        self.rng, self.next = rng, base + rng.randrange(0, 64) * 32

    def take(self, size: int, align: int = 32) -> int:
        base = -(-self.next // align) * align
        self.next = base + max(size, 1) + self.rng.choice((0, 0, 32, 96, 4096 - 64))
        return base


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def weight_bytes_reg(n: int) -> int:
    """D_WEIGHT_BYTES for ``n`` weight bytes: rounded up to 128 bytes, as every NVIDIA trace
    (NVIDIA's nv_small RTL never finishes a layer whose count is not a multiple of 128; the
    model rejects it, ConvCore.run)."""
    return ceil_div(n, 128) * 128


def padded_past_entries(reg: int, n: int, entry_bytes: int) -> bool:
    """Whether D_WEIGHT_BYTES ``reg`` reaches past the last CBUF entry of ``n`` weight bytes:
    released normally, such weights put NVIDIA's CSC weight ring out of step for the next layer
    with the same banks (model ConvCore._weights), so generators keep them (SKIP_WEIGHT_RLS)."""
    return reg // entry_bytes != ceil_div(n, entry_bytes)


def cube_strides(rng: random.Random, w: int, h: int, atom_bytes: int, bpe: int = 1) -> tuple[int, int]:
    """(line stride, surface stride) in bytes of a ``w`` x ``h`` cube of ``bpe``-byte elements:
    packed most of the time, else with gaps of whole atoms."""
    line = w * atom_bytes * bpe
    if rng.random() < 0.35:
        line += atom_bytes * rng.randint(1, 4)
    surf = line * h
    if rng.random() < 0.35:
        surf += atom_bytes * rng.randint(1, 6)
    return line, surf


def cube_extent(w: int, h: int, c: int, line: int, surf: int, atom: int, atom_bytes: int,
                bpe: int = 1) -> int:
    """Bytes from the base of a ``w`` x ``h`` x ``c`` cube to the end of its last atom."""
    return (ceil_div(c, atom) - 1) * surf + (h - 1) * line + w * atom_bytes * bpe


def rand_bytes(rng: random.Random, n: int) -> bytes:
    return rng.randbytes(n)


#: INPUT_DATA / *_PRECISION encodings of the v1 register map
PRECISIONS = ("int8", "int16", "fp16")


def draw_precision(rng: random.Random, cfg, among=PRECISIONS) -> int:
    """A precision the configuration computes (0 INT8, 1 INT16, 2 FP16: ``cfg.precisions``)
    and ``among`` lists, evenly drawn; no draw when only one is left (an int8-only
    configuration's random stream is unchanged)."""
    ps = [PRECISIONS.index(p) for p in cfg.precisions if p in among]
    return ps[0] if len(ps) == 1 else rng.choice(ps)


#: fields that set the precision a unit computes in (v1 register map: the convolution units'
#: and SDP's PROC_PRECISION, PDP's and CDP's INPUT_DATA)
COMPUTE_PRECISION_FIELDS = ("PROC_PRECISION", "INPUT_DATA")


def program_precisions(prog: Program, cfg) -> frozenset[str]:
    """Precisions (of :data:`PRECISIONS`) ``prog``'s layers compute in: the values its register
    writes give the fields of :data:`COMPUTE_PRECISION_FIELDS` in ``cfg``'s register map (an
    unwritten field reads 0, INT8; a layer writing none of them computes in INT8). Image layers
    count their processing precision, not the pixels'. Raises KeyError for a write to a
    register the map lacks."""
    from hdl.regmap import decode, regmap_for
    rm = regmap_for(cfg)
    out = set()
    for lay in prog.layers:
        found = False
        for unit, reg, value in lay.writes:
            r = rm.lookup(f"{unit}.{reg}").reg
            for name, v in decode(r, value).items():
                if name in COMPUTE_PRECISION_FIELDS:
                    out.add(PRECISIONS[v] if v < len(PRECISIONS) else "int16")  # 3 reads as INT16
                    found = True
        if not found:
            out.add("int8")
    return frozenset(out)


#: the magnitudes (powers of two) :func:`fp16_values` draws from
FP16_SCALES = (-12, -4, 0, 4, 10)


class SameInBothMemories(bytes):
    """A memory image that :func:`spread_over_memories` loads unchanged into the secondary
    memory too: one whose bytes other images must agree with (the WMB and WGS of compressed
    weights, whose bit and byte counts the compressed weights follow)."""


class Fp16Bytes(bytes):
    """Bytes of fp16 data (what :func:`fp16_bytes` and :func:`fp16_conv_bytes` return): the
    second memory's copy of such an image keeps them fp16-like (:func:`spread_over_memories`)."""


def fp16_values(rng: random.Random, n: int, scale: int | None = None) -> list[int]:
    """``n`` fp16 bit patterns: normal values of one magnitude (about ``2**scale``, drawn from
    FP16_SCALES when None), some of any magnitude, and specials (signed zeros, denormals, the
    largest values, infinities, NaNs with random payloads) in about 3% each."""
    if scale is None:
        scale = rng.choice(FP16_SCALES)
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.03:
            v = rng.choice((0x0000, 0x8000, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00))
        elif r < 0.05:
            v = (rng.getrandbits(1) << 15) | 0x7C00 | rng.randint(1, 0x3FF)       # NaN
        elif r < 0.08:
            v = (rng.getrandbits(1) << 15) | rng.randint(1, 0x3FF)                 # denormal
        elif r < 0.2:
            v = rng.getrandbits(16) & 0xFFFF
            if (v >> 10) & 31 == 31:
                v ^= 0x4000
        else:
            e = min(max(15 + scale + rng.randint(-3, 3), 1), 30)
            v = (rng.getrandbits(1) << 15) | (e << 10) | rng.getrandbits(10)
        out.append(v)
    return out


def fp16_conv_bytes(rng: random.Random, n: int, specials: float = 0.0,
                    scale: int | None = None) -> bytes:
    """``n`` bytes (n even) of fp16 data for a convolution: values of one magnitude (about
    ``2**scale``, drawn from 2**-6 .. 2**4 when None; both signs), some zeros and denormals,
    and with probability ``specials`` per value an infinity or a NaN (each makes whole outputs
    NaN or extreme, so programs keep it rare)."""
    if scale is None:
        scale = rng.choice((-6, -3, -1, 0, 2, 4))
    out = bytearray()
    for _ in range(n // 2):
        r = rng.random()
        if r < specials:
            v = rng.choice((0x7C00, 0xFC00, 0x7E00 | rng.getrandbits(9), 0xFE00 | rng.getrandbits(9)))
        elif r < specials + 0.05:
            v = rng.choice((0x0000, 0x8000))
        elif r < specials + 0.08:
            v = (rng.getrandbits(1) << 15) | rng.randint(1, 0x3FF)                 # denormal
        else:
            x = rng.uniform(0.5, 2.0) * 2.0 ** (scale + rng.randint(-3, 3))
            v = fp16_of(-x if rng.random() < 0.5 else x)
        out += v.to_bytes(2, "little")
    return Fp16Bytes(out)


def fp16_of(x: float) -> int:
    """The fp16 pattern of ``x`` (a normal or denormal value within fp16's range), to nearest."""
    return struct.unpack("<H", struct.pack("<e", x))[0]


def fp32_of(x: float) -> int:
    """The fp32 bit pattern of ``x`` (within fp32's range), to nearest."""
    return struct.unpack("<I", struct.pack("<f", x))[0]


def fp16_bytes(rng: random.Random, n: int, scale: int | None = None) -> bytes:
    """``n`` bytes (n even) of little-endian :func:`fp16_values` (of magnitude ``scale``)."""
    return Fp16Bytes(b"".join(v.to_bytes(2, "little") for v in fp16_values(rng, n // 2, scale)))


def fp17_bits(x: float) -> int:
    """The fp17 bit pattern (sign, 6-bit exponent biased by 31, 10-bit mantissa; nv_full's PDP
    and CDP registers in FP16 mode) nearest to ``x``, ties to even; 0 for 0, the largest
    finite value (0xFBFF) beyond it."""
    if x == 0:
        return 0
    s = 1 if x < 0 else 0
    m, e = math.frexp(abs(x))                  # abs(x) = m * 2**e, 0.5 <= m < 1
    q = round(m * 2048)                        # 11 significant bits, ties to even
    if q == 2048:
        q, e = 1024, e + 1
    E = e - 1 + 31
    if E <= 0:
        return s << 16
    if E >= 63:
        return (s << 16) | 0xFBFF
    return (s << 16) | (E << 10) | (q & 0x3FF)


def small_biased(rng: random.Random, hi: int, small: int = 8) -> int:
    """0..hi, drawn from 0..small half of the time."""
    return rng.randint(0, min(small, hi)) if rng.random() < 0.5 else rng.randint(0, hi)


def signed(rng: random.Random, bits: int) -> int:
    """A signed ``bits``-bit value: full range, or small magnitudes, or the extremes."""
    r = rng.random()
    if r < 0.15:
        return rng.choice((-(1 << (bits - 1)), (1 << (bits - 1)) - 1, -1, 0, 1))
    if r < 0.55:
        return rng.randint(-(1 << min(bits - 1, 8)), (1 << min(bits - 1, 8)) - 1)
    return rng.randint(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def regs(unit: str, reg: str, **fields) -> tuple[str, str, int]:
    """A ``(unit, reg, value)`` register write built from field values."""
    return (unit, reg, reg_value(unit, reg, **fields))


def emit(prog: Program, prologue: list[tuple[str, str, int]] = (),
         intrs: tuple[str, ...] | None = None) -> None:
    """Write ``prog.layers`` into ``prog.writer``: ``prologue`` (single registers, e.g. a LUT)
    first; layer ``i`` in register group ``i % 2`` (``S_POINTER``), its units armed
    (``D_OP_ENABLE``) right after its registers, so the second layer is programmed and armed
    while the first runs; before layer ``i >= 2`` reuses a group, wait for layer ``i - 2``'s
    interrupts. Every output region is zeroed before and checked (CRC) after the last layer.

    ``intrs``: the done interrupts (GLB names: ``SDP``, ``CDMA_DAT``, ``CDMA_WT``, ``CACC``...)
    each layer raises, all waited for (sync ids ``layer<i>`` for the first, ``layer<i>_<name>``
    for the others; the GLB mask must leave them unmasked) before its group is programmed
    again: a group is reused only when every unit of the layer is done with it. Default: the
    first unit's (``lay.units[0]``) alone."""
    w = prog.writer
    for lay in prog.layers:
        for base, size in lay.out:
            w.mem_init(base, size)
    for unit, reg, value in prologue:
        w.reg_write((unit, reg), value)

    def notify(i: int) -> None:
        names = intrs or (prog.layers[i].units[0],)
        for k, name in enumerate(names):
            w.intr_notify(f"{name}_{i % 2}", f"layer{i}" if k == 0 else f"layer{i}_{name.lower()}")

    waited = set()
    for i, lay in enumerate(prog.layers):
        g = i % 2
        if i >= 2:
            notify(i - 2)
            waited.add(i - 2)
        w.comment(f"layer {i} (group {g}): {lay.desc}")
        for unit in lay.units:
            w.reg_write((unit, "S_POINTER"), g)
        for unit, reg, value in lay.writes:
            w.reg_write((unit, reg), value)
        for unit in lay.units:
            w.reg_write((unit, "D_OP_ENABLE"), 1)
    for i, lay in enumerate(prog.layers):
        if i not in waited:
            notify(i)
    for i, lay in enumerate(prog.layers):
        for base, size in lay.out:
            w.check_crc(f"layer{i}", base, size)


def field_writes(unit: str, fields: dict[str, int]) -> list[tuple[str, str, int]]:
    """Register writes ``(unit, reg, value)`` setting ``fields`` by field name alone (names
    unique in ``unit``; the other fields of a touched register are 0), in register-map order.
    Raises KeyError for an unknown or ambiguous name, ValueError for a value that does not fit
    its field (negative values: two's complement; an unsigned field takes no negative value)."""
    from hdl.regmap import REGMAP
    index, seen = {}, set()
    for r in REGMAP.unit(unit).registers:
        for f in r.fields:
            if f.name in seen:
                index.pop(f.name, None)
            else:
                index[f.name] = (r, f)
            seen.add(f.name)
    words: dict[str, int] = {}
    for name, val in fields.items():
        if name not in index:
            raise KeyError(f"{unit} has no field {name} (or the name is ambiguous)")
        r, f = index[name]
        width = f.msb - f.lsb + 1
        if not -(1 << (width - 1)) <= val < (1 << width) or (val < 0 and not f.signed):
            raise ValueError(f"{unit}.{r.name}.{name}={val} does not fit {width} bits"
                             f"{' (signed)' if f.signed else ''}")
        mask = ((1 << width) - 1) << f.lsb
        words[r.name] = (words.get(r.name, 0) & ~mask) | ((val << f.lsb) & mask)
    order = [r.name for r in REGMAP.unit(unit).registers]
    return [(unit, reg, words[reg]) for reg in order if reg in words]


def spread_over_memories(prog: Program, rng: random.Random) -> None:
    """Let ``prog`` use both memories of a configuration with the secondary memory interface
    (issue 30 item 4: random programs choose either memory for each surface).

    Every ``*_RAM_TYPE`` field of the program's register writes is drawn again (CV = 0 or
    MC = 1, per layer and per DMA engine); every ``mem_load`` into the primary memory is
    repeated into the secondary one with other random bytes (so that a read from the wrong
    memory changes the result; an image given as a ``.dat`` path or as
    :class:`SameInBothMemories` is loaded unchanged), every
    ``mem_init`` is repeated there, and every ``check_crc`` checks the region in both memories
    (the memory a layer did not write must keep its initial bytes). Edits ``prog.writer`` in
    place; the model's CRCs are filled afterwards as for any program."""
    from hdl.regmap import REGMAP
    from verif.gen.writer import _Check

    w = prog.writer
    out = []
    for line in w.lines:
        if isinstance(line, _Check):
            out += [line, _Check(line.sync, line.base, line.size, None, "sec_mem")]
            continue
        out.append(line)
        if line.startswith("reg_write("):
            name, value = line[len("reg_write("):].split(")", 1)[0].split(",")
            reg = REGMAP.lookup(name.strip()).reg
            v = int(value, 0)
            for f in reg.fields:
                if f.name.endswith("RAM_TYPE"):
                    v = (v & ~f.mask) | (rng.randint(0, 1) << f.lsb)
            if v != int(value, 0):
                out[-1] = line.replace(value.strip(), f"{v:#x}", 1)
        elif line.startswith("mem_init(pri_mem,"):
            out.append(line.replace("mem_init(pri_mem,", "mem_init(sec_mem,", 1))
        elif line.startswith("mem_load(pri_mem,"):
            file = line.split('"')[1]
            data = w.images[file]
            if not isinstance(data, (bytes, bytearray)) or isinstance(data, SameInBothMemories):
                out.append(line.replace("mem_load(pri_mem,", "mem_load(sec_mem,", 1))
                continue
            sec = f"sec_{file}"
            noise = rng.randbytes(len(data))
            if isinstance(data, Fp16Bytes):
                # fp16 data: other mantissas, the same exponents (random bytes would be rich in
                # NaNs and extremes, whose outputs test little)
                a = np.frombuffer(data, "<u2") ^ (np.frombuffer(noise, "<u2") & 0x3FF)
                noise = a.astype("<u2").tobytes()
            w.images[sec] = noise
            out.append(line.replace("mem_load(pri_mem,", "mem_load(sec_mem,", 1)
                       .replace(f'"{file}"', f'"{sec}"'))
    w.lines = out
