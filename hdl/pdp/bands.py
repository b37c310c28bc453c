"""PDP split width (v1_ias_programming_guide.rst "Offline processing with split width",
"Limitation / PDP" split rules): the input width is processed as SPLIT_NUM + 1 vertical bands,
each a complete pooling of its own (surface, line, column order) with its own read and write
cube.

Band ``b`` (``first`` = b == 0, ``last`` = b == SPLIT_NUM; widths from D_PARTIAL_WIDTH_IN/OUT
FIRST/MID/LAST, plus one; without split the cube widths): its input columns tile the cube
(``in_start`` = sum of the previous bands' input widths); every band but the first also reads
the ``overlap = kernel_width - stride_x`` columns before its start (a negative overlap skips
columns), so it reads ``in_width + overlap`` columns from ``in_start - overlap``. A band
narrower than the overlap (kernel_width - stride_x > first/mid input width, which the
programming guide's "Limitation / PDP" forbids) makes a later band start left of column 0:
NVIDIA's nv_small PDP_RDMA (NV_NVDLA_PDP_RDMA_ig.v: the next band's base address is the
previous one plus its width minus the overlap, in full-width address arithmetic) then reads the
memory left of the cube's base as data, and so does this one (``col`` is signed; the DMA adds
``col * atom`` to the base modulo the address width); verif/model/pdp.py computes the same.
The first band has PAD_LEFT, the last PAD_RIGHT, the others no padding; its outputs start at
the sum of the previous bands' output widths. The split rules make the bands' outputs the
columns of the unsplit pooling.
"""
from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from hdl.pdp.pool1d import DIM_BITS

__all__ = ["Bands", "band_regs_layout"]


def band_regs_layout() -> data.StructLayout:
    """Register values that define the bands: ``split_num`` (SPLIT_NUM, bands - 1),
    ``cube_width``/``cube_out_width`` (minus-one D_DATA_CUBE_IN/OUT_WIDTH), ``in_first``/
    ``in_mid``/``in_last`` and ``out_first``/``out_mid``/``out_last`` (minus-one partial widths),
    ``kw`` kernel width 1..8, ``sx`` stride 1..16, ``pad_left``."""
    return data.StructLayout({
        "split_num": 8, "cube_width": 13, "cube_out_width": 13,
        "in_first": 10, "in_mid": 10, "in_last": 10,
        "out_first": 10, "out_mid": 10, "out_last": 10,
        "kw": 4, "sx": 5, "pad_left": 3,
    })


