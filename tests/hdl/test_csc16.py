"""CSC in configurations computing INT16 and FP16 beside INT8 (``cfg.conv16``; hdl/csc,
docs/conv16.md "CSC", "Interface changes") in Amaranth's simulator, with CBUF modelled in
Python as the contract says: a read of unit u answers the row pair (units u & ~1, u | 1).

Geometries (docs/conv16.md "Build order and tests"): A = nv_full's convolution core (atomic
C 64, K 32, 32-B atoms, 16 x 512 x 64-B units) and B = nv_small+int8_int16_fp16 (C 8, K 8,
8-B atoms, 32 x 512 x 8-B units).

CBUF holds what CDMA leaves there (the layout is built here from the model's conventions):
feature entries of ``entry_bytes(cfg, eb)`` bytes (two units in 16-bit layers), slice y at
entry y * EPS from unit ``dat_base``, EPS from ``feature_entries_per_slice(cfg, W, C, eb)``
(the last channel block packed P pixels to an entry, checked to fit EPS), garbage elsewhere;
weights as the weight stream whose read-back through the model's ``read_weights(elem_bytes=eb,
atom_k=atomic_k // eb)`` gives the kernels, unit n at wt_base + n mod WCAP.

Checks, per layer: (a) every op equals a plain-Python reference of the op sequence (``n``,
the data lanes < n, the weight lanes < n of every cell, pos/first/last); (b) the ops reduced
to outputs as CMAC + CACC compute them equal the model: INT8/INT16 exact sums against
``ConvCore._conv_dc`` (16-bit pad: all of PAD_VALUE, signed), FP16 through
``cmac_words``/``cacc_add``/``cacc_to_fp32`` (channel block -> r -> s, in op order) against
``conv_dc_fp16``. Random stalls on every stream, the CBUF answering with random latency;
``test_full_rate`` counts one op per cycle with CBUF answering every cycle. Layers run back
to back in one simulation per test (one elaboration; geometry A's takes ~15 s).
"""
from __future__ import annotations

import random
import sys
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import pytest

from amaranth.hdl import ClockDomain, Module, Value
from amaranth.sim import Simulator

from hdl.cmac.layouts import op16_layout
from hdl.config import get_config
from hdl.csc import Csc
from hdl.regfile import unit_layout
from hdl.regmap import REGMAP
from streams import as_bits, check_stream_stable, stream_get
import test_csc_image as img
from verif.model.conv import ConvCore, feature_entries_per_slice, read_weights
from verif.model.conv_fp16 import cacc_add, cacc_to_fp32, cmac_words, conv_dc_fp16

SPEC_A = ("nv_full+winograd=False+batch=False+weight_compression=False"
          "+feature_data_type=int8_int16_fp16")
SPEC_B = "nv_small+feature_data_type=int8_int16_fp16"
INT8, INT16, FP16 = 0, 1, 2

# geometry A's op payload (16,414 bits) is one Python integer in the simulator's generated code
sys.set_int_max_str_digits(0)


@dataclass(frozen=True)
class Geo:
    cfg: object

    @property
    def ac(self):
        return self.cfg.mac_atomic_c

    @property
    def ak(self):
        return self.cfg.mac_atomic_k

    @property
    def ub(self):                   # bytes of a CBUF unit
        return self.cfg.cbuf_bank_width

    @property
    def ab(self):                   # bytes of a memory atom
        return self.cfg.atom_bytes

    @property
    def depth(self):
        return self.cfg.cbuf_bank_depth

    @property
    def banks(self):
        return self.cfg.cbuf_bank_number


_GEOS: dict = {}


def geo(name: str) -> Geo:
    if name not in _GEOS:
        _GEOS[name] = Geo(get_config(SPEC_A if name == "A" else SPEC_B))
    return _GEOS[name]


@dataclass
class Layer:
    prec: int
    w: int
    h: int
    c: int
    k: int
    r: int = 1
    s: int = 1
    sx: int = 1
    sy: int = 1
    dx: int = 1
    dy: int = 1
    pl: int = 0
    pt: int = 0
    pr: int = 0
    pb: int = 0
    pad_value: int = 0              # CSC D_ZERO_PADDING_VALUE, 16 bits
    eps_extra: int = 0
    weight_bank: int | None = None
    dat_base: int = 0               # keep.dat_base (units)

    @property
    def eb(self):
        return 2 if self.prec else 1

    @property
    def wo(self):
        return (self.pl + self.w + self.pr - ((self.s - 1) * self.dx + 1)) // self.sx + 1

    @property
    def ho(self):
        return (self.pt + self.h + self.pb - ((self.r - 1) * self.dy + 1)) // self.sy + 1


