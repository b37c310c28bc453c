"""hdl.cdma.image.PixelFetch (CDMA image input) in Amaranth's simulator against the model.

A behavioural memory serves the DMA port (random request stalls, response delays and gaps, in
order) and a random-stall consumer takes the CBUF entries. Every entry is compared with the
model's ``ConvCore._fetch_pixels`` (verif/model/conv.py) on the same register values and memory:
for line y, the model's (Cpix, H, PAD_LEFT+W+PAD_RIGHT) output flattened pixel by pixel
(channel bytes of a pixel consecutive), zero-filled to whole entries; ``slice_last`` on the last
entry of each line. Random layers cover all 13 int8 pixel formats, W 1..20, H 1..4, X offsets,
any start alignment, paddings, converter on/off, mean on/off, sign override, truncations past
34. Also the sub-units alone (PlaneUnpacker, EntryPacker) and the rate with a fast memory.

A failure names its seed: ``pytest tests/hdl/test_cdma_image.py -k "seed"`` reruns it.
"""
import random

import numpy as np
import pytest
from amaranth.sim import Simulator
from streams import check_stream_stable, stream_get, stream_put
from test_cdma import memory_port

from hdl.cdma.image import PIXEL_FORMATS, EntryPacker, PixelFetch, PixelFormat, PlaneUnpacker
from hdl.config import get_config
from hdl.regmap import REGMAP
from verif.mem import SparseMemory
from verif.model.conv import ConvCore
from verif.model.regs import UnitRegs

MEM_BYTES = 1 << 15
UNIT = REGMAP.unit("CDMA")
FIELDS = {f.name: (r.name, f) for r in UNIT.registers for f in r.fields}


# ------------------------------------------------------------------------------------ layers
def random_layer(rng, cfg, fmt=None):
    """Register fields (dict field name -> value) of a random small image layer."""
    A = cfg.atom_bytes
    name = fmt or rng.choice(sorted(PIXEL_FORMATS))
    bpp, order = PIXEL_FORMATS[name]
    w, h = rng.randint(1, 20), rng.randint(1, 4)
    f = dict(DATAIN_FORMAT=1, PIXEL_FORMAT=PixelFormat[name].value,
             PIXEL_SIGN_OVERRIDE=int(rng.random() < 0.4),
             DATAIN_WIDTH=w - 1, DATAIN_HEIGHT=h - 1, DATAIN_CHANNEL=len(order) - 1,
             PIXEL_X_OFFSET=rng.randrange(32),
             PAD_LEFT=rng.choice([0, 0, rng.randint(1, 5), rng.randint(0, 31)]),
             PAD_RIGHT=rng.choice([0, 0, rng.randint(1, 5), rng.randint(0, 63)]),
             PAD_VALUE=rng.randrange(1 << 16),
             CVT_EN=int(rng.random() < 0.7), MEAN_FORMAT=int(rng.random() < 0.5),
             CVT_OFFSET=rng.randrange(1 << 16) if rng.random() < 0.3 else rng.randrange(-300, 300) & 0xFFFF,
             CVT_SCALE=rng.choice([1, 2, rng.randrange(1 << 16), rng.randrange(-40, 40) & 0xFFFF]),
             CVT_TRUNCATE=rng.choice([0, 1, rng.randint(0, 12), rng.randint(0, 63), 33, 34]))
    for m in ("MEAN_RY", "MEAN_GU", "MEAN_BV", "MEAN_AX"):
        f[m] = rng.randrange(1 << 16) if rng.random() < 0.3 else rng.randrange(-200, 300) & 0xFFFF
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
    return legal_x_offset(f, cfg)


