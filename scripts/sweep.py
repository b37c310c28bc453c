"""Sweep: random register programs per layer type on the RTL against the numpy model (issue 11
items 1, 2, 9; generators in verif/gen/).

    python scripts/sweep.py --unit sdp|pdp|cdp|sdp_operands|dc|img|bdma|rubik|deconv|batch|compressed|batch_compressed|all -n N --seed S -j 2
        [--mem-profile random|nvidia|fast] [--mem-seed M] [--per-process 16]
        [--keep /tmp/gen_fails] [--config nv_small] [--set NAME=VALUE] [--rtl-filelist F]
        [--precision int16 --precision fp16]

Programs use seeds S..S+N-1 per layer type (with ``--precision``: the first N from S on with
a layer in one of those precisions); their expected bytes are the model's (check_crc
lines hold the CRCs of the model's output). They run in batches of ``--per-process`` programs
per simulator process, ``-j`` processes at a time, with a tqdm progress bar.
Every program that does not pass is kept under ``--keep`` (its trace directory) and reported
with its seed, layer type, first wrong byte (unit/layer/w,h,c, expected/got) and a command
that replays it. The last lines are a table of programs run / passed / mismatches / other
failures / generator errors per type. Exit status 1 when anything did not pass, 2 for a bad
option (a malformed ``--cluster``, an unreachable scheduler).

``--cluster local[:N]|tcp://HOST:PORT`` (``verif.cluster``): each task generates, prepares (the
model's CRCs) and plays up to ``--per-process`` programs of one type on a Dask worker (fewer
when that spreads the programs better over the workers); the reports come back in seed order
and a failing program's trace directory is fetched back under ``--keep``. ``--work`` applies
to the local pool only (workers use their own temporary directories). ``--junit-xml`` and
``--report`` (JSON or Markdown) list every program, with or without ``--cluster``.
"""
from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hdl.config import add_config_arguments, config_from_args  # noqa: E402
from verif import cluster as dc  # noqa: E402
from verif.gen.common import PRECISIONS, program_precisions  # noqa: E402
from verif.gen.run import (KINDS, OPTIONAL_KINDS, generate, kind_flags, kinds_for,  # noqa: E402
                           prepare_all, run_programs)
from tqdm import tqdm  # noqa: E402


