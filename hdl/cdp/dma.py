"""CDP's read and write DMAs: the shared :class:`hdl.dma.ReadDma` / :class:`hdl.dma.WriteDma` with
a CDP-specific traversal order.

LRN (v1_ias_unit_description.rst "Cross Channel Data Processor") sums squares over channels
c-4..c+4 of one (w, h) position; those channels live in neighbouring surfaces (format.rst
"Feature data": an atom holds ``atom_elems`` channels of one (w, h)). The shared
:class:`hdl.dma.CubeWalker` walks surface, line, atom (outermost first), which would put the
neighbouring channels a whole surface apart in the stream. :class:`CdpWalker` walks line, group
of positions, surface, position instead: for line h, a *group* of up to P consecutive positions
w (P = atoms per burst window, ``max_burst * beat_bytes / atom_bytes``), then every surface s of
the group, then the group's positions. The atoms of one (group, s) are consecutive in memory, so
they make one burst; the core (:class:`hdl.cdp.core.LrnWindow`) keeps a window of three surfaces
per position of the group. Both DMAs use the walker, so the write DMA takes the core's atoms in
the same order.

Groups (:func:`group_size`): a group never crosses a burst window of the *grouping* line address
(the source cube's (0, h, 0), CDP_RDMA D_SRC_BASE_ADDR + h * D_SRC_LINE_STRIDE: the read DMA, the
core and the write DMA cut the lines into the same groups, whatever the destination's
alignment); a (group, s) run that would cross a window of its own cube (another surface, or the
destination cube) is split there into two runs. With P = 1 (nv_small, ``max_burst`` 1) every
group is one position and this is the line / position / surface order of one-atom runs.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data
from amaranth.lib.wiring import In

from hdl.dma import ReadDma, WriteDma
from hdl.dma.cube import CUBE_DIM_BITS, STRIDE_BITS
from hdl.dma.walker import RunWalker, log2

__all__ = ["CdpWalker", "CdpReadDma", "CdpWriteDma", "GROUP_BITS", "group_layout", "group_of",
           "group_size"]

#: low address bits that decide the groups: a burst window divides 4 KB (hdl.dma.walker)
GROUP_BITS = 12


def group_layout() -> data.StructLayout:
    """The grouping line addresses, modulo 4 KB: ``base`` (bytes, the source cube's base) and
    ``line_stride`` (bytes, the source cube's line stride)."""
    return data.StructLayout({"base": unsigned(GROUP_BITS), "line_stride": unsigned(GROUP_BITS)})


def group_of(cube):
    """:func:`group_layout` bits (a Value, for ``.eq``) of a :func:`hdl.dma.cube.cube_layout`
    view: its base and line stride, low :data:`GROUP_BITS` bits each."""
    return Cat(cube.base[:GROUP_BITS], cube.line_stride[:GROUP_BITS])


def group_size(line_low, w0, left, *, atom_bytes: int, positions: int):
    """Positions in the group that starts at position ``w0`` of a line (combinational).

    ``line_low``: the grouping line address's low bits (at least log2(window) bits, bytes);
    ``w0``: first position of the group; ``left``: positions from ``w0`` to the end of the line
    (>= 1); ``positions``: P, atoms per burst window (power of two). Returns
    ``min(P - (line_low / atom_bytes + w0) mod P, left)``, 1..P.
    """
    if positions == 1:
        return 1
    a_sh, p_sh = log2(atom_bytes), log2(positions)
    idx = (line_low[a_sh:a_sh + p_sh] + w0[:p_sh])[:p_sh]
    room = positions - idx
    return Mux(left < room, left, room)


class CdpWalker(RunWalker):
    """Atoms of a feature cube in CDP order: line h, group of positions (:func:`group_size`,
    cut by the windows of the grouping line address), surface s, then the group's positions
    w0..w0+n-1 innermost, as runs of :func:`hdl.dma.walker.run_layout`: one run per
    (group, s) at address base + h * line_stride + w0 * atom_bytes + s * surface_stride with
    ``count`` n, or two runs where that one would cross a burst window; ``last`` on the final
    run.

    Parameters and ports as :class:`hdl.dma.walker.RunWalker` (``addr_width``, ``atom_bytes``,
    ``atom_elems``, ``beat_bytes``, ``max_burst``; powers of two, ValueError otherwise), plus the
    plain input signal ``group`` (:func:`group_layout`, latched at ``start`` with ``cube``; the
    owning DMA drives it). ``start`` In(1) pulse, latches ``cube`` (ignored while ``busy``);
    ``runs`` Out(stream of run_layout); ``busy`` Out(1). One run per cycle, the first valid the
    cycle after ``start``. With ``max_burst * beat_bytes == atom_bytes`` every run is one atom,
    in line / position / surface order.
    """

    def __init__(self, *, half: bool = False, **kwargs):
        super().__init__(**kwargs)
        #: the grouping addresses (a plain signal: the DMA base class builds the walker with
        #: RunWalker's signature)
        self.group = Signal(group_layout(), name="group")
        #: with ``half`` (a configuration with fp16): the plain input signal ``half``, latched
        #: at ``start``: the cube's elements are 2 bytes, ``atom_elems // 2`` channels per atom
        #: (``cube.channel`` still counts elements: S = (C - 1) // (atom_elems // 2) + 1)
        self.half_elems = half
        if half:
            self.half = Signal(name="half")

    def elaborate(self, platform):
        m = Module()
        cube = self.cube
        P = self.max_atoms
        a_sh = log2(self.atom_bytes)
        win_sh = log2(self.max_burst * self.beat_bytes)
        w0 = Signal(CUBE_DIM_BITS + 1)         # first position of the group
        h, s = Signal(CUBE_DIM_BITS), Signal(CUBE_DIM_BITS)
        w_max, h_max, s_max = (Signal(CUBE_DIM_BITS, name=n + "_max") for n in "whs")
        lstride, sstride = Signal(STRIDE_BITS), Signal(STRIDE_BITS)
        glow = Signal(GROUP_BITS)              # grouping line address (0, h, 0), low bits
        gstride = Signal(GROUP_BITS)
        line = Signal(self.addr_width)         # address of (0, h, 0)
        pos = Signal(self.addr_width)          # address of (w0, h, 0)
        addr = Signal(self.addr_width)         # address of (w0, h, s)
        part2 = Signal()                       # the second run of a split (group, s)
        p2_addr = Signal(self.addr_width)
        p2_count = Signal(range(P + 1))
        walking = Signal()

        n = Signal(range(P + 1))
        m.d.comb += n.eq(group_size(glow, w0, w_max + 1 - w0, atom_bytes=self.atom_bytes,
                                    positions=P))
        room = Signal(range(P + 1))            # atoms from addr to the end of its window
        if P > 1:
            m.d.comb += room.eq(P - addr[a_sh:win_sh])
        else:
            m.d.comb += room.eq(1)
        split = ~part2 & (n > room)
        end_s, end_h = s == s_max, h == h_max
        end_line = w0 + n > w_max
        piece_done = ~split                    # this run ends the (group, s) piece

        s_last = cube.channel >> self.atom_elems_log2          # the cube's last surface
        if self.half_elems:
            s_last = Mux(self.half, cube.channel >> (self.atom_elems_log2 - 1), s_last)
        m.d.comb += [self.runs.valid.eq(walking),
                     self.runs.payload.addr.eq(Mux(part2, p2_addr, addr)),
                     self.runs.payload.count.eq(Mux(part2, p2_count, Mux(split, room, n))),
                     self.runs.payload.last.eq(piece_done & end_s & end_line & end_h),
                     self.busy.eq(walking)]
        with m.If(self.start & ~walking):
            m.d.sync += [walking.eq(1), w0.eq(0), h.eq(0), s.eq(0), part2.eq(0),
                         w_max.eq(cube.width), h_max.eq(cube.height),
                         s_max.eq(s_last),
                         lstride.eq(cube.line_stride), sstride.eq(cube.surface_stride),
                         glow.eq(self.group.base), gstride.eq(self.group.line_stride),
                         line.eq(cube.base), pos.eq(cube.base), addr.eq(cube.base)]
        with m.If(self.runs.valid & self.runs.ready):
            with m.If(split):
                m.d.sync += [part2.eq(1), p2_addr.eq(addr + (room << a_sh)),
                             p2_count.eq(n - room)]
            with m.Else():
                m.d.sync += part2.eq(0)
                with m.If(~end_s):
                    m.d.sync += [s.eq(s + 1), addr.eq(addr + sstride)]
                with m.Elif(~end_line):
                    nxt = pos + (n << a_sh)
                    m.d.sync += [s.eq(0), w0.eq(w0 + n), pos.eq(nxt), addr.eq(nxt)]
                with m.Elif(~end_h):
                    nxt = line + lstride
                    m.d.sync += [s.eq(0), w0.eq(0), h.eq(h + 1), line.eq(nxt), pos.eq(nxt),
                                 addr.eq(nxt), glow.eq(glow + gstride)]
                with m.Else():
                    m.d.sync += walking.eq(0)
        return m


class _GroupDma:
    """Mixin: the walker's ``group`` signal driven from the DMA (see the subclasses); with
    ``half=True`` (a configuration with fp16) also the plain input signal ``half`` (1: 2-byte
    elements, ``atom_elems // 2`` channels per atom; :class:`CdpWalker`), sampled at ``start``
    by the walker."""

    def __init__(self, *, half: bool = False, **kw):
        super().__init__(**kw)
        self.half_elems = half
        if half:
            self.half = Signal(name="half")
            self._walker_args = dict(self._walker_args, half=True)

    def add_walker(self, m: Module):
        walker, *rest = super().add_walker(m)
        m.d.comb += walker.group.eq(self.group_source())
        if self.half_elems:
            m.d.comb += walker.half.eq(self.half)
        return (walker, *rest)


class CdpReadDma(_GroupDma, ReadDma):
    """CDP_RDMA: :class:`hdl.dma.ReadDma` in :class:`CdpWalker` order, grouped by its own cube
    (parameters and ports as ReadDma; ``cube`` from CDP_RDMA D_SRC_* and D_DATA_CUBE_*)."""
    walker_class = CdpWalker

    def group_source(self):
        return group_of(self.cube)


class CdpWriteDma(_GroupDma, WriteDma):
    """CDP WDMA: :class:`hdl.dma.WriteDma` in :class:`CdpWalker` order (parameters and ports as
    WriteDma; ``cube`` from CDP D_DST_* and CDP_RDMA D_DATA_CUBE_*), plus ``group``
    In(:func:`group_layout`): the read cube's :func:`group_of`, so that both walkers cut the
    same groups; sampled at ``start``."""
    walker_class = CdpWalker

    def dma_members(self):
        return {**super().dma_members(), "group": In(group_layout())}

    def group_source(self):
        return self.group
