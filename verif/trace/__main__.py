"""Trace player CLI: ``python -m verif.trace run PATH... --engine {model,rtl,amaranth,board}``.

Prints one line per trace (PASS / FAIL / NOT-RUNNABLE, name, cycles on the simulated engines,
wall seconds), the reason under a trace that did not pass, and last
``N passed, M failed, K not runnable``. Exit status: 0 when every trace passed; 1 when a trace
failed, or was not runnable (unless ``--allow-not-runnable``); 2 for invalid options (an
unknown configuration or ``--set`` value, a timing value out of range, a malformed
``--cluster`` or an unreachable scheduler), before anything runs.

``--cluster local[:N]|tcp://HOST:PORT`` (``verif.cluster``) plays the traces on Dask workers:
the same lines in the order of the paths (not completion order) with a progress bar on
stderr, then the same summary. ``--junit-xml FILE`` and ``--report FILE`` (JSON or Markdown)
write one entry per trace with or without ``--cluster``.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from hdl.config import ConfigError, add_config_arguments, config_from_args
from hdl.support import UnbuiltConfig, check_buildable
from verif import cluster as dc
from verif.axi_slave import MemTimingError, add_timing_arguments, timing_from_args
from verif.trace.parser import find_traces
from verif.trace.player import FAIL, NOT_RUNNABLE, PASS
from verif.trace.reference import nvidia_cycles
from verif.trace.runner import ENGINES, run


def format_result(r, config: str = "nv_small") -> str:
    """One result line (and its reason under a failure); cycles beside NVIDIA's RTL's of the
    same configuration (verif.trace.reference) when known."""
    cyc = f"{r.cycles:>9} cycles" if r.cycles is not None else f"{'-':>9}       "
    line = f"{r.status:<12} {r.name:<48} {cyc} {r.wall:8.2f} s"
    ref = nvidia_cycles(config).get(r.name)
    if r.cycles is not None and ref:
        line += f"   (NVIDIA RTL {ref} cycles, x{r.cycles / ref:.2f})"
    if r.status != PASS and r.message:
        line += "\n    " + r.message.replace("; ", "\n    ")
    return line


def trace_record(r) -> "dc.ItemRecord":
    """The report entry of a TraceResult: status pass/fail/skip (NOT-RUNNABLE), cycles and
    each check's expected and actual CRC."""
    status = {PASS: "pass", NOT_RUNNABLE: "skip"}.get(r.status, "fail")
    return dc.ItemRecord(r.name, status, r.wall, r.message,
                         {"cycles": r.cycles,
                          "crcs": [[f"{c.expected:#010x}", f"{c.actual:#010x}"] for c in r.checks]})


#: dla_core_clk of the simulated engines (RtlEngine's default period_ns = 10)
CORE_CLOCK_MHZ = 100.0


