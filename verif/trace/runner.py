"""Run traces on an engine and describe the outcome (shared by the CLI and the pytest suite)."""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Iterable, Iterator

from hdl.config import NvdlaConfig
from verif.trace.golden import first_mismatch
from verif.trace.parser import TraceSyntaxError, load_trace
from verif.trace.player import FAIL, NOT_RUNNABLE, TraceResult, play


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


def run_model(dirs: Iterable[Path], cfg: NvdlaConfig) -> Iterator[TraceResult]:
    """Play each trace directory on the numpy model; yields one TraceResult per trace."""
    from verif.trace.model_engine import ModelEngine
    for d in dirs:
        d = Path(d)
        try:
            trace = load_trace(d)
        except (TraceSyntaxError, FileNotFoundError) as e:
            yield TraceResult(d.name, FAIL if isinstance(e, TraceSyntaxError) else NOT_RUNNABLE, str(e))
            continue
        res = asyncio.run(play(trace, ModelEngine(cfg)))
        yield add_mismatch_report(res, trace, cfg)


def run(dirs: Iterable[Path], engine: str, cfg: NvdlaConfig, *, waves: bool = False,
        rtl_filelist: Path | None = None, jobs: int = 1, read_latency: int | None = None,
        accept_every: int | None = None) -> Iterator[TraceResult]:
    """Dispatch to the model or rtl engine. ``read_latency`` (cycles) and ``accept_every``
    (cycles between accepted AXI requests) override the rtl memory's defaults (NVIDIA's player:
    32 and 2). Raises ValueError for an unknown engine."""
    dirs = [Path(d).resolve() for d in dirs]   # simulator processes run in their own directories
    if engine == "model":
        yield from run_model(dirs, cfg)
    elif engine == "rtl":
        from verif.trace.rtl_engine import MemTiming
        from verif.trace.rtl_runner import run_rtl
        overrides = {k: v for k, v in (("read_latency", read_latency), ("accept_every", accept_every))
                     if v is not None}
        timing = MemTiming(**overrides)
        for res in run_rtl(dirs, config=cfg.name, waves=waves, rtl_filelist=rtl_filelist, jobs=jobs,
                           timing=timing):
            trace = None
            try:
                trace = load_trace(next(d for d in dirs if d.name == res.name))
            except (StopIteration, TraceSyntaxError, FileNotFoundError):
                pass
            yield add_mismatch_report(res, trace, cfg) if trace is not None else res
    else:
        raise ValueError(f"unknown engine {engine!r} (rtl or model)")
