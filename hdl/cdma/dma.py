"""CDMA's two read DMAs (v1_ias_unit_description.rst "Convolution DMA"): the shared
:class:`hdl.dma.ReadDma` with CDMA's traversal orders.

* Feature data (DC, DATAIN_FORMAT = FEATURE): the first ``band`` lines surface by surface, then
  line by line (docs/conv.md "CDMA"; :class:`FeatureBandWalker`): CSC's loop over channel
  blocks is outside its loop over kernel rows, so its first stripe needs a few lines of the first
  surface before anything else; the rest comes line by line so that CSC can go on with the next
  lines as they arrive. Atom (x, y, cb) is at ``base + cb * surface_stride + y * line_stride +
  x * atom_bytes``.
* Weights: ``entries`` consecutive atoms from the weight address, never more than the ring
  allows ahead of CSC's releases (:class:`WeightWalker`: a run never goes past ``limit``).

Both produce maximal runs of consecutive addresses inside one burst window, so MCIF can issue
bursts of ``max_burst`` beats.
"""
from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib.wiring import In

from hdl.dma import ReadDma
from hdl.dma.cube import CUBE_DIM_BITS
from hdl.dma.walker import CubeWalker, RunWalker, log2

__all__ = ["FeatureLineWalker", "FeatureBandWalker", "FeatureReadDma", "WeightWalker",
           "WeightReadDma", "ENTRY_COUNT_BITS", "BAND_BITS"]

#: bits of weight entry counts and indices (D_WEIGHT_BYTES is 32 bits: at most 2**32 / 8
#: entries on nv_small; wt_entries / wt_released are 32 bits, docs/conv.md)
ENTRY_COUNT_BITS = 32
#: bits of a band height in lines (0 .. DATAIN_HEIGHT+1 = 8192)
BAND_BITS = CUBE_DIM_BITS + 1


class FeatureLineWalker(RunWalker):
    """Runs of a feature cube line by line: for line y, for surface cb, the atoms x of line y
    of surface cb (a :class:`hdl.dma.walker.RunWalker`; CDMA's DC fetch order).

    Parameters and ports as :class:`hdl.dma.walker.RunWalker`; ``cube`` is the feature cube
    (``base``, ``line_stride``, ``surface_stride`` in bytes; ``width``, ``height``,
    ``channel`` minus-one element counts; surfaces of ``atom_elems`` channels). Atom (x, y, cb)
    is at ``base + cb * surface_stride + y * line_stride + x * atom_bytes``.

    Implementation: this order is the shared :class:`hdl.dma.CubeWalker`'s (surface, line,
    atom) with the roles of lines and surfaces exchanged, so an inner CubeWalker (one element
    per "atom", so its channel count is a plain count) walks the transposed cube: its surfaces
    are our lines (stride ``line_stride``, ``height + 1`` of them) and its lines our surfaces
    (stride ``surface_stride``). Runs are maximal as CubeWalker's: they continue from one
    surface's line into the next surface's line when that is the next address, never across a
    burst window. Rate and latency: CubeWalker's (one line piece per cycle, the first run the
    cycle after ``start``).
    """

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = CubeWalker(
            addr_width=self.addr_width, atom_bytes=self.atom_bytes, atom_elems=1,
            beat_bytes=self.beat_bytes, max_burst=self.max_burst)
        cube = self.cube
        m.d.comb += [
            inner.start.eq(self.start),
            inner.cube.base.eq(cube.base),
            inner.cube.line_stride.eq(cube.surface_stride),
            inner.cube.surface_stride.eq(cube.line_stride),
            inner.cube.width.eq(cube.width),
            inner.cube.height.eq(cube.channel >> self.atom_elems_log2),
            inner.cube.channel.eq(cube.height),
            self.runs.valid.eq(inner.runs.valid),
            inner.runs.ready.eq(self.runs.ready),
            self.runs.payload.eq(inner.runs.payload),
            self.busy.eq(inner.busy),
        ]
        return m


