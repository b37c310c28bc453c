"""Run traces on an engine and describe the outcome (shared by the CLI and the pytest suite)."""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Iterable, Iterator

from hdl.config import NvdlaConfig
from verif.axi_slave import MemTiming
from verif.trace.golden import first_mismatch
from verif.trace.parser import TraceDataError, TraceSyntaxError, load_trace
from verif.trace.player import FAIL, NOT_RUNNABLE, TraceResult, play
from verif.trace.v1 import V1Trace, is_v1_trace, load_v1_trace, play_v1

ENGINES = ("model", "rtl", "amaranth", "board")


def add_mismatch_report(result: TraceResult, trace, cfg: NvdlaConfig) -> TraceResult:
    """Append the first-wrong-byte report (vs NVIDIA's golden bytes) of every failing check."""
    notes = []
    for c in result.checks:
        if not c.ok:
            rep = first_mismatch(trace, c.base, c.data, cfg)
            if rep:
                notes.append(rep)
    if notes:
        result.message = "; ".join([result.message] + notes) if result.message else "; ".join(notes)
    return result


def _load(d: Path):
    """(trace, None) or (None, the TraceResult saying why it cannot be loaded). A directory with
    an ``input.txn`` is a v1 trace (:mod:`verif.trace.v1`)."""
    try:
        return (load_v1_trace(d) if is_v1_trace(d) else load_trace(d)), None
    except (TraceSyntaxError, TraceDataError, FileNotFoundError) as e:
        return None, TraceResult(d.name, FAIL if isinstance(e, TraceSyntaxError) else NOT_RUNNABLE, str(e))


def _each(dirs: Iterable[Path], cfg: NvdlaConfig, play_one,
          engine: str | None = None) -> Iterator[TraceResult]:
    """Load each trace directory and yield ``play_one(trace)`` with the mismatch report added
    (a trace that cannot be loaded yields the TraceResult saying why). A v1 trace goes to
    :func:`_play_v1` (``engine`` names the engine for it)."""
    for d in dirs:
        trace, bad = _load(Path(d))
        if bad is not None:
            yield bad
            continue
        if isinstance(trace, V1Trace):
            yield _play_v1(trace, cfg, engine)
            continue
        yield add_mismatch_report(play_one(trace), trace, cfg)


def _play_v1(trace: V1Trace, cfg: NvdlaConfig, engine: str | None) -> TraceResult:
    """A v1 trace (NVIDIA's nvdlav1 format) on the model of a v1 configuration; FAIL with the
    reason on another configuration, NOT-RUNNABLE on another engine (the rtl engine plays v1
    traces itself where our RTL builds the configuration: :func:`run`)."""
    if cfg.register_map != "v1":
        return TraceResult(trace.name, FAIL, "a v1 trace (input.txn) needs a configuration with "
                           f"the v1 register map (--config nv_full), not {cfg.name}")
    if engine != "model":
        from hdl.support import unbuilt
        missing = unbuilt(cfg)
        why = (f"our RTL does not build {'; '.join(missing)} yet" if missing
               else f"the {engine} engine does not play them")
        return TraceResult(trace.name, NOT_RUNNABLE, "v1 traces (input.txn) run on the model, on "
                           "the rtl engine, or with --rtl-filelist on NVIDIA's nv_full RTL; "
                           f"{cfg.name}: {why}")
    from verif.trace.model_engine import ModelEngine
    return asyncio.run(play_v1(trace, ModelEngine(cfg)))


def run_model(dirs: Iterable[Path], cfg: NvdlaConfig) -> Iterator[TraceResult]:
    """Play each trace directory on the numpy model; yields one TraceResult per trace."""
    from verif.trace.model_engine import ModelEngine
    yield from _each(dirs, cfg, lambda trace: asyncio.run(play(trace, ModelEngine(cfg))), "model")


