"""CDP INT16 datapath RTL (hdl.cdp.core.CdpCore at INT16) against the numpy model
(verif.model.cdp.cdp_compute with prec=1, bit-exact with NVIDIA's nv_full RTL on INT16 CDP
outputs), in Amaranth's simulator with random input and output stalls.

Random int16 cubes (the extremes -32768 / 32767 included), channels not a multiple of the 16
lanes (the lanes past C hold junk the core must zero), every NORMALZ_LEN, both bypasses;
exponential and linear LE tables; INDEX_SELECT over its 7-bit range (values a 6-bit field
cannot hold: -64, -33, 32, 63), LE_INDEX_OFFSET up to 127 (2**OFFSET beyond the 39-bit MIN);
START/END anywhere in their 38 bits (bits above INT8's START[21:0] set, both signs); slopes
with both shift signs; the input converter at shifts 0..31 with full 16-bit offsets and scales
(saturating x to 17 bits), the output converter with full 32-bit offsets and shifts up to 63
(49, 50: the last one before the 50-bit product gives 0, and 0). Every output element and the
five LUT counters are compared, and the layers together reach every LUT category and both
output saturation bounds (nv_full's geometry). Geometries (16 INT16 lanes): nv_full (8
elements per cycle, groups of 2 positions); 1 element per cycle with one position per group
(256-bit beats); 2 per cycle with groups of up to 8 positions (bursts of 4 beats); the slow
sweep runs more layers and seeds on all three."""
from __future__ import annotations

import random

import numpy as np
import pytest

from hdl.cdp.core import INT16, CdpCore
from hdl.config import get_config
from streams import as_bits, count_per_cycle, simulate_streams, stream_get, stream_put
from test_cdp_core import rtl_params, to_atom16, walker_order, write_luts
from verif.model.cdp import cdp_compute
from verif.model.lut import LutParams

STATS = ("UFLOW", "OFLOW", "HYBRID", "LE_HIT", "LO_HIT")          # hdl.cdp.lut.STAT_NAMES order
LANES = 16


