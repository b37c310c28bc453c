"""Sweep: random register programs per layer type on the RTL against the numpy model (issue 11
items 1, 2, 9; generators in verif/gen/).

    python scripts/sweep.py --unit sdp|pdp|cdp|sdp_operands|dc|all -n N --seed S -j 2
        [--mem-profile random|nvidia|fast] [--mem-seed M] [--per-process 16]
        [--keep /tmp/gen_fails] [--config nv_small] [--set NAME=VALUE] [--rtl-filelist F]

Programs use seeds S..S+N-1 per layer type; their expected bytes are the model's (check_crc
lines hold the CRCs of the model's output). They run in batches of ``--per-process`` programs
per simulator process, ``-j`` processes at a time, with a tqdm progress bar.
Every program that does not pass is kept under ``--keep`` (its trace directory) and reported
with its seed, layer type, first wrong byte (unit/layer/w,h,c, expected/got) and a command
that replays it. The last lines are a table of programs run / passed / mismatches / other
failures / generator errors per type. Exit status 1 when anything did not pass.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hdl.config import add_config_arguments, config_from_args  # noqa: E402
from verif.gen.run import KINDS, prepare_all, run_programs  # noqa: E402
from tqdm import tqdm  # noqa: E402


def _progress(total: int):
    return tqdm(total=total, unit="prog", dynamic_ncols=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--unit", default="all", choices=KINDS + ("conv", "all"))
    ap.add_argument("-n", type=int, default=10, help="programs per layer type")
    ap.add_argument("--seed", type=int, default=0, help="first seed")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--per-process", type=int, default=16, help="programs per simulator process")
    ap.add_argument("--mem-profile", default="random", choices=("random", "nvidia", "fast"))
    ap.add_argument("--mem-seed", type=int, default=1, help="seed of the random memory profile")
    ap.add_argument("--keep", type=Path, default=Path("/tmp/gen_fails"),
                    help="where the trace directories of failing programs are kept")
    ap.add_argument("--rtl-filelist", type=Path, default=None,
                    help="drive another NV_nvdla (e.g. NVIDIA's RTL) from this Verilator file list")
    ap.add_argument("--any-axi-id", action="store_true",
                    help="let the AXI monitor accept any ID (e.g. our RTL built elsewhere through --rtl-filelist)")
    ap.add_argument("--work", type=Path, default=None, help="work directory (default: a temporary one)")
    add_config_arguments(ap)
    args = ap.parse_args(argv)
    cfg = config_from_args(args, ap)
    # "conv": the direct-convolution generator (dc), its earlier name here
    kinds = list(KINDS) if args.unit == "all" else ["dc" if args.unit == "conv" else args.unit]
    work = args.work or Path(tempfile.mkdtemp(prefix="sweep_"))
    seeds = range(args.seed, args.seed + args.n)
    stats: dict[str, Counter] = defaultdict(Counter)
    failures = []
    bar = _progress(len(kinds) * args.n)
    chunk = max(args.per_process * args.jobs, 1)
    for kind in kinds:
        for lo in range(0, len(seeds), chunk):
            part = seeds[lo:lo + chunk]
            preps, errors = prepare_all([kind], part, work, cfg)
            for e in errors:
                stats[kind]["gen error"] += 1
                stats[kind]["run"] += 1
                failures.append(e)
                bar.write(f"GENERATOR ERROR {e}")
                bar.update(1)
            if not preps:
                continue
            for o in run_programs(preps, cfg, mem_profile=args.mem_profile, mem_seed=args.mem_seed,
                                  jobs=args.jobs, per_process=args.per_process,
                                  rtl_filelist=args.rtl_filelist,
                                  axi_ids=None if args.any_axi_id else "auto"):
                stats[kind]["run"] += 1
                stats[kind][o.status] += 1
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
    print(f"\n{'type':<12} {'run':>5} {'passed':>7} {'mismatch':>9} {'fail':>5} {'gen-err':>8}")
    for kind in kinds:
        s = stats[kind]
        passed = s["pass"] + s["hang-ok"]
        print(f"{kind:<12} {s['run']:>5} {passed:>7} {s['mismatch']:>9} "
              f"{s['fail'] + s['illegal-bad']:>5} {s['gen error']:>8}")
    print(f"(memory profile {args.mem_profile}, seed {args.mem_seed}; config {cfg.name}; "
          f"seeds {args.seed}..{args.seed + args.n - 1}; failing traces kept under {args.keep})")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
