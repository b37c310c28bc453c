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

from fc_bench import add_fc_arguments, engines, fc_config, fc_layer, run_fc  # noqa: E402
from verif.gen.dc import fc_program  # noqa: E402
from verif.gen.run import prepare  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_fc_arguments(ap)
    ap.add_argument("--batches", default=None,
                    help="comma-separated N (default: 1, 8 and the configuration's max_batch)")
    args = ap.parse_args()
    cfg = fc_config(args, ap, ["winograd=False", "weight_compression=False"])
    if not cfg.batch:
        ap.error(f"{cfg.name} has no multi-batch mode (batch=False)")
    w, h, c, k, prec, eb, per_cube = fc_layer(args, cfg)
    ns = ([int(x) for x in args.batches.split(",")] if args.batches
          else sorted({1, 8, cfg.max_batch}))
    wbytes = w * h * c * k * eb
    beat = cfg.axi_data_bytes
    print(f"{cfg.name}: inner-product layer {w}x{h}x{c} -> 1x1x{k}, {args.precision}, "
          f"{wbytes} weight bytes, {per_cube} atomic operations per cube")
    engs = engines(args)
    with tempfile.TemporaryDirectory() as tmp:
        preps = {n: prepare(fc_program(cfg, w, h, c, k, n, prec), Path(tmp), cfg) for n in ns}
        cycles = run_fc(preps, cfg, args)
        print(f"{'N':>3} {'engine':>7} {'cycles':>9} {'ops':>8} {'ops/cycle':>9} {'x N=1':>6} "
              f"{'AXI beats':>9}")
        for n in ns:
            ops = per_cube * n
            beats = -(-wbytes // beat) + 2 * n * -(-w * h * -(-c * eb // cfg.atom_bytes)
                                                   * cfg.atom_bytes // beat)
            for name, _ in engs:
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
