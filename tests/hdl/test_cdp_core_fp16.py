"""CDP FP16 datapath RTL (hdl.cdp.core_fp16) against the numpy model
(verif.model.cdp.cdp_compute_fp16, settled bit-exact on NVIDIA's nv_full RTL), in Amaranth's
simulator with random input and output stalls:
random cubes of fp16 data (NaN, +-Inf, denormals, +-0, values that saturate), channels not a
multiple of 16, every NORMALZ_LEN, both bypasses, NAN_TO_ZERO, exponential and linear LE
tables, wide INDEX_SELECT / LE_INDEX_OFFSET values, random tables and slope scales with special
values ("nasty" layers: NaN-dense data, tables of a few special values with equal neighbours,
so that NaN choice and zero signs, i.e. operand order, matter); every output element, the five
LUT counters (with the phantom hybrids) and the saturation count compared, and the layers
together reach every LUT category, saturated and NaN outputs. Geometries (16 fp16 lanes
each): nv_full (8 elements per cycle, groups of 2 positions), nv_full with 1 element per cycle
and one position per group (256-bit beats) and with 2 elements per cycle and groups of up to 8
positions (bursts of 4 beats), so every CdpWalker order. Also the core's own combinational
pieces (the exact square, fp16 -> fp32, the table index) against the model's formulas."""
from __future__ import annotations

import random
import struct

import numpy as np
import pytest
from amaranth.hdl import Cat

from hdl.cdp.core_fp16 import CdpFp16Core, fp16_to_fp32, fp17_square, fp_table_index
from hdl.config import get_config
from streams import as_bits, count_per_cycle, simulate_streams, stream_get, stream_put
from test_cdp_core import to_atom16, walker_order, write_luts
from test_lib_fp import evaluate
from verif.model import fp
from verif.model.cdp import _fp_table_index, cdp_compute_fp16
from verif.model.lut import LutParams

CONFIGS = ["nv_full", "nv_full+cdp_throughput=1+primary_memif_width=256",
           "nv_full+cdp_throughput=2+primary_memif_max_burst=4"]
STATS = ("UFLOW", "OFLOW", "HYBRID", "LE_HIT", "LO_HIT")          # hdl.cdp.lut.STAT_NAMES order
SPECIALS16 = (0x7C00, 0xFC00, 0x7E01, 0xFD55, 0x7C01, 0x0001, 0x83FF, 0x0200, 0x8000, 0x0000,
              0x7BFF, 0xFBFF, 0x7800)


def f16(x: float) -> int:
    return struct.unpack("<H", struct.pack("<e", x))[0]


