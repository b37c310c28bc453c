"""SDP core datapath, memory-to-memory mode: input atoms (MRDMA) joined with the X1/X2 operand
groups (BRDMA/NRDMA), split into throughput-wide element groups, X1 (BS) -> X2 (BN) -> output
converter, merged back into atoms for WDMA (v1_ias_unit_description.rst "SDP", block diagram
M -> X1 -> X2 -> Y -> C; Y/EW is not implemented here).

Stages (all :mod:`hdl.lib.stream` / :mod:`hdl.sdp.gearbox` valid/ready stages):

1. :class:`hdl.sdp.gearbox.Join` of the data atom with the BS and BN operand groups (each
   waited for only when that sub-unit takes an operand from memory).
2. :class:`hdl.sdp.gearbox.Split` into groups of ``lanes`` elements (``lanes`` = the largest of
   cfg.sdp_bs_throughput / sdp_bn_throughput, capped at the atom; nv_small: 1 element per cycle,
   like NVIDIA's nv_small SDP), then a :class:`hdl.lib.stream.Map` that sign-extends the int8
   elements to 32 bits and selects every operand: from memory (``*_mem``) or the register
   operand (D_DP_<X>_ALU/MUL_SRC_VALUE).
3. X1, X2: :class:`hdl.sdp.x.XSubUnit` (3 stages each), present when cfg.sdp_bs / cfg.sdp_bn.
4. output converter, two Map stages: ``(x - offset) * scale`` exact on 49 bits, then
   ``saturate_int8(round(p / 2**shift))`` (rounding half away from zero,
   :func:`hdl.lib.fixed.truncate`; v1_ias_precision.rst "Convertor"; NVIDIA's RTL saturates to
   17 bits and then to 8, the same result).
5. :class:`hdl.sdp.gearbox.Merge` back into atoms.

Offset 0, scale 1, shift 0 with both X bypassed is the identity. Throughput ``lanes`` elements
per cycle (one atom every ``atom / lanes`` cycles).
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.config import NvdlaConfig
from hdl.lib.fixed import sign_extend, truncate
from hdl.lib.stream import Map
from hdl.lib.gearbox import Join, Merge, Split, narrow_layout
from hdl.sdp.rdma import atom_layout
from hdl.sdp.x import X_DATA_BITS, XSubUnit, array_signal, operand_layout, x_cfg_layout

__all__ = ["SdpCore", "op_sel_layout", "core_lanes"]

_PROD_BITS = 49          # (int32 - int32) * int16: 33 x 16 bits, exact


def op_sel_layout() -> data.StructLayout:
    """Operand selection of one X sub-unit: ``alu_mem`` / ``mul_mem`` (D_DP_<X>_ALU/MUL_CFG
    <X>_ALU/MUL_SRC = MEM), ``alu`` / ``mul`` the signed 16-bit register operands."""
    return data.StructLayout({"alu_mem": 1, "mul_mem": 1,
                              "alu": signed(16), "mul": signed(16)})


def core_lanes(cfg: NvdlaConfig) -> int:
    """Elements per cycle of the SDP datapath: the largest enabled X throughput (at least 1),
    capped at cfg.memory_atomic. Raises ValueError when it does not divide the atom."""
    t = max(1, cfg.sdp_bs_throughput if cfg.sdp_bs else 0, cfg.sdp_bn_throughput if cfg.sdp_bn else 0)
    t = min(t, cfg.memory_atomic)
    if cfg.memory_atomic % t:
        raise ValueError(f"SDP throughput {t} does not divide the atom ({cfg.memory_atomic})")
    return t


class SdpCore(wiring.Component):
    """SDP datapath on streams of atoms (see the module docstring).

    Ports:
        i: In(stream of atom_layout(cfg)) input atoms; o: Out(stream of atom_layout(cfg)).
        bs_op / bn_op (when cfg.sdp_bs / cfg.sdp_bn): In(stream of ArrayLayout(operand_layout(),
            atom)) one operand group per input atom (lane = channel % atom), consumed only when
            the sub-unit is on and takes an operand from memory.
        bs_cfg / bn_cfg: In(x_cfg_layout()); bs_sel / bn_sel: In(op_sel_layout()).
        bs_mem_en / bn_mem_en: Out(1): the sub-unit exists, is on and takes an operand from
            memory (its operand stream is consumed; its DMA must run).
        cvt_offset In(signed 32), cvt_scale In(signed 16), cvt_shift In(6).
    All configuration inputs are held stable for a whole layer.

    Raises ValueError: see :func:`core_lanes`.
    """

    def __init__(self, cfg: NvdlaConfig):
        self.cfg = cfg
        self.lanes = core_lanes(cfg)
        self.subs = [s for s in ("bs", "bn") if getattr(cfg, f"sdp_{s}")]
        group = data.ArrayLayout(operand_layout(), cfg.memory_atomic)
        members = {
            "i": In(stream.Signature(atom_layout(cfg))),
            "o": Out(stream.Signature(atom_layout(cfg))),
            "cvt_offset": In(signed(32)),
            "cvt_scale": In(signed(16)),
            "cvt_shift": In(6),
        }
        for s in ("bs", "bn"):       # the X configuration ports exist in every configuration
            members[f"{s}_cfg"] = In(x_cfg_layout())
            members[f"{s}_sel"] = In(op_sel_layout())
            members[f"{s}_mem_en"] = Out(1)
        for s in self.subs:
            members[f"{s}_op"] = In(stream.Signature(group))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        atom = cfg.memory_atomic
        lanes = self.lanes
        group = data.ArrayLayout(operand_layout(), atom)
        wide = data.StructLayout({
            "x": data.ArrayLayout(signed(X_DATA_BITS), atom),
            **{s: group for s in self.subs}})
        narrow = narrow_layout(wide, atom // lanes)

        # 1. join data with the memory operands it needs
        m.submodules.join = join = Join({"d": atom_layout(cfg), **{s: group for s in self.subs}})
        en = [Const(1, 1)]
        for s in self.subs:
            c, sel = getattr(self, f"{s}_cfg"), getattr(self, f"{s}_sel")
            need = getattr(self, f"{s}_mem_en")
            m.d.comb += need.eq(~c.bypass & ((sel.alu_mem & ~c.alu_bypass) |
                                             (sel.mul_mem & ~c.mul_bypass)))
            en.append(need)
        m.d.comb += join.en.eq(Cat(*en))
        wiring.connect(m, wiring.flipped(self.i), join.i_d)
        for s in self.subs:
            wiring.connect(m, wiring.flipped(getattr(self, f"{s}_op")), getattr(join, f"i_{s}"))

        # 2. split into throughput-wide groups, then widen them and pick the operands
        m.submodules.split = split = Split(join.layout, atom // lanes)
        wiring.connect(m, join.o, split.i)

        def widen(m, p):
            out = {"x": array_signal(m, narrow["x"].shape,
                                     [sign_extend(p.d[k], cfg.bpe, X_DATA_BITS)
                                      for k in range(lanes)], "x")}
            for s in self.subs:
                sel = getattr(self, f"{s}_sel")
                ops = Signal(narrow[s].shape, name=f"{s}_ops")
                for k in range(lanes):
                    m.d.comb += [ops[k].alu.eq(Mux(sel.alu_mem, p[s][k].alu, sel.alu)),
                                 ops[k].mul.eq(Mux(sel.mul_mem, p[s][k].mul, sel.mul))]
                out[s] = ops
            return out

        m.submodules.widen = wid = Map(split.narrow, narrow, widen)
        wiring.connect(m, split.o, wid.i)
        last = wid.o

        # 3. X1, X2
        for s in self.subs:
            xu = XSubUnit(lanes, narrow, s)
            m.submodules[f"x_{s}"] = xu
            m.d.comb += xu.cfg.eq(getattr(self, f"{s}_cfg"))
            wiring.connect(m, last, xu.i)
            last = xu.o

        # 4. output converter
        products = data.ArrayLayout(signed(_PROD_BITS), lanes)
        out_group = data.ArrayLayout(signed(cfg.bpe), lanes)

        def scale(m, p):
            """(x - offset) * scale per lane, exact (49 bits)."""
            return [(p.x[k] - self.cvt_offset) * self.cvt_scale for k in range(lanes)]

        def round_saturate(m, p):
            """round half away from zero by cvt_shift, saturate to the element width."""
            return [truncate(p[k], self.cvt_shift, cfg.bpe) for k in range(lanes)]

        m.submodules.cvt_mul = mul = Map(narrow, products, scale)
        m.submodules.cvt_trt = trt = Map(products, out_group, round_saturate)
        wiring.connect(m, last, mul.i)
        wiring.connect(m, mul.o, trt.i)

        # 5. merge into atoms (the merged groups have the bit layout of an atom)
        m.submodules.merge = merge = Merge(out_group, atom // lanes)
        m.d.comb += merge.count.eq(atom // lanes)
        m.submodules.to_atom = to_atom = Map(merge.wide, atom_layout(cfg), lambda m, g: g.as_value())
        wiring.connect(m, trt.o, merge.i)
        wiring.connect(m, merge.o, to_atom.i)
        wiring.connect(m, to_atom.o, wiring.flipped(self.o))
        return m
