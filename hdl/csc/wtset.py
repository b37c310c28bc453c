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
           "WtUnpack"]


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
