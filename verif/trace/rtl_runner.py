"""Run trace tests on the RTL: build once (cached, ``sim.build``), then simulate.

``run_rtl(traces, config="nv_small", waves=False, rtl_filelist=None, jobs=1, ...)`` yields one
``TraceResult`` per trace, in completion order. Each simulator process (cocotb + Verilator,
test module ``verif.cocotb_tb.trace_tb``) plays a batch of traces, resetting the DUT and clearing
memory between them; ``jobs`` processes run in parallel. A process that dies mid-batch costs only
the trace it was running (FAIL, message names the simulator log); the rest of its batch is rerun.

Extra information is attached to every yielded result as the attribute ``rtl`` (a dict):
``sim_cycles`` (cycles simulated for the trace), ``sim_wall`` (its wall seconds inside the
simulator), ``rd_beats``/``wr_beats``/``rd_reqs``/``wr_reqs`` (AXI traffic of the primary port;
``cv_rd_beats``... of the secondary port ``nvdla_core2cvsram``, None without it), ``log`` (simulator
log), ``waves`` (FST path or None), ``build`` (build directory), ``startup`` (seconds from the
launch of the trace's simulator process to the end of its first reset; the same for every trace
of a batch).

With ``waves=True`` each trace runs alone in its own process and its waveform is written to
``build/waves/<trace>.fst``; FAIL messages name that file.

CLI: ``python -m verif.trace.rtl_runner [--config nv_small] [--set NAME=VALUE] [--rtl-filelist F]
[--waves] [-j N] [--mem-profile nvidia|fast|random] [--seed N] [--max-cycles N]
[--memory sim|python] [--csb-clock-mhz MHZ] TRACE_OR_DIR...``.
"""
from __future__ import annotations

import argparse
import base64
import json
import math
import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import asdict
from pathlib import Path
from typing import Iterable, Iterator

from sim.build import REPO, SIM_TOP, TIMESCALE, SimBuild
from verif.trace.pgo import build_sim
from verif.trace.parser import Trace, TraceSyntaxError, find_traces, load_trace
from verif.trace.v1 import is_v1_trace, load_v1_trace
from verif.trace.player import FAIL, NOT_RUNNABLE, CheckResult, TraceResult
from verif.axi_slave import MemTiming

TB_MODULE = "verif.cocotb_tb.trace_tb"
TB_ENV = "NVDLA_TRACE_TB"
WAVES_DIR = REPO / "build" / "waves"


def _result_from_json(d: dict, extra: dict) -> TraceResult:
    checks = [CheckResult(c["where"], c["base"], c["size"], c["expected"], c["actual"],
                          base64.b64decode(c["data"]) if c.get("data") else b"")
              for c in d.get("checks", [])]
    res = TraceResult(d["name"], d["status"], d.get("message", ""), d.get("cycles"),
                      d.get("wall", 0.0), checks)
    res.rtl = {k: d.get(k) for k in ("sim_cycles", "sim_wall", "sim_cpu", "rd_beats", "wr_beats",
                                     "rd_reqs", "wr_reqs", "budget", "cv_rd_beats",
                                     "cv_wr_beats", "cv_rd_reqs", "cv_wr_reqs")} | extra
    if d.get("t_ready") and extra.get("t_launch"):
        res.rtl["startup"] = d["t_ready"] - extra["t_launch"]
    return res


def _trace_dir(t) -> Path:
    if isinstance(t, Trace):
        return Path(t.directory)
    return Path(t)


