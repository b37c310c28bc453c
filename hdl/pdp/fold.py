"""PDP's 16-bit reductions (nv_full INT16 and FP16): the fold of a pooling window's real taps,
one operator (an fp17 addition: one of its three phases) per register stage, and the operators
themselves.

Order and operators (facts documented in verif/model/pdp.py ``pool_plane_fp16`` and
``_fp16_pick``, read there from NVIDIA's nvdlav1 RTL, NV_NVDLA_PDP_CORE_cal1d.v / _unit1d.v /
_cal2d.v, and checked on it): a window's real taps are combined one after another, oldest
(leftmost column, topmost line) first; the width pass puts the running value first
(``op(acc, tap)``), the height pass the new line first (``op(tap, acc)``). FP16 AVE adds fp17
values (:func:`hdl.lib.fp.fp_add`, 6 exponent and 10 mantissa bits: fp17 of
verif/model/fp.py; in its three phases between registers), which is not associative, hence the strict order; FP16 MAX/MIN pick one of
two fp16 patterns (:func:`fp16_pick`). INT16 sums (wrapping in :data:`VBITS` bits, which they
never reach in the width pass: the widths are the model's INT_WIDTHS for nv_full INT16, 22-bit
sums) and maxima/minima are associative; they take the same stages.

Every value travels in a ``signed(VBITS)`` container: INT16 values sign-extended, fp17 and fp16
bit patterns zero-extended (their low 17 / 16 bits).
"""
from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, Value, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.lib.fp import FpAddStages, fp_add, fp_is_nan
from hdl.lib.stream import Map

__all__ = ["VBITS", "FP17", "FP16", "TAPS", "fp16_pick", "fold_op", "fp17_of_small_int",
           "lanes_signal", "fold_in_layout", "fold_out_layout", "FoldChain"]

#: container bits of a 16-bit pooling value: nv_full INT16's 22-bit sums (NVIDIA's nvdlav1
#: NV_NVDLA_PDP_CORE_unit1d.v / _cal2d.v, verif/model/pdp.py INT_WIDTHS[("v1", 1)])
VBITS = 22
#: (exponent, mantissa) bits of fp17 (verif/model/fp.py: bits 15:10 exponent, bias 31) and fp16
FP17 = (6, 10)
FP16 = (5, 10)
#: taps per window: kernels are at most 8 wide and 8 high (D_POOLING_KERNEL_CFG)
TAPS = 8

POOL_AVE, POOL_MAX = 0, 1          # D_OPERATION_MODE_CFG.POOLING_METHOD (MIN: any other)


def fp16_pick(a, b, take_max) -> Value:
    """MAX (``take_max`` 1) or MIN of two fp16 bit patterns as nv_full's PDP compares them
    (verif/model/pdp.py ``_fp16_pick``, from NVIDIA's nvdlav1 RTL): by sign, then by the 15
    magnitude bits (infinities and denormals order as numbers, +0 above -0); the chosen input is
    passed unchanged; a NaN wins, ``a``'s before ``b``'s. Combinational, 16-bit result."""
    a, b = Value.cast(a)[:16], Value.cast(b)[:16]
    sa, sb = a[15], b[15]
    gt = a[:15] > b[:15]
    # same sign: the larger magnitude is the larger positive and the smaller negative value
    a_max = Mux(sa == sb, Mux(sa, ~gt, gt), ~sa)
    a_min = Mux(sa == sb, Mux(sa, gt, ~gt), sa)
    res = Mux(Mux(take_max, a_max, a_min), a, b)
    res = Mux(fp_is_nan(b, *FP16), b, res)
    return Mux(fp_is_nan(a, *FP16), a, res)


def fold_op(m, a, b, method, fp, name: str, f_sum=None) -> Value:
    """One step of a 16-bit window reduction on ``signed(VBITS)`` containers ``a`` (first
    operand) and ``b``: INT16 (``fp`` 0) AVE the sum wrapping to VBITS bits, MAX / MIN the
    signed maximum / minimum; FP16 (``fp`` 1) AVE ``fp_add`` of the fp17 patterns, MAX / MIN
    :func:`fp16_pick`. ``method``: POOLING_METHOD (0 AVE, 1 MAX, else MIN). ``f_sum``: that
    fp17 sum (17 bits) when the caller computed it in earlier stages (:class:`FoldChain`), else
    an ``fp_add`` is built here. Combinational."""
    a, b = Value.cast(a).as_signed(), Value.cast(b).as_signed()
    ave, is_max = method == POOL_AVE, method == POOL_MAX
    i_sum = (a + b)[:VBITS].as_signed()
    i_mm = Mux(is_max, Mux(a > b, a, b), Mux(a < b, a, b))
    if f_sum is None:
        f_sum = fp_add(m, a[:17], b[:17], *FP17, name=name)
    f_mm = fp16_pick(a, b, is_max)
    return Mux(fp, Mux(ave, f_sum, f_mm), Mux(ave, i_sum, i_mm))


def fp17_of_small_int(n: int) -> int:
    """fp17 bit pattern of the integer ``n`` (1..8, exact): exponent 31 + floor(log2 n)
    (bias 31, verif/model/fp.py's format), mantissa the bits below the leading one."""
    e = n.bit_length() - 1
    return ((31 + e) << 10) | ((n - (1 << e)) << (10 - e))


