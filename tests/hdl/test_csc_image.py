"""CSC image mode (hdl/csc/image.py; docs/conv.md "CSC") on a real CBUF in Amaranth's simulator.

CBUF is loaded with image lines as CDMA leaves them (each slice one line of (PL + W + PR)
pixels of C bytes, entry-packed; garbage past the padded line and in unused entries of the
slice) and weights in the image weight layouts (direct-convolution layout with S = 1 and
C = S*C, or channel post-extension, format.rst "Weight Channel Post-extension for image
input"). Checks: (a) the op sequence equals a plain-Python generator of the documented image
sequence (``_ref_ops``: data lanes from the byte offset xo*sx*C + cb*atomic_c of the line, the
pad value on lines outside the input, 0 on lanes no weight multiplies), (b) the ops accumulated
per pixel equal the model's image convolution ``verif.model.conv.ConvCore._conv_img``, (c) the
weight layouts generated here read back through the model's ``read_weights`` /
``read_weights_post_ext``. ``ImgData`` (the data path alone) and the whole ``Csc`` are both
tested; layers are random (C in 1..4, W, H, strides, paddings, pad values, kernel sizes, ext
1/2/4) from seeds that reproduce, plus NVIDIA's img_* shape (aligned ops: one op per cycle).
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import pytest

from amaranth.hdl import ClockDomain, Module, Value
from amaranth.lib import wiring
from amaranth.sim import Simulator

from hdl.cbuf import Cbuf, CbufGeometry
from hdl.config import NV_SMALL
from hdl.csc.image import ImgData, img_params
from hdl.regfile import unit_layout
from hdl.regmap import REGMAP
from streams import as_bits, check_stream_stable, stream_get, stream_put
from test_csc import _decode_ops, _stripes
from verif.model.conv import ConvCore, read_weights, read_weights_post_ext

CFG = NV_SMALL.derive(name="nv_small+csc_test", cbuf_bank_number=16, cbuf_bank_depth=128)
AC, AK = CFG.mac_atomic_c, CFG.mac_atomic_k
GEOM = CbufGeometry.from_config(CFG)
EB = GEOM.entry_bytes


def _s8(v):
    v &= 0xFF
    return v - 256 if v >= 128 else v


@dataclass
class ImgLayer:
    w: int                      # pixels per line (CDMA's DATAIN_WIDTH+1)
    h: int
    c: int                      # bytes per pixel (1..4)
    k: int
    r: int = 1
    sk: int = 1                 # kernel width: cw = sk*c
    sx: int = 1
    sy: int = 1
    pl: int = 0                 # CDMA's left/right padding (in the CBUF line)
    pr: int = 0
    pt: int = 0
    pb: int = 0
    ext: int = 1                # post-extension lines: 1, 2, 4
    pad_value: int = 0          # CSC D_ZERO_PADDING_VALUE (16 bits; low byte signed)
    cdma_pad: int = 0           # value of the left/right padding bytes in the line
    eps_extra: int = 0
    csc_pl: int = 0             # CSC's PAD_LEFT: ignored in image mode
    dat_base: int = 0

    @property
    def cw(self):
        return self.sk * self.c

    @property
    def wpx(self):
        return self.pl + self.w + self.pr

    @property
    def line_bytes(self):
        return self.wpx * self.c

    @property
    def eps(self):
        return -(-self.line_bytes // EB) + self.eps_extra

    @property
    def wo(self):
        return (self.wpx - self.sk) // self.sx + 1

    @property
    def ho(self):
        return (self.pt + self.h + self.pb - self.r) // self.sy + 1

    @property
    def ng(self):
        return -(-self.k // AK)

    @property
    def sets(self):
        """(cb, r, lanes, [(line offset, weight row, byte offset, lane)...]) of a kernel group
        in op order: the lanes of each set and where they come from."""
        out = []
        if self.ext == 1:
            for cb in range(-(-self.cw // AC)):
                n = min(AC, self.cw - cb * AC)
                for r in range(self.r):
                    out.append((n, [(r, r, cb * AC + l, l) for l in range(n)]))
        else:
            for rg in range(-(-self.r // self.ext)):
                nl = min(self.ext, self.r - rg * self.ext)
                out.append((nl * self.cw, [(rg * self.ext + j, rg * self.ext + j, ci,
                                            j * self.cw + ci)
                                           for j in range(nl) for ci in range(self.cw)]))
        return out

    @property
    def ops(self):
        return self.ng * len(self.sets) * self.wo * self.ho

    @property
    def wbytes(self):
        return self.k * self.r * self.cw

    @property
    def wentries(self):
        return -(-self.wbytes // EB)

    @property
    def data_bank(self):
        return -(-(self.h * self.eps) // GEOM.depth) - 1

    @property
    def wbank(self):
        return -(-self.wentries // GEOM.depth) - 1

    @property
    def pad8(self):
        return _s8(self.pad_value)


def _regs_value(L: ImgLayer) -> int:
    layout = unit_layout(REGMAP.unit("CSC"), "cfg")
    fields = {
        "d_datain_format": {"datain_format": 1},
        "d_datain_size_ext_0": {"datain_width_ext": L.w - 1, "datain_height_ext": L.h - 1},
        "d_datain_size_ext_1": {"datain_channel_ext": L.c - 1},
        "d_weight_size_ext_0": {"weight_width_ext": 0, "weight_height_ext": L.r - 1},
        "d_weight_size_ext_1": {"weight_channel_ext": L.cw - 1, "weight_kernel": L.k - 1},
        "d_weight_bytes": {"weight_bytes": L.wbytes},
        "d_dataout_size_0": {"dataout_width": L.wo - 1, "dataout_height": L.ho - 1},
        "d_dataout_size_1": {"dataout_channel": L.k - 1},
        "d_entry_per_slice": {"entries": L.eps - 1},
        "d_bank": {"data_bank": L.data_bank, "weight_bank": L.wbank},
        "d_conv_stride_ext": {"conv_x_stride_ext": L.sx - 1, "conv_y_stride_ext": L.sy - 1},
        "d_zero_padding": {"pad_left": L.csc_pl, "pad_top": L.pt},
        "d_zero_padding_value": {"pad_value": L.pad_value},
        "d_post_y_extension": {"y_extension": {1: 0, 2: 1, 4: 2}[L.ext]},
    }
    v = 0
    for reg, fs in fields.items():
        rf = layout[reg]
        for name, val in fs.items():
            f = rf.shape[name]
            assert 0 <= val < (1 << f.width), (reg, name, val)
            v |= val << (rf.offset + f.offset)
    return v


class _Mem:
    """A byte array with the model's memory interface (``read``, ``gather``)."""

    def __init__(self, b: bytes):
        self.a = np.frombuffer(b, dtype=np.uint8)

    def read(self, addr, n):
        return self.a[addr:addr + n].copy()

    def gather(self, idx):
        return self.a[np.asarray(idx)]


