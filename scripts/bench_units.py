"""Benchmark of SDP/PDP/CDP on the rtl manifest's traces (prints figures, asserts nothing).

Three runs under the ``nvidia`` memory profile (32-cycle reads, one request every other cycle):

1. throughput 1 (the nv_small preset): cycles from kick-off to interrupt against NVIDIA's RTL
   (../shared/nvdla/reference/nv_small_nvidia_rtl_cycles.tsv); goal: at most NVIDIA's.
2. the wide variant (``sdp_bs/bn_throughput``, ``pdp_throughput``, ``cdp_throughput`` = 8)
   against the memory bound: 2 cycles per 8-byte beat of the larger of the read and the write
   traffic (the AXI beats the trace moved); goal: at most 1.05 x. Also printed: the ratio to
   that bound plus the memory's read latency (no data can arrive earlier), which is what a
   small trace can reach at best.
3. the wide variant with ``primary_memif_max_burst=4``: against 1 cycle per beat.

With ``--config PRESET`` (another configuration than nv_small, e.g. nv_small_256 or nv_large),
one run instead: that configuration's own suite (../shared/nvdla/traces/<preset>, its sdp_/pdp_/
cdp_ traces) under the ``nvidia`` profile, each trace's cycles against NVIDIA's RTL of the same
configuration (its reference table, or measured with ``--nvidia-filelist F``) and against its
floor: the larger of the memory bound of its busiest AXI channel (primary or secondary port: 2
cycles per beat, 1 with ``primary_memif_max_burst`` > 1) and the unit bound (its elements, int8
bytes written by SDP/CDP or read by PDP, at the unit's throughput per cycle), plus one read
latency; goal at most 1.05 x for the memory-bound traces (memory bound >= unit bound).

Usage: ``python scripts/bench_units.py [--only 1,2,3] [-j N] [--filter SUBSTRING]
[--config PRESET [--set NAME=VALUE] [--nvidia-filelist F] [--large-sdp N]]``
(``--large-sdp N``: N generated 64 x 16 x 128 SDP layers too, large enough that the memory bound,
not the fixed latency, decides).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hdl.config import add_config_arguments, config_from_args, get_config  # noqa: E402
from verif.axi_slave import MemTiming  # noqa: E402
from verif.manifest import load as load_manifest  # noqa: E402
from verif.shared import nvdla_dir  # noqa: E402
from verif.trace.reference import measured_cycles, nvidia_cycles, suite_dir  # noqa: E402
from verif.trace.rtl_runner import run_rtl  # noqa: E402

WIDE = ["sdp_bs_throughput=8", "sdp_bn_throughput=8", "pdp_throughput=8", "cdp_throughput=8"]
RUNS = {1: ("throughput 1", [], None),
        2: ("wide, burst 1", WIDE, 2),
        3: ("wide, burst 4", WIDE + ["primary_memif_max_burst=4"], 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="1,2,3", help="runs to do, e.g. 2,3 (default all)")
    ap.add_argument("--filter", default="", help="only traces whose name contains this")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="simulator processes (default 2)")
    ap.add_argument("--nvidia-filelist", metavar="F",
                    help="with --config: NVIDIA's cycles measured on this NV_nvdla file list")
    ap.add_argument("--large-sdp", type=int, default=0, metavar="N",
                    help="with --config: also N generated 64x16x128 SDP layers (memory-bound)")
    add_config_arguments(ap)
    args = ap.parse_args()
    if args.config != "nv_small" or args.overrides:
        return config_run(config_from_args(args, ap), args)
    names = [t for t in sorted(load_manifest()["rtl"]) if args.filter in t and "/dc_" not in t and "/img_" not in t]
    dirs = [nvdla_dir() / "traces" / t for t in names]
    ref = nvidia_cycles()
    for run in (int(x) for x in args.only.split(",")):
        title, sets, per_beat = RUNS[run]
        spec = get_config("nv_small", sets).name
        t0 = time.monotonic()
        timing = MemTiming.named("nvidia")
        print(f"\n## {title} ({spec}), nvidia memory profile")
        worst, n_goal, n = 0.0, 0, 0
        for r in sorted(run_rtl(dirs, config=spec, jobs=args.jobs, timing=timing),
                        key=lambda r: r.name):
            x = getattr(r, "rtl", {}) or {}
            if per_beat is None:
                nv = ref.get(r.name)
                ratio = r.cycles / nv if r.cycles and nv else None
                what = f"NVIDIA {nv}"
                goal = 1.0
            else:
                beats = max(x.get("rd_beats") or 0, x.get("wr_beats") or 0)
                bound = beats * per_beat
                ratio = r.cycles / bound if r.cycles and bound else None
                floor = bound + timing.read_latency
                what = (f"memory bound {bound} ({beats} beats)"
                        + (f", {r.cycles / floor:.3f} x (bound + read latency)" if r.cycles else ""))
                goal = 1.05
            n += 1
            if ratio is not None:
                worst = max(worst, ratio)
                n_goal += ratio <= goal
            print(f"{r.status:5s} {r.name:40s} {r.cycles!s:>7} cycles  {what}  "
                  f"ratio {ratio:.3f}" if ratio is not None else f"{r.status} {r.name} {r.message}", flush=True)
        print(f"{n_goal}/{n} within the goal ({goal} x); worst {worst:.3f}; wall {time.monotonic() - t0:.0f} s")
    return 0


def large_sdp_layers(cfg, n: int) -> list:
    """``n`` generated one-layer SDP programs (verif.gen.sdp, seeds 900000.., the cube forced to
    64 x 16 x 128: 128 KiB of int8, 4,096 beats on a 256-bit bus) written as traces with the
    model's CRCs into a temporary directory: NVIDIA's suites hold only small SDP traces, whose
    fixed pipeline latency hides the memory-bound rate."""
    import tempfile

    from verif.gen.run import prepare
    from verif.gen.sdp import generate
    root = Path(tempfile.mkdtemp(prefix="bench_units_sdp_"))
    return [prepare(generate(900000 + i, cfg, layers=1, force={"cube": (64, 16, 128)}), root, cfg).dir
            for i in range(n)]


def config_run(cfg, args) -> int:
    """The ``--config`` run: the configuration's own sdp_/pdp_/cdp_ traces against NVIDIA's
    cycles and the memory bound of the busiest AXI channel plus one read latency."""
    root = suite_dir(cfg.name)
    dirs = sorted(p for p in root.iterdir() if p.is_dir() and p.name.split("_")[0] in ("sdp", "pdp", "cdp")
                  and args.filter in p.name)
    if args.large_sdp:
        dirs += large_sdp_layers(cfg, args.large_sdp)
    timing = MemTiming.named("nvidia")
    if args.nvidia_filelist:
        print(f"measuring NVIDIA's cycles on {args.nvidia_filelist} ...", flush=True)
        ref = measured_cycles(dirs, args.nvidia_filelist, cfg.name, args.jobs, timing)
    else:
        ref = nvidia_cycles(cfg.name)
    per_beat = 1 if cfg.primary_memif_max_burst > 1 else 2
    print(f"\n## {cfg.name}: {root}, nvidia memory profile ({timing}), {per_beat} cycle(s) per "
          f"{cfg.axi_data_bytes}-byte beat")
    print(f"{'status':5s} {'trace':40s} {'cycles':>7s} {'NVIDIA':>7s} {'ours/NV':>7s} "
          f"{'beats':>6s} {'unit':>6s} {'floor':>6s} {'ratio':>6s}")
    t0 = time.monotonic()
    n = n_goal = n_nv = n_faster = n_mem = 0
    worst_all = 0.0
    worst = 0.0
    for r in sorted(run_rtl(dirs, config=cfg.name, jobs=args.jobs, timing=timing), key=lambda r: r.name):
        x = getattr(r, "rtl", {}) or {}
        beats = max((x.get(k) or 0) for k in ("rd_beats", "wr_beats", "cv_rd_beats", "cv_wr_beats"))
        # the unit's datapath: its elements (int8: bytes; SDP and CDP write as many as their
        # data cube has, PDP reads its input cube) at its throughput per cycle
        kind = r.name.split("_")[0]
        moved = sum((x.get(p + ("rd_beats" if kind == "pdp" else "wr_beats")) or 0) for p in ("", "cv_"))
        tp = {"sdp": cfg.sdp_bs_throughput, "pdp": cfg.pdp_throughput, "cdp": cfg.cdp_throughput}[kind]
        unit = moved * cfg.axi_data_bytes // tp
        bound = max(beats * per_beat, unit)
        floor = bound + timing.read_latency
        nv = ref.get(r.name)
        n += 1
        if not r.cycles:
            print(f"{r.status:5s} {r.name:40s} {r.message}", flush=True)
            continue
        ratio = r.cycles / floor
        membound = beats * per_beat >= unit
        worst_all = max(worst_all, ratio)
        if membound:
            n_mem += 1
            worst = max(worst, ratio)
            n_goal += ratio <= 1.05
        if nv:
            n_nv += 1
            n_faster += r.cycles <= nv
        print(f"{r.status:5s} {r.name:40s} {r.cycles:>7} {nv or '-':>7} "
              f"{(f'{r.cycles / nv:.3f}' if nv else '-'):>7} {beats:>6} {unit:>6} {floor:>6} {ratio:>6.3f}"
              f"{' (memory-bound)' if membound else ''}", flush=True)
    print(f"memory-bound traces: {n_goal}/{n_mem} within 1.05 x (bound + read latency), worst "
          f"{worst:.3f}; all {n} traces: worst {worst_all:.3f} x floor; at most NVIDIA's "
          f"cycles: {n_faster}/{n_nv}; wall {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
