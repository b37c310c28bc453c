"""What CBUF keeps across convolution layers (hdl.cbuf.keep.CbufKeep; docs/conv.md "Data and
weight reuse across layers"): random sequences of layers with random reuse / release bits, banks
and heights, against the plain-Python formula :func:`hdl.cbuf.keep.keep_reference` and against
the rules written out here (the model's ``ConvCore._data`` / ``_weights`` facts)."""
import random

import pytest
from amaranth.sim import Simulator

from hdl.cbuf import CbufGeometry
from hdl.cbuf.keep import CbufKeep, keep_reference

DEPTH = 16
GEOM = CbufGeometry(8, DEPTH, 8)
FIELDS = {  # CSC cfg view path of each field
    "CONV_MODE": ("d_misc_cfg", "conv_mode"), "DATA_REUSE": ("d_misc_cfg", "data_reuse"),
    "WEIGHT_REUSE": ("d_misc_cfg", "weight_reuse"), "SKIP_DATA_RLS": ("d_misc_cfg", "skip_data_rls"),
    "SKIP_WEIGHT_RLS": ("d_misc_cfg", "skip_weight_rls"),
    "DATAIN_FORMAT": ("d_datain_format", "datain_format"), "DATA_BANK": ("d_bank", "data_bank"),
    "WEIGHT_BANK": ("d_bank", "weight_bank"), "RLS_SLICES": ("d_release", "rls_slices"),
    "DATAIN_HEIGHT_EXT": ("d_datain_size_ext_0", "datain_height_ext"),
    "ENTRIES": ("d_entry_per_slice", "entries"),
}


def rand_layer(rng, pairs=False):
    db = rng.choice([0, 1, 1, 3])
    eps = rng.randint(1, 5)
    prec = rng.choice([0, 1, 1, 2]) if pairs else 0
    units = eps * (2 if prec else 1)
    h = rng.randint(1, (db + 1) * DEPTH // units)          # the input fits the data banks
    return {"PROC_PRECISION": prec, "CONV_MODE": 0, "DATAIN_FORMAT": rng.choice([0, 0, 0, 1]), "DATA_BANK": db,
            "WEIGHT_BANK": rng.choice([0, 2]), "DATA_REUSE": rng.random() < 0.7,
            "WEIGHT_REUSE": rng.random() < 0.5, "SKIP_DATA_RLS": rng.random() < 0.4,
            "SKIP_WEIGHT_RLS": rng.random() < 0.6,
            "RLS_SLICES": rng.choice([0, rng.randint(0, h), h + 3]),
            "DATAIN_HEIGHT_EXT": h - 1, "ENTRIES": eps - 1}


def simulate(layers, gap_rng, geom=GEOM):
    dut = CbufKeep(geom)
    got = []

    async def tb(ctx):
        for L in layers:
            for name, (reg, field) in FIELDS.items():
                ctx.set(getattr(getattr(dut.regs, reg), field), int(L[name]))
            if geom.pairs:
                ctx.set(dut.regs.d_misc_cfg.proc_precision, L["PROC_PRECISION"])
            ctx.set(dut.start, 1)
            got.append({k: ctx.get(getattr(dut.layer, k))
                        for k in ("dat_base", "dat_kept", "dat_next", "dat_reused", "wt_reused")})
            await ctx.tick()
            ctx.set(dut.start, 0)
            for _ in range(gap_rng.randint(0, 3)):      # the outputs hold during the layer
                assert {k: ctx.get(getattr(dut.layer, k)) for k in got[-1]} == got[-1]
                await ctx.tick()
            # the registers may change once the layer has started (next group programmed)
            for name, (reg, field) in FIELDS.items():
                if name in ("DATA_REUSE", "RLS_SLICES", "SKIP_DATA_RLS"):
                    ctx.set(getattr(getattr(dut.regs, reg), field), 0)
            ctx.set(dut.done, 1)
            await ctx.tick()
            ctx.set(dut.done, 0)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return got


@pytest.mark.parametrize("seed", range(4))
def test_keep_matches_reference(seed):
    rng = random.Random(seed)
    layers = [rand_layer(rng) for _ in range(40)]
    assert simulate(layers, rng) == keep_reference(layers, DEPTH)


@pytest.mark.parametrize("seed", range(2))
def test_keep_pairs_16bit_layers(seed):
    """16-bit configurations (docs/conv16.md "CBUF"): addresses count units, an INT16/FP16
    slice step is 2 x EPS units, and a precision change drops the kept slices."""
    rng = random.Random(100 + seed)
    layers = [rand_layer(rng, pairs=True) for _ in range(40)]
    geom = CbufGeometry(8, DEPTH, 8, 1, True)
    got = simulate(layers, rng, geom)
    assert got == keep_reference(layers, DEPTH, pairs=True)
    # the reference itself: a 16-bit layer kept after a same-precision one starts at 2 x EPS x RLS
    a = {"CONV_MODE": 0, "DATAIN_FORMAT": 0, "DATA_BANK": 3, "WEIGHT_BANK": 0, "DATA_REUSE": 0,
         "WEIGHT_REUSE": 0, "SKIP_DATA_RLS": 0, "SKIP_WEIGHT_RLS": 0, "RLS_SLICES": 1,
         "DATAIN_HEIGHT_EXT": 4, "ENTRIES": 2, "PROC_PRECISION": 1}
    b = dict(a, DATA_REUSE=1)
    assert keep_reference([a, b], DEPTH, pairs=True)[1]["dat_base"] == 2 * 3 * 2
    assert keep_reference([a, dict(b, PROC_PRECISION=2)], DEPTH, pairs=True)[1]["dat_kept"] == 0


def test_keep_rules_by_hand():
    """The rules themselves, on hand-picked layers (EPS 3, 2 data banks = 32 entries)."""
    base = {"CONV_MODE": 0, "DATAIN_FORMAT": 0, "DATA_BANK": 1, "WEIGHT_BANK": 0,
            "DATA_REUSE": 0, "WEIGHT_REUSE": 0, "SKIP_DATA_RLS": 0, "SKIP_WEIGHT_RLS": 0,
            "RLS_SLICES": 0, "DATAIN_HEIGHT_EXT": 9, "ENTRIES": 2}
    L = [dict(base, SKIP_DATA_RLS=1, SKIP_WEIGHT_RLS=1),        # 10 slices at 0, all kept
         dict(base, DATA_REUSE=1, WEIGHT_REUSE=1, RLS_SLICES=5),  # full reuse; keeps 4 from 18
         dict(base, DATA_REUSE=1, DATAIN_HEIGHT_EXT=7),       # 4 kept at 18 + 4 fetched at 30
         dict(base, DATA_REUSE=1, WEIGHT_REUSE=1),            # kept 7 from (18+3) % 32 = 21
         dict(base, DATA_BANK=0, DATA_REUSE=1, WEIGHT_REUSE=1, DATAIN_HEIGHT_EXT=4)]  # other banks
    exp = [dict(dat_base=0, dat_kept=0, dat_next=0, dat_reused=0, wt_reused=0),
           dict(dat_base=0, dat_kept=10, dat_next=30, dat_reused=1, wt_reused=1),
           dict(dat_base=18, dat_kept=4, dat_next=30, dat_reused=0, wt_reused=0),
           dict(dat_base=21, dat_kept=7, dat_next=(21 + 21) % 32, dat_reused=0, wt_reused=0),
           dict(dat_base=0, dat_kept=0, dat_next=0, dat_reused=0, wt_reused=0)]
    assert keep_reference(L, DEPTH) == exp
    assert simulate(L, random.Random(0)) == exp
