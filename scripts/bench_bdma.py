"""Benchmark of BDMA copies (prints figures, asserts nothing): cycles from the group's launch to
its interrupt for a few copy shapes, bytes per cycle against the bus limit (one AXI beat per cycle
on each of the read and the write channel: ``axi_data_bytes`` per cycle) and, with
``--nvidia-filelist F``, NVIDIA's RTL on the same programs (its nv_full: 512-bit beats).

Usage: ``python scripts/bench_bdma.py --config nv_large --set bdma=True [--mem-profile fast]
[--nvidia-filelist OUT/NV_nvdla.f --nvidia-config nv_full]`` (NVIDIA's nv_full model is built
with ``NVDLA_SIM_OPT=-O1``: give the same environment to find it in the cache).

The shapes (source and destination 64-byte aligned, one group each):

* ``64KiB MC->MC``: one operation, 256 lines of 256 bytes;
* ``64KiB MC->CV`` and ``CV->MC``: the same between the two memories;
* ``16 x 4KiB MC->MC``: sixteen operations of 16 lines of 256 bytes (operation overheads);
* ``64KiB odd lines``: 256 lines of 224 bytes (7 atoms: a half beat at each line's end) with
  the destination 32 bytes off a beat.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hdl.config import add_config_arguments, config_from_args, get_config  # noqa: E402
from verif.axi_slave import MemTiming  # noqa: E402
from verif.gen.writer import TraceWriter, fill_crcs_from_model  # noqa: E402

KiB = 1024


def shapes():
    """(name, operations): each operation (src, dst, src_mc, dst_mc, line bytes, lines)."""
    mc, cv = 0x8000_0000, 0x5000_0000
    return [
        ("64KiB MC->MC", [(mc, mc + 0x100_0000, 1, 1, 256, 256)]),
        ("64KiB MC->CV", [(mc, cv + 0x100_0000, 1, 0, 256, 256)]),
        ("64KiB CV->MC", [(cv, mc + 0x100_0000, 0, 1, 256, 256)]),
        ("16 x 4KiB MC->MC", [(mc + k * 0x1_0000, mc + 0x100_0000 + k * 0x1_0000, 1, 1, 256, 16)
                              for k in range(16)]),
        ("64KiB odd lines", [(mc, mc + 0x100_0020, 1, 1, 224, 256)]),
    ]


def write_program(name: str, ops, root: Path, cfg) -> Path:
    w = TraceWriter(name.replace(" ", "_").replace(">", "").replace("-", "_"))
    for src, dst, smc, dmc, lb, lines in ops:
        w.mem_load(src, os.urandom(lb * lines), mem="pri_mem" if smc else "sec_mem")
        w.mem_init(dst, lb * lines, mem="pri_mem" if dmc else "sec_mem")
    for src, dst, smc, dmc, lb, lines in ops:
        for reg, v in (("CFG_SRC_ADDR_LOW", src & 0xFFFFFFFF), ("CFG_SRC_ADDR_HIGH", src >> 32),
                       ("CFG_DST_ADDR_LOW", dst & 0xFFFFFFFF), ("CFG_DST_ADDR_HIGH", dst >> 32),
                       ("CFG_LINE", lb // 32 - 1), ("CFG_CMD", smc | (dmc << 1)),
                       ("CFG_LINE_REPEAT", lines - 1), ("CFG_SRC_LINE", lb), ("CFG_DST_LINE", lb),
                       ("CFG_SURF_REPEAT", 0), ("CFG_SRC_SURF", lb * lines),
                       ("CFG_DST_SURF", lb * lines), ("CFG_OP", 1)):
            w.reg_write(("BDMA", reg), v)
    w.reg_write(("BDMA", "CFG_LAUNCH0"), 1)
    w.intr_notify("BDMA_0", "done")
    for src, dst, smc, dmc, lb, lines in ops:
        w.check_crc("done", dst, lb * lines, mem="pri_mem" if dmc else "sec_mem")
    d = root / w.name
    fill_crcs_from_model(w, d, cfg)
    return d


def run(dirs, cfg, timing, filelist=None, warmup=None) -> dict:
    from verif.trace.runner import run as run_traces
    kw = {"rtl_filelist": filelist} if filelist else {}
    if warmup:
        kw["warmup"] = warmup
    return {r.name: r for r in run_traces(dirs, "rtl", cfg, timing=timing, **kw)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_config_arguments(ap)
    ap.add_argument("--mem-profile", default="nvidia", choices=("nvidia", "fast"))
    ap.add_argument("--nvidia-filelist", metavar="F", help="NVIDIA's NV_nvdla file list (nv_full)")
    ap.add_argument("--nvidia-config", default="nv_full", help="configuration of that RTL")
    args = ap.parse_args()
    cfg = config_from_args(args, ap)
    timing = MemTiming.named(args.mem_profile)
    root = Path(tempfile.mkdtemp(prefix="bench_bdma_"))
    progs = [(name, ops, write_program(name, ops, root / "ours", cfg)) for name, ops in shapes()]
    ours = run([d for _, _, d in progs], cfg, timing)
    theirs, ncfg = {}, None
    if args.nvidia_filelist:
        ncfg = get_config(args.nvidia_config)
        nd = [write_program(name, ops, root / "nvidia", ncfg) for name, ops, _ in progs]
        warm = write_program("warmup", [(0x8000_0000, 0x8100_0000, 1, 1, 128, 2)], root / "warm", ncfg)
        theirs = run(nd, ncfg, timing, args.nvidia_filelist, [warm])
    print(f"# BDMA copies, memory profile {args.mem_profile}; ours: {cfg.name} "
          f"({cfg.axi_data_bytes}-byte beats)"
          + (f"; NVIDIA: {ncfg.name} ({ncfg.axi_data_bytes}-byte beats)" if ncfg else ""))
    print(f"{'copy':<20} {'bytes':>7} {'ours':>7} {'B/cycle':>8} {'of limit':>9}"
          + (f" {'NVIDIA':>7} {'B/cycle':>8} {'of limit':>9}" if ncfg else ""))
    for name, ops, d in progs:
        n = sum(lb * lines for *_, lb, lines in ops)
        r = ours.get(d.name)
        line = f"{name:<20} {n:>7}"
        for res, c in ((r, cfg), (theirs.get(d.name), ncfg)):
            if c is None:
                continue
            if res is None or res.status != "PASS" or not res.cycles:
                line += f" {'FAIL':>7} {'':>8} {'':>9}"
                continue
            bpc = n / res.cycles
            line += f" {res.cycles:>7} {bpc:>8.1f} {bpc / c.axi_data_bytes:>8.0%} "
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
