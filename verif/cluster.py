"""Run regressions on Dask distributed (issue 35): one execution layer for the trace CLI
(``python -m verif.trace run``), the random-program sweep (``scripts/sweep.py``) and the
synthesis / place-and-route sweep (``scripts/bench_resources.py``).

``--cluster`` (:func:`add_cluster_arguments`, :func:`parse_cluster`):

* absent: today's local process pool (``-j N``), unchanged output;
* ``local`` / ``local:N``: a ``dask.distributed.LocalCluster`` of N worker processes (one
  thread each) on this machine; ``local`` takes N from ``-j``, ``local:N`` replaces ``-j``;
* ``tcp://HOST:PORT``: a running Dask scheduler (``dask scheduler``) and its workers
  (``dask worker tcp://HOST:PORT``), on any machines that have the project installed.

Each work item (a trace, a random program, a unit) belongs to one Dask task; a task may hold a
batch of items (several traces or programs per simulator process, as ``--per-process`` does
locally) but the results are reported per item. Inputs travel with the task: a trace directory
is packed into the task (:func:`pack_dir`), a random program is generated on the worker from
its (layer type, seed), so workers need no shared filesystem; NVIDIA's ``../shared`` is found on
the worker as usual (``$NVDLA_SHARED``). A worker builds its Verilator model through
``sim.build.build_sim`` (cached under its checkout's ``build/sim/``, keyed by configuration and
source hash, serialised by a file lock, so workers of one machine build once) and keeps it for
the life of the worker process (:func:`_worker_build`).

Failures are contained (:func:`run_tasks`): an exception inside a task is returned as that
task's failure (worker address and traceback tail); a task whose worker dies is re-run by the
scheduler on another worker (``distributed.scheduler.allowed-failures``, default 3) and then
reported as failed (``KilledWorker``, naming the last worker with its log lines from the
scheduler); a task running longer than ``--task-timeout`` seconds is cancelled and reported.
Every item of a failed task is reported as failed with that reason: nothing is dropped.

Reports: :func:`write_reports` writes ``--junit-xml FILE`` (one ``testcase`` per item) and
``--report FILE`` (JSON when FILE ends in ``.json``, Markdown otherwise).
"""
from __future__ import annotations

import io
import json
import math
import os
import re
import shutil
import sys
import tarfile
import tempfile
import time
import traceback
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator
from xml.etree import ElementTree as ET

#: ``--cluster`` grammar
_LOCAL_RE = re.compile(r"^local(?::(\d+))?$")
_TCP_RE = re.compile(r"^tcp://([^:/\s]+|\[[0-9a-fA-F:]+\]):(\d{1,5})$")

#: seconds to wait for a scheduler to answer (and for its first worker) before failing
CONNECT_TIMEOUT_S = 10.0


class ClusterError(ValueError):
    """A bad ``--cluster`` value, an unreachable scheduler or a scheduler without workers
    (one-line message naming the address; the CLIs exit with status 2)."""


@dataclass(frozen=True)
class ClusterSpec:
    """A parsed ``--cluster``: ``kind`` ``local`` (``workers`` processes on this machine) or
    ``tcp`` (``address`` of a running scheduler)."""
    kind: str
    workers: int | None = None
    address: str | None = None

    def __str__(self) -> str:
        return self.address if self.kind == "tcp" else f"local:{self.workers}"


def parse_cluster(text: str | None, jobs: int = 1) -> ClusterSpec | None:
    """Parse a ``--cluster`` value: None (absent: the local pool), ``local`` (``jobs``
    workers), ``local:N`` (N >= 1 workers) or ``tcp://HOST:PORT``. Raises ClusterError."""
    if text is None:
        return None
    t = text.strip()
    m = _LOCAL_RE.match(t)
    if m:
        n = int(m.group(1)) if m.group(1) is not None else max(1, int(jobs))
        if n < 1:
            raise ClusterError(f"--cluster {text}: local:N needs N >= 1")
        return ClusterSpec("local", workers=n)
    m = _TCP_RE.match(t)
    if m:
        port = int(m.group(2))
        if not 1 <= port <= 65535:
            raise ClusterError(f"--cluster {text}: port {port} out of range 1..65535")
        return ClusterSpec("tcp", address=t)
    raise ClusterError(f"--cluster {text}: expected local, local:N (N >= 1) or tcp://HOST:PORT")