def _run_batch(build: SimBuild, dirs: list[Path], run_dir: Path, cfg: dict,
               waves_path: Path | None, plusargs: list[str] = (), *, tb_module: str = TB_MODULE,
               env_name: str = TB_ENV) -> tuple[list[dict], Path, str]:
    """One simulator process over ``dirs`` (cocotb test module ``tb_module``, its settings as
    JSON in the environment variable ``env_name``; ``verif.sw`` runs its own module this way).
    Returns (result dicts, log path, error text)."""
    from cocotb_tools.runner import get_runner
    run_dir.mkdir(parents=True, exist_ok=True)
    results = run_dir / "results.jsonl"
    if results.exists():
        results.unlink()
    log = run_dir / "sim.log"
    tb = dict(cfg, traces=[str(d) for d in dirs], results=str(results),
              waves=str(waves_path) if waves_path else None)
    runner = get_runner("verilator")
    test_args = ["--trace-file", str(waves_path)] if waves_path else []
    err = ""
    t_launch = time.time()
    try:
        runner.test(test_module=tb_module, hdl_toplevel=SIM_TOP, hdl_toplevel_lang="verilog",
                    build_dir=build.directory, test_dir=run_dir, extra_env={env_name: json.dumps(tb)},
                    waves=bool(waves_path), test_args=test_args, plusargs=list(plusargs),
                    log_file=log,
                    results_xml=str(run_dir / "results.xml"), timescale=TIMESCALE)
    except SystemExit as e:
        err = f"simulator exited with {e.code}"
    except Exception as e:  # noqa: BLE001 - reported as the trace's failure
        err = f"{type(e).__name__}: {e}"
    out = []
    if results.is_file():
        for line in results.read_text().splitlines():
            if line.strip():
                out.append(json.loads(line))
    for d in out:
        d["_t_launch"] = t_launch
    return out, log, err


def _log_tail(log: Path, n: int = 6) -> str:
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    keep = [ln for ln in lines if "Error" in ln or "error" in ln or "FAIL" in ln or "Traceback" in ln]
    return " | ".join((keep or lines)[-n:])


