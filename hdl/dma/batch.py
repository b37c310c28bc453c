"""Multi-batch cube walk (programming guide "Convolution pipeline programming", multi-batch;
unit description "Multi-Batch Mode"): N cubes of the same geometry ``batch_stride`` bytes apart,
walked atom by atom with the batch innermost, for a unit that receives the N cubes interleaved
(SDP on the fly from CACC in a multi-batch layer, docs/conv.md "Multi-batch").

Atom (x, y, s) of batch b is at ``base + b * batch_stride + s * surface_stride + y *
line_stride + x * atom_bytes``; the order is surface s, line y, atom x, batch b (b fastest), one
atom per run. With one batch the walk is the shared :class:`hdl.dma.CubeWalker`'s (maximal
runs, contiguous lines and surfaces merged), so a unit that builds this walker loses nothing in
ordinary layers.
"""
from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal

from hdl.dma.cube import STRIDE_BITS
from hdl.dma.nest import NestWalker
from hdl.dma.walker import CubeWalker, RunWalker

__all__ = ["BATCH_BITS", "BatchWalker"]

#: bits of a batch count minus one (D_BATCH_NUMBER.BATCHES / BATCH_NUMBER are 5 bits: 1..32)
BATCH_BITS = 5


class BatchWalker(RunWalker):
    """Runs of ``batches + 1`` cubes (module docstring): a :class:`hdl.dma.CubeWalker` when
    ``batches`` is 0, else a :class:`hdl.dma.nest.NestWalker` over (surface, line, atom, batch)
    with one-atom lines.

    Parameters and ports as :class:`hdl.dma.walker.RunWalker`, plus two plain input signals
    sampled at ``start`` and held while ``busy``: ``batches`` (:data:`BATCH_BITS` bits, cubes
    minus one) and ``batch_stride`` (:data:`hdl.dma.cube.STRIDE_BITS` bits, bytes; a multiple of
    ``atom_bytes``). Rate: one run per cycle (a cube's runs: :class:`hdl.dma.CubeWalker`'s).
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.batches = Signal(BATCH_BITS, name="batches")
        self.batch_stride = Signal(STRIDE_BITS, name="batch_stride")

    def elaborate(self, platform):
        m = Module()
        args = self.walker_args
        m.submodules.cube = cw = CubeWalker(**args)
        m.submodules.nest = nw = NestWalker(**args)
        cube = self.cube
        multi = Signal()                        # the walk in progress is a multi-batch one
        with m.If(self.start & ~self.busy):
            m.d.sync += multi.eq(self.batches != 0)
        nb = self.batches
        loops = nw.nest.loops
        aw = self.addr_width
        m.d.comb += [
            cw.start.eq(self.start & (nb == 0)), cw.cube.eq(cube),
            nw.start.eq(self.start & (nb != 0)), nw.cube.eq(cube),
            # outermost first: (unused), surface, line, atom, batch; lines of one atom
            loops[0].count.eq(0), loops[0].stride.eq(0),
            loops[1].count.eq(cube.channel >> self.atom_elems_log2),
            loops[1].stride.eq(cube.surface_stride[:aw]),
            loops[2].count.eq(cube.height), loops[2].stride.eq(cube.line_stride[:aw]),
            loops[3].count.eq(cube.width), loops[3].stride.eq(self.atom_bytes),
            loops[4].count.eq(nb), loops[4].stride.eq(self.batch_stride[:aw]),
            nw.nest.last_count.eq(nb), nw.nest.line.eq(0), nw.nest.last_line.eq(0),
            self.runs.valid.eq(Mux(multi, nw.runs.valid, cw.runs.valid)),
            self.runs.payload.eq(Mux(multi, nw.runs.payload.as_value(), cw.runs.payload.as_value())),
            cw.runs.ready.eq(self.runs.ready & ~multi),
            nw.runs.ready.eq(self.runs.ready & multi),
            self.busy.eq(cw.busy | nw.busy),
        ]
        return m
