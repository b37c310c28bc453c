"""NVIDIA's software on the project's engines: ``python -m verif.sw run LOADABLE... [--engine
model|rtl|amaranth] [--config PRESET] [--set NAME=VALUE] [--mem-profile nvidia|fast|random]
[--golden DIR]``, ``python -m verif.sw build`` (compile NVIDIA's runtime and firmware only) and
``python -m verif.sw compiler`` (build NVIDIA's network compiler, ``verif.sw.compiler``).

``run`` prints one line per loadable (PASS/FAIL, name, engine, the output image's md5 and the
golden's, cycles from the first kick-off to the last interrupt on the simulated engines, wall
seconds), the reason under a failure (the task and what the firmware was doing, units still
busy, the first wrong element against NVIDIA's golden image, the waveform with ``--waves``),
and last ``N passed, M failed``. Exit status: 0 when every loadable passed, 1 when one failed,
2 for an invalid option (before anything runs).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hdl.config import ConfigError, add_config_arguments, config_from_args
from hdl.support import UnbuiltConfig, check_buildable
from verif.axi_slave import (PROFILES, MemTiming, MemTimingError, add_timing_arguments,
                              timing_from_args)
from verif.sw.build import SwBuildError, build_sw, firmware_variant
from verif.sw.runner import DEFAULT_INTR_BUDGET, ENGINES, SwResult, run_loadable
from verif.trace.player import PASS


def format_result(r: SwResult) -> str:
    """One result line (and the reason under a failure)."""
    cyc = f"{r.cycles:>8} cycles" if r.cycles is not None else f"{'-':>8}       "
    line = (f"{r.status:<5} {r.name:<20} {r.engine:<8} md5 {r.md5 or '-':<32} "
            f"golden {r.golden or '-':<32} {cyc} {r.wall:7.2f} s")
    if r.status != PASS and r.message:
        line += "\n    " + r.message.replace("; ", "\n    ")
    return line


def main(argv=None) -> int:
    """The CLI (module docstring); returns the exit status."""
    ap = argparse.ArgumentParser(prog="python -m verif.sw",
                                 description="Run NVIDIA's runtime and kernel-mode firmware "
                                             "(../shared/nvdla/sw) on the project's engines.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    rp = sub.add_parser("run", help="run loadables and compare their output with NVIDIA's goldens",
                        description="Run NVIDIA loadables through NVIDIA's runtime application and "
                                    "firmware on the numpy model, the RTL (Verilator + cocotb) or "
                                    "the RTL in Amaranth's simulator; print the output image's md5 "
                                    "and PASS/FAIL against NVIDIA's golden lead.md5.")
    rp.add_argument("loadables", nargs="+", type=Path, metavar="LOADABLE",
                    help="a loadable (e.g. ../shared/nvdla/sw/regression/flatbufs/kmd/PDP/"
                         "PDP_L0_0_small_fbuf)")
    rp.add_argument("--engine", choices=ENGINES, default="model",
                    help="model (numpy), rtl (Verilator) or amaranth (slow); default: model")
    add_config_arguments(rp)
    add_timing_arguments(rp)
    rp.add_argument("--golden", type=Path, default=None, metavar="DIR",
                    help="directory holding the golden lead.md5 (default: NVIDIA's regression "
                         "golden of the loadable's test, ../shared/nvdla/sw/regression/golden/"
                         "<test>_<hash>/dla)")
    rp.add_argument("--no-golden", action="store_true",
                    help="only run and print the md5 (a loadable without a golden)")
    rp.add_argument("-o", "--output", type=Path, default=None, metavar="FILE",
                    help="where to write the output image (one loadable only; default "
                         "build/sw/runs/<test>/<engine>-<time>-<pid>-<n>/o_000000.dimg)")
    rp.add_argument("--image", type=Path, default=None,
                    help="input image for the runtime (--image of NVIDIA's nvdla_runtime: .pgm "
                         "or .jpg)")
    rp.add_argument("--max-cycles", type=int, default=None, metavar="N",
                    help=f"rtl/amaranth: cycles one interrupt wait may take before the run fails "
                         f"naming the busy units (default {DEFAULT_INTR_BUDGET})")
    rp.add_argument("--waves", action="store_true",
                    help="rtl: dump FST waves to build/waves/sw_<test>.fst")
    rp.add_argument("--memory", choices=("sim", "python"), default=None,
                    help="rtl: the AXI memory model (default sim)")
    rp.add_argument("--kmd", type=Path, default=None, metavar="DIR",
                    help="NVIDIA's kmd directory to build the firmware from (default "
                         "../shared/nvdla/sw/kmd, the firmware of the regression loadables; "
                         "loadables of NVIDIA's current compiler need its later firmware)")
    rp.add_argument("--debug", action="store_true",
                    help="write the firmware's debug messages to the runtime log")
    bp = sub.add_parser("build", help="compile NVIDIA's runtime and firmware into build/sw")
    add_config_arguments(bp)
    bp.add_argument("--kmd", type=Path, default=None, metavar="DIR",
                    help="NVIDIA's kmd directory (default ../shared/nvdla/sw/kmd)")
    sub.add_parser("compiler", help="build NVIDIA's network compiler (and its protobuf 2.6.1) "
                                    "into build/sw (about 10 minutes)")
    lp = sub.add_parser("lenet", help="LeNet-5 through NVIDIA's compiler, runtime and firmware",
                        description="Train the project's LeNet-5 (verif/sw/lenet.py), compile it "
                                    "with NVIDIA's compiler for nv_small in int8, run the test "
                                    "digits through NVIDIA's runtime and firmware on each engine, "
                                    "compare the classes with the float network.")
    lp.add_argument("--engines", default="model,rtl",
                    help="comma-separated engines (default model,rtl)")
    lp.add_argument("-n", type=int, default=100, help="test digits (default 100)")
    lp.add_argument("--kmd", type=Path, required=True, metavar="DIR",
                    help="NVIDIA's later kmd directory (nvdla/sw at 79538ba): the current "
                         "compiler writes the struct dla_data_cube with its offset field")
    lp.add_argument("--mem-profile", choices=PROFILES, default="nvidia")
    lp.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.cmd == "lenet":
        return _lenet(args)
    if args.cmd == "compiler":
        from verif.sw.compiler import build_compiler
        try:
            print(build_compiler(log=lambda m: print(m, flush=True)))
        except SwBuildError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        return 0
    try:
        cfg = config_from_args(args)
        firmware_variant(cfg.name)
        if args.cmd == "build":
            b = build_sw(cfg.name, log=print, kmd=args.kmd)
            print(f"{b.program} (firmware {b.variant}, libjpeg {b.libjpeg})")
            return 0
        timing = timing_from_args(args)
        if args.max_cycles is not None and args.max_cycles < 1:
            raise MemTimingError(f"--max-cycles {args.max_cycles}: must be >= 1")
        if args.output is not None and len(args.loadables) > 1:
            raise MemTimingError("--output takes one loadable")
        if args.golden is not None and args.no_golden:
            raise MemTimingError("--golden and --no-golden exclude each other")
        if args.engine != "model":
            check_buildable(cfg)
    except (ConfigError, MemTimingError, UnbuiltConfig, SwBuildError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    counts = {"PASS": 0, "FAIL": 0}
    for ld in args.loadables:
        r = run_loadable(ld, args.engine, cfg, timing=timing, golden=args.golden,
                         check_golden=not args.no_golden, output=args.output, image=args.image,
                         max_cycles=args.max_cycles, waves=args.waves, debug=args.debug,
                         memory=args.memory, kmd=args.kmd)
        counts[r.status] += 1
        print(format_result(r), flush=True)
    mem = f", memory {timing}" if args.engine != "model" else ""
    print(f"# {len(args.loadables)} loadable(s) on {args.engine} ({cfg.name}{mem})")
    print(f"{counts['PASS']} passed, {counts['FAIL']} failed")
    return 1 if counts["FAIL"] else 0


def cfg_macs() -> int:
    """int8 MACs per cycle of nv_small (atomic C x atomic K)."""
    from hdl.config import NV_SMALL
    return NV_SMALL.mac_atomic_c * NV_SMALL.mac_atomic_k


def _lenet(args) -> int:
    """``python -m verif.sw lenet``: every step's result printed; the report as JSON in
    ``build/sw/lenet/report.json``."""
    import json

    from sim.build import BUILD_ROOT
    from verif.sw import lenet
    from verif.sw.compiler import build_compiler
    engines = [e for e in args.engines.split(",") if e]
    bad = [e for e in engines if e not in ENGINES]
    if bad:
        print(f"error: --engines: unknown {', '.join(bad)} (one of {', '.join(ENGINES)})",
              file=sys.stderr)
        return 2
    net = BUILD_ROOT / "sw" / "lenet"
    if not (net / "summary.json").is_file():
        print(lenet.make_network(net, log=print))
    summary = json.loads((net / "summary.json").read_text())
    print(f"LeNet-5 float accuracy on the {lenet.N_TEST} test digits: "
          f"{summary['float_test_accuracy']:.2%}")
    try:
        compiler = build_compiler(log=print)
        loadable = lenet.compile_network(net, compiler, net / "compiled")
    except (SwBuildError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"loadable: {loadable} ({loadable.stat().st_size} bytes)")
    timing = MemTiming.named(args.mem_profile, seed=args.seed)
    report = {"float_test_accuracy": summary["float_test_accuracy"], "engines": {}}
    for eng in engines:
        try:
            rep = lenet.run_digits(loadable, net, eng, args.n, kmd=args.kmd, timing=timing,
                                   log=print)
        except RuntimeError as e:
            print(f"FAIL {eng}: {e}")
            return 1
        report["engines"][eng] = rep
        cyc = [d["cycles"] for d in rep["digits"] if d["cycles"]]
        print(f"{eng}: {rep['n']} digits, classes agree with the float network on "
              f"{rep['agree_float']:.0%}, accuracy {rep['accuracy']:.0%}"
              + (f", {sum(cyc) / len(cyc):.0f} cycles per inference" if cyc else ""))
    for eng, rep in report["engines"].items():
        first = next((d for d in rep["digits"] if d.get("layers")), None)
        if first is None:
            continue
        macs_per_cycle = cfg_macs()
        print(f"{eng}: cycles per hardware layer ({first['digit']}; MAC limit at "
              f"{macs_per_cycle} MACs per cycle):")
        for (name, macs), (_, start, end) in zip(lenet.HW_LAYERS, first["layers"]):
            limit = f", MAC limit {macs / macs_per_cycle:.0f}" if macs else ""
            print(f"    {name:6s} {end - start:7d} cycles ({start}..{end}){limit}")
    if "model" in report["engines"] and "rtl" in report["engines"]:
        m, r = report["engines"]["model"]["digits"], report["engines"]["rtl"]["digits"]
        same = sum(a["md5"] == b["md5"] for a, b in zip(m, r))
        print(f"rtl vs model: {same} of {len(m)} output images bit-identical")
    (net / "report.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
