"""Weight sets from CBUF entries (docs/conv.md "CSC"): collect the entries of one weight set,
each entry written to its place with the set's first byte at byte 0 (aligned), and unpack the
``kg*cw`` bytes (kernel-major, format.rst "Basic Weight for Direct Convolution") into
``wt[k][c]`` with zeros for kernels and channels past the end (the last channel block is shorter
and not zero-filled in memory).
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.lib.stream import Map

__all__ = ["set_entries", "entry_tag_layout", "aligned_set_layout", "wt_layout", "WtCollect",
           "WtUnpack", "WtUnpackSerial", "serial_unpack", "wt16_layout", "WtUnpack16"]


def serial_unpack(atomic_c: int, atomic_k: int) -> bool:
    """Whether CSC builds its weight path as :class:`WtUnpackSerial` (one kernel per cycle)
    rather than :class:`WtCollect` + :class:`WtUnpack` (a whole set per cycle): for weight
    sets of 1,024 bytes and more (nv_medium_1024_full, nv_large, nv_full). WtUnpack's byte
    multiplexers grow as ``atomic_k * atomic_c**2 / 2`` byte inputs (65,536 at atomic C 64 x
    atomic K 32: nv_large's CSC measured 289,156 LUT with it), WtUnpackSerial's one extractor
    as ``atomic_c * entry_bytes``; the serial path takes ``kg`` cycles per set, which equals
    the entries of a full set when ``cbuf_bank_width == atomic_c`` and is slower only on the
    short last channel block (docs/conv.md "CSC")."""
    return atomic_k * atomic_c >= 1024


def set_entries(atomic_c: int, atomic_k: int, entry_bytes: int) -> int:
    """Most CBUF entries one weight set touches: ``atomic_k*atomic_c`` bytes starting anywhere
    inside an entry."""
    return (entry_bytes - 1 + atomic_k * atomic_c - 1) // entry_bytes + 1


def entry_tag_layout(atomic_c: int, atomic_k: int, entry_bytes: int) -> data.StructLayout:
    """Per-entry tag of the weight path: the set's first/last entry flags, byte offset of the
    set in its first entry, kernels ``kg`` and channels ``cw`` of the set."""
    return data.StructLayout({
        "set_first": 1, "set_last": 1, "off": max(1, (entry_bytes - 1).bit_length()),
        "kg": range(atomic_k + 1), "cw": range(atomic_c + 1),
    })


def aligned_set_layout(atomic_c: int, atomic_k: int) -> data.StructLayout:
    """A collected weight set, aligned: its ``atomic_k*atomic_c`` first bytes from byte 0 (the
    set's byte 0 first; bytes past the set are unspecified), ``kg`` kernels and ``cw`` channels."""
    return data.StructLayout({"bytes": data.ArrayLayout(unsigned(8), atomic_k * atomic_c),
                              "kg": range(atomic_k + 1), "cw": range(atomic_c + 1)})


def wt_layout(atomic_c: int, atomic_k: int):
    """The weights of one set as CMAC takes them: ``wt[k][c]`` signed int8."""
    return data.ArrayLayout(data.ArrayLayout(signed(8), atomic_c), atomic_k)


class WtCollect(wiring.Component):
    """Collect the entries of each weight set into one aligned item of
    :func:`aligned_set_layout`.

    Input items: ``{data: entry, tag: entry_tag_layout}`` in order; an item with
    ``tag.set_first`` is the set's entry 0, the next ones its entries 1, 2, ...; the item with
    ``tag.set_last`` completes the set. The set starts at byte ``tag.off`` of its entry 0, so
    byte ``b`` of entry ``j`` is byte ``j*entry_bytes + b - off`` of the set: each entry is
    rotated down by ``off`` bytes once (one ``entry_bytes``-wide rotator) and its bytes written
    to their aligned places, those below ``entry_bytes - off`` into aligned slot ``j``, the
    others into slot ``j - 1`` (bytes before the set or past ``atomic_k*atomic_c`` are
    dropped). The bytes are written straight into the output register (one 8-bit write enable
    per byte, no second buffer): ``i.ready = ~o.valid | o.ready``, so the next set's entries
    are taken from the cycle its predecessor leaves. Timing: one entry per cycle; the set is
    registered (valid the cycle after its last entry).
    """

    def __init__(self, atomic_c: int, atomic_k: int, entry_bytes: int):
        if (atomic_k * atomic_c) % entry_bytes:
            raise NotImplementedError("WtCollect: atomic_k*atomic_c must be a multiple of "
                                      "entry_bytes")
        self.eb = entry_bytes
        self.slots = atomic_k * atomic_c // entry_bytes
        self.tag = entry_tag_layout(atomic_c, atomic_k, entry_bytes)
        self.aligned = aligned_set_layout(atomic_c, atomic_k)
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({"data": entry_bytes * 8,
                                                         "tag": self.tag}))),
            "o": Out(stream.Signature(self.aligned)),
        })

    def elaborate(self, platform):
        m = Module()
        eb, eb8 = self.eb, self.eb * 8
        nraw = set_entries(1, self.slots * eb, eb)        # entries a set touches, at most
        idx = Signal(range(nraw + 1))
        slot = Signal(range(nraw + 1))
        buf = Value.cast(self.o.payload.bytes)
        tag = self.i.payload.tag
        m.d.comb += [
            slot.eq(Mux(tag.set_first, 0, idx)),
            self.i.ready.eq(~self.o.valid | self.o.ready),
        ]
        # the entry rotated down by off bytes: rot byte p = entry byte (p + off) mod eb
        rot = Signal(eb8)
        d = self.i.payload.data
        m.d.comb += rot.eq((Cat(d, d) >> Cat(Const(0, 3), tag.off))[:eb8])
        accept = self.i.valid & self.i.ready
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(accept):
            m.d.sync += idx.eq(slot + 1)
            for k in range(self.slots):
                for b in range(eb):
                    # byte b goes to the next slot when b >= eb - off (never for b = 0: off < eb)
                    sel = slot == k if b == 0 else Mux(tag.off >= eb - b, slot == k + 1, slot == k)
                    with m.If(sel):
                        m.d.sync += buf[(k * eb + b) * 8:(k * eb + b + 1) * 8].eq(
                            rot[b * 8:(b + 1) * 8])
            with m.If(tag.set_last):
                m.d.sync += [
                    self.o.valid.eq(1),
                    self.o.payload.kg.eq(tag.kg),
                    self.o.payload.cw.eq(tag.cw),
                ]
        return m


