"""hdl.cdma.Cdma's INT16 and FP16 direct-convolution fetches (docs/conv16.md "CDMA") in
Amaranth's simulator, on the 16-bit configurations: geometry A (nv_full's convolution,
32-byte atoms, 64-byte CBUF units, R = 2) and B (nv_small's, 8-byte atoms and units, R = 1).

CDMA alone: a behavioural memory behind both read clients (tests/hdl/test_cdma.py
``memory_port``: random request stalls, response delays and gaps), random-stall CBUF write
consumers capturing every write, a CSC stand-in reading and releasing weights slowly. Register
values go to the RTL and to the model (verif/model/conv.py) alike. Expected, per layer:

* feature writes, in fetch order (the first ``band_lines`` lines surface by surface, then line
  by line): the model's cube (``ConvCore._fetch_feature``: INT16 through ``cdma_convert(...,
  out_bits=16)`` with CVT_EN, FP16 unchanged or NaN -> +0 with NAN_TO_ZERO) for every channel
  below DATAIN_CHANNEL+1, the same element functions on the memory's bytes for the rest of a
  last surface; surface s (16 channels per 32-B atom) at 16-bit entry ``y*EPS + e`` and atom
  lane j from the layout of docs/conv.md "Where things live in CBUF" with R16 = 2R lanes (the
  last block packed; its entry count is the model's ``feature_entries_per_slice(...,
  elem_bytes=2)``), written to CBUF unit ``dat_next + 2*(y*EPS + e) + j // R`` (mod DCAP),
  lane ``j % R`` (the CBUF contract, docs/conv16.md "Interface changes between units");
* weight writes: unit n of the weight stream (FP16 with NAN_TO_ZERO: NaN elements +0) at
  ``(DATA_BANK+1)*depth + n % WCAP``; read back through the model's ``read_weights(...,
  elem_bytes=2, atom_k=atomic_k/2)`` they equal ``ConvCore._weights``;
* ``dat_slices``, ``band_cbs`` (16-bit channel blocks), ``band_end`` and ``wt_entries`` (units)
  at every cycle; weight requests never past ``wt_released + WCAP``, nor past ``wt_read +
  WT_AHEAD`` while data remains (without ``weights_first``); with ``weights_first`` the lines
  after the band wait for kernel group 0's BYTE_PER_KERNEL x atomic_k/2 bytes of weights.

An INT8 layer on each geometry is checked the same way with the int8 layout (R lanes, 64-B
entries, the model's int8 cube and weights). Also the fetch rate with an always-ready memory.
"""
import random

import numpy as np
from amaranth.sim import Simulator
from streams import check_stream_stable
from test_cdma import bands as cdma_bands, check_done_pulses, consumer, memory_port, releaser

from hdl.cdma import WT_AHEAD, Cdma
from hdl.config import get_config
from hdl.regmap import REGMAP
from verif.mem import SparseMemory
from verif.model.conv import ConvCore, cdma_convert, feature_entries_per_slice, read_weights
from verif.model.fp import fp16_isnan
from verif.model.regs import UnitRegs

GEOM_A = ("nv_full+winograd=False+batch=False+weight_compression=False"
          "+feature_data_type=int8_int16_fp16")
GEOM_B = "nv_small+feature_data_type=int8_int16_fp16"
MEM_BYTES = 1 << 16
UNITS = {u: REGMAP.unit(u) for u in ("CDMA", "CSC")}
INT8, INT16, FP16 = 0, 1, 2


def field_index(unit):
    """{field name: (register, field)} of the names that are unique in ``unit``."""
    seen = {}
    for r in unit.registers:
        for f in r.fields:
            seen.setdefault(f.name, []).append((r, f))
    return {k: v[0] for k, v in seen.items() if len(v) == 1}


FIELDS = {u: field_index(unit) for u, unit in UNITS.items()}


def reg_values(unit, fields):
    """{register name: 32-bit value} of ``fields`` (unique field names of ``unit``)."""
    regs = {}
    for k, v in fields.items():
        r, fd = FIELDS[unit][k]
        regs[r.name] = regs.get(r.name, 0) | ((v & ((1 << fd.width) - 1)) << fd.lsb)
    return regs


def model_views(fields):
    """The model's CDMA and CSC register views of a layer's CDMA fields (CSC: the banks)."""
    views = []
    for u, f in (("CDMA", fields), ("CSC", {"DATA_BANK": fields["DATA_BANK"],
                                            "WEIGHT_BANK": fields["WEIGHT_BANK"]})):
        ur = UnitRegs(UNITS[u])
        for name, v in reg_values(u, f).items():
            ur.groups[0][name] = v
        views.append(ur.view(0))
    return views


