"""The Python host of NVIDIA's runtime + firmware process: plays its register accesses, memory
accesses and interrupt waits on a trace-player engine (``verif.trace.player.Engine``: the
``model``, ``rtl`` or ``amaranth`` engine) and judges what happened.

:func:`run_program` starts the program that :mod:`verif.sw.build` made (NVIDIA's runtime
application ``nvdla_runtime --loadable FILE``, with the firmware and the project's glue inside)
in a work directory, serves its requests (:mod:`verif.sw.protocol`) until it exits, and returns a
:class:`HostOutcome`: whether it ran to the end, the output image it wrote (``output.dimg``, the
runtime's serialisation of the output tensor), and statistics. Every request runs in zero
simulated time except the interrupt wait, which runs the engine until ``dla_intr``:

* ``REG_WRITE``/``REG_READ``: ``engine.reg_write``/``reg_read`` (one CSB transaction on the
  simulated engines, through their CSB monitor);
* ``MEM_WRITE``/``MEM_READ``: ``engine.mem_write``/``mem_read`` (the backdoor of the engine's
  memory: the task's buffers before and after a task, the firmware's descriptor reads);
* ``WAIT_INTR``: ``engine.wait_intr(intr_budget)``. ``dla_intr`` is registered from
  ``S_INTR_STATUS`` and the firmware's clear is a posted write (hdl/glb.py), so a line found high
  at once may be the last interrupt's: then ``S_INTR_STATUS & ~S_INTR_MASK`` is read and a
  stale line is waited out (``intr_drop_budget`` cycles at most), as the trace player does
  (``Player._wait_intr_settled``). An untimed engine (the model) with no interrupt pending
  never gets one: a failure at once.

Checks beyond the output (each a failure naming the task and what the firmware did last): the
firmware's return codes and error messages, the engine's failures (timeouts with the units still
busy, protocol errors), and at the end of each task the interrupts against the kick-offs: every
``D_OP_ENABLE`` write of SDP, PDP, CDP, CACC or CDMA must be answered by exactly one done
interrupt of that unit (CDMA: one data and one weight done), counted from the bits the firmware
clears in ``S_INTR_STATUS`` plus any still pending when the task completed (then reported).
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from hdl.regmap import REGMAP, regmap_for
from verif.sw import protocol as P
from verif.trace.engine_common import kickoff_addrs
from verif.trace.player import TraceFailure


#: done-interrupt field prefix -> the unit whose D_OP_ENABLE write it answers
DONE_UNIT = {"SDP": "SDP", "CDP": "CDP", "PDP": "PDP", "CACC": "CACC", "CDMA_DAT": "CDMA",
             "CDMA_WT": "CDMA", "BDMA": "BDMA", "RUBIK": "RBK"}
#: units whose kick-off must be answered by done interrupts (the ``_RDMA`` units, CSC and CMAC
#: run as part of another unit's layer)
KICK_ANSWERED = {"SDP": ("SDP",), "CDP": ("CDP",), "PDP": ("PDP",), "CACC": ("CACC",),
                 "CDMA": ("CDMA_DAT", "CDMA_WT")}

#: the runtime application's output image (umd/apps/runtime/RuntimeTest.cpp OUTPUT_DIMG)
OUTPUT_DIMG = "output.dimg"


class SwFailure(Exception):
    """The run failed: the message names the task and what the firmware was doing."""


@dataclass
class HostOutcome:
    """What :func:`run_program` saw. ``ok``: the program exited 0, every task completed and
    every check held; ``message``: why not; ``output``: the bytes of ``output.dimg`` (None if
    not written); ``exit_code``: the program's (negative: killed by that signal); ``stats``:
    counts (``reg_writes``, ``reg_reads``, ``mem_to_engine``/``mem_from_engine`` bytes,
    ``interrupts``, ``stale_intr``, ``tasks``) and ``cycles`` (engine cycles from the first
    kick-off to the last interrupt; None on the model); ``log``: the program's stdout/stderr;
    ``timeline``: the kick-offs and done interrupts with their cycles (``FirmwareHost``);
    ``probe``: with :func:`run_program`'s ``probe``, the engine's bytes at the address the
    program last wrote to the probe register, read after the program exited (else None)."""
    ok: bool
    message: str = ""
    output: bytes | None = None
    exit_code: int | None = None
    stats: dict = field(default_factory=dict)
    cycles: int | None = None
    log: Path | None = None
    firmware_errors: list[str] = field(default_factory=list)
    timeline: list = field(default_factory=list)
    probe: bytes | None = None


def _kick_units(regmap=REGMAP) -> dict[int, str]:
    units = {}
    for u in regmap.units:
        for r in u.registers:
            a = u.base + r.offset
            if a in kickoff_addrs(regmap):
                units[a] = u.name
    return units


class FirmwareHost:
    """Serves one program's requests on ``engine``. ``intr_budget``: engine cycles one interrupt
    wait may take; ``intr_drop_budget``: cycles a stale ``dla_intr`` may stay high after the
    firmware's clear. ``on_timeout``: optional callable giving extra text for a timeout (the
    waveform path)."""

    def __init__(self, engine, *, intr_budget: int = 5_000_000, intr_drop_budget: int = 64,
                 on_timeout=None):
        self.engine = engine
        self.intr_budget, self.intr_drop_budget = intr_budget, intr_drop_budget
        self.on_timeout = on_timeout or (lambda: "")
        #: what the program does now (its last NOTE)
        self.context = "runtime: loading the loadable (before the first task)"
        self.firmware_errors: list[str] = []
        self.task_errors: list[str] = []     # the firmware's error messages in this task
        self.problems: list[str] = []        # check failures (the run goes on)
        self.stats = Counter()
        self.kicks = Counter()               # unit -> D_OP_ENABLE writes with bit 0 (this task)
        self.dones = Counter()               # done field prefix -> interrupts (this task)
        # the engine's configuration's register map (v1 on nv_full: the firmware's os_initial map)
        self.regmap = regmap_for(getattr(engine, "cfg", None))
        self.intr_status = self.regmap.lookup("NVDLA_GLB.S_INTR_STATUS_0")
        self.intr_mask = self.regmap.lookup("NVDLA_GLB.S_INTR_MASK_0").addr
        self.kick_units = _kick_units(self.regmap)
        self.first_kick: int | None = None
        self.last_intr: int | None = None
        self.tasks_done: list[tuple[int, int]] = []   # (task id, firmware return code)
        #: (cycle, "kick UNIT" | "done FIELD...") in order: kick-offs at the cycle their write
        #: was accepted, done interrupts at the cycle the firmware's wait saw dla_intr
        self.timeline: list[tuple[int | None, str]] = []
        #: register byte address -> the last value the program wrote there (every register)
        self.last_write: dict[int, int] = {}

    # ---- the requests ------------------------------------------------------------------------
    async def serve(self, chan: P.Channel) -> None:
        """Answer requests until the program closes the channel. Raises SwFailure when the
        engine fails (after telling the program to stop), ChannelTimeout/ProtocolError."""
        while True:
            try:
                req = chan.receive()
            except P.ChannelClosed:
                return
            try:
                value, payload = await self._handle(req)
            except (TraceFailure, SwFailure) as e:
                msg = self._where(req, str(e))
                chan.reply(status=1, payload=msg.encode()[:500])
                raise SwFailure(msg) from None
            except Exception as e:   # the engine rejected the access (e.g. RegisterAccessError)
                msg = self._where(req, f"{type(e).__name__}: {e}")
                chan.reply(status=1, payload=msg.encode()[:500])
                raise SwFailure(msg) from None
            chan.reply(value, payload)

    def _where(self, req: P.Request, what: str) -> str:
        op = P.OP_NAMES[req.op]
        if req.op in (P.REG_WRITE, P.REG_READ):
            op += f" {self._reg_name(req.a)}"
        elif req.op in (P.MEM_WRITE, P.MEM_READ):
            op += f" at {req.a:#x}"
        return f"{self.context}: {op}: {what}"

    def _reg_name(self, addr: int) -> str:
        ref = self.regmap.at(addr)
        return ref.trace_name if ref is not None else f"{addr:#x}"

    async def _handle(self, req: P.Request):
        eng, op = self.engine, req.op
        if op == P.REG_WRITE:
            self.stats["reg_writes"] += 1
            addr, value = req.a, req.b
            if addr == self.intr_status.addr:
                self._count_dones(value)
                self.timeline.append((self.last_intr, "done " + " ".join(
                    f.name for f in self.intr_status.reg.fields if (value >> f.lsb) & 1)))
            self.last_write[addr] = value
            kick = value & 1 and addr in self.kick_units
            if kick:
                self.kicks[self.kick_units[addr]] += 1
            await eng.reg_write(addr, value)
            if kick:
                at = getattr(eng, "write_accept_cycle", None) or eng.cycle
                self.timeline.append((at, f"kick {self.kick_units[addr]}"))
                if self.first_kick is None:
                    self.first_kick = at
            return 0, b""
        if op == P.REG_READ:
            self.stats["reg_reads"] += 1
            return await eng.reg_read(req.a), b""
        if op == P.MEM_WRITE:
            self.stats["mem_to_engine"] += len(req.payload)
            await eng.mem_write(req.a, req.payload)
            return 0, b""
        if op == P.MEM_READ:
            self.stats["mem_from_engine"] += req.b
            return 0, bytes(await eng.mem_read(req.a, req.b))
        if op == P.WAIT_INTR:
            self.context = f"task {req.b}: waiting for interrupt {req.a + 1}"
            await self._wait_intr()
            self.stats["interrupts"] += 1
            return 0, b""
        if op == P.NOTE:
            self.context = req.payload.decode(errors="replace")
            return 0, b""
        if op == P.LOG:
            text = req.payload.decode(errors="replace")
            if req.a >= 3:
                self.firmware_errors.append(f"{self.context}: {text}")
                self.task_errors.append(text)
            return 0, b""
        if op == P.DONE:
            await self._task_done(req.a, req.b - (1 << 64) if req.b >> 63 else req.b,
                                  req.payload.decode(errors="replace"))
            return 0, b""
        if op == P.HELLO:
            if req.a != P.VERSION:
                raise SwFailure(f"protocol version {req.a}, the host speaks {P.VERSION}: "
                                "rebuild (python -m verif.sw build)")
            return 0, b""
        raise SwFailure(f"unexpected request {op}")

    def _count_dones(self, bits: int) -> None:
        for f in self.intr_status.reg.fields:
            if (bits >> f.lsb) & 1:
                self.dones[f.name[:-len("_DONE_STATUS0")]] += 1

    async def _timeout_text(self, what: str) -> str:
        busy = await self.engine.busy_units()
        extra = self.on_timeout()
        kicks = ", ".join(f"{u} x{n}" for u, n in sorted(self.kicks.items())) or "none"
        dones = ", ".join(f"{u} x{n}" for u, n in sorted(self.dones.items())) or "none"
        return (f"{what}; units still busy: {', '.join(busy) if busy else 'none'}; "
                f"kick-offs this task: {kicks}; done interrupts cleared: {dones}"
                + (f"; {extra}" if extra else ""))

    async def _wait_intr(self) -> None:
        eng = self.engine
        if eng.cycle is None:                          # untimed: pending now or never
            if not await eng.wait_intr(0):
                raise SwFailure(await self._timeout_text(
                    "waiting for an interrupt: none is pending and the model has nothing left "
                    "to run"))
            return
        t0 = eng.cycle
        while True:
            start = eng.cycle
            if not await eng.wait_intr(self.intr_budget):
                raise SwFailure(await self._timeout_text(
                    f"no interrupt within {self.intr_budget} cycles"))
            if eng.cycle != start:                     # a rising edge: a new interrupt
                break
            # high at once: pending, or the last clear not yet through (posted write, registered line)
            status = await eng.reg_read(self.intr_status.addr)
            mask = await eng.reg_read(self.intr_mask)
            if status & ~mask:
                break
            self.stats["stale_intr"] += 1
            while await eng.wait_intr(1):
                if eng.cycle - t0 > self.intr_drop_budget:
                    raise SwFailure(f"dla_intr still high {eng.cycle - t0} cycles after the "
                                    f"firmware's clear with nothing pending (S_INTR_STATUS "
                                    f"{status:#x}, S_INTR_MASK {mask:#x})")
                await eng.wait_cycles(1)
        self.last_intr = eng.cycle

    async def _task_done(self, task_id: int, err: int, phase: str = "") -> None:
        """End of a task: the firmware's return code (``phase``: the firmware call that
        failed), pending interrupts, kick-offs against done interrupts."""
        eng = self.engine
        self.stats["tasks"] += 1
        self.tasks_done.append((task_id, err))
        if err:
            said = f" (firmware: {' / '.join(self.task_errors)})" if self.task_errors else ""
            self.problems.append(f"task {task_id}: {phase or 'the firmware'} returned {err}{said}")
        elif self.task_errors:
            self.problems.append(f"task {task_id}: completed, but the firmware reported errors: "
                                 + " / ".join(self.task_errors))
        self.task_errors = []
        pending = await eng.reg_read(self.intr_status.addr)
        if pending:
            names = [f.name for f in self.intr_status.reg.fields if (pending >> f.lsb) & 1]
            self.problems.append(f"task {task_id}: interrupts still pending after the task "
                                 f"completed: {', '.join(names)}")
            self._count_dones(pending)
        if not err:
            for unit, fields in KICK_ANSWERED.items():
                for f in fields:
                    if self.kicks[unit] != self.dones[f]:
                        self.problems.append(
                            f"task {task_id}: {self.kicks[unit]} {unit} kick-off(s) but "
                            f"{self.dones[f]} {f}_DONE interrupt(s)")
            busy = await eng.busy_units()
            if busy:
                self.problems.append(f"task {task_id}: units still busy after the task "
                                     f"completed: {', '.join(busy)}")
        self.context = f"runtime: after task {task_id} (reading the output, writing the image)"
        self.stats["kickoffs"] += sum(self.kicks.values())
        self.kicks.clear()
        self.dones.clear()


def _tail(log: Path, n: int = 6, words=("error", "fail", "nvdla-sw"), first: bool = False) -> str:
    """The last ``n`` lines of ``log`` holding one of ``words`` (else its last lines);
    ``first``: the first ``n`` such lines that are not NVIDIA's "propagating" trail."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    keep = [ln for ln in lines if any(w in ln.lower() for w in words)]
    if first:
        return " | ".join([ln for ln in keep if "propagating" not in ln][:n])
    return " | ".join((keep or lines)[-n:])


