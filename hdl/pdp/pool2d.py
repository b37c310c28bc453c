"""PDP height pass ("pooling 2D", v1_ias_unit_description.rst "Planar Data Processor": the share
line buffer of partial results), on the width pass's items (:func:`hdl.pdp.pool1d.row_item_layout`).

Output row ``oy`` covers padded lines ``oy*sy .. oy*sy + kh - 1`` (padded line = line + PAD_TOP).
At most ceil(kh / sy) <= 8 windows are open at a time; each lives in one of 8 line-buffer banks
(``slots``; bank = (oy + base) mod 8, ``base`` rotating per surface), each bank holding one partial
result per (output column, channel group). Every item reads all banks at its address, updates the
open windows (first real line: store; else sum / max / min) and writes them back; the window
ending on this line is emitted with the item.

* AVE (NVIDIA's nv_small RTL, NV_NVDLA_PDP_CORE_cal2d.v; documented in verif/model/pdp.py): the
  sum of the real lines in 14 bits; when only ``m < kh`` lines are real,
  (PAD_VALUE_{kh-m}X * kw)[13:0] (sign-extended) is added, wrapping to ``tot_bits``: 15 bits
  on nv_small (v2), 14 on nvdlav1 (nv_full; verif/model/pdp.py INT_WIDTHS[("v1", 0)]).
* MAX / MIN: over the real lines.

At the last line of a surface all open windows end: the oldest is emitted with the items, the
others (ending in the bottom padding) are emitted afterwards by a flush engine reading their
banks while the next surface's first lines are consumed (they only stall when they need a bank
still being flushed, or want to emit before the flush is done).

Latency: six cycles (the input register presenting the banks' address, the item's register with
the read data, the emitted window's register, then three stages for the padding term: the
window's real lines, the term's index, the sum). Throughput: one item per cycle (but for lines of
one item, i.e. one output column and one channel group, with kh > sy: a cycle's wait after the
item ending the oldest window, see ``lo_wait``).
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hdl.lib.fixed import sign_extend
from hdl.lib.memory import RDWR_UNDEFINED
from hdl.lib.stream import Map, SkidBuffer
from hdl.pdp.pool1d import DIM_BITS, POOL_AVE, POOL_MAX, POOL_MIN, row_item_layout

__all__ = ["Pool2d", "SLOTS", "ACC_BITS", "TOT_BITS"]

SLOTS = 8          # kernel height <= 8: at most 8 open windows
ACC_BITS = 14      # height-pass sum (cal2d.v)
TOT_BITS = 15      # after the padding term (v2: nv_small's cal2d.v; nvdlav1 keeps 14 bits)


class Pool2d(wiring.Component):
    """Height pass of PDP (module docstring).

    Parameters: ``lanes``, ``groups`` (as :class:`hdl.pdp.pool1d.Pool1d`), ``max_width`` (output
    columns a line buffer bank holds; a power of two; wider bands are not supported),
    ``tot_bits`` (the AVE total's width after the padding term: 15, :data:`TOT_BITS`, on
    nv_small; 14 on nvdlav1, whose total wraps to 14 bits). Raises ValueError for another
    ``tot_bits``.

    Ports: ``i`` In(stream of row_item_layout(lanes, groups)); ``o`` Out(stream of
    ArrayLayout(signed(tot_bits), lanes)) in order surface, oy, ox, group (MAX/MIN: the int8
    result; AVE: the padded sum before the reciprocal multiplies); ``start`` In(1) pulse at layer start;
    ``method`` In(2); ``kw`` In(4); ``kh`` In(4) 1..8; ``sy`` In(5) 1..16; ``pad_top`` In(3);
    ``height`` In(14) input lines; ``out_height`` In(14) output lines; ``pads``
    In(ArrayLayout(19, 8)) raw PAD_VALUE_kX at index k.
    """

    def __init__(self, lanes: int, groups: int, max_width: int, tot_bits: int = TOT_BITS):
        if max_width & (max_width - 1) or groups & (groups - 1):
            raise ValueError("max_width and groups must be powers of two")
        if tot_bits not in (ACC_BITS, TOT_BITS):
            raise ValueError(f"tot_bits {tot_bits}: {ACC_BITS} (nvdlav1) or {TOT_BITS} (nv_small)")
        self.lanes, self.groups, self.max_width = lanes, groups, max_width
        self.tot_bits = tot_bits
        self._row = row_item_layout(lanes, groups)
        self._out = data.ArrayLayout(signed(tot_bits), lanes)
        super().__init__({
            "i": In(stream.Signature(self._row)),
            "o": Out(stream.Signature(self._out)),
            "start": In(1),
            "method": In(2), "kw": In(4), "kh": In(4), "sy": In(5), "pad_top": In(3),
            "height": In(DIM_BITS), "out_height": In(DIM_BITS),
            "pads": In(data.ArrayLayout(unsigned(19), 8)),
        })

    def _span(self, m, e, last_real):
        """First padding-term stage of the emitted window ``e`` (``acc``, ``start`` its first
        padded line): the window's real lines are ``first`` .. ``last`` (padded line numbers,
        ``last_real`` the last real padded line). Returns a dict for :meth:`_span_layout`."""
        pt, kh = self.pad_top, self.kh
        first_real = Signal(DIM_BITS + 1, name="first_real")
        end = Signal(DIM_BITS + 1, name="end")
        m.d.comb += [
            end.eq(e.start + kh - 1),
            first_real.eq(Mux(e.start > pt, e.start, pt)),
        ]
        return {"acc": e.acc, "first": first_real, "last": Mux(end < last_real, end, last_real)}

    def _span_layout(self, acc_l) -> data.StructLayout:
        return data.StructLayout({"acc": acc_l, "first": unsigned(DIM_BITS + 1),
                                  "last": unsigned(DIM_BITS + 1)})

    def _pad_select(self, m, e):
        """Second stage: from :meth:`_span`'s result, whether a padding term is added (AVE and
        only ``m < kh`` lines real, ``m = last - first + 1``) and its index ``kh - m`` into
        ``padkw``. Returns a dict for :meth:`_select_layout`."""
        kh = self.kh
        mreal = Signal(DIM_BITS + 1, name="m")
        idx = Signal(4, name="padidx")
        m.d.comb += [mreal.eq(e.last - e.first + 1), idx.eq(kh - mreal)]
        return {"acc": e.acc, "need": (mreal != kh) & (self.method == POOL_AVE), "idx": idx[:3]}

    def _select_layout(self, acc_l) -> data.StructLayout:
        return data.StructLayout({"acc": acc_l, "need": 1, "idx": 3})

    def _final(self, m, e, padkw):
        """Last stage: the emitted value, ``acc`` (lanes x signed(14)) plus the padding term
        (cal2d.v) when :meth:`_pad_select` asks for it; ``padkw[k]`` = (PAD_VALUE_kX *
        kw)[13:0] for the k missing lines."""
        add = Signal(signed(ACC_BITS), name="add")
        m.d.comb += add.eq(Mux(e.need, padkw[e.idx], 0))
        return [e.acc[ln] + add for ln in range(self.lanes)]

    def elaborate(self, platform):
        m = Module()
        G, T = self.groups, self.lanes
        gb = (G - 1).bit_length()
        wb = (self.max_width - 1).bit_length()
        acc_l = data.ArrayLayout(signed(ACC_BITS), T)
        depth = self.max_width * G

        # four stages (issue 10): ``out`` registers the emitted window's partial result and its
        # first padded line; ``span`` its real lines, ``select`` the padding term's index,
        # ``final`` adds the term (one stage for the three was PDP's critical path).
        # (PAD_VALUE_kX * kw)[13:0] and the last real padded line are registers following the
        # configuration registers, one cycle behind them: the stages read them six cycles
        # after ``start`` at the earliest (``init_wait``), so they hold the layer's values when
        # the registers are stable from its ``start`` on.
        # ``out`` is a skid buffer: the ready of the stages after it (down to WDMA) does not run
        # combinationally into this stage's stall logic (issue 10)
        emit_l = data.StructLayout({"acc": acc_l, "start": unsigned(DIM_BITS + 1)})
        m.submodules.out = out = SkidBuffer(emit_l)
        padkw = Signal(data.ArrayLayout(signed(ACC_BITS), SLOTS))
        m.d.sync += [padkw[k].eq((sign_extend(self.pads[k], 19) * self.kw)[:ACC_BITS])
                     for k in range(SLOTS)]
        last_real = Signal(DIM_BITS + 1)
        m.d.sync += last_real.eq(self.pad_top + self.height - 1)
        span_l, sel_l = self._span_layout(acc_l), self._select_layout(acc_l)
        m.submodules.span = span = Map(emit_l, span_l,
                                       lambda m, e: self._span(m, e, last_real))
        m.submodules.select = select = Map(span_l, sel_l, self._pad_select)
        m.submodules.final = final = Map(sel_l, self._out,
                                         lambda m, e: self._final(m, e, padkw))
        wiring.connect(m, out.o, span.i)
        wiring.connect(m, span.o, select.i)
        wiring.connect(m, select.o, final.i)
        wiring.connect(m, final.o, wiring.flipped(self.o))

        # the item being processed (``it``) and the input register in front of it (``p``),
        # loaded while the line-buffer banks are read at its address (synchronous reads, issue
        # 10: the asynchronous reads of the deep banks were PDP's critical path); the read data
        # are registered with the item when it moves from ``p`` to ``it`` (``rdr``, issue 10:
        # the block RAMs' clock-to-output delay started PDP's critical path, through the
        # update, into the emitted window's register)
        p = Signal(self._row)
        p_valid = Signal()
        p_load = Signal()
        it = Signal(self._row)
        it_valid = Signal()
        load = Signal()
        take = Signal()
        m.d.comb += p_load.eq(~p_valid | load)
        with m.If(p_load):
            m.d.sync += [p_valid.eq(self.i.valid), p.eq(self.i.payload)]
        pt, kh, sy = self.pad_top, self.kh, self.sy
        # its padded line q and q + 1 are registered with it (issue 10: the adders in front of
        # the window comparisons started PDP's critical path into the banks' write enables)
        q = Signal(DIM_BITS + 1)
        q1 = Signal(DIM_BITS + 1)
        with m.If(load):
            m.d.sync += [it_valid.eq(p_valid), it.eq(p),
                         q.eq(p.h + pt), q1.eq(p.h + pt + 1)]
        with m.Elif(take):
            m.d.sync += it_valid.eq(0)      # a bubble (``lo_wait`` below)

        # ---- per-surface window bookkeeping ----
        nstarted = Signal(DIM_BITS)     # windows whose first padded line is <= current line
        nended = Signal(DIM_BITS)       # windows already emitted
        lo_start = Signal(DIM_BITS + 1)  # first padded line of window nended
        lo_last = Signal(DIM_BITS + 1)   # its last padded line, lo_start + kh - 1
        hit = Signal()                   # q == lo_last (a register: the stall logic)
        nstart_row = Signal(DIM_BITS + 1)  # first padded line of window nstarted
        base = Signal(3)
        # initial values at a surface start: windows starting in the top padding
        # Registers following the configuration in three stages (issue 10: computed from it
        # combinationally, this count and product were PDP's critical path; then the count
        # from its own products j * sy, now from the registers rel_start below); a layer's
        # ``start`` waits for them (``init_wait``: its first item is taken four cycles after
        # ``start`` at the earliest). At most 8 windows start in the top padding.
        init_n = Signal(4)
        rel_start = Signal(data.ArrayLayout(unsigned(8), SLOTS))      # j * sy (below)
        m.d.sync += init_n.eq(1 + sum((rel_start[j] <= pt) for j in range(1, SLOTS)))  # window 0
        init_n_c = Signal(4)
        init_row = Signal(9)            # first padded line of window init_n_c
        few = self.out_height < init_n
        # whether windows remain to start after the first init_n_c (``more`` below): when
        # init_n > out_height none do, and init_n_c = out_height
        init_more = Signal()
        m.d.sync += init_more.eq(init_n < self.out_height)
        # init_row = init_n_c * sy from the products rel_start[r] = r * sy (issue 10: a
        # multiplier behind the comparison ``few`` was PDP's critical path, 10.5 ns):
        # init_n_c <= 7 but for init_n = 8 <= out_height
        init_sel = Signal(3)
        m.d.comb += init_sel.eq(Mux(few, self.out_height[:3], init_n[:3]))
        m.d.sync += [init_n_c.eq(Mux(few, self.out_height[:4], init_n)),
                     init_row.eq(Mux(~few & init_n[3], sy << 3, rel_start[init_sel]))]
        init_wait = Signal(3)

        # ---- flush engine ----
        f_active = Signal()
        f_slot = Signal(3)
        f_start = Signal(DIM_BITS + 1)
        f_count = Signal(4)
        f_ox = Signal(DIM_BITS)
        f_g = Signal(max(1, gb))
        f_last_ox = Signal(DIM_BITS)
        pending = Signal(SLOTS)
        # the flush's reads are synchronous (issue 10: the asynchronous reads of the deep banks,
        # their read multiplexers and the forward from the write register were PDP's critical
        # path): ``f_issue`` presents address (f_ox, f_g) of bank f_slot and advances the
        # counters; the next cycle the read data is the flush's output (``f_dvalid``, held with
        # its bank ``f_dslot`` and first line ``f_dstart`` until the output takes it)
        f_issue = Signal()
        f_dvalid = Signal()
        f_dslot = Signal(3)
        f_dstart = Signal(DIM_BITS + 1)
        f_busy = Signal()
        m.d.comb += f_busy.eq(f_active | f_dvalid)

        addr = Signal(range(depth))
        f_addr = Signal(range(depth))
        in_addr = Signal(range(depth))      # the address of the item loaded into ``p``
        p_addr = Signal(range(depth))       # the address of the item in ``p``
        # a bank's address: (output column, channel group); with one group the group is
        # an empty slice
        m.d.comb += [addr.eq(Cat(it.g[:gb], it.ox[:wb])), f_addr.eq(Cat(f_g[:gb], f_ox[:wb])),
                     in_addr.eq(Cat(self.i.payload.g[:gb], self.i.payload.ox[:wb])),
                     p_addr.eq(Cat(p.g[:gb], p.ox[:wb]))]

        # open windows (nstarted - nended) and which banks hold them (bank k holds window
        # (k - base) % 8, open when (k - base - nended) % 8 < nopen): registers updated with
        # nstarted / nended / base (issue 10: derived from them, the count and comparisons
        # started PDP's critical path, into the banks' write enables)
        nopen = Signal(DIM_BITS)
        nopen_nz = Signal()             # nopen != 0, a register of its own (the stall logic)
        omask = Signal(SLOTS)

        def open_banks(n, first):
            """Mask of the banks of ``n`` (<= 8) open windows from bank ``first``."""
            thermo = ((Const(1, SLOTS + 1) << n) - 1)[:SLOTS]
            return (Cat(thermo, thermo) << first)[SLOTS:2 * SLOTS]

        def bank_bit(k):
            return (Const(1, SLOTS) << k)[:SLOTS]

        # line q relative to the oldest open window's first line; window ``rel`` (0 = oldest)
        # starts at relative line rel * sy: registers following sy (issue 10: the products and
        # the per-bank start lines were PDP's critical path; valid before init_wait lets the first
        # item in)
        dq = Signal(signed(DIM_BITS + 3))    # q - lo_start, a register (below)
        m.d.sync += [rel_start[r].eq(r * sy) for r in range(SLOTS)]

        def update(a, ini):
            """The window values after this item: its first real line stores the item, the
            others reduce (AVE: 14-bit sum; MAX/MIN)."""
            new = []
            for ln in range(T):
                x = it.v[ln]
                summ = (a[ln] + x)[:ACC_BITS].as_signed()
                mx = Mux(x > a[ln], x, a[ln])
                mn = Mux(x < a[ln], x, a[ln])
                sel = Mux(self.method == POOL_MAX, mx, Mux(self.method == POOL_MIN, mn, summ))
                new.append(Mux(ini, x, sel))
            return new

        first_line = Signal()
        m.d.comb += first_line.eq(it.h == 0)
        rd_data, f_data = [], []
        conflict = Signal()
        conflicts = []
        # The banks are written one cycle after the item is taken, from registers (issue 10: the
        # take decision ran combinationally into the write enables of every bank's RAM blocks):
        # ``w_addr`` / ``w_data`` / ``w_en`` hold the last item's write and load with every
        # taken item; the RAM rewrites the held (most recent) write each cycle, which changes
        # nothing. Reads that the held write has not reached yet take its data instead: the
        # item's read is presented when it enters ``p`` (transparent: it sees the write made in
        # that cycle) and registered when it moves to ``it``. While it waits in ``p`` only the
        # item in ``it`` is taken, with the move; so the writes it missed are at most two: the
        # held write when it moves (the item taken when it entered ``p``: ``p_hit``, forwarded
        # into ``rdr``) and that of the item taken with the move (``fwd``, forwarded from the
        # write register the next cycle). The flush's synchronous reads
        # are transparent for the write port (a read presented in the cycle of the write sees
        # it). The flush reads a bank only while it is ``pending`` (set the cycle after the
        # take that starts the flush, the first read one cycle later still): a pending bank's
        # only write after its first read is the held write of that take, rewritten unchanged
        # (``conflict`` stalls the items that would write it) -- no write the cycle after a
        # read, or while its data waits for the output, changes the read address's contents.
        #
        # All of this is needed only when a line may have fewer than four items (G < 4, e.g.
        # lanes = atom): an item's read misses at most the writes of the three items before it
        # (the last take before its read cycle is of one of them), and the items of one
        # address are a line apart (>= G items). With G >= 4 (nv_small: G = 8) no read ever
        # needs a forward, and ``forwards`` is off (issue 10: the forward muxes sat between the
        # banks' RAM outputs and the oldest window's select): the banks are written once, in the
        # cycle after the take (``w_en`` a pulse), so an item's read never meets a write of its
        # entry (that write's item is one of the three before), and a flush read of a pending
        # bank never does either (its last write, of the take that starts the flush, is made
        # in the cycle its first read is presented at the earliest, at the surface's last
        # address, not the first one read; flush reads of the other banks meeting the items'
        # writes are discarded): the banks are bare block RAM (hdl.lib.memory.RDWR_UNDEFINED,
        # non-transparent ports; tests/hdl/test_pdp_core.py watches ``collision``).
        forwards = self.forwards = G < 4
        w_addr = Signal(range(depth))
        fwd = Signal()
        with m.If(take):
            m.d.sync += w_addr.eq(addr)
        p_hit = Signal()
        if forwards:
            m.d.comb += p_hit.eq(w_addr == p_addr)
            with m.If(load):
                m.d.sync += fwd.eq(take & (p_addr == addr))
        # test hook: a read presented in the cycle its entry is written, whose data are used
        # (an item's read when an item enters ``p``; the flush uses bank f_slot's)
        collision = self.collision = Signal()
        collisions = []
        for k in range(SLOTS):
            mem = Memory(shape=acc_l, depth=depth, init=[],
                         attrs=None if forwards else RDWR_UNDEFINED)
            m.submodules[f"bank{k}"] = mem
            wp = mem.write_port()
            # with forwards: reads the next item's address while the held write is written
            # (new data when equal)
            tr = (wp,) if forwards else ()
            rp = mem.read_port(transparent_for=tr)
            fp = mem.read_port(transparent_for=tr)
            w_en = Signal(name=f"w_en{k}")
            w_data = Signal(acc_l, name=f"w_data{k}")
            rel = Signal(3, name=f"rel{k}")
            m.d.comb += rel.eq(k - base - nended[:3])
            iw = Signal(name=f"in_win{k}")
            m.d.comb += iw.eq(omask[k])
            ini = Signal(name=f"init{k}")
            m.d.comb += ini.eq((dq == rel_start[rel]) | first_line)
            rdr_in = Signal(acc_l, name=f"rdr_in{k}")
            m.d.comb += rdr_in.eq(Mux(w_en & p_hit, w_data, rp.data))
            rdr = Signal(acc_l, name=f"rdr{k}")
            with m.If(load):
                m.d.sync += rdr.eq(rdr_in)
            rd = Signal(acc_l, name=f"rd{k}")
            m.d.comb += rd.eq(Mux(fwd & w_en, w_data, rdr))
            new = Signal(acc_l, name=f"new{k}")
            m.d.comb += [new[ln].eq(v) for ln, v in enumerate(update(rd, ini))]
            with m.If(take):
                m.d.sync += [w_en.eq(iw), w_data.eq(new)]
            if not forwards:
                with m.Else():
                    m.d.sync += w_en.eq(0)
            collisions.append(w_en & (((rp.addr == w_addr) & rp.en & self.i.valid) |
                                      ((fp.addr == w_addr) & fp.en & (f_slot == k))))
            m.d.comb += [rp.addr.eq(in_addr), rp.en.eq(p_load), fp.addr.eq(f_addr),
                         fp.en.eq(f_issue),
                         wp.addr.eq(w_addr), wp.data.eq(w_data), wp.en.eq(w_en)]
            conflicts.append(iw & pending[k])
            rd_data.append(rdr_in)
            f_data.append(fp.data)
        m.d.comb += [conflict.eq(Cat(*conflicts).any()), collision.eq(Cat(*collisions).any())]

        # the oldest open window (relative start 0): emitted when its last line (or the
        # surface's last line) arrives. Its bank's read data are selected when the item moves
        # to ``it`` and registered with it (``lo_rdr``; issue 10: ``fwd`` -> the forward mux ->
        # the 8:1 select by ``lo_slot`` -> the update -> the emitted window's register was PDP's
        # critical path, 10.8 ns): selected by ``lo_slot`` as it is after this cycle's update
        # (``lo_adv`` when the taken item ends a line: + 1 when the oldest window ends, the next
        # surface's base at a surface end; 0 at ``start``). The forward of the item taken with
        # the move (``fwd``: the lines are one item long) is ``lo_fd``, the oldest window's
        # updated value registered with that take; it is right when the oldest window stays
        # (or the taken item ends the surface: the next item is a first line, which stores
        # itself). When the taken item ends the oldest window while the next one is open
        # (``lo_wait``), the next oldest's updated value is not at hand: the move waits a cycle
        # (a bubble; ``p_hit`` then forwards the write), only with one-item lines and kh > sy.
        lo_slot = Signal(3)
        m.d.comb += lo_slot.eq(base + nended[:3])
        upd = Signal()
        m.d.comb += upd.eq(take & it.row_end)
        new_slot = Signal(3)
        m.d.comb += new_slot.eq(base + nstarted[:3])
        ends = Signal()         # the oldest window ends with this line
        m.d.comb += ends.eq(nopen_nz & hit)
        lo_adv = Signal(3)
        lo_hold = Signal(3)
        m.d.comb += [lo_adv.eq(Mux(it.last_row, new_slot, Mux(ends, lo_slot + 1, lo_slot))),
                     lo_hold.eq(Mux(self.start, 0, lo_slot))]
        rd_cat = Cat(*[r.as_value() for r in rd_data])
        lo_rdr = Signal(acc_l)
        lo_rdr_adv = Signal(acc_l)
        lo_rdr_hold = Signal(acc_l)
        m.d.comb += [lo_rdr_adv.eq(rd_cat.word_select(lo_adv, acc_l.size)),
                     lo_rdr_hold.eq(rd_cat.word_select(lo_hold, acc_l.size))]
        with m.If(load):
            m.d.sync += lo_rdr.eq(Mux(upd & ~self.start, lo_rdr_adv, lo_rdr_hold))
        lo_fd = Signal(acc_l)
        lo_old = Signal(acc_l)
        lo_wait = Signal()
        if forwards:
            m.d.comb += [lo_old.eq(Mux(fwd, lo_fd, lo_rdr)),
                         lo_wait.eq((p_addr == addr) & ~it.last_row & ends & nopen[1:].any())]
        else:
            m.d.comb += lo_old.eq(lo_rdr)
        lo_new = Signal(acc_l)
        m.d.comb += [lo_new[ln].eq(v)
                     for ln, v in enumerate(update(lo_old, (dq == 0) | first_line))]
        if forwards:
            with m.If(take):
                m.d.sync += lo_fd.eq(lo_new)
        emit = Signal()
        m.d.comb += emit.eq(nopen_nz & (hit | it.last_row))
        f_cur = Signal(acc_l)
        m.d.comb += f_cur.eq(Cat(*[d.as_value() for d in f_data]).word_select(f_dslot,
                                                                                acc_l.size))

        stall = Signal()
        m.d.comb += [
            stall.eq(conflict | (emit & (f_busy | ~out.i.ready)) | init_wait.any()),
            take.eq(it_valid & ~stall),
            load.eq(~it_valid | (take & ~(upd & lo_wait))),
            self.i.ready.eq(p_load),
        ]
        with m.If(f_busy):
            m.d.comb += [out.i.valid.eq(f_dvalid), out.i.payload.acc.eq(f_cur),
                         out.i.payload.start.eq(f_dstart)]
        with m.Else():
            m.d.comb += [out.i.valid.eq(it_valid & emit & ~conflict),
                         out.i.payload.acc.eq(lo_new), out.i.payload.start.eq(lo_start)]

        # flush progress: windows f_slot.. in order, each over ox 0..f_last_ox, groups; a read
        # is issued when its data register is free (empty, or its data taken this cycle). A
        # bank stops being pending with its last read (the data register holds it).
        m.d.comb += f_issue.eq(f_active & (~f_dvalid | out.i.ready))
        with m.If(f_issue):
            m.d.sync += [f_dvalid.eq(1), f_dslot.eq(f_slot), f_dstart.eq(f_start)]
        with m.Elif(out.i.ready):
            m.d.sync += f_dvalid.eq(0)
        with m.If(f_issue):
            m.d.sync += f_g.eq(f_g + 1)
            with m.If(f_g == G - 1):
                m.d.sync += [f_g.eq(0), f_ox.eq(f_ox + 1)]
                with m.If(f_ox == f_last_ox):
                    m.d.sync += [f_ox.eq(0), f_slot.eq(f_slot + 1), f_start.eq(f_start + sy),
                                 f_count.eq(f_count - 1), pending.bit_select(f_slot, 1).eq(0)]
                    with m.If(f_count == 1):
                        m.d.sync += f_active.eq(0)

        # line / surface progress
        starts = Signal()       # a window starts with the next line
        # more = nstarted < out_height, a register updated with nstarted (issue 10: the
        # comparison ran into the open-window count's adder and nopen_nz, 10.4 ns)
        more = Signal()
        m.d.comb += starts.eq(more & (nstart_row == q1))
        nopen_next = Signal(DIM_BITS)
        m.d.comb += nopen_next.eq(nopen + starts - ends)
        with m.If(take & it.row_end):
            with m.If(~it.last_row):
                with m.If(ends):
                    m.d.sync += [nended.eq(nended + 1), lo_start.eq(lo_start + sy),
                                 lo_last.eq(lo_last + sy)]
                with m.If(starts):
                    m.d.sync += [nstarted.eq(nstarted + 1), nstart_row.eq(nstart_row + sy),
                                 more.eq(nstarted + 1 < self.out_height)]
                # the oldest window's bank is closed before the new one's is opened (the same
                # bank when 8 windows are open)
                closed = Mux(ends, omask & ~bank_bit(lo_slot), omask)
                m.d.sync += [nopen.eq(nopen_next), nopen_nz.eq(nopen_next != 0),
                             omask.eq(Mux(starts, closed | bank_bit(new_slot), closed))]
            with m.Else():
                # surface end: windows nended+1 .. nstarted-1 end in the bottom padding
                with m.If(nopen > 1):
                    m.d.sync += [f_active.eq(1), f_slot.eq(lo_slot + 1),
                                 f_start.eq(lo_start + sy), f_count.eq(nopen - 1), f_ox.eq(0),
                                 f_g.eq(0), f_last_ox.eq(it.ox),
                                 pending.eq(omask & ~bank_bit(lo_slot))]
                m.d.sync += [base.eq(new_slot), nended.eq(0), lo_start.eq(0), lo_last.eq(kh - 1),
                             nstarted.eq(init_n_c), nstart_row.eq(init_row), more.eq(init_more),
                             nopen.eq(init_n_c), nopen_nz.eq(init_n_c != 0),
                             omask.eq(open_banks(init_n_c, new_slot))]

        # hit = (q == lo_last) as a register (issue 10: the comparison started the stall
        # logic): for a loaded item against lo_last as it is after this cycle's update (kept,
        # + sy when the oldest window ends with a line, kh - 1 at a surface end); for a held
        # item it only changes when init_wait sets lo_last
        q_in = Signal(DIM_BITS + 1)
        lo_last_sy = Signal(DIM_BITS + 1)
        kh1 = Signal(DIM_BITS + 1)
        m.d.comb += [q_in.eq(p.h + pt), lo_last_sy.eq(lo_last + sy),
                     kh1.eq(kh - 1)]
        hit_in = Mux((upd & it.last_row) | init_wait[-1], q_in == kh1,
                     Mux(upd & ends, q_in == lo_last_sy, q_in == lo_last))
        with m.If(load):
            m.d.sync += hit.eq(hit_in)
        with m.Elif(init_wait[-1]):
            m.d.sync += hit.eq(q == kh1)
        # dq = q - lo_start likewise (the window comparisons in front of the banks' write data):
        # lo_start changes to lo_start + sy when the oldest window ends, to 0 at a surface end
        # and at start
        lo_start_sy = Signal(DIM_BITS + 1)
        m.d.comb += lo_start_sy.eq(lo_start + sy)
        lo_start0 = self.start | (upd & it.last_row)
        dq_in = Mux(lo_start0, q_in, Mux(upd & ends, q_in - lo_start_sy, q_in - lo_start))
        with m.If(load):
            m.d.sync += dq.eq(dq_in)
        with m.Elif(self.start):
            m.d.sync += dq.eq(q)

        m.d.sync += init_wait.eq(init_wait << 1)
        with m.If(init_wait[-1]):
            m.d.sync += [lo_last.eq(kh - 1), nstarted.eq(init_n_c), nstart_row.eq(init_row),
                         more.eq(init_more),
                         nopen.eq(init_n_c), nopen_nz.eq(init_n_c != 0),
                         omask.eq(open_banks(init_n_c, base))]
        with m.If(self.start):
            m.d.sync += [base.eq(0), nended.eq(0), lo_start.eq(0), init_wait.eq(1),
                         f_active.eq(0), f_dvalid.eq(0), pending.eq(0)]
        return m