@dataclass
class Plan:
    """A layer on a geometry: sizes, CBUF placement and register values."""
    G: Geo
    L: Layer
    akl: int = 0
    ncb: int = 0
    ng: int = 0
    eps: int = 0
    data_bank: int = 0
    wbank: int = 0
    wunits: int = 0
    ops: int = 0
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        G, L = self.G, self.L
        self.akl = G.ak // L.eb
        self.ncb = -(-L.c // G.ac)
        self.ng = -(-L.k // self.akl)
        self.eps = feature_entries_per_slice(G.cfg, L.w, L.c, L.eb) + L.eps_extra
        self.data_bank = -(-(L.h * self.eps * L.eb) // G.depth) - 1
        wbytes = -(-(L.k * L.r * L.s * L.c * L.eb) // 128) * 128
        self.wunits = wbytes // G.ub
        self.wbank = (L.weight_bank if L.weight_bank is not None
                      else -(-self.wunits // G.depth) - 1)
        assert self.data_bank + 1 + self.wbank + 1 <= G.banks
        self.ops = self.ng * self.ncb * L.r * L.s * L.wo * L.ho

    @property
    def dcap(self):
        return (self.data_bank + 1) * self.G.depth

    @property
    def wt_base(self):
        return self.dcap

    @property
    def wcap(self):
        return (self.wbank + 1) * self.G.depth

    def regs(self) -> int:
        L = self.L
        return _regs_value({
            "d_misc_cfg": {"proc_precision": L.prec, "in_precision": L.prec},
            "d_datain_size_ext_0": {"datain_width_ext": L.w - 1, "datain_height_ext": L.h - 1},
            "d_datain_size_ext_1": {"datain_channel_ext": L.c - 1},
            "d_weight_size_ext_0": {"weight_width_ext": L.s - 1, "weight_height_ext": L.r - 1},
            "d_weight_size_ext_1": {"weight_channel_ext": L.c - 1, "weight_kernel": L.k - 1},
            "d_weight_bytes": {"weight_bytes": self.wunits * self.G.ub},
            "d_dataout_size_0": {"dataout_width": L.wo - 1, "dataout_height": L.ho - 1},
            "d_dataout_size_1": {"dataout_channel": L.k - 1},
            "d_entry_per_slice": {"entries": self.eps - 1},
            "d_bank": {"data_bank": self.data_bank, "weight_bank": self.wbank},
            "d_conv_stride_ext": {"conv_x_stride_ext": L.sx - 1, "conv_y_stride_ext": L.sy - 1},
            "d_dilation_ext": {"x_dilation_ext": L.dx - 1, "y_dilation_ext": L.dy - 1},
            "d_zero_padding": {"pad_left": L.pl, "pad_top": L.pt},
            "d_zero_padding_value": {"pad_value": L.pad_value},
        })


def _regs_value(fields: dict) -> int:
    """CSC's ``cfg`` register view as one integer."""
    layout = unit_layout(REGMAP.unit("CSC"), "cfg")
    v = 0
    for reg, fs in fields.items():
        rf = layout[reg]
        for name, val in fs.items():
            f = rf.shape[name]
            assert 0 <= val < (1 << f.width), (reg, name, val)
            v |= val << (rf.offset + f.offset)
    return v


def _s(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


# ------------------------------------------------------------------------- data, weights
def _fp16(nrng, shape, special: float) -> np.ndarray:
    """fp16 patterns: normal values of one magnitude, both signs, some +-0 and denormals, and
    with probability ``special`` an infinity or a NaN (random payload)."""
    n = int(np.prod(shape))
    e = np.clip(15 + nrng.integers(-3, 4, n), 1, 30)
    v = (nrng.integers(0, 2, n) << 15) | (e << 10) | nrng.integers(0, 1024, n)
    u = nrng.random(n)
    v = np.where(u < 0.05, nrng.integers(0, 2, n) << 15, v)                          # +-0
    v = np.where((u >= 0.05) & (u < 0.08),
                 (nrng.integers(0, 2, n) << 15) | nrng.integers(1, 1024, n), v)       # denormal
    v = np.where((u >= 0.08) & (u < 0.08 + special),
                 (nrng.integers(0, 2, n) << 15) | 0x7C00
                 | np.where(nrng.random(n) < 0.5, 0, nrng.integers(1, 1024, n)), v)   # inf/NaN
    return v.astype(np.int64).reshape(shape)


def _make(P: Plan, nrng):
    """(cube (C, H, W), weights (K, R, S, C)): int8/int16 values, fp16 patterns."""
    L = P.L
    cs, ws = (L.c, L.h, L.w), (L.k, L.r, L.s, L.c)
    if L.prec == INT8:
        return nrng.integers(-128, 128, cs), nrng.integers(-128, 128, ws)
    if L.prec == INT16:
        cube, wts = nrng.integers(-32768, 32768, cs), nrng.integers(-32768, 32768, ws)
        cube.flat[::7] = -32768                                    # extremes
        wts.flat[::5] = -32768
        return cube, wts
    return _fp16(nrng, cs, 0.004), _fp16(nrng, ws, 0.004)


class _Mem:
    """Bytes with the model's memory interface (``gather``)."""

    def __init__(self, b: bytes):
        self.a = np.frombuffer(b, dtype=np.uint8)

    def gather(self, idx):
        return self.a[np.asarray(idx)]


def _entry_place(P: Plan, y: int, cb: int, x: int):
    """(entry offset in the slice data, first memory-atom lane) of pixel x of block cb in
    slice y (docs/conv.md "Where things live in CBUF", entries of entry_bytes(cfg, eb))."""
    G, L = P.G, P.L
    R = G.ub * L.eb // G.ab
    cw = min(G.ac, L.c - cb * G.ac)
    p = 1
    if cb == P.ncb - 1:
        la = -(-cw * L.eb // G.ab)
        lp = 1 << (la - 1).bit_length()
        p = max(1, R // lp)
    return y * P.eps + cb * L.w + x // p, (x % p) * (R // p)


def _layout_data(P: Plan, cube, nrng) -> dict:
    """CBUF units (dict unit -> int of ub bytes) of the feature cube; garbage in every unit of
    the slices' entries not holding the layer's channels."""
    G, L = P.G, P.L
    ebytes = G.ub * L.eb
    units = {}
    for off in range(L.h * P.eps * L.eb):
        units[(L.dat_base + off) % P.dcap] = bytearray(nrng.integers(0, 256, G.ub, np.uint8))
    for y in range(L.h):
        for cb in range(P.ncb):
            cw = min(G.ac, L.c - cb * G.ac)
            for x in range(L.w):
                e, lane = _entry_place(P, y, cb, x)
                assert e - y * P.eps < P.eps, "feature_entries_per_slice too small"
                for ci in range(cw):
                    v = int(cube[cb * G.ac + ci, y, x])
                    for bi in range(L.eb):
                        b = lane * G.ab + ci * L.eb + bi
                        assert b < ebytes
                        u = (L.dat_base + e * L.eb + b // G.ub) % P.dcap
                        units[u][b % G.ub] = (v >> (8 * bi)) & 0xFF
    return {u: int.from_bytes(b, "little") for u, b in units.items()}


def _weight_stream(P: Plan, wts) -> bytes:
    """The weight bytes in memory order (format.rst "Basic Weight for Direct Convolution",
    groups of atomic_k / eb kernels, eb-byte little-endian elements), zero-filled to
    WEIGHT_BYTES; read back through the model's ``read_weights``."""
    G, L = P.G, P.L
    out = bytearray()
    for g in range(P.ng):
        kg = min(P.akl, L.k - g * P.akl)
        for cb in range(P.ncb):
            cw = min(G.ac, L.c - cb * G.ac)
            for r in range(L.r):
                for s in range(L.s):
                    for kin in range(kg):
                        for ci in range(cw):
                            v = int(wts[g * P.akl + kin, r, s, cb * G.ac + ci])
                            out += (v & ((1 << 8 * L.eb) - 1)).to_bytes(L.eb, "little")
    out += bytes(P.wunits * G.ub - len(out))
    back = read_weights(_Mem(bytes(out)), 0, L.k, L.r, L.s, L.c, G.ac, P.akl, L.eb)
    np.testing.assert_array_equal(back & ((1 << 8 * L.eb) - 1),
                                  np.asarray(wts) & ((1 << 8 * L.eb) - 1))
    return bytes(out)


def _layout_weights(P: Plan, wts) -> list:
    """[(CBUF unit, value)] of weight units 0.. in stream order."""
    st, ub = _weight_stream(P, wts), P.G.ub
    return [(P.wt_base + n % P.wcap, int.from_bytes(st[n * ub:(n + 1) * ub], "little"))
            for n in range(P.wunits)]


# ------------------------------------------------------------------------- op references
def _stripes(npix: int, stripe_max: int) -> list:
    out, left = [], npix
    while left:
        n = left if left <= stripe_max else (left + 1) // 2 if left < 2 * stripe_max \
            else stripe_max
        out.append(n)
        left -= n
    return out


def _ref_ops(P: Plan, cube, wts, stripe_max: int) -> list:
    """The op sequence (docs/conv.md "CSC", docs/conv16.md): (n, data lanes < n, weight
    lanes < n per cell, pos, first, last); lanes as patterns (INT8 data: the low byte; INT8
    weights: {w[2j+1], w[2j]})."""
    G, L = P.G, P.L
    m8 = 0xFF if L.eb == 1 else 0xFFFF
    pad = L.pad_value & m8
    cells = G.ak // 2
    ops = []
    for g in range(P.ng):
        kg = min(P.akl, L.k - g * P.akl)
        p0 = 0
        for n in _stripes(L.wo * L.ho, stripe_max):
            pix = range(p0, p0 + n)
            p0 += n
            for cb in range(P.ncb):
                cw = min(G.ac, L.c - cb * G.ac)

                def w(kin, ci, r, s):
                    if kin >= kg:
                        return 0
                    return int(wts[g * P.akl + kin, r, s, cb * G.ac + ci]) & m8
                for r in range(L.r):
                    for s in range(L.s):
                        if L.eb == 2:
                            wt = tuple(tuple(w(j, ci, r, s) for ci in range(cw))
                                       for j in range(cells))
                        else:
                            wt = tuple(tuple(w(2 * j, ci, r, s) | w(2 * j + 1, ci, r, s) << 8
                                             for ci in range(cw)) for j in range(cells))
                        first = cb == 0 and r == 0 and s == 0
                        last = cb == P.ncb - 1 and r == L.r - 1 and s == L.s - 1
                        for i, pidx in enumerate(pix):
                            yo, xo = divmod(pidx, L.wo)
                            x = xo * L.sx - L.pl + s * L.dx
                            y = yo * L.sy - L.pt + r * L.dy
                            if 0 <= x < L.w and 0 <= y < L.h:
                                d = tuple(int(cube[cb * G.ac + ci, y, x]) & m8
                                          for ci in range(cw))
                            else:
                                d = (pad,) * cw
                            ops.append((cw, d, wt, i, int(first), int(last)))
    return ops


def _decode(G: Geo, raw: int, prec: int, stripe_max: int):
    """An op16_layout item as _ref_ops' tuple (lanes >= n dropped)."""
    lay = op16_layout(G.ac, G.ak, stripe_max)
    od, ow = lay["data"].offset, lay["wt"].offset
    n = (raw >> lay["n"].offset) & ((1 << lay["n"].width) - 1)
    pos = (raw >> lay["pos"].offset) & ((1 << lay["pos"].width) - 1)
    m8 = 0xFF if prec == INT8 else 0xFFFF
    d = tuple((raw >> (od + 16 * c)) & m8 for c in range(n))
    wt = tuple(tuple((raw >> (ow + 16 * (j * G.ac + c))) & 0xFFFF for c in range(n))
               for j in range(G.ak // 2))
    return (n, d, wt, pos, (raw >> lay["first"].offset) & 1, (raw >> lay["last"].offset) & 1)


def _reduce(P: Plan, ops: list) -> np.ndarray:
    """What CMAC + CACC make of the ops (pixels of a group in raster order): INT8/INT16 the
    exact sums (K, ho, wo); FP16 the fp32 patterns of cmac_words -> cacc_add (op order) ->
    cacc_to_fp32."""
    L = P.L
    npix = L.wo * L.ho
    per_group = P.ncb * L.r * L.s * npix
    akl = P.akl
    fp = L.prec == FP16
    out = np.zeros((P.ng * akl, npix), np.int64)
    done = [0] * P.ng
    acc = {}
    i = 0
    while i < len(ops):
        # a run of ops with one weight set (consecutive, same wt)
        j = i + 1
        while (j < len(ops) and ops[j][2] == ops[i][2] and ops[j][0] == ops[i][0]
               and (j - i) < 64 and j // per_group == i // per_group):
            j += 1
        n, _, wt = ops[i][:3]
        g = i // per_group
        if L.eb == 2:
            wk = np.array(wt, np.int64).reshape(akl, n)
        else:
            wk = np.zeros((akl, n), np.int64)
            a = np.array(wt, np.int64).reshape(akl // 2, n)
            wk[0::2], wk[1::2] = a & 0xFF, a >> 8
        dd = np.array([op[1] for op in ops[i:j]], np.int64).reshape(j - i, n)
        if fp:
            nan, nan_bits, T, S = cmac_words(wk, dd)
        else:
            bits = 8 * L.eb
            ws = np.where(wk >= 1 << (bits - 1), wk - (1 << bits), wk)
            ds = np.where(dd >= 1 << (bits - 1), dd - (1 << bits), dd)
            psum = ws @ ds.T                                        # (akl, run)
        for q, op in enumerate(ops[i:j]):
            pos, first, last = op[3:]
            if fp:
                a0, n0 = ((np.zeros(akl, object), np.full(akl, -1, np.int64)) if first
                          else acc[pos])
                acc[pos] = cacc_add(a0, n0, (nan[:, q], nan_bits[:, q], T[:, q], S[:, q]))
            else:
                acc[pos] = psum[:, q] if first else acc[pos] + psum[:, q]
            if last:
                val = cacc_to_fp32(*acc[pos]) if fp else acc[pos]
                out[g * akl:(g + 1) * akl, done[g]] = val
                done[g] += 1
        i = j
    assert done == [npix] * P.ng
    return out[:L.k].reshape(L.k, L.ho, L.wo)


def _model(P: Plan, cube, wts) -> np.ndarray:
    L = P.L
    if L.prec == FP16:
        return conv_dc_fp16(cube, wts, L.ho, L.wo, L.sx, L.sy, L.dx, L.dy, L.pl, L.pt,
                            L.pad_value & 0xFFFF, P.G.ac)
    return ConvCore._conv_dc(cube, wts, L.ho, L.wo, L.sx, L.sy, L.dx, L.dy, L.pl, L.pt,
                             _s(L.pad_value, 8 * L.eb))


# ------------------------------------------------------------------------- the bench
@dataclass
class Job:
    """One layer of a simulation: its registers and CBUF contents."""
    regs: int
    dat_base: int
    h: int                            # slices
    ops: int
    wcap: int
    units: dict                       # CBUF contents at start (unit -> value)
    wt_units: list                    # [(unit, value)] weight units in stream order
    slices: list                      # per slice [(unit, value)] written when slow
    P: Plan | None = None
    cube: object = None
    wts: object = None


def _job(P: Plan, nrng, *, slow=False) -> Job:
    L = P.L
    cube, wts = _make(P, nrng)
    dunits = _layout_data(P, cube, nrng)
    wl = _layout_weights(P, wts)
    units, slices = {}, []
    if slow:
        # stale garbage until CDMA writes the slice
        L = P.L
        for u in dunits:
            units[u] = int(nrng.integers(0, 1 << 62))
        per = P.eps * L.eb
        for y in range(L.h):
            slices.append([((L.dat_base + y * per + o) % P.dcap,
                            dunits[(L.dat_base + y * per + o) % P.dcap]) for o in range(per)])
    else:
        units.update(dunits)
    return Job(P.regs(), L.dat_base, L.h, P.ops, P.wcap, units, wl, slices, P, cube, wts)


def _simulate(G: Geo, jobs: list, stripe_max: int, seed: int, *, p_stall=0.3, lat=(1, 6),
              p_gap=0.2, slow=False, ring=False, stamps=None) -> list:
    """Run ``jobs`` one after the other on one Csc with the Python CBUF. ``slow``: slices
    arrive while CSC runs (dat_slices grows; unwritten units hold garbage); ``ring``: a fake
    CDMA writes weight units as wt_released allows (n < wt_released + WCAP) and raises
    wt_entries. Returns per job (raw ops, cycles from start to done, op timestamps)."""
    rng = random.Random(seed)
    csc = Csc(G.cfg, stripe_max)
    top = Module()
    top.domains.sync = ClockDomain()
    top.submodules.csc = csc
    st = {"job": -1, "started": False, "mem": {}, "dones": 0, "start_cycle": 0,
          "done_cycle": 0, "cycle": 0}
    results = []
    errors: list = []
    ub8 = G.ub * 8

    def row(u):
        mem = st["mem"]
        return mem.get(u & ~1, 0) | mem.get(u | 1, 0) << ub8

    def responder(req, resp):
        async def proc(ctx):
            q, holding, cycle = deque(), False, 0
            while True:
                rdy = rng.random() >= p_stall / 2
                ctx.set(req.ready, rdy)
                rv = holding or (bool(q) and q[0][0] <= cycle and rng.random() >= p_gap)
                ctx.set(resp.valid, rv)
                if rv:
                    ctx.set(resp.payload.data, q[0][1])
                _, _, v, a, rr = await ctx.tick().sample(req.valid, req.payload.addr,
                                                         resp.ready)
                holding = rv and not rr
                if rv and rr:
                    q.popleft()
                if v and rdy:
                    due = max(cycle + rng.randint(*lat), q[-1][0] if q else 0)
                    q.append((due, row(a)))
                cycle += 1
        return proc

    async def control(ctx):
        for jn, jb in enumerate(jobs):
            st["mem"] = dict(jb.units)
            ctx.set(Value.cast(csc.regs), jb.regs)
            ctx.set(csc.keep.dat_base, jb.dat_base)
            ctx.set(csc.dat_slices, 0 if slow else jb.h)
            ctx.set(csc.band_end, 0)
            ctx.set(csc.band_cbs, 0)
            if ring:
                ctx.set(csc.wt_entries, 0)
            else:
                for u, v in jb.wt_units:
                    st["mem"][u] = v
                ctx.set(csc.wt_entries, len(jb.wt_units))
            await ctx.tick()
            st["job"], st["started"] = jn, True
            ctx.set(csc.start, 1)
            await ctx.tick()
            ctx.set(csc.start, 0)
            while len(results) <= jn or st["dones"] <= jn:
                await ctx.tick()
            st["started"] = False
            for _ in range(3):
                await ctx.tick()

    async def consumer(ctx):
        for jn, jb in enumerate(jobs):
            while not (st["started"] and st["job"] == jn):
                await ctx.tick()
            ts: list = []
            got = await stream_get(ctx, csc.op, jb.ops, rng=rng, p_stall=p_stall,
                                   timestamps=ts, timeout=60 * jb.ops + 5000)
            results.append(([as_bits(x) for x in got], ts))

    async def slow_slices(ctx):
        for jn, jb in enumerate(jobs):
            while not (st["started"] and st["job"] == jn):
                await ctx.tick()
            for y, items in enumerate(jb.slices):
                for u, v in items:
                    while rng.random() < 0.5:
                        await ctx.tick()
                    st["mem"][u] = v
                await ctx.tick()
                ctx.set(csc.dat_slices, y + 1)

    async def ring_writer(ctx):
        for jn, jb in enumerate(jobs):
            while not (st["started"] and st["job"] == jn):
                await ctx.tick()
            await ctx.tick()
            for n, (u, v) in enumerate(jb.wt_units):
                while n >= ctx.get(csc.wt_released) + jb.wcap or rng.random() < 0.2:
                    await ctx.tick()
                st["mem"][u] = v
                await ctx.tick()
                ctx.set(csc.wt_entries, n + 1)

    async def monitor(ctx):
        cycle = 0
        async for _, _, start, done in ctx.tick().sample(csc.start, csc.done):
            if start:
                st["start_cycle"] = cycle
            if done:
                st["dones"] += 1
                st["done_cycle"] = cycle
                st.setdefault("spans", []).append(cycle - st["start_cycle"])
            cycle += 1

    sim = Simulator(top)
    sim.add_clock(1e-8)
    tbs = [control, consumer]
    if slow:
        tbs.append(slow_slices)
    if ring:
        tbs.append(ring_writer)
    for tb in tbs:
        sim.add_testbench(tb)
    sim.add_process(monitor)
    sim.add_process(responder(csc.dat_rd_req, csc.dat_rd_resp))
    sim.add_process(responder(csc.wt_rd_req, csc.wt_rd_resp))
    for name, s in (("op", csc.op), ("dat_rd_req", csc.dat_rd_req),
                    ("wt_rd_req", csc.wt_rd_req)):
        sim.add_process(check_stream_stable(s, errors=errors, name=name))
    sim.run()
    assert errors == [], errors[:5]
    assert st["dones"] == len(jobs)
    return [(raw, span, ts) for (raw, ts), span in zip(results, st["spans"])]


def _check(jb: Job, raw: list, stripe_max: int):
    P = jb.P
    ops = [_decode(P.G, x, P.L.prec, stripe_max) for x in raw]
    ref = _ref_ops(P, jb.cube, jb.wts, stripe_max)
    assert len(ops) == len(ref)
    for n, (a, b) in enumerate(zip(ops, ref)):
        assert a == b, f"op {n}: got {a}, want {b}"
    np.testing.assert_array_equal(_reduce(P, ops), _model(P, jb.cube, jb.wts))


def _run(G: Geo, layers: list, stripe_max: int, seed: int, **kw):
    nrng = np.random.default_rng(seed)
    jobs = [_job(Plan(G, L), nrng, slow=kw.get("slow", False)) for L in layers]
    res = _simulate(G, jobs, stripe_max, seed, **kw)
    for jb, (raw, _, _) in zip(jobs, res):
        _check(jb, raw, stripe_max)
    return res


def _random_layer(G: Geo, rng: random.Random, prec: int, min_ops: int, max_ops: int) -> Layer:
    while True:
        r, s = rng.randint(1, 3), rng.randint(1, 3)
        dx, dy = rng.randint(1, 2), rng.randint(1, 2)
        sd, rd = (s - 1) * dx + 1, (r - 1) * dy + 1
        pad = rng.choice([0, rng.getrandbits(16), 0x3C00, 0xBC00]) if prec == FP16 \
            else rng.getrandbits(16)
        L = Layer(prec, w=rng.randint(1, 7), h=rng.randint(1, 6),
                  c=rng.randint(1, 3 * G.ac), k=rng.randint(1, 3 * G.ak // 2),
                  r=r, s=s, sx=rng.randint(1, 2), sy=rng.randint(1, 2), dx=dx, dy=dy,
                  pl=rng.randrange(sd), pt=rng.randrange(rd), pr=rng.randrange(sd),
                  pb=rng.randrange(rd), pad_value=pad, eps_extra=rng.randint(0, 2))
        if L.pl + L.w + L.pr >= sd and L.pt + L.h + L.pb >= rd:
            P = Plan(G, L)
            if min_ops <= P.ops <= max_ops and L.h * P.eps * L.eb <= 4 * G.depth:
                return L


# ------------------------------------------------------------------------- tests
@pytest.mark.parametrize("seed", [1, 2])
def test_geometry_b_random(seed):
    """Geometry B: random INT16, FP16 and INT8 layers back to back (C and K over several
    blocks and groups, packed last blocks, strides, dilation, padding, random PAD_VALUE),
    random stalls and CBUF latencies; then an INT16 layer whose slices wrap the data ring
    from dat_base."""
    G = geo("B")
    rng = random.Random(seed)
    layers = [_random_layer(G, rng, prec, 60, 500)
              for prec in (INT16, FP16, INT8, FP16, INT16, INT8)]
    wrap = Layer(INT16, w=5, h=4, c=11, k=9, r=3, s=3, pl=1, pt=1, pr=1, pb=1,
                 pad_value=0x8001)
    wrap.dat_base = Plan(G, wrap).dcap - 6
    layers.append(wrap)
    _run(G, layers, rng.choice([3, 5, 8]), seed=seed)


def test_geometry_b_int8_repacked():
    """Geometry B, INT8 layers in the conv16 configuration: today's ops re-packed (kernels
    2j, 2j+1 in cell j; full blocks loaded a pair per cycle, the short last block a kernel
    per cycle, an odd last group); an odd dat_base (the entry is the high half of its row)."""
    G = geo("B")
    layers = [Layer(INT8, w=4, h=3, c=20, k=19, r=2, s=2, pl=1, pb=1, pad_value=0x1281),
              Layer(INT8, w=3, h=4, c=9, k=5, r=3, s=1, dy=2, pt=2, pb=2, sy=2,
                    pad_value=0x00F0, eps_extra=1)]
    layers[1].dat_base = Plan(G, layers[1]).dcap - 5
    _run(G, layers, 5, seed=8)


def test_geometry_b_slow_slices():
    """Slices arrive while CSC runs (garbage before): every read waits for dat_slices."""
    G = geo("B")
    layers = [Layer(FP16, w=4, h=5, c=6, k=6, r=3, s=2, pl=1, pt=1, pr=1, pb=1,
                    pad_value=0x3555),
              Layer(INT8, w=4, h=4, c=10, k=9, r=2, s=2, pl=1, pb=1, pad_value=0x1281)]
    _run(G, layers, 8, seed=9, slow=True)


def test_geometry_b_weight_ring():
    """WEIGHT_BANK = 0 (one bank, 512 units) for more weights: the fake CDMA refills the ring
    as wt_released allows; INT16 and INT8 sets not aligned to rows."""
    G = geo("B")
    layers = [Layer(INT16, w=2, h=2, c=20, k=12, r=3, s=3, pl=1, pt=1, pr=1, pb=1,
                    weight_bank=0, pad_value=0x8000),
              Layer(INT8, w=2, h=2, c=19, k=27, r=3, s=3, pl=1, pt=1, pr=1, pb=1,
                    weight_bank=0)]
    for L in layers:
        assert Plan(G, L).wunits > Plan(G, L).wcap
    _run(G, layers, 4, seed=10, ring=True, p_stall=0.1)


def _img_job(G: Geo, L, nrng) -> Job:
    """An INT8 image layer (tests/hdl/test_csc_image.py's ImgLayer, at geometry B's atomic C
    and K, which that module shares) as a Job: lines from unit dat_base, weights from the
    first weight unit, stream padded to whole rows."""
    assert (G.ac, G.ak, G.ub) == (img.AC, img.AK, img.EB)
    cube, wts, garbage = img._make(L, int(nrng.integers(1 << 30)))
    lines = img._lines(L, cube, garbage)
    data_bank = -(-(L.h * L.eps) // G.depth) - 1
    dcap = (data_bank + 1) * G.depth
    units = {}
    for y, b in enumerate(lines):
        for e in range(L.eps):
            units[(L.dat_base + y * L.eps + e) % dcap] = int.from_bytes(
                bytes(b[e * G.ub:(e + 1) * G.ub]), "little")
    st = img._weight_stream(L, wts)
    st += bytes(-len(st) % (2 * G.ub))
    nw = len(st) // G.ub
    wbank = -(-nw // G.depth) - 1
    wl = [(dcap + n, int.from_bytes(st[n * G.ub:(n + 1) * G.ub], "little")) for n in range(nw)]
    regs = _regs_value({
        "d_datain_format": {"datain_format": 1},
        "d_datain_size_ext_0": {"datain_width_ext": L.w - 1, "datain_height_ext": L.h - 1},
        "d_datain_size_ext_1": {"datain_channel_ext": L.c - 1},
        "d_weight_size_ext_0": {"weight_width_ext": 0, "weight_height_ext": L.r - 1},
        "d_weight_size_ext_1": {"weight_channel_ext": L.cw - 1, "weight_kernel": L.k - 1},
        "d_weight_bytes": {"weight_bytes": len(st)},
        "d_dataout_size_0": {"dataout_width": L.wo - 1, "dataout_height": L.ho - 1},
        "d_dataout_size_1": {"dataout_channel": L.k - 1},
        "d_entry_per_slice": {"entries": L.eps - 1},
        "d_bank": {"data_bank": data_bank, "weight_bank": wbank},
        "d_conv_stride_ext": {"conv_x_stride_ext": L.sx - 1, "conv_y_stride_ext": L.sy - 1},
        "d_zero_padding": {"pad_left": L.csc_pl, "pad_top": L.pt},
        "d_zero_padding_value": {"pad_value": L.pad_value},
        "d_post_y_extension": {"y_extension": {1: 0, 2: 1, 4: 2}[L.ext]},
    })
    jb = Job(regs, L.dat_base, L.h, L.ops, (wbank + 1) * G.depth, units, wl, [])
    jb.cube, jb.wts, jb.img = (cube, lines), wts, L
    return jb


def test_geometry_b_int8_image():
    """INT8 image input in the conv16 configuration (row-pair reads, each unit's half chosen
    by its address): the ops of tests/hdl/test_csc_image.py's reference, re-packed, and their
    sums equal to the model's ``ConvCore._conv_img``; aligned and unaligned ops,
    post-extension, an odd dat_base."""
    G = geo("B")
    nrng = np.random.default_rng(14)
    layers = [img.ImgLayer(w=7, h=5, c=3, k=9, r=2, sk=3, sx=1, sy=1, pl=2, pr=1, pt=1, pb=1,
                           pad_value=0xFF80, eps_extra=1, dat_base=3),
              img.ImgLayer(w=8, h=6, c=1, k=12, r=7, sk=2, sx=3, sy=2, pl=1, pr=1, pt=3, pb=2,
                           ext=4, pad_value=0x7F),
              img.ImgLayer(w=9, h=4, c=4, k=10, r=3, sk=3, sx=2, sy=2, pl=1, pr=2, pt=2, pb=1,
                           pad_value=0x1291, cdma_pad=0x91)]
    jobs = [_img_job(G, L, nrng) for L in layers]
    sm = 5
    res = _simulate(G, jobs, sm, 14)
    for jb, (raw, _, _) in zip(jobs, res):
        L = jb.img
        cube, lines = jb.cube
        ref = img._ref_ops(L, lines, jb.wts, sm)
        nset = [n for n, _ in L.sets]
        per_stripe = len(nset)
        ops = []
        for q, (bits, want) in enumerate(zip(raw, ref)):
            n, d, wt, pos, first, last = _decode(G, bits, INT8, sm)
            assert n == max(lane for *_, lane in L.sets[_set_index(L, q, sm)][1]) + 1
            wd, wwt = want[0], want[1]
            assert d == tuple(v & 0xFF for v in wd[:n]), f"op {q}"
            assert wt == tuple(tuple((wwt[2 * j][c] & 0xFF) | (wwt[2 * j + 1][c] & 0xFF) << 8
                                     for c in range(n)) for j in range(G.ak // 2)), f"op {q}"
            assert (pos, first, last) == want[2:], f"op {q}"
            ops.append((tuple(_s(v, 8) for v in d) + (0,) * (G.ac - n),
                        tuple(tuple(_s(wt[k // 2][c] >> 8 * (k & 1), 8) for c in range(n))
                              + (0,) * (G.ac - n) for k in range(G.ak)), pos, first, last))
        assert len(ops) == len(ref) and per_stripe
        conv = img._accumulate(L, ops)
        want = ConvCore._conv_img(cube, jb.wts, L.ho, L.wo, L.sx, L.sy, L.pt, L.pad8)
        np.testing.assert_array_equal(conv, want)


def _set_index(L, q: int, sm: int) -> int:
    """The set (index into ``L.sets``) of image op ``q`` (order g, stripe, set, pixel)."""
    nsets = len(L.sets)
    for n in _stripes(L.wo * L.ho, sm):
        if q < nsets * n:
            return q // n
        q -= nsets * n
    return _set_index(L, q, sm)                 # the next kernel group


def _full_rate(G: Geo, layers, stripe_max, seed):
    """(ops, cycles from start to done, cycles from the first op to the last) per layer."""
    res = _run(G, layers, stripe_max, seed, p_stall=0.0, lat=(3, 3), p_gap=0.0)
    return [(len(raw), span, ts[-1] - ts[0] + 1) for raw, span, ts in res]


def test_full_rate_b(capsys):
    """Compute-bound layers on B, no stalls, CBUF answering every cycle (3 cycles' latency):
    INT16, FP16 and INT8, one op per cycle from the first op to the last; the first op at
    most 12 cycles after start beyond the first weight set's atomic_k / 2 loading cycles."""
    G = geo("B")
    layers = [Layer(p, w=6, h=5, c=16, k=8, r=3, s=2, pl=1, pt=1, pr=1, pb=1)
              for p in (INT16, FP16, INT8)]
    rates = _full_rate(G, layers, 16, 11)
    with capsys.disabled():
        print(f"\nB (ops, cycles start..done, cycles first..last op): {rates}")
    for ops, span, steady in rates:
        assert steady == ops and span <= ops + 12 + G.ak // 2


def test_geometry_a(capsys):
    """Geometry A (nv_full): INT16, FP16 and INT8 layers with stalls (packed last blocks:
    P = 4 at INT16 C 80, the L = 3 rule at FP16 C 40, P = 2 at INT8 C 80 from an odd
    dat_base), then INT16 and INT8 compute-bound layers at full rate (one op per cycle from
    first to last op)."""
    G = geo("A")
    layers = [Layer(INT16, w=3, h=3, c=80, k=18, r=2, s=2, dx=2, pl=1, pt=1, pb=1,
                    pad_value=0x8123, eps_extra=1),
              Layer(FP16, w=3, h=4, c=40, k=20, r=2, s=3, sy=2, pl=1, pr=1, pt=1,
                    pad_value=0x3C00),
              Layer(INT8, w=4, h=3, c=80, k=35, r=2, s=2, pl=1, pb=1, pad_value=0x7F80,
                    dat_base=G.depth + 7)]
    _run(G, layers, 5, seed=12)
    full = [Layer(INT16, w=6, h=6, c=64, k=16, r=2, s=2, pl=1, pt=1),
            Layer(INT8, w=6, h=6, c=64, k=32, r=2, s=2, pl=1, pt=1)]
    rates = _full_rate(G, full, 32, 13)
    with capsys.disabled():
        print(f"\nA (ops, cycles start..done, cycles first..last op): {rates}")
    for ops, span, steady in rates:
        assert steady == ops and span <= ops + 12 + G.ak // 2