def add_cluster_arguments(ap) -> None:
    """Add ``--cluster``, ``--task-timeout``, ``--junit-xml`` and ``--report`` to an argparse
    parser (validated by :func:`cluster_from_args`)."""
    ap.add_argument("--cluster", default=None, metavar="SPEC",
                    help="run on Dask: local (as many worker processes as -j), local:N (N worker "
                         "processes on this machine) or tcp://HOST:PORT (a running 'dask "
                         "scheduler'); default: the local process pool (-j)")
    ap.add_argument("--task-timeout", type=float, default=None, metavar="S",
                    help="--cluster: wall seconds a task (one batch) may run before it is "
                         "cancelled and its items reported as failed (default: no limit)")
    ap.add_argument("--junit-xml", type=Path, default=None, metavar="FILE",
                    help="write a JUnit XML report (one testcase per item)")
    ap.add_argument("--report", type=Path, default=None, metavar="FILE",
                    help="write a report of every item: JSON if FILE ends in .json, else Markdown")


def cluster_from_args(args, jobs: int = 1) -> ClusterSpec | None:
    """The ClusterSpec of parsed arguments (:func:`add_cluster_arguments`). Raises
    ClusterError for a malformed ``--cluster`` or a ``--task-timeout`` <= 0."""
    if args.task_timeout is not None and not args.task_timeout > 0:
        raise ClusterError(f"--task-timeout {args.task_timeout:g}: must be > 0 seconds")
    return parse_cluster(args.cluster, jobs)


@contextmanager
def connect(spec: ClusterSpec, *, local_directory: str | Path | None = None):
    """A ``dask.distributed.Client`` for ``spec`` (a LocalCluster started here and stopped on
    exit, or a connection to a running scheduler). Raises ClusterError when the scheduler
    cannot be reached or has no worker within CONNECT_TIMEOUT_S seconds."""
    import dask
    from distributed import Client, LocalCluster
    if spec.kind == "local":
        tmp = Path(tempfile.mkdtemp(prefix="nvdla_dask_")) if local_directory is None else None
        # no nanny environment (MALLOC_TRIM_THRESHOLD_, *_NUM_THREADS): the simulators a
        # worker starts inherit the environment they have under the local pool
        # and no statistical profiler, a slower system monitor and event-loop tick (the
        # simulators share these CPUs: an idle worker took 2.3 % of a core, now 0.3 %)
        with dask.config.set({"distributed.nanny.pre-spawn-environ": {},
                              "distributed.worker.profile.enabled": False,
                              "distributed.admin.system-monitor.interval": "2s",
                              "distributed.admin.tick.interval": "500ms"}):
            cluster = LocalCluster(n_workers=spec.workers, threads_per_worker=1, processes=True,
                                   dashboard_address=None, memory_limit=0,
                                   # its HTTP endpoints on any free loopback port, not 8787
                                   scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                                   local_directory=str(local_directory or tmp),
                                   host="127.0.0.1", silence_logs=40)
        try:
            with Client(cluster) as client:
                yield client
        finally:
            cluster.close()
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
        return
    try:
        client = Client(spec.address, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as e:
        raise ClusterError(f"--cluster {spec.address}: cannot reach the Dask scheduler "
                           f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
                           ) from None
    try:
        try:
            client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError):
            raise ClusterError(f"--cluster {spec.address}: the scheduler has no worker "
                               f"(none joined within {CONNECT_TIMEOUT_S:g} s)") from None
        yield client
    finally:
        client.close()


def slots(client) -> int:
    """Worker threads of the cluster now (at least 1)."""
    return max(1, sum(client.nthreads().values()))


# --- tasks -------------------------------------------------------------------------------------

@dataclass
class Task:
    """One Dask task: ``fn(*args)`` runs on a worker and returns one result per name of
    ``items`` (a list in that order); ``label`` names the task in failure reports."""
    items: list[str]
    fn: Callable
    args: tuple = ()
    label: str = ""


@dataclass
class TaskFailure:
    """Why a task produced no results: ``reason`` (one line) and ``log`` (tail of the worker's
    log or of the traceback, may be empty); ``worker``: its address when known."""
    reason: str
    log: str = ""
    worker: str | None = None

    def text(self) -> str:
        """The reason and the log tail on one line (for a trace's or program's message)."""
        return self.reason + (f"; log: {self.log}" if self.log else "")


@dataclass
class _Returned:
    """What the worker wrapper returns: results, or the exception's text."""
    worker: str
    results: Any = None
    error: str | None = None
    tail: str = ""


