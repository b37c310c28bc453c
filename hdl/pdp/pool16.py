"""PDP's width and height passes for 16-bit elements (nv_full INT16 and FP16, selected at run
time by ``fp``), one stream item = ``lanes`` 16-bit channels of one column; used by
:class:`hdl.pdp.core16.PdpCore16`.

Arithmetic (facts documented in verif/model/pdp.py, read there from NVIDIA's nvdlav1 RTL
NV_NVDLA_PDP_CORE_cal1d.v / _unit1d.v / _cal2d.v and checked on it; see ``pool_plane`` with
INT_WIDTHS[("v1", 1)] and ``pool_plane_fp16``):

* Width pass (:class:`Pool1d16`): INT16 AVE sums a window row's real elements in 22 bits and,
  when only ``n < kw`` columns are real, adds PAD_VALUE_{kw-n}X[18:0] sign-extended, wrapping
  to 22 bits; FP16 AVE converts the elements to fp17, adds them left to right (the running
  value first) and then adds PAD_VALUE_{kw-n}X[16:0] as fp17 bits (+0 when all kw columns are
  real). MAX / MIN over the real elements (INT16 signed, FP16 :func:`hdl.pdp.fold.fp16_pick`).
* Height pass (:class:`Pool2d16`): the window's real rows combined top to bottom (the new row
  first); INT16 AVE in 22 bits plus (PAD_VALUE_{kh-m}X[18:0] sign-extended * kw) wrapped to 22
  bits when only ``m < kh`` rows are real; FP16 AVE plus fp17(PAD_VALUE_{kh-m}X[16:0]) * fp17(kw)
  (+0 when all rows are real).

The folds are :class:`hdl.pdp.fold.FoldChain` (one operator per register stage, issue-10 style:
:func:`hdl.lib.fp.fp_add` is ~19 ns combinational in fp17 on ECP5, so each of its three phases
takes a stage of its own, :class:`hdl.lib.fp.FpAddStages`; so does the padding addition).
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hdl.lib.fixed import sign_extend
from hdl.lib.fp import FpAddStages, fp_mul, fp_widen
from hdl.lib.stream import Map, SkidBuffer
from hdl.pdp.fold import (FP16, FP17, POOL_AVE, TAPS, VBITS, FoldChain, fold_in_layout,
                          fold_out_layout, fp17_of_small_int, lanes_signal)
from hdl.pdp.pool1d import DIM_BITS, Pool1d, row_item_layout

__all__ = ["Pool1d16", "Pool2d16", "PAD_BITS"]

#: PAD_VALUE_nX bits the INT16 passes read (the 19-bit register fields; verif/model/pdp.py:
#: min(width-pass bits, 19))
PAD_BITS = 19


def _pos(row) -> dict:
    """The position fields of a :func:`hdl.pdp.pool1d.row_item_layout` (all but ``v``)."""
    return {k: v for k, v in row.members.items() if k != "v"}


class Pool1d16(Pool1d):
    """Width pass for 16-bit elements: :class:`hdl.pdp.pool1d.Pool1d`'s sequencing (bands,
    padding, the flush of windows ending in the right padding) on 16-bit elements, its windows
    reduced by a :class:`hdl.pdp.fold.FoldChain` (module docstring).

    Parameters and ports as Pool1d, except: ``i`` In(stream of ArrayLayout(signed(16),
    lanes)) (INT16 values or fp16 bit patterns); ``o`` Out(stream of row_item_layout(lanes,
    groups, signed(VBITS))) (INT16: the 22-bit sums or the int16 maxima/minima; FP16: fp17
    sums, or fp16 patterns for MAX/MIN, zero-extended); plus ``fp`` In(1) (1: FP16, 0: INT16;
    stable during a layer). Latency: Pool1d's window register, a conversion stage (fp16 ->
    fp17 for FP16 AVE, the padding term), the fold's 22 stages and the padding addition's 3.
    """

    ELEM = signed(16)
    VALUE = signed(VBITS)

    def _extra_members(self) -> dict:
        return {"fp": In(1)}

    def _reduction(self, m, out, win_layout):
        T = self.lanes
        pos = _pos(self._row)
        extra = data.StructLayout({"pad": signed(VBITS), **pos})
        ave = self.method == POOL_AVE
        fp = self.fp

        def convert(m, w):
            taps = []
            for a in range(TAPS):
                lanes = []
                for ln in range(T):
                    x = w.ages[a][ln]
                    wide = fp_widen(m, x.as_unsigned(), FP16[0], FP17[0], FP16[1],
                                    name=f"widen{a}_{ln}")
                    lanes.append(Mux(fp, Mux(ave, wide, x.as_unsigned()), x))
                taps.append(lanes)
            raw = self.pads[w.pad_idx]
            pad = Mux(w.pad_need & ave, Mux(fp, raw[:17], sign_extend(raw, PAD_BITS)), 0)
            res = Signal(fold_in_layout(T, extra), name="conv")
            for a in range(TAPS):
                for ln in range(T):
                    m.d.comb += res.taps[a][ln].eq(taps[a][ln])
            m.d.comb += [res.valid.eq(w.valid), res.x.pad.eq(pad)]
            m.d.comb += [res.x[k].eq(w[k]) for k in pos]
            return res

        def pad_operands(m, w):
            return [(w.acc[ln][:17], w.x.pad[:17]) for ln in range(T)]

        def pad_add(m, w, f_sums):
            v = []
            for ln in range(T):
                acc = w.acc[ln]
                i_sum = (acc + w.x.pad)[:VBITS].as_signed()
                v.append(Mux(ave, Mux(fp, f_sums[ln], i_sum), acc))
            return {"v": lanes_signal(m, v, "v"), **{k: w.x[k] for k in pos}}

        m.submodules.convert = conv = Map(win_layout, fold_in_layout(T, extra), convert)
        m.submodules.fold = fold = FoldChain(T, extra, new_first=False)
        m.submodules.pad_add = padd = FpAddStages(fold_out_layout(T, extra), self._row, *FP17, T,
                                                  pad_operands, pad_add)
        m.d.comb += [fold.method.eq(self.method), fold.fp.eq(fp)]
        wiring.connect(m, out.o, conv.i)
        wiring.connect(m, conv.o, fold.i)
        wiring.connect(m, fold.o, padd.i)
        wiring.connect(m, padd.o, wiring.flipped(self.o))


class Pool2d16(wiring.Component):
    """Height pass for 16-bit elements (module docstring), on the width pass's items.

    Output row ``oy`` covers padded lines ``oy*sy .. oy*sy + kh - 1`` (padded line = line +
    PAD_TOP). Unlike the INT8 :class:`hdl.pdp.pool2d.Pool2d`, which updates partial results in
    its line buffer (a read-modify-write loop: no room there for a pipelined fp17 adder), this
    pass keeps the width pass's last 8 rows (8 banks, bank = line mod 8, one entry per (output
    column, channel group)) and folds a window's rows when it ends, feed-forward:

    * an item is written into its line's bank when it is taken, and the other 7 banks are read
      at its address in the same cycle (so a row is read at the earliest one item after it was
      written: no forwarding is needed); the item waits in a register with the read data;
    * window ``ne`` (the oldest one not emitted) is emitted with the items of its last line,
      or of the surface's last line when it ends in the bottom padding; its taps are the item
      (age 0) and the rows read (ages 1..7), the real ones being ages 0 .. q - max(first line,
      PAD_TOP) (q the item's padded line);
    * after the surface's last line, the windows after ``ne`` (all ending in the bottom
      padding) are emitted by a flush that reads every address of the line again from the banks
      (age 0 now from the last line's bank); the next surface's items wait meanwhile (they
      would overwrite rows the flush reads).

    Then a stage computing the padding term (one per window), the :class:`FoldChain` (the new
    row first) and the padding addition.

    Parameters: ``lanes``, ``groups`` (as :class:`hdl.pdp.pool1d.Pool1d`), ``max_width``
    (output columns a bank holds; a power of two; wider bands are not supported).

    Ports: ``i`` In(stream of row_item_layout(lanes, groups, signed(VBITS))); ``o``
    Out(stream of ArrayLayout(signed(VBITS), lanes)) in order surface, oy, ox, group (INT16 AVE:
    the 22-bit padded total; FP16 AVE: its fp17 pattern; MAX/MIN: the int16 value / fp16
    pattern); ``start`` In(1) pulse at layer start; ``method`` In(2); ``fp`` In(1); ``kw``
    In(4); ``kh`` In(4) 1..8; ``sy`` In(5) 1..16; ``pad_top`` In(3); ``out_height`` In(14);
    ``pads`` In(ArrayLayout(19, 8)) raw PAD_VALUE_kX at index k.
    Throughput: one item per cycle, plus one cycle per (window ending in the bottom padding
    after the oldest, output column, group) at each surface end.
    """

    def __init__(self, lanes: int, groups: int, max_width: int):
        if max_width & (max_width - 1) or groups & (groups - 1):
            raise ValueError("max_width and groups must be powers of two")
        self.lanes, self.groups, self.max_width = lanes, groups, max_width
        self._row = row_item_layout(lanes, groups, signed(VBITS))
        self._out = data.ArrayLayout(signed(VBITS), lanes)
        super().__init__({
            "i": In(stream.Signature(self._row)),
            "o": Out(stream.Signature(self._out)),
            "start": In(1), "method": In(2), "fp": In(1),
            "kw": In(4), "kh": In(4), "sy": In(5), "pad_top": In(3),
            "out_height": In(DIM_BITS),
            "pads": In(data.ArrayLayout(unsigned(PAD_BITS), 8)),
        })

    def elaborate(self, platform):
        m = Module()
        G, T = self.groups, self.lanes
        gb = (G - 1).bit_length()
        wb = (self.max_width - 1).bit_length()
        depth = self.max_width * G
        lane_l = data.ArrayLayout(signed(VBITS), T)
        pt, kh, sy, oh = self.pad_top, self.kh, self.sy, self.out_height
        LB = DIM_BITS + 5                 # line numbers: up to out_height * 16 + 8

        win_x = data.StructLayout({"need": 1, "idx": 3})
        m.submodules.out = out = SkidBuffer(fold_in_layout(T, win_x))

        # ---- the item register and the banks ----
        it = Signal(self._row)
        it_valid = Signal()
        q = Signal(LB)                    # its padded line
        accept = Signal()
        leave = Signal()
        f_active = Signal()               # flush: reads to issue
        f_dvalid = Signal()               # flush: the banks' read data hold a window's rows
        f_busy = Signal()
        f_issue = Signal()
        f_start_now = Signal()            # the leaving item starts a flush
        m.d.comb += f_busy.eq(f_active | f_dvalid)
        m.d.comb += [
            self.i.ready.eq(~f_busy & (~it_valid | (leave & ~f_start_now))),
            accept.eq(self.i.valid & self.i.ready),
        ]
        with m.If(leave):
            m.d.sync += it_valid.eq(0)
        with m.If(accept):
            m.d.sync += [it_valid.eq(1), it.eq(self.i.payload),
                         q.eq(self.i.payload.h + pt)]

        f_ox = Signal(DIM_BITS)
        f_g = Signal(max(1, gb))
        in_addr = Signal(range(depth))
        f_addr = Signal(range(depth))
        m.d.comb += [in_addr.eq(Cat(self.i.payload.g[:gb], self.i.payload.ox[:wb])),
                     f_addr.eq(Cat(f_g[:gb], f_ox[:wb]))]
        rd = []
        for k in range(TAPS):
            mem = Memory(shape=lane_l, depth=depth, init=[])
            m.submodules[f"bank{k}"] = mem
            wp = mem.write_port()
            rp = mem.read_port()
            m.d.comb += [wp.addr.eq(in_addr), wp.data.eq(self.i.payload.v),
                         wp.en.eq(accept & (self.i.payload.h[:3] == k)),
                         rp.addr.eq(Mux(f_busy, f_addr, in_addr)), rp.en.eq(accept | f_issue)]
            rd.append(rp.data)
        rd_cat = Cat(*[r.as_value() for r in rd])

        # ---- windows: ``ne`` the oldest not emitted, its first and last padded lines ----
        ne = Signal(DIM_BITS)
        ne_start = Signal(LB)
        ne_end = Signal(LB)
        on_end = Signal()
        emit = Signal()
        m.d.comb += [on_end.eq(q == ne_end),
                     emit.eq(it_valid & (ne < oh) & (it.last_row | on_end))]

        # flush state: window f_k (first line f_start) over every (f_ox, f_g) up to f_last_ox;
        # f_dstart the first line of the window whose rows the read data hold
        f_k = Signal(DIM_BITS)
        f_start = Signal(LB)
        f_dstart = Signal(LB)
        f_last_ox = Signal(DIM_BITS)
        f_h3 = Signal(3)
        f_q = Signal(LB)

        # the emitted window (item or flush)
        h3 = Signal(3)
        qq = Signal(LB)
        first = Signal(LB)
        amax = Signal(LB)
        m.d.comb += [h3.eq(Mux(f_busy, f_h3, it.h[:3])), qq.eq(Mux(f_busy, f_q, q))]
        st = Mux(f_busy, f_dstart, ne_start)
        m.d.comb += [first.eq(Mux(st > pt, st, pt)), amax.eq(qq - first)]
        p = out.i.payload
        for a in range(TAPS):
            row = rd_cat.word_select((h3 - a)[:3], lane_l.size)
            if a == 0:
                row = Mux(f_busy, row, it.v.as_value())
            m.d.comb += [p.taps[a].eq(row), p.valid[a].eq(amax >= a if a else 1)]
        mreal = amax[:4] + 1
        m.d.comb += [p.x.need.eq(mreal != kh), p.x.idx.eq((kh - mreal)[:3]),
                     out.i.valid.eq(Mux(f_busy, f_dvalid, emit))]

        m.d.comb += [
            leave.eq(it_valid & ~f_busy & (~emit | out.i.ready)),
            f_start_now.eq(it.row_end & it.last_row & (ne + 1 < oh)),
        ]
        with m.If(leave & it.row_end):
            with m.If(it.last_row):
                m.d.sync += [ne.eq(0), ne_start.eq(0), ne_end.eq(kh - 1)]
                with m.If(f_start_now):
                    m.d.sync += [f_active.eq(1), f_k.eq(ne + 1), f_start.eq(ne_start + sy),
                                 f_ox.eq(0), f_g.eq(0), f_last_ox.eq(it.ox), f_h3.eq(it.h[:3]),
                                 f_q.eq(q)]
            with m.Elif(on_end & (ne < oh)):
                m.d.sync += [ne.eq(ne + 1), ne_start.eq(ne_start + sy), ne_end.eq(ne_end + sy)]

        # flush: a read is issued when the data register is free (empty or taken now)
        m.d.comb += f_issue.eq(f_active & (~f_dvalid | out.i.ready))
        with m.If(f_issue):
            m.d.sync += [f_dvalid.eq(1), f_dstart.eq(f_start), f_g.eq(f_g + 1)]
            with m.If(f_g == G - 1):
                m.d.sync += [f_g.eq(0), f_ox.eq(f_ox + 1)]
                with m.If(f_ox == f_last_ox):
                    m.d.sync += [f_ox.eq(0), f_k.eq(f_k + 1), f_start.eq(f_start + sy)]
                    with m.If(f_k + 1 == oh):
                        m.d.sync += f_active.eq(0)
        with m.Elif(out.i.ready):
            m.d.sync += f_dvalid.eq(0)

        with m.If(self.start):
            m.d.sync += [it_valid.eq(0), ne.eq(0), ne_start.eq(0), ne_end.eq(kh - 1),
                         f_active.eq(0), f_dvalid.eq(0)]

        # ---- the padding term (one per window), the fold, the padding addition ----
        ave = self.method == POOL_AVE
        fp = self.fp
        pk_x = data.StructLayout({"padk": signed(VBITS)})

        def pad_term(m, w):
            raw = self.pads[w.x.idx]
            kwf = Signal(17, name="kwf")          # fp17(kw)
            with m.Switch(self.kw):
                for n in range(1, 8):
                    with m.Case(n):
                        m.d.comb += kwf.eq(fp17_of_small_int(n))
                with m.Default():                 # 8 (KERNEL_WIDTH is 3 bits: kw 1..8)
                    m.d.comb += kwf.eq(fp17_of_small_int(8))
            f_term = fp_mul(m, Mux(w.x.need, raw[:17], 0), kwf, *FP17, name="padk")
            i_term = (sign_extend(raw, PAD_BITS) * self.kw)[:VBITS].as_signed()
            x = Signal(pk_x, name="x")
            m.d.comb += x.padk.eq(Mux(fp, f_term, Mux(w.x.need, i_term, 0)))
            return {"taps": w.taps, "valid": w.valid, "x": x}

        def pad_operands(m, w):
            return [(w.acc[ln][:17], w.x.padk[:17]) for ln in range(T)]

        def pad_add(m, w, f_sums):
            v = []
            for ln in range(T):
                acc = w.acc[ln]
                i_sum = (acc + w.x.padk)[:VBITS].as_signed()
                v.append(Mux(ave, Mux(fp, f_sums[ln], i_sum), acc))
            return v

        m.submodules.pad_term = pterm = Map(fold_in_layout(T, win_x), fold_in_layout(T, pk_x),
                                            pad_term)
        m.submodules.fold = fold = FoldChain(T, pk_x, new_first=True)
        m.submodules.pad_add = padd = FpAddStages(fold_out_layout(T, pk_x), self._out, *FP17, T,
                                                  pad_operands, pad_add)
        m.d.comb += [fold.method.eq(self.method), fold.fp.eq(fp)]
        wiring.connect(m, out.o, pterm.i)
        wiring.connect(m, pterm.o, fold.i)
        wiring.connect(m, fold.o, padd.i)
        wiring.connect(m, padd.o, wiring.flipped(self.o))
        return m
