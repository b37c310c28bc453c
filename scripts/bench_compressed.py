"""Benchmark of compressed weights (issue 34: "compressed weights at 50 % sparsity cut weight
bytes read by at least 40 % and a weight-bound layer's cycles by at least 30 %"); prints
figures, asserts nothing.

One weight-bound inner-product layer (the kernel covers the W x H x C input, output 1 x 1 x
K; ``verif.gen.dc.fc_program``) run with uncompressed weights and with compressed weights of
the given sparsity, each checked against the model (bytes) and timed from kick-off to
interrupt on the rtl engine under the ``nvidia`` memory profile. Per run: cycles, the weight
bytes read (D_WEIGHT_BYTES; compressed: + D_WMB_BYTES, and the WGS words NVIDIA's CDMA reads
(4 per kernel group; ours does not read them)), their AXI beats (a beat per cycle is the
bus's limit), atomic operations (one per cycle is CMAC's limit) and the cut against the
uncompressed run. The WMB is a bit per element: at 50 % zeros INT8 weights read 1/2 + 1/8 of
their bytes (a 37.5 % cut at most, whatever the design), INT16/FP16 1/2 + 1/16 (43.75 %).
``--nvidia-filelist F``: the same programs on NVIDIA's RTL beside ours.

Usage: ``python scripts/bench_compressed.py [--config SPEC] [--set NAME=VALUE] [--shape
W,H,C,K] [--precision int8|int16|fp16] [--sparsity S] [--nvidia-filelist F [--warmup DIR]
[--skip-ours]]`` (default: nv_full with winograd and multi-batch off, int8, 2 x 2 x 512 input,
64 kernels, sparsity 0.5).
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


def _reg(prog, unit: str, reg: str) -> int:
    """The value the program's (only) layer writes to ``unit``.``reg``."""
    vals = [v for u, r, v in prog.layers[0].writes if u == unit and r == reg]
    if not vals:
        raise KeyError(f"{unit}.{reg} not written")
    return vals[-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_fc_arguments(ap)
    ap.add_argument("--sparsity", type=float, default=0.5,
                    help="share of zero weight elements, 0..1 (default 0.5)")
    args = ap.parse_args()
    if not 0 <= args.sparsity < 1:
        ap.error(f"--sparsity {args.sparsity}: 0 <= S < 1")
    cfg = fc_config(args, ap, ["winograd=False", "batch=False"])
    if not cfg.weight_compression:
        ap.error(f"{cfg.name} has no weight compression (weight_compression=False)")
    w, h, c, k, prec, eb, ops = fc_layer(args, cfg)
    kg = cfg.mac_atomic_k // eb
    dense = w * h * c * k * eb
    beat = cfg.axi_data_bytes
    print(f"{cfg.name}: inner-product layer {w}x{h}x{c} -> 1x1x{k}, {args.precision}, "
          f"{dense} uncompressed weight bytes, {ops} atomic operations")
    engs = engines(args)
    runs = {"uncompressed": None, f"{args.sparsity:.0%} zeros": args.sparsity}
    with tempfile.TemporaryDirectory() as tmp:
        progs = {name: fc_program(cfg, w, h, c, k, 1, prec, sparsity=sp)
                 for name, sp in runs.items()}
        read = {}
        for name, prog in progs.items():
            wb = _reg(prog, "CDMA", "D_WEIGHT_BYTES")
            if runs[name] is None:
                read[name] = (wb, wb)
            else:
                extra = _reg(prog, "CDMA", "D_WMB_BYTES")
                read[name] = (wb + extra, wb + extra + 4 * -(-k // kg))
        preps = {name: prepare(prog, Path(tmp), cfg) for name, prog in progs.items()}
        cycles = run_fc(preps, cfg, args)
        base = "uncompressed"
        print(f"{'weights':>14} {'engine':>7} {'cycles':>8} {'cut':>6} {'bytes read':>10} "
              f"{'cut':>6} {'AXI beats':>9} {'ops':>6}")
        for name in runs:
            for eng, _ in engs:
                cyc = cycles.get((eng, name))
                if cyc is None:
                    continue
                nb = read[name][1 if eng == "NVIDIA" else 0]
                b0 = read[base][0]
                c0 = cycles.get((eng, base))
                ccut = f"{1 - cyc / c0:6.1%}" if c0 else "     -"
                print(f"{name:>14} {eng:>7} {cyc:>8} {ccut} {nb:>10} {1 - nb / b0:6.1%} "
                      f"{-(-nb // beat):>9} {ops:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
