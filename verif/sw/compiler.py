"""Build NVIDIA's network compiler (``umd/core/src/compiler`` + ``umd/apps/compiler``) from
``../shared/nvdla/sw`` into ``build/sw/compiler-<hash>/nvdla_compiler`` (issue 31 item 4).

Facts used (``../shared/nvdla/sw/README.md``): the compiler's generated ``.pb.cpp`` files need
protobuf 2.6.1 exactly (Debian's protobuf 3 does not fit), so the bundled
``umd/external/protobuf-2.6`` is built first: copied into the build directory (its autotools
outputs are touched there, newest last, so that make does not regenerate them; the copy lives in
``build/``, never in the repository), ``./configure --disable-shared --with-pic`` and
``make -C src libprotobuf.la`` (about 3 minutes); gcc 12 needs ``<limits>`` in
``core/src/compiler/include/priv/Type.h`` (``-include limits`` here). The compiler's source list
is read from NVIDIA's ``rules.mk`` files. Every step leaves its output in the build directory, so
an interrupted build resumes where it stopped. ``python -m verif.sw compiler`` runs it.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from sim.build import BUILD_ROOT, _locked
from verif.sw.build import SwBuildError, _digest, _run, _tool, sw_source_dir

RECIPE = 1
CXXFLAGS = ("-O2", "-fPIC", "--std=c++11", "-fexceptions", "-fno-rtti", "-include", "limits",
            "-w")
CFLAGS = ("-O2", "-fPIC", "--std=gnu99", "-w")
#: autotools outputs of protobuf-2.6, oldest first (touched in this order after the copy)
AUTOTOOLS_OUTPUTS = ("aclocal.m4", "configure", "Makefile.in", "src/Makefile.in", "config.h.in")


def _rules_sources(rules: Path) -> list[str]:
    """The file names listed under ``NVDLA_SRC_FILES :=`` in one of NVIDIA's ``rules.mk``."""
    text = rules.read_text()
    m = re.search(r"NVDLA_SRC_FILES\s*:=\s*\\\n((?:[^\n]*\\\n)*[^\n]*)", text)
    if not m:
        raise SwBuildError(f"no NVDLA_SRC_FILES list in {rules}")
    return [w for w in m.group(1).replace("\\", " ").split() if w]


def _protobuf(sw: Path, out: Path, log: Path) -> Path:
    """Build libprotobuf.a (2.6.1) in ``out/protobuf``; returns the source tree (headers in
    ``src/``)."""
    src = sw / "umd" / "external" / "protobuf-2.6"
    tree = out / "protobuf"
    lib = tree / "src" / ".libs" / "libprotobuf.a"
    if lib.is_file():
        return tree
    if not (src / "configure").is_file():
        raise SwBuildError(f"NVIDIA's bundled protobuf not found at {src}")
    if tree.exists():
        shutil.rmtree(tree)
    shutil.copytree(src, tree, symlinks=True)
    for p in tree.rglob("*"):                       # the copy is ours: make it writable
        if not p.is_symlink():
            p.chmod(p.stat().st_mode | 0o200)
    now = time.time()
    for i, name in enumerate(AUTOTOOLS_OUTPUTS):    # newest last: no autotools rerun
        p = tree / name
        if p.exists():
            os.utime(p, (now + i, now + i))
    env_cmd = ["./configure", "--disable-shared", "--with-pic"]
    _run_in(env_cmd, tree, log, "protobuf-2.6 configure")
    _run_in(["make", "-C", "src", "-j1", "libprotobuf.la"], tree, log, "protobuf-2.6 libprotobuf")
    if not lib.is_file():
        raise SwBuildError(f"protobuf-2.6 built no {lib} (log: {log})")
    return tree


