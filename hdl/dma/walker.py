"""Cube walker: the memory runs of a feature cube in NVDLA's traversal order (format.rst
"Feature data": surface, then line, then atom innermost), grouped for AXI bursts.

A *run* is a group of atoms at consecutive addresses that one AXI burst can carry: it lies in one
aligned *burst window* of ``max_burst * beat_bytes`` bytes. Windows divide 4 KB, so a run never
crosses a 4 KB boundary (AXI rule). A run continues across the end of a line (and of a surface)
when the next line (surface) starts right after the last atom, e.g. when
``line_stride == (width + 1) * atom_bytes``; both are properties of the cube, found without a
multiplier: lines by that comparison (a shift of the width), surfaces by comparing running
addresses (the end of a surface's last line with the next surface's start) on entering the last
line. With ``max_burst = 1`` and ``atom_bytes = beat_bytes`` (nv_small) every run is one atom
and one beat.

Also here: what :class:`hdl.dma.ReadDma` and :class:`hdl.dma.WriteDma` share, the parameter checks
(:func:`check_dma_params`), the AXI view of a run (:func:`run_request`) and their base class
:class:`WalkerDma` (parameters, ``start``/``cube``/``busy`` ports, the walker instance).
"""
from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.axi import AXI_LEN_WIDTH
from hdl.dma.cube import CUBE_DIM_BITS, STRIDE_BITS, cube_layout
from hdl.lib.stream import SkidBuffer

__all__ = ["CubeWalker", "RunWalker", "WalkerDma", "atom_group_layout", "check_dma_params", "run_layout", "run_request", "log2"]

AXI_4K = 4096


def log2(x: int) -> int:
    """log2 of a power of two. Raises ValueError otherwise."""
    if x <= 0 or x & (x - 1):
        raise ValueError(f"{x} is not a power of two")
    return x.bit_length() - 1


def check_dma_params(atom_bytes: int, beat_bytes: int, max_burst: int) -> int:
    """Validate the geometry shared by walker and DMAs; returns atoms per burst window.

    Raises ValueError: not powers of two, an atom wider than a beat, ``max_burst`` beyond AXI's
    ``2**AXI_LEN_WIDTH`` beats, or a burst window that does not divide 4 KB.
    """
    for v in (atom_bytes, beat_bytes, max_burst):
        log2(v)
    if atom_bytes > beat_bytes:
        raise ValueError(f"atom ({atom_bytes} B) wider than the AXI beat ({beat_bytes} B)")
    if max_burst > 1 << AXI_LEN_WIDTH:
        raise ValueError(f"max_burst {max_burst} exceeds {1 << AXI_LEN_WIDTH} beats")
    if AXI_4K % (max_burst * beat_bytes):
        raise ValueError(f"burst window {max_burst * beat_bytes} B does not divide 4 KB")
    return max_burst * beat_bytes // atom_bytes


def run_layout(addr_width: int, max_atoms: int) -> data.StructLayout:
    """One run: ``addr`` byte address of its first atom, ``count`` atoms (1..max_atoms),
    ``last`` set on the final run of the cube."""
    return data.StructLayout({"addr": unsigned(addr_width), "count": range(1, max_atoms + 1),
                              "last": 1})


def atom_group_layout(atom_bytes: int, lanes: int) -> data.StructLayout:
    """Payload of a *wide* atom stream (``wide=True`` DMAs): up to ``lanes`` consecutive atoms
    of the traversal order in one transfer. ``data``: ``lanes`` atoms of ``atom_bytes`` bytes,
    the first in bits [8*atom_bytes-1:0]; ``count``: how many of them are atoms (1..lanes; the
    lanes above hold anything)."""
    return data.StructLayout({"data": unsigned(8 * atom_bytes * lanes),
                              "count": unsigned(max(1, lanes).bit_length())})


