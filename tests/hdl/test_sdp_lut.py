"""SDP LUT functions (hdl.sdp.lut: index, interpolation, table choice, statistics) in Amaranth's
simulator against the numpy model's ``sdp_lut`` (verif/model/sdp.py) and plain-Python formulas:
random tables and registers, and the edge cases (x == START underflows, x one above START hits
entry 0 exactly, samples exactly on an entry, the last entry / overflow boundary, exponential
underflow below 2**LE_INDEX_OFFSET, LE vs LO priorities in every hit/miss combination,
negative slope shifts, saturation)."""
import random

import numpy as np
import pytest
from amaranth.hdl import Array, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from hdl.sdp import lut
from verif.model.lut import LutParams
from verif.model.sdp import sdp_lut


class LutHarness(wiring.Component):
    """Combinational LUT of fixed tables: x, p -> y, stat (5 bits), use_lo."""

    def __init__(self, le_table, lo_table):
        self.le_table, self.lo_table = le_table, lo_table
        super().__init__({"x": In(signed(32)), "p": In(lut.params_layout()),
                          "y": Out(signed(32)), "stat": Out(5), "use_lo": Out(1)})

    def elaborate(self, platform):
        m = Module()
        p, x = self.p, self.x
        le = Signal(lut.index_layout(lut.LE_ENTRIES))
        lo = Signal(lut.index_layout(lut.LO_ENTRIES))
        le_d = lut.table_index(m, x, p.le_start, lut.LE_ENTRIES, p.le_index_select,
                               exponential=p.le_exp, index_offset=p.le_index_offset)
        lo_d = lut.table_index(m, x, p.lo_start, lut.LO_ENTRIES, p.lo_index_select)
        m.d.comb += [le[k].eq(v) for k, v in le_d.items()]
        m.d.comb += [lo[k].eq(v) for k, v in lo_d.items()]
        ys = {}
        for name, idx, table in (("le", le, self.le_table), ("lo", lo, self.lo_table)):
            n = len(table)
            arr = Array(Const(v, signed(16)) for v in table)
            y0 = arr[idx.addr]
            a1 = Signal(range(n), name=f"{name}_next")
            m.d.comb += a1.eq(Mux(idx.addr == n - 1, n - 1, idx.addr + 1))
            y1 = arr[a1]
            if name == "le":
                bias = Signal(signed(34))
                off = p.le_index_offset
                with m.If(p.le_exp & (off >= 0) & (off < 32)):
                    m.d.comb += bias.eq((Const(1, 33) << off.as_unsigned()[:5])[:32].as_signed())
                umin = p.le_start + bias
            else:
                umin = p.lo_start
            ys[name] = lut.table_output(x, idx, y0, y1, umin, getattr(p, f"{name}_end"),
                                        getattr(p, f"{name}_uflow_scale"),
                                        getattr(p, f"{name}_uflow_shift"),
                                        getattr(p, f"{name}_oflow_scale"),
                                        getattr(p, f"{name}_oflow_shift"))
        use_lo, stat = lut.select(le, lo, p)
        m.d.comb += [self.y.eq(Mux(use_lo, ys["lo"], ys["le"])), self.stat.eq(stat),
                     self.use_lo.eq(use_lo)]
        return m


def _run(le_table, lo_table, params: LutParams, xs):
    dut = LutHarness(le_table, lo_table)
    out = []

    async def bench(ctx):
        for name in ("le_index_offset", "le_index_select", "lo_index_select", "le_start", "le_end",
                     "lo_start", "lo_end", "le_uflow_scale", "le_oflow_scale", "le_uflow_shift",
                     "le_oflow_shift", "lo_uflow_scale", "lo_oflow_scale", "lo_uflow_shift",
                     "lo_oflow_shift", "uflow_priority", "oflow_priority", "hybrid_priority"):
            ctx.set(getattr(dut.p, name), getattr(params, name))
        ctx.set(dut.p.le_exp, int(params.le_function == 0))
        for x in xs:
            ctx.set(dut.x, x)
            out.append((ctx.get(dut.y), ctx.get(dut.stat)))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    return out


def _check(le_table, lo_table, params, xs):
    got = _run(le_table, lo_table, params, xs)
    want, _ = sdp_lut(np.array(xs, np.int64), np.array(le_table, np.int64),
                      np.array(lo_table, np.int64), params)
    for x, (gy, gs), wy in zip(xs, got, want):
        _, st = sdp_lut(np.array([x], np.int64), np.array(le_table, np.int64),
                        np.array(lo_table, np.int64), params)
        ws = sum(st[k.upper()] << i for i, k in enumerate(lut.STAT_NAMES))
        assert (gy, gs) == (int(wy), ws), (x, params)
    return got


def _params(**kw):
    base = dict(le_function=1, le_index_offset=0, le_index_select=0, lo_index_select=0,
                le_start=0, le_end=64, lo_start=0, lo_end=256, le_uflow_scale=1, le_oflow_scale=1,
                le_uflow_shift=0, le_oflow_shift=0, lo_uflow_scale=1, lo_oflow_scale=1,
                lo_uflow_shift=0, lo_oflow_shift=0, uflow_priority=0, oflow_priority=0,
                hybrid_priority=0)
    base.update(kw)
    return LutParams(**base)


RNG = random.Random(11)
LE_T = [RNG.randrange(-(1 << 15), 1 << 15) for _ in range(lut.LE_ENTRIES)]
LO_T = [RNG.randrange(-(1 << 15), 1 << 15) for _ in range(lut.LO_ENTRIES)]