class WtUnpack(Map):
    """Register stage: aligned bytes -> ``wt[k][c]`` = byte ``k*cw + c`` for ``k < kg`` and
    ``c < cw``, 0 elsewhere (format.rst: a set is kg kernels of cw bytes, kernel-major).

    Each output byte picks one of its ``atomic_c - c`` candidates (``cw`` = c+1 .. atomic_c) by
    one variable word select: a ``atomic_c``-way byte multiplexer, ``atomic_k * atomic_c`` of
    them. (Written as a ``Switch`` on ``cw`` per byte, the same multiplexers took 386 s and
    2.4 GB of Python to elaborate at atomic C 64 x atomic K 16 and did not finish at nv_large's
    64 x 32; as word selects, seconds.)"""

    def __init__(self, atomic_c: int, atomic_k: int, i_layout):
        ac, ak = atomic_c, atomic_k

        def fn(m, p):
            out = []
            # the fields as signals of their own: a byte is then an 8-bit slice of a signal
            # (slicing the view's nested slices copies the whole set for every byte)
            nbytes = ak * ac
            raw, cw, kg = Signal(8 * nbytes), Signal.like(p.cw), Signal.like(p.kg)
            m.d.comb += [raw.eq(p.bytes), cw.eq(p.cw), kg.eq(p.kg)]
            for k in range(ak):
                row = []
                for c in range(ac):
                    # candidate j: the byte when cw = c + 1 + j (0 where it lies past the set)
                    cands = [raw[8 * (k * cwv + c):8 * (k * cwv + c + 1)]
                             if k * cwv + c < nbytes else Const(0, 8)
                             for cwv in range(c + 1, ac + 1)]
                    if len(cands) == 1:
                        pick = cands[0]
                    else:
                        pick = Cat(*cands).word_select((cw - (c + 1))[:len(cw)], 8)
                    # channel c past the set's cw, kernel k past kg: 0
                    row.append(Mux((cw > c) & (kg > k), pick, 0))
                out.append(Cat(*row))
            return Cat(*out)
        super().__init__(i_layout, wt_layout(atomic_c, atomic_k), fn)


