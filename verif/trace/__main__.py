"""Trace player CLI: ``python -m verif.trace run PATH... --engine {rtl,model}``.

Prints one line per trace (PASS / FAIL / NOT-RUNNABLE, name, cycles on rtl, wall seconds), the
reason under a failing trace, and last ``N passed, M failed, K not runnable``. Exit status 1 iff a
trace failed.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from hdl.config import ConfigError, get_config
from verif.trace.parser import find_traces
from verif.trace.player import FAIL, NOT_RUNNABLE, PASS
from verif.trace.reference import nvidia_cycles
from verif.trace.runner import run


def format_result(r) -> str:
    cyc = f"{r.cycles:>9} cycles" if r.cycles is not None else f"{'-':>9}       "
    line = f"{r.status:<12} {r.name:<48} {cyc} {r.wall:8.2f} s"
    ref = nvidia_cycles().get(r.name)
    if r.cycles is not None and ref:
        line += f"   (NVIDIA RTL {ref} cycles, x{r.cycles / ref:.2f})"
    if r.status != PASS and r.message:
        line += "\n    " + r.message.replace("; ", "\n    ")
    return line


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m verif.trace", description="Play NVIDIA NVDLA trace tests.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    rp = sub.add_parser("run", help="run trace directories (or directories of them)",
                        description="Run NVIDIA trace tests on the RTL (Verilator + cocotb) or the numpy model.")
    rp.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                    help="a trace directory (holding one .cfg) or a directory of trace directories")
    rp.add_argument("--engine", choices=("rtl", "model"), default="model", help="simulator (default: model)")
    rp.add_argument("--config", default="nv_small", help="hardware configuration (default: nv_small)")
    rp.add_argument("--waves", action="store_true", help="rtl: dump FST waves to build/waves/<trace>.fst")
    rp.add_argument("--rtl-filelist", type=Path, default=None,
                    help="rtl: Verilator file list of any port-compatible NV_nvdla (default: ours)")
    rp.add_argument("-j", "--jobs", type=int, default=1, help="rtl: parallel simulations")
    rp.add_argument("--read-latency", type=int, default=None,
                    help="rtl: memory read latency in cycles (default 32, as NVIDIA's player)")
    rp.add_argument("--accept-every", type=int, default=None,
                    help="rtl: memory accepts one AXI request every N cycles (default 2, as NVIDIA's player)")
    args = ap.parse_args(argv)
    try:
        cfg = get_config(args.config)
        dirs = find_traces(args.paths)
    except (ConfigError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    counts = {PASS: 0, FAIL: 0, NOT_RUNNABLE: 0}
    t0 = time.monotonic()
    for r in run(dirs, args.engine, cfg, waves=args.waves, rtl_filelist=args.rtl_filelist, jobs=args.jobs,
                 read_latency=args.read_latency, accept_every=args.accept_every):
        counts[r.status] += 1
        print(format_result(r), flush=True)
    print(f"# {len(dirs)} traces on {args.engine} ({cfg.name}) in {time.monotonic() - t0:.1f} s", flush=True)
    print(f"{counts[PASS]} passed, {counts[FAIL]} failed, {counts[NOT_RUNNABLE]} not runnable")
    return 1 if counts[FAIL] else 0


if __name__ == "__main__":
    sys.exit(main())
