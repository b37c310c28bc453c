"""Benchmark of the convolution pipeline on NVIDIA's dc_* traces (prints figures, asserts nothing).

Per trace, from kick-off to interrupt on the rtl engine under the ``nvidia`` memory profile:
our cycles, NVIDIA's RTL cycles of the same configuration (../shared/nvdla/reference/
<preset>_nvidia_rtl_cycles.tsv: nv_small's and nv_small_256's; or measured on NVIDIA's RTL of
the configuration with ``--nvidia-filelist F``, e.g. nv_large's),
the MAC limit (the layer's atomic operations: output width x height x ceil(K / atomic_k) x
R x S x ceil(C / atomic_c), one per cycle) and the bus limit (AXI beats of feature data,
weights and output: 2 cycles per beat with NVIDIA's memory, 1 per beat with bursts), then the
ratios the issue sets goals on (cycles / atomic operations; the sum over the dc_* traces but the
x270 one against NVIDIA's sum). ``stripes``: the floor of a design whose CACC
holds one stripe of STRIPE_MAX pixels (docs/conv.md "How fast a layer can be"): a kernel group's
first stripe runs every weight set of the group, so it ends no earlier than the bus has carried
what it reads (group 0: its weights and the input lines the stripe reads; group g >= 1: the
whole input, which group 0 has read, and the weights of groups 0..g), plus one read latency; the
other atomic operations follow at one per cycle; then the epilogue (the last stripe's output
atoms through SDP at its BS throughput, less the last weight set's cycles in which its pixels
complete). ``SDP limit``: the output cube's elements (whole memory atoms) at SDP's BS
throughput per cycle. ``/floor``: cycles over the largest of the stripes', bus and SDP floors,
the row named (compute, bus or SDP) by the largest of the atomic operations, the bus and SDP;
compute-bound layers are judged against the stripes' floor.

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
from verif.trace.parser import last_writes as _regs  # noqa: E402
from verif.trace.parser import load_trace  # noqa: E402
from verif.trace.parser import reg_field as _field  # noqa: E402
from verif.trace.reference import measured_cycles, nvidia_cycles, suite_dir  # noqa: E402
from verif.trace.rtl_runner import run_rtl  # noqa: E402

BIG = "dc_32x26x76_6x3x76x270_int8_0"


def dc_dims(r: dict) -> tuple[int, int, int, int, int, int]:
    """A DC layer's output width, height, kernels K, channels C, kernel width S and height R
    from CSC's registers (``verif.trace.parser.last_writes``)."""
    return (_field(r, "CSC", "D_DATAOUT_SIZE_0", 0, 13) + 1,
            _field(r, "CSC", "D_DATAOUT_SIZE_0", 16, 13) + 1,
            _field(r, "CSC", "D_WEIGHT_SIZE_EXT_1", 16, 13) + 1,
            _field(r, "CSC", "D_WEIGHT_SIZE_EXT_1", 0, 13) + 1,
            _field(r, "CSC", "D_WEIGHT_SIZE_EXT_0", 0, 5) + 1,
            _field(r, "CSC", "D_WEIGHT_SIZE_EXT_0", 16, 5) + 1)


