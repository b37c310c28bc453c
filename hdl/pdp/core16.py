"""PDP core for 16-bit elements: nv_full's INT16 and FP16 pooling (D_DATA_FORMAT.INPUT_DATA 1
and 2, selected at run time by ``fp``), beside the INT8 :class:`hdl.pdp.core.PdpCore`
(v1_ias_unit_description.rst "Planar Data Processor"; arithmetic: verif/model/pdp.py
``pool_plane`` with INT_WIDTHS[("v1", 1)] and ``pool_plane_fp16``, facts read there from
NVIDIA's nvdlav1 RTL and checked on it).

Stream stages (``lib.stream``; ``elems`` 16-bit channels per atom, ``lanes`` per item,
``groups`` = elems / lanes items per atom):

  atoms --Split--> groups --Map (NaN flush)--> SkidBuffer --> Pool1d16 (width pass)
        --SkidBuffer--> Pool2d16 (height pass)
        --Map (x RECIP_KERNEL_WIDTH)--> Map (INT16: round to 19 bits; FP16: fp_mul_finish)
        --Map (x RECIP_KERNEL_HEIGHT)--> Map (FP16: fp_mul_finish)
        --Map (INT16: round to 16 bits; FP16: fp17 -> fp16)
        --Merge--> atoms

* NaN flush (PDP D_NAN_FLUSH_TO_ZERO.NAN_TO_ZERO, FP16; verif/model/pdp.py from NVIDIA's
  NV_NVDLA_PDP_nan.v: FP16 NaN inputs read by PDP_RDMA become +0; not on the fly, so the unit
  drives ``nan_to_zero`` low for an on-the-fly layer).
* INT16 AVE: the 22-bit total times the unsigned 17-bit RECIP_KERNEL_WIDTH rounded to 19 bits,
  times RECIP_KERNEL_HEIGHT rounded to 16 bits (:func:`hdl.pdp.core.recip_finish`, NVIDIA's
  "rounding 0.5=1, -0.5=-1"; widths INT_WIDTHS[("v1", 1)]).
* FP16 AVE: the fp17 total times RECIP_KERNEL_WIDTH[16:0], times RECIP_KERNEL_HEIGHT[16:0]
  (both fp17 bit patterns in this mode), converted to fp16 (:func:`hdl.lib.fp.fp_mul` in phases,
  :func:`hdl.lib.fp.fp_narrow`).
* MAX / MIN: the pooled int16 value / fp16 pattern passes unchanged.

Each fp operator sits alone between registers (``fp_add``, ~19 ns combinational in fp17 on ECP5,
in its three phases: :class:`hdl.lib.fp.FpAddStages`; ``fp_mul`` in its two,
:func:`hdl.lib.fp.fp_mul_product` and :func:`hdl.lib.fp.fp_mul_finish`).
An atom's 16-bit element ``j`` is its bytes ``2j`` (low) and ``2j + 1`` (format.rst: two-byte
elements little-endian, ``atom_bytes // 2`` channels per atom).
"""
from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.lib.fp import (fp_is_nan, fp_mul_finish, fp_mul_product, fp_mul_product_layout,
                        fp_narrow)
from hdl.lib.gearbox import Merge, Split
from hdl.lib.stream import Map, SkidBuffer
from hdl.pdp.core import recip_finish
from hdl.pdp.fold import FP16, FP17, POOL_AVE, VBITS
from hdl.pdp.pool1d import DIM_BITS
from hdl.pdp.pool16 import PAD_BITS, Pool1d16, Pool2d16

__all__ = ["PdpCore16", "AVG_W_BITS", "OUT_BITS", "core16_geometry"]

#: INT16's width-divided and output bits (verif/model/pdp.py INT_WIDTHS[("v1", 1)], NVIDIA's
#: nvdlav1 NV_NVDLA_PDP_CORE_cal2d.v)
AVG_W_BITS, OUT_BITS = 19, 16


