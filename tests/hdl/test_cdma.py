# amaranth: UnusedElaboratable=no
# (test_cdma_rejects_excluded_configs constructs a Cdma that raises and is never elaborated.)
"""hdl.cdma.Cdma (docs/conv.md "CDMA") in Amaranth's simulator, against a behavioural memory
behind both MCIF read clients (random request stalls, response delays and gaps, one AXI ID each:
in order) and random-stall CBUF write consumers.

Checked against plain-Python formulas of docs/conv.md: every CBUF entry written (feature atom
(x, y, cb) from ``base + cb*SURF_STRIDE + y*LINE_STRIDE + 8x`` to entry ``y*EPS + cb*W + x``,
the first ``band_lines`` lines surface by surface, then line by line; weight entry n from ``WEIGHT_ADDR + 8n`` to ``(DATA_BANK+1)*depth + n % WCAP``),
in order; ``dat_slices`` / ``wt_entries`` at every cycle equal to the slices / entries whose
writes have been taken (so monotonic, never ahead, final values); weight requests never beyond
``wt_released + WCAP`` with a weight ring smaller than the weights and a slow releasing driver
(so no unreleased entry is overwritten); ``band_cbs`` / ``band_end``; the feature requests are
the maximal runs of the fetch order inside burst windows; the D_PERF_* counters; bursts of 1 and 4 beats. Also the fetch rate
of dc_32x26x76's input with an always-ready memory, and the ``keep`` input (reuse across
layers, hdl/cbuf/keep.py): kept slices counted at once, slices written in the data-bank ring
from ``dat_next`` (``(dat_next + offset) mod DCAP``), skipped data / weight fetches.
"""
import random
from collections import deque

import pytest
from amaranth.sim import Simulator
from streams import check_stream_stable

from hdl.cdma import WT_AHEAD, Cdma
from hdl.cdma.dma import WeightWalker
from hdl.config import get_config
from verif.mem import SparseMemory

MEM_BYTES = 1 << 16
ATOM = 8


# ------------------------------------------------------------------------------------ layers
NO_KEEP = dict(dat_base=0, dat_kept=0, dat_next=0, dat_reused=0, wt_reused=0)


