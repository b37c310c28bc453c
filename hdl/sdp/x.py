"""SDP X1 (BS) / X2 (BN) sub-unit: ALU -> multiplier -> truncate -> ReLU on 32-bit elements
(v1_ias_unit_description.rst "SDP", "Function Description": "Block X1/X2 ... Bias addition,
BatchNorm, PReLU, ReLU"; v1_ias_programming_guide.rst "SDP programming"; v1_ias_precision.rst
"Shifter", "Truncate").

Per element ``x`` (signed 32 bits) with the 16-bit signed operands ``alu_op`` and ``mul_op``
(from the register D_DP_<X>_ALU/MUL_SRC_VALUE or, per channel / per element, from memory):

* ALU (skipped when ``alu_bypass``): operand ``op = saturate32(alu_op << alu_shift)``
  (:func:`hdl.lib.fixed.shift_left_sat`, 6-bit ALU_SHIFT_VALUE); ``a = max(x, op)`` (MAX),
  ``min(x, op)`` (MIN), else ``x + op`` (SUM; every other ALU_ALGO code, EQL included, sums in
  the X sub-units), on 33 bits. Bypassed: ``a = x``.
* multiplier (skipped when ``mul_bypass``): ``p = a * mul_op`` exact on 49 bits (33 x 16).
  Bypassed: ``p = a`` sign-extended to 49 bits.
* truncate: ``t = saturate32(round(p / 2**mul_shift))`` with ``mul_shift`` = MUL_SHIFT_VALUE[5:0],
  rounding half away from zero (:func:`hdl.lib.fixed.truncate`); the shift applies even when the
  multiplier is bypassed.
* PReLU (``mul_prelu`` with the multiplier on): ``y = a[31:0]`` when ``a >= 0`` (no truncation),
  else ``t``.
* ReLU (skipped when ``relu_bypass``): ``max(y, 0)``.
* ``bypass`` (D_DP_<X>_CFG.<X>_BYPASS): the element passes unchanged.

Facts from NVIDIA's nv_small RTL (NV_NVDLA_SDP_HLS_X_int_alu.v / _mul.v / _trt.v / _relu.v),
recorded with citations in the bit-exact model's docstring (``verif/model/sdp.py``
``x_subunit``): the 33-bit ALU, the 49-bit product, the truncation after a bypassed multiplier,
PReLU passing the low 32 bits, ALU algorithms other than MAX/MIN summing.

Six pipeline stages (:class:`hdl.lib.stream.Map`): ALU operand shifter, ALU, multiplier partial
products (:func:`hdl.lib.fixed.partial_products`), their sum, rounding bias (the truncation's
adder, :func:`hdl.lib.fixed.round_bias`), shift/saturate/PReLU/ReLU; latency 6 cycles, one item
(``lanes`` elements) per cycle, valid/ready back-pressure.

FP16 layers (nv_full; built with ``fp``): their own stages (:func:`hdl.sdp.fp16.x_stages`: fp32
ALU, multiplier, PReLU and ReLU on fp32 patterns with fp16 operands) between the same ports,
chosen per layer.
"""
from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.lib.fixed import (partial_products, partial_products_layout, round_bias, round_bias_shape,
                           round_shift, saturate, shift_left_sat, sum_partial_products)
from hdl.lib.stream import Map
from hdl.sdp.fp16 import route_in, route_out, x_stages

__all__ = ["X_DATA_BITS", "X_OP_BITS", "ALU_MAX", "ALU_MIN", "ALU_SUM", "ALU_EQL",
           "x_cfg_layout", "operand_layout", "x_payload_layout", "XSubUnit", "array_signal"]

X_DATA_BITS = 32        # element width inside SDP (int8 input sign-extended; CACC output is 32)
X_OP_BITS = 16          # ALU / MUL operand width (D_DP_<X>_ALU/MUL_SRC_VALUE, memory operands)
_ALU_BITS = 33          # ALU result (NV_NVDLA_SDP_HLS_X_int_alu.v)
_MUL_BITS = 49          # 33 x 16-bit product (NV_NVDLA_SDP_HLS_X_int_mul.v)
ALU_MAX, ALU_MIN, ALU_SUM, ALU_EQL = 0, 1, 2, 3     # D_DP_<X>_CFG.<X>_ALU_ALGO codes


def x_cfg_layout() -> data.StructLayout:
    """Configuration of one X sub-unit (held stable for a layer), the D_DP_<X>_CFG,
    D_DP_<X>_ALU_CFG and D_DP_<X>_MUL_CFG fields as plain bits:

    ``bypass``, ``alu_bypass``, ``alu_algo`` (2 bits, ALU_MAX/MIN/SUM/EQL), ``alu_shift``
    (6 bits), ``mul_bypass``, ``mul_prelu``, ``mul_shift`` (6 bits, MUL_SHIFT_VALUE[5:0]),
    ``relu_bypass``."""
    return data.StructLayout({
        "bypass": 1, "alu_bypass": 1, "alu_algo": 2, "alu_shift": 6,
        "mul_bypass": 1, "mul_prelu": 1, "mul_shift": 6, "relu_bypass": 1,
    })