def _progress(total: int):
    return tqdm(total=total, unit="prog", dynamic_ncols=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--unit", default="all", choices=KINDS + tuple(OPTIONAL_KINDS) + ("conv", "all"),
                    help="layer type (all: every type the configuration has; bdma needs a "
                         "configuration with BDMA, rubik and deconv one with RUBIK, batch one with "
                         "multi-batch (nv_full, or e.g. nv_small --set batch=True --set "
                         "max_batch=32), compressed one with weight compression (nv_full, or "
                         "e.g. nv_small --set weight_compression=True), batch_compressed both)")
    ap.add_argument("-n", type=int, default=10, help="programs per layer type")
    ap.add_argument("--seed", type=int, default=0, help="first seed")
    ap.add_argument("-j", "--jobs", type=int, default=2,
                    help="simulator processes (without --cluster; --cluster local takes its "
                         "worker count from it)")
    ap.add_argument("--per-process", type=int, default=16, help="programs per simulator process")
    ap.add_argument("--mem-profile", default="random", choices=("random", "nvidia", "fast"))
    ap.add_argument("--mem-seed", type=int, default=1, help="seed of the random memory profile")
    ap.add_argument("--keep", type=Path, default=Path("/tmp/gen_fails"),
                    help="where the trace directories of failing programs are kept")
    ap.add_argument("--rtl-filelist", type=Path, default=None,
                    help="drive another NV_nvdla (e.g. NVIDIA's RTL) from this Verilator file list")
    ap.add_argument("--warmup", type=Path, action="append", default=None, metavar="DIR",
                    help="play trace DIR first in every simulator process, its result not "
                         "counted (NVIDIA's nv_full RTL garbles its first BDMA transfer after "
                         "power-up: README 'nv_full'); repeatable")
    ap.add_argument("--any-axi-id", action="store_true",
                    help="let the AXI monitor accept any ID (e.g. our RTL built elsewhere through --rtl-filelist)")
    ap.add_argument("--work", type=Path, default=None, help="work directory (default: a temporary one)")
    ap.add_argument("--precision", action="append", choices=PRECISIONS, default=None,
                    help="only programs with a layer computing in this precision (repeatable: "
                         "any of them); seeds without one are skipped, -n counts the programs "
                         "kept. The summary counts programs per precision whenever the "
                         "configuration computes more than one")
    add_config_arguments(ap)
    dc.add_cluster_arguments(ap)
    args = ap.parse_args(argv)
    cfg = config_from_args(args, ap)
    try:
        spec = dc.cluster_from_args(args, args.jobs)
    except dc.ClusterError as e:
        ap.exit(2, f"error: {e}\n")
    # "conv": the direct-convolution generator (dc), its earlier name here
    kinds = list(kinds_for(cfg)) if args.unit == "all" else ["dc" if args.unit == "conv" else args.unit]
    if args.unit in OPTIONAL_KINDS and args.unit not in kinds_for(cfg):
        ap.exit(2, f"error: --unit {args.unit}: configuration {cfg.name} has no "
                   f"{' and '.join(f.upper() for f in kind_flags(args.unit))}\n")
    if args.precision and not set(args.precision) & set(cfg.precisions):
        ap.exit(2, f"error: --precision {','.join(args.precision)}: configuration {cfg.name} "
                   f"computes {', '.join(cfg.precisions)} only\n")
    seeds, precs = _select_seeds(kinds, args.seed, args.n, cfg, args.precision)
    stats: dict[str, Counter] = defaultdict(Counter)
    failures = []
    records = []
    t0 = time.monotonic()
    if spec is not None:
        try:
            _sweep_on_cluster(args, spec, cfg, kinds, seeds, precs, stats, failures, records)
        except dc.ClusterError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return _summary(args, cfg, kinds, seeds, stats, failures, records, spec, t0)
    work = args.work or Path(tempfile.mkdtemp(prefix="sweep_"))
    bar = _progress(len(kinds) * args.n)
    chunk = max(args.per_process * args.jobs, 1)
    for kind in kinds:
        for lo in range(0, len(seeds[kind]), chunk):
            part = seeds[kind][lo:lo + chunk]
            preps, errors = prepare_all([kind], part, work, cfg)
            for e in errors:
                stats[kind]["gen error"] += 1
                stats[kind]["run"] += 1
                failures.append(e)
                records.append(dc.ItemRecord(e.split(":")[0], "fail", 0.0, e,
                                             {"status": "gen error"}))
                bar.write(f"GENERATOR ERROR {e}")
                bar.update(1)
            if not preps:
                continue
            for o in run_programs(preps, cfg, mem_profile=args.mem_profile, mem_seed=args.mem_seed,
                                  jobs=args.jobs, per_process=args.per_process,
                                  rtl_filelist=args.rtl_filelist,
                                  axi_ids=None if args.any_axi_id else "auto",
                                  warmup=args.warmup):
                stats[kind]["run"] += 1
                stats[kind][o.status] += 1
                p = precs.get((kind, o.seed))
                _tally(stats, kind, p, o.ok)
                records.append(dc.ItemRecord(f"{o.kind} seed {o.seed}", "pass" if o.ok else "fail",
                                             0.0, o.message,
                                             {"status": o.status, "cycles": o.cycles}
                                             | ({"precisions": sorted(p)} if p else {})))
                if not o.ok:
                    kept = args.keep / o.dir.name
                    if kept.exists():
                        shutil.rmtree(kept)
                    shutil.copytree(o.dir, kept)
                    msg = o.message.replace(str(o.dir), str(kept))
                    failures.append(msg)
                    bar.write(msg)
                bar.update(1)
                bar.set_postfix_str(" ".join(f"{k}:{s['run'] - s['pass'] - s['hang-ok']} bad"
                                             for k, s in stats.items()))
    bar.close()
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return _summary(args, cfg, kinds, seeds, stats, failures, records, None, t0)


def _select_seeds(kinds, first: int, n: int, cfg, precision) -> tuple[dict, dict]:
    """Per layer type the ``n`` seeds to run from ``first`` on (with ``precision``: only those
    whose program has a layer in one of them; at most 50 n seeds are tried, fewer programs
    when that is not enough), and, when ``cfg`` computes more than one precision or
    ``precision`` is given, each program's precisions (``{(type, seed): frozenset}``; a
    generator error: none)."""
    seeds, precs = {}, {}
    classify = len(cfg.precisions) > 1 or bool(precision)
    for kind in kinds:
        chosen = []
        for seed in range(first, first + (50 * n if precision else n)):
            if len(chosen) == n:
                break
            if classify:
                try:
                    precs[(kind, seed)] = program_precisions(generate(kind, seed, cfg), cfg)
                except Exception:       # the sweep reports generator errors itself
                    if precision:
                        continue
            if precision and not precs[(kind, seed)] & set(precision):
                continue
            chosen.append(seed)
        seeds[kind] = chosen
    return seeds, precs