class WtUnpackSerial(wiring.Component):
    """Weight sets straight from their CBUF entries, one kernel per cycle: the entries of a set
    (``kg`` kernels of ``cw`` bytes, kernel-major, from byte ``tag.off`` of its first entry;
    format.rst "Basic Weight for Direct Convolution") in, ``wt[k][c]`` out (zeros for
    ``k >= kg`` and ``c >= cw``), in place of :class:`WtCollect` + :class:`WtUnpack`.

    Kernel ``k`` starts at byte ``off + k*cw`` of the set's entry stream; with ``cw <=
    atomic_c <= entry_bytes`` it lies in that entry and at most the next one. The entry holding
    the next kernel's start is kept (``prev``), the one at the input (``cur``) is the following
    entry of the set: each cycle the kernel is taken from ``Cat(prev, cur)`` at its offset (one
    ``entry_bytes``-way byte selector per channel, the only wide multiplexer) and written to
    row ``k`` of the output register (through a register of one kernel); ``cur`` moves into ``prev`` in the cycle the last kernel
    starting in ``prev`` is taken (it is waited for then), the set's last entry is dropped when
    no kernel starts in it. Row 0's write clears the other rows, so rows past ``kg`` are zero.

    Input items: ``{data: entry, tag: entry_tag_layout}`` as for :class:`WtCollect`.
    Output: one :func:`wt_layout` item per set, valid two cycles after its last kernel is taken
    (the kernel is registered, then written into its row).

    Timing: one kernel per cycle, the next set's first kernel in the cycle after the last one
    when that one ended in an entry with a kernel start (always for entry-aligned sets of
    whole entries), else one cycle later: ``kg`` (or ``kg + 1``) cycles per set, while the
    output register is free (``~o.valid | o.ready``: written in the cycle it is taken).
    Latency: the set is valid 2 cycles after its last kernel is taken from the entries.

    Raises:
        NotImplementedError: ``atomic_c > entry_bytes``.
    """

    def __init__(self, atomic_c: int, atomic_k: int, entry_bytes: int):
        if atomic_c > entry_bytes:
            raise NotImplementedError("WtUnpackSerial: atomic_c must be <= entry_bytes")
        self.ac, self.ak, self.eb = atomic_c, atomic_k, entry_bytes
        self.tag = entry_tag_layout(atomic_c, atomic_k, entry_bytes)
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({"data": entry_bytes * 8,
                                                         "tag": self.tag}))),
            "o": Out(stream.Signature(wt_layout(atomic_c, atomic_k))),
        })

    def elaborate(self, platform):
        m = Module()
        ac, ak, eb = self.ac, self.ak, self.eb
        tag = self.i.payload.tag
        prev = Signal(eb * 8)
        have = Signal()                         # prev holds an entry of the set being unpacked
        off = Signal(range(eb))                 # where kernel k starts in prev (bytes)
        k = Signal(range(ak + 1))
        kg = Signal.like(tag.kg)
        cw = Signal.like(tag.cw)
        # the extracted kernel is registered (q_*) before it is written into its row: without
        # the register, ABC copied the extractor's last multiplexer levels into every output
        # bit (per bit 1 MUXF8, 2 MUXF7: 16,418 MUXF8 at nv_large)
        q_valid, q_last = Signal(), Signal()
        q_k = Signal(range(ak))
        q_row = Signal(ac * 8)
        wfree, commit, s2_free = Signal(), Signal(), Signal()
        m.d.comb += [
            wfree.eq(~self.o.valid | self.o.ready),
            commit.eq(q_valid & wfree),
            s2_free.eq(~q_valid | wfree),
        ]

        # kernel k: cw bytes from byte off of prev (continuing into cur), channels past cw zero
        window = Cat(prev, self.i.payload.data)
        ext = Signal(ac * 8)
        m.d.comb += ext.eq((window >> Cat(Const(0, 3), off))[:ac * 8])
        row = Signal(ac * 8)
        for c in range(ac):
            m.d.comb += row[c * 8:(c + 1) * 8].eq(Mux(cw > c, ext[c * 8:(c + 1) * 8], 0))

        nxt = Signal(range(eb + ac + 1))
        last_k = Signal()
        needcur = Signal()
        need_in = Signal()
        emit = Signal()
        m.d.comb += [
            nxt.eq(off + cw),
            last_k.eq(k + 1 == kg),
            needcur.eq(nxt > eb),
            # the kernel reaches into cur, or the next one starts in it (cur moves in now)
            need_in.eq(needcur | (~last_k & (nxt >= eb))),
            emit.eq(have & s2_free & (~need_in | self.i.valid)),
        ]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += self.o.valid.eq(0)

        def load_first():
            # cur is a set's first entry: it becomes prev, kernel 0 at its tag's offset
            m.d.sync += [prev.eq(self.i.payload.data), have.eq(1), off.eq(tag.off),
                         k.eq(0), kg.eq(tag.kg), cw.eq(tag.cw)]

        # taking cur: to load a set's first entry, to move it into prev, or to drop it
        with m.If(~have):
            m.d.comb += self.i.ready.eq(1)
            with m.If(self.i.valid):
                load_first()
        with m.Elif(emit):
            m.d.sync += [k.eq(k + 1), off.eq(nxt)]
            with m.If(last_k):
                # cur is the set's last entry (the kernel reached into it): dropped; or the set
                # ended in prev and cur is the next set's first entry: it comes in at once
                m.d.sync += have.eq(0)
                m.d.comb += self.i.ready.eq(1)
                with m.If(~needcur & self.i.valid):
                    load_first()
            with m.Elif(nxt >= eb):
                m.d.comb += self.i.ready.eq(1)
                m.d.sync += [prev.eq(self.i.payload.data), off.eq(nxt - eb)]

        with m.If(emit):
            m.d.sync += [q_valid.eq(1), q_row.eq(row), q_k.eq(k), q_last.eq(last_k)]
        with m.Elif(commit):
            m.d.sync += q_valid.eq(0)
        with m.If(commit & q_last):
            m.d.sync += self.o.valid.eq(1)

        # row r: written when the registered kernel is kernel r, cleared when it is kernel 0
        # (r > 0), so rows past kg are zero
        we = Signal(ak)
        for r in range(ak):
            m.d.comb += we[r].eq(commit & (q_k == r))
        clear = Signal()
        m.d.comb += clear.eq(commit & (q_k == 0))
        wt = Value.cast(self.o.payload)
        for r in range(ak):
            # a synchronous reset and an enable per row (FDRE R and CE: no LUT per bit)
            zero = Signal(name=f"zero_{r}")
            m.d.comb += zero.eq(clear & ~we[r])
            with m.If(zero):
                m.d.sync += wt[r * ac * 8:(r + 1) * ac * 8].eq(0)
            with m.Elif(we[r]):
                m.d.sync += wt[r * ac * 8:(r + 1) * ac * 8].eq(q_row)
        return m