def _weight_stream(L: ImgLayer, wts) -> bytes:
    """Image weights (K, R, 1, cw) in memory order: per kernel group, per set (op order),
    kernel after kernel the set's bytes (format.rst; model read_weights[_post_ext])."""
    out = []
    for g in range(L.ng):
        kg = min(AK, L.k - g * AK)
        for n, src in L.sets:
            for kin in range(kg):
                for (_, wr, b, _l) in src:
                    out.append(int(wts[g * AK + kin, wr, 0, b]) & 0xFF)
    assert len(out) == L.wbytes
    return bytes(out)


def _make(L: ImgLayer, seed: int):
    nrng = np.random.default_rng(seed)
    cube = nrng.integers(-128, 128, size=(L.c, L.h, L.wpx))
    cube[:, :, :L.pl] = _s8(L.cdma_pad)
    cube[:, :, L.pl + L.w:] = _s8(L.cdma_pad)
    wts = nrng.integers(-128, 128, size=(L.k, L.r, 1, L.cw))
    garbage = nrng.integers(0, 256, size=(L.h, L.eps * EB))
    # the weight layout generated here is the one the model reads
    st = _weight_stream(L, wts)
    mem = _Mem(st)
    back = (read_weights(mem, 0, L.k, L.r, 1, L.cw, AC, AK) if L.ext == 1
            else read_weights_post_ext(mem, 0, L.k, L.r, L.cw, L.ext, AK))
    np.testing.assert_array_equal(back, wts)
    return cube, wts, garbage


