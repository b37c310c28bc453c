"""Deconvolution (transposed convolution) on NVDLA as NVIDIA's documents describe it: a register
program of ordinary int8 direct-convolution layers, one per output phase, and RUBIK contract
layers that interleave the phases (v1_ias_programming_guide.rst "Deconvolution" and "Rubik
programming / Contract"; v1_ias_unit_description.rst "Deconvolution" and "RUBIK / Contract";
v1_hwarch.rst "Data Reshape Engine").

**What is computed.** Input feature cube ``x`` (C, H, W) int8, kernels ``w`` (K, R, S, C) int8,
deconvolution strides ``sx``, ``sy``. The plain transposed convolution (int64)::

    T[k, y*sy + r, x*sx + s] += x[c, y, x] * w[k, r, s, c]      T: (K, (H-1)*sy + R, (W-1)*sx + S)

(:func:`transposed_conv`). The guide's method computes a window of ``T``: each phase convolution
has ``S' = ceil(S/sx)``, ``R' = ceil(R/sy)`` and, without padding (the guide's case), produces
``W' = W - S' + 1`` by ``H' = H - R' + 1`` outputs; the contract makes them a
``W'*sx`` x ``H'*sy`` x K cube. With the phase convolutions' zero padding ``pad = (left, right,
top, bottom)`` (each below S' or R', the convolution limitation "padding less than the kernel")
``W' = PL + W + PR - S' + 1`` and the output is::

    D[k, Y, X] = T[k, Y + (R'-1-PT)*sy, X + (S'-1-PL)*sx]      (0 where that is outside T)

for ``Y < H'*sy``, ``X < W'*sx``: ``pad = (S'-1, S'-1, R'-1, R'-1)`` gives the whole of ``T``
(followed by the zero rows/columns that make it a multiple of the strides). Each phase layer runs
CDMA -> CSC -> CMAC -> CACC -> SDP on the fly: CACC's CLIP_TRUNCATE is ``shift`` (0..16:
rounding half away from zero, as v1_ias_precision.rst "Truncate" says and NVIDIA's RTL does for
shifts up to 16), SDP's BS/BN/EW are bypassed and its output converter is the identity
(offset 0, scale 1, shift 0), so the written int8 is::

    out = clip(round_half_away_from_zero(D / 2**shift), -128, 127)

(:func:`deconv_reference`, plain numpy: no code of ``verif.model``). ``R'*S'*C <= 2**19`` keeps
every partial sum inside CACC's 34-bit accumulator, so its saturation never acts.

**Phases.** Phase ``(dy, dx)`` (``dy < sy``, ``dx < sx``) is an ordinary stride-1 convolution
with the sub-kernel ``w'[k, t, u, c] = w[k, (R'-1-t)*sy + dy, (S'-1-u)*sx + dx, c]`` (0 where
the index passes R or S): the kernel sampled every ``sy``-th row / ``sx``-th column from
``dy``/``dx`` and flipped (unit description: "serial convolution layers with order-reversed
kernels"); its output element ``(q, o)`` is ``D[k, o*sy + dy, q*sx + dx]``
(:func:`phase_kernel`). Every phase reads the same input; with ``DeconvLayout.reuse_data`` the
first keeps it in CBUF (SKIP_DATA_RLS) and the others take it from there (DATA_REUSE), the last
releasing it. Weights are in the direct-convolution format (format.rst "Basic Weight for Direct
Convolution"; :func:`pack_weights`), one image per phase; D_WEIGHT_BYTES rounded up to 128.

**Contract.** Phase ``p = dy*sx + dx``'s output cube (line stride ILS, surface stride ISS,
``G = ceil(K/32)`` surfaces of 32-channel atoms) is written at ``IA + p*CONTRACT_STRIDE_0``
(CONTRACT_STRIDE_0 = ``G*ISS``, the guide's ``ceil(DATAOUT_CHANNEL*BPE/32)*DAIN_SURF_STRIDE``,
or more): the "channel-extended cube" of the unit description. RUBIK (RUBIK_MODE = CONTRACT,
DECONV_X/Y_STRIDE = sx-1/sy-1) moves atom ``IA + g*ISS + h*ILS + (dy*sx+dx)*CS0 + w*32`` to
``OA + g*OSS + (h*sy+dy)*OLS + (w*sx+dx)*32`` (NVIDIA's RTL, verif/model/rubik.py).
DATAIN_CHANNEL+1 = K*sx*sy and DATAOUT_CHANNEL+1 = K as the guide's formula relates them,
CONTRACT_STRIDE_1 = sy*OLS.

**Schedules** (the guide's two): ``"a"`` runs all ``sx*sy`` phase convolutions, then one
contract (``sx*sy + 1`` hardware layers); ``"b"`` runs the ``sx`` phases of output row ``dy``
then a contract of that row (DECONV_Y_STRIDE = 0, output base ``OA + dy*OLS``, line stride
``sy*OLS``): ``(sx + 1)*sy`` layers, with one or two (the guide's "x2 ... suggested for
performance") phase-row buffers; the contract of row ``dy`` runs while the convolutions of row
``dy+1`` do.

**Program.** GLB's interrupt mask leaves SDP, CDMA_DAT, CDMA_WT, CACC and RUBIK; CDMA's
S_CBUF_FLUSH_STATUS is polled first. Convolution layers alternate the ping-pong groups of SDP,
CACC, CMAC_A/B, CSC, CDMA (armed in that order); a group is programmed again only after every
done interrupt of the layer that used it; a contract is armed only after the done interrupts of
the convolutions that write its input, and a phase-row buffer is written again only after the
contract that read it. Every D_ register of an armed unit is written (fields a layer does not
use as 0), so that nothing of an earlier program in the same simulation leaks in. The phase
cubes and the output are zeroed first and checked (CRC) at the end; with a secondary memory
interface the surfaces may live in either memory and the other memory holds random bytes at
the input's and weights' addresses and is checked to stay zero elsewhere.

:func:`build_deconv` builds the program of given data (:class:`DeconvCase`: the program, the
expected bytes, :meth:`DeconvCase.compare`); :func:`random_case` / :func:`generate` draw a
random legal deconvolution (``verif.gen.run`` kind ``deconv``, configurations with RUBIK).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import numpy as np

from verif.gen.common import Alloc, Layer, Program, ceil_div, padded_past_entries, small_biased, \
    weight_bytes_reg
from verif.gen.dc import INTRS, UNITS, nvidia_entries_per_slice
from verif.gen.writer import TraceWriter

__all__ = ["DeconvGeometry", "DeconvLayout", "DeconvCase", "Surface", "geometry_of", "transposed_conv",
           "deconv_reference", "phase_kernel", "pack_weights", "pack_feature", "unpack_feature",
           "cube_bytes", "build_deconv", "random_case", "generate", "OPS_BUDGET", "INTR_MASK"]

ATOM = 32                     #: bytes (= int8 channels) of a feature atom; RUBIK moves 32-byte atoms
MAX_SHIFT = 16                #: CACC CLIP_TRUNCATE up to which it rounds half away from zero exactly
MAX_KERNEL_ELEMS = 1 << 19    #: R'*S'*C: no partial sum leaves CACC's 34-bit accumulator
#: GLB S_INTR_MASK: CDP, PDP and BDMA done masked; SDP, RUBIK, CDMA_DAT, CDMA_WT, CACC not
INTR_MASK = 0x0FC
MC, CV = 1, 0                 #: *_RAM_TYPE values
MEMS = {MC: "pri_mem", CV: "sec_mem"}


# ------------------------------------------------------------------------------------------
# geometry and the numpy reference
# ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DeconvGeometry:
    """Sizes of one deconvolution (module docstring). Input W x H x C, K kernels R x S,
    strides ``sx``/``sy``, phase padding ``pl, pr, pt, pb``; derived: sub-kernel ``Rs`` x ``Ss``
    (R', S'), phase output ``wo`` x ``ho`` (W', H'), final output ``Wout`` x ``Hout`` x K and the
    offsets ``oy``, ``ox`` of its window in the transposed convolution ``T``."""
    W: int
    H: int
    C: int
    K: int
    R: int
    S: int
    sx: int
    sy: int
    pl: int = 0
    pr: int = 0
    pt: int = 0
    pb: int = 0

    @property
    def Rs(self) -> int:
        return ceil_div(self.R, self.sy)

    @property
    def Ss(self) -> int:
        return ceil_div(self.S, self.sx)

    @property
    def wo(self) -> int:
        return self.pl + self.W + self.pr - self.Ss + 1

    @property
    def ho(self) -> int:
        return self.pt + self.H + self.pb - self.Rs + 1

    @property
    def Wout(self) -> int:
        return self.wo * self.sx

    @property
    def Hout(self) -> int:
        return self.ho * self.sy

    @property
    def ox(self) -> int:
        return (self.Ss - 1 - self.pl) * self.sx

    @property
    def oy(self) -> int:
        return (self.Rs - 1 - self.pt) * self.sy

    @property
    def phases(self) -> list[tuple[int, int]]:
        """``(dy, dx)`` of every phase in contract order (``p = dy*sx + dx``)."""
        return [(dy, dx) for dy in range(self.sy) for dx in range(self.sx)]

    def check(self) -> None:
        """ValueError naming the parameter when the sizes cannot be programmed (field ranges of
        CDMA/CSC/RUBIK, the convolution limitation on padding, RUBIK's line limit)."""
        for name, v, lo, hi in (("W", self.W, 1, 8192), ("H", self.H, 1, 8192), ("C", self.C, 1, 8192),
                                ("K", self.K, 1, 8192), ("R", self.R, 1, None), ("S", self.S, 1, None),
                                ("sx", self.sx, 1, 32), ("sy", self.sy, 1, 32)):
            if not isinstance(v, (int, np.integer)) or v < lo or (hi is not None and v > hi):
                raise ValueError(f"{name}={v}: must be an integer in {lo}..{hi if hi else 'inf'}")
        if self.Ss > 32 or self.Rs > 32:
            raise ValueError(f"R={self.R}, S={self.S} with strides sy={self.sy}, sx={self.sx}: the "
                             f"sub-kernel {self.Rs}x{self.Ss} exceeds CSC's 32x32 (WEIGHT_WIDTH/HEIGHT_EXT)")
        for name, v, k, dim, hi in (("pad left", self.pl, self.Ss, "width", 31),
                                    ("pad right", self.pr, self.Ss, "width", 63),
                                    ("pad top", self.pt, self.Rs, "height", 31),
                                    ("pad bottom", self.pb, self.Rs, "height", 63)):
            if not isinstance(v, (int, np.integer)) or not 0 <= v < min(k, hi + 1):
                raise ValueError(f"{name}={v}: must be 0..{min(k - 1, hi)} (below the sub-kernel {dim} "
                                 f"{k}: programming guide Limitation, padding less than the kernel)")
        if self.wo < 1 or self.ho < 1:
            raise ValueError(f"input {self.W}x{self.H} with padding (l{self.pl},r{self.pr},t{self.pt},"
                             f"b{self.pb}) is smaller than the sub-kernel {self.Ss}x{self.Rs}: no output")
        if self.Rs * self.Ss * self.C > MAX_KERNEL_ELEMS:
            raise ValueError(f"C={self.C}: R'*S'*C = {self.Rs * self.Ss * self.C} over {MAX_KERNEL_ELEMS} "
                             "(CACC's 34-bit accumulator could saturate)")
        if self.Rs * self.Ss * self.C > 1 << 18:
            raise ValueError(f"C={self.C}: R'*S'*C over CDMA's 18-bit BYTE_PER_KERNEL")
        if self.K * self.sx * self.sy > 8192:
            raise ValueError(f"K={self.K}: K*sx*sy = {self.K * self.sx * self.sy} exceeds RUBIK's "
                             "13-bit DATAIN_CHANNEL")
        if self.Wout > 8192 or self.ho > 8192:
            raise ValueError(f"output width {self.Wout}: over RUBIK's limit deconv_x_stride * "
                             "datain_width <= 8192 (programming guide Limitation / Rubik)")


def _as_int8(name: str, a, ndim: int) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != ndim:
        raise ValueError(f"{name}: expected {ndim} dimensions, got shape {a.shape}")
    if a.dtype != np.int8:
        if not np.issubdtype(a.dtype, np.integer) or a.size and (a.min() < -128 or a.max() > 127):
            raise ValueError(f"{name}: int8 values expected (dtype {a.dtype})")
        a = a.astype(np.int8)
    return a


def geometry_of(feature, kernel, sx: int, sy: int, pad=(0, 0, 0, 0)) -> DeconvGeometry:
    """The checked :class:`DeconvGeometry` of ``feature`` (C, H, W) and ``kernel`` (K, R, S, C).
    Raises ValueError naming the parameter."""
    feature, kernel = _as_int8("feature", feature, 3), _as_int8("kernel", kernel, 4)
    if len(pad) != 4:
        raise ValueError(f"pad={pad}: (left, right, top, bottom) expected")
    C, H, W = feature.shape
    K, R, S, C2 = kernel.shape
    if C2 != C:
        raise ValueError(f"kernel: {C2} channels, the feature cube has {C} (kernel shape is (K, R, S, C))")
    g = DeconvGeometry(W, H, C, K, R, S, sx, sy, *(int(p) for p in pad))
    g.check()
    return g


def transposed_conv(feature, kernel, sx: int, sy: int) -> np.ndarray:
    """The plain transposed convolution of ``feature`` (C, H, W) with ``kernel`` (K, R, S, C),
    strides ``sx``, ``sy``: ``T[k, y*sy + r, x*sx + s] += feature[c, y, x] * kernel[k, r, s, c]``.
    Returns (K, (H-1)*sy + R, (W-1)*sx + S) int64 (exact)."""
    f = np.asarray(feature, dtype=np.int64)
    w = np.asarray(kernel, dtype=np.int64)
    C, H, W = f.shape
    K, R, S, _ = w.shape
    out = np.zeros((K, (H - 1) * sy + R, (W - 1) * sx + S), np.int64)
    for r in range(R):
        for s in range(S):
            out[:, r:r + (H - 1) * sy + 1:sy, s:s + (W - 1) * sx + 1:sx] += \
                np.einsum("kc,chw->khw", w[:, r, s, :], f)
    return out


def _round_shift(x: np.ndarray, shift: int) -> np.ndarray:
    """``x / 2**shift`` rounded half away from zero (int64)."""
    if shift == 0:
        return x
    mag = (np.abs(x) + (1 << (shift - 1))) >> shift
    return np.where(x < 0, -mag, mag)


def deconv_reference(feature, kernel, sx: int, sy: int, pad=(0, 0, 0, 0), shift: int = 0) -> np.ndarray:
    """The deconvolution the program computes (module docstring): the window ``D`` of
    :func:`transposed_conv` that the phase convolutions with padding ``pad`` = (left, right,
    top, bottom) cover, divided by ``2**shift`` (0..16) rounding half away from zero, saturated
    to int8. ``feature`` (C, H, W), ``kernel`` (K, R, S, C) int8. Returns (K, Hout, Wout) int8.
    Raises ValueError naming a bad parameter."""
    g = geometry_of(feature, kernel, sx, sy, pad)
    _check_shift(shift)
    t = transposed_conv(feature, kernel, sx, sy)
    d = np.zeros((g.K, g.Hout, g.Wout), np.int64)
    win = t[:, g.oy:g.oy + g.Hout, g.ox:g.ox + g.Wout]
    d[:, :win.shape[1], :win.shape[2]] = win
    return np.clip(_round_shift(d, shift), -128, 127).astype(np.int8)


def _check_shift(shift) -> None:
    if not isinstance(shift, (int, np.integer)) or not 0 <= shift <= MAX_SHIFT:
        raise ValueError(f"shift={shift}: must be 0..{MAX_SHIFT} (CACC CLIP_TRUNCATE rounds half away "
                         "from zero exactly up to 16)")


def phase_kernel(kernel, sx: int, sy: int, dx: int, dy: int) -> np.ndarray:
    """The sub-kernel of phase ``(dy, dx)`` (module docstring): (K, R', S', C) int8 with
    ``[k, t, u, c] = kernel[k, (R'-1-t)*sy + dy, (S'-1-u)*sx + dx, c]``, 0 past R or S."""
    kernel = np.asarray(kernel)
    K, R, S, C = kernel.shape
    rs, ss = ceil_div(R, sy), ceil_div(S, sx)
    sub = np.zeros((K, rs, ss, C), np.int8)
    for t in range(rs):
        r = (rs - 1 - t) * sy + dy
        for u in range(ss):
            s = (ss - 1 - u) * sx + dx
            if r < R and s < S:
                sub[:, t, u, :] = kernel[:, r, s, :]
    return sub


# ------------------------------------------------------------------------------------------
# memory images (format.rst)
# ------------------------------------------------------------------------------------------

def pack_weights(kernel, atomic_k: int, atomic_c: int) -> bytes:
    """``kernel`` (K, R, S, C) int8 in the uncompressed direct-convolution weight format
    (format.rst "Basic Weight for Direct Convolution"): kernels in groups of ``atomic_k``; each
    kernel cut into 1x1x``atomic_c`` small cubes (the last one shorter); a group scanned
    C' -> K -> W -> H -> C (C' fastest); groups back to back; zeros to a multiple of 128 bytes."""
    w = np.asarray(kernel).astype(np.int8)
    K, R, S, C = w.shape
    parts = []
    for k0 in range(0, K, atomic_k):
        grp = w[k0:k0 + atomic_k]                                 # (k, R, S, C)
        for c0 in range(0, C, atomic_c):
            blk = grp[:, :, :, c0:c0 + atomic_c]                  # (k, R, S, c')
            parts.append(blk.transpose(1, 2, 0, 3).ravel())       # H -> W -> K -> C'
    data = np.concatenate(parts).tobytes()
    return data + bytes(weight_bytes_reg(len(data)) - len(data))


def cube_bytes(W: int, H: int, C: int, line: int, surf: int) -> int:
    """Bytes from a feature cube's base to the end of its last atom (32-channel atoms)."""
    return (ceil_div(C, ATOM) - 1) * surf + (H - 1) * line + W * ATOM


def _offsets(W: int, H: int, C: int, line: int, surf: int) -> np.ndarray:
    """(C, H, W) byte offsets of the feature format: ``(c//32)*surf + h*line + w*32 + c%32``."""
    c = np.arange(C)[:, None, None]
    return (c // ATOM) * surf + np.arange(H)[None, :, None] * line + np.arange(W)[None, None, :] * ATOM + c % ATOM


def pack_feature(cube, line: int, surf: int, fill: bytes | None = None) -> bytes:
    """``cube`` (C, H, W) int8 as a feature-format image (format.rst "Feature Data Format", 32-byte
    atoms) with line/surface strides in bytes; the bytes the cube does not cover (gaps, channel
    padding of the last atom) are ``fill`` (same length; zeros when None)."""
    cube = np.asarray(cube).astype(np.int8)
    C, H, W = cube.shape
    n = cube_bytes(W, H, C, line, surf)
    buf = np.frombuffer(fill, np.uint8).copy() if fill is not None else np.zeros(n, np.uint8)
    if buf.size != n:
        raise ValueError(f"fill: {buf.size} bytes for a {n}-byte cube")
    buf[_offsets(W, H, C, line, surf)] = cube.view(np.uint8)
    return buf.tobytes()


def unpack_feature(data: bytes, W: int, H: int, C: int, line: int, surf: int) -> np.ndarray:
    """The (C, H, W) int8 cube of a feature-format image (inverse of :func:`pack_feature`)."""
    return np.frombuffer(bytes(data), np.uint8)[_offsets(W, H, C, line, surf)].view(np.int8)


# ------------------------------------------------------------------------------------------
# the program
# ------------------------------------------------------------------------------------------

@dataclass
class DeconvLayout:
    """How the program is laid out (all optional; :func:`random_case` draws them).

    ``schedule``: ``"a"`` (all phases, then one contract) or ``"b"`` (per output row of phases a
    contract); ``buffers``: phase-row buffers of schedule b (1 or 2); ``reuse_data``: phases after
    the first take the input from CBUF; ``data_banks`` / ``weight_banks``: CBUF banks (default:
    the fewest that hold the input slices, and the rest); ``grains``: CDMA FETCH_GRAIN;
    ``*_gap``: bytes (multiples of 32) added to the line / surface strides of the input, the
    phase cubes and the output, and ``cs0_gap`` to CONTRACT_STRIDE_0; ``rams``: the memory
    (``MC`` = 1, ``CV`` = 0) of ``input``, ``weights``, ``phases``, ``output``; ``decoys``: with
    a secondary memory, random bytes at the input's and weights' addresses in the other memory
    and the phase/output regions checked there too (never written)."""
    schedule: str = "a"
    buffers: int = 2
    reuse_data: bool = True
    data_banks: int | None = None
    weight_banks: int | None = None
    grains: int = 0
    in_gap: tuple[int, int] = (0, 0)
    phase_gap: tuple[int, int] = (0, 0)
    cs0_gap: int = 0
    out_gap: tuple[int, int] = (0, 0)
    rams: dict = field(default_factory=lambda: dict(input=MC, weights=MC, phases=MC, output=MC))
    decoys: bool = True


@dataclass(frozen=True)
class Surface:
    """A feature cube in memory: base, line and surface strides (bytes), memory (RAM type)."""
    base: int
    line: int
    surf: int
    ram: int
    W: int
    H: int
    C: int

    @property
    def size(self) -> int:
        return cube_bytes(self.W, self.H, self.C, self.line, self.surf)


@dataclass
class _Region:
    label: str
    surface: Surface | None          # None: a region that must stay zero
    base: int
    size: int
    mem: str
    expected: np.ndarray | None      # (C, H, W) int8


@dataclass
class DeconvCase:
    """A deconvolution program and what it must write.

    ``prog``: the register program (kind ``deconv``; ``prog.writer`` writes the trace);
    ``geom``, ``shift``, ``layout``; ``feature`` (C, H, W) and ``kernel`` (K, R, S, C);
    ``expected``: (K, Hout, Wout) int8, :func:`deconv_reference`; ``output``: its surface;
    ``checks``: one per ``check_crc`` line, in order (what :meth:`compare` reads)."""
    prog: Program
    geom: DeconvGeometry
    shift: int
    layout: DeconvLayout
    feature: np.ndarray
    kernel: np.ndarray
    expected: np.ndarray
    output: Surface
    checks: list = field(default_factory=list)

    def describe(self) -> str:
        g, lay = self.geom, self.layout
        return (f"deconv {g.W}x{g.H}x{g.C} k{g.R}x{g.S}x{g.K} s{g.sx},{g.sy} pad(l{g.pl},r{g.pr},t{g.pt},"
                f"b{g.pb}) sub-kernel {g.Rs}x{g.Ss} phases {g.wo}x{g.ho} out {g.Wout}x{g.Hout}x{g.K} "
                f"shift {self.shift} schedule {lay.schedule}"
                + (f" buffers {lay.buffers}" if lay.schedule == "b" else "")
                + f"{' reuse' if lay.reuse_data else ''} rams {lay.rams}")

    def compare(self, datas: list[bytes]) -> str | None:
        """The first mismatch between the bytes of the checks (``datas[i]``: the bytes of check
        ``i``, e.g. the model's ``TraceResult.checks[i].data``) and the numpy reference, as
        ``layer (what) at w,h,c: expected E, got G (N of M elements differ)``; None when every
        element of every phase cube and of the output is the reference's and the regions of the
        unused memory stayed zero (channels past K of the last atom are not compared)."""
        if len(datas) != len(self.checks):
            return f"{len(datas)} check regions for {len(self.checks)} checks (the program did not finish?)"
        for chk, data in zip(self.checks, datas):
            if len(data) != chk.size:
                return f"{chk.label}: {len(data)} bytes read for a {chk.size}-byte region"
            if chk.surface is None:
                nz = np.flatnonzero(np.frombuffer(bytes(data), np.uint8))
                if nz.size:
                    return (f"{chk.label}: byte {chk.base + int(nz[0]):#x} of {chk.mem} is "
                            f"{data[nz[0]]:#04x}, expected 0 (never written); {nz.size} non-zero bytes")
                continue
            s = chk.surface
            got = unpack_feature(data, s.W, s.H, s.C, s.line, s.surf)
            bad = np.argwhere(got != chk.expected)
            if bad.size:
                c, h, w = (int(v) for v in bad[0])
                return (f"{chk.label} at w={w} h={h} c={c}: expected {int(chk.expected[c, h, w])}, "
                        f"got {int(got[c, h, w])} ({len(bad)} of {got.size} elements differ)")
        return None


def _all_regs(unit: str, fields: dict[str, int]) -> list[tuple[str, str, int]]:
    """Writes of every writable D_ register of ``unit`` except D_OP_ENABLE: ``fields`` by name
    (unique in the unit), every other field 0. KeyError for an unknown or ambiguous field,
    ValueError for a value its field cannot hold."""
    from hdl.regmap import REGMAP
    u = REGMAP.unit(unit)
    index, seen = {}, set()
    for r in u.registers:
        for f in r.fields:
            if f.name in seen:
                index.pop(f.name, None)
            else:
                index[f.name] = (r, f)
            seen.add(f.name)
    words = {r.name: 0 for r in u.registers
             if r.double_buffered and r.name != "D_OP_ENABLE" and r.write_mask}
    for name, val in fields.items():
        if name not in index:
            raise KeyError(f"{unit} has no field {name} (or the name is ambiguous)")
        r, f = index[name]
        if not -(1 << (f.width - 1)) <= val < (1 << f.width) or (val < 0 and not f.signed):
            raise ValueError(f"{unit}.{r.name}.{name}={val} does not fit {f.width} bits")
        words[r.name] = (words[r.name] & ~f.mask) | ((val << f.lsb) & f.mask)
    return [(unit, name, v) for name, v in words.items()]


def _conv_fields(cfg, g: DeconvGeometry, inp: Surface, wbase: int, wreg: int, wram: int,
                 dst: Surface, shift: int, db: int, wb: int, eps: int, grains: int,
                 reuse: bool, skip_data: bool, skip_wt: bool) -> list[tuple[str, str, int]]:
    """Register writes of one phase convolution (programming guide "Convolution pipeline
    programming"; the same fields as ``verif.gen.dc.dc_layer``, the unused ones 0)."""
    bpk = g.Rs * g.Ss * g.C
    misc = dict(CONV_MODE=0, IN_PRECISION=0, PROC_PRECISION=0, DATA_REUSE=int(reuse), WEIGHT_REUSE=0,
                SKIP_DATA_RLS=int(skip_data), SKIP_WEIGHT_RLS=int(skip_wt))
    common = dict(misc, DATAIN_FORMAT=0, ENTRIES=eps - 1, WEIGHT_BYTES=wreg, DATA_BANK=db - 1,
                  WEIGHT_BANK=wb - 1, WEIGHT_FORMAT=0, BATCHES=0)
    cdma = dict(common, DATAIN_WIDTH=g.W - 1, DATAIN_HEIGHT=g.H - 1, DATAIN_CHANNEL=g.C - 1,
                DATAIN_WIDTH_EXT=g.W - 1, DATAIN_HEIGHT_EXT=g.H - 1, DATAIN_RAM_TYPE=inp.ram,
                DATAIN_ADDR_HIGH_0=inp.base >> 32, DATAIN_ADDR_LOW_0=inp.base & 0xFFFF_FFFF,
                LINE_STRIDE=inp.line, SURF_STRIDE=inp.surf,
                LINE_PACKED=int(inp.line == g.W * ATOM), SURF_PACKED=int(inp.surf == inp.line * g.H),
                GRAINS=grains, WEIGHT_RAM_TYPE=wram, BYTE_PER_KERNEL=bpk - 1, WEIGHT_KERNEL=g.K - 1,
                WEIGHT_ADDR_HIGH=wbase >> 32, WEIGHT_ADDR_LOW=wbase & 0xFFFF_FFFF,
                CONV_X_STRIDE=0, CONV_Y_STRIDE=0, PAD_LEFT=g.pl, PAD_RIGHT=g.pr, PAD_TOP=g.pt,
                PAD_BOTTOM=g.pb, PAD_VALUE=0, DMA_EN=0)
    csc = dict(common, DATAIN_WIDTH_EXT=g.W - 1, DATAIN_HEIGHT_EXT=g.H - 1, DATAIN_CHANNEL_EXT=g.C - 1,
               Y_EXTENSION=0, WEIGHT_WIDTH_EXT=g.Ss - 1, WEIGHT_HEIGHT_EXT=g.Rs - 1,
               WEIGHT_CHANNEL_EXT=g.C - 1, WEIGHT_KERNEL=g.K - 1, DATAOUT_WIDTH=g.wo - 1,
               DATAOUT_HEIGHT=g.ho - 1, DATAOUT_CHANNEL=g.K - 1, ATOMICS=g.wo * g.ho - 1,
               RLS_SLICES=g.H - 1, CONV_X_STRIDE_EXT=0, CONV_Y_STRIDE_EXT=0, X_DILATION_EXT=0,
               Y_DILATION_EXT=0, PAD_LEFT=g.pl, PAD_TOP=g.pt, PAD_VALUE=0)
    cmac = dict(CONV_MODE=0, PROC_PRECISION=0)
    one = int(g.wo == 1 and g.ho == 1)
    cacc = dict(CONV_MODE=0, PROC_PRECISION=0, DATAOUT_WIDTH=g.wo - 1, DATAOUT_HEIGHT=g.ho - 1,
                DATAOUT_CHANNEL=g.K - 1, DATAOUT_ADDR=dst.base & 0xFFFF_FFFF, BATCHES=0,
                LINE_STRIDE=dst.line, SURF_STRIDE=dst.surf, LINE_PACKED=one, SURF_PACKED=one,
                CLIP_TRUNCATE=shift)
    byp = {f"{s}_{x}BYPASS": 1 for s in ("BS", "BN", "EW") for x in ("", "ALU_", "MUL_")}
    sdp = dict(byp, BS_RELU_BYPASS=1, BN_RELU_BYPASS=1, EW_LUT_BYPASS=1, EW_ALU_CVT_BYPASS=1,
               EW_MUL_CVT_BYPASS=1, WIDTH=g.wo - 1, HEIGHT=g.ho - 1, CHANNEL=g.K - 1,
               DST_BASE_ADDR_HIGH=dst.base >> 32, DST_BASE_ADDR_LOW=dst.base & 0xFFFF_FFFF,
               DST_LINE_STRIDE=dst.line, DST_SURFACE_STRIDE=dst.surf, DST_RAM_TYPE=dst.ram,
               PROC_PRECISION=0, OUT_PRECISION=0, FLYING_MODE=1, OUTPUT_DST=0, WINOGRAD=0,
               BATCH_NUMBER=0, CVT_OFFSET=0, CVT_SCALE=1, CVT_SHIFT=0)
    writes = []
    for unit, fields in (("SDP", sdp), ("CDMA", cdma), ("CSC", csc), ("CMAC_A", cmac),
                         ("CMAC_B", cmac), ("CACC", cacc)):
        writes += _all_regs(unit, fields)
    return writes


def _contract_fields(inp: Surface, cs0: int, out_base: int, ols: int, oss: int, out_ram: int,
                     sx: int, sy: int, K: int) -> list[tuple[str, str, int]]:
    """Register writes of one RUBIK contract (programming guide "Rubik programming / Contract")
    of ``sx`` x ``sy`` phase cubes ``inp`` (W' x H' x K each, ``cs0`` bytes apart)."""
    return _all_regs("RBK", dict(
        RUBIK_MODE=0, IN_PRECISION=0, DATAIN_RAM_TYPE=inp.ram, DATAOUT_RAM_TYPE=out_ram,
        DATAIN_WIDTH=inp.W - 1, DATAIN_HEIGHT=inp.H - 1, DATAIN_CHANNEL=K * sx * sy - 1,
        DATAOUT_CHANNEL=K - 1, DAIN_ADDR_HIGH=inp.base >> 32,
        DAIN_ADDR_LOW=(inp.base & 0xFFFF_FFFF) >> 5, DAIN_LINE_STRIDE=inp.line >> 5,
        DAIN_SURF_STRIDE=inp.surf >> 5, DAOUT_ADDR_HIGH=out_base >> 32,
        DAOUT_ADDR_LOW=(out_base & 0xFFFF_FFFF) >> 5, DAOUT_LINE_STRIDE=ols >> 5,
        DAOUT_SURF_STRIDE=oss >> 5, CONTRACT_STRIDE_0=cs0 >> 5, CONTRACT_STRIDE_1=(sy * ols) >> 5,
        DECONV_X_STRIDE=sx - 1, DECONV_Y_STRIDE=sy - 1))


def _gap(name: str, v) -> int:
    if not isinstance(v, (int, np.integer)) or v < 0 or v % ATOM:
        raise ValueError(f"layout {name}={v}: a multiple of {ATOM} bytes >= 0 expected")
    return int(v)


def build_deconv(cfg, feature, kernel, sx: int, sy: int, *, pad=(0, 0, 0, 0), shift: int = 0,
                 layout: DeconvLayout | None = None, name: str = "deconv",
                 rng: random.Random | None = None, seed: int = 0) -> DeconvCase:
    """The register program of the deconvolution of ``feature`` (C, H, W) int8 by ``kernel``
    (K, R, S, C) int8 with strides ``sx``, ``sy`` on configuration ``cfg`` (module docstring;
    the phase convolutions' padding ``pad`` = (left, right, top, bottom), CACC's truncation
    ``shift``), laid out as ``layout`` says (default :class:`DeconvLayout`).

    Memory regions are allocated from ``verif.gen.common.MEM_BASE`` with random gaps from
    ``rng`` (default ``random.Random(seed)``), which also draws the bytes the data do not cover
    (stride gaps, padding channels, decoys). Returns a :class:`DeconvCase` whose ``prog.writer``
    holds the trace (write it with ``verif.gen.writer.fill_crcs_from_model`` or
    ``verif.gen.run.prepare``).

    Raises ValueError naming the parameter: shapes or values that are not int8 cubes, sizes
    outside the registers' ranges or NVDLA's limitations (``DeconvGeometry.check``), a shift
    outside 0..16, a configuration without RUBIK or whose memory atom is not 32 bytes, an input
    that does not fit CBUF, a CV memory without a secondary memory interface, a bad layout.
    """
    feature, kernel = _as_int8("feature", feature, 3), _as_int8("kernel", kernel, 4)
    g = geometry_of(feature, kernel, sx, sy, pad)
    _check_shift(shift)
    lay = layout or DeconvLayout()
    if not cfg.rubik or not cfg.rubik_contract:
        raise ValueError(f"cfg: {cfg.name} has no RUBIK contract (rubik / rubik_contract)")
    if cfg.memory_atomic != ATOM or cfg.atom_bytes != ATOM:
        raise ValueError(f"cfg: {cfg.name}'s memory atom is {cfg.atom_bytes} bytes; RUBIK's contract "
                         "moves 32-byte atoms of 32 int8 channels")
    if "int8" not in str(cfg.feature_data_type) or "int8" not in str(cfg.weight_data_type):
        raise ValueError(f"cfg: {cfg.name} has no int8 pipeline")
    if lay.schedule not in ("a", "b"):
        raise ValueError(f"layout schedule={lay.schedule!r}: 'a' or 'b'")
    if lay.schedule == "b" and lay.buffers not in (1, 2):
        raise ValueError(f"layout buffers={lay.buffers}: 1 or 2")
    rams = {**dict(input=MC, weights=MC, phases=MC, output=MC), **(lay.rams or {})}
    for k, v in rams.items():
        if k not in ("input", "weights", "phases", "output") or v not in (MC, CV):
            raise ValueError(f"layout rams[{k!r}]={v}: keys input/weights/phases/output, values 1 (MC) or 0 (CV)")
        if v == CV and not cfg.secondary_memif:
            raise ValueError(f"layout rams[{k!r}]=CV: {cfg.name} has no secondary memory interface")
    in_gap = tuple(_gap("in_gap", v) for v in lay.in_gap)
    ph_gap = tuple(_gap("phase_gap", v) for v in lay.phase_gap)
    out_gap = tuple(_gap("out_gap", v) for v in lay.out_gap)
    cs0_gap = _gap("cs0_gap", lay.cs0_gap)
    rng = rng or random.Random(seed)

    # ---- CBUF
    depth, nbanks, ebytes = cfg.cbuf_bank_depth, cfg.cbuf_bank_number, cfg.cbuf_bank_width
    bank_bytes = depth * ebytes
    eps = nvidia_entries_per_slice(g.W, g.C, cfg)
    if eps > 4096:
        raise ValueError(f"W={g.W}, C={g.C}: {eps} CBUF entries per input line, over ENTRY_PER_SLICE's range")
    bpk = g.Rs * g.Ss * g.C
    wbytes = bpk * g.K
    wreg = weight_bytes_reg(wbytes)
    db_need = ceil_div(eps * g.H, depth)
    wb_need = ceil_div(bpk * min(g.K, cfg.mac_atomic_k) + 128, bank_bytes)
    if db_need + wb_need > nbanks:
        raise ValueError(f"feature: the input ({g.H} lines of {eps} CBUF entries: {db_need} banks) and "
                         f"one kernel group of sub-kernels ({wb_need} banks) exceed {cfg.name}'s "
                         f"{nbanks} CBUF banks (only full-input mode exists)")
    db = lay.data_banks if lay.data_banks is not None else db_need
    wb = lay.weight_banks if lay.weight_banks is not None else nbanks - db
    if not (db_need <= db and wb_need <= wb and db + wb <= nbanks):
        raise ValueError(f"layout data_banks={db}, weight_banks={wb}: need >= {db_need} and >= {wb_need}, "
                         f"together <= {nbanks}")
    grain_max = max(0, min(4095, db * depth // eps - 1))
    if not 0 <= lay.grains <= grain_max:
        raise ValueError(f"layout grains={lay.grains}: 0..{grain_max} ((GRAINS+1) slices within the data banks)")
    # weights padded past their last CBUF entry and released normally put CSC's weight ring out
    # of step for the next layer on the same banks (verif.gen.common.padded_past_entries): such
    # phases keep their weights (SKIP_WEIGHT_RLS; the next layer frees them all)
    skip_wt = padded_past_entries(wreg, wbytes, ebytes)
    if skip_wt and ceil_div(wreg + 128, bank_bytes) > wb:
        raise ValueError(f"kernel: {wreg} weight bytes per phase (padded past their last CBUF entry, so "
                         f"kept with SKIP_WEIGHT_RLS) do not fit {wb} weight banks")

    # ---- memory
    w = TraceWriter(name)
    prog = Program("deconv", seed, w)
    alloc = Alloc(rng)
    other = {MC: CV, CV: MC}
    decoys = lay.decoys and cfg.secondary_memif

    def load(base: int, data: bytes, ram: int) -> None:
        w.mem_load(base, data, mem=MEMS[ram])
        if decoys:
            w.mem_load(base, rng.randbytes(len(data)), mem=MEMS[other[ram]])

    line = g.W * ATOM + in_gap[0]
    surf = line * g.H + in_gap[1]
    if g.W == 1 and g.H == 1:
        line = surf = ATOM                       # Limitation / Data Format: 1x1xC is packed
    inp = Surface(0, line, surf, rams["input"], g.W, g.H, g.C)
    n = inp.size
    inp = Surface(alloc.take(n), line, surf, inp.ram, g.W, g.H, g.C)
    load(inp.base, pack_feature(feature, line, surf, rng.randbytes(n)), inp.ram)
    wimg = []
    for dy, dx in g.phases:
        data = pack_weights(phase_kernel(kernel, g.sx, g.sy, dx, dy), cfg.mac_atomic_k, cfg.mac_atomic_c)
        base = alloc.take(len(data), 128)
        load(base, data, rams["weights"])
        wimg.append(base)

    ils = g.wo * ATOM + ph_gap[0]
    iss = ils * g.ho + ph_gap[1]
    if g.wo == 1 and g.ho == 1:
        ils = iss = ATOM                         # SDP writes a 1x1 cube's atoms back to back
    G = ceil_div(g.K, ATOM)
    cs0 = G * iss + cs0_gap
    per_buf = g.sx * g.sy if lay.schedule == "a" else g.sx
    nbuf = 1 if lay.schedule == "a" else min(lay.buffers, g.sy)
    cube_n = cube_bytes(g.wo, g.ho, g.K, ils, iss)
    bufs = [alloc.take(cs0 * (per_buf - 1) + cube_n) for _ in range(nbuf)]
    ols = g.Wout * ATOM + out_gap[0]
    oss = ols * g.Hout + out_gap[1]
    out = Surface(0, ols, oss, rams["output"], g.Wout, g.Hout, g.K)
    out = Surface(alloc.take(out.size), ols, oss, out.ram, g.Wout, g.Hout, g.K)

    def slot(dy: int, dx: int) -> Surface:
        """Where phase (dy, dx)'s cube goes."""
        if lay.schedule == "a":
            return Surface(bufs[0] + (dy * g.sx + dx) * cs0, ils, iss, rams["phases"], g.wo, g.ho, g.K)
        return Surface(bufs[dy % nbuf] + dx * cs0, ils, iss, rams["phases"], g.wo, g.ho, g.K)

    expected = deconv_reference(feature, kernel, g.sx, g.sy, (g.pl, g.pr, g.pt, g.pb), shift)

    # ---- layers, in programming order: (kind, what it does, Layer)
    writer_of: dict[int, tuple] = {}     # slot base -> (label, dy, dx, step) of its last writer
    steps = []
    nconv = len(g.phases)
    for i, (dy, dx) in enumerate(g.phases):
        reuse = lay.reuse_data and i > 0
        keep = lay.reuse_data and i < nconv - 1
        dst = slot(dy, dx)
        writes = _conv_fields(cfg, g, inp, wimg[i], wreg, rams["weights"], dst, shift, db, wb, eps,
                              lay.grains, reuse, keep, skip_wt)
        desc = (f"conv phase dy={dy} dx={dx}: {g.W}x{g.H}x{g.C} * {g.Rs}x{g.Ss}x{g.K} pad(l{g.pl},r{g.pr},"
                f"t{g.pt},b{g.pb}) -> {g.wo}x{g.ho} at {dst.base:#x} clip {shift} banks {db}+{wb} eps {eps}"
                f"{' DATA_REUSE' if reuse else ''}{' SKIP_DATA_RLS' if keep else ''}"
                f"{' SKIP_WEIGHT_RLS' if skip_wt else ''}")
        steps.append(("conv", dict(dy=dy, dx=dx, slot=dst),
                      Layer(UNITS, writes, [(dst.base, dst.size)], desc, dict(phase=(dy, dx)))))
        if lay.schedule == "b" and dx == g.sx - 1:
            src = slot(dy, 0)                          # the row's sx phase cubes, cs0 apart
            steps.append(("rbk", dict(dy=dy, buf=dy % nbuf),
                          Layer(("RBK",), _contract_fields(src, cs0, out.base + dy * ols, g.sy * ols, oss,
                                                           out.ram, g.sx, 1, g.K),
                                [(out.base, out.size)],
                                f"RUBIK contract of phase row dy={dy}: {g.sx} phases {g.wo}x{g.ho}x{g.K} "
                                f"-> rows {dy}::{g.sy} of the output")))
    if lay.schedule == "a":
        src = Surface(bufs[0], ils, iss, rams["phases"], g.wo, g.ho, g.K)
        steps.append(("rbk", dict(dy=None, buf=0),
                      Layer(("RBK",), _contract_fields(src, cs0, out.base, ols, oss, out.ram, g.sx, g.sy, g.K),
                            [(out.base, out.size)],
                            f"RUBIK contract of {g.sx}x{g.sy} phases {g.wo}x{g.ho}x{g.K} -> "
                            f"{g.Wout}x{g.Hout}x{g.K}")))
    prog.layers = [s[2] for s in steps]

    # ---- emission: waits keep every group, buffer and input ready before it is used
    regions = []                                        # (base, size, ram) zeroed and checked
    for kind, info, layer in steps:
        if kind == "conv" and (info["slot"].base, info["slot"].size) not in [(b, s) for b, s, _ in regions]:
            regions.append((info["slot"].base, info["slot"].size, info["slot"].ram))
    regions.append((out.base, out.size, out.ram))
    for base, size, ram in regions:
        w.mem_init(base, size, MEMS[ram])
        if decoys:
            w.mem_init(base, size, MEMS[other[ram]])
    w.reg_write(("GLB", "S_INTR_MASK"), INTR_MASK, "SDP, RUBIK, CDMA_DAT/WT and CACC done interrupts")
    w.poll(("CDMA", "S_CBUF_FLUSH_STATUS"), 1)

    waited: set[int] = set()
    sync_of: dict[int, str] = {}
    conv_ids = [i for i, s in enumerate(steps) if s[0] == "conv"]
    rbk_ids = [i for i, s in enumerate(steps) if s[0] == "rbk"]
    group_of = {i: conv_ids.index(i) % 2 for i in conv_ids} | {i: rbk_ids.index(i) % 2 for i in rbk_ids}

    def wait(i: int) -> None:
        """Wait for every interrupt of layer ``i`` and of the earlier layers of its kind."""
        ids = conv_ids if i in conv_ids else rbk_ids
        for j in ids[:ids.index(i) + 1]:
            if j in waited:
                continue
            names = INTRS if steps[j][0] == "conv" else ("RUBIK",)
            for k, nm in enumerate(names):
                sync = f"layer{j}" if k == 0 else f"layer{j}_{nm.lower()}"
                w.intr_notify(f"{nm}_{group_of[j]}", sync)
            sync_of[j] = f"layer{j}"
            waited.add(j)

    for i, (kind, info, layer) in enumerate(steps):
        ids = conv_ids if kind == "conv" else rbk_ids
        k = ids.index(i)
        if k >= 2:
            wait(ids[k - 2])                           # its register group is free again
        if kind == "conv" and lay.schedule == "b" and info["dx"] == 0 and info["dy"] >= nbuf:
            wait(rbk_ids[info["dy"] - nbuf])           # the contract that read this buffer is done
        if kind == "rbk":
            wait(max(j for j in conv_ids if j < i))    # its phase cubes are written
        grp = group_of[i]
        w.comment(f"layer {i} (group {grp}): {layer.desc}")
        for unit in layer.units:
            w.reg_write((unit, "S_POINTER"), grp)
        for unit, reg, value in layer.writes:
            w.reg_write((unit, reg), value)
        for unit in layer.units:
            w.reg_write((unit, "D_OP_ENABLE"), 1)
        if kind == "conv":
            writer_of[info["slot"].base] = (f"layer {i} (conv phase dy={info['dy']} dx={info['dx']})",
                                            info["dy"], info["dx"], i)
    wait(conv_ids[-1])
    wait(rbk_ids[-1])

    # ---- checks
    checks = []
    last = f"layer{rbk_ids[-1]}"
    for base, size, ram in regions:
        if base == out.base:
            surf_, exp, label, sync = out, expected, f"layer {rbk_ids[-1]} (RUBIK contract output)", last
        else:
            label, dy, dx, j = writer_of[base]
            surf_ = Surface(base, ils, iss, ram, g.wo, g.ho, g.K)
            exp, sync = expected[:, dy::g.sy, dx::g.sx], sync_of[j]
        w.check_crc(sync, base, size, mem=MEMS[ram])
        checks.append(_Region(label, surf_, base, size, MEMS[ram], exp))
        if decoys:
            w.check_crc(sync, base, size, mem=MEMS[other[ram]])
            checks.append(_Region(f"{label}, the unused memory", None, base, size, MEMS[other[ram]], None))
    case = DeconvCase(prog, g, shift, lay, feature, kernel, expected, out, checks)
    for layer in prog.layers:
        layer.info["case"] = case
    return case


# ------------------------------------------------------------------------------------------
# random legal deconvolutions
# ------------------------------------------------------------------------------------------

#: atomic operations of all phases together (the RTL runs a case in seconds)
OPS_BUDGET = 12000


def _stride(rng: random.Random) -> int:
    r = rng.random()
    return 1 if r < 0.15 else 2 if r < 0.55 else rng.randint(3, 4) if r < 0.92 else rng.randint(5, 8)


def _values(rng: random.Random, shape) -> np.ndarray:
    """int8 values: full range, small magnitudes, or sparse with extremes."""
    nrng = np.random.default_rng(rng.getrandbits(64))
    r = rng.random()
    if r < 0.6:
        return nrng.integers(-128, 128, shape, dtype=np.int16).astype(np.int8)
    if r < 0.85:
        return nrng.integers(-8, 8, shape, dtype=np.int16).astype(np.int8)
    v = nrng.choice(np.array([-128, 127, -1, 1, 0, 0, 0], np.int16), shape)
    return v.astype(np.int8)


def random_case(seed: int, cfg) -> DeconvCase:
    """A random legal deconvolution for ``cfg`` (ValueError without RUBIK), from ``seed``: strides
    1..4 (sometimes up to 8) per axis, kernel 1..2*stride+1 (sometimes larger), input 1..10 x 1..8
    x 1..80 channels, 1..70 kernels, phase padding between none (the guide's case) and the whole
    transposed convolution, CACC shift around the result's magnitude (sometimes smaller, to
    saturate), schedule a or b (one or two buffers), data reuse or not, CBUF banks, FETCH_GRAIN,
    stride gaps, and with a secondary memory interface every surface in either memory; at most
    ``OPS_BUDGET`` atomic operations."""
    if not cfg.rubik:
        raise ValueError(f"{cfg.name} has no RUBIK (rubik=False)")
    rng = random.Random(f"deconv-{seed}")
    ac, ak = cfg.mac_atomic_c, cfg.mac_atomic_k
    for _ in range(500):
        sx, sy = _stride(rng), _stride(rng)
        big = rng.random() < 0.1
        R = rng.randint(1, 2 * sy + 1) if not big else rng.randint(1, 4 * sy)
        S = rng.randint(1, 2 * sx + 1) if not big else rng.randint(1, 4 * sx)
        C = rng.randint(1, 16) if rng.random() < 0.55 else rng.randint(17, 80)
        K = rng.randint(1, 16) if rng.random() < 0.55 else rng.randint(17, 70)
        W, H = rng.randint(1, 10), rng.randint(1, 8)
        Rs, Ss = ceil_div(R, sy), ceil_div(S, sx)
        full = rng.random() < 0.3
        pads = []
        for k in (Ss, Ss, Rs, Rs):
            pads.append(k - 1 if full else 0 if rng.random() < 0.5 else rng.randint(0, k - 1))
        g = DeconvGeometry(W, H, C, K, R, S, sx, sy, *pads)
        try:
            g.check()
        except ValueError:
            continue
        ops = g.wo * g.ho * ceil_div(K, ak) * ceil_div(C, ac) * Rs * Ss * sx * sy
        if ops > OPS_BUDGET or K * sx * sy > 8192:
            continue
        if _fits(cfg, g):
            break
    else:
        raise RuntimeError(f"deconv seed {seed}: no geometry found")
    feature = _values(rng, (C, H, W))
    kernel = _values(rng, (K, R, S, C))
    # the shift that brings the sums' spread to about 2**5 (mostly unsaturated), +-2; in one
    # case of ten any shift (often saturating)
    d = transposed_conv(feature, kernel, sx, sy)
    bits = math.log2(float(np.sqrt(np.mean(d.astype(np.float64) ** 2))) + 1)
    shift = max(0, min(MAX_SHIFT, round(bits) - 5 + rng.randint(-2, 2)))
    if rng.random() < 0.1:
        shift = rng.randint(0, MAX_SHIFT)

    lay = DeconvLayout()
    lay.schedule = "b" if rng.random() < 0.35 else "a"
    lay.buffers = 2 if rng.random() < 0.7 else 1
    lay.reuse_data = rng.random() < 0.6
    depth, nbanks = cfg.cbuf_bank_depth, cfg.cbuf_bank_number
    eps = nvidia_entries_per_slice(W, C, cfg)
    db_need = ceil_div(eps * H, depth)
    wb_need = ceil_div(Rs * Ss * C * min(K, ak) + 128, depth * cfg.cbuf_bank_width)
    db = db_need if rng.random() < 0.5 else rng.randint(db_need, nbanks - wb_need)
    wb = nbanks - db if rng.random() < 0.5 else rng.randint(wb_need, nbanks - db)
    wreg = weight_bytes_reg(Rs * Ss * C * K)
    if padded_past_entries(wreg, Rs * Ss * C * K, cfg.cbuf_bank_width) and \
            ceil_div(wreg + 128, depth * cfg.cbuf_bank_width) > wb:
        wb = nbanks - db
    lay.data_banks, lay.weight_banks = db, wb
    lay.grains = small_biased(rng, max(0, min(4095, db * depth // eps - 1)), 2)
    gap = lambda: ATOM * rng.choice((0, 0, 0, 1, 3))          # noqa: E731
    lay.in_gap, lay.phase_gap, lay.out_gap = (gap(), gap()), (gap(), gap()), (gap(), gap())
    lay.cs0_gap = ATOM * rng.choice((0, 0, 0, 1, 5))
    if cfg.secondary_memif and rng.random() < 0.6:
        lay.rams = {k: rng.randint(0, 1) for k in ("input", "weights", "phases", "output")}
    return build_deconv(cfg, feature, kernel, sx, sy, pad=tuple(pads), shift=shift, layout=lay,
                        name=f"deconv_{seed}", rng=rng, seed=seed)


def _fits(cfg, g: DeconvGeometry) -> bool:
    """Whether ``g``'s input and one kernel group of sub-kernels fit ``cfg``'s CBUF."""
    eps = nvidia_entries_per_slice(g.W, g.C, cfg)
    db_need = ceil_div(eps * g.H, cfg.cbuf_bank_depth)
    wb_need = ceil_div(g.Rs * g.Ss * g.C * min(g.K, cfg.mac_atomic_k) + 128,
                       cfg.cbuf_bank_depth * cfg.cbuf_bank_width)
    return eps <= 4096 and db_need + wb_need <= cfg.cbuf_bank_number


def generate(seed: int, cfg) -> Program:
    """The random deconvolution program of ``seed`` for ``cfg`` (``verif.gen.run`` kind
    ``deconv``; :func:`random_case`). ValueError without RUBIK."""
    return random_case(seed, cfg).prog