def wt16_layout(atomic_c: int, atomic_k: int) -> data.StructLayout:
    """A weight set as :class:`WtUnpack16` delivers it (``cfg.conv16`` configurations):
    ``wt`` the ``wt`` field of :func:`hdl.cmac.layouts.op16_layout` (``atomic_k / 2`` MAC
    cells of ``atomic_c`` 16-bit lanes: an INT16/FP16 set's kernel j in cell j, an INT8 set's
    kernels 2j and 2j+1 in the low and high bytes of cell j) and ``n`` the set's channels (the
    lanes of every op using it)."""
    return data.StructLayout({
        "wt": data.ArrayLayout(data.ArrayLayout(16, atomic_c), atomic_k // 2),
        "n": range(atomic_c + 1),
    })


class WtUnpack16(wiring.Component):
    """:class:`WtUnpackSerial` for configurations computing INT16/FP16 beside INT8
    (``cfg.conv16``; docs/conv16.md "CSC"): weight sets from CBUF *rows* (``row_bytes`` = two
    CBUF units, 2 x atomic_c bytes: NVIDIA's 128-B nv_full read), one kernel per cycle, into
    the MAC cells' lanes of :func:`wt16_layout`.

    A set is ``kg`` kernels of ``cw`` elements (kernel-major, format.rst "Basic Weight for
    Direct Convolution"; 2 bytes little-endian each when ``wide``, model
    ``read_weights(elem_bytes=2)``) from byte ``tag.off`` of its first row. Kernel k is the
    ``kb = cw << wide`` bytes at byte ``off + k*kb`` of the set's row stream; ``kb <= row_bytes``,
    so it lies in its row and at most the next one: the same window of two rows as
    WtUnpackSerial (``prev``, ``cur``), one ``row_bytes``-wide byte selector. The kernel goes to

    * ``wide`` (INT16/FP16): all of cell k, lane c = its element c;
    * else (INT8): byte half ``k & 1`` of cell ``k >> 1``, lane c = its byte c (NVIDIA pairs
      kernels 2j and 2j+1 on one data byte: NV_NVDLA_CMAC_CORE_active.v). When ``cw ==
      atomic_c`` (every block but a short last one) kernels 2j and 2j+1 are one row's
      2 x atomic_c bytes of the window: both are taken in one step (the high byte of lane c
      from window byte ``atomic_c + c``), one cell per cycle as NVIDIA loads them;

    lanes ``c >= cw`` are 0; kernel 0's write clears every half it does not write, so kernels
    past ``kg`` are 0. Each cell has two byte-half registers (low, high) with their own
    enables. ``n`` = the set's ``cw``.

    Ports: ``wide`` In(1), stable while sets flow; ``i`` In(stream of ``{data: row, tag:
    entry_tag_layout(atomic_c, atomic_k, row_bytes)}``); ``o`` Out(stream of
    :func:`wt16_layout`).

    Timing as WtUnpackSerial, one step per cycle: a set of ``kg`` INT16/FP16 kernels takes
    ``kg`` steps, one of ``kg`` INT8 kernels of full blocks ``ceil(kg / 2)`` (NVIDIA's rate,
    NV_NVDLA_CSC_wl.v ``stripe_length``: atomic_k / 2 cycles for a full set), INT8 kernels of
    a short last block (cw < atomic_c) one per step; one more step when the set's last one
    ended in a row with no kernel start. The set is valid two cycles after its last step.

    Raises:
        NotImplementedError: ``row_bytes != 2 * atomic_c`` or an odd ``atomic_k``.
    """

    def __init__(self, atomic_c: int, atomic_k: int, row_bytes: int):
        if row_bytes != 2 * atomic_c or atomic_k % 2:
            raise NotImplementedError("WtUnpack16: rows of 2 x atomic_c bytes, even atomic_k")
        self.ac, self.ak, self.eb = atomic_c, atomic_k, row_bytes
        self.tag = entry_tag_layout(atomic_c, atomic_k, row_bytes)
        super().__init__({
            "wide": In(1),
            "i": In(stream.Signature(data.StructLayout({"data": row_bytes * 8,
                                                         "tag": self.tag}))),
            "o": Out(stream.Signature(wt16_layout(atomic_c, atomic_k))),
        })

    def elaborate(self, platform):
        m = Module()
        ac, ak, eb = self.ac, self.ak, self.eb
        cells = ak // 2
        tag = self.i.payload.tag
        wide = self.wide
        prev = Signal(eb * 8)
        have = Signal()                         # prev holds a row of the set being unpacked
        off = Signal(range(eb))                 # where kernel k starts in prev (bytes)
        k = Signal(range(ak + 2))
        kg = Signal.like(tag.kg)
        cw = Signal.like(tag.cw)
        pair = Signal()                         # INT8 set of full blocks: kernels in pairs
        kb = Signal(range(eb + 1))              # bytes per kernel
        two = Signal()                          # this step takes kernels k and k + 1
        sb = Signal(range(eb + 1))              # bytes of this step
        m.d.comb += [kb.eq(Mux(wide, cw << 1, cw)),
                     two.eq(pair & (k + 1 < kg)),
                     sb.eq(Mux(two, kb << 1, kb))]
        # the extracted kernel, registered before its write (WtUnpackSerial's reason)
        q_valid, q_last, q_two = Signal(), Signal(), Signal()
        q_k = Signal(range(ak))
        q_lo, q_hi = Signal(ac * 8), Signal(ac * 8)
        q_n = Signal.like(cw)
        n_out = Signal.like(cw)                 # the output set's n (the payload is comb)
        m.d.comb += self.o.payload.n.eq(n_out)
        wfree, commit, s2_free = Signal(), Signal(), Signal()
        m.d.comb += [
            wfree.eq(~self.o.valid | self.o.ready),
            commit.eq(q_valid & wfree),
            s2_free.eq(~q_valid | wfree),
        ]

        window = Cat(prev, self.i.payload.data)
        ext = Signal(eb * 8)
        m.d.comb += ext.eq((window >> Cat(Const(0, 3), off))[:eb * 8])
        # (each vector assigned once, as a Cat: Amaranth's simulator updates a wide signal
        # per assignment)
        lo, hi = Signal(ac * 8), Signal(ac * 8)
        byte = [ext[8 * i:8 * i + 8] for i in range(2 * ac)]
        m.d.comb += [
            lo.eq(Cat(*[Mux(cw > c, Mux(wide, byte[2 * c], byte[c]), 0) for c in range(ac)])),
            # the high byte: the element's (wide), kernel k + 1's of a pair, else kernel k's
            hi.eq(Cat(*[Mux(cw > c, Mux(wide, byte[2 * c + 1], Mux(two, byte[ac + c], byte[c])),
                            0) for c in range(ac)])),
        ]

        nxt = Signal(range(2 * eb + 1))
        last_k, needcur, need_in, emit = Signal(), Signal(), Signal(), Signal()
        m.d.comb += [
            nxt.eq(off + sb),
            last_k.eq(Mux(two, k + 2 == kg, k + 1 == kg)),
            needcur.eq(nxt > eb),
            need_in.eq(needcur | (~last_k & (nxt >= eb))),
            emit.eq(have & s2_free & (~need_in | self.i.valid)),
        ]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += self.o.valid.eq(0)

        def load_first():
            m.d.sync += [prev.eq(self.i.payload.data), have.eq(1), off.eq(tag.off),
                         k.eq(0), kg.eq(tag.kg), cw.eq(tag.cw),
                         pair.eq(~wide & (tag.cw == ac))]

        with m.If(~have):
            m.d.comb += self.i.ready.eq(1)
            with m.If(self.i.valid):
                load_first()
        with m.Elif(emit):
            m.d.sync += [k.eq(k + 1 + two), off.eq(nxt)]
            with m.If(last_k):
                m.d.sync += have.eq(0)
                m.d.comb += self.i.ready.eq(1)
                with m.If(~needcur & self.i.valid):
                    load_first()
            with m.Elif(nxt >= eb):
                m.d.comb += self.i.ready.eq(1)
                m.d.sync += [prev.eq(self.i.payload.data), off.eq(nxt - eb)]

        with m.If(emit):
            m.d.sync += [q_valid.eq(1), q_lo.eq(lo), q_hi.eq(hi), q_k.eq(k), q_last.eq(last_k),
                         q_n.eq(cw), q_two.eq(two)]
        with m.Elif(commit):
            m.d.sync += q_valid.eq(0)
        with m.If(commit & q_last):
            m.d.sync += [self.o.valid.eq(1), n_out.eq(q_n)]

        # cell j: low bytes written by kernel j (wide) or 2j, high bytes by kernel j or 2j+1;
        # kernel 0's write clears the other halves
        clear = Signal()
        m.d.comb += clear.eq(commit & (q_k == 0))
        lanes = []
        for j in range(cells):
            regs = []
            for half, q, kk in (("lo", q_lo, 2 * j), ("hi", q_hi, 2 * j + 1)):
                reg = Signal(ac * 8, name=f"cell{j}_{half}")
                we = Signal(name=f"we{j}_{half}")
                zero = Signal(name=f"zero{j}_{half}")
                sel = q_k == kk
                if half == "hi":                # a pair is written by its even kernel
                    sel = Mux(q_two, q_k == 2 * j, sel)
                m.d.comb += [we.eq(commit & Mux(wide, q_k == j, sel)),
                             zero.eq(clear & ~we)]
                with m.If(zero):
                    m.d.sync += reg.eq(0)
                with m.Elif(we):
                    m.d.sync += reg.eq(q)
                regs.append(reg)
            lanes += [Cat(regs[0][8 * c:8 * c + 8], regs[1][8 * c:8 * c + 8]) for c in range(ac)]
        m.d.comb += self.o.payload.wt.eq(Cat(*lanes))
        return m
