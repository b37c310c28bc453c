"""Benchmark: wall time of the numpy model over NVIDIA's nv_small traces (prints figures only).

Usage: ``python scripts/bench_model.py [--config SPEC] [--set NAME=VALUE] [PATH ...]`` (default
../shared/nvdla/traces/nv_small).
Prints each trace's wall seconds, the total, and the slowest three. The goal (issue 3) is the
whole nv_small suite in under 60 s on a 2-core machine.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hdl.config import add_config_arguments, config_from_args  # noqa: E402
from verif.shared import nvdla_dir  # noqa: E402
from verif.trace.parser import find_traces  # noqa: E402
from verif.trace.runner import run_model  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=Path, help="trace directories (default: nv_small suite)")
    add_config_arguments(ap)
    args = ap.parse_args()
    cfg = config_from_args(args, ap)
    dirs = find_traces(args.paths or [nvdla_dir() / "traces" / "nv_small"])
    t0 = time.monotonic()
    rows = []
    for r in run_model(dirs, cfg):
        rows.append((r.wall, r.name, r.status))
        print(f"{r.status:<12} {r.name:<48} {r.wall:7.2f} s", flush=True)
    total = time.monotonic() - t0
    print(f"total: {total:.1f} s for {len(rows)} traces "
          f"({sum(s == 'PASS' for _, _, s in rows)} passed)")
    for wall, name, _ in sorted(rows, reverse=True)[:3]:
        print(f"slowest: {name} {wall:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
