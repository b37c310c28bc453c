"""The element transpose of RUBIK's split and merge (hdl/rubik): blocks of ``A`` atoms of ``A``
elements in, the same blocks transposed out (atom k of the output block holds element k of every
input atom), one atom in and one out per step, at full rate.

A square register matrix of ``atom_bytes`` rows of ``atom_bytes`` bytes alternates its
orientation every block: a block that entered as rows (each step shifts the rows up by one and
the input atom enters the last row) leaves as columns, while the next block enters as columns
(each step shifts every row left by one element, the column leaving is the output and the input
atom's element r enters row r's last element); that block then leaves as rows while the one after
it enters as rows. So a block's transpose leaves during the block after it: the first block's
steps output whatever the matrix held and the last block needs ``A`` more steps (of any input)
to leave; the owner drops and adds those (hdl/rubik ``_Reshape``).

Elements are 1 byte (``A`` = ``atom_bytes``) or, with ``wide``, 2 bytes (``A`` =
``atom_bytes`` / 2, the first ``A`` rows used).
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Transposer"]


class Transposer(wiring.Component):
    """Block transposer of ``atom_bytes`` x ``atom_bytes`` bytes (module docstring).

    Ports: ``wide`` In(1): 2-byte elements (hold stable from ``clear`` to the end of the
    layer); ``clear`` In(1): restart (the next step begins a row-entered block); ``step`` In(1):
    take ``i`` and advance; ``i`` In(8 * atom_bytes) the input atom (byte j in bits
    [8j+7:8j]); ``o`` Out(8 * atom_bytes) the atom leaving at this step (combinational from the
    matrix; valid whatever ``step``).
    """

    def __init__(self, atom_bytes: int = 32):
        if atom_bytes < 2 or atom_bytes % 2:
            raise ValueError(f"atom_bytes {atom_bytes}: an even number of bytes is needed")
        self.atom_bytes = atom_bytes
        n = atom_bytes * 8
        super().__init__({"wide": In(1), "clear": In(1), "step": In(1), "i": In(n), "o": Out(n)})

    def elaborate(self, platform):
        m = Module()
        N = self.atom_bytes
        half = N // 2
        rows = [Signal(8 * N, name=f"row{r}") for r in range(N)]

        def byte(v, j):
            return v[8 * j:8 * j + 8]

        cols = Signal()                 # this block enters as columns (leaves the last by rows)
        k = Signal(range(N))            # step within the block
        a_last = Mux(self.wide, half - 1, N - 1)
        with m.If(self.clear):
            m.d.sync += [cols.eq(0), k.eq(0)]
        with m.Elif(self.step):
            with m.If(k == a_last):
                m.d.sync += [k.eq(0), cols.eq(~cols)]
            with m.Else():
                m.d.sync += k.eq(k + 1)

        # the output: row 0, or the first element of every row
        col_narrow = Cat(byte(rows[r], 0) for r in range(N))
        col_wide = Cat(Cat(byte(rows[r], 0), byte(rows[r], 1)) for r in range(half))
        m.d.comb += self.o.eq(Mux(cols, Mux(self.wide, col_wide, col_narrow), rows[0]))

        with m.If(self.step):
            with m.If(~cols):
                # rows shift up; the input enters the block's last row
                for r in range(N):
                    nxt = self.i if r == N - 1 else rows[r + 1]
                    if r == half - 1:
                        nxt = Mux(self.wide, self.i, nxt)
                    m.d.sync += rows[r].eq(nxt)
            with m.Else():
                # every row shifts left by one element; element r of the input enters row r
                for r in range(N):
                    narrow = Cat(rows[r][8:], byte(self.i, r))
                    if r < half:
                        wide = Cat(rows[r][16:], byte(self.i, 2 * r), byte(self.i, 2 * r + 1))
                        m.d.sync += rows[r].eq(Mux(self.wide, wide, narrow))
                    else:
                        m.d.sync += rows[r].eq(narrow)
        return m
