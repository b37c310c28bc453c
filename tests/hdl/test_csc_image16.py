"""CSC image input in INT16 and FP16 (``cfg.conv16`` configurations; hdl/csc/image.py,
hdl/csc/__init__.py; docs/conv16.md "CSC", "CDMA") in Amaranth's simulator, with CBUF modelled
in Python as the contract says (a read of unit u answers the row pair u & ~1, u | 1: the
bench of tests/hdl/test_csc16.py).

CBUF holds what CDMA leaves there for an image layer (docs/conv16.md "CDMA", model
``ConvCore._fetch_pixels`` / ``_conv_img``): line y is the (PL + W + PR) x C elements of the
padded line, pixel-major, channel-minor (the model's ``cube.transpose(1, 2, 0)``), atomic_c
elements per entry (64 per 128-B entry on nv_full), a 16-bit entry E being units 2E, 2E+1
from an even ``dat_base`` (INT8: one unit per entry, bytes); the left/right padding columns
hold CDMA's 16-bit pad value, garbage follows the line up to EPS entries. Weights are the
image weight stream of the model's layouts with 2-byte elements (``read_weights(...,
elem_bytes=2)`` with S = 1 and C = S*Cpix, ``read_weights_post_ext(..., elem_bytes=2)``),
kernel groups of atomic_k / 2, read back through the model here.

Checks, per layer: (a) op by op against a plain-Python generator of the image sequence
(``n``, data lanes < n, the weight lanes < n of every MAC cell, pos/first/last): kernel group,
stripe, (chunk of atomic_c elements, kernel row) or post-extension row group, pixel; (b) the
ops reduced to outputs as CMAC + CACC compute them (tests/hdl/test_csc16.py ``_reduce``)
against the model: INT16 exact sums against ``ConvCore._conv_img`` (CSC's pad all 16 bits,
signed), FP16 through ``cmac_words``/``cacc_add``/``cacc_to_fp32`` in op order against
``conv_img_fp16`` (bit-exact; its op grouping: chunks outermost then kernel rows, or one word
per row group with post-extension). INT8 image layers run between the 16-bit ones (the same
simulation: precision switches). Random stalls on every stream, CBUF answering with random
latency; full rate (one op per cycle from the first op to the last) where INT8 image has it
(every op one CBUF read).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest

import test_csc16 as t16
from test_csc16 import FP16, INT8, INT16, Geo, Job, _decode, _reduce, _regs_value, _s, geo
from verif.model.conv import ConvCore, read_weights, read_weights_post_ext
from verif.model.conv_fp16 import conv_img_fp16


@dataclass
class ImgLayer16:
    """An image layer: ``c`` channels per pixel (1..4), kernel ``r`` x ``sk`` pixels (cw =
    sk*c elements per kernel line), CDMA's left/right padding ``pl``/``pr`` (in the line),
    ``pt``/``pb``, post-extension ``ext`` (1, 2, 4), CSC's 16-bit ``pad_value``, CDMA's
    ``cdma_pad`` (the padding columns' element), ``csc_pl`` (CSC's PAD_LEFT: ignored)."""
    prec: int
    w: int
    h: int
    c: int
    k: int
    r: int = 1
    sk: int = 1
    sx: int = 1
    sy: int = 1
    pl: int = 0
    pr: int = 0
    pt: int = 0
    pb: int = 0
    ext: int = 1
    pad_value: int = 0
    cdma_pad: int = 0
    eps_extra: int = 0
    csc_pl: int = 0
    dat_base: int = 0               # keep.dat_base (units; even for 16-bit layers)
    weight_bank: int | None = None  # WEIGHT_BANK (default: enough banks for the weights)

    @property
    def eb(self):
        return 2 if self.prec else 1

    @property
    def cw(self):
        return self.sk * self.c

    @property
    def wpx(self):
        return self.pl + self.w + self.pr

    @property
    def wo(self):
        return (self.wpx - self.sk) // self.sx + 1

    @property
    def ho(self):
        return (self.pt + self.h + self.pb - self.r) // self.sy + 1


class ImgPlan:
    """An image layer on a geometry: sets, sizes, CBUF placement, registers."""

    def __init__(self, G: Geo, L: ImgLayer16):
        self.G, self.L = G, L
        ac = G.ac
        self.akl = G.ak // L.eb
        self.ng = -(-L.k // self.akl)
        self.eps = -(-(L.wpx * L.c) // ac) + L.eps_extra      # entries of atomic_c elements
        self.dunits = L.h * self.eps * L.eb
        self.data_bank = -(-self.dunits // G.depth) - 1
        self.wbytes = -(-(L.k * L.r * L.cw * L.eb) // 128) * 128
        self.wunits = self.wbytes // G.ub
        self.wbank = (L.weight_bank if L.weight_bank is not None
                      else -(-self.wunits // G.depth) - 1)
        assert self.data_bank + 1 + self.wbank + 1 <= G.banks
        # the sets of a kernel group in op order: (n, [(line, weight row, element, lane)])
        self.sets = []
        if L.ext == 1:
            for cb in range(-(-L.cw // ac)):
                n = min(ac, L.cw - cb * ac)
                for r in range(L.r):
                    self.sets.append((n, [(r, r, cb * ac + q, q) for q in range(n)]))
        else:
            for rg in range(-(-L.r // L.ext)):
                nl = min(L.ext, L.r - rg * L.ext)
                self.sets.append((nl * L.cw, [(rg * L.ext + j, rg * L.ext + j, ci, j * L.cw + ci)
                                              for j in range(nl) for ci in range(L.cw)]))
        self.ops = self.ng * len(self.sets) * L.wo * L.ho

    @property
    def dcap(self):
        return (self.data_bank + 1) * self.G.depth

    @property
    def wcap(self):
        return (self.wbank + 1) * self.G.depth

    def regs(self) -> int:
        L = self.L
        return _regs_value({
            "d_misc_cfg": {"proc_precision": L.prec, "in_precision": L.prec},
            "d_datain_format": {"datain_format": 1},
            "d_datain_size_ext_0": {"datain_width_ext": L.w - 1, "datain_height_ext": L.h - 1},
            "d_datain_size_ext_1": {"datain_channel_ext": L.c - 1},
            "d_weight_size_ext_0": {"weight_width_ext": 0, "weight_height_ext": L.r - 1},
            "d_weight_size_ext_1": {"weight_channel_ext": L.cw - 1, "weight_kernel": L.k - 1},
            "d_weight_bytes": {"weight_bytes": self.wbytes},
            "d_dataout_size_0": {"dataout_width": L.wo - 1, "dataout_height": L.ho - 1},
            "d_dataout_size_1": {"dataout_channel": L.k - 1},
            "d_entry_per_slice": {"entries": self.eps - 1},
            "d_bank": {"data_bank": self.data_bank, "weight_bank": self.wbank},
            "d_conv_stride_ext": {"conv_x_stride_ext": L.sx - 1, "conv_y_stride_ext": L.sy - 1},
            "d_zero_padding": {"pad_left": L.csc_pl, "pad_top": L.pt},
            "d_zero_padding_value": {"pad_value": L.pad_value},
            "d_post_y_extension": {"y_extension": {1: 0, 2: 1, 4: 2}[L.ext]},
        })


def legal(G: Geo, L: ImgLayer16) -> bool:
    """The model's image limits (``ConvCore.run``), in elements: padding below the kernel,
    the window inside the padded input, post-extension ``cw*ext <= atomic_c`` and
    ``sx*C*ext <= atomic_c``."""
    ok = (L.pl < L.sk and L.pr < L.sk and L.pt < L.r and L.pb < L.r and L.wpx >= L.sk
          and L.pt + L.h + L.pb >= L.r)
    if L.ext > 1:
        ok = ok and L.cw * L.ext <= G.ac and L.sx * L.c * L.ext <= G.ac
    return ok


# ------------------------------------------------------------------------- data, weights
class _Mem:
    """Bytes with the model's memory interface (``read``, ``gather``)."""

    def __init__(self, b: bytes):
        self.a = np.frombuffer(b, dtype=np.uint8)

    def read(self, addr, n):
        return self.a[addr:addr + n].copy()

    def gather(self, idx):
        return self.a[np.asarray(idx)]


