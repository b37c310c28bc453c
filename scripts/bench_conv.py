"""Benchmark of the convolution pipeline on NVIDIA's dc_* traces (prints figures, asserts nothing).

Per trace, from kick-off to interrupt on the rtl engine under the ``nvidia`` memory profile:
our cycles, NVIDIA's RTL cycles of the same configuration (../shared/nvdla/reference/
<preset>_nvidia_rtl_cycles.tsv: nv_small's and nv_small_256's; or measured on NVIDIA's RTL of
the configuration with ``--nvidia-filelist F``, e.g. nv_large's),
the MAC limit (the layer's atomic operations: output width x height x ceil(K / atomic_k) x
R x S x ceil(C / atomic_c), one per cycle) and the bus limit (AXI beats of feature data,
weights and output: 2 cycles per beat with NVIDIA's memory, 1 per beat with bursts), then the
ratios the issue sets goals on (cycles / atomic operations; the sum over the dc_* traces but the
x270 one against NVIDIA's sum). ``prologue``: the MAC limit with the first stripe's fetch, the
floor of a design whose CACC holds one stripe of STRIPE_MAX pixels: the first stripe runs every
weight set of kernel group 0, so it ends no earlier than the bus has carried those weights and
the input lines the stripe reads (plus one read latency); the other atomic operations follow at
one per cycle. ``SDP limit``: the output cube's elements (whole memory atoms) at SDP's BS
throughput per cycle. ``/floor``: cycles over the largest of the three, named at the end of the
row (compute, bus or SDP); compute-bound layers are judged against the prologue bound.

Usage: ``python scripts/bench_conv.py [--config SPEC] [--set NAME=VALUE] [-j N]
[--nvidia-filelist F] [TRACE ...]``
(default: every dc_* trace of the configuration's suite, ../shared/nvdla/traces/<preset> (nv_small's
for nv_small variants), but the 5-million-cycle x270 one; ``--all`` adds it).
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hdl.config import add_config_arguments, config_from_args  # noqa: E402
from hdl.csc import STRIPE_MAX  # noqa: E402
from verif.axi_slave import MemTiming  # noqa: E402
from verif.trace.parser import load_trace  # noqa: E402
from verif.trace.reference import measured_cycles, nvidia_cycles, suite_dir  # noqa: E402
from verif.trace.rtl_runner import run_rtl  # noqa: E402

BIG = "dc_32x26x76_6x3x76x270_int8_0"


def _regs(trace) -> dict:
    """Last value written to each ``UNIT.REGISTER`` by the trace's program."""
    out = {}
    for c in trace.commands:
        if c.kind == "reg_write":
            ref = c.args["reg"]
            out[f"{ref.unit.name}.{ref.reg.name}"] = c.args["value"]
    return out


def _field(regs: dict, unit: str, reg: str, lsb: int, width: int) -> int:
    return (regs.get(f"{unit}.{reg}", 0) >> lsb) & ((1 << width) - 1)