def _call(fn: Callable, args: tuple) -> _Returned:
    """Worker side: run ``fn(*args)``; an exception becomes a returned error (a deterministic
    failure is reported, not retried on every worker)."""
    try:
        from distributed import get_worker
        addr = get_worker().address
    except (ImportError, ValueError):
        addr = "?"
    try:
        return _Returned(addr, fn(*args))
    except Exception as e:  # noqa: BLE001 - reported as the task's failure
        tb = traceback.format_exc().strip().splitlines()
        return _Returned(addr, None, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                         " | ".join(tb[-6:]))


def _scheduler_log_tail(client, worker: str | None, n: int = 5) -> str:
    """The last ``n`` scheduler log lines mentioning ``worker`` (its own log died with it), or
    the worker's own log tail if it is still alive."""
    if not worker:
        return ""
    try:
        if worker in client.scheduler_info(n_workers=-1)["workers"]:
            logs = client.get_worker_logs(n=n, workers=[worker])
            lines = [m for _, m in logs.get(worker, [])]
            if lines:
                return " | ".join(lines[-n:])
    except Exception:  # noqa: BLE001 - the worker is gone: ask the scheduler
        pass
    try:
        lines = [m for _, m in client.get_scheduler_logs(n=500) if worker in m]
    except Exception:  # noqa: BLE001
        return ""
    return " | ".join(lines[:n])


def run_tasks(client, tasks: list[Task], *, timeout: float | None = None, retries: int = 1,
              poll: float = 0.5) -> Iterator[tuple[int, Task, list | TaskFailure]]:
    """Run ``tasks`` on ``client``'s cluster; yields ``(index, task, results)`` as tasks
    finish, where ``results`` is the task's list (one per item) or a :class:`TaskFailure`.

    At most one task per worker thread is in flight, so ``timeout`` (wall seconds, None: no
    limit) counts from the moment a task could start; a task over it is cancelled and reported
    (Dask cannot stop a running task: its worker finishes it and drops the result).
    ``retries``: Dask re-runs of a task that raised outside the wrapper (e.g. a result that
    cannot be sent back); a task whose worker dies is re-run by the scheduler up to
    ``distributed.scheduler.allowed-failures`` times, then fails with KilledWorker; a task
    whose result was lost with its worker after it finished is computed again by the
    scheduler and waited for. Every task is yielded exactly once."""
    from distributed import wait
    from distributed.client import FIRST_COMPLETED, FuturesCancelledError
    queue = list(enumerate(tasks))
    pending: dict = {}               # future -> (index, task, t_submit)
    stamp = f"{os.getpid()}-{time.time_ns()}"
    n_slots, t_slots = slots(client), time.monotonic()
    try:
        while queue or pending:
            if time.monotonic() - t_slots > 2.0:      # workers come and go; ask now and then
                n_slots, t_slots = slots(client), time.monotonic()
            while queue and len(pending) < n_slots:
                i, t = queue.pop(0)
                with warnings.catch_warnings():
                    # the inputs travel inside the task on purpose (a batch of trace
                    # directories: a few MB): no advice to load them through Dask
                    warnings.filterwarnings("ignore", message="Sending large graph")
                    fut = client.submit(_call, t.fn, t.args, key=f"nvdla-{stamp}-{i}",
                                        retries=retries, pure=False)
                pending[fut] = (i, t, time.monotonic())
            # "lost": a finished task's result died with its worker; the scheduler computes it
            # again, so it stays pending here (wait() would return it at once)
            waitable = [f for f in pending if f.status == "pending"]
            if waitable:
                try:
                    wait(waitable, timeout=poll, return_when=FIRST_COMPLETED)
                except (TimeoutError, FuturesCancelledError):
                    pass
            else:
                time.sleep(poll)
            done = [f for f in pending if f.status in ("finished", "error", "cancelled")]
            for fut in done:
                i, t, _ = pending.pop(fut)
                yield i, t, _outcome(client, fut, t)
            if timeout is not None:
                now = time.monotonic()
                for fut, (i, t, t0) in list(pending.items()):
                    if now - t0 > timeout:
                        worker = next((w for w, keys in client.processing().items()
                                       if fut.key in keys), None)
                        fut.cancel()
                        del pending[fut]
                        yield i, t, TaskFailure(
                            f"task {t.label or i} timed out after {timeout:g} s"
                            + (f" on worker {worker}" if worker else ""),
                            _scheduler_log_tail(client, worker), worker)
    finally:
        for fut in pending:
            fut.cancel()


