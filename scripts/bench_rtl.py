"""Benchmark: Verilator build time, simulated cycles per wall second with memory traffic per
design, start-up time, optionally the wall time of the whole rtl suite, and the cycles of
sdp_8192x1x1_pass_through_int8_0 with AXI bursts (prints figures only, asserts nothing).

Usage: ``python scripts/bench_rtl.py [--cold] [--config SPEC] [--set NAME=VALUE]
[--rtl-filelist F ...] [--filelist-pgo] [--memory sim|python|both] [--clocks tb|gpi]
[--repeat N] [--suite] [--no-bursts] [TRACE ...]``
(default traces: dc_32x26x76_6x3x76x16_int8_0 and sdp_8192x1x1_pass_through_int8_0; TRACE names
are looked up in the configuration's own suite, ../shared/nvdla/traces/<preset>, e.g.
``--config nv_large --no-bursts dc_8x16x128_3x3x128x32_int8``).

* per design - ours (``--config``; profile-guided unless ``$NVDLA_SIM_PGO=0``, see
  sim/build.py: the build line says what it was trained on) and each ``--rtl-filelist`` (e.g.
  NVIDIA's RTL; profile-guided too with ``--filelist-pgo``, for a like-for-like build) - and per
  AXI memory (``--memory``: ``sim``, the in-simulation memory, default; ``python``, the
  reference responder; ``both``): simulated cycles per wall second and per CPU second of the
  simulator process for each trace, and the start-up time (process launch to the end of the
  first reset); ``--repeat N`` plays every trace N times in the same process and also prints the
  best rate per trace (on a shared machine the best of several plays is the steadiest figure);
  ``--clocks``: the engine's clock source (``tb``: generated in the simulation, default;
  ``gpi``: cocotb ``Clock``s; see verif/trace/rtl_engine.py);
* ``--suite``: the wall time of the whole rtl manifest (``verif/manifest.toml`` [rtl]) with
  ``-j 2`` on our design (long: the heavy traces are included);
* unless ``--no-bursts``: under the ``nvidia`` memory profile, the cycles of
  sdp_8192x1x1_pass_through_int8_0 with ``primary_memif_max_burst`` 1 and 4, against the bus
  limit (8,192 cycles: 8,192 atoms of 8 bytes, one 8-byte beat per cycle each way), the goal
  (1.1 x 8,192 cycles) and NVIDIA's RTL (verif/trace/reference.py): first with SDP's datapath
  at NVIDIA's one element per cycle, then with the wide variant (``sdp_bs_throughput=8``,
  ``sdp_bn_throughput=8``: one atom per cycle, so the bus is the limit).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hdl.config import add_config_arguments, config_from_args, get_config  # noqa: E402
from verif.trace.pgo import build_sim  # noqa: E402
from verif.axi_slave import MemTiming  # noqa: E402
from verif.shared import nvdla_dir  # noqa: E402
from verif.trace.reference import nvidia_cycles, suite_dir  # noqa: E402
from verif.trace.rtl_runner import run_rtl  # noqa: E402

BURST_TRACE = "sdp_8192x1x1_pass_through_int8_0"
RATE_TRACE = "dc_32x26x76_6x3x76x16_int8_0"
BUS_LIMIT = 8192          # cycles: 8192 atoms, one 8-byte beat per cycle on R and on W
GOAL = 1.1 * BUS_LIMIT


def _rates(dirs, memory: str, repeat: int = 1, **kw) -> None:
    """One simulator process over ``dirs`` (each played ``repeat`` times): a line per play with
    cycles/s (wall and CPU), then the best per trace when ``repeat`` > 1."""
    startup = None
    best: dict[str, tuple[float, float]] = {}
    plays = [d for d in dirs for _ in range(max(1, repeat))]
    for r in run_rtl(plays, memory=memory, traces_per_process=len(plays), **kw):
        rtl = getattr(r, "rtl", {}) or {}
        cyc, wall, cpu = rtl.get("sim_cycles"), rtl.get("sim_wall"), rtl.get("sim_cpu")
        startup = rtl.get("startup", startup)
        rate = (f"{cyc / wall:,.0f} simulated cycles per wall second, {cyc / cpu:,.0f} per CPU "
                f"second" if cyc and wall and cpu else "n/a")
        if cyc and wall and cpu:
            w0, c0 = best.get(r.name, (0.0, 0.0))
            best[r.name] = (max(w0, cyc / wall), max(c0, cyc / cpu))
        ref = nvidia_cycles(kw.get("config", "nv_small")).get(r.name)
        print(f"  [{memory}] {r.status} {r.name}: {r.cycles} cycles kick-to-interrupt (NVIDIA RTL "
              f"{ref}), {cyc} cycles simulated in {wall or 0:.2f} s: {rate}; AXI beats "
              f"rd {rtl.get('rd_beats')} wr {rtl.get('wr_beats')}", flush=True)
    if repeat > 1:
        for name, (w, c) in best.items():
            print(f"  [{memory}] best of {repeat} plays, {name}: {w:,.0f} simulated cycles per wall "
                  f"second, {c:,.0f} per CPU second")
    if startup is not None:
        print(f"  [{memory}] start-up (process launch to the end of the first reset): {startup:.2f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", default=[RATE_TRACE, BURST_TRACE])
    add_config_arguments(ap)
    ap.add_argument("--cold", action="store_true", help="force a fresh Verilator build")
    ap.add_argument("--rtl-filelist", type=Path, action="append", default=[],
                    help="also measure this port-compatible NV_nvdla (e.g. NVIDIA's RTL); repeatable")
    ap.add_argument("--filelist-pgo", action="store_true",
                    help="profile-guided builds of the --rtl-filelist designs too (trained on "
                         "the same random programs as ours)")
    ap.add_argument("--memory", choices=("sim", "python", "both"), default="sim",
                    help="the AXI memory: sim (in the simulation, default), python (reference) or both")
    ap.add_argument("--clocks", choices=("tb", "gpi"), default="tb",
                    help="clock source: tb (generated in the simulation, default) or gpi (cocotb Clock)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="play every trace N times in one process and print the best rate")
    ap.add_argument("--suite", action="store_true",
                    help="also time the whole rtl manifest with -j 2 (long)")
    ap.add_argument("--no-bursts", action="store_true", help="skip the max-burst 1 vs 4 comparison")
    args = ap.parse_args()
    cfg = config_from_args(args, ap)
    mems = ("sim", "python") if args.memory == "both" else (args.memory,)
    root = suite_dir(cfg.name)
    dirs = [root / t for t in args.traces]
    if missing := [d.name for d in dirs if not d.is_dir()]:
        ap.error(f"not in {root}: {', '.join(missing)}")
    for fl in [None] + list(args.rtl_filelist):
        t0 = time.monotonic()
        b = build_sim(cfg.name, rtl_filelist=fl, force=args.cold,
                      pgo=True if fl is not None and args.filelist_pgo else None)
        what = f"our RTL ({cfg.name})" if fl is None else f"{fl}"
        print(f"{what}: verilator build {'cold' if args.cold else 'cached' if b.cached else 'built'} "
              f"in {time.monotonic() - t0:.1f} s ({b.directory})"
              + (f"; profile-guided: {b.pgo}" if b.pgo else "; not profile-guided"), flush=True)
        for mem in mems:
            _rates(dirs, mem, args.repeat, config=cfg.name, rtl_filelist=fl,
                   engine={"clocks": args.clocks})
    if args.suite:
        from verif import manifest
        names = sorted(manifest.load()["rtl"])
        sdirs = [nvdla_dir() / "traces" / n for n in names]
        for mem in mems:
            t0 = time.monotonic()
            res = list(run_rtl(sdirs, config=cfg.name, jobs=2, memory=mem))
            ok = sum(r.status == "PASS" for r in res)
            print(f"rtl suite ({len(sdirs)} traces of verif/manifest.toml [rtl], -j 2, memory {mem}): "
                  f"{time.monotonic() - t0:.1f} s wall, {ok} passed", flush=True)
    if args.no_bursts:
        return 0
    ref = nvidia_cycles().get(BURST_TRACE)
    print(f"\n{BURST_TRACE}, nvidia memory profile ({MemTiming.named('nvidia')}):")
    print(f"  bus limit {BUS_LIMIT:,} cycles, goal <= {GOAL:,.0f} cycles (1.1 x bus limit), "
          f"NVIDIA RTL {ref if ref is None else f'{ref:,}'} cycles")
    for tp, burst in ((1, 1), (1, 4), (8, 1), (8, 4)):
        spec = get_config("nv_small", [f"primary_memif_max_burst={burst}",
                                       f"sdp_bs_throughput={tp}", f"sdp_bn_throughput={tp}"]).name
        (r,) = run_rtl([nvdla_dir() / "traces" / "nv_small" / BURST_TRACE], config=spec,
                       timing=MemTiming.named("nvidia"))
        what = f"SDP {tp} element{'s' if tp > 1 else ''}/cycle, max burst {burst}"
        if r.cycles is None:
            print(f"  {what}: {r.status} (no cycle count) {r.message}")
            continue
        print(f"  {what}: {r.status} {r.cycles:,} cycles = {r.cycles / BUS_LIMIT:.2f} x bus limit"
              f" ({'meets' if r.cycles <= GOAL else 'misses'} the goal"
              + (f"; {r.cycles / ref:.2f} x NVIDIA's RTL" if ref else "") + ")")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