def layer_work(trace, cfg, per_beat: int, latency: int) -> dict:
    """Atomic operations, memory beats and floors (cycles) of a trace's (single) convolution
    layer, from its CSC / CDMA / SDP registers (field positions: hdl/regmap, NVIDIA's RDL);
    ``per_beat``: bus cycles per AXI beat, ``latency``: memory read latency in cycles. A
    16-bit layer (CSC PROC_PRECISION INT16/FP16 on a ``cfg.conv16`` configuration) has
    two-byte elements, kernel groups of atomic_k / 2 and memory atoms of memory_atomic / 2
    channels (docs/conv16.md); ``prec`` in the result is PROC_PRECISION (0 INT8)."""
    r = _regs(trace)
    wo, ho, k, c, s, rr = dc_dims(r)
    prec = _field(r, "CSC", "D_MISC_CFG", 12, 2)
    eb = 2 if prec else 1                      # bytes per element
    kgrp = cfg.mac_atomic_k // eb              # kernels per kernel group
    per_atom = cfg.memory_atomic // eb         # channels per memory atom
    atoms = wo * ho * math.ceil(k / kgrp) * rr * s * math.ceil(c / cfg.mac_atomic_c)
    wi = _field(r, "CDMA", "D_DATAIN_SIZE_0", 0, 13) + 1
    hi = _field(r, "CDMA", "D_DATAIN_SIZE_0", 16, 13) + 1
    ci = _field(r, "CDMA", "D_DATAIN_SIZE_1", 0, 13) + 1
    a = cfg.atom_bytes
    feat = wi * hi * math.ceil(ci / per_atom)
    wts = math.ceil(r.get("CDMA.D_WEIGHT_BYTES", 0) / a)
    out = wo * ho * math.ceil(k / per_atom)
    beats_per_atom = a / cfg.axi_data_bytes
    # the stripes' floor of a design with NVIDIA's operation order (kernel group, stripe of
    # STRIPE_MAX output pixels as hdl.csc.seq.stripe_len chooses them, channel block, kernel row,
    # kernel column, pixel) at one atomic operation per cycle, and one bus: an operation cannot
    # run before the bus has carried, one read latency earlier, every byte it and the operations
    # before it read (weight sets, and input atoms by line and channel block) - whatever order
    # the fetch takes, that much must have crossed - nor before its weights have a ring slot.
    # The lines of a surface cross in memory order (NVIDIA's CDMA and ours fetch the whole cube,
    # each surface's lines in order; CBUF's slices fill in line order): line y of channel block
    # cb brings every line of cb above it, read or not (strides and dilations skip lines: a
    # layer with vertical stride 2 and dilation 2 reads 3 of its first 6 lines).
    # Walked per run of pixels on one output row.
    sy = _field(r, "CSC", "D_CONV_STRIDE_EXT", 16, 3) + 1
    dy = _field(r, "CSC", "D_DILATION_EXT", 16, 5) + 1
    pt = _field(r, "CSC", "D_ZERO_PADDING", 16, 5)
    ncb = math.ceil(c / cfg.mac_atomic_c)
    groups = math.ceil(k / kgrp)
    block_atoms = cfg.mac_atomic_c // per_atom                  # memory atoms per channel block
    ci_atoms = math.ceil(ci / per_atom)
    stripes, rem, p0 = [], wo * ho, 0
    while rem > 0:
        n = rem if rem <= STRIPE_MAX else (rem + 1) // 2 if rem < 2 * STRIPE_MAX else STRIPE_MAX
        rows, p = [], p0                 # (output row, pixels of the stripe on it)
        while p < p0 + n:
            q = min(p0 + n, (p // wo + 1) * wo)
            rows.append((p // wo, q - p))
            p = q
        stripes.append((n, rows))
        rem, p0 = rem - n, p0 + n
    top = [-1] * ncb                     # per channel block: the last line counted
    need = 0                             # bytes read so far
    end = 0                              # cycle the previous operation ran
    per_byte = per_beat / cfg.axi_data_bytes
    # the weight banks as programmed (CSC D_BANK): weight entry n (bank-width bytes) takes
    # the ring slot of entry n - WCAP, so it cannot arrive before that entry's last use (a
    # set's entries are used up with the set in its kernel group's last stripe) plus a latency
    ew = cfg.cbuf_bank_width                 # bytes of a weight entry (ring slot)
    wcap = (_field(r, "CSC", "D_BANK", 16, 5) + 1) * cfg.cbuf_bank_depth
    released = {}                        # weight entry -> cycle of its last use
    group_bytes = kgrp * rr * s * c * eb
    for g in range(groups):
        kg = min(kgrp, k - g * kgrp)
        for j, (n, rows) in enumerate(stripes):
            off = g * group_bytes        # the set's first byte in the weight stream
            for cb in range(ncb):
                cw = min(cfg.mac_atomic_c, c - cb * cfg.mac_atomic_c)
                for ky in range(rr):
                    for kx in range(s):
                        ring = 0
                        if j == 0:
                            need += kg * cw * eb     # the set's weights, first used here
                            e_hi = -(-(off + kg * cw * eb) // ew) - 1
                            if e_hi >= wcap:
                                ring = released.get(e_hi - wcap, 0) + latency
                        for yo, px in rows:
                            y = yo * sy - pt + ky * dy
                            if 0 <= y < hi and y > top[cb]:
                                need += ((y - top[cb]) * wi
                                         * min(block_atoms, ci_atoms - cb * block_atoms) * a)
                                top[cb] = y
                            end = max(end + 1, math.ceil(need * per_byte) + latency, ring) + px - 1
                            ring = 0
                        if j == len(stripes) - 1:
                            for e in range(off // ew, (off + kg * cw * eb) // ew):
                                released.setdefault(e, end)
                        off += kg * cw * eb
    # the epilogue: after the last operation, the last stripe's output atoms still pass SDP at
    # its BS throughput (its pixels complete one per cycle, over the last weight set)
    last_px = stripes[-1][0]
    k_last = k - (groups - 1) * kgrp
    epilogue = max(0, last_px * math.ceil(k_last / per_atom) * per_atom
                   // cfg.sdp_bs_throughput - last_px)
    return {"atomic_ops": atoms, "beats": int((feat + wts + out) * beats_per_atom),
            "stripes": end + epilogue, "prec": prec,
            # SDP takes the output cube's elements (whole memory atoms) at its BS throughput
            "sdp_cycles": wo * ho * math.ceil(k / per_atom) * per_atom
                          // cfg.sdp_bs_throughput,
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
    if args.nvidia_filelist:
        print(f"measuring NVIDIA's cycles on {args.nvidia_filelist} ...", flush=True)
        ref = measured_cycles([root / n for n in names], args.nvidia_filelist, cfg.name, args.jobs)
    else:
        ref = nvidia_cycles(cfg.name)
    per_beat = 1 if cfg.primary_memif_max_burst > 1 else 2
    timing = MemTiming.named("nvidia")
    work = {n: layer_work(t, cfg, per_beat, timing.read_latency) for n, t in traces.items()}
    print(f"config {cfg.name}; traces {root}; memory profile nvidia ({timing}); "
          f"bus limit {per_beat} cycle(s) per {cfg.axi_data_bytes}-byte beat")
    print(f"{'trace':42s} {'status':6s} {'cycles':>10s} {'NVIDIA':>10s} {'ours/NV':>8s} "
          f"{'atomic ops':>10s} {'cyc/op':>7s} {'stripes':>10s} {'bus limit':>10s} {'SDP limit':>10s} "
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
        bound = w["stripes"]
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
        print(f"compute-bound layers (floor = the stripes' floor): {len(compute)}, "
              f"{sum(r <= 1.03 for r in compute)} within 1.03 x, worst {max(compute):.3f} x")
    print(f"wall time {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