def _outcome(client, fut, task: Task) -> list | TaskFailure:
    """The results of a finished future, or the TaskFailure saying why there are none."""
    if fut.status == "finished":
        r = fut.result()
        if r.error is None:
            if len(r.results) != len(task.items):
                return TaskFailure(f"task {task.label} on worker {r.worker} returned "
                                   f"{len(r.results)} results for {len(task.items)} items",
                                   worker=r.worker)
            return r.results
        return TaskFailure(f"task {task.label} raised on worker {r.worker}: {r.error}", r.tail,
                           r.worker)
    if fut.status == "cancelled":
        return TaskFailure(f"task {task.label} cancelled (scheduler or client lost)")
    exc = fut.exception()
    from distributed.scheduler import KilledWorker
    if isinstance(exc, KilledWorker):
        addr = getattr(exc.last_worker, "address", str(exc.last_worker))
        return TaskFailure(f"task {task.label}: KilledWorker: {exc.allowed_failures + 1} workers "
                           f"died while running it, the last {addr}",
                           _scheduler_log_tail(client, addr), addr)
    m = re.search(r"(tcp://[\w.\-\[\]:]+)", str(exc))
    addr = m.group(1) if m else None
    msg = str(exc).splitlines()[0] if str(exc) else ""
    return TaskFailure(f"task {task.label} failed: {type(exc).__name__}: {msg}",
                       _scheduler_log_tail(client, addr), addr)


def echo_task(*items) -> list:
    """A task that does nothing but return its items (``scripts/bench_cluster.py`` measures the
    scheduler's cost per task with it)."""
    return list(items)


def batches(items: list, per: int) -> list[list]:
    """``items`` cut into consecutive lists of at most ``per`` (>= 1) items."""
    per = max(1, int(per))
    return [items[i:i + per] for i in range(0, len(items), per)]


def in_order(results: Iterable[tuple[int, Any]], n: int) -> Iterator[tuple[int, Any]]:
    """Re-yield ``(index, value)`` pairs arriving in any order in index order 0..n-1, each as
    soon as every earlier one has arrived."""
    held, nxt = {}, 0
    for i, v in results:
        held[i] = v
        while nxt in held:
            yield nxt, held.pop(nxt)
            nxt += 1
    for i in sorted(held):          # indices that never arrived leave gaps: still yielded
        yield i, held[i]


# --- inputs and outputs that travel with a task ---------------------------------------------

def pack_dir(d: Path) -> bytes:
    """The regular files under ``d`` as an uncompressed tar (bytes), paths relative to ``d``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for p in sorted(Path(d).rglob("*")):
            if p.is_file():
                tar.add(p, arcname=str(p.relative_to(d)), recursive=False)
    return buf.getvalue()


def unpack_dir(data: bytes, dest: Path) -> Path:
    """Write a :func:`pack_dir` archive under ``dest`` (created); returns ``dest``. Raises
    ValueError for a member outside ``dest``."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        tar.extractall(dest, filter="data")
    return dest


def _shared_relative(p: Path | None):
    """A client path under ``../shared`` as ("shared", relative path) so the worker finds it in
    its own ``$NVDLA_SHARED``; any other path as is."""
    if p is None:
        return None
    from verif.shared import shared_dir
    p = Path(p).resolve()
    try:
        return ("shared", str(p.relative_to(shared_dir().resolve())))
    except ValueError:
        return ("abs", str(p))


def _worker_path(ref) -> Path | None:
    if ref is None:
        return None
    from verif.shared import shared_dir
    kind, p = ref
    return shared_dir() / p if kind == "shared" else Path(p)


_BUILDS: dict = {}


def _worker_build(config: str, rtl_filelist: Path | None = None, waves: bool = False,
                  xrand: bool = False):
    """This worker process's Verilator build for the key (``sim.build.build_sim``: cached on
    disk by configuration + source hash, built once per machine under a file lock), kept for
    the life of the process so later tasks do not hash the sources again."""
    key = (config, str(rtl_filelist) if rtl_filelist else None, bool(waves), bool(xrand))
    if key not in _BUILDS:
        from verif.trace.pgo import build_sim
        _BUILDS[key] = build_sim(config, rtl_filelist=rtl_filelist, waves=waves, xrand=xrand)
    return _BUILDS[key]


