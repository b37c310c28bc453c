"""NVIDIA's floating-point operators (nv_full's int16/fp16 datapaths) as Amaranth logic.

nv_full computes fp16 data in fp17 (PDP, CDP, SDP's LUT) and fp32 (SDP, CACC); its operators
(v1_ias_precision.rst names them; their arithmetic, read from NVIDIA's nvdlav1 HLS sources and
checked on NVIDIA's nv_full RTL through PDP programs, is not IEEE-754) behave as follows, for a
format of ``ebits`` exponent bits (bias ``2**(ebits-1) - 1``) and ``mbits`` mantissa bits with a
hidden one:

* no denormal results: anything below the smallest normal value becomes a zero signed as the
  result; no infinite results: overflow gives the largest finite value (exponent all ones but
  one, mantissa all ones); an exponent-all-ones pattern with a zero mantissa, if one comes in,
  is read as the number it encodes;
* a NaN operand comes out unchanged (``a``'s before ``b``'s);
* addition aligns the smaller operand on ``mbits + 2`` guard bits below the larger one's
  mantissa and drops the bits shifted out beyond them, then rounds to nearest even; an exact
  cancellation is signed as the larger operand (``a`` on a tie), not +0;
* multiplication rounds the exact product to nearest even;
* :func:`fp_widen` (e.g. fp16 to fp17) is exact, fp16 denormals normalised, infinity becoming
  the largest finite value; :func:`fp_narrow` (e.g. fp17 to fp16) rounds to nearest even into
  the narrow format's denormals where needed and saturates to its largest finite value;
* :func:`fp_extend` (fp17 to fp32) and :func:`fp_shorten` (fp32 to fp17) change exponent and
  mantissa widths (nv_full's CDP and SDP LUTs in FP16), :func:`fp_of_fraction` turns a LUT
  fraction into a float.

Every function adds combinational logic to module ``m`` and returns an unsigned Value of the
result's bit pattern (``1 + ebits + mbits`` bits); callers register it (PDP pipelines them).
:func:`fp_add` is also offered in three phases (:func:`fp_add_align`, :func:`fp_add_sum`,
:func:`fp_add_finish`, joined by ``data.StructLayout`` values) for pipelines that register
between them, the last one itself in two (:func:`fp_add_normalise`, :func:`fp_add_round`), and
:class:`FpAddStages` puts them in three or four stream stages: on a Lattice ECP5-85F (speed
grade 8, scripts/fp_timing.py, 2026-11-30) the whole operator reaches 53.6 MHz in fp17 and
37.7 MHz in fp32, the phases 129.7 / 151.5 / 118.3 MHz (fp17) and 102.4 / 121.5 / 93.3 MHz
(fp32), the finish's halves 222.6 / 198.5 MHz (fp17) and 180.5 / 184.3 MHz (fp32).
:func:`fp_mul` likewise comes in two phases (:func:`fp_mul_product`, the exponent sum and the
exact mantissa product; :func:`fp_mul_finish`, the rest): the whole operator 94.5 MHz (fp17)
and 69.6 MHz (fp32), the phases 187.2 / 158.7 MHz (fp17) and 112.3 / 140.8 MHz (fp32).
The model's fp17 (verif/model/fp.py) is a separate implementation; tests compare both with
exact rational arithmetic.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, ValueLike
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.lib.stream import Map, chain

__all__ = ["fp_add", "fp_add_align", "fp_add_sum", "fp_add_finish", "fp_add_normalise",
           "fp_add_round", "fp_add_aligned_layout", "fp_add_sum_layout", "fp_add_norm_layout",
           "FpAddStages", "fp_mul", "fp_mul_product", "fp_mul_finish",
           "fp_mul_product_layout", "fp_widen", "fp_narrow", "fp_extend",
           "fp_shorten", "fp_of_fraction", "fp_is_nan", "fp_max_finite"]


def _fields(x: Value, ebits: int, mbits: int):
    return x[mbits + ebits], x[mbits:mbits + ebits], x[:mbits]


def fp_is_nan(x: ValueLike, ebits: int, mbits: int) -> Value:
    """Whether ``x`` is a NaN (exponent all ones, mantissa non-zero)."""
    x = Value.cast(x)
    _, e, mant = _fields(x, ebits, mbits)
    return e.all() & mant.any()


def fp_max_finite(sign: ValueLike, ebits: int, mbits: int) -> Value:
    """The largest finite value of the format, signed ``sign``."""
    return Cat(Const((1 << mbits) - 1, mbits), Const((1 << ebits) - 2, ebits), sign)


def _leading_zeros(m, value: Value, name: str) -> Signal:
    """Leading zeros of unsigned ``value`` in its width (the width for 0): a priority encoder."""
    n = len(value)
    z = Signal(range(n + 1), name=name)
    m.d.comb += z.eq(n)
    for b in range(n):                  # the highest set bit wins (last assignment)
        with m.If(value[b]):
            m.d.comb += z.eq(n - 1 - b)
    return z


def _round_even(q: Value, guard: Value, sticky: Value) -> Value:
    """``q`` plus one when the dropped part is above a half, or exactly a half and ``q`` odd;
    one bit wider than ``q``."""
    return q + (guard & (sticky | q[0]))


def fp_add_aligned_layout(ebits: int, mbits: int) -> data.StructLayout:
    """:func:`fp_add_align`'s result (``w = 2 * mbits + 3``): ``sign`` (1, the larger
    operand's), ``exp`` (``ebits``, the larger operand's exponent), ``sub`` (1, signs differ),
    ``big`` (``mbits + 1``, the larger mantissa with its hidden one, 0 for a zero), ``small``
    (``w``, the smaller one shifted right by the exponent difference on ``mbits + 2`` guard
    bits, the bits beyond dropped), ``nan`` (1, an operand is a NaN) and ``pass_`` (``1 + ebits
    + mbits``, that NaN, ``a``'s before ``b``'s)."""
    return data.StructLayout({"sign": 1, "exp": ebits, "sub": 1, "big": mbits + 1,
                              "small": 2 * mbits + 3, "nan": 1, "pass_": 1 + ebits + mbits})


def fp_add_sum_layout(ebits: int, mbits: int) -> data.StructLayout:
    """:func:`fp_add_sum`'s result: ``sign``, ``exp``, ``nan``, ``pass_`` as in
    :func:`fp_add_aligned_layout`; ``r`` (``w + 1 = 2 * mbits + 4`` bits) the sum or difference
    of the aligned mantissas (the larger one's hidden one at bit ``w - 1``, a carry at ``w``);
    ``lz`` (``range(w + 1)``) the leading zeros of ``r[:w]`` (``w`` when it is 0)."""
    w = 2 * mbits + 3
    return data.StructLayout({"sign": 1, "exp": ebits, "r": w + 1, "lz": range(w + 1),
                              "nan": 1, "pass_": 1 + ebits + mbits})


def fp_add_align(m, a: ValueLike, b: ValueLike, ebits: int, mbits: int,
                 name: str = "fpadd") -> data.View:
    """First phase of :func:`fp_add`: compare the magnitudes, swap, align the smaller mantissa
    on ``mbits + 2`` guard bits below the larger one (bits shifted out beyond them dropped),
    note a NaN operand. Returns a :func:`fp_add_aligned_layout` view (combinational; a caller
    may register it before :func:`fp_add_sum`)."""
    a, b = Value.cast(a), Value.cast(b)
    k, w = mbits + 2, 2 * mbits + 3
    sa, ea, ma = _fields(a, ebits, mbits)
    sb, eb, mb = _fields(b, ebits, mbits)
    a_big = Cat(ma, ea) >= Cat(mb, eb)
    big, small = Mux(a_big, a, b), Mux(a_big, b, a)
    sg, eg, mg = _fields(big, ebits, mbits)
    _, es, ms = _fields(small, ebits, mbits)
    pg = Cat(mg, eg.any() | mg.any())            # hidden one unless exactly zero
    ps = Cat(ms, es.any() | ms.any())
    d = Signal(ebits, name=f"{name}_d")
    m.d.comb += d.eq(eg - es)
    nan_a, nan_b = fp_is_nan(a, ebits, mbits), fp_is_nan(b, ebits, mbits)
    out = Signal(fp_add_aligned_layout(ebits, mbits), name=f"{name}_al")
    m.d.comb += [out.sign.eq(sg), out.exp.eq(eg), out.sub.eq(sa != sb), out.big.eq(pg),
                 out.small.eq(Mux(d > w, 0, Cat(Const(0, k), ps) >> d)),
                 out.nan.eq(nan_a | nan_b), out.pass_.eq(Mux(nan_a, a, b))]
    return out


def fp_add_sum(m, x, ebits: int, mbits: int, name: str = "fpadd") -> data.View:
    """Second phase of :func:`fp_add`: add or subtract the aligned mantissas of ``x`` (a
    :func:`fp_add_aligned_layout` value) and count the leading zeros of the result. Returns a
    :func:`fp_add_sum_layout` view (combinational)."""
    x = data.View(fp_add_aligned_layout(ebits, mbits), Value.cast(x))
    k, w = mbits + 2, 2 * mbits + 3
    lg = Cat(Const(0, k), x.big)                 # w bits
    out = Signal(fp_add_sum_layout(ebits, mbits), name=f"{name}_sm")
    r = Signal(w + 1, name=f"{name}_r")
    m.d.comb += r.eq(Mux(x.sub, lg - x.small, lg + x.small))
    z = _leading_zeros(m, r[:w], f"{name}_lz")
    m.d.comb += [out.sign.eq(x.sign), out.exp.eq(x.exp), out.r.eq(r), out.lz.eq(z),
                 out.nan.eq(x.nan), out.pass_.eq(x.pass_)]
    return out


def fp_add_norm_layout(ebits: int, mbits: int) -> data.StructLayout:
    """:func:`fp_add_normalise`'s result: ``sign``, ``nan``, ``pass_`` as in
    :func:`fp_add_aligned_layout`; ``exp`` (``ebits + 1``, the normalised exponent before
    rounding, its top bit a borrow below 0 where ``zero`` is set); ``q`` (``mbits + 1``, the
    mantissa kept, hidden one on top), ``guard`` (1) and ``sticky`` (1, any bit below the
    guard bit); ``sat`` (1, the carry overflowed the largest exponent) and ``zero`` (1, flush
    to a signed zero)."""
    return data.StructLayout({"sign": 1, "exp": ebits + 1, "q": mbits + 1, "guard": 1,
                              "sticky": 1, "sat": 1, "zero": 1, "nan": 1,
                              "pass_": 1 + ebits + mbits})


def fp_add_normalise(m, x, ebits: int, mbits: int, name: str = "fpadd") -> data.View:
    """First half of :func:`fp_add_finish`: normalise ``x`` (a :func:`fp_add_sum_layout`
    value) by its carry or leading zeros into the kept mantissa, guard and sticky bits, note
    an overflow by the carry and a flush to zero. Returns a :func:`fp_add_norm_layout` view
    (combinational; a caller may register it before :func:`fp_add_round`)."""
    x = data.View(fp_add_sum_layout(ebits, mbits), Value.cast(x))
    w = 2 * mbits + 3
    top = (1 << ebits) - 2                       # largest finite exponent
    r, z, eg = x.r, x.lz, x.exp
    carry = r[w]
    e1 = Signal(ebits + 1, name=f"{name}_e1")
    n1 = Signal(w, name=f"{name}_n1")            # hidden one at bit w - 1
    with m.If(carry):
        m.d.comb += [e1.eq(eg + 1), n1.eq(r[1:])]
    with m.Else():
        m.d.comb += [e1.eq(eg - z), n1.eq(r[:w] << z)]
    out = Signal(fp_add_norm_layout(ebits, mbits), name=f"{name}_nm")
    m.d.comb += [out.sign.eq(x.sign), out.exp.eq(e1), out.q.eq(n1[w - mbits - 1:]),
                 out.guard.eq(n1[w - mbits - 2]), out.sticky.eq(n1[:w - mbits - 2].any()),
                 out.sat.eq(carry & (eg >= top)),
                 out.zero.eq(~carry & ((z == w) | (eg <= z))),
                 out.nan.eq(x.nan), out.pass_.eq(x.pass_)]
    return out


def fp_add_round(m, x, ebits: int, mbits: int, name: str = "fpadd") -> Value:
    """Second half of :func:`fp_add_finish`: round ``x`` (a :func:`fp_add_norm_layout` value)
    to nearest even, saturate to the largest finite value or flush to a signed zero, NaN
    override. Returns the result's ``1 + ebits + mbits`` bits (combinational)."""
    x = data.View(fp_add_norm_layout(ebits, mbits), Value.cast(x))
    top = (1 << ebits) - 2                       # largest finite exponent
    e1, sg = x.exp, x.sign
    q = _round_even(x.q, x.guard, x.sticky)
    over = q[mbits + 1]
    sat = x.sat | (over & (e1 >= top))
    e2 = e1 + over
    res = Mux(sat, fp_max_finite(sg, ebits, mbits),
              Cat(q[:mbits], e2[:ebits], sg))
    res = Mux(x.zero, Cat(Const(0, ebits + mbits), sg), res)
    return Mux(x.nan, x.pass_, res)


def fp_add_finish(m, x, ebits: int, mbits: int, name: str = "fpadd") -> Value:
    """Last phase of :func:`fp_add`: normalise ``x`` (a :func:`fp_add_sum_layout` value), round
    to nearest even, saturate to the largest finite value or flush to a signed zero, NaN
    override (:func:`fp_add_normalise` then :func:`fp_add_round`). Returns the result's
    ``1 + ebits + mbits`` bits (combinational)."""
    return fp_add_round(m, fp_add_normalise(m, x, ebits, mbits, name), ebits, mbits, name)


def fp_add(m, a: ValueLike, b: ValueLike, ebits: int, mbits: int, name: str = "fpadd") -> Value:
    """``a + b`` (module docstring): :func:`fp_add_align` (compare, swap, align on ``mbits + 2``
    guard bits), :func:`fp_add_sum` (add or subtract, leading zeros), :func:`fp_add_finish`
    (normalise, round to nearest even, saturate or flush, NaN override), all combinational;
    a pipeline registers between the phases instead."""
    al = fp_add_align(m, a, b, ebits, mbits, name)
    return fp_add_finish(m, fp_add_sum(m, al, ebits, mbits, name), ebits, mbits, name)


class FpAddStages(wiring.Component):
    """``count`` :func:`fp_add` operations in ``stages`` :class:`hdl.lib.stream.Map` register
    stages, one phase each (submodules ``align``, ``sum``, ``finish`` for 3 stages; ``align``,
    ``sum``, ``norm`` (:func:`fp_add_normalise`), ``round`` (:func:`fp_add_round`) for 4;
    latency ``stages`` cycles, one item per cycle), carrying the input payload along: the way a
    pipeline puts an ``fp_add`` between registers (the whole operator is ~19 ns fp17 / ~27 ns
    fp32 on ECP5, each phase under 10 ns but fp32's finish, 10.7 ns, whose halves take 5.5 ns
    each: fp32 pipelines use 4 stages; scripts/fp_timing.py).

    Parameters: ``i_shape``, ``o_shape`` (payload shapes); ``ebits``, ``mbits`` (the format);
    ``count`` (additions per item); ``operands(m, payload) -> [(a, b), ...]`` (``count``
    pairs, combinational in the input payload); ``finish(m, kept, sums) -> output payload``
    (combinational: what was kept of the input payload and the ``count`` sums, ``1 + ebits +
    mbits``-bit Values, in ``operands``' order); ``keep`` and ``keep_shape`` (optional:
    ``keep(m, payload)`` the part of the input payload, of shape ``keep_shape``, that travels
    along to ``finish``; by default the whole payload); ``stages`` (3, default, or 4: the
    finish phase split in its normalisation and its rounding).

    Ports: ``i`` In(stream of ``i_shape``); ``o`` Out(stream of ``o_shape``).
    """

    def __init__(self, i_shape, o_shape, ebits: int, mbits: int, count: int, operands, finish,
                 keep=None, keep_shape=None, stages: int = 3):
        if (keep is None) != (keep_shape is None):
            raise ValueError("keep and keep_shape go together")
        if stages not in (3, 4):
            raise ValueError(f"{stages} stages: 3 or 4")
        self.stages = stages
        self.ebits, self.mbits, self.count = ebits, mbits, count
        self._operands, self._finish = operands, finish
        self._i_shape = i_shape
        self._keep = keep if keep is not None else (lambda m, w: w)
        self._keep_shape = keep_shape if keep_shape is not None else i_shape
        super().__init__({"i": In(stream.Signature(i_shape)),
                          "o": Out(stream.Signature(o_shape))})

    def elaborate(self, platform):
        m = Module()
        eb, mb, n = self.ebits, self.mbits, self.count
        l_al = data.StructLayout({"w": self._keep_shape,
                                  "al": data.ArrayLayout(fp_add_aligned_layout(eb, mb), n)})
        l_sm = data.StructLayout({"w": self._keep_shape,
                                  "sm": data.ArrayLayout(fp_add_sum_layout(eb, mb), n)})

        def align(m, w):
            pairs = self._operands(m, w)
            if len(pairs) != n:
                raise ValueError(f"operands gave {len(pairs)} pairs, not {n}")
            out = Signal(l_al, name="al")
            m.d.comb += out.w.eq(self._keep(m, w))
            m.d.comb += [out.al[k].eq(fp_add_align(m, a, b, eb, mb, name=f"add{k}"))
                         for k, (a, b) in enumerate(pairs)]
            return out

        def add(m, w):
            out = Signal(l_sm, name="sm")
            m.d.comb += out.w.eq(w.w)
            m.d.comb += [out.sm[k].eq(fp_add_sum(m, w.al[k], eb, mb, name=f"add{k}"))
                         for k in range(n)]
            return out

        def finish(m, w):
            return self._finish(m, w.w, [fp_add_finish(m, w.sm[k], eb, mb, name=f"add{k}")
                                         for k in range(n)])

        l_nm = data.StructLayout({"w": self._keep_shape,
                                  "nm": data.ArrayLayout(fp_add_norm_layout(eb, mb), n)})

        def norm(m, w):
            out = Signal(l_nm, name="nm")
            m.d.comb += out.w.eq(w.w)
            m.d.comb += [out.nm[k].eq(fp_add_normalise(m, w.sm[k], eb, mb, name=f"add{k}"))
                         for k in range(n)]
            return out

        def round_(m, w):
            return self._finish(m, w.w, [fp_add_round(m, w.nm[k], eb, mb, name=f"add{k}")
                                         for k in range(n)])

        o_shape = self.o.payload.shape()
        if self.stages == 3:
            tail = {"finish": Map(l_sm, o_shape, finish)}
        else:
            tail = {"norm": Map(l_sm, l_nm, norm), "round": Map(l_nm, o_shape, round_)}
        last = chain(m, wiring.flipped(self.i), align=Map(self._i_shape, l_al, align),
                     sum=Map(l_al, l_sm, add), **tail)
        wiring.connect(m, last.o, wiring.flipped(self.o))
        return m


def fp_mul_product_layout(ebits: int, mbits: int) -> data.StructLayout:
    """:func:`fp_mul_product`'s result: ``sign`` (1, the product's), ``es`` (``ebits + 1``,
    the sum of the biased exponents), ``p`` (``2 * mbits + 2``, the exact product of the
    mantissas with their hidden ones), ``zero`` (1, an operand is zero), ``nan`` (1, an
    operand is a NaN) and ``pass_`` (``1 + ebits + mbits``, that NaN, ``a``'s before
    ``b``'s)."""
    return data.StructLayout({"sign": 1, "es": ebits + 1, "p": 2 * mbits + 2, "zero": 1,
                              "nan": 1, "pass_": 1 + ebits + mbits})


def fp_mul_product(m, a: ValueLike, b: ValueLike, ebits: int, mbits: int,
                   name: str = "fpmul") -> data.View:
    """First phase of :func:`fp_mul`: the sign, the sum of the exponents, the exact product of
    the ``mbits + 1``-bit mantissas, zero and NaN operands. Returns a
    :func:`fp_mul_product_layout` view (combinational; a caller may register it before
    :func:`fp_mul_finish`)."""
    a, b = Value.cast(a), Value.cast(b)
    sa, ea, ma = _fields(a, ebits, mbits)
    sb, eb, mb = _fields(b, ebits, mbits)
    nan_a, nan_b = fp_is_nan(a, ebits, mbits), fp_is_nan(b, ebits, mbits)
    out = Signal(fp_mul_product_layout(ebits, mbits), name=f"{name}_pr")
    m.d.comb += [out.sign.eq(sa ^ sb), out.es.eq(ea + eb),
                 out.p.eq(Cat(ma, Const(1, 1)) * Cat(mb, Const(1, 1))),
                 out.zero.eq(~(ea.any() | ma.any()) | ~(eb.any() | mb.any())),
                 out.nan.eq(nan_a | nan_b), out.pass_.eq(Mux(nan_a, a, b))]
    return out


def fp_mul_finish(m, x, ebits: int, mbits: int, name: str = "fpmul") -> Value:
    """Last phase of :func:`fp_mul`: normalise ``x`` (a :func:`fp_mul_product_layout` value)
    by one bit, round to nearest even, saturate to the largest finite value or flush to a
    signed zero, NaN override. Returns the result's ``1 + ebits + mbits`` bits
    (combinational)."""
    x = data.View(fp_mul_product_layout(ebits, mbits), Value.cast(x))
    bias = (1 << (ebits - 1)) - 1
    top = (1 << ebits) - 2
    sign, es, p = x.sign, x.es, x.p
    hi = p[2 * mbits + 1]
    pe = Signal(range(-bias, 2 * top + 2), name=f"{name}_pe")
    m.d.comb += pe.eq(es - bias)
    f = Mux(hi, p[:2 * mbits + 1], Cat(Const(0, 1), p[:2 * mbits]))     # 1.f, f of 2*mbits+1 bits
    qv = _round_even(Cat(f[mbits + 1:], Const(1, 1)), f[mbits], f[:mbits].any())
    over = qv[mbits + 1]
    # the exponent for both outcomes of the rounding, chosen by its carry (off the rounding
    # adder's path)
    pe1 = Signal(range(-bias, 2 * top + 3), name=f"{name}_pe1")
    pe1c = Signal(range(-bias, 2 * top + 3), name=f"{name}_pe1c")
    m.d.comb += [pe1.eq(pe + hi), pe1c.eq(pe + hi + 1)]
    sat = (hi & (pe >= top)) | Mux(over, pe1c > top, pe1 > top)
    res = Mux(sat, fp_max_finite(sign, ebits, mbits),
              Cat(qv[:mbits], Mux(over, pe1c[:ebits], pe1[:ebits]), sign))
    flush = x.zero | (es < bias) | Mux(over, pe1c <= 0, pe1 <= 0)
    res = Mux(es >= (1 << ebits) - 1 + bias, fp_max_finite(sign, ebits, mbits), res)
    res = Mux(flush, Cat(Const(0, ebits + mbits), sign), res)
    return Mux(x.nan, x.pass_, res)


def fp_mul(m, a: ValueLike, b: ValueLike, ebits: int, mbits: int, name: str = "fpmul") -> Value:
    """``a * b`` (module docstring): :func:`fp_mul_product` (exponent sum, exact product of
    the mantissas), :func:`fp_mul_finish` (normalised by one bit, rounded to nearest even,
    saturated or flushed, NaN override), combinational; a pipeline registers between the
    phases instead."""
    return fp_mul_finish(m, fp_mul_product(m, a, b, ebits, mbits, name), ebits, mbits, name)


def fp_widen(m, x: ValueLike, ebits_in: int, ebits_out: int, mbits: int,
             name: str = "fpwiden") -> Value:
    """``x`` of exponent width ``ebits_in`` in the wider ``ebits_out`` (same mantissa): exact,
    denormals normalised, infinity to the largest finite value, NaN sign and payload kept."""
    x = Value.cast(x)
    s, e, mant = _fields(x, ebits_in, mbits)
    shift = (1 << (ebits_out - 1)) - (1 << (ebits_in - 1))       # bias difference
    z = _leading_zeros(m, mant, f"{name}_lz")
    den = Cat((mant << (z + 1))[:mbits], (shift - z)[:ebits_out], s)
    norm = Cat(mant, (e + shift)[:ebits_out], s)
    inf_nan = e.all()
    special = Mux(mant.any(), Cat(mant, Const((1 << ebits_out) - 1, ebits_out), s),
                  fp_max_finite(s, ebits_out, mbits))
    res = Mux(e.any(), norm, Mux(mant.any(), den, Cat(Const(0, ebits_out + mbits), s)))
    return Mux(inf_nan, special, res)


def fp_narrow(m, x: ValueLike, ebits_in: int, ebits_out: int, mbits: int,
              name: str = "fpnarrow") -> Value:
    """``x`` of exponent width ``ebits_in`` in the narrower ``ebits_out`` (same mantissa):
    nearest, ties to even, denormal results where the value is below the smallest normal,
    a signed zero below half the smallest denormal, the largest finite value above the range,
    NaN sign and payload kept."""
    x = Value.cast(x)
    s, e, mant = _fields(x, ebits_in, mbits)
    shift = (1 << (ebits_in - 1)) - (1 << (ebits_out - 1))       # bias difference
    top_out = (1 << ebits_out) - 2
    # normal output exponents 1..top_out: input exponents shift+1 .. shift+top_out
    n = Signal(range(mbits + 3), name=f"{name}_sh")              # denormal right shift 1..mbits+1
    m.d.comb += n.eq(Mux(e >= shift - mbits, shift + 1 - e, mbits + 2))
    full = Cat(mant, Const(1, 1))                                # mbits + 1 bits
    wide = Cat(Const(0, mbits + 2), full) >> n                   # value with mbits+2 fraction bits
    q = _round_even(wide[mbits + 2:], wide[mbits + 1], wide[:mbits + 1].any())
    den = Cat(q[:mbits + 1], Const(0, ebits_out - 1), s)         # q may carry into exponent 1
    norm = Cat(mant, (e - shift)[:ebits_out], s)
    res = Mux(e > shift, norm, den)
    res = Mux(e > shift + top_out, fp_max_finite(s, ebits_out, mbits), res)
    res = Mux(e < shift - mbits, Cat(Const(0, ebits_out + mbits), s), res)
    nan = fp_is_nan(x, ebits_in, mbits)
    return Mux(nan, Cat(mant, Const((1 << ebits_out) - 1, ebits_out), s), res)


def fp_extend(m, x: ValueLike, ebits_in: int, mbits_in: int, ebits_out: int, mbits_out: int,
              name: str = "fpext") -> Value:
    """``x`` of a format without denormals (fp17) in a wider one (fp32: NVIDIA's
    fp17_to_fp32): exact; a signed zero stays one; exponent + bias difference, mantissa shifted
    up; the (unused) infinity pattern gives the largest finite value; a NaN keeps its sign and
    its payload in the low mantissa bits."""
    x = Value.cast(x)
    s, e, mant = _fields(x, ebits_in, mbits_in)
    shift = (1 << (ebits_out - 1)) - (1 << (ebits_in - 1))
    zero = ~(e.any() | mant.any())
    norm = Cat(Const(0, mbits_out - mbits_in), mant, (e + shift)[:ebits_out], s)
    nan = Cat(mant, Const(0, mbits_out - mbits_in), Const((1 << ebits_out) - 1, ebits_out), s)
    res = Mux(zero, Cat(Const(0, ebits_out + mbits_out), s), norm)
    return Mux(e.all(), Mux(mant.any(), nan, fp_max_finite(s, ebits_out, mbits_out)), res)


def fp_shorten(m, x: ValueLike, ebits_in: int, mbits_in: int, ebits_out: int, mbits_out: int,
               name: str = "fpshort") -> Value:
    """``x`` (fp32) in a format of fewer exponent and mantissa bits and no denormals (fp17:
    NVIDIA's fp32_to_fp17): nearest with ties to even; overflow (also by rounding) gives the
    largest finite value; below the smallest normal value a signed zero, except values that
    round (on the grid of the absent denormals) up to exactly the smallest normal; a NaN keeps
    its sign and its low ``mbits_out`` mantissa bits."""
    x = Value.cast(x)
    s, e, mant = _fields(x, ebits_in, mbits_in)
    shift = (1 << (ebits_in - 1)) - (1 << (ebits_out - 1))       # exponent bias difference
    drop = mbits_in - mbits_out
    top_out = (1 << ebits_out) - 2
    full = Cat(mant, Const(1, 1))                                 # mbits_in + 1 bits
    # normal: drop ``drop`` bits, round; a carry out of the mantissa bumps the exponent
    q = _round_even(full[drop:], full[drop - 1], full[:drop - 1].any())
    eo = Signal(ebits_in + 1, name=f"{name}_eo")
    m.d.comb += eo.eq(e - shift + q[mbits_out + 1])
    mo = Mux(q[mbits_out + 1], q[1:mbits_out + 1], q[:mbits_out])
    norm = Mux(eo > top_out, fp_max_finite(s, ebits_out, mbits_out),
               Cat(mo, eo[:ebits_out], s))
    # below the smallest normal (input exponents shift - mbits_out .. shift): rounding on the
    # denormal grid, kept only when it reaches the smallest normal value
    n = Signal(range(mbits_out + 2), name=f"{name}_dsh")          # 1 .. mbits_out + 1
    m.d.comb += n.eq(Mux(e >= shift - mbits_out, shift + 1 - e, mbits_out + 1))
    wide = Cat(Const(0, mbits_out + 1), full) >> n               # fraction bits below ``drop``
    dq = _round_even(wide[drop + mbits_out + 1:], wide[drop + mbits_out],
                     wide[:drop + mbits_out].any())
    tiny = Mux(dq[mbits_out], Cat(Const(0, mbits_out), Const(1, ebits_out), s),
               Cat(Const(0, ebits_out + mbits_out), s))
    res = Mux(e > shift, norm, Mux(e >= shift - mbits_out, tiny,
                                   Cat(Const(0, ebits_out + mbits_out), s)))
    res = Mux(e > shift + top_out, fp_max_finite(s, ebits_out, mbits_out), res)
    nan = fp_is_nan(x, ebits_in, mbits_in)
    return Mux(nan, Cat(mant[:mbits_out], Const((1 << ebits_out) - 1, ebits_out), s), res)


def fp_of_fraction(m, f: ValueLike, ebits: int, mbits: int, name: str = "fpfrac") -> Value:
    """An unsigned fraction ``f / 2**len(f)`` as a positive float of ``ebits``/``mbits`` bits
    (NVIDIA's uint16_to_fp17 for CDP's 16-bit LUT fraction, its 35-bit twin in SDP):
    normalised, rounded to nearest even; +0 for 0 and for values below the smallest normal
    (exact there when ``len(f) - 2**(ebits-1) + 2`` bits or fewer are below it)."""
    f = Value.cast(f)
    bits = len(f)
    bias = (1 << (ebits - 1)) - 1
    z = _leading_zeros(m, f, f"{name}_lz")
    norm = Signal(bits, name=f"{name}_n")                        # leading one at bits - 1
    m.d.comb += norm.eq(f << z)
    if bits - 1 > mbits:
        q = _round_even(norm[bits - 1 - mbits:], norm[bits - 2 - mbits],
                        norm[:bits - 2 - mbits].any() if bits - 2 - mbits > 0 else Const(0, 1))
    else:
        q = Cat(Const(0, mbits + 1 - bits), norm, Const(0, 1))
    carry = q[mbits + 1]
    e = Signal(range(-bits - 1, bias + 2), name=f"{name}_e")
    m.d.comb += e.eq(bias - 1 - z + carry)
    res = Cat(Mux(carry, q[1:mbits + 1], q[:mbits]), e[:ebits], Const(0, 1))
    return Mux((z == bits) | (e < 1), 0, res)


# ---- nv_full's SDP in FP16: fp16 <-> fp32, fp16 -> int16, MAX / MIN --------------------------
# (NVIDIA's cmod/hls Fp16ToFp32, Fp32ToFp16, Fp16ToInt16 and FpCmp as the bit-exact model
# verif/model/fp.py states them: ``fp16_to_fp32``, ``fp32_to_fp16``, ``fp16_to_int16``,
# ``fp_pick``; checked against it by tests/hdl/test_sdp_unit_fp16.py)

FLT_MAX_BITS = 0x7F7FFFFF           #: the largest finite fp32 magnitude


def fp16_to_fp32(m, x: ValueLike, name: str = "f16to32") -> Value:
    """fp32 pattern of the fp16 pattern ``x``: exact (fp16 denormals normalised), infinity to
    +-FLT_MAX, a NaN keeps its sign and its 10-bit payload in the low mantissa bits (not
    shifted up). Returns 32 bits (combinational)."""
    x = Value.cast(x)
    s, e, mant = x[15], x[10:15], x[:10]
    z = _leading_zeros(m, mant, f"{name}_lz")               # 0..9 for a denormal
    den_e = Signal(8, name=f"{name}_de")
    m.d.comb += den_e.eq(112 - z)
    den = Cat(Const(0, 13), (mant << (z + 1))[:10], den_e, s)
    norm = Cat(Const(0, 13), mant, (e + 112)[:8], s)
    special = Mux(mant.any(), Cat(mant, Const(0, 13), Const(0xFF, 8), s),
                  Cat(Const(FLT_MAX_BITS, 31), s))
    res = Mux(e.any(), norm, Mux(mant.any(), den, Cat(Const(0, 31), s)))
    return Mux(e.all(), special, res)


def fp32_to_fp16(m, x: ValueLike, name: str = "f32to16") -> Value:
    """fp16 pattern of the fp32 pattern ``x``: nearest with ties to even, into fp16's
    denormals where needed (a signed zero below half the smallest one); +-65504 (0x7BFF) from
    65520 up and for infinity (never an infinity); fp32 denormals give a signed zero; a NaN
    gives (sign, 31, its low 10 mantissa bits), the infinity pattern when those are 0.
    Returns 16 bits (combinational)."""
    x = Value.cast(x)
    s, e, mant = x[31], x[23:31], x[:23]
    full = Cat(mant, Const(1, 1))                               # 24 bits
    q = _round_even(full[13:], full[12], full[:12].any())       # 11 bits + carry
    en = Signal(9, name=f"{name}_en")                           # 1..31 in the normal range
    m.d.comb += en.eq(e - 112 + q[11])
    max16 = Cat(Const(0x3FF, 10), Const(30, 5), s)
    normal = Mux(en >= 31, max16, Cat(q[:10], en[:5], s))
    # denormal results (input exponents 102..112): value / 2**-24 = full >> (126 - e),
    # rounded; ``wide`` holds full << 10 >> (126 - e - 14): integer part from bit 24
    n = Signal(4, name=f"{name}_dsh")                           # 0..10
    m.d.comb += n.eq(Mux(e >= 102, 112 - e, 10))
    wide = Signal(34, name=f"{name}_dw")
    m.d.comb += wide.eq(Cat(Const(0, 10), full) >> n)
    qd = _round_even(wide[24:], wide[23], wide[:23].any())      # up to 0x400 (smallest normal)
    den = Cat(qd[:11], Const(0, 4), s)
    res = Mux(e >= 113, normal, Mux(e >= 102, den, Cat(Const(0, 15), s)))
    res = Mux(e >= 143, max16, res)
    return Mux(fp_is_nan(x, 8, 23), Cat(mant[:10], Const(31, 5), s), res)


def fp16_to_int16(m, x: ValueLike, name: str = "f16toi16") -> Value:
    """int16 of the fp16 pattern ``x`` as NVIDIA's Fp16ToInt16: ``(1024 + mantissa) *
    2**(exponent - 25)`` (a hidden one even for exponent 0, so denormals read as normals of
    exponent 1 less), rounded half away from zero, saturated to -32768..32767 (infinity
    too); a NaN gives -32768. Returns a signed(16) Value (combinational)."""
    x = Value.cast(x)
    s, e, mant = x[15], x[10:15], x[:10]
    full = Cat(mant, Const(1, 1))                               # 11 bits
    big = e >= 25
    left = Signal(17, name=f"{name}_l")                         # exponent 25..31: << 0..6
    m.d.comb += left.eq(full << (e - 25)[:3])
    # exponent < 25: shift right by 25 - e (1..25): floor((full >> (sh - 1)) + 1) / 2)
    sh1 = Signal(5, name=f"{name}_sh")                          # sh - 1 = 24 - e
    m.d.comb += sh1.eq(Mux(e >= 13, 24 - e, 11))
    right = ((full >> sh1) + 1)[1:]
    mag = Signal(17, name=f"{name}_mag")
    m.d.comb += mag.eq(Mux(big, left, right))
    pos = Mux(mag > 32767, 32767, mag)
    neg = Mux(mag > 32768, 32768, mag)
    res = Mux(s, -neg, pos)
    return Mux(fp_is_nan(x, 5, 10), Const(0x8000, 16), res[:16]).as_signed()


def fp_pick(m, a: ValueLike, b: ValueLike, ebits: int, mbits: int, take_max: ValueLike,
            name: str = "fppick") -> Value:
    """MAX (``take_max`` 1) or MIN (0) of two patterns as NVIDIA's FpCmp picks them: by sign
    and the magnitude of the raw bits (+0 above -0; no other reading of the value), one input
    passed unchanged; a NaN wins, ``a``'s before ``b``'s. Returns ``1 + ebits + mbits`` bits
    (combinational)."""
    a, b = Value.cast(a), Value.cast(b)
    top = ebits + mbits
    sa, sb = a[top], b[top]
    gt = Signal(name=f"{name}_gt")
    m.d.comb += gt.eq(a[:top] > b[:top])
    take_a_max = Mux(sa == sb, Mux(sa, ~gt, gt), ~sa)
    take_a_min = Mux(sa == sb, Mux(sa, gt, ~gt), sa)
    res = Mux(Mux(take_max, take_a_max, take_a_min), a, b)
    res = Mux(fp_is_nan(b, ebits, mbits), b, res)
    return Mux(fp_is_nan(a, ebits, mbits), a, res)


__all__ += ["FLT_MAX_BITS", "fp16_to_fp32", "fp32_to_fp16", "fp16_to_int16", "fp_pick"]


def _lz_tree(v: Value):
    """(all zero, leading zeros) of ``v`` as a balanced tree (depth log2(len(v)))."""
    n = len(v)
    if n == 1:
        return ~v[0], ~v[0]
    lo_len = n // 2
    zh, ch = _lz_tree(v[lo_len:])
    zl, cl = _lz_tree(v[:lo_len])
    return zh & zl, Mux(zh, (n - lo_len) + cl, ch)


def fp_leading_zeros(m, value: ValueLike, name: str = "lzc") -> Signal:
    """Leading zeros of unsigned ``value`` in its width (the width for 0), counted by a tree
    of ``log2(width)`` levels (a priority chain over a wide value is long: 35 bits took an
    :func:`fp_of_fraction` to 60 MHz on ECP5). Returns a Signal of ``range(width + 1)``."""
    value = Value.cast(value)
    z = Signal(range(len(value) + 1), name=name)
    m.d.comb += z.eq(_lz_tree(value)[1])
    return z


def fp_of_fraction_round(m, norm: ValueLike, z: ValueLike, ebits: int, mbits: int,
                         name: str = "fpfrac") -> Value:
    """Last phase of :func:`fp_of_fraction` for pipelines that register between its phases:
    ``norm`` = ``f << z`` (``f``'s width; its leading one on top) and ``z`` = the leading
    zeros of ``f`` (:func:`fp_leading_zeros`, ``len(f)`` for 0), both registered; rounds to
    nearest even and builds the float as :func:`fp_of_fraction` does (the same result)."""
    norm, z = Value.cast(norm), Value.cast(z)
    bits = len(norm)
    bias = (1 << (ebits - 1)) - 1
    if bits - 1 > mbits:
        q = _round_even(norm[bits - 1 - mbits:], norm[bits - 2 - mbits],
                        norm[:bits - 2 - mbits].any() if bits - 2 - mbits > 0 else Const(0, 1))
    else:
        q = Cat(Const(0, mbits + 1 - bits), norm, Const(0, 1))
    carry = q[mbits + 1]
    e = Signal(range(-bits - 1, bias + 2), name=f"{name}_e")
    m.d.comb += e.eq(bias - 1 - z + carry)
    res = Cat(Mux(carry, q[1:mbits + 1], q[:mbits]), e[:ebits], Const(0, 1))
    return Mux((z == bits) | (e < 1), 0, res)


__all__ += ["fp_leading_zeros", "fp_of_fraction_round"]
