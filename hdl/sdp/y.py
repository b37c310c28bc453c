"""SDP Y (EW) sub-unit: operand converters -> multiplier -> ALU -> LUT on 32-bit elements
(v1_ias_unit_description.rst "SDP", "Function Description": "Block Y is primarily designed for
element-wise ... An extra LUT"; v1_ias_programming_guide.rst "SDP programming";
v1_ias_lut-programming.rst; v1_ias_precision.rst).

Per element ``x`` (signed 32) with the raw 16-bit memory operands ``alu`` / ``mul`` (ERDMA) or
the 32-bit register operands D_DP_EW_ALU/MUL_SRC_VALUE:

* operand (per ALU / MUL): from memory (EW_<K>_SRC = MEM) it passes its converter unless
  EW_<K>_CVT_BYPASS: ``sat32(round((op - CVT_OFFSET) * CVT_SCALE >> CVT_TRUNCATE))`` (33-bit
  difference, 49-bit product, 6-bit shift, rounding half away from zero); from the register it
  is the 32-bit value, not converted.
* multiplier (skipped when EW_MUL_BYPASS): ``sat32(round(x * op >> EW_TRUNCATE))`` on the exact
  64-bit product (a 10-bit shift, 64 or more gives 0); PReLU (EW_MUL_PRELU) passes ``x >= 0``.
* ALU (skipped when EW_ALU_BYPASS): MAX, MIN, SUM (saturated to 32 bits), EQL (``x != op``).
* LUT (skipped when EW_LUT_BYPASS; :mod:`hdl.sdp.lut`, only when built with ``lut=True``).
* EW_BYPASS: the element passes unchanged.
* compare mode (EW on, ALU on, EW_ALU_ALGO = EQL): the result's low ``out_bits`` bits,
  sign-extended. NVIDIA's output converter passes its input's low 16 bits in compare mode, of
  which an int8 output keeps the low 8 (nv_small NV_NVDLA_SDP_HLS_C_int.v ``cfg_mode_eql``,
  NV_NVDLA_SDP_HLS_c.v); :class:`hdl.sdp.Sdp` sets its converter to the identity then, which
  passes these values unchanged and never saturates (NVIDIA flags no saturation either). An
  INT16 layer (``half_lanes``) keeps the low 16 bits, all that converter passes (the model's
  ``SdpCore.run``).

Every width above is the same in INT16 layers (nv_full): INT8's arithmetic on int16 inputs
sign-extended to 32 bits (the model's ``SdpCore._check`` / ``run``).

Facts from NVIDIA's C model (cmod/hls/sdp/sdp_y.cpp, sdp_y_core.cpp, sdp_y_cvt.cpp, the source of
the Y RTL), recorded with citations in the bit-exact model's docstring (verif/model/sdp.py
``_y_subunit``, ``_ew_operand``): MUL before ALU, the converter widths, the 32-bit register
operands.

Stages (each a :class:`hdl.lib.stream.Map`): operand converters, multiplier, truncate + ALU,
then with the LUT: index, table read + interpolation + choice. Latency 3 cycles (5 with the
LUT), one item of ``lanes`` elements per cycle.

LUT RAMs (:class:`amaranth.lib.memory.Memory`, 65 LE + 257 LO entries of 16 bits): one write
port and one read port for the CSB access (S_LUT_ACCESS_CFG/DATA, decoded by :class:`hdl.sdp.Sdp`),
two combinational read ports per table and lane for the interpolation.

FP16 layers (nv_full; built with ``fp``): their own stages (:func:`hdl.sdp.fp16.y_stages` and
:func:`hdl.sdp.fp16.lut_stages`: fp32 MUL and ALU, the LUT in fp17 / fp32) between the same
ports, chosen per layer; their LUT reads the same RAMs through the interpolation's read ports
(addresses chosen by the layer's precision).
"""
from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hdl.lib.fixed import saturate, sign_extend, truncate
from hdl.lib.stream import Map
from hdl.sdp import lut
from hdl.sdp.x import ALU_EQL, ALU_MAX, ALU_MIN, X_DATA_BITS, array_signal, operand_layout
from hdl.sdp.fp16 import lut_stages, route_in, route_out, y_stages

__all__ = ["y_cfg_layout", "y_operand_cfg_layout", "YSubUnit"]

_LUT_PARAMS = lut.params_layout()   # (YSubUnit's ``lut`` argument shadows the module there)
_STATS = lut.STAT_NAMES


