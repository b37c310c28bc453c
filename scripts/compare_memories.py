"""Compare the rtl engine's two AXI memories (issue 12) on the rtl manifest: every trace is
played with ``--memory python`` (the reference responders) and ``--memory sim`` (in the
simulation) under the same timing profile (default ``nvidia``; ``random`` too: both draw the
same numbers); per trace it prints the cycles, the AXI beats and requests and the CRCs of both
and whether they are equal, and the simulated cycles per CPU second of each memory (per wall
second in the totals). On a configuration with the secondary memory interface (CVIF:
nv_small_256_full, nv_medium_1024_full, nv_large) the beats and requests of that port
(``cv rd``/``cv wr``; ``sec_mem`` of the traces) are compared too.

``--program KIND:SEED`` (repeatable) adds a random program of ``verif.gen`` for the
configuration (prepared in a temporary directory with the model's CRCs; on a configuration
with CVIF its surfaces are spread over both memories), e.g. ``--config nv_small_256_full
--program sdp:1000 --program pdp:1000``.

Usage: ``python scripts/compare_memories.py [--exclude GLOB ...] [-j N] [--config SPEC]
[--set NAME=VALUE] [--mem-profile P] [--seed N] [--rtl-filelist F] [--program KIND:SEED ...]
[TRACE ...]`` (default: every trace of ``verif/manifest.toml`` [rtl] unless programs are
given). Exit status 1 when a trace differs (or fails with either).
"""
from __future__ import annotations

import argparse
import fnmatch
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hdl.config import add_config_arguments, config_from_args  # noqa: E402
from verif import manifest  # noqa: E402
from verif.axi_slave import PROFILES, MemTiming  # noqa: E402
from verif.shared import nvdla_dir  # noqa: E402
from verif.trace.rtl_runner import run_rtl  # noqa: E402


def _key(r) -> tuple:
    x = getattr(r, "rtl", {}) or {}
    return (r.status, r.cycles, x.get("rd_beats"), x.get("wr_beats"), x.get("rd_reqs"),
            x.get("wr_reqs"), x.get("cv_rd_beats"), x.get("cv_wr_beats"), x.get("cv_rd_reqs"),
            x.get("cv_wr_reqs"), tuple(c.actual for c in r.checks))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", help="suite/trace names or trace directories "
                                              "(default: the rtl manifest)")
    ap.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                    help="leave out traces whose name matches (repeatable)")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--mem-profile", choices=PROFILES, default="nvidia")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rtl-filelist", type=Path, default=None,
                    help="Verilator file list of another NV_nvdla (e.g. NVIDIA's RTL)")
    ap.add_argument("--program", action="append", default=[], metavar="KIND:SEED",
                    help="also play this random program of verif.gen (repeatable)")
    add_config_arguments(ap)
    a = ap.parse_args(argv)
    cfg = config_from_args(a, ap)
    names = a.traces or ([] if a.program else sorted(manifest.load()["rtl"]))
    dirs = []
    if a.program:
        from verif.gen.run import generate, prepare
        tmp = Path(tempfile.mkdtemp(prefix="compare-memories-"))
        for spec in a.program:
            kind, _, seed = spec.partition(":")
            if not seed.isdigit():
                ap.error(f"--program {spec!r}: KIND:SEED, e.g. sdp:1000")
            dirs.append(prepare(generate(kind, int(seed), cfg), tmp, cfg).dir)
    for n in names:
        p = Path(n)
        d = p if p.is_dir() else nvdla_dir() / "traces" / n
        if any(fnmatch.fnmatch(d.name, g) for g in a.exclude):
            continue
        dirs.append(d)
    timing = MemTiming.named(a.mem_profile, seed=a.seed)
    res, walls = {}, {}
    for mem in ("python", "sim"):
        t0 = time.monotonic()
        res[mem] = {r.name: r for r in run_rtl(dirs, config=cfg.name, jobs=a.jobs, timing=timing,
                                                memory=mem, rtl_filelist=a.rtl_filelist)}
        walls[mem] = time.monotonic() - t0
    bad = 0
    print(f"{'trace':48s} {'cycles':>9s} {'rd':>7s} {'wr':>7s} {'cv rd':>7s} {'cv wr':>7s}  same  "
          "simulated cycles per CPU second: python, sim")
    for d in dirs:
        p, s = res["python"].get(d.name), res["sim"].get(d.name)
        if p is None or s is None:
            print(f"{d.name:48s} missing result")
            bad += 1
            continue
        same = _key(p) == _key(s) and p.status == "PASS"
        bad += not same

        def r(x):
            x = x.rtl
            return x["sim_cycles"] / x["sim_cpu"] if x.get("sim_cpu") else 0.0
        x = s.rtl
        print(f"{d.name:48s} {s.cycles!s:>9s} {x.get('rd_beats')!s:>7s} {x.get('wr_beats')!s:>7s} "
              f"{x.get('cv_rd_beats') if x.get('cv_rd_beats') is not None else '-'!s:>7s} "
              f"{x.get('cv_wr_beats') if x.get('cv_wr_beats') is not None else '-'!s:>7s}  "
              f"{'yes ' if same else 'NO  '}  {r(p):9.0f} {r(s):9.0f}"
              + ("" if same else f"\n    python: {_key(p)[:10]} {p.message[:200]}\n    sim:    "
                                 f"{_key(s)[:10]} {s.message[:200]}"))
    for mem in ("python", "sim"):
        cyc = sum((r.rtl.get("sim_cycles") or 0) for r in res[mem].values())
        wall = sum((r.rtl.get("sim_wall") or 0) for r in res[mem].values())
        cpu = sum((r.rtl.get("sim_cpu") or 0) for r in res[mem].values())
        print(f"# {mem}: {len(res[mem])} traces, {cyc} cycles simulated in {wall:.1f} s wall / "
              f"{cpu:.1f} s CPU inside the simulators ({cyc / wall if wall else 0:,.0f} cycles per "
              f"wall second, {cyc / cpu if cpu else 0:,.0f} per CPU second), {walls[mem]:.1f} s "
              f"wall in all with -j {a.jobs}")
    print(f"# {len(dirs) - bad} of {len(dirs)} traces identical ({timing})")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
