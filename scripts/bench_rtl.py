"""Benchmark: Verilator build time, simulated cycles per wall second, and the cycles of
sdp_8192x1x1_pass_through_int8_0 with AXI bursts (prints figures only, asserts nothing).

Usage: ``python scripts/bench_rtl.py [--cold] [--config SPEC] [--set NAME=VALUE] [TRACE ...]``
(default trace: sdp_8192x1x1_pass_through_int8_0). ``--cold`` rebuilds the simulator (ignores
the cache). Then, under the ``nvidia`` memory profile, the cycles of
sdp_8192x1x1_pass_through_int8_0 with ``primary_memif_max_burst`` 1 and 4, against the bus limit
(8,192 cycles: 8,192 atoms of 8 bytes, one 8-byte beat per cycle each way), the goal
(1.1 x 8,192 cycles) and NVIDIA's RTL (verif/trace/reference.py): first with SDP's datapath at
NVIDIA's one element per cycle (the nv_small preset: the datapath, 8 cycles per atom, is the
limit), then with the wide variant (``sdp_bs_throughput=8``, ``sdp_bn_throughput=8``: one atom
per cycle, so the bus is the limit).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hdl.config import add_config_arguments, config_from_args, get_config  # noqa: E402
from sim.build import build_sim  # noqa: E402
from verif.axi_slave import MemTiming  # noqa: E402
from verif.shared import nvdla_dir  # noqa: E402
from verif.trace.reference import nvidia_cycles  # noqa: E402
from verif.trace.rtl_runner import run_rtl  # noqa: E402

BURST_TRACE = "sdp_8192x1x1_pass_through_int8_0"
BUS_LIMIT = 8192          # cycles: 8192 atoms, one 8-byte beat per cycle on R and on W
GOAL = 1.1 * BUS_LIMIT


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", default=[BURST_TRACE])
    add_config_arguments(ap)
    ap.add_argument("--cold", action="store_true", help="force a fresh Verilator build")
    ap.add_argument("--no-bursts", action="store_true", help="skip the max-burst 1 vs 4 comparison")
    args = ap.parse_args()
    cfg = config_from_args(args, ap)
    t0 = time.monotonic()
    build_sim(cfg.name, force=args.cold)
    print(f"verilator build of {cfg.name} ({'cold' if args.cold else 'cached'}): {time.monotonic() - t0:.1f} s")
    dirs = [nvdla_dir() / "traces" / "nv_small" / t for t in args.traces]
    for r in run_rtl(dirs, config=cfg.name):
        rtl = getattr(r, "rtl", {}) or {}
        cyc, wall = rtl.get("sim_cycles"), rtl.get("sim_wall")
        rate = f"{cyc / wall:,.0f} simulated cycles/s" if cyc and wall else "n/a"
        ref = nvidia_cycles().get(r.name)
        print(f"{r.status} {r.name}: {r.cycles} cycles kick-to-interrupt (NVIDIA RTL {ref}), "
              f"{cyc} cycles simulated in {wall or 0:.2f} s wall: {rate}")
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