def _make(P: ImgPlan, nrng):
    """(cube (C, H, PL+W+PR) with CDMA's pad in the padding columns, weights (K, R, 1, cw)):
    int8/int16 values, fp16 patterns."""
    L = P.L
    cs, ws = (L.c, L.h, L.wpx), (L.k, L.r, 1, L.cw)
    if L.prec == INT8:
        cube, wts = nrng.integers(-128, 128, cs), nrng.integers(-128, 128, ws)
        pad = _s(L.cdma_pad, 8)
    elif L.prec == INT16:
        cube, wts = nrng.integers(-32768, 32768, cs), nrng.integers(-32768, 32768, ws)
        cube.flat[::7] = -32768                                    # extremes
        wts.flat[::5] = -32768
        pad = _s(L.cdma_pad, 16)
    else:
        cube, wts = t16._fp16(nrng, cs, 0.004), t16._fp16(nrng, ws, 0.004)
        pad = L.cdma_pad & 0xFFFF
    cube[:, :, :L.pl] = pad
    cube[:, :, L.pl + L.w:] = pad
    return cube, wts


def _lines(P: ImgPlan, cube, nrng) -> np.ndarray:
    """(H, EPS x atomic_c) element patterns of the CBUF lines: the model's line (pixel-major,
    channel-minor), garbage after it (any pattern: FP16 NaNs too)."""
    L, G = P.L, P.G
    m = (1 << 8 * L.eb) - 1
    out = nrng.integers(0, m + 1, (L.h, P.eps * G.ac))
    line = np.asarray(cube).transpose(1, 2, 0).reshape(L.h, L.wpx * L.c) & m
    out[:, :line.shape[1]] = line
    return out