def test_linear_edges_plain_formulas():
    """LE linear, START 100, SELECT 2 (4 inputs per entry): plain-Python expectations."""
    p = _params(le_start=100, le_end=100 + 4 * 64, le_index_select=2, lo_start=1 << 30,
                lo_end=(1 << 30) + 256, le_uflow_scale=3, le_uflow_shift=1, le_oflow_scale=-5,
                le_oflow_shift=-2)
    xs = [100, 99, 104, 108, 105, 106, 107, 100 + 4 * 63, 100 + 4 * 64, 100 + 4 * 64 + 9]
    got = [y for y, _ in _check(LE_T, LO_T, p, xs)]

    def rnd(v, s):      # round half away from zero
        q = abs(v) + (1 << (s - 1)) >> s if s else abs(v)
        return q if v >= 0 else -q
    # x <= START underflows: T[0] + rnd((x - START) * 3 >> 1)
    assert got[0] == LE_T[0] and got[1] == LE_T[0] + rnd(-3, 1)
    # exactly on entries 1 and 2 (fraction 0)
    assert got[2] == LE_T[1] and got[3] == LE_T[2]
    # between entries 1 and 2: quarter steps, rounded half away from zero
    for k in (1, 2, 3):
        assert got[3 + k] == rnd(LE_T[1] * (4 - k) + LE_T[2] * k, 2)
    # index 63 = entries-2 hits; index 64 = entries-1 overflows: T[64] + (x - END) * -5 << 2
    assert got[7] == LE_T[63]
    assert got[8] == LE_T[64]
    assert got[9] == max(-(1 << 31), LE_T[64] + 9 * -5 * 4)


@pytest.mark.parametrize("prio", range(8))
def test_priorities(prio):
    """Every LE/LO hit/miss combination under every priority setting."""
    u, o, h = prio & 1, prio >> 1 & 1, prio >> 2 & 1
    # LE covers [0, 64), LO covers [32, 32 + 256*4)
    p = _params(le_start=0, le_end=64, lo_start=32, lo_end=32 + 1024, lo_index_select=2,
                uflow_priority=u, oflow_priority=o, hybrid_priority=h, le_uflow_scale=7,
                lo_uflow_scale=-9, le_oflow_scale=11, lo_oflow_scale=13)
    xs = [-5, 0, 10, 32, 33, 40, 63, 64, 100, 32 + 1023, 32 + 1024, 5000]
    _check(LE_T, LO_T, p, xs)
    # and with LO below LE: LE underflows while LO overflows (hybrid case)
    p2 = _params(le_start=1000, le_end=1064, lo_start=0, lo_end=256, uflow_priority=u,
                 oflow_priority=o, hybrid_priority=h)
    _check(LE_T, LO_T, p2, [-1, 0, 1, 255, 256, 300, 1000, 1001, 1063, 1064, 2000])


@pytest.mark.parametrize("offset", [-3, 0, 1, 5, 31, -100])
def test_exponential(offset):
    start = -37
    end = min(start + (1 << max(offset + 64, 0)), (1 << 31) - 1)
    p = _params(le_function=0, le_index_offset=offset, le_start=start, le_end=end,
                lo_start=-(1 << 31), lo_end=-(1 << 31) + 256, le_uflow_scale=-300,
                le_uflow_shift=3, le_oflow_scale=77, le_oflow_shift=-4, hybrid_priority=0)
    xs = [start, start + 1, start + 2, start + 3, start + (1 << max(offset, 0)),
          start + (1 << max(offset, 0)) - 1, start + (3 << max(offset, 0)),
          (1 << 31) - 1, -(1 << 31), 0, 1000, 123456789]
    _check(LE_T, LO_T, p, [max(-(1 << 31), min((1 << 31) - 1, x)) for x in xs])


@pytest.mark.parametrize("seed", range(6))
def test_random_registers(seed):
    rng = random.Random(seed)
    le_t = [rng.choice([-(1 << 15), (1 << 15) - 1, rng.randrange(-(1 << 15), 1 << 15)])
            for _ in range(lut.LE_ENTRIES)]
    lo_t = [rng.randrange(-(1 << 15), 1 << 15) for _ in range(lut.LO_ENTRIES)]

    def s32():
        return rng.choice([rng.randrange(-(1 << 31), 1 << 31), rng.randrange(-1000, 1000)])
    p = _params(le_function=rng.randrange(2), le_index_offset=rng.randrange(-128, 128),
                le_index_select=rng.choice([rng.randrange(-128, 128), rng.randrange(-8, 26)]),
                lo_index_select=rng.choice([rng.randrange(-128, 128), rng.randrange(-8, 24)]),
                le_start=s32(), le_end=s32(), lo_start=s32(), lo_end=s32(),
                **{f"{t}_{f}_scale": rng.randrange(-(1 << 15), 1 << 15)
                   for t in ("le", "lo") for f in ("uflow", "oflow")},
                **{f"{t}_{f}_shift": rng.randrange(-16, 16)
                   for t in ("le", "lo") for f in ("uflow", "oflow")},
                uflow_priority=rng.randrange(2), oflow_priority=rng.randrange(2),
                hybrid_priority=rng.randrange(2))
    xs = [rng.choice([rng.randrange(-(1 << 31), 1 << 31), p.le_start + rng.randrange(-3, 300),
                      p.lo_start + rng.randrange(-3, 3000), -(1 << 31), (1 << 31) - 1])
          for _ in range(60)]
    xs = [max(-(1 << 31), min((1 << 31) - 1, x)) for x in xs]
    _check(le_t, lo_t, p, xs)
