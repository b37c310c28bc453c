"""CDP datapath in FP16 (nv_full): LRN on fp16 data with fp17/fp32 arithmetic.

The reference is the model, verif/model/cdp.py :func:`verif.model.cdp.cdp_compute_fp16` (with
``fp16_square_sum``, ``_fp_table_index`` and ``_fp_interp``), settled bit-exact on NVIDIA's
nv_full RTL; the facts behind it were read from NVIDIA's nvdlav1 RTL (vmod/nvdla/cdp
NV_NVDLA_CDP_DP_*.v, vmod/vlibs HLS_fp*.v; each HLS block also simulated alone), cited below
by the model's docstrings ("model"). The operators are :mod:`hdl.lib.fp` (NVIDIA's: round
to nearest even, no denormal or infinite results, NaN operands passed through). Per element:

1. NAN_TO_ZERO turns an fp16 NaN into +0 (infinities pass; model); fp16 -> fp17, exact
   (``fp_widen``; infinity -> +-MAX17, model); lanes of the last surface beyond the cube's
   channels become +0 (they still run through the pipe, are written and counted, model);
   DATIN_* are not used;
2. the square of every lane in fp32 (fp17 -> fp32 then fp32 multiply; exact for every fp17
   value, so done here as an 11 x 11-bit product, :func:`fp17_square`; model), the LRN
   window of channels c-4..c+4 (:class:`hdl.cdp.core.LrnWindow` carrying fp17 ``x`` and fp32
   squares, +0 outside the cube), and the sum in fp32 in NVIDIA's fixed order
   ``p_k = sq(c-k) + sq(c+k)`` (k = 1..4), ``s3 = p1 + sq(c)``, ``s5 = s3 + p2``,
   ``s7 = s5 + p3``, ``s9 = s7 + p4``, the result for NORMALZ_LEN 3/5/7/9 (model;
   model ``fp16_square_sum``); SQSUM_BYPASS gives fp32 of x itself (model);
3. both tables' index from ``d = fp32_sub(s, START)`` (START/END the registers' LOW words as
   fp32, INDEX_SELECT all 8 bits signed; :func:`fp_table_index`; model
   ``_fp_table_index``), the table choice and statistics as in INT (model,
   :func:`hdl.cdp.lut.select`), then ``f = fp17_add(fp17_mul(fp32_to_fp17(fp32_sub(A, B)),
   K), T0)`` with (A, B, K, T0) = (T[i+1], T[i], fraction, T[i]) on a hit, (s, MIN,
   UFLOW_SCALE, T[0]) on an underflow, (s, END, OFLOW_SCALE, T[last]) on an overflow (entries
   and scales fp16 patterns, SLOPE_SHIFT unused; MIN = ``fp32_add(2**LE_INDEX_OFFSET, START)``
   for an exponential LE table, 2**OFFSET = +0 for offsets -128 and -127,
   ``fp32_add(+0, START)`` for a linear one, LO_START for LO; model, model ``_fp_interp``);
   a NaN ``s`` gives the fp17 NaN of its sign and low 10 bits;
4. ``fp17_mul(x, f)``, or with MUL_BYPASS ``f`` (``x`` when x is NaN; model);
5. fp17 -> fp16 (``fp_narrow``; DATOUT_* not used; model).

Statistics as NVIDIA's RTL gives them (model): the five LUT categories over every
element (invalid lanes too) plus one phantom hybrid per element (its counter logic sees four
empty lanes per four-element beat as both-hit: D_PERF_LUT_HYBRID = hybrids + W*H*Cp), and
D_OUT_SATURATION = the outputs whose magnitude bits are 0x7BFF (+-65504).

Steps 2 (after the squares) to 5 process ``cfg.cdp_throughput`` elements per cycle (at most an
atom's ``atom_bytes // 2``), split by the window and joined by :class:`hdl.cdp.core.Gather`;
step 1 and the squares work on whole atoms. Every stage is a :class:`hdl.lib.stream.Map`
register with at most one fp adder or multiplier on its path (aiming at ~100 MHz on ECP5, as
hdl/cdp/core.py's stages, issue 10); skid buffers cut the ready chain. The stages (submodule
names; one cycle each, the window holding each surface until the next one arrives):

``in_skid`` | ``cvt`` (flush, fp16 -> fp17, lane mask) | ``square`` | ``window`` |
``sum_pairs`` (p1..p4) | ``sum3`` | ``sum5`` | ``sum7`` | ``sum9`` (and SQSUM_BYPASS) |
``mid_skid`` | ``lut_sub`` (s - START, both tables) | ``lut_index`` | ``lut_rd`` (entries
T[i], T[i+1] of both tables; table choice, statistics, fraction -> fp17) | ``lut_ops`` (A, B,
K, T0) | ``lut_diff`` (A - B) | ``lut_skid`` | ``lut_short`` (fp32 -> fp17) | ``lut_mul``
(x K: :func:`hdl.lib.fp.fp_mul_product`) | ``lut_mul_fin`` (:func:`hdl.lib.fp.fp_mul_finish`)
| ``lut_add`` (+ T0, NaN override) | ``mul`` (x f: ``fp_mul_product``) | ``mul_fin``
(``fp_mul_finish`` or MUL_BYPASS) | ``ocvt`` (fp17 -> fp16) | ``gather`` | ``out_skid``.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, ValueLike, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.cdp import lut
from hdl.cdp.core import (MAX_HALF, Gather, LrnWindow, lane_array, lut_rams, walker_place,
                          window_in_layout)
from hdl.cdp.dma import group_layout
from hdl.config import NvdlaConfig
from hdl.dma import CUBE_DIM_BITS, atom_layout, dma_params
from hdl.dma.walker import check_dma_params
from hdl.lib.fp import (FpAddStages, fp_add_align, fp_add_aligned_layout, fp_add_norm_layout,
                        fp_add_normalise, fp_add_round, fp_add_sum, fp_add_sum_layout, fp_extend,
                        fp_is_nan, fp_mul_finish, fp_mul_product, fp_mul_product_layout,
                        fp_narrow, fp_of_fraction, fp_shorten, fp_widen)
from hdl.lib.stream import Map, SkidBuffer, chain

__all__ = ["CdpFp16Core", "params_layout", "lut_params_layout", "fp17_square", "fp16_to_fp32",
           "fp_table_index", "FP16", "FP17", "FP32", "FLT_MAX"]

FP16, FP17, FP32 = unsigned(16), unsigned(17), unsigned(32)     # bit patterns
#: :class:`hdl.lib.fp.FpAddStages` stages of an fp32 addition (its finish phase, ~10.7 ns on
#: ECP5, split in normalisation and rounding)
ST32 = 4
FLT_MAX = 0x7F7FFFFF


def lut_params_layout() -> data.StructLayout:
    """LUT register values as the FP16 datapath reads them (CDP S_LUT_*, held for a layer;
    model): ``le_exp`` (S_LUT_CFG.LUT_LE_FUNCTION == EXPONENT), ``le_index_offset`` (int8),
    ``le_index_select`` / ``lo_index_select`` (the whole 8-bit fields, signed), START/END (the
    ``_LOW`` words as fp32 patterns; the ``_HIGH`` words are not used), the four slope scales
    (fp16 patterns; the slope shifts are not used) and the three priorities (0 LE, 1 LO)."""
    return data.StructLayout({
        "le_exp": 1, "le_index_offset": signed(8),
        "le_index_select": signed(8), "lo_index_select": signed(8),
        "le_start": FP32, "le_end": FP32, "lo_start": FP32, "lo_end": FP32,
        "le_uflow_scale": FP16, "le_oflow_scale": FP16,
        "lo_uflow_scale": FP16, "lo_oflow_scale": FP16,
        "uflow_priority": 1, "oflow_priority": 1, "hybrid_priority": 1,
    })


def params_layout() -> data.StructLayout:
    """Layer parameters of :class:`CdpFp16Core` (CDP_RDMA / CDP register values, held for a
    layer): ``channel`` (D_DATA_CUBE_CHANNEL, C - 1), ``width`` / ``height`` / ``group`` (the
    CdpWalker groups, as :func:`hdl.cdp.core.params_layout`), ``normalz_len`` (D_LRN_CFG),
    ``sqsum_bypass`` / ``mul_bypass`` (D_FUNC_BYPASS), ``nan_to_zero``
    (D_NAN_FLUSH_TO_ZERO) and ``lut`` (:func:`lut_params_layout`)."""
    return data.StructLayout({
        "channel": unsigned(13),
        "width": unsigned(CUBE_DIM_BITS), "height": unsigned(CUBE_DIM_BITS),
        "group": group_layout(),
        "normalz_len": unsigned(2), "sqsum_bypass": 1, "mul_bypass": 1, "nan_to_zero": 1,
        "lut": lut_params_layout(),
    })


# ---- combinational pieces (each adds logic to ``m`` and returns a Value) ---------------------

def _named(m: Module, value: ValueLike, name: str) -> Signal:
    """``value`` through a signal of its shape: an operand used many times by an operator
    (and simulated) once, not copied into each use."""
    value = Value.cast(value)
    sig = Signal(value.shape(), name=name)
    m.d.comb += sig.eq(value)
    return sig


def fp17_square(m: Module, x: ValueLike, name: str = "sq") -> Value:
    """fp32 pattern of ``fp32_mul(fp17_to_fp32(x), fp17_to_fp32(x))`` for any fp17 pattern
    ``x`` (model). The square of an fp17 value is exact in fp32 (22 significant bits,
    2**-62 .. 2**64), so it is the 11 x 11-bit product of the mantissas, normalised by one bit:
    exponent ``2 * e + 65`` (+1 when the product has 22 bits). A zero of either sign gives +0,
    a NaN comes back as fp17_to_fp32 gives it (sign, 255, the payload in the low bits), and
    the unused fp17 infinity pattern (its fp32 is FLT_MAX) gives +FLT_MAX."""
    x = Value.cast(x)
    s, e, mt = x[16], x[10:16], x[:10]
    prod = Signal(22, name=f"{name}_p")
    m.d.comb += prod.eq(Cat(mt, Const(1, 1)) * Cat(mt, Const(1, 1)))
    hi = prod[21]
    ex = (Cat(Const(0, 1), e) + 65 + hi)[:8]
    mant = Mux(hi, Cat(Const(0, 2), prod[:21]), Cat(Const(0, 3), prod[:20]))
    res = Mux(e.any() | mt.any(), Cat(mant, ex, Const(0, 1)), 0)
    special = Mux(mt.any(), Cat(mt, Const(0, 13), Const(0xFF, 8), s), Const(FLT_MAX, 32))
    return Mux(e.all(), special, res)


def fp16_to_fp32(m: Module, x: ValueLike, name: str = "f16to32") -> Value:
    """fp32 pattern of fp16 pattern ``x`` (NVIDIA's fp16_to_fp32, model ``fp.fp16_to_fp32``;
    model): exact, denormals normalised, infinity to +-FLT_MAX, a NaN's sign and payload
    kept (payload in the low mantissa bits)."""
    x = Value.cast(x)
    inf = x[10:15].all() & ~x[:10].any()
    w = _named(m, fp_widen(m, x, 5, 6, 10, name=f"{name}_w"), f"{name}_x17")
    y = fp_extend(m, w, 6, 10, 8, 23, name=f"{name}_e")
    return Mux(inf, Cat(Const(FLT_MAX, 31), x[15]), y)


def fp_table_index(m: Module, d: ValueLike, entries: int, *, select, exponential=None,
                   index_offset=None, name: str = "idx") -> dict:
    """Index of one sample in one table in FP16 mode (model ``_fp_table_index``),
    from ``d`` = the fp32 pattern of ``s - START``: a dict of
    :func:`hdl.cdp.lut.index_layout` fields (``addr`` = the index on a hit, 0 on an underflow,
    ``entries - 1`` on an overflow; ``frac`` the 16-bit fraction on a hit, else 0; ``uf``,
    ``of``).

    Underflow: ``d`` NaN, +0 or with its sign set. Linear (``select``, signed(8)): ``d *
    2**-select`` exactly, i.e. the 24-bit mantissa M shifted right by ``r = 150 + select - e``:
    ``r < 16`` leaves an index >= 2**8, an overflow of either table; else the index is
    ``M >> r`` and the fraction the next 16 bits (truncated), both 0 from ``r = 40`` on. An index
    >= ``entries - 1`` overflows. Exponential (the LE table: ``exponential`` 1 bit,
    ``index_offset`` signed(8)): ``L = e - 127``, an underflow when ``L < index_offset`` (either
    sign of the offset), index ``L - index_offset``, fraction = mantissa bits 22:7."""
    d = Value.cast(d)
    sign, e, mant = d[31], d[23:31], d[:23]
    uf0 = Signal(name=f"{name}_uf0")
    m.d.comb += uf0.eq((e.all() & mant.any()) | ~d.any() | sign)
    r = Signal(signed(11), name=f"{name}_r")
    m.d.comb += r.eq(150 + select - e)
    rs = Mux(r > 40, 40, r[:6])                          # used when r >= 16
    t = Signal(40, name=f"{name}_t")
    m.d.comb += t.eq(Cat(Const(0, 16), mant, Const(1, 1)) >> rs)
    lin_idx = t[16:]
    lin_of = ~uf0 & ((r < 16) | (lin_idx >= entries - 1))
    if exponential is not None:
        lg = Signal(signed(9), name=f"{name}_lg")
        m.d.comb += lg.eq(e - 127)
        exp_idx = Signal(signed(10), name=f"{name}_xi")
        m.d.comb += exp_idx.eq(lg - index_offset)
        exp_uf = uf0 | (lg < index_offset)
        exp_of = ~exp_uf & (exp_idx >= entries - 1)
        uf = _named(m, Mux(exponential, exp_uf, uf0), f"{name}_uf")
        of = _named(m, Mux(exponential, exp_of, lin_of), f"{name}_of")
        idx = Mux(exponential, exp_idx.as_unsigned(), lin_idx)
        frac = Mux(exponential, d[7:23], t[:16])
    else:
        uf, of, idx, frac = uf0, _named(m, lin_of, f"{name}_of"), lin_idx, t[:16]
    hit = ~uf & ~of
    return {"addr": Mux(uf, 0, Mux(of, entries - 1, idx)), "frac": Mux(hit, frac, 0),
            "uf": uf, "of": of}


def _per_lane(tp: int, **fields) -> data.StructLayout:
    """A stage payload: each field an array of ``tp`` elements of the given shape."""
    return data.StructLayout({k: data.ArrayLayout(v, tp) for k, v in fields.items()})


class CdpFp16Core(wiring.Component):
    """CDP datapath in FP16 from input atoms to output atoms, with the LUT RAMs (module
    docstring; the FP16 twin of :class:`hdl.cdp.core.CdpCore`).

    Ports:
      ``i`` In(stream of :func:`hdl.dma.atom_layout`): atoms in CdpWalker order (groups of
      ``positions`` = atoms per burst window, as CdpCore), each ``atom_bytes // 2`` fp16
      elements, element k in bytes 2k (low) and 2k+1 (channel c % lanes = k); ``o`` Out(same),
      the output atoms in the same order, fp16 patterns laid out the same way;
      ``p`` In(:func:`params_layout`), stable while atoms are in flight and from one cycle
      before the first (the LE table's MIN and the four slope scales in fp17 are computed from
      it into registers);
      LUT write port (from S_LUT_ACCESS_DATA writes): ``lut_we`` In(1), ``lut_table`` In(1)
      (0 LE, 1 LO), ``lut_addr`` In(10), ``lut_wdata`` In(16) (an fp16 pattern; writes outside
      the table are ignored); ``lut_rdata`` Out(16): entry ``lut_addr`` of ``lut_table`` (entry
      0 when outside), combinational;
      ``stat_counts`` Out(array of 5 counts, :data:`hdl.cdp.lut.STAT_NAMES` order): elements of
      each LUT category leaving the table-selection stage in this cycle, the hybrid count
      including one phantom hybrid per element (0..2*tp, NVIDIA's D_PERF_LUT_HYBRID; others
      0..tp); ``sat_count`` Out(0..tp): output elements of magnitude 0x7BFF leaving the
      fp16 conversion stage in this cycle (D_OUT_SATURATION).

    Throughput: ``tp`` = min(cfg.cdp_throughput, lanes) elements per cycle.
    """

    def __init__(self, cfg: NvdlaConfig):
        self.cfg = cfg
        self.lanes = cfg.atom_bytes // 2
        self.tp = min(cfg.cdp_throughput, self.lanes)
        dp = dma_params(cfg)
        #: positions per group of the CdpWalker order: atoms per burst window
        self.positions = check_dma_params(dp["atom_bytes"], dp["beat_bytes"], dp["max_burst"])
        super().__init__({
            "i": In(stream.Signature(atom_layout(cfg))),
            "o": Out(stream.Signature(atom_layout(cfg))),
            "p": In(params_layout()),
            "lut_we": In(1), "lut_table": In(1), "lut_addr": In(10), "lut_wdata": In(16),
            "lut_rdata": Out(16),
            "stat_counts": Out(data.ArrayLayout(range(2 * self.tp + 1), len(lut.STAT_NAMES))),
            "sat_count": Out(range(self.tp + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        lanes, tp, P = self.lanes, self.tp, self.positions
        p = self.p
        lp = p.lut

        # ---- LUT RAMs of fp16 patterns: one write port (CSB), comb read ports ----
        tables = lut_rams(m, self, FP16, tp)

        # ---- layer constants, registered (p is stable for a layer): the LE underflow origin
        # MIN = fp32_add(2**OFFSET, START) (exponential; 2**OFFSET = +0 for OFFSET -128, -127)
        # or fp32_add(+0, START) (linear), and the four slope scales in fp17 (model) ----
        off = lp.le_index_offset
        two_o = Mux(lp.le_exp & (off > -127), Cat(Const(0, 23), (off + 127)[:8], Const(0, 1)), 0)
        le_min = Signal(FP32)
        le_al = Signal(fp_add_aligned_layout(8, 23), name="le_min_al")
        le_sm = Signal(fp_add_sum_layout(8, 23), name="le_min_sm")
        le_nm = Signal(fp_add_norm_layout(8, 23), name="le_min_nm")
        m.d.sync += [le_al.eq(fp_add_align(m, two_o, lp.le_start, 8, 23, name="le_min")),
                     le_sm.eq(fp_add_sum(m, le_al, 8, 23, name="le_min")),
                     le_nm.eq(fp_add_normalise(m, le_sm, 8, 23, name="le_min")),
                     le_min.eq(fp_add_round(m, le_nm, 8, 23, name="le_min"))]
        scale17 = {}
        for t in ("le", "lo"):
            for flow in ("uflow", "oflow"):
                sig = Signal(FP17, name=f"{t}_{flow}_scale17")
                m.d.sync += sig.eq(fp_widen(m, getattr(lp, f"{t}_{flow}_scale"), 5, 6, 10,
                                            name=f"{t}_{flow}_w"))
                scale17[t, flow] = sig

        # ---- 1. NaN flush, fp16 -> fp17, invalid lanes +0 (whole atoms), then the squares ----
        take = Signal()
        place = walker_place(m, p, take, lanes=lanes, positions=P, atom_bytes=self.cfg.atom_bytes)
        flags = {"first": 1, "last": 1, "slot": range(max(P, 2)), "gend": 1}
        conv_l = data.StructLayout({"x": data.ArrayLayout(FP17, lanes), **flags})
        win_in = window_in_layout(lanes, P, FP17, FP32)

        def convert(m, a):
            raw = a.as_value()
            xs = Signal(data.ArrayLayout(FP17, lanes), name="x17")
            for j in range(lanes):
                d = raw.word_select(j, 16)
                d = _named(m, Mux(p.nan_to_zero & fp_is_nan(d, 5, 10), 0, d), f"d{j}")
                x = fp_widen(m, d, 5, 6, 10, name=f"cvt{j}")
                if j > 0:                     # lane 0 is always a channel of the cube
                    x = Mux(place["last"] & (place["valid_last"] < j), 0, x)
                m.d.comb += xs[j].eq(x)
            return {"x": xs, **{f: place[f] for f in flags}}

        def square(m, a):
            sqs = Signal(data.ArrayLayout(FP32, lanes), name="sq32")
            for j in range(lanes):
                m.d.comb += sqs[j].eq(fp17_square(m, a.x[j], name=f"sq{j}"))
            return {"x": a.x, "sq": sqs, **{f: a[f] for f in flags}}

        m.submodules.in_skid = in_skid = SkidBuffer(atom_layout(self.cfg))
        wiring.connect(m, wiring.flipped(self.i), in_skid.i)
        cvt_st = chain(m, in_skid.o, cvt=Map(atom_layout(self.cfg), conv_l, convert))
        m.d.comb += take.eq(cvt_st.i.valid & cvt_st.i.ready)

        # ---- 2. window and the fp32 square sum in NVIDIA's order (five stages) ----
        half = p.normalz_len                   # NORMALZ_LEN: half-width - 1
        l_pairs = _per_lane(tp, x=FP17, c=FP32, p=data.ArrayLayout(FP32, MAX_HALF))
        l_s3 = _per_lane(tp, x=FP17, s=FP32, p=data.ArrayLayout(FP32, 3))
        l_s5 = _per_lane(tp, x=FP17, s=FP32, p=data.ArrayLayout(FP32, 2))
        l_s7 = _per_lane(tp, x=FP17, s=FP32, p=FP32)
        l_v = _per_lane(tp, x=FP17, v=FP32)

        l_centre = _per_lane(tp, x=FP17, c=FP32)

        def pair_operands(m, w):                    # lower channel is operand a
            return [(w.taps[ln][MAX_HALF - k], w.taps[ln][MAX_HALF + k])
                    for ln in range(tp) for k in range(1, MAX_HALF + 1)]

        def centre(m, w):
            out = Signal(l_centre, name="centre")
            m.d.comb += [out.x.eq(w.x)]
            m.d.comb += [out.c[ln].eq(w.taps[ln][MAX_HALF]) for ln in range(tp)]
            return out

        def pairs(m, a, sums):
            ps = Signal(l_pairs["p"].shape, name="pairs")
            for ln in range(tp):
                for k in range(1, MAX_HALF + 1):
                    m.d.comb += ps[ln][k - 1].eq(sums[ln * MAX_HALF + k - 1])
            return {"x": a.x, "c": a.c, "p": ps}

        def sum3_operands(m, a):
            return [(a.p[ln][0], a.c[ln]) for ln in range(tp)]

        def sum3(m, a, sums):
            return {"x": a.x, "s": lane_array(m, sums, FP32),
                    "p": lane_array(m, [Cat(*(a.p[ln][k] for k in range(1, 4))) for ln in range(tp)],
                              data.ArrayLayout(FP32, 3))}

        def s_operands(rest):
            """(s, p_k) per lane: p_k the first pair left (the only one when ``rest`` is 0)."""
            return lambda m, a: [(a.s[ln], a.p[ln] if rest == 0 else a.p[ln][0])
                                 for ln in range(tp)]

        def sum_next(k, rest):
            """s = s + p_k when the window reaches c +- k (NORMALZ_LEN >= k - 1)."""
            def fn(m, a, sums):
                ss, ps = [], []
                for ln in range(tp):
                    ss.append(Mux(half >= k - 1, sums[ln], a.s[ln]))
                    if rest:
                        ps.append(Cat(*(a.p[ln][j] for j in range(1, rest + 1))))
                out = {"x": a.x, "s": lane_array(m, ss, FP32)}
                if rest:
                    out["p"] = lane_array(m, ps, FP32 if rest == 1 else data.ArrayLayout(FP32, rest))
                return out
            return fn

        def total(m, a, sums):
            vs = []
            for ln in range(tp):
                s9 = Mux(half == 3, sums[ln], a.s[ln])
                # SQSUM_BYPASS: the element's own x in fp32 (model)
                vs.append(Mux(p.sqsum_bypass, fp_extend(m, a.x[ln], 6, 10, 8, 23,
                                                        name=f"bp_{ln}"), s9))
            return {"x": a.x, "v": lane_array(m, vs, FP32)}

        win = LrnWindow(lanes, tp, P, FP17, FP32)
        sum_st = chain(m, cvt_st.o, square=Map(conv_l, win_in, square), window=win,
                       sum_pairs=FpAddStages(win.o.payload.shape(), l_pairs, 8, 23,
                                             MAX_HALF * tp, pair_operands, pairs,
                                             keep=centre, keep_shape=l_centre, stages=ST32),
                       sum3=FpAddStages(l_pairs, l_s3, 8, 23, tp, sum3_operands, sum3,
                                        stages=ST32),
                       sum5=FpAddStages(l_s3, l_s5, 8, 23, tp, s_operands(2), sum_next(2, 2),
                                        stages=ST32),
                       sum7=FpAddStages(l_s5, l_s7, 8, 23, tp, s_operands(1), sum_next(3, 1),
                                        stages=ST32),
                       sum9=FpAddStages(l_s7, l_v, 8, 23, tp, s_operands(0), total,
                                        stages=ST32))

        # ---- 3. LUT: s - START (both tables), index, table read, choice and operands,
        # A - B, to fp17, times K, plus T0 (eight stages, a skid buffer halfway) ----
        idx_l = {"le": lut.index_layout(lut.LE_ENTRIES), "lo": lut.index_layout(lut.LO_ENTRIES)}
        pair = data.StructLayout({"y0": FP16, "y1": FP16})
        l_sub = _per_lane(tp, x=FP17, v=FP32, dle=FP32, dlo=FP32)
        l_idx = _per_lane(tp, x=FP17, v=FP32, le=idx_l["le"], lo=idx_l["lo"])
        l_rd = _per_lane(tp, x=FP17, v=FP32, use_lo=1, uf=1, of=1, kf=FP17, stat=unsigned(5),
                         le_y=pair, lo_y=pair)
        l_ops = _per_lane(tp, x=FP17, a=FP32, b=FP32, k=FP17, t0=FP17, nan=1, nanf=FP17,
                          stat=unsigned(5))
        l_diff = _per_lane(tp, x=FP17, d=FP32, k=FP17, t0=FP17, nan=1, nanf=FP17)
        l_short = _per_lane(tp, x=FP17, d=FP17, k=FP17, t0=FP17, nan=1, nanf=FP17)
        mp17 = fp_mul_product_layout(6, 10)
        l_pp = _per_lane(tp, x=FP17, pp=mp17, t0=FP17, nan=1, nanf=FP17)
        l_prod = _per_lane(tp, x=FP17, pr=FP17, t0=FP17, nan=1, nanf=FP17)
        l_f = _per_lane(tp, x=FP17, f=FP17)

        flip = Const(1 << 31, 32)

        def sub_operands(m, a):
            # fp32_sub(s, START) = fp32_add(s, START with its sign flipped) (model)
            return [(a.v[ln], lp.le_start ^ flip) for ln in range(tp)] + \
                   [(a.v[ln], lp.lo_start ^ flip) for ln in range(tp)]

        def sub_start(m, a, sums):
            return {"x": a.x, "v": a.v, "dle": lane_array(m, sums[:tp], FP32),
                    "dlo": lane_array(m, sums[tp:], FP32)}

        def index(m, a):
            les = Signal(l_idx["le"].shape, name="le_idx")
            los = Signal(l_idx["lo"].shape, name="lo_idx")
            for ln in range(tp):
                le = fp_table_index(m, a.dle[ln], lut.LE_ENTRIES, select=lp.le_index_select,
                                    exponential=lp.le_exp, index_offset=lp.le_index_offset,
                                    name=f"le{ln}")
                lo = fp_table_index(m, a.dlo[ln], lut.LO_ENTRIES, select=lp.lo_index_select,
                                    name=f"lo{ln}")
                m.d.comb += [les[ln][f].eq(v) for f, v in le.items()]
                m.d.comb += [los[ln][f].eq(v) for f, v in lo.items()]
            return {"x": a.x, "v": a.v, "le": les, "lo": los}

        ports = {name: [(mem.read_port(domain="comb"), mem.read_port(domain="comb"))
                        for _ in range(tp)]
                 for name, (mem, _, _) in tables.items()}

        def read(m, a):
            # beside the table reads: the table choice, its flags and its fraction in fp17
            out = {f: Signal(l_rd[f].shape, name=f"rd_{f}")
                   for f in ("use_lo", "uf", "of", "kf", "stat")}
            for ln in range(tp):
                le, lo = a.le[ln], a.lo[ln]
                use_lo, st = lut.select(le, lo, lp)
                use_lo = _named(m, use_lo, f"use_lo{ln}")
                frac = _named(m, Mux(use_lo, lo.frac, le.frac), f"frac{ln}")
                m.d.comb += [
                    out["use_lo"][ln].eq(use_lo), out["stat"][ln].eq(st),
                    out["uf"][ln].eq(Mux(use_lo, lo.uf, le.uf)),
                    out["of"][ln].eq(Mux(use_lo, lo.of, le.of)),
                    out["kf"][ln].eq(fp_of_fraction(m, frac, 6, 10, name=f"fr_{ln}"))]
            ys = {}
            for name in ("le", "lo"):
                n = tables[name][1]
                y = Signal(data.ArrayLayout(pair, tp), name=f"{name}_y")
                for ln in range(tp):
                    r0, r1 = ports[name][ln]
                    ix = a[name][ln]
                    m.d.comb += [r0.addr.eq(ix.addr),
                                 r1.addr.eq(Mux(ix.addr == n - 1, n - 1, ix.addr + 1)),
                                 y[ln].y0.eq(r0.data), y[ln].y1.eq(r1.data)]
                ys[f"{name}_y"] = y
            return {"x": a.x, "v": a.v, **out, **ys}

        def operands(m, a):
            out = {f: Signal(l_ops[f].shape, name=f"op_{f}") for f in l_ops.members}
            for ln in range(tp):
                v, use_lo, uf, of = a.v[ln], a.use_lo[ln], a.uf[ln], a.of[ln]
                # T[i], T[0] or T[last], and T[i+1]
                y0 = _named(m, Mux(use_lo, a.lo_y[ln].y0, a.le_y[ln].y0), f"y0_{ln}")
                y1 = _named(m, Mux(use_lo, a.lo_y[ln].y1, a.le_y[ln].y1), f"y1_{ln}")
                hit = _named(m, ~uf & ~of, f"hit{ln}")
                origin = Mux(uf, Mux(use_lo, lp.lo_start, le_min),
                             Mux(use_lo, lp.lo_end, lp.le_end))
                scale = Mux(uf, Mux(use_lo, scale17["lo", "uflow"], scale17["le", "uflow"]),
                            Mux(use_lo, scale17["lo", "oflow"], scale17["le", "oflow"]))
                m.d.comb += [
                    out["x"][ln].eq(a.x[ln]),
                    out["a"][ln].eq(Mux(hit, fp16_to_fp32(m, y1, name=f"y1_{ln}"), v)),
                    out["b"][ln].eq(Mux(hit, fp16_to_fp32(m, y0, name=f"y0_{ln}"), origin)),
                    out["k"][ln].eq(Mux(hit, a.kf[ln], scale)),
                    out["t0"][ln].eq(fp_widen(m, y0, 5, 6, 10, name=f"t0_{ln}")),
                    # a NaN sum: the fp17 NaN of its sign and low 10 bits (model)
                    out["nan"][ln].eq(fp_is_nan(v, 8, 23)),
                    out["nanf"][ln].eq(Cat(v[:10], Const(63, 6), v[31])),
                    out["stat"][ln].eq(a.stat[ln]),
                ]
            return out

        def diff_operands(m, a):
            return [(a.a[ln], a.b[ln] ^ flip) for ln in range(tp)]

        def diff(m, a, sums):
            return {"x": a.x, "k": a.k, "t0": a.t0, "nan": a.nan, "nanf": a.nanf,
                    "d": lane_array(m, sums, FP32)}

        def shorten(m, a):
            return {"x": a.x, "k": a.k, "t0": a.t0, "nan": a.nan, "nanf": a.nanf,
                    "d": lane_array(m, [fp_shorten(m, a.d[ln], 8, 23, 6, 10, name=f"d17_{ln}")
                                  for ln in range(tp)], FP17)}

        def times_k(m, a):
            return {"x": a.x, "t0": a.t0, "nan": a.nan, "nanf": a.nanf,
                    "pp": lane_array(m, [fp_mul_product(m, a.d[ln], a.k[ln], 6, 10,
                                                        name=f"dk_{ln}")
                                         for ln in range(tp)], mp17)}

        def times_k_finish(m, a):
            return {"x": a.x, "t0": a.t0, "nan": a.nan, "nanf": a.nanf,
                    "pr": lane_array(m, [fp_mul_finish(m, a.pp[ln], 6, 10, name=f"dk_{ln}")
                                         for ln in range(tp)], FP17)}

        def t0_operands(m, a):
            return [(a.pr[ln], a.t0[ln]) for ln in range(tp)]

        def plus_t0(m, a, sums):
            return {"x": a.x,
                    "f": lane_array(m, [Mux(a.nan[ln], a.nanf[ln], sums[ln])
                                        for ln in range(tp)], FP17)}

        ops_st = chain(m, sum_st.o, mid_skid=SkidBuffer(l_v),
                       lut_sub=FpAddStages(l_v, l_sub, 8, 23, 2 * tp, sub_operands, sub_start,
                                           stages=ST32),
                       lut_index=Map(l_sub, l_idx, index), lut_rd=Map(l_idx, l_rd, read),
                       lut_ops=Map(l_rd, l_ops, operands))
        ops_fire = ops_st.o.valid & ops_st.o.ready
        for c in range(len(lut.STAT_NAMES)):
            cnt = sum((ops_st.o.payload.stat[ln][c] for ln in range(1, tp)),
                      ops_st.o.payload.stat[0][c].as_unsigned())
            if lut.STAT_NAMES[c] == "hybrid":
                cnt = cnt + tp                   # the phantom hybrids (model)
            m.d.comb += self.stat_counts[c].eq(Mux(ops_fire, cnt, 0))

        # ---- 4. multiplier, 5. fp17 -> fp16, then the atoms ----
        def multiply(m, a):
            byp, pp = [], []
            for ln in range(tp):
                x, f = a.x[ln], a.f[ln]
                byp.append(Mux(fp_is_nan(x, 6, 10), x, f))
                pp.append(fp_mul_product(m, x, f, 6, 10, name=f"xf_{ln}"))
            return {"byp": lane_array(m, byp, FP17), "pp": lane_array(m, pp, mp17)}

        def multiply_finish(m, a):
            return [Mux(p.mul_bypass, a.byp[ln], fp_mul_finish(m, a.pp[ln], 6, 10,
                                                               name=f"xf_{ln}"))
                    for ln in range(tp)]

        def narrow(m, a):
            return [fp_narrow(m, a[ln], 6, 5, 10, name=f"o16_{ln}") for ln in range(tp)]

        l_mul = _per_lane(tp, byp=FP17, pp=mp17)
        l_o17 = data.ArrayLayout(FP17, tp)
        l_o16 = data.ArrayLayout(FP16, tp)
        cvo_st = chain(m, ops_st.o, lut_diff=FpAddStages(l_ops, l_diff, 8, 23, tp, diff_operands,
                                                         diff, stages=ST32),
                       lut_skid=SkidBuffer(l_diff), lut_short=Map(l_diff, l_short, shorten),
                       lut_mul=Map(l_short, l_pp, times_k),
                       lut_mul_fin=Map(l_pp, l_prod, times_k_finish),
                       lut_add=FpAddStages(l_prod, l_f, 6, 10, tp, t0_operands, plus_t0),
                       mul=Map(l_f, l_mul, multiply), mul_fin=Map(l_mul, l_o17, multiply_finish),
                       ocvt=Map(l_o17, l_o16, narrow))
        cvo_fire = cvo_st.o.valid & cvo_st.o.ready
        sat = sum(((cvo_st.o.payload[ln][:15] == 0x7BFF) for ln in range(1, tp)),
                  (cvo_st.o.payload[0][:15] == 0x7BFF).as_unsigned())
        m.d.comb += self.sat_count.eq(Mux(cvo_fire, sat, 0))

        g = chain(m, cvo_st.o, gather=Gather(FP16, lanes, tp))
        m.submodules.out_skid = out_skid = SkidBuffer(atom_layout(self.cfg))
        m.d.comb += [out_skid.i.valid.eq(g.o.valid), g.o.ready.eq(out_skid.i.ready),
                     out_skid.i.payload.eq(g.o.payload.as_value())]
        wiring.connect(m, out_skid.o, wiring.flipped(self.o))
        return m