def _layout_data(P: ImgPlan, lines) -> dict:
    """CBUF units (unit -> int of ub bytes): entry e of line y at units ``dat_base + (y*EPS
    + e) * eb`` (+1), elements little-endian."""
    G, L = P.G, P.L
    per_unit = G.ub // L.eb
    units = {}
    for y in range(L.h):
        for q in range(P.eps * L.eb):
            v = 0
            for i in range(per_unit):
                v |= int(lines[y, q * per_unit + i]) << (8 * L.eb * i)
            units[(L.dat_base + y * P.eps * L.eb + q) % P.dcap] = v
    return units


def _weight_stream(P: ImgPlan, wts) -> bytes:
    """The image weight bytes in memory order: per kernel group (atomic_k / eb kernels), per
    set in op order, kernel after kernel the set's elements (eb bytes little-endian), zero
    filled to WEIGHT_BYTES; read back through the model's layouts."""
    L = P.L
    m = (1 << 8 * L.eb) - 1
    out = bytearray()
    for g in range(P.ng):
        kg = min(P.akl, L.k - g * P.akl)
        for _, src in P.sets:
            for kin in range(kg):
                for (_, wr, b, _l) in src:
                    out += (int(wts[g * P.akl + kin, wr, 0, b]) & m).to_bytes(L.eb, "little")
    out += bytes(P.wbytes - len(out))
    mem = _Mem(bytes(out))
    back = (read_weights(mem, 0, L.k, L.r, 1, L.cw, P.G.ac, P.akl, L.eb) if L.ext == 1
            else read_weights_post_ext(mem, 0, L.k, L.r, L.cw, L.ext, P.akl, L.eb))
    np.testing.assert_array_equal(back & m, np.asarray(wts) & m)
    return bytes(out)


def _job(G: Geo, L: ImgLayer16, nrng, *, slow=False) -> Job:
    P = ImgPlan(G, L)
    assert legal(G, L), L
    assert 0 <= L.dat_base < P.dcap and (L.eb == 1 or L.dat_base % 2 == 0)
    cube, wts = _make(P, nrng)
    lines = _lines(P, cube, nrng)
    dunits = _layout_data(P, lines)
    st = _weight_stream(P, wts)
    wl = [(P.dcap + n % P.wcap, int.from_bytes(st[n * G.ub:(n + 1) * G.ub], "little"))
          for n in range(P.wunits)]
    units, slices = {}, []
    if slow:
        for u in dunits:                    # stale garbage until CDMA writes the slice
            units[u] = int(nrng.integers(0, 1 << 62))
        per = P.eps * L.eb
        for y in range(L.h):
            us = [(L.dat_base + y * per + o) % P.dcap for o in range(per)]
            slices.append([(u, dunits[u]) for u in us[::-1]])
    else:
        units.update(dunits)
    jb = Job(P.regs(), L.dat_base, L.h, P.ops, P.wcap, units, wl, slices, None, cube, wts)
    jb.img, jb.lines = P, lines
    return jb


