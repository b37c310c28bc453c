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
  (PAD_VALUE_{kh-m}X * kw)[13:0] (sign-extended) is added, wrapping to 15 bits.
* MAX / MIN: over the real lines.

At the last line of a surface all open windows end: the oldest is emitted with the items, the
others (ending in the bottom padding) are emitted afterwards by a flush engine reading their
banks while the next surface's first lines are consumed (they only stall when they need a bank
still being flushed, or want to emit before the flush is done).

Latency: three cycles (the input register, the emitted window's register, then the padding
term's). Throughput: one item per cycle.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hdl.lib.fixed import sign_extend
from hdl.lib.stream import Map, PipelineStage
from hdl.pdp.pool1d import DIM_BITS, POOL_AVE, POOL_MAX, POOL_MIN, row_item_layout

__all__ = ["Pool2d", "SLOTS", "ACC_BITS", "TOT_BITS"]

SLOTS = 8          # kernel height <= 8: at most 8 open windows
ACC_BITS = 14      # height-pass sum (cal2d.v)
TOT_BITS = 15      # after the padding term


class Pool2d(wiring.Component):
    """Height pass of PDP (module docstring).

    Parameters: ``lanes``, ``groups`` (as :class:`hdl.pdp.pool1d.Pool1d`), ``max_width`` (output
    columns a line buffer bank holds; a power of two; wider bands are not supported).

    Ports: ``i`` In(stream of row_item_layout(lanes, groups)); ``o`` Out(stream of
    ArrayLayout(signed(15), lanes)) in order surface, oy, ox, group (MAX/MIN: the int8 result;
    AVE: the padded sum before the reciprocal multiplies); ``start`` In(1) pulse at layer start;
    ``method`` In(2); ``kw`` In(4); ``kh`` In(4) 1..8; ``sy`` In(5) 1..16; ``pad_top`` In(3);
    ``height`` In(14) input lines; ``out_height`` In(14) output lines; ``pads``
    In(ArrayLayout(19, 8)) raw PAD_VALUE_kX at index k.
    """

    def __init__(self, lanes: int, groups: int, max_width: int):
        if max_width & (max_width - 1) or groups & (groups - 1):
            raise ValueError("max_width and groups must be powers of two")
        self.lanes, self.groups, self.max_width = lanes, groups, max_width
        self._row = row_item_layout(lanes, groups)
        self._out = data.ArrayLayout(signed(TOT_BITS), lanes)
        super().__init__({
            "i": In(stream.Signature(self._row)),
            "o": Out(stream.Signature(self._out)),
            "start": In(1),
            "method": In(2), "kw": In(4), "kh": In(4), "sy": In(5), "pad_top": In(3),
            "height": In(DIM_BITS), "out_height": In(DIM_BITS),
            "pads": In(data.ArrayLayout(unsigned(19), 8)),
        })

    def _final(self, m, acc, start, padkw):
        """Emitted value of a window starting at padded line ``start`` with partial result
        ``acc`` (lanes x signed(14)): AVE adds the padding term (cal2d.v), ``padkw[k]`` =
        (PAD_VALUE_kX * kw)[13:0] for the k missing lines."""
        pt, kh = self.pad_top, self.kh
        last_real = Signal(DIM_BITS + 1, name="last_real")
        first_real = Signal(DIM_BITS + 1, name="first_real")
        end = Signal(DIM_BITS + 1, name="end")
        mreal = Signal(DIM_BITS + 1, name="m")
        # the last real padded line: a register following the configuration (issue 10: from
        # the height register through these adders into the padding term was PDP's critical
        # path); ``final`` reads it five cycles after ``start`` at the earliest (``init_wait``)
        m.d.sync += last_real.eq(pt + self.height - 1)
        m.d.comb += [
            end.eq(start + kh - 1),
            first_real.eq(Mux(start > pt, start, pt)),
            mreal.eq(Mux(end < last_real, end, last_real) - first_real + 1),
        ]
        idx = Signal(4, name="padidx")
        m.d.comb += idx.eq(kh - mreal)
        add = Signal(signed(ACC_BITS), name="add")
        m.d.comb += add.eq(Mux((mreal != kh) & (self.method == POOL_AVE), padkw[idx[:3]], 0))
        return [acc[ln] + add for ln in range(self.lanes)]

    def elaborate(self, platform):
        m = Module()
        G, T = self.groups, self.lanes
        gb = (G - 1).bit_length()
        wb = (self.max_width - 1).bit_length()
        acc_l = data.ArrayLayout(signed(ACC_BITS), T)
        depth = self.max_width * G

        # two stages (issue 10): ``out`` registers the emitted window's partial result and its
        # first padded line; ``final`` adds the padding term. (PAD_VALUE_kX * kw)[13:0] are
        # registers following the pad value and kernel width registers, one cycle behind them:
        # ``final`` reads them five cycles after ``start`` at the earliest (``init_wait``), so
        # they hold the layer's values when the registers are stable from its ``start`` on.
        emit_l = data.StructLayout({"acc": acc_l, "start": unsigned(DIM_BITS + 1)})
        m.submodules.out = out = PipelineStage(emit_l)
        padkw = Signal(data.ArrayLayout(signed(ACC_BITS), SLOTS))
        m.d.sync += [padkw[k].eq((sign_extend(self.pads[k], 19) * self.kw)[:ACC_BITS])
                     for k in range(SLOTS)]
        m.submodules.final = final = Map(
            emit_l, self._out, lambda m, e: self._final(m, e.acc, e.start, padkw))
        wiring.connect(m, out.o, final.i)
        wiring.connect(m, final.o, wiring.flipped(self.o))

        # the item being processed: an input register, loaded while the line-buffer banks are
        # read at its address (synchronous reads, issue 10: the asynchronous reads of the deep
        # banks were PDP's critical path)
        it = Signal(self._row)
        it_valid = Signal()
        load = Signal()
        pt, kh, sy = self.pad_top, self.kh, self.sy
        # its padded line q and q + 1 are registered with it (issue 10: the adders in front of
        # the window comparisons started PDP's critical path into the banks' write enables)
        q = Signal(DIM_BITS + 1)
        q1 = Signal(DIM_BITS + 1)
        with m.If(load):
            m.d.sync += [it_valid.eq(self.i.valid), it.eq(self.i.payload),
                         q.eq(self.i.payload.h + pt), q1.eq(self.i.payload.h + pt + 1)]

        # ---- per-surface window bookkeeping ----
        nstarted = Signal(DIM_BITS)     # windows whose first padded line is <= current line
        nended = Signal(DIM_BITS)       # windows already emitted
        lo_start = Signal(DIM_BITS + 1)  # first padded line of window nended
        lo_last = Signal(DIM_BITS + 1)   # its last padded line, lo_start + kh - 1 (a register:
                                         # compared with q in the stall logic)
        nstart_row = Signal(DIM_BITS + 1)  # first padded line of window nstarted
        base = Signal(3)
        # initial values at a surface start: windows starting in the top padding
        # Registers following the configuration in two stages (issue 10: computed from it
        # combinationally, this count and product were PDP's critical path); a layer's
        # ``start`` waits for them (``init_wait``: its first item is taken three cycles after
        # ``start`` at the earliest). At most 8 windows start in the top padding.
        init_n = Signal(4)
        m.d.sync += init_n.eq(1 + sum((j * sy <= pt) for j in range(1, SLOTS)))   # window 0 always
        init_n_c = Signal(4)
        init_row = Signal(9)            # first padded line of window init_n_c
        few = self.out_height < init_n
        m.d.sync += [init_n_c.eq(Mux(few, self.out_height[:4], init_n)),
                     init_row.eq(Mux(few, self.out_height[:4] * sy, init_n * sy))]
        init_wait = Signal(2)

        # ---- flush engine ----
        f_active = Signal()
        f_slot = Signal(3)
        f_start = Signal(DIM_BITS + 1)
        f_count = Signal(4)
        f_ox = Signal(DIM_BITS)
        f_g = Signal(max(1, gb))
        f_last_ox = Signal(DIM_BITS)
        pending = Signal(SLOTS)

        addr = Signal(range(depth))
        f_addr = Signal(range(depth))
        in_addr = Signal(range(depth))      # the address of the item being loaded
        # a bank's address: (output column, channel group); with one group the group is
        # an empty slice
        m.d.comb += [addr.eq(Cat(it.g[:gb], it.ox[:wb])), f_addr.eq(Cat(f_g[:gb], f_ox[:wb])),
                     in_addr.eq(Cat(self.i.payload.g[:gb], self.i.payload.ox[:wb]))]

        # open windows (nstarted - nended) and which banks hold them (bank k holds window
        # (k - base) % 8, open when (k - base - nended) % 8 < nopen): registers updated with
        # nstarted / nended / base (issue 10: derived from them, the count and comparisons
        # started PDP's critical path, into the banks' write enables)
        nopen = Signal(DIM_BITS)
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
        dq = Signal(signed(DIM_BITS + 3))
        m.d.comb += dq.eq(q - lo_start)
        rel_start = Signal(data.ArrayLayout(unsigned(8), SLOTS))
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
        take = Signal()
        conflicts = []
        for k in range(SLOTS):
            mem = Memory(shape=acc_l, depth=depth, init=[])
            m.submodules[f"bank{k}"] = mem
            wp = mem.write_port()
            # reads the next item's address while the current item writes (new data when equal)
            rp = mem.read_port(transparent_for=(wp,))
            fp = mem.read_port(domain="comb")
            rel = Signal(3, name=f"rel{k}")
            m.d.comb += rel.eq(k - base - nended[:3])
            iw = Signal(name=f"in_win{k}")
            m.d.comb += iw.eq(omask[k])
            ini = Signal(name=f"init{k}")
            m.d.comb += ini.eq((dq == rel_start[rel]) | first_line)
            new = Signal(acc_l, name=f"new{k}")
            m.d.comb += [new[ln].eq(v) for ln, v in enumerate(update(rp.data, ini))]
            m.d.comb += [rp.addr.eq(in_addr), rp.en.eq(load), fp.addr.eq(f_addr), wp.addr.eq(addr),
                         wp.data.eq(new), wp.en.eq(take & iw)]
            conflicts.append(iw & pending[k])
            rd_data.append(rp.data)
            f_data.append(fp.data)
        m.d.comb += conflict.eq(Cat(*conflicts).any())

        # the oldest open window (relative start 0): emitted when its last line (or the
        # surface's last line) arrives; its bank's read data selected before the update
        lo_slot = Signal(3)
        m.d.comb += lo_slot.eq(base + nended[:3])
        lo_old = Signal(acc_l)
        m.d.comb += lo_old.eq(Cat(*[r.as_value() for r in rd_data]).word_select(lo_slot,
                                                                                  acc_l.size))
        lo_new = Signal(acc_l)
        m.d.comb += [lo_new[ln].eq(v)
                     for ln, v in enumerate(update(lo_old, (dq == 0) | first_line))]
        emit = Signal()
        m.d.comb += emit.eq((nopen != 0) & ((q == lo_last) | it.last_row))
        f_cur = Signal(acc_l)
        m.d.comb += f_cur.eq(Cat(*[d.as_value() for d in f_data]).word_select(f_slot, acc_l.size))

        stall = Signal()
        m.d.comb += [
            stall.eq(conflict | (emit & (f_active | ~out.i.ready)) | init_wait.any()),
            take.eq(it_valid & ~stall),
            load.eq(~it_valid | take),
            self.i.ready.eq(load),
        ]
        with m.If(f_active):
            m.d.comb += [out.i.valid.eq(1), out.i.payload.acc.eq(f_cur),
                         out.i.payload.start.eq(f_start)]
        with m.Else():
            m.d.comb += [out.i.valid.eq(it_valid & emit & ~conflict),
                         out.i.payload.acc.eq(lo_new), out.i.payload.start.eq(lo_start)]

        # flush progress: windows f_slot.. in order, each over ox 0..f_last_ox, groups
        with m.If(f_active & out.i.ready):
            m.d.sync += f_g.eq(f_g + 1)
            with m.If(f_g == G - 1):
                m.d.sync += [f_g.eq(0), f_ox.eq(f_ox + 1)]
                with m.If(f_ox == f_last_ox):
                    m.d.sync += [f_ox.eq(0), f_slot.eq(f_slot + 1), f_start.eq(f_start + sy),
                                 f_count.eq(f_count - 1), pending.bit_select(f_slot, 1).eq(0)]
                    with m.If(f_count == 1):
                        m.d.sync += f_active.eq(0)

        # line / surface progress
        ends = Signal()         # the oldest window ends with this line
        starts = Signal()       # a window starts with the next line
        m.d.comb += [ends.eq((nopen != 0) & (q == lo_last)),
                     starts.eq((nstarted < self.out_height) & (nstart_row == q1))]
        new_slot = Signal(3)
        m.d.comb += new_slot.eq(base + nstarted[:3])
        with m.If(take & it.row_end):
            with m.If(~it.last_row):
                with m.If(ends):
                    m.d.sync += [nended.eq(nended + 1), lo_start.eq(lo_start + sy),
                                 lo_last.eq(lo_last + sy)]
                with m.If(starts):
                    m.d.sync += [nstarted.eq(nstarted + 1), nstart_row.eq(nstart_row + sy)]
                # the oldest window's bank is closed before the new one's is opened (the same
                # bank when 8 windows are open)
                closed = Mux(ends, omask & ~bank_bit(lo_slot), omask)
                m.d.sync += [nopen.eq(nopen + starts - ends),
                             omask.eq(Mux(starts, closed | bank_bit(new_slot), closed))]
            with m.Else():
                # surface end: windows nended+1 .. nstarted-1 end in the bottom padding
                with m.If(nopen > 1):
                    m.d.sync += [f_active.eq(1), f_slot.eq(lo_slot + 1),
                                 f_start.eq(lo_start + sy), f_count.eq(nopen - 1), f_ox.eq(0),
                                 f_g.eq(0), f_last_ox.eq(it.ox),
                                 pending.eq(omask & ~bank_bit(lo_slot))]
                m.d.sync += [base.eq(new_slot), nended.eq(0), lo_start.eq(0), lo_last.eq(kh - 1),
                             nstarted.eq(init_n_c), nstart_row.eq(init_row),
                             nopen.eq(init_n_c), omask.eq(open_banks(init_n_c, new_slot))]

        m.d.sync += init_wait.eq(init_wait << 1)
        with m.If(init_wait[1]):
            m.d.sync += [lo_last.eq(kh - 1), nstarted.eq(init_n_c), nstart_row.eq(init_row),
                         nopen.eq(init_n_c), omask.eq(open_banks(init_n_c, base))]
        with m.If(self.start):
            m.d.sync += [base.eq(0), nended.eq(0), lo_start.eq(0), init_wait.eq(1),
                         f_active.eq(0), pending.eq(0)]
        return m
