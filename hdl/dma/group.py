"""Wide atom streams (:func:`hdl.dma.walker.atom_group_layout`) to one-atom streams, for a
datapath that takes one atom per cycle behind a ``wide=True`` :class:`hdl.dma.ReadDma` (RUBIK's
split and merge on 64-byte beats: hdl/rubik).
"""
from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.dma.walker import atom_group_layout

__all__ = ["Ungroup"]


class Ungroup(wiring.Component):
    """The atoms of each transfer of a wide atom stream, one per cycle, in order.

    Parameters: ``atom_bytes``, ``lanes`` (atoms per transfer at most).

    Ports: ``i`` In(stream of ``atom_group_layout(atom_bytes, lanes)``); ``o`` Out(stream of
    ``8 * atom_bytes`` bits). No added latency: atom k of the transfer on ``i`` is offered on
    ``o`` while ``i`` holds it; ``i.ready`` comes with the transfer's last atom.

    Raises ValueError: ``lanes`` < 1.
    """

    def __init__(self, atom_bytes: int, lanes: int):
        if lanes < 1:
            raise ValueError(f"lanes must be >= 1, not {lanes}")
        self.atom_bytes, self.lanes = atom_bytes, lanes
        super().__init__({"i": In(stream.Signature(atom_group_layout(atom_bytes, lanes))),
                          "o": Out(stream.Signature(8 * atom_bytes))})

    def elaborate(self, platform):
        m = Module()
        bits = 8 * self.atom_bytes
        k = Signal(range(max(2, self.lanes)))       # atoms of the held transfer already taken
        last = k + 1 >= self.i.payload.count
        fire = self.o.valid & self.o.ready
        m.d.comb += [self.o.valid.eq(self.i.valid),
                     self.o.payload.eq(self.i.payload.data.word_select(k, bits)),
                     self.i.ready.eq(self.o.ready & last)]
        with m.If(fire):
            m.d.sync += k.eq(Mux(last, 0, k + 1))
        return m
