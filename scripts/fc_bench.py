"""What scripts/bench_batch.py and scripts/bench_compressed.py share: the command line of an
inner-product-layer benchmark (``--shape``, ``--precision``, NVIDIA's RTL beside ours), its
configuration, and one run of named programs on each engine under the ``nvidia`` memory profile.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from hdl.config import add_config_arguments, config_from_args
from verif.gen.run import run_programs

__all__ = ["PRECISIONS", "add_fc_arguments", "fc_config", "fc_layer", "engines", "run_fc"]

PRECISIONS = {"int8": 0, "int16": 1, "fp16": 2}


def add_fc_arguments(ap: argparse.ArgumentParser) -> None:
    """The configuration options (default nv_full) and ``--shape``, ``--precision``,
    ``--nvidia-filelist``, ``--warmup``, ``--skip-ours``."""
    add_config_arguments(ap)
    ap.add_argument("--shape", default="2,2,512,64",
                    help="W,H,C,K of the inner-product layer (default 2,2,512,64)")
    ap.add_argument("--precision", choices=PRECISIONS, default="int8")
    ap.add_argument("--nvidia-filelist", type=Path, default=None,
                    help="also run the programs on this NV_nvdla (e.g. NVIDIA's nv_full RTL)")
    ap.add_argument("--warmup", type=Path, action="append", default=None,
                    help="with --nvidia-filelist: trace played first in its simulator process")
    ap.add_argument("--skip-ours", action="store_true",
                    help="with --nvidia-filelist: NVIDIA's RTL only (its simulator is often built "
                         "with NVDLA_SIM_OPT=-O1, which would build ours anew: run ours "
                         "without it)")
    ap.set_defaults(config="nv_full")


def fc_config(args, ap: argparse.ArgumentParser, nv_full_overrides: list[str]):
    """The configuration: nv_full gets ``nv_full_overrides`` when no ``--set`` is given; a
    16-bit ``--precision`` adds feature_data_type=int8_int16_fp16 unless it is set."""
    if args.config == "nv_full" and not args.overrides:
        args.overrides = list(nv_full_overrides)
    if args.precision != "int8" and not any(s.startswith("feature_data_type")
                                            for s in args.overrides):
        args.overrides.append("feature_data_type=int8_int16_fp16")
    return config_from_args(args, ap)


def fc_layer(args, cfg) -> tuple:
    """The layer the options describe: ``(w, h, c, k, prec, eb, ops)`` with ``prec`` 0/1/2,
    ``eb`` bytes per element and ``ops`` the atomic operations of one input cube
    (ceil(K / kernel group) x ceil(C / atomic C) x W x H)."""
    w, h, c, k = (int(x) for x in args.shape.split(","))
    prec = PRECISIONS[args.precision]
    eb = 2 if prec else 1
    ops = -(-k // (cfg.mac_atomic_k // eb)) * -(-c // cfg.mac_atomic_c) * w * h
    return w, h, c, k, prec, eb, ops


def engines(args) -> list[tuple[str, Path | None]]:
    """(name, file list or None for ours) of the engines the options ask for."""
    return (([] if args.skip_ours and args.nvidia_filelist else [("ours", None)])
            + ([("NVIDIA", args.nvidia_filelist)] if args.nvidia_filelist else []))


def run_fc(preps: dict, cfg, args) -> dict:
    """Run the prepared programs ``preps`` (name -> ``verif.gen.run.prepare`` result) on each
    engine, one simulator process per engine; returns ``{(engine, name): cycles}`` of those
    that pass and prints the others' status and message."""
    cycles = {}
    byname = {p.dir.name: n for n, p in preps.items()}
    for eng, fl in engines(args):
        kw = {"rtl_filelist": fl, "axi_ids": None, "warmup": args.warmup} if fl else {}
        for out in run_programs(list(preps.values()), cfg, mem_profile="nvidia",
                                per_process=len(preps), **kw):
            name = byname[out.dir.name]
            if out.status != "pass":
                print(f"{eng} {name}: {out.status}: {out.message}")
                continue
            cycles[eng, name] = out.cycles
    return cycles
