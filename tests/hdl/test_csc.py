"""CSC (hdl.csc.Csc, docs/conv.md "CSC") on a real CBUF (hdl.cbuf.Cbuf) in Amaranth's simulator.

CBUF is loaded through its write ports with a random feature cube and weights laid out as
docs/conv.md says (``_layout_data``/``_layout_weights`` below); CSC runs with a random-stall
consumer on ``op``. Checks: (a) the op sequence equals a plain-Python generator of the
documented sequence (``_ref_ops``), (b) the ops accumulated per pixel (sum data*wt, first/last)
equal the model's direct convolution ``verif.model.conv.ConvCore._conv_dc``. Layers cover
padding and CSC's pad value, stride 2, dilation 2, C not a multiple of atomic_c, K not a
multiple of atomic_k, stripes of one pixel, outputs larger than stripe_max, slowly growing
dat_slices / wt_entries (a fake CDMA writing while CSC runs) and a weight ring smaller than the
layer's weights (the fake CDMA refills it as wt_released allows). ``test_throughput`` measures
ops per cycle on a compute-bound layer."""
from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import pytest

from amaranth.hdl import ClockDomain, Module, Value
from amaranth.lib import wiring
from amaranth.sim import Simulator

from hdl.cbuf import Cbuf, CbufGeometry
from hdl.cmac.layouts import op_layout
from hdl.config import NV_SMALL
from hdl.csc import Csc
from hdl.regfile import unit_layout
from hdl.regmap import REGMAP
from streams import as_bits, check_stream_stable, stream_get, stream_put
from verif.model.conv import ConvCore   # the reference (tests may use the model)

CFG = NV_SMALL.derive(name="nv_small+csc_test", cbuf_bank_number=16, cbuf_bank_depth=128)
#: the same with multi-batch (docs/conv.md "Multi-batch"; CSC then needs stripe_max >= 32)
CFG_B = CFG.derive(name="nv_small+csc_test+batch", batch=True, max_batch=32)
AC, AK = CFG.mac_atomic_c, CFG.mac_atomic_k
GEOM = CbufGeometry.from_config(CFG)
EB = GEOM.entry_bytes


