"""Generate random programs, take the model's output as the expected bytes, play them on the
RTL and report every difference (issue 11 items 1, 2, 9).

:func:`prepare` writes a program as a trace directory with the model's CRCs (a legal program
that the model rejects with ``ModelConfigError`` is a generator bug: :class:`GenError`);
:func:`run_programs` plays many of them on the rtl engine in batches per simulator process and
yields one :class:`Outcome` per program: ``pass``, ``mismatch`` (first differing byte as
unit/layer/w,h,c with expected and got, the seed and a command reproducing it; the trace
directory is kept), ``fail`` (the RTL did not finish or broke a protocol rule), and for the
illegal programs ``hang-ok`` (the model rejected it naming the registers and the RTL failed on
the cycle budget naming busy units) or ``illegal-bad`` (anything else, e.g. a valid-looking
result). A program whose completion the model decides (``Program.legal`` None, the
``sdp_operands`` kind) is judged as legal when the model completes it and as illegal when the
model rejects it.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from verif.gen.common import Program

KINDS = ("sdp", "pdp", "cdp", "sdp_operands", "dc", "img")
#: layer types of optional units or modes, generated only for configurations that have them:
#: kind -> the configuration flag it needs, or a tuple of flags it needs all of
OPTIONAL_KINDS = {"bdma": "bdma", "rubik": "rubik", "deconv": "rubik", "batch": "batch",
                  "compressed": "weight_compression",
                  "batch_compressed": ("batch", "weight_compression")}


def kind_flags(kind: str) -> tuple[str, ...]:
    """The configuration flags optional layer type ``kind`` needs (all of them)."""
    flag = OPTIONAL_KINDS[kind]
    return (flag,) if isinstance(flag, str) else flag


def kinds_for(cfg) -> tuple[str, ...]:
    """The layer types ``cfg`` can run: ``KINDS`` and the optional ones whose units and modes
    it has."""
    return KINDS + tuple(k for k in OPTIONAL_KINDS if all(getattr(cfg, f) for f in kind_flags(k)))


class GenError(AssertionError):
    """A generated legal program the model rejects (the generator broke a rule)."""


def generate(kind: str, seed: int, cfg) -> Program:
    """The program of layer type ``kind`` (one of ``KINDS`` or ``OPTIONAL_KINDS``) drawn from
    ``seed``. Raises ValueError for an unknown kind or one the configuration lacks the unit of."""
    if kind in ("sdp", "sdp_operands"):
        from functools import partial

        from verif.gen.sdp import generate as sdp_generate
        g = partial(sdp_generate, mismatch=kind == "sdp_operands")
    elif kind == "pdp":
        from verif.gen.pdp import generate as g
    elif kind == "cdp":
        from verif.gen.cdp import generate as g
    elif kind == "dc":
        from verif.gen.dc import generate as g
    elif kind == "img":
        from verif.gen.img import generate as g
    elif kind == "bdma":
        from verif.gen.bdma import generate as g
    elif kind == "rubik":
        from verif.gen.rubik import generate as g
    elif kind == "deconv":
        from verif.gen.deconv import generate as g
    elif kind == "batch":
        from verif.gen.dc import generate_batch as g
    elif kind == "compressed":
        from verif.gen.dc import generate_compressed as g
    elif kind == "batch_compressed":
        from verif.gen.dc import generate_batch_compressed as g
    else:
        raise ValueError(f"unknown layer type {kind!r} (one of "
                         f"{', '.join(KINDS + tuple(OPTIONAL_KINDS))})")
    prog = g(seed, cfg)
    if cfg.secondary_memif and kind not in ("bdma", "deconv"):     # they draw their own memories
        # both memories (verif.gen.common.spread_over_memories); its own random stream, so a
        # seed draws the same layers with and without the secondary memory interface
        import random

        from verif.gen.common import spread_over_memories
        spread_over_memories(prog, random.Random(f"memories-{kind}-{seed}"))
    return prog


@dataclass
class Prepared:
    """A program written as a trace: directory, and the model's result (``model.checks[i].data``:
    the expected bytes of check ``i``; for an illegal program the model's rejection)."""
    prog: Program
    dir: Path
    model: object