# ------------------------------------------------------------------------- references
def _ref_ops(P: ImgPlan, lines, wts, stripe_max: int) -> list:
    """The image op sequence as test_csc16's ``_decode`` tuples: (n, data lanes < n, weight
    lanes < n per cell, pos, first, last); lanes as patterns (INT8 data: the byte; INT8
    weights: {w[2j+1], w[2j]} per cell)."""
    G, L = P.G, P.L
    m = (1 << 8 * L.eb) - 1
    pad = L.pad_value & m
    cells = G.ak // 2
    ops = []
    for g in range(P.ng):
        kg = min(P.akl, L.k - g * P.akl)

        def w(kin, wr, b):
            return int(wts[g * P.akl + kin, wr, 0, b]) & m if kin < kg else 0
        p0 = 0
        for npx in t16._stripes(L.wo * L.ho, stripe_max):
            pix = range(p0, p0 + npx)
            p0 += npx
            for si, (n, src) in enumerate(P.sets):
                if L.eb == 2:
                    wt = tuple(tuple(w(j, wr, b) for (_, wr, b, _l) in src) for j in range(cells))
                else:
                    wt = tuple(tuple(w(2 * j, wr, b) | w(2 * j + 1, wr, b) << 8
                                     for (_, wr, b, _l) in src) for j in range(cells))
                for i, pidx in enumerate(pix):
                    yo, xo = divmod(pidx, L.wo)
                    d = [0] * n
                    for (lo, _, b, lane) in src:
                        y = yo * L.sy - L.pt + lo
                        d[lane] = int(lines[y, xo * L.sx * L.c + b]) if 0 <= y < L.h else pad
                    ops.append((n, tuple(d), wt, i, int(si == 0), int(si == len(P.sets) - 1)))
    return ops


def _model(P: ImgPlan, cube, wts) -> np.ndarray:
    """The model's image convolution: FP16 ``conv_img_fp16`` (fp32 patterns), else the exact
    sums of ``ConvCore._conv_img`` (CSC's pad signed, 8 or 16 bits)."""
    L = P.L
    if L.prec == FP16:
        return conv_img_fp16(cube, wts, L.ho, L.wo, L.sx, L.sy, L.pt, L.pad_value & 0xFFFF,
                             L.ext, P.G.ac)
    return ConvCore._conv_img(cube, wts, L.ho, L.wo, L.sx, L.sy, L.pt,
                              _s(L.pad_value, 8 * L.eb))


def _check(jb: Job, raw: list, stripe_max: int):
    P = jb.img
    G, L = P.G, P.L
    ops = [_decode(G, x, L.prec, stripe_max) for x in raw]
    ref = _ref_ops(P, jb.lines, jb.wts, stripe_max)
    assert len(ops) == len(ref)
    for n, (a, b) in enumerate(zip(ops, ref)):
        assert a == b, f"{L}: op {n}: got {a}, want {b}"
    # test_csc16's reduction (CMAC + CACC in op order) over the image sets
    red = SimpleNamespace(L=SimpleNamespace(wo=L.wo, ho=L.ho, prec=L.prec, eb=L.eb, k=L.k,
                                            r=len(P.sets), s=1),
                          ncb=1, akl=P.akl, ng=P.ng)
    np.testing.assert_array_equal(_reduce(red, ops), _model(P, jb.cube, jb.wts))


def _run(G: Geo, layers: list, stripe_max: int, seed: int, **kw):
    nrng = np.random.default_rng(seed)
    jobs = [_job(G, L, nrng, slow=kw.get("slow", False)) for L in layers]
    res = t16._simulate(G, jobs, stripe_max, seed, **kw)
    for jb, (raw, _, _) in zip(jobs, res):
        _check(jb, raw, stripe_max)
    return res


