"""The MAC array of ``cfg.conv16`` configurations (nv_full's int8_int16_fp16; docs/conv16.md
"CMAC"; v1_ias_unit_description.rst "Convolution MAC": 16 MAC cells of 64 16-bit multipliers,
cells 0-7 in CMAC_A and 8-15 in CMAC_B).

* :class:`Cmac16Half`: one half (CMAC_A or CMAC_B): the INT8/INT16 engine
  (:class:`hdl.cmac.mac16.Cmac16Int`) and the FP16 engine (:class:`hdl.cmac.fp16.Cmac16Fp`)
  side by side; the half's precision (its D_MISC_CFG.PROC_PRECISION, constant during a layer,
  and no op is in flight when it changes: layers of the pipeline never overlap) routes every op
  to one of them and takes its partial sums back, so the engines' latencies need not match.
* :class:`CmacArray16`: both halves fed by one op stream (:class:`hdl.lib.gearbox.Fork`) and
  joined into one word per cell (:class:`hdl.lib.gearbox.Join`), as :class:`hdl.cmac.CmacArray`.

NVIDIA shares one set of multipliers between the precisions (NV_NVDLA_CMAC_CORE_MAC_mul.v);
here the FP16 engine's carry-save Booth products are LUT logic and the INT engine's products
DSPs, so they are two engines.
"""
from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.cmac.fp16 import Cmac16Fp
from hdl.cmac.layouts import PREC_FP16, op16_layout, psum16_layout
from hdl.cmac.mac import join_halves
from hdl.cmac.mac16 import Cmac16Int

__all__ = ["Cmac16Half", "CmacArray16"]


class Cmac16Half(wiring.Component):
    """One CMAC half of a 16-bit configuration: ``cells`` MAC cells (kernels ``first_cell``..
    of ``op.wt``) in every precision.

    Args:
        atomic_c, cells, stripe_max, first_cell, atomic_k: as :class:`Cmac16Int`.

    Ports:
        op: In(stream of ``op16_layout(atomic_c, atomic_k, stripe_max)``).
        prec: In(2): D_MISC_CFG.PROC_PRECISION (0 INT8, 1 INT16, 2 FP16), constant while ops
            are in flight.
        psum: Out(stream of ``psum16_layout(atomic_c, cells, stripe_max)``): the engine's
            words (``i8``, ``i16`` or ``fp``) in op order.

    Raises:
        ValueError: as the engines.
    """

    def __init__(self, atomic_c: int, cells: int, stripe_max: int, first_cell: int = 0, *,
                 atomic_k: int):
        self.int_engine = Cmac16Int(atomic_c, cells, stripe_max, first_cell, atomic_k=atomic_k)
        self.fp_engine = Cmac16Fp(atomic_c, cells, stripe_max, first_cell, atomic_k=atomic_k)
        super().__init__({
            "op": In(stream.Signature(op16_layout(atomic_c, atomic_k, stripe_max))),
            "prec": In(2),
            "psum": Out(stream.Signature(psum16_layout(atomic_c, cells, stripe_max))),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.int_engine = ie = self.int_engine
        m.submodules.fp_engine = fe = self.fp_engine
        fp = Signal()
        m.d.comb += [
            fp.eq(self.prec == PREC_FP16),
            ie.prec.eq(self.prec),
            ie.op.payload.eq(self.op.payload),
            fe.op.payload.eq(self.op.payload),
            ie.op.valid.eq(self.op.valid & ~fp),
            fe.op.valid.eq(self.op.valid & fp),
            self.op.ready.eq(Mux(fp, fe.op.ready, ie.op.ready)),
            self.psum.valid.eq(Mux(fp, fe.psum.valid, ie.psum.valid)),
            self.psum.payload.eq(Mux(fp, fe.psum.payload, ie.psum.payload)),
            ie.psum.ready.eq(self.psum.ready & ~fp),
            fe.psum.ready.eq(self.psum.ready & fp),
        ]
        return m


class CmacArray16(wiring.Component):
    """The whole MAC array of a 16-bit configuration: CMAC_A (cells ``[0, atomic_k/4)``) and
    CMAC_B (cells ``[atomic_k/4, atomic_k/2)``), each a :class:`Cmac16Half` with its own
    precision register, fed by one op stream and joined into one atom of ``atomic_k/2`` words.

    Args:
        atomic_c, atomic_k: cfg.mac_atomic_c, cfg.mac_atomic_k (int8 kernels; a multiple of 4).
        stripe_max: positions per stripe.

    Ports:
        op: In(stream of ``op16_layout(atomic_c, atomic_k, stripe_max)``).
        prec_a, prec_b: In(2): CMAC_A's and CMAC_B's D_MISC_CFG.PROC_PRECISION.
        psum: Out(stream of ``psum16_layout(atomic_c, atomic_k // 2, stripe_max)``).

    Raises:
        ValueError: atomic_k not a multiple of 4, or as the engines.
    """

    def __init__(self, atomic_c: int, atomic_k: int, stripe_max: int):
        if atomic_k < 4 or atomic_k % 4:
            raise ValueError(f"atomic_k must be a multiple of 4, not {atomic_k}")
        half = atomic_k // 4
        self.cmac_a = Cmac16Half(atomic_c, half, stripe_max, 0, atomic_k=atomic_k)
        self.cmac_b = Cmac16Half(atomic_c, half, stripe_max, half, atomic_k=atomic_k)
        super().__init__({
            "op": In(stream.Signature(op16_layout(atomic_c, atomic_k, stripe_max))),
            "prec_a": In(2),
            "prec_b": In(2),
            "psum": Out(stream.Signature(psum16_layout(atomic_c, atomic_k // 2, stripe_max))),
        })

    def elaborate(self, platform):
        m = Module()
        a, b = self.cmac_a, self.cmac_b
        m.submodules.cmac_a, m.submodules.cmac_b = a, b
        m.d.comb += [a.prec.eq(self.prec_a), b.prec.eq(self.prec_b)]
        join_halves(m, a, b, self.op, self.psum)
        return m
