"""Engine-independent trace player: runs a parsed trace against an ``Engine`` (rtl or model).

Follows NVIDIA's own trace player (nvdla/hw ``verif/testbench/trace_player``, observed
behaviour, not its code): commands run in file order; every ``intr_notify(<UNIT>_<g>, sync)`` is
queued per unit up front; when the DUT raises ``dla_intr`` the player reads GLB
``S_INTR_STATUS & ~S_INTR_MASK``, matches each set ``<UNIT>_DONE_STATUS<g>`` bit against the
unit's queue (a group mismatch may match the next queued entry), fires that entry's sync id, and
clears the bits by writing them back to ``S_INTR_STATUS``. ``check_crc``/``check_nothing`` and the
``intr_notify`` line itself wait until their sync id has fired. The clear is a posted write and
``dla_intr`` is registered, so before waiting for another interrupt right after a clear the
player lets the line drop (bounded; see ``Player._wait_intr_settled``).
"""
from __future__ import annotations

import time
import zlib
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Protocol

from hdl.regmap import REGMAP, regmap_for
from verif.trace.parser import Trace, TraceDataError, TraceSyntaxError, load_dat

GLB_INTR_MASK = REGMAP.lookup("NVDLA_GLB.S_INTR_MASK_0").addr
GLB_INTR_STATUS = REGMAP.lookup("NVDLA_GLB.S_INTR_STATUS_0")

PASS, FAIL, NOT_RUNNABLE = "PASS", "FAIL", "NOT-RUNNABLE"


class Engine(Protocol):
    """What the player needs from a simulator. Addresses are bytes; values 32-bit.

    ``cycle`` is the current clock cycle (None for an untimed engine such as the model); an
    engine may also set ``write_accept_cycle``, the cycle whose clock edge accepted the last
    ``reg_write`` (the kick-off cycle for cycle counts).
    ``wait_intr(max_cycles)`` returns True once ``dla_intr`` is high, False after ``max_cycles``.
    ``busy_units()`` names the units whose status shows a busy register group.
    ``mem`` names the trace's memory: ``pri_mem`` (behind MCIF, ``nvdla_core2dbb``) or
    ``sec_mem`` (behind CVIF, ``nvdla_core2cvsram``; an engine of a configuration without the
    secondary memory interface raises TraceFailure for it, see :func:`memory_of`).
    An engine may set ``address_width`` (bits of its memory address space; ``play`` assumes 32
    otherwise) so that trace regions outside it are rejected before anything runs.
    """
    name: str

    @property
    def cycle(self) -> int | None: ...
    async def mem_write(self, addr: int, data: bytes, mem: str = "pri_mem") -> None: ...
    async def mem_fill(self, addr: int, size: int, value: int, mem: str = "pri_mem") -> None: ...
    async def mem_read(self, addr: int, size: int, mem: str = "pri_mem") -> bytes: ...
    async def reg_write(self, addr: int, value: int) -> None: ...
    async def reg_read(self, addr: int) -> int: ...
    async def wait_intr(self, max_cycles: int) -> bool: ...
    async def wait_cycles(self, n: int) -> None: ...
    async def busy_units(self) -> list[str]: ...


@dataclass
class CheckResult:
    """One ``check_crc``: region, golden and actual CRC, and the bytes read (for diagnosis)."""
    where: str
    base: int
    size: int
    expected: int
    actual: int
    data: bytes = field(repr=False)

    @property
    def ok(self) -> bool:
        return self.expected == self.actual


@dataclass
class TraceResult:
    """Outcome of one trace: status PASS/FAIL/NOT-RUNNABLE, reason, cycles, wall seconds."""
    name: str
    status: str
    message: str = ""
    cycles: int | None = None
    wall: float = 0.0
    checks: list[CheckResult] = field(default_factory=list)


class TraceFailure(Exception):
    """A trace failed: the message says where and why (timeout, unexpected interrupt, ...)."""


