"""Stream width converters and joins (``amaranth.lib.stream`` rules, see :mod:`hdl.lib.stream`),
for datapaths narrower than a memory atom: SDP splits atoms into throughput-wide element groups
before X1 and merges them back after the output converter, collects and repeats operand atoms,
and joins the data and operand streams.

* :class:`Split` -- one wide item of arrays -> ``ratio`` narrow items (element groups in order).
* :class:`Merge` -- ``count`` (<= ``n``, a port) narrow items -> one item of ``n`` slots.
* :class:`Repeat` -- each item emitted ``count`` times (a port).
* :class:`Join` -- several streams into one struct, each input enabled or not by a port.
* :class:`Fork` -- one stream to several consumers, each taking every item.

Every stage but :class:`Join` and :class:`Fork` (no added latency) registers its output; all run at one item per
cycle on their narrow side.
"""
from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["narrow_layout", "Split", "Merge", "Repeat", "Join", "Fork"]


def narrow_layout(layout: data.StructLayout, ratio: int) -> data.StructLayout:
    """``layout`` (a StructLayout whose fields are all ``ArrayLayout`` of one length ``n``) with
    every array cut to ``n // ratio`` elements. Raises ValueError otherwise or when ``ratio``
    does not divide ``n``."""
    fields = {}
    for name, f in layout:
        shape = f.shape
        if not isinstance(shape, data.ArrayLayout):
            raise ValueError(f"field {name!r} is not an ArrayLayout")
        if shape.length % ratio:
            raise ValueError(f"ratio {ratio} does not divide the {shape.length} elements of {name!r}")
        fields[name] = data.ArrayLayout(shape.elem_shape, shape.length // ratio)
    return data.StructLayout(fields)


class Split(wiring.Component):
    """Split each item of ``layout`` (struct of equal-length arrays, see :func:`narrow_layout`)
    into ``ratio`` items of :func:`narrow_layout` ``(layout, ratio)``: item g holds elements
    ``g*n/ratio .. (g+1)*n/ratio - 1`` of every field.

    Timing: the wide item is held in a register while its groups leave, one per cycle;
    ``i.ready`` is high when the register is empty or its last group leaves in this cycle (no
    bubble between items). ``ratio`` = 1 is a :class:`hdl.lib.stream.PipelineStage`-like register.

    Ports: ``i`` In(stream of ``layout``), ``o`` Out(stream of the narrow layout); with
    ``counted``, also ``count`` In(range(ratio + 1)) (1..ratio, stable while items flow): only
    the first ``count`` groups of each item leave, the others are dropped (SDP's INT16 layers,
    whose atoms fill half of its wide item: :class:`hdl.sdp.core.SdpCore`), as
    :class:`Merge`'s ``count`` collects that many.
    """

    def __init__(self, layout: data.StructLayout, ratio: int, *, counted: bool = False):
        if ratio < 1:
            raise ValueError(f"ratio must be >= 1, not {ratio}")
        self.layout, self.ratio, self.counted = layout, ratio, counted
        self.narrow = narrow_layout(layout, ratio)
        super().__init__({"i": In(stream.Signature(layout)),
                          "o": Out(stream.Signature(self.narrow)),
                          **({"count": In(range(ratio + 1))} if counted else {})})

    def elaborate(self, platform):
        m = Module()
        held = Signal(self.layout)
        full = Signal()
        idx = Signal(range(max(2, self.ratio)))      # >= 1 bit (no zero-width vectors)
        last = idx + 1 >= self.count if self.counted else idx == self.ratio - 1
        fire = self.o.valid & self.o.ready
        load = ~full | (fire & last)
        m.d.comb += [self.o.valid.eq(full), self.i.ready.eq(load)]
        for name, f in self.narrow:
            k = f.shape.length
            for e in range(k):
                # element e of group idx = element idx*k + e of the held item
                sel = Signal(f.shape.elem_shape, name=f"{name}_{e}")
                with m.Switch(idx):
                    for g in range(self.ratio - 1):
                        with m.Case(g):
                            m.d.comb += sel.eq(held[name][g * k + e])
                    with m.Default():           # the last group (complete case for lint)
                        m.d.comb += sel.eq(held[name][(self.ratio - 1) * k + e])
                m.d.comb += self.o.payload[name][e].eq(sel)
        with m.If(fire):
            m.d.sync += idx.eq(0 if self.ratio == 1 else idx + 1)
            with m.If(last):
                m.d.sync += [idx.eq(0), full.eq(0)]
        with m.If(load & self.i.valid):
            m.d.sync += [held.eq(self.i.payload), full.eq(1), idx.eq(0)]
        return m


class Merge(wiring.Component):
    """Collect ``count`` consecutive items of ``elem_shape`` into one item
    ``ArrayLayout(elem_shape, n)`` (slot j = j-th item; slots >= ``count`` hold stale values).

    Timing: one input item per cycle; the merged item is registered; ``i.ready`` is low only when
    the incoming item would complete a merged item while the previous one still waits for
    ``o.ready``. ``count`` (1..n) must be stable while items flow.

    Ports: ``i`` In(stream of ``elem_shape``), ``o`` Out(stream of ``ArrayLayout(elem_shape,
    n)``), ``count`` In(range(1, n + 1)).
    """

    def __init__(self, elem_shape, n: int):
        if n < 1:
            raise ValueError(f"n must be >= 1, not {n}")
        self.elem_shape, self.n = elem_shape, n
        self.wide = data.ArrayLayout(elem_shape, n)
        super().__init__({"i": In(stream.Signature(elem_shape)),
                          "o": Out(stream.Signature(self.wide)),
                          "count": In(range(n + 1))})

    def elaborate(self, platform):
        m = Module()
        idx = Signal(range(max(2, self.n)))       # slots of the current item already filled
        buf = Signal(self.wide)
        completes = idx + 1 >= self.count
        m.d.comb += self.i.ready.eq(~self.o.valid | self.o.ready | ~completes)
        accept = self.i.valid & self.i.ready
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(accept):
            m.d.sync += [buf[j].eq(Mux(idx == j, self.i.payload, buf[j])) for j in range(self.n)]
            with m.If(completes):
                m.d.sync += [idx.eq(0), self.o.valid.eq(1)]
                m.d.sync += [self.o.payload[j].eq(Mux(idx == j, self.i.payload, buf[j]))
                             for j in range(self.n)]
            with m.Else():
                m.d.sync += idx.eq(idx + 1)
        return m


class Repeat(wiring.Component):
    """Emit every item ``count`` times (``count`` >= 1, a port stable while items flow).

    Timing: the item is held in a register; one copy per cycle; ``i.ready`` when empty or the
    last copy leaves in this cycle. With ``registered_ready`` ``i.ready`` is only "empty" (a
    register: no path from ``o.ready`` upstream), at the cost of a cycle between the last copy
    of an item and the first of the next: for consumers taking at most one item every two
    cycles, where that gap costs nothing.

    Ports: ``i`` In(stream of ``shape``), ``o`` Out(stream of ``shape``), ``count``
    In(unsigned(count_bits)).
    """

    def __init__(self, shape, count_bits: int, *, registered_ready: bool = False):
        self.shape = shape
        self.registered_ready = registered_ready
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape)),
                          "count": In(unsigned(count_bits))})

    def elaborate(self, platform):
        m = Module()
        # copies left after the one on the output, counting down (issue 10: comparing a count
        # of copies sent with ``count`` put an adder and a comparator into the ready path;
        # a ``count`` of 0 is sent once, as 1)
        left = Signal(len(self.count))
        last = left == 0
        fire = self.o.valid & self.o.ready
        load = ~self.o.valid if self.registered_ready else ~self.o.valid | (fire & last)
        m.d.comb += self.i.ready.eq(load)
        with m.If(fire):
            m.d.sync += left.eq(left - 1)
            with m.If(last):
                m.d.sync += self.o.valid.eq(0)
        with m.If(load & self.i.valid):
            m.d.sync += [self.o.payload.eq(self.i.payload), self.o.valid.eq(1),
                         left.eq(Mux(self.count == 0, 0, self.count - 1))]
        return m


