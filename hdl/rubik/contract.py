"""RUBIK's contract at two atoms per cycle (hdl/rubik, 64-byte AXI beats): the reorder buffer
between the read and the write DMA.

Contract interleaves ``sx`` phase cubes column by column (programming guide "Rubik programming",
contract mode): output atom ``w*sx + dx`` of a line is atom ``w`` of phase ``dx``'s line. One
atom per read request would cap the layer at one atom per cycle, so the read DMA reads each
phase's line in *chunks* of ``chunk`` atoms (one run of several beats, two atoms per beat) and
this buffer turns the chunk's ``sx`` runs (phase ``dx`` outer, pixel ``w`` inner) into the
``chunk * sx`` atoms of the output line in order (``w`` outer, ``dx`` inner), two per cycle.
The last chunk of a line has ``W mod chunk`` atoms (or ``chunk``); lines repeat the same chunk
pattern, so the buffer needs no line or group count.

Storage: two halves (a chunk fills one while the other empties) in two banks of one write and one
read port each. Atom ``(w, dx)`` of a chunk (``w`` its pixel within the chunk) is in bank
``(w + dx) mod 2``, entry ``(half, dx, w // 2)``. The two atoms of an input transfer are pixels
``w, w + 1`` of one phase: different banks. The output leaves in pairs of positions ``p, p + 1``
with ``p`` even (``p = w*sx + dx``): for ``sx`` even ``dx`` is even and the pair is ``(w, dx),
(w, dx + 1)``; for ``sx`` odd it is that or ``(w, sx - 1), (w + 1, 0)``; in every case the two
banks differ. So each bank reads and writes one entry per cycle.
"""
from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hdl.dma.cube import CUBE_DIM_BITS
from hdl.dma.walker import atom_group_layout, log2
from hdl.lib.memory import RDWR_UNDEFINED

__all__ = ["ContractBuffer"]


