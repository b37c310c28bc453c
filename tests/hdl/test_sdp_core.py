"""SDP output converter RTL (hdl.sdp.core) against the numpy model (verif.model.sdp), with random back-pressure."""
import random

import numpy as np

from amaranth.sim import Simulator

from hdl.config import NV_SMALL
from hdl.sdp.core import SdpCore
from verif.model.sdp import output_convert   # the independent numpy model is the reference


def _s(v, bits):
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def test_core_matches_model():
    cfg = NV_SMALL
    dut = SdpCore(cfg)
    rng = random.Random(1)
    settings = [(0, 1, 0), (0x558fbb6e, 0x16cc, 10), (-37, -3, 1), (5, 0x7fff, 12), (0, 1, 50),
                (123, -200, 4)]
    n_atoms = 40
    lanes = cfg.memory_atomic

    async def bench(ctx):
        for off, scale, shift in settings:
            ctx.set(dut.cvt_offset, off)
            ctx.set(dut.cvt_scale, scale)
            ctx.set(dut.cvt_shift, shift)
            atoms = [[rng.randrange(-128, 128) for _ in range(lanes)] for _ in range(n_atoms)]
            sent, got = 0, []
            while len(got) < n_atoms:
                v = sent < n_atoms and rng.random() < 0.7
                ctx.set(dut.i.valid, v)
                if v:
                    ctx.set(dut.i.payload, atoms[sent])
                r = rng.random() < 0.6
                ctx.set(dut.o.ready, r)
                if v and ctx.get(dut.i.ready):
                    sent += 1
                if r and ctx.get(dut.o.valid):
                    raw = ctx.get(dut.o.payload.as_value())
                    got.append([_s(raw >> (8 * i), 8) for i in range(lanes)])
                await ctx.tick()
            ctx.set(dut.i.valid, 0)
            want = [[int(v) for v in output_convert(np.array(a), off, scale, shift)] for a in atoms]
            assert got == want, (off, scale, shift)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