def _lines(L: ImgLayer, cube, garbage) -> list:
    """Line y as bytes: pixel-major C bytes, then garbage up to EPS entries."""
    out = []
    for y in range(L.h):
        b = [int(cube[j % L.c, y, j // L.c]) & 0xFF for j in range(L.line_bytes)]
        b += [int(v) for v in garbage[y, len(b):]]
        out.append(b)
    return out


def _dentries(L: ImgLayer, lines) -> dict:
    dcap = GEOM.wt_base(L.data_bank)
    ent = {}
    for y, b in enumerate(lines):
        for e in range(L.eps):
            ent[(L.dat_base + y * L.eps + e) % dcap] = int.from_bytes(bytes(b[e * EB:(e + 1) * EB]),
                                                                    "little")
    return ent


def _ref_ops(L: ImgLayer, lines, wts, stripe_max: int) -> list:
    """(data lanes, wt[k][c], pos, first, last) of every op, plainly."""
    ops = []
    sets = L.sets
    for g in range(L.ng):
        kg = min(AK, L.k - g * AK)
        p0 = 0
        for n in _stripes(L.wo * L.ho, stripe_max):
            pix = range(p0, p0 + n)
            p0 += n
            for si, (nl, src) in enumerate(sets):
                wt = [[0] * AC for _ in range(AK)]
                for kin in range(kg):
                    for (_, wr, b, lane) in src:
                        wt[kin][lane] = int(wts[g * AK + kin, wr, 0, b])
                wt = tuple(tuple(x) for x in wt)
                for i, pidx in enumerate(pix):
                    yo, xo = divmod(pidx, L.wo)
                    d = [0] * AC
                    for (lo, _, b, lane) in src:
                        y = yo * L.sy - L.pt + lo
                        d[lane] = (_s8(lines[y][xo * L.sx * L.c + b]) if 0 <= y < L.h
                                   else L.pad8)
                    ops.append((tuple(d), wt, i, int(si == 0), int(si == len(sets) - 1)))
    return ops


def _accumulate(L: ImgLayer, ops) -> np.ndarray:
    out = np.zeros((L.ng * AK, L.ho * L.wo), dtype=np.int64)
    acc, done = {}, [0] * L.ng
    per_group = len(L.sets) * L.wo * L.ho
    for n, (d, wt, pos, first, last) in enumerate(ops):
        g = n // per_group
        psum = np.array(wt, dtype=np.int64) @ np.array(d, dtype=np.int64)
        acc[pos] = psum if first else acc[pos] + psum
        if last:
            out[g * AK:(g + 1) * AK, done[g]] = acc[pos]
            done[g] += 1
    assert done == [L.wo * L.ho] * L.ng
    return out[:L.k].reshape(L.k, L.ho, L.wo)


class _ImgDataTop(wiring.Component):
    """ImgData with its parameters from a CSC register value (test wrapper)."""

    def __init__(self, stripe_max):
        self.sm = stripe_max
        self.dut = ImgData(GEOM, AC, AK, stripe_max)
        super().__init__({
            "regs": wiring.In(unit_layout(REGMAP.unit("CSC"), "cfg")),
            "dat_base": wiring.In(GEOM.addr_bits),
            "start": wiring.In(1),
            "dat_slices": wiring.In(14),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = d = self.dut
        q = img_params(m, self.regs, self.dat_base, GEOM, AC, AK)
        m.d.comb += [d.params.eq(q), d.start.eq(self.start), d.dat_slices.eq(self.dat_slices)]
        return m


def _run(L: ImgLayer, stripe_max: int, seed: int, *, unit="csc", p_stall=0.3, slow=False,
         want_stamps=None, wt_serial=None):
    """Simulate ``unit`` ("csc": the whole Csc; "data": ImgData only) on CBUF with layer
    ``L``; ``slow``: slices and weight entries arrive while CSC runs. Returns (ops, cycles
    from start to the last op)."""
    rng = random.Random(seed)
    cube, wts, garbage = _make(L, seed)
    lines = _lines(L, cube, garbage)
    dent = _dentries(L, lines)
    st = _weight_stream(L, wts) + bytes(EB)
    went = [(int.from_bytes(st[n * EB:(n + 1) * EB], "little"),
             GEOM.wt_entry(n, L.data_bank, L.wbank)) for n in range(L.wentries)]
    assert L.h * L.eps <= GEOM.wt_base(L.data_bank)
    assert GEOM.wt_base(L.data_bank) + GEOM.wt_cap(L.wbank) <= GEOM.entries

    cbuf = Cbuf(GEOM.banks, GEOM.depth, GEOM.entry_bytes)
    top = Module()
    top.domains.sync = ClockDomain()
    top.submodules.cbuf = cbuf
    if unit == "csc":
        from hdl.csc import Csc
        dut = Csc(CFG, stripe_max, wt_serial=wt_serial)
        top.submodules.dut = dut
        for port in ("dat_rd_req", "wt_rd_req"):
            wiring.connect(top, getattr(dut, port), getattr(cbuf, port))
        for port in ("dat_rd_resp", "wt_rd_resp"):
            wiring.connect(top, getattr(cbuf, port), getattr(dut, port))
        out = dut.op
        base_sig = dut.keep.dat_base
    else:
        dut = _ImgDataTop(stripe_max)
        top.submodules.dut = dut
        wiring.connect(top, dut.dut.dat_rd_req, cbuf.dat_rd_req)
        wiring.connect(top, cbuf.dat_rd_resp, dut.dut.dat_rd_resp)
        out = dut.dut.o
        base_sig = dut.dat_base

    state = {"started": False, "start": None, "last": None}
    raw = []
    errors = []
    wcap = GEOM.wt_cap(L.wbank)

    async def control(ctx):
        ctx.set(Value.cast(dut.regs), _regs_value(L))
        ctx.set(base_sig, L.dat_base)
        if not slow:
            await stream_put(ctx, cbuf.dat_wr, [{"addr": a, "data": v} for a, v in dent.items()],
                             rng=rng, p_stall=0)
            await stream_put(ctx, cbuf.wt_wr, [{"addr": a, "data": v} for v, a in went],
                             rng=rng, p_stall=0)
            ctx.set(dut.dat_slices, L.h)
            if unit == "csc":
                ctx.set(dut.wt_entries, L.wentries)
        # the parameters (registered from the registers) settle a cycle before ``start``, as
        # Csc guarantees its sequencers (hdl/csc/seq.py stripe_counter)
        await ctx.tick().repeat(2)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        state["started"] = True

    async def slow_data(ctx):
        while not state["started"]:
            await ctx.tick()
        dcap = GEOM.wt_base(L.data_bank)
        for y in range(L.h):
            items = [{"addr": (L.dat_base + y * L.eps + e) % dcap,
                      "data": dent[(L.dat_base + y * L.eps + e) % dcap]}
                     for e in range(L.eps)][::-1]
            await stream_put(ctx, cbuf.dat_wr, items, rng=rng, p_stall=p_stall)
            await ctx.tick()
            ctx.set(dut.dat_slices, y + 1)

    async def slow_weights(ctx):
        while not state["started"]:
            await ctx.tick()
        for n, (v, a) in enumerate(went):
            while n >= ctx.get(dut.wt_released) + wcap:
                await ctx.tick()
            await stream_put(ctx, cbuf.wt_wr, [{"addr": a, "data": v}], rng=rng, p_stall=p_stall)
            ctx.set(dut.wt_entries, n + 1)

    async def consumer(ctx):
        while not state["started"]:
            await ctx.tick()
        stamps = [] if want_stamps is None else want_stamps
        got = await stream_get(ctx, out, L.ops, rng=rng, p_stall=p_stall, timestamps=stamps,
                               timeout=50 * L.ops + 20_000)
        state["last"] = stamps[-1] + 1 if stamps else 0
        raw.extend(as_bits(x) for x in got)
        for _ in range(10):
            await ctx.tick()
        if unit == "csc":
            assert not ctx.get(dut.busy)

    sim = Simulator(top)
    sim.add_clock(1e-8)
    tbs = [control, consumer]
    if slow:
        tbs.append(slow_data)
        if unit == "csc":
            tbs.append(slow_weights)
    for tb in tbs:
        sim.add_testbench(tb)
    sim.add_process(check_stream_stable(out, errors=errors, name="op"))
    sim.run()
    assert errors == [], errors[:5]

    ref = _ref_ops(L, lines, wts, stripe_max)
    if unit == "csc":
        ops = _decode_ops(raw, stripe_max)
    else:
        ol = dut.dut.o_layout
        tl = ol["tag"].shape
        pw = tl["pos"].width
        ops = []
        for bits in raw:
            d = tuple(_s8(bits >> (8 * c)) for c in range(AC))
            t = bits >> ol["tag"].offset
            ops.append((d, None, (t >> tl["pos"].offset) & ((1 << pw) - 1),
                        (t >> tl["first"].offset) & 1, (t >> tl["last"].offset) & 1))
        ref_cmp = [(a[0], None) + a[2:] for a in ref]
        for n, (a, b) in enumerate(zip(ops, ref_cmp)):
            assert a == b, f"op {n}: got {a}, want {b}"
        ops = [(a[0], b[1]) + a[2:] for a, b in zip(ops, ref)]
    assert len(ops) == len(ref)
    for n, (a, b) in enumerate(zip(ops, ref)):
        assert a == b, f"op {n}: got {a}, want {b}"
    conv = _accumulate(L, ops)
    want = ConvCore._conv_img(cube, wts, L.ho, L.wo, L.sx, L.sy, L.pt, L.pad8)
    np.testing.assert_array_equal(conv, want)
    return ops, state["last"]


def _random_layer(rng: random.Random, max_ops=1200) -> ImgLayer:
    while True:
        c = rng.randint(1, 4)
        ext = rng.choice([1, 1, 2, 4])
        sk = rng.randint(1, 4)
        if ext > 1:
            if c * ext > AC:
                continue
            sk = rng.randint(1, AC // (c * ext))
        r = rng.randint(1, 6)
        L = ImgLayer(w=rng.randint(1, 16), h=rng.randint(1, 10), c=c, k=rng.randint(1, 18), r=r,
                     sk=sk, sx=rng.randint(1, 3), sy=rng.randint(1, 3),
                     pl=rng.randrange(sk), pr=rng.randrange(sk), pt=rng.randrange(r),
                     pb=rng.randrange(r), ext=ext, pad_value=rng.getrandbits(16),
                     cdma_pad=rng.getrandbits(8), eps_extra=rng.randint(0, 2),
                     csc_pl=rng.randint(0, 31))
        if L.wpx >= sk and L.pt + L.h + L.pb >= r and L.ops <= max_ops:
            return L


CASES = {
    # aligned ops (C=4, sx=2 as NVIDIA's img traces), top/bottom pad lines
    "c4_sx2_aligned": (ImgLayer(w=9, h=7, c=4, k=10, r=3, sk=3, sx=2, sy=2, pl=1, pr=2, pt=2,
                                pb=1, pad_value=0x1291, cdma_pad=0x91), 8),
    # unaligned ops: C=3, sx=1; two entries per op
    "c3_unaligned": (ImgLayer(w=7, h=5, c=3, k=9, r=2, sk=3, sx=1, sy=1, pl=2, pr=1, pt=1,
                              pb=1, pad_value=0xFF80, eps_extra=1), 5),
    "c1_ext4": (ImgLayer(w=8, h=9, c=1, k=12, r=7, sk=2, sx=3, sy=2, pl=1, pr=1, pt=3, pb=2,
                         ext=4, pad_value=0x7F), 8),
    "c2_ext2": (ImgLayer(w=6, h=6, c=2, k=5, r=5, sk=2, sx=1, sy=1, pt=4, pb=3, pl=1,
                         ext=2, pad_value=0x81), 8),
    "c3_ext2_k1": (ImgLayer(w=5, h=3, c=3, k=1, r=3, sk=1, sx=2, sy=1, pt=1, pb=2, ext=2,
                            pad_value=0x05), 3),
}


@pytest.mark.parametrize("name", list(CASES))
def test_data_path(name):
    """ImgData alone: data atoms and tags."""
    L, sm = CASES[name]
    _run(L, sm, seed=sorted(CASES).index(name) + 1, unit="data")


@pytest.mark.parametrize("seed", list(range(1, 11)))
def test_data_path_random(seed):
    rng = random.Random(seed)
    L = _random_layer(rng)
    _run(L, rng.choice([1, 3, 5, 8]), seed=seed, unit="data")


def test_data_path_slow_slices_ring():
    """Slices arrive one by one while the data path runs (written last entry first), slice 0
    near the end of the data-bank ring (reuse across layers): reads wait for dat_slices and
    wrap around the ring."""
    L = ImgLayer(w=9, h=6, c=3, k=4, r=3, sk=2, sx=1, sy=1, pl=1, pr=1, pt=1, pb=1,
                 pad_value=0x4C, eps_extra=1)
    L.dat_base = GEOM.wt_base(L.data_bank) - 2 * L.eps - 1
    _run(L, 8, seed=41, unit="data", slow=True, p_stall=0.4)


def test_data_path_throughput(capsys):
    """NVIDIA's img_* shape (C = 4, sx = 2: every op one aligned entry): one op per cycle."""
    L = ImgLayer(w=21, h=12, c=4, k=8, r=4, sk=9, sx=2, sy=2, pl=1, pr=1, pt=1, pb=1)
    stamps = []
    ops, _ = _run(L, 16, seed=42, unit="data", p_stall=0.0, want_stamps=stamps)
    steady = len(ops) / (stamps[-1] - stamps[0] + 1)
    with capsys.disabled():
        print(f"\nImgData: {len(ops)} ops, first to last op {steady:.4f} ops/cycle")
    assert steady == 1.0


@pytest.mark.parametrize("name", list(CASES))
def test_csc_layer(name):
    """The whole Csc in image mode: ops (data and weight sets) and the convolution."""
    L, sm = CASES[name]
    _run(L, sm, seed=sorted(CASES).index(name) + 11)


@pytest.mark.parametrize("seed", [21, 22, 23, 24, 25, 26])
def test_csc_random(seed):
    rng = random.Random(seed)
    L = _random_layer(rng)
    _run(L, rng.choice([1, 2, 5, 8]), seed=seed)


@pytest.mark.parametrize("seed", [61, 62, 63])
def test_csc_random_wt_serial(seed):
    """Image layers with nv_large's weight path (hdl/csc/wtset.py WtUnpackSerial), here at
    nv_small's geometry: the image weight sets (channel post-extension) kernel by kernel."""
    rng = random.Random(seed)
    L = _random_layer(rng)
    _run(L, rng.choice([1, 2, 5, 8]), seed=seed, wt_serial=True)


def test_csc_slow_counters_ext():
    """Slices and weight entries arrive while CSC runs (post-extension sets, unaligned)."""
    L = ImgLayer(w=7, h=9, c=1, k=11, r=7, sk=3, sx=2, sy=1, pl=1, pr=2, pt=2, pb=1, ext=2,
                 pad_value=0x9C, eps_extra=1)
    _run(L, 5, seed=31, slow=True, p_stall=0.5)
    L = ImgLayer(w=10, h=6, c=3, k=9, r=3, sk=4, sx=1, sy=2, pl=3, pr=1, pt=2, pb=1,
                 pad_value=0x21)
    L.dat_base = GEOM.wt_base(L.data_bank) - L.eps - 2
    _run(L, 8, seed=32, slow=True, p_stall=0.3)


def test_csc_throughput(capsys):
    """NVIDIA's img_* shape scaled down (C = 4, sx = sy = 2, kernel 9 wide: 36-byte lines in 5
    channel blocks, the last 4 bytes): every op one aligned CBUF entry; ops per cycle from
    start to done must be >= 0.97 (stripe_max = 32 as the pipeline)."""
    L = ImgLayer(w=29, h=20, c=4, k=16, r=4, sk=9, sx=2, sy=2, pt=1, pb=1)
    stamps = []
    ops, last = _run(L, 32, seed=43, p_stall=0.0, want_stamps=stamps)
    rate = len(ops) / (last + 2)
    with capsys.disabled():
        print(f"\nCSC image: {len(ops)} ops, {rate:.4f} ops/cycle from start to the last op")
    assert rate >= 0.97
