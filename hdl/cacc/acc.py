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
expects (kernel group, line, pixel). The layer ends when SDP has taken
(DATAOUT_WIDTH+1) x (DATAOUT_HEIGHT+1) x ceil((DATAOUT_CHANNEL+1)/atomic_k) atoms, counted by
three nested counters (no multiplier).
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from hdl.cmac.layouts import psum_layout
from hdl.config import NvdlaConfig
from hdl.lib.fixed import in_range, saturate
from hdl.lib.stream import Map, PipelineStage
from hdl.regfile import unit_layout
from hdl.regmap import REGMAP

__all__ = ["Cacc", "cacc_round", "cacc_round_shift", "cacc_round_finish", "SHIFTED", "ACC_BITS"]

ACC_BITS = 34      # NVIDIA's int8 accumulator (NV_NVDLA_CACC_CALC_int8: 34-bit saturating sum)


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


#: what :func:`cacc_round_shift` keeps of one accumulator for :func:`cacc_round_finish`
SHIFTED = data.StructLayout({"sft": signed(ACC_BITS), "guide": 1, "sticky": 1, "neg": 1})


def cacc_round_shift(acc, truncate) -> Value:
    """First half of :func:`cacc_round`: ``acc`` (signed(34)) shifted right by ``truncate``,
    its guide bit, its sticky bit (any of the 15 bits below the guide) and its sign, as a
    :data:`SHIFTED` value. Raises TypeError for another ``acc`` shape."""
    acc = Value.cast(acc)
    if len(acc) != ACC_BITS or not acc.shape().signed:
        raise TypeError(f"acc must be signed({ACC_BITS}), not {acc.shape()!r}")
    ext = Cat(Const(0, 16), acc).as_signed()              # signed(50)
    sh = ext >> truncate
    return Cat(sh[16:16 + ACC_BITS], sh[15], sh[:15].any(), acc[-1])


def cacc_round_finish(shifted) -> tuple[Value, Value]:
    """Second half of :func:`cacc_round`: the rounding (a positive value rounds up on its guide
    bit, a negative one only with a sticky bit too) and the int32 saturation of a
    :data:`SHIFTED` value; returns ``(value, sat)`` as :func:`cacc_round`."""
    v = data.View(SHIFTED, Value.cast(shifted))
    point5 = v.guide & (~v.neg | v.sticky)
    rounded_v = v.sft + point5                              # signed(35)
    value = saturate(rounded_v, 32)
    sat = ~in_range(rounded_v, 32)
    return value, sat


