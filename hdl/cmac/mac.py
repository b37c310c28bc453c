"""The MAC array of one CMAC half (v1_ias_unit_description.rst "Convolution MAC"; docs/conv.md
"CMAC"): a stateless, fully pipelined multiply-add over the atomic operations CSC sends.

Structure (one op per cycle, ``lib.stream`` back-pressure through every stage):

1. multiply stage (:class:`hdl.lib.stream.Map`): ``cells`` x ``atomic_c`` int8 x int8 products,
   each a separate 8x8 signed multiply whose result is registered, so that Yosys maps each one
   to a DSP (NVIDIA's nv_small: one CMAC half = 4 MAC cells x 8 = 32 int8 MACs);
2. adder-tree stages (``Map``): pairwise sums, ``levels_per_stage`` tree levels per register
   stage (log2(atomic_c) levels in all, each one bit wider), the last one widened to
   ``result_bits``.

``pos``/``first``/``last`` travel with the data unchanged.
"""
from __future__ import annotations

from amaranth.hdl import Module, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from hdl.cmac.layouts import op_layout, psum_layout
from hdl.lib.gearbox import Fork, Join
from hdl.lib.stream import Map

__all__ = ["Cmac", "CmacArray"]


def _stage_layout(width: int, n: int, cells: int, stripe_max: int) -> data.StructLayout:
    return data.StructLayout({
        "v": data.ArrayLayout(data.ArrayLayout(signed(width), n), cells),
        "pos": range(stripe_max),
        "first": 1,
        "last": 1,
    })


