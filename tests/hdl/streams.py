"""Amaranth-simulator (0.5 ``ctx`` testbench API) helpers for ``amaranth.lib.stream`` interfaces
with random stalls.

Import from a test module in ``tests/`` (pytest puts the test file's directory on ``sys.path``)::

    from streams import stream_put, stream_get, check_stream_stable

Typical use, one producer and one consumer testbench around a DUT with ``i``/``o`` streams::

    rng = random.Random(1)
    got = []

    async def producer(ctx):
        await stream_put(ctx, dut.i, items, rng=rng)

    async def consumer(ctx):
        got.extend(await stream_get(ctx, dut.o, len(items), rng=rng))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(producer)
    sim.add_testbench(consumer)
    sim.add_process(check_stream_stable(dut.o))      # background protocol checker
    sim.run()

Payload values. ``stream_get`` returns ``ctx.get(stream.payload)`` for each transfer, i.e.

* an ``int`` when the payload shape is a plain ``unsigned(n)``/``signed(n)`` (signed shapes give
  negative ints);
* a ``data.Const`` when the payload is a ``data.View`` (a ``lib.data`` layout). A ``data.Const``
  compares equal (``==``) to another ``data.Const`` of the same layout, and to a ``list`` (array
  layout) or ``dict`` (struct layout) that the layout can turn into a constant; for the raw bits
  use ``const.as_value().value`` (an unsigned ``int``, element 0 / the first field in the least
  significant bits). :func:`as_bits` does that for any returned payload.

``stream_put`` accepts whatever ``ctx.set(stream.payload, ...)`` accepts: ints, ``data.Const``,
lists for array layouts, dicts for struct layouts.

Every helper takes an explicit ``rng`` (a ``random.Random``) so that failures reproduce from the
test's seed.
"""
from __future__ import annotations

import random
from collections import deque

from amaranth.hdl import ClockDomain, Module, Value
from amaranth.lib import data
from amaranth.sim import Simulator

__all__ = ["stream_put", "stream_get", "check_stream_stable", "as_bits"]


async def stream_put(ctx, stream, payloads, *, rng: random.Random, p_stall: float = 0.3):
    """Drive ``payloads`` into ``stream`` (the DUT's ``In(stream.Signature(...))`` side), in order.

    Before each item the producer idles (``valid`` low) for a geometric number of cycles: each
    cycle with probability ``p_stall`` (0 = no idle cycles, full rate). It then raises ``valid``
    with the item on ``payload`` and holds both, unchanged, until the clock edge at which
    ``ready`` is high (the transfer); ``valid`` never drops while an item waits (lib.stream rule).
    On return ``valid`` is low and the last transfer has happened at the preceding clock edge.

    Args:
        ctx: the testbench's ``SimulatorContext``.
        stream: a ``stream.Interface`` (or the DUT's port) whose ``valid``/``payload`` the
            testbench drives and whose ``ready`` it reads.
        payloads: iterable of values acceptable to ``ctx.set(stream.payload, value)``.
        rng: random source for the idle cycles.
        p_stall: probability, per cycle, of one more idle cycle before an item (0 <= p < 1).

    Raises:
        ValueError: if ``p_stall`` is not in [0, 1).
    """
    if not 0 <= p_stall < 1:
        raise ValueError(f"p_stall must be in [0, 1), not {p_stall!r}")
    for payload in payloads:
        while rng.random() < p_stall:
            ctx.set(stream.valid, 0)
            await ctx.tick()
        ctx.set(stream.valid, 1)
        ctx.set(stream.payload, payload)
        await ctx.tick().until(stream.ready)
    ctx.set(stream.valid, 0)