class Cacc(wiring.Component):
    """The convolution accumulator of one layer (docs/conv.md "CACC").

    Args:
        cfg: the configuration; atomic_k = cfg.mac_atomic_k accumulators per atom, partial sums
            of cfg.mac_result_width bits.
        stripe_max: assembly-buffer entries (pixels per stripe; the shape of ``pos``).
        result_bits: width of the partial sums (default cfg.mac_result_width; tests use wider
            ones, up to 34, to reach the accumulator's saturation in few ops).

    Ports:
        regs: In(``unit_layout(REGMAP.unit("CACC"), "cfg")``) the CACC registers (stable for the
            layer): D_DATAOUT_SIZE_0/1 (the layer's atom count), D_CLIP_CFG.CLIP_TRUNCATE.
        start: In(1) one-cycle pulse: a layer starts (counters restart).
        busy: Out(1) from ``start`` until ``done``.
        done: Out(1) one-cycle pulse, the cycle after SDP took the layer's last atom.
        psum: In(stream of ``psum_layout(atomic_k, result_bits, stripe_max)``).
        sdp: Out(stream of ``ArrayLayout(signed(32), atomic_k)``), the finished atoms in cube
            order.
        sat_count: Out(32) outputs of this layer saturated by the int32 saturation
            (D_OUT_SATURATION.SAT_COUNT; NVIDIA's NV_NVDLA_CACC_calculator sums the per-element
            ``out_final_sat`` flags of every delivered atom into a counter that sticks at
            0xffffffff). 0 from ``start``; holds its value after ``done``.

    Timing: one op per cycle in and one atom per cycle out with SDP always ready; latency from
    a ``last`` op to its atom on ``sdp``: 4 cycles.

    Raises:
        ValueError: stripe_max < 1 or result_bits outside 1..34.
        NotImplementedError: cfg.feature_data_type other than int8.
    """

    def __init__(self, cfg: NvdlaConfig, stripe_max: int, *, result_bits: int | None = None):
        if stripe_max < 1:
            raise ValueError(f"stripe_max must be >= 1, not {stripe_max}")
        if cfg.feature_data_type != "int8":
            raise NotImplementedError("CACC: only int8 (the 34-bit accumulator; int16/fp16 "
                                      "use NVIDIA's 48-bit one)")
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
            "psum": In(stream.Signature(psum_layout(k, result_bits, stripe_max))),
            "sdp": Out(stream.Signature(data.ArrayLayout(signed(32), k))),
            "sat_count": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        k = self.cfg.mac_atomic_k
        acc_l = data.ArrayLayout(signed(ACC_BITS), k)
        out_l = data.StructLayout({"data": data.ArrayLayout(signed(32), k), "sat": k})
        regs = self.regs

        # ---- assembly buffer: read at accept, add + write back one cycle later
        m.submodules.abuf = abuf = Memory(shape=acc_l, depth=self.stripe_max, init=[])
        wp = abuf.write_port()
        rp = abuf.read_port(domain="sync", transparent_for=(wp,))
        m.submodules.acc_reg = acc_reg = PipelineStage(acc_l)

        # The assembly stage is the one handshake not built from hdl.lib.stream: its payload
        # register pairs with the RAM's synchronous read (same enable), which a Map cannot do.
        # It accepts when empty or when its op leaves (a non-last op always leaves; a last op
        # when acc_reg takes its sum), exactly a PipelineStage's rule.
        b_valid = Signal()
        b_op = Signal.like(self.psum.payload, name="b_op")
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
            m.d.sync += b_op.eq(self.psum.payload)

        new = Signal(acc_l, name="acc_new")
        for i in range(k):
            old = Mux(b_op.first, 0, rp.data[i])
            m.d.comb += new[i].eq(saturate(old + b_op.sum[i], ACC_BITS))
        m.d.comb += [
            wp.addr.eq(b_op.pos),
            wp.data.eq(new),
            wp.en.eq(leave),
            acc_reg.i.valid.eq(b_valid & b_op.last),
            acc_reg.i.payload.eq(new),
        ]

        # ---- output conversion and delivery buffer
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
        # delivery buffer: two stripes of atoms, so that SDP (one element per cycle on
        # nv_small: 8 cycles per atom) drains a stripe while the next one accumulates
        m.submodules.dlv = dlv = SyncFIFOBuffered(width=32 * k, depth=2 * self.stripe_max)
        m.d.comb += [
            dlv.w_stream.valid.eq(conv.o.valid),
            dlv.w_stream.payload.eq(conv.o.payload.data),
            conv.o.ready.eq(dlv.w_stream.ready),
            self.sdp.valid.eq(dlv.r_stream.valid),
            self.sdp.payload.eq(dlv.r_stream.payload),
            dlv.r_stream.ready.eq(self.sdp.ready),
        ]
        entered = conv.o.valid & conv.o.ready

        # ---- layer bookkeeping: atoms delivered (x, y, kernel group) and saturations
        width = Value.cast(regs.d_dataout_size_0.dataout_width)
        height = Value.cast(regs.d_dataout_size_0.dataout_height)
        groups_m1 = Value.cast(regs.d_dataout_size_1.dataout_channel) >> exact_log2(k)
        x = Signal(len(width))
        y = Signal(len(height))
        g = Signal(len(groups_m1))
        taken = self.sdp.valid & self.sdp.ready
        layer_end = taken & (x == width) & (y == height) & (g == groups_m1)

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
        return m
