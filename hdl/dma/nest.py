"""Loop-nest walker: the runs of a memory walk given as nested loops with arbitrary strides
around lines of contiguous atoms, for units whose traversal is not a feature cube's (RUBIK's
contract, split and merge: hdl/rubik).

A *nest* (:func:`nest_layout`) is ``LOOPS`` loops, outermost first, each ``count`` iterations
(minus one) ``stride`` bytes apart, around a *line* of ``line + 1`` atoms at consecutive
addresses. The innermost loop runs ``last_count + 1`` times instead of ``count + 1`` during the
last iteration of the outermost loop (the last, partial channel group of RUBIK's split writes
and merge reads), and a line has ``last_line + 1`` atoms instead of ``line + 1`` during the last
iteration of the loop just outside the innermost one (the last, partial chunk of a line of
RUBIK's contract reads). Atom ``i`` of the line at loop indices ``(i0, .., iL-1)`` is at byte
``base + sum(ik * stride_k) + i * atom_bytes`` modulo ``2**addr_width``.

:class:`NestWalker` is a :class:`hdl.dma.walker.RunWalker` (``base`` is ``cube.base``; the other
cube fields are not used) with the nest as a plain input signal; :class:`NestReadDma` and
:class:`NestWriteDma` are :class:`hdl.dma.ReadDma` / :class:`hdl.dma.WriteDma` walking a nest
given on their ``nest`` port.
"""
from __future__ import annotations

from functools import reduce

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data
from amaranth.lib.wiring import In

from hdl.dma.cube import CUBE_DIM_BITS
from hdl.dma.read import ReadDma
from hdl.dma.walker import RunWalker, log2
from hdl.dma.write import WriteDma

__all__ = ["LOOPS", "LINE_BITS", "nest_layout", "NestWalker", "NestReadDma", "NestWriteDma"]

#: loops of a nest (unused ones have count 0)
LOOPS = 5
#: bits of a line's atom count minus one (RUBIK's contract lines: up to 8192 x 32 atoms)
LINE_BITS = 18


def nest_layout(addr_width: int) -> data.StructLayout:
    """A loop nest (module docstring): ``loops`` (LOOPS entries, outermost first) of ``count``
    (CUBE_DIM_BITS bits, iterations minus one) and ``stride`` (``addr_width`` bits, bytes,
    modulo the address space), ``last_count`` (the innermost loop's iterations minus one in the
    outermost loop's last iteration), ``line`` (LINE_BITS bits, atoms minus one) and
    ``last_line`` (the same in the last iteration of loop ``LOOPS - 2``; equal to ``line`` when
    every line has the same length)."""
    loop = data.StructLayout({"count": unsigned(CUBE_DIM_BITS), "stride": unsigned(addr_width)})
    return data.StructLayout({"loops": data.ArrayLayout(loop, LOOPS),
                              "last_count": unsigned(CUBE_DIM_BITS),
                              "line": unsigned(LINE_BITS),
                              "last_line": unsigned(LINE_BITS)})