def _random_layer(G: Geo, rng: random.Random, prec: int, min_ops: int, max_ops: int,
                  ext: int | None = None) -> ImgLayer16:
    """A random legal image layer (the model's limits, :func:`legal`)."""
    while True:
        c = rng.randint(1, 4)
        e = rng.choice([1, 1, 2, 4]) if ext is None else ext
        if e > 1:
            if c * e > G.ac:
                continue
            sk = rng.randint(1, G.ac // (c * e))
            sx = rng.randint(1, max(1, min(3, G.ac // (c * e))))
            r = rng.randint(2, 2 * e + 1)
        else:
            sk = rng.randint(1, min(6, 3 * G.ac // c))
            sx = rng.randint(1, 3)
            r = rng.randint(1, 4)
        if prec == FP16:
            pads = [rng.choice([0, 0x3C00, 0xBC00, rng.getrandbits(16)]) for _ in range(2)]
        else:
            pads = [rng.getrandbits(16), rng.getrandbits(16)]
        L = ImgLayer16(prec, w=rng.randint(1, 12), h=rng.randint(1, 7), c=c,
                       k=rng.randint(1, 3 * G.ak // 2), r=r, sk=sk, sx=sx,
                       sy=rng.randint(1, 3), pl=rng.randrange(sk), pr=rng.randrange(sk),
                       pt=rng.randrange(r), pb=rng.randrange(r), ext=e, pad_value=pads[0],
                       cdma_pad=pads[1], eps_extra=rng.randint(0, 2),
                       csc_pl=rng.randint(0, 31))
        if not legal(G, L):
            continue
        P = ImgPlan(G, L)
        if min_ops <= P.ops <= max_ops and P.dunits <= 4 * G.depth:
            # a dat_base anywhere in the data ring (even: 16-bit entries are unit pairs)
            L.dat_base = rng.randrange(0, P.dcap, L.eb)
            return L


# ------------------------------------------------------------------------- tests
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_geometry_b_random(seed):
    """Geometry B: random INT16 and FP16 image layers (C 1..4, kernel widths over one to three
    chunks, strides, CDMA and CSC pads, post-extension 1/2/4, several kernel groups, dat_base
    anywhere in the ring) and an INT8 one in between, random stalls and CBUF latencies."""
    G = geo("B")
    rng = random.Random(seed)
    plan = [(INT16, None), (FP16, None), (INT8, None), (FP16, 2), (INT16, 4), (FP16, 1),
            (INT16, 2), (FP16, 4)]
    layers = [_random_layer(G, rng, prec, 40, 400, ext) for prec, ext in plan]
    _run(G, layers, rng.choice([3, 5, 8]), seed=seed)


def test_geometry_b_cases():
    """Geometry B, chosen INT16/FP16 cases: unaligned ops (two reads per line), ext 4 with a
    short last row group and pad lines inside row groups, C 3 over three chunks, an FP16 pad
    value that is a NaN (pad lines make NaN words), one kernel, a stripe of 1."""
    G = geo("B")
    layers = [
        ImgLayer16(INT16, w=7, h=5, c=3, k=9, r=2, sk=5, sx=1, sy=1, pl=2, pr=1, pt=1, pb=1,
                   pad_value=0x8001, cdma_pad=0x7FFF, eps_extra=1, dat_base=6),
        ImgLayer16(FP16, w=8, h=6, c=1, k=6, r=7, sk=2, sx=2, sy=2, pl=1, pr=1, pt=3, pb=2,
                   ext=4, pad_value=0xBC00, cdma_pad=0x3C00),
        ImgLayer16(FP16, w=5, h=4, c=2, k=1, r=3, sk=2, sx=1, sy=1, pt=2, pb=1, ext=2,
                   pad_value=0x7E01, cdma_pad=0x0001),
        ImgLayer16(INT16, w=6, h=3, c=2, k=5, r=2, sk=2, sx=1, sy=1, pl=1, pt=1, ext=2,
                   pad_value=0x7FFF, cdma_pad=0x8000),
    ]
    _run(G, layers, 1, seed=3)


def test_geometry_b_slow_ring():
    """Slices arrive while CSC runs (garbage before, each slice written last unit first), and
    a fake CDMA refills a one-bank weight ring as wt_released allows: INT16 and FP16."""
    G = geo("B")
    layers = [ImgLayer16(FP16, w=6, h=6, c=3, k=10, r=3, sk=3, sx=1, sy=2, pl=1, pr=2, pt=1,
                         pb=1, pad_value=0x3555, cdma_pad=0xC000, eps_extra=1, dat_base=8),
              ImgLayer16(INT16, w=5, h=5, c=1, k=7, r=5, sk=2, sx=2, sy=1, pl=1, pt=2, pb=2,
                         ext=2, pad_value=0x8000, cdma_pad=0x1234)]
    _run(G, layers, 5, seed=4, slow=True)
    big = ImgLayer16(FP16, w=4, h=6, c=4, k=16, r=7, sk=6, sx=1, pl=1, pr=1, pt=1, pb=1,
                     pad_value=0x2222, cdma_pad=0x1C00, weight_bank=0)
    Pb = ImgPlan(G, big)
    assert Pb.wunits > Pb.wcap, (Pb.wunits, Pb.wcap)
    _run(G, [big], 4, seed=5, ring=True, p_stall=0.1)


def _full_rate(G: Geo, layers, stripe_max, seed):
    """(ops, cycles start..done, cycles first..last op) per layer: no stalls, CBUF answering
    every cycle after 3 cycles."""
    res = _run(G, layers, stripe_max, seed, p_stall=0.0, lat=(3, 3), p_gap=0.0)
    return [(len(raw), span, ts[-1] - ts[0] + 1) for raw, span, ts in res]


def test_full_rate_b(capsys):
    """Geometry B, NVIDIA's img_* shape (C 4, x stride 2: every op one aligned entry): INT16,
    FP16 and INT8 image layers run one op per cycle from the first op to the last."""
    G = geo("B")
    layers = [ImgLayer16(p, w=13, h=6, c=4, k=8, r=3, sk=5, sx=2, sy=1, pl=1, pr=1, pt=1,
                         pb=1) for p in (INT16, FP16, INT8)]
    rates = _full_rate(G, layers, 16, 6)
    with capsys.disabled():
        print(f"\nB image (ops, cycles start..done, cycles first..last op): {rates}")
    for ops, span, steady in rates:
        assert steady == ops and span <= ops + 12 + G.ak


def test_geometry_a(capsys):
    """Geometry A (nv_full: 64 elements per 128-B entry, kernel groups of 16): INT16 and FP16
    image layers with stalls (C 3 with a 2-chunk kernel line, unaligned, slices wrapping the
    data ring; FP16 ext 2; INT16 ext 4 with a short last row group; an INT8 layer between
    from an odd dat_base), then INT16 and FP16 layers of one read per op at full rate."""
    G = geo("A")
    layers = [ImgLayer16(INT16, w=25, h=3, c=3, k=18, r=2, sk=23, sx=2, sy=1, pl=5, pr=3,
                         pt=1, pad_value=0x8123, cdma_pad=0x00FF, dat_base=G.depth - 6),
              ImgLayer16(FP16, w=9, h=4, c=4, k=20, r=3, sk=5, sx=2, sy=2, pl=2, pr=2, pt=1,
                         pb=1, ext=2, pad_value=0x3C00, cdma_pad=0xB800),
              ImgLayer16(INT8, w=6, h=3, c=3, k=35, r=2, sk=3, sx=1, pl=1, pb=1,
                         pad_value=0x7F80, dat_base=G.depth - 3),
              ImgLayer16(INT16, w=6, h=6, c=1, k=17, r=6, sk=3, sx=3, sy=2, pl=1, pr=1, pt=2,
                         pb=1, ext=4, pad_value=0x7FFF, cdma_pad=0x8000)]
    _run(G, layers, 5, seed=7)
    full = [ImgLayer16(p, w=20, h=5, c=4, k=16, r=3, sk=2, sx=2, sy=1, pt=1, pb=1)
            for p in (INT16, FP16)]
    rates = _full_rate(G, full, 32, 8)
    with capsys.disabled():
        print(f"\nA image (ops, cycles start..done, cycles first..last op): {rates}")
    for ops, span, steady in rates:
        assert steady == ops and span <= ops + 12 + G.ak // 2