def run_request(run, atom_bytes: int, beat_bytes: int) -> tuple:
    """AXI view of a run (a ``data.View`` of :func:`run_layout`).

    Returns ``(beat_addr, len, lane0)``: the beat-aligned byte address, the AXI length (beats
    minus one) and the atom lane of the first atom within its beat (0 when an atom fills a
    beat). Pure combinational values.
    """
    a_sh, b_sh = log2(atom_bytes), log2(beat_bytes)
    lanes_sh = b_sh - a_sh
    beat_addr = run.addr & ~(beat_bytes - 1)
    if lanes_sh == 0:
        return beat_addr, (run.count - 1)[:AXI_LEN_WIDTH], 0
    lane0 = run.addr[a_sh:b_sh]
    length = ((lane0 + run.count - 1) >> lanes_sh)[:AXI_LEN_WIDTH]
    return beat_addr, length, lane0


class RunWalker(wiring.Component):
    """Base of the cube walkers (a subclass's ``elaborate`` gives the traversal order): their
    parameters and ports.

    Parameters: ``addr_width`` (address bits), ``atom_bytes`` (bytes per memory atom),
    ``atom_elems`` (channels per atom = per surface), ``beat_bytes`` (AXI data bytes),
    ``max_burst`` (beats per burst). All powers of two (see :func:`check_dma_params`, which
    raises ValueError otherwise). Attributes: the parameters, ``max_atoms`` (atoms per burst
    window), ``atom_elems_log2``.

    Ports:
      ``start`` In(1) pulse: latch ``cube`` and begin (ignored while ``busy``);
      ``cube`` In(:func:`hdl.dma.cube.cube_layout`); base and strides must be multiples of
      ``atom_bytes``;
      ``runs`` Out(stream of :func:`run_layout` ``(addr_width, max_atoms)``);
      ``busy`` Out(1): runs remain.
    """

    def __init__(self, *, addr_width: int, atom_bytes: int, atom_elems: int, beat_bytes: int,
                 max_burst: int):
        self.max_atoms = check_dma_params(atom_bytes, beat_bytes, max_burst)
        self.atom_elems_log2 = log2(atom_elems)
        self.addr_width, self.atom_bytes, self.atom_elems = addr_width, atom_bytes, atom_elems
        self.beat_bytes, self.max_burst = beat_bytes, max_burst
        self._run_layout = run_layout(addr_width, self.max_atoms)
        super().__init__({
            "start": In(1),
            "cube": In(cube_layout(addr_width)),
            "runs": Out(stream.Signature(self._run_layout)),
            "busy": Out(1),
        })

    @property
    def walker_args(self) -> dict:
        """The parameters this walker was built with (to build inner walkers alike)."""
        return dict(addr_width=self.addr_width, atom_bytes=self.atom_bytes,
                    atom_elems=self.atom_elems, beat_bytes=self.beat_bytes,
                    max_burst=self.max_burst)