def _run_in(cmd: list[str], cwd: Path, log: Path, what: str) -> None:
    with open(log, "a") as fh:
        fh.write(f"$ (cd {cwd}; {' '.join(cmd)})\n")
        fh.flush()
        r = subprocess.run(cmd, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        raise SwBuildError(f"{what} failed (rc {r.returncode}; log: {log})")


def build_compiler(*, log=None) -> Path:
    """Build (or find) ``nvdla_compiler``; returns its path. ``log``: optional callable given
    progress lines. Raises SwBuildError (one line: what is missing or which step failed)."""
    cc, cxx = _tool("gcc"), _tool("g++")
    _tool("make")
    sw = sw_source_dir()
    umd = sw / "umd"
    comp, app = umd / "core" / "src" / "compiler", umd / "apps" / "compiler"
    if not (comp / "rules.mk").is_file() or not (app / "rules.mk").is_file():
        raise SwBuildError(f"NVIDIA's compiler sources not found under {umd} "
                           "(../shared/nvdla/sw, or $NVDLA_SHARED)")
    lib_srcs = [(comp / s).resolve() if not s.startswith("$(ROOT)") else
                umd / s.replace("$(ROOT)/", "") for s in _rules_sources(comp / "rules.mk")]
    app_srcs = [app / s for s in _rules_sources(app / "rules.mk")]
    missing = [p for p in lib_srcs + app_srcs if not p.is_file()]
    if missing:
        raise SwBuildError(f"NVIDIA's compiler source missing: {missing[0]}")
    headers = [p for d in ("include", "core/include", "core/src/compiler", "core/src/common/include",
                           "external/include", "port/linux")
               for p in (umd / d).rglob("*") if p.is_file() and p.suffix in (".h", ".hpp")]
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout
    key = _digest(lib_srcs + app_srcs + headers + [Path(__file__)],
                  repr((RECIPE, CXXFLAGS, CFLAGS, version)))
    out = BUILD_ROOT / "sw" / f"compiler-{key}"
    program = out / "nvdla_compiler"
    with _locked(BUILD_ROOT / "sw" / "compiler.lock"):
        if program.is_file():
            return program
        out.mkdir(parents=True, exist_ok=True)
        blog = out / "build.log"
        t0 = time.monotonic()
        if log:
            log(f"building protobuf 2.6.1 (NVIDIA's bundled copy) in {out / 'protobuf'}")
        pb = _protobuf(sw, out, blog)
        inc = [f"-I{comp / 'include'}", f"-I{umd / 'include'}", f"-I{umd / 'core/include'}",
               f"-I{umd / 'external/include'}", f"-I{umd / 'port/linux/include'}",
               f"-I{umd / 'core/src/common/include'}", f"-I{pb / 'src'}", f"-I{umd / 'port/linux'}",
               f"-I{app}"]
        defs = ['-DNVDLA_UTILS_ERROR_TAG="DLA"', "-DGOOGLE_PROTOBUF_NO_RTTI",
                "-DNVDLA_COMPILER_OUTPUT_FOR_PROTOTEST"]
        obj = out / "obj"
        obj.mkdir(exist_ok=True)
        objects = []
        srcs = lib_srcs + app_srcs
        for i, src in enumerate(srcs):
            o = obj / f"{i:03d}_{src.stem}.o"
            if not o.is_file():
                if log:
                    log(f"[{i + 1}/{len(srcs)}] {src.relative_to(umd)}")
                if src.suffix == ".c":
                    cmd = [cc, *CFLAGS, '-DNVDLA_UTILS_ERROR_TAG="DLA"', *inc]
                else:
                    cmd = [cxx, *CXXFLAGS, *defs, *inc]
                tmp = o.with_suffix(".tmp.o")
                _run([*cmd, "-c", str(src), "-o", str(tmp)], blog, src)
                tmp.replace(o)
            objects.append(o)
        tmp = out / "nvdla_compiler.tmp"
        _run([cxx, *map(str, objects), str(pb / "src" / ".libs" / "libprotobuf.a"), "-pthread",
              "-o", str(tmp)], blog, "the link of nvdla_compiler")
        tmp.replace(program)
        if log:
            log(f"built NVIDIA's compiler in {time.monotonic() - t0:.0f} s: {program}")
        return program
