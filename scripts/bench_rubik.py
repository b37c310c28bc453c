"""Benchmark of RUBIK layers (prints figures, asserts nothing): cycles from the start of the
program to the layer's interrupt for a contract, a split and a merge of the same cube, against
the bus limit (one AXI beat per cycle on the read channel and one on the write channel: the
layer's read beats or its write beats, whichever are more, in the configuration's beats) and, with ``--nvidia-filelist F``,
NVIDIA's RTL on the same programs (its nv_full: 512-bit beats).

Usage: ``python scripts/bench_rubik.py --config nv_large --set rubik=True --set
rubik_contract=True --set rubik_reshape=True [--mem-profile fast] [--nvidia-filelist
OUT/NV_nvdla.f --nvidia-config nv_full]`` (NVIDIA's nv_full model is built with
``NVDLA_SIM_OPT=-O1``: give the same environment to find it in the cache).

The layers (every address and stride a multiple of 64 bytes; int8 unless named):

* ``contract 2x2``: 4 phase cubes of 32 x 16 x 64 channels into 64 x 32 x 64 (128 KiB each way);
* ``contract 4x1``: 4 phase cubes of 16 x 32 x 64 into 64 x 32 x 64;
* ``split``: a 64 x 32 x 64 cube into 64 planes of 32 lines of 64 bytes;
* ``merge``: those planes back into a cube;
* ``split int16``: a 32 x 32 x 32 int16 cube into 32 planes of 32 lines of 64 bytes.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_bdma import run  # noqa: E402  (the traces on the rtl engine, by name)

ATOM = 32
MODES = {"contract": 0, "split": 1, "merge": 2}


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def shapes():
    """(name, mode, W, H, C, sx, sy, element bytes)."""
    return [("contract 2x2", "contract", 32, 16, 64, 2, 2, 1),
            ("contract 4x1", "contract", 16, 32, 64, 4, 1, 1),
            ("split", "split", 64, 32, 64, 1, 1, 1),
            ("merge", "merge", 64, 32, 64, 1, 1, 1),
            ("split int16", "split", 32, 32, 32, 1, 1, 2)]


def geometry(mode, W, H, C, sx, sy, b):
    """Registers (name -> byte value) and (read atoms, write atoms, input bytes, output bytes)
    of one layer; the read and write atoms are the bus beats on 32-byte beats."""
    A = ATOM // b
    G = _ceil(C, A)
    if mode == "contract":
        ils, iss = ATOM * W, ATOM * W * H
        cs0 = iss * G
        ols = ATOM * W * sx
        oss = ols * H * sy
        n_in, n_out = cs0 * sx * sy, oss * G
        atoms = G * H * sy * W * sx
        regs = {"D_DAIN_LINE_STRIDE": ils, "D_DAIN_SURF_STRIDE": iss, "D_CONTRACT_STRIDE_0": cs0,
                "D_DAOUT_LINE_STRIDE": ols, "D_DAOUT_SURF_STRIDE": oss}
        return regs, (atoms, atoms, n_in, n_out)
    fls, fss = ATOM * W, ATOM * W * H
    pline = _ceil(W * b, 64) * 64
    plane = pline * H
    feat, planes = fss * G, plane * C
    j = _ceil(W * b, ATOM)
    if mode == "split":
        regs = {"D_DAIN_LINE_STRIDE": fls, "D_DAIN_SURF_STRIDE": fss,
                "D_DAOUT_LINE_STRIDE": pline, "D_DAOUT_PLANAR_STRIDE": plane}
        return regs, (G * H * W, C * H * j, feat, planes)
    regs = {"D_DAIN_LINE_STRIDE": pline, "D_DAIN_PLANAR_STRIDE": plane,
            "D_DAOUT_LINE_STRIDE": fls, "D_DAOUT_SURF_STRIDE": fss}
    return regs, (C * H * j, G * H * W, planes, feat)


def write_program(name, mode, W, H, C, sx, sy, b, root: Path, cfg) -> Path:
    ia, oa = 0x8000_0000, 0x8100_0000
    regs, (_, _, n_in, n_out) = geometry(mode, W, H, C, sx, sy, b)
    w = TraceWriter(name.replace(" ", "_"))
    w.mem_load(ia, os.urandom(n_in))
    w.mem_init(oa, n_out)
    writes = {"D_MISC_CFG": MODES[mode] | ((0 if b == 1 else 1) << 8),
              "D_DAIN_RAM_TYPE": 1, "D_DAOUT_RAM_TYPE": 1,
              "D_DATAIN_SIZE_0": (W - 1) | ((H - 1) << 16), "D_DATAIN_SIZE_1": C - 1,
              "D_DATAOUT_SIZE_1": C - 1, "D_DAIN_ADDR_LOW": ia, "D_DAIN_ADDR_HIGH": 0,
              "D_DAOUT_ADDR_LOW": oa, "D_DAOUT_ADDR_HIGH": 0,
              "D_DECONV_STRIDE": (sx - 1) | ((sy - 1) << 16), **regs, "D_OP_ENABLE": 1}
    for reg, v in writes.items():
        w.reg_write(("RBK", reg), v)
    w.intr_notify("RUBIK_0", "done")
    w.check_crc("done", oa, n_out)
    d = root / w.name
    fill_crcs_from_model(w, d, cfg)
    return d


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_config_arguments(ap)
    ap.add_argument("--mem-profile", default="nvidia", choices=("nvidia", "fast"))
    ap.add_argument("--nvidia-filelist", metavar="F", help="NVIDIA's NV_nvdla file list (nv_full)")
    ap.add_argument("--nvidia-config", default="nv_full", help="configuration of that RTL")
    args = ap.parse_args()
    cfg = config_from_args(args, ap)
    if not cfg.rubik:
        ap.error(f"{cfg.name} has no RUBIK: add --set rubik=True --set rubik_contract=True "
                 "--set rubik_reshape=True")
    timing = MemTiming.named(args.mem_profile)
    root = Path(tempfile.mkdtemp(prefix="bench_rubik_"))
    progs = [(s, write_program(*s, root / "ours", cfg)) for s in shapes()]
    ours = run([d for _, d in progs], cfg, timing)
    theirs, ncfg = {}, None
    if args.nvidia_filelist:
        ncfg = get_config(args.nvidia_config)
        nd = [write_program(*s, root / "nvidia", ncfg) for s, _ in progs]
        theirs = run(nd, ncfg, timing, args.nvidia_filelist)
    print(f"# RUBIK layers, memory profile {args.mem_profile}; ours: {cfg.name} "
          f"({cfg.axi_data_bytes}-byte beats)"
          + (f"; NVIDIA: {ncfg.name} ({ncfg.axi_data_bytes}-byte beats)" if ncfg else ""))
    print("# limit: the layer's read or write beats, whichever are more (one AXI beat per cycle "
          "each way; every address 64-byte aligned), in the configuration's beats")
    print(f"{'layer':<14} {'read B':>7} {'write B':>7} {'limit':>6} {'ours':>7} {'of limit':>9}"
          + (f" {'NVIDIA':>7} {'of limit':>9}" if ncfg else ""))
    for s, d in progs:
        _, (ra, wa, _, _) = geometry(*s[1:])
        nbytes = max(ra, wa) * ATOM
        line = f"{s[0]:<14} {ra * ATOM:>7} {wa * ATOM:>7} {_ceil(nbytes, cfg.axi_data_bytes):>6}"
        for res, c in ((ours.get(d.name), cfg), (theirs.get(d.name), ncfg)):
            if c is None:
                continue
            if res is None or res.status != "PASS" or not res.cycles:
                line += f" {'FAIL':>7} {'':>9}"
                continue
            limit = _ceil(nbytes, c.axi_data_bytes)
            line += f" {res.cycles:>7} {limit / res.cycles:>8.0%} "
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
