"""SDP core RTL (hdl.sdp.core: join with memory operands -> split -> X1 -> X2 -> output converter
-> merge) against the numpy model (verif.model.sdp x_subunit / output_convert), with random
stalls on every stream, at throughput 1 (nv_small) and 8 elements per cycle."""
import random

import numpy as np
import pytest

from amaranth.sim import Simulator

from hdl.config import NV_SMALL
from hdl.sdp.core import SdpCore, core_lanes
from streams import check_stream_stable, stream_get, stream_put
from verif.model.sdp import output_convert, x_subunit   # the numpy model is the reference

NV_SMALL_T8 = NV_SMALL.derive(name="nv_small_t8", sdp_bs_throughput=8, sdp_bn_throughput=8)
CONFIGS = {"t1": NV_SMALL, "t8": NV_SMALL_T8}

X_OFF = {"bypass": 1, "alu_bypass": 1, "alu_algo": 0, "alu_shift": 0, "mul_bypass": 1,
         "mul_prelu": 0, "mul_shift": 0, "relu_bypass": 1}
SEL_REG = {"alu_mem": 0, "mul_mem": 0, "alu": 0, "mul": 0}

# (D_CVT_OFFSET, D_CVT_SCALE, D_CVT_SHIFT): identity, trace-like values, signs, the extremes of
# every field, and shifts around the 49-bit product width
CVT_SETTINGS = [(0, 1, 0), (0x558fbb6e, 0x16cc, 10), (-37, -3, 1), (5, 0x7fff, 12), (0, 1, 50),
                (123, -200, 4), (-(1 << 31), -(1 << 15), 63), (-(1 << 31), -(1 << 15), 20),
                ((1 << 31) - 1, 0x7fff, 0), ((1 << 31) - 1, -(1 << 15), 48), (0, 1, 49)]


def _layer(cvt, bs=X_OFF, bs_sel=SEL_REG, bn=X_OFF, bn_sel=SEL_REG):
    return {"cvt": cvt, "bs": bs, "bs_sel": bs_sel, "bn": bn, "bn_sel": bn_sel}


def _mem_en(c, sel):
    return not c["bypass"] and ((sel["alu_mem"] and not c["alu_bypass"]) or
                                (sel["mul_mem"] and not c["mul_bypass"]))


def _reference(layer, atoms, ops):
    """Model output of one layer: atoms [n][atom] int8, ops[sub] [n][atom] (alu, mul)."""
    x = np.array(atoms, dtype=np.int64)
    for sub in ("bs", "bn"):
        c, sel = layer[sub], layer[f"{sub}_sel"]
        if c["bypass"]:
            continue
        mem = np.array(ops[sub], dtype=np.int64)
        alu = mem[..., 0] if sel["alu_mem"] else sel["alu"]
        mul = mem[..., 1] if sel["mul_mem"] else sel["mul"]
        x = x_subunit(x, alu_bypass=bool(c["alu_bypass"]), alu_algo=c["alu_algo"], alu_op=alu,
                      alu_shift=c["alu_shift"], mul_bypass=bool(c["mul_bypass"]),
                      mul_prelu=bool(c["mul_prelu"]), mul_op=mul, mul_shift=c["mul_shift"],
                      relu_bypass=bool(c["relu_bypass"]))
    off, scale, shift = layer["cvt"]
    return [[int(v) for v in row] for row in output_convert(x, off, scale, shift)]


def _run(cfg, layers, *, n_atoms, p_stall, seed):
    """Run layers through SdpCore(cfg) with random stalls on i, bs_op, bn_op and o; the
    configuration changes between layers when the core is empty. Returns [(want, got, stamps)]."""
    dut = SdpCore(cfg)
    rng = random.Random(seed)
    atom = cfg.memory_atomic
    data = []
    for _ in layers:
        atoms = [[rng.randrange(-128, 128) for _ in range(atom)] for _ in range(n_atoms)]
        ops = {s: [[(rng.randrange(-(1 << 15), 1 << 15), rng.randrange(-(1 << 15), 1 << 15))
                    for _ in range(atom)] for _ in range(n_atoms)] for s in ("bs", "bn")}
        data.append((atoms, ops))
    results, errors = [], []
    configured = []

    async def configure(ctx):
        for k, layer in enumerate(layers):
            while len(results) < k:
                await ctx.tick()
            off, scale, shift = layer["cvt"]
            ctx.set(dut.cvt_offset, off)
            ctx.set(dut.cvt_scale, scale)
            ctx.set(dut.cvt_shift, shift)
            for sub in ("bs", "bn"):
                for name, v in layer[sub].items():
                    ctx.set(getattr(getattr(dut, f"{sub}_cfg"), name), v)
                for name, v in layer[f"{sub}_sel"].items():
                    ctx.set(getattr(getattr(dut, f"{sub}_sel"), name), v)
            await ctx.tick()        # the join's enables are registered (SdpCore's docstring)
            configured.append(k)

    async def wait_configured(ctx, k):
        while len(configured) <= k:
            await ctx.tick()

    async def data_producer(ctx):
        for k, (atoms, _) in enumerate(data):
            await wait_configured(ctx, k)
            await stream_put(ctx, dut.i, atoms, rng=rng, p_stall=p_stall)

    def op_producer(sub):
        async def run(ctx):
            for k, (layer, (_, ops)) in enumerate(zip(layers, data)):
                await wait_configured(ctx, k)
                if not _mem_en(layer[sub], layer[f"{sub}_sel"]):
                    continue
                groups = [[{"alu": a, "mul": mm} for a, mm in g] for g in ops[sub]]
                await stream_put(ctx, getattr(dut, f"{sub}_op"), groups, rng=rng, p_stall=p_stall)
        return run

    async def consumer(ctx):
        for layer, (atoms, ops) in zip(layers, data):
            stamps = []
            got = await stream_get(ctx, dut.o, n_atoms, rng=rng, p_stall=p_stall,
                                   timestamps=stamps, timeout=40 * atom * n_atoms + 200)
            results.append((_reference(layer, atoms, ops), [[int(v) for v in g] for g in got],
                            stamps))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(configure)
    sim.add_testbench(data_producer)
    sim.add_testbench(op_producer("bs"))
    sim.add_testbench(op_producer("bn"))
    sim.add_testbench(consumer)
    for name in ("i", "o", "bs_op", "bn_op"):
        sim.add_process(check_stream_stable(getattr(dut, name), errors=errors, name=name))
    sim.run()
    assert errors == []
    return results


