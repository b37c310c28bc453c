"""Fixed-point primitives of NVDLA's integer datapaths, as pure Amaranth value functions.

v1_ias_precision.rst, "Precision" section, names the operations every unit uses:

* convertor ``y = saturation_round((x - offset) * scaling >> shifter)`` -> :func:`truncate`
  (:func:`shift_right_round` then :func:`saturate`) after the multiply;
* truncate ``y = saturate_round(x[msb:lsb])`` with ``msb = lsb + output_bits`` -> :func:`truncate`;
* shifter ``y = saturate(x << shifter)`` (SDP bs/bn operand shifters, "Convolution convertors" /
  "Batch normalization" tables) -> :func:`shift_left_sat`;
* rounding everywhere: "round half away from zero" -> :func:`shift_right_round`.

Every function takes Amaranth values (``Value`` or anything ``Value.cast`` accepts) with their
widths and signedness taken from their shapes, and a shift that is either a Python ``int``
(fixed) or an unsigned ``Value`` (variable, e.g. a register field). The output width is fixed by
the arguments and stated in each docstring; nothing is registered (callers put the result in a
pipeline stage, e.g. :class:`hdl.lib.stream.Map`).
"""
from __future__ import annotations

from amaranth.hdl import (Cat, Const, Mux, Shape, Signal, Value, ValueLike, signed as _signed,
                          unsigned as _unsigned)
from amaranth.lib import data

__all__ = ["sign_extend", "in_range", "saturate", "shift_right_round", "round_bias", "round_bias_shape",
           "round_shift", "partial_products", "partial_products_shapes", "partial_products_layout",
           "sum_partial_products",
           "PIECE_BITS", "truncate", "shift_left_sat", "floor_log2"]


def _shift_value(shift, name="shift") -> Value | int:
    if isinstance(shift, int):
        if shift < 0:
            raise ValueError(f"{name} must be >= 0, not {shift}")
        return shift
    shift = Value.cast(shift)
    if shift.shape().signed:
        raise TypeError(f"{name} must be an unsigned value, not {shift.shape()!r}")
    return shift


def _resize(value: Value, width: int) -> Value:
    """``value`` cut or extended (sign- or zero-, per its shape) to ``width`` bits (raw bits)."""
    if len(value) >= width:
        return value[:width]
    fill = value[-1].replicate(width - len(value)) if value.shape().signed else \
        Const(0, width - len(value))
    return Cat(value, fill)


def sign_extend(value: ValueLike, bits: int, width: int | None = None) -> Value:
    """The low ``bits`` bits of ``value`` read as a two's complement number.

    Widths: ``value`` any (at least ``bits`` bits); result ``signed(bits)``, or
    ``signed(width)`` (sign-extended) when ``width`` (>= ``bits``) is given. Used for register
    fields and memory elements that hold signed numbers in a wider word (e.g. an int8 element
    of an atom, format.rst "Feature Data Format").

    Raises:
        ValueError: if ``bits`` < 1, ``bits`` > the width of ``value``, or ``width`` < ``bits``.
    """
    value = Value.cast(value)
    if not 1 <= bits <= len(value):
        raise ValueError(f"bits must be in 1..{len(value)}, not {bits}")
    result = value[:bits].as_signed()
    if width is None:
        return result
    if width < bits:
        raise ValueError(f"width {width} is narrower than bits {bits}")
    return _resize(result, width).as_signed()


def in_range(value: ValueLike, bits: int, *, signed: bool | None = None) -> Value:
    """Whether ``value`` lies in the range of a ``bits``-bit integer (1 bit).

    Signed range [-2**(bits-1), 2**(bits-1) - 1], unsigned [0, 2**bits - 1]; ``signed`` as in
    :func:`saturate`. Built from the bits alone, never a comparison with a constant: a signed
    value is in a signed range when its bits from ``bits - 1`` up are all equal, an unsigned
    one when its bits from ``bits`` up are zero (a LUT tree on an FPGA; the comparisons were
    carry chains as long as the value, issue 10: SDP's critical path on ECP5 after the rounding
    shifter).

    Raises:
        ValueError: if ``bits`` < 1.
    """
    value = Value.cast(value)
    if bits < 1:
        raise ValueError(f"bits must be >= 1, not {bits}")
    in_signed = value.shape().signed
    out_signed = in_signed if signed is None else signed
    n = len(value)
    if in_signed and out_signed:             # all of value[bits-1:] equal the sign
        top = value[min(bits - 1, n):]
        return Const(1, 1) if len(top) <= 1 else (top.all() | ~top.any())
    # otherwise: no bit set at or above bit ``bits`` (``bits - 1`` for a signed range), and
    # for a signed value to an unsigned range, not negative (the sign bit is among those bits)
    high = value[min(bits - 1 if out_signed else bits, n):]
    if in_signed:
        high = Cat(high, value[-1])
    return ~high.any() if len(high) else Const(1, 1)