def core16_geometry(cfg) -> tuple[int, int]:
    """``(elems, lanes)`` of the 16-bit core of configuration ``cfg``: cfg.atom_bytes // 2
    channels per atom (format.rst: two-byte elements), and half of cfg.pdp_throughput (at
    least one) lanes, so that an item carries as many bits as the INT8 core's (its lane count
    follows the element width)."""
    return cfg.atom_bytes // 2, max(1, cfg.pdp_throughput // 2)


class PdpCore16(wiring.Component):
    """16-bit pooling datapath (module docstring).

    Parameters: ``elems`` (16-bit channels per atom: cfg.atom_bytes // 2), ``lanes``
    (channels per item; ``elems // lanes`` a power of two), ``max_width`` (line-buffer
    output columns per band).

    Ports: ``i`` In(stream of ArrayLayout(signed(16), elems)) (INT16 values or fp16 bit
    patterns); ``o`` Out(stream of the same); ``fp`` In(1) (1: FP16, 0: INT16); ``nan_to_zero``
    In(1) (FP16 NaN inputs become +0); the other ports as :class:`hdl.pdp.core.PdpCore`:
    ``start``, ``method``, ``kw``, ``kh``, ``sx``, ``sy``, ``pad_top``, ``height``,
    ``out_height``, ``surfaces``, ``last_col``, ``pad_left``, ``out_width``,
    ``next_last_col``, ``next_pad_left``, ``band_next`` Out, ``pads`` (raw 19-bit
    PAD_VALUE_kX at index k), ``recip_w``, ``recip_h`` (17 bits). All but the streams and
    ``start`` stable during a layer.
    """

    def __init__(self, elems: int, lanes: int, max_width: int):
        if elems % lanes or (elems // lanes) & (elems // lanes - 1):
            raise ValueError(f"{elems} elements per atom are not a power-of-two multiple of "
                             f"{lanes} lanes")
        self.elems, self.lanes, self.groups, self.max_width = (elems, lanes, elems // lanes,
                                                                max_width)
        a = data.ArrayLayout(signed(16), elems)
        super().__init__({
            "i": In(stream.Signature(a)), "o": Out(stream.Signature(a)),
            "start": In(1), "fp": In(1), "nan_to_zero": In(1),
            "method": In(2), "kw": In(4), "kh": In(4), "sx": In(5), "sy": In(5),
            "pad_top": In(3), "height": In(DIM_BITS), "out_height": In(DIM_BITS),
            "surfaces": In(DIM_BITS), "last_col": In(DIM_BITS), "pad_left": In(3),
            "out_width": In(DIM_BITS), "next_last_col": In(DIM_BITS), "next_pad_left": In(3),
            "band_next": Out(1),
            "pads": In(data.ArrayLayout(PAD_BITS, 8)),
            "recip_w": In(17), "recip_h": In(17),
        })

    def elaborate(self, platform):
        m = Module()
        T, G = self.lanes, self.groups
        atom_l = data.ArrayLayout(signed(16), self.elems)
        lane16 = data.ArrayLayout(signed(16), T)
        m.submodules.split = split = Split(data.StructLayout({"v": atom_l}), G)
        m.submodules.pool1d = p1 = Pool1d16(T, G)
        m.submodules.pool2d = p2 = Pool2d16(T, G, self.max_width)
        m.submodules.merge = merge = Merge(lane16, G)
        ave = self.method == POOL_AVE
        fp = self.fp

        def nan_flush(m, v):
            return [Mux(fp & self.nan_to_zero & fp_is_nan(v[k], *FP16), 0, v[k])
                    for k in range(T)]

        m.submodules.nan = nan = Map(lane16, lane16, nan_flush)
        m.submodules.in_skid = in_skid = SkidBuffer(lane16)
        m.submodules.mid_skid = mid = SkidBuffer(p1.o.payload.shape())

        # the reciprocal stages: one product or rounding per stage, in a signed container wide
        # enough for INT16's product (22-bit total x 17-bit reciprocal); FP16 values and the
        # MAX/MIN results ride in its low bits. An fp17 product is fp_mul_product in the
        # multiplying stage and fp_mul_finish in the next one (beside INT16's rounding after
        # the width pass, in a stage of its own after the height pass, before fp_narrow)
        prod = signed(VBITS + 17 + 1)
        pl = data.ArrayLayout(prod, T)
        mlane = data.StructLayout({"v": prod, "f": fp_mul_product_layout(*FP17)})
        ml = data.ArrayLayout(mlane, T)
        ave_fp, ave_int = ave & fp, ave & ~fp

        def lane_product(m, v, f, name):
            """A lane of ``ml``: ``v`` (the integer product or the value passed along) and
            ``f`` (an fp_mul_product view)."""
            x = Signal(mlane, name=name)
            m.d.comb += [x.v.eq(v), x.f.eq(f)]
            return x

        def mul_w(m, v):
            return [lane_product(m, Mux(ave_int, v[k] * self.recip_w, v[k]),
                                 fp_mul_product(m, v[k][:17], self.recip_w, *FP17,
                                                name=f"mw{k}"), f"mw{k}")
                    for k in range(T)]

        def round_w(m, v):
            return [Mux(ave_int, recip_finish(v[k].v, AVG_W_BITS),
                        Mux(ave_fp, fp_mul_finish(m, v[k].f, *FP17, name=f"mw{k}"),
                            v[k].v[:VBITS]).as_signed())
                    for k in range(T)]

        def mul_h(m, v):
            w = [v[k][:AVG_W_BITS].as_signed() for k in range(T)]
            return [lane_product(m, Mux(ave_int, w[k] * self.recip_h, v[k]),
                                 fp_mul_product(m, v[k][:17], self.recip_h, *FP17,
                                                name=f"mh{k}"), f"mh{k}")
                    for k in range(T)]

        def mul_h_finish(m, v):
            return [Mux(ave_fp, fp_mul_finish(m, v[k].f, *FP17, name=f"mh{k}"), v[k].v)
                    for k in range(T)]

        def round_h(m, v):
            return [Mux(ave, Mux(fp, fp_narrow(m, v[k][:17], FP17[0], FP16[0], FP17[1],
                                               name=f"nr{k}"),
                                 recip_finish(v[k], OUT_BITS)), v[k][:16])
                    for k in range(T)]

        m.submodules.mul_w = mw = Map(p2.o.payload.shape(), ml, mul_w)
        m.submodules.recip_w = rw = Map(ml, data.ArrayLayout(signed(VBITS), T), round_w)
        m.submodules.mul_h = mh = Map(data.ArrayLayout(signed(VBITS), T), ml, mul_h)
        m.submodules.mul_h_fin = mhf = Map(ml, pl, mul_h_finish)
        m.submodules.recip_h = rh = Map(pl, lane16, round_h)

        m.d.comb += [
            split.i.valid.eq(self.i.valid), split.i.payload.v.eq(self.i.payload),
            self.i.ready.eq(split.i.ready),
            nan.i.valid.eq(split.o.valid), nan.i.payload.eq(split.o.payload.v),
            split.o.ready.eq(nan.i.ready),
            merge.count.eq(G),
            self.o.valid.eq(merge.o.valid), self.o.payload.eq(merge.o.payload.as_value()),
            merge.o.ready.eq(self.o.ready),
        ]
        for a, b in ((nan, in_skid), (in_skid, p1), (p1, mid), (mid, p2), (p2, mw), (mw, rw),
                     (rw, mh), (mh, mhf), (mhf, rh), (rh, merge)):
            wiring.connect(m, a.o, b.i)
        for c in (p1, p2):
            m.d.comb += [c.start.eq(self.start), c.method.eq(self.method), c.fp.eq(fp),
                         c.kw.eq(self.kw), c.pads.eq(self.pads)]
        m.d.comb += [
            p1.sx.eq(self.sx), p1.height.eq(self.height), p1.last_col.eq(self.last_col),
            p1.pad_left.eq(self.pad_left), p1.out_width.eq(self.out_width),
            p1.surfaces.eq(self.surfaces), p1.next_last_col.eq(self.next_last_col),
            p1.next_pad_left.eq(self.next_pad_left), self.band_next.eq(p1.band_next),
            p2.kh.eq(self.kh), p2.sy.eq(self.sy), p2.pad_top.eq(self.pad_top),
            p2.out_height.eq(self.out_height),
        ]
        return m