def prepare(prog: Program, root: Path, cfg) -> Prepared:
    """Write ``prog`` under ``root/<name>`` with the model's CRCs. Raises GenError when a legal
    program does not run on the model (or an illegal one does)."""
    import warnings

    from verif.gen.writer import fill_crcs_from_model
    from verif.model import LimitationWarning
    d = Path(root) / prog.name
    if d.exists():
        shutil.rmtree(d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LimitationWarning)
        res = fill_crcs_from_model(prog.writer, d, cfg)
    complete = len(res.checks) == len(prog.writer.checks)
    if prog.legal is None:          # the model decides
        if not complete and "ModelConfigError" not in res.message:
            raise GenError(f"{prog.kind} seed {prog.seed}: the model neither completed nor "
                           f"rejected the program ({res.status}: {res.message})\n  {prog.describe()}")
        prog.legal = complete
    if prog.legal and not complete:
        raise GenError(f"{prog.kind} seed {prog.seed}: the model rejected a generated legal "
                       f"program: {res.message}\n  {prog.describe()}\n  trace: {d}")
    if not prog.legal and (complete or "ModelConfigError" not in res.message):
        raise GenError(f"{prog.kind} seed {prog.seed}: the model did not reject a program NVIDIA's "
                       f"hardware cannot complete ({res.status}: {res.message})\n  {prog.describe()}")
    return Prepared(prog, d, res)


def first_difference(trace_dir: Path, base: int, expected: bytes, got: bytes, cfg) -> str:
    """The first byte where ``got`` differs from ``expected`` (a check region at ``base``) as
    ``unit layer N at w,h,c``, with both values and how many bytes differ."""
    from verif.trace.golden import output_cubes
    from verif.trace.parser import load_trace
    e = np.frombuffer(expected, np.uint8)
    g = np.frombuffer(got, np.uint8)
    if e.size != g.size:
        return f"region {base:#x}: expected {e.size} bytes, got {g.size}"
    diff = np.flatnonzero(e != g)
    if diff.size == 0:
        return f"region {base:#x}: no difference"
    i = int(diff[0])
    addr = base + i
    where = f"address {addr:#x} (outside every output cube: a write into a gap)"
    for cube in reversed(output_cubes(load_trace(trace_dir))):
        loc = cube.locate(addr, cfg.atom_bytes)
        if loc is not None:
            where = f"{cube.unit} layer {cube.layer} at w={loc[0]} h={loc[1]} c={loc[2]} ({addr:#x})"
            break
    return (f"first wrong byte: {where}: expected {e[i]:#04x} ({np.int8(e[i])}), got "
            f"{g[i]:#04x} ({np.int8(g[i])}); {diff.size} of {e.size} bytes differ")


@dataclass
class Outcome:
    """Result of one program on the RTL: ``status`` (pass, mismatch, fail, hang-ok,
    illegal-bad), the report, cycles, and the trace directory."""
    kind: str
    seed: int
    status: str
    message: str
    dir: Path
    cycles: int | None = None

    @property
    def ok(self) -> bool:
        return self.status in ("pass", "hang-ok")


def repro_command(d: Path, mem_profile: str, seed: int, rtl_filelist: Path | None = None,
                  cfg=None) -> str:
    """The command that replays trace directory ``d`` as the sweep played it: memory profile
    and seed, another NV_nvdla's file list, and the configuration ``cfg`` (its full name,
    overrides included) unless it is nv_small, the CLI's default."""
    name = getattr(cfg, "name", "nv_small")
    return (f"python -m verif.trace run {d} --engine rtl --mem-profile {mem_profile}"
            + (f" --seed {seed}" if mem_profile == "random" else "")
            + (f" --config {name}" if name != "nv_small" else "")
            + (f" --rtl-filelist {rtl_filelist}" if rtl_filelist else ""))


