"""SDP Y (EW) sub-unit (hdl.sdp.y.YSubUnit) in Amaranth's simulator with random stalls on both
streams: the operand converters, multiplier (EW_TRUNCATE, PReLU) and ALU (MAX/MIN/SUM/EQL)
against plain-Python formulas, at 1 and 4 elements per item, and the LUT (tables written through
the access port, read back) against the numpy model's ``sdp_lut`` with the statistics counts."""
import random

import numpy as np
import pytest
from amaranth.hdl import ClockDomain, Module, signed
from amaranth.lib import data
from amaranth.sim import Simulator

from hdl.sdp import lut
from hdl.sdp.x import operand_layout
from hdl.sdp.y import YSubUnit
from streams import check_stream_stable, stream_get, stream_put
from verif.model.lut import LutParams
from verif.model.sdp import sdp_lut

I32 = (-(1 << 31), (1 << 31) - 1)


def sat(v, bits=32):
    return max(-(1 << bits - 1), min((1 << bits - 1) - 1, v))


def rnd(v, s, width=64):
    """round half away from zero of v / 2**s (NVIDIA: a shift of the full width or more -> 0)."""
    if s >= width:
        return 0
    if s == 0:
        return v
    q = (abs(v) + (1 << (s - 1))) >> s
    return q if v >= 0 else -q


def operand(raw, oc):
    if not oc["mem"]:
        return oc["operand"]
    if oc["cvt_bypass"]:
        return raw
    return sat(rnd((raw - oc["cvt_offset"]) * oc["cvt_scale"], oc["cvt_truncate"], 49))


def ref(x, raw_alu, raw_mul, c):
    """Plain-Python Y without LUT (verif/model/sdp.py _y_subunit facts)."""
    if c["bypass"]:
        return x
    y = x
    if not c["mul_bypass"]:
        t = sat(rnd(x * operand(raw_mul, c["mul"]), c["truncate"], 64))
        y = x if c["mul_prelu"] and x >= 0 else t
    if not c["alu_bypass"]:
        op = operand(raw_alu, c["alu"])
        y = [max(y, op), min(y, op), sat(y + op), int(y != op)][c["alu_algo"]]
    return y


def layout(lanes):
    return data.StructLayout({"x": data.ArrayLayout(signed(32), lanes),
                              "ew": data.ArrayLayout(operand_layout(), lanes)})


def rand_oc(rng):
    return {"mem": rng.randrange(2), "cvt_bypass": rng.randrange(2),
            "operand": rng.choice([rng.randrange(*I32), rng.randrange(-100, 100), I32[0], I32[1]]),
            "cvt_offset": rng.choice([rng.randrange(*I32), rng.randrange(-50, 50)]),
            "cvt_scale": rng.randrange(-(1 << 15), 1 << 15),
            "cvt_truncate": rng.choice([0, 1, 7, 15, 31, 48, 63])}


def rand_cfg(rng):
    return {"bypass": int(rng.random() < 0.1), "alu_bypass": rng.randrange(2),
            "alu_algo": rng.randrange(4), "mul_bypass": rng.randrange(2),
            "mul_prelu": rng.randrange(2), "lut_bypass": 1,
            "truncate": rng.choice([0, 1, 13, 19, 31, 40, 63, 64, 100, 1023]),
            "alu": rand_oc(rng), "mul": rand_oc(rng)}


def rand_x(rng):
    return rng.choice([rng.randrange(-300, 300), rng.randrange(*I32), I32[0], I32[1], 0, -1])


