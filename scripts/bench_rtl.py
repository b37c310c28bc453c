"""Benchmark: Verilator build time and simulated cycles per wall second (prints figures only).

Usage: ``python scripts/bench_rtl.py [--cold] [TRACE ...]`` (default trace:
sdp_8192x1x1_pass_through_int8_0). ``--cold`` rebuilds the simulator (ignores the cache).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim.build import build_sim  # noqa: E402
from verif.shared import nvdla_dir  # noqa: E402
from verif.trace.reference import nvidia_cycles  # noqa: E402
from verif.trace.rtl_runner import run_rtl  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", default=["sdp_8192x1x1_pass_through_int8_0"])
    ap.add_argument("--config", default="nv_small")
    ap.add_argument("--cold", action="store_true", help="force a fresh Verilator build")
    args = ap.parse_args()
    t0 = time.monotonic()
    build_sim(args.config, force=args.cold)
    print(f"verilator build ({'cold' if args.cold else 'cached'}): {time.monotonic() - t0:.1f} s")
    dirs = [nvdla_dir() / "traces" / "nv_small" / t for t in args.traces]
    for r in run_rtl(dirs, config=args.config):
        rtl = getattr(r, "rtl", {}) or {}
        cyc, wall = rtl.get("sim_cycles"), rtl.get("sim_wall")
        rate = f"{cyc / wall:,.0f} simulated cycles/s" if cyc and wall else "n/a"
        ref = nvidia_cycles().get(r.name)
        print(f"{r.status} {r.name}: {r.cycles} cycles kick-to-interrupt (NVIDIA RTL {ref}), "
              f"{cyc} cycles simulated in {wall:.2f} s wall: {rate}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