def legal_x_offset(f, cfg):
    """Semi-planar formats: PIXEL_X_OFFSET reduced to its in-atom part when the Y plane would
    fetch past the padded line (NVIDIA's RTL then delivers wrong lines; the model rejects it:
    ``ConvCore._check_semi_planar_x_offset``). Returns ``f``."""
    A = cfg.atom_bytes
    if len(PIXEL_FORMATS[PixelFormat(f["PIXEL_FORMAT"]).name][0]) == 2:
        w1, x, pl, pr = f["DATAIN_WIDTH"], f["PIXEL_X_OFFSET"], f["PAD_LEFT"], f["PAD_RIGHT"]
        sft = A.bit_length() - 1
        lp = (pl >> sft) + (x < (pl & (A - 1)))
        if ((pl + w1 + pr) >> sft) + 2 - lp < ((w1 + x) >> sft) + 1:
            f["PIXEL_X_OFFSET"] = x & (A - 1)
    return f


def reg_values(fields):
    """{register name: 32-bit value} from field values (others 0)."""
    regs = {}
    for k, v in fields.items():
        rname, fd = FIELDS[k]
        regs[rname] = regs.get(rname, 0) | ((v & ((1 << fd.width) - 1)) << fd.lsb)
    return regs


def expected_entries(cfg, mem_bytes, fields, regs=None):
    """[(data, slice_last)] from the model's _fetch_pixels (``regs``: register values instead
    of ``fields``; ``mem_bytes``: bytes at address 0 or a SparseMemory)."""
    if isinstance(mem_bytes, SparseMemory):
        mem = mem_bytes
    else:
        mem = SparseMemory(cfg.mem_address_width)
        mem.write(0, mem_bytes)
    ur = UnitRegs(UNIT)
    for rname, v in (regs if regs is not None else reg_values(fields)).items():
        ur.groups[0][rname] = v
    out = ConvCore(cfg, mem)._fetch_pixels(ur.view(0))            # (C, H, PW)
    E = cfg.cbuf_bank_width
    entries = []
    for y in range(out.shape[1]):
        line = (out[:, y, :].T.reshape(-1) & 0xFF).astype(np.uint8).tobytes()
        line += bytes(-len(line) % E)
        n = len(line) // E
        entries += [(int.from_bytes(line[i * E:(i + 1) * E], "little"), int(i == n - 1))
                    for i in range(n)]
    return entries


# ------------------------------------------------------------------------------------ bench
def _through(dut, items, n, rng, setup):
    """Items through a stream component ``dut`` (``i`` -> ``o``) with random stalls on both
    sides and the output checked for stability; ``setup(ctx)`` sets its inputs first. Returns
    the ``n`` output payloads."""
    got = []

    async def prod(ctx):
        setup(ctx)
        await stream_put(ctx, dut.i, items, rng=rng)

    async def cons(ctx):
        got.extend(await stream_get(ctx, dut.o, n, rng=rng))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(prod)
    sim.add_testbench(cons)
    sim.add_process(check_stream_stable(dut.o))
    sim.run()
    return got


def set_regs(ctx, dut, fields, regs=None):
    values = regs if regs is not None else reg_values(fields)
    for r in UNIT.registers:
        if r.double_buffered and hasattr(dut.regs, r.name.lower()):
            ctx.set(getattr(dut.regs, r.name.lower()).as_value(), values.get(r.name, 0))


def run_layers(cfg, layers, *, seed, p_ready=0.7, max_latency=20, p_gap=0.2, p_stall=0.3,
               mem=None, regs=None):
    """Simulate PixelFetch on ``layers`` (field dicts) one after the other (or on one layer of
    register values ``regs`` and memory ``mem``, a SparseMemory); returns the entry count of
    each layer and the log, after checking every entry."""
    rng = random.Random(seed)
    if mem is None:
        mem = bytes(rng.randrange(256) for _ in range(MEM_BYTES))
    if regs is not None:
        layers = [None]
    dut = PixelFetch(cfg)
    log = {"errors": [], "reqs": []}
    results = []

    async def bench(ctx):
        for L in layers:
            want = expected_entries(cfg, mem, L, regs)
            set_regs(ctx, dut, L, regs)
            await ctx.tick()
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            got = await stream_get(ctx, dut.atoms, len(want), rng=rng, p_stall=p_stall,
                                   timeout=40 * len(want) + 2000)
            got = [(g.data, g.slice_last) for g in got]
            n = 0
            while ctx.get(dut.busy):
                await ctx.tick()
                n += 1
                assert n < 100, "busy after the last entry"
            for _ in range(30):      # nothing more comes out
                assert not ctx.get(dut.atoms.valid), "extra entry"
                await ctx.tick()
            for i, (g, w) in enumerate(zip(got, want)):
                assert g == w, (f"seed {seed}: entry {i}: got {g[0]:#x}/{g[1]} want "
                                f"{w[0]:#x}/{w[1]}; layer {L}")
            results.append(len(got))
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
    return results, log