@dataclass
class Layer:
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
    pad_value: int = 0          # 16-bit register value; CSC uses the low byte, signed
    eps_extra: int = 0          # entries per slice beyond ncb*w
    weight_bank: int | None = None
    dat_base: int = 0           # CSC's keep.dat_base: slice 0's entry in the data-bank ring
    nb: int = 1                 # batches (D_BATCH_NUMBER.BATCHES+1; > 1 needs CFG_B)

    @property
    def ncb(self):
        return -(-self.c // AC)

    @property
    def ng(self):
        return -(-self.k // AK)

    @property
    def eps(self):
        return self.ncb * self.w + self.eps_extra

    @property
    def wo(self):
        return (self.pl + self.w + self.pr - ((self.s - 1) * self.dx + 1)) // self.sx + 1

    @property
    def ho(self):
        return (self.pt + self.h + self.pb - ((self.r - 1) * self.dy + 1)) // self.sy + 1

    @property
    def data_bank(self):
        return -(-(self.nb * self.h * self.eps) // GEOM.depth) - 1

    @property
    def wbytes(self):
        return self.k * self.r * self.s * self.c

    @property
    def wentries(self):
        return -(-self.wbytes // EB)

    @property
    def wbank(self):
        if self.weight_bank is not None:
            return self.weight_bank
        return -(-self.wentries // GEOM.depth) - 1

    @property
    def pad8(self):
        v = self.pad_value & 0xFF
        return v - 256 if v >= 128 else v

    @property
    def ops(self):
        return self.ng * self.ncb * self.r * self.s * self.wo * self.ho * self.nb


def _regs_value(L: Layer) -> int:
    """The CSC register file's ``cfg`` view (as one integer) programmed for layer ``L``."""
    layout = unit_layout(REGMAP.unit("CSC"), "cfg")
    fields = {
        "d_datain_size_ext_0": {"datain_width_ext": L.w - 1, "datain_height_ext": L.h - 1},
        "d_datain_size_ext_1": {"datain_channel_ext": L.c - 1},
        "d_weight_size_ext_0": {"weight_width_ext": L.s - 1, "weight_height_ext": L.r - 1},
        "d_weight_size_ext_1": {"weight_channel_ext": L.c - 1, "weight_kernel": L.k - 1},
        "d_weight_bytes": {"weight_bytes": L.wbytes},
        "d_dataout_size_0": {"dataout_width": L.wo - 1, "dataout_height": L.ho - 1},
        "d_dataout_size_1": {"dataout_channel": L.k - 1},
        "d_entry_per_slice": {"entries": L.eps - 1},
        "d_bank": {"data_bank": L.data_bank, "weight_bank": L.wbank},
        "d_conv_stride_ext": {"conv_x_stride_ext": L.sx - 1, "conv_y_stride_ext": L.sy - 1},
        "d_dilation_ext": {"x_dilation_ext": L.dx - 1, "y_dilation_ext": L.dy - 1},
        "d_zero_padding": {"pad_left": L.pl, "pad_top": L.pt},
        "d_zero_padding_value": {"pad_value": L.pad_value},
        "d_batch_number": {"batches": L.nb - 1},
    }
    v = 0
    for reg, fs in fields.items():
        rf = layout[reg]
        for name, val in fs.items():
            f = rf.shape[name]
            width = f.width
            assert 0 <= val < (1 << width), (reg, name, val)
            v |= val << (rf.offset + f.offset)
    return v


def _dentry(L: Layer, y: int, cb: int, x: int, b: int = 0) -> int:
    """CBUF entry of atom (y, cb, x) of batch ``b``: docs/conv.md, (dat_base + (b*H + y)*EPS +
    cb*W + x) mod DCAP in the ring of the data banks (DCAP = (DATA_BANK+1) * depth; the
    batches' slices one after the other, docs/conv.md "Multi-batch")."""
    return ((L.dat_base + b * L.h * L.eps + GEOM.dat_entry(y, cb, x, L.eps, L.w))
            % GEOM.wt_base(L.data_bank))


def _make(L: Layer, seed: int):
    """Random ``(cubes, wts, garbage)``: one (C, H, W) cube per batch."""
    nrng = np.random.default_rng(seed)
    cube = nrng.integers(-128, 128, size=(L.c, L.h, L.w))
    wts = nrng.integers(-128, 128, size=(L.k, L.r, L.s, L.c))
    garbage = nrng.integers(0, 256, size=(L.ncb * AC, L.h, L.w))   # lanes past C in CBUF
    cubes = [cube] + [nrng.integers(-128, 128, size=(L.c, L.h, L.w)) for _ in range(L.nb - 1)]
    return cubes, wts, garbage


def _layout_data(L: Layer, cubes, garbage) -> dict:
    """CBUF entries of the feature cubes (docs/conv.md: atom (y, cb, x) of batch b at
    (b*H + y)*EPS + cb*W + x); channel lanes past C hold garbage (CSC must pass them, CMAC
    multiplies them by 0)."""
    entries = {}
    for b, cube in enumerate(cubes):
        for y in range(L.h):
            for cb in range(L.ncb):
                for x in range(L.w):
                    v = 0
                    for ci in range(AC):
                        c = cb * AC + ci
                        byte = int(cube[c, y, x]) & 0xFF if c < L.c else int(garbage[c, y, x])
                        v |= byte << (8 * ci)
                    entries[_dentry(L, y, cb, x, b)] = v
    return entries


def _weight_stream(L: Layer, wts) -> bytes:
    """Weight bytes in memory order (format.rst "Basic Weight for Direct Convolution"; the
    offsets of verif.model.conv.read_weights)."""
    out = []
    for g in range(L.ng):
        kg = min(AK, L.k - g * AK)
        for cb in range(L.ncb):
            cw = min(AC, L.c - cb * AC)
            for r in range(L.r):
                for s in range(L.s):
                    for kin in range(kg):
                        for ci in range(cw):
                            out.append(int(wts[g * AK + kin, r, s, cb * AC + ci]) & 0xFF)
    assert len(out) == L.wbytes
    return bytes(out)


def _layout_weights(L: Layer, wts) -> list:
    """Weight entries n = 0.. (value, CBUF address): bytes n*EB.. of the stream, entry stored
    at (DATA_BANK+1)*depth + n % WCAP."""
    st = _weight_stream(L, wts) + bytes(EB)
    return [(int.from_bytes(st[n * EB:(n + 1) * EB], "little"),
             GEOM.wt_entry(n, L.data_bank, L.wbank)) for n in range(L.wentries)]


def _stripes(npix: int, stripe_max: int) -> list:
    """Stripe lengths of a kernel group: full stripes, the last two balanced when fewer than two
    full stripes are left (hdl/csc/seq.py stripe_len)."""
    out, left = [], npix
    while left:
        n = left if left <= stripe_max else (left + 1) // 2 if left < 2 * stripe_max else stripe_max
        out.append(n)
        left -= n
    return out


def test_stripe_lengths():
    assert _stripes(98, 32) == [32, 32, 17, 17]
    assert _stripes(64, 32) == [32, 32]
    assert _stripes(33, 32) == [17, 16]
    assert _stripes(5, 32) == [5]
    assert _stripes(3, 1) == [1, 1, 1]


def _ref_ops(L: Layer, dentries: dict, wts, stripe_max: int) -> list:
    """The op sequence of docs/conv.md, plainly: (data lanes, wt[k][c], pos, first, last);
    with batches, stripes of stripe_max // N pixels, each pixel N ops (batch b at pos
    pixel*N + b)."""
    ops = []
    npix = L.wo * L.ho
    for g in range(L.ng):
        kg = min(AK, L.k - g * AK)
        p0 = 0
        for n in _stripes(npix, stripe_max // L.nb):
            pix = range(p0, p0 + n)
            p0 += n
            for cb in range(L.ncb):
                cw = min(AC, L.c - cb * AC)
                for r in range(L.r):
                    for s in range(L.s):
                        wt = tuple(tuple(int(wts[g * AK + k, r, s, cb * AC + c])
                                         if k < kg and c < cw else 0 for c in range(AC))
                                   for k in range(AK))
                        first = cb == 0 and r == 0 and s == 0
                        last = cb == L.ncb - 1 and r == L.r - 1 and s == L.s - 1
                        for i, pidx in enumerate(pix):
                            yo, xo = divmod(pidx, L.wo)
                            x = xo * L.sx - L.pl + s * L.dx
                            y = yo * L.sy - L.pt + r * L.dy
                            for b in range(L.nb):
                                if 0 <= x < L.w and 0 <= y < L.h:
                                    v = dentries[_dentry(L, y, cb, x, b)]
                                    d = tuple(_s8(v >> (8 * ci)) for ci in range(AC))
                                else:
                                    d = (L.pad8,) * AC
                                ops.append((d, wt, i * L.nb + b, int(first), int(last)))
    return ops


def _s8(v):
    v &= 0xFF
    return v - 256 if v >= 128 else v


def _decode_ops(raw: list, stripe_max: int) -> list:
    layout = op_layout(AC, AK, stripe_max)
    od, ow = layout["data"].offset, layout["wt"].offset
    op_, of_, ol = layout["pos"].offset, layout["first"].offset, layout["last"].offset
    pos_mask = (1 << layout["pos"].width) - 1
    out = []
    for bits in raw:
        d = tuple(_s8(bits >> (od + 8 * c)) for c in range(AC))
        wt = tuple(tuple(_s8(bits >> (ow + 8 * (k * AC + c))) for c in range(AC))
                   for k in range(AK))
        out.append((d, wt, (bits >> op_) & pos_mask, (bits >> of_) & 1, (bits >> ol) & 1))
    return out


def _accumulate(L: Layer, ops: list, stripe_max: int) -> np.ndarray:
    """What CMAC+CACC compute from the ops: per stripe position, first starts a sum, last
    completes the pixel (pixels of a group in raster order, batch fastest). Returns (N, K,
    ho, wo)."""
    out = np.zeros((L.nb, L.ng * AK, L.ho * L.wo), dtype=np.int64)
    acc = {}
    done = [0] * L.ng
    npix = L.wo * L.ho
    per_group = L.ncb * L.r * L.s * npix * L.nb
    for n, (d, wt, pos, first, last) in enumerate(ops):
        g = n // per_group
        psum = np.array(wt, dtype=np.int64) @ np.array(d, dtype=np.int64)
        acc[pos] = psum if first else acc[pos] + psum
        if last:
            pix, b = divmod(done[g], L.nb)
            out[b, g * AK:(g + 1) * AK, pix] = acc[pos]
            done[g] += 1
    assert done == [npix * L.nb] * L.ng
    return out[:, :L.k].reshape(L.nb, L.k, L.ho, L.wo)


def _run(L: Layer, stripe_max: int, seed: int, *, p_stall=0.3, slow=False,
         ring_limit=False, want_stamps=None, data_gap=0, wt_stall=None, band=0,
         wt_serial=None):
    """Simulate CSC + CBUF on layer ``L``. ``slow``: a fake CDMA writes slices and weight
    entries while CSC runs (``p_stall`` idles between entries), raising dat_slices /
    wt_entries entry by entry and never writing weight entry n before n < wt_released + WCAP
    (``ring_limit`` asserts the ring is smaller than the weights); with ``band`` its first
    ``band`` slices come surface by surface (band_end / band_cbs, docs/conv.md "CDMA").
    Returns (ops, cycles from start to done)."""
    rng = random.Random(seed)
    cubes, wts, garbage = _make(L, seed)
    dentries = _layout_data(L, cubes, garbage)
    wentries = _layout_weights(L, wts)
    wcap = GEOM.wt_cap(L.wbank)
    assert L.nb * L.h * L.eps <= GEOM.wt_base(L.data_bank)
    assert GEOM.wt_base(L.data_bank) + wcap <= GEOM.entries
    if ring_limit:
        assert L.wentries > wcap
    else:
        assert slow or L.wentries <= wcap

    csc = Csc(CFG_B if L.nb > 1 else CFG, stripe_max, wt_serial=wt_serial)
    cbuf = Cbuf(GEOM.banks, GEOM.depth, GEOM.entry_bytes)
    top = Module()
    top.domains.sync = ClockDomain()
    top.submodules.csc, top.submodules.cbuf = csc, cbuf
    for port in ("dat_rd_req", "wt_rd_req"):
        wiring.connect(top, getattr(csc, port), getattr(cbuf, port))
    for port in ("dat_rd_resp", "wt_rd_resp"):
        wiring.connect(top, getattr(cbuf, port), getattr(csc, port))

    state = {"started": False, "start_cycle": None, "done_cycle": None, "dones": 0}
    raw = []
    errors = []

    async def control(ctx):
        ctx.set(Value.cast(csc.regs), _regs_value(L))
        ctx.set(csc.keep.dat_base, L.dat_base)
        if not slow:
            state["preload"] = True
            await _writer_all(ctx)
            ctx.set(csc.dat_slices, L.nb * L.h)
            ctx.set(csc.wt_entries, L.wentries)
        await ctx.tick()
        ctx.set(csc.start, 1)
        await ctx.tick()
        ctx.set(csc.start, 0)
        state["started"] = True

    async def _writer_all(ctx):
        await stream_put(ctx, cbuf.dat_wr, [{"addr": a, "data": v} for a, v in dentries.items()],
                         rng=rng, p_stall=0)
        await stream_put(ctx, cbuf.wt_wr, [{"addr": a, "data": v} for v, a in wentries],
                         rng=rng, p_stall=0)

    async def slow_data(ctx):
        while not state["started"]:
            await ctx.tick()
        b = min(band, L.h)
        ctx.set(csc.band_end, b)
        for cb in range(L.ncb if b else 0):
            items = [{"addr": _dentry(L, y, cb, x), "data": dentries[_dentry(L, y, cb, x)]}
                     for y in range(b) for x in range(L.w)][::-1]
            await stream_put(ctx, cbuf.dat_wr, items, rng=rng, p_stall=p_stall)
            await ctx.tick()
            ctx.set(csc.band_cbs, cb + 1)
        ctx.set(csc.dat_slices, b)
        for y in range(b, L.nb * L.h):
            # a slice's entries last first: a read before dat_slices covers it finds zeros
            # (with batches: slice y of the N x H, batch y // H's slice y % H)
            items = [{"addr": _dentry(L, y % L.h, cb, x, y // L.h),
                      "data": dentries[_dentry(L, y % L.h, cb, x, y // L.h)]}
                     for cb in range(L.ncb) for x in range(L.w)][::-1]
            for _ in range(data_gap):
                await ctx.tick()
            await stream_put(ctx, cbuf.dat_wr, items, rng=rng, p_stall=p_stall)
            await ctx.tick()
            ctx.set(csc.dat_slices, y + 1)

    async def slow_weights(ctx):
        while not state["started"]:
            await ctx.tick()
        for n, (v, a) in enumerate(wentries):
            while n >= ctx.get(csc.wt_released) + wcap:
                await ctx.tick()
            await stream_put(ctx, cbuf.wt_wr, [{"addr": a, "data": v}], rng=rng,
                             p_stall=p_stall if wt_stall is None else wt_stall)
            ctx.set(csc.wt_entries, n + 1)

    async def consumer(ctx):
        while not state["started"]:
            await ctx.tick()
        got = await stream_get(ctx, csc.op, L.ops, rng=rng, p_stall=p_stall,
                               timestamps=want_stamps, timeout=50 * L.ops + 20_000)
        raw.extend(as_bits(x) for x in got)
        for _ in range(10):
            await ctx.tick()

    async def monitor(ctx):
        cycle = 0
        async for _, _, start, done, busy in ctx.tick().sample(csc.start, csc.done, csc.busy):
            if start:
                state["start_cycle"] = cycle
            if done:
                state["dones"] += 1
                state["done_cycle"] = cycle
            cycle += 1

    sim = Simulator(top)
    sim.add_clock(1e-8)
    tbs = [control, consumer]
    if slow:
        tbs += [slow_data, slow_weights]
    for tb in tbs:
        sim.add_testbench(tb)
    sim.add_process(monitor)
    for name, s in (("op", csc.op), ("dat_rd_req", csc.dat_rd_req),
                    ("wt_rd_req", csc.wt_rd_req)):
        sim.add_process(check_stream_stable(s, errors=errors, name=name))
    sim.run()
    assert errors == [], errors[:5]
    assert state["dones"] == 1, state
    ops = _decode_ops(raw, stripe_max)
    ref = _ref_ops(L, dentries, wts, stripe_max)
    assert len(ops) == len(ref)
    for n, (a, b) in enumerate(zip(ops, ref)):
        assert a == b, f"op {n}: got {a}, want {b}"
    conv = _accumulate(L, ops, stripe_max)
    for b, cube in enumerate(cubes):
        want = ConvCore._conv_dc(cube, wts, L.ho, L.wo, L.sx, L.sy, L.dx, L.dy, L.pl, L.pt,
                                 L.pad8)
        np.testing.assert_array_equal(conv[b], want)
    return ops, state["done_cycle"] - state["start_cycle"]


CASES = {
    # name: (layer, stripe_max)
    "3x3_pad1": (Layer(w=5, h=4, c=8, k=8, r=3, s=3, pl=1, pt=1, pr=1, pb=1,
                       pad_value=0x1285), 8),
    "s2_d2_c11_k11": (Layer(w=9, h=7, c=11, k=11, r=2, s=3, sx=2, sy=2, dx=2, dy=2, pl=2,
                            pt=1, pr=1, pb=1, pad_value=0xFF7F, eps_extra=3), 8),
    "1x1_9px_stripes_5_4": (Layer(w=3, h=3, c=3, k=3), 8),
    "1px_output": (Layer(w=1, h=1, c=5, k=2), 8),
    "balanced_last_stripes": (Layer(w=5, h=4, c=9, k=3, r=2, s=2, pl=1, pt=1), 8),
    "stripe_max_1": (Layer(w=3, h=2, c=10, k=9, r=2, s=2, pl=1, pb=1, pad_value=0x80), 1),
    # stripes of 2 and 3 pixels of one weight set: a stripe ends every 2 cycles (the next
    # stripe's length is a register following the stripe counter, hdl/csc/seq.py)
    "stripe_max_2_1x1": (Layer(w=3, h=3, c=3, k=10), 2),
    "stripe_max_3_1x1": (Layer(w=5, h=1, c=3, k=3), 3),
    "c20_k17_stride2": (Layer(w=6, h=5, c=20, k=17, r=3, s=3, sx=2, sy=1, pl=1, pt=2, pr=1,
                              pb=2, pad_value=0x33), 8),
}


@pytest.mark.parametrize("name", list(CASES))
def test_layer(name):
    L, sm = CASES[name]
    _run(L, sm, seed=sorted(CASES).index(name) + 1)


@pytest.mark.parametrize("name", ["1px_output", "stripe_max_1", "stripe_max_2_1x1",
                                  "c20_k17_stride2", "balanced_last_stripes"])
def test_layer_wt_serial(name):
    """The same layers with the weight path nv_large builds (WtUnpackSerial, one kernel per
    cycle; hdl/csc/wtset.py), here at nv_small's geometry: short sets, sets starting inside
    an entry, kernel groups of fewer than atomic K kernels."""
    L, sm = CASES[name]
    _run(L, sm, seed=sorted(CASES).index(name) + 101, wt_serial=True)


@pytest.mark.parametrize("seed", [41, 42, 43])
def test_random_layer_wt_serial(seed):
    rng = random.Random(seed)
    L = _random_layer(rng)
    _run(L, rng.choice([1, 2, 3, 5, 8]), seed=seed, p_stall=0.3, wt_serial=True)


def test_slow_counters_wt_serial():
    """Weight entries and slices arriving slowly, with the serial weight path."""
    L = Layer(w=5, h=5, c=12, k=10, r=3, s=3, pl=1, pt=1, pr=1, pb=1, pad_value=0x7E)
    _run(L, 8, seed=21, slow=True, p_stall=0.6, wt_serial=True)


def test_short_stripes_no_stall():
    """Stripes of 2, 2, 2, 2, 1 pixels of one weight set each, no stalls (see CASES)."""
    _run(Layer(w=3, h=3, c=3, k=10), 2, seed=5, p_stall=0.0)


def _random_layer(rng: random.Random) -> Layer:
    while True:
        r, s = rng.randint(1, 3), rng.randint(1, 3)
        dx, dy = rng.randint(1, 2), rng.randint(1, 2)
        sd, rd = (s - 1) * dx + 1, (r - 1) * dy + 1
        L = Layer(w=rng.randint(1, 6), h=rng.randint(1, 5), c=rng.randint(1, 18),
                  k=rng.randint(1, 18), r=r, s=s, sx=rng.randint(1, 3), sy=rng.randint(1, 3),
                  dx=dx, dy=dy, pl=rng.randrange(sd), pt=rng.randrange(rd),
                  pr=rng.randrange(sd), pb=rng.randrange(rd), pad_value=rng.getrandbits(16),
                  eps_extra=rng.randint(0, 2))
        if (L.pl + L.w + L.pr >= sd and L.pt + L.h + L.pb >= rd
                and L.ops <= 1500 and L.h * L.eps <= 6 * GEOM.depth):
            return L


@pytest.mark.parametrize("seed", [31, 32, 33, 34])
def test_random_layer(seed):
    rng = random.Random(seed)
    L = _random_layer(rng)
    _run(L, rng.choice([1, 2, 3, 5, 8]), seed=seed, p_stall=0.3)


def test_data_ring_base():
    """Slice 0 at dat_base near the end of the data banks (reuse across layers,
    hdl/cbuf/keep.py): the slices wrap around the data-bank ring, also inside a slice."""
    L = Layer(w=5, h=5, c=12, k=10, r=3, s=3, pl=1, pt=1, pr=1, pb=1, pad_value=0x7E,
              eps_extra=1)
    L.dat_base = GEOM.wt_base(L.data_bank) - 2 * L.eps - 3
    _run(L, 8, seed=12, slow=True, p_stall=0.3)
    L.dat_base = GEOM.wt_base(L.data_bank) - 1
    _run(L, 5, seed=13, p_stall=0.3)


def test_slow_counters():
    """dat_slices and wt_entries grow slowly while CSC runs: CSC waits, never reads stale
    entries (CBUF starts empty: stale reads would give zeros)."""
    L = Layer(w=5, h=5, c=12, k=10, r=3, s=3, pl=1, pt=1, pr=1, pb=1, pad_value=0x7E)
    _run(L, 8, seed=11, slow=True, p_stall=0.6)


@pytest.mark.parametrize("band", [1, 3, 9])
def test_first_band(band):
    """CDMA's first band (slices surface by surface, band_cbs): ops of a channel block
    start once its surface of the band is in; results unchanged."""
    L = Layer(w=5, h=6, c=20, k=9, r=3, s=2, pl=1, pt=1, pr=1, pb=1, pad_value=0x7F)
    _run(L, 8, seed=band, slow=True, band=band, data_gap=5)


def test_slow_slices():
    """Weights arrive at once, slices slowly (a gap before each, written last entry first):
    every data read must wait for dat_slices."""
    L = Layer(w=5, h=5, c=12, k=10, r=3, s=3, pl=1, pt=1, pr=1, pb=1, pad_value=0x7E)
    _run(L, 8, seed=14, slow=True, p_stall=0.2, data_gap=40, wt_stall=0.0)


def test_weight_ring_smaller_than_weights():
    """WEIGHT_BANK=0: a ring of one bank (128 entries) for 216 entries of weights; the fake
    CDMA refills entries as wt_released allows (a kernel group fits the ring)."""
    L = Layer(w=4, h=4, c=8, k=24, r=3, s=3, pl=1, pt=1, pr=1, pb=1, weight_bank=0)
    _run(L, 8, seed=12, slow=True, ring_limit=True, p_stall=0.2)


def test_weight_ring_unaligned_sets():
    """Sets not entry-aligned (last group kg=3, last channel block cw=3) across a ring wrap."""
    L = Layer(w=3, h=3, c=11, k=19, r=3, s=3, pl=1, pt=1, pr=1, pb=1, weight_bank=0)
    _run(L, 4, seed=13, slow=True, ring_limit=True, p_stall=0.1)


def test_throughput(capsys):
    """Compute-bound layer, no stalls: 16x16 output, 3x3 kernel, 32 channels, 16 kernels.
    Ops per cycle from start to done must be >= 0.97."""
    L = Layer(w=16, h=16, c=32, k=16, r=3, s=3, pl=1, pt=1, pr=1, pb=1)
    stamps = []
    stripe_max = 16
    ops, cycles = _run(L, stripe_max, seed=21, p_stall=0.0, want_stamps=stamps)
    rate = len(ops) / cycles
    steady = len(ops) / (stamps[-1] - stamps[0] + 1)
    with capsys.disabled():
        print(f"\nCSC stripe_max={stripe_max}: {len(ops)} ops in {cycles} cycles from start to "
              f"done: {rate:.4f} ops/cycle (first to last op: {steady:.4f})")
    assert rate >= 0.97


BATCH_CASES = {
    # name: layer (stripe_max 32: a stripe of 32 // N pixels of every batch)
    # an inner-product layer (1 x 1 output), N = 2 .. 32
    "fc_n2": Layer(w=3, h=2, c=11, k=13, r=2, s=3, nb=2),
    "fc_n32": Layer(w=1, h=1, c=20, k=9, nb=32),
    # more output pixels than a stripe holds: N = 3, 10 pixels a stripe, balanced 13 = 7 + 6
    "3x3_pad_n3": Layer(w=5, h=4, c=9, k=10, r=3, s=3, pl=1, pt=1, pr=1, pb=1,
                        pad_value=0x1285, nb=3),
    # N = 17: one pixel a stripe (32 // 17), stride and dilation, the last group short
    "s2_d2_n17": Layer(w=5, h=3, c=5, k=11, r=2, s=2, sx=2, dx=2, pl=1, pr=1, nb=17),
}


@pytest.mark.parametrize("name", list(BATCH_CASES))
def test_batch(name):
    """Multi-batch layers (docs/conv.md "Multi-batch"): the ops of _ref_ops (each pixel of a
    stripe in every batch, pos = pixel*N + b, the data of batch b's cube) and every cube's
    convolution; the first one also with slices arriving slowly (the ops wait for all
    N x H of them)."""
    L = BATCH_CASES[name]
    _run(L, 32, seed=sorted(BATCH_CASES).index(name) + 61)
    if name == "fc_n2":
        _run(L, 32, seed=71, slow=True, p_stall=0.3, data_gap=5)