def judge(p: Prepared, res, cfg, mem_profile: str, mem_seed: int,
          rtl_filelist: Path | None = None) -> Outcome:
    """Compare one RTL result with the model's (module docstring)."""
    from verif.trace.player import PASS
    prog = p.prog
    cmd = repro_command(p.dir, mem_profile, mem_seed, rtl_filelist, cfg)
    head = f"{prog.kind} seed {prog.seed}"
    if not prog.legal:
        if res.status != PASS and "no interrupt within" in res.message and "units still busy: " in res.message \
                and "units still busy: none" not in res.message:
            return Outcome(prog.kind, prog.seed, "hang-ok", res.message, p.dir, res.cycles)
        return Outcome(prog.kind, prog.seed, "illegal-bad",
                       f"{head}: program NVIDIA's RTL cannot complete; expected a timeout naming busy "
                       f"units, got {res.status}: {res.message}\n  model: {p.model.message}\n"
                       f"  {prog.describe()}\n  reproduce: {cmd}", p.dir, res.cycles)
    if res.status == PASS:
        return Outcome(prog.kind, prog.seed, "pass", "", p.dir, res.cycles)
    notes = []
    for k, c in enumerate(res.checks):
        if not c.ok and c.data and k < len(p.model.checks):
            notes.append(first_difference(p.dir, c.base, p.model.checks[k].data, c.data, cfg))
    status = "mismatch" if notes else "fail"
    msg = (f"{head}: {'MISMATCH' if notes else 'FAIL'} {res.message}"
           + "".join(f"\n  {n}" for n in notes)
           + f"\n  program: {prog.describe()}\n  trace kept: {p.dir}\n  reproduce: {cmd}")
    return Outcome(prog.kind, prog.seed, status, msg, p.dir, res.cycles)


def run_programs(preps: list[Prepared], cfg, *, mem_profile: str = "random", mem_seed: int = 1,
                 jobs: int = 1, per_process: int = 16, rtl_filelist: Path | None = None,
                 axi_ids="auto", warmup=None) -> Iterator[Outcome]:
    """Play the prepared programs on the rtl engine (``per_process`` programs per simulator
    process, ``jobs`` processes) and judge each (yields in completion order). ``rtl_filelist``:
    another port-compatible ``NV_nvdla`` (e.g. NVIDIA's own RTL) instead of ours; ``axi_ids``: the
    AXI IDs the monitor allows (``verif.trace.rtl_runner.run_rtl``; None: any); ``warmup``:
    trace directories played first in every simulator process (``run_rtl``)."""
    from verif.axi_slave import MemTiming
    from verif.trace.runner import run
    by_name = {p.dir.name: p for p in preps}
    timing = MemTiming.named(mem_profile, seed=mem_seed)
    for res in run([p.dir for p in preps], "rtl", cfg, jobs=jobs, timing=timing,
                   traces_per_process=per_process, rtl_filelist=rtl_filelist, axi_ids=axi_ids,
                   **({"warmup": warmup} if warmup else {})):
        yield judge(by_name[res.name], res, cfg, mem_profile, mem_seed, rtl_filelist)


def prepare_all(kinds: Iterable[str], seeds: Iterable[int], root: Path, cfg) -> tuple[list[Prepared], list[str]]:
    """Generate and prepare every (kind, seed); returns (prepared, generator errors)."""
    preps, errors = [], []
    for kind in kinds:
        for seed in seeds:
            try:
                preps.append(prepare(generate(kind, seed, cfg), root, cfg))
            except GenError as e:
                errors.append(str(e))
            except ValueError as e:     # a field out of its register's range: a generator bug
                errors.append(f"{kind} seed {seed}: the generator drew an unprogrammable value: {e}")
    return preps, errors