class CubeWalker(RunWalker):
    """Run generator for one feature cube in NVDLA's traversal order.

    Parameters, ``start``/``cube``/``busy``: see :class:`RunWalker`.

    Ports:
      ``runs`` Out(stream of :func:`run_layout`): the cube's atoms in traversal order (surface,
      line, atom) as maximal runs: a run ends where the next atom is not at the next address
      or where its burst window ends (so it may span lines and surfaces that are contiguous in
      memory, never two burst windows).

    Rate and latency: the walk advances by one line-piece (the atoms of one line inside one
    burst window) per cycle, looking one piece ahead: a piece whose successor starts at the
    address right after it, in the same window, is held and the successor appended (a run of k
    pieces leaves at the cycle of its last piece); any other piece ends its run at once. The
    first run is valid the cycle after ``start`` when it is one piece. With ``max_burst > 1`` a
    one-run fall-through buffer lets the walk go on while the consumer holds a run (a write DMA
    takes a run's atoms one per cycle), so runs carry at least one line-piece per cycle. Addresses
    wrap modulo ``2**addr_width``; a run never wraps.
    """

    def elaborate(self, platform):
        m = Module()
        a_sh = log2(self.atom_bytes)
        win_sh = log2(self.max_burst * self.beat_bytes)
        big = self.max_atoms                   # atoms per burst window
        cube = self.cube
        aw = self.addr_width

        # --- line pieces: the atoms of one line inside one burst window, one per cycle ---
        # Issue 10: every decision about the current piece (does it end its line, its surface,
        # the cube; how many atoms; may it merge into the next) is a register computed when the
        # previous piece was taken, from registers by at most one addition or comparison; the
        # loop register -> comparison -> next state (SDP's critical path on ECP5, 10.9 ns, through
        # left_line = w_max + 1 - w, left_line <= avail, then the next w/h/s/line values) is gone.
        # Lines and surfaces left are down-counters whose end flags are loaded one piece ahead.
        w1 = Signal(CUBE_DIM_BITS + 1)         # atoms per line (width + 1)
        w1_small = Signal()                    # a whole line fits a burst window (w1 <= big)
        h_max = Signal(CUBE_DIM_BITS)
        h_zero = Signal()                      # one line per surface
        lstride = Signal(STRIDE_BITS)
        sstride = Signal(STRIDE_BITS)
        addr = Signal(aw)                      # first atom of the current piece
        line = Signal(aw)                      # start of the current line
        surf = Signal(aw)                      # start of the current surface
        walking = Signal()
        left = Signal(CUBE_DIM_BITS + 1)       # atoms of the line from addr on (>= 1)
        count = Signal(range(big + 1))         # atoms of the current piece
        end_line = Signal()                    # the piece ends its line (count == left)
        h_left = Signal(CUBE_DIM_BITS)         # lines of the surface after the current one
        end_h = Signal()                       # h_left == 0
        s_left = Signal(CUBE_DIM_BITS)         # surfaces after the current one
        end_s = Signal()                       # s_left == 0
        wend = Signal()                        # the piece ends at the end of its burst window

        next_line = Signal(aw)                 # start of the next line of this surface
        next_surf = Signal(aw)                 # start of the next surface
        m.d.comb += [next_line.eq(line + lstride), next_surf.eq(surf + sstride)]

        def line_start(a_lo, width1, small):
            """(end_line, count, wend) of the first piece of a line at an address whose atom
            index in its window is ``a_lo``: ``width1`` atoms (``small``: width1 <= big)."""
            if big == 1:
                return width1 == 1, 1, 1
            avail = Signal(range(big + 1))
            m.d.comb += avail.eq(big - a_lo)
            w_lo = width1[:log2(big) + 1]
            end = small & (w_lo <= avail)
            return end, Mux(end, width1, avail), ~small | (w_lo >= avail)

        def lo(a):
            return a[a_sh:win_sh] if win_sh > a_sh else 0

        piece = stream.Signature(self._run_layout).create()
        last = Signal()
        m.d.comb += [last.eq(end_line & end_h & end_s),
                     piece.valid.eq(walking), piece.payload.addr.eq(addr),
                     piece.payload.count.eq(count), piece.payload.last.eq(last)]

        def load_line(start_addr, width1, small):
            """The next piece is the first of a line starting at ``start_addr``."""
            end, cnt, we = line_start(lo(start_addr), width1, small)
            m.d.sync += [addr.eq(start_addr), left.eq(width1), end_line.eq(end), count.eq(cnt),
                         wend.eq(we)]

        # --- merge flags (max_atoms > 1): a piece that ends its line, not at its window's end,
        # continues into the next line (surface) when that starts right after it; both are
        # properties of the cube (issue 10: no 32-bit comparison on the piece's ready path).
        # lines_contig: line_stride == (width + 1) atoms (modulo the address space);
        # surf_contig, valid while the current line is the last of its surface: the next
        # surface starts right after it (loaded on entering the last line) ---
        lines_contig = Signal()
        surf_contig = Signal()
        wbytes = Signal(aw)
        s0_contig = Signal()                   # surface_stride == (width + 1) atoms
        in_wbytes = Signal(aw)
        m.d.comb += in_wbytes.eq((cube.width + 1) << a_sh)

        left_next = Signal.like(left)          # after a piece cut by its window
        m.d.comb += left_next.eq(left - count)
        with m.If(self.start & ~self.busy):
            m.d.sync += [walking.eq(1), line.eq(cube.base), surf.eq(cube.base),
                         w1.eq(cube.width + 1), w1_small.eq(cube.width < big),
                         h_max.eq(cube.height), h_zero.eq(cube.height == 0),
                         h_left.eq(cube.height), end_h.eq(cube.height == 0),
                         lstride.eq(cube.line_stride), sstride.eq(cube.surface_stride),
                         wbytes.eq(in_wbytes)]
            s_first = cube.channel >> self.atom_elems_log2
            m.d.sync += [s_left.eq(s_first), end_s.eq(s_first == 0)]
            load_line(cube.base, cube.width + 1, cube.width < big)
            if big > 1:
                s0 = cube.surface_stride[:aw] == in_wbytes
                m.d.sync += [lines_contig.eq(cube.line_stride[:aw] == in_wbytes),
                             s0_contig.eq(s0), surf_contig.eq(s0)]
        with m.If(piece.valid & piece.ready):
            with m.If(~end_line):
                # the piece was cut by its window: the next one starts a window
                if big == 1:
                    m.d.sync += end_line.eq(left == 2)
                else:
                    m.d.sync += [end_line.eq(left_next <= big), wend.eq(left_next >= big),
                                 count.eq(Mux(left_next <= big, left_next, big))]
                m.d.sync += [left.eq(left_next), addr.eq(addr + (count << a_sh))]
            with m.Elif(~end_h):
                m.d.sync += [h_left.eq(h_left - 1), end_h.eq(h_left == 1), line.eq(next_line)]
                load_line(next_line, w1, w1_small)
                if big > 1:
                    with m.If(h_left == 1):
                        m.d.sync += surf_contig.eq((next_line + wbytes)[:aw] == next_surf)
            with m.Elif(~end_s):
                m.d.sync += [h_left.eq(h_max), end_h.eq(h_zero),
                             s_left.eq(s_left - 1), end_s.eq(s_left == 1),
                             surf.eq(next_surf), line.eq(next_surf)]
                load_line(next_surf, w1, w1_small)
                if big > 1:
                    m.d.sync += surf_contig.eq(s0_contig)
            with m.Else():
                m.d.sync += walking.eq(0)

        if big == 1:
            # every piece fills its window: nothing can be merged
            wiring.connect(m, piece, wiring.flipped(self.runs))
            m.d.comb += self.busy.eq(walking)
            return m

        # --- merge: a piece continues into its successor when that starts right after it, in
        # the same window ---
        cont = Signal()
        m.d.comb += cont.eq(end_line & ~wend & ~last & Mux(end_h, surf_contig, lines_contig))
        held_valid = Signal()                  # a run's first pieces are held
        held_addr = Signal(aw)
        held_count = Signal(range(big + 1))
        run = Signal(self._run_layout)         # the run ending with this piece (if ~cont)
        m.d.comb += [run.addr.eq(Mux(held_valid, held_addr, addr)),
                     run.count.eq(Mux(held_valid, held_count, 0) + count),
                     run.last.eq(last)]
        # fall-through buffer of one run
        buf = Signal(self._run_layout)
        buf_valid = Signal()
        buf_free = Signal()                    # empty, or its run leaves this cycle
        run_valid = Signal()
        m.d.comb += [
            run_valid.eq(piece.valid & ~cont),
            buf_free.eq(~buf_valid | self.runs.ready),
            self.runs.valid.eq(buf_valid | run_valid),
            self.runs.payload.eq(Mux(buf_valid, buf, run)),
            piece.ready.eq(cont | buf_free),
            self.busy.eq(walking | buf_valid),
        ]
        with m.If(piece.valid & piece.ready):
            m.d.sync += [held_valid.eq(cont), held_addr.eq(run.addr), held_count.eq(run.count)]
        with m.If(buf_free):
            # the run goes out now when nothing is buffered and it is taken, else it waits here
            m.d.sync += [buf_valid.eq(run_valid & (buf_valid | ~self.runs.ready)), buf.eq(run)]
        return m


