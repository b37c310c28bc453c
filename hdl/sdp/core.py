"""SDP core datapath: 32-bit input atoms (MRDMA's int8 sign-extended, or CACC's int32 on the
fly) joined with the X1/X2/Y operand groups (BRDMA/NRDMA/ERDMA), split into throughput-wide
element groups, X1 (BS) -> X2 (BN) -> Y (EW) -> output converter, merged back into atoms for
WDMA or PDP (v1_ias_unit_description.rst "SDP", block diagram M -> X1 -> X2 -> Y -> C).

Stages (all :mod:`hdl.lib.stream` / :mod:`hdl.lib.gearbox` valid/ready stages):

1. :class:`hdl.lib.gearbox.Join` of the data atom with the BS, BN and EW operand groups (each
   waited for only when that sub-unit takes an operand from memory; these enables are
   registered, a cycle after the configuration).
2. :class:`hdl.lib.gearbox.Split` into groups of ``lanes`` elements (``lanes`` = the largest of
   cfg.sdp_bs/bn/ew_throughput, capped at the atom; nv_small: 1 element per cycle, like
   NVIDIA's nv_small SDP); the X operands are selected on the way into the next skid buffer:
   from memory (``*_mem``) or the register operand (D_DP_<X>_ALU/MUL_SRC_VALUE); Y's raw memory
   operands pass to Y, which selects and converts them itself.
3. X1, X2: :class:`hdl.sdp.x.XSubUnit` (6 stages each), present when cfg.sdp_bs / cfg.sdp_bn,
   skipped (with X2's skid buffer) while bypassed; Y: :class:`hdl.sdp.y.YSubUnit` (3 stages, 5
   with the LUT), present when cfg.sdp_ew.
4. output converter, four Map stages: ``(x - offset) * scale`` as partial products
   (:func:`hdl.lib.fixed.partial_products`), their sum exact on 49 bits, the rounding bias
   added (:func:`hdl.lib.fixed.round_bias`), then ``saturate_int8(round(p / 2**shift))``
   (rounding half away from zero,
   :func:`hdl.lib.fixed.truncate`; v1_ias_precision.rst "Convertor"; NVIDIA's RTL saturates to
   17 bits and then to 8, the same result; the 17-bit saturation is counted, ``sat_count``).
5. :class:`hdl.lib.gearbox.Merge` back into atoms.

Skid buffers (:class:`hdl.lib.stream.SkidBuffer`) after step 2, before step 4 and before step 5
register the ready signal, which the Map stages pass through combinationally.

Offset 0, scale 1, shift 0 with every sub-unit bypassed is the identity on int8 input.
Throughput ``lanes`` elements per cycle (one atom every ``atom / lanes`` cycles).

INT16 (built when :func:`hdl.sdp.rdma.has_int16`; the ``int16`` port, 1 in an INT16 layer; the
model's ``SdpCore.run``: INT8's arithmetic on int16 elements, verif/model/sdp.py): an input
atom's ``e = atom_bytes // 2`` elements are its lanes 0 .. e - 1 (int16 sign-extended to 32
bits by :class:`hdl.sdp.Sdp`, or CACC's int32), as are its operand groups'; step 2
(:class:`hdl.lib.gearbox.Split` with ``count``) sends only the ``max(1, e / lanes)`` groups that
hold them, every stage computes as in INT8 (32-bit elements, 16-bit operands, the LUT on 32 bits), step 4 saturates
to 16 bits instead of 8 (the 17-bit intermediate and its count unchanged), and step 5 merges
that many groups and packs element j into bytes 2j, 2j + 1 (:func:`pack_atom`). A lane beyond
``e`` (``lanes`` > e) carries no channel: left out of ``sat_count`` and the LUT statistics.
An INT16 atom then takes ``max(1, e / lanes)`` cycles. Without int16 none of this is built.

FP16 (built when :func:`hdl.sdp.rdma.has_fp16`; the ``fp_cfg`` port,
:func:`hdl.sdp.fp16.fp_cfg_layout`, ``fp16`` 1 in an FP16 layer): the atoms, groups and
packing of INT16 (two-byte elements), computed by :mod:`hdl.sdp.fp16`'s stages: after step 2 a
stage (``fp_in``) takes the elements to fp32 patterns (an fp16 pattern in an element's low 16
bits, or CACC's fp32 with ``in_fp32``; NaN -> +0 with ``nan_to_zero``); X1, X2 and Y compute
with their FP16 stages (:class:`hdl.sdp.x.XSubUnit` / :class:`hdl.sdp.y.YSubUnit` built with
``fp``); step 4 is the FP16 output conversion (fp32 -> fp16, -> int16 with ``out_int16``; the
low 16 bits in compare mode). Each is chosen by a register following ``fp16`` (the integer
stages skip ``fp_in``; a layer's items never meet the other's stages), and the FP16 stages'
inputs are held at 0 in the other layers. Throughput as INT16: one element per cycle per lane, an FP16 atom every
``max(1, e / lanes)`` cycles (geometry A: 16 lanes, an atom per cycle), at a longer latency
(X1 / X2 :data:`hdl.sdp.fp16.X_LATENCY` stages each, Y :data:`hdl.sdp.fp16.Y_LATENCY` plus
:data:`hdl.sdp.fp16.LUT_LATENCY` with the LUT, the conversion 2).
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.config import NvdlaConfig
from hdl.lib.fixed import (in_range, partial_products, partial_products_layout, round_bias,
                           round_bias_shape, round_shift, saturate, sum_partial_products)
from hdl.lib.stream import Map, SkidBuffer
from hdl.lib.gearbox import Join, Merge, Split, narrow_layout
from hdl.sdp.rdma import atom_layout, has_fp16, has_int16, int16_elems
from hdl.sdp import lut
from hdl.sdp.y import YSubUnit, y_cfg_layout
from hdl.sdp.x import ALU_EQL, X_DATA_BITS, XSubUnit, array_signal, operand_layout, x_cfg_layout
from hdl.sdp.fp16 import fp_cfg_layout, input_stage, output_stages, route_in, route_out

__all__ = ["SdpCore", "op_sel_layout", "core_lanes", "wide_atom_layout",
           "pack_atom"]

_PROD_BITS = 49          # (int32 - int32) * int16: 33 x 16 bits, exact


def op_sel_layout() -> data.StructLayout:
    """Operand selection of one X sub-unit: ``alu_mem`` / ``mul_mem`` (D_DP_<X>_ALU/MUL_CFG
    <X>_ALU/MUL_SRC = MEM), ``alu`` / ``mul`` the signed 16-bit register operands."""
    return data.StructLayout({"alu_mem": 1, "mul_mem": 1,
                              "alu": signed(16), "mul": signed(16)})


def wide_atom_layout(cfg: NvdlaConfig) -> data.ArrayLayout:
    """The core's input atom: cfg.memory_atomic signed 32-bit elements (lane = channel % atom);
    int8 feature atoms from MRDMA are sign-extended into it, CACC's on-the-fly atoms
    (docs/conv.md "SDP on the fly") are it."""
    return data.ArrayLayout(signed(X_DATA_BITS), cfg.memory_atomic)


def pack_atom(m: Module, slots, lanes: int, atom: int, int16) -> Value:
    """The output atom (``atom`` bytes, lane i = byte i, :func:`hdl.sdp.rdma.atom_layout`) of
    the merged element groups ``slots`` (``atom // lanes`` slots of ``lanes`` 16-bit elements,
    element j = slot ``j // lanes`` lane ``j % lanes``): byte j = element j's low byte (INT8),
    or bytes 2j, 2j + 1 = element j little-endian (``int16``, a 1-bit value; elements
    ``0 .. atom // 2 - 1``; format.rst "Feature Data Format"). Combinational."""
    def elem(j):
        return Value.cast(slots[j // lanes][j % lanes])
    out = Signal(data.ArrayLayout(signed(8), atom), name="packed")
    for b in range(atom):
        m.d.comb += out[b].eq(Mux(int16, elem(b // 2)[8 * (b % 2):8 * (b % 2) + 8],
                                  elem(b)[:8]))
    return out.as_value()


def core_lanes(cfg: NvdlaConfig) -> int:
    """Elements per cycle of the SDP datapath: the largest enabled X throughput (at least 1),
    capped at cfg.memory_atomic. Raises ValueError when it does not divide the atom."""
    t = max(1, cfg.sdp_bs_throughput if cfg.sdp_bs else 0, cfg.sdp_bn_throughput if cfg.sdp_bn else 0,
            cfg.sdp_ew_throughput if cfg.sdp_ew else 0)
    t = min(t, cfg.memory_atomic)
    if cfg.memory_atomic % t:
        raise ValueError(f"SDP throughput {t} does not divide the atom ({cfg.memory_atomic})")
    return t


class SdpCore(wiring.Component):
    """SDP datapath on streams of atoms (see the module docstring).

    Ports:
        i: In(stream of wide_atom_layout(cfg)) input atoms (32-bit elements); o: Out(stream of
            atom_layout(cfg)) output atoms (int8; in an INT16 layer int16 elements packed
            little endian, :func:`pack_atom`).
        int16: In(1), only when :func:`hdl.sdp.rdma.has_int16`: the layer is INT16 (module
            docstring); stable for a layer like the other configuration inputs.
        fp_cfg: In(:func:`hdl.sdp.fp16.fp_cfg_layout`), only when
            :func:`hdl.sdp.rdma.has_fp16`: the layer is FP16 and its FP16 controls (module
            docstring); stable for a layer.
        bs_op / bn_op (when cfg.sdp_bs / cfg.sdp_bn): In(stream of ArrayLayout(operand_layout(),
            atom)) one operand group per input atom (lane = channel % atom), consumed only when
            the sub-unit is on and takes an operand from memory.
        bs_cfg / bn_cfg: In(x_cfg_layout()); bs_sel / bn_sel: In(op_sel_layout()).
        bs_mem_en / bn_mem_en: Out(1): the sub-unit exists, is on and takes an operand from
            memory (its operand stream is consumed; its DMA must run).
        cvt_offset In(signed 32), cvt_scale In(signed 16), cvt_shift In(6).
        sat_count Out(range(lanes + 1)): output elements of the converter leaving in this cycle
            whose 17-bit intermediate saturated (D_PERF_OUT_SATURATION; lanes that carry a
            channel).
        ew_cfg In(:func:`hdl.sdp.y.y_cfg_layout`), ew_mem_en Out(1), ew_op (when cfg.sdp_ew) In(stream of the
            operand group), lut_p In(:func:`hdl.sdp.lut.params_layout`), LUT access lut_we /
            lut_table / lut_addr / lut_wdata In, lut_rdata Out(16), stat_counts Out (per
            :data:`hdl.sdp.lut.STAT_NAMES`): the Y sub-unit (:class:`hdl.sdp.y.YSubUnit`),
            idle without cfg.sdp_ew.
    All configuration inputs are held stable for a whole layer, set at least a cycle before
    its first input atom or operand group arrives (the join's enables are registered).

    Raises ValueError: see :func:`core_lanes`.
    """

    def __init__(self, cfg: NvdlaConfig):
        self.cfg = cfg
        self.lanes = core_lanes(cfg)
        self.subs = [s for s in ("bs", "bn") if getattr(cfg, f"sdp_{s}")]
        group = data.ArrayLayout(operand_layout(), cfg.memory_atomic)
        members = {
            "i": In(stream.Signature(wide_atom_layout(cfg))),
            "o": Out(stream.Signature(atom_layout(cfg))),
            "cvt_offset": In(signed(32)),
            "cvt_scale": In(signed(16)),
            "cvt_shift": In(6),
            "sat_count": Out(range(self.lanes + 1)),
        }
        for s in ("bs", "bn"):       # the X configuration ports exist in every configuration
            members[f"{s}_cfg"] = In(x_cfg_layout())
            members[f"{s}_sel"] = In(op_sel_layout())
            members[f"{s}_mem_en"] = Out(1)
        # Y (EW) and its LUT: ports in every configuration (idle without cfg.sdp_ew / sdp_lut)
        members.update({
            "ew_cfg": In(y_cfg_layout()), "ew_mem_en": Out(1), "lut_p": In(lut.params_layout()),
            "lut_we": In(1), "lut_table": In(1), "lut_addr": In(10), "lut_wdata": In(16),
            "lut_rdata": Out(16),
            "stat_counts": Out(data.ArrayLayout(range(self.lanes + 1), len(lut.STAT_NAMES))),
        })
        self.op_subs = self.subs + (["ew"] if cfg.sdp_ew else [])
        for s in self.op_subs:
            members[f"{s}_op"] = In(stream.Signature(group))
        self.half = has_int16(cfg)
        if self.half:
            members["int16"] = In(1)
        self.fp = has_fp16(cfg)
        if self.fp:
            members["fp_cfg"] = In(fp_cfg_layout())
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        atom = cfg.memory_atomic
        lanes = self.lanes
        group = data.ArrayLayout(operand_layout(), atom)
        wide = data.StructLayout({
            "x": data.ArrayLayout(signed(X_DATA_BITS), atom),
            **{s: group for s in self.op_subs}})
        narrow = narrow_layout(wide, atom // lanes)

        # 1. join data with the memory operands it needs
        m.submodules.join = join = Join({"d": wide_atom_layout(cfg),
                                         **{s: group for s in self.op_subs}})
        en = [Const(1, 1)]
        for s in self.subs:
            c, sel = getattr(self, f"{s}_cfg"), getattr(self, f"{s}_sel")
            need = getattr(self, f"{s}_mem_en")
            m.d.comb += need.eq(~c.bypass & ((sel.alu_mem & ~c.alu_bypass) |
                                             (sel.mul_mem & ~c.mul_bypass)))
            en.append(need)
        if cfg.sdp_ew:
            y = self.ew_cfg
            m.d.comb += self.ew_mem_en.eq(~y.bypass & ((y.alu.mem & ~y.alu_bypass) |
                                                       (y.mul.mem & ~y.mul_bypass)))
            en.append(self.ew_mem_en)
        # registered (issue 10: the configuration's decode ran into the join's ready); the
        # enables settle a cycle after the register group flips, long before a layer's first
        # atom and operands arrive through their DMAs; *_mem_en (the DMAs' start) stay direct
        op_en = Signal(max(1, len(en) - 1), name="op_en")
        m.d.sync += op_en.eq(Cat(*en[1:]))
        m.d.comb += join.en.eq(Cat(en[0], op_en[:len(en) - 1]))
        for s in self.op_subs:
            wiring.connect(m, wiring.flipped(getattr(self, f"{s}_op")), getattr(join, f"i_{s}"))
        # the data input's ready without its own valid (the join's includes it; the transfers
        # are the same): its source's valid (MRDMA's skid buffer, beside the DMA) then does not
        # run through the join into CACC's on-the-fly ready and SDP's atom counters (issue 36)
        ops_ok = Const(1, 1)
        for k, s in enumerate(self.op_subs):
            ops_ok = ops_ok & (getattr(self, f"{s}_op").valid | ~join.en[k + 1])
        m.d.comb += [join.i_d.valid.eq(self.i.valid), join.i_d.payload.eq(self.i.payload),
                     self.i.ready.eq(join.o.ready & ops_ok)]

        # 2. split into throughput-wide groups, then widen them and pick the operands
        if self.half:
            # INT16 layers: an atom's int16 elements are its lanes 0 .. atom/2 - 1, i.e. its
            # first max(1, atom / 2 / lanes) groups
            e16 = int16_elems(cfg)
            groups = Signal(range(atom // lanes + 1), name="groups")
            # (FP16 layers too: two-byte atoms)
            two = self.int16 | self.fp_cfg.fp16 if self.fp else self.int16
            m.d.comb += groups.eq(Mux(two, max(1, e16 // lanes), atom // lanes))
            m.submodules.split = split = Split(join.layout, atom // lanes, counted=True)
            m.d.comb += split.count.eq(groups)
        else:
            m.submodules.split = split = Split(join.layout, atom // lanes)
        wiring.connect(m, join.o, split.i)

        def widen(m, p):
            out = {"x": array_signal(m, narrow["x"].shape,
                                     [p.d[k] for k in range(lanes)], "x")}
            for s in self.subs:
                sel = getattr(self, f"{s}_sel")
                ops = Signal(narrow[s].shape, name=f"{s}_ops")
                for k in range(lanes):
                    m.d.comb += [ops[k].alu.eq(Mux(sel.alu_mem, p[s][k].alu, sel.alu)),
                                 ops[k].mul.eq(Mux(sel.mul_mem, p[s][k].mul, sel.mul))]
                out[s] = ops
            if cfg.sdp_ew:
                out["ew"] = p.ew            # raw memory operands: Y converts / selects them
            return out

        # skid buffers at the sub-units' input and output and before the merge cut the ready
        # chain through the Map stages (issue 10: from the merge into BRDMA's credit counter it
        # was SDP's critical path); the operand selection (a 2:1 mux after Split's group mux)
        # goes into the first one's registers directly (issue 36: a Map stage of its own was a
        # cycle of latency; Split's output and the skid buffer's ready are registers)
        m.submodules.skid_in = skid_in = SkidBuffer(narrow)
        m.d.comb += [skid_in.i.valid.eq(split.o.valid), split.o.ready.eq(skid_in.i.ready),
                     *[skid_in.i.payload[k].eq(v) for k, v in widen(m, split.o.payload).items()]]
        last = skid_in.o
        if self.fp:
            # FP16 layers: the elements to fp32 (hdl.sdp.fp16.input_stage), a stage that the
            # other layers skip (``fp_sel``: a register following the layer's precision, as
            # the bypass selects below)
            fp_sel = Signal(name="fp_sel")
            m.d.sync += fp_sel.eq(self.fp_cfg.fp16)
            m.submodules.fp_in = fin = input_stage(lanes, narrow, self.fp_cfg)
            out = stream.Signature(narrow).create(path=("fp_in_out",))
            m.d.comb += [
                fin.i.valid.eq(last.valid & fp_sel),
                fin.i.payload.eq(Mux(fp_sel, last.payload, 0)),
                last.ready.eq(Mux(fp_sel, fin.i.ready, out.ready)),
                out.valid.eq(Mux(fp_sel, fin.o.valid, last.valid)),
                out.payload.eq(Mux(fp_sel, fin.o.payload, last.payload)),
                fin.o.ready.eq(out.ready & fp_sel),
            ]
            last = out

        # 3. X1, X2 (a skid buffer between them: the ready chain through both sub-units' stages
        # was SDP's critical path on ECP5, 10.6 ns, mostly the routing of its fan-out; issue 10).
        # A bypassed sub-unit (D_DP_<X>_CFG.<X>_BYPASS: its elements pass unchanged, as its
        # stages would pass them) is skipped with the skid buffer before it: its six stages'
        # latency saved (issue 36: sdp_pdp_32x16x32_pass_through bypasses both). The selects
        # are registers following the configuration (held for the layer, set well before its
        # first group reaches them); they switch only between layers, when the pipeline is
        # empty (a layer completes only after its last atom left the core), so the order of
        # items never changes. Their muxes sit at skid buffers' inputs and in the ready chain
        # beside the stages' own (~valid | ready) terms.
        for i, s in enumerate(self.subs):
            xu = XSubUnit(lanes, narrow, s, fp=self.fp)
            m.submodules[f"x_{s}"] = xu
            m.d.comb += xu.cfg.eq(getattr(self, f"{s}_cfg"))
            if self.fp:
                m.d.comb += [xu.fp16.eq(self.fp_cfg.fp16),
                             xu.nan_to_zero.eq(self.fp_cfg.nan_to_zero)]
            head = xu.i
            if i:
                m.submodules[f"skid_{s}"] = skid = SkidBuffer(narrow)
                wiring.connect(m, skid.o, xu.i)
                head = skid.i
            skip = Signal(name=f"{s}_skip")
            m.d.sync += skip.eq(getattr(self, f"{s}_cfg").bypass)
            out = stream.Signature(narrow).create(path=(f"{s}_out",))
            m.d.comb += [
                head.valid.eq(last.valid & ~skip), head.payload.eq(last.payload),
                last.ready.eq(Mux(skip, out.ready, head.ready)),
                out.valid.eq(Mux(skip, last.valid, xu.o.valid)),
                out.payload.eq(Mux(skip, last.payload, xu.o.payload)),
                xu.o.ready.eq(out.ready & ~skip),
            ]
            last = out
        if cfg.sdp_ew:
            m.submodules.y = yu = YSubUnit(lanes, narrow, "ew", lut=cfg.sdp_lut,
                                           half_lanes=int16_elems(cfg) if self.half else None,
                                           fp=self.fp)
            if self.half:
                m.d.comb += yu.int16.eq(self.int16)
            if self.fp:
                m.d.comb += [yu.fp16.eq(self.fp_cfg.fp16),
                             yu.nan_to_zero.eq(self.fp_cfg.nan_to_zero)]
            m.d.comb += [yu.cfg.eq(self.ew_cfg), yu.lut_p.eq(self.lut_p),
                         yu.lut_we.eq(self.lut_we), yu.lut_table.eq(self.lut_table),
                         yu.lut_addr.eq(self.lut_addr), yu.lut_wdata.eq(self.lut_wdata),
                         self.lut_rdata.eq(yu.lut_rdata), self.stat_counts.eq(yu.stat_counts)]
            wiring.connect(m, last, yu.i)
            last = yu.o

        # 4. output converter
        products = data.ArrayLayout(signed(_PROD_BITS), lanes)
        # INT16: 16-bit outputs (saturated to 8 bits in INT8 layers)
        out_group = data.ArrayLayout(signed(16 if self.half else cfg.bpe), lanes)

        # the product as partial products (one 18 x 18 DSP multiplier each), registered before
        # their sum (issue 10: the subtraction, the multipliers and the 49-bit sum in one stage)
        diff_shape = signed(X_DATA_BITS + 1)
        parts = data.ArrayLayout(partial_products_layout(diff_shape, signed(16)), lanes)

        def scale(m, p):
            """partial products of (x - offset) * scale per lane"""
            pps = Signal(parts, name="cvt_parts")
            for k in range(lanes):
                d = (p.x[k] - self.cvt_offset)[:diff_shape.width].as_signed()
                for i, v in enumerate(partial_products(d, self.cvt_scale)):
                    m.d.comb += pps[k][f"p{i}"].eq(v)
            return pps

        def scale_sum(m, p):
            """(x - offset) * scale per lane, exact (49 bits)."""
            return [sum_partial_products(p[k]) for k in range(lanes)]

        trt_layout = data.StructLayout({"v": out_group, "sat": lanes})
        biased = data.ArrayLayout(round_bias_shape(signed(_PROD_BITS)), lanes)

        def bias(m, p):
            """the products plus their rounding bias (:func:`hdl.lib.fixed.round_bias`)"""
            return [round_bias(p[k], self.cvt_shift) for k in range(lanes)]

        def round_saturate(m, p):
            """round half away from zero by cvt_shift, saturate to the element width; ``sat``:
            the rounded value left NVIDIA's 17-bit intermediate range (the converter's
            saturation flag, NV_NVDLA_SDP_HLS_C_int.v: NV_NVDLA_HLS_shiftrightsatsu sat_out of
            the 49 -> 17 bit truncation, 0 for shifts >= 49), counted by D_PERF_OUT_SATURATION."""
            vs, sats = [], []
            for k in range(lanes):
                q = round_shift(p[k], self.cvt_shift, signed(_PROD_BITS))
                sat = ~in_range(q, 17)
                if self.half:
                    # INT16: saturated to 16 bits (the model's output_convert, 8 * 2 bits);
                    # a lane beyond an INT16 atom's elements carries no channel: not counted
                    vs.append(Mux(self.int16, saturate(q, 16), saturate(q, cfg.bpe)))
                    if k >= int16_elems(cfg):
                        sat = sat & ~self.int16
                else:
                    vs.append(saturate(q, cfg.bpe))
                sats.append(sat)
            return {"v": array_signal(m, out_group, vs, "cvt_out"), "sat": Cat(*sats)}

        m.submodules.skid_mid = skid_mid = SkidBuffer(narrow)
        m.submodules.cvt_mul = mul = Map(narrow, parts, scale)
        m.submodules.cvt_sum = msum = Map(parts, products, scale_sum)
        m.submodules.cvt_rnd = rnd = Map(products, biased, bias)
        m.submodules.cvt_trt = trt = Map(biased, trt_layout, round_saturate)
        m.submodules.skid_out = skid_out = SkidBuffer(trt_layout)
        wiring.connect(m, last, skid_mid.i)
        if self.fp:
            # FP16 layers: the FP16 output conversion (hdl.sdp.fp16.output_stages) instead
            eql = Const(0, 1)
            if cfg.sdp_ew:
                y = self.ew_cfg
                eql = ~y.bypass & ~y.alu_bypass & (y.alu_algo == ALU_EQL)
            fo_i, fo_o = output_stages(m, lanes, narrow, trt_layout, self.fp_cfg, eql)
            route_in(m, skid_mid.o, fp_sel, mul.i, fo_i)
        else:
            wiring.connect(m, skid_mid.o, mul.i)
        wiring.connect(m, mul.o, msum.i)
        wiring.connect(m, msum.o, rnd.i)
        wiring.connect(m, rnd.o, trt.i)
        if self.fp:
            route_out(m, fp_sel, trt.o, fo_o, skid_out.i)
        else:
            wiring.connect(m, trt.o, skid_out.i)
        fire = trt.o.valid & trt.o.ready
        m.d.comb += self.sat_count.eq(
            Mux(fire, sum((trt.o.payload.sat[k] for k in range(1, lanes)),
                          trt.o.payload.sat[0].as_unsigned()), 0))

        # 5. merge into atoms (the merged groups have the bit layout of an atom)
        # (Merge registers the atom; its bits are the output atom's: no stage after it, issue 36)
        m.submodules.merge = merge = Merge(out_group, atom // lanes)
        if self.half:
            # 16-bit slots: the atom's bytes are picked from them by INT8 / INT16 (a 2:1 mux
            # after the Merge register); an INT16 atom of max(1, atom / 2 / lanes) groups
            payload = pack_atom(m, merge.o.payload, lanes, atom, two)
            m.d.comb += merge.count.eq(groups)
        else:
            payload = merge.o.payload.as_value()
            m.d.comb += merge.count.eq(atom // lanes)
        m.d.comb += [merge.i.valid.eq(skid_out.o.valid), merge.i.payload.eq(skid_out.o.payload.v),
                     skid_out.o.ready.eq(merge.i.ready),
                     self.o.valid.eq(merge.o.valid), self.o.payload.eq(payload),
                     merge.o.ready.eq(self.o.ready)]
        return m