async def run_program(engine, program: Path, loadable: Path, workdir: Path, *,
                      image: Path | None = None, intr_budget: int = 5_000_000,
                      wall_timeout: float = 300.0, dma_base: int = 0x8000_0000,
                      dma_limit: int | None = None, on_timeout=None,
                      debug: bool = False, probe: tuple[str, int] | None = None) -> HostOutcome:
    """Run NVIDIA's runtime application ``program`` on ``loadable`` (and the input ``image``,
    if any) with its register, memory and interrupt requests served on ``engine``, in
    ``workdir`` (created; its ``output.dimg`` is removed first). Buffers get engine addresses
    from ``dma_base`` up to ``dma_limit`` (default: the end of the engine's address space).
    ``wall_timeout``: seconds the program may go without a request. ``debug``: the firmware's
    debug messages go to the log. ``probe``: ``(register, size)``, e.g.
    ``("SDP.D_DST_BASE_ADDR_LOW", 32)``: after the program exited, ``size`` bytes of the
    engine's memory at the address it last wrote to that register (the last layer's output,
    which the CPU may still transform, e.g. the runtime's emulator tasks) go to
    ``HostOutcome.probe`` (None when it never wrote the register). Never raises for a failed
    run (see HostOutcome); KeyError for a register the engine's map lacks."""
    workdir.mkdir(parents=True, exist_ok=True)
    out_path = workdir / OUTPUT_DIMG
    out_path.unlink(missing_ok=True)
    log = workdir / "runtime.log"
    if dma_limit is None:
        dma_limit = 1 << getattr(engine, "address_width", 32)
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    env = dict(os.environ, NVDLA_SW_FDS=f"{to_child_r},{from_child_w}",
               NVDLA_SW_DMA_BASE=hex(dma_base), NVDLA_SW_DMA_LIMIT=hex(dma_limit),
               NVDLA_SW_DEBUG="1" if debug else "0")
    args = [str(program), "--loadable", str(Path(loadable).resolve())]
    if image is not None:
        args += ["--image", str(Path(image).resolve())]
    host = FirmwareHost(engine, intr_budget=intr_budget, on_timeout=on_timeout)
    t0 = time.monotonic()
    with open(log, "wb") as logf:
        proc = subprocess.Popen(args, cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                                stdout=logf, stderr=subprocess.STDOUT,
                                pass_fds=(to_child_r, from_child_w))
    os.close(to_child_r)
    os.close(from_child_w)
    chan = P.Channel(from_child_r, to_child_w, timeout=wall_timeout)
    failure = None
    try:
        await host.serve(chan)
    except SwFailure as e:
        failure = str(e)
    except (P.ChannelTimeout, P.ProtocolError) as e:
        failure = f"{host.context}: {e}"
        proc.send_signal(signal.SIGKILL)
    finally:
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        os.close(from_child_r)
        os.close(to_child_w)
    probed = None
    if probe is not None:
        addr = host.last_write.get(host.regmap.lookup(probe[0]).addr)
        if addr is not None:
            probed = bytes(await engine.mem_read(addr, probe[1]))
    stats = dict(host.stats, wall=round(time.monotonic() - t0, 3))
    cycles = (host.last_intr - host.first_kick
              if host.last_intr is not None and host.first_kick is not None else None)
    output = out_path.read_bytes() if out_path.is_file() else None
    msgs = []
    if failure:
        msgs.append(failure)
    msgs += host.problems
    if not failure:
        if code < 0:
            try:
                sig = signal.Signals(-code).name
            except ValueError:
                sig = f"signal {-code}"
            msgs.append(f"the runtime process died of {sig} during: {host.context}"
                        f" (log {log}" + (f": {_tail(log)})" if _tail(log) else ")"))
        elif code != 0:
            msgs.append(f"the runtime exited with status {code} ({host.context}, log {log}: "
                        f"{_tail(log, 2, ('error',), first=True)})")
        elif not host.tasks_done:
            msgs.append(f"the runtime submitted no DLA task (log {log}: {_tail(log)})")
        elif output is None:
            msgs.append(f"the runtime wrote no {OUTPUT_DIMG} (log {log})")
    if host.task_errors:       # errors of a task that did not finish
        msgs.append("firmware error messages: " + " / ".join(host.task_errors[:5]))
    return HostOutcome(not msgs, "; ".join(msgs), output, code, stats, cycles, log,
                       host.firmware_errors, host.timeline, probed)