def layer_work(trace, cfg) -> dict:
    """Atomic operations and 8-byte memory beats of a trace's (single) convolution layer, from
    its CSC / CDMA / SDP registers (field positions: hdl/regmap, NVIDIA's RDL)."""
    r = _regs(trace)
    wo = _field(r, "CSC", "D_DATAOUT_SIZE_0", 0, 13) + 1
    ho = _field(r, "CSC", "D_DATAOUT_SIZE_0", 16, 13) + 1
    k = _field(r, "CSC", "D_WEIGHT_SIZE_EXT_1", 16, 13) + 1
    c = _field(r, "CSC", "D_WEIGHT_SIZE_EXT_1", 0, 13) + 1
    s = _field(r, "CSC", "D_WEIGHT_SIZE_EXT_0", 0, 5) + 1
    rr = _field(r, "CSC", "D_WEIGHT_SIZE_EXT_0", 16, 5) + 1
    atoms = wo * ho * math.ceil(k / cfg.mac_atomic_k) * rr * s * math.ceil(c / cfg.mac_atomic_c)
    wi = _field(r, "CDMA", "D_DATAIN_SIZE_0", 0, 13) + 1
    hi = _field(r, "CDMA", "D_DATAIN_SIZE_0", 16, 13) + 1
    ci = _field(r, "CDMA", "D_DATAIN_SIZE_1", 0, 13) + 1
    a = cfg.atom_bytes
    feat = wi * hi * math.ceil(ci / cfg.memory_atomic)
    wts = math.ceil(r.get("CDMA.D_WEIGHT_BYTES", 0) / a)
    out = wo * ho * math.ceil(k / cfg.memory_atomic)
    beats_per_atom = a / cfg.axi_data_bytes
    # the first stripe (STRIPE_MAX output pixels, as hdl.conv.first_band_lines counts its
    # rows) runs every (channel block, r, s) of kernel group 0: it cannot finish before the
    # input lines it reads and the whole of group 0's weights have crossed the bus
    sy = _field(r, "CSC", "D_CONV_STRIDE_EXT", 16, 3) + 1
    dy = _field(r, "CSC", "D_DILATION_EXT", 16, 5) + 1
    first_px = min(STRIPE_MAX, wo * ho)
    rows = min(ho, math.ceil(first_px / wo))
    lines = min(hi, (rows - 1) * sy + (rr - 1) * dy + 1)
    first_ops = first_px * rr * s * math.ceil(c / cfg.mac_atomic_c)
    first_bytes = (lines * wi * math.ceil(ci / cfg.memory_atomic) * a
                   + min(k, cfg.mac_atomic_k) * rr * s * c)
    return {"atomic_ops": atoms, "beats": int((feat + wts + out) * beats_per_atom),
            # SDP takes the output cube's elements (whole memory atoms) at its BS throughput
            "sdp_cycles": wo * ho * math.ceil(k / cfg.memory_atomic) * cfg.memory_atomic
                          // cfg.sdp_bs_throughput,
            "first_ops": first_ops, "first_beats": math.ceil(first_bytes / cfg.axi_data_bytes),
            "out": f"{wo}x{ho}x{k}", "kernel": f"{s}x{rr}x{c}"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", help="trace names of the configuration's suite (default: its dc_* traces)")
    ap.add_argument("--all", action="store_true", help=f"include {BIG} (about 5 million cycles)")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="simulator processes (default 2)")
    ap.add_argument("--nvidia-filelist", metavar="F",
                    help="play the traces on this NV_nvdla file list too (NVIDIA's RTL of the "
                         "configuration) and compare with its cycles instead of the reference table")
    add_config_arguments(ap)
    args = ap.parse_args()
    cfg = config_from_args(args, ap)
    root = suite_dir(cfg.name)
    names = args.traces or sorted(p.name for p in root.glob("dc_*") if args.all or p.name != BIG)
    traces = {n: load_trace(root / n) for n in names}
    work = {n: layer_work(t, cfg) for n, t in traces.items()}
    if args.nvidia_filelist:
        print(f"measuring NVIDIA's cycles on {args.nvidia_filelist} ...", flush=True)
        ref = measured_cycles([root / n for n in names], args.nvidia_filelist, cfg.name, args.jobs)
    else:
        ref = nvidia_cycles(cfg.name)
    per_beat = 1 if cfg.primary_memif_max_burst > 1 else 2
    timing = MemTiming.named("nvidia")
    print(f"config {cfg.name}; traces {root}; memory profile nvidia ({timing}); "
          f"bus limit {per_beat} cycle(s) per {cfg.axi_data_bytes}-byte beat")
    print(f"{'trace':42s} {'status':6s} {'cycles':>10s} {'NVIDIA':>10s} {'ours/NV':>8s} "
          f"{'atomic ops':>10s} {'cyc/op':>7s} {'prologue':>10s} {'bus limit':>10s} {'SDP limit':>10s} "
          f"{'/floor':>7s}  output / kernel")
    t0 = time.monotonic()
    ours_sum = nv_sum = 0
    compute = []
    for res in run_rtl([root / n for n in names], config=cfg.name, jobs=args.jobs,
                       timing=timing):
        w = work[res.name]
        nv = ref.get(res.name)
        cyc = res.cycles
        bus = w["beats"] * per_beat
        # MAC limit with the first stripe's fetch: ops after the first stripe at one per cycle
        first = max(w["first_ops"], w["first_beats"] * per_beat + timing.read_latency)
        bound = w["atomic_ops"] - w["first_ops"] + first
        floor = max(bound, bus, w["sdp_cycles"])
        # compute-bound: the atomic operations alone exceed the bus and SDP limits (a layer of a
        # few operations is latency, not compute)
        kind = ("compute" if w["atomic_ops"] >= max(bus, w["sdp_cycles"]) else
                "bus" if bus >= w["sdp_cycles"] else "SDP")
        per_floor = f"{cyc / floor:.3f}" if cyc else "-"
        if cyc and kind == "compute":
            compute.append(cyc / floor)
        ratio = f"{cyc / nv:.2f}" if cyc and nv else "-"
        per_op = f"{cyc / w['atomic_ops']:.3f}" if cyc else "-"
        print(f"{res.name:42s} {res.status:6s} {cyc if cyc is not None else '-':>10} "
              f"{nv if nv is not None else '-':>10} {ratio:>8s} {w['atomic_ops']:>10,} {per_op:>7s} "
              f"{bound:>10,} {bus:>10,} {w['sdp_cycles']:>10,} {per_floor:>7s}  {w['out']} / "
              f"{w['kernel']} ({kind})", flush=True)
        if res.name != BIG and cyc and nv:
            ours_sum += cyc
            nv_sum += nv
    if nv_sum:
        print(f"sum over the traces above but {BIG}: ours {ours_sum:,} cycles, NVIDIA {nv_sum:,} "
              f"= {ours_sum / nv_sum:.3f} x NVIDIA's (goal <= 0.90)")
    if compute:
        print(f"compute-bound layers (floor = MAC limit with the prologue): {len(compute)}, "
              f"{sum(r <= 1.03 for r in compute)} within 1.03 x, worst {max(compute):.3f} x")
    print(f"wall time {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
