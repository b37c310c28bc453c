"""SDP's closed form of 'the untaken DATA_USE = BOTH operand fits NVIDIA's operand DMA' (issue 36
item 1; hdl/sdp ``Sdp._both_absorbed``) against the model's step-by-step rule
(``verif.model.sdp.untaken_operand_fits``, settled on NVIDIA's RTL), over every DATA_SIZE and
DATA_MODE and cube sizes around and far beyond the limits, at nv_small's memory atom (8) and a
wide one (32)."""
from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from hdl.sdp import Sdp
from verif.model.sdp import untaken_operand_fits

SIZES = [1, 2, 3, 4, 5, 7, 64, 8192]


@pytest.mark.parametrize("atom", [8, 32])
def test_closed_form_matches_the_model(atom):
    cube = SimpleNamespace(width=Signal(13), height=Signal(13), channel=Signal(13))
    dcfg = SimpleNamespace(brdma_data_size=Signal(), brdma_data_mode=Signal())
    fit_m, fits = Sdp._both_absorbed(dcfg, "brdma", cube, atom)
    top = Module()
    top.submodules.fit = fit_m
    cases = list(itertools.product((0, 1), (0, 1), SIZES, SIZES[:6] + [8192], [1, 2, 3, 4, 5, 9]))
    bad = []

    async def bench(ctx):
        for two_byte, per_element, w, h, catoms in cases:
            c = catoms * atom - (atom // 2 if catoms > 1 else 0)      # a partial last atom too
            ctx.set(dcfg.brdma_data_size, two_byte)
            ctx.set(dcfg.brdma_data_mode, per_element)
            ctx.set(cube.width, w - 1)
            ctx.set(cube.height, h - 1)
            ctx.set(cube.channel, c - 1)
            want = untaken_operand_fits(w, h, catoms, two_byte=bool(two_byte),
                                        per_element=bool(per_element))
            if ctx.get(fits) != want:
                bad.append((two_byte, per_element, w, h, c, want))

    sim = Simulator(top)
    sim.add_testbench(bench)
    sim.run()
    assert not bad, bad[:10]
    assert any(untaken_operand_fits(*k[2:], two_byte=bool(k[0]), per_element=bool(k[1]))
               for k in cases) and not all(
        untaken_operand_fits(*k[2:], two_byte=bool(k[0]), per_element=bool(k[1])) for k in cases)