@pytest.mark.parametrize("name", sorted(PIXEL_FORMATS))
def test_every_format(name):
    """Three random layers of each of the 13 formats, nv_small, random memory timing."""
    seed = sorted(PIXEL_FORMATS).index(name) + 100
    rng = random.Random(seed)
    cfg = get_config("nv_small")
    run_layers(cfg, [random_layer(rng, cfg, name) for _ in range(3)], seed=seed)


@pytest.mark.parametrize("seed", range(4))
def test_random_burst4(seed):
    """Random formats with bursts of 4 beats (pieces of up to 4 atoms, planes interleaved
    per piece)."""
    cfg = get_config("nv_small+primary_memif_max_burst=4")
    rng = random.Random(seed)
    run_layers(cfg, [random_layer(rng, cfg) for _ in range(4)], seed=seed, max_latency=40)


TRACES = [("nv_small", "img_51x96x4_1x10x4x32_A8B8G8R8_int8_0", 95),
          ("nv_small", "img_51x96x4_1x10x4x32_V8U8Y8A8_int8_0", 7),
          ("nv_small_generated", "img_51x96x4_1x10x4x32_R8G8B8X8_int8_xoff", 7),
          ("nv_small_generated", "img_51x96x4_1x10x4x32_A8Y8U8V8_int8_var0", 7)]


@pytest.mark.parametrize("suite,name,height", TRACES)
def test_nvidia_trace_registers(suite, name, height):
    """CDMA's registers and the image of NVIDIA's img_* traces (the first ``height``+1 lines):
    every entry equals the model's."""
    from verif.shared import nvdla_dir
    from verif.trace.parser import load_dat, load_trace
    root = nvdla_dir()
    if not (root / "traces" / suite / name).is_dir():
        pytest.skip(f"NVIDIA's trace {suite}/{name} is not available")
    trace = load_trace(root / "traces" / suite / name)
    cfg = get_config("nv_small")
    mem = SparseMemory(cfg.mem_address_width)
    regs = {}
    for cmd in trace.commands:
        if cmd.kind == "mem_load":
            for off, data in load_dat(trace.directory / cmd.args["file"]):
                mem.write(cmd.args["base"] + off, data)
        elif cmd.kind == "reg_write" and cmd.args["reg"].unit.name == "CDMA":
            regs[cmd.args["reg"].reg.name] = cmd.args["value"]
    size0 = regs["D_DATAIN_SIZE_0"]
    regs["D_DATAIN_SIZE_0"] = (size0 & 0xFFFF) | (height << 16)
    run_layers(cfg, None, seed=11, mem=mem, regs=regs, max_latency=30)


def test_requests_cover_lines():
    """The requests of a T_A8B8G8R8 layer with an unaligned start and x offset: per line the
    atoms from the one holding its first byte to the one holding its last, one per request."""
    cfg = get_config("nv_small")
    rng = random.Random(7)
    L = random_layer(rng, cfg, "T_A8B8G8R8")
    L.update(DATAIN_ADDR_LOW_0=1003, LINE_STRIDE=301, PIXEL_X_OFFSET=3, DATAIN_WIDTH=6,
             DATAIN_HEIGHT=2)
    _, log = run_layers(cfg, [L], seed=7)
    want = []
    for y in range(3):
        s = 1003 + 301 * y + 4              # x offset: bit 0 only (2 pixels per 8-byte atom)
        want += [(a, 0) for a in range(s - s % 8, s + 28, 8)]
    assert [(a, n) for _, a, n in log["reqs"]] == want


