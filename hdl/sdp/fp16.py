"""SDP's FP16 layers (nv_full, SDP D_DATA_FORMAT.PROC_PRECISION = 2): the register stages the
core (:class:`hdl.sdp.core.SdpCore`) and the X / Y sub-units (:class:`hdl.sdp.x.XSubUnit`,
:class:`hdl.sdp.y.YSubUnit`) add beside their integer stages, built only on a configuration
with runtime FP16 (:func:`hdl.sdp.rdma.has_fp16`).

The reference is the bit-exact model, verif/model/sdp.py (``SdpCore.run``, ``x_subunit_fp``,
``_y_subunit_fp``, ``sdp_lut_fp``), matched on NVIDIA's nv_full RTL by 22 random fp16 SDP
programs and 13 EW programs; its facts come from NVIDIA's nvdlav1 C model (cmod/hls/sdp
sdp_x.cpp, sdp_y_cvt.cpp, sdp_y_core.cpp, sdp_y_idx.cpp, sdp_y_inp.cpp, sdp_c.cpp, the HLS
source of the FP16 RTL) and NV_NVDLA_SDP_cmux.v. The operators are :mod:`hdl.lib.fp`
(NVIDIA's: round to nearest even, no denormal or infinite results, a NaN operand passed
through, ``a``'s first; every one matches the model's, tests/hdl/test_sdp_unit_fp16.py). Per
element, on fp32 bit patterns:

1. input (:func:`input_stage`): an fp16 pattern from memory (MRDMA; the low 16 bits of the
   core's element) widened to fp32 (exact, infinity to +-FLT_MAX, a NaN's payload in the low
   bits), or CACC's fp32 pattern on the fly; a NaN becomes +0 with
   D_FEATURE_MODE_CFG.NAN_TO_ZERO (NV_NVDLA_SDP_cmux.v);
2. X1 (BS), X2 (BN) (:func:`x_stages`): 16-bit operands (register or memory) read as fp16 (a
   NaN one +0 with NAN_TO_ZERO) widened to fp32; ALU MAX / MIN (by sign and raw magnitude, a
   NaN wins, :func:`hdl.lib.fp.fp_pick`) or SUM (fp32 ``x + op``; every ALU_ALGO but MAX / MIN,
   EQL included, which the model refuses); MUL fp32 ``a * op``, PReLU passes an ``a`` whose sign
   bit is 0; ReLU passes a NaN or a value of sign 0, anything else becomes +0; the shift
   values are not used;
3. Y (EW) (:func:`y_stages`): operands from memory as X's, register operands the 32-bit
   EW_<K>_OPERAND as an fp32 pattern (not flushed); MUL then ALU as X's, EQL 0 for equal bit
   patterns, else 1; the converter registers (EW_<K>_CVT_*, EW_TRUNCATE) are not used; then
   the LUT (:func:`lut_stages`, module docstring of that function);
4. output (:func:`output_stages`): fp32 -> fp16 (nearest even, fp16 denormals, +-65504 from
   65520 up and for infinity, a NaN keeps its low 10 bits), then fp16 -> int16 when
   OUT_PRECISION = INT16 (half away from zero, saturated, NaN -32768); in compare mode the
   low 16 bits of Y's result (0 or 1, or what the LUT made of it) unconverted; CVT_OFFSET /
   SCALE / SHIFT are not used; D_PERF_OUT_SATURATION counts nothing in FP16 layers.

Every stage is a :class:`hdl.lib.stream.Map` register with at most one phase of an fp
operator on its path (fp32 adds in four phases, multiplies in two: hdl/lib/fp.py, each above
100 MHz on ECP5), one item of ``lanes`` elements per cycle. The integer and FP16 stages of a
sub-unit are two paths between the same ports (:func:`route_in`, :func:`route_out`), chosen by
a register following the layer's precision; the FP16 path's input payload is held at 0 while
it is idle (its registers stay still).
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, wiring

from hdl.lib.fp import (FpAddStages, fp16_to_fp32, fp16_to_int16, fp32_to_fp16,
                        fp_add_align, fp_add_aligned_layout, fp_add_norm_layout,
                        fp_add_normalise, fp_add_round, fp_add_sum, fp_add_sum_layout,
                        fp_extend, fp_is_nan, fp_leading_zeros, fp_mul_finish, fp_mul_product,
                        fp_mul_product_layout, fp_of_fraction_round, fp_pick, fp_shorten,
                        fp_widen)
from hdl.lib.stream import Map
from hdl.sdp import lut

__all__ = ["FP16", "FP17", "FP32", "fp_cfg_layout", "route_in", "route_out", "operand32",
           "input_stage", "x_stages", "y_stages", "lut_stages", "output_stages",
           "LUT_LATENCY", "X_LATENCY", "Y_LATENCY"]

FP16, FP17, FP32 = unsigned(16), unsigned(17), unsigned(32)     # bit patterns
SIGN32 = Const(1 << 31, 32)
FP17_ONE = 31 << 10                 # fp17 1.0
ALU_MAX, ALU_MIN, ALU_EQL = 0, 1, 3
X_LATENCY = 7                       #: stages of :func:`x_stages`
Y_LATENCY = 7                       #: stages of :func:`y_stages`
LUT_LATENCY = 17                    #: stages of :func:`lut_stages`


def fp_cfg_layout() -> data.StructLayout:
    """The FP16 controls of :class:`hdl.sdp.core.SdpCore` (a layer's constants): ``fp16`` (SDP
    D_DATA_FORMAT.PROC_PRECISION = FP16), ``in_fp32`` (the input is CACC's fp32 on the fly, not
    MRDMA's fp16), ``nan_to_zero`` (D_FEATURE_MODE_CFG.NAN_TO_ZERO), ``out_int16``
    (D_DATA_FORMAT.OUT_PRECISION = INT16)."""
    return data.StructLayout({"fp16": 1, "in_fp32": 1, "nan_to_zero": 1, "out_int16": 1})


def route_in(m: Module, src, sel, first, second) -> None:
    """Items of the stream ``src`` go to the stream ``first`` (the integer stages) while
    ``sel`` is 0, to ``second`` (the FP16 ones) while it is 1 (a layer constant, changed only
    while no item is in flight). ``second``'s payload is held at 0 while it is idle (its
    registers stay still); ``first``'s is ``src``'s (no gate on the integer stages' path)."""
    m.d.comb += [first.valid.eq(src.valid & ~sel), first.payload.eq(src.payload),
                 second.valid.eq(src.valid & sel), second.payload.eq(Mux(sel, src.payload, 0)),
                 src.ready.eq(Mux(sel, second.ready, first.ready))]


def route_out(m: Module, sel, first, second, dst, payloads=None) -> None:
    """The stream ``dst`` takes its items from ``first`` while ``sel`` is 0, from ``second``
    while it is 1 (see :func:`route_in`); ``payloads``: (first's, second's) payload values
    in the shape of ``dst``'s, instead of the streams' own."""
    pa, pb = payloads if payloads is not None else (first.payload, second.payload)
    for on, s in ((~sel, first), (sel, second)):
        m.d.comb += s.ready.eq(dst.ready & on)
    m.d.comb += [dst.valid.eq(Mux(sel, second.valid, first.valid)),
                 dst.payload.eq(Mux(sel, pb, pa))]


def _pipe(m: Module, stages: list) -> tuple:
    """Add ``stages`` ((name, component) pairs with ``i`` / ``o`` streams) to ``m``, each
    feeding the next; returns the first one's ``i`` and the last one's ``o``."""
    for k, (name, st) in enumerate(stages):
        m.submodules[name] = st
        if k:
            wiring.connect(m, stages[k - 1][1].o, st.i)
    return stages[0][1].i, stages[-1][1].o


def _arr(shape, n: int) -> data.ArrayLayout:
    return data.ArrayLayout(shape, n)


def _sig(m: Module, layout, values, name: str):
    """A signal of ``layout`` (an ArrayLayout) whose element k is ``values[k]``."""
    sig = Signal(layout, name=name)
    m.d.comb += [sig[k].eq(v) for k, v in enumerate(values)]
    return sig


def _struct(m: Module, layout: data.StructLayout, fields: dict, name: str):
    """A signal of ``layout`` whose fields are driven by ``fields`` (field name -> value)."""
    sig = Signal(layout, name=name)
    m.d.comb += [sig[f].eq(v) for f, v in fields.items()]
    return sig


def operand32(m: Module, op16, nan_to_zero, name: str) -> Value:
    """fp32 pattern of a 16-bit operand read as fp16, a NaN becoming +0 when ``nan_to_zero``
    (the model's ``x_subunit_fp`` ``op32``)."""
    op16 = Value.cast(op16)[:16]
    flushed = Signal(16, name=f"{name}_f")
    m.d.comb += flushed.eq(Mux(nan_to_zero & fp_is_nan(op16, 5, 10), 0, op16))
    return fp16_to_fp32(m, flushed, name=name)


def input_stage(lanes: int, layout: data.StructLayout, fc) -> Map:
    """One stage: the elements ``x`` of a ``layout`` payload (``lanes`` x signed 32) to fp32
    patterns (module docstring step 1): ``fc`` (:func:`fp_cfg_layout` view) ``in_fp32`` takes
    them as they are, else their low 16 bits as fp16; NaN -> +0 with ``nan_to_zero``. The
    other fields pass."""
    def fn(m, p):
        xs = []
        for k in range(lanes):
            x = Value.cast(p.x[k])
            h = x[:16]
            nan = Mux(fc.in_fp32, fp_is_nan(x, 8, 23), fp_is_nan(h, 5, 10))
            wide = Mux(fc.in_fp32, x, fp16_to_fp32(m, h, name=f"in{k}"))
            xs.append(Mux(fc.nan_to_zero & nan, 0, wide))
        return {"x": _sig(m, layout["x"].shape, xs, "fp_in"),
                **{f: p[f] for f, _ in layout if f != "x"}}
    return Map(layout, layout, fn)


def _picks(m: Module, a, b, algo, name: str) -> Value:
    """MAX (ALU_ALGO 0) or MIN (1) of fp32 patterns ``a``, ``b``."""
    return fp_pick(m, a, b, 8, 23, algo == ALU_MAX, name=name)


def x_stages(m: Module, lanes: int, layout: data.StructLayout, opf: str, cfg,
             nan_to_zero) -> tuple:
    """X1 / X2 in FP16 (module docstring step 2) on a ``layout`` payload (``x``: ``lanes``
    fp32 patterns in signed(32) elements; ``opf``: the operands, 16-bit fp16 patterns; other
    fields ride along), :data:`X_LATENCY` stages added to ``m``: operands to fp32, the ALU
    (four phases of the fp32 add, MAX / MIN beside its alignment), the multiplier's product,
    its finish with PReLU, ReLU and the sub-unit's bypass. ``cfg``: an
    :func:`hdl.sdp.x.x_cfg_layout` view. Returns the chain's ``(i, o)`` streams."""
    n = lanes
    ops = _arr(data.StructLayout({"alu": FP32, "mul": FP32}), n)
    s0 = data.StructLayout({"op": ops, "pay": layout})
    kept = data.StructLayout({"pay": layout, "pick": _arr(FP32, n), "mul": _arr(FP32, n)})
    s1 = data.StructLayout({"a": _arr(FP32, n), "mul": _arr(FP32, n), "pay": layout})
    s2 = data.StructLayout({"a": _arr(FP32, n), "pr": _arr(fp_mul_product_layout(8, 23), n),
                            "pay": layout})
    minmax = (cfg.alu_algo == ALU_MAX) | (cfg.alu_algo == ALU_MIN)

    def cvt(m, pay):
        op = Signal(ops, name="ops32")
        for k in range(n):
            m.d.comb += [op[k].alu.eq(operand32(m, pay[opf][k].alu, nan_to_zero, f"alu{k}")),
                         op[k].mul.eq(operand32(m, pay[opf][k].mul, nan_to_zero, f"mul{k}"))]
        return {"op": op, "pay": pay}

    def alu_operands(m, s):
        return [(s.pay.x[k], s.op[k].alu) for k in range(n)]

    def alu_keep(m, s):
        picks = [_picks(m, s.pay.x[k], s.op[k].alu, cfg.alu_algo, f"pick{k}") for k in range(n)]
        return _struct(m, kept, {
            "pay": s.pay, "pick": _sig(m, kept["pick"].shape, picks, "pick"),
            "mul": _sig(m, kept["mul"].shape, [s.op[k].mul for k in range(n)], "mulop")}, "kept")

    def alu_finish(m, s, sums):
        a = [Mux(cfg.alu_bypass, s.pay.x[k], Mux(minmax, s.pick[k], sums[k])) for k in range(n)]
        return {"a": _sig(m, s1["a"].shape, a, "alu_res"), "mul": s.mul, "pay": s.pay}

    def mul_product(m, s):
        prs = [fp_mul_product(m, s.a[k], s.mul[k], 8, 23, name=f"xm{k}") for k in range(n)]
        return {"a": s.a, "pr": _sig(m, s2["pr"].shape, prs, "prod"), "pay": s.pay}

    def mul_finish(m, s):
        # the choices after the product's finish (ECP5: 90 MHz with them in series): whether
        # ``a`` passes (MUL bypassed, or PReLU and a's sign 0) and whether ReLU keeps the
        # result (a NaN or sign 0: for the product, a NaN exactly when an operand is one, the
        # NaN passed, else signed as the product) come from the registers beside it
        xs = []
        for k in range(n):
            a, pr = Value.cast(s.a[k]), s.pr[k]
            prod = fp_mul_finish(m, pr, 8, 23, name=f"xm{k}")
            take_a = Signal(name=f"take_a{k}")
            keep = Signal(name=f"keep{k}")
            m.d.comb += [
                take_a.eq(cfg.mul_bypass | (cfg.mul_prelu & ~a[31])),
                keep.eq(cfg.relu_bypass | Mux(take_a, fp_is_nan(a, 8, 23) | ~a[31],
                                              pr.nan | ~Mux(pr.nan, pr.pass_[31], pr.sign))),
            ]
            y = Mux(keep, Mux(take_a, a, prod), 0)
            xs.append(Mux(cfg.bypass, s.pay.x[k], y))
        return {"x": _sig(m, layout["x"].shape, xs, "x_res"),
                **{f: s.pay[f] for f, _ in layout if f != "x"}}

    return _pipe(m, [
        ("f_cvt", Map(layout, s0, cvt)),
        ("f_alu", FpAddStages(s0, s1, 8, 23, n, alu_operands, alu_finish, keep=alu_keep,
                              keep_shape=kept, stages=4)),
        ("f_mul", Map(s1, s2, mul_product)),
        ("f_mul_fin", Map(s2, layout, mul_finish)),
    ])


def y_out_layout(lanes: int) -> data.StructLayout:
    """Payload after :func:`y_stages`: ``x`` (the Y input, for EW_BYPASS) and ``v`` (the
    ALU's result), ``lanes`` fp32 patterns each."""
    return data.StructLayout({"x": _arr(FP32, lanes), "v": _arr(FP32, lanes)})


def y_stages(m: Module, lanes: int, layout: data.StructLayout, opf: str, c,
             nan_to_zero) -> tuple:
    """Y's MUL and ALU in FP16 (module docstring step 3) on a ``layout`` payload (``x`` fp32
    patterns, ``opf`` the raw 16-bit memory operands), :data:`Y_LATENCY` stages added to
    ``m``: operands (memory: fp16 widened, NaN -> +0 with ``nan_to_zero``; register: the
    32-bit EW_<K>_OPERAND), the product, its finish with PReLU, then the ALU (four phases; MAX
    / MIN and EQL beside its alignment). ``c``: an :func:`hdl.sdp.y.y_cfg_layout` view.
    Returns the chain's ``(i, o)`` streams, ``o`` of :func:`y_out_layout`."""
    n = lanes
    a32 = _arr(FP32, n)
    s0 = data.StructLayout({"x": a32, "alu": a32, "mul": a32})
    s1 = data.StructLayout({"x": a32, "alu": a32, "pr": _arr(fp_mul_product_layout(8, 23), n)})
    s2 = data.StructLayout({"x": a32, "alu": a32, "y": a32})
    kept = data.StructLayout({"x": a32, "y": a32, "pick": a32, "neq": _arr(1, n)})
    out_l = y_out_layout(n)
    minmax = (c.alu_algo == ALU_MAX) | (c.alu_algo == ALU_MIN)

    def operand(m, raw, oc, name):
        return Mux(oc.mem, operand32(m, raw, nan_to_zero, name), oc.operand)

    def cvt(m, pay):
        return {"x": _sig(m, a32, [pay.x[k] for k in range(n)], "x32"),
                "alu": _sig(m, a32, [operand(m, pay[opf][k].alu, c.alu, f"alu{k}")
                                     for k in range(n)], "alu32"),
                "mul": _sig(m, a32, [operand(m, pay[opf][k].mul, c.mul, f"mul{k}")
                                     for k in range(n)], "mul32")}

    def mul_product(m, s):
        prs = [fp_mul_product(m, s.x[k], s.mul[k], 8, 23, name=f"ym{k}") for k in range(n)]
        return {"x": s.x, "alu": s.alu, "pr": _sig(m, s1["pr"].shape, prs, "prod")}

    def mul_finish(m, s):
        ys = []
        for k in range(n):
            x = Value.cast(s.x[k])
            prod = fp_mul_finish(m, s.pr[k], 8, 23, name=f"ym{k}")
            take_x = Signal(name=f"take_x{k}")
            m.d.comb += take_x.eq(c.mul_bypass | (c.mul_prelu & ~x[31]))
            ys.append(Mux(take_x, x, prod))
        return {"x": s.x, "alu": s.alu, "y": _sig(m, a32, ys, "mul_res")}

    def alu_operands(m, s):
        return [(s.y[k], s.alu[k]) for k in range(n)]

    def alu_keep(m, s):
        picks = [_picks(m, s.y[k], s.alu[k], c.alu_algo, f"pick{k}") for k in range(n)]
        return _struct(m, kept, {
            "x": s.x, "y": s.y, "pick": _sig(m, a32, picks, "pick"),
            "neq": _sig(m, kept["neq"].shape,
                        [Value.cast(s.y[k]) != Value.cast(s.alu[k]) for k in range(n)], "neq")},
            "kept")

    def alu_finish(m, s, sums):
        vs = [Mux(c.alu_bypass, s.y[k],
                  Mux(minmax, s.pick[k], Mux(c.alu_algo == ALU_EQL, s.neq[k], sums[k])))
              for k in range(n)]
        return {"x": s.x, "v": _sig(m, a32, vs, "alu_res")}

    return _pipe(m, [
        ("f_cvt", Map(layout, s0, cvt)),
        ("f_mul", Map(s0, s1, mul_product)),
        ("f_mul_fin", Map(s1, s2, mul_finish)),
        ("f_alu", FpAddStages(s2, out_l, 8, 23, n, alu_operands, alu_finish, keep=alu_keep,
                              keep_shape=kept, stages=4)),
    ])


def lut_out_layout(lanes: int) -> data.StructLayout:
    """Payload after :func:`lut_stages`: :func:`y_out_layout` plus ``stat`` (per lane the
    five one-hot statistics of :data:`hdl.sdp.lut.STAT_NAMES`, 0 when not counted)."""
    return data.StructLayout({"x": _arr(FP32, lanes), "v": _arr(FP32, lanes),
                              "stat": _arr(unsigned(5), lanes)})


def lut_stages(m: Module, lanes: int, p, c, ports, counted: int) -> tuple:
    """The LUT in FP16 (the model's ``sdp_lut_fp``; nvdlav1 cmod/hls/sdp/sdp_y_idx.cpp,
    sdp_y_inp.cpp, NV_NVDLA_SDP_CORE_Y_lut.v) on :func:`y_out_layout` payloads,
    :data:`LUT_LATENCY` stages added to ``m``: ``v`` passes through it unless EW_LUT_BYPASS.

    Table entries and the slope scales are fp16 patterns, START / END fp32 patterns, the slope
    shifts are not used. Per sample ``v``: ``d = v - START`` in fp32 for both tables, their
    index (:func:`hdl.sdp.lut.fp_table_index`, 35-bit fraction ``f``), the table choice and
    statistics as in INT (:func:`hdl.sdp.lut.select`), then for the chosen table with entries
    ``T0 = T[i]``, ``T1 = T[i + 1]`` (fp16 -> fp17, exact): a hit gives
    ``fp17_add(fp17_mul(a0, T0), fp17_mul(a1, T1))`` with ``a1`` = ``f`` and ``a0`` = ``1 - f``
    (1.0 for ``f`` = 0) in fp17 (:func:`hdl.lib.fp.fp_of_fraction`); an underflow / overflow
    ``fp17_add(T0, fp17_mul(fp32_to_fp17(v - ORIGIN), SCALE))`` with ORIGIN = ``START + BIAS``
    (fp32; BIAS the fp32 ``{0, LE_INDEX_OFFSET + 127, 0}`` for an exponential LE table, else +0)
    or END, SCALE the UFLOW / OFLOW scale in fp17; the result to fp32 (exact).

    Stages: ``fl_sub`` (4: v - START, both tables), ``fl_index`` (both tables' index and
    next address), ``fl_read`` (the entries of both tables, the choice, its origin, scale,
    fraction complement), ``fl_diff_align`` / ``_sum`` / ``_norm`` / ``_round`` (v - ORIGIN
    in four phases; beside them the entries to fp17, and the fractions to fp17 in three
    phases: leading zeros, shift, rounding), ``fl_short`` (fp32 -> fp17), ``fl_mul`` /
    ``fl_mul_fin`` (two fp17 products), ``fl_add`` (4: the fp17 sum, its fp32 and the
    bypass). The underflow origins and the fp17 scales are layer constants,
    registered here from ``p`` (a :func:`hdl.sdp.lut.params_layout` view, stable for the layer
    and set at least five cycles before its first sample reaches ``fl_read``).

    ``c``: :func:`hdl.sdp.y.y_cfg_layout` view (``lut_bypass``, ``bypass`` for the
    statistics); ``ports``: ``{"le" | "lo": [(addr0, addr1, data0, data1) per lane]}``, the
    table RAMs' combinational read ports (``addr1`` is ``addr0 + 1`` capped at the last entry,
    computed here); ``counted``: lanes whose statistics count (the others carry no channel).
    Returns the chain's ``(i, o)`` streams, ``o`` of :func:`lut_out_layout`."""
    n = lanes
    a32, a17, a16 = _arr(FP32, n), _arr(FP17, n), _arr(FP16, n)
    # ---- layer constants: underflow origins START + BIAS (four registered add phases) and
    # the four slope scales in fp17 ----
    off = p.le_index_offset
    bias = Signal(FP32, name="le_bias")         # registered: off the alignment's path
    m.d.sync += bias.eq(Mux(p.le_exp, Cat(Const(0, 23), (off + 127)[:8], Const(0, 1)), 0))
    uorg = {}
    for t, b in (("le", bias), ("lo", Const(0, 32))):
        al = Signal(fp_add_aligned_layout(8, 23), name=f"{t}_org_al")
        sm = Signal(fp_add_sum_layout(8, 23), name=f"{t}_org_sm")
        nm = Signal(fp_add_norm_layout(8, 23), name=f"{t}_org_nm")
        org = Signal(FP32, name=f"{t}_uorg")
        start = Value.cast(getattr(p, f"{t}_start"))
        m.d.sync += [al.eq(fp_add_align(m, start, b, 8, 23, name=f"{t}_org")),
                     sm.eq(fp_add_sum(m, al, 8, 23, name=f"{t}_org")),
                     nm.eq(fp_add_normalise(m, sm, 8, 23, name=f"{t}_org")),
                     org.eq(fp_add_round(m, nm, 8, 23, name=f"{t}_org"))]
        uorg[t] = org
    scale17 = {}
    for t in ("le", "lo"):
        for flow in ("uflow", "oflow"):
            sig = Signal(FP17, name=f"{t}_{flow}_scale17")
            m.d.sync += sig.eq(fp_widen(m, Value.cast(getattr(p, f"{t}_{flow}_scale")), 5, 6, 10,
                                        name=f"{t}_{flow}_w"))
            scale17[t, flow] = sig

    entries = {"le": lut.LE_ENTRIES, "lo": lut.LO_ENTRIES}
    io = lut_out_layout(n)
    sub_l = data.StructLayout({"x": a32, "v": a32, "dle": a32, "dlo": a32})
    idx_l = data.StructLayout({
        "x": a32, "v": a32,
        **{t: _arr(data.StructLayout({"ix": lut.index_layout(e), "a1": range(e)}), n)
           for t, e in entries.items()}})
    F = lut.FRAC_BITS
    rd_l = data.StructLayout({"x": a32, "v": a32, "hit": _arr(1, n), "t0": a16, "t1": a16,
                              "f": _arr(F, n), "fc": _arr(F, n), "fz": _arr(1, n),
                              "origin": a32, "scale": a17, "stat": _arr(unsigned(5), n)})
    # the fractions to fp17 in three phases beside the difference's four (fp_of_fraction on
    # 35 bits is ~16 ns on ECP5): leading zeros, the normalising shift, the rounding
    side = {"x": a32, "v": a32, "hit": _arr(1, n), "t0": a17, "t1": a17, "fz": _arr(1, n),
            "scale": a17, "stat": _arr(unsigned(5), n)}
    Z = range(F + 1)
    d1_l = data.StructLayout({**side, "f": _arr(F, n), "fc": _arr(F, n), "z1": _arr(Z, n),
                              "z0": _arr(Z, n), "al": _arr(fp_add_aligned_layout(8, 23), n)})
    d2_l = data.StructLayout({**side, "n1": _arr(F, n), "n0": _arr(F, n), "z1": _arr(Z, n),
                              "z0": _arr(Z, n), "sm": _arr(fp_add_sum_layout(8, 23), n)})
    dkeep = data.StructLayout({"x": a32, "v": a32, "hit": _arr(1, n), "t0": a17, "t1": a17,
                               "a0": a17, "a1": a17, "scale": a17, "stat": _arr(unsigned(5), n)})
    d3_l = data.StructLayout({"k": dkeep, "nm": _arr(fp_add_norm_layout(8, 23), n)})
    diff_l = data.StructLayout({"k": dkeep, "d": a32})
    short_l = data.StructLayout({"k": dkeep, "d": a17})
    mp = _arr(fp_mul_product_layout(6, 10), n)
    keep3 = data.StructLayout({"x": a32, "v": a32, "stat": _arr(unsigned(5), n)})
    mulp_l = data.StructLayout({"k": keep3, "hit": _arr(1, n), "t0": a17, "p1": mp, "p2": mp})
    mulf_l = data.StructLayout({"k": keep3, "hit": _arr(1, n), "t0": a17, "p1": a17, "p2": a17})

    def sub_operands(m, s):
        return ([(s.v[k], Value.cast(p.le_start) ^ SIGN32) for k in range(n)]
                + [(s.v[k], Value.cast(p.lo_start) ^ SIGN32) for k in range(n)])

    def sub_finish(m, s, sums):
        return {"x": s.x, "v": s.v, "dle": _sig(m, a32, sums[:n], "dle"),
                "dlo": _sig(m, a32, sums[n:], "dlo")}

    def index(m, s):
        out = {t: Signal(idx_l[t].shape, name=f"{t}_idx") for t in entries}
        for k in range(n):
            ix = {"le": lut.fp_table_index(m, s.dle[k], lut.LE_ENTRIES, p.le_index_select,
                                           exponential=p.le_exp,
                                           index_offset=p.le_index_offset, name=f"le{k}"),
                  "lo": lut.fp_table_index(m, s.dlo[k], lut.LO_ENTRIES, p.lo_index_select,
                                           name=f"lo{k}")}
            for t in entries:
                m.d.comb += [out[t][k].ix[f].eq(v) for f, v in ix[t].items() if f != "addr1"]
                m.d.comb += out[t][k].a1.eq(ix[t]["addr1"])
        return {"x": s.x, "v": s.v, **out}

    def read(m, s):
        out = {f: Signal(rd_l[f].shape, name=f"rd_{f}")
               for f in ("hit", "t0", "t1", "f", "fc", "fz", "origin", "scale", "stat")}
        for k in range(n):
            ys = {}
            for t in entries:
                a0, a1, d0, d1 = ports[t][k]
                m.d.comb += [a0.eq(s[t][k].ix.addr), a1.eq(s[t][k].a1)]
                ys[t] = (d0, d1)
            le, lo = s.le[k].ix, s.lo[k].ix
            use_lo, st = lut.select(le, lo, p)
            use_lo_s = Signal(name=f"use_lo{k}")
            m.d.comb += use_lo_s.eq(use_lo)
            uf = Mux(use_lo_s, lo.uf, le.uf)
            of = Mux(use_lo_s, lo.of, le.of)
            f = Signal(F, name=f"frac{k}")
            m.d.comb += f.eq(Mux(use_lo_s, lo.frac, le.frac))
            # 2**35 - f on 35 bits (0 for f = 0), both tables' beside the choice
            fc = Mux(use_lo_s, (-lo.frac)[:F], (-le.frac)[:F])
            cnt = Const(0, 1) if k >= counted else ~(c.lut_bypass | c.bypass)
            m.d.comb += [
                out["hit"][k].eq(~uf & ~of),
                out["t0"][k].eq(Mux(use_lo_s, ys["lo"][0], ys["le"][0])),
                out["t1"][k].eq(Mux(use_lo_s, ys["lo"][1], ys["le"][1])),
                out["f"][k].eq(f), out["fz"][k].eq(~f.any()),
                out["fc"][k].eq(fc),
                out["origin"][k].eq(Mux(uf, Mux(use_lo_s, uorg["lo"], uorg["le"]),
                                        Mux(use_lo_s, p.lo_end, p.le_end))),
                out["scale"][k].eq(Mux(uf, Mux(use_lo_s, scale17["lo", "uflow"],
                                               scale17["le", "uflow"]),
                                       Mux(use_lo_s, scale17["lo", "oflow"],
                                           scale17["le", "oflow"]))),
                out["stat"][k].eq(Mux(cnt, st, 0)),
            ]
        return {"x": s.x, "v": s.v, **out}

    def diff_align(m, s):
        out = {f: s[f] for f in ("x", "v", "hit", "fz", "scale", "stat", "f", "fc")}
        out["t0"] = _sig(m, a17, [fp_widen(m, s.t0[k], 5, 6, 10, name=f"t0_{k}")
                                  for k in range(n)], "t0_17")
        out["t1"] = _sig(m, a17, [fp_widen(m, s.t1[k], 5, 6, 10, name=f"t1_{k}")
                                  for k in range(n)], "t1_17")
        out["z1"] = _sig(m, d1_l["z1"].shape, [fp_leading_zeros(m, s.f[k], name=f"z1_{k}")
                                               for k in range(n)], "z1")
        out["z0"] = _sig(m, d1_l["z0"].shape, [fp_leading_zeros(m, s.fc[k], name=f"z0_{k}")
                                               for k in range(n)], "z0")
        out["al"] = _sig(m, d1_l["al"].shape,
                         [fp_add_align(m, s.v[k], Value.cast(s.origin[k]) ^ SIGN32, 8, 23,
                                       name=f"d{k}") for k in range(n)], "d_al")
        return out

    def diff_sum(m, s):
        out = {f: s[f] for f in ("x", "v", "hit", "fz", "scale", "stat", "t0", "t1", "z1", "z0")}
        out["n1"] = _sig(m, d2_l["n1"].shape, [(s.f[k] << s.z1[k])[:F] for k in range(n)], "n1")
        out["n0"] = _sig(m, d2_l["n0"].shape, [(s.fc[k] << s.z0[k])[:F] for k in range(n)],
                         "n0")
        out["sm"] = _sig(m, d2_l["sm"].shape, [fp_add_sum(m, s.al[k], 8, 23, name=f"d{k}")
                                               for k in range(n)], "d_sm")
        return out

    def diff_norm(m, s):
        a1 = [fp_of_fraction_round(m, s.n1[k], s.z1[k], 6, 10, name=f"a1_{k}") for k in range(n)]
        a0 = [Mux(s.fz[k], FP17_ONE,
                  fp_of_fraction_round(m, s.n0[k], s.z0[k], 6, 10, name=f"a0_{k}"))
              for k in range(n)]
        kept = _struct(m, dkeep, {**{f: s[f] for f in ("x", "v", "hit", "t0", "t1", "scale",
                                                       "stat")},
                                  "a0": _sig(m, a17, a0, "a0"), "a1": _sig(m, a17, a1, "a1")},
                       "dkeep")
        return {"k": kept, "nm": _sig(m, d3_l["nm"].shape,
                                      [fp_add_normalise(m, s.sm[k], 8, 23, name=f"d{k}")
                                       for k in range(n)], "d_nm")}

    def diff_round(m, s):
        return {"k": s.k, "d": _sig(m, a32, [fp_add_round(m, s.nm[k], 8, 23, name=f"d{k}")
                                             for k in range(n)], "diff")}

    def shorten(m, s):
        return {"k": s.k, "d": _sig(m, a17, [fp_shorten(m, s.d[k], 8, 23, 6, 10, name=f"d17_{k}")
                                             for k in range(n)], "d17")}

    def mul_product(m, s):
        q = s.k
        p1 = [fp_mul_product(m, q.a0[k], q.t0[k], 6, 10, name=f"p1_{k}") for k in range(n)]
        p2 = [fp_mul_product(m, Mux(q.hit[k], q.a1[k], s.d[k]),
                             Mux(q.hit[k], q.t1[k], q.scale[k]), 6, 10, name=f"p2_{k}")
              for k in range(n)]
        return {"k": _struct(m, keep3, {"x": q.x, "v": q.v, "stat": q.stat}, "k3"),
                "hit": q.hit, "t0": q.t0,
                "p1": _sig(m, mp, p1, "p1"), "p2": _sig(m, mp, p2, "p2")}

    def mul_finish(m, s):
        return {"k": s.k, "hit": s.hit, "t0": s.t0,
                "p1": _sig(m, a17, [fp_mul_finish(m, s.p1[k], 6, 10, name=f"p1_{k}")
                                    for k in range(n)], "P1"),
                "p2": _sig(m, a17, [fp_mul_finish(m, s.p2[k], 6, 10, name=f"p2_{k}")
                                    for k in range(n)], "P2")}

    def add_operands(m, s):
        return [(Mux(s.hit[k], s.p1[k], s.t0[k]), s.p2[k]) for k in range(n)]

    def add_keep(m, s):
        return s.k

    def add_finish(m, s, sums):
        ys = [Mux(c.lut_bypass, s.v[k], fp_extend(m, sums[k], 6, 10, 8, 23, name=f"y32_{k}"))
              for k in range(n)]
        return {"x": s.x, "v": _sig(m, a32, ys, "lut_res"), "stat": s.stat}

    return _pipe(m, [
        ("fl_sub", FpAddStages(y_out_layout(n), sub_l, 8, 23, 2 * n, sub_operands, sub_finish,
                               stages=4)),
        ("fl_index", Map(sub_l, idx_l, index)),
        ("fl_read", Map(idx_l, rd_l, read)),
        ("fl_diff_align", Map(rd_l, d1_l, diff_align)),
        ("fl_diff_sum", Map(d1_l, d2_l, diff_sum)),
        ("fl_diff_norm", Map(d2_l, d3_l, diff_norm)),
        ("fl_diff_round", Map(d3_l, diff_l, diff_round)),
        ("fl_short", Map(diff_l, short_l, shorten)),
        ("fl_mul", Map(short_l, mulp_l, mul_product)),
        ("fl_mul_fin", Map(mulp_l, mulf_l, mul_finish)),
        ("fl_add", FpAddStages(mulf_l, io, 6, 10, n, add_operands, add_finish, keep=add_keep,
                               keep_shape=keep3, stages=4)),
    ])


def output_stages(m: Module, lanes: int, x_layout, out_layout, fc, eql) -> tuple:
    """The output conversion in FP16 (module docstring step 4), two stages added to ``m``:
    ``f_half`` (fp32 -> fp16, or the low 16 bits in compare mode, ``eql``), ``f_out`` (fp16 ->
    int16 when ``fc.out_int16``, outside compare mode). Input: a payload with a field ``x``
    (``x_layout``: ``lanes`` signed 32); output ``out_layout`` (a StructLayout with ``v``,
    ``lanes`` x signed 16, and ``sat``, left 0). Returns the chain's ``(i, o)`` streams."""
    n = lanes
    half_l = data.StructLayout({"h": _arr(FP16, n)})

    def half(m, s):
        return {"h": _sig(m, half_l["h"].shape,
                          [Mux(eql, Value.cast(s.x[k])[:16],
                               fp32_to_fp16(m, s.x[k], name=f"h{k}")) for k in range(n)], "h")}

    def final(m, s):
        vs = [Mux(fc.out_int16 & ~eql, fp16_to_int16(m, s.h[k], name=f"i{k}"), s.h[k])
              for k in range(n)]
        return {"v": _sig(m, out_layout["v"].shape, vs, "fp_out"), "sat": 0}

    return _pipe(m, [("f_half", Map(x_layout, half_l, half)),
                     ("f_out", Map(half_l, out_layout, final))])
