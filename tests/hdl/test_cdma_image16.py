"""CDMA's image input in INT16 and FP16 layers (docs/conv16.md "CDMA", Image) in Amaranth's
simulator, on the 16-bit configurations: geometry B (nv_small's, 8-byte atoms and CBUF units)
and A (nv_full's convolution, 32-byte atoms, 64-byte units, two atoms per AXI beat).

As tests/hdl/test_cdma_image.py drives it: a behavioural memory on the DMA port (random request
stalls, response delays and gaps, in order) and a random-stall consumer of the CBUF entries
(:class:`hdl.cdma.image.PixelFetch` alone) or of the CBUF writes (:class:`hdl.cdma.Cdma`).
Every entry is compared with the model's ``ConvCore._fetch_pixels`` (verif/model/conv.py) on
the same register values and memory, laid out as the model's CBUF lines of a 16-bit layer:
line y's ``(PAD_LEFT + W + PAD_RIGHT) x C`` elements pixel by pixel, 2 bytes each little
endian, zero-filled to whole 16-bit entries of 2 x cbuf_bank_width bytes (``entry_bytes(cfg,
2)``; the model's image entry count ``ceil((PL + W + PR) * C / cbuf_bank_width)``), each entry
two CBUF units (units 2E and 2E+1, docs/conv16.md "Interface changes between units"),
``slice_last`` on the line's last unit. In Cdma, unit i of line y goes to ring unit
``dat_next + 2 y EPS + i``.

Layers are drawn at random and kept only when the model accepts them
(``ConvCore._check_image_precision`` for the precision, ``_fetch_pixels`` for the x offset):
every format of ``PIXEL_FORMATS_16`` and ``PIXEL_FORMATS_10`` to INT16 (CVT_EN on or off) and
to FP16 (fp16 containers unchanged, NaN flush on or off; INT16 containers through the
converter and the fp16 rounding), the int8 formats converted to INT16 and FP16, sign override,
mean or offset, scale, truncate up to 63, left/right pads of 16-bit PAD_VALUE, PIXEL_X_OFFSET
inside an atom, any start alignment, two-plane formats; INT8 layers on the same hardware as
before. Memories are random or full of fp16 specials / int16 extremes.

A failure names its seed and layer.
"""
import random

import numpy as np
import pytest
from amaranth.sim import Simulator
from streams import check_stream_stable, stream_get, stream_put
from test_cdma import memory_port
from test_cdma_image import reg_values, set_regs

from hdl.cdma.image import (FP16_PREP_LAYOUT, PIXEL_FORMATS, PIXEL_FORMATS_10,
                            PIXEL_FORMATS_16, EntryPacker, PixelFetch, PixelFormat,
                            fp16_of_int_finish, fp16_of_int_prepare)
from hdl.config import get_config
from hdl.regmap import REGMAP
from verif.mem import SparseMemory
from verif.model.conv import ConvCore, pixel_format
from verif.model.formats import ModelConfigError
from verif.model.regs import UnitRegs

GEOM_A = ("nv_full+winograd=False+batch=False+weight_compression=False"
          "+feature_data_type=int8_int16_fp16")
GEOM_B = "nv_small+feature_data_type=int8_int16_fp16"
MEM_BYTES = 1 << 15
UNIT = REGMAP.unit("CDMA")
INT8, INT16, FP16 = 0, 1, 2
FORMATS_16 = sorted(PIXEL_FORMATS_16) + sorted(PIXEL_FORMATS_10)


def container(name):
    """0 (int8 bytes), 1 (INT16) or 2 (FP16) components of pixel format ``name``."""
    return pixel_format(PixelFormat[name].value)[2]