def random_layer(rng, cfg, *, big_weights=False, reuse=False):
    """A random small DC layer (dict): cube W, H, C (channels mostly not multiples of 8),
    strides with gaps (or surfaces interleaved per line, contiguous), EPS >= CB*W, banks for
    ``cfg``, a weight stream (longer than the ring when ``big_weights``); ``keep``: CDMA's
    ``keep`` input (random kept slices / data-ring start / skipped fetches when ``reuse``)."""
    w, h = rng.randint(1, 12), rng.randint(1, 5)
    c = rng.choice([rng.randint(1, 40), 8 * rng.randint(1, 4)])
    cb = -(-c // ATOM)
    if rng.random() < 0.3:
        # surfaces interleaved line by line: line y of surface cb+1 follows line y of cb
        ss = w * ATOM
        ls = cb * w * ATOM + ATOM * rng.choice([0, 0, 1, 3])
    else:
        ls = w * ATOM + ATOM * rng.choice([0, 0, 1, 5])
        ss = h * ls + ATOM * rng.choice([0, 0, 2, 7])
    eps = cb * w + rng.choice([0, 0, 1, 4])
    depth = cfg.cbuf_bank_depth
    db = -(-h * eps // depth) - 1 + rng.randint(0, 1)
    wb = 0 if big_weights else rng.randint(0, 2)
    cap = (wb + 1) * depth
    if big_weights:
        wbytes = rng.randint(cap * ATOM + 1, 3 * cap * ATOM)
    else:
        wbytes = rng.choice([0, rng.randint(1, 300), rng.randint(1, 60) * 128])
    span = (cb - 1) * ss + (h - 1) * ls + w * ATOM
    base = ATOM * rng.randrange(0, (MEM_BYTES // 2 - span) // ATOM)
    wts = MEM_BYTES // 2 + ATOM * rng.randrange(0, (MEM_BYTES // 2 - wbytes - ATOM) // ATOM)
    keep = dict(NO_KEEP)
    if reuse:   # what CBUF keeps (hdl.cbuf.keep): kept slices, a ring start anywhere, skips
        keep = dict(dat_base=0, dat_kept=rng.randint(0, 5),
                    dat_next=rng.randrange((db + 1) * depth), dat_reused=int(rng.random() < 0.3),
                    wt_reused=int(not big_weights and rng.random() < 0.4))
    band = rng.choice([0, 0, rng.randint(1, h + 2)])     # first lines surface by surface
    bpk = rng.randint(1, 48)                               # BYTE_PER_KERNEL (weights_first)
    return dict(w=w, h=h, c=c, ls=ls, ss=ss, eps=eps, base=base, db=db, wb=wb, wbytes=wbytes,
                wts=wts, perf=rng.random() < 0.7, keep=keep, band=band, bpk=bpk)


def set_layer(ctx, dut, L):
    r = dut.regs
    ctx.set(r.d_datain_format.datain_format, 0)                 # FEATURE
    ctx.set(r.d_datain_size_0.datain_width, L["w"] - 1)
    ctx.set(r.d_datain_size_0.datain_height, L["h"] - 1)
    ctx.set(r.d_datain_size_1.datain_channel, L["c"] - 1)
    ctx.set(r.d_dain_addr_low_0.datain_addr_low_0, L["base"])
    ctx.set(r.d_dain_addr_high_0.datain_addr_high_0, 0)
    ctx.set(r.d_line_stride.line_stride, L["ls"])
    ctx.set(r.d_surf_stride.surf_stride, L["ss"])
    ctx.set(r.d_entry_per_slice.entries, L["eps"] - 1)
    ctx.set(r.d_bank.data_bank, L["db"])
    ctx.set(r.d_bank.weight_bank, L["wb"])
    ctx.set(r.d_weight_addr_low.weight_addr_low, L["wts"])
    ctx.set(r.d_weight_addr_high.weight_addr_high, 0)
    ctx.set(r.d_weight_bytes.weight_bytes, L["wbytes"])
    ctx.set(r.d_perf_enable.dma_en, int(L["perf"]))
    for k, v in L["keep"].items():
        ctx.set(getattr(dut.keep, k), v)
    ctx.set(dut.band_lines, L.get("band", 0))
    ctx.set(dut.band_step, L.get("step", 0))
    ctx.set(r.d_weight_size_0.byte_per_kernel, L.get("bpk", 1) - 1)
    if hasattr(r, "d_batch_number"):
        ctx.set(r.d_batch_number.batches, L.get("nb", 1) - 1)
        ctx.set(r.d_batch_stride.batch_stride, L.get("bs", 0))
    if hasattr(r, "d_wmb_bytes"):
        ctx.set(r.d_weight_format.weight_format, int("wmb" in L))
        ctx.set(r.d_wmb_addr_low.wmb_addr_low, L.get("wmb", 0))
        ctx.set(r.d_wmb_addr_high.wmb_addr_high, 0)
        ctx.set(r.d_wmb_bytes.wmb_bytes, L.get("wmb_bytes", 0))
        ctx.set(r.d_weight_size_1.weight_kernel, L.get("k", 1) - 1)


def bands(L):
    """(first line, lines) of the bands fetched surface by surface: the first band's
    min(band, H) lines, then (``step`` != 0 after a non-empty first band) bands of ``step``
    lines to the end of the cube, the last one shorter; none when the data is reused."""
    if L["keep"]["dat_reused"] or L.get("nb", 1) > 1:
        return []
    b, step, h = min(L.get("band", 0), L["h"]), L.get("step", 0), L["h"]
    out = [(0, b)] if b else []
    y = b
    while b and step and y < h:
        out.append((y, min(step, h - y)))
        y += step
    return out


def fetch_segments(L):
    """The fetch order (docs/conv.md "CDMA") as segments, lists of (y, cb, x): each band's
    lines surface by surface, then the lines after the bands line by line; in a multi-batch
    layer (``nb`` > 1; docs/conv.md "Multi-batch") cube after cube, each line by line, as
    (b*H + y, cb, x)."""
    if L["keep"]["dat_reused"]:
        return []
    ncb = -(-L["c"] // ATOM)
    if L.get("nb", 1) > 1:
        return [[(b * L["h"] + y, cb, x) for y in range(L["h"]) for cb in range(ncb)
                 for x in range(L["w"])] for b in range(L["nb"])]
    segs = [[(y, cb, x) for cb in range(ncb) for y in range(y0, y0 + n) for x in range(L["w"])]
            for y0, n in bands(L)]
    done = sum(n for _, n in bands(L))
    rest = [(y, cb, x) for y in range(done, L["h"]) for cb in range(ncb) for x in range(L["w"])]
    return segs + ([rest] if rest else [])


def fetch_order(L):
    """(y, cb, x) of every atom in fetch order (:func:`fetch_segments` joined)."""
    return [a for seg in fetch_segments(L) for a in seg]


def atom(mem, a):
    return int.from_bytes(mem[a % MEM_BYTES:a % MEM_BYTES + ATOM], "little")


def expected_dat(mem, L, depth):
    """[(entry, atom)] in write order (:func:`fetch_order`), in the data-bank ring from
    keep.dat_next; nothing when keep.dat_reused."""
    out = []
    dcap = (L["db"] + 1) * depth
    for y, cb, x in fetch_order(L):
        e = (L["keep"]["dat_next"] + y * L["eps"] + cb * L["w"] + x) % dcap
        out.append((e, atom(mem, _addr(L, y, cb, x))))
    return out


def _addr(L, y, cb, x):
    """Memory address of atom (y, cb, x) of the fetch order (y counts the N cubes' lines)."""
    b, y = divmod(y, L["h"])
    return L["base"] + b * L.get("bs", 0) + cb * L["ss"] + y * L["ls"] + x * ATOM


def dat_addrs(L):
    return [_addr(L, y, cb, x) for y, cb, x in fetch_order(L)]


def written_slices(L, n):
    """(dat_slices, band_cbs, band_end) after ``n`` data atoms of the layer have been written
    (band_end: kept + the end of the band being written, or of the last band)."""
    kept, ncb, w = L["keep"]["dat_kept"], -(-L["c"] // ATOM), L["w"]
    end = kept
    for y0, nb in bands(L):
        end = kept + y0 + nb
        if n < nb * ncb * w:
            return kept + y0, n // (nb * w), end
        n -= nb * ncb * w
    done = sum(nb for _, nb in bands(L))
    return kept + done + n // (ncb * w), ncb if done else 0, end


def expected_wt(mem, cfg, L):
    """The weight entries CDMA writes: (CBUF address, entry) in order; compressed weights
    (``L["dense"]``, hdl/cdma/expand.py) as their uncompressed bytes, zero-filled to a
    multiple of 128 bytes."""
    if L["keep"]["wt_reused"]:
        return []
    base, cap = (L["db"] + 1) * cfg.cbuf_bank_depth, (L["wb"] + 1) * cfg.cbuf_bank_depth
    if "dense" in L:
        d = L["dense"] + bytes(-len(L["dense"]) % 128)      # whole 128-byte pieces, zeros
        return [(base + i % cap, int.from_bytes(d[i * ATOM:(i + 1) * ATOM], "little"))
                for i in range(len(d) // ATOM)]
    n = -(-L["wbytes"] // ATOM)
    return [(base + i % cap, atom(mem, L["wts"] + i * ATOM)) for i in range(n)]


def compressed_layer(rng, cfg, slot):
    """A random layer (:func:`random_layer`) whose weights are compressed (docs/conv.md
    "Compressed weights"): K kernels of BYTE_PER_KERNEL bytes, 0..100 % zeros, stored as
    ``verif.gen.compress.compress_weights`` makes them (their unused rest random in memory),
    the WMB after them, in the 4 KB ``slot`` (0..7) of the memory's upper half; ``surfaces``:
    what the memory must hold."""
    from verif.gen.compress import compress_weights
    L = random_layer(rng, cfg)
    k, bpk = rng.randint(1, 20), rng.randint(1, 150)
    zeros = rng.choice([0.0, 0.5, 0.9, 1.0, rng.random()])
    dense = bytes(0 if rng.random() < zeros else rng.randrange(1, 256) for _ in range(k * bpk))
    cw = compress_weights(dense, [k * bpk])
    nz = cw.group_bytes[0]
    wts = cw.weights[:nz] + bytes(rng.randrange(256) for _ in range(len(cw.weights) - nz))
    wmb = bytearray(cw.wmb)
    for i in range(k * bpk, 8 * len(wmb)):              # bits past the weights: random
        wmb[i // 8] |= rng.randrange(2) << (i % 8)
    base = MEM_BYTES // 2 + 4096 * slot + ATOM * rng.randrange(0, 8)
    wmb_at = base + len(wts) + ATOM * rng.randrange(0, 16)
    L.update(k=k, bpk=bpk, dense=dense, wbytes=len(wts), wts=base, wmb=wmb_at,
             wmb_bytes=len(wmb), surfaces=[(base, wts), (wmb_at, bytes(wmb))])
    return L


# ------------------------------------------------------------------------------------ bench
def memory_port(port, mem, rng, log, *, beat, p_ready, max_latency, p_gap, key="reqs"):
    """Background testbench: MCIF's side of one DmaReadSignature port (in-order responses after
    0..max_latency cycles, random gaps); logs requests (cycle, addr, len) in ``log[key]`` and
    protocol errors in ``log["errors"]``. ``mem``: bytes (wrapping at their length) or a
    SparseMemory; ``beat``: bytes per beat."""
    if isinstance(mem, SparseMemory):
        def word(a):
            return mem.read_word(a, beat)
    else:
        def word(a):
            a %= len(mem)
            return int.from_bytes(mem[a:a + beat], "little")

    async def proc(ctx):
        q = deque()
        cycle = 0
        holding = False
        while True:
            ctx.set(port.req.ready, rng.random() < p_ready)
            rv = holding or (bool(q) and q[0][0] <= cycle and rng.random() >= p_gap)
            ctx.set(port.rsp.valid, rv)
            if rv:
                ctx.set(port.rsp.payload, q[0][1])
            _, _, rq_v, rq_r, addr, length, rs_r = await ctx.tick().sample(
                port.req.valid, port.req.ready, port.req.payload.addr, port.req.payload.len,
                port.rsp.ready)
            holding = rv and not rs_r
            if rv and not rs_r:
                log["errors"].append(f"cycle {cycle}: read data refused (credit rule)")
            if rv and rs_r:
                q.popleft()
            if rq_v and rq_r:
                log[key].append((cycle, addr, length))
                due = cycle + 1 + rng.randrange(0, max_latency + 1)
                if q:
                    due = max(due, q[-1][0])
                for i in range(length + 1):
                    q.append((due + i, word(addr + i * beat)))
            cycle += 1
    return proc


def consumer(wr, rng, p_stall):
    async def proc(ctx):
        while True:
            ctx.set(wr.ready, rng.random() >= p_stall)
            await ctx.tick()
    return proc


def releaser(dut, rng, p_release, chunk):
    """CSC's side of wt_read / wt_released: both keep the previous layer's value in the start
    cycle, 0 from the next one; then now and then CSC reads up to 2 * ``chunk`` more written
    entries and releases up to ``chunk`` read ones."""
    async def proc(ctx):
        released = read = 0
        while True:
            _, _, start, written = await ctx.tick().sample(dut.start, dut.wt_entries)
            if start:
                released = read = 0
            else:
                if rng.random() < p_release and read < written:
                    read = min(written, read + rng.randint(1, 2 * chunk))
                if rng.random() < p_release and released < read:
                    released = min(read, released + rng.randint(1, chunk))
            ctx.set(dut.wt_released, released)
            ctx.set(dut.wt_read, read)
    return proc


def monitor(dut, log):
    """Per-cycle samples (values before each clock edge) of everything the checks need."""
    async def proc(ctx):
        sigs = (dut.busy, dut.start, dut.dat_wr.valid, dut.dat_wr.ready, dut.dat_wr.payload.addr,
                dut.dat_wr.payload.data, dut.wt_wr.valid, dut.wt_wr.ready,
                dut.wt_wr.payload.addr, dut.wt_wr.payload.data, dut.dat_slices, dut.wt_entries,
                dut.wt_released, dut.wt_read, dut.dat_dma.req.valid, dut.dat_dma.req.ready,
                dut.dat_dma.req.payload.len, dut.dat_dma.rsp.valid, dut.dat_dma.rsp.ready,
                dut.wt_dma.req.valid, dut.wt_dma.req.ready, dut.wt_dma.req.payload.len,
                dut.wt_dma.rsp.valid, dut.wt_dma.rsp.ready, dut.band_cbs, dut.band_end,
                dut.dat_done, dut.wt_done)
        async for _, _, *v in ctx.tick().sample(*sigs):
            log["samples"].append(tuple(v))
    return proc


def check_layer(cfg, mem, L, samples, reqs, perf_before, perf_after, weights_first=False):
    """All checks of one layer from the per-cycle samples between its start and its end.
    ``weights_first``: the lines after the band are requested only once kernel group 0's
    weights (BYTE_PER_KERNEL x atomic K bytes, at most WCAP entries and the layer's weights)
    are requested; WT_AHEAD is then not checked (it does not hold while the data waits).
    Returns whether the data waited for the weights at some cycle."""
    want_dat, want_wt = expected_dat(mem, L, cfg.cbuf_bank_depth), expected_wt(mem, cfg, L)
    kept = L["keep"]["dat_kept"]
    compressed = "dense" in L        # the limits hold the expanded entries, not the requests
    n_wt = -(-len(L["dense"]) // 128) * 128 // ATOM if compressed else -(-L["wbytes"] // ATOM)
    wt_kept = n_wt if L["keep"]["wt_reused"] else 0
    cap = (L["wb"] + 1) * cfg.cbuf_bank_depth
    dat, wt = [], []
    wt_req_entries = 0
    # weights first: entries of kernel group 0 the lines after the band wait for
    g0 = 0 if L["keep"]["wt_reused"] else min(-(-L.get("bpk", 1) * cfg.mac_atomic_k // ATOM),
                                               cap, n_wt)
    b = 0 if L["keep"]["dat_reused"] else min(L.get("band", 0), L["h"])
    band_atoms = b * -(-L["c"] // ATOM) * L["w"]
    beat_atoms = cfg.axi_data_bytes // ATOM
    dat_req_atoms, waited = 0, False
    stall = {"dat": 0, "wt": 0}
    lat = {"dat": 0, "wt": 0}
    outs = {"dat": 0, "wt": 0}
    # WT_AHEAD binds while feature data remains: up to the first sample (values before an
    # edge) showing the layer's last slice written (the limit register lags that by one edge)
    final_slices = samples[-1][10]
    data_done = next((t for t, s in enumerate(samples) if t > 0 and s[10] == final_slices),
                     len(samples))
    for t, s in enumerate(samples):
        (busy, start, dv, dr, da, dd, wv, wr, wa, wd, slices, entries, released, read,
         dqv, dqr, dql, dsv, dsr, wqv, wqr, wql, wsv, wsr, band_cbs, b_end, _, _) = s
        if t > 0:       # the counters before this edge reflect the writes taken before it
            assert (slices, band_cbs, b_end) == written_slices(L, len(dat)), (
                t, slices, band_cbs, b_end, len(dat))
            assert entries == wt_kept + len(wt), (t, entries, len(wt))
        if wqv and wqr:
            wt_req_entries += wql + 1
            if t > 1 and not compressed:    # released is this layer's from the cycle after start
                assert wt_req_entries <= released + cap, \
                    f"cycle {t}: weight entry {wt_req_entries - 1} requested, released {released}"
                assert weights_first or t > data_done or wt_req_entries <= read + WT_AHEAD, \
                    f"cycle {t}: weight entry {wt_req_entries - 1} requested, CSC read {read}"
        if weights_first and 0 < b < L["h"] and dat_req_atoms == band_atoms and t > 0:
            waited |= wt_req_entries < g0   # the band is requested, the rest may wait
        if dqv and dqr:
            if weights_first and 0 < b < L["h"] and dat_req_atoms >= band_atoms:
                assert wt_req_entries >= g0, (
                    f"cycle {t}: line after the band requested with {wt_req_entries} of kernel "
                    f"group 0's {g0} weight entries requested")
            dat_req_atoms += (dql + 1) * beat_atoms
        if wv and wr:
            assert t <= 1 or len(wt) < released + cap, "unreleased weight entry overwritten"
            if compressed and t > 1:
                assert weights_first or t > data_done or len(wt) < read + WT_AHEAD, \
                    f"cycle {t}: weight entry {len(wt)} written, CSC read {read}"
            wt.append((wa, wd))
        if dv and dr:
            dat.append((da, dd))
        for name, qv, qr, ql, sv, sr in (("dat", dqv, dqr, dql, dsv, dsr),
                                         ("wt", wqv, wqr, wql, wsv, wsr)):
            if busy and L["perf"]:
                stall[name] += bool(qv and not qr)
                lat[name] += outs[name] != 0
            outs[name] += (ql + 1 if qv and qr else 0) - bool(sv and sr)
    assert dat == want_dat
    assert wt == want_wt
    check_done_pulses(samples, 0, {"dat": (2, 3, 26), "wt": (6, 7, 27)},
                      late=("wt",) if compressed else ())
    assert samples[-1][10] == kept + (0 if L["keep"]["dat_reused"] else L["h"] * L.get("nb", 1))
    assert samples[-1][11] == n_wt
    window = cfg.primary_memif_max_burst * cfg.axi_data_bytes
    # feature requests: the atoms in fetch order, as runs inside burst windows, maximal inside
    # each segment of the order (a band, the line-by-line rest; the walker starts each anew,
    # so a run joins the next segment's only when the timing allows)
    addrs = dat_addrs(L)
    starts, p = set(), 0
    for seg in fetch_segments(L):
        starts.add(p)
        p += len(seg)
    p = 0
    for i, (_, a, n) in enumerate(reqs["dat"]):
        assert addrs[p:p + n + 1] == [a + j * ATOM for j in range(n + 1)], (i, a, n)
        assert a // window == (a + n * ATOM) // window
        p += n + 1
        if i + 1 < len(reqs["dat"]) and p not in starts:
            a2 = reqs["dat"][i + 1][1]
            assert not (a2 == a + (n + 1) * ATOM and a2 // window == a // window), \
                f"request {i} ({a:#x}, {n}) not maximal"
    assert p == len(addrs)
    # weight requests: the stream in order, each inside one burst window (compressed: the
    # compressed stream and the WMB each in order, D_WEIGHT_BYTES and D_WMB_BYTES in all)
    streams = {L["wts"]: L["wts"]}
    if compressed:
        streams[L["wmb"]] = L["wmb"]
    for _, a, n in reqs["wt"]:
        first = max(b for b in streams if b <= a)
        assert a == streams[first] and n < cfg.primary_memif_max_burst
        assert a // window == (a + n * ATOM) // window
        streams[first] += (n + 1) * ATOM
    if compressed:
        assert streams == {L["wts"]: L["wts"] + L["wbytes"], L["wmb"]: L["wmb"] + L["wmb_bytes"]}
    else:
        assert streams[L["wts"]] == L["wts"] + len(want_wt) * ATOM
    if L["perf"]:
        assert perf_after == (stall["dat"], stall["wt"], lat["dat"], lat["wt"])
    else:
        assert perf_after == perf_before
    return waited


def check_done_pulses(samples, busy, cols, late=()):
    """CDMA_DAT / CDMA_WT done (``dat_done``/``wt_done``, GLB's interrupts) in one layer's
    per-cycle ``samples`` (sample 0: the start cycle): one pulse each, in the cycle after the
    fetch's last CBUF write was taken (the cycle after start when there is none), no later than
    the first cycle ``busy`` is low. ``cols``: fetch name -> sample columns (write valid, write
    ready, done). Fetches in ``late`` (compressed weights: the unused rest of the compressed
    and WMB bytes is taken after the last write) pulse once between the two."""
    end = next(t for t, s in enumerate(samples) if t > 0 and not s[busy])
    for name, (valid, ready, done) in cols.items():
        pulses = [t for t, s in enumerate(samples) if s[done]]
        writes = [t for t, s in enumerate(samples) if s[valid] and s[ready]]
        want = writes[-1] + 1 if writes else 1
        if name in late:
            assert len(pulses) == 1 and want <= pulses[0] <= end, (name, pulses, want, end)
        else:
            assert pulses == [want] and want <= end, (name, pulses, want, end)


def read_perf(ctx, dut):
    hw = dut.hw
    return (ctx.get(hw.d_perf_dat_read_stall.dat_rd_stall),
            ctx.get(hw.d_perf_wt_read_stall.wt_rd_stall),
            ctx.get(hw.d_perf_dat_read_latency.dat_rd_latency),
            ctx.get(hw.d_perf_wt_read_latency.wt_rd_latency))


def run_layers(cfg, layers, *, seed, p_ready=0.7, max_latency=20, p_gap=0.2, p_wr_stall=0.3,
               p_release=0.3, chunk=16, weights_first=False):
    rng = random.Random(seed)
    mem = bytearray(rng.randrange(256) for _ in range(MEM_BYTES))
    for L in layers:
        for a, b in L.get("surfaces", ()):
            mem[a:a + len(b)] = b
    mem = bytes(mem)
    dut = Cdma(cfg, weights_first)
    log = {"samples": [], "errors": [], "dat_reqs": [], "wt_reqs": [], "waited": 0}

    async def bench(ctx):
        for L in layers:
            set_layer(ctx, dut, L)
            for _ in range(rng.randint(0, 3)):
                await ctx.tick()
            perf_before = read_perf(ctx, dut)
            t0 = len(log["samples"])
            r0 = {k: len(log[k + "_reqs"]) for k in ("dat", "wt")}
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            n = 0
            while ctx.get(dut.busy):
                await ctx.tick()
                n += 1
                assert n < 200_000, "CDMA hangs"
            await ctx.tick()
            assert ctx.get(dut.hw.s_cbuf_flush_status.flush_done) == 1
            assert ctx.get(dut.hw.d_nan_input_data_num.nan_data_num) == 0
            reqs = {k: log[k + "_reqs"][r0[k]:] for k in ("dat", "wt")}
            log["waited"] += check_layer(cfg, mem, L, log["samples"][t0:], reqs, perf_before,
                                         read_perf(ctx, dut), weights_first)
        assert not log["errors"], log["errors"][:3]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for name, port in (("dat", dut.dat_dma), ("wt", dut.wt_dma)):
        sim.add_testbench(memory_port(port, mem, rng, log, key=name + "_reqs", beat=ATOM,
                                      p_ready=p_ready,
                                      max_latency=max_latency, p_gap=p_gap), background=True)
    sim.add_testbench(consumer(dut.dat_wr, rng, p_wr_stall), background=True)
    sim.add_testbench(consumer(dut.wt_wr, rng, p_wr_stall), background=True)
    sim.add_testbench(releaser(dut, rng, p_release, chunk), background=True)
    sim.add_process(monitor(dut, log))
    for name, s in (("dat_req", dut.dat_dma.req), ("wt_req", dut.wt_dma.req),
                    ("dat_wr", dut.dat_wr), ("wt_wr", dut.wt_wr)):
        sim.add_process(check_stream_stable(s, name=name))
    sim.add_testbench(bench)
    sim.run()
    return log


# ------------------------------------------------------------------------------------ tests
CONFIGS = ["nv_small+cbuf_bank_depth=128", "nv_small+cbuf_bank_depth=128+primary_memif_max_burst=4"]


@pytest.mark.parametrize("spec", CONFIGS)
def test_cdma_random_layers(spec):
    """Several random layers back to back: entries, counters, requests, perf counters."""
    cfg = get_config(spec)
    rng = random.Random(spec)
    layers = [random_layer(rng, cfg) for _ in range(6)]
    run_layers(cfg, layers, seed=len(spec))


@pytest.mark.parametrize("weights_first", [False, True])
@pytest.mark.parametrize("spec", CONFIGS)
def test_cdma_first_band(spec, weights_first):
    """The first ``band_lines`` lines surface by surface (band_cbs counts their surfaces,
    dat_slices jumps by the band at its end), then line by line or (``band_step``) in
    further bands surface by surface (band_end moving on with each);
    bands longer than the cube, with kept slices and a data ring that wraps."""
    cfg = get_config(spec)
    rng = random.Random("band" + spec)
    layers = []
    for i in range(8):
        L = random_layer(rng, cfg, reuse=i % 2 == 1)
        L["band"] = rng.randint(1, L["h"] + 2)
        L["step"] = 0 if i < 2 else rng.randint(1, L["h"] + 1)
        layers.append(L)
    run_layers(cfg, layers, seed=7, weights_first=weights_first)


@pytest.mark.parametrize("spec", CONFIGS)
def test_cdma_weights_first(spec):
    """``weights_first`` (hdl.conv.weights_first: wide geometries): after the band, the lines
    wait until kernel group 0's weight entries are written (bands shorter than the cube, group 0
    smaller and larger than the ring, slowly released); every entry still right, and the data
    did wait in some layer (the rule was exercised)."""
    cfg = get_config(spec)
    rng = random.Random("wf" + spec)
    layers = []
    while len(layers) < 6:
        L = random_layer(rng, cfg, big_weights=len(layers) % 3 == 2)
        if L["h"] < 2 or L["wbytes"] < 64:
            continue
        L["band"] = rng.randint(1, L["h"] - 1)
        L["step"] = rng.choice([0, rng.randint(1, L["h"])])
        layers.append(L)
    log = run_layers(cfg, layers, seed=9, p_release=0.1, chunk=8, weights_first=True)
    assert log["waited"] > 0


def test_cdma_reuse_keep():
    """CDMA's ``keep`` input (hdl.cbuf.keep): kept slices counted in dat_slices from the cycle
    after start, fetched slices in the data-bank ring from dat_next (wrapping), no data fetch
    with dat_reused, no weight fetch (and wt_entries at once) with wt_reused."""
    cfg = get_config(CONFIGS[1])
    rng = random.Random("reuse")
    layers = [random_layer(rng, cfg, reuse=True) for _ in range(8)]
    run_layers(cfg, layers, seed=8)


@pytest.mark.parametrize("spec", CONFIGS)
def test_cdma_weight_ring_slow_release(spec):
    """Weights of two to three times the ring, released slowly in small chunks: no request
    beyond wt_released + WCAP, no unreleased entry overwritten, all entries right."""
    cfg = get_config(spec)
    rng = random.Random(spec + "ring")
    layers = [random_layer(rng, cfg, big_weights=True) for _ in range(2)]
    run_layers(cfg, layers, seed=7, p_release=0.05, chunk=5, p_ready=0.9, max_latency=8)


def test_cdma_fast_memory_no_stalls():
    """Everything always ready: same checks (timing corner: requests every cycle)."""
    cfg = get_config("nv_small+cbuf_bank_depth=128+primary_memif_max_burst=4")
    rng = random.Random(3)
    layers = [random_layer(rng, cfg) for _ in range(3)]
    run_layers(cfg, layers, seed=3, p_ready=1.0, max_latency=0, p_gap=0.0, p_wr_stall=0.0,
               p_release=1.0, chunk=64)


def batch_layer(rng, cfg, nb):
    """A random layer of ``nb`` cubes (D_BATCH_NUMBER.BATCHES = nb - 1) ``bs`` bytes apart:
    gaps between them, or cubes interleaved when the stride is below a cube's span; the data
    banks hold the nb x H slices; no reuse (refused with batches: the model's ConvCore)."""
    while True:
        L = random_layer(rng, cfg)
        span = (-(-L["c"] // ATOM) - 1) * L["ss"] + (L["h"] - 1) * L["ls"] + L["w"] * ATOM
        bs = ATOM * rng.choice([rng.randint(1, 4), -(-span // ATOM) + rng.randint(0, 3)])
        if L["base"] + (nb - 1) * bs + span <= MEM_BYTES // 2:
            break
        nb = max(2, nb // 2)
    L.update(nb=nb, bs=bs, band=rng.choice([0, 2]), step=rng.choice([0, 1]))
    L["db"] = -(-nb * L["h"] * L["eps"] // cfg.cbuf_bank_depth) - 1
    return L


@pytest.mark.parametrize("spec", [c + "+batch=True+max_batch=32" for c in CONFIGS])
def test_cdma_batches(spec):
    """Multi-batch layers (docs/conv.md "Multi-batch") between ordinary ones: the N cubes
    fetched one after the other from D_DAIN_ADDR + b x D_BATCH_STRIDE, line by line whatever
    band_lines says, to consecutive slices; dat_slices counting all N x H; the next layer's
    first cube again from its own address (nv_full's geometry: tests/hdl/test_cdma16.py
    ``test_cdma16_geometry_a_batches``)."""
    cfg = get_config(spec)
    rng = random.Random(spec)
    layers = [batch_layer(rng, cfg, nb) for nb in (2, 5, 32, 3)]
    layers.insert(2, random_layer(rng, cfg))
    run_layers(cfg, layers, seed=len(spec))


@pytest.mark.parametrize("spec", [c + "+weight_compression=True" for c in CONFIGS])
def test_cdma_compressed(spec):
    """Compressed weights (docs/conv.md "Compressed weights") between uncompressed layers:
    the compressed stream and the WMB both read in order on the weight client, the
    uncompressed bytes written to the ring, no entry written beyond wt_released + WCAP (slow
    releases) nor, while data remains, beyond wt_read + WT_AHEAD; wt_entries the uncompressed
    entries (nv_full's geometry: tests/hdl/test_cdma16.py)."""
    cfg = get_config(spec)
    rng = random.Random(spec + "wc")
    layers = [compressed_layer(rng, cfg, i) for i in range(6)]
    layers.insert(3, random_layer(rng, cfg))
    run_layers(cfg, layers, seed=11, p_release=0.1, chunk=6)


@pytest.mark.parametrize("spec", ["nv_small_256+mac_atomic_k=16"])
def test_cdma_rejects_excluded_configs(spec):
    """docs/conv.md: cbuf_bank_width == mac_atomic_c >= memory atom, mac_atomic_k ==
    memory_atomic, int8; anything else is NotImplementedError."""
    with pytest.raises(NotImplementedError):
        Cdma(get_config(spec))


def test_cdma_elaborates_nv_small_variants():
    from amaranth.back import rtlil
    for spec in ("nv_small_ew", "nv_small+primary_memif_max_burst=4", "nv_small_256",
                 "nv_medium_512", "nv_large"):
        rtlil.convert(Cdma(get_config(spec)))


def test_weight_walker_limit_and_bursts():
    """WeightWalker alone: runs cut at burst windows and at ``limit``; none while the next
    index is not below the limit; all entries in order."""
    dut = WeightWalker(addr_width=16, atom_bytes=8, atom_elems=8, beat_bytes=8, max_burst=4)
    runs = []

    async def bench(ctx):
        ctx.set(dut.cube.base, 0x1008)
        ctx.set(dut.entries, 23)
        ctx.set(dut.limit, 999)                 # stale value in the start cycle: ignored
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        ctx.set(dut.limit, 6)
        ctx.set(dut.runs.ready, 1)
        for cycle in range(60):
            if cycle == 20:
                ctx.set(dut.limit, 23)
            _, _, v, a, c, last = await ctx.tick().sample(
                dut.runs.valid, dut.runs.payload.addr, dut.runs.payload.count,
                dut.runs.payload.last)
            if v:
                runs.append((cycle, a, c, last))
        assert not ctx.get(dut.busy)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    # entries 0..5 before cycle 20 (window of 4 atoms: 0x1008 is atom 1 of its window)
    assert [(a, c) for t, a, c, _ in runs if t < 20] == [(0x1008, 3), (0x1020, 3)]
    assert [(a, c) for t, a, c, _ in runs if t >= 20] == [
        (0x1038, 1), (0x1040, 4), (0x1060, 4), (0x1080, 4), (0x10a0, 4)]
    assert [last for *_, last in runs] == [0] * 6 + [1]


def test_cdma_input_fetch_rate_dc_32x26x76():
    """Fetch of dc_32x26x76's input (32x26x76, its strides and banks) with an always-ready
    memory answering one beat per cycle and an always-ready CBUF: within 5% of one atom per
    cycle (8,320 atoms)."""
    cfg = get_config("nv_small")
    L = dict(w=32, h=26, c=76, ls=0x100, ss=0x1a00, eps=320, base=0, db=23, wb=5, wbytes=0,
             wts=MEM_BYTES // 2, perf=True, keep=dict(NO_KEEP))
    dut = Cdma(cfg)
    rng = random.Random(0)
    mem = bytes(rng.randrange(256) for _ in range(MEM_BYTES))
    log = {"errors": [], "dat_reqs": [], "wt_reqs": []}
    result = {}

    async def bench(ctx):
        set_layer(ctx, dut, L)
        ctx.set(dut.dat_wr.ready, 1)
        ctx.set(dut.wt_wr.ready, 1)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        cycles = 1
        while ctx.get(dut.busy):
            await ctx.tick()
            cycles += 1
        result["cycles"] = cycles
        assert ctx.get(dut.dat_slices) == 26

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(memory_port(dut.dat_dma, mem, rng, log, key="dat_reqs", beat=ATOM,
                                  p_ready=1.0,
                                  max_latency=0, p_gap=0.0), background=True)
    sim.add_testbench(bench)
    sim.run()
    atoms = 32 * 26 * 10
    print(f"dc_32x26x76 input: {atoms} atoms in {result['cycles']} cycles "
          f"({result['cycles'] / atoms:.4f} cycles per atom)")
    assert result["cycles"] <= 1.05 * atoms
