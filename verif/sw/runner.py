"""Run a loadable through NVIDIA's runtime and firmware on one engine and judge its output image
against NVIDIA's golden md5 (shared by ``python -m verif.sw`` and the tests).

:func:`run_loadable` builds the program (:func:`verif.sw.build.build_sw`, cached), plays it on
the ``model`` (in this process), ``amaranth`` (in this process, Amaranth's simulator) or ``rtl``
engine (a Verilator + cocotb simulator process running ``verif.cocotb_tb.sw_tb``; the same
cached Verilator build as the trace tests, ``sim.build.build_sim``), writes the output image and
returns a :class:`SwResult`. Each run works in its own directory
``build/sw/runs/<test>/<engine>-<time>-<pid>-<n>/`` (the runtime's log ``runtime.log``, the
output image ``o_000000.dimg``, the simulator's files under ``sim/``).

Goldens (``../shared/nvdla/sw/README.md``): NVIDIA's regression keeps, per test,
``regression/golden/<test>_<6 hex digits>/dla/lead.md5`` (the md5 of ``o_000000.dimg``, the
runtime's serialisation of the output tensor) beside that image; a loadable
``regression/flatbufs/kmd/<UNIT>/<test>_fbuf`` is test ``<test>``.
"""
from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
import re
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hdl.config import NvdlaConfig
from sim.build import BUILD_ROOT
from verif.axi_slave import MemTiming
from verif.sw.build import build_sw, sw_source_dir
from verif.sw.dimg import first_difference
from verif.sw.host import HostOutcome, run_program
from verif.trace.player import FAIL, PASS

ENGINES = ("model", "rtl", "amaranth")
SW_RUNS = BUILD_ROOT / "sw" / "runs"
#: default cycles one interrupt wait may take on the simulated engines (``--max-cycles``)
DEFAULT_INTR_BUDGET = 5_000_000
_MD5 = re.compile(r"^[0-9a-f]{32}$")


class GoldenError(Exception):
    """No usable golden for a loadable (missing or malformed ``lead.md5``)."""


@dataclass
class Golden:
    """A golden: the md5 from ``lead.md5`` and the golden image bytes when they are beside it."""
    md5: str
    path: Path
    image: bytes | None = None


@dataclass
class SwResult:
    """Outcome of one loadable on one engine: ``status`` PASS/FAIL, ``message`` (why it failed:
    the task and operation, the first wrong element), ``md5`` of the output image and the
    ``golden`` md5, ``output`` (where the image was written), ``cycles`` (first kick-off to last
    interrupt on the simulated engines), ``wall`` seconds, ``stats`` (register, memory and
    interrupt counts, simulated cycles), ``log`` (the runtime's output), ``timeline`` (kick-offs
    and done interrupts with their cycles, ``verif.sw.host.FirmwareHost.timeline``), ``probe``
    (the bytes ``run_loadable``'s ``probe`` asked for, or None)."""
    name: str
    engine: str
    status: str
    message: str = ""
    md5: str | None = None
    golden: str | None = None
    output: Path | None = None
    cycles: int | None = None
    wall: float = 0.0
    stats: dict = field(default_factory=dict)
    log: Path | None = None
    timeline: list = field(default_factory=list)
    probe: bytes | None = None


def loadable_name(loadable: Path) -> str:
    """The regression test a loadable file is: ``CONV_D_L0_0_small_fbuf`` -> ``CONV_D_L0_0_small``
    (``regression/scripts/KmdRunScript.py``: test file = test name + ``_fbuf``)."""
    name = Path(loadable).name
    return name[:-len("_fbuf")] if name.endswith("_fbuf") else Path(name).stem


def golden_root() -> Path:
    """NVIDIA's regression goldens, ``../shared/nvdla/sw/regression/golden``."""
    return sw_source_dir() / "regression" / "golden"


