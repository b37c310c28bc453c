"""Benchmark of multi-batch convolution (issue 34: "an inner-product layer with batch 8 reaches at
least 4x the MAC utilisation of batch 1"); prints figures, asserts nothing.

One inner-product layer (the kernel covers the W x H x C input, output 1 x 1 x K;
``verif.gen.dc.fc_program``) run with N = 1, 8 and the configuration's largest batch, each
checked against the model (bytes) and timed from kick-off to interrupt on the rtl engine under
the ``nvidia`` memory profile. Per N: cycles, atomic operations (N x ceil(K / kernel group) x
ceil(C / atomic C) x W x H; one per cycle is CMAC's limit), MAC utilisation = operations /
cycles, and its ratio to N = 1's; the weight bytes (read once whatever N: the point of the mode,
unit description "Multi-Batch Mode") and the layer's AXI beats (weights, N input cubes, N
outputs; NVIDIA's memory profile takes one every other cycle). ``--nvidia-filelist F``: the
same programs on NVIDIA's RTL beside ours.

Usage: ``python scripts/bench_batch.py [--config SPEC] [--set NAME=VALUE] [--shape W,H,C,K]
[--precision int8|int16|fp16] [--nvidia-filelist F [--warmup DIR] [--skip-ours]]`` (default:
nv_full with winograd and weight compression off, int8, 2 x 2 x 512 input, 64 kernels).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hdl.config import add_config_arguments, config_from_args  # noqa: E402
from verif.gen.dc import fc_program  # noqa: E402
from verif.gen.run import prepare, run_programs  # noqa: E402

PRECISIONS = {"int8": 0, "int16": 1, "fp16": 2}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_config_arguments(ap)
    ap.add_argument("--shape", default="2,2,512,64",
                    help="W,H,C,K of the inner-product layer (default 2,2,512,64)")
    ap.add_argument("--precision", choices=PRECISIONS, default="int8")
    ap.add_argument("--batches", default=None,
                    help="comma-separated N (default: 1, 8 and the configuration's max_batch)")
    ap.add_argument("--nvidia-filelist", type=Path, default=None,
                    help="also run the programs on this NV_nvdla (e.g. NVIDIA's nv_full RTL)")
    ap.add_argument("--warmup", type=Path, action="append", default=None,
                    help="with --nvidia-filelist: trace played first in its simulator process")
    ap.add_argument("--skip-ours", action="store_true",
                    help="with --nvidia-filelist: NVIDIA's RTL only (its simulator is often built "
                         "with NVDLA_SIM_OPT=-O1, which would build ours anew: run ours "
                         "without it)")
    ap.set_defaults(config="nv_full")
    args = ap.parse_args()
    if args.config == "nv_full" and not args.overrides:
        args.overrides = ["winograd=False", "weight_compression=False"]
    if args.precision != "int8" and not any(s.startswith("feature_data_type")
                                            for s in args.overrides):
        args.overrides.append("feature_data_type=int8_int16_fp16")
    cfg = config_from_args(args, ap)
    if not cfg.batch:
        ap.error(f"{cfg.name} has no multi-batch mode (batch=False)")
    w, h, c, k = (int(x) for x in args.shape.split(","))
    prec = PRECISIONS[args.precision]
    ns = ([int(x) for x in args.batches.split(",")] if args.batches
          else sorted({1, 8, cfg.max_batch}))
    eb = 2 if prec else 1
    kg = cfg.mac_atomic_k // eb
    per_cube = -(-k // kg) * -(-c // cfg.mac_atomic_c) * w * h
    wbytes = w * h * c * k * eb
    beat = cfg.axi_data_bytes
    print(f"{cfg.name}: inner-product layer {w}x{h}x{c} -> 1x1x{k}, {args.precision}, "
          f"{wbytes} weight bytes, {per_cube} atomic operations per cube")
    engines = (([] if args.skip_ours and args.nvidia_filelist else [("ours", None)])
               + ([("NVIDIA", args.nvidia_filelist)] if args.nvidia_filelist else []))
    with tempfile.TemporaryDirectory() as tmp:
        preps = [prepare(fc_program(cfg, w, h, c, k, n, prec), Path(tmp), cfg) for n in ns]
        cycles = {}
        for name, fl in engines:
            kw = {"rtl_filelist": fl, "axi_ids": None, "warmup": args.warmup} if fl else {}
            for out in run_programs(preps, cfg, mem_profile="nvidia", per_process=len(preps),
                                    **kw):
                n = ns[[p.dir.name for p in preps].index(out.dir.name)]
                if out.status != "pass":
                    print(f"{name} N={n}: {out.status}: {out.message}")
                    continue
                cycles[name, n] = out.cycles
        print(f"{'N':>3} {'engine':>7} {'cycles':>9} {'ops':>8} {'ops/cycle':>9} {'x N=1':>6} "
              f"{'AXI beats':>9}")
        for n in ns:
            ops = per_cube * n
            beats = -(-wbytes // beat) + 2 * n * -(-w * h * -(-c * eb // cfg.atom_bytes)
                                                   * cfg.atom_bytes // beat)
            for name, _ in engines:
                cyc = cycles.get((name, n))
                if cyc is None:
                    continue
                util = ops / cyc
                base = cycles.get((name, 1))
                ratio = f"{util / (per_cube / base):6.2f}" if base else "     -"
                print(f"{n:>3} {name:>7} {cyc:>9} {ops:>8} {util:>9.4f} {ratio} {beats:>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