def y_operand_cfg_layout() -> data.StructLayout:
    """One EW operand's configuration (D_DP_EW_<K>_CFG / _SRC_VALUE / _CVT_*_VALUE): ``mem``
    (SRC = MEM), ``cvt_bypass``, ``operand`` (signed 32, the register operand), ``cvt_offset``
    (signed 32), ``cvt_scale`` (signed 16), ``cvt_truncate`` (6 bits)."""
    return data.StructLayout({"mem": 1, "cvt_bypass": 1, "operand": signed(32),
                              "cvt_offset": signed(32), "cvt_scale": signed(16),
                              "cvt_truncate": 6})


def y_cfg_layout() -> data.StructLayout:
    """Y configuration (D_DP_EW_CFG and friends): ``bypass``, ``alu_bypass``, ``alu_algo``
    (2 bits), ``mul_bypass``, ``mul_prelu``, ``lut_bypass``, ``truncate`` (EW_TRUNCATE, 10
    bits), ``alu`` / ``mul``: :func:`y_operand_cfg_layout`."""
    return data.StructLayout({
        "bypass": 1, "alu_bypass": 1, "alu_algo": 2, "mul_bypass": 1, "mul_prelu": 1,
        "lut_bypass": 1, "truncate": 10,
        "alu": y_operand_cfg_layout(), "mul": y_operand_cfg_layout(),
    })