def operand_layout() -> data.StructLayout:
    """The two operands of one element: ``alu`` and ``mul``, signed 16 bits each."""
    return data.StructLayout({"alu": signed(X_OP_BITS), "mul": signed(X_OP_BITS)})


def x_payload_layout(lanes: int) -> data.StructLayout:
    """Default payload of :class:`XSubUnit`: ``x`` ``lanes`` x signed 32 (the elements),
    ``op`` ``lanes`` x :func:`operand_layout` (their operands)."""
    return data.StructLayout({
        "x": data.ArrayLayout(signed(X_DATA_BITS), lanes),
        "op": data.ArrayLayout(operand_layout(), lanes),
    })


class XSubUnit(wiring.Component):
    """One SDP X sub-unit (BS or BN) on ``lanes`` elements per item (see module docstring).

    Args:
        lanes: elements per item (the sub-unit's throughput, cfg.sdp_bs/bn_throughput).
        layout: payload ``data.StructLayout``; it must have a field ``x``
            (``ArrayLayout(signed(32), lanes)``) and a field named ``op_field``
            (``ArrayLayout(operand_layout(), lanes)``); other fields ride along unchanged (e.g.
            the operands of the next sub-unit). Default :func:`x_payload_layout`.
        op_field: name of the operand field this sub-unit uses.
        fp: also build the FP16 stages (:func:`hdl.sdp.fp16.x_stages`, a configuration with
            runtime FP16): adds the ports ``fp16`` In(1) (the layer is FP16: ``x`` holds fp32
            patterns, the operands fp16 patterns, computed by those stages, latency
            :data:`hdl.sdp.fp16.X_LATENCY`) and ``nan_to_zero`` In(1) (NaN operands read as
            +0), both stable while items flow.

    Ports: ``i`` In(stream of ``layout``); ``o`` Out(stream of ``layout``): the same payload
    with ``x`` replaced by the results; ``cfg`` In(:func:`x_cfg_layout`), stable while items
    flow. Latency 6 cycles, one item per cycle.

    Raises:
        ValueError: ``lanes`` < 1, or ``layout`` lacks ``x``/``op_field`` of the right shapes.
    """

    def __init__(self, lanes: int, layout: data.StructLayout | None = None, op_field: str = "op",
                 *, fp: bool = False):
        if lanes < 1:
            raise ValueError(f"lanes must be >= 1, not {lanes}")
        layout = x_payload_layout(lanes) if layout is None else layout
        fields = dict(layout)
        want = {"x": data.ArrayLayout(signed(X_DATA_BITS), lanes),
                op_field: data.ArrayLayout(operand_layout(), lanes)}
        for name, shape in want.items():
            if name not in fields or fields[name].shape != shape:
                raise ValueError(f"layout field {name!r} must be {shape!r}")
        self.lanes = lanes
        self.layout = layout
        self.op_field = op_field
        self.fp = fp
        super().__init__({
            "i": In(stream.Signature(layout)),
            "o": Out(stream.Signature(layout)),
            "cfg": In(x_cfg_layout()),
            **({"fp16": In(1), "nan_to_zero": In(1)} if fp else {}),
        })

    def elaborate(self, platform):
        m = Module()
        n, cfg, layout, opf = self.lanes, self.cfg, self.layout, self.op_field
        # the ALU operand shifted (and saturated) in a stage of its own (issue 10: the shifter,
        # its saturation and the ALU's adder/comparator in one stage were SDP's critical path
        # on ECP5, 16.4 ns)
        s0 = data.StructLayout({"op": data.ArrayLayout(signed(X_DATA_BITS), n), "pay": layout})
        s1 = data.StructLayout({"a": data.ArrayLayout(signed(_ALU_BITS), n), "pay": layout})
        # the 33 x 16 product as partial products (one 18 x 18 DSP multiplier each), registered
        # before their sum (issue 10: the DSP multipliers and the 49-bit carry chain each get a
        # stage, as CDP's LUT product)
        s2p = data.StructLayout({
            "a": data.ArrayLayout(signed(_ALU_BITS), n),
            "pp": data.ArrayLayout(partial_products_layout(signed(_ALU_BITS), signed(X_OP_BITS)),
                                   n),
            "pay": layout})
        s2 = data.StructLayout({"a": data.ArrayLayout(signed(_ALU_BITS), n),
                                "p": data.ArrayLayout(signed(_MUL_BITS), n), "pay": layout})
        # the product plus its rounding bias (hdl.lib.fixed.round_bias)
        s3 = data.StructLayout({"a": data.ArrayLayout(signed(_ALU_BITS), n),
                                "t": data.ArrayLayout(round_bias_shape(signed(_MUL_BITS)), n),
                                "pay": layout})

        def alu_op(m, pay):
            ops = [shift_left_sat(pay[opf][k].alu, cfg.alu_shift, X_DATA_BITS) for k in range(n)]
            return {"op": array_signal(m, s0["op"].shape, ops, "alu_opnd"), "pay": pay}

        def alu(m, s):
            out = []
            pay = s.pay
            for k in range(n):
                x = pay.x[k]
                op = s.op[k]
                r = Mux(cfg.alu_algo == ALU_MAX, Mux(x > op, x, op),
                        Mux(cfg.alu_algo == ALU_MIN, Mux(x < op, x, op), x + op))
                out.append(Mux(cfg.alu_bypass, x, r))
            return {"a": array_signal(m, s1["a"].shape, out, "alu_res"), "pay": pay}

        def mul(m, s):
            pps = Signal(s2p["pp"].shape, name="prod_parts")
            for k in range(n):
                for i, v in enumerate(partial_products(s.a[k], s.pay[opf][k].mul)):
                    m.d.comb += pps[k][f"p{i}"].eq(v)
            return {"a": s.a, "pp": pps, "pay": s.pay}

        def mul_sum(m, s):
            prods = [Mux(cfg.mul_bypass, s.a[k], sum_partial_products(s.pp[k])) for k in range(n)]
            return {"a": s.a, "p": array_signal(m, s2["p"].shape, prods, "prod_res"), "pay": s.pay}

        def rnd(m, s):
            ts = [round_bias(s.p[k], cfg.mul_shift) for k in range(n)]
            return {"a": s.a, "t": array_signal(m, s3["t"].shape, ts, "rnd_res"), "pay": s.pay}

        def trt_relu(m, s):
            xs = []
            for k in range(n):
                t = saturate(round_shift(s.t[k], cfg.mul_shift, signed(_MUL_BITS)), X_DATA_BITS)
                prelu_pass = cfg.mul_prelu & ~cfg.mul_bypass & (s.a[k] >= 0)
                y = Mux(prelu_pass, s.a[k][:X_DATA_BITS].as_signed(), t)
                y = Mux(cfg.relu_bypass, y, Mux(y[-1], 0, y))
                xs.append(Mux(cfg.bypass, s.pay.x[k], y))
            fields = {name: s.pay[name] for name, _ in layout if name != "x"}
            return {"x": array_signal(m, layout["x"].shape, xs, "y_res"), **fields}

        m.submodules.alu_op = st_op = Map(layout, s0, alu_op)
        m.submodules.alu = st_alu = Map(s0, s1, alu)
        m.submodules.mul = st_mul = Map(s1, s2p, mul)
        m.submodules.mul_sum = st_sum = Map(s2p, s2, mul_sum)
        m.submodules.rnd = st_rnd = Map(s2, s3, rnd)
        m.submodules.trt = st_trt = Map(s3, layout, trt_relu)
        if self.fp:
            # FP16 layers: the FP16 stages (hdl.sdp.fp16.x_stages) beside these, chosen by a
            # register following the layer's precision (held for the layer, set well before
            # its first item arrives; it changes only between layers, with no item in flight)
            sel = Signal(name="fp_sel")
            m.d.sync += sel.eq(self.fp16)
            fi, fo = x_stages(m, n, layout, opf, cfg, self.nan_to_zero)
            route_in(m, self.i, sel, st_op.i, fi)
        else:
            wiring.connect(m, wiring.flipped(self.i), st_op.i)
        wiring.connect(m, st_op.o, st_alu.i)
        wiring.connect(m, st_alu.o, st_mul.i)
        wiring.connect(m, st_mul.o, st_sum.i)
        wiring.connect(m, st_sum.o, st_rnd.i)
        wiring.connect(m, st_rnd.o, st_trt.i)
        if self.fp:
            route_out(m, sel, st_trt.o, fo, self.o)
        else:
            wiring.connect(m, st_trt.o, wiring.flipped(self.o))
        return m


def array_signal(m: Module, layout: data.ArrayLayout, values, name: str) -> data.View:
    """A signal of ``layout`` whose element k is driven (combinationally, in ``m``) by
    ``values[k]`` (each truncated/extended to the element shape); for building array fields of
    :class:`hdl.lib.stream.Map` results. Raises ValueError on a length mismatch."""
    if len(values) != layout.length:
        raise ValueError(f"{len(values)} values for {layout.length} elements")
    sig = Signal(layout, name=name)
    m.d.comb += [sig[k].eq(v) for k, v in enumerate(values)]
    return sig
