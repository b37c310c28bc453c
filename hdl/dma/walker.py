"""Cube walker: the memory runs of a feature cube in NVDLA's traversal order (format.rst
"Feature data": surface, then line, then atom innermost), grouped for AXI bursts.

A *run* is a group of consecutive atoms of one line that one AXI burst can carry: it lies in one
aligned *burst window* of ``max_burst * beat_bytes`` bytes. Windows divide 4 KB, so a run never
crosses a 4 KB boundary (AXI rule). With ``max_burst = 1`` and ``atom_bytes = beat_bytes``
(nv_small) every run is one atom and one beat.
"""
from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.axi import AXI_LEN_WIDTH
from hdl.dma.cube import CUBE_DIM_BITS, STRIDE_BITS, cube_layout

__all__ = ["CubeWalker", "run_layout", "run_request", "log2"]

AXI_4K = 4096


def log2(x: int) -> int:
    """log2 of a power of two. Raises ValueError otherwise."""
    if x <= 0 or x & (x - 1):
        raise ValueError(f"{x} is not a power of two")
    return x.bit_length() - 1


def check_dma_params(atom_bytes: int, beat_bytes: int, max_burst: int) -> int:
    """Validate the geometry shared by walker and DMAs; returns atoms per burst window.

    Raises ValueError: not powers of two, an atom wider than a beat, ``max_burst`` beyond AXI's
    ``2**AXI_LEN_WIDTH`` beats, or a burst window that does not divide 4 KB.
    """
    for v in (atom_bytes, beat_bytes, max_burst):
        log2(v)
    if atom_bytes > beat_bytes:
        raise ValueError(f"atom ({atom_bytes} B) wider than the AXI beat ({beat_bytes} B)")
    if max_burst > 1 << AXI_LEN_WIDTH:
        raise ValueError(f"max_burst {max_burst} exceeds {1 << AXI_LEN_WIDTH} beats")
    if AXI_4K % (max_burst * beat_bytes):
        raise ValueError(f"burst window {max_burst * beat_bytes} B does not divide 4 KB")
    return max_burst * beat_bytes // atom_bytes


def run_layout(addr_width: int, max_atoms: int) -> data.StructLayout:
    """One run: ``addr`` byte address of its first atom, ``count`` atoms (1..max_atoms),
    ``last`` set on the final run of the cube."""
    return data.StructLayout({"addr": unsigned(addr_width), "count": range(1, max_atoms + 1),
                              "last": 1})


def run_request(run, atom_bytes: int, beat_bytes: int) -> tuple:
    """AXI view of a run (a ``data.View`` of :func:`run_layout`).

    Returns ``(beat_addr, len, lane0)``: the beat-aligned byte address, the AXI length (beats
    minus one) and the atom lane of the first atom within its beat (0 when an atom fills a
    beat). Pure combinational values.
    """
    a_sh, b_sh = log2(atom_bytes), log2(beat_bytes)
    lanes_sh = b_sh - a_sh
    beat_addr = run.addr & ~(beat_bytes - 1)
    if lanes_sh == 0:
        return beat_addr, (run.count - 1)[:AXI_LEN_WIDTH], 0
    lane0 = run.addr[a_sh:b_sh]
    length = ((lane0 + run.count - 1) >> lanes_sh)[:AXI_LEN_WIDTH]
    return beat_addr, length, lane0