class YSubUnit(wiring.Component):
    """The Y (EW) sub-unit on ``lanes`` elements per item (see the module docstring).

    Args:
        lanes: elements per item.
        layout: payload ``data.StructLayout`` with a field ``x`` (``ArrayLayout(signed(32),
            lanes)``) and a field ``op_field`` (``ArrayLayout(operand_layout(), lanes)``, the
            raw memory operands; ignored for a register operand); other fields ride along.
        op_field: name of the operand field.
        lut: build the LUT (cfg.sdp_lut); without it EW_LUT_BYPASS is taken as set.
        out_bits: element width of the unit's output (cfg.bpe; nv_small 8), kept in compare
            mode.
        half_lanes: None, or (a configuration with runtime INT16, :class:`hdl.sdp.Sdp`) the
            elements of an INT16 atom (``atom_bytes // 2``): adds the port ``int16`` In(1),
            stable while items flow: 1 in an INT16 layer, where compare mode keeps the result's
            low 16 bits (the model's ``SdpCore.run``: ``x & 0xFFFF`` sign-extended; NVIDIA's
            converter passes 16 bits, module docstring) and lanes ``>= half_lanes`` (present
            when ``lanes`` exceeds an INT16 atom; they carry no channel) are left out of
            ``stat_counts``.
        fp: also build the FP16 stages (a configuration with runtime FP16; needs
            ``half_lanes``): adds the ports ``fp16`` In(1) (the layer is FP16: ``x`` holds fp32
            patterns, computed by those stages; latency :data:`hdl.sdp.fp16.Y_LATENCY`, plus
            :data:`hdl.sdp.fp16.LUT_LATENCY` with the LUT; the output's fields other than
            ``x`` are 0, and compare mode's result is kept whole) and ``nan_to_zero`` In(1),
            both stable while items flow; lanes ``>= half_lanes`` are left out of
            ``stat_counts`` in FP16 layers.

    Ports: ``i`` In(stream of ``layout``); ``o`` Out(stream of ``layout``) with ``x`` replaced;
    ``cfg`` In(:func:`y_cfg_layout`); ``lut_p`` In(:func:`hdl.sdp.lut.params_layout`), both
    stable while items flow; LUT access: ``lut_we`` In(1), ``lut_table`` In(1) (0 LE, 1 LO),
    ``lut_addr`` In(10), ``lut_wdata`` In(16) (writes outside the table are ignored),
    ``lut_rdata`` Out(16) (entry ``lut_addr``, 0 outside the table); ``stat_counts``
    Out(ArrayLayout(range(lanes + 1), 5)): per :data:`hdl.sdp.lut.STAT_NAMES`, how many LUT
    samples of the item leaving ``o`` in this cycle fall in each class (0 when none leaves, the
    LUT is bypassed or the sub-unit is bypassed).

    Raises:
        ValueError: ``lanes`` < 1, ``out_bits`` not in 1..32, or ``layout`` lacks ``x`` /
            ``op_field`` of the right shapes.
    """

    def __init__(self, lanes: int, layout: data.StructLayout, op_field: str = "ew", *,
                 lut: bool = True, out_bits: int = 8, half_lanes: int | None = None,
                 fp: bool = False):
        if lanes < 1:
            raise ValueError(f"lanes must be >= 1, not {lanes}")
        if not 1 <= out_bits <= 32:
            raise ValueError(f"out_bits must be in 1..32, not {out_bits}")
        self.out_bits = out_bits
        self.half_lanes = half_lanes
        fields = dict(layout)
        want = {"x": data.ArrayLayout(signed(X_DATA_BITS), lanes),
                op_field: data.ArrayLayout(operand_layout(), lanes)}
        for name, shape in want.items():
            if name not in fields or fields[name].shape != shape:
                raise ValueError(f"layout field {name!r} must be {shape!r}")
        self.lanes, self.layout, self.op_field, self.has_lut = lanes, layout, op_field, lut
        self.fp = fp
        if fp and half_lanes is None:
            raise ValueError("fp needs half_lanes (FP16 layers have two-byte atoms)")
        super().__init__({
            "i": In(stream.Signature(layout)),
            "o": Out(stream.Signature(layout)),
            "cfg": In(y_cfg_layout()),
            "lut_p": In(_LUT_PARAMS),
            "lut_we": In(1), "lut_table": In(1), "lut_addr": In(10), "lut_wdata": In(16),
            "lut_rdata": Out(16),
            "stat_counts": Out(data.ArrayLayout(range(lanes + 1), len(_STATS))),
            **({"int16": In(1)} if half_lanes is not None else {}),
            **({"fp16": In(1), "nan_to_zero": In(1)} if fp else {}),
        })

    def elaborate(self, platform):
        m = Module()
        n, c, layout, opf = self.lanes, self.cfg, self.layout, self.op_field
        arr32 = data.ArrayLayout(signed(32), n)
        s1 = data.StructLayout({"alu": arr32, "mul": arr32, "pay": layout})
        s2 = data.StructLayout({"alu": arr32, "prod": data.ArrayLayout(signed(64), n),
                                "pay": layout})
        s3 = data.StructLayout({"v": arr32, "pay": layout})

        def operand(raw, oc):
            conv = truncate((raw - oc.cvt_offset) * oc.cvt_scale, oc.cvt_truncate, 32)
            return Mux(oc.mem, Mux(oc.cvt_bypass, raw, conv), oc.operand)

        def cvt(m, pay):
            return {"alu": array_signal(m, arr32, [operand(pay[opf][k].alu, c.alu)
                                                   for k in range(n)], "alu_op"),
                    "mul": array_signal(m, arr32, [operand(pay[opf][k].mul, c.mul)
                                                   for k in range(n)], "mul_op"),
                    "pay": pay}

        def mul(m, s):
            return {"alu": s.alu, "pay": s.pay,
                    "prod": array_signal(m, s2["prod"].shape,
                                         [s.pay.x[k] * s.mul[k] for k in range(n)], "prod")}

        def trt_alu(m, s):
            out = []
            for k in range(n):
                x = s.pay.x[k]
                t = truncate(s.prod[k], c.truncate, 32)
                y = Mux(c.mul_bypass, x, Mux(c.mul_prelu & (x >= 0), x, t))
                op = s.alu[k]
                r = Mux(c.alu_algo == ALU_MAX, Mux(y > op, y, op),
                        Mux(c.alu_algo == ALU_MIN, Mux(y < op, y, op),
                            Mux(c.alu_algo == ALU_EQL, y != op, saturate(y + op, 32))))
                out.append(Mux(c.alu_bypass, y, r))
            return {"v": array_signal(m, arr32, out, "alu_res"), "pay": s.pay}

        m.submodules.cvt = st_cvt = Map(layout, s1, cvt)
        m.submodules.mul = st_mul = Map(s1, s2, mul)
        m.submodules.alu = st_alu = Map(s2, s3, trt_alu)
        if self.fp:
            # FP16 layers: the FP16 stages (hdl.sdp.fp16.y_stages, then lut_stages) beside
            # these, chosen by a register following the layer's precision (held for the layer,
            # set well before its first item; it changes only with no item in flight)
            fsel = Signal(name="fp_sel")
            m.d.sync += fsel.eq(self.fp16)
            fi, fo = y_stages(m, n, layout, opf, c, self.nan_to_zero)
            route_in(m, self.i, fsel, st_cvt.i, fi)
        else:
            wiring.connect(m, wiring.flipped(self.i), st_cvt.i)
        wiring.connect(m, st_cvt.o, st_mul.i)
        wiring.connect(m, st_mul.o, st_alu.i)
        last = st_alu.o
        stat_shape = data.ArrayLayout(unsigned(5), n)

        if self.has_lut:
            p = self.lut_p
            # ---- RAMs ----
            tables = {}
            for name, size, tid in (("le", lut.LE_ENTRIES, 0), ("lo", lut.LO_ENTRIES, 1)):
                mem = Memory(shape=signed(16), depth=size, init=[])
                m.submodules[f"lut_{name}"] = mem
                wp = mem.write_port()
                m.d.comb += [wp.addr.eq(self.lut_addr), wp.data.eq(self.lut_wdata),
                             wp.en.eq(self.lut_we & (self.lut_table == tid) &
                                      (self.lut_addr < size))]
                rp = mem.read_port(domain="comb")
                m.d.comb += rp.addr.eq(self.lut_addr)
                tables[name] = (mem, size, Mux(self.lut_addr < size, rp.data, 0))
            m.d.comb += self.lut_rdata.eq(Mux(self.lut_table, tables["lo"][2], tables["le"][2]))

            # ---- index ----
            s4 = data.StructLayout({
                "v": arr32, "pay": layout,
                "le": data.ArrayLayout(lut.index_layout(lut.LE_ENTRIES), n),
                "lo": data.ArrayLayout(lut.index_layout(lut.LO_ENTRIES), n)})

            def index(m, s):
                le_sig = Signal(s4["le"].shape, name="le_idx")
                lo_sig = Signal(s4["lo"].shape, name="lo_idx")
                for k in range(n):
                    le = lut.table_index(m, s.v[k], p.le_start, lut.LE_ENTRIES,
                                         p.le_index_select, exponential=p.le_exp,
                                         index_offset=p.le_index_offset)
                    lo = lut.table_index(m, s.v[k], p.lo_start, lut.LO_ENTRIES,
                                         p.lo_index_select)
                    m.d.comb += [le_sig[k][f].eq(v) for f, v in le.items()]
                    m.d.comb += [lo_sig[k][f].eq(v) for f, v in lo.items()]
                return {"v": s.v, "pay": s.pay, "le": le_sig, "lo": lo_sig}

            # LE underflow origin: START + (1 << LE_INDEX_OFFSET) as a 32-bit value for an
            # exponential table with 0 <= offset < 32 (Y_lut.v; model sdp_lut)
            le_umin = Signal(signed(34))
            off = p.le_index_offset
            bias = Signal(signed(32))
            with m.If(p.le_exp & (off >= 0) & (off < 32)):
                m.d.comb += bias.eq((Const(1, 32) << off.as_unsigned()[:5])[:32].as_signed())
            m.d.comb += le_umin.eq(p.le_start + bias)

            ports = {name: [(tables[name][0].read_port(domain="comb"),
                             tables[name][0].read_port(domain="comb")) for _ in range(n)]
                     for name in ("le", "lo")}
            # with FP16, the FP16 LUT reads the same tables through these ports in its layers
            # (the integer stages are idle then): each port's address is chosen by the layer's
            # precision; ``int_addr`` / ``fp_ports`` hold each side's (base, next) addresses
            if self.fp:
                int_addr, fp_ports = {}, {}
                for name in ("le", "lo"):
                    size = tables[name][1]
                    int_addr[name], fp_ports[name] = [], []
                    for k, (r0, r1) in enumerate(ports[name]):
                        ia = (Signal(range(size), name=f"{name}_ia0_{k}"),
                              Signal(range(size), name=f"{name}_ia1_{k}"))
                        fa = (Signal(range(size), name=f"{name}_fa0_{k}"),
                              Signal(range(size), name=f"{name}_fa1_{k}"))
                        m.d.comb += [r0.addr.eq(Mux(fsel, fa[0], ia[0])),
                                     r1.addr.eq(Mux(fsel, fa[1], ia[1]))]
                        int_addr[name].append(ia)
                        fp_ports[name].append((fa[0], fa[1], r0.data, r1.data))
            s5 = data.StructLayout({"v": arr32, "pay": layout, "stat": stat_shape})

            def interp(m, s):
                outs, stats = [], []
                for k in range(n):
                    ys = {}
                    for name in ("le", "lo"):
                        size = tables[name][1]
                        r0, r1 = ports[name][k]
                        ix = s[name][k]
                        a0, a1 = int_addr[name][k] if self.fp else (r0.addr, r1.addr)
                        m.d.comb += [a0.eq(ix.addr),
                                     a1.eq(Mux(ix.addr == size - 1, size - 1, ix.addr + 1))]
                        umin = le_umin if name == "le" else p.lo_start
                        ys[name] = lut.table_output(
                            s.v[k], ix, r0.data, r1.data, umin, getattr(p, f"{name}_end"),
                            getattr(p, f"{name}_uflow_scale"), getattr(p, f"{name}_uflow_shift"),
                            getattr(p, f"{name}_oflow_scale"), getattr(p, f"{name}_oflow_shift"))
                    use_lo, st = lut.select(s.le[k], s.lo[k], p)
                    outs.append(Mux(c.lut_bypass, s.v[k], Mux(use_lo, ys["lo"], ys["le"])))
                    off = c.lut_bypass | c.bypass
                    if self.half_lanes is not None and k >= self.half_lanes:
                        off = off | self.int16          # no channel in an INT16 atom
                    stats.append(Mux(off, 0, st))
                return {"v": array_signal(m, arr32, outs, "lut_res"), "pay": s.pay,
                        "stat": array_signal(m, stat_shape, stats, "lut_stat")}

            m.submodules.lut_index = st_idx = Map(s3, s4, index)
            m.submodules.lut_interp = st_int = Map(s4, s5, interp)
            wiring.connect(m, last, st_idx.i)
            wiring.connect(m, st_idx.o, st_int.i)
            last = st_int.o
            stat_src = st_int.o.payload.stat
            if self.fp:
                li, fo_l = lut_stages(m, n, p, c, fp_ports, self.half_lanes)
                wiring.connect(m, fo, li)
                fo = fo_l
        else:
            stat_src = None

        eql = Signal()          # compare mode (the sub-unit's bypass is applied below)
        m.d.comb += eql.eq(~c.alu_bypass & (c.alu_algo == ALU_EQL))

        def out(m, s):
            fields = {name: s.pay[name] for name, _ in layout if name != "x"}

            def kept(v):
                """the low bits compare mode keeps (16 in an INT16 layer)"""
                low = sign_extend(v, self.out_bits, 32)
                if self.half_lanes is None:
                    return low
                return Mux(self.int16, sign_extend(v, 16, 32), low)
            xs = [Mux(c.bypass, s.pay.x[k], Mux(eql, kept(s.v[k]), s.v[k])) for k in range(n)]
            return {"x": array_signal(m, layout["x"].shape, xs, "y_res"), **fields}

        # the output selection is combinational on the last stage's register (no extra latency)
        o = self.o
        src = last
        res = Signal(layout)
        vals = out(m, src.payload)
        m.d.comb += [res[k].eq(v) for k, v in vals.items()]
        if self.fp:
            # FP16: EW_BYPASS passes the input, else the result (compare mode's 0 / 1, or what
            # the LUT made of it, whole: the FP16 output conversion keeps its low 16 bits);
            # the other payload fields are not carried through the FP16 stages (0 here)
            fres = Signal(layout)
            m.d.comb += [fres.x[k].eq(Mux(c.bypass, fo.payload.x[k], fo.payload.v[k]))
                         for k in range(n)]
            route_out(m, fsel, src, fo, o, payloads=(res, fres))
            fire = src.valid & src.ready
            ffire = fo.valid & fo.ready
        else:
            m.d.comb += [o.valid.eq(src.valid), o.payload.eq(res), src.ready.eq(o.ready)]
            fire = src.valid & src.ready
        for j in range(len(lut.STAT_NAMES)):
            if stat_src is None:
                m.d.comb += self.stat_counts[j].eq(0)
            else:
                cnt = sum((stat_src[k][j] for k in range(1, n)), stat_src[0][j].as_unsigned())
                if self.fp:
                    fst = fo.payload.stat
                    fcnt = sum((fst[k][j] for k in range(1, n)), fst[0][j].as_unsigned())
                    m.d.comb += self.stat_counts[j].eq(Mux(fire, cnt, 0) | Mux(ffire, fcnt, 0))
                else:
                    m.d.comb += self.stat_counts[j].eq(Mux(fire, cnt, 0))
        return m