async def stream_get(ctx, stream, n: int, *, rng: random.Random, p_stall: float = 0.3,
                     timestamps: list | None = None, timeout: int | None = 100_000) -> list:
    """Take ``n`` items from ``stream`` (the DUT's ``Out(stream.Signature(...))`` side).

    Each cycle ``ready`` is low with probability ``p_stall`` (0 = always ready). An item is
    taken at each clock edge where ``valid`` and ``ready`` are both high; its payload is sampled
    at that edge. On return ``ready`` is low.

    Args:
        ctx: the testbench's ``SimulatorContext``.
        stream: a ``stream.Interface`` whose ``ready`` the testbench drives.
        n: number of items to take (>= 0).
        rng: random source for the ready stalls.
        p_stall: probability, per cycle, of holding ``ready`` low (0 <= p < 1).
        timestamps: if given, the cycle of each transfer is appended to it, counted in clock
            edges from the call (the first edge after the call is cycle 0); for throughput
            checks, e.g. ``timestamps[-1] - timestamps[0] == n - 1`` at one item per cycle.
        timeout: give up after this many cycles (``None``: never), so that a DUT that loses
            items fails the test instead of hanging it.

    Returns:
        the ``n`` payloads in transfer order: ints for plain shapes, ``data.Const`` for
        ``lib.data`` layouts (see the module docstring for comparing them).

    Raises:
        ValueError: if ``p_stall`` is not in [0, 1) or ``n`` is negative.
        AssertionError: if ``timeout`` cycles pass before ``n`` items arrived (the message gives
            how many did).
    """
    if not 0 <= p_stall < 1:
        raise ValueError(f"p_stall must be in [0, 1), not {p_stall!r}")
    if n < 0:
        raise ValueError(f"n must be >= 0, not {n!r}")
    got = []
    cycle = 0
    while len(got) < n:
        if timeout is not None and cycle >= timeout:
            raise AssertionError(f"stream_get: only {len(got)} of {n} items after {cycle} cycles")
        ready = rng.random() >= p_stall
        ctx.set(stream.ready, ready)
        _, _, valid, payload = await ctx.tick().sample(stream.valid, stream.payload)
        if ready and valid:
            got.append(payload)
            if timestamps is not None:
                timestamps.append(cycle)
        cycle += 1
    ctx.set(stream.ready, 0)
    return got


def check_stream_stable(stream, *, errors: list | None = None, name: str = "stream"):
    """Return a process (for ``sim.add_process``) that checks the lib.stream producer rule on
    ``stream``: once ``valid`` is high at a clock edge without ``ready``, at the next edge
    ``valid`` is still high and ``payload`` is unchanged.

    The process runs in the background for the whole simulation (it does not keep
    ``sim.run()`` going). By default a violation raises ``AssertionError`` inside the simulation
    (which ``sim.run()`` propagates); with ``errors`` given, a message per violation is appended
    to that list instead (the test then asserts it is empty), naming ``name`` and the cycle.

    Args:
        stream: the stream interface to watch (either direction).
        errors: optional list collecting violation messages instead of raising.
        name: label used in messages.
    """
    async def process(ctx):
        held = None       # payload bits of an item offered and not taken at the previous edge
        cycle = 0
        async for _, _, valid, ready, bits in ctx.tick().sample(
                stream.valid, stream.ready, Value.cast(stream.payload)):
            if held is not None:
                msg = None
                if not valid:
                    msg = f"{name}: valid dropped at cycle {cycle} before the item was taken"
                elif bits != held:
                    msg = (f"{name}: payload changed under back-pressure at cycle {cycle}: "
                           f"{held:#x} -> {bits:#x}")
                if msg is not None:
                    if errors is None:
                        raise AssertionError(msg)
                    errors.append(msg)
            held = bits if valid and not ready else None
            cycle += 1
    return process


def as_bits(payload) -> int:
    """The payload as an unsigned ``int`` of its bits (element 0 / first field in the LSBs).

    Accepts an ``int`` (returned unchanged; a negative int is returned as is, so compare
    like with like) or a ``data.Const``.
    """
    if isinstance(payload, data.Const):
        return payload.as_value().value
    return int(payload)