def run_amaranth(dirs: Iterable[Path], cfg: NvdlaConfig, timing: MemTiming = MemTiming(),
                 max_cycles: int | None = None) -> Iterator[TraceResult]:
    """Play each trace directory on ``hdl.top.NvdlaCore`` in Amaranth's simulator (one simulation
    per trace; slow: use it for small traces); yields one TraceResult per trace. The interrupt
    budget is ``verif.trace.budget.trace_budget`` (``max_cycles`` overrides it)."""
    from verif.trace.amaranth_engine import play_on_amaranth
    from verif.trace.budget import trace_budget
    yield from _each(dirs, cfg, lambda trace: play_on_amaranth(
        trace, cfg, timing=timing, intr_budget=trace_budget(trace, cfg, max_cycles)))


def run_board(dirs: Iterable[Path], cfg: NvdlaConfig,
              max_cycles: int | None = None) -> Iterator[TraceResult]:
    """Play each trace directory on the board top (``hdl.board.top.NvdlaBoard``) in Amaranth's
    simulator through its UART pins only (:mod:`verif.trace.board_engine`: 16 KiB of RAM, 2
    cycles a UART bit; slower still than ``amaranth``); yields one TraceResult per trace."""
    from verif.trace.board_engine import play_on_board
    from verif.trace.budget import trace_budget
    yield from _each(dirs, cfg, lambda trace: play_on_board(
        trace, cfg, intr_budget=trace_budget(trace, cfg, max_cycles)))


def run(dirs: Iterable[Path], engine: str, cfg: NvdlaConfig, *, waves: bool = False,
        rtl_filelist: Path | None = None, jobs: int = 1, timing: MemTiming | None = None,
        read_latency: int | None = None, accept_every: int | None = None,
        traces_per_process: int | None = None, max_cycles: int | None = None,
        **rtl_kw) -> Iterator[TraceResult]:
    """Dispatch to the ``model``, ``rtl``, ``amaranth`` or ``board`` engine (the board top
    through its UART, :func:`run_board`; ``timing`` does not apply to it).

    ``timing``: memory timing of the simulated engines (default: the ``nvidia`` profile);
    ``read_latency`` (cycles) and ``accept_every`` (cycles between accepted AXI requests)
    override the nvidia profile's values when ``timing`` is None. ``cfg.name`` (a spec string)
    selects the RTL build. ``max_cycles``: the interrupt budget of every trace (default:
    derived per trace by ``verif.trace.budget.trace_budget``). ``rtl_kw``: further
    ``run_rtl`` keywords (``mode``, ``xrand_seed``, ``axi_ids``, ...). Raises ValueError for an unknown engine and
    ``verif.axi_slave.MemTimingError`` for invalid timing values.
    """
    dirs = [Path(d).resolve() for d in dirs]   # simulator processes run in their own directories
    if timing is None:
        timing = MemTiming.named("nvidia", read_latency=read_latency, accept_every=accept_every)
    if engine == "model":
        yield from run_model(dirs, cfg)
    elif engine == "amaranth":
        yield from run_amaranth(dirs, cfg, timing, max_cycles)
    elif engine == "board":
        yield from run_board(dirs, cfg, max_cycles)
    elif engine == "rtl":
        from verif.trace.rtl_runner import run_rtl
        from hdl.support import unbuilt
        if rtl_filelist is None and unbuilt(cfg):   # our RTL does not build it: say so per trace
            for d in [d for d in dirs if is_v1_trace(d)]:
                trace, bad = _load(d)
                yield bad if bad is not None else _play_v1(trace, cfg, engine)
            dirs = [d for d in dirs if not is_v1_trace(d)]
            if not dirs:
                return
        for res in run_rtl(dirs, config=cfg.name, waves=waves, rtl_filelist=rtl_filelist, jobs=jobs,
                           timing=timing, traces_per_process=traces_per_process,
                           intr_budget=max_cycles, **rtl_kw):
            trace = None
            try:
                d = next(d for d in dirs if d.name == res.name)
                trace = None if is_v1_trace(d) else load_trace(d)
            except (StopIteration, TraceSyntaxError, FileNotFoundError):
                pass
            yield add_mismatch_report(res, trace, cfg) if trace is not None else res
    else:
        raise ValueError(f"unknown engine {engine!r} (one of {', '.join(ENGINES)})")
