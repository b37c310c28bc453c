"""The convolution accumulator (docs/conv.md "CACC"; v1_ias_unit_description.rst "Convolution
Accumulator"; v1_ias_precision.rst "Truncate").

Pipeline (one partial-sum atom per cycle in, one int32 atom per cycle out):

* assembly stage: the assembly buffer is a ``lib.memory.Memory`` of ``stripe_max`` entries of
  ``atomic_k`` 34-bit accumulators (distributed/block RAM). The entry of the op's ``pos`` is read
  in the cycle the op is accepted (synchronous read port); in the next cycle the op adds its
  sums to it (``first``: to 0) with 34-bit saturation and writes it back. The read port is
  transparent to that write, so consecutive ops on one ``pos`` (a stripe of one pixel) see each
  other's sums without a stall (read-modify-write forwarding through the RAM's write-first
  mode).
* on ``last`` the accumulator goes, registered, to the output stages (:func:`cacc_round`, in
  two register stages for timing: :func:`cacc_round_shift` shifts right by
  D_CLIP_CFG.CLIP_TRUNCATE keeping the guide and sticky bits, :func:`cacc_round_finish` rounds
  the NVIDIA way and saturates to int32 with one saturation flag per element; ECP5: 85.9 MHz
  with both in one stage);
* the delivery buffer (``lib.fifo.SyncFIFOBuffered``, two stripes of atoms) decouples SDP,
  which takes an atom every ``atom / throughput`` cycles, from the burst of a stripe's last
  channel operation, so a stripe's delivery overlaps the next stripe's accumulation.

Delivery order is the order of the ``last`` ops, which docs/conv.md makes the cube order SDP
expects (kernel group, line, pixel; in a multi-batch layer of ``cfg.batch`` configurations
(kernel group, line, pixel, batch): D_BATCH_NUMBER.BATCHES+1 atoms per position). The layer
ends when SDP has taken (DATAOUT_WIDTH+1) x (DATAOUT_HEIGHT+1) x
ceil((DATAOUT_CHANNEL+1)/atomic_k) atoms (times the batches), counted by nested counters (no
multiplier).

In ``cfg.conv16`` configurations (docs/conv16.md "CACC") the same pipeline carries INT8, INT16
(48-bit sums) and FP16 (FP48 sums in a 3-cycle add loop, :mod:`hdl.cacc.acc16`) layers, per
CACC's D_MISC_CFG.PROC_PRECISION: see :class:`Cacc`. Other configurations elaborate exactly as
before (nv_small's Verilog is byte-identical).
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.cacc.acc16 import (FP32N, FP48, FP_DEPTH, FPW, Fp48AccPipe, fp48_normalize,
                            fp48_pack, fp_word_finish, fp_word_prenorm, fpa_layout)
from hdl.cmac.layouts import PREC_FP16, PREC_INT16, cell_layout, psum16_layout, psum_layout
from hdl.config import NvdlaConfig
from hdl.lib.fixed import in_range, saturate
from hdl.lib.stream import Map, PipelineStage, SkidBuffer
from hdl.regfile import unit_layout
from hdl.regmap import REGMAP

__all__ = ["Cacc", "cacc_round", "cacc_round_shift", "cacc_round_finish", "SHIFTED", "ACC_BITS",
           "ACC16_BITS", "shifted_layout"]

ACC_BITS = 34      # NVIDIA's int8 accumulator (NV_NVDLA_CACC_CALC_int8: 34-bit saturating sum)
ACC16_BITS = 48    # NVIDIA's int16 accumulator (NV_NVDLA_CACC_CALC_int16: 48-bit saturating sum)


def cacc_round(acc, truncate) -> tuple[Value, Value]:
    """CACC's output conversion of one accumulator (v1_ias_precision.rst "Truncate").

    ``acc`` (signed(34)) is shifted right by ``truncate`` (unsigned, 0..31) and rounded half
    away from zero the way NVIDIA's NV_NVDLA_CACC_CALC_int8 does it (fact, nv_small RTL): the
    value is extended by 16 zero bits, shifted arithmetically, and only the guide bit (the
    first dropped bit) and the 15 sticky bits below it are seen: a positive value rounds up
    when the guide bit is set, a negative one only when a sticky bit is set too. The rounded
    value saturates to int32.

    Returns:
        ``(value, sat)``: ``signed(32)`` result and a 1-bit flag set when the int32 saturation
        changed the value (NVIDIA's ``out_final_sat``, counted in D_OUT_SATURATION).
    """
    return cacc_round_finish(cacc_round_shift(acc, truncate))


def shifted_layout(acc_bits: int) -> data.StructLayout:
    """What :func:`cacc_round_shift` keeps of one ``signed(acc_bits)`` accumulator for
    :func:`cacc_round_finish`: the shifted value, the guide, sticky and sign bits."""
    return data.StructLayout({"sft": signed(acc_bits), "guide": 1, "sticky": 1, "neg": 1})


#: :func:`shifted_layout` of the int8 accumulator
SHIFTED = shifted_layout(ACC_BITS)


def cacc_round_shift(acc, truncate) -> Value:
    """First half of :func:`cacc_round`: ``acc`` (signed(34), or signed(48): the INT16
    accumulator, NV_NVDLA_CACC_CALC_int16, same shift and bits) shifted right by
    ``truncate``, its guide bit, its sticky bit (any of the 15 bits below the guide) and its
    sign, as a :func:`shifted_layout` value of ``len(acc)`` bits. Raises TypeError for another
    ``acc`` shape."""
    acc = Value.cast(acc)
    bits = len(acc)
    if bits not in (ACC_BITS, ACC16_BITS) or not acc.shape().signed:
        raise TypeError(f"acc must be signed({ACC_BITS}) or signed({ACC16_BITS}), "
                        f"not {acc.shape()!r}")
    ext = Cat(Const(0, 16), acc).as_signed()              # signed(bits + 16)
    sh = ext >> truncate
    return Cat(sh[16:16 + bits], sh[15], sh[:15].any(), acc[-1])


def cacc_round_finish(shifted) -> tuple[Value, Value]:
    """Second half of :func:`cacc_round`: the rounding (a positive value rounds up on its guide
    bit, a negative one only with a sticky bit too) and the int32 saturation of a
    :func:`shifted_layout` value (of either accumulator width); returns ``(value, sat)`` as
    :func:`cacc_round`."""
    shifted = Value.cast(shifted)
    v = data.View(shifted_layout(len(shifted) - 3), shifted)
    point5 = v.guide & (~v.neg | v.sticky)
    rounded_v = v.sft + point5                              # signed(acc_bits + 1)
    value = saturate(rounded_v, 32)
    sat = ~in_range(rounded_v, 32)
    return value, sat


class Cacc(wiring.Component):
    """The convolution accumulator of one layer (docs/conv.md "CACC"; docs/conv16.md "CACC"
    in ``cfg.conv16`` configurations).

    Args:
        cfg: the configuration; atomic_k = cfg.mac_atomic_k accumulators per atom, partial sums
            of cfg.mac_result_width bits (int8-only configurations).
        stripe_max: assembly-buffer entries (pixels per stripe; the shape of ``pos``).
        result_bits: width of the partial sums (default cfg.mac_result_width; tests use wider
            ones, up to 34, to reach the accumulator's saturation in few ops). Not for
            ``cfg.conv16`` configurations, whose words have the widths of ``cell_layout``.

    Ports:
        regs: In(``unit_layout(REGMAP.unit("CACC"), "cfg")``) the CACC registers (stable for the
            layer): D_DATAOUT_SIZE_0/1 (the layer's atom count), D_CLIP_CFG.CLIP_TRUNCATE, and
            in ``cfg.conv16`` configurations D_MISC_CFG.PROC_PRECISION (1 INT16, 2 FP16, any
            other code INT8).
        start: In(1) one-cycle pulse: a layer starts (counters restart).
        busy: Out(1) from ``start`` until ``done``.
        done: Out(1) one-cycle pulse, the cycle after SDP took the layer's last atom.
        psum: In(stream of ``psum_layout(atomic_k, result_bits, stripe_max)``), or in
            ``cfg.conv16`` configurations of ``psum16_layout(atomic_c, atomic_k // 2,
            stripe_max)``: one ``cell_layout`` word per MAC cell j.
        sdp: Out(stream of ``ArrayLayout(signed(32), atomic_k)``), the finished atoms in cube
            order.
        sat_count: Out(32) outputs of this layer saturated by the int32 saturation
            (D_OUT_SATURATION.SAT_COUNT; NVIDIA's NV_NVDLA_CACC_calculator sums the per-element
            ``out_final_sat`` flags of every delivered atom into a counter that sticks at
            0xffffffff). 0 from ``start``; holds its value after ``done``.

    Precisions of ``cfg.conv16`` configurations (an assembly entry is a union of the three
    accumulator arrays, 34 x atomic_k bits as in int8 builds; NVIDIA's entry is 136 B in
    int8 and 96 B in int16/fp16, UD "Convolution Accumulator"):

    * INT8: cell j's ``i8[0]``/``i8[1]`` are kernels 2j/2j+1 (NV_NVDLA_CMAC_CORE_mac.v):
      accumulated and converted exactly as in int8 builds, in lanes 2j/2j+1.
    * INT16: cell j is kernel j of a group of atomic_k/2; a 48-bit sum saturated at every
      step (NV_NVDLA_CACC_CALC_int16; docs/conv16.md open question 1), converted by
      :func:`cacc_round` with the 48-bit shift (the model's ``cacc_truncate(acc_bits=48)``),
      int32 saturations counted; lanes 0..atomic_k/2-1, the upper lanes 0.
    * FP16: the FP48 accumulator of :mod:`hdl.cacc.acc16` (``cacc_add``: each word added
      exactly and rounded to 39 significant bits, ties away from zero; a NaN keeps its first
      pattern), delivered as fp32 bit patterns (``cacc_to_fp32``: 24 bits, ties away; +0; NaN
      as sign, exponent 255, the fp16 payload); CLIP_TRUNCATE unused, nothing counted in
      sat_count (NVIDIA's FP calculator has no saturation flag; docs/conv16.md open question
      4); lanes 0..atomic_k/2-1, the upper lanes 0. The words are normalized off the loop
      (:func:`hdl.cacc.acc16.fp_word_prenorm` in the cycle they are accepted,
      :func:`hdl.cacc.acc16.fp_word_finish` in the next).
    * The layer ends after (W+1)(H+1) x ceil((DATAOUT_CHANNEL+1)/group) atoms, group =
      atomic_k in INT8 and atomic_k/2 otherwise; in the last group the lanes past
      DATAOUT_CHANNEL are delivered as 0 (an FP16 NaN datum makes even a zero-weight cell's
      word NaN; NVIDIA's nv_full RTL delivers zeros there, see ``_deliver``).

    In INT8/INT16 layers (and in int8 builds) the entry read when an op is accepted is added
    to and written back in the next cycle (one combinational read-modify-write per psum). In
    FP16 layers the add is a loop of D = ``FP_DEPTH`` = 3 cycles
    (:class:`hdl.cacc.acc16.Fp48AccPipe`, one per lane; :meth:`_assembly16`): each step is
    still one exact ``round39``, in order, but an FP16 op that is not ``first`` waits
    (``psum.ready`` low) while the previous op on its ``pos`` was accepted less than D cycles
    before. The FP adders' inputs are held at 0 in INT8/INT16 layers.

    Timing: one op per cycle in and one atom per cycle out with SDP always ready: in INT8 and
    INT16 on any stripe (one pixel too); in FP16 on stripes of at least D = 3 pixels. A
    shorter FP16 stripe of L pixels takes D cycles per step after its first (L ops per 3
    cycles; a stripe of one pixel: one op every 3 cycles). Latency from a ``last`` op to its
    atom on ``sdp``: 4 cycles, 8 in FP16 (the words' second normalization stage, then D
    stages). ECP5 (LFE5U-85F-8, out of context, scripts/cacc_fp_timing.py): one FP lane's
    loop 119.2 MHz; the whole unit at nv_small+int8_int16_fp16 100.8 MHz, at nv_full 64.6 MHz
    (limited there by the 1,088-bit assembly RAM's transparent read and write address fanout,
    not by the FP loop; figures and costs in :mod:`hdl.cacc.acc16`).

    Raises:
        ValueError: stripe_max < 1, result_bits outside 1..34, or result_bits given in a
            ``cfg.conv16`` configuration.
        NotImplementedError: cfg.feature_data_type other than int8, except the
            ``cfg.conv16`` ones.
    """

    def __init__(self, cfg: NvdlaConfig, stripe_max: int, *, result_bits: int | None = None):
        if stripe_max < 1:
            raise ValueError(f"stripe_max must be >= 1, not {stripe_max}")
        if cfg.feature_data_type != "int8" and not cfg.conv16:
            raise NotImplementedError("CACC: int8, or int8_int16_fp16 on one-byte elements "
                                      "(cfg.conv16)")
        if cfg.conv16 and result_bits is not None:
            raise ValueError("result_bits: conv16 words have the widths of cell_layout")
        result_bits = cfg.mac_result_width if result_bits is None else result_bits
        if not 1 <= result_bits <= ACC_BITS:
            raise ValueError(f"result_bits must be in 1..{ACC_BITS}, not {result_bits}")
        self.cfg, self.stripe_max, self.result_bits = cfg, stripe_max, result_bits
        k = cfg.mac_atomic_k
        super().__init__({
            "regs": In(unit_layout(REGMAP.unit("CACC"), "cfg")),
            "start": In(1),
            "busy": Out(1),
            "done": Out(1),
            "psum": In(stream.Signature(
                psum16_layout(cfg.mac_atomic_c, k // 2, stripe_max) if cfg.conv16 else
                psum_layout(k, result_bits, stripe_max))),
            "sdp": Out(stream.Signature(data.ArrayLayout(signed(32), k))),
            "sat_count": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        if self.cfg.conv16:
            conv, groups_m1 = self._elaborate16(m)
        else:
            conv, groups_m1 = self._elaborate8(m)
        self._deliver(m, conv, groups_m1)
        return m

    def _assembly(self, m, acc_l, op_l, op_in, update):
        """The assembly stage (shared by both builds): the buffer ``abuf`` of ``stripe_max``
        entries of ``acc_l``, read at accept (``op_in``, the ``op_l`` value registered beside
        the read: the psum payload, or in conv16 builds its pre-normalized form), and
        ``update(b_op, old_entry)`` -> the new entry, written back one cycle later and, on
        ``last``, given to ``acc_reg``. Returns acc_reg (a PipelineStage of ``acc_l``)."""
        m.submodules.abuf = abuf = Memory(shape=acc_l, depth=self.stripe_max, init=[])
        wp = abuf.write_port()
        rp = abuf.read_port(domain="sync", transparent_for=(wp,))
        m.submodules.acc_reg = acc_reg = PipelineStage(acc_l)

        # The assembly stage is the one handshake not built from hdl.lib.stream: its payload
        # register pairs with the RAM's synchronous read (same enable), which a Map cannot do.
        # It accepts when empty or when its op leaves (a non-last op always leaves; a last op
        # when acc_reg takes its sum), exactly a PipelineStage's rule.
        b_valid = Signal()
        b_op = Signal(op_l, name="b_op")
        leave = b_valid & (~b_op.last | acc_reg.i.ready)
        accept_ready = ~b_valid | leave
        m.d.comb += [
            self.psum.ready.eq(accept_ready),
            rp.addr.eq(self.psum.payload.pos),
            rp.en.eq(accept_ready),
        ]
        with m.If(accept_ready):
            m.d.sync += b_valid.eq(self.psum.valid)
        with m.If(accept_ready & self.psum.valid):
            m.d.sync += b_op.eq(op_in)

        new = update(b_op, rp.data)
        m.d.comb += [
            wp.addr.eq(b_op.pos),
            wp.data.eq(new),
            wp.en.eq(leave),
            acc_reg.i.valid.eq(b_valid & b_op.last),
            acc_reg.i.payload.eq(new),
        ]
        return acc_reg

    def _assembly16(self, m, entry_l, op_l, op_in, update_int, is_fp, s_bits):
        """The assembly stage of ``cfg.conv16`` builds: the buffer ``abuf`` (``stripe_max``
        entries of ``entry_l``) and the op ``b_op`` registered at accept (``op_in``), then

        * INT8/INT16 layers: as :meth:`_assembly`, the entry read at accept,
          ``update_int(b_op, old_entry)`` added and written back in the next cycle (one-cycle
          forwarding through the transparent read port: one psum per cycle on any stripe);
        * FP16 layers: in the cycle after accept (stage b) the words' normalization is
          finished (:func:`hdl.cacc.acc16.fp_word_finish`) and the entry read (address
          ``b_op.pos``); both enter the lanes' :class:`hdl.cacc.acc16.Fp48AccPipe` (stage s1,
          then FP_DEPTH = D stages up to their result register r), and r is written back.
          An op whose predecessor on its ``pos`` is in r when it enters s1 takes r's value
          (``fwd``); one further behind reads it from the RAM (the transparent read when r
          writes in its read cycle). An op that is not ``first`` waits (``psum.ready`` low)
          while an op on its ``pos`` is in b or s1, i.e. accepted less than D cycles
          before (the hazard check on the in-flight positions); a ``first`` op reads nothing
          and never waits. All FP stages advance together, unless r holds a ``last`` op that
          ``acc_reg`` cannot take.

        Returns acc_reg (a :class:`hdl.lib.stream.SkidBuffer` of ``entry_l``: its ``i.ready``
        is a register, for the stall's timing)."""
        h = self.cfg.mac_atomic_k // 2
        depth = FP_DEPTH
        m.submodules.abuf = abuf = Memory(shape=entry_l, depth=self.stripe_max, init=[])
        wp = abuf.write_port()
        rp = abuf.read_port(domain="sync", transparent_for=(wp,))
        # a skid buffer: its i.ready is a register, so the stall of every FP stage (and the
        # INT write-back's) does not wait for the ready chain from the delivery buffer
        m.submodules.acc_reg = acc_reg = SkidBuffer(entry_l)
        psum = self.psum.payload

        b_valid = Signal()
        b_op = Signal(op_l, name="b_op")
        # the FP stages after b (s1, the pipeline's inner registers, r): pos, valid, last
        fp_pos = [Signal.like(psum.pos, name=f"fp_pos{i + 1}") for i in range(depth + 1)]
        fp_val = [Signal(name=f"fp_valid{i + 1}") for i in range(depth + 1)]
        fp_last = [Signal(name=f"fp_last{i + 1}") for i in range(depth + 1)]
        stages = [(b_valid, b_op.pos)] + list(zip(fp_val, fp_pos))
        r_valid, r_last = fp_val[-1], fp_last[-1]

        fp_adv = Signal()               # every FP stage (b included) advances
        int_leave = b_valid & (~b_op.last | acc_reg.i.ready)
        b_move = Signal()               # b loads the next op or a bubble
        hazard = Signal()               # FP16: a non-first op on a pos still in flight
        take = Signal()
        m.d.comb += [
            fp_adv.eq(~(r_valid & r_last) | acc_reg.i.ready),
            b_move.eq(Mux(is_fp, fp_adv, ~b_valid | int_leave)),
            hazard.eq(is_fp & ~psum.first & Cat(*[v & (p == psum.pos)
                                                   for v, p in stages[:depth - 1]]).any()),
            take.eq(b_move & ~hazard),
            self.psum.ready.eq(take),
            # INT: read at accept; FP16: read in b, for the op entering s1
            rp.addr.eq(Mux(is_fp, b_op.pos, psum.pos)),
            rp.en.eq(Mux(is_fp, fp_adv, take)),
        ]
        with m.If(b_move):              # b_op loads bubbles too: its enable sees no hazard
            m.d.sync += [b_valid.eq(self.psum.valid & ~hazard), b_op.eq(op_in)]
        s1_zero, s1_fwd = Signal(), Signal()
        with m.If(fp_adv):
            fv, fp = stages[depth]                        # in r when b's op is in s1
            m.d.sync += [fp_val[0].eq(b_valid & is_fp), fp_pos[0].eq(b_op.pos),
                         fp_last[0].eq(b_op.last), s1_zero.eq(b_op.first | ~is_fp),
                         s1_fwd.eq(fv & (fp == b_op.pos))]
            for i in range(1, depth + 1):
                m.d.sync += [fp_val[i].eq(fp_val[i - 1]), fp_pos[i].eq(fp_pos[i - 1]),
                             fp_last[i].eq(fp_last[i - 1])]

        fp_new = Signal(entry_l, name="fp_new")
        for j in range(h):
            word = fp_word_finish(m, b_op.sum[j].fpa, s_bits, name=f"fpw{j}")
            s1_word = Signal(FPW, name=f"s1_word{j}")
            with m.If(fp_adv):                            # held at 0 outside FP16 layers
                m.d.sync += s1_word.eq(Mux(is_fp, word.as_value(), 0))
            m.submodules[f"fpacc{j}"] = lane = Fp48AccPipe(depth)
            m.d.comb += [
                lane.ram.eq(rp.data.fp[j]),
                lane.word.eq(s1_word),
                lane.zero.eq(s1_zero),
                lane.fwd.eq(s1_fwd),
                lane.en.eq(fp_adv),
                fp_new.fp[j].eq(lane.new),
            ]

        new = Signal(entry_l, name="acc_new_any")
        m.d.comb += [
            new.eq(Mux(is_fp, fp_new.as_value(), update_int(b_op, rp.data).as_value())),
            wp.addr.eq(Mux(is_fp, fp_pos[-1], b_op.pos)),
            wp.data.eq(new),
            wp.en.eq(Mux(is_fp, r_valid, int_leave)),
            acc_reg.i.valid.eq(Mux(is_fp, r_valid & r_last, b_valid & b_op.last)),
            acc_reg.i.payload.eq(new),
        ]
        return acc_reg

    def _elaborate8(self, m):
        """int8-only configurations: 34-bit accumulators, int32 conversion."""
        k = self.cfg.mac_atomic_k
        acc_l = data.ArrayLayout(signed(ACC_BITS), k)
        out_l = data.StructLayout({"data": data.ArrayLayout(signed(32), k), "sat": k})
        regs = self.regs

        # ---- assembly buffer: read at accept, add + write back one cycle later
        def update(b_op, old_entry):
            new = Signal(acc_l, name="acc_new")
            for i in range(k):
                old = Mux(b_op.first, 0, old_entry[i])
                m.d.comb += new[i].eq(saturate(old + b_op.sum[i], ACC_BITS))
            return new

        acc_reg = self._assembly(m, acc_l, self.psum.payload.shape(), self.psum.payload, update)

        # ---- output conversion
        truncate = regs.d_clip_cfg.clip_truncate

        shifted_l = data.ArrayLayout(SHIFTED, k)

        def shift(mm, acc):
            res = Signal(shifted_l, name="shifted")
            for i in range(k):
                mm.d.comb += res[i].eq(cacc_round_shift(acc[i], truncate))
            return res

        def finish(mm, sh):
            res = Signal(out_l, name="converted")
            for i in range(k):
                v, s = cacc_round_finish(sh[i])
                mm.d.comb += [res.data[i].eq(v), res.sat[i].eq(s)]
            return res

        m.submodules.shift = shift_stage = Map(acc_l, shifted_l, shift)
        m.submodules.convert = conv = Map(shifted_l, out_l, finish)
        wiring.connect(m, acc_reg.o, shift_stage.i)
        wiring.connect(m, shift_stage.o, conv.i)
        groups_m1 = Value.cast(regs.d_dataout_size_1.dataout_channel) >> exact_log2(k)
        return conv, groups_m1

    def _elaborate16(self, m):
        """cfg.conv16 configurations: one entry per pixel holds 34-bit int8, 48-bit int16 or
        FP48 accumulators, per D_MISC_CFG.PROC_PRECISION (see the class docstring)."""
        cfg = self.cfg
        k, h = cfg.mac_atomic_k, cfg.mac_atomic_k // 2
        regs = self.regs
        prec = Value.cast(regs.d_misc_cfg.proc_precision)
        is_i16, is_fp, is_i8 = Signal(), Signal(), Signal()
        m.d.comb += [is_i16.eq(prec == PREC_INT16), is_fp.eq(prec == PREC_FP16),
                     is_i8.eq(~is_i16 & ~is_fp)]
        cell_l = cell_layout(cfg.mac_atomic_c)
        entry_l = data.UnionLayout({
            "i8": data.ArrayLayout(signed(ACC_BITS), k),        # kernel 2j+e: cell j, i8[e]
            "i16": data.ArrayLayout(signed(ACC16_BITS), h),
            "fp": data.ArrayLayout(FP48, h),
        })
        out_l = data.StructLayout({"data": data.ArrayLayout(signed(32), k), "sat": k})
        s_bits = len(Value.cast(self.psum.payload.sum[0].fp.s))
        op_l = data.StructLayout({
            "sum": data.ArrayLayout(data.UnionLayout({"raw": cell_l,
                                                      "fpa": fpa_layout(s_bits)}), h),
            "pos": self.psum.payload.pos.shape(), "first": 1, "last": 1})

        # ---- the op as registered beside the read: FP16 words half normalized (|S| and its
        # leading zeros; the shift follows in the next cycle, off the loop)
        op_in = Signal(op_l, name="op_in")
        psum = self.psum.payload
        m.d.comb += [op_in.pos.eq(psum.pos), op_in.first.eq(psum.first),
                     op_in.last.eq(psum.last)]
        for j in range(h):
            pre = fp_word_prenorm(m, psum.sum[j].fp, name=f"fpw{j}")
            m.d.comb += op_in.sum[j].eq(Mux(is_fp, pre.as_value(), psum.sum[j].as_value()))

        def update_int(b_op, old_entry):
            n8 = Signal(data.ArrayLayout(signed(ACC_BITS), k), name="acc_new_i8")
            for i in range(k):
                old = Mux(b_op.first, 0, old_entry.i8[i])
                m.d.comb += n8[i].eq(saturate(old + b_op.sum[i // 2].raw.i8[i % 2], ACC_BITS))
            n16 = Signal(data.ArrayLayout(signed(ACC16_BITS), h), name="acc_new_i16")
            for j in range(h):
                old = Mux(b_op.first, 0, old_entry.i16[j])
                m.d.comb += n16[j].eq(saturate(old + b_op.sum[j].raw.i16, ACC16_BITS))
            new = Signal(entry_l, name="acc_new")
            m.d.comb += new.eq(Mux(is_i16, n16.as_value(), n8.as_value()))
            return new

        acc_reg = self._assembly16(m, entry_l, op_l, op_in, update_int, is_fp, s_bits)

        # ---- output conversion: int lanes as int8's (48-bit shift for INT16), FP to fp32
        truncate = regs.d_clip_cfg.clip_truncate
        lo_l = data.UnionLayout({"int": shifted_layout(ACC16_BITS), "fp": FP32N})
        shifted_l = data.StructLayout({"lo": data.ArrayLayout(lo_l, h),
                                       "hi": data.ArrayLayout(SHIFTED, k - h)})

        def shift(mm, acc):
            res = Signal(shifted_l, name="shifted")
            for j in range(h):
                src = Signal(signed(ACC16_BITS), name=f"int{j}")
                mm.d.comb += src.eq(Mux(is_i8, acc.i8[j], acc.i16[j]))
                fpn = fp48_normalize(mm, acc.fp[j], name=f"fp32n{j}")
                mm.d.comb += res.lo[j].eq(Mux(is_fp, fpn.as_value(),
                                              cacc_round_shift(src, truncate)))
            for j in range(k - h):                    # kernels h.. exist in INT8 only
                src = Signal(signed(ACC_BITS), name=f"int{h + j}")
                mm.d.comb += [src.eq(Mux(is_i8, acc.i8[h + j], 0)),
                              res.hi[j].eq(cacc_round_shift(src, truncate))]
            return res

        def finish(mm, sh):
            res = Signal(out_l, name="converted")
            for j in range(h):
                v, s = cacc_round_finish(sh.lo[j].int)
                mm.d.comb += [res.data[j].eq(Mux(is_fp, fp48_pack(sh.lo[j].fp), v)),
                              res.sat[j].eq(s & ~is_fp)]
            for j in range(k - h):
                v, s = cacc_round_finish(sh.hi[j])
                mm.d.comb += [res.data[h + j].eq(v), res.sat[h + j].eq(s)]
            return res

        m.submodules.shift = shift_stage = Map(entry_l, shifted_l, shift)
        m.submodules.convert = conv = Map(shifted_l, out_l, finish)
        wiring.connect(m, acc_reg.o, shift_stage.i)
        wiring.connect(m, shift_stage.o, conv.i)
        channel = Value.cast(regs.d_dataout_size_1.dataout_channel)
        groups_m1 = Mux(is_i8, channel >> exact_log2(k), channel >> exact_log2(h))
        return conv, groups_m1

    def _deliver(self, m, conv, groups_m1):
        """The delivery buffer after the output conversion ``conv`` and the layer's bookkeeping
        (atoms delivered: x, y, kernel group up to ``groups_m1``; saturations)."""
        k = self.cfg.mac_atomic_k
        regs = self.regs
        # delivery buffer: two stripes of atoms, so that SDP (one element per cycle on
        # nv_small: 8 cycles per atom) drains a stripe while the next one accumulates
        m.submodules.dlv = dlv = SyncFIFOBuffered(width=32 * k, depth=2 * self.stripe_max)
        m.d.comb += [
            dlv.w_stream.valid.eq(conv.o.valid),
            dlv.w_stream.payload.eq(conv.o.payload.data),
            conv.o.ready.eq(dlv.w_stream.ready),
            self.sdp.valid.eq(dlv.r_stream.valid),
            *([] if self.cfg.conv16 else [self.sdp.payload.eq(dlv.r_stream.payload)]),
            dlv.r_stream.ready.eq(self.sdp.ready),
        ]
        entered = conv.o.valid & conv.o.ready

        # ---- layer bookkeeping: atoms delivered (x, y, kernel group) and saturations
        width = Value.cast(regs.d_dataout_size_0.dataout_width)
        height = Value.cast(regs.d_dataout_size_0.dataout_height)
        x = Signal(len(width))
        y = Signal(len(height))
        g = Signal(len(groups_m1))
        if self.cfg.conv16:
            # lanes past DATAOUT_CHANNEL in the last kernel group go to SDP as 0: in FP16 a
            # NaN datum makes even a zero-weight cell's word NaN (verif/model/conv_fp16.py
            # cmac_words), but NVIDIA's nv_full RTL delivers the model's zeros there (random
            # FP16 DC programs with NaN data and K % 16 != 0, e.g. seeds 177 and 249 of
            # verif/gen/dc.py on nv_full, give the model's bytes on it and differ when those
            # lanes carry the cells' NaN words). INT8/INT16 lanes there are 0 already
            # (zero weights). Group: atomic_k lanes in INT8, atomic_k/2 otherwise.
            prec = Value.cast(regs.d_misc_cfg.proc_precision)
            is_i8 = (prec != PREC_INT16) & (prec != PREC_FP16)
            channel = Value.cast(regs.d_dataout_size_1.dataout_channel)
            last_lane = Mux(is_i8, channel[:exact_log2(k)], channel[:exact_log2(k // 2)])
            in_last = Signal(name="dlv_last_group")
            m.d.comb += in_last.eq(g == groups_m1)
            m.d.comb += [self.sdp.payload[i].eq(Mux(in_last & (last_lane < i), 0,
                                                    dlv.r_stream.payload[32 * i:32 * (i + 1)]))
                         for i in range(k)]
        taken = self.sdp.valid & self.sdp.ready
        layer_end = taken & (x == width) & (y == height) & (g == groups_m1)
        if self.cfg.batch:
            # multi-batch (D_BATCH_NUMBER.BATCHES = N-1; docs/conv.md "Multi-batch"): N atoms
            # per output position, batch fastest (CSC's order)
            nbm1 = Value.cast(regs.d_batch_number.batches)
            b = Signal(len(nbm1))
            b_last = b == nbm1
            layer_end = layer_end & b_last
            with m.If(taken):
                m.d.sync += b.eq(Mux(b_last, 0, b + 1))
            with m.If(self.start):
                m.d.sync += b.eq(0)
            taken = taken & b_last

        sat_sum = sum(conv.o.payload.sat[i] for i in range(k))
        sat_next = self.sat_count + sat_sum                      # 33 bits: carry = overflow
        m.d.sync += self.done.eq(layer_end)
        with m.If(entered):
            m.d.sync += self.sat_count.eq(Mux(sat_next[32], 0xffffffff, sat_next[:32]))
        with m.If(taken):
            with m.If(x == width):
                m.d.sync += x.eq(0)
                with m.If(y == height):
                    m.d.sync += [y.eq(0), g.eq(g + 1)]
                with m.Else():
                    m.d.sync += y.eq(y + 1)
            with m.Else():
                m.d.sync += x.eq(x + 1)
        with m.If(layer_end):
            m.d.sync += self.busy.eq(0)
        with m.If(self.start):
            m.d.sync += [x.eq(0), y.eq(0), g.eq(0), self.busy.eq(1), self.sat_count.eq(0)]
