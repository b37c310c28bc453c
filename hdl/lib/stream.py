# amaranth: UnusedElaboratable=no
# (Map.elaborate abandons its Module when fn returns a list of the wrong length and raises.)
"""Stream building blocks on ``amaranth.lib.stream`` interfaces, so units do not hand-write
valid/ready handshakes.

Handshake rules (the ``lib.stream`` ones): an item moves at a clock edge where ``valid`` and
``ready`` are both high; a producer that raised ``valid`` keeps it high, with the payload
unchanged, until that edge; ``ready`` may depend on ``valid`` (it does not here).

* :class:`PipelineStage` -- one register stage, full throughput; its ``i.ready`` depends
  combinationally on ``o.ready`` (it accepts when empty or when its item leaves in the same
  cycle), so a chain of stages has one ready path through all of them.
* :class:`Map` -- a :class:`PipelineStage` that registers a combinational function of the
  payload (one cycle of latency, full throughput); the usual way to write a datapath stage.
* :class:`SkidBuffer` -- two entries with a registered ``i.ready`` (no combinational path from
  ``o.ready``), full throughput; put one where a long ready path must be cut.
* :func:`chain` -- add stages to a module as named submodules, each fed by the one before.

All payload shapes are parameters (any ``ShapeLike``: ``unsigned(n)``, ``signed(n)``, a
``lib.data`` layout).
"""
from __future__ import annotations

from typing import Callable

from amaranth.hdl import Module, ShapeLike, Signal, ValueLike
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Map", "PipelineStage", "SkidBuffer", "chain"]


class Map(wiring.Component):
    """One register stage that outputs ``fn(payload)``: item *k* of ``o`` is ``fn`` of item *k*
    of ``i``, one cycle later.

    Timing: latency 1 cycle, throughput 1 item per cycle. ``i.ready = ~o.valid | o.ready``
    (accepts when empty or when the held item is taken in the same cycle), so it depends
    combinationally on ``o.ready``.

    Args:
        i_shape: payload shape of ``i``.
        o_shape: payload shape of ``o``.
        fn: ``fn(m, payload)``: combinational function of the input payload (a ``Value`` or
            ``data.View`` of ``i_shape``). It returns a ``ValueLike`` assigned to a signal of
            ``o_shape`` (usual Amaranth truncation/extension applies), or, when ``o_shape`` is
            a ``data.ArrayLayout``, a list of per-element values, or, for a ``data.StructLayout``,
            a dict of per-field values (each assigned to its element/field, so each is
            truncated or extended to that element's shape). ``m`` is this stage's
            ``Module``; ``fn`` may add ``comb`` statements to it (e.g. to name intermediate
            signals) but must not add ``sync`` ones. ``fn`` may read other signals of the design
            (e.g. configuration registers held stable while items flow).

    Ports:
        i: In(stream.Signature(i_shape)); o: Out(stream.Signature(o_shape)).
    """

    def __init__(self, i_shape: ShapeLike, o_shape: ShapeLike,
                 fn: Callable[[Module, ValueLike], ValueLike]):
        self._fn = fn
        self._o_shape = o_shape
        super().__init__({
            "i": In(stream.Signature(i_shape)),
            "o": Out(stream.Signature(o_shape)),
        })

    def elaborate(self, platform):
        m = Module()
        result = Signal(self._o_shape, name="result")
        value = self._fn(m, self.i.payload)
        if isinstance(value, (list, tuple)):
            if len(value) != len(result):
                raise ValueError(f"Map function returned {len(value)} elements for an output "
                                 f"of {len(result)}")
            m.d.comb += [result[k].eq(v) for k, v in enumerate(value)]
        elif isinstance(value, dict):
            m.d.comb += [result[k].eq(v) for k, v in value.items()]
        else:
            m.d.comb += result.eq(value)
        load = ~self.o.valid | self.o.ready
        m.d.comb += self.i.ready.eq(load)
        with m.If(load):
            m.d.sync += self.o.valid.eq(self.i.valid)
        with m.If(load & self.i.valid):
            m.d.sync += self.o.payload.eq(result)
        return m


class PipelineStage(Map):
    """One register stage passing the payload through unchanged (a :class:`Map` of the identity).

    Latency 1 cycle, throughput 1 item per cycle; ``i.ready = ~o.valid | o.ready``.

    Args:
        shape: payload shape of ``i`` and ``o``.

    Ports:
        i: In(stream.Signature(shape)); o: Out(stream.Signature(shape)).
    """

    def __init__(self, shape: ShapeLike):
        super().__init__(shape, shape, lambda m, payload: payload)


class SkidBuffer(wiring.Component):
    """Two-entry buffer whose ``i.ready`` is a register output (no combinational path from
    ``o.ready`` or ``i.valid``), at full throughput.

    Structure: an output register (``o.valid``/``o.payload``) and a skid register.
    ``i.ready`` is "skid register empty". When the output register is free (empty, or its item is
    taken this cycle) it loads the skid item if there is one, else the input; when it is held
    (valid and not taken), an accepted input item goes to the skid register, which then drops
    ``i.ready`` from the next cycle until the output drains it. Order is preserved: the output
    item is always older than the skid item.

    Timing: latency 1 cycle; with ``o.ready`` high every cycle, one item per cycle (no bubbles);
    the output stays busy across stalls (an item held in the skid register leaves right after
    the output item).

    Args:
        shape: payload shape of ``i`` and ``o``.

    Ports:
        i: In(stream.Signature(shape)); o: Out(stream.Signature(shape)).
    """

    def __init__(self, shape: ShapeLike):
        self._shape = shape
        super().__init__({
            "i": In(stream.Signature(shape)),
            "o": Out(stream.Signature(shape)),
        })

    def elaborate(self, platform):
        m = Module()
        skid_valid = Signal()
        skid_payload = Signal(self._shape, name="skid_payload")

        m.d.comb += self.i.ready.eq(~skid_valid)
        accept = self.i.valid & ~skid_valid
        out_free = ~self.o.valid | self.o.ready

        with m.If(out_free):
            with m.If(skid_valid):
                m.d.sync += [
                    self.o.valid.eq(1),
                    self.o.payload.eq(skid_payload),
                    skid_valid.eq(0),
                ]
            with m.Else():
                m.d.sync += self.o.valid.eq(self.i.valid)
                with m.If(self.i.valid):
                    m.d.sync += self.o.payload.eq(self.i.payload)
        with m.Elif(accept):
            m.d.sync += [
                skid_valid.eq(1),
                skid_payload.eq(self.i.payload),
            ]
        return m


def chain(m: Module, source, **stages):
    """Add ``stages`` (components with ``i`` / ``o`` stream ports) to ``m`` as submodules of
    those names, in order, ``source`` (a stream interface) feeding the first and each stage's
    ``o`` the next one's ``i``. Returns the last stage (its ``o`` is the chain's output).
    Raises ValueError: no stage."""
    if not stages:
        raise ValueError("chain needs at least one stage")
    for name, stage in stages.items():
        m.submodules[name] = stage
        wiring.connect(m, source, stage.i)
        source = stage.o
    return stage
