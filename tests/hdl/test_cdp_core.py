"""CDP datapath RTL (hdl.cdp.core) against the numpy model (verif.model.cdp.cdp_compute), with
random stalls, at throughput 1 and 8: LRN windows at channel edges (partial last surface, one
surface, every NORMALZ_LEN), both bypasses, and the LUT's index/interpolation edge cases (START
on a sample, exponential and linear LE, negative INDEX_SELECT, under/overflow slopes with both
shift signs, every priority). Also LrnWindow and Gather on their own against plain-Python
formulas, and the LUT write/read ports."""
import random

import numpy as np
import pytest

from amaranth.hdl import signed

from hdl.cdp.core import CdpCore, Gather, LrnWindow, MAX_HALF
from hdl.cdp.lut import STAT_NAMES
from hdl.config import get_config
from streams import count_per_cycle, simulate_streams, stream_get, stream_put
from test_cdp_walker import pieces
from verif.model.cdp import cdp_compute
from verif.model.lut import LutParams

CONFIGS = ["nv_small", "nv_small+cdp_throughput=8",
           # groups of 4 positions (CdpWalker order with bursts of 4 atoms)
           "nv_small+primary_memif_max_burst=4", "nv_small+primary_memif_max_burst=4+cdp_throughput=8"]
MODEL_STATS = ("UFLOW", "OFLOW", "HYBRID", "LE_HIT", "LO_HIT")


def _s(v, bits):
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def random_setting(rng, *, c, normalz_len=None, le_exp=None):
    """One layer's registers (model-side values) chosen to hit LUT edge cases."""
    # sample range: square sums up to 9 * 256**2, x up to +-256
    samples = [0, 1, 2, 100, 5000, 65536, 200000, 589824]
    le_exp = rng.random() < 0.5 if le_exp is None else le_exp
    start = rng.choice(samples + [-3, -300, rng.randrange(-2**21, 2**21),
                                  rng.randrange(-2**37, 2**37)])
    lo_start = rng.choice(samples + [-1, rng.randrange(-2**21, 2**21),
                                     rng.randrange(-2**37, 2**37)])
    p = LutParams(
        le_function=0 if le_exp else 1,
        le_index_offset=rng.choice([0, 1, 3, 7, 12, 20, -1, -5, -64, 40]),
        le_index_select=rng.randrange(-8, 16), lo_index_select=rng.randrange(-8, 14),
        le_start=start, le_end=start + rng.randrange(-100, 2**20),
        lo_start=lo_start, lo_end=lo_start + rng.randrange(-100, 2**20),
        le_uflow_scale=rng.randrange(-2**15, 2**15), le_oflow_scale=rng.randrange(-2**15, 2**15),
        le_uflow_shift=rng.randrange(-16, 16), le_oflow_shift=rng.randrange(-16, 16),
        lo_uflow_scale=rng.randrange(-2**15, 2**15), lo_oflow_scale=rng.randrange(-2**15, 2**15),
        lo_uflow_shift=rng.randrange(-16, 16), lo_oflow_shift=rng.randrange(-16, 16),
        uflow_priority=rng.randrange(2), oflow_priority=rng.randrange(2),
        hybrid_priority=rng.randrange(2))
    return dict(
        c=c, p=p,
        le=[rng.randrange(-2**15, 2**15) for _ in range(65)],
        lo=[rng.randrange(-2**15, 2**15) for _ in range(257)],
        normalz_len=rng.randrange(4) if normalz_len is None else normalz_len,
        sqsum_bypass=rng.random() < 0.2, mul_bypass=rng.random() < 0.2,
        datin=(rng.randrange(1 << 16), rng.choice([1, 1, 3, -2, 200, rng.randrange(1 << 16)]),
               rng.choice([0, 0, 1, 4, 24, 25, 31])),
        datout=(rng.choice([0, rng.randrange(1 << 32)]),
                rng.choice([1, -1, rng.randrange(1 << 16)]),
                rng.choice([0, 5, 9, 16, 30, 41, 42, 63])))