def test_core_lanes():
    assert core_lanes(NV_SMALL) == 1 and core_lanes(NV_SMALL_T8) == 8


@pytest.mark.parametrize("tp", ["t1", "t8"])
def test_core_converter_matches_model(tp):
    layers = [_layer(c) for c in CVT_SETTINGS]
    for want, got, _ in _run(CONFIGS[tp], layers, n_atoms=6, p_stall=0.3, seed=1):
        assert got == want


def _rand_x(rng, allow_prelu=True):
    c = {"bypass": int(rng.random() < 0.15), "alu_bypass": rng.randrange(2),
         "alu_algo": rng.randrange(4), "alu_shift": rng.choice([0, 1, 4, 13, 31, 40, 63]),
         "mul_bypass": rng.randrange(2), "mul_prelu": 0,
         "mul_shift": rng.choice([0, 1, 7, 15, 24, 31, 48, 50]), "relu_bypass": rng.randrange(2)}
    if allow_prelu and c["alu_bypass"] and rng.random() < 0.5:
        c["mul_prelu"] = 1          # programming guide: PReLU needs the ALU bypassed
    return c


def _rand_sel(rng):
    return {"alu_mem": rng.randrange(2), "mul_mem": rng.randrange(2),
            "alu": rng.randrange(-(1 << 15), 1 << 15), "mul": rng.randrange(-(1 << 15), 1 << 15)}


@pytest.mark.parametrize("tp,p_stall,seed", [("t1", 0.3, 2), ("t8", 0.3, 3), ("t8", 0.6, 4),
                                             ("t1", 0.0, 5)])
def test_core_bs_bn_random(tp, p_stall, seed):
    """Random X1/X2 settings with register and memory operands, random converter settings."""
    rng = random.Random(seed)
    layers = [_layer(rng.choice(CVT_SETTINGS[:4] + [(0, 1, 0)] * 3 + [(3, 5, 16), (-9, 1, 24)]),
                     _rand_x(rng), _rand_sel(rng), _rand_x(rng), _rand_sel(rng))
              for _ in range(10)]
    for layer, (want, got, _) in zip(layers, _run(CONFIGS[tp], layers, n_atoms=5,
                                                  p_stall=p_stall, seed=seed)):
        assert got == want, layer


@pytest.mark.parametrize("tp", ["t1", "t8"])
def test_core_full_throughput(tp):
    """No stalls: one atom every atom/lanes cycles, with both X sub-units working."""
    cfg = CONFIGS[tp]
    n = 24
    rng = random.Random(6)
    layer = _layer((0x558fbb6e, 0x16cc, 10), _rand_x(rng) | {"bypass": 0},
                   {"alu_mem": 1, "mul_mem": 1, "alu": 0, "mul": 0},
                   _rand_x(rng) | {"bypass": 0}, _rand_sel(rng))
    (want, got, stamps), = _run(cfg, [layer], n_atoms=n, p_stall=0, seed=6)
    assert got == want
    period = cfg.memory_atomic // core_lanes(cfg)
    assert [b - a for a, b in zip(stamps, stamps[1:])] == [period] * (n - 1)


@pytest.mark.parametrize("tp", ["t1", "t8"])
def test_core_bypassed_subunits_skipped(tp):
    """A bypassed X sub-unit is skipped (issue 36): X1's six stages, X2's six and the skid
    buffer before it; the results are the same, the first atom leaves that much earlier."""
    cfg = CONFIGS[tp]
    rng = random.Random(7)
    on = [_rand_x(rng) | {"bypass": 0}, _rand_x(rng) | {"bypass": 0}]
    off = [c | {"bypass": 1} for c in on]
    first = {}
    for bs_off in (0, 1):
        for bn_off in (0, 1):
            layer = _layer((0, 1, 0), (off if bs_off else on)[0], SEL_REG,
                           (off if bn_off else on)[1], SEL_REG)
            (want, got, stamps), = _run(cfg, [layer], n_atoms=4, p_stall=0, seed=7)
            assert got == want
            first[bs_off, bn_off] = stamps[0]
    assert first[0, 0] - first[1, 0] == 6
    assert first[0, 0] - first[0, 1] == 7
    assert first[0, 0] - first[1, 1] == 13