def _csb_clock(mhz: float | None, engine: str) -> dict:
    """``run`` keywords for ``--csb-clock-mhz`` (empty when not given). Raises MemTimingError
    (an option error) for a frequency out of range or an engine that cannot run it."""
    if mhz is None:
        return {}
    if not 0.1 <= mhz <= 1000:
        raise MemTimingError(f"--csb-clock-mhz {mhz:g}: must be within 0.1..1000")
    if engine == "rtl":
        return {"csb_period_ns": 1000.0 / mhz}
    if engine == "amaranth" and mhz == CORE_CLOCK_MHZ:
        return {}                      # the amaranth engine runs equal clocks
    raise MemTimingError(f"--csb-clock-mhz {mhz:g}: the {engine} engine "
                         + ("runs the CSB clock equal to the core clock "
                            f"({CORE_CLOCK_MHZ:g} MHz) only" if engine == "amaranth"
                            else "has no clocks"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m verif.trace", description="Play NVIDIA NVDLA trace tests.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    rp = sub.add_parser("run", help="run trace directories (or directories of them)",
                        description="Run NVIDIA trace tests on the numpy model, the RTL (Verilator + "
                                    "cocotb) or the RTL in Amaranth's simulator.")
    rp.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                    help="a trace directory (holding one .cfg) or a directory of trace directories")
    rp.add_argument("--engine", choices=ENGINES, default="model",
                    help="model (numpy), rtl (Verilator), amaranth (Amaranth simulator, slow) or "
                         "board (the FPGA board top through its UART, hdl/board/, in Amaranth's "
                         "simulator, slower); default: model")
    add_config_arguments(rp)
    rp.add_argument("--waves", action="store_true", help="rtl: dump FST waves to build/waves/<trace>.fst")
    rp.add_argument("--rtl-filelist", type=Path, default=None,
                    help="rtl: Verilator file list of any port-compatible NV_nvdla (default: ours)")
    rp.add_argument("-j", "--jobs", type=int, default=1,
                    help="rtl: parallel simulations (without --cluster; --cluster local takes "
                         "its worker count from it)")
    add_timing_arguments(rp)
    rp.add_argument("--max-cycles", type=int, default=None, metavar="N",
                    help="rtl/amaranth: cycles to wait for each interrupt before declaring a hang "
                         "(default: derived from the trace's work - bytes each DMA moves, atomic "
                         "operations - times a margin, and at least 4x NVIDIA's cycles where "
                         "its table lists the trace); the failure names the busy units")
    rp.add_argument("--memory", choices=("sim", "python"), default="sim",
                    help="rtl: the AXI memory model: sim (default: inside the simulation, C++ through "
                         "DPI-C, no Python per cycle) or python (the reference responder in cocotb)")
    rp.add_argument("--csb-clock-mhz", type=float, default=None, metavar="MHZ",
                    help=f"rtl: frequency of dla_csb_clk (default: the core clock's "
                         f"{CORE_CLOCK_MHZ:g} MHz), e.g. 37 for a CSB clock unrelated to the core "
                         "clock; cycles are counted in dla_core_clk. amaranth: only "
                         f"{CORE_CLOCK_MHZ:g} (equal clocks)")
    rp.add_argument("--warmup", type=Path, action="append", default=None, metavar="DIR",
                    help="rtl: play trace DIR first in every simulator process, its result not "
                         "reported (NVIDIA's nv_full RTL garbles its first BDMA transfer after "
                         "power-up: README 'nv_full'); repeatable")
    rp.add_argument("--allow-not-runnable", action="store_true",
                    help="exit status 0 even if some traces are not runnable (missing memory images)")
    dc.add_cluster_arguments(rp)
    args = ap.parse_args(argv)
    try:
        cfg = config_from_args(args)
        timing = timing_from_args(args)
        if args.jobs < 1:
            raise MemTimingError(f"--jobs {args.jobs}: must be >= 1")
        if args.max_cycles is not None and args.max_cycles < 1:
            raise MemTimingError(f"--max-cycles {args.max_cycles}: must be >= 1")
        csb_kw = _csb_clock(args.csb_clock_mhz, args.engine)
        if args.engine != "model" and args.rtl_filelist is None:
            check_buildable(cfg)              # our RTL of cfg: refused before anything runs
        spec = dc.cluster_from_args(args, args.jobs)
        dirs = find_traces(args.paths)
    except (ConfigError, MemTimingError, FileNotFoundError, UnbuiltConfig, dc.ClusterError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    counts = {PASS: 0, FAIL: 0, NOT_RUNNABLE: 0}
    records = []
    t0 = time.monotonic()
    kw = dict(waves=args.waves, timing=timing, max_cycles=args.max_cycles,
              **({"memory": args.memory} if args.engine == "rtl" else {}),
              **({"warmup": args.warmup} if args.engine == "rtl" and args.warmup else {}), **csb_kw)

    def report(r, write=print):
        counts[r.status] += 1
        records.append(trace_record(r))
        write(format_result(r, cfg.name))

    if spec is None:
        for r in run(dirs, args.engine, cfg, rtl_filelist=args.rtl_filelist, jobs=args.jobs, **kw):
            report(r, lambda line: print(line, flush=True))
    else:
        if args.engine == "rtl" and spec.kind == "local":
            # the workers share this machine's build cache: build (or find) the model once here
            from verif.trace.pgo import build_sim
            build_sim(cfg.name, rtl_filelist=args.rtl_filelist, waves=args.waves)
        try:
            with dc.connect(spec) as client:
                bar = dc.progress(len(dirs), "trace")

                def done():
                    for i, r in dc.run_traces(client, dirs, args.engine, cfg,
                                              timeout=args.task_timeout,
                                              rtl_filelist=args.rtl_filelist, **kw):
                        bar.update(1)
                        yield i, r
                for _, r in dc.in_order(done(), len(dirs)):
                    report(r, lambda line: bar.write(line, file=sys.stdout))
                bar.close()
        except dc.ClusterError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    mem = f", memory {timing}" if args.engine not in ("model", "board") else ""
    if args.csb_clock_mhz is not None:
        mem += f", dla_csb_clk {args.csb_clock_mhz:g} MHz, dla_core_clk {CORE_CLOCK_MHZ:g} MHz"
    where = f" on cluster {spec}" if spec is not None else ""
    wall = time.monotonic() - t0
    print(f"# {len(dirs)} traces on {args.engine} ({cfg.name}{mem}){where} in {wall:.1f} s",
          flush=True)
    print(f"{counts[PASS]} passed, {counts[FAIL]} failed, {counts[NOT_RUNNABLE]} not runnable")
    dc.write_reports(records, suite=f"trace.{args.engine}", junit=args.junit_xml,
                     report=args.report,
                     meta={"engine": args.engine, "config": cfg.name,
                           "cluster": str(spec) if spec else f"pool -j {args.jobs}",
                           "wall_s": round(wall, 1)})
    if counts[FAIL] or (counts[NOT_RUNNABLE] and not args.allow_not_runnable):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