class NestWalker(RunWalker):
    """Runs of a loop nest (module docstring) from ``cube.base``: each line cut at burst-window
    boundaries into runs (lines are never merged into one run); ``last`` on the final run.

    Parameters and ports as :class:`hdl.dma.walker.RunWalker`; plus the plain input signal
    ``nest`` (:func:`nest_layout`), latched with ``cube.base`` at ``start``. One run per cycle,
    the first valid the cycle after ``start``.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        #: the loop nest, driven by the owning DMA (a plain signal: the DMA base class builds
        #: the walker with RunWalker's signature)
        self.nest = Signal(nest_layout(self.addr_width), name="nest")

    def elaborate(self, platform):
        m = Module()
        aw = self.addr_width
        a_sh = log2(self.atom_bytes)
        win_sh = log2(self.max_burst * self.beat_bytes)
        big = self.max_atoms
        L = LOOPS
        nest = Signal.like(self.nest)                       # latched at start
        left = [Signal(CUBE_DIM_BITS, name=f"left{k}") for k in range(L)]   # iterations after this
        pos = [Signal(aw, name=f"pos{k}") for k in range(L)]                # this iteration's start
        cur = Signal(aw)                                    # first atom of the current run
        lleft = Signal(LINE_BITS + 1)                       # atoms of the line from cur on
        walking = Signal()

        end = [left[k] == 0 for k in range(L)]
        count = Signal(range(big + 1))
        if big == 1:
            m.d.comb += count.eq(1)
        else:
            room = Signal(range(big + 1))
            m.d.comb += [room.eq(big - cur[a_sh:win_sh]),
                         count.eq(Mux(lleft <= room, lleft, room))]
        end_line = lleft == count
        all_end = reduce(lambda a, b: a & b, end)
        m.d.comb += [self.runs.valid.eq(walking), self.runs.payload.addr.eq(cur),
                     self.runs.payload.count.eq(count),
                     self.runs.payload.last.eq(end_line & all_end),
                     self.busy.eq(walking)]

        def reload(k, outer_last):
            """Iterations minus one of loop ``k`` restarted while the outermost loop is on its
            last iteration when ``outer_last``."""
            if k == L - 1:
                return Mux(outer_last, nest.last_count, nest.loops[k].count)
            return nest.loops[k].count

        def line_atoms(src, chunk_last):
            """Atoms of a line (``src`` a nest) walked while loop L-2 is (``chunk_last``) or
            is not on its last iteration."""
            return Mux(chunk_last, src.last_line, src.line) + 1

        with m.If(self.start & ~self.busy):
            src = self.nest
            m.d.sync += [nest.eq(src), walking.eq(1), cur.eq(self.cube.base),
                         lleft.eq(line_atoms(src, src.loops[L - 2].count == 0))]
            for k in range(L):
                cnt = src.loops[k].count
                if k == L - 1:
                    cnt = Mux(src.loops[0].count == 0, src.last_count, cnt)
                m.d.sync += [left[k].eq(cnt), pos[k].eq(self.cube.base)]
        with m.If(self.runs.valid & self.runs.ready):
            with m.If(~end_line):
                m.d.sync += [cur.eq(cur + (count << a_sh)), lleft.eq(lleft - count)]
            with m.Elif(all_end):
                m.d.sync += walking.eq(0)
            with m.Else():
                # the deepest loop not at its end advances; the loops inside it restart there
                for k in range(L):
                    deeper_done = reduce(lambda a, b: a & b, end[k + 1:], 1)
                    with m.If(~end[k] & deeper_done):
                        nxt = (pos[k] + nest.loops[k].stride)[:aw]
                        outer_last = (left[0] == 1) if k == 0 else end[0]
                        # is loop L-2 on its last iteration after this step?
                        chunk_last = (end[L - 2] if k == L - 1 else left[L - 2] == 1 if k == L - 2
                                      else nest.loops[L - 2].count == 0)
                        m.d.sync += [left[k].eq(left[k] - 1), pos[k].eq(nxt), cur.eq(nxt),
                                     lleft.eq(line_atoms(nest, chunk_last))]
                        for j in range(k + 1, L):
                            m.d.sync += [left[j].eq(reload(j, outer_last)), pos[j].eq(nxt)]
        return m


class _NestDma:
    """Mixin: a ``nest`` In(:func:`nest_layout`) port driving the walker's (sampled at
    ``start`` with ``cube.base``)."""

    walker_class = NestWalker

    def dma_members(self):
        return {**super().dma_members(), "nest": In(nest_layout(self.addr_width))}

    def add_walker(self, m: Module):
        walker, *rest = super().add_walker(m)
        m.d.comb += walker.nest.eq(self.nest)
        return (walker, *rest)


class NestReadDma(_NestDma, ReadDma):
    """:class:`hdl.dma.ReadDma` walking the nest on its ``nest`` port from ``cube.base``
    (parameters and other ports as ReadDma; the other ``cube`` fields are not used)."""


class NestWriteDma(_NestDma, WriteDma):
    """:class:`hdl.dma.WriteDma` walking the nest on its ``nest`` port from ``cube.base``
    (parameters and other ports as WriteDma; the other ``cube`` fields are not used)."""
