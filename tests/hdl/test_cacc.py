# amaranth: UnusedElaboratable=no
"""CACC (hdl/cacc): NVIDIA's output rounding (hand-worked cases and the model's ``cacc_truncate``
for every CLIP_TRUNCATE), the assembly buffer (stripes of 1, 2, 7, stripe_max pixels, several
steps, 34-bit and int32 saturation) with random stalls against plain-Python accumulation, the
layer's ``done``/``busy``/``sat_count``, and one atom per cycle at full rate (docs/conv.md
"CACC")."""
from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth.hdl import Module, Signal, signed
from amaranth.sim import Simulator

from hdl.cacc import Cacc, cacc_round
from hdl.cmac import psum_layout
from hdl.config import NV_SMALL, get_config
from streams import simulate_streams, stream_get, stream_put
from verif.model.conv import cacc_truncate

ACC_MAX, ACC_MIN = (1 << 33) - 1, -(1 << 33)
I32_MAX, I32_MIN = (1 << 31) - 1, -(1 << 31)


def round_ref(acc: int, t: int) -> tuple[int, bool]:
    """Plain-Python CACC output conversion (NVIDIA: guide bit + 15 sticky bits, half away from
    zero, int32 saturation); returns (value, saturated)."""
    if t == 0:
        r = acc
    else:
        fl = acc >> t
        guide = (acc >> (t - 1)) & 1
        lo = max(0, t - 16)
        sticky = (acc >> lo) & ((1 << (t - 1 - lo)) - 1) != 0
        r = fl + (1 if guide and (acc >= 0 or sticky) else 0)
    v = min(max(r, I32_MIN), I32_MAX)
    return v, v != r


# ---------------------------------------------------------------- rounding (combinational)
def _round_sim(cases):
    acc, t = Signal(signed(34)), Signal(5)
    out, sat = Signal(signed(32)), Signal()
    m = Module()
    v, s = cacc_round(acc, t)
    m.d.comb += [out.eq(v), sat.eq(s)]
    got = []

    async def tb(ctx):
        for a, tt in cases:
            ctx.set(acc, a)
            ctx.set(t, tt)
            got.append((ctx.get(out), bool(ctx.get(sat))))

    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()
    return got


HAND = [  # (acc, truncate, expected value, saturated), worked by hand
    (5, 1, 3, False),                 # 2.5 -> 3
    (-5, 1, -3, False),               # -2.5 -> -3 (half away from zero)
    (6, 2, 2, False),                 # 1.5 -> 2
    (-6, 2, -2, False),               # -1.5 -> -2
    (-3, 2, -1, False),               # -0.75 -> -1
    (-7, 2, -2, False),               # -1.75 -> -2
    (9, 2, 2, False),                 # 2.25 -> 2
    (-9, 2, -2, False),               # -2.25 -> -2
    (123, 0, 123, False),
    (ACC_MAX, 0, I32_MAX, True),
    (ACC_MIN, 0, I32_MIN, True),
    ((1 << 32) - 1, 1, I32_MAX, True),      # 2147483647.5 rounds to 2**31: saturates
    ((1 << 32) - 2, 1, I32_MAX, False),     # exactly 2**31 - 1
    (-(1 << 32), 1, I32_MIN, False),        # exactly -2**31
    (-(1 << 32) - 1, 1, I32_MIN, True),     # -2147483648.5 -> -2**31 - 1: saturates
    (ACC_MAX, 31, 4, False),                # 3.99999 -> 4
    (ACC_MIN, 31, -4, False),
    # only 15 sticky bits: -(2**19) + 1 = -0.4999990 * 2**20; its set bit 0 is below the
    # sticky window [4, 19) of a shift of 20, so NVIDIA sees an exact -0.5 and gives -1
    (-(1 << 19) + 1, 20, -1, False),
    (-(1 << 19) + 16, 20, 0, False),        # bit 4 is a sticky bit: -0.49998 -> 0
    ((1 << 19) - 1, 20, 0, False),          # positive: the guide bit alone decides
    ((1 << 19), 20, 1, False),
]


def test_cacc_round_hand_cases():
    got = _round_sim([(a, t) for a, t, _, _ in HAND])
    for (a, t, v, s), g in zip(HAND, got):
        assert g == (v, s), f"acc={a} truncate={t}: got {g}, expected {(v, s)}"
        assert round_ref(a, t) == (v, s)
        assert int(cacc_truncate(np.array([a]), t)[0]) == v