def simulate_streams(dut, producers, consumers, streams_to_check, processes=()) -> None:
    """Simulate ``dut`` (in a top module with a ``sync`` domain, so combinational DUTs work
    too) with the async testbenches ``producers`` and ``consumers`` (``async def tb(ctx)``), the
    async ``processes`` (e.g. :func:`count_per_cycle`) and a :func:`check_stream_stable`
    process on each ``(name, stream)`` of ``streams_to_check``.
    Raises AssertionError listing the stream-protocol violations seen."""
    errors: list = []
    top = Module()
    top.domains.sync = ClockDomain()
    top.submodules.dut = dut
    sim = Simulator(top)
    sim.add_clock(1e-8)
    for tb in list(producers) + list(consumers):
        sim.add_testbench(tb)
    for proc in processes:
        sim.add_process(proc)
    for name, s in streams_to_check:
        sim.add_process(check_stream_stable(s, errors=errors, name=name))
    sim.run()
    assert errors == [], errors


def count_per_cycle(signals, counts: list):
    """A process adding each cycle's value of ``signals[i]`` to ``counts[i]`` (per-cycle event
    counts such as CDP's ``stat_counts``); the caller reads and resets ``counts``."""
    async def process(ctx):
        async for _clk, _rst, *vals in ctx.tick().sample(*signals):
            for i, v in enumerate(vals):
                counts[i] += v
    return process


def dma_memory_benches(rd, wr, beat, mems, rng, log, *, p_ready=0.7, max_latency=12, p_gap=0.2):
    """Background testbenches (``async def tb(ctx)``, a reader and a writer) serving one unit's
    DMA client ports ``rd`` (DmaReadSignature) and ``wr`` (DmaWriteSignature) of ``beat``-byte
    beats from ``mems`` ({cv bit: verif.mem.SparseMemory}; requests without ``cv`` reach
    ``mems[0]``) with random request stalls (``p_ready``), response delays (up to
    ``max_latency`` cycles) and gaps (``p_gap``); read beats return in request order (one client,
    one AXI ID). Protocol errors go to ``log``."""
    has_cv = hasattr(rd.req.payload, "cv")

    async def reader(ctx):
        q, cycle, holding = deque(), 0, False
        while True:
            ctx.set(rd.req.ready, rng.random() < p_ready)
            rv = holding or (bool(q) and q[0][0] <= cycle and rng.random() >= p_gap)
            ctx.set(rd.rsp.valid, rv)
            if rv:
                ctx.set(rd.rsp.payload, q[0][1])
            sampled = await ctx.tick().sample(rd.req.valid, rd.req.ready, rd.req.payload.addr,
                                              rd.req.payload.len, rd.rsp.ready,
                                              *((rd.req.payload.cv,) if has_cv else ()))
            _, _, v, r, addr, length, rs_r, *cv = sampled
            holding = rv and not rs_r
            if rv and not rs_r:
                log.append(f"read cycle {cycle}: data refused (credit rule)")
            if rv and rs_r:
                q.popleft()
            if v and r:
                mem = mems[cv[0] if cv else 0]
                due = max(cycle + 1 + rng.randrange(max_latency + 1), q[-1][0] if q else 0)
                for i in range(length + 1):
                    q.append((due + i, int.from_bytes(mem.read_bytes(addr + i * beat, beat), "little")))
            cycle += 1

    async def writer(ctx):
        bursts, resp, cycle = deque(), [], 0
        while True:
            ctx.set(wr.req.ready, rng.random() < p_ready)
            ctx.set(wr.data.ready, bool(bursts) and rng.random() < p_ready)
            due = [d for d in resp if d <= cycle]
            ctx.set(wr.done, bool(due))
            if due:
                resp.remove(due[0])
            sampled = await ctx.tick().sample(wr.req.valid, wr.req.ready, wr.req.payload.addr,
                                              wr.req.payload.len, wr.data.valid, wr.data.ready,
                                              wr.data.payload.data, wr.data.payload.strb,
                                              *((wr.req.payload.cv,) if has_cv else ()))
            _, _, v, r, addr, length, dv, dr, dat, strb, *cv = sampled
            if v and r:
                bursts.append([mems[cv[0] if cv else 0], addr, length + 1])
            if dv and dr:
                mem, a, _ = b = bursts[0]
                raw = dat.to_bytes(beat, "little")
                for i in range(beat):
                    if strb >> i & 1:
                        mem.write(a + i, raw[i:i + 1])
                b[1] += beat
                b[2] -= 1
                if b[2] == 0:
                    bursts.popleft()
                    resp.append(cycle + 1 + rng.randrange(max_latency + 1))
            cycle += 1
    return reader, writer


