"""Compressed weights back to uncompressed ones on their way into CBUF (format.rst "Sparse
Compression option"; docs/conv.md "Compressed weights").

A weight element of the uncompressed stream is zero where its WMB bit is 0, else the next
element of the compressed stream (the non-zero elements packed in order). The WMB has one bit
per element, little-endian within each byte (bit ``i % 8`` of byte ``i // 8`` for element
``i``: the model's ``decompress_weights``), and both streams run through the whole layer,
kernel group after kernel group, with no alignment between groups.

NVIDIA's CDMA writes the compressed weights into CBUF and its WMB into bank 15, and its CSC
expands them (nvdlav1 NV_NVDLA_CSC_wl). Here CDMA expands them before CBUF, so CBUF, CSC and
everything after them see the uncompressed weights: the weight banks then hold uncompressed
kernel groups, which the programming guide asks for in every mode ("WEIGHT_BANK should be
allocated large enough to store one kernel group weight plus 128Bytes", with its weight size
R*S*C*BPE*K "regardless of weight compress mode"), and bank 15 is not used.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.cdma.dma import ENTRY_COUNT_BITS

__all__ = ["WtExpand"]


class WtExpand(wiring.Component):
    """Uncompressed CBUF entries from compressed weight atoms and their WMB (module docstring).

    Parameters: ``atom_bytes`` (A, bytes of every atom in, a power of two >= 2);
    ``entry_atoms`` (R, 1..8, a power of two): an entry out is E = R x A bytes (CBUF's
    entry); ``elem16`` (bool): the ``wide`` input exists (16-bit elements: one WMB bit per 2
    bytes).

    Ports:

    * ``start`` In(1): a layer's pulse (only while not ``busy``); samples the counts below and
      ``bypass`` / ``wide``.
    * ``entries`` In(32): uncompressed entries to deliver on ``o``; ``dense_bytes`` In(32): the
      uncompressed weight bytes (BYTE_PER_KERNEL x kernels); bytes of ``o`` at or past it are 0
      (the last entry's rest).
    * ``wt_atoms``, ``wmb_atoms`` In(32): atoms that will arrive on ``wt`` and ``wmb`` this
      layer (D_WEIGHT_BYTES and D_WMB_BYTES as fetched): those not needed are taken and
      dropped, so the next layer starts clean.
    * ``bypass`` In(1): uncompressed weights (every WMB bit taken as 1, no ``wmb`` atom): ``o``
      is ``wt``, R atoms to an entry (atom i in bytes [iA, (i+1)A)), one register later.
    * ``wide`` In(1) (``elem16`` only): 16-bit elements.
    * ``wt``, ``wmb`` In(stream of ``unsigned(8 * A)``): the compressed weight bytes and the
      WMB bytes, byte i in bits [8i+7:8i].
    * ``o`` Out(stream of ``unsigned(8 * E)``): the uncompressed entries, registered.
    * ``busy`` Out(1): entries remain to be delivered or atoms to be taken.

    Timing: one uncompressed entry per cycle (CBUF's write rate) while the compressed bytes it
    needs (at most E) are held (a buffer of E + A bytes takes a ``wt`` atom whenever it holds
    at most E) and its WMB atom is here (one per 8A / E entries, twice as many of 16-bit
    elements). ``wt`` brings at most A bytes a cycle, so an entry of at most A non-zero bytes
    (on nv_full, R = 2: half its elements zero) goes out every cycle, R times the rate of
    uncompressed weights; at most one entry per R cycles in bypass.
    A program whose WMB marks more non-zero bytes than ``wt`` brings never ends (``busy``).

    Raises ValueError: ``atom_bytes`` or ``entry_atoms`` out of range.
    """

    def __init__(self, atom_bytes: int, entry_atoms: int = 1, elem16: bool = False):
        if atom_bytes < 2 or atom_bytes & (atom_bytes - 1):
            raise ValueError("WtExpand: atom_bytes must be a power of two >= 2")
        if entry_atoms not in (1, 2, 4, 8):
            raise ValueError("WtExpand: entry_atoms must be 1, 2, 4 or 8")
        self.ab, self.r, self.elem16 = atom_bytes, entry_atoms, elem16
        a = stream.Signature(8 * atom_bytes)
        members = {"start": In(1), "entries": In(ENTRY_COUNT_BITS), "dense_bytes": In(32),
                   "wt_atoms": In(ENTRY_COUNT_BITS), "wmb_atoms": In(ENTRY_COUNT_BITS),
                   "bypass": In(1), "wt": In(a), "wmb": In(a),
                   "o": Out(stream.Signature(8 * atom_bytes * entry_atoms)), "busy": Out(1)}
        if elem16:
            members["wide"] = In(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        A = self.ab
        E = A * self.r
        kb = (E - 1).bit_length()                       # bits of 0..E-1
        s8, s16 = 8 * A // E, 16 * A // E               # entries per WMB atom
        buf = Signal(8 * (E + A))                       # compressed bytes, byte 0 the next
        cnt = Signal(range(E + A + 1))                  # bytes held (bytes above are 0)
        mbuf = Signal(8 * A)                            # the current WMB atom
        mvalid = Signal()
        mptr = Signal(range(s16))                       # the entry's slice of mbuf
        left = Signal(ENTRY_COUNT_BITS)                 # entries to deliver
        bleft = Signal(32)                              # uncompressed bytes not yet delivered
        wt_left = Signal(ENTRY_COUNT_BITS)
        wmb_left = Signal(ENTRY_COUNT_BITS)
        bypass, wide = Signal(), Signal()

        # this entry's mask, one bit per byte: WMB bits (16-bit elements: each bit twice), 0
        # from dense_bytes on; all ones in bypass
        b8 = mbuf.word_select(mptr[:(s8 - 1).bit_length()], E) if s8 > 1 else mbuf
        b16 = mbuf.word_select(mptr, E // 2)
        full = Signal()
        m.d.comb += full.eq(bleft >= E)
        mb = Signal(E)
        for j in range(E):
            bit = Mux(wide, b16[j // 2], b8[j]) if self.elem16 else b8[j]
            inside = full | (bleft[:kb + 1] > j)
            m.d.comb += mb[j].eq(bypass | (bit & inside))
        # prefix counts: byte j of the entry is compressed byte p[j] when its bit is set
        p = [Const(0, 1)]
        for j in range(E):
            s = Signal(range(j + 2), name=f"pre{j + 1}")
            m.d.comb += s.eq(p[-1] + mb[j])
            p.append(s)
        need = p[E]
        outb = []
        for j in range(E):
            cand = buf[:8 * (j + 1)]
            pick = cand.word_select(p[j], 8) if j else cand
            outb.append(Mux(mb[j], pick, 0))

        mneed = Signal()                                # WMB bits used by this entry
        last_slice = Signal()
        m.d.comb += [mneed.eq(~bypass & (bleft != 0)),
                     last_slice.eq(Mux(wide, mptr == s16 - 1, mptr == s8 - 1))]
        emit = Signal()
        m.d.comb += emit.eq((left != 0) & (~mneed | mvalid) & (cnt >= need)
                            & (~self.o.valid | self.o.ready))
        with m.If(emit):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.eq(Cat(*outb)),
                         left.eq(left - 1), bleft.eq(Mux(full, bleft - E, 0))]
        with m.Elif(self.o.ready):
            m.d.sync += self.o.valid.eq(0)

        # WMB atoms: a new one when the current one's last slice is used (dropped once the
        # layer's entries are all delivered)
        wmb_take = Signal()
        m.d.comb += [
            self.wmb.ready.eq((wmb_left != 0)
                              & ((left == 0) | ~mvalid | (emit & mneed & last_slice))),
            wmb_take.eq(self.wmb.valid & self.wmb.ready),
        ]
        with m.If(emit & mneed):
            m.d.sync += mptr.eq(Mux(last_slice, 0, mptr + 1))
            with m.If(last_slice):
                m.d.sync += mvalid.eq(0)
        with m.If(wmb_take):
            m.d.sync += wmb_left.eq(wmb_left - 1)
            with m.If(left != 0):
                m.d.sync += [mbuf.eq(self.wmb.payload), mvalid.eq(1)]

        # compressed bytes: used bytes leave at the bottom, a new atom comes in above the rest
        wt_take = Signal()
        m.d.comb += [self.wt.ready.eq((wt_left != 0) & ((left == 0) | (cnt <= E))),
                     wt_take.eq(self.wt.valid & self.wt.ready)]
        used = Signal(range(E + 1))
        rest = Signal(range(E + A + 1))
        m.d.comb += [used.eq(Mux(emit, need, 0)), rest.eq(cnt - used)]
        width = 8 * (E + A)
        kept = (buf >> Cat(Const(0, 3), used))[:width]
        with m.If(wt_take):
            m.d.sync += wt_left.eq(wt_left - 1)
        with m.If(wt_take & (left != 0)):
            m.d.sync += [buf.eq(kept | (self.wt.payload << Cat(Const(0, 3), rest))[:width]),
                         cnt.eq(rest + A)]
        with m.Else():
            m.d.sync += [buf.eq(kept), cnt.eq(rest)]

        m.d.comb += self.busy.eq((left != 0) | (wt_left != 0) | (wmb_left != 0) | self.o.valid)
        with m.If(self.start):
            m.d.sync += [left.eq(self.entries), bleft.eq(self.dense_bytes),
                         wt_left.eq(self.wt_atoms), wmb_left.eq(Mux(self.bypass, 0, self.wmb_atoms)),
                         buf.eq(0), cnt.eq(0), mvalid.eq(0), mptr.eq(0), bypass.eq(self.bypass)]
            if self.elem16:
                m.d.sync += wide.eq(self.wide)
        return m
