"""Weight sets from CBUF entries (docs/conv.md "CSC"): collect the entries of one weight set,
align the set's first byte, and unpack the ``kg*cw`` bytes (kernel-major, format.rst "Basic
Weight for Direct Convolution") into ``wt[k][c]`` with zeros for kernels and channels past the
end (the last channel block is shorter and not zero-filled in memory).
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.lib.stream import Map

__all__ = ["set_entries", "entry_tag_layout", "raw_set_layout", "wt_layout", "WtCollect",
           "WtAlign", "WtUnpack"]


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


def raw_set_layout(atomic_c: int, atomic_k: int, entry_bytes: int) -> data.StructLayout:
    """A collected weight set: the bytes of its entries (entry j in bytes j*entry_bytes..),
    its offset, ``kg`` and ``cw``."""
    return data.StructLayout({
        "bytes": data.ArrayLayout(unsigned(8), set_entries(atomic_c, atomic_k, entry_bytes)
                                  * entry_bytes),
        "off": max(1, (entry_bytes - 1).bit_length()),
        "kg": range(atomic_k + 1), "cw": range(atomic_c + 1),
    })


def wt_layout(atomic_c: int, atomic_k: int):
    """The weights of one set as CMAC takes them: ``wt[k][c]`` signed int8."""
    return data.ArrayLayout(data.ArrayLayout(signed(8), atomic_c), atomic_k)


class WtCollect(wiring.Component):
    """Collect the entries of each weight set into one item of :func:`raw_set_layout`.

    Input items: ``{data: entry, tag: entry_tag_layout}`` in order; an item with
    ``tag.set_first`` goes to slot 0, the next ones to the following slots; the item with
    ``tag.set_last`` completes the set. Timing: one entry per cycle; the set is registered;
    ``i.ready`` is low only when an entry would complete a set while the previous one waits.
    """

    def __init__(self, atomic_c: int, atomic_k: int, entry_bytes: int):
        self.eb = entry_bytes
        self.slots = set_entries(atomic_c, atomic_k, entry_bytes)
        self.tag = entry_tag_layout(atomic_c, atomic_k, entry_bytes)
        self.raw = raw_set_layout(atomic_c, atomic_k, entry_bytes)
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({"data": entry_bytes * 8,
                                                         "tag": self.tag}))),
            "o": Out(stream.Signature(self.raw)),
        })

    def elaborate(self, platform):
        m = Module()
        eb8 = self.eb * 8
        idx = Signal(range(self.slots + 1))
        slot = Signal(range(self.slots + 1))
        buf = Signal(self.slots * eb8)
        tag = self.i.payload.tag
        m.d.comb += [
            slot.eq(idx),
            self.i.ready.eq(~self.o.valid | self.o.ready | ~tag.set_last),
        ]
        with m.If(tag.set_first):
            m.d.comb += slot.eq(0)
        accept = self.i.valid & self.i.ready
        newbuf = Signal(self.slots * eb8)
        for k in range(self.slots):
            m.d.comb += newbuf[k * eb8:(k + 1) * eb8].eq(
                Mux(slot == k, self.i.payload.data, buf[k * eb8:(k + 1) * eb8]))
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(accept):
            m.d.sync += [buf.eq(newbuf), idx.eq(slot + 1)]
            with m.If(tag.set_last):
                m.d.sync += [
                    self.o.valid.eq(1),
                    Value.cast(self.o.payload.bytes).eq(newbuf),
                    self.o.payload.off.eq(tag.off),
                    self.o.payload.kg.eq(tag.kg),
                    self.o.payload.cw.eq(tag.cw),
                ]
        return m


class WtAlign(Map):
    """Register stage: the set's bytes shifted down by ``off`` (its first byte to byte 0),
    ``atomic_k*atomic_c`` bytes kept, with ``kg`` and ``cw``."""

    def __init__(self, atomic_c: int, atomic_k: int, entry_bytes: int):
        nbytes = atomic_k * atomic_c
        o_layout = data.StructLayout({"bytes": data.ArrayLayout(unsigned(8), nbytes),
                                      "kg": range(atomic_k + 1), "cw": range(atomic_c + 1)})

        def fn(m, p):
            shifted = Value.cast(p.bytes) >> Cat(Const(0, 3), p.off)
            return {"bytes": shifted[:nbytes * 8], "kg": p.kg, "cw": p.cw}
        self.o_layout = o_layout
        super().__init__(raw_set_layout(atomic_c, atomic_k, entry_bytes), o_layout, fn)


class WtUnpack(Map):
    """Register stage: aligned bytes -> ``wt[k][c]`` = byte ``k*cw + c`` for ``k < kg`` and
    ``c < cw``, 0 elsewhere (format.rst: a set is kg kernels of cw bytes, kernel-major)."""

    def __init__(self, atomic_c: int, atomic_k: int, i_layout):
        ac, ak = atomic_c, atomic_k

        def fn(m, p):
            out = []
            for k in range(ak):
                row = []
                for c in range(ac):
                    v = Signal(8, name=f"w{k}_{c}")
                    with m.Switch(p.cw):
                        for cwv in range(c + 1, ac + 1):
                            if k * cwv + c < ak * ac:
                                with m.Case(cwv):
                                    m.d.comb += v.eq(p.bytes[k * cwv + c])
                        with m.Default():                 # channel c past the set's cw
                            m.d.comb += v.eq(0)
                    row.append(v & (p.kg > k).replicate(8))
                out.append(Cat(*row))
            return Cat(*out)
        super().__init__(i_layout, wt_layout(atomic_c, atomic_k), fn)
