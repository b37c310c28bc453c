"""SDP output converter RTL (hdl.sdp.core) against the numpy model (verif.model.sdp), with random
stalls on both sides (tests/hdl/streams.py), and its throughput without stalls."""
import random

import numpy as np
import pytest

from amaranth.sim import Simulator

from hdl.config import NV_SMALL
from hdl.sdp.core import SdpCore
from streams import check_stream_stable, stream_get, stream_put
from verif.model.sdp import output_convert   # the independent numpy model is the reference

# (D_CVT_OFFSET, D_CVT_SCALE, D_CVT_SHIFT): identity, trace-like values, signs, the extremes of
# every field, and shifts around the 49-bit product width
SETTINGS = [(0, 1, 0), (0x558fbb6e, 0x16cc, 10), (-37, -3, 1), (5, 0x7fff, 12), (0, 1, 50),
            (123, -200, 4), (-(1 << 31), -(1 << 15), 63), (-(1 << 31), -(1 << 15), 20),
            ((1 << 31) - 1, 0x7fff, 0), ((1 << 31) - 1, -(1 << 15), 48), (0, 1, 49)]


def _run(settings, *, n_atoms, p_in, p_out, seed):
    """Send n_atoms random atoms per (offset, scale, shift) setting through SdpCore with random
    stalls. The settings change only between layers, when the core is empty (as the unit does).
    Returns [(atoms sent, atoms received as lists of ints, transfer cycles)] per setting."""
    cfg = NV_SMALL
    dut = SdpCore(cfg)
    rng = random.Random(seed)
    lanes = cfg.memory_atomic
    layers = [[[rng.randrange(-128, 128) for _ in range(lanes)] for _ in range(n_atoms)]
              for _ in settings]
    results, errors = [], []

    async def producer(ctx):
        for k, ((off, scale, shift), atoms) in enumerate(zip(settings, layers)):
            while len(results) < k:          # previous layer fully received: the core is empty
                await ctx.tick()
            ctx.set(dut.cvt_offset, off)
            ctx.set(dut.cvt_scale, scale)
            ctx.set(dut.cvt_shift, shift)
            await stream_put(ctx, dut.i, atoms, rng=rng, p_stall=p_in)

    async def consumer(ctx):
        for atoms in layers:
            stamps = []
            got = await stream_get(ctx, dut.o, n_atoms, rng=rng, p_stall=p_out,
                                   timestamps=stamps, timeout=20 * n_atoms + 100)
            results.append((atoms, [list(g) for g in got], stamps))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(producer)
    sim.add_testbench(consumer)
    sim.add_process(check_stream_stable(dut.o, errors=errors, name="o"))
    sim.add_process(check_stream_stable(dut.i, errors=errors, name="i"))
    sim.run()
    assert errors == []
    return results


@pytest.mark.parametrize("p_in,p_out,seed", [(0.3, 0.4, 1), (0.0, 0.6, 2), (0.6, 0.0, 3)])
def test_core_matches_model(p_in, p_out, seed):
    results = _run(SETTINGS, n_atoms=40, p_in=p_in, p_out=p_out, seed=seed)
    for (off, scale, shift), (atoms, got, _) in zip(SETTINGS, results):
        want = [[int(v) for v in output_convert(np.array(a), off, scale, shift)] for a in atoms]
        assert got == want, (off, scale, shift)


def test_core_full_throughput():
    """No stalls: one atom per cycle; the first leaves 2 cycles after it entered (two stages)."""
    n = 64
    settings = [(0x558fbb6e, 0x16cc, 10)]
    (atoms, got, stamps), = _run(settings, n_atoms=n, p_in=0, p_out=0, seed=4)
    assert stamps == list(range(2, 2 + n))
    off, scale, shift = settings[0]
    assert got == [[int(v) for v in output_convert(np.array(a), off, scale, shift)] for a in atoms]