def lanes_signal(m, values, name: str) -> Signal:
    """A Signal(ArrayLayout(signed(VBITS), len(values))) driven (comb, in ``m``) element by
    element from ``values`` (each extended or truncated to VBITS bits)."""
    sig = Signal(data.ArrayLayout(signed(VBITS), len(values)), name=name)
    m.d.comb += [sig[k].eq(v) for k, v in enumerate(values)]
    return sig


def _acc_layout(lanes: int, ntaps: int, extra) -> data.StructLayout:
    """A fold stage's payload: ``acc`` (lanes x signed(VBITS)) the running value, ``started``
    (a real tap was seen), the ``ntaps`` taps still to fold (index = age, 0 newest), their
    ``valid`` flags, and ``x`` (passed through)."""
    lane = data.ArrayLayout(signed(VBITS), lanes)
    members = {"acc": lane, "started": 1, "x": extra}
    if ntaps:
        members.update(taps=data.ArrayLayout(lane, ntaps), valid=ntaps)
    return data.StructLayout(members)


def fold_in_layout(lanes: int, extra) -> data.StructLayout:
    """:class:`FoldChain`'s input payload: ``taps`` (TAPS x lanes x signed(VBITS), index =
    age, 0 the newest column / line), ``valid`` (TAPS bits: real taps of the window), ``x``
    (``extra``, passed through)."""
    lane = data.ArrayLayout(signed(VBITS), lanes)
    return data.StructLayout({"taps": data.ArrayLayout(lane, TAPS), "valid": TAPS, "x": extra})


def fold_out_layout(lanes: int, extra) -> data.StructLayout:
    """:class:`FoldChain`'s output payload: ``acc`` (lanes x signed(VBITS)) the window's
    reduction, ``x`` (``extra``)."""
    return data.StructLayout({"acc": data.ArrayLayout(signed(VBITS), lanes), "x": extra})


class FoldChain(wiring.Component):
    """The reduction of a window's real taps, oldest first (module docstring), one
    :func:`fold_op` per register stage.

    Parameters: ``lanes``; ``extra`` (a shape passed through with each window);
    ``new_first`` (True: ``op(tap, acc)``, the height pass; False: ``op(acc, tap)``).

    Ports: ``i`` In(stream of :func:`fold_in_layout`); ``o`` Out(stream of
    :func:`fold_out_layout`); ``method`` In(2), ``fp`` In(1) (stable while windows flow).
    A window without real taps gives 0 (the model's padding value; the PDP checks keep every
    window with a real tap).

    Stages (:class:`hdl.lib.stream.Map`, one item per cycle each): the first takes the oldest
    tap (age 7) as the running value when it is real; each of the next seven ages (6 down to 0,
    submodules ``age6`` .. ``age0``) folds one age in, in three stages
    (:class:`hdl.lib.fp.FpAddStages`: the fp17 sum's phases, every lane's, each between
    registers; the last stage also does the INT16 and MAX/MIN operators): a real tap becomes
    the running value when none was seen yet, else is combined with it. Latency 22 cycles.
    """

    def __init__(self, lanes: int, extra, *, new_first: bool):
        self.lanes, self.extra, self.new_first = lanes, extra, new_first
        super().__init__({
            "i": In(stream.Signature(fold_in_layout(lanes, extra))),
            "o": Out(stream.Signature(fold_out_layout(lanes, extra))),
            "method": In(2), "fp": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        T = self.lanes
        last = TAPS - 1

        def first(m, w):
            return {"acc": lanes_signal(m, [Mux(w.valid[last], w.taps[last][ln], 0)
                                            for ln in range(T)], "acc"),
                    "started": w.valid[last], "taps": w.taps.as_value()[:len(w.taps.as_value())
                                                                        * last // TAPS],
                    "valid": w.valid[:last], "x": w.x}

        def pairs(w, age):
            """Per lane (first operand, second operand) of age ``age``'s step."""
            tap = w.taps[age]
            return [(tap[ln], w.acc[ln]) if self.new_first else (w.acc[ln], tap[ln])
                    for ln in range(T)]

        def step(age):
            def operands(m, w):
                return [(a[:17], b[:17]) for a, b in pairs(w, age)]

            def fn(m, w, sums):
                tap, real = w.taps[age], w.valid[age]
                acc = []
                for ln, (a, b) in enumerate(pairs(w, age)):
                    r = fold_op(m, a, b, self.method, self.fp, name=f"l{ln}", f_sum=sums[ln])
                    acc.append(Mux(real, Mux(w.started, r, tap[ln]), w.acc[ln]))
                out = {"acc": lanes_signal(m, acc, "acc"), "started": w.started | real,
                       "x": w.x}
                if age:
                    bits = w.taps.as_value()
                    out.update(taps=bits[:len(bits) * age // (age + 1)], valid=w.valid[:age])
                return out
            return operands, fn

        prev = None
        stages = [("first", Map(fold_in_layout(T, self.extra), _acc_layout(T, last, self.extra),
                                first))]
        for age in range(last - 1, -1, -1):
            stages.append((f"age{age}", FpAddStages(
                _acc_layout(T, age + 1, self.extra), _acc_layout(T, age, self.extra), *FP17,
                T, *step(age))))
        for name, stage in stages:
            m.submodules[name] = stage
            if prev is None:
                wiring.connect(m, wiring.flipped(self.i), stage.i)
            else:
                wiring.connect(m, prev.o, stage.i)
            prev = stage
        m.d.comb += [self.o.valid.eq(prev.o.valid), prev.o.ready.eq(self.o.ready),
                     self.o.payload.acc.eq(prev.o.payload.acc),
                     self.o.payload.x.eq(prev.o.payload.x)]
        return m