def test_rate_fast_memory():
    """One pixel per cycle with an always-ready memory and consumer: a 4-byte format line of
    20 pixels (10 entries) takes about 20 cycles."""
    cfg = get_config("nv_small")
    rng = random.Random(3)
    L = random_layer(rng, cfg, "T_R8G8B8A8")
    L.update(DATAIN_WIDTH=19, DATAIN_HEIGHT=3, PAD_LEFT=0, PAD_RIGHT=0)
    dut = PixelFetch(cfg)
    mem = bytes(rng.randrange(256) for _ in range(MEM_BYTES))
    log = {"errors": [], "reqs": []}
    stamps = []

    async def bench(ctx):
        want = expected_entries(cfg, mem, L)
        set_regs(ctx, dut, L)
        await ctx.tick()
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        got = await stream_get(ctx, dut.atoms, len(want), rng=rng, p_stall=0,
                               timestamps=stamps)
        assert [(g.data, g.slice_last) for g in got] == want

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(memory_port(dut.dma, mem, rng, log, beat=8, p_ready=1, max_latency=0,
                                  p_gap=0), background=True)
    sim.add_testbench(bench)
    sim.run()
    # 80 pixels: at one pixel per cycle 40 entries in about 80 cycles (+ per-line overheads)
    assert stamps[-1] - stamps[0] <= 80 + 4 * 3, stamps


# ------------------------------------------------------------------------------------ sub-units
@pytest.mark.parametrize("pix_log2", [0, 1, 2])
def test_plane_unpacker(pix_log2):
    """Random atoms with byte ranges [lo, hi): the output is the byte stream b bytes at a
    time (random stalls both sides)."""
    rng = random.Random(pix_log2)
    b = 1 << pix_log2
    dut = PlaneUnpacker(8)
    atoms, stream_bytes = [], []
    while len(stream_bytes) < 400 or len(stream_bytes) % b:
        lo = rng.randrange(8)
        hi = rng.randint(lo + 1, 8)
        d = rng.randrange(1 << 64)
        atoms.append({"data": d, "lo": lo, "hi": hi})
        stream_bytes += list(d.to_bytes(8, "little")[lo:hi])
    want = [int.from_bytes(bytes(stream_bytes[i:i + b]), "little")
            for i in range(0, len(stream_bytes), b)]
    got = _through(dut, atoms, len(want), rng, lambda ctx: ctx.set(dut.pix_log2, pix_log2))
    assert [g & ((1 << 8 * b) - 1) for g in got] == want


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_entry_packer(channels):
    """Lines of random pixel counts: entries = the line's channel bytes, zero-filled, with
    slice_last on each line's last entry."""
    rng = random.Random(channels)
    dut = EntryPacker(8, 4)
    pixels, want = [], []
    for _ in range(12):
        n = rng.randint(1, 17)
        line = b""
        for i in range(n):
            d = rng.randrange(1 << 32)
            pixels.append({"data": d, "last": int(i == n - 1)})
            line += d.to_bytes(4, "little")[:channels]
        line += bytes(-len(line) % 8)
        k = len(line) // 8
        want += [(int.from_bytes(line[8 * i:8 * i + 8], "little"), int(i == k - 1))
                 for i in range(k)]
    got = _through(dut, pixels, len(want), rng, lambda ctx: ctx.set(dut.channels, channels))
    assert [(g.data, g.slice_last) for g in got] == want