def test_cacc_round_all_truncates_against_model():
    rng = random.Random(5)
    vals = [0, 1, -1, ACC_MAX, ACC_MIN, I32_MAX, I32_MIN, I32_MAX + 1, I32_MIN - 1]
    vals += [rng.randrange(ACC_MIN, ACC_MAX + 1) for _ in range(12)]
    vals += [rng.randrange(-(1 << 20), 1 << 20) for _ in range(8)]
    vals += [(rng.choice([1, -1]) << rng.randrange(1, 33)) + rng.randrange(-2, 3)
             for _ in range(8)]
    cases = [(a, t) for t in range(32) for a in vals]
    got = _round_sim(cases)
    model = {t: cacc_truncate(np.array(vals), t) for t in range(32)}
    for (a, t), g in zip(cases, got):
        ref = round_ref(a, t)
        assert g == ref, f"acc={a} truncate={t}: got {g}, expected {ref}"
        assert g[0] == int(model[t][vals.index(a)])


# ---------------------------------------------------------------- the accumulator
def make_layer(rng, k, w, h, groups, stripe_max, sizes, steps, pick):
    """Ops of one layer: for each kernel group, the (w*h) pixels cut into stripes whose sizes
    are drawn from ``sizes`` (clipped to stripe_max and to the pixels left), each stripe
    ``steps(rng)`` (cb, r, s) steps of ``pick(rng)`` partial sums. Returns (ops, expected
    accumulators per delivered atom) with plain-Python 34-bit saturating accumulation."""
    ops, accs = [], []
    for _ in range(groups):
        left = w * h
        while left:
            n = min(rng.choice(sizes), stripe_max, left)
            left -= n
            ns = steps(rng)
            acc = [[0] * k for _ in range(n)]
            for st in range(ns):
                for i in range(n):
                    sums = [pick(rng) for _ in range(k)]
                    acc[i] = [min(max((0 if st == 0 else a) + s, ACC_MIN), ACC_MAX)
                              for a, s in zip(acc[i], sums)]
                    ops.append({"sum": sums, "pos": i, "first": int(st == 0),
                                "last": int(st == ns - 1)})
            accs.extend(acc)
    return ops, accs