def _run(dut, layers, lanes, *, p_in, p_out, seed, tables=None, lut_p=None):
    """layers: [(cfg, [(xs, alus, muls)])]; returns [(x lists, stat totals)] per layer."""
    rng = random.Random(seed)
    results = []
    stats = [0] * len(lut.STAT_NAMES)

    async def producer(ctx):
        if tables is not None:
            for tid, table in enumerate(tables):
                for addr, v in enumerate(table):
                    ctx.set(dut.lut_we, 1)
                    ctx.set(dut.lut_table, tid)
                    ctx.set(dut.lut_addr, addr)
                    ctx.set(dut.lut_wdata, v & 0xFFFF)
                    await ctx.tick()
                ctx.set(dut.lut_we, 0)
                for addr in (0, len(table) - 1, 7):          # read back through the access port
                    ctx.set(dut.lut_addr, addr)
                    assert ctx.get(dut.lut_rdata) == table[addr] & 0xFFFF
            for name, v in lut_p.items():
                ctx.set(getattr(dut.lut_p, name), v)
        for k, (c, items) in enumerate(layers):
            while len(results) < k:        # configuration changes only when the unit is empty
                await ctx.tick()
            for name, v in c.items():
                if isinstance(v, dict):
                    for n2, v2 in v.items():
                        ctx.set(getattr(getattr(dut.cfg, name), n2), v2)
                else:
                    ctx.set(getattr(dut.cfg, name), v)
            payloads = [{"x": xs, "ew": [{"alu": a, "mul": mm} for a, mm in zip(al, mu)]}
                        for xs, al, mu in items]
            await stream_put(ctx, dut.i, payloads, rng=rng, p_stall=p_in)

    async def consumer(ctx):
        for c, items in layers:
            got = await stream_get(ctx, dut.o, len(items), rng=rng, p_stall=p_out,
                                   timeout=30 * len(items) + 2000)
            results.append([[int(v) for v in g.x] for g in got])

    async def stat_counter(ctx):
        async for _, _, counts in ctx.tick().sample(dut.stat_counts):
            for j in range(len(stats)):
                stats[j] += int(counts[j])

    # (simulate_streams has no background testbenches: the statistics sampler is one)
    top = Module()
    top.domains.sync = ClockDomain()
    top.submodules.dut = dut
    sim = Simulator(top)
    sim.add_clock(1e-8)
    errors = []
    sim.add_testbench(producer)
    sim.add_testbench(consumer)
    sim.add_testbench(stat_counter, background=True)
    for name, s in (("i", dut.i), ("o", dut.o)):
        sim.add_process(check_stream_stable(s, errors=errors, name=name))
    sim.run()
    assert errors == []
    return results, stats


def _layers(rng, lanes, n_layers, n_items, cfgs=None):
    layers = []
    for k in range(n_layers):
        c = cfgs[k] if cfgs else rand_cfg(rng)
        items = [([rand_x(rng) for _ in range(lanes)],
                  [rng.randrange(-(1 << 15), 1 << 15) for _ in range(lanes)],
                  [rng.randrange(-(1 << 15), 1 << 15) for _ in range(lanes)])
                 for _ in range(n_items)]
        layers.append((c, items))
    return layers


@pytest.mark.parametrize("lanes,p_in,p_out,seed", [(1, 0.3, 0.4, 1), (4, 0.3, 0.4, 2),
                                                   (4, 0.0, 0.6, 3), (1, 0.6, 0.0, 4)])
def test_y_alu_mul_random(lanes, p_in, p_out, seed):
    rng = random.Random(seed)
    layers = _layers(rng, lanes, 12, 10)
    dut = YSubUnit(lanes, layout(lanes), "ew", lut=False)
    results, stats = _run(dut, layers, lanes, p_in=p_in, p_out=p_out, seed=seed)
    for (c, items), got in zip(layers, results):
        want = [[ref(x, a, mm, c) for x, a, mm in zip(*it)] for it in items]
        assert got == want, c
    assert stats == [0] * 5


def test_y_each_feature():
    """Each function alone (formula spot checks with hand-computed values)."""
    base = {"bypass": 0, "alu_bypass": 1, "alu_algo": 2, "mul_bypass": 1, "mul_prelu": 0,
            "lut_bypass": 1, "truncate": 0,
            "alu": {"mem": 0, "cvt_bypass": 1, "operand": 0, "cvt_offset": 0, "cvt_scale": 1,
                    "cvt_truncate": 0},
            "mul": {"mem": 0, "cvt_bypass": 1, "operand": 1, "cvt_offset": 0, "cvt_scale": 1,
                    "cvt_truncate": 0}}
    cases = [
        # (cfg changes, x, raw alu, raw mul, expected)
        ({"alu_bypass": 0, "alu": dict(base["alu"], operand=16)}, 5, 0, 0, 21),     # SUM reg
        ({"alu_bypass": 0, "alu": dict(base["alu"], operand=I32[1])}, 5, 0, 0, I32[1]),  # sat
        ({"alu_bypass": 0, "alu_algo": 3, "alu": dict(base["alu"], operand=5)}, 5, 0, 0, 0),
        ({"alu_bypass": 0, "alu_algo": 3, "alu": dict(base["alu"], operand=5)}, 6, 0, 0, 1),
        ({"alu_bypass": 0, "alu_algo": 0, "alu": dict(base["alu"], mem=1)}, -7, -3, 0, -3),
        ({"alu_bypass": 0, "alu_algo": 1, "alu": dict(base["alu"], mem=1)}, -7, -3, 0, -7),
        # converter: (raw - 10) * 3 >> 2 rounded: (-5 - 10) * 3 = -45 -> -11.25 -> -11
        ({"alu_bypass": 0, "alu": dict(base["alu"], mem=1, cvt_bypass=0, cvt_offset=10,
                                       cvt_scale=3, cvt_truncate=2)}, 100, -5, 0, 89),
        # MUL 19-bit truncate: 3 * 2 >> 1 = 3; -3 * 1 >> 1 = -1.5 -> -2
        ({"mul_bypass": 0, "truncate": 1, "mul": dict(base["mul"], operand=2)}, 3, 0, 0, 3),
        ({"mul_bypass": 0, "truncate": 1}, -3, 0, 0, -2),
        ({"mul_bypass": 0, "truncate": 64, "mul": dict(base["mul"], operand=I32[1])}, I32[1],
         0, 0, 0),
        ({"mul_bypass": 0, "mul": dict(base["mul"], operand=I32[0])}, I32[0], 0, 0, I32[1]),
        ({"mul_bypass": 0, "mul_prelu": 1, "mul": dict(base["mul"], operand=-4)}, 9, 0, 0, 9),
        ({"mul_bypass": 0, "mul_prelu": 1, "mul": dict(base["mul"], operand=-4)}, -9, 0, 0, 36),
        # bypass wins over everything
        ({"bypass": 1, "mul_bypass": 0, "mul": dict(base["mul"], operand=0)}, 77, 0, 0, 77),
    ]
    layers = []
    for change, x, a, mm, want in cases:
        c = dict(base)
        c.update(change)
        layers.append((c, [([x], [a], [mm])]))
        assert ref(x, a, mm, c) == want, (change, x)
    dut = YSubUnit(1, layout(1), "ew", lut=False)
    results, _ = _run(dut, layers, 1, p_in=0.2, p_out=0.2, seed=9)
    assert [r[0][0] for r in results] == [w for *_, w in cases]


