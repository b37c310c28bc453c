"""Training programs of the profile-guided simulator builds (``sim.build``, issue 12).

A profile-guided build compiles the Verilator model with GCC's ``-fprofile-generate``, plays
these programs on it, and compiles it again with ``-fprofile-use``: the compiler then lays out
the generated model's branches and functions for what the design does per cycle. The programs
are random legal register programs of every layer type from ``verif.gen`` (``KINDS`` x
``SEEDS``: direct and image convolutions, SDP, PDP, CDP), never NVIDIA's traces, so benchmarks
on NVIDIA's traces (``scripts/bench_rtl.py``) measure a model that was not trained on them.
Their results are checked against the model like any sweep (``verif.gen.run.judge``) and
counted in the summary; a failing program is reported, not raised (the profile is still
valid: it only steers optimisation, never what the model computes).

``sim.build`` knows nothing of this module (the simulator build sits below the verification
layer): its callers pass the training. :data:`TRAINING` is the ``sim.build.Training`` of these
programs and :func:`build_sim` is ``sim.build.build_sim`` with it - what the trace runner, the
trace CLI, the cluster workers, verif.sw, the scripts and the tests call.
"""
from __future__ import annotations

import tempfile
import time
from collections import Counter
from pathlib import Path

from sim import build as _sb

#: layer types and seeds of the training programs (``verif.gen.run.generate``)
KINDS = ("dc", "img", "sdp", "pdp", "cdp")
SEEDS = (1, 2)
#: memory timing profile of the training plays (the trace tests' default)
MEM_PROFILE = "nvidia"
#: part of the build cache key (``sim.build``): change it when the training changes
RECIPE = f"verif.gen {'+'.join(KINDS)} seeds {SEEDS} {MEM_PROFILE} v1"


def train(build, rtl_filelist=None) -> str:
    """Play the training programs on the instrumented simulator ``build`` (a
    ``sim.build.SimBuild`` of ``build.config``; one simulator process; ``rtl_filelist``: the
    file list of another port-compatible NV_nvdla it was built from, e.g. NVIDIA's RTL, for the
    AXI IDs it may use). Returns a one-line summary: programs run and passed, simulated cycles,
    wall seconds. Raises what the program generators or the model raise for a configuration
    they do not support (e.g. ``ValueError``, ``GenError``)."""
    from hdl.config import get_config
    from verif.axi_slave import MemTiming
    from verif.gen.run import generate, judge, prepare
    from verif.trace.rtl_runner import run_rtl
    cfg = get_config(build.config)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="nvdla-pgo-") as tmp:
        preps = [prepare(generate(kind, seed, cfg), Path(tmp), cfg)
                 for kind in KINDS for seed in SEEDS]
        by_name = {p.dir.name: p for p in preps}
        status, cycles = Counter(), 0
        for res in run_rtl([p.dir for p in preps], build.config, build=build,
                           rtl_filelist=rtl_filelist,
                           timing=MemTiming.named(MEM_PROFILE), traces_per_process=len(preps),
                           run_root=build.directory / "pgo-train"):
            out = judge(by_name[res.name], res, cfg, MEM_PROFILE, 0, rtl_filelist)
            status[out.status] += 1
            cycles += (getattr(res, "rtl", {}) or {}).get("sim_cycles") or 0
    bad = sum(n for s, n in status.items() if s != "pass")
    return (f"trained on {len(preps)} random programs ({', '.join(KINDS)}; seeds "
            f"{', '.join(map(str, SEEDS))}): {status['pass']} passed"
            + (f", {bad} did not ({dict(status)})" if bad else "")
            + f", {cycles:,} cycles simulated in {time.monotonic() - t0:.1f} s")


#: the training of the project's profile-guided builds (``sim.build.build_sim(training=...)``)
TRAINING = _sb.Training(RECIPE, train)


def build_sim(config: str = "nv_small", **kw) -> "_sb.SimBuild":
    """``sim.build.build_sim(config, **kw)`` with :data:`TRAINING` as its training (unless
    ``training=`` is given): the project's cached simulator build of ``config`` (same arguments,
    return value and errors as ``sim.build.build_sim``)."""
    kw.setdefault("training", TRAINING)
    return _sb.build_sim(config, **kw)