async def reg_write(ctx, bus, unit, reg: str, value: int) -> None:
    """One register write on a unit's register bus ``bus`` (:class:`hdl.regfile.RegBusSignature`)
    of register-map unit ``unit`` (``REGMAP.unit(...)``), register ``reg`` by name: one cycle."""
    from hdl.regfile import reg_word
    ctx.set(bus.addr, reg_word(unit, reg))
    ctx.set(bus.wdata, value)
    ctx.set(bus.we, 1)
    await ctx.tick()
    ctx.set(bus.we, 0)


async def reg_read(ctx, bus, unit, reg: str) -> int:
    """The value register ``reg`` reads on ``bus`` now (combinational read data)."""
    from hdl.regfile import reg_word
    ctx.set(bus.addr, reg_word(unit, reg))
    await ctx.delay(1e-9)
    return ctx.get(bus.rdata)


def mcif_read_client(port, mem, beat: int, rng: random.Random, p_ready: float):
    """A fake MCIF answering DMA read client ``port`` (hdl.dma's DmaReadSignature) from ``mem``
    (verif.mem.SparseMemory), ``beat`` bytes per beat in request order; its req.ready and
    rsp.valid random (``p_ready``). Returns the process (``sim.add_process``)."""
    async def proc(ctx):
        q = deque()
        while True:
            ctx.set(port.req.ready, rng.random() < p_ready)
            if q:
                ctx.set(port.rsp.valid, rng.random() < p_ready)
                ctx.set(port.rsp.payload, int.from_bytes(mem.read_bytes(q[0], beat), "little"))
            else:
                ctx.set(port.rsp.valid, 0)
            _, _, qv, qr, qp, sv, sr = await ctx.tick().sample(
                port.req.valid, port.req.ready, port.req.payload, port.rsp.valid, port.rsp.ready)
            if sv and sr:
                q.popleft()
            if qv and qr:
                q.extend(qp.addr + i * beat for i in range(qp.len + 1))
    return proc


def mcif_write_client(port, mem, beat: int, rng: random.Random, p_ready: float):
    """A fake MCIF storing DMA write client ``port``'s bursts (hdl.dma's DmaWriteSignature) into
    ``mem`` with their byte strobes; req.ready and data.ready random (``p_ready``), each burst's
    ``done`` 1..5 cycles after its last beat. Returns the process (``sim.add_process``)."""
    async def proc(ctx):
        bursts, b_due, cyc = deque(), deque(), 0
        while True:
            ctx.set(port.req.ready, rng.random() < p_ready)
            ctx.set(port.data.ready, bool(bursts) and rng.random() < p_ready)
            ctx.set(port.done, bool(b_due) and b_due[0] <= cyc)
            _, _, qv, qr, qp, dv, dr, dp, dn = await ctx.tick().sample(
                port.req.valid, port.req.ready, port.req.payload,
                port.data.valid, port.data.ready, port.data.payload, port.done)
            cyc += 1
            if dn:
                b_due.popleft()
            if dv and dr:
                b = bursts[0]
                for i in range(beat):
                    if (dp.strb >> i) & 1:
                        mem.write(b[0] + i, bytes([(dp.data >> (8 * i)) & 0xFF]))
                b[0] += beat
                b[1] -= 1
                if b[1] == 0:
                    bursts.popleft()
                    b_due.append(cyc + rng.randrange(1, 6))
            if qv and qr:
                bursts.append([qp.addr, qp.len + 1])
    return proc