def realistic_setting(rng, *, c, normalz_len, le_exp):
    """Registers programmed as NVIDIA's traces do (tables spanning the square-sum range, output
    shift bringing f * x into int8), so that every LUT category and most int8 outputs occur;
    LUT starts and slopes still random around the sample range."""
    st = random_setting(rng, c=c, normalz_len=normalz_len, le_exp=le_exp)
    le_sel, lo_sel = rng.randrange(5, 12), rng.randrange(6, 11)
    le_start = rng.choice([0, -5, rng.randrange(-2000, 30000)])
    lo_start = rng.choice([0, -1, rng.randrange(-2000, 60000)])
    st["p"] = LutParams(
        le_function=0 if le_exp else 1, le_index_offset=rng.randrange(-3, 12),
        le_index_select=le_sel, lo_index_select=lo_sel,
        le_start=le_start, le_end=le_start + (1 << (le_sel + 6)) + rng.randrange(-5, 5),
        lo_start=lo_start, lo_end=lo_start + (1 << (lo_sel + 8)),
        le_uflow_scale=rng.randrange(-300, 300), le_oflow_scale=rng.randrange(-300, 300),
        le_uflow_shift=rng.randrange(-3, 12), le_oflow_shift=rng.randrange(-3, 12),
        lo_uflow_scale=rng.randrange(-300, 300), lo_oflow_scale=rng.randrange(-300, 300),
        lo_uflow_shift=rng.randrange(-3, 12), lo_oflow_shift=rng.randrange(-3, 12),
        uflow_priority=rng.randrange(2), oflow_priority=rng.randrange(2),
        hybrid_priority=rng.randrange(2))
    st.update(sqsum_bypass=rng.random() < 0.15, mul_bypass=rng.random() < 0.15,
              datin=(rng.choice([0, 3, 0xFFFE]), rng.choice([1, 1, 2, -1]), rng.choice([0, 0, 1])),
              datout=(rng.choice([0, 0, 1000, -50000 & 0xFFFFFFFF]), rng.choice([1, 1, 3, -2]),
                      rng.randrange(9, 17)))
    return st


def rtl_params(st, shape=(1, 1)):
    """CdpCore params of setting ``st`` for a cube of ``shape`` (h, w)."""
    p = st["p"]
    lut = {k: getattr(p, k) for k in (
        "le_index_offset", "le_start", "le_end", "lo_start", "lo_end", "le_uflow_scale",
        "le_oflow_scale", "le_uflow_shift", "le_oflow_shift", "lo_uflow_scale", "lo_oflow_scale",
        "lo_uflow_shift", "lo_oflow_shift", "uflow_priority", "oflow_priority",
        "hybrid_priority", "le_index_select", "lo_index_select")}
    lut["le_exp"] = int(p.le_function == 0)
    gb, gls = st.get("group", (0, 0))
    return {"channel": st["c"] - 1, "width": shape[1] - 1, "height": shape[0] - 1,
            "group": {"base": gb, "line_stride": gls},
            "datin_offset": _s(st["datin"][0], 16), "datin_scale": _s(st["datin"][1], 16),
            "datin_shifter": st["datin"][2],
            "datout_offset": _s(st["datout"][0], 32), "datout_scale": _s(st["datout"][1], 16),
            "datout_shifter": st["datout"][2], "normalz_len": st["normalz_len"],
            "sqsum_bypass": int(st["sqsum_bypass"]), "mul_bypass": int(st["mul_bypass"]),
            "lut": lut}


async def write_luts(ctx, dut, st):
    """Write setting ``st``'s LE and LO tables (``st["le"]``, ``st["lo"]``) through a CDP core's
    LUT port, then read entries back (the first, the last, and two outside: entry 0)."""
    for tid, table in ((0, st["le"]), (1, st["lo"])):
        for a, v in enumerate(table):
            ctx.set(dut.lut_table, tid)
            ctx.set(dut.lut_addr, a)
            ctx.set(dut.lut_wdata, v & 0xFFFF)
            ctx.set(dut.lut_we, 1)
            await ctx.tick()
        ctx.set(dut.lut_we, 0)
        for a in (0, len(table) - 1, len(table), 1023):
            ctx.set(dut.lut_addr, a)
            await ctx.delay(1e-9)
            want = table[a] if a < len(table) else table[0]
            assert ctx.get(dut.lut_rdata) == want & 0xFFFF