class ContractBuffer(wiring.Component):
    """Reorder buffer of RUBIK's contract (module docstring), two atoms per transfer each way.

    Parameters: ``atom_bytes``; ``chunk`` (pixels per chunk, a power of two >= 2);
    ``max_stride`` (the largest ``sx``, a power of two). Storage: 2 banks x ``chunk *
    max_stride`` atoms.

    Ports: ``go`` In(1): start a layer (counters to the first chunk); ``sx1`` In(range of
    max_stride) (DECONV_X_STRIDE: ``sx - 1``) and ``w1`` In(CUBE_DIM_BITS) (``W - 1``) latched
    at ``go``; ``i`` In(stream of ``atom_group_layout(atom_bytes, 2)``) the read order
    (each transfer 1 or 2 atoms of one phase's chunk); ``o`` Out(same) the write order (2 atoms
    per transfer, 1 for the last atom of a chunk of odd size). One transfer per cycle each way
    when the other side keeps up.

    Raises ValueError: ``chunk`` or ``max_stride`` not powers of two, ``chunk`` < 2.
    """

    def __init__(self, atom_bytes: int = 32, chunk: int = 8, max_stride: int = 32):
        log2(max_stride)
        if chunk < 2 or log2(chunk) < 1:
            raise ValueError(f"chunk {chunk}: a power of two >= 2 is needed")
        self.atom_bytes, self.chunk, self.max_stride = atom_bytes, chunk, max_stride
        lay = atom_group_layout(atom_bytes, 2)
        super().__init__({"go": In(1), "sx1": In(range(max_stride)), "w1": In(CUBE_DIM_BITS),
                          "i": In(stream.Signature(lay)), "o": Out(stream.Signature(lay))})

    def elaborate(self, platform):
        m = Module()
        bits = 8 * self.atom_bytes
        C, cb = self.chunk, log2(self.chunk)
        sb = max(1, log2(self.max_stride))
        depth = 2 * self.max_stride * (C // 2)         # halves x phases x pixel pairs
        # the geometry, latched at go (the registers switch group when the layer completes)
        sx1 = Signal.like(self.sx1)
        w1 = Signal.like(self.w1)
        with m.If(self.go):
            m.d.sync += [sx1.eq(self.sx1), w1.eq(self.w1)]
        banks = []
        for b in range(2):
            mem = Memory(shape=bits, depth=depth, init=[], attrs=RDWR_UNDEFINED)
            m.submodules[f"bank{b}"] = mem
            banks.append((mem.write_port(), mem.read_port(domain="sync")))

        def entry(half, dx, w):
            return Cat(w[1:cb], dx[:sb], half)

        full = Array(Signal(name=f"full{h}") for h in range(2))   # the half holds a whole chunk
        hlen = Array(Signal(cb, name=f"len{h}") for h in range(2))  # its pixels minus one
        set_full = Array(Signal(name=f"set_full{h}") for h in range(2))
        clr_full = Array(Signal(name=f"clr_full{h}") for h in range(2))
        for h in range(2):
            with m.If(set_full[h]):
                m.d.sync += full[h].eq(1)
            with m.Elif(clr_full[h]):
                m.d.sync += full[h].eq(0)

        # -- input: the chunk's phases (dx outer), pixels w inner --
        h_in = Signal()
        jc = Signal(CUBE_DIM_BITS)              # chunk of the line
        dx_i = Signal(sb)
        w_i = Signal(cb)
        len1_i = Signal(cb)                     # this chunk's pixels minus one
        m.d.comb += len1_i.eq(Mux(jc == (w1 >> cb), w1[:cb], C - 1))
        n = self.i.payload.count
        take = self.i.valid & self.i.ready
        m.d.comb += self.i.ready.eq(~full[h_in])
        w_b = Signal(cb)
        m.d.comb += w_b.eq(w_i + 1)
        bank0 = w_i[0] ^ dx_i[0]                # bank of the transfer's first atom
        atom0 = self.i.payload.data[:bits]
        atom1 = self.i.payload.data[bits:2 * bits]
        for b, (wp, _) in enumerate(banks):
            first_here = bank0 == b
            m.d.comb += [wp.addr.eq(Mux(first_here, entry(h_in, dx_i, w_i),
                                        entry(h_in, dx_i, w_b))),
                         wp.data.eq(Mux(first_here, atom0, atom1)),
                         wp.en.eq(take & (first_here | (n == 2)))]
        line_end = (w_i + n - 1) == len1_i
        with m.If(take):
            m.d.sync += w_i.eq(w_i + n)
            with m.If(line_end):
                m.d.sync += [w_i.eq(0), dx_i.eq(dx_i + 1)]
                with m.If(dx_i == sx1):
                    m.d.sync += [dx_i.eq(0), hlen[h_in].eq(len1_i), h_in.eq(~h_in),
                                 jc.eq(Mux(jc == (w1 >> cb), 0, jc + 1))]
                    m.d.comb += set_full[h_in].eq(1)

        # -- output: positions p = w*sx + dx of the chunk, two per transfer from even p --
        h_out = Signal()
        w_o = Signal(cb)
        dx_o = Signal(sb)
        len1_o = hlen[h_out]
        wrap = dx_o == sx1                      # the pair's second atom starts the next pixel
        w_next = Signal(cb)
        m.d.comb += w_next.eq(w_o + 1)
        bw = Mux(wrap, w_next, w_o)             # the second atom (w, dx)
        bd = Mux(wrap, 0, dx_o + 1)
        has_b = ~(wrap & (w_o == len1_o))       # the first atom is not the chunk's last
        done = ~has_b | ((bd == sx1) & (bw == len1_o))
        bank_a = w_o[0] ^ dx_o[0]
        o_valid = Signal()
        swap = Signal()                         # the first atom comes from bank 1
        cnt2 = Signal()
        load = ~o_valid | self.o.ready
        issue = load & full[h_out]
        for b, (_, rp) in enumerate(banks):
            m.d.comb += [rp.en.eq(issue),
                         rp.addr.eq(Mux(bank_a == b, entry(h_out, dx_o, w_o),
                                        entry(h_out, bd, bw)))]
        with m.If(load):
            m.d.sync += [o_valid.eq(issue), swap.eq(bank_a), cnt2.eq(has_b)]
        d0, d1 = banks[0][1].data, banks[1][1].data
        m.d.comb += [self.o.valid.eq(o_valid),
                     self.o.payload.data.eq(Cat(Mux(swap, d1, d0), Mux(swap, d0, d1))),
                     self.o.payload.count.eq(Mux(cnt2, 2, 1))]
        with m.If(issue):
            with m.If(done):
                m.d.sync += [w_o.eq(0), dx_o.eq(0), h_out.eq(~h_out)]
                m.d.comb += clr_full[h_out].eq(1)
            with m.Elif(sx1 == 0):              # one phase: the next pair is two pixels on
                m.d.sync += w_o.eq(w_o + 2)
            with m.Elif(wrap):                  # (w, sx-1), (w+1, 0) -> (w+1, 1)
                m.d.sync += [w_o.eq(w_next), dx_o.eq(1)]
            with m.Elif(dx_o + 1 == sx1):       # (w, sx-2), (w, sx-1) -> (w+1, 0)
                m.d.sync += [w_o.eq(w_next), dx_o.eq(0)]
            with m.Else():
                m.d.sync += dx_o.eq(dx_o + 2)

        with m.If(self.go):
            m.d.sync += [h_in.eq(0), jc.eq(0), dx_i.eq(0), w_i.eq(0),
                         h_out.eq(0), w_o.eq(0), dx_o.eq(0), o_valid.eq(0),
                         full[0].eq(0), full[1].eq(0)]
        return m