class Cmac(wiring.Component):
    """Pipelined MAC cells: ``sum[k] = sum_c op.data[c] * op.wt[first_cell + k][c]`` exactly.

    Args:
        atomic_c: channels per op (cfg.mac_atomic_c; 8 on nv_small).
        cells: MAC cells (kernels) of this instance (cfg.mac_atomic_k // 2 for CMAC_A/CMAC_B).
        result_bits: width of each sum (cfg.mac_result_width; 19 on nv_small); must hold the
            exact sum, i.e. >= 16 + ceil(log2(atomic_c)).
        stripe_max: positions per stripe (shape of ``pos``).
        first_cell: the first kernel of ``op.wt`` this instance uses (0 for CMAC_A,
            atomic_k // 2 for CMAC_B).
        atomic_k: kernels in ``op.wt`` (cfg.mac_atomic_k); default ``first_cell + cells``.
        levels_per_stage: adder-tree levels per register stage (>= 1).

    Ports:
        op: In(stream.Signature(op_layout(atomic_c, atomic_k, stripe_max))).
        psum: Out(stream.Signature(psum_layout(cells, result_bits, stripe_max))).

    Timing: latency 1 + ceil(log2(atomic_c) / levels_per_stage) cycles (3 on nv_small), one op
    per cycle; ``op.ready`` depends combinationally on ``psum.ready`` (Map chain).

    Raises:
        ValueError: sizes < 1, atomic_c not a power of two, kernels past atomic_k, or
            result_bits too narrow for an exact sum.
    """

    def __init__(self, atomic_c: int, cells: int, result_bits: int, stripe_max: int,
                 first_cell: int = 0, *, atomic_k: int | None = None, levels_per_stage: int = 2):
        if atomic_k is None:
            atomic_k = first_cell + cells
        if atomic_c < 1 or atomic_c & (atomic_c - 1):
            raise ValueError(f"atomic_c must be a power of two, not {atomic_c}")
        if cells < 1 or first_cell < 0 or first_cell + cells > atomic_k:
            raise ValueError(f"cells {first_cell}..{first_cell + cells - 1} outside the "
                             f"{atomic_k} kernels of an op")
        if result_bits < 16 + ceil_log2(atomic_c):
            raise ValueError(f"result_bits={result_bits} cannot hold a sum of {atomic_c} int8 "
                             f"products (needs {16 + ceil_log2(atomic_c)})")
        if levels_per_stage < 1:
            raise ValueError(f"levels_per_stage must be >= 1, not {levels_per_stage}")
        self.atomic_c, self.cells, self.result_bits = atomic_c, cells, result_bits
        self.stripe_max, self.first_cell, self.atomic_k = stripe_max, first_cell, atomic_k
        self.levels_per_stage = levels_per_stage
        super().__init__({
            "op": In(stream.Signature(op_layout(atomic_c, atomic_k, stripe_max))),
            "psum": Out(stream.Signature(psum_layout(cells, result_bits, stripe_max))),
        })

    def elaborate(self, platform):
        m = Module()
        ac, cells, sm = self.atomic_c, self.cells, self.stripe_max

        # 1. products (16-bit signed), registered: one DSP each
        width, n = 16, ac
        prod_layout = _stage_layout(width, n, cells, sm)

        def multiply(mm, op):
            s = Signal(prod_layout, name="products")
            for k in range(cells):
                w = op.wt[self.first_cell + k]
                for c in range(ac):
                    mm.d.comb += s.v[k][c].eq(op.data[c] * w[c])
            mm.d.comb += [s.pos.eq(op.pos), s.first.eq(op.first), s.last.eq(op.last)]
            return s

        m.submodules.mul = mul = Map(op_layout(ac, self.atomic_k, sm), prod_layout, multiply)
        wiring.connect(m, wiring.flipped(self.op), mul.i)
        prev, prev_layout = mul.o, prod_layout

        # 2. adder tree, levels_per_stage levels per register stage
        levels = ceil_log2(ac)
        stage = 0
        while levels > 0:
            step = min(levels, self.levels_per_stage)
            levels -= step
            out_n = n >> step
            out_width = width + step
            final = levels == 0
            o_layout = (psum_layout(cells, self.result_bits, sm) if final
                        else _stage_layout(out_width, out_n, cells, sm))

            def add(mm, p, n=n, step=step, out_n=out_n, final=final, o_layout=o_layout):
                s = Signal(o_layout, name="sums")
                for k in range(cells):
                    vals = [p.v[k][c] for c in range(n)]
                    for _ in range(step):
                        vals = [vals[2 * i] + vals[2 * i + 1] for i in range(len(vals) // 2)]
                    if final:
                        mm.d.comb += s.sum[k].eq(vals[0])
                    else:
                        for i in range(out_n):
                            mm.d.comb += s.v[k][i].eq(vals[i])
                mm.d.comb += [s.pos.eq(p.pos), s.first.eq(p.first), s.last.eq(p.last)]
                return s

            add_stage = Map(prev_layout, o_layout, add)
            m.submodules[f"add{stage}"] = add_stage
            wiring.connect(m, prev, add_stage.i)
            prev, prev_layout, width, n = add_stage.o, o_layout, out_width, out_n
            stage += 1

        if stage == 0:       # atomic_c == 1: the product is the sum
            def widen(mm, p):
                s = Signal(psum_layout(cells, self.result_bits, sm), name="sums")
                mm.d.comb += [s.sum[k].eq(p.v[k][0]) for k in range(cells)]
                mm.d.comb += [s.pos.eq(p.pos), s.first.eq(p.first), s.last.eq(p.last)]
                return s
            m.submodules.widen = w = Map(prev_layout, psum_layout(cells, self.result_bits, sm),
                                         widen)
            wiring.connect(m, prev, w.i)
            prev = w.o
        wiring.connect(m, prev, wiring.flipped(self.psum))
        return m


class CmacArray(wiring.Component):
    """The whole MAC array: two :class:`Cmac` halves (NVIDIA's CMAC_A for kernels
    ``[0, atomic_k/2)``, CMAC_B for ``[atomic_k/2, atomic_k)``) fed by one op stream and joined
    into one partial-sum atom of ``atomic_k`` sums (docs/conv.md "CMAC").

    :class:`hdl.lib.gearbox.Fork` gives every op to both halves; :class:`hdl.lib.gearbox.Join`
    lets a psum atom leave when both halves have one (equal latencies keep them in step).

    Args:
        atomic_c, atomic_k: op sizes (cfg.mac_atomic_c, cfg.mac_atomic_k; atomic_k even).
        result_bits, stripe_max: as :class:`Cmac`.

    Ports:
        op: In(stream of ``op_layout(atomic_c, atomic_k, stripe_max)``).
        psum: Out(stream of ``psum_layout(atomic_k, result_bits, stripe_max)``).

    Raises:
        ValueError: odd atomic_k, or as :class:`Cmac`.
    """

    def __init__(self, atomic_c: int, atomic_k: int, result_bits: int, stripe_max: int):
        if atomic_k < 2 or atomic_k % 2:
            raise ValueError(f"atomic_k must be even, not {atomic_k}")
        half = atomic_k // 2
        self.cmac_a = Cmac(atomic_c, half, result_bits, stripe_max, 0, atomic_k=atomic_k)
        self.cmac_b = Cmac(atomic_c, half, result_bits, stripe_max, half, atomic_k=atomic_k)
        super().__init__({
            "op": In(stream.Signature(op_layout(atomic_c, atomic_k, stripe_max))),
            "psum": Out(stream.Signature(psum_layout(atomic_k, result_bits, stripe_max))),
        })

    def elaborate(self, platform):
        m = Module()
        a, b = self.cmac_a, self.cmac_b
        m.submodules.cmac_a, m.submodules.cmac_b = a, b
        join_halves(m, a, b, self.op, self.psum)
        return m


def join_halves(m: Module, a, b, op, psum) -> None:
    """Feed both CMAC halves ``a`` and ``b`` from ``op`` (:class:`hdl.lib.gearbox.Fork`) and
    join their partial sums into ``psum`` (:class:`hdl.lib.gearbox.Join`): ``a``'s words
    first, then ``b``'s; pos/first/last from ``a`` (equal latencies keep the halves in step).
    Used by :class:`CmacArray` and :class:`hdl.cmac.array16.CmacArray16`."""
    half = len(a.psum.payload.sum)
    m.submodules.fork = fork = Fork(op.payload.shape(), 2)
    wiring.connect(m, wiring.flipped(op), fork.i)
    wiring.connect(m, fork.o_0, a.op)
    wiring.connect(m, fork.o_1, b.op)
    m.submodules.join = join = Join({"a": a.psum.payload.shape(), "b": b.psum.payload.shape()})
    m.d.comb += join.en.eq(0b11)
    wiring.connect(m, a.psum, join.i_a)
    wiring.connect(m, b.psum, join.i_b)
    pa, pb = join.o.payload.a, join.o.payload.b
    m.d.comb += [
        psum.valid.eq(join.o.valid), join.o.ready.eq(psum.ready),
        psum.payload.pos.eq(pa.pos),
        psum.payload.first.eq(pa.first),
        psum.payload.last.eq(pa.last),
    ]
    for k in range(half):
        m.d.comb += [psum.payload.sum[k].eq(pa.sum[k]),
                     psum.payload.sum[half + k].eq(pb.sum[k])]