def run_cacc(cfg, stripe_max, ops, *, w, h, c, truncate, result_bits=None, seed=0,
             p_in=0.3, p_out=0.3, timestamps=None, start_gap=0, nb=1):
    """``nb``: D_BATCH_NUMBER.BATCHES+1 (configurations with ``cfg.batch``): the layer is
    N atoms per output position."""
    dut = Cacc(cfg, stripe_max, result_bits=result_bits)
    k = cfg.mac_atomic_k
    n_atoms = w * h * -(-c // k) * nb
    rng_in, rng_out = random.Random(seed), random.Random(seed + 1)
    got, done_cycles, status = [], [], {}

    async def control(ctx):
        ctx.set(dut.regs.d_dataout_size_0.dataout_width, w - 1)
        ctx.set(dut.regs.d_dataout_size_0.dataout_height, h - 1)
        ctx.set(dut.regs.d_dataout_size_1.dataout_channel, c - 1)
        ctx.set(dut.regs.d_clip_cfg.clip_truncate, truncate)
        if cfg.batch:
            ctx.set(dut.regs.d_batch_number.batches, nb - 1)
        await ctx.tick()
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        assert ctx.get(dut.busy)
        cycle, taken = 0, 0
        async for _, _, valid, ready, done, busy, sat_count in ctx.tick().sample(
                dut.sdp.valid, dut.sdp.ready, dut.done, dut.busy, dut.sat_count):
            # sampled at the edge: done/busy as they were in the cycle before it
            if done:
                done_cycles.append(cycle)
                status["n_at_done"] = taken          # transfers at the earlier edges
                status["sat_count"] = sat_count
                status["busy_at_done"] = busy
            elif done_cycles:
                status["busy_after"] = busy
                break
            taken += valid and ready
            cycle += 1
            if cycle > 200_000:
                break

    async def producer(ctx):
        await ctx.tick().repeat(2 + start_gap)
        await stream_put(ctx, dut.psum, ops, rng=rng_in, p_stall=p_in)

    async def consumer(ctx):
        await ctx.tick().repeat(2)
        got.extend(await stream_get(ctx, dut.sdp, n_atoms, rng=rng_out, p_stall=p_out,
                                    timestamps=timestamps))

    simulate_streams(dut, [control, producer, consumer], [],
                     [("psum", dut.psum), ("sdp", dut.sdp)])
    assert len(done_cycles) == 1, "no done pulse"
    assert status["n_at_done"] == n_atoms        # done the cycle after the last atom was taken
    assert not status["busy_at_done"] and not status["busy_after"]
    return [list(a) for a in got], status["sat_count"]


def expected_out(accs, truncate):
    vals = [[round_ref(a, truncate) for a in atom] for atom in accs]
    return [[v for v, _ in atom] for atom in vals], sum(s for atom in vals for _, s in atom)


@pytest.mark.parametrize("stripe_max,seed", [(16, 1), (7, 2), (4, 3), (1, 4)])
def test_cacc_random_stripes_nv_small(stripe_max, seed):
    cfg = NV_SMALL
    k = cfg.mac_atomic_k
    rng = random.Random(seed)
    w, h, c = 5, 3, 2 * k + 3                 # 3 kernel groups of 15 pixels
    ops, accs = make_layer(rng, k, w, h, 3, stripe_max, (1, 2, 7, stripe_max),
                           lambda r: r.choice([1, 1, 2, 3, 5]),
                           lambda r: r.randrange(-(1 << 18), 1 << 18))
    for t in (0, 3):
        got, sat = run_cacc(cfg, stripe_max, ops, w=w, h=h, c=c, truncate=t, seed=seed + t)
        exp, exp_sat = expected_out(accs, t)
        assert got == exp
        assert sat == exp_sat


@pytest.mark.parametrize("preset,nb", [("nv_small", 3), ("nv_small", 32), ("nv_large", 5)])
def test_cacc_batches(preset, nb):
    """Multi-batch (docs/conv.md "Multi-batch"): N atoms per output position (batch fastest,
    CSC's pos = pixel * N + b): the atoms in op order, ``done`` the cycle after the N x W x H x
    groups-th; nv_small's and nv_large's atoms (8 and 32 accumulators), both with
    ``batch`` on."""
    cfg = get_config(preset, ["batch=True", "max_batch=32"])
    k = cfg.mac_atomic_k
    rng = random.Random(nb)
    w, h, c = 3, 2, 2 * k + 1                 # 3 kernel groups of 6 positions
    sm = 32
    # positions of a group: W x H x N, in stripes of stripe_max // N pixels x N batches
    ops, accs = make_layer(rng, k, w * nb, h, 3, sm, (sm // nb * nb,),
                           lambda r: r.choice([1, 2, 3]),
                           lambda r: r.randrange(-(1 << 18), 1 << 18))
    got, sat = run_cacc(cfg, sm, ops, w=w, h=h, c=c, truncate=2, seed=nb, nb=nb)
    exp, exp_sat = expected_out(accs, 2)
    assert got == exp and sat == exp_sat


def test_cacc_saturation_wide_psums():
    """34-bit psums (a test-only width) reach the 34-bit and int32 saturations in few steps."""
    cfg = NV_SMALL
    k = cfg.mac_atomic_k
    rng = random.Random(11)
    big = [ACC_MAX, ACC_MIN, 1 << 32, -(1 << 32), 1 << 31, -(1 << 31), 3 << 30]

    def pick(r):
        return r.choice(big) if r.random() < 0.6 else r.randrange(ACC_MIN, ACC_MAX + 1)

    w, h, c, stripe_max = 4, 3, k, 7
    ops, accs = make_layer(rng, k, w, h, 1, stripe_max, (1, 2, 7),
                           lambda r: r.choice([1, 2, 4, 6]), pick)
    flat = [a for atom in accs for a in atom]
    assert ACC_MAX in flat and ACC_MIN in flat            # 34-bit saturation happened
    for t in (0, 1, 2, 5, 17):
        got, sat = run_cacc(cfg, stripe_max, ops, w=w, h=h, c=c, truncate=t, result_bits=34,
                            seed=t)
        exp, exp_sat = expected_out(accs, t)
        assert got == exp
        assert sat == exp_sat
        if t <= 2:
            assert exp_sat > 0


def test_cacc_all_truncates_one_pixel_stripes():
    """Every CLIP_TRUNCATE on a few values; stripes of one pixel make every op hit the ``pos``
    the previous op just wrote (the read-modify-write hazard)."""
    cfg = NV_SMALL
    k = cfg.mac_atomic_k
    rng = random.Random(21)
    w, h, c = 3, 1, k
    ops, accs = make_layer(rng, k, w, h, 1, 1, (1,), lambda r: r.choice([2, 3, 4]),
                           lambda r: r.randrange(-(1 << 33), 1 << 33))
    for t in range(32):
        got, sat = run_cacc(cfg, 4, ops, w=w, h=h, c=c, truncate=t, result_bits=34, seed=t,
                            p_in=0.2 if t % 2 else 0.0, p_out=0.5 if t % 3 else 0.0)
        exp, exp_sat = expected_out(accs, t)
        assert got == exp, f"truncate {t}"
        assert sat == exp_sat


def test_cacc_int32_saturation_real_width():
    """nv_small's 19-bit psums: 8200 full-scale steps on a stripe of one pixel pass 2**31."""
    cfg = NV_SMALL
    k = cfg.mac_atomic_k
    n = 8200
    top = (1 << 18) - 1
    ops = [{"sum": [top] * (k // 2) + [-top - 1] * (k // 2), "pos": 0, "first": int(i == 0),
            "last": int(i == n - 1)} for i in range(n)]
    got, sat = run_cacc(cfg, 4, ops, w=1, h=1, c=1, truncate=0, p_in=0, p_out=0)
    assert got == [[I32_MAX] * (k // 2) + [I32_MIN] * (k // 2)]
    assert sat == k


@pytest.mark.parametrize("stripe_max,steps", [(16, 1), (16, 3), (1, 2), (2, 1)])
def test_cacc_one_op_per_cycle(stripe_max, steps):
    cfg = NV_SMALL
    k = cfg.mac_atomic_k
    rng = random.Random(stripe_max)
    w, h, c = 8, 4, k
    ops, accs = make_layer(rng, k, w, h, 1, stripe_max, (stripe_max,), lambda r: steps,
                           lambda r: r.randrange(-(1 << 18), 1 << 18))
    ts = []
    got, _ = run_cacc(cfg, stripe_max, ops, w=w, h=h, c=c, truncate=1, p_in=0, p_out=0,
                      timestamps=ts)
    assert got == expected_out(accs, 1)[0]
    # ops enter at one per cycle from cycle 0 of the consumer's count; the last atom leaves
    # at most 6 cycles (the pipeline latency: assembly, acc_reg, shift, round, delivery) after
    # the last op went in
    assert ts[-1] <= len(ops) - 1 + 6, (ts[-1], len(ops))
    if steps == 1:
        assert ts[-1] - ts[0] == len(ts) - 1           # one atom per cycle out


def test_cacc_sdp_stall_back_pressure():
    """A consumer that stalls long and often: nothing lost, order kept, protocol kept."""
    cfg = NV_SMALL
    k = cfg.mac_atomic_k
    rng = random.Random(8)
    ops, accs = make_layer(rng, k, 4, 4, 1, 4, (1, 2, 4), lambda r: r.choice([1, 2]),
                           lambda r: r.randrange(-(1 << 18), 1 << 18))
    got, _ = run_cacc(cfg, 4, ops, w=4, h=4, c=k, truncate=2, p_in=0, p_out=0.9)
    assert got == expected_out(accs, 2)[0]


def test_cacc_psum_layout_matches_cmac():
    cfg = NV_SMALL
    dut = Cacc(cfg, 16)
    assert dut.psum.payload.shape() == psum_layout(cfg.mac_atomic_k, cfg.mac_result_width, 16)


# ---------------------------------------------------------------- CMAC + CACC: a tiny layer
def conv_ops(inp, wts, *, wo, ho, pl, pt, sx, sy, dx, dy, pad, atomic_c, atomic_k,
             stripe_max, rng):
    """The op sequence of docs/conv.md "CSC" for input (C,H,W) and weights (K,R,S,C): kernel
    group, stripe of up to stripe_max output pixels (raster order), (cb, r, s), pixel."""
    c, h, w = inp.shape
    k, r, s, _ = wts.shape
    pixels = [(xo, yo) for yo in range(ho) for xo in range(wo)]
    steps = [(cb, ri, si) for cb in range(-(-c // atomic_c)) for ri in range(r)
             for si in range(s)]
    ops = []
    for g in range(-(-k // atomic_k)):
        for p0 in range(0, len(pixels), stripe_max):
            stripe = pixels[p0:p0 + stripe_max]
            for n, (cb, ri, si) in enumerate(steps):
                wt = [[int(wts[g * atomic_k + kk, ri, si, cb * atomic_c + cc])
                       if g * atomic_k + kk < k and cb * atomic_c + cc < c else 0
                       for cc in range(atomic_c)] for kk in range(atomic_k)]
                for i, (xo, yo) in enumerate(stripe):
                    x = xo * sx - pl + si * dx
                    y = yo * sy - pt + ri * dy
                    atom = []
                    for cc in range(atomic_c):
                        ch = cb * atomic_c + cc
                        if not (0 <= x < w and 0 <= y < h):
                            atom.append(pad)
                        elif ch < c:
                            atom.append(int(inp[ch, y, x]))
                        else:
                            atom.append(rng.randrange(-128, 128))   # weights are 0 there
                    ops.append({"data": atom, "wt": wt, "pos": i, "first": int(n == 0),
                                "last": int(n == len(steps) - 1)})
    return ops


@pytest.mark.parametrize("truncate", [0, 4])
def test_cmac_cacc_tiny_layer_against_model(truncate):
    from amaranth.lib import wiring
    from hdl.cmac import CmacArray
    from verif.model.conv import ConvCore

    cfg = NV_SMALL
    ac, ak = cfg.mac_atomic_c, cfg.mac_atomic_k
    rng = random.Random(truncate + 100)
    nrng = np.random.default_rng(truncate + 100)
    K, R, S, C, H, W = 3, 2, 3, 12, 4, 4
    wo, ho, pl, pt, pad, stripe_max = 4, 3, 1, 0, -3, 4
    inp = nrng.integers(-128, 128, (C, H, W))
    wts = nrng.integers(-128, 128, (K, R, S, C))
    wts[0] = -128                     # an extreme kernel
    inp[:, 0, 0] = -128
    ops = conv_ops(inp, wts, wo=wo, ho=ho, pl=pl, pt=pt, sx=1, sy=1, dx=1, dy=1, pad=pad,
                   atomic_c=ac, atomic_k=ak, stripe_max=stripe_max, rng=rng)
    acc = ConvCore._conv_dc(inp, wts, ho, wo, 1, 1, 1, 1, pl, pt, pad)       # (K, ho, wo)
    out = cacc_truncate(acc, truncate)
    exp = [[int(out[kk, yo, xo]) if kk < K else 0 for kk in range(ak)]
           for yo in range(ho) for xo in range(wo)]

    class Top(wiring.Component):
        def __init__(self):
            self.mac = CmacArray(ac, ak, cfg.mac_result_width, stripe_max)
            self.acc = Cacc(cfg, stripe_max)
            super().__init__({"op": wiring.In(self.mac.op.signature.flip()),
                              "sdp": wiring.Out(self.acc.sdp.signature)})

        def elaborate(self, platform):
            m = Module()
            m.submodules.mac, m.submodules.acc = self.mac, self.acc
            wiring.connect(m, wiring.flipped(self.op), self.mac.op)
            wiring.connect(m, self.mac.psum, self.acc.psum)
            wiring.connect(m, self.acc.sdp, wiring.flipped(self.sdp))
            return m

    top = Top()
    dut = top.acc
    got = []

    async def control(ctx):
        ctx.set(dut.regs.d_dataout_size_0.dataout_width, wo - 1)
        ctx.set(dut.regs.d_dataout_size_0.dataout_height, ho - 1)
        ctx.set(dut.regs.d_dataout_size_1.dataout_channel, K - 1)
        ctx.set(dut.regs.d_clip_cfg.clip_truncate, truncate)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        await ctx.tick().until(dut.done)

    async def producer(ctx):
        await ctx.tick()
        await stream_put(ctx, top.op, ops, rng=random.Random(5), p_stall=0.2)

    async def consumer(ctx):
        got.extend(await stream_get(ctx, top.sdp, wo * ho, rng=random.Random(6), p_stall=0.3))

    simulate_streams(top, [control, producer, consumer], [],
                     [("op", top.op), ("sdp", top.sdp)])
    assert len(ops) == 2 * R * S * wo * ho
    assert [list(a) for a in got] == exp