def saturate(value: ValueLike, bits: int, *, signed: bool | None = None) -> Value:
    """Clamp ``value`` to the range of an ``bits``-bit integer.

    Signed output: [-2**(bits-1), 2**(bits-1) - 1]; unsigned output: [0, 2**bits - 1]. Values
    inside the range are unchanged. (v1_ias_precision.rst: "Saturation is dependent on the
    number of output bits".) The range test is :func:`in_range` (bits, no comparisons); out of
    range, the sign picks the bound.

    Widths: ``value`` any shape (signed or unsigned); result ``signed(bits)`` or
    ``unsigned(bits)``.

    Args:
        value: the value to clamp.
        bits: output width (>= 1).
        signed: output signedness; ``None`` (default) keeps the signedness of ``value``.

    Raises:
        ValueError: if ``bits`` < 1.
    """
    value = Value.cast(value)
    ok = in_range(value, bits, signed=signed)      # raises for bits < 1
    in_signed = value.shape().signed
    out_signed = in_signed if signed is None else signed
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if out_signed else (0, (1 << bits) - 1)
    low = _resize(value, bits)                     # exact when in range
    bound = Mux(value[-1], lo, hi) if in_signed else Const(hi, bits)
    result = Mux(ok, low, Value.cast(bound)[:bits])
    return result.as_signed() if out_signed else result.as_unsigned()


def shift_right_round(value: ValueLike, shift: ValueLike | int) -> Value:
    """``value / 2**shift`` rounded half away from zero (v1_ias_precision.rst "Convertor" and
    "Truncate": "the rounding method used ... is round half away from zero").

    For a signed ``value``: the result is the integer nearest to ``value / 2**shift``; at an
    exact half it is the one farther from zero (2.5 -> 3, -2.5 -> -3, -2.25 -> -2). Equivalently
    (two's complement): the floor ``value >> shift`` plus the first dropped bit, except for a
    negative value whose dropped part is exactly one half. Observed fact: the SDP output
    converter (hdl/sdp/core.py) built on this function reproduces NVIDIA's golden outputs on
    the nv_small SDP traces. For an unsigned ``value`` it rounds half up.

    A shift of ``len(value)`` or more gives 0 (NVIDIA's rule; it differs from exact rounding
    only for the most negative value at a shift of exactly ``len(value)``, -0.5 -> 0).

    Widths: ``value`` ``signed(w)`` or ``unsigned(w)``; ``shift`` an ``int`` >= 0 or an
    unsigned ``Value`` of any width; result the shape of ``value`` (the rounded quotient
    always fits: for shift >= 1 its magnitude is at most 2**(w-2)).

    Raises:
        ValueError: a negative ``int`` shift. TypeError: a signed ``Value`` shift.
    """
    value = Value.cast(value)
    shift = _shift_value(shift)
    w = len(value)
    is_signed = value.shape().signed
    neg = value[-1] if is_signed else Const(0, 1)
    if isinstance(shift, int):
        if shift == 0:
            return value
        if shift >= w:
            return Const(0, value.shape())
        half = 1 << (shift - 1)
        total = (value + Const(half, _signed(w + 2)) - neg) if is_signed else \
            (value + Const(half, _unsigned(w + 1)))
        q = total >> shift
        return q[:w].as_signed() if is_signed else q[:w]
    return round_shift(round_bias(value, shift), shift, value.shape())