@pytest.mark.parametrize("lanes,seed", [(1, 5), (2, 6)])
def test_y_lut_matches_model(lanes, seed):
    """LUT after the ALU: tables through the write port, random registers; outputs and
    statistics against the model's sdp_lut."""
    rng = random.Random(seed)
    le_t = [rng.randrange(-(1 << 15), 1 << 15) for _ in range(lut.LE_ENTRIES)]
    lo_t = [rng.randrange(-(1 << 15), 1 << 15) for _ in range(lut.LO_ENTRIES)]
    p = LutParams(le_function=seed & 1, le_index_offset=-2, le_index_select=4, lo_index_select=6,
                  le_start=-300, le_end=-300 + (1 << 10), lo_start=-2000, lo_end=-2000 + (1 << 14),
                  le_uflow_scale=-77, le_oflow_scale=300, le_uflow_shift=3, le_oflow_shift=-2,
                  lo_uflow_scale=12345, lo_oflow_scale=-2, lo_uflow_shift=15, lo_oflow_shift=0,
                  uflow_priority=1, oflow_priority=0, hybrid_priority=rng.randrange(2))
    lut_p = {n: getattr(p, n) for n in ("le_index_offset", "le_index_select", "lo_index_select",
                                        "le_start", "le_end", "lo_start", "lo_end",
                                        "le_uflow_scale", "le_oflow_scale", "le_uflow_shift",
                                        "le_oflow_shift", "lo_uflow_scale", "lo_oflow_scale",
                                        "lo_uflow_shift", "lo_oflow_shift", "uflow_priority",
                                        "oflow_priority", "hybrid_priority")}
    lut_p["le_exp"] = int(p.le_function == 0)
    c = {"bypass": 0, "alu_bypass": 0, "alu_algo": 2, "mul_bypass": 1, "mul_prelu": 0,
         "lut_bypass": 0, "truncate": 0,
         "alu": {"mem": 1, "cvt_bypass": 1, "operand": 0, "cvt_offset": 0, "cvt_scale": 1,
                 "cvt_truncate": 0},
         "mul": {"mem": 0, "cvt_bypass": 1, "operand": 1, "cvt_offset": 0, "cvt_scale": 1,
                 "cvt_truncate": 0}}
    items = []
    for _ in range(40):
        xs = [rng.choice([rng.randrange(-3000, 16000), rng.randrange(*I32), I32[0], I32[1],
                          -300, -2000, -299]) for _ in range(lanes)]
        items.append((xs, [rng.randrange(-40, 40) for _ in range(lanes)], [0] * lanes))
    dut = YSubUnit(lanes, layout(lanes), "ew", lut=True)
    results, stats = _run(dut, [(c, items)], lanes, p_in=0.3, p_out=0.3, seed=seed,
                          tables=(le_t, lo_t), lut_p=lut_p)
    x = np.array([[sat(v + a) for v, a in zip(xs, al)] for xs, al, _ in items], np.int64)
    want, st = sdp_lut(x, np.array(le_t, np.int64), np.array(lo_t, np.int64), p)
    assert results[0] == want.tolist()
    assert stats == [st[k.upper()] for k in lut.STAT_NAMES]