def find_golden(name: str, golden: Path | None = None) -> Golden:
    """The golden of test ``name``: in ``golden`` (a directory holding ``lead.md5``, or its
    ``dla/`` parent) when given, else ``golden_root()/<name>_<6 hex>/dla``. Raises GoldenError."""
    if golden is not None:
        cands = [Path(golden), Path(golden) / "dla"]
    else:
        root = golden_root()
        cands = [d / "dla" for d in sorted(root.glob(f"{name}_*"))
                 if re.fullmatch(re.escape(name) + r"_[0-9a-f]{6}", d.name)] if root.is_dir() else []
        if not cands:
            raise GoldenError(f"{name}: no golden {root}/{name}_<hash>/dla/lead.md5")
    for d in cands:
        f = d / "lead.md5"
        if f.is_file():
            words = f.read_text(errors="replace").split()
            if not words or not _MD5.match(words[0].lower()):
                raise GoldenError(f"{name}: malformed golden {f} (no md5 in its first word)")
            img = d / "o_000000.dimg"
            return Golden(words[0].lower(), f, img.read_bytes() if img.is_file() else None)
    raise GoldenError(f"{name}: no lead.md5 in {' or '.join(str(c) for c in cands)}")


_RUN_COUNTER = itertools.count()
#: run directories older than this are removed when a new run of the same test starts
KEEP_RUNS_S = 24 * 3600


def _run_dir(name: str, engine: str) -> Path:
    """A new directory ``build/sw/runs/<test>/<engine>-<time>-<pid>-<n>`` for one run (runs of
    one test in parallel, e.g. pytest-xdist workers, never share one); runs of the test older
    than ``KEEP_RUNS_S`` are removed."""
    root = SW_RUNS / name
    now = time.time()
    if root.is_dir():
        for d in root.iterdir():
            try:
                if d.is_dir() and now - d.stat().st_mtime > KEEP_RUNS_S:
                    shutil.rmtree(d, ignore_errors=True)
            except OSError:
                pass
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return root / f"{engine}-{stamp}-{os.getpid()}-{next(_RUN_COUNTER)}"


def _judge(res: SwResult, out: HostOutcome, golden: Golden | None, output: Path) -> SwResult:
    res.stats, res.cycles, res.log = dict(out.stats), out.cycles, out.log
    res.timeline = list(out.timeline)
    res.probe = out.probe
    if out.output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_bytes(out.output)
        res.output = output
        res.md5 = hashlib.md5(out.output).hexdigest()
    msgs = [out.message] if out.message else []
    if golden is not None and res.md5 is not None and res.md5 != golden.md5:
        note = f"output md5 {res.md5} != golden {golden.md5} ({golden.path})"
        if golden.image is not None:
            diff = first_difference(out.output, golden.image)
            if diff:
                note += f"; {diff}"
        msgs.append(note)
    res.message = "; ".join(msgs)
    res.status = FAIL if msgs else PASS
    return res


def run_loadable(loadable: Path, engine: str = "model", cfg: NvdlaConfig | None = None, *,
                 timing: MemTiming | None = None, golden: Path | None = None,
                 check_golden: bool = True, output: Path | None = None, image: Path | None = None,
                 max_cycles: int | None = None, waves: bool = False, debug: bool = False,
                 memory: str | None = None, axi_ids: dict | str | None = "auto",
                 kmd: Path | None = None, probe: tuple[str, int] | None = None) -> SwResult:
    """Run ``loadable`` on ``engine`` with configuration ``cfg`` (default nv_small) and memory
    ``timing`` (default the ``nvidia`` profile), write the output image to ``output``
    (default ``o_000000.dimg`` in the run's directory, see the module docstring) and compare
    its md5 with the golden (:func:`find_golden`; ``check_golden=False`` only runs). A missing or malformed golden, a
    missing loadable, a failed build, a firmware or engine failure all give a FAIL result with
    the reason; ValueError only for an unknown engine. rtl only: ``waves`` (FST in
    ``build/waves/sw_<name>.fst``), ``memory`` (``sim``/``python``), ``axi_ids`` (the AXI IDs
    the monitor allows, as ``verif.trace.rtl_runner.run_rtl``). ``kmd``: NVIDIA's firmware from
    another ``kmd`` directory (``verif.sw.build.build_sw``). ``probe``: as
    :func:`verif.sw.host.run_program`'s; the bytes go to ``SwResult.probe``."""
    from hdl.config import NV_SMALL
    from verif.sw.build import SwBuildError
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r} (one of {', '.join(ENGINES)})")
    cfg = cfg or NV_SMALL
    timing = timing or MemTiming.named("nvidia")
    loadable = Path(loadable)
    name = loadable_name(loadable)
    res = SwResult(name, engine, FAIL)
    t0 = time.monotonic()
    gold = None
    try:
        if not loadable.is_file():
            raise GoldenError(f"{name}: loadable {loadable} not found")
        if check_golden:
            gold = find_golden(name, golden)
            res.golden = gold.md5
        build = build_sw(cfg.name, kmd=kmd)
    except (GoldenError, SwBuildError) as e:
        res.message = str(e)
        res.wall = time.monotonic() - t0
        return res
    run_dir = _run_dir(name, engine)
    output = Path(output) if output else run_dir / "o_000000.dimg"
    budget = max_cycles or DEFAULT_INTR_BUDGET
    kw = dict(image=image, intr_budget=budget, debug=debug, probe=probe)
    if engine == "model":
        from verif.trace.model_engine import ModelEngine
        out = asyncio.run(run_program(ModelEngine(cfg), build.program, loadable, run_dir, **kw))
    elif engine == "amaranth":
        out = _run_amaranth(cfg, timing, build.program, loadable, run_dir, kw)
    else:
        out = _run_rtl(cfg, timing, build.program, loadable, run_dir, kw, waves, memory, name,
                       axi_ids)
    res = _judge(res, out, gold, output)
    res.wall = time.monotonic() - t0
    return res