def f32(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


# ---- the combinational pieces ----------------------------------------------------------------

def test_fp17_square():
    """fp17_square == fp32_mul(fp17_to_fp32(x), same) for random and special fp17 patterns
    (every exponent, zeros, NaNs, the unused infinity and exponent-0 patterns)."""
    rng = random.Random(1)
    xs = [(s << 16) | (e << 10) | m for s in (0, 1) for e in (0, 1, 31, 62, 63)
          for m in (0, 1, 0x3FF)]
    xs += [rng.getrandbits(17) for _ in range(1500)]
    got = evaluate(lambda m, a, b: fp17_square(m, a), [(x, 0) for x in xs], 17, 32)
    x32 = fp.fp17_to_fp32(np.array(xs, np.int64))
    want = fp.fp_mul(x32, x32, 8, 23)
    assert [hex(v) for v in got] == [hex(int(v)) for v in want]


def test_fp16_to_fp32():
    rng = random.Random(2)
    xs = list(SPECIALS16) + [rng.getrandbits(16) for _ in range(1500)]
    got = evaluate(lambda m, a, b: fp16_to_fp32(m, a[:16]), [(x, 0) for x in xs], 16, 32)
    assert got == [int(v) for v in fp.fp16_to_fp32(np.array(xs, np.int64))]


def _random_d(rng, n):
    """fp32 patterns of ``s - START``: near 1 in wide and narrow spreads, zeros, NaNs, the
    exponent-255 number, denormal patterns."""
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.05:
            out.append(rng.choice((0, 1 << 31, 0x7FC00001, 0xFF800123, 0x7F800000, 0x00000123,
                                   0x3F800000, 0x42800000, 0x43800000)))
        else:
            e = min(max(127 + rng.randint(-1, 1) * rng.choice((2, 10, 40, 130)) +
                        rng.randint(-3, 3), 0), 255)
            out.append((int(rng.random() < 0.15) << 31) | (e << 23) | rng.getrandbits(23))
    return out


@pytest.mark.parametrize("entries", [65, 257])
def test_fp_table_index(entries):
    """fp_table_index against the model's _fp_table_index: linear with INDEX_SELECT over its
    whole 8-bit range, and (LE) exponential with LE_INDEX_OFFSET over its range."""
    rng = random.Random(entries)
    cases = []                                     # (d, select, offset, exponential)
    for _ in range(60):
        sel = rng.choice((rng.randint(-128, 127), rng.randint(-8, 8)))
        off = rng.choice((rng.randint(-128, 127), rng.randint(-20, 10), -128, -127))
        expo = entries == 65 and rng.random() < 0.5
        cases += [(d, sel, off, expo) for d in _random_d(rng, 25)]

    def build(m, a, b):
        ix = fp_table_index(m, a, entries, select=b[:8].as_signed(),
                            exponential=b[16] if entries == 65 else None,
                            index_offset=b[8:16].as_signed())
        return Cat(ix["addr"].as_unsigned()[:9], ix["frac"], ix["uf"], ix["of"])
    vec = [(d, (sel & 0xFF) | ((off & 0xFF) << 8) | (int(ex) << 16)) for d, sel, off, ex in cases]
    got = evaluate(build, vec, 32, 27)
    for (d, sel, off, ex), g in zip(cases, got):
        idx, frac, uf, of = (int(np.asarray(v)) for v in
                             _fp_table_index(np.array(d, np.int64), entries, ex, off, sel))
        addr = 0 if uf else entries - 1 if of else idx
        want = addr | (frac << 9) | (uf << 25) | (of << 26)
        assert g == want, (hex(d), sel, off, ex, hex(g), hex(want))


# ---- the core ----------------------------------------------------------------------------------

#: fp16 NaNs of both signs and several payloads, +-Inf, +-0, denormals, the largest values
NASTY16 = (0x7C01, 0x7E01, 0xFD55, 0xFFFF, 0x7FFF, 0xFC02, 0x7C00, 0xFC00, 0x0000, 0x8000,
           0x0001, 0x8001, 0x03FF, 0x7BFF, 0xFBFF, 0x3C00, 0xBC00)


def random_setting(rng, *, c, normalz_len, le_exp, kind):
    """One layer's registers around a data scale (sums of squares near 2**lg). ``kind``:
    "tame" (tables and slopes of ordinary values, LE_INDEX_OFFSET / INDEX_SELECTs placing the
    samples across the tables' ends), "wild" (any INDEX_SELECT / LE_INDEX_OFFSET, special
    entries and scales) or "nasty" (entries and scales from a handful of special values: equal
    neighbours, zeros of both signs, NaNs, infinities; with NaN-dense data)."""
    scale = rng.choice((-6, -2, 0, 3, 6))
    lg = 2 * scale + rng.randint(-2, 4)
    wild = kind == "wild"
    s8 = lambda v: max(-128, min(127, v))                          # noqa: E731

    def start():
        return rng.choice((0, 0, f32(rng.uniform(-1, 1) * 2.0 ** lg), 0x00000010, 0x80000000,
                           f32(rng.uniform(0, 1) * 2.0 ** (lg - 4)), f32(2.0 ** (lg - 2)),
                           f32(rng.uniform(1, 8) * 2.0 ** lg)))

    def end():
        return rng.choice((f32(rng.uniform(0, 2) * 2.0 ** lg), f32(rng.uniform(0, 2) * 2.0 ** lg),
                           0x7F800000 if wild else 0, f32(-(2.0 ** lg))))

    def scale16():
        if kind == "nasty":
            return rng.choice(NASTY16)
        return rng.choice((f16(rng.uniform(-1, 1)), f16(rng.uniform(-4, 4) * 2.0 ** -8),
                           rng.choice(SPECIALS16) if wild else f16(0.5)))
    p = LutParams(
        le_function=0 if le_exp else 1,
        le_index_offset=rng.randint(-128, 127) if wild else rng.choice(
            (s8(lg + rng.randint(-12, 2)), s8(lg + rng.randint(-40, -20)), -128, -127)),
        le_index_select=rng.randint(-128, 127) if wild else s8(lg - 6 + rng.randint(-3, 3)),
        lo_index_select=rng.randint(-128, 127) if wild else s8(lg - 8 + rng.randint(-3, 3)),
        le_start=start(), le_end=end(), lo_start=start(), lo_end=end(),
        le_uflow_scale=scale16(), le_oflow_scale=scale16(), le_uflow_shift=0, le_oflow_shift=0,
        lo_uflow_scale=scale16(), lo_oflow_scale=scale16(), lo_uflow_shift=0, lo_oflow_shift=0,
        uflow_priority=rng.randint(0, 1), oflow_priority=rng.randint(0, 1),
        hybrid_priority=rng.randint(0, 1))
    if kind == "nasty":
        few = rng.sample(NASTY16, 4)
        le = [rng.choice(few) for _ in range(65)]
        lo = [rng.choice(few) for _ in range(257)]
    else:
        top, a = 2.0 ** rng.randint(-3, 3), 2.0 ** rng.randint(-5, 1)
        p_special = 0.05 if wild else 0.01
        le = [rng.choice(SPECIALS16) if rng.random() < p_special else
              f16(top * (1 + a * i) ** -0.75) for i in range(65)]
        lo = [rng.choice(SPECIALS16) if rng.random() < p_special else f16(rng.uniform(-3, 3))
              for _ in range(257)]
    return dict(c=c, p=p, le=le, lo=lo, scale=scale, kind=kind, normalz_len=normalz_len,
                sqsum_bypass=rng.random() < 0.2, mul_bypass=rng.random() < 0.25,
                nan_to_zero=rng.random() < (0.25 if kind == "nasty" else 0.5))


def random_cube(rng, st, h, w):
    """fp16 patterns (Cp, H, W), Cp = C rounded up to 16; the lanes past C hold junk (the core
    must zero them). Specials: 7% of the elements, 40% in "nasty" layers."""
    cp = -(-st["c"] // 16) * 16
    sc = st["scale"]
    p_special, specials = (0.4, NASTY16) if st["kind"] == "nasty" else (0.07, SPECIALS16)

    def one():
        r = rng.random()
        if r < p_special:
            return rng.choice(specials)
        if r < p_special + 0.03:
            return f16(rng.uniform(-1, 1) * 2.0 ** rng.randint(6, 15))     # large: saturation
        return f16(rng.uniform(-2, 2) * 2.0 ** (sc + rng.randint(-3, 2)))
    return np.array([[[one() for _ in range(w)] for _ in range(h)] for _ in range(cp)], np.int64)


def rtl_params(st, shape):
    """CdpFp16Core params of setting ``st`` for a cube of ``shape`` (h, w)."""
    p = st["p"]
    lutp = {"le_exp": int(p.le_function == 0), "le_index_offset": p.le_index_offset,
            "le_index_select": p.le_index_select, "lo_index_select": p.lo_index_select,
            "uflow_priority": p.uflow_priority, "oflow_priority": p.oflow_priority,
            "hybrid_priority": p.hybrid_priority}
    for k in ("le_start", "le_end", "lo_start", "lo_end"):
        lutp[k] = getattr(p, k) & 0xFFFFFFFF
    for k in ("le_uflow_scale", "le_oflow_scale", "lo_uflow_scale", "lo_oflow_scale"):
        lutp[k] = getattr(p, k) & 0xFFFF
    gb, gls = st["group"]
    return {"channel": st["c"] - 1, "width": shape[1] - 1, "height": shape[0] - 1,
            "group": {"base": gb, "line_stride": gls}, "normalz_len": st["normalz_len"],
            "sqsum_bypass": int(st["sqsum_bypass"]), "mul_bypass": int(st["mul_bypass"]),
            "nan_to_zero": int(st["nan_to_zero"]), "lut": lutp}


def run_core(spec, layers, *, p_in, p_out, seed):
    """layers: [(setting, d)]. Returns [(output atoms as lists of 16 patterns, [5 LUT counts,
    saturation count])] per layer."""
    cfg = get_config(spec)
    dut = CdpFp16Core(cfg)
    assert dut.lanes == 16
    rng = random.Random(seed)
    results, counts = [], [0] * 6

    def atoms_of(d, st):
        order = walker_order(d.shape, st["group"], cfg.atom_bytes, dut.positions, 16)
        return [[int(v) for v in d[s * 16:(s + 1) * 16, y, x]] for y, x, s in order]

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
            n = d.size // 16
            got = await stream_get(ctx, dut.o, n, rng=rng, p_stall=p_out, timeout=60 * n + 2000)
            await ctx.tick().repeat(4)
            atoms = [[(as_bits(a) >> (16 * k)) & 0xFFFF for k in range(16)] for a in got]
            results.append((atoms, list(counts)))
            counts[:] = [0] * 6

    simulate_streams(dut, [producer], [consumer], [("i", dut.i), ("o", dut.o)],
                     [count_per_cycle([dut.stat_counts[i] for i in range(5)] + [dut.sat_count], counts)])
    return results, atoms_of


def model_out(st, d):
    out, stats = cdp_compute_fp16(d, st["c"], np.array(st["le"], np.int64),
                                  np.array(st["lo"], np.int64), st["p"], st["normalz_len"],
                                  st["sqsum_bypass"], st["mul_bypass"], st["nan_to_zero"])
    return out, [stats[k] for k in STATS] + [stats["OUT_SATURATION"]]


@pytest.mark.parametrize("spec", CONFIGS)
def test_core_matches_model(spec):
    rng = random.Random(sum(map(ord, spec)))
    tp = get_config(spec).cdp_throughput
    # (C, H, W): one partial surface, one channel, partial last surfaces, whole surfaces
    shapes = [(20, 2, 3), (1, 1, 2), (33, 1, 2), (16, 2, 1), (7, 1, 3), (40, 1, 2), (32, 1, 1),
              (13, 2, 2), (5, 1, 1), (18, 1, 3), (26, 2, 1), (16, 1, 4)]
    if tp > 1:
        shapes += [(47, 2, 3), (29, 1, 5), (3, 3, 2)]
    layers = []
    for k, (c, h, w) in enumerate(shapes):
        st = random_setting(rng, c=c, normalz_len=k % 4, le_exp=bool(k % 3 != 1),
                            kind=("tame", "nasty", "wild", "nasty")[k % 4])
        st["group"] = (rng.randrange(0, 4096, 32), rng.randrange(0, 4096, 32))
        layers.append((st, random_cube(rng, st, h, w)))
    results, atoms_of = run_core(spec, layers, p_in=0.3, p_out=0.3, seed=1)
    seen = dict.fromkeys(STATS + ("OUT_SATURATION", "NAN_OUT"), 0)
    for (st, d), (got, counts) in zip(layers, results):
        want, want_stats = model_out(st, d)
        want_atoms = atoms_of(want, st)
        for j, (g, w_) in enumerate(zip(got, want_atoms)):
            assert g == w_, (j, [hex(v) for v in g], [hex(v) for v in w_], st)
        assert len(got) == len(want_atoms)
        assert counts == want_stats, (counts, want_stats, st)
        for k, v in zip(STATS + ("OUT_SATURATION",), want_stats):
            seen[k] += v - (d.size if k == "HYBRID" else 0)
        seen["NAN_OUT"] += int(fp.fp16_isnan(want).sum())
    # the comparison covers every table outcome, saturated and NaN outputs
    assert all(v > 0 for v in seen.values()), seen