def round_bias(value: ValueLike, shift: ValueLike) -> Value:
    """First half of :func:`shift_right_round` with a variable ``shift``: ``value`` plus its
    rounding bias (2**(shift-1), one less for a negative value; 0 for shift 0). Register the
    result and finish with :func:`round_shift` in the next pipeline stage (the bias adder's
    carry chain and the barrel shifter in one cycle were critical paths, issue 10).

    Widths: ``value`` ``signed(w)`` (result signed, at least w + 2 bits) or ``unsigned(w)``
    (result unsigned, w + 2 bits); ``shift`` an unsigned ``Value``.
    Raises TypeError: a signed ``shift``.
    """
    value = Value.cast(value)
    shift = _shift_value(shift)
    w = len(value)
    # half = 2**(shift-1) (0 for shift 0 and beyond w + 1); a negative value's bias is one
    # less. A one-hot decode of shift, not (1 << shift) >> 1: the same bits, but the shifter
    # form made Amaranth's combinational-loop check walk ~1.5e9 edges in SDP (nv_large).
    half = Cat(*(shift == i + 1 for i in range(w + 1)))
    if value.shape().signed:
        return value + (half.as_signed() - (value[-1] & (shift != 0)))
    return value + half


def round_bias_shape(shape) -> Shape:
    """The shape of :func:`round_bias` of a value of ``shape`` (for the pipeline register
    between it and :func:`round_shift`): signed(w + 3) or unsigned(w + 2)."""
    shape = Shape.cast(shape)
    return _signed(shape.width + 3) if shape.signed else _unsigned(shape.width + 2)


def round_shift(total: ValueLike, shift: ValueLike, shape) -> Value:
    """Second half of :func:`shift_right_round`: ``total`` (:func:`round_bias` of a value of
    ``shape``) shifted right by ``shift``, as ``shape``; 0 when ``shift >= width(shape)``
    (:func:`shift_right_round`'s rule).
    Raises TypeError: a signed ``shift``."""
    total = Value.cast(total)
    shift = _shift_value(shift)
    shape = Shape.cast(shape)
    q = (total >> shift)[:shape.width]
    q = q.as_signed() if shape.signed else q
    return Mux(shift >= shape.width, Const(0, shape), q)


#: slice width of :func:`partial_products`: an unsigned 17-bit slice is an 18-bit signed
#: multiplier operand (ECP5 MULT18X18D; also within DSP48E2's 27 x 18)
PIECE_BITS = 17


def _pieces(shape: Shape, piece: int) -> list[tuple[int, int, bool]]:
    """(lsb, width, signed) of each slice of a multiplicand of ``shape``."""
    if piece < 1:
        raise ValueError(f"piece must be >= 1, not {piece}")
    w = shape.width
    return [(lo, min(piece, w - lo), shape.signed and lo + piece >= w) for lo in range(0, w, piece)]


def _product_shape(a: Shape, b: Shape) -> Shape:
    """Amaranth's shape of ``a * b``: the widths' sum, signed when either operand is (an
    unsigned(n) x signed(m) product lies within signed(n + m))."""
    return (_signed if a.signed or b.signed else _unsigned)(a.width + b.width)


def partial_products_shapes(a_shape, b_shape, piece: int = PIECE_BITS) -> list[Shape]:
    """Shapes of :func:`partial_products` of operands of ``a_shape`` and ``b_shape`` (for the
    pipeline register between it and :func:`sum_partial_products`). Raises ValueError: piece < 1."""
    a_shape, b_shape = Shape.cast(a_shape), Shape.cast(b_shape)
    return [_product_shape(_signed(n) if sg else _unsigned(n), b_shape)
            for _, n, sg in _pieces(a_shape, piece)]


def partial_products(a: ValueLike, b: ValueLike, piece: int = PIECE_BITS) -> list[Value]:
    """First half of ``a * b`` split for a pipeline register (issue 10: a multiplier wider than
    one DSP block followed by its adder in one stage): ``a`` cut into ``piece``-bit slices from
    the LSB, each times ``b``; the slices are unsigned except the most significant of a signed
    ``a``. Result: a list of values of :func:`partial_products_shapes`, least significant first;
    :func:`sum_partial_products` gives ``a * b`` exactly. Raises ValueError: piece < 1."""
    a, b = Value.cast(a), Value.cast(b)
    parts = []
    for lo, n, sg in _pieces(a.shape(), piece):
        sl = a[lo:lo + n]
        parts.append((sl.as_signed() if sg else sl) * b)
    return parts