def memory_of(mem: str, primary, secondary, config_name: str = ""):
    """The engine memory a trace's memory name stands for: ``primary`` for ``pri_mem``,
    ``secondary`` for ``sec_mem``. Raises TraceFailure for ``sec_mem`` when ``secondary`` is None
    (the configuration has no secondary memory interface) and ValueError for another name (the
    parser admits only these two)."""
    if mem == "pri_mem":
        return primary
    if mem == "sec_mem":
        if secondary is None:
            raise TraceFailure(f"the trace uses sec_mem, but configuration {config_name or '?'} "
                               "has no secondary memory interface (secondary_memif)")
        return secondary
    raise ValueError(f"unknown trace memory {mem!r} (pri_mem or sec_mem)")


class Player:
    """Plays one trace on one engine. Cycle budgets are in DUT clock cycles.

    ``intr_budget``: cycles to wait for one interrupt (default :func:`verif.trace.budget.
    trace_budget`: from the program's own work, at least 4x NVIDIA's cycles where NVIDIA's table
    lists the trace); ``poll_budget``: cycles for a
    ``poll_reg_equal``; ``intr_drop_budget``: cycles ``dla_intr`` may stay high after the player
    cleared every pending ``S_INTR_STATUS`` bit (see ``_wait_intr_settled``). ``on_timeout``
    (optional) returns extra text for timeout messages (the rtl engine gives the waveform path). ``images`` (optional) maps a ``mem_load`` file
    name to its ``load_dat`` runs, already loaded; other images are loaded when played.
    """

    def __init__(self, trace: Trace, engine: Engine, *, intr_budget: int | None = None,
                 poll_budget: int = 1_000_000, on_timeout=None, images: dict | None = None,
                 intr_drop_budget: int = 64):
        self.trace, self.engine = trace, engine
        self.images = dict(images or {})
        if intr_budget is None:     # default: from the program's own work (verif/trace/budget.py)
            from hdl.config import NV_SMALL
            from verif.trace.budget import trace_budget
            intr_budget = trace_budget(trace, getattr(engine, "cfg", NV_SMALL))
        self.intr_budget, self.poll_budget = intr_budget, poll_budget
        self.intr_drop_budget = intr_drop_budget
        self._pending_clear: tuple[int, int | None] | None = None   # (bits, cycle) of the last clear
        self._intr_seen: int | None = None     # cycle a pending interrupt was seen while settling
        self.on_timeout = on_timeout or (lambda: "")
        self.fired: set[str] = set()
        self.queues: dict[str, deque] = defaultdict(deque)
        self.kick_cycle: int | None = None
        self.last_intr_cycle: int | None = None
        self.checks: list[CheckResult] = []
        self.current = None   # the command being played (for error messages)
        # a trace names registers; the engine's configuration places them (v1 on nv_full: the
        # same names at v1's addresses, hdl/regmap/v1.py)
        self.regmap = regmap_for(getattr(engine, "cfg", None))
        self._intr_status = self.regmap.lookup("NVDLA_GLB.S_INTR_STATUS_0")
        self._intr_mask = self.regmap.lookup("NVDLA_GLB.S_INTR_MASK_0").addr

    def _addr(self, ref) -> int:
        """Byte address of a trace's register (a v2 RegRef) in the engine's register map."""
        if self.regmap is REGMAP:
            return ref.addr
        return self.regmap.lookup(ref.trace_name).addr

    async def _timeout_text(self, what: str) -> str:
        busy = await self.engine.busy_units()
        extra = self.on_timeout()
        return (f"{what}; units still busy: {', '.join(busy) if busy else 'none'}"
                + (f"; {extra}" if extra else ""))

    async def _service_interrupt(self, waiting_for: str, where: str) -> None:
        eng = self.engine
        if self._pending_clear is not None:
            await self._wait_intr_settled(where)
        if not await eng.wait_intr(self.intr_budget):
            raise TraceFailure(await self._timeout_text(
                f"{where}: no interrupt within {self.intr_budget} cycles while waiting for {waiting_for}"))
        self.last_intr_cycle = eng.cycle if self._intr_seen is None else self._intr_seen
        self._intr_seen = None
        status = await eng.reg_read(self._intr_status.addr)
        mask = await eng.reg_read(self._intr_mask)
        val = status & ~mask
        if val == 0:
            raise TraceFailure(f"{where}: dla_intr is high but S_INTR_STATUS & ~S_INTR_MASK is 0 "
                               f"(status {status:#x}, mask {mask:#x})")
        for f in self._intr_status.reg.fields:
            if not (val >> f.lsb) & 1:
                continue
            unit, group = f.name[:-len("_DONE_STATUS0")], int(f.name[-1])
            q = self.queues[unit]
            if not q:
                raise TraceFailure(f"{where}: unexpected interrupt {f.name} (no intr_notify left for {unit})")
            item = q.popleft()
            if item[0] != group:
                # NVIDIA's player: a group mismatch may match the next queued entry for the unit.
                if not q or q[0][0] != group:
                    raise TraceFailure(f"{where}: interrupt {f.name} fired but {unit}_{item[0]} was expected")
                item, pre = q.popleft(), item
                q.appendleft(pre)
            self.fired.add(item[1])
        await eng.reg_write(self._intr_status.addr, val)
        self._pending_clear = (val, eng.cycle)

    async def _wait_intr_settled(self, where: str) -> None:
        """Before waiting for the next interrupt after a posted clear of ``S_INTR_STATUS``: let
        ``dla_intr`` drop, or find it high for a bit still pending, so that ``wait_intr`` sees
        only interrupts that are really pending (the race: two ``intr_notify`` in a row, the
        second one waited for right after the first one's clear).

        The clear is posted: the CSB write reaches GLB a few cycles after ``reg_write`` returns,
        and GLB registers ``dla_intr`` from the status (hdl/glb.py; NVIDIA's GLB also registers
        it), so the line stays high for a few cycles after the bits are gone. A read of
        ``S_INTR_STATUS`` is ordered after the clear on CSB, so it tells a stale line from a new
        interrupt; a line that stays high with nothing pending for ``intr_drop_budget`` cycles
        after the clear is a TraceFailure. Done lazily (only when the player waits for an
        interrupt within ``intr_drop_budget`` cycles of a clear), so the cycles of traces that
        do something else after a clear are unchanged; an untimed engine has no race."""
        cleared, t0 = self._pending_clear
        self._pending_clear = None
        eng = self.engine
        if eng.cycle is None or eng.cycle - t0 > self.intr_drop_budget:
            return
        while await eng.wait_intr(1):          # high now, or rose within one cycle
            seen = eng.cycle
            status = await eng.reg_read(self._intr_status.addr)
            mask = await eng.reg_read(self._intr_mask)
            if status & ~mask:                  # really pending: the interrupt was seen then
                self._intr_seen = seen
                return
            if eng.cycle - t0 > self.intr_drop_budget:
                raise TraceFailure(
                    f"{where}: dla_intr still high {eng.cycle - t0} cycles after the player "
                    f"cleared S_INTR_STATUS bits {cleared:#x}, while S_INTR_STATUS {status:#x} "
                    f"& ~S_INTR_MASK {mask:#x} is 0")
            await eng.wait_cycles(1)

    async def _wait_sync(self, sync: str, where: str) -> None:
        while sync not in self.fired:
            await self._service_interrupt(f"sync id {sync}", where)

    async def run(self) -> None:
        eng = self.engine
        for c in self.trace.commands:
            if c.kind == "intr_notify":
                self.queues[c.args["unit"]].append((c.args["group"], c.args["sync"]))
        for c in self.trace.commands:
            self.current = c
            a = c.args
            if c.kind == "mem_init":
                await eng.mem_fill(a["base"], a["size"], 0, mem=a["mem"])
            elif c.kind == "mem_load":
                runs = self.images.get(a["file"])
                if runs is None:
                    runs = load_dat(self.trace.directory / a["file"])
                for off, data in runs:
                    await eng.mem_write(a["base"] + off, data, mem=a["mem"])
            elif c.kind == "reg_write":
                await eng.reg_write(self._addr(a["reg"]), a["value"])
                if c.is_kickoff:
                    # count from the clock edge that accepts the kick-off write when the engine
                    # knows it (rtl: one edge after the request is driven); with that convention
                    # NVIDIA's own RTL on our rtl engine measures exactly the reference table's
                    # cycles (checked on sdp/pdp/cdp/dc traces)
                    self.kick_cycle = getattr(eng, "write_accept_cycle", eng.cycle)
            elif c.kind == "poll_reg_equal":
                start = eng.cycle or 0
                while await eng.reg_read(self._addr(a["reg"])) != a["value"]:
                    if eng.cycle is None:
                        raise TraceFailure(f"{c.where}: {a['reg'].trace_name} is "
                                           f"{await eng.reg_read(self._addr(a['reg'])):#x}, never {a['value']:#x}")
                    if eng.cycle - start > self.poll_budget:
                        raise TraceFailure(await self._timeout_text(
                            f"{c.where}: {a['reg'].trace_name} did not reach {a['value']:#x} "
                            f"within {self.poll_budget} cycles"))
                    await eng.wait_cycles(16)
            elif c.kind == "intr_notify":
                await self._wait_sync(a["sync"], c.where)
            elif c.kind in ("sync_notify", "sync_wait"):
                # commands run in file order and check_program saw each sync_wait's notify
                # earlier in the file: the ordering the guide's sequencers need already holds
                pass
            elif c.kind in ("check_crc", "check_nothing"):
                await self._wait_sync(a["sync"], c.where)
                if c.kind == "check_crc":
                    data = await eng.mem_read(a["base"], a["size"], mem=a["mem"])
                    self.checks.append(CheckResult(c.where, a["base"], a["size"], a["crc"],
                                                   zlib.crc32(data) & 0xFFFFFFFF, data))

    @property
    def cycles(self) -> int | None:
        """Cycles from the last kick-off (D_OP_ENABLE) write to the last interrupt, as NVIDIA's
        reference table counts them."""
        if self.kick_cycle is None or self.last_intr_cycle is None:
            return None
        return self.last_intr_cycle - self.kick_cycle


