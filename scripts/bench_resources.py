"""Per-unit FPGA resources and ECP5 timing, each unit synthesized alone (a benchmark, not a test).

``python scripts/bench_resources.py [--config nv_small] [--set NAME=VALUE] [--units sdp,pdp]
[--pnr | --pnr-only] [--target ecp5-85f|gowin-gw5a138] [--freq 100] -o build/bench_resources``

Runs :func:`hdl.synth.synthesize` for every unit ``--unit`` accepts (``hdl.synth.unit_names``:
the datapath units of ``hdl.top.DATAPATH_UNITS``, the convolution pipeline's units one by one,
csb, glb, mcif; ``conv``, the whole pipeline, only when listed), or the ``--units`` listed,
each into ``<out>/<unit>/``, then writes ``<out>/units.md``: one row per unit with Xilinx xcup
LUT/FF/DSP48E2/RAMB36/RAMB18/LUTRAM, NVIDIA's figures and ratios when the reference is present,
the netlist checks, synthesis wall time, and with ``--pnr`` the ECP5-85F Fmax, critical path
start/end and place-and-route wall time. ``--pnr-only`` skips the Xilinx synthesis and writes
``<out>/fmax.md`` (:func:`timing_table`). ``--target gowin-gw5a138`` places and routes on the
Gowin GW5A-138 instead (``hdl.pnr_gowin``): Fmax per clock, LUT4/ALU/FF/BSRAM/DSP, and the table
is ``<out>/fmax_gowin.md``. Progress on stderr; takes minutes per unit.
Exit status 1 when a unit failed a check or a tool failed, 2 for a bad option.

``--cluster local[:N]|tcp://HOST:PORT`` (``verif.cluster``): one Dask task per unit, synthesized
on a worker into its temporary directory and fetched back into ``<out>/<unit>/``; the table
keeps the order of the units. ``--junit-xml`` and ``--report`` (JSON or Markdown) list every
unit, with or without ``--cluster``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hdl import synth  # noqa: E402
from hdl.config import add_config_arguments, config_from_args  # noqa: E402
from verif import cluster as dc  # noqa: E402


def _results(func: str, cfg, units: list, out: Path, spec, timeout, **kw):
    """Yield ``(unit, result or None, error text or None)`` in the order of ``units``:
    ``hdl.synth.<func>`` run here one unit after another (``spec`` None) or one Dask task per
    unit (``verif.cluster.run_synth``)."""
    if spec is None:
        for u in units:
            print(f"== {u}", file=sys.stderr, flush=True)
            try:
                yield u, getattr(synth, func)(cfg, out / u, u, **kw), None
            except (synth.SynthError, synth.UnitError) as e:
                yield u, None, str(e)
        return
    with dc.connect(spec) as client:
        bar = dc.progress(len(units), "unit")

        def done():
            for i, v in dc.run_synth(client, func, cfg, units, out, timeout=timeout, **kw):
                bar.update(1)
                yield i, v
        for i, (res, err) in dc.in_order(done(), len(units)):
            yield units[i], res, err
        bar.close()


def _record(u: str, res, err) -> "dc.ItemRecord":
    if err is not None:
        return dc.ItemRecord(u, "fail", 0.0, err)
    bad = getattr(res, "violations", None)
    return dc.ItemRecord(u, "fail" if bad else "pass", getattr(res, "seconds", 0.0),
                         f"{len(bad)} checks failed" if bad else "")


def timing_table(cfg, units: list, out: Path, freq: float, router: str, spec=None,
                 timeout: float | None = None, records: list | None = None,
                 target: str = "ecp5-85f") -> int:
    """``--pnr-only``: place and route each unit alone (:func:`hdl.synth.timing_only`) into
    ``<out>/<unit>/`` and write ``<out>/fmax.md``: Fmax (MHz), its ratio to ``freq``, the
    critical path's start and end cells, LUT4/FF/MULT18/EBR and wall seconds per unit
    (``target`` ``gowin-gw5a138``: ``<out>/fmax_gowin.md``, :func:`gowin_rows`).
    ``spec``: a ``verif.cluster`` ClusterSpec (None: one unit after another here);
    ``timeout``: its per-unit wall seconds; ``records``: receives a report entry per unit.
    Returns the exit status: 1 when a tool failed for a unit."""
    rows, status = [], 0
    gowin = target != "ecp5-85f"
    for u, t, e in _results("timing_only", cfg, units, out, spec, timeout, freq=freq,
                            router=router, target=target):
        if records is not None:
            records.append(_record(u, t, e))
        if e is not None:
            print(f"error: {u}: {e}", file=sys.stderr)
            rows.append(f"| {u} | failed: {e} |")
            status = 1
            continue
        if gowin:
            rows += gowin_rows(u, t, freq)
            continue
        rows.append(f"| {u} | {t.fmax:.1f} | {t.fmax / freq:.2f} | `{t.start}` | `{t.end}` | "
                    f"{t.delay_ns:.2f} | {t.lut4:,} | {t.ff:,} | {t.mult18} | {t.dp16k} | "
                    f"{t.seconds:.0f} |")
    if gowin:
        from hdl.pnr_gowin import GOWIN_PART
        text = (f"# Gowin GW5A-138 Fmax of units placed and routed alone ({cfg.name})\n\n"
                f"{GOWIN_PART}, `synth_gowin -family gw5a`, nextpnr-himbaechel-gowin, out of "
                f"context in a shift-register harness (its flip-flops counted in FF), {freq:g} MHz "
                "target; single runs.\n\n"
                "| unit | clock | Fmax MHz | / target | critical path start | end | delay ns | "
                "LUT4 | ALU | FF | BSRAM | DSP | synth s | pnr s |\n"
                "|---|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
                + "\n".join(rows) + "\n")
        name = "fmax_gowin.md"
    else:
        text = (f"# ECP5 Fmax of units placed and routed alone ({cfg.name})\n\n"
                f"LFE5U-85F-8 CABGA381, out of context, {freq:g} MHz target, nextpnr {router}; "
                "single runs (placement varies a few percent between runs).\n\n"
                "| unit | Fmax MHz | / target | critical path start | end | delay ns | LUT4 | FF | "
                "MULT18 | EBR | pnr s |\n|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|\n"
                + "\n".join(rows) + "\n")
        name = "fmax.md"
    out.mkdir(parents=True, exist_ok=True)
    (out / name).write_text(text)
    print(text)
    print(f"wrote {out / name}")
    return status


def gowin_rows(unit: str, t, freq: float) -> list:
    """Rows of ``fmax_gowin.md`` for one unit's :class:`hdl.pnr_gowin.GowinTiming`: one per
    clock (slowest first), the utilisation on the first."""
    rows = []
    for i, c in enumerate(t.clocks):
        util = ([f"{t.util[k][0]:,}" for k in ("LUT4", "ALU", "FF", "BSRAM", "DSP")]
                + [f"{t.synth_seconds:.0f}", f"{t.pnr_seconds:.0f}"]) if i == 0 else [""] * 7
        rows.append(f"| {unit if i == 0 else ''} | {c.clock} | {c.fmax:.1f} | "
                    f"{c.fmax / freq:.2f} | `{c.start}` | `{c.end}` | {c.delay_ns:.2f} | "
                    + " | ".join(util) + " |")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/bench_resources.py", description=__doc__.split("\n")[0])
    add_config_arguments(ap)
    ap.add_argument("--units", help="comma-separated units (default: every unit)")
    ap.add_argument("--pnr", action="store_true", help="also place and route each unit on ECP5-85F")
    ap.add_argument("--pnr-only", action="store_true",
                    help="only place and route each unit on ECP5-85F (Fmax table; no Xilinx "
                         "synthesis, no checks)")
    ap.add_argument("--target", choices=synth.TARGETS, default="ecp5-85f",
                    help="place-and-route target of --pnr/--pnr-only (default ECP5-85F)")
    ap.add_argument("--freq", type=float, default=100.0, help="place-and-route target MHz")
    ap.add_argument("--router", choices=("router1", "router2"), default="router1",
                    help="nextpnr router (neither routed the convolution pipeline within an "
                         "hour on nv_small: congestion)")
    ap.add_argument("-o", "--out", default="build/bench_resources")
    dc.add_cluster_arguments(ap)
    args = ap.parse_args(argv)
    cfg = config_from_args(args, ap)
    try:
        spec = dc.cluster_from_args(args)
    except dc.ClusterError as e:
        ap.exit(2, f"error: {e}\n")
    records: list = []
    try:
        status = _main(args, cfg, spec, records)
    except dc.ClusterError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    dc.write_reports(records, suite="bench_resources", junit=args.junit_xml, report=args.report,
                     meta={"config": cfg.name, "cluster": str(spec) if spec else "here"})
    return status


def _main(args, cfg, spec, records: list) -> int:
    """The synthesis sweep of :func:`main` (its exit status)."""
    # default: every unit, the convolution pipeline's one by one (``--units conv`` for the
    # whole pipeline: nextpnr did not route it within an hour on nv_small)
    units = args.units.split(",") if args.units else [u for u in synth.unit_names(cfg) if u != "conv"]
    out = Path(args.out)
    if args.pnr_only:
        return timing_table(cfg, units, out, args.freq, args.router, spec, args.task_timeout,
                            records, args.target)
    ref = synth.nvidia_reference_for(cfg)
    rows, status = [], 0
    for u, res, e in _results("synthesize", cfg, units, out, spec, args.task_timeout,
                              pnr=args.pnr, freq=args.freq, router=args.router,
                              target=args.target):
        records.append(_record(u, res, e))
        if e is not None:
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
        if t and args.target != "ecp5-85f":
            c = t.clocks[0]
            row += (f" {c.fmax:.1f} | `{c.start}` | `{c.end}` | {t.util['LUT4'][0]:,} | "
                    f"{t.util['DSP'][0]} | {t.util['BSRAM'][0]} | {t.pnr_seconds:.0f} |")
        elif t:
            row += (f" {t.fmax:.1f} | `{t.start}` | `{t.end}` | {t.lut4:,} | {t.mult18} | "
                    f"{t.dp16k} | {t.seconds:.0f} |")
        rows.append(row)
    head = ("| unit | LUT | FF | DSP48E2 | RAMB36 | RAMB18 | LUTRAM | LUT / NVIDIA | FF / NVIDIA "
            "| checks | synth s |")
    sep = "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"
    if args.pnr:
        head += (" GW5A-138 Fmax MHz (slowest clock) | critical path start | end | LUT4 | DSP | "
                 "BSRAM | pnr s |" if args.target != "ecp5-85f" else
                 " ECP5 Fmax MHz | critical path start | end | LUT4 | MULT18 | EBR | pnr s |")
        sep += "---:|---|---|---:|---:|---:|---:|"
    text = (f"# Units synthesized alone ({cfg.name})\n\nXilinx: `synth_xilinx -family xcup`; "
            + ("place and route: Gowin GW5A-138 (hdl.pnr_gowin).\n\n" if args.target != "ecp5-85f"
               else f"ECP5: LFE5U-85F-8 CABGA381, out of context, nextpnr {args.router}.\n\n")
            + "\n".join([head, sep] + rows) + "\n")
    out.mkdir(parents=True, exist_ok=True)
    (out / "units.md").write_text(text)
    print(text)
    print(f"wrote {out / 'units.md'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