class FeatureBandWalker(RunWalker):
    """Runs of a feature cube in CDMA's DC order: the first ``band`` lines in the shared
    :class:`hdl.dma.CubeWalker` order (surface, line, atom), then the remaining lines in
    :class:`FeatureLineWalker` order (line, surface, atom).

    Parameters and ports as :class:`hdl.dma.walker.RunWalker`, plus the input signal ``band``
    (:data:`BAND_BITS` bits, sampled at ``start``): lines of the first part, 0 (line order
    throughout) to ``cube.height + 1`` (surface order throughout; larger values count as that).
    ``cube`` must stay stable until ``busy`` falls (the second part starts from it, at
    ``base + band * line_stride``, computed by adding ``line_stride`` ``band`` times, one per
    cycle, while the first part runs).

    Why (docs/conv.md "CDMA"): CSC works through channel blocks outermost, so with the first
    band fetched surface by surface its first stripe can start once the band's first surface
    is in, instead of after whole lines of every surface.

    ``step`` (input, :data:`BAND_BITS` bits, sampled at ``start``): 0, the remaining lines line
    by line as above; otherwise they come as further bands of ``step`` lines (the last one
    shorter), each surface by surface (the first part's order, band after band), so that CSC's
    later stripes, too, start on their lines' first surface.

    ``hold`` (input, 1 bit): while it is set after a non-empty band, the remaining lines wait
    (the next band or the line-by-line part starts when it falls).
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.band = Signal(BAND_BITS, name="band")
        self.step = Signal(BAND_BITS, name="step")
        self.hold = Signal(name="hold")

    def elaborate(self, platform):
        m = Module()
        args = self.walker_args
        m.submodules.first = first = CubeWalker(**args)
        m.submodules.rest = rest = FeatureLineWalker(**args)
        cube = self.cube
        n_first = Signal(BAND_BITS)             # lines of the first part (of the current band)
        n_rest = Signal(BAND_BITS)              # lines of the second part (after this band)
        step = Signal(BAND_BITS)                # bands after the first: their lines (0: none)
        band_base = Signal(self.addr_width)     # the current band's first line
        steps = Signal(BAND_BITS)               # line_stride additions still to do
        rest_base = Signal(self.addr_width)
        phase = Signal()                        # 1: the second part's runs
        rest_pending = Signal()                 # second part to start
        walking = Signal()
        lines = Signal(BAND_BITS)
        m.d.comb += lines.eq(cube.height + 1)
        clipped = Mux(self.band > lines, lines, self.band)

        m.d.comb += [
            first.cube.eq(cube),
            first.cube.base.eq(band_base),
            first.cube.height.eq(n_first - 1),
            rest.cube.eq(cube),
            rest.cube.base.eq(rest_base),
            rest.cube.height.eq(n_rest - 1),
            self.busy.eq(walking),
        ]
        with m.If(phase):
            m.d.comb += [self.runs.valid.eq(rest.runs.valid),
                         self.runs.payload.eq(rest.runs.payload),
                         rest.runs.ready.eq(self.runs.ready)]
        with m.Else():
            m.d.comb += [self.runs.valid.eq(first.runs.valid),
                         self.runs.payload.eq(first.runs.payload),
                         first.runs.ready.eq(self.runs.ready)]
        # a run's ``last`` marks the whole walk's last run: the first part's only without a rest
        m.d.comb += self.runs.payload.last.eq(
            Mux(phase, rest.runs.payload.last, first.runs.payload.last & (n_rest == 0)))

        first_go = Signal()
        with m.If(self.start & ~walking):
            m.d.sync += [walking.eq(1), n_first.eq(clipped), n_rest.eq(lines - clipped),
                         steps.eq(clipped), rest_base.eq(cube.base), phase.eq(clipped == 0),
                         rest_pending.eq(1), first_go.eq(clipped != 0), step.eq(self.step),
                         band_base.eq(cube.base)]
        with m.Else():
            m.d.sync += first_go.eq(0)
        m.d.comb += first.start.eq(first_go)
        with m.If(steps != 0):
            m.d.sync += [steps.eq(steps - 1), rest_base.eq(rest_base + cube.line_stride)]
        # the second part starts when the first has finished (or never ran) and its base is known
        go_rest = Signal()
        held = self.hold & (n_first != 0) & (n_rest != 0)
        m.d.comb += go_rest.eq(walking & rest_pending & (steps == 0) & ~first_go & ~first.busy
                               & ~held)
        next_band = Signal()                    # go_rest: one more band surface by surface
        m.d.comb += next_band.eq((step != 0) & (n_first != 0) & (n_rest != 0))
        nb = Mux(n_rest < step, n_rest, step)
        with m.If(go_rest & next_band):
            m.d.sync += [n_first.eq(nb), n_rest.eq(n_rest - nb), steps.eq(nb),
                         band_base.eq(rest_base), first_go.eq(1)]
        with m.Elif(go_rest):
            m.d.sync += [rest_pending.eq(0), phase.eq(1)]
            with m.If(n_rest == 0):
                m.d.sync += walking.eq(0)
        m.d.comb += rest.start.eq(go_rest & ~next_band & (n_rest != 0))
        with m.If(phase & ~rest_pending & ~rest.busy & walking & (n_rest != 0)
                  & ~rest.start):
            m.d.sync += walking.eq(0)
        return m


class FeatureReadDma(ReadDma):
    """CDMA_DAT feature fetch: :class:`hdl.dma.ReadDma` in :class:`FeatureBandWalker` order
    (parameters and ports as ReadDma; ``cube`` from CDMA D_DAIN_ADDR_*_0, D_LINE_STRIDE,
    D_SURF_STRIDE, D_DATAIN_SIZE_*, stable while busy) plus ``band`` In(:data:`BAND_BITS`):
    lines fetched surface by surface first (sampled at ``start``; 0: line by line), ``step``
    In(:data:`BAND_BITS`): the later lines in bands of that many lines (0: line by line), and
    ``hold`` In(1): the lines after the band wait while it is set (:class:`FeatureBandWalker`)."""

    walker_class = FeatureBandWalker

    def dma_members(self):
        return {**super().dma_members(), "band": In(BAND_BITS), "step": In(BAND_BITS),
                "hold": In(1)}

    def add_walker(self, m: Module):
        walker, *rest = super().add_walker(m)
        m.d.comb += [walker.band.eq(self.band), walker.step.eq(self.step),
                     walker.hold.eq(self.hold)]
        return (walker, *rest)


class WeightWalker(RunWalker):
    """Runs of ``entries`` consecutive atoms from ``cube.base`` (the weight stream), never
    past atom index ``limit`` (a :class:`hdl.dma.walker.RunWalker`).

    Parameters as RunWalker. Ports: ``start`` In(1) pulse: begin at ``cube.base`` (only
    ``base`` of ``cube`` is used; a multiple of ``atom_bytes``), ignored while ``busy``;
    ``runs`` Out(stream of run_layout); ``busy`` Out(1). Extra input signals (plain signals
    driven by the owning DMA, like :class:`hdl.pdp.dma.BandWalker`'s ``band``):
    ``entries`` (:data:`ENTRY_COUNT_BITS` bits) atoms to read, sampled at ``start`` (0: no run);
    ``limit`` (same width): a run only covers atom indices below ``limit``; the walk waits while
    the next atom index is not below it (flow control by the weight ring: ``limit`` =
    released entries + ring capacity; it may only grow during a walk).

    A run is the longest piece that stays in one burst window, in the stream and below
    ``limit``. One run per cycle; the first valid two cycles after ``start``. ``limit`` is
    sampled with one cycle of delay, and only while no run waits to be taken (a waiting run
    keeps its payload), so a run may be shorter than the limit would allow by then.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.entries = Signal(ENTRY_COUNT_BITS, name="entries")
        self.limit = Signal(ENTRY_COUNT_BITS, name="limit")

    def elaborate(self, platform):
        m = Module()
        a_sh = log2(self.atom_bytes)
        win_sh = log2(self.max_burst * self.beat_bytes)
        mx = self.max_atoms
        addr = Signal(self.addr_width)
        idx = Signal(ENTRY_COUNT_BITS)          # next atom index
        rem = Signal(ENTRY_COUNT_BITS)          # atoms left in the stream (>= 1 while walking)
        walking = Signal()

        avail = Signal(range(mx + 1))           # atoms left in the burst window
        if win_sh > a_sh:
            m.d.comb += avail.eq(mx - addr[a_sh:win_sh])
        else:
            m.d.comb += avail.eq(1)
        # A run is at most max_atoms long, so the stream's and the limit's room only matter up
        # to max_atoms. Both are known from the signs of registers kept next to ``rem`` and
        # ``idx`` (issue 10: a 32-bit subtraction (limit - idx) and 32-bit zero tests (rem, the
        # limit's room above the window) before the run-length choice, and that choice into the
        # run's valid and the 32-bit updates of idx, were CDMA's critical path on ECP5):
        # ``rem_m`` = rem - (max_atoms + 1) (< 0: rem <= max_atoms), ``g1`` = lim - idx - 1
        # (>= 0: the limit allows a run) and ``gm`` = lim - idx - (max_atoms + 1) (>= 0: it
        # allows a whole window), where ``lim`` is ``limit`` as sampled while no run waits (so
        # that a run offered and not yet taken keeps its payload, lib.stream rule), 0 right
        # after ``start`` (the caller's limit may still be the previous layer's in the start
        # cycle): the same runs as with ``lim`` and the differences computed each cycle.
        k = mx.bit_length()                     # bits of 0..max_atoms
        small = range(mx + 1)
        wide = signed(ENTRY_COUNT_BITS + 2)
        rem_m, g1, gm = Signal(wide), Signal(wide), Signal(wide)
        rem_s = Signal(small)                   # min(rem, max_atoms)
        room_s = Signal(small)                  # min(max(lim - idx, 0), max_atoms)
        m.d.comb += [
            rem_s.eq(Mux(rem_m[-1], rem[:k], mx)),
            room_s.eq(Mux(g1[-1], 0, Mux(gm[-1], g1[:k] + 1, mx))),
        ]
        c1 = Signal(small)
        count = Signal(small)
        m.d.comb += [
            c1.eq(Mux(rem_s < avail, rem_s, avail)),
            count.eq(Mux(room_s < c1, room_s, c1)),
            # count != 0: rem >= 1 while walking and avail >= 1, so the limit's room decides
            self.runs.valid.eq(walking & ~g1[-1]),
            self.runs.payload.addr.eq(addr),
            self.runs.payload.count.eq(count),
            self.runs.payload.last.eq(rem_m[-1] & (count == rem[:k])),
            self.busy.eq(walking),
        ]
        take = self.runs.valid & self.runs.ready
        # limit - idx - 1 in one adder: ~idx (sign-extended) = -idx - 1
        idx_x = Signal(wide)
        base1 = Signal(wide)
        m.d.comb += [idx_x.eq(idx), base1.eq(self.limit + ~idx_x)]
        with m.If(take):
            m.d.sync += [g1.eq(base1 - count), gm.eq(base1 - (count + mx))]
        with m.Elif(~self.runs.valid):
            m.d.sync += [g1.eq(base1), gm.eq(base1 - mx)]
        with m.If(self.start & ~walking):
            m.d.sync += [walking.eq(self.entries != 0), idx.eq(0), rem.eq(self.entries),
                         rem_m.eq(self.entries - (mx + 1)), addr.eq(self.cube.base),
                         g1.eq(-1), gm.eq(-(mx + 1))]
        with m.If(take):
            m.d.sync += [idx.eq(idx + count), rem.eq(rem - count), rem_m.eq(rem_m - count),
                         addr.eq(addr + (count << a_sh))]
            with m.If(self.runs.payload.last):
                m.d.sync += walking.eq(0)
        return m


class WeightReadDma(ReadDma):
    """CDMA_WT weight fetch: :class:`hdl.dma.ReadDma` in :class:`WeightWalker` order.
    Parameters and ports as ReadDma (only ``cube.base`` is used: the weight address) plus
    ``entries`` In(32) atoms to read (sampled at ``start``) and ``limit`` In(32) (no atom index
    at or above it is requested; it may only grow during a fetch)."""

    walker_class = WeightWalker

    def dma_members(self):
        return {**super().dma_members(), "entries": In(ENTRY_COUNT_BITS),
                "limit": In(ENTRY_COUNT_BITS)}

    def add_walker(self, m: Module):
        walker, *rest = super().add_walker(m)
        m.d.comb += [walker.entries.eq(self.entries), walker.limit.eq(self.limit)]
        return (walker, *rest)