def load_images(trace: Trace) -> dict[str, list[tuple[int, bytes]]]:
    """Every ``.dat`` image the trace's ``mem_load`` commands name, by file name (see
    ``load_dat``). Raises TraceDataError."""
    images = {}
    for c in trace.commands:
        if c.kind == "mem_load" and c.args["file"] not in images:
            images[c.args["file"]] = load_dat(trace.directory / c.args["file"])
    return images


async def play(trace: Trace, engine: Engine, *, address_width: int | None = None,
               **kw) -> TraceResult:
    """Run ``trace`` on ``engine``; never raises for a trace-level failure (see TraceResult).

    Before anything reaches the engine: a missing ``.dat`` makes the trace NOT-RUNNABLE; a
    malformed ``.dat`` (TraceDataError) or a ``mem_init``/``mem_load``/``check_crc`` region
    outside the ``address_width``-bit address space (default: the engine's ``address_width``
    attribute, else 32 bits) makes it FAIL. Other keywords go to :class:`Player`.
    """
    t0 = time.monotonic()
    missing = trace.missing_files()
    if missing:
        return TraceResult(trace.name, NOT_RUNNABLE, "missing memory image(s): "
                           + ", ".join(str(p) for p in missing))
    if address_width is None:
        address_width = getattr(engine, "address_width", 32)
    try:
        images = load_images(trace)
        trace.check_address_space(address_width, images)
    except (TraceDataError, TraceSyntaxError) as e:
        return TraceResult(trace.name, FAIL, str(e), wall=time.monotonic() - t0)
    p = Player(trace, engine, images=images, **kw)
    try:
        await p.run()
    except TraceFailure as e:
        return TraceResult(trace.name, FAIL, str(e), p.cycles, time.monotonic() - t0, p.checks)
    except Exception as e:  # the engine rejected the program (e.g. ModelConfigError) or crashed
        where = f" at {p.current.where}" if p.current is not None else ""
        return TraceResult(trace.name, FAIL, f"{type(e).__name__}{where}: {e}", p.cycles,
                           time.monotonic() - t0, p.checks)
    bad = [c for c in p.checks if not c.ok]
    status = FAIL if bad else PASS
    msg = "; ".join(f"{c.where}: CRC {c.actual:#010x} != golden {c.expected:#010x} "
                    f"(region {c.base:#x}+{c.size:#x})" for c in bad)
    return TraceResult(trace.name, status, msg, p.cycles, time.monotonic() - t0, p.checks)
