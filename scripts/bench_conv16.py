"""Benchmark of direct convolution per precision (issue 33): cycles against the MAC limit in INT8,
INT16 and FP16 on a configuration computing all three (prints figures, asserts nothing).

Layers: single-layer random DC programs of ``verif.gen.dc`` drawn large (``big_rate`` 1, SDP
operands from registers), kept when *compute-bound*: their atomic operations (one per cycle is
the MAC limit) are at least twice the bus cycles of everything they read and write (one cycle
per AXI beat with the ``fast`` memory profile) and twice SDP's cycles for the output cube (a
layer near the balance of two limits overlaps them imperfectly: it measures the overlap, not
the MACs), and NVIDIA's operation order adds at most 1 % to the MAC limit:
``scripts/bench_conv.py`` ``layer_work``'s *dataflow floor* (``stripes``: kernel group
outermost, then stripe, channel block, kernel row and column, pixel; an operation waits for
the bus to have carried every byte it and the operations before it read, each surface's lines
in memory order, and for a weight ring slot). That last condition matters: kernel group 0
sweeps every input line while CDMA fetches them, so a layer whose input takes longer to fetch
than group 0 takes to compute is bound by that fetch whatever its other groups do, a layer's
first operation waits for its first lines, and a layer whose vertical stride or dilation skips
lines still waits for the skipped lines above the ones it reads. ``--all`` also runs the layers that miss only this condition, reported against
their floor. An atomic operation is atomic_c channels x atomic_k kernels in INT8 and atomic_c
channels x atomic_k/2 kernels in INT16/FP16 (v1_ias_unit_description.rst "Convolution MAC":
1024 16-bit MACs, 2048 8-bit, on nv_full), so a layer's operations are out W x H x
ceil(K / group) x R x S x ceil(C / atomic_c).

Per layer: cycles from kick-off to interrupt on our RTL (``fast`` profile), the atomic
operations, cycles per operation, the dataflow floor and cycles over the floor (the larger of
the MAC limit, the floor, the bus and SDP); per precision the sum of cycles over the sum of
operations and the worst layer (the issue's goal: compute-bound layers at most 1.03 x the MAC
limit).

Usage: ``python scripts/bench_conv16.py [--config SPEC] [--set NAME=VALUE] [-n N] [--seed S]
[--all]`` (default geometry B, ``nv_small+feature_data_type=int8_int16_fp16``: N layers per
precision, the first compute-bound ones from seed S on). ``--rtl-filelist F`` plays them on
another NV_nvdla instead (e.g. NVIDIA's nv_full RTL: its cycles on the same programs).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hdl.config import add_config_arguments, config_from_args  # noqa: E402
from scripts.bench_conv import layer_work  # noqa: E402
from verif.axi_slave import MemTiming  # noqa: E402
from verif.gen.dc import generate  # noqa: E402
from verif.gen.run import prepare  # noqa: E402
from verif.trace.parser import load_trace  # noqa: E402
from verif.trace.runner import run  # noqa: E402

PREC_NAMES = ("int8", "int16", "fp16")
#: the dataflow floor may add this much to the MAC limit in a compute-bound layer
FLOOR_SLACK = 1.01


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=4, help="compute-bound layers per precision (default 4)")
    ap.add_argument("--seed", type=int, default=0, help="first seed tried (default 0)")
    ap.add_argument("--tries", type=int, default=400, help="seeds tried at most (default 400)")
    ap.add_argument("--rtl-filelist", metavar="F", help="play on this NV_nvdla file list instead")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="simulator processes (default 1)")
    ap.add_argument("--all", action="store_true",
                    help="also run N layers per precision that are compute-bound but for the "
                         "dataflow floor, reported against it")
    add_config_arguments(ap)
    ap.set_defaults(config="nv_small+feature_data_type=int8_int16_fp16")
    args = ap.parse_args()
    cfg = config_from_args(args, ap)
    if not cfg.conv16:
        ap.error(f"{cfg.name} computes INT8 only (a 16-bit configuration: feature_data_type="
                 "int8_int16_fp16 on one-byte sizes)")
    timing = MemTiming.named("fast")
    root = Path(tempfile.mkdtemp(prefix="bench_conv16_"))
    kinds = ("compute", "floor") if args.all else ("compute",)
    picked = {(kind, p): [] for kind in kinds for p in range(3)}
    work = {}
    for seed in range(args.seed, args.seed + args.tries):
        if all(len(v) >= args.n for v in picked.values()):
            break
        p = prepare(generate(seed, cfg, layers=1, big_rate=1.0, sdp_mem_rate=0.0), root, cfg)
        w = layer_work(load_trace(p.dir), cfg, 1, timing.read_latency)
        ops = w["atomic_ops"]
        if ops < 2 * max(w["beats"], w["sdp_cycles"]):
            continue
        kind = "compute" if w["stripes"] <= FLOOR_SLACK * ops else "floor"
        key = (kind, w["prec"])
        if key in picked and len(picked[key]) < args.n:
            picked[key].append(p.dir)
            w["floor"] = max(ops, w["stripes"], w["beats"], w["sdp_cycles"])
            work[p.dir.name] = (kind, w)
    print(f"config {cfg.name}; memory profile fast ({timing}); atomic op = {cfg.mac_atomic_c} "
          f"channels x {cfg.mac_atomic_k} (INT8) or {cfg.mac_atomic_k // 2} (16-bit) kernels")
    print(f"{'layer':10s} {'prec':5s} {'status':6s} {'cycles':>9s} {'atomic ops':>10s} "
          f"{'cyc/op':>7s} {'bus':>8s} {'SDP':>8s} {'floor':>8s} {'cyc/floor':>9s}  layer")
    t0 = time.monotonic()
    sums = {key: [0, 0, 0.0, 0.0] for key in picked}
    dirs = [d for v in picked.values() for d in v]
    for res in run(dirs, "rtl", cfg, jobs=args.jobs, timing=timing,
                   rtl_filelist=Path(args.rtl_filelist) if args.rtl_filelist else None,
                   axi_ids=None if args.rtl_filelist else "auto"):
        kind, w = work[res.name]
        cyc, ops = res.cycles, w["atomic_ops"]
        per = f"{cyc / ops:.3f}" if cyc else "-"
        per_f = f"{cyc / w['floor']:.3f}" if cyc else "-"
        print(f"{res.name:10s} {PREC_NAMES[w['prec']]:5s} {res.status:6s} "
              f"{cyc if cyc else '-':>9} {ops:>10,} {per:>7s} {w['beats']:>8,} "
              f"{w['sdp_cycles']:>8,} {w['floor']:>8,} {per_f:>9s}  "
              f"out {w['out']} kernel {w['kernel']}" + (" (floor-bound)" if kind == "floor" else ""),
              flush=True)
        if cyc and res.status == "PASS":
            s = sums[(kind, w["prec"])]
            s[0] += cyc
            s[1] += ops
            s[2] = max(s[2], cyc / ops)
            s[3] = max(s[3], cyc / w["floor"])
    for (kind, p), (cyc, ops, worst, worst_f) in sums.items():
        name = PREC_NAMES[p]
        if not ops:
            print(f"{name:5s}: no {kind}-bound layer passed among the seeds tried")
        elif kind == "compute":
            print(f"{name:5s}: {len(picked[(kind, p)])} compute-bound layers, {cyc:,} cycles for "
                  f"{ops:,} atomic operations = {cyc / ops:.3f} x the MAC limit, worst layer "
                  f"{worst:.3f} x (goal <= 1.03), {worst_f:.3f} x its floor")
        else:
            print(f"{name:5s}: {len(picked[(kind, p)])} layers bound by the dataflow floor: "
                  f"{cyc / ops:.3f} x the MAC limit, worst layer {worst_f:.3f} x its floor")
    print(f"wall time {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