def run_rtl(traces: Iterable, config: str = "nv_small", waves: bool = False,
            rtl_filelist: str | Path | None = None, jobs: int = 1, *,
            timing: MemTiming = MemTiming(), traces_per_process: int | None = None,
            intr_budget: int | None = None, poll_budget: int | None = None,
            engine: dict | None = None, run_root: Path | None = None, mode: str = "traces",
            xrand_seed: int | None = None, axi_ids: dict | str | None = "auto",
            abort_after_wbeats: int | None = None, memory: str | None = None,
            csb_period_ns: float | None = None,
            build: SimBuild | None = None, warmup: Iterable | None = None) -> Iterator[TraceResult]:
    """Play ``traces`` (trace directories or parsed ``Trace`` objects) on the RTL.

    ``config``: hardware configuration name (selects the project's RTL, part of the build cache
    key). ``rtl_filelist``: simulate another port-compatible NV_nvdla from a Verilator file list
    (e.g. NVIDIA's RTL). ``waves``: FST per trace in ``build/waves/<trace>.fst``. ``jobs``:
    simulator processes in parallel. ``timing``: memory timing (``verif.axi_slave.MemTiming``;
    default the ``nvidia`` profile: read_latency=32, accept_every=2). ``traces_per_process``: batch size (default: spread over
    ``jobs``, at most 32; always 1 with waves). ``intr_budget``/``poll_budget``: Player cycle
    budgets (``intr_budget`` overrides the per-trace budget of ``verif.trace.budget``, i.e.
    ``--max-cycles``). ``engine``: extra RtlEngine keyword arguments (period_ns, reset_cycles,
    post_reset_cycles, csb_timeout, csb_period_ns: the ``dla_csb_clk`` period).

    ``mode`` (see ``verif.cocotb_tb.trace_tb``): ``traces`` (reset between traces), ``soak``
    (all traces in ONE process without a reset between them), ``reset_mid`` (pairs of
    aborted/clean traces, ``abort_after_wbeats``; one result per pair). ``xrand_seed``: use the
    X-randomising build (``sim.build`` ``xrand``) with that run-time seed (> 0).
    ``axi_ids``: the ARID/AWID values the AXI monitor allows: ``"auto"`` (our client table
    for ``config``, NVIDIA's IDs of ``config`` with ``rtl_filelist``: ``verif.monitors.nvidia_ids``), a dict
    ``{"read": [...], "write": [...]}``, or None (any).
    ``memory``: the AXI memory model, ``sim`` (default: in the simulation, C++ through DPI-C,
    ``sim/tb``) or ``python`` (the reference ``AxiResponder``); see ``RtlEngine``.
    ``csb_period_ns``: the ``dla_csb_clk`` period (default: the core clock's; cycles are
    counted in ``dla_core_clk``), the same as ``engine={"csb_period_ns": ...}``.
    ``build``: simulate this finished build instead of ``build_sim``'s (e.g. the instrumented
    build of a profile-guided compile, ``verif.trace.pgo``).
    ``warmup``: trace directories played at the start of every simulator process, before its
    batch, their results not reported (each followed by the usual reset): NVIDIA's nv_full RTL
    writes wrong data or hangs on its first BDMA transfer after power-up (state its reset does
    not clear; the same program passes when anything ran before it, README "nv_full").

    The build happens before the first result (SimBuildError names the Verilator log).
    Yields TraceResult (with ``.rtl`` extras) as traces finish.
    """
    dirs = []
    for t in traces:
        d = _trace_dir(t)
        # traces that cannot run are reported without starting a simulator (same wording as
        # play(): a missing memory image is NOT-RUNNABLE, an unparsable .cfg is a FAIL)
        try:
            tr = t if isinstance(t, Trace) else (load_v1_trace(d) if is_v1_trace(d) else load_trace(d))
        except (TraceSyntaxError, FileNotFoundError, OSError) as e:
            res = TraceResult(d.name, FAIL, f"cannot load trace: {e}")
            res.rtl = {}
            yield res
            continue
        missing = tr.missing_files()
        if missing:
            res = TraceResult(tr.name, NOT_RUNNABLE, "missing memory image(s): "
                              + ", ".join(str(p) for p in missing))
            res.rtl = {}
            yield res
            continue
        dirs.append(d)
    if not dirs:
        return
    if build is None:
        build = build_sim(config, rtl_filelist=rtl_filelist, waves=waves,
                          xrand=xrand_seed is not None)
    if str(REPO) not in sys.path:  # the simulator's PYTHONPATH is this process's sys.path
        sys.path.insert(0, str(REPO))
    player = {k: v for k, v in (("intr_budget", intr_budget), ("poll_budget", poll_budget))
              if v is not None}
    eng = dict(engine or {})
    eng.setdefault("axi_ids", _axi_ids(axi_ids, config, rtl_filelist))
    if csb_period_ns is not None:
        eng["csb_period_ns"] = float(csb_period_ns)
    if memory is not None:
        from verif.trace.rtl_engine import MEMORIES
        if memory not in MEMORIES:
            raise ValueError(f"memory={memory!r}: one of {', '.join(MEMORIES)}")
        eng["memory"] = memory
    cfg = {"timing": asdict(timing), "player": player, "engine": eng, "config": config,
           "mode": mode, "warmup": [str(Path(d).resolve()) for d in (warmup or ())],
           # our RTL computes what its configuration names; another (NVIDIA's) may do more
           "own_rtl": rtl_filelist is None}
    if abort_after_wbeats is not None:
        cfg["abort_after_wbeats"] = int(abort_after_wbeats)
    plusargs = []
    if xrand_seed is not None:
        from sim.build import xrand_plusargs
        plusargs = xrand_plusargs(xrand_seed)
    jobs = max(1, int(jobs))
    if mode == "soak":
        per = len(dirs)
    elif mode == "reset_mid":
        per = 2 * max(1, (traces_per_process or len(dirs)) // 2)
    elif waves:
        per = 1
    elif traces_per_process:
        per = max(1, int(traces_per_process))
    else:
        per = min(32, max(1, math.ceil(len(dirs) / jobs)))
    stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
    root = Path(run_root) if run_root else build.directory / "runs" / stamp
    queue = [dirs[i:i + per] for i in range(0, len(dirs), per)]
    counter = 0

    def submit(pool, batch):
        nonlocal counter
        counter += 1
        rdir = root / (batch[0].name if len(batch) == 1 else f"batch{counter:03d}")
        wpath = None
        if waves:
            WAVES_DIR.mkdir(parents=True, exist_ok=True)
            wpath = WAVES_DIR / f"{batch[0].name}.fst"
        return pool.submit(_run_batch, build, batch, rdir, cfg, wpath, plusargs), batch, wpath

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        pending = {}
        while queue or pending:
            while queue and len(pending) < jobs:
                fut, batch, wpath = submit(pool, queue.pop(0))
                pending[fut] = (batch, wpath)
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for fut in done:
                batch, wpath = pending.pop(fut)
                got, log, err = fut.result()
                extra = {"log": str(log), "waves": str(wpath) if wpath else None,
                         "build": str(build.directory)}
                for d in got:
                    yield _result_from_json(d, dict(extra, t_launch=d.pop("_t_launch", None)))
                if mode in ("soak", "reset_mid"):       # no per-trace rerun of a sequence
                    if err or not got:
                        res = TraceResult(f"{mode}:{batch[0].name}", FAIL,
                                          f"simulation aborted ({err or 'no result'}); log: {log}; "
                                          + _log_tail(log))
                        res.rtl = dict(extra)
                        yield res
                    continue
                if len(got) < len(batch):
                    crashed = batch[len(got)]
                    why = err or "simulator ended without a result"
                    msg = f"simulation aborted ({why}); log: {log}"
                    tail = _log_tail(log)
                    if tail:
                        msg += f"; {tail}"
                    if wpath:
                        msg += f"; waveform: {wpath}"
                    res = TraceResult(crashed.name, FAIL, msg)
                    res.rtl = dict(extra)
                    yield res
                    rest = batch[len(got) + 1:]
                    if rest:
                        queue.insert(0, rest)


def _axi_ids(axi_ids, config: str, rtl_filelist) -> dict | None:
    """The allowed AXI IDs as JSON-able lists (see ``run_rtl``)."""
    from hdl.config import ConfigError, get_config
    from verif.monitors import NVIDIA_NV_SMALL_IDS, nvidia_ids, our_ids
    if axi_ids is None:
        return None
    if axi_ids == "auto":
        if rtl_filelist:
            try:
                ids = nvidia_ids(get_config(config))
            except ConfigError:     # a test DUT's own name (sim/tb stubs): nv_small's ports
                ids = NVIDIA_NV_SMALL_IDS
        else:
            ids = our_ids(get_config(config))
    else:
        ids = axi_ids
    return {"read": sorted(ids["read"]), "write": sorted(ids["write"])}


def main(argv=None) -> int:
    from hdl.config import ConfigError, add_config_arguments, config_from_args
    from verif.axi_slave import PROFILES, MemTimingError
    ap = argparse.ArgumentParser(description="Play NVIDIA trace tests on the RTL (Verilator).")
    ap.add_argument("paths", nargs="+", type=Path, help="trace directories or directories of traces")
    add_config_arguments(ap)
    ap.add_argument("--rtl-filelist", type=Path)
    ap.add_argument("--waves", action="store_true")
    ap.add_argument("-j", "--jobs", type=int, default=1)
    ap.add_argument("--mem-profile", choices=PROFILES, default="nvidia")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--read-latency", type=int, default=None)
    ap.add_argument("--accept-every", type=int, default=None)
    ap.add_argument("--max-cycles", type=int, default=None,
                    help="cycles to wait for each interrupt (default: verif.trace.budget)")
    ap.add_argument("--memory", choices=("sim", "python"), default="sim",
                    help="AXI memory: sim (in the simulation, C++; default) or python (reference)")
    ap.add_argument("--csb-clock-mhz", type=float, default=None,
                    help="dla_csb_clk frequency (default: equal to dla_core_clk, 100 MHz)")
    a = ap.parse_args(argv)
    if a.csb_clock_mhz is not None and not 0.1 <= a.csb_clock_mhz <= 1000:
        print(f"error: --csb-clock-mhz {a.csb_clock_mhz:g}: must be within 0.1..1000", file=sys.stderr)
        return 2
    try:
        cfg = config_from_args(a)
        timing = MemTiming.named(a.mem_profile, seed=a.seed, read_latency=a.read_latency,
                                 accept_every=a.accept_every)
    except (ConfigError, MemTimingError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    dirs = find_traces(a.paths)
    bad = 0
    for r in run_rtl(dirs, cfg.name, a.waves, a.rtl_filelist, a.jobs, timing=timing,
                     intr_budget=a.max_cycles, memory=a.memory,
                     csb_period_ns=1000.0 / a.csb_clock_mhz if a.csb_clock_mhz else None):
        x = getattr(r, "rtl", {})
        print(f"{r.status:12s} {r.name:45s} cycles={r.cycles} sim_cycles={x.get('sim_cycles')} "
              f"wall={x.get('sim_wall') or 0:.1f}s rd={x.get('rd_beats')} wr={x.get('wr_beats')}"
              + (f"  {r.message}" if r.message else ""), flush=True)
        bad += r.status != "PASS"
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