class Join(wiring.Component):
    """Join streams into one: output field ``name`` = payload of input ``name``.

    Each input has an enable bit (``en`` port, one bit per input in order, stable while items
    flow): a disabled input is not waited for and never consumed (its field is its current,
    meaningless payload). An output item is valid when every enabled input is valid; all
    enabled inputs are consumed together. Combinational (no register, no latency); ``ready`` of
    an input depends on the other inputs' ``valid`` and on ``o.ready``.

    Args:
        shapes: ``{name: shape}`` of the inputs (ports ``i_<name>``), in order.

    Ports: ``i_<name>`` In(stream of shape) per input, ``o`` Out(stream of
    ``StructLayout(shapes)``), ``en`` In(len(shapes)).
    """

    def __init__(self, shapes: dict):
        self.names = list(shapes)
        self.layout = data.StructLayout(shapes)
        members = {f"i_{n}": In(stream.Signature(s)) for n, s in shapes.items()}
        members.update(o=Out(stream.Signature(self.layout)), en=In(len(shapes)))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        ins = [getattr(self, f"i_{n}") for n in self.names]
        ok = [s.valid | ~self.en[k] for k, s in enumerate(ins)]
        all_ok = Signal()
        acc = ok[0]
        for v in ok[1:]:
            acc = acc & v
        m.d.comb += [all_ok.eq(acc), self.o.valid.eq(all_ok)]
        for k, (n, s) in enumerate(zip(self.names, ins)):
            m.d.comb += [self.o.payload[n].eq(s.payload),
                         s.ready.eq(self.o.ready & all_ok & self.en[k])]
        return m