@pytest.mark.parametrize("burst", [1, 4])
def test_semi_planar_wide(burst):
    """The two-plane formats on lines of up to 300 pixels with bursts of ``burst`` beats: the
    planes' pieces interleave without either plane's buffer stalling the other (no deadlock)
    and the entries are right."""
    cfg = get_config(f"nv_small+primary_memif_max_burst={burst}")
    rng = random.Random(burst)
    layers = []
    for name in ("T_Y8___U8V8_N444", "T_Y8___V8U8_N444") * 2:
        L = random_layer(rng, cfg, name)
        w = rng.randint(100, 300)
        L.update(DATAIN_WIDTH=w - 1, DATAIN_HEIGHT=1, DATAIN_ADDR_LOW_0=rng.randrange(8000),
                 LINE_STRIDE=w + rng.randrange(40), DATAIN_ADDR_LOW_1=16000 + rng.randrange(4000),
                 UV_LINE_STRIDE=2 * w + rng.randrange(40))
        layers.append(legal_x_offset(L, cfg))
    run_layers(cfg, layers, seed=burst, max_latency=30)


@pytest.mark.parametrize("spec", ["nv_full", "nv_large"])
def test_wide_sizes(spec):
    """Sizes from the configuration: nv_full (32-byte atoms, two atoms per 64-byte AXI beat,
    64-byte CBUF entries, 64-bit addresses) and nv_large (one atom per 32-byte beat), random
    formats."""
    cfg = get_config(spec)
    rng = random.Random(5)
    run_layers(cfg, [random_layer(rng, cfg) for _ in range(6)], seed=5)


# ------------------------------------------------------------------------------------ in Cdma
def test_cdma_image_layers():
    """Cdma with D_DATAIN_FORMAT = PIXEL (hdl/cdma/__init__.py selects PixelFetch): line y's
    entries go to consecutive data-ring entries from ``(dat_next + y * EPS) mod DCAP``;
    ``dat_slices`` ends at H; random formats, ring start anywhere (wrapping), random stalls."""
    from hdl.cdma import Cdma
    cfg = get_config("nv_small+cbuf_bank_depth=128")
    rng = random.Random(21)
    mem = bytes(rng.randrange(256) for _ in range(MEM_BYTES))
    dut = Cdma(cfg)
    log = {"errors": [], "reqs": [], "wt": []}
    depth = cfg.cbuf_bank_depth

    async def bench(ctx):
        for n in range(6):
            L = random_layer(rng, cfg)
            want = expected_entries(cfg, mem, L)
            per_line = [i for i, (_, last) in enumerate(want) if last]
            eps = per_line[0] + 1 + rng.choice([0, 0, 3])
            h = L["DATAIN_HEIGHT"] + 1
            db = -(-h * eps // depth) - 1 + rng.randint(0, 1)
            dcap = (db + 1) * depth
            dat_next = rng.randrange(dcap)
            L.update(ENTRIES=eps - 1, DATA_BANK=db, WEIGHT_BANK=0, WEIGHT_BYTES=0)
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
                _, _, v, r, a, d, sl = await ctx.tick().sample(
                    dut.dat_wr.valid, dut.dat_wr.ready, dut.dat_wr.payload.addr,
                    dut.dat_wr.payload.data, dut.dat_slices)
                if v and r:
                    got.append((a, d))
                t += 1
                assert t < 20_000, "Cdma hangs"
            assert ctx.get(dut.dat_slices) == h
            exp = []
            y = i = 0
            for d, last in want:
                exp.append(((dat_next + y * eps + i) % dcap, d))
                i += 1
                if last:
                    y, i = y + 1, 0
            assert got == exp, f"layer {n}: {L}"
        assert not log["errors"], log["errors"][:3]

    async def consumer(ctx):
        while True:
            ctx.set(dut.dat_wr.ready, rng.random() < 0.7)
            ctx.set(dut.wt_wr.ready, 1)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(memory_port(dut.dat_dma, mem, rng, log, beat=cfg.axi_data_bytes,
                                  p_ready=0.7, max_latency=20, p_gap=0.2), background=True)
    sim.add_testbench(consumer, background=True)
    sim.add_process(check_stream_stable(dut.dat_wr, name="dat_wr"))
    sim.add_testbench(bench)
    sim.run()
