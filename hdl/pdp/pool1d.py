"""PDP width pass ("pooling 1D", v1_ias_unit_description.rst "Planar Data Processor": the
pre-processing of each kernel row), one stream item = ``lanes`` channels of one input column.

Input order: surface, line, column, channel group (``groups`` = atom / lanes items per column).
For every line the stage emits one item per output column ``ox`` (and group): the reduction of the
line's elements at padded columns ``ox*sx .. ox*sx + kw - 1`` (padded column = column + PAD_LEFT).

* MAX / MIN: over the real elements of the window (padding is ignored; programming guide
  D_POOLING_PADDING_VALUE_*: the padding value is used in average mode only).
* AVE: the sum of the real elements in 11 bits; when only ``n < kw`` columns of the window are real,
  PAD_VALUE_{kw-n}X[10:0] (sign-extended) is added, wrapping to 11 bits (NVIDIA's nv_small RTL,
  NV_NVDLA_PDP_CORE_cal1d.v; the same fact is documented in verif/model/pdp.py).

How: the last 7 columns of every group are kept in a history register file; a window ending at the
current column is made of the current item and the history (age ``a`` = how many columns back,
valid when ``a + d <= kw - 1`` and ``a <= x``, ``d`` = how far the window end lies beyond the
current column); its 8 columns, valid flags and AVE padding term are registered and reduced in
the next stage. Windows that end in the right padding are emitted from a snapshot
of the history taken at the line end (``tail``): the first one with the last column's items, the
others by a flush engine that runs while the next line's leading items (which end no window) are
consumed, so right padding costs no extra cycles when PAD_LEFT + PAD_RIGHT <= kernel - 1.
Output items keep the order line, ox, group (the flush has priority; a new line's emitting item
waits until the flush is done).

Parameters (held stable during a band; ``band_next`` pulses after the band's last item so the
parent can present the next band's ``last_col``/``pad_left``/``out_width``; the next band's
``last_col``/``pad_left`` are also read ahead, when the band's last line ends): see the port list.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.lib.fixed import sign_extend
from hdl.lib.stream import Map, SkidBuffer

__all__ = ["Pool1d", "row_item_layout", "POOL_AVE", "POOL_MAX", "POOL_MIN", "HIST", "DIM_BITS"]

POOL_AVE, POOL_MAX, POOL_MIN = 0, 1, 2      # D_OPERATION_MODE_CFG.POOLING_METHOD
HIST = 7                                    # kernel width <= 8: 7 previous columns
DIM_BITS = 14                               # counts up to 8192 (13-bit minus-one fields)
ROW_BITS = 11                               # width-pass sum (cal1d.v)


def _bits(n: int) -> int:
    return max(1, (n - 1).bit_length())


def row_item_layout(lanes: int, groups: int, value=signed(ROW_BITS)) -> data.StructLayout:
    """Width-pass result: ``v`` ``lanes`` x ``value`` (default signed(11): the INT8 sums, int8
    values for MAX/MIN; :class:`hdl.pdp.pool16.Pool1d16` passes its own), ``ox`` output
    column, ``g`` channel group, ``h`` input line, ``last_row`` (h is the last line of the
    surface), ``row_end`` (last item of the line: ox = out_width - 1 and g = groups - 1)."""
    return data.StructLayout({
        "v": data.ArrayLayout(value, lanes),
        "ox": unsigned(DIM_BITS), "g": unsigned(_bits(groups)), "h": unsigned(DIM_BITS),
        "last_row": 1, "row_end": 1,
    })


class Pool1d(wiring.Component):
    """Width pass of PDP (module docstring).

    Parameters: ``lanes`` (elements per item = cfg.pdp_throughput), ``groups`` (items per input
    column = atom / lanes; a power of two).

    Ports: ``i`` In(stream of ArrayLayout(signed(8), lanes)) (``ELEM``); ``o`` Out(stream of
    :func:`row_item_layout`); ``start`` In(1) pulse: reset the position counters (layer start);
    ``method`` In(2); ``kw`` In(4) kernel width 1..8; ``sx`` In(5) stride 1..16; ``last_col``
    In(14) the band's last input column (columns read - 1); ``pad_left`` In(3); ``out_width``
    In(14) band output width (>= 1); ``next_last_col`` In(14), ``next_pad_left`` In(3) the next
    band's ``last_col`` / ``pad_left``, valid while a band's last line is taken (read when it
    ends; the band's own values are read from the cycle after ``band_next``, and in the cycle
    after ``start``); ``height`` In(14) lines per surface; ``surfaces`` In(14) surfaces per band;
    ``pads`` In(ArrayLayout(19, 8)) raw PAD_VALUE_kX registers at index k (index 0 unused);
    ``band_next`` Out(1) one-cycle pulse after the last item of a band.
    Throughput: one input item per cycle, one output item per cycle (none in the cycle after
    ``start``, while the position flags load). Latency: four cycles (the emitted window's
    columns are registered, then reduced in three stages).
    """

    #: shape of an input element and of an output value (a subclass for other element widths
    #: sets its own, :class:`hdl.pdp.pool16.Pool1d16`)
    ELEM = signed(8)
    VALUE = signed(ROW_BITS)

    def __init__(self, lanes: int, groups: int):
        if groups & (groups - 1):
            raise ValueError(f"groups must be a power of two, not {groups}")
        self.lanes, self.groups = lanes, groups
        self._row = row_item_layout(lanes, groups, self.VALUE)
        super().__init__({
            "i": In(stream.Signature(data.ArrayLayout(self.ELEM, lanes))),
            "o": Out(stream.Signature(self._row)),
            "start": In(1),
            "method": In(2), "kw": In(4), "sx": In(5),
            "last_col": In(DIM_BITS), "pad_left": In(3), "out_width": In(DIM_BITS),
            "next_last_col": In(DIM_BITS), "next_pad_left": In(3),
            "height": In(DIM_BITS), "surfaces": In(DIM_BITS),
            "pads": In(data.ArrayLayout(unsigned(19), 8)),
            "band_next": Out(1),
            **self._extra_members(),
        })

    def _extra_members(self) -> dict:
        """Ports a subclass adds to the signature (none here)."""
        return {}

    def _valid(self, m, d, xcur, name):
        """Which of the 8 ages (0 = newest column) are real columns of the window ending ``d``
        columns beyond the newest column, whose column index is ``xcur``: a Signal(8)."""
        kw = self.kw
        valid = Signal(HIST + 1, name=f"{name}_valid")
        m.d.comb += [valid[a].eq((a + d <= kw - 1) & ((a <= xcur) if a else 1))
                     for a in range(HIST + 1)]
        return valid

    def _pad(self, m, d, xcur, name):
        """AVE's padding term of the window ending ``d`` columns beyond the newest column
        (column index ``xcur``): PAD_VALUE_{kw-n}X[10:0] sign-extended when only ``n < kw`` of
        its columns are real, else 0. ``n`` (the count of ``_valid``'s flags) is
        min(max(kw - d, 0), xcur + 1), computed from ``d`` and ``xcur`` directly so that the
        term's index can be registered with the window (issue 10: counting the registered
        flags started PDP's critical path). Returns ``(need, idx)``: whether a term is added
        and its index (the term itself is read from ``padv`` in the next stage, issue 10: the
        8:1 selection in front of the window register was PDP's critical path)."""
        kw = self.kw
        nd = Signal(4, name=f"{name}_nd")
        nx = Signal(4, name=f"{name}_nx")
        padidx = Signal(4, name=f"{name}_padidx")
        m.d.comb += [
            nd.eq(Mux(d >= kw, 0, kw - d)),
            nx.eq(Mux(xcur >= HIST, HIST + 1, xcur + 1)),
            padidx.eq(kw - Mux(nx < nd, nx, nd)),
        ]
        return padidx != 0, padidx[:3]

    @staticmethod
    def _tree(vals, op):
        """Balanced reduction of ``vals`` with the binary ``op`` (issue 10: the serial chains
        were PDP's critical path)."""
        while len(vals) > 1:
            vals = [op(vals[i], vals[i + 1]) if i + 1 < len(vals) else vals[i]
                    for i in range(0, len(vals), 2)]
        return vals[0]

    def _reduce_pairs(self, m, ages, valid):
        """First reduction stage of one window: ``ages`` (ArrayLayout(ArrayLayout(signed(8),
        lanes), 8) view) the window's last 8 columns, ``valid`` Signal(8) which of them are real
        columns (age 0 always is). Returns a value of :meth:`_pair_layout`: per lane the sums,
        maxima and minima of ages 0-1, 2-3, 4-5, 6-7, invalid columns as the neutral element
        (0, -128, 127)."""
        out = Signal(self._pair_layout(), name="pairs")
        for ln in range(self.lanes):
            vals = [ages[a][ln] for a in range(HIST + 1)]
            for i in range((HIST + 1) // 2):
                a, b = 2 * i, 2 * i + 1
                m.d.comb += [
                    out[ln].s[i].eq(Mux(valid[a], vals[a], 0) + Mux(valid[b], vals[b], 0)),
                    out[ln].mx[i].eq(self._max(Mux(valid[a], vals[a], -128),
                                               Mux(valid[b], vals[b], -128))),
                    out[ln].mn[i].eq(self._min(Mux(valid[a], vals[a], 127),
                                               Mux(valid[b], vals[b], 127))),
                ]
        return out

    @staticmethod
    def _max(x, y):
        return Mux(x > y, x, y)

    @staticmethod
    def _min(x, y):
        return Mux(x < y, x, y)

    def _pair_layout(self) -> data.ArrayLayout:
        """Per lane: ``s`` the four pair sums (signed 9), ``mx``/``mn`` the four pair
        maxima/minima (int8)."""
        n = (HIST + 1) // 2
        return data.ArrayLayout(data.StructLayout({
            "s": data.ArrayLayout(signed(9), n),
            "mx": data.ArrayLayout(signed(8), n), "mn": data.ArrayLayout(signed(8), n)}),
            self.lanes)

    def _reduce_halves(self, m, pairs, pad):
        """Second reduction stage: from :meth:`_reduce_pairs`'s result, ``pad`` the window's
        padding term (``_pad``). Returns a value of :meth:`_half_layout`: per lane the sums (the
        padding term in the second), maxima and minima of ages 0-3 and 4-7."""
        out = Signal(self._half_layout(), name="halves")
        for ln in range(self.lanes):
            pv = pairs[ln]
            for i in range(2):
                m.d.comb += [
                    out[ln].s[i].eq(self._tree([pv.s[2 * i], pv.s[2 * i + 1]] +
                                               ([pad] if i else []), lambda x, y: x + y)),
                    out[ln].mx[i].eq(self._max(pv.mx[2 * i], pv.mx[2 * i + 1])),
                    out[ln].mn[i].eq(self._min(pv.mn[2 * i], pv.mn[2 * i + 1])),
                ]
        return out

    def _half_layout(self) -> data.ArrayLayout:
        """Per lane: ``s`` the two partial sums (signed 13: 4 x int8 + an 11-bit padding term),
        ``mx``/``mn`` the two partial maxima/minima (int8)."""
        return data.ArrayLayout(data.StructLayout({
            "s": data.ArrayLayout(signed(ROW_BITS + 2), 2),
            "mx": data.ArrayLayout(signed(8), 2), "mn": data.ArrayLayout(signed(8), 2)}),
            self.lanes)

    def _combine(self, m, halves):
        """Third reduction stage: the pooled value per lane from :meth:`_reduce_halves`'s
        result. AVE: the sum wrapping to 11 bits (cal1d.v); MAX / MIN: over the real columns.
        Returns a list of ``lanes`` signed(11) values."""
        out = []
        for ln in range(self.lanes):
            hv = halves[ln]
            res = Signal(signed(ROW_BITS), name=f"res{ln}")
            with m.Switch(self.method):
                with m.Case(POOL_MAX):
                    m.d.comb += res.eq(Mux(hv.mx[0] > hv.mx[1], hv.mx[0], hv.mx[1]))
                with m.Case(POOL_MIN):
                    m.d.comb += res.eq(Mux(hv.mn[0] < hv.mn[1], hv.mn[0], hv.mn[1]))
                with m.Default():
                    m.d.comb += res.eq((hv.s[0] + hv.s[1])[:ROW_BITS].as_signed())
            out.append(res)
        return out

    def _reduction(self, m, out, win_layout):
        """The stages after the emitted window's register ``out`` (a SkidBuffer of
        ``win_layout``) up to ``o``: the INT8 reduction in three stages (``elaborate``)."""
        pos = {k: v for k, v in self._row.members.items() if k != "v"}
        half_layout = data.StructLayout({"halves": self._half_layout(), **pos})

        # PAD_VALUE_kX[10:0] sign-extended: registers following the configuration (the window
        # register reads them from the third cycle after ``start`` on: ``init``, then the first
        # item taken, so they hold the layer's values when the registers are stable from its
        # ``start`` on)
        padv = Signal(data.ArrayLayout(signed(ROW_BITS), HIST + 1))
        m.d.sync += [padv[k].eq(sign_extend(self.pads[k][:ROW_BITS], ROW_BITS))
                     for k in range(HIST + 1)]

        pair_layout = data.StructLayout({"pairs": self._pair_layout(),
                                         "pad": signed(ROW_BITS), **pos})

        def pair(m, w):
            return {"pairs": self._reduce_pairs(m, w.ages, w.valid),
                    "pad": Mux(w.pad_need, padv[w.pad_idx], 0), **{k: w[k] for k in pos}}

        def reduce(m, w):
            return {"halves": self._reduce_halves(m, w.pairs, w.pad),
                    **{k: w[k] for k in pos}}

        def combine(m, w):
            return {"v": Cat(*self._combine(m, w.halves)), **{k: w[k] for k in pos}}

        m.submodules.pair = pr = Map(win_layout, pair_layout, pair)
        m.submodules.reduce = red = Map(pair_layout, half_layout, reduce)
        m.submodules.combine = comb = Map(half_layout, self._row, combine)
        wiring.connect(m, out.o, pr.i)
        wiring.connect(m, pr.o, red.i)
        wiring.connect(m, red.o, comb.i)
        wiring.connect(m, comb.o, wiring.flipped(self.o))

    def elaborate(self, platform):
        m = Module()
        G, T = self.groups, self.lanes
        gb = _bits(G)
        elem = self.ELEM
        col = data.ArrayLayout(elem, T)
        hist_layout = data.ArrayLayout(data.ArrayLayout(col, HIST), G)

        # four stages (INT8, ``_reduction``; Pool1d16 has its own after ``out``): ``out``
        # registers the emitted window (its 8 columns, which are real, its padding term's
        # index) with the item's position; ``pair`` reduces pairs of columns
        # (and selects the padding term), ``reduce`` the pairs into each half of the window (the
        # padding term added to the second), ``combine`` the two halves (issue 10: one stage
        # for the whole reduction was PDP's critical path; then the reduction of the halves in
        # one stage, 11.4 ns)
        win_layout = data.StructLayout({
            "ages": data.ArrayLayout(col, HIST + 1), "valid": HIST + 1,
            "pad_need": 1, "pad_idx": 3,
            **{k: v for k, v in self._row.members.items() if k != "v"}})
        # ``out`` is a skid buffer (issue 10: the ready of the stages after it ran through the
        # stall logic into the take, the enable of the 448-bit history register)
        m.submodules.out = out = SkidBuffer(win_layout)

        self._reduction(m, out, win_layout)

        # ---- normal engine: position of the incoming item ----
        # The stall and band decisions read only registers (issue 10: comparing the column with
        # the band's last column, the padded column with the window end, the line and surface
        # with the last ones started PDP's critical path, through the stall into the band
        # sequencer): each comparison is a flag register updated with the counter it watches.
        x = Signal(DIM_BITS)
        g = Signal(gb)
        h = Signal(DIM_BITS)
        s = Signal(DIM_BITS)
        ox = Signal(DIM_BITS)
        dist = Signal(DIM_BITS + 2)     # padded column where window ox ends - padded column x
        last_g = Signal()               # g == groups - 1
        is_last_col = Signal()          # x == last_col
        at_end = Signal()               # dist == 0: window ox ends at column x
        ox_in = Signal()                # ox < out_width
        h_last = Signal()               # h == height - 1
        s_last = Signal()               # s == surfaces - 1
        init = Signal()                 # the cycle after start: the flags load from the inputs
        hist = Signal(hist_layout)
        tail = Signal(hist_layout)

        # ---- flush engine state (windows of the previous line ending in the right padding) ----
        f_active = Signal()
        f_ox = Signal(DIM_BITS)
        f_g = Signal(gb)
        f_d = Signal(6)
        f_x = Signal(DIM_BITS)
        f_h = Signal(DIM_BITS)
        f_last_row = Signal()
        f_ow = Signal(DIM_BITS)

        line_end = Signal()
        emit = Signal()
        d_now = Signal(6)
        ox_in1 = Signal()               # ox + 1 < out_width
        m.d.comb += [
            line_end.eq(is_last_col & last_g),
            # at the last column the first window ending in the padding is emitted at once
            emit.eq(at_end | (is_last_col & ox_in)),
            d_now.eq(dist),
            ox_in1.eq(ox + 1 < self.out_width),
        ]

        cur = Signal(col)
        m.d.comb += cur.eq(self.i.payload)
        # with one group the index is constant (no 1-entry case statement in the Verilog)
        gi, fgi = (g, f_g) if G > 1 else (0, 0)
        hist_g = hist[gi]
        ages_n = Cat(cur, hist_g.as_value())
        valid_n = self._valid(m, d_now, x, "wn")
        need_n, idx_n = self._pad(m, d_now, x, "wn")
        tail_g = tail[fgi]
        # the history snapshot for the flush engine (``tail``) is loaded from ``hist`` the
        # cycle after the line's last item is taken (``snap``, issue 10: loaded with the take,
        # the stall logic ran into the enable of its 448 flip-flops, PDP's critical path,
        # 11.9 ns); in that cycle the flush reads its first group (f_g = 0) from ``hist``,
        # which holds the snapshot's value then
        snap = Signal()
        ages_f = Cat(Mux(snap, hist[0].as_value(), tail_g.as_value()), Const(0, col.size))
        m.d.sync += snap.eq(0)
        with m.If(snap):
            m.d.sync += tail.eq(hist)
        valid_f = self._valid(m, f_d, f_x, "wf")
        need_f, idx_f = self._pad(m, f_d, f_x, "wf")

        # ---- handshakes: flush has priority on the output ----
        stall = Signal()
        take = Signal()
        m.d.comb += [
            stall.eq((emit & (f_active | ~out.i.ready)) | (line_end & f_active) | init),
            self.i.ready.eq(~stall),
            take.eq(self.i.valid & ~stall),
        ]
        with m.If(f_active):
            m.d.comb += [
                out.i.valid.eq(1),
                out.i.payload.ox.eq(f_ox), out.i.payload.g.eq(f_g), out.i.payload.h.eq(f_h),
                out.i.payload.last_row.eq(f_last_row),
                out.i.payload.row_end.eq((f_ox == f_ow - 1) & (f_g == G - 1)),
            ]
            m.d.comb += [out.i.payload.ages.eq(ages_f), out.i.payload.valid.eq(valid_f),
                         out.i.payload.pad_need.eq(need_f), out.i.payload.pad_idx.eq(idx_f)]
        with m.Else():
            m.d.comb += [
                out.i.valid.eq(self.i.valid & emit),
                out.i.payload.ox.eq(ox), out.i.payload.g.eq(g), out.i.payload.h.eq(h),
                out.i.payload.last_row.eq(h_last),
                out.i.payload.row_end.eq(ox_in & ~ox_in1 & last_g),
            ]
            m.d.comb += [out.i.payload.ages.eq(ages_n), out.i.payload.valid.eq(valid_n),
                         out.i.payload.pad_need.eq(need_n), out.i.payload.pad_idx.eq(idx_n)]

        # the flush's start: loaded while a line's last item waits with windows left to flush
        # and no flush running, from registers that change only when it is taken (so with the
        # values of its take; issue 10: loaded with the take, the stall logic ran into their
        # enables, PDP's critical path, 9.9 ns); the take waits for a running flush
        with m.If(last_g & is_last_col & emit & ox_in1 & ~f_active):
            m.d.sync += [f_ox.eq(ox + 1), f_g.eq(0), f_d.eq(dist + self.sx), f_x.eq(x),
                         f_h.eq(h), f_last_row.eq(h_last), f_ow.eq(self.out_width)]
        # flush progress
        with m.If(f_active & out.i.ready):
            m.d.sync += f_g.eq(f_g + 1)
            with m.If(f_g == G - 1):
                m.d.sync += [f_g.eq(0), f_ox.eq(f_ox + 1), f_d.eq(f_d + self.sx)]
                with m.If(f_ox == f_ow - 1):
                    m.d.sync += f_active.eq(0)

        # the flags of a line's first column: of this band's, or at the band's last line of the
        # next band's (the band sequencer's next-band registers, which it loads in this cycle)
        band_end = Signal()
        lc0 = Signal(DIM_BITS)
        pl0 = Signal(3)
        dist0 = Signal(DIM_BITS + 2)
        m.d.comb += [
            band_end.eq(h_last & s_last),
            lc0.eq(Mux(band_end & ~init, self.next_last_col, self.last_col)),
            pl0.eq(Mux(band_end & ~init, self.next_pad_left, self.pad_left)),
            dist0.eq(self.kw - 1 - pl0),
        ]

        # normal progress
        shifted = Signal(data.ArrayLayout(col, HIST))
        m.d.comb += shifted.eq(Cat(cur, hist_g.as_value()[:col.size * (HIST - 1)]))
        with m.If(take):
            m.d.sync += [hist[gi].eq(shifted), g.eq(Mux(last_g, 0, g + 1)),
                         last_g.eq(1 if G == 1 else Mux(last_g, 0, g == G - 2))]
            with m.If(last_g):
                m.d.sync += [
                    ox.eq(ox + emit), ox_in.eq(Mux(emit, ox_in1, ox_in)),
                    # the window end moves sx columns on when window ox is emitted
                    dist.eq(dist - 1 + Mux(at_end, self.sx, 0)),
                    at_end.eq(Mux(at_end, self.sx == 1, dist == 1)),
                    x.eq(x + 1), is_last_col.eq(x + 1 == self.last_col),
                ]
                with m.If(is_last_col):
                    with m.If(emit & ox_in1):
                        # snapshot the history (with this item) for the flush engine
                        m.d.sync += [snap.eq(1), f_active.eq(1)]
                    m.d.sync += [x.eq(0), ox.eq(0), h.eq(h + 1),
                                 h_last.eq(h + 1 == self.height - 1), is_last_col.eq(lc0 == 0),
                                 dist.eq(dist0), at_end.eq(dist0 == 0), ox_in.eq(1)]
                    with m.If(h_last):
                        m.d.sync += [h.eq(0), h_last.eq(self.height == 1), s.eq(s + 1),
                                     s_last.eq(s + 1 == self.surfaces - 1)]
                        with m.If(s_last):
                            m.d.sync += [s.eq(0), s_last.eq(self.surfaces == 1)]
                            m.d.comb += self.band_next.eq(1)

        m.d.sync += init.eq(0)
        with m.If(init):
            m.d.sync += [last_g.eq(G == 1), is_last_col.eq(lc0 == 0), dist.eq(dist0),
                         at_end.eq(dist0 == 0), ox_in.eq(1), h_last.eq(self.height == 1),
                         s_last.eq(self.surfaces == 1)]
        with m.If(self.start):
            m.d.sync += [x.eq(0), g.eq(0), h.eq(0), s.eq(0), ox.eq(0), f_active.eq(0),
                         init.eq(1)]
        return m