def _s(v, bits):
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _lut_params(rng, *, le_exp, lg, wild):
    """LutParams around sums of squares near 2**lg: tame (tables across the samples) or wild
    (any 7-bit select, any offset, START/END anywhere in 38 bits)."""
    def start():
        return rng.choice((0, -1, rng.randrange(-2 ** 37, 2 ** 37),
                           rng.randrange(1 << 22, 1 << 37),           # above START[21:0]
                           -rng.randrange(1 << 22, 1 << 37),
                           rng.randrange(-(1 << max(lg - 2, 1)), 1 << max(lg - 1, 1))))
    if wild:
        le_sel, lo_sel = rng.choice((-64, -33, 32, 63, rng.randrange(-64, 64))), \
            rng.choice((-64, -40, 40, 63, rng.randrange(-64, 64)))
        le_off = rng.choice((rng.randrange(-128, 128), 127, 38, 39, -128))
        le_start, lo_start = start(), start()
        le_end = le_start + rng.randrange(-2 ** 30, 2 ** 36)
        lo_end = lo_start + rng.randrange(-2 ** 30, 2 ** 36)
    else:
        le_sel, lo_sel = max(lg - 6 + rng.randint(-2, 2), -8), max(lg - 8 + rng.randint(-2, 2), -8)
        le_off = rng.choice((lg - 40 + rng.randint(-3, 3), rng.randint(-3, 12), lg - 20))
        le_start = rng.choice((0, -5, rng.randrange(-(1 << lg) // 4, (1 << lg) // 2)))
        lo_start = rng.choice((0, -1, rng.randrange(-(1 << lg) // 4, (1 << lg) // 2)))
        le_end = le_start + (1 << max(le_sel + 6, 0)) + rng.randrange(-5, 5)
        lo_end = lo_start + (1 << max(lo_sel + 8, 0))
    wrap = lambda v: _s(v, 38)                                     # noqa: E731
    return LutParams(
        le_function=0 if le_exp else 1, le_index_offset=_s(le_off, 8),
        le_index_select=le_sel, lo_index_select=lo_sel,
        le_start=wrap(le_start), le_end=wrap(le_end), lo_start=wrap(lo_start), lo_end=wrap(lo_end),
        le_uflow_scale=rng.randrange(-2 ** 15, 2 ** 15),
        le_oflow_scale=rng.randrange(-2 ** 15, 2 ** 15),
        le_uflow_shift=rng.randrange(-16, 16), le_oflow_shift=rng.randrange(-16, 16),
        lo_uflow_scale=rng.randrange(-2 ** 15, 2 ** 15),
        lo_oflow_scale=rng.randrange(-2 ** 15, 2 ** 15),
        lo_uflow_shift=rng.randrange(-16, 16), lo_oflow_shift=rng.randrange(-16, 16),
        uflow_priority=rng.randrange(2), oflow_priority=rng.randrange(2),
        hybrid_priority=rng.randrange(2))


def random_setting(rng, *, c, normalz_len, le_exp, kind):
    """One layer's registers (model-side values). ``kind``: "tame" (data of a few bits to full
    range, the input converter mostly passing it, tables across the square sums, the output
    shift bringing f * x into int16: most outputs unsaturated) or "wild" (every register
    random over its field, extreme shifts)."""
    wild = kind == "wild"
    bits = rng.choice((3, 8, 12, 16))                  # data magnitude
    if wild:
        datin = (rng.randrange(1 << 16), rng.choice((1, -1, rng.randrange(1 << 16))),
                 rng.choice((0, 0, 1, 15, 16, 31)))
        datout = (rng.randrange(1 << 32), rng.choice((1, -1, -32768, rng.randrange(1 << 16))),
                  rng.choice((0, 5, 17, 33, 49, 50, 63)))
        xb = 17
    else:
        datin = (rng.choice((0, 3, 0xFFFE)), rng.choice((1, 1, 2, -1)), rng.choice((0, 0, 1)))
        datout = (rng.choice((0, 0, 1000, -50000 & 0xFFFFFFFF)), rng.choice((1, 1, 3, -2)),
                  rng.randrange(bits, bits + 12))
        xb = bits + 1
    lg = min(2 * xb + 3, 37)                           # log2 of the largest square sums
    if rng.random() < 0.3:
        lg = max(lg - rng.randint(2, 8), 2)
    p = _lut_params(rng, le_exp=le_exp, lg=lg, wild=wild)
    kind_tab = rng.randrange(3)
    if kind_tab == 0:
        le = [rng.randrange(-2 ** 15, 2 ** 15) for _ in range(65)]
        lo = [rng.randrange(-2 ** 15, 2 ** 15) for _ in range(257)]
    else:
        top = rng.randrange(1, 2 ** 15)
        le = [int(top / (1 + i / rng.randint(1, 64))) for i in range(65)]
        lo = [int(top / (1 + i / 40)) - (i % 7) for i in range(257)]
    return dict(c=c, p=p, le=le, lo=lo, bits=bits, normalz_len=normalz_len,
                sqsum_bypass=rng.random() < 0.2, mul_bypass=rng.random() < 0.2,
                datin=datin, datout=datout)


def random_cube(rng, st, h, w):
    """int16 data (Cp, H, W), Cp = C rounded up to 16 lanes, the extremes sometimes."""
    cp = -(-st["c"] // LANES) * LANES
    lim = 1 << (st["bits"] - 1)

    def one():
        if rng.random() < 0.05:
            return rng.choice((-32768, 32767, -1, 0))
        return rng.randrange(-lim, lim)
    return np.array([[[one() for _ in range(w)] for _ in range(h)] for _ in range(cp)], np.int64)


def run_core(spec, layers, *, p_in, p_out, seed):
    """layers: [(setting, d)]. Returns ([output atoms as lists of 16 int16], [5 LUT counts])
    per layer, and the atom order function."""
    cfg = get_config(spec)
    dut = CdpCore(cfg, INT16)
    assert dut.lanes == LANES
    rng = random.Random(seed)
    results, counts = [], [0] * 5

    def atoms_of(d, st):
        order = walker_order(d.shape, st["group"], cfg.atom_bytes, dut.positions, LANES)
        return [[int(v) for v in d[s * LANES:(s + 1) * LANES, y, x]] for y, x, s in order]

    async def producer(ctx):
        for k, (st, d) in enumerate(layers):
            while len(results) < k:
                await ctx.tick()
            ctx.set(dut.p, rtl_params(st, d.shape[1:]))
            await write_luts(ctx, dut, st)
            await stream_put(ctx, dut.i, [to_atom16(a) for a in atoms_of(d, st)], rng=rng,
                             p_stall=p_in)

    async def consumer(ctx):
        for st, d in layers:
            n = d.size // LANES
            got = await stream_get(ctx, dut.o, n, rng=rng, p_stall=p_out, timeout=60 * n + 2000)
            await ctx.tick().repeat(4)
            atoms = [[_s(as_bits(a) >> (16 * k), 16) for k in range(LANES)] for a in got]
            results.append((atoms, list(counts)))
            counts[:] = [0] * 5

    simulate_streams(dut, [producer], [consumer], [("i", dut.i), ("o", dut.o)],
                     [count_per_cycle([dut.stat_counts[i] for i in range(5)], counts)])
    return results, atoms_of


def model_out(st, d):
    out, stats = cdp_compute(d, st["c"], np.array(st["le"], np.int64), np.array(st["lo"], np.int64),
                             st["p"], st["normalz_len"], st["sqsum_bypass"], st["mul_bypass"],
                             st["datin"], st["datout"], prec=1)
    return out, [stats[k] for k in STATS]


def check_layers(spec, shapes, *, seed):
    rng = random.Random(seed)
    layers = []
    for k, (c, h, w) in enumerate(shapes):
        st = random_setting(rng, c=c, normalz_len=k % 4, le_exp=bool(k % 3 != 1),
                            kind=("tame", "wild", "tame")[k % 3])
        st["group"] = (rng.randrange(0, 4096, 32), rng.randrange(0, 4096, 32))
        layers.append((st, random_cube(rng, st, h, w)))
    results, atoms_of = run_core(spec, layers, p_in=0.3, p_out=0.3, seed=seed)
    seen = dict.fromkeys(STATS + ("SAT_HI", "SAT_LO", "INSIDE"), 0)
    for (st, d), (got, counts) in zip(layers, results):
        want, want_stats = model_out(st, d)
        want_atoms = atoms_of(want, st)
        assert len(got) == len(want_atoms)
        for j, (g, w_) in enumerate(zip(got, want_atoms)):
            assert g == w_, (j, g, w_, st)
        assert counts == want_stats, (counts, want_stats, st)
        for k, v in zip(STATS, want_stats):
            seen[k] += v
        seen["SAT_HI"] += int((want == 32767).sum())
        seen["SAT_LO"] += int((want == -32768).sum())
        seen["INSIDE"] += int(((want > -32768) & (want < 32767) & (want != 0)).sum())
    return seen


# (C, H, W): partial last surfaces, one channel, whole surfaces, several positions
SHAPES = [(20, 2, 3), (1, 1, 2), (33, 1, 2), (16, 2, 1), (7, 1, 3), (40, 1, 2), (13, 2, 2),
          (5, 1, 1), (26, 2, 1), (16, 1, 3), (47, 1, 2), (3, 3, 2)]


# the model's linear fraction mask ``(1 << select) - 1`` wraps int64 at INDEX_SELECT 63 (numpy
# warns; the value, all ones, is still right: the fraction is 0)
MODEL_WRAP = pytest.mark.filterwarnings(
    "ignore:overflow encountered in scalar subtract:RuntimeWarning")


@MODEL_WRAP
def test_core_matches_model():
    """nv_full's geometry (16 lanes, 8 elements per cycle, groups of 2 positions)."""
    seen = check_layers("nv_full", SHAPES, seed=6)
    # the comparison covers every table outcome and both saturation bounds
    assert all(v > 0 for v in seen.values()), seen


@MODEL_WRAP
@pytest.mark.parametrize("spec", ["nv_full+cdp_throughput=1+primary_memif_width=256",
                                  "nv_full+cdp_throughput=2+primary_memif_max_burst=4"])
def test_core_geometries(spec):
    """1 element per cycle with one position per group (256-bit beats), and 2 per cycle with
    groups of up to 8 positions (bursts of 4 beats): a few layers each."""
    seen = check_layers(spec, [(20, 1, 2), (3, 2, 1), (33, 1, 1), (16, 1, 2), (9, 1, 5)], seed=2)
    assert seen["INSIDE"] > 0


@pytest.mark.slow
@MODEL_WRAP
@pytest.mark.parametrize("spec", ["nv_full", "nv_full+cdp_throughput=1+primary_memif_width=256",
                                  "nv_full+cdp_throughput=2+primary_memif_max_burst=4"])
@pytest.mark.parametrize("seed", [3, 4])
def test_core_sweep(spec, seed):
    shapes = SHAPES + [(29, 2, 5), (9, 1, 6), (64, 1, 2)]
    seen = check_layers(spec, shapes, seed=seed)
    assert seen["INSIDE"] > 0, seen