class Bands(wiring.Component):
    """Band sequencer: the geometry of the current band (module docstring).

    Ports: ``restart`` In(1) pulse: back to band 0; ``next`` In(1) pulse: advance one band;
    ``regs`` In(:func:`band_regs_layout`) (stable during a layer).
    Outputs of the current band: ``col`` Out(signed(15)) first input column read, negative
    when an earlier band is narrower than the overlap (the read then starts left of the cube's
    base, as NVIDIA's PDP_RDMA does: module docstring); ``width`` Out(14) columns read;
    ``last_col`` Out(14) ``width - 1`` (a register of its own: issue 10, the width pass compares
    its column with it in its stall logic);
    ``pad_left_b`` Out(3); ``out_col`` Out(14) first output column; ``out_width`` Out(14);
    ``last`` Out(1).
    Of the next band (registers as well, valid one cycle after a ``restart`` / ``next``, so that
    a consumer can load its own state for the next band when it pulses ``next``, issue 10):
    ``next_last_col`` Out(14), ``next_pad_left_b`` Out(3).
    """

    def __init__(self):
        super().__init__({
            "restart": In(1), "next": In(1), "regs": In(band_regs_layout()),
            "col": Out(signed(DIM_BITS + 1)), "width": Out(DIM_BITS), "last_col": Out(DIM_BITS),
            "pad_left_b": Out(3),
            "out_col": Out(DIM_BITS), "out_width": Out(DIM_BITS), "last": Out(1),
            "next_last_col": Out(DIM_BITS), "next_pad_left_b": Out(3),
        })

    def _geometry(self, m, b, in_start, out_start, name):
        """The outputs of band ``b`` whose input columns start at ``in_start`` and outputs at
        ``out_start`` (combinational from registers), plus the next band's starts."""
        r = self.regs
        first, last = Signal(name=f"{name}_first"), Signal(name=f"{name}_last")
        split = Signal(name=f"{name}_split")
        win1 = Signal(10, name=f"{name}_win1")     # the band's input width - 1
        win = Signal(DIM_BITS, name=f"{name}_win")
        overlap = Signal(signed(6), name=f"{name}_overlap")
        g = {"col": Signal(signed(DIM_BITS + 1), name=f"{name}_col"),
             "width": Signal(DIM_BITS, name=f"{name}_width"),
             "last_col": Signal(DIM_BITS, name=f"{name}_last_col"),
             "pad_left_b": Signal(3, name=f"{name}_pad_left_b"),
             "out_col": Signal(DIM_BITS, name=f"{name}_out_col"),
             "out_width": Signal(DIM_BITS, name=f"{name}_out_width"),
             "last": last}
        m.d.comb += [
            first.eq(b == 0), last.eq(b == r.split_num), split.eq(r.split_num != 0),
            overlap.eq(r.kw - r.sx),
            win1.eq(Mux(first, r.in_first, Mux(last, r.in_last, r.in_mid))),
            win.eq(win1 + 1),
            g["out_width"].eq(Mux(split, Mux(first, r.out_first,
                                             Mux(last, r.out_last, r.out_mid)) + 1,
                                  r.cube_out_width + 1)),
            g["pad_left_b"].eq(Mux(first, r.pad_left, 0)),
            g["out_col"].eq(out_start),
        ]
        # last_col = width - 1 from the minus-one widths directly (issue 10: width's adders and
        # the - 1 in series were PDP's critical path, from b into the width pass's last_col)
        with m.If(~split):
            m.d.comb += [g["col"].eq(0), g["width"].eq(r.cube_width + 1),
                         g["last_col"].eq(r.cube_width)]
        with m.Elif(first):
            m.d.comb += [g["col"].eq(0), g["width"].eq(win), g["last_col"].eq(win1)]
        with m.Else():
            m.d.comb += [g["col"].eq(in_start - overlap), g["width"].eq(win + overlap),
                         g["last_col"].eq(win1 + overlap)]
        return g, in_start + win, out_start + g["out_width"]

    def elaborate(self, platform):
        m = Module()
        # The outputs are registers (issue 10: the band geometry's adders were the start of
        # PDP's critical path). Each cycle they load the geometry of the band the state holds
        # in the next cycle: the current band's, the next band's at ``next``, band 0's at
        # ``restart`` (all three computed from registers), so they equal the geometry of the
        # current band as a combinational function would, one cycle after a register change.
        b = Signal(8)
        in_start = Signal(DIM_BITS)
        out_start = Signal(DIM_BITS)
        cur, in_next, out_next = self._geometry(m, b, in_start, out_start, "cur")
        nxt, in_nn, out_nn = self._geometry(m, b + 1, in_next, out_next, "nxt")
        # the band after the next one, after band 0: for the next-band outputs (only their
        # width and padding are used, which do not depend on the start columns)
        nn, _, _ = self._geometry(m, b + 2, in_nn, out_nn, "nn")
        zero, in_one, out_one = self._geometry(m, 0, 0, 0, "zero")
        one, _, _ = self._geometry(m, 1, in_one, out_one, "one")
        outs = {k: getattr(self, k) for k in cur}
        nouts = {"last_col": self.next_last_col, "pad_left_b": self.next_pad_left_b}
        with m.If(self.restart):
            m.d.sync += [b.eq(0), in_start.eq(0), out_start.eq(0)]
            m.d.sync += [outs[k].eq(zero[k]) for k in outs]
            m.d.sync += [nouts[k].eq(one[k]) for k in nouts]
        with m.Elif(self.next):
            m.d.sync += [b.eq(b + 1), in_start.eq(in_next), out_start.eq(out_next)]
            m.d.sync += [outs[k].eq(nxt[k]) for k in outs]
            m.d.sync += [nouts[k].eq(nn[k]) for k in nouts]
        with m.Else():
            m.d.sync += [outs[k].eq(cur[k]) for k in outs]
            m.d.sync += [nouts[k].eq(nxt[k]) for k in nouts]
        return m
