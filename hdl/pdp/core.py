"""PDP core: the pooling datapath between PDP_RDMA (or, later, SDP on the fly) and PDP WDMA
(v1_ias_unit_description.rst "Planar Data Processor").

Stream stages (all ``lib.stream``, ``lanes`` = cfg.pdp_throughput elements per item,
``groups`` = atom / lanes items per atom):

  atoms --Split--> groups --SkidBuffer--> Pool1d (width pass) --SkidBuffer--> Pool2d (height pass)
        --SkidBuffer (x RECIP_KERNEL_WIDTH)--> Map (round to 11 bits)
        --Map (x RECIP_KERNEL_HEIGHT)--> Map (round to 8) --Merge--> atoms

(each reciprocal's product registered before its rounding, issue 10: the multiplier block, the
rounding adder and the method mux in one stage were PDP's critical path on ECP5, 10.4 ns; the
width's product by a skid buffer, which registers the ready chain)

(:class:`hdl.lib.gearbox.Split` / :class:`hdl.lib.gearbox.Merge` cut atoms into element groups
and back.)

The input is a stream of whole atoms in order band, surface, line, column; an on-the-fly source
(SDP -> PDP, FLYING_MODE = ON_FLYING) would feed the same ``i`` port with SDP's output atoms in
the same order (one band), selected by a mux in :class:`hdl.pdp.Pdp`.

Reciprocal rounding (NVIDIA's nv_small RTL, NV_NVDLA_PDP_CORE_cal2d.v "rounding 0.5=1,
-0.5=-1"; documented in verif/model/pdp.py): ``v * recip`` (17-bit unsigned RECIP_KERNEL_*) has 16
fraction bits; a non-negative product keeps its low ``bits - 1`` integer bits and adds 1 when the
fraction is >= one half; a negative product adds 1 only when the fraction exceeds one half; the
result is the low ``bits`` bits (no saturation).
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.lib.gearbox import Merge, Split
from hdl.lib.stream import Map, SkidBuffer
from hdl.pdp.pool1d import DIM_BITS, POOL_AVE, ROW_BITS, Pool1d, row_item_layout
from hdl.pdp.pool2d import TOT_BITS, Pool2d

__all__ = ["PdpCore", "recip_finish"]


def recip_finish(p, bits: int):
    """``p / 2**16`` rounded as NVIDIA's PDP (module docstring) into ``signed(bits)``, ``p``
    the signed product ``v * recip`` of a value and an unsigned 17-bit reciprocal
    (RECIP_KERNEL_WIDTH/HEIGHT). Pure combinational."""
    fl = (p >> 16)
    frac = p[:16]
    neg = p < 0
    pos_val = fl[:bits - 1] + (frac >= 0x8000)
    neg_val = fl + (frac > 0x8000)
    return Mux(neg, neg_val[:bits], pos_val[:bits]).as_signed()


class PdpCore(wiring.Component):
    """Pooling datapath (module docstring).

    Parameters: ``atom`` (elements per atom, cfg.memory_atomic), ``lanes`` (cfg.pdp_throughput),
    ``max_width`` (line-buffer output columns per band), ``tot_bits`` (the AVE total's width,
    :class:`hdl.pdp.pool2d.Pool2d`: 15 on nv_small, 14 on nvdlav1).

    Ports: ``i`` In(stream of ArrayLayout(signed(8), atom)); ``o`` Out(stream of the same);
    ``start`` In(1) layer-start pulse; ``method`` In(2); ``kw``, ``kh`` In(4) (1..8); ``sx``, ``sy``
    In(5) (1..16); ``pad_top`` In(3); ``height`` / ``out_height`` In(14) (counts);
    ``surfaces`` In(14); band parameters ``last_col`` (columns read - 1), ``pad_left``,
    ``out_width`` In (counts), the next band's ``next_last_col``, ``next_pad_left`` and
    ``band_next`` Out(1) (see :class:`hdl.pdp.pool1d.Pool1d`);
    ``pads`` In(ArrayLayout(19, 8)); ``recip_w``, ``recip_h`` In(17).
    """

    def __init__(self, atom: int, lanes: int, max_width: int, tot_bits: int = TOT_BITS):
        if atom % lanes:
            raise ValueError(f"atom {atom} is not a multiple of lanes {lanes}")
        self.atom, self.lanes, self.groups, self.max_width = atom, lanes, atom // lanes, max_width
        self.tot_bits = tot_bits
        a = data.ArrayLayout(signed(8), atom)
        super().__init__({
            "i": In(stream.Signature(a)), "o": Out(stream.Signature(a)),
            "start": In(1), "method": In(2), "kw": In(4), "kh": In(4), "sx": In(5), "sy": In(5),
            "pad_top": In(3), "height": In(DIM_BITS), "out_height": In(DIM_BITS),
            "surfaces": In(DIM_BITS), "last_col": In(DIM_BITS), "pad_left": In(3),
            "out_width": In(DIM_BITS), "next_last_col": In(DIM_BITS), "next_pad_left": In(3),
            "band_next": Out(1),
            "pads": In(data.ArrayLayout(unsigned(19), 8)),
            "recip_w": In(17), "recip_h": In(17),
        })

    def elaborate(self, platform):
        m = Module()
        T, G = self.lanes, self.groups
        atom_l = data.ArrayLayout(signed(8), self.atom)
        m.submodules.split = split = Split(data.StructLayout({"v": atom_l}), G)
        m.submodules.pool1d = p1 = Pool1d(T, G)
        m.submodules.pool2d = p2 = Pool2d(T, G, self.max_width, self.tot_bits)
        self.pool2d = p2        # test hook (tests/hdl/test_pdp_core.py: its ``collision``)
        tot = data.ArrayLayout(signed(self.tot_bits), T)
        mid = data.ArrayLayout(signed(ROW_BITS), T)
        outl = data.ArrayLayout(signed(8), T)
        ave = self.method == POOL_AVE

        # the products registered with the value (MAX/MIN pass it through), then rounded
        # (issue 10, module docstring)
        def prod_layout(vl, recip):
            return data.StructLayout({
                "p": data.ArrayLayout((Signal(vl.elem_shape) * recip).shape(), T), "v": vl})

        prod_w, prod_h = prod_layout(tot, self.recip_w), prod_layout(mid, self.recip_h)

        def scale_w(m, e):
            return [Mux(ave, recip_finish(e.p[k], ROW_BITS), e.v[k]) for k in range(T)]

        def products(v, recip):
            return Cat(*[v[k] * recip for k in range(T)])

        def mul_h(m, v):
            return {"p": products(v, self.recip_h), "v": v}

        def scale_h(m, e):
            return [Mux(ave, recip_finish(e.p[k], 8), e.v[k][:8].as_signed())
                    for k in range(T)]

        # the width's product is registered by a skid buffer (issue 10: the ready chain from
        # Merge through the Map stages into the height pass's skid buffer was PDP's critical
        # path, 10.0 ns): its input is the product of the height pass's output
        m.submodules.mul_w = mw = SkidBuffer(prod_w)
        m.submodules.recip_w = rw = Map(prod_w, mid, scale_w)
        m.submodules.mul_h = mh = Map(mid, prod_h, mul_h)
        m.submodules.recip_h = rh = Map(prod_h, outl, scale_h)
        m.submodules.merge = merge = Merge(outl, G)
        # plain wires between equal bit layouts (atom <-> struct of one atom; groups <-> array)
        m.d.comb += [
            split.i.valid.eq(self.i.valid), split.i.payload.v.eq(self.i.payload),
            self.i.ready.eq(split.i.ready),
            merge.count.eq(G),
            self.o.valid.eq(merge.o.valid), self.o.payload.eq(merge.o.payload.as_value()),
            merge.o.ready.eq(self.o.ready),
        ]
        # a skid buffer before the width pass: its stall logic (the window end against the band
        # width) no longer runs combinationally through Split into PDP_RDMA's latency FIFO
        # (issue 10: PDP's critical path on ECP5, 15.9 ns, mostly routing)
        m.submodules.in_skid = in_skid = SkidBuffer(data.ArrayLayout(signed(8), T))
        m.d.comb += [in_skid.i.valid.eq(split.o.valid), in_skid.i.payload.eq(split.o.payload.v),
                     split.o.ready.eq(in_skid.i.ready)]
        wiring.connect(m, in_skid.o, p1.i)
        # a skid buffer between the passes: the height pass's ready (its window bookkeeping)
        # no longer runs combinationally into the width pass's stall logic (issue 10)
        m.submodules.mid_skid = mid = SkidBuffer(row_item_layout(T, G))
        wiring.connect(m, p1.o, mid.i)
        wiring.connect(m, mid.o, p2.i)
        m.d.comb += [mw.i.valid.eq(p2.o.valid), p2.o.ready.eq(mw.i.ready),
                     mw.i.payload.p.eq(products(p2.o.payload, self.recip_w)),
                     mw.i.payload.v.eq(p2.o.payload)]
        wiring.connect(m, mw.o, rw.i)
        wiring.connect(m, rw.o, mh.i)
        wiring.connect(m, mh.o, rh.i)
        wiring.connect(m, rh.o, merge.i)
        for c in (p1, p2):
            m.d.comb += [c.start.eq(self.start), c.method.eq(self.method), c.kw.eq(self.kw),
                         c.pads.eq(self.pads), c.height.eq(self.height)]
        m.d.comb += [
            p1.sx.eq(self.sx), p1.last_col.eq(self.last_col), p1.pad_left.eq(self.pad_left),
            p1.out_width.eq(self.out_width), p1.surfaces.eq(self.surfaces),
            p1.next_last_col.eq(self.next_last_col), p1.next_pad_left.eq(self.next_pad_left),
            self.band_next.eq(p1.band_next),
            p2.kh.eq(self.kh), p2.sy.eq(self.sy), p2.pad_top.eq(self.pad_top),
            p2.out_height.eq(self.out_height),
        ]
        return m