# ------------------------------------------------------------------------------------ memory
def memory(rng, kind):
    """MEM_BYTES of test memory: ``random`` bytes, ``fp16`` words (NaNs, infinities, +-0,
    denormals, any), or ``int16`` extremes (+-32767/-32768, 0, +-1, 0xFFFF, any)."""
    if kind == "random":
        return bytes(rng.randrange(256) for _ in range(MEM_BYTES))
    if kind == "fp16":
        pick = [lambda: 0x7C00 | rng.randint(1, 0x3FF), lambda: 0xFC00 | rng.randint(1, 0x3FF),
                lambda: 0x7C00, lambda: 0xFC00, lambda: 0x8000, lambda: 0,
                lambda: rng.randint(1, 0x3FF), lambda: rng.randrange(1 << 16),
                lambda: rng.randrange(1 << 16)]
    else:
        pick = [lambda: 0x8000, lambda: 0x7FFF, lambda: 0xFFFF, lambda: 0, lambda: 1,
                lambda: 0xFFC0, lambda: rng.randrange(1 << 16), lambda: rng.randrange(1 << 16)]
    words = [rng.choice(pick)() for _ in range(MEM_BYTES // 2)]
    return np.array(words, "<u2").tobytes()


# ------------------------------------------------------------------------------------ layers
def model_view(fields=None, regs=None):
    ur = UnitRegs(UNIT)
    for rname, v in (regs if regs is not None else reg_values(fields)).items():
        ur.groups[0][rname] = v
    return ur.view(0)


def model_lines(cfg, mem, fields):
    """The model's ``_fetch_pixels`` (C, H, PL+W+PR) of a layer on ``mem`` (bytes at 0)."""
    sm = SparseMemory(cfg.mem_address_width)
    sm.write(0, np.frombuffer(mem, np.uint8))
    return ConvCore(cfg, sm)._fetch_pixels(model_view(fields))


def legal(cfg, fields):
    """Whether the model accepts the layer (precision rules, x offset)."""
    v = model_view(fields)
    try:
        ConvCore._check_image_precision(v, fields["PROC_PRECISION"])
        model_lines(cfg, bytes(MEM_BYTES), fields)
    except ModelConfigError:
        return False
    return True


def random_layer(rng, cfg, name, prec, *, wmax=14, hmax=3):
    """Register fields of a random small image layer of format ``name`` and PROC_PRECISION
    ``prec``, legal for the model (the x offset reduced, then 0, when the model refuses it)."""
    A = cfg.atom_bytes
    _, bpp, cont, nch = pixel_format(PixelFormat[name].value)
    w, h = rng.randint(1, wmax), rng.randint(1, hmax)
    cvt = 1 if cont != prec and cont != 2 else int(rng.random() < 0.6)
    f = dict(DATAIN_FORMAT=1, PIXEL_FORMAT=PixelFormat[name].value,
             PROC_PRECISION=prec, IN_PRECISION=cont,
             PIXEL_SIGN_OVERRIDE=int(rng.random() < 0.4),
             DATAIN_WIDTH=w - 1, DATAIN_HEIGHT=h - 1, DATAIN_CHANNEL=nch - 1,
             PIXEL_X_OFFSET=rng.randrange(A // bpp[0]) if cont else rng.randrange(32),
             PAD_LEFT=rng.choice([0, 0, rng.randint(1, 5), rng.randint(0, 31)]),
             PAD_RIGHT=rng.choice([0, 0, rng.randint(1, 5), rng.randint(0, 63)]),
             PAD_VALUE=rng.choice([rng.randrange(1 << 16), 0x7E01, 0x8000, 0xFBFF]),
             NAN_TO_ZERO=int(rng.random() < 0.6),
             CVT_EN=cvt, MEAN_FORMAT=int(rng.random() < 0.5),
             CVT_OFFSET=rng.choice([rng.randrange(1 << 16), rng.randrange(-300, 300) & 0xFFFF,
                                    0x8000, 0x7FFF]),
             CVT_SCALE=rng.choice([1, 2, rng.randrange(1 << 16), rng.randrange(-40, 40) & 0xFFFF,
                                   0x7FFF, 0x8000]),
             CVT_TRUNCATE=rng.choice([0, 1, rng.randint(0, 20), rng.randint(0, 63), 33, 34]))
    for m in ("MEAN_RY", "MEAN_GU", "MEAN_BV", "MEAN_AX"):
        f[m] = rng.choice([rng.randrange(1 << 16), rng.randrange(-200, 300) & 0xFFFF])
    for p, (b, lo, hi, st) in enumerate(zip(bpp, ("DATAIN_ADDR_LOW_0", "DATAIN_ADDR_LOW_1"),
                                            ("DATAIN_ADDR_HIGH_0", "DATAIN_ADDR_HIGH_1"),
                                            ("LINE_STRIDE", "UV_LINE_STRIDE"))):
        span = w * b + A
        stride = span + rng.choice([0, 0, rng.randrange(0, 3 * A), A * rng.randrange(4)])
        if rng.random() < 0.5:
            stride = -(-stride // A) * A
        base = rng.randrange(0, MEM_BYTES // 2 - stride * h)
        if rng.random() < 0.6:
            base -= base % A
        f[lo], f[hi], f[st] = MEM_BYTES // 2 * p + base, 0, stride
    if len(bpp) == 1:       # plane 1 registers hold garbage
        f["DATAIN_ADDR_LOW_1"] = rng.randrange(1 << 32)
        f["DATAIN_ADDR_HIGH_1"] = rng.randrange(4)
        f["UV_LINE_STRIDE"] = rng.randrange(1 << 32)
    for xoff in (f["PIXEL_X_OFFSET"], f["PIXEL_X_OFFSET"] & (A - 1), 0):
        f["PIXEL_X_OFFSET"] = xoff
        if legal(cfg, f):
            return f
    raise AssertionError(f"no legal x offset: {f}")


def expected_units(cfg, mem, fields):
    """[(unit data, slice_last)] of the layer: the model's lines, 2-byte elements in whole
    16-bit entries of two units each (1-byte elements in units in INT8 layers)."""
    out = model_lines(cfg, mem, fields)
    E = cfg.cbuf_bank_width
    eb = 1 if fields["PROC_PRECISION"] == INT8 else 2
    units = []
    for y in range(out.shape[1]):
        el = out[:, y, :].T.reshape(-1)
        line = (el & 0xFF).astype(np.uint8).tobytes() if eb == 1 else \
            (el & 0xFFFF).astype("<u2").tobytes()
        line += bytes(-len(line) % (E * eb))
        n = len(line) // E
        assert eb == 1 or n == 2 * -(-(out.shape[0] * out.shape[2]) // E)
        units += [(int.from_bytes(line[i * E:(i + 1) * E], "little"), int(i == n - 1))
                  for i in range(n)]
    return units


# ------------------------------------------------------------------------------------ benches
def run_fetch(cfg, layers, mem, *, seed, p_ready=0.7, max_latency=20, p_gap=0.2, p_stall=0.3,
              dut=None):
    """PixelFetch on ``layers`` one after the other, every unit checked; returns per layer
    (units, cycles from start to the last unit)."""
    rng = random.Random(seed)
    dut = dut or PixelFetch(cfg)
    log = {"errors": [], "reqs": []}
    results = []

    async def bench(ctx):
        for n, L in enumerate(layers):
            want = expected_units(cfg, mem, L)
            set_regs(ctx, dut, L)
            await ctx.tick()
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            stamps = []
            got = await stream_get(ctx, dut.atoms, len(want), rng=rng, p_stall=p_stall,
                                   timeout=40 * len(want) + 2000, timestamps=stamps)
            got = [(g.data, g.slice_last) for g in got]
            k = 0
            while ctx.get(dut.busy):
                await ctx.tick()
                k += 1
                assert k < 100, "busy after the last unit"
            for _ in range(20):      # nothing more comes out
                assert not ctx.get(dut.atoms.valid), "extra unit"
                await ctx.tick()
            for i, (g, w) in enumerate(zip(got, want)):
                assert g == w, (f"seed {seed} layer {n}: unit {i}: got {g[0]:#x}/{g[1]} want "
                                f"{w[0]:#x}/{w[1]}; {PixelFormat(L['PIXEL_FORMAT']).name} {L}")
            results.append((len(got), stamps[-1] - stamps[0] + 1))
        assert not log["errors"], log["errors"][:3]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(memory_port(dut.dma, mem, rng, log, beat=cfg.axi_data_bytes,
                                  p_ready=p_ready, max_latency=max_latency, p_gap=p_gap),
                      background=True)
    sim.add_process(check_stream_stable(dut.atoms, name="atoms"))
    sim.add_process(check_stream_stable(dut.dma.req, name="req"))
    sim.add_testbench(bench)
    sim.run()
    return results


def run_cdma(cfg, layers, mem, *, seed, p_ready=0.7, max_latency=20):
    """Cdma on image ``layers`` (with ``dat_next``, ENTRIES, DATA_BANK drawn here): every CBUF
    write (unit address, data, all lanes) and ``dat_slices``."""
    from hdl.cdma import Cdma
    rng = random.Random(seed)
    dut = Cdma(cfg)
    masked = hasattr(dut.dat_wr.payload, "mask")
    full = (1 << (cfg.cbuf_bank_width // cfg.atom_bytes)) - 1
    log = {"errors": [], "reqs": []}
    depth = cfg.cbuf_bank_depth

    async def bench(ctx):
        for n, L in enumerate(layers):
            want = expected_units(cfg, mem, L)
            eb = 1 if L["PROC_PRECISION"] == INT8 else 2
            per_line = next(i for i, (_, last) in enumerate(want) if last) + 1
            eps = per_line // eb + rng.choice([0, 0, 2])
            h = L["DATAIN_HEIGHT"] + 1
            db = -(-h * eps * eb // depth) - 1 + rng.randint(0, 1)
            dcap = (db + 1) * depth
            dat_next = eb * rng.randrange(dcap // eb)
            L = dict(L, ENTRIES=eps - 1, DATA_BANK=db, WEIGHT_BANK=0, WEIGHT_BYTES=0)
            set_regs(ctx, dut, L)
            for k, v in dict(dat_base=0, dat_kept=0, dat_next=dat_next, dat_reused=0,
                             wt_reused=0).items():
                ctx.set(getattr(dut.keep, k), v)
            await ctx.tick()
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            got = []
            t = 0
            while ctx.get(dut.busy) or t == 0:
                sigs = [dut.dat_wr.valid, dut.dat_wr.ready, dut.dat_wr.payload.addr,
                        dut.dat_wr.payload.data]
                if masked:
                    sigs.append(dut.dat_wr.payload.mask)
                _, _, v, r, a, d, *mk = await ctx.tick().sample(*sigs)
                if v and r:
                    assert not masked or mk[0] == full, "image units are written whole"
                    got.append((a, d))
                t += 1
                assert t < 40_000, "Cdma hangs"
            assert ctx.get(dut.dat_slices) == h
            exp = []
            y = i = 0
            for d, last in want:
                exp.append(((dat_next + eb * y * eps + i) % dcap, d))
                i += 1
                if last:
                    y, i = y + 1, 0
            assert got == exp, f"seed {seed} layer {n}: {L}"
        assert not log["errors"], log["errors"][:3]

    async def consumer(ctx):
        while True:
            ctx.set(dut.dat_wr.ready, rng.random() < 0.7)
            ctx.set(dut.wt_wr.ready, 1)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(memory_port(dut.dat_dma, mem, rng, log, beat=cfg.axi_data_bytes,
                                  p_ready=p_ready, max_latency=max_latency, p_gap=0.2),
                      background=True)
    sim.add_testbench(consumer, background=True)
    sim.add_process(check_stream_stable(dut.dat_wr, name="dat_wr"))
    sim.add_testbench(bench)
    sim.run()


def layer_set(rng, cfg, names, precs, **kw):
    return [random_layer(rng, cfg, name, prec, **kw) for name in names for prec in precs
            if not (container(name) == 2 and prec != FP16)]


# ------------------------------------------------------------------------------------ tests
@pytest.mark.parametrize("kind", ["random", "int16"])
def test_int16_formats_b(kind):
    """Geometry B: every INT16-container format (16-bit words, semi-planar Y16/UV32, packed
    10-bit) to INT16 and to FP16, random layers back to back, on random memory and on int16
    extremes."""
    cfg = get_config(GEOM_B)
    rng = random.Random(f"img16-{kind}")
    names = [n for n in FORMATS_16 if container(n) == 1]
    layers = layer_set(rng, cfg, names, (INT16, FP16))
    assert {L["CVT_EN"] for L in layers} == {0, 1}
    run_fetch(cfg, layers, memory(rng, kind), seed=len(kind))


def test_fp16_formats_b():
    """Geometry B: the fp16-container formats on fp16 specials (NaN flush on and off, CVT_EN
    on and off: the bits pass unchanged), and INT16 containers converted to FP16 with scales
    that reach the int17 saturation and the +-65504 clip."""
    cfg = get_config(GEOM_B)
    rng = random.Random("img16-fp16")
    layers = []
    combos = [(0, 0), (1, 0), (1, 1), (0, 1)]
    for i, name in enumerate([n for n in FORMATS_16 if container(n) == 2] * 2):
        L = random_layer(rng, cfg, name, FP16)
        L["NAN_TO_ZERO"], L["CVT_EN"] = combos[i % 4]
        layers.append(L)
    for name in ("T_R16", "T_A16B16G16R16", "T_A2R10G10B10", "T_Y16___V16U16_N444"):
        L = random_layer(rng, cfg, name, FP16)
        L.update(CVT_EN=1, CVT_SCALE=rng.choice([3, 0x7FFF, 0x8001, 0xFFFD]),
                 CVT_TRUNCATE=rng.choice([0, 1, 2, 14]))
        layers.append(L)
    run_fetch(cfg, layers, memory(rng, "fp16"), seed=3)


def test_int8_formats_to_16bit_b():
    """Geometry B: the 13 int8 formats converted (CVT_EN) to INT16 and to FP16 (8-bit
    components zero- or sign-extended, x offsets compared as in INT8 layers), and INT8 layers
    of every int8 format on the same hardware (unchanged: bytes in units, no pairs)."""
    cfg = get_config(GEOM_B)
    rng = random.Random("img16-int8")
    layers = layer_set(rng, cfg, sorted(PIXEL_FORMATS), (INT16, FP16, INT8))
    run_fetch(cfg, layers, memory(rng, "random"), seed=4)


def test_refused_programs_b():
    """Programs the model refuses get PixelFetch's documented behaviour (its docstring), each
    checked against the model's units of an equivalent legal layer: an INT8 layer with a
    16-bit or 10-bit format (the "shrink") reads it as T_A8B8G8R8; an int8 format in an
    INT16/FP16 layer without CVT_EN gives its bytes extended to 16 bits (the INT16 layer with
    the identity converter); an INT16 container in an FP16 layer without CVT_EN and an FP16
    container in an INT16 layer pass their words (the other precision's layer)."""
    cfg = get_config(GEOM_B)
    rng = random.Random("img16-refused")
    mem = memory(rng, "fp16")
    pairs = []
    for name in ("T_A16B16G16R16", "T_R16_F", "T_A2B10G10R10"):
        ref = random_layer(rng, cfg, "T_A8B8G8R8", INT8)
        pairs.append((dict(ref, PIXEL_FORMAT=PixelFormat[name].value,
                           IN_PRECISION=container(name)), ref))
    for name, prec in (("T_B8G8R8A8", INT16), ("T_Y8___V8U8_N444", FP16), ("T_R8", FP16)):
        L = random_layer(rng, cfg, name, prec)
        ref = dict(L, PROC_PRECISION=INT16, CVT_EN=1, CVT_SCALE=1, CVT_TRUNCATE=0,
                   CVT_OFFSET=0, MEAN_FORMAT=0)
        pairs.append((dict(L, CVT_EN=0), ref))
    for name in ("T_A16Y16U16V16", "T_Y10___U10V10_N444"):
        ref = random_layer(rng, cfg, name, INT16)
        ref["CVT_EN"] = 0
        pairs.append((dict(ref, PROC_PRECISION=FP16), ref))
    for name in ("T_A16Y16U16V16_F", "T_R16_F"):
        ref = random_layer(rng, cfg, name, FP16)
        pairs.append((dict(ref, PROC_PRECISION=INT16), ref))
    for run, ref in pairs:
        assert not legal(cfg, run) and legal(cfg, ref), (run, ref)
    dut = PixelFetch(cfg)
    rng2 = random.Random(5)
    log = {"errors": [], "reqs": []}

    async def bench(ctx):
        for n, (L, ref) in enumerate(pairs):
            want = expected_units(cfg, mem, ref)
            set_regs(ctx, dut, L)
            await ctx.tick()
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            got = await stream_get(ctx, dut.atoms, len(want), rng=rng2)
            assert [(g.data, g.slice_last) for g in got] == want, (n, L)
            while ctx.get(dut.busy):
                await ctx.tick()
        assert not log["errors"], log["errors"][:3]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(memory_port(dut.dma, mem, rng2, log, beat=cfg.axi_data_bytes,
                                  p_ready=0.7, max_latency=10, p_gap=0.2), background=True)
    sim.add_testbench(bench)
    sim.run()


def test_cdma_image16_b():
    """Cdma on geometry B: 16-bit image lines at ring units ``dat_next + 2 y EPS + i`` (even
    ``dat_next``, wrapping), INT8 lines at ``dat_next + y EPS + i``, ``dat_slices`` = H."""
    cfg = get_config(GEOM_B + "+cbuf_bank_depth=128")
    rng = random.Random("img16-cdma-b")
    names = ["T_A16B16G16R16_F", "T_Y12___U12V12_N444", "T_B10G10R10A2", "T_R10",
             "T_A8R8G8B8", "T_V16U16Y16A16"]
    layers = [random_layer(rng, cfg, n, p) for n, p in zip(names, (FP16, INT16, FP16, INT16,
                                                                     FP16, INT16))]
    layers.append(random_layer(rng, cfg, "T_Y8___U8V8_N444", INT8))
    run_cdma(cfg, layers, memory(rng, "random"), seed=6)


def test_geometry_a():
    """Geometry A (32-byte atoms, 64-byte units, 128-byte 16-bit entries, two atoms per beat):
    PixelFetch on a few short layers of each kind (8-byte, 2-byte, semi-planar, packed 10-bit,
    fp16, int8 to FP16, INT8), then Cdma on three of them (units whole, all lanes)."""
    cfg = get_config(GEOM_A)
    rng = random.Random("img16-A")
    mem = memory(rng, "random")
    spec = [("T_A16Y16U16V16", INT16), ("T_R16_I", FP16), ("T_Y16___U16V16_N444", INT16),
            ("T_A2Y10U10V10", FP16), ("T_A16B16G16R16_F", FP16), ("T_B8G8R8A8", FP16),
            ("T_R8G8B8X8", INT8)]
    layers = [random_layer(rng, cfg, n, p, wmax=40, hmax=2) for n, p in spec]
    run_fetch(cfg, layers, mem, seed=7, max_latency=6)
    run_cdma(cfg, [layers[0], layers[3], layers[6]], mem, seed=8, max_latency=6)


def test_rate_b():
    """One pixel per cycle with an always-ready memory and consumer on geometry B: an 8-byte
    INT16 format (one unit per pixel) and a 2-byte one; each line at most one cycle more than
    its pixels (a line ending in the first unit of a 16-bit entry adds its zero unit)."""
    cfg = get_config(GEOM_B)
    rng = random.Random("img16-rate")
    mem = memory(rng, "random")
    layers = []
    for name in ("T_A16B16G16R16", "T_R16"):
        L = random_layer(rng, cfg, name, INT16)
        L.update(DATAIN_WIDTH=31, DATAIN_HEIGHT=3, PAD_LEFT=1, PAD_RIGHT=2, PIXEL_X_OFFSET=0,
                 LINE_STRIDE=-(-32 * 8 // 8) * 8 + 8, DATAIN_ADDR_LOW_0=0)
        layers.append(L)
    dut = PixelFetch(cfg)
    res = run_fetch(cfg, layers, mem, seed=9, p_ready=1, max_latency=0, p_gap=0, p_stall=0,
                    dut=dut)
    for (units, cycles), L in zip(res, layers):
        pixels = (L["DATAIN_WIDTH"] + 1 + 3) * (L["DATAIN_HEIGHT"] + 1)
        print(f"{PixelFormat(L['PIXEL_FORMAT']).name}: {pixels} pixels, {units} units in "
              f"{cycles} cycles")
        assert cycles <= pixels + 4 * (L["DATAIN_HEIGHT"] + 1) + 4, (units, cycles)


# ------------------------------------------------------------------------------------ sub-units
def test_fp16_of_int():
    """The int17 -> fp16 rounding (fp16_of_int_prepare/finish) against numpy's float16 of
    ``clip(v, -65504, 65504)`` (the model's rule) on the whole int17 range's boundaries and
    ties (every value near 2**k, 65504..65536, 0, +-1) and random values."""
    from amaranth.hdl import Module, Signal, signed
    rng = random.Random("fp16-of-int")
    vals = {0, 1, -1, 65535, -65536, 65504, -65504, 65519, 65520, -65520}
    for k in range(1, 17):
        for d in range(-3, 4):
            vals.update({(1 << k) + d, -(1 << k) - d})
    vals.update(rng.randrange(-65536, 65536) for _ in range(600))
    vals.update(2048 + 2 * rng.randrange(1024) + 1 for _ in range(50))       # ties at 2**11
    vals = sorted(v for v in vals if -65536 <= v < 65536)
    m = Module()
    v = Signal(signed(17))
    mid = Signal(FP16_PREP_LAYOUT)
    out = Signal(16)
    m.d.comb += [mid.eq(fp16_of_int_prepare(m, v, "p")), out.eq(fp16_of_int_finish(m, mid, "f"))]

    async def bench(ctx):
        for x in vals:
            ctx.set(v, x)
            want = int(np.array([min(max(x, -65504), 65504)], np.float64)
                       .astype(np.float16).view(np.uint16)[0])
            assert ctx.get(out) == want, (x, hex(ctx.get(out)), hex(want))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()


def test_entry_packer_pairs():
    """EntryPacker with ``pairs``: lines of 2-, 6- and 8-byte pixels into 8-byte units, each
    line an even number of units (a zero unit after an odd count) with ``pair`` set, the plain
    packing with it clear; random stalls."""
    rng = random.Random("pairs")
    dut = EntryPacker(8, 8, pairs=True)
    for nbytes, pair in ((2, 1), (6, 1), (8, 1), (3, 0)):
        pixels, want = [], []
        for _ in range(10):
            n = rng.randint(1, 9)
            line = b""
            for i in range(n):
                d = rng.randrange(1 << 64)
                pixels.append({"data": d, "last": int(i == n - 1)})
                line += d.to_bytes(8, "little")[:nbytes]
            line += bytes(-len(line) % (16 if pair else 8))
            k = len(line) // 8
            want += [(int.from_bytes(line[8 * i:8 * i + 8], "little"), int(i == k - 1))
                     for i in range(k)]
        got = []

        async def prod(ctx, pixels=pixels, nbytes=nbytes, pair=pair):
            ctx.set(dut.channels, nbytes)
            ctx.set(dut.pair, pair)
            await stream_put(ctx, dut.i, pixels, rng=rng)

        async def cons(ctx, want=want, got=got):
            got.extend(await stream_get(ctx, dut.o, len(want), rng=rng))

        sim = Simulator(dut)
        sim.add_clock(1e-8)
        sim.add_testbench(prod)
        sim.add_testbench(cons)
        sim.add_process(check_stream_stable(dut.o))
        sim.run()
        assert [(g.data, g.slice_last) for g in got] == want, (nbytes, pair)