class Fork(wiring.Component):
    """Broadcast one stream to ``n`` consumers: output ``o_<k>`` carries every input item (e.g.
    CMAC_A and CMAC_B both take each atomic operation, docs/conv.md).

    An eager fork: each output offers the item until its consumer has taken it (a ``taken`` flag
    per output remembers consumers that took it early), and the input item is consumed in the
    cycle the last consumer takes it. No added latency, one item per cycle when all consumers
    are ready; outputs keep ``valid`` and ``payload`` stable while waiting (``lib.stream``
    rule). ``i.ready`` depends combinationally on the outputs' ``ready``.

    Args:
        shape: payload shape; n: number of consumers (>= 1).

    Ports: ``i`` In(stream of shape), ``o_0`` .. ``o_<n-1>`` Out(stream of shape).

    Raises ValueError when ``n`` < 1.
    """

    def __init__(self, shape, n: int):
        if n < 1:
            raise ValueError(f"Fork needs at least one consumer, got {n}")
        self.n = n
        members = {"i": In(stream.Signature(shape))}
        members.update({f"o_{k}": Out(stream.Signature(shape)) for k in range(n)})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        outs = [getattr(self, f"o_{k}") for k in range(self.n)]
        taken = Signal(self.n)
        done = [Signal(name=f"done_{k}") for k in range(self.n)]
        for k, o in enumerate(outs):
            m.d.comb += [o.valid.eq(self.i.valid & ~taken[k]), o.payload.eq(self.i.payload),
                         done[k].eq(taken[k] | o.ready)]
        all_done = Signal()
        acc = done[0]
        for d in done[1:]:
            acc = acc & d
        m.d.comb += [all_done.eq(acc), self.i.ready.eq(all_done)]
        with m.If(self.i.valid & all_done):
            m.d.sync += taken.eq(0)
        with m.Elif(self.i.valid):
            for k, o in enumerate(outs):
                with m.If(o.ready):
                    m.d.sync += taken[k].eq(1)
        return m
