"""Per-unit FPGA resources and ECP5 timing, each unit synthesized alone (a benchmark, not a test).

``python scripts/bench_resources.py [--config nv_small] [--set NAME=VALUE] [--units sdp,pdp]
[--pnr | --pnr-only] [--freq 100] -o build/bench_resources``

Runs :func:`hdl.synth.synthesize` for every unit ``--unit`` accepts (``hdl.synth.unit_names``:
the datapath units of ``hdl.top.DATAPATH_UNITS``, the convolution pipeline's units one by one,
csb, glb, mcif; ``conv``, the whole pipeline, only when listed), or the ``--units`` listed,
each into ``<out>/<unit>/``, then writes ``<out>/units.md``: one row per unit with Xilinx xcup
LUT/FF/DSP48E2/RAMB36/RAMB18/LUTRAM, NVIDIA's figures and ratios when the reference is present,
the netlist checks, synthesis wall time, and with ``--pnr`` the ECP5-85F Fmax, critical path
start/end and place-and-route wall time. ``--pnr-only`` skips the Xilinx synthesis and writes
``<out>/fmax.md`` (:func:`timing_table`). Progress on stderr; takes minutes per unit.
Exit status 1 when a unit failed a check or a tool failed.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hdl import synth  # noqa: E402
from hdl.config import add_config_arguments, config_from_args  # noqa: E402


def timing_table(cfg, units: list, out: Path, freq: float, router: str) -> int:
    """``--pnr-only``: place and route each unit alone (:func:`hdl.synth.timing_only`) into
    ``<out>/<unit>/`` and write ``<out>/fmax.md``: Fmax (MHz), its ratio to ``freq``, the
    critical path's start and end cells, LUT4/FF/MULT18/EBR and wall seconds per unit.
    Returns the exit status: 1 when a tool failed for a unit."""
    rows, status = [], 0
    for u in units:
        print(f"== {u}", file=sys.stderr, flush=True)
        try:
            t = synth.timing_only(cfg, out / u, u, freq=freq, router=router)
        except (synth.SynthError, synth.UnitError) as e:
            print(f"error: {u}: {e}", file=sys.stderr)
            rows.append(f"| {u} | failed: {e} |")
            status = 1
            continue
        rows.append(f"| {u} | {t.fmax:.1f} | {t.fmax / freq:.2f} | `{t.start}` | `{t.end}` | "
                    f"{t.delay_ns:.2f} | {t.lut4:,} | {t.ff:,} | {t.mult18} | {t.dp16k} | "
                    f"{t.seconds:.0f} |")
    text = (f"# ECP5 Fmax of units placed and routed alone ({cfg.name})\n\n"
            f"LFE5U-85F-8 CABGA381, out of context, {freq:g} MHz target, nextpnr {router}; "
            "single runs (placement varies a few percent between runs).\n\n"
            "| unit | Fmax MHz | / target | critical path start | end | delay ns | LUT4 | FF | "
            "MULT18 | EBR | pnr s |\n|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|\n"
            + "\n".join(rows) + "\n")
    out.mkdir(parents=True, exist_ok=True)
    (out / "fmax.md").write_text(text)
    print(text)
    print(f"wrote {out / 'fmax.md'}")
    return status


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/bench_resources.py", description=__doc__.split("\n")[0])
    add_config_arguments(ap)
    ap.add_argument("--units", help="comma-separated units (default: every unit)")
    ap.add_argument("--pnr", action="store_true", help="also place and route each unit on ECP5-85F")
    ap.add_argument("--pnr-only", action="store_true",
                    help="only place and route each unit on ECP5-85F (Fmax table; no Xilinx "
                         "synthesis, no checks)")
    ap.add_argument("--freq", type=float, default=100.0, help="place-and-route target MHz")
    ap.add_argument("--router", choices=("router1", "router2"), default="router1",
                    help="nextpnr router (neither routed the convolution pipeline within an "
                         "hour on nv_small: congestion)")
    ap.add_argument("-o", "--out", default="build/bench_resources")
    args = ap.parse_args(argv)
    cfg = config_from_args(args, ap)
    # default: every unit, the convolution pipeline's one by one (``--units conv`` for the
    # whole pipeline: nextpnr did not route it within an hour on nv_small)
    units = args.units.split(",") if args.units else [u for u in synth.unit_names(cfg) if u != "conv"]
    out = Path(args.out)
    if args.pnr_only:
        return timing_table(cfg, units, out, args.freq, args.router)
    from verif.shared import nvdla_dir
    ref = synth.load_nvidia_reference(nvdla_dir() / synth.NVIDIA_REFERENCE)
    rows, status = [], 0
    for u in units:
        print(f"== {u}", file=sys.stderr, flush=True)
        try:
            res = synth.synthesize(cfg, out / u, u, pnr=args.pnr, freq=args.freq,
                                   router=args.router)
        except (synth.SynthError, synth.UnitError) as e:
            print(f"error: {u}: {e}", file=sys.stderr)
            rows.append(f"| {u} | failed: {e} |")
            status = 1
            continue
        r, t = res.total, res.timing
        nv = ref.get(synth.NVIDIA_NAMES.get(u, u))
        ratio = (f" {synth._ratio(r.lut, nv['lut'])} | {synth._ratio(r.ff, nv['ff'])} |" if nv
                 else " | |")
        checks = "pass" if not res.violations else f"{len(res.violations)} FAILED"
        status |= bool(res.violations)
        row = (f"| {u} | {r.lut:,} | {r.ff:,} | {r.dsp} | {r.ramb36} | {r.ramb18} | "
               f"{r.lutram:,} |{ratio} {checks} | {res.seconds:.0f} |")
        if t:
            row += (f" {t.fmax:.1f} | `{t.start}` | `{t.end}` | {t.lut4:,} | {t.mult18} | "
                    f"{t.dp16k} | {t.seconds:.0f} |")
        rows.append(row)
    head = ("| unit | LUT | FF | DSP48E2 | RAMB36 | RAMB18 | LUTRAM | LUT / NVIDIA | FF / NVIDIA "
            "| checks | synth s |")
    sep = "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"
    if args.pnr:
        head += " ECP5 Fmax MHz | critical path start | end | LUT4 | MULT18 | EBR | pnr s |"
        sep += "---:|---|---|---:|---:|---:|---:|"
    text = (f"# Units synthesized alone ({cfg.name})\n\nXilinx: `synth_xilinx -family xcup`; "
            f"ECP5: LFE5U-85F-8 CABGA381, out of context, nextpnr {args.router}.\n\n"
            + "\n".join([head, sep] + rows) + "\n")
    out.mkdir(parents=True, exist_ok=True)
    (out / "units.md").write_text(text)
    print(text)
    print(f"wrote {out / 'units.md'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
