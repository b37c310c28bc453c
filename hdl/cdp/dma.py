"""CDP's read and write DMAs: the shared :class:`hdl.dma.ReadDma` / :class:`hdl.dma.WriteDma` with
a CDP-specific traversal order.

LRN (v1_ias_unit_description.rst "Cross Channel Data Processor") sums squares over channels
c-4..c+4 of one (w, h) position; those channels live in neighbouring surfaces (format.rst
"Feature data": an atom holds ``atom_elems`` channels of one (w, h)). The shared
:class:`hdl.dma.CubeWalker` walks surface, line, atom (outermost first), which would put the
neighbouring channels a whole surface apart in the stream. :class:`CdpWalker` walks line, atom,
surface instead: for every (h, w) all the surfaces of that position back to back, so the core
needs only a window of three atoms (previous, current, next surface). Both DMAs use it, so the
write DMA takes the core's atoms in the same order.

Consecutive atoms of this order are one surface stride apart, so every run is one atom (one
beat, or one lane of a beat when atoms are narrower than beats).
"""
from __future__ import annotations

from amaranth.hdl import Module, Signal
from hdl.dma import ReadDma, WriteDma
from hdl.dma.cube import CUBE_DIM_BITS, STRIDE_BITS
from hdl.dma.walker import RunWalker

__all__ = ["CdpWalker", "CdpReadDma", "CdpWriteDma"]


class CdpWalker(RunWalker):
    """Atoms of a feature cube in CDP order: line (h), then atom position (w), then surface (s)
    innermost; each as a one-atom run of :func:`hdl.dma.walker.run_layout`.

    Parameters and ports as :class:`hdl.dma.walker.RunWalker` (``addr_width``, ``atom_bytes``,
    ``atom_elems``, ``beat_bytes``, ``max_burst``; powers of two, ValueError otherwise).

    Ports: ``start`` In(1) pulse, latches ``cube`` (ignored while ``busy``); ``cube``
    In(:func:`hdl.dma.cube.cube_layout`); ``runs`` Out(stream of run_layout): address of atom
    (w, h, s) = base + h * line_stride + w * atom_bytes + s * surface_stride, ``count`` 1,
    ``last`` on the final atom; ``busy`` Out(1). One run per cycle, the first valid the cycle
    after ``start``.
    """

    def elaborate(self, platform):
        m = Module()
        cube = self.cube
        w, h, s = (Signal(CUBE_DIM_BITS, name=n) for n in "whs")
        w_max, h_max, s_max = (Signal(CUBE_DIM_BITS, name=n + "_max") for n in "whs")
        lstride, sstride = Signal(STRIDE_BITS), Signal(STRIDE_BITS)
        line = Signal(self.addr_width)         # address of (0, h, 0)
        pos = Signal(self.addr_width)          # address of (w, h, 0)
        addr = Signal(self.addr_width)         # address of (w, h, s)
        walking = Signal()
        end_w, end_h, end_s = w == w_max, h == h_max, s == s_max

        m.d.comb += [self.runs.valid.eq(walking), self.runs.payload.addr.eq(addr),
                     self.runs.payload.count.eq(1),
                     self.runs.payload.last.eq(end_w & end_h & end_s),
                     self.busy.eq(walking)]
        with m.If(self.start & ~walking):
            m.d.sync += [walking.eq(1), w.eq(0), h.eq(0), s.eq(0),
                         w_max.eq(cube.width), h_max.eq(cube.height),
                         s_max.eq(cube.channel >> self.atom_elems_log2),
                         lstride.eq(cube.line_stride), sstride.eq(cube.surface_stride),
                         line.eq(cube.base), pos.eq(cube.base), addr.eq(cube.base)]
        with m.If(self.runs.valid & self.runs.ready):
            with m.If(~end_s):
                m.d.sync += [s.eq(s + 1), addr.eq(addr + sstride)]
            with m.Elif(~end_w):
                nxt = pos + self.atom_bytes
                m.d.sync += [s.eq(0), w.eq(w + 1), pos.eq(nxt), addr.eq(nxt)]
            with m.Elif(~end_h):
                nxt = line + lstride
                m.d.sync += [s.eq(0), w.eq(0), h.eq(h + 1), line.eq(nxt), pos.eq(nxt),
                             addr.eq(nxt)]
            with m.Else():
                m.d.sync += walking.eq(0)
        return m


class CdpReadDma(ReadDma):
    """CDP_RDMA: :class:`hdl.dma.ReadDma` in :class:`CdpWalker` order (parameters and ports as
    ReadDma; ``cube`` from CDP_RDMA D_SRC_* and D_DATA_CUBE_*)."""
    walker_class = CdpWalker


class CdpWriteDma(WriteDma):
    """CDP WDMA: :class:`hdl.dma.WriteDma` in :class:`CdpWalker` order (parameters and ports as
    WriteDma; ``cube`` from CDP D_DST_* and CDP_RDMA D_DATA_CUBE_*)."""
    walker_class = CdpWalker