def partial_products_layout(a_shape, b_shape, piece: int = PIECE_BITS) -> data.StructLayout:
    """:func:`partial_products_shapes` as a ``data.StructLayout`` with fields ``p0``, ``p1``, ...
    (least significant first): the pipeline register between :func:`partial_products` and
    :func:`sum_partial_products`. Raises ValueError: piece < 1."""
    return data.StructLayout({f"p{i}": sh for i, sh in
                              enumerate(partial_products_shapes(a_shape, b_shape, piece))})


def sum_partial_products(parts, piece: int = PIECE_BITS) -> Value:
    """Second half: ``sum(parts[i] << (i * piece))``, the exact product of
    :func:`partial_products` (signed when any part is). ``parts``: the list of values, or a view
    of :func:`partial_products_layout`."""
    if isinstance(parts, data.View):
        parts = [parts[name] for name in parts.shape().members]
    parts = [Value.cast(p) for p in parts]
    acc = parts[-1]
    for p in reversed(parts[:-1]):
        acc = (acc << piece) + p
    return acc


def truncate(value: ValueLike, shift: ValueLike | int, bits: int, *,
             signed: bool | None = None) -> Value:
    """``saturate(shift_right_round(value, shift), bits)``: v1_ias_precision.rst "Truncate"
    (``y = saturate_round(x[msb:lsb])``, ``lsb = shift``, ``msb = lsb + bits``) and the
    shift/round/saturate tail of the "Convertor".

    Rounding half away from zero as :func:`shift_right_round` (a shift >= ``len(value)``
    gives 0), then clamping to ``bits`` bits as :func:`saturate`.

    Widths: ``value`` ``signed(w)``/``unsigned(w)``; ``shift`` ``int`` or unsigned ``Value``;
    result ``signed(bits)`` or ``unsigned(bits)`` (``signed=None`` keeps the input's).
    """
    return saturate(shift_right_round(value, shift), bits, signed=signed)


def shift_left_sat(value: ValueLike, shift: ValueLike | int, bits: int, *,
                   signed: bool | None = None) -> Value:
    """``saturate(value << shift, bits)``: v1_ias_precision.rst "Shifter" (``y = saturate(x <<
    shifter)``; the SDP bs/bn operand shifters that align a bias with the data's scale).

    Exact: the shifted value is computed at full width before clamping. Any non-zero value
    shifted by ``bits`` or more saturates, so the shift amount is clamped to ``bits`` first
    (which bounds the internal width to ``len(value) + bits``).

    Widths: ``value`` ``signed(w)``/``unsigned(w)``; ``shift`` ``int`` >= 0 or unsigned
    ``Value``; result ``signed(bits)`` or ``unsigned(bits)`` (``signed=None`` keeps the input's).

    Raises:
        ValueError: negative ``int`` shift or ``bits`` < 1. TypeError: signed ``Value`` shift.
    """
    value = Value.cast(value)
    shift = _shift_value(shift)
    if bits < 1:
        raise ValueError(f"bits must be >= 1, not {bits}")
    if isinstance(shift, int):
        shifted = value << min(shift, bits)
    else:
        limit = Const(bits, range(bits + 1))
        amount = Mux(shift > bits, limit, shift)[:len(limit)]
        shifted = value << amount
    return saturate(shifted, bits, signed=signed)


def floor_log2(m, value: ValueLike, bits: int):
    """``floor(log2(value))`` of a positive unsigned ``bits``-bit value: a priority encoder of
    its highest set bit (0 for a value of 0 or 1), added to module ``m`` as ``comb`` logic.
    Returns a Signal of ``range(bits)``. Used by the LUTs' exponential index (SDP and CDP;
    v1_ias_lut-programming.rst "exponential": the index is the exponent of the offset)."""
    value = Value.cast(value)
    lg = Signal(range(bits), name="log2")
    for b in range(bits):                       # the highest set bit wins (last assignment)
        with m.If(value[b]):
            m.d.comb += lg.eq(b)
    return lg