# ------------------------------------------------------------------------------------ layers
def random_layer(rng, cfg, prec, *, small=False):
    """A random DC layer of precision ``prec``: (CDMA fields, test info). Channel counts any
    (mostly not a multiple of a surface, so last surfaces are partial and last blocks packed),
    strides with gaps or surfaces interleaved line by line, EPS at least the model's
    ``feature_entries_per_slice``, a data ring start anywhere (an even unit in 16-bit layers,
    the start of a 16-bit entry), a band, and weights of a random kernel shape."""
    A = cfg.atom_bytes
    eb = 1 if prec == INT8 else 2
    epa = A // eb                                   # channels per atom (surface)
    w, h = rng.randint(1, 6 if small else 10), rng.randint(1, 3 if small else 4)
    c = rng.choice([rng.randint(1, 6 * epa), epa * rng.randint(1, 4), rng.randint(1, epa)])
    ns = -(-c // epa)
    if rng.random() < 0.3:
        ss = w * A
        ls = ns * w * A + A * rng.choice([0, 0, 1, 3])
    else:
        ls = w * A + A * rng.choice([0, 0, 1, 5])
        ss = h * ls + A * rng.choice([0, 0, 2, 7])
    fes = feature_entries_per_slice(cfg, w, c, eb)
    eps = fes + rng.choice([0, 0, 1, 3])
    depth = cfg.cbuf_bank_depth
    units = h * eps * eb
    db = -(-units // depth) - 1 + rng.randint(0, 1)
    wb = rng.randint(0, 1)
    dcap = (db + 1) * depth
    span = (ns - 1) * ss + (h - 1) * ls + w * A
    base = A * rng.randrange(0, (MEM_BYTES // 2 - span) // A)
    # weights: K kernels of R x S x C, the stream zero-filled to whole entries (entry_bytes)
    ak = cfg.mac_atomic_k // eb
    k = rng.choice([rng.randint(1, ak + 2), rng.randint(1, 3)])
    kr, ks = rng.randint(1, 2), rng.randint(1, 2 if small else 3)
    bpk = kr * ks * c * eb
    ent = cfg.cbuf_bank_width * eb
    wbytes = -(-k * bpk // ent) * ent
    wts = MEM_BYTES // 2 + A * rng.randrange(0, (MEM_BYTES // 2 - wbytes - A) // A)
    keep = dict(dat_base=0, dat_kept=rng.randint(0, 3),
                dat_next=eb * rng.randrange(dcap // eb), dat_reused=0, wt_reused=0)
    f = dict(DATAIN_FORMAT=0, PROC_PRECISION=prec, IN_PRECISION=prec,
             DATAIN_WIDTH=w - 1, DATAIN_HEIGHT=h - 1, DATAIN_CHANNEL=c - 1,
             DATAIN_ADDR_LOW_0=base, DATAIN_ADDR_HIGH_0=0, LINE_STRIDE=ls, SURF_STRIDE=ss,
             ENTRIES=eps - 1, DATA_BANK=db, WEIGHT_BANK=wb, WEIGHT_ADDR_LOW=wts,
             WEIGHT_ADDR_HIGH=0, WEIGHT_BYTES=wbytes, BYTE_PER_KERNEL=bpk - 1,
             WEIGHT_KERNEL=k - 1, DATAIN_RAM_TYPE=1, WEIGHT_RAM_TYPE=1,
             CVT_EN=int(rng.random() < 0.6), NAN_TO_ZERO=int(rng.random() < 0.6),
             CVT_OFFSET=rng.choice([rng.randrange(1 << 16), rng.randrange(-300, 300) & 0xFFFF]),
             CVT_SCALE=rng.choice([1, 2, rng.randrange(1 << 16), rng.randrange(-40, 40) & 0xFFFF,
                                   0x7FFF, 0x8000]),
             CVT_TRUNCATE=rng.choice([0, 1, rng.randint(0, 20), rng.randint(0, 63), 33, 34]),
             DMA_EN=1)
    info = dict(keep=keep, band=rng.choice([0, rng.randint(1, h + 1)]),
                step=rng.choice([0, rng.randint(1, h + 1)]),
                shape=(k, kr, ks, c))
    return f, info


# ------------------------------------------------------------------------------------ references
def dc_position(cfg, eb, w, ns, s, x):
    """(entry offset in its slice, atom lane) of surface ``s`` at column ``x`` of a slice of
    ``ns`` surfaces and ``w`` pixels, in entries of ``eb`` x cbuf_bank_width bytes holding R' =
    eb x R atoms (docs/conv.md "Where things live in CBUF"): block ``s // R'`` of W entries,
    lane ``s % R'``; the last block's L atoms, when they fit a power-of-two part Lp < R', packed
    R'/Lp pixels to an entry."""
    rr = eb * cfg.cbuf_bank_width // cfg.atom_bytes
    g, lane = divmod(s, rr)
    nblk = -(-ns // rr)
    last = ns - (nblk - 1) * rr
    lp = 1 << (last - 1).bit_length()
    if g == nblk - 1 and lp < rr:
        p = rr // lp
        return g * w + x // p, (x % p) * lp + lane
    return g * w + x, lane


def element_fn(f):
    """The converter's function on raw elements (numpy uint words of the layer's element
    size), from the model's own functions: INT8/INT16 ``cdma_convert`` with CVT_EN, FP16 the
    NaN flush with NAN_TO_ZERO."""
    prec = f["PROC_PRECISION"]
    if prec == FP16:
        return lambda v: np.where(fp16_isnan(v), 0, v) if f["NAN_TO_ZERO"] else v
    if not f["CVT_EN"]:
        return lambda v: v
    bits = 8 if prec == INT8 else 16

    def cvt(v):
        off = f["CVT_OFFSET"] - (1 << 16) * (f["CVT_OFFSET"] >> 15)
        sc = f["CVT_SCALE"] - (1 << 16) * (f["CVT_SCALE"] >> 15)
        return cdma_convert(v, True, off, sc, f["CVT_TRUNCATE"], bits) & ((1 << bits) - 1)
    return cvt


def bands(f, info):
    """(first line, lines) of the bands fetched surface by surface (test_cdma's ``bands``)."""
    return cdma_bands(dict(keep=info["keep"], band=info["band"], step=info["step"],
                           h=f["DATAIN_HEIGHT"] + 1, nb=f.get("BATCHES", 0) + 1))


def fetch_order(f, info, ns):
    """(y, s, x) of every atom in fetch order: each band's lines surface by surface, then the
    lines after the bands line by line; with BATCHES > 0 (docs/conv.md "Multi-batch") the
    cubes one after the other, line by line, y counting the N x H lines."""
    w, h = f["DATAIN_WIDTH"] + 1, f["DATAIN_HEIGHT"] + 1
    h *= f.get("BATCHES", 0) + 1
    order = [(y, s, x) for y0, nb in bands(f, info)
             for s in range(ns) for y in range(y0, y0 + nb) for x in range(w)]
    done = sum(nb for _, nb in bands(f, info))
    return order + [(y, s, x) for y in range(done, h) for s in range(ns) for x in range(w)]


def expected_data(cfg, mem, f, info):
    """[(unit, lane, atom value, y)] of the layer's feature writes in order, checked against
    the model's cube on every channel of the layer."""
    prec = f["PROC_PRECISION"]
    eb = 1 if prec == INT8 else 2
    A, R = cfg.atom_bytes, cfg.cbuf_bank_width // cfg.atom_bytes
    epa = A // eb
    w, h, c = f["DATAIN_WIDTH"] + 1, f["DATAIN_HEIGHT"] + 1, f["DATAIN_CHANNEL"] + 1
    ns = -(-c // epa)
    sm = SparseMemory(cfg.mem_address_width)
    sm.write(0, np.frombuffer(mem, np.uint8))
    core, view = ConvCore(cfg, sm), model_views(f)[0]
    cubes = [core._fetch_feature(view, b) for b in range(f.get("BATCHES", 0) + 1)]
    assert cubes[0].shape == (c, h, w)
    fn = element_fn(f)
    dt = np.uint8 if eb == 1 else np.dtype("<u2")
    eps, dcap = f["ENTRIES"] + 1, (f["DATA_BANK"] + 1) * cfg.cbuf_bank_depth
    keep = info["keep"]
    # the layout's entry count is the model's D_ENTRY_PER_SLICE
    used = {dc_position(cfg, eb, w, ns, s, x)[0] for s in range(ns) for x in range(w)}
    assert len(used) == max(used) + 1 == feature_entries_per_slice(cfg, w, c, eb)
    out = []
    for y, s, x in fetch_order(f, info, ns):
        bi, yc = divmod(y, h)                   # batch, its line
        a = (f["DATAIN_ADDR_LOW_0"] + bi * f.get("BATCH_STRIDE", 0) + s * f["SURF_STRIDE"]
             + yc * f["LINE_STRIDE"] + x * A)
        raw = np.frombuffer(mem[a:a + A], dt).astype(np.int64)
        val = np.asarray(fn(raw), np.int64)
        for i in range(epa):                    # the model's cube on the layer's channels
            ch = s * epa + i
            if ch < c:
                assert val[i] == cubes[bi][ch, yc, x] & ((1 << (8 * eb)) - 1), (ch, y, x)
        atom = int.from_bytes(val.astype(dt).tobytes(), "little")
        e, j = dc_position(cfg, eb, w, ns, s, x)
        unit = (keep["dat_next"] + eb * (y * eps + e) + j // R) % dcap
        out.append((unit, j % R, atom, y))
    return out


def expected_weights(cfg, mem, f):
    """[(unit address, unit bytes)] of the layer's weight stream, the FP16 NaN flush applied."""
    W = cfg.cbuf_bank_width
    n = -(-f["WEIGHT_BYTES"] // W)
    raw = bytearray(mem[f["WEIGHT_ADDR_LOW"]:f["WEIGHT_ADDR_LOW"] + n * W])
    if f["PROC_PRECISION"] == FP16 and f["NAN_TO_ZERO"]:
        v = np.frombuffer(bytes(raw), "<u2").astype(np.int64)
        raw = bytearray(np.where(fp16_isnan(v), 0, v).astype("<u2").tobytes())
    depth = cfg.cbuf_bank_depth
    base, cap = (f["DATA_BANK"] + 1) * depth, (f["WEIGHT_BANK"] + 1) * depth
    return [(base + i % cap, int.from_bytes(raw[i * W:(i + 1) * W], "little")) for i in range(n)]


def check_weights_model(cfg, mem, f, shape, got):
    """The weight units written, read back through the model's ``read_weights`` layout, equal
    the model's ``ConvCore._weights`` (fp16 patterns with the flush in FP16 layers)."""
    prec = f["PROC_PRECISION"]
    eb = 1 if prec == INT8 else 2
    sm = SparseMemory(cfg.mem_address_width)
    sm.write(0, np.frombuffer(mem, np.uint8))
    cdma, csc = model_views(f)
    want = ConvCore(cfg, sm)._weights(cdma, csc, "dc", shape)
    W = cfg.cbuf_bank_width
    stream = b"".join(d.to_bytes(W, "little") for _, d in got)
    back = SparseMemory(cfg.mem_address_width)
    back.write(0, np.frombuffer(stream, np.uint8))
    k, r, s, c = shape
    have = read_weights(back, 0, k, r, s, c, cfg.mac_atomic_c, cfg.mac_atomic_k // eb, eb)
    if prec == FP16:
        have = have & 0xFFFF
    np.testing.assert_array_equal(have, want)


def counters(cfg, f, info, n):
    """(dat_slices, band_cbs, band_end) after ``n`` feature atoms are written: the band's
    channel blocks (entries of R' atoms, the last one partial) count as its surfaces finish."""
    prec = f["PROC_PRECISION"]
    eb = 1 if prec == INT8 else 2
    rr = eb * cfg.cbuf_bank_width // cfg.atom_bytes
    w, h = f["DATAIN_WIDTH"] + 1, f["DATAIN_HEIGHT"] + 1
    ns = -(-(f["DATAIN_CHANNEL"] + 1) // (cfg.atom_bytes // eb))
    nblk = -(-ns // rr)
    kept = info["keep"]["dat_kept"]
    end = kept
    for y0, nb in bands(f, info):
        end = kept + y0 + nb
        if n < nb * ns * w:
            return kept + y0, n // (nb * w) // rr, end
        n -= nb * ns * w
    done = sum(nb for _, nb in bands(f, info))
    return kept + done + n // (ns * w), nblk if done else 0, end


# ------------------------------------------------------------------------------------ bench
def run_layers(cfg, layers, *, seed, weights_first=False, p_ready=0.7, max_latency=20, p_gap=0.2,
               p_wr_stall=0.3, p_release=0.3, chunk=16, mem=None):
    """Simulate CDMA on ``layers`` ((fields, info) pairs) back to back, checking each; returns
    per layer a dict of measurements (cycles, requests, NaN flush counts)."""
    rng = random.Random(seed)
    if mem is None:
        mem = bytes(rng.randrange(256) for _ in range(MEM_BYTES))
    dut = Cdma(cfg, weights_first)
    masked = hasattr(dut.dat_wr.payload, "mask")
    log = {"samples": [], "errors": [], "dat_reqs": [], "wt_reqs": []}
    results = []
    sigs = [dut.busy, dut.dat_wr.valid, dut.dat_wr.ready, dut.dat_wr.payload.addr,
            dut.dat_wr.payload.data, dut.wt_wr.valid, dut.wt_wr.ready, dut.wt_wr.payload.addr,
            dut.wt_wr.payload.data, dut.dat_slices, dut.wt_entries, dut.wt_released,
            dut.wt_read, dut.wt_dma.req.valid, dut.wt_dma.req.ready,
            dut.wt_dma.req.payload.len, dut.dat_dma.req.valid, dut.dat_dma.req.ready,
            dut.band_cbs, dut.band_end, dut.dat_dma.req.payload.len]
    if masked:
        sigs += [dut.dat_wr.payload.mask, dut.wt_wr.payload.mask]
    sigs += [dut.dat_done, dut.wt_done]

    async def monitor(ctx):
        async for _, _, *v in ctx.tick().sample(*sigs):
            log["samples"].append(tuple(v))

    async def bench(ctx):
        for f, info in layers:
            for r in UNITS["CDMA"].registers:
                if r.double_buffered and hasattr(dut.regs, r.name.lower()):
                    ctx.set(getattr(dut.regs, r.name.lower()).as_value(),
                            reg_values("CDMA", f).get(r.name, 0))
            for k, v in info["keep"].items():
                ctx.set(getattr(dut.keep, k), v)
            ctx.set(dut.band_lines, info["band"])
            ctx.set(dut.band_step, info["step"])
            await ctx.tick()
            t0 = len(log["samples"])
            r0 = {k: len(log[k + "_reqs"]) for k in ("dat", "wt")}
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            n = 0
            while ctx.get(dut.busy):
                await ctx.tick()
                n += 1
                assert n < 100_000, "CDMA hangs"
            await ctx.tick()
            assert ctx.get(dut.hw.d_nan_input_data_num.nan_data_num) == 0
            reqs = {k: log[k + "_reqs"][r0[k]:] for k in ("dat", "wt")}
            results.append(check_layer(cfg, mem, f, info, log["samples"][t0:], reqs, masked,
                                       weights_first))
        assert not log["errors"], log["errors"][:3]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for name, port in (("dat", dut.dat_dma), ("wt", dut.wt_dma)):
        sim.add_testbench(memory_port(port, mem, rng, log, key=name + "_reqs",
                                      beat=cfg.axi_data_bytes, p_ready=p_ready,
                                      max_latency=max_latency, p_gap=p_gap), background=True)
    sim.add_testbench(consumer(dut.dat_wr, rng, p_wr_stall), background=True)
    sim.add_testbench(consumer(dut.wt_wr, rng, p_wr_stall), background=True)
    sim.add_testbench(releaser(dut, rng, p_release, chunk), background=True)
    sim.add_process(monitor)
    for name, s in (("dat_wr", dut.dat_wr), ("wt_wr", dut.wt_wr)):
        sim.add_process(check_stream_stable(s, name=name))
    sim.add_testbench(bench)
    sim.run()
    return results


def check_layer(cfg, mem, f, info, samples, reqs, masked, weights_first):
    A, R = cfg.atom_bytes, cfg.cbuf_bank_width // cfg.atom_bytes
    want_dat = expected_data(cfg, mem, f, info)
    want_wt = expected_weights(cfg, mem, f)
    cap = (f["WEIGHT_BANK"] + 1) * cfg.cbuf_bank_depth
    eb = 1 if f["PROC_PRECISION"] == INT8 else 2
    h = f["DATAIN_HEIGHT"] + 1
    b = min(info["band"], h)
    w = f["DATAIN_WIDTH"] + 1
    ns = -(-(f["DATAIN_CHANNEL"] + 1) // (A // eb))
    band_atoms = b * ns * w
    g0 = min(-(-(f["BYTE_PER_KERNEL"] + 1) * (cfg.mac_atomic_k // eb) // cfg.cbuf_bank_width),
             cap, len(want_wt))
    final_slices = info["keep"]["dat_kept"] + h * (f.get("BATCHES", 0) + 1)
    data_done = next((t for t, s in enumerate(samples) if t > 0 and s[9] == final_slices),
                     len(samples))
    dat, wt = [], []
    wt_req = 0
    first_rest_wt = None        # weight units requested when the first line after the band came
    first_rest_req = None       # ... when it was requested (beats of one atom: geometry B)
    dat_req = 0
    for t, s in enumerate(samples):
        (busy, dv, dr, da, dd, wv, wr, wa, wd, slices, entries, released, read,
         wqv, wqr, wql, dqv, dqr, band_cbs, band_end) = s[:20]
        dql = s[20]
        dmask, wmask = s[21:23] if masked else (1, 1)
        if t > 0:
            assert (slices, band_cbs, band_end) == counters(cfg, f, info, len(dat)), (
                t, slices, band_cbs, band_end, len(dat))
            assert entries == len(wt), (t, entries, len(wt))
        if wqv and wqr:
            wt_req += (wql + 1) * cfg.axi_data_bytes // cfg.cbuf_bank_width
            if t > 1:
                assert wt_req <= released + cap, (t, wt_req, released)
                assert weights_first or t > data_done or wt_req <= read + WT_AHEAD, (t, wt_req)
        if dqv and dqr:
            dat_req += (dql + 1) * cfg.axi_data_bytes // A
            if dat_req > band_atoms and first_rest_req is None:
                first_rest_req = wt_req
        if dv and dr:
            assert dmask in [1 << j for j in range(R)], dmask
            j = dmask.bit_length() - 1
            dat.append((da, j, (dd >> (j * A * 8)) & ((1 << (A * 8)) - 1)))
            if len(dat) == band_atoms + 1 and first_rest_wt is None:
                first_rest_wt = wt_req
        if wv and wr:
            assert wmask == (1 << R) - 1
            assert t <= 1 or len(wt) < released + cap, "unreleased weight unit overwritten"
            wt.append((wa, wd))
    got = [(u, j, v) for u, j, v in dat]
    want = [(u, j, v) for u, j, v, _ in want_dat]
    for i, (g, x) in enumerate(zip(got, want)):
        assert g == x, f"feature write {i}: got unit {g[0]} lane {g[1]} {g[2]:#x}, want " \
                       f"unit {x[0]} lane {x[1]} {x[2]:#x} ({f}, {info})"
    assert len(got) == len(want)
    assert len({(u, j) for u, j, _ in got}) == len(got), "a (unit, lane) written twice"
    assert wt == want_wt
    if f["WEIGHT_BYTES"]:
        check_weights_model(cfg, mem, f, info["shape"], wt)
    assert samples[-1][9] == final_slices
    assert samples[-1][10] == len(want_wt)
    check_done_pulses(samples, 0, {"dat": (1, 2, -2), "wt": (5, 6, -1)})
    if weights_first and 0 < b < h:
        assert first_rest_wt is not None and first_rest_wt >= g0, (first_rest_wt, g0)
    return dict(cycles=len(samples), g0=g0, first_rest_wt=first_rest_wt,
                first_rest_req=first_rest_req, atoms=len(want),
                dat_reqs=reqs["dat"])


def nan_count(cfg, mem, f):
    """NaN elements of an FP16 layer's weight stream (the flush had something to do)."""
    W = cfg.cbuf_bank_width
    n = -(-f["WEIGHT_BYTES"] // W) * W
    v = np.frombuffer(mem[f["WEIGHT_ADDR_LOW"]:f["WEIGHT_ADDR_LOW"] + n], "<u2").astype(np.int64)
    return int(fp16_isnan(v).sum())


# ------------------------------------------------------------------------------------ tests
def test_cdma16_geometry_b_random():
    """Geometry B: INT16 and FP16 layers (converter on/off, NaN flush on/off, bands, kept slices,
    a data ring start anywhere), and INT8 layers on the same unit, back to back."""
    cfg = get_config(GEOM_B)
    rng = random.Random("cdma16-B")
    precs = [INT16, FP16, INT16, FP16, INT8, INT16, FP16, INT16, FP16, INT8] * 2
    layers = [random_layer(rng, cfg, p) for p in precs]
    assert any(f["DATAIN_CHANNEL"] % 4 != 3 for f, _ in layers)
    run_layers(cfg, layers, seed=1)


rng_addr = random.Random("cdma16-addr")


def set_weights(cfg, f, info, k, kr, ks):
    """Give layer ``f`` K = ``k`` kernels of ``kr`` x ``ks`` x C (BYTE_PER_KERNEL, WEIGHT_KERNEL,
    WEIGHT_BYTES zero-filled to whole entries of the layer's precision)."""
    eb = 1 if f["PROC_PRECISION"] == INT8 else 2
    c = f["DATAIN_CHANNEL"] + 1
    bpk = kr * ks * c * eb
    ent = cfg.cbuf_bank_width * eb
    f.update(BYTE_PER_KERNEL=bpk - 1, WEIGHT_KERNEL=k - 1, WEIGHT_BYTES=-(-k * bpk // ent) * ent)
    assert f["WEIGHT_BYTES"] < MEM_BYTES // 4
    f["WEIGHT_ADDR_LOW"] = MEM_BYTES // 2 + cfg.atom_bytes * rng_addr.randrange(64)
    info["shape"] = (k, kr, ks, c)


def test_cdma16_geometry_b_weights_first():
    """Geometry B built ``weights_first``: after a band, the lines wait for kernel group 0's
    weights, BYTE_PER_KERNEL x atomic_k/2 bytes in a 16-bit layer (x atomic_k in INT8); CSC
    reads and releases nothing, so the weights requested when the data resumes are group 0's
    (at least 12 units here, the layer has more than twice as many), not twice as many."""
    cfg = get_config(GEOM_B)
    rng = random.Random("cdma16-wf")
    layers = []
    for prec in (INT16, FP16, INT8):
        eb = 1 if prec == INT8 else 2
        f, info = random_layer(rng, cfg, prec)
        f.update(DATAIN_HEIGHT=max(f["DATAIN_HEIGHT"], 1), DATAIN_CHANNEL=rng.randint(12, 24) - 1,
                 WEIGHT_BANK=1)
        f["SURF_STRIDE"] = (f["DATAIN_HEIGHT"] + 1) * f["LINE_STRIDE"]
        w, h, c = f["DATAIN_WIDTH"] + 1, f["DATAIN_HEIGHT"] + 1, f["DATAIN_CHANNEL"] + 1
        f["DATAIN_ADDR_LOW_0"] = 0
        f["ENTRIES"] = feature_entries_per_slice(cfg, w, c, eb) - 1
        f["DATA_BANK"] = -(-h * (f["ENTRIES"] + 1) * eb // cfg.cbuf_bank_depth) - 1
        info["keep"]["dat_next"] = 0
        set_weights(cfg, f, info, 2 * cfg.mac_atomic_k // eb + rng.randint(1, 3), 1,
                    rng.randint(1, 2))
        info["band"] = rng.randint(1, h - 1)
        layers.append((f, info))
    res = run_layers(cfg, layers, seed=2, weights_first=True, p_release=0.0)
    for r in res:
        # (a few more units go out while the walker restarts: 3 measured; group 0 counted
        # in atomic_k kernels would make it 2 x g0 >= g0 + 12)
        assert 12 <= r["g0"] <= r["first_rest_req"] <= r["g0"] + 4, r


def test_cdma16_fp16_nan_flush():
    """FP16 layers on geometry B with NAN_TO_ZERO set and clear, CVT_EN set and clear, on a
    memory of fp16 values with many NaNs: data and weights NaN -> +0 only with the flush, all
    other bits unchanged (the checks of :func:`check_layer`)."""
    cfg = get_config(GEOM_B)
    rng = random.Random("cdma16-nan")
    words = [rng.choice([0x7C00 | rng.randint(1, 0x3FF), 0xFC00 | rng.randint(1, 0x3FF),
                         0x7C00, 0xFC00, 0x8000, rng.randrange(1 << 16)])
             for _ in range(MEM_BYTES // 2)]
    mem = np.array(words, "<u2").tobytes()
    layers = []
    for flush, cvt in ((1, 0), (0, 1), (1, 1), (0, 0)):
        f, info = random_layer(rng, cfg, FP16)
        f["NAN_TO_ZERO"], f["CVT_EN"] = flush, cvt
        assert nan_count(cfg, mem, f) > 0
        layers.append((f, info))
    run_layers(cfg, layers, seed=3, mem=mem)


def test_cdma16_int16_converter_extremes():
    """INT16 layers on geometry B with the converter at its corners (offsets and scales of
    +-32768, truncations 0, 33, 34, 63) on a memory of extreme int16 values: each element as
    ``cdma_convert(..., out_bits=16)`` (saturation to 16 bits, 34-bit product)."""
    cfg = get_config(GEOM_B)
    rng = random.Random("cdma16-cvt")
    words = [rng.choice([0x8000, 0x7FFF, 0xFFFF, 0, 1, rng.randrange(1 << 16)])
             for _ in range(MEM_BYTES // 2)]
    mem = np.array(words, "<u2").tobytes()
    layers = []
    for off, scale, trunc in ((0x8000, 0x7FFF, 0), (0x7FFF, 0x8000, 0), (0x8000, 0x8000, 33),
                              (1, 0x7FFF, 34), (0xFFFF, 3, 1), (0x1234, 0xFFFF, 63)):
        f, info = random_layer(rng, cfg, INT16, small=True)
        f.update(CVT_EN=1, CVT_OFFSET=off, CVT_SCALE=scale, CVT_TRUNCATE=trunc)
        layers.append((f, info))
    run_layers(cfg, layers, seed=4, mem=mem, p_release=0.6)


def test_cdma16_geometry_a():
    """Geometry A (R = 2 atoms per unit, R16 = 4 per 16-bit entry, 2 atoms per AXI beat),
    built ``weights_first`` as the pipeline builds it: 16-bit layers of 5 surfaces (the last
    block L = 1: 4 pixels to an entry), 3 (L = 3, not packed), 2 (L = 2, 2 pixels to an
    entry), 4 (whole) and 7 (a whole block and L = 3), and an INT8 layer (3 surfaces: L = 1 of
    R = 2, packed) as before."""
    cfg = get_config(GEOM_A)
    A = cfg.atom_bytes
    rng = random.Random("cdma16-A")
    layers = []
    for prec, ns in ((INT16, 5), (FP16, 3), (INT8, 3), (FP16, 2), (INT16, 4), (INT16, 7)):
        f, info = random_layer(rng, cfg, prec, small=True)
        eb = 1 if prec == INT8 else 2
        epa = A // eb
        w, h = rng.randint(3, 6), f["DATAIN_HEIGHT"] + 1
        c = (ns - 1) * epa + rng.randint(1, epa)
        k, kr, ks, _ = info["shape"]
        info["shape"] = (k, kr, ks, c)
        bpk = kr * ks * c * eb
        ent = cfg.cbuf_bank_width * eb
        ls = w * A + A * rng.choice([0, 1, 3])
        eps = feature_entries_per_slice(cfg, w, c, eb) + rng.randint(0, 2)
        db = -(-h * eps * eb // cfg.cbuf_bank_depth) - 1
        f.update(DATAIN_WIDTH=w - 1, DATAIN_CHANNEL=c - 1, BYTE_PER_KERNEL=bpk - 1,
                 WEIGHT_BYTES=-(-k * bpk // ent) * ent, LINE_STRIDE=ls,
                 SURF_STRIDE=h * ls + A * rng.choice([0, 2]),
                 DATAIN_ADDR_LOW_0=A * rng.randrange(64),
                 WEIGHT_ADDR_LOW=MEM_BYTES // 2 + A * rng.randrange(64), ENTRIES=eps - 1,
                 DATA_BANK=db, NAN_TO_ZERO=1)
        dcap = (db + 1) * cfg.cbuf_bank_depth
        info["keep"]["dat_next"] = eb * rng.randrange(dcap // eb)
        layers.append((f, info))
    run_layers(cfg, layers, seed=5, weights_first=True, max_latency=6)


def test_cdma16_geometry_a_batches():
    """Geometry A with multi-batch (nv_full; docs/conv.md "Multi-batch"): INT8, INT16 and FP16
    layers of N = 2..32 cubes D_BATCH_STRIDE apart (gaps, or interleaved with a stride below a
    cube's span), each fetched line by line to the slices after the previous cube's, between
    ordinary layers; the model's cube b (``ConvCore._fetch_feature(cdma, b)``) in every write."""
    cfg = get_config(GEOM_A + "+batch=True+max_batch=32")
    A = cfg.atom_bytes
    rng = random.Random("cdma16-A-batch")
    layers = []
    for prec, nb in ((INT16, 3), (INT8, 32), (FP16, 2), (INT8, 1), (INT16, 9), (INT8, 5)):
        f, info = random_layer(rng, cfg, prec, small=True)
        eb = 1 if prec == INT8 else 2
        h, w, c = f["DATAIN_HEIGHT"] + 1, f["DATAIN_WIDTH"] + 1, f["DATAIN_CHANNEL"] + 1
        ns = -(-c // (A // eb))
        span = (ns - 1) * f["SURF_STRIDE"] + (h - 1) * f["LINE_STRIDE"] + w * A
        bs = A * rng.choice([rng.randint(1, 3), -(-span // A) + rng.randint(0, 2)])
        eps = f["ENTRIES"] + 1
        db = -(-nb * h * eps * eb // cfg.cbuf_bank_depth) - 1
        base = A * rng.randrange(max(1, (MEM_BYTES // 2 - (nb - 1) * bs - span) // A))
        f.update(BATCHES=nb - 1, BATCH_STRIDE=bs, DATA_BANK=db, DATAIN_ADDR_LOW_0=base)
        info["keep"].update(dat_kept=0, dat_next=eb * rng.randrange((db + 1) * cfg.cbuf_bank_depth // eb))
        assert base + (nb - 1) * bs + span <= MEM_BYTES // 2 and db < 16 - 1 - f["WEIGHT_BANK"]
        layers.append((f, info))
    run_layers(cfg, layers, seed=7, weights_first=True, max_latency=6)


def test_cdma16_fetch_rate():
    """A 16-bit layer on geometry B with an always-ready memory and CBUF: within 5% of one atom
    per cycle (the converter stages and the packed addressing at full rate)."""
    cfg = get_config(GEOM_B)
    rng = random.Random("cdma16-rate")
    f, info = random_layer(rng, cfg, INT16)
    w, h, c = 24, 6, 26                     # 7 surfaces: a packed last block (L = 1)
    f.update(DATAIN_WIDTH=w - 1, DATAIN_HEIGHT=h - 1, DATAIN_CHANNEL=c - 1, CVT_EN=1,
             LINE_STRIDE=w * 8, SURF_STRIDE=h * w * 8, DATAIN_ADDR_LOW_0=0,
             ENTRIES=feature_entries_per_slice(cfg, w, c, 2) - 1, DATA_BANK=3, WEIGHT_BYTES=0)
    info.update(band=0, keep=dict(info["keep"], dat_next=0, dat_kept=0), shape=(0, 1, 1, c))
    res = run_layers(cfg, [(f, info)], seed=6, p_ready=1.0, max_latency=0, p_gap=0.0,
                     p_wr_stall=0.0, p_release=1.0)
    atoms = res[0]["atoms"]
    print(f"16-bit {w}x{h}x{c}: {atoms} atoms in {res[0]['cycles']} cycles")
    assert atoms == w * h * 7
    assert res[0]["cycles"] <= 1.05 * atoms
