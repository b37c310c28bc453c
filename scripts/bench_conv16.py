"""Benchmark of direct convolution per precision (issue 33): cycles against the MAC limit in INT8,
INT16 and FP16 on a configuration computing all three (prints figures, asserts nothing).

Layers: single-layer random DC programs of ``verif.gen.dc`` drawn large (``big_rate`` 1, SDP
operands from registers), kept when *compute-bound*: their atomic operations (one per cycle is
the MAC limit) are at least twice the bus cycles of everything they read and write (one cycle
per AXI beat with the ``fast`` memory profile) and twice SDP's cycles for the output cube (a
layer near the balance of two limits overlaps them imperfectly: it measures the overlap, not
the MACs). An atomic operation is
atomic_c channels x atomic_k kernels in INT8 and atomic_c channels x atomic_k/2 kernels in
INT16/FP16 (v1_ias_unit_description.rst "Convolution MAC": 1024 16-bit MACs, 2048 8-bit, on
nv_full), so a layer's operations are out W x H x ceil(K / group) x R x S x ceil(C / atomic_c).

Per layer: cycles from kick-off to interrupt on our RTL (``fast`` profile), the atomic
operations, cycles per operation; per precision the sum of cycles over the sum of operations
and the worst layer (the issue's goal: compute-bound layers at most 1.03 x the MAC limit).

Usage: ``python scripts/bench_conv16.py [--config SPEC] [--set NAME=VALUE] [-n N] [--seed S]``
(default geometry B, ``nv_small+feature_data_type=int8_int16_fp16``: N layers per precision,
the first compute-bound ones from seed S on). ``--rtl-filelist F`` plays them on another
NV_nvdla instead (e.g. NVIDIA's nv_full RTL: its cycles on the same programs).
"""
from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hdl.config import add_config_arguments, config_from_args  # noqa: E402
from scripts.bench_conv import dc_dims  # noqa: E402
from verif.axi_slave import MemTiming  # noqa: E402
from verif.gen.dc import generate  # noqa: E402
from verif.gen.run import prepare  # noqa: E402
from verif.trace.parser import last_writes as _regs  # noqa: E402
from verif.trace.parser import load_trace  # noqa: E402
from verif.trace.parser import reg_field as _field  # noqa: E402
from verif.trace.runner import run  # noqa: E402

PREC_NAMES = ("int8", "int16", "fp16")


def layer_work(trace, cfg) -> dict:
    """Precision, atomic operations, bus beats and SDP cycles of a trace's single DC layer from
    its CSC / CDMA registers (field positions: hdl/regmap)."""
    r = _regs(trace)
    prec = _field(r, "CSC", "D_MISC_CFG", 12, 2)      # PROC_PRECISION
    eb = 2 if prec else 1
    wo, ho, k, c, s, rr = dc_dims(r)
    group = cfg.mac_atomic_k // eb
    ops = wo * ho * math.ceil(k / group) * rr * s * math.ceil(c / cfg.mac_atomic_c)
    wi = _field(r, "CDMA", "D_DATAIN_SIZE_0", 0, 13) + 1
    hi = _field(r, "CDMA", "D_DATAIN_SIZE_0", 16, 13) + 1
    ci = _field(r, "CDMA", "D_DATAIN_SIZE_1", 0, 13) + 1
    per_atom = cfg.memory_atomic // eb                       # channels per memory atom
    a = cfg.atom_bytes
    data = wi * hi * math.ceil(ci / per_atom) * a
    out = wo * ho * math.ceil(k / per_atom) * a
    wts = r.get("CDMA.D_WEIGHT_BYTES", 0)
    return {"prec": prec, "ops": ops, "beats": math.ceil((data + wts + out) / cfg.axi_data_bytes),
            "sdp": wo * ho * math.ceil(k / per_atom) * per_atom // cfg.sdp_bs_throughput,
            "desc": f"out {wo}x{ho}x{k} kernel {s}x{rr}x{c}"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=4, help="compute-bound layers per precision (default 4)")
    ap.add_argument("--seed", type=int, default=0, help="first seed tried (default 0)")
    ap.add_argument("--tries", type=int, default=400, help="seeds tried at most (default 400)")
    ap.add_argument("--rtl-filelist", metavar="F", help="play on this NV_nvdla file list instead")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="simulator processes (default 1)")
    add_config_arguments(ap)
    ap.set_defaults(config="nv_small+feature_data_type=int8_int16_fp16")
    args = ap.parse_args()
    cfg = config_from_args(args, ap)
    if not cfg.conv16:
        ap.error(f"{cfg.name} computes INT8 only (a 16-bit configuration: feature_data_type="
                 "int8_int16_fp16 on one-byte sizes)")
    root = Path(tempfile.mkdtemp(prefix="bench_conv16_"))
    picked, work = {p: [] for p in range(3)}, {}
    for seed in range(args.seed, args.seed + args.tries):
        if all(len(v) >= args.n for v in picked.values()):
            break
        prog = generate(seed, cfg, layers=1, big_rate=1.0, sdp_mem_rate=0.0)
        p = prepare(prog, root, cfg)
        w = layer_work(load_trace(p.dir), cfg)
        if w["ops"] >= 2 * max(w["beats"], w["sdp"]) and len(picked[w["prec"]]) < args.n:
            picked[w["prec"]].append(p.dir)
            work[p.dir.name] = w
    timing = MemTiming.named("fast")
    print(f"config {cfg.name}; memory profile fast ({timing}); atomic op = {cfg.mac_atomic_c} "
          f"channels x {cfg.mac_atomic_k} (INT8) or {cfg.mac_atomic_k // 2} (16-bit) kernels")
    print(f"{'layer':10s} {'prec':5s} {'status':6s} {'cycles':>9s} {'atomic ops':>10s} "
          f"{'cyc/op':>7s} {'bus':>8s} {'SDP':>8s}  layer")
    t0 = time.monotonic()
    sums = {p: [0, 0, 0.0] for p in range(3)}
    dirs = [d for v in picked.values() for d in v]
    for res in run(dirs, "rtl", cfg, jobs=args.jobs, timing=timing,
                   rtl_filelist=Path(args.rtl_filelist) if args.rtl_filelist else None,
                   axi_ids=None if args.rtl_filelist else "auto"):
        w = work[res.name]
        cyc = res.cycles
        per = f"{cyc / w['ops']:.3f}" if cyc else "-"
        print(f"{res.name:10s} {PREC_NAMES[w['prec']]:5s} {res.status:6s} "
              f"{cyc if cyc else '-':>9} {w['ops']:>10,} {per:>7s} {w['beats']:>8,} "
              f"{w['sdp']:>8,}  {w['desc']}", flush=True)
        if cyc and res.status == "PASS":
            s = sums[w["prec"]]
            s[0] += cyc
            s[1] += w["ops"]
            s[2] = max(s[2], cyc / w["ops"])
    for p, (cyc, ops, worst) in sums.items():
        if ops:
            print(f"{PREC_NAMES[p]:5s}: {len(picked[p])} compute-bound layers, {cyc:,} cycles for "
                  f"{ops:,} atomic operations = {cyc / ops:.3f} x the MAC limit, worst layer "
                  f"{worst:.3f} x (goal <= 1.03)")
        else:
            print(f"{PREC_NAMES[p]:5s}: no compute-bound layer passed among the seeds tried")
    print(f"wall time {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
