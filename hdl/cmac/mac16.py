"""The INT8/INT16 MAC engine of one CMAC half in ``cfg.conv16`` configurations (nv_full's
int8_int16_fp16; docs/conv16.md "CMAC"; v1_ias_unit_description.rst "Convolution MAC": MAC cells
of ``atomic_c`` 16-bit multipliers, each doubled into two int8 multipliers sharing the datum).

One lane (cell j, channel c) has a datum ``d`` and a 16-bit weight lane ``w`` (op16_layout):

* INT16: one product ``int16(d) * int16(w)``;
* INT8: two products ``int8(d[7:0]) * int8(w[7:0])`` (kernel 2j) and ``int8(d[7:0]) *
  int8(w[15:8])`` (kernel 2j+1).

Multiplier structure (exact in both precisions, no precision-specific multiplier): the lane is
split on its weight bytes, as NVIDIA's NV_NVDLA_CMAC_CORE_MAC_mul.v splits its Booth rows into
the weight's low byte and its high byte:

* ``x = int16(d)`` in INT16, ``int8(d[7:0])`` sign-extended in INT8 (signed 16 bits);
* ``lo = x * wl`` with ``wl`` the weight's low byte as a 9-bit signed operand: zero-extended
  in INT16, sign-extended in INT8 (so 16 x 9 bits, |lo| < 2**23);
* ``hi = x * int8(w[15:8])`` (16 x 8 bits, |hi| <= 2**22).

INT16: ``int16(d) * int16(w) = lo + 256 * hi``; INT8: ``lo`` and ``hi`` are the two int8
products. Two adder trees sum ``lo`` and ``hi`` over the channels (24 + log2(atomic_c) bits
each); one last adder level forms ``S_lo + 256 * S_hi`` (the INT16 word).

DSP mapping: each lane costs two multipliers of at most 16 x 9 bits, each fitting one ECP5 18x18
MULT18X18D (not synthesised here; hdl.cmac.mac assumes the same one-DSP-per-product mapping),
i.e. 2 * atomic_c per cell: the DSP count of today's int8 :class:`hdl.cmac.mac.Cmac` for the same
int8 kernels (one 8x8 per kernel and channel), with INT16 at no extra multiplier. One 18x18 per
lane cannot give both int8 products exactly: separating two 16-bit products of one shared datum
needs the weights 16 bits apart in one operand (>= 24 bits). A 16x16 plus an 8x8 per lane (the
high product recovered by subtraction) costs as many multipliers and wider adder trees.

Pipeline (``lib.stream`` back-pressure through every stage, :class:`hdl.lib.stream.Map`):

1. multiply stage: ``lo``/``hi`` of every lane of every cell, registered;
2. adder stages: ``log2(atomic_c)`` pairwise tree levels then the combine level, i.e.
   ``log2(atomic_c) + 1`` levels, ``levels_per_stage`` of them per register stage; the last
   stage also selects the word by precision.

``pos``/``first``/``last`` travel with the data unchanged; ``n`` is not used (lanes past the op's
channels carry zero weights in INT8/INT16, docs/conv16.md "CMAC").
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from hdl.cmac.layouts import PREC_INT16, cell_layout, op16_layout, psum16_layout
from hdl.lib.stream import Map

__all__ = ["Cmac16Int", "cmac16_int_latency"]

#: width of one lane's lo / hi product (16 x 9 and 16 x 8 signed bits, both < 2**23 in size)
PRODUCT_BITS = 24


def cmac16_int_latency(atomic_c: int, levels_per_stage: int = 2) -> int:
    """Cycles from an ``op`` transfer to its ``psum`` being valid in :class:`Cmac16Int` without
    stalls: ``1 + ceil((log2(atomic_c) + 1) / levels_per_stage)`` (5 at atomic_c 64, 3 at 8,
    2 at 2, with 2 levels per stage)."""
    levels = ceil_log2(atomic_c) + 1
    return 1 + -(-levels // levels_per_stage)


def _stage_layout(width: int, n: int, cells: int, stripe_max: int) -> data.StructLayout:
    lanes = data.ArrayLayout(data.ArrayLayout(signed(width), n), cells)
    return data.StructLayout({
        "lo": lanes,
        "hi": lanes,
        "pos": range(stripe_max),
        "first": 1,
        "last": 1,
    })


class Cmac16Int(wiring.Component):
    """Pipelined INT8/INT16 MAC cells of a 16-bit configuration: for cell ``k`` (weights
    ``op.wt[first_cell + k]``), ``psum.sum[k]`` is a :func:`hdl.cmac.layouts.cell_layout` word:

    * ``prec == PREC_INT16``: ``i16 = sum_c int16(data[c]) * int16(wt[c])`` exactly;
    * otherwise (PREC_INT8; FP16 is another engine's): ``i8[0] = sum_c int8(data[c][7:0]) *
      int8(wt[c][7:0])`` (kernel 2j) and ``i8[1] = sum_c int8(data[c][7:0]) *
      int8(wt[c][15:8])`` (kernel 2j+1), exactly; bits 15:8 of the data lanes are ignored.

    The union's bits outside the written field (``i16`` or ``i8``) are 0.

    Args:
        atomic_c: channels (16-bit lanes) per op (cfg.mac_atomic_c; a power of two).
        cells: MAC cells of this instance (atomic_k // 4 for CMAC_A or CMAC_B: atomic_k counts
            int8 kernels, two per cell).
        stripe_max: positions per stripe (shape of ``pos``).
        first_cell: the first cell of ``op.wt`` this instance uses (0 for CMAC_A,
            atomic_k // 4 for CMAC_B).
        atomic_k: int8 kernels per op (cfg.mac_atomic_k; ``op.wt`` has atomic_k // 2 cells).
        levels_per_stage: adder levels per register stage (>= 1).

    Ports:
        op: In(stream.Signature(op16_layout(atomic_c, atomic_k, stripe_max))).
        prec: In(2): CMAC D_MISC_CFG.PROC_PRECISION (PREC_INT8 0 / PREC_INT16 1); read by the
            multiply stage and by the last adder stage, so it must be stable while an op is in
            the pipeline (it changes between layers only).
        psum: Out(stream.Signature(psum16_layout(atomic_c, cells, stripe_max))).

    Timing: latency :func:`cmac16_int_latency` cycles (``1 + ceil((log2(atomic_c) + 1) /
    levels_per_stage)``: 5 at atomic_c 64, 3 at 8), one op per cycle; ``op.ready`` depends
    combinationally on ``psum.ready`` (Map chain).

    Raises:
        ValueError: sizes < 1, atomic_c not a power of two, odd atomic_k, cells past the op's
            ``atomic_k // 2``, or levels_per_stage < 1.
    """

    def __init__(self, atomic_c: int, cells: int, stripe_max: int, first_cell: int = 0, *,
                 atomic_k: int, levels_per_stage: int = 2):
        if atomic_c < 1 or atomic_c & (atomic_c - 1):
            raise ValueError(f"atomic_c must be a power of two, not {atomic_c}")
        if atomic_k < 2 or atomic_k % 2:
            raise ValueError(f"atomic_k must be even and >= 2, not {atomic_k}")
        if cells < 1 or first_cell < 0 or first_cell + cells > atomic_k // 2:
            raise ValueError(f"cells {first_cell}..{first_cell + cells - 1} outside the "
                             f"{atomic_k // 2} cells of an op")
        if levels_per_stage < 1:
            raise ValueError(f"levels_per_stage must be >= 1, not {levels_per_stage}")
        self.atomic_c, self.cells, self.stripe_max = atomic_c, cells, stripe_max
        self.first_cell, self.atomic_k = first_cell, atomic_k
        self.levels_per_stage = levels_per_stage
        self.latency = cmac16_int_latency(atomic_c, levels_per_stage)
        super().__init__({
            "op": In(stream.Signature(op16_layout(atomic_c, atomic_k, stripe_max))),
            "prec": In(2),
            "psum": Out(stream.Signature(psum16_layout(atomic_c, cells, stripe_max))),
        })

    def elaborate(self, platform):
        m = Module()
        ac, cells, sm = self.atomic_c, self.cells, self.stripe_max
        lc = ceil_log2(ac)
        is16 = Signal(name="is_int16")
        m.d.comb += is16.eq(self.prec == PREC_INT16)

        # 1. the two products of every lane, registered
        width, n = PRODUCT_BITS, ac
        prod_layout = _stage_layout(width, n, cells, sm)

        def multiply(mm, op):
            s = Signal(prod_layout, name="products")
            xs = []
            for c in range(ac):
                x = Signal(signed(16), name=f"x{c}")
                mm.d.comb += x.eq(Mux(is16, op.data[c].as_signed(), op.data[c][:8].as_signed()))
                xs.append(x)
            for k in range(cells):
                w = op.wt[self.first_cell + k]
                for c in range(ac):
                    wl = Cat(w[c][:8], w[c][7] & ~is16).as_signed()     # 9-bit signed
                    wh = w[c][8:].as_signed()                            # int8
                    mm.d.comb += [s.lo[k][c].eq(xs[c] * wl), s.hi[k][c].eq(xs[c] * wh)]
            mm.d.comb += [s.pos.eq(op.pos), s.first.eq(op.first), s.last.eq(op.last)]
            return s

        m.submodules.mul = mul = Map(op16_layout(ac, self.atomic_k, sm), prod_layout, multiply)
        wiring.connect(m, wiring.flipped(self.op), mul.i)
        prev, prev_layout = mul.o, prod_layout

        # 2. adder stages: lc tree levels on lo and hi, then the combine level
        levels = lc + 1
        out_layout = psum16_layout(ac, cells, sm)
        word = cell_layout(ac)
        stage = 0
        while levels > 0:
            step = min(levels, self.levels_per_stage)
            levels -= step
            final = levels == 0
            tree_steps = step - 1 if final else step
            out_n = n >> tree_steps
            out_width = width + tree_steps
            o_layout = out_layout if final else _stage_layout(out_width, out_n, cells, sm)

            def add(mm, p, n=n, tree_steps=tree_steps, out_n=out_n, final=final,
                    o_layout=o_layout):
                s = Signal(o_layout, name="sums")
                for k in range(cells):
                    lo = [p.lo[k][c] for c in range(n)]
                    hi = [p.hi[k][c] for c in range(n)]
                    for _ in range(tree_steps):
                        lo = [lo[2 * i] + lo[2 * i + 1] for i in range(len(lo) // 2)]
                        hi = [hi[2 * i] + hi[2 * i + 1] for i in range(len(hi) // 2)]
                    if final:
                        # INT16 = S_lo + 256 * S_hi; INT8 = {S_hi, S_lo}; other bits 0
                        i16 = Signal(word, name=f"i16_{k}")
                        i8 = Signal(word, name=f"i8_{k}")
                        mm.d.comb += [i16.i16.eq(lo[0] + (hi[0] << 8)),
                                      i8.i8[0].eq(lo[0]), i8.i8[1].eq(hi[0])]
                        mm.d.comb += s.sum[k].eq(Mux(is16, i16.as_value(), i8.as_value()))
                    else:
                        for i in range(out_n):
                            mm.d.comb += [s.lo[k][i].eq(lo[i]), s.hi[k][i].eq(hi[i])]
                mm.d.comb += [s.pos.eq(p.pos), s.first.eq(p.first), s.last.eq(p.last)]
                return s

            add_stage = Map(prev_layout, o_layout, add)
            m.submodules[f"add{stage}"] = add_stage
            wiring.connect(m, prev, add_stage.i)
            prev, prev_layout, width, n = add_stage.o, o_layout, out_width, out_n
            stage += 1

        wiring.connect(m, prev, wiring.flipped(self.psum))
        return m