def _run_amaranth(cfg, timing, program, loadable, run_dir, kw) -> HostOutcome:
    from verif.trace.amaranth_engine import PERIOD, simulate
    box = {}

    async def bench(eng):
        box["out"] = await run_program(eng, program, loadable, run_dir, **kw)

    eng = simulate(cfg, bench, timing=timing, csb_period=PERIOD)
    out = box["out"]
    eng.csb_mon.check_idle(eng.cycle)
    if eng.axi.monitor is not None:
        eng.axi.monitor.check_idle(eng.cycle)
    err = eng.axi.error or eng.csb_mon.error
    if err and err not in out.message:
        out.message = f"protocol error: {err}" + (f"; {out.message}" if out.message else "")
        out.ok = False
    out.stats["sim_cycles"] = eng.cycle
    return out


def _run_rtl(cfg, timing, program, loadable, run_dir, kw, waves, memory, name,
             axi_ids="auto") -> HostOutcome:
    import sys

    from sim.build import REPO
    from verif.trace.pgo import build_sim
    from verif.trace.rtl_runner import WAVES_DIR, _axi_ids, _log_tail, _run_batch
    sim = build_sim(cfg.name, waves=waves)
    if str(REPO) not in sys.path:      # the simulator's PYTHONPATH is this process's sys.path
        sys.path.insert(0, str(REPO))
    wpath = None
    if waves:
        WAVES_DIR.mkdir(parents=True, exist_ok=True)
        wpath = WAVES_DIR / f"sw_{name}.fst"
    eng = {"axi_ids": _axi_ids(axi_ids, cfg.name, None)}
    if memory is not None:
        eng["memory"] = memory
    sim_dir = run_dir / "sim"
    tb = {"program": str(program), "loadable": str(Path(loadable).resolve()),
          "image": str(Path(kw["image"]).resolve()) if kw.get("image") else None,
          "workdir": str(run_dir.resolve()), "timing": asdict(timing), "engine": eng,
          "intr_budget": kw["intr_budget"], "debug": kw.get("debug", False),
          "probe": list(kw["probe"]) if kw.get("probe") else None,
          "config": cfg.name}     # its register map places the host's reads (v1 on nv_full)
    got, log, err = _run_batch(sim, [], sim_dir, tb, wpath, tb_module="verif.cocotb_tb.sw_tb",
                               env_name="NVDLA_SW_TB")
    if not got:
        why = err or "simulator ended without a result"
        return HostOutcome(False, f"simulation aborted ({why}); log: {log}; {_log_tail(log)}",
                           log=log)
    d = got[-1]
    out_file = run_dir / "output.dimg"
    stats = dict(d.get("stats") or {}, sim_cycles=d.get("sim_cycles"),
                 sim_wall=round(d.get("sim_wall") or 0, 2), rd_beats=d.get("rd_beats"),
                 wr_beats=d.get("wr_beats"), rd_reqs=d.get("rd_reqs"), wr_reqs=d.get("wr_reqs"))
    return HostOutcome(d["ok"], d["message"], out_file.read_bytes() if out_file.is_file() else None,
                       d.get("exit_code"), stats, d.get("cycles"),
                       Path(d["log"]) if d.get("log") else None, d.get("firmware_errors") or [],
                       [tuple(t) for t in d.get("timeline") or []],
                       bytes.fromhex(d["probe"]) if d.get("probe") else None)