def walker_order(shape, group, atom_bytes, positions, lanes):
    """(y, x, s) of the atoms of a (Cp, H, W) cube of ``lanes`` channels per atom in CdpWalker
    order, plain Python: per line, groups of positions w0..w0+n-1 with n = min(P - (line
    address / atom + w0) mod P, positions left), each surface by surface, then the group's
    positions (``group`` = (base, line stride))."""
    cp, h, w = shape
    out = []
    for y in range(h):
        gline = (group[0] + y * group[1]) // atom_bytes
        w0 = 0
        while w0 < w:
            n = min(positions - (gline + w0) % positions, w - w0)
            out += [(y, x, s) for s in range(cp // lanes) for x in range(w0, w0 + n)]
            w0 += n
    return out


def to_atom16(elems):
    """16-bit values (int16 or fp16 patterns) as atom_layout's signed bytes (element k in bytes
    2k, 2k+1, little-endian: format.rst)."""
    raw = b"".join((int(v) & 0xFFFF).to_bytes(2, "little") for v in elems)
    return [b - 256 if b > 127 else b for b in raw]


def run_core(spec, layers, *, p_in, p_out, seed):
    """layers: [(setting, d (Cp, H, W) int array)]. Returns [(atoms out, stats)] per layer."""
    cfg = get_config(spec)
    dut = CdpCore(cfg)
    rng = random.Random(seed)
    A = cfg.memory_atomic
    results, counts = [], [0] * 5

    P = dut.positions

    def atoms_of(d, st):
        """d's atoms in CdpWalker order, grouped by st["group"] (base, line stride)."""
        cp, h, w = d.shape
        gb, gls = st.get("group", (0, 0))
        cube = dict(width=w - 1, height=h - 1, channel=cp - 1)
        return [[int(v) for v in d[s * A:(s + 1) * A, y, x]]
                for y, w0, n, s in pieces(cube, dict(base=gb, line_stride=gls), cfg.atom_bytes, P)
                for x in range(w0, w0 + n)]

    async def producer(ctx):
        for k, (st, d) in enumerate(layers):
            while len(results) < k:
                await ctx.tick()
            ctx.set(dut.p, rtl_params(st, d.shape[1:]))
            await write_luts(ctx, dut, st)
            await stream_put(ctx, dut.i, atoms_of(d, st), rng=rng, p_stall=p_in)

    async def consumer(ctx):
        for st, d in layers:
            n = d.size // A
            got = await stream_get(ctx, dut.o, n, rng=rng, p_stall=p_out, timeout=40 * n + 2000)
            await ctx.tick().repeat(12)
            results.append(([list(a) for a in got], list(counts)))
            counts[:] = [0] * 5

    simulate_streams(dut, [producer], [consumer], [("i", dut.i), ("o", dut.o)],
                     [count_per_cycle([dut.stat_counts[i] for i in range(5)], counts)])
    return results, atoms_of


def model_out(st, d):
    out, stats = cdp_compute(d, st["c"], np.array(st["le"]), np.array(st["lo"]), st["p"],
                             st["normalz_len"], st["sqsum_bypass"], st["mul_bypass"],
                             st["datin"], st["datout"])
    return out, [stats[k] for k in MODEL_STATS]


def random_layer(rng, A, st, h, w):
    cp = -(-st["c"] // A) * A
    d = np.array([[[rng.randrange(-128, 128) for _ in range(w)] for _ in range(h)]
                  for _ in range(cp)], np.int64)
    return d


@pytest.mark.parametrize("spec", CONFIGS)
@pytest.mark.parametrize("seed", [1, 2])
def test_core_matches_model(spec, seed):
    rng = random.Random(seed)
    A = get_config(spec).memory_atomic
    # channel edges: one partial surface, one channel, a partial last surface, whole surfaces
    shapes = [(3, 1, 1), (1, 2, 1), (21, 1, 2), (16, 2, 1), (13, 1, 1), (24, 1, 1),
              (17, 2, 2), (32, 1, 2), (5, 2, 1), (30, 1, 2)]
    if get_config(spec).primary_memif_max_burst > 1:
        # lines of several groups (burst-window groups of 1..4 positions, any alignment)
        shapes += [(12, 2, 5), (9, 2, 3), (1, 1, 6)]
    layers = []
    for k, (c, h, w) in enumerate(shapes):
        gen = random_setting if k < 4 else realistic_setting      # edge cases, then trace-like
        st = gen(rng, c=c, normalz_len=k % 4, le_exp=bool(k % 2))
        st["group"] = (rng.randrange(0, 4096, 8), rng.randrange(0, 4096, 8))
        layers.append((st, random_layer(rng, A, st, h, w)))
    results, atoms_of = run_core(spec, layers, p_in=0.3, p_out=0.3, seed=seed)
    for (st, d), (got, counts) in zip(layers, results):
        want, want_stats = model_out(st, d)
        assert got == atoms_of(want, st), st
        assert counts == want_stats, st


@pytest.mark.parametrize("spec", CONFIGS)
def test_core_lrn_identity_lut(spec):
    """A LUT that returns its input's square sum rounded (linear LO, LE unused): output = the
    square sum itself, checked against a plain-Python LRN formula at every channel edge."""
    rng = random.Random(7)
    layers = []
    for n_len in range(4):
        c = 19
        st = random_setting(rng, c=c, normalz_len=n_len)
        # LE underflows always (START[21:0] = 2**21-1 above every sample); LO: START -1,
        # select 0: index = sqsum + 1, a hit with T[i] = i - 1, fraction 0
        st["p"] = LutParams(1, 0, 0, 0, (1 << 21) - 1, (1 << 21) + 63, -1, 255, 0, 0, 0, 0, 0,
                            0, 0, 0, 0, 0, 0)
        st["lo"] = [i - 1 for i in range(257)]
        st.update(sqsum_bypass=False, mul_bypass=True, datin=(0, 1, 0), datout=(0, 1, 0))
        d = np.array([[[rng.randrange(-3, 4)]] for _ in range(24)], np.int64)
        layers.append((st, d))
    results, atoms_of = run_core(spec, layers, p_in=0.2, p_out=0.2, seed=3)
    for (st, d), (got, _) in zip(layers, results):
        half = st["normalz_len"] + 1
        x = [int(d[c, 0, 0]) if c < st["c"] else 0 for c in range(24)]
        want = [min(127, sum(x[j] ** 2 for j in range(max(0, c - half), min(23, c + half) + 1)))
                for c in range(24)]
        assert [v for a in got for v in a] == want


@pytest.mark.parametrize("lanes,tp,positions", [(8, 1, 1), (8, 2, 1), (8, 8, 1), (4, 1, 1),
                                                 (8, 8, 4), (8, 2, 4), (8, 8, 2), (4, 1, 8)])
def test_window(lanes, tp, positions):
    """LrnWindow vs the formula: taps of channel c are the squares of c-4..c+4 of the same
    position, 0 outside 0..S*lanes-1; input and output in CdpWalker order (groups of 1..P
    positions, surface by surface, then the group's positions), random stalls."""
    rng = random.Random(lanes * 10 + tp + 100 * positions)
    dut = LrnWindow(lanes, tp, positions)
    items, expect = [], []
    for _ in range(14):
        S, n = rng.randrange(1, 4), rng.randrange(1, positions + 1)   # surfaces, positions
        xs = [[rng.randrange(-256, 256) for _ in range(S * lanes)] for _ in range(n)]
        for s in range(S):
            for j in range(n):
                atom = xs[j][s * lanes:(s + 1) * lanes]
                items.append({"x": atom, "sq": [v * v for v in atom], "first": int(s == 0),
                              "last": int(s == S - 1), "slot": j, "gend": int(j == n - 1)})
                for k in range(lanes // tp):
                    chunk_x, chunk_t = [], []
                    for ln in range(tp):
                        c = s * lanes + k * tp + ln
                        chunk_x.append(xs[j][c])
                        chunk_t.append([xs[j][c + t] ** 2 if 0 <= c + t < S * lanes else 0
                                        for t in range(-MAX_HALF, MAX_HALF + 1)])
                    expect.append((chunk_x, chunk_t))
    got = []
    rng2 = random.Random(5)

    async def prod(ctx):
        await stream_put(ctx, dut.i, items, rng=rng2, p_stall=0.4)

    async def cons(ctx):
        got.extend(await stream_get(ctx, dut.o, len(expect), rng=rng2, p_stall=0.4))

    simulate_streams(dut, [prod], [cons], [("o", dut.o)])
    assert [(list(g.x), [list(t) for t in g.taps]) for g in got] == expect


@pytest.mark.parametrize("positions", [1, 4])
def test_window_full_rate(positions):
    """At tp == lanes with no stalls, one atom per cycle: groups of 4 positions x 3 surfaces
    back to back (the drain of a group's last surface overlaps the next group's surface 0)."""
    lanes, S = 8, 3
    dut = LrnWindow(lanes, lanes, positions)
    items = [{"x": [1] * lanes, "sq": [1] * lanes, "first": int(s == 0), "last": int(s == S - 1),
              "slot": j, "gend": int(j == positions - 1)}
             for _ in range(5) for s in range(S) for j in range(positions)]
    stamps = []
    rng = random.Random(1)

    async def prod(ctx):
        await stream_put(ctx, dut.i, items, rng=rng, p_stall=0)

    async def cons(ctx):
        await stream_get(ctx, dut.o, len(items), rng=rng, p_stall=0, timestamps=stamps)

    simulate_streams(dut, [prod], [cons], [("o", dut.o)])
    assert stamps[-1] - stamps[0] == len(items) - 1


@pytest.mark.parametrize("lanes,tp", [(8, 1), (8, 4), (8, 8)])
def test_gather(lanes, tp):
    rng = random.Random(tp)
    dut = Gather(signed(8), lanes, tp)
    atoms = [[rng.randrange(-128, 128) for _ in range(lanes)] for _ in range(20)]
    parts = [a[k * tp:(k + 1) * tp] for a in atoms for k in range(lanes // tp)]
    got = []

    async def prod(ctx):
        await stream_put(ctx, dut.i, parts, rng=rng, p_stall=0.4)

    async def cons(ctx):
        got.extend(await stream_get(ctx, dut.o, len(atoms), rng=rng, p_stall=0.4))

    simulate_streams(dut, [prod], [cons], [("o", dut.o)])
    assert [list(g) for g in got] == atoms


def test_stat_names_order():
    assert STAT_NAMES == tuple(k.lower() for k in MODEL_STATS)