class CubeWalker(wiring.Component):
    """Run generator for one feature cube.

    Parameters: ``addr_width`` (address bits), ``atom_bytes`` (bytes per memory atom),
    ``atom_elems`` (channels per atom = per surface), ``beat_bytes`` (AXI data bytes),
    ``max_burst`` (beats per burst). All powers of two (see :func:`check_dma_params`, which
    raises ValueError otherwise).

    Ports:
      ``start`` In(1) pulse: latch ``cube`` and begin (ignored while ``busy``);
      ``cube`` In(:func:`hdl.dma.cube.cube_layout`); base and strides must be multiples of
      ``atom_bytes``;
      ``runs`` Out(stream of :func:`run_layout`): runs in traversal order (surface, line, atom),
      a run never spans two lines nor two burst windows;
      ``busy`` Out(1): runs remain.
    Rate: one run per cycle. Addresses wrap modulo ``2**addr_width``.
    """

    def __init__(self, *, addr_width: int, atom_bytes: int, atom_elems: int, beat_bytes: int,
                 max_burst: int):
        self.max_atoms = check_dma_params(atom_bytes, beat_bytes, max_burst)
        log2(atom_elems)
        self.addr_width, self.atom_bytes, self.atom_elems = addr_width, atom_bytes, atom_elems
        self.beat_bytes, self.max_burst = beat_bytes, max_burst
        super().__init__({
            "start": In(1),
            "cube": In(cube_layout(addr_width)),
            "runs": Out(stream.Signature(run_layout(addr_width, self.max_atoms))),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        a_sh = log2(self.atom_bytes)
        win_sh = log2(self.max_burst * self.beat_bytes)
        cube = self.cube

        w = Signal(CUBE_DIM_BITS + 1)          # atoms of the current line already walked
        h = Signal(CUBE_DIM_BITS)
        s = Signal(CUBE_DIM_BITS)
        w_max = Signal(CUBE_DIM_BITS)
        h_max = Signal(CUBE_DIM_BITS)
        s_max = Signal(CUBE_DIM_BITS)
        lstride = Signal(STRIDE_BITS)
        sstride = Signal(STRIDE_BITS)
        addr = Signal(self.addr_width)         # next atom
        line = Signal(self.addr_width)         # start of the current line
        surf = Signal(self.addr_width)         # start of the current surface
        busy = Signal()

        left_line = Signal(CUBE_DIM_BITS + 1)  # atoms left in the line (>= 1 while busy)
        avail = Signal(range(self.max_atoms + 1))   # atoms left in the burst window
        count = Signal(range(self.max_atoms + 1))
        end_line = Signal()
        m.d.comb += left_line.eq(w_max + 1 - w)
        if win_sh > a_sh:
            m.d.comb += avail.eq(self.max_atoms - addr[a_sh:win_sh])
        else:
            m.d.comb += avail.eq(1)
        m.d.comb += [end_line.eq(left_line <= avail),
                     count.eq(Mux(end_line, left_line, avail))]
        end_h, end_s = h == h_max, s == s_max

        m.d.comb += [self.busy.eq(busy), self.runs.valid.eq(busy),
                     self.runs.payload.addr.eq(addr), self.runs.payload.count.eq(count),
                     self.runs.payload.last.eq(end_line & end_h & end_s)]

        with m.If(self.start & ~busy):
            m.d.sync += [busy.eq(1), w.eq(0), h.eq(0), s.eq(0),
                         w_max.eq(cube.width), h_max.eq(cube.height),
                         s_max.eq(cube.channel >> log2(self.atom_elems)),
                         lstride.eq(cube.line_stride), sstride.eq(cube.surface_stride),
                         addr.eq(cube.base), line.eq(cube.base), surf.eq(cube.base)]
        with m.If(self.runs.valid & self.runs.ready):
            with m.If(~end_line):
                m.d.sync += [w.eq(w + count), addr.eq(addr + (count << a_sh))]
            with m.Elif(~end_h):
                m.d.sync += [w.eq(0), h.eq(h + 1), line.eq(line + lstride),
                             addr.eq(line + lstride)]
            with m.Elif(~end_s):
                m.d.sync += [w.eq(0), h.eq(0), s.eq(s + 1), surf.eq(surf + sstride),
                             line.eq(surf + sstride), addr.eq(surf + sstride)]
            with m.Else():
                m.d.sync += busy.eq(0)
        return m