def _tally(stats, kind: str, precisions, ok: bool) -> None:
    """Count one program per precision it computes in (``stats[kind][(p, "run"/"pass")]``)."""
    for p in precisions or ():
        stats[kind][(p, "run")] += 1
        stats[kind][(p, "pass")] += ok


def _sweep_on_cluster(args, spec, cfg, kinds, seeds, precs, stats, failures, records) -> None:
    """``--cluster``: every (type, seed) on the Dask workers (``verif.cluster.run_sweep``),
    reported in that order; fills ``stats``, ``failures`` and ``records`` as the local loop
    does. Raises ClusterError when the scheduler cannot be reached."""
    programs = [(k, s) for k in kinds for s in seeds[k]]
    if spec.kind == "local":
        # the workers share this machine's build cache: build (or find) the model once here
        from verif.trace.pgo import build_sim
        build_sim(cfg.name, rtl_filelist=args.rtl_filelist)
    with dc.connect(spec) as client:
        per = min(args.per_process, max(1, math.ceil(args.n / dc.slots(client))))
        bar = _progress(len(programs))

        def done():
            for i, v in dc.run_sweep(client, programs, cfg, per_task=per, keep=args.keep,
                                     mem_profile=args.mem_profile, mem_seed=args.mem_seed,
                                     rtl_filelist=args.rtl_filelist,
                                     axi_ids=None if args.any_axi_id else "auto",
                                     timeout=args.task_timeout):
                bar.update(1)
                yield i, v
        for i, (status, msg, cycles) in dc.in_order(done(), len(programs)):
            kind, seed = programs[i]
            stats[kind]["run"] += 1
            ok = status in ("pass", "hang-ok")
            p = precs.get((kind, seed))
            _tally(stats, kind, p, ok)
            records.append(dc.ItemRecord(f"{kind} seed {seed}", "pass" if ok else "fail", 0.0,
                                         msg, {"status": status, "cycles": cycles}
                                         | ({"precisions": sorted(p)} if p else {})))
            if status == "gen error":
                stats[kind]["gen error"] += 1
                failures.append(msg)
                bar.write(f"GENERATOR ERROR {msg}")
            else:
                stats[kind][status] += 1
                if not ok:
                    failures.append(msg)
                    bar.write(msg)
            bar.set_postfix_str(" ".join(f"{k}:{s['run'] - s['pass'] - s['hang-ok']} bad"
                                         for k, s in stats.items()))
        bar.close()


def _summary(args, cfg, kinds, seeds, stats, failures, records, spec, t0) -> int:
    """Print the per-type table, write the reports; returns the exit status."""
    print(f"\n{'type':<12} {'run':>5} {'passed':>7} {'mismatch':>9} {'fail':>5} {'gen-err':>8}")
    for kind in kinds:
        s = stats[kind]
        passed = s["pass"] + s["hang-ok"]
        print(f"{kind:<12} {s['run']:>5} {passed:>7} {s['mismatch']:>9} "
              f"{s['fail'] + s['illegal-bad']:>5} {s['gen error']:>8}")
    if len(cfg.precisions) > 1:
        print("programs per precision (passed/run; a program counts for each precision it "
              "computes in):")
        for kind in kinds:
            s = stats[kind]
            print(f"{kind:<12} " + ", ".join(f"{p} {s[(p, 'pass')]}/{s[(p, 'run')]}"
                                             for p in cfg.precisions))
    last = max((x for v in seeds.values() for x in v), default=args.seed)
    print(f"(memory profile {args.mem_profile}, seed {args.mem_seed}; config {cfg.name}; "
          f"seeds {args.seed}..{last}"
          + (f" with a layer in {' or '.join(args.precision)}" if args.precision else "")
          + f"; failing traces kept under {args.keep})")
    if spec is not None:
        print(f"(cluster {spec}, {time.monotonic() - t0:.1f} s)")
    dc.write_reports(records, suite="sweep", junit=args.junit_xml, report=args.report,
                     meta={"config": cfg.name, "mem_profile": args.mem_profile,
                           "mem_seed": args.mem_seed,
                           "cluster": str(spec) if spec else f"pool -j {args.jobs}",
                           "wall_s": round(time.monotonic() - t0, 1)})
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