@contextmanager
def _scratch(prefix: str):
    """A temporary directory on the worker, removed afterwards."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


# --- trace batches (python -m verif.trace run) ------------------------------------------------

def trace_task(packed: list[tuple[str, bytes]], engine: str, cfg, kw: dict) -> list:
    """Worker side: unpack the trace directories ``packed`` ((name, pack_dir bytes) pairs) and
    play them on ``engine`` (``verif.trace.runner.run``, one simulator process for the batch);
    returns their TraceResults in the order of ``packed``."""
    from verif.trace.player import FAIL, TraceResult
    from verif.trace.runner import run
    kw = dict(kw)
    if engine == "rtl":
        fl = _worker_path(kw.pop("rtl_filelist_ref", None))
        kw["build"] = _worker_build(cfg.name, fl, kw.get("waves", False),
                                    kw.get("xrand_seed") is not None)
        kw["rtl_filelist"] = fl
        kw["jobs"] = 1
        kw["traces_per_process"] = len(packed)
    else:
        kw.pop("rtl_filelist_ref", None)
    with _scratch("nvdla_traces_") as root:
        # one directory per trace (two suites may hold traces of the same name)
        dirs = [unpack_dir(data, root / str(k) / name) for k, (name, data) in enumerate(packed)]
        got: dict[str, list] = {}
        for r in run(dirs, engine, cfg, **kw):
            got.setdefault(r.name, []).append(r)
    return [got[name].pop(0) if got.get(name) else
            TraceResult(name, FAIL, "the engine returned no result") for name, _ in packed]


def run_traces(client, dirs: list[Path], engine: str, cfg, *, per_task: int | None = None,
               timeout: float | None = None, rtl_filelist: Path | None = None,
               **kw) -> Iterator[tuple[int, Any]]:
    """Play trace directories on the cluster; yields ``(index into dirs, TraceResult)`` in
    completion order, one per directory (a failed task gives each of its traces a FAIL whose
    message says why). ``per_task``: traces per task (one simulator process on rtl; default:
    rtl as ``run_rtl`` spreads them over the cluster's worker threads, at most 32; model and
    amaranth 1). ``kw``: ``verif.trace.runner.run`` keywords (timing, max_cycles, waves, ...)."""
    from verif.trace.player import FAIL, TraceResult
    dirs = [Path(d).resolve() for d in dirs]
    if per_task is None:
        per_task = (min(32, max(1, math.ceil(len(dirs) / slots(client)))) if engine == "rtl"
                    and not kw.get("waves") else 1)
    kw = dict(kw, rtl_filelist_ref=_shared_relative(rtl_filelist))
    idx = list(range(len(dirs)))
    groups = batches(idx, per_task)
    tasks = [Task([dirs[i].name for i in g], trace_task,
                  ([(dirs[i].name, pack_dir(dirs[i])) for i in g], engine, cfg, kw),
                  label=dirs[g[0]].name if len(g) == 1 else f"{dirs[g[0]].name}+{len(g) - 1}")
             for g in groups]
    for ti, task, res in run_tasks(client, tasks, timeout=timeout):
        for k, i in enumerate(groups[ti]):
            if isinstance(res, TaskFailure):
                r = TraceResult(dirs[i].name, FAIL, f"cluster: {res.text()}")
                r.rtl = {}
                yield i, r
            else:
                yield i, res[k]


# --- random-program sweeps (scripts/sweep.py) -------------------------------------------------

def sweep_task(kind: str, seeds: list[int], cfg, mem_profile: str, mem_seed: int,
               rtl_filelist_ref, axi_ids) -> list:
    """Worker side: generate and prepare the programs of ``kind`` for ``seeds``
    (``verif.gen.run.prepare_all``), play them on the RTL in one simulator process and judge
    them. Returns one entry per seed: ``("gen error", text, None)`` or ``(status, message,
    cycles, name, packed trace directory or None)``; a program that did not pass comes back
    with its trace directory (:func:`pack_dir`) so the client can keep it."""
    from verif.gen.run import prepare_all, run_programs
    fl = _worker_path(rtl_filelist_ref)
    with _scratch("nvdla_sweep_") as root:
        preps, errors = prepare_all([kind], seeds, root, cfg)
        if preps:
            _worker_build(cfg.name, fl)
        outs = {o.seed: o for o in run_programs(preps, cfg, mem_profile=mem_profile,
                                                mem_seed=mem_seed, jobs=1,
                                                per_process=max(1, len(preps)),
                                                rtl_filelist=fl, axi_ids=axi_ids)}
        by_seed = {p.prog.seed: p for p in preps}
        ret = []
        for s in seeds:
            if s in outs:
                o = outs[s]
                ret.append((o.status, o.message, o.cycles, str(o.dir),
                            None if o.ok else pack_dir(o.dir)))
            elif s in by_seed:
                ret.append(("fail", f"{kind} seed {s}: the RTL run returned no result", None,
                            str(by_seed[s].dir), pack_dir(by_seed[s].dir)))
            else:
                err = next((e for e in errors if re.match(rf"{kind} seed {s}\b", e)), None)
                ret.append(("gen error", err or f"{kind} seed {s}: generator error", None,
                            None, None))
    return ret


def run_sweep(client, programs: list[tuple[str, int]], cfg, *, per_task: int, keep: Path,
              mem_profile: str, mem_seed: int, rtl_filelist: Path | None = None,
              axi_ids="auto", timeout: float | None = None) -> Iterator[tuple[int, tuple]]:
    """Run the random programs ``programs`` ((layer type, seed) pairs) on the cluster, at most
    ``per_task`` programs of one layer type per task (one simulator process each). Yields
    ``(index into programs, (status, message, cycles))`` in completion order, status as
    ``verif.gen.run.Outcome`` or ``gen error``; the trace directory of a program that did not
    pass is unpacked under ``keep/<name>`` and the message names it there. A failed task gives
    each of its programs status ``fail`` with the reason."""
    groups: list[list[int]] = []
    for i, (kind, _) in enumerate(programs):
        if groups and programs[groups[-1][0]][0] == kind and len(groups[-1]) < max(1, per_task):
            groups[-1].append(i)
        else:
            groups.append([i])
    ref = _shared_relative(rtl_filelist)
    tasks = []
    for g in groups:
        kind = programs[g[0]][0]
        seeds = [programs[i][1] for i in g]
        tasks.append(Task([f"{kind} seed {s}" for s in seeds], sweep_task,
                          (kind, seeds, cfg, mem_profile, mem_seed, ref, axi_ids),
                          label=f"{kind} seeds {seeds[0]}..{seeds[-1]}"))
    for ti, task, res in run_tasks(client, tasks, timeout=timeout):
        for k, i in enumerate(groups[ti]):
            kind, seed = programs[i]
            if isinstance(res, TaskFailure):
                yield i, ("fail", f"{kind} seed {seed}: FAIL cluster: {res.text()}", None)
                continue
            status, msg, cycles, wdir, packed = res[k]
            if packed is not None:
                kept = Path(keep) / Path(wdir).name
                if kept.exists():
                    shutil.rmtree(kept)
                unpack_dir(packed, kept)
                msg = msg.replace(wdir, str(kept))
            yield i, (status, msg, cycles)


# --- synthesis sweeps (scripts/bench_resources.py) --------------------------------------------

def synth_task(func: str, cfg, unit: str, kw: dict) -> list:
    """Worker side: ``hdl.synth.<func>(cfg, <scratch>/<unit>, unit, **kw)`` (``synthesize`` or
    ``timing_only``); returns ``[(result or None, error text or None, packed output
    directory)]``. A SynthError or UnitError is returned as the error text, as the local loop
    reports it."""
    from hdl import synth
    with _scratch("nvdla_synth_") as root:
        out = root / unit
        try:
            res, err = getattr(synth, func)(cfg, out, unit, **kw), None
        except (synth.SynthError, synth.UnitError) as e:
            res, err = None, str(e)
        packed = pack_dir(out) if out.is_dir() else None
        if res is not None and hasattr(res, "files"):
            res.files = {k: Path(v).relative_to(out) if Path(v).is_relative_to(out) else v
                         for k, v in res.files.items()}
    return [(res, err, packed)]


def run_synth(client, func: str, cfg, units: list[str], out: Path, *,
              timeout: float | None = None, **kw) -> Iterator[tuple[int, tuple]]:
    """Synthesize (``func`` = ``synthesize``) or place and route (``timing_only``) each unit on
    the cluster, one task per unit; the worker's output directory is unpacked into
    ``out/<unit>``. Yields ``(index into units, (result or None, error text or None))`` in
    completion order."""
    tasks = [Task([u], synth_task, (func, cfg, u, kw), label=u) for u in units]
    for i, task, res in run_tasks(client, tasks, timeout=timeout):
        u = units[i]
        if isinstance(res, TaskFailure):
            yield i, (None, f"cluster: {res.text()}")
            continue
        r, err, packed = res[0]
        if packed is not None:
            d = Path(out) / u
            if d.exists():
                shutil.rmtree(d)
            unpack_dir(packed, d)
        if r is not None and hasattr(r, "files"):
            r.files = {k: (Path(out) / u / v if not Path(v).is_absolute() else v)
                       for k, v in r.files.items()}
        yield i, (r, err)


# --- progress and reports ---------------------------------------------------------------------

def progress(total: int, unit: str):
    """A tqdm progress bar on stderr (lines go through ``bar.write``)."""
    from tqdm import tqdm
    return tqdm(total=total, unit=unit, dynamic_ncols=True, file=sys.stderr)


@dataclass
class ItemRecord:
    """One reported item: ``name``, ``status`` (``pass``, ``fail`` or ``skip``), wall
    ``seconds``, ``message`` and free ``details`` (cycles, CRCs, ...)."""
    name: str
    status: str
    seconds: float = 0.0
    message: str = ""
    details: dict = field(default_factory=dict)


def write_reports(records: list[ItemRecord], *, suite: str, junit: Path | None = None,
                  report: Path | None = None, meta: dict | None = None) -> None:
    """Write the JUnit XML (``junit``: one testcase per record, ``failure`` or ``skipped``
    children) and the JSON/Markdown report (``report``: ``.json`` -> JSON, else Markdown) of
    ``records``. ``meta``: run facts (cluster, configuration, wall seconds) for the report."""
    meta = dict(meta or {})
    counts = {s: sum(r.status == s for r in records) for s in ("pass", "fail", "skip")}
    if junit is not None:
        ts = ET.Element("testsuite", name=suite, tests=str(len(records)),
                        failures=str(counts["fail"]), skipped=str(counts["skip"]), errors="0",
                        time=f"{sum(r.seconds for r in records):.3f}")
        for r in records:
            tc = ET.SubElement(ts, "testcase", classname=suite, name=r.name,
                               time=f"{r.seconds:.3f}")
            if r.status == "fail":
                ET.SubElement(tc, "failure", message=r.message.splitlines()[0] if r.message
                              else "failed").text = r.message
            elif r.status == "skip":
                ET.SubElement(tc, "skipped", message=r.message.splitlines()[0] if r.message
                              else "skipped")
            if r.details:
                props = ET.SubElement(tc, "properties")
                for k, v in r.details.items():
                    ET.SubElement(props, "property", name=str(k), value=json.dumps(v))
        Path(junit).parent.mkdir(parents=True, exist_ok=True)
        ET.ElementTree(ts).write(
            junit, encoding="utf-8", xml_declaration=True)
    if report is not None:
        Path(report).parent.mkdir(parents=True, exist_ok=True)
        if str(report).endswith(".json"):
            Path(report).write_text(json.dumps({
                "suite": suite, **meta, "counts": counts,
                "items": [{"name": r.name, "status": r.status, "seconds": round(r.seconds, 3),
                           "message": r.message, **r.details} for r in records]}, indent=1) + "\n")
        else:
            keys = sorted({k for r in records for k in r.details})
            head = "| item | status | " + " | ".join(keys) + (" | " if keys else "") + "s | message |"
            sep = "|---|---|" + "---:|" * len(keys) + "---:|---|"
            rows = [f"| {r.name} | {r.status} | "
                    + "".join(f"{_md(r.details.get(k))} | " for k in keys)
                    + f"{r.seconds:.2f} | {r.message.splitlines()[0] if r.message else ''} |"
                    for r in records]
            facts = "".join(f"- {k}: {v}\n" for k, v in meta.items())
            Path(report).write_text(
                f"# {suite}\n\n{facts}- passed {counts['pass']}, failed {counts['fail']}, "
                f"skipped {counts['skip']}\n\n" + "\n".join([head, sep] + rows) + "\n")


def _md(v) -> str:
    """A report value in a Markdown cell: None as ``-``, lists of pairs as ``a/b, c/d``."""
    if v is None:
        return "-"
    if isinstance(v, (list, tuple)):
        return ", ".join("/".join(map(str, x)) if isinstance(x, (list, tuple)) else str(x)
                         for x in v)
    return str(v)