class WalkerDma(wiring.Component):
    """Base of :class:`hdl.dma.ReadDma` and :class:`hdl.dma.WriteDma`: their shared parameters,
    ports and walker (``walker_class``, :class:`CubeWalker` unless a subclass changes it). A
    subclass defines :meth:`dma_members` and ``spare_depth``.

    Parameters: ``addr_width`` (bits), ``atom_bytes``, ``atom_elems`` (channels per atom),
    ``beat_bytes`` (AXI data bytes), ``max_burst`` (beats per AXI burst), ``depth`` (the
    subclass's FIFO depth, beats; at least ``max_burst + spare_depth``), ``atom_shape`` (payload
    shape of the atom stream; default ``unsigned(8 * atom_bytes)``, byte i of the atom in bits
    [8i+7:8i]).

    ``wide`` (default False): the atom stream carries up to one beat of atoms per transfer
    (:func:`atom_group_layout` with ``lanes`` = ``beat_bytes // atom_bytes``), so a DMA moves one
    AXI beat per cycle instead of one atom; ``atom_shape`` must then be left at its default.

    Ports: ``start`` In(1) pulse (ignored while busy); ``cube`` In(cube_layout) sampled at
    ``start``; the subclass's :meth:`dma_members`; ``busy`` Out(1).

    Raises ValueError: see :func:`check_dma_params`, or ``depth < max_burst + spare_depth``, or
    ``wide`` with an ``atom_shape``.
    """

    #: FIFO beats the subclass needs beyond one burst
    spare_depth = 0
    #: the :class:`RunWalker` that orders the atoms (a unit with another order sets its own)
    walker_class = CubeWalker

    def __init__(self, *, addr_width: int, atom_bytes: int, atom_elems: int, beat_bytes: int,
                 max_burst: int, depth: int, atom_shape=None, wide: bool = False):
        if wide and atom_shape is not None:
            raise ValueError(f"{type(self).__name__}: a wide atom stream carries plain atoms; "
                             f"atom_shape {atom_shape!r} given")
        if depth < max_burst + self.spare_depth:
            raise ValueError(f"{type(self).__name__}: depth {depth} below "
                             f"{max_burst + self.spare_depth} beats (max_burst {max_burst})")
        check_dma_params(atom_bytes, beat_bytes, max_burst)     # now, not at elaboration
        log2(atom_elems)
        self._walker_args = dict(addr_width=addr_width, atom_bytes=atom_bytes,
                                 atom_elems=atom_elems, beat_bytes=beat_bytes, max_burst=max_burst)
        self.addr_width, self.atom_bytes, self.beat_bytes = addr_width, atom_bytes, beat_bytes
        self.max_burst, self.depth = max_burst, depth
        self.lanes = beat_bytes // atom_bytes          # atoms per beat
        self.atom_bits = atom_bytes * 8
        self.wide = wide
        self.atom_shape = (atom_group_layout(atom_bytes, self.lanes) if wide
                           else atom_shape if atom_shape is not None else unsigned(atom_bytes * 8))
        super().__init__({"start": In(1), "cube": In(cube_layout(addr_width)),
                          **self.dma_members(), "busy": Out(1)})

    def dma_members(self) -> dict:
        """The subclass's own signature members (its memory-side and atom-side ports)."""
        raise NotImplementedError

    def add_walker(self, m: Module):
        """Add a ``walker_class`` instance to ``m``, started by ``start`` on ``cube``.

        Returns ``(walker, beat_addr, len, lane0)``: the walker and :func:`run_request` of the
        run at its output."""
        m.submodules.walker = walker = self.walker_class(**self._walker_args)
        m.d.comb += [walker.start.eq(self.start), walker.cube.eq(self.cube)]
        return (walker, *run_request(walker.runs.payload, self.atom_bytes, self.beat_bytes))

    def add_runs(self, m: Module):
        """:meth:`add_walker`, its runs through a :class:`hdl.lib.stream.SkidBuffer`
        (``run_skid``): the DMA's decision to take a run (ReadDma's credit check, WriteDma's end
        of run) does not reach the walker's next-run logic combinationally (issue 10: each was
        SDP's critical path on ECP5, 12.5 and 11.3 ns). Returns ``(walker, runs)``, ``runs`` the
        skid buffer's output stream (one cycle behind the walker)."""
        walker, *_ = self.add_walker(m)
        m.submodules.run_skid = skid = SkidBuffer(walker.runs.payload.shape())
        wiring.connect(m, walker.runs, skid.i)
        return walker, skid.o
