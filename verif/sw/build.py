"""Compile NVIDIA's UMD runtime application and KMD firmware with the project's port layer into
one program, ``build/sw/<firmware>-<hash>/nvdla_runtime``.

NVIDIA's sources are read from ``../shared/nvdla/sw`` (``$NVDLA_SHARED``; see its README.md) and
never copied: the objects and the program go to the project's ``build/`` directory, cached by a
hash of every source file, the project's C glue (``verif/sw/csrc``), the flags and the compiler
version; a second call with nothing changed returns at once. Concurrent callers (pytest-xdist
workers) serialise on a lock file. What is compiled, and why (facts from
``../shared/nvdla/sw/README.md`` and NVIDIA's makefiles):

* the firmware ``kmd/firmware/*.c`` (13 files) as userspace C, with the project's
  ``<linux/types.h>`` stand-in (``csrc/include``); ``-DDLA_SMALL_CONFIG`` selects nv_small's
  register map (``kmd/firmware/include/opendla.h``; nv_large shares it, with NVIDIA's later
  ``nvdla_config_large``: ``FIRMWARE_VARIANTS``); without it the firmware writes nv_full's
  ``os_initial`` map (``opendla_initial.h``), NVDLA v1's map, which nv_full's configuration
  decodes (``hdl/regmap/v1.py``);
* the runtime library's sources as ``umd/core/src/runtime/rules.mk`` lists them, except
  NVIDIA's Linux port ``umd/port/linux/nvdla.c`` (ioctls), replaced by ``csrc/umd_port.c``;
  gcc 12 needs ``<limits>`` in ``core/src/common/include/priv/Type.h``: given here by
  ``-include limits`` instead of an edit;
* the runtime application ``umd/apps/runtime/*.cpp`` (``apps/runtime/rules.mk``), unmodified:
  it loads the loadable, submits it and writes ``output.dimg``. It links libjpeg (NVIDIA's
  bundled ``external/libjpeg.a`` is ARM): Debian's ``libjpeg62-turbo-dev`` when present, else
  ``csrc/jpeg_stub.c``, which fails a JPEG input with one line (the regression loadables and
  PGM images do not need it);
* the project's glue: ``csrc/channel.c`` (pipe protocol to the Python host),
  ``csrc/kmd_glue.c`` (the firmware's OS hooks and submit path), ``csrc/umd_port.c``.

A missing compiler or source is one :class:`SwBuildError` line.
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from sim.build import BUILD_ROOT, _locked
from verif.shared import nvdla_dir

CSRC = Path(__file__).resolve().parent / "csrc"
#: bump when the recipe below changes in a way the hashed inputs do not show
RECIPE = 1

#: the firmware's register maps (kmd/firmware/include/opendla.h: DLA_SMALL_CONFIG at c906fc6,
#: DLA_2_CONFIG in NVIDIA's later firmware; both are given): configuration preset -> (build tag,
#: preprocessor flags)
FIRMWARE_VARIANTS = {
    "nv_small": ("small", ("-DDLA_SMALL_CONFIG", "-DDLA_2_CONFIG")),
    # nv_large shares nv_small's (v2) register map; the firmware's configuration is NVIDIA's later
    # nvdla_config_large (csrc/kmd_glue.c)
    "nv_large": ("large", ("-DDLA_SMALL_CONFIG", "-DDLA_2_CONFIG", "-DNVDLA_SW_LARGE")),
    # nv_full: without DLA_SMALL_CONFIG the firmware programs its os_initial map
    # (kmd/firmware/include/opendla_initial.h: GLB at 0x0, BDMA at 0x4000, CDMA at 0x5000), which
    # is NVDLA v1's map, the one nv_full's configuration decodes (hdl/regmap/v1.py)
    "nv_full": ("full", ()),
}
#: configurations whose loadables NVIDIA's firmware cannot run on the project's engines, and why
NO_FIRMWARE: dict[str, str] = {}

RUNTIME_SOURCES = (      # umd/core/src/runtime/rules.mk, NVDLA_RUNTIME_SRC_FILES (less nvdla.c)
    "core/src/common/Check.cpp",
    "core/src/common/ErrorLogging.c",
    "core/src/common/EMUInterface.cpp",
    "core/src/common/EMUInterfaceA.cpp",
    "core/src/common/Loadable.cpp",
    "port/linux/nvdla_os.c",
    "core/src/runtime/Emulator.cpp",
    "core/src/runtime/Runtime.cpp",
)
RUNTIME_INCLUDES = ("include", "core/include", "core/src/common/include", "port/linux/include",
                    "external/include", "core/src/runtime/include", "core/src/runtime")
APP_SOURCES = ("DlaImage.cpp", "DlaImageUtils.cpp", "Server.cpp", "RuntimeTest.cpp",
               "TestUtils.cpp", "main.cpp")          # umd/apps/runtime/rules.mk
APP_INCLUDES = ("include", "core/include", "external/include", "apps/runtime")
FIRMWARE_INCLUDES = ("firmware/include", "include", "firmware")
# NVIDIA's flags (core/src/runtime/Makefile, apps/runtime/Makefile), warnings left out
CFLAGS = ("-Os", "-fPIC", "-finline", "--std=gnu99")
CXXFLAGS = ("-Os", "-fPIC", "-finline", "--std=c++11", "-fexceptions", "-fno-rtti",
            "-include", "limits")
FW_CFLAGS = ("-O2", "-fno-strict-aliasing", "--std=gnu99")


class SwBuildError(Exception):
    """NVIDIA's software could not be built: one line saying what is missing or which file
    failed (with the compiler log path)."""


@dataclass(frozen=True)
class SwBuild:
    """A finished build: ``program`` (NVIDIA's runtime application linked with the firmware and
    the project's glue), its ``directory``, the firmware ``variant`` and ``libjpeg``
    (``debian`` or ``stub``)."""
    program: Path
    directory: Path
    variant: str
    libjpeg: str


def sw_source_dir() -> Path:
    """``../shared/nvdla/sw`` (may not exist)."""
    return nvdla_dir() / "sw"


def firmware_variant(config_name: str) -> tuple[str, tuple[str, ...]]:
    """The firmware build for a configuration (``FIRMWARE_VARIANTS``, by preset: a ``--set``
    variant of nv_small uses nv_small's): (build tag, preprocessor flags). Raises SwBuildError
    for a configuration NVIDIA's firmware cannot drive (``NO_FIRMWARE`` says why)."""
    base = config_name.split("+")[0]
    if base in NO_FIRMWARE:
        raise SwBuildError(f"{config_name}: {NO_FIRMWARE[base]}")
    if base not in FIRMWARE_VARIANTS:
        names = list(FIRMWARE_VARIANTS)
        raise SwBuildError(f"{config_name}: NVIDIA's firmware (kmd, c906fc6) runs on "
                           f"{', '.join(names[:-1])} and {names[-1]} only")
    return FIRMWARE_VARIANTS[base]


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise SwBuildError(f"{name} not found: NVIDIA's runtime and firmware are compiled at first "
                           "use (Debian: apt-get install g++)")
    return path


def _have_libjpeg(cxx: str) -> bool:
    """True when the C++ compiler links ``-ljpeg`` (Debian's libjpeg62-turbo-dev)."""
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "t.cpp"
        src.write_text("extern \"C\" void *jpeg_std_error(void *);\n"
                       "int main() { return jpeg_std_error(0) != 0; }\n")
        r = subprocess.run([cxx, str(src), "-ljpeg", "-o", str(Path(d) / "t")],
                           capture_output=True)
        return r.returncode == 0


def _sources(sw: Path, kmd: Path) -> dict[str, list[Path]]:
    umd = sw / "umd"
    groups = {
        "firmware": sorted((kmd / "firmware").glob("*.c")),
        "runtime": [umd / s for s in RUNTIME_SOURCES],
        "app": [umd / "apps/runtime" / s for s in APP_SOURCES],
    }
    missing = [p for g in groups.values() for p in g if not p.is_file()]
    if not groups["firmware"]:
        missing.append(kmd / "firmware" / "*.c")
    if missing:
        raise SwBuildError(f"NVIDIA's software source missing: {missing[0]} (expected "
                           f"../shared/nvdla/sw, see its README.md; $NVDLA_SHARED moves it)")
    return groups


def _digest(paths, extra: str) -> str:
    h = hashlib.sha256(extra.encode())
    for p in sorted(set(paths)):
        h.update(str(p).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def build_sw(config: str = "nv_small", *, force: bool = False, log=None,
             kmd: Path | None = None) -> SwBuild:
    """Build (or find in the cache) NVIDIA's runtime application with the firmware of
    ``config`` (see :func:`firmware_variant`) and the project's glue. ``kmd``: another copy of
    NVIDIA's ``kmd`` directory (default ``../shared/nvdla/sw/kmd``, the c906fc6 firmware that
    runs the regression loadables; NVIDIA's later firmware, whose ``struct dla_data_cube`` has
    the ``offset`` field, for loadables of NVIDIA's current compiler). ``log``: optional
    callable given progress lines. Raises SwBuildError."""
    variant, defines = firmware_variant(config)
    cc, cxx = _tool("gcc"), _tool("g++")
    sw = sw_source_dir()
    if not sw.is_dir():
        raise SwBuildError(f"NVIDIA's software not found at {sw} (../shared/nvdla/sw beside the "
                           "checkout, or $NVDLA_SHARED)")
    kmd = Path(kmd) if kmd is not None else sw / "kmd"
    groups = _sources(sw, kmd)
    headers = [p for d in [sw / d for d in ("umd/include", "umd/core/include",
                                            "umd/core/src/common/include",
                                            "umd/core/src/runtime/include", "umd/port/linux/include",
                                            "umd/external/include", "umd/apps/runtime")]
               + [kmd / "include", kmd / "firmware"]
               for p in d.rglob("*") if p.is_file() and p.suffix in (".h", ".hpp", ".inl")]
    glue = sorted(p for p in CSRC.rglob("*") if p.is_file())
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout
    jpeg = "debian" if _have_libjpeg(cxx) else "stub"
    key = _digest([p for g in groups.values() for p in g] + headers + glue,
                  repr((RECIPE, defines, CFLAGS, CXXFLAGS, FW_CFLAGS, version, jpeg)))
    out = BUILD_ROOT / "sw" / f"{variant}-{key}"
    program = out / "nvdla_runtime"
    with _locked(BUILD_ROOT / "sw" / f"{variant}.lock"):
        if program.is_file() and not force:
            return SwBuild(program, out, variant, jpeg)
        t0 = time.monotonic()
        obj = out / "obj"
        obj.mkdir(parents=True, exist_ok=True)
        umd = sw / "umd"
        inc = lambda root, dirs: [f"-I{root / d}" for d in dirs]   # noqa: E731
        fw_inc = [f"-I{CSRC / 'include'}", *inc(kmd, FIRMWARE_INCLUDES)]
        jobs = []      # (source, object, command)
        for src in groups["firmware"]:
            jobs.append((src, [cc, *FW_CFLAGS, *defines, *fw_inc]))
        for src in groups["runtime"]:
            flags = CXXFLAGS if src.suffix == ".cpp" else CFLAGS
            jobs.append((src, [cxx if src.suffix == ".cpp" else cc, *flags,
                               '-DNVDLA_UTILS_ERROR_TAG="DLA_RUNTIME"', *inc(umd, RUNTIME_INCLUDES)]))
        for src in groups["app"]:
            jobs.append((src, [cxx, *CXXFLAGS, '-DNVDLA_UTILS_ERROR_TAG="DLA_TEST"',
                               *inc(umd, APP_INCLUDES)]))
        jobs.append((CSRC / "channel.c", [cc, *FW_CFLAGS, f"-I{CSRC}"]))
        jobs.append((CSRC / "kmd_glue.c", [cc, *FW_CFLAGS, *defines, f"-I{CSRC}", *fw_inc]))
        jobs.append((CSRC / "umd_port.c", [cc, *CFLAGS, f"-I{CSRC}", *inc(umd, RUNTIME_INCLUDES)]))
        if jpeg == "stub":
            jobs.append((CSRC / "jpeg_stub.c", [cc, *CFLAGS]))
        objects = []
        for i, (src, cmd) in enumerate(jobs):
            o = obj / f"{i:02d}_{src.stem}.o"
            _run([*cmd, "-w", "-c", str(src), "-o", str(o)], out / "build.log", src)
            objects.append(o)
        tmp = out / "nvdla_runtime.tmp"
        _run([cxx, *map(str, objects), "-pthread", *(["-ljpeg"] if jpeg == "debian" else []),
              "-o", str(tmp)], out / "build.log", "the link of nvdla_runtime")
        tmp.replace(program)
        if log:
            log(f"built NVIDIA's runtime + firmware ({variant}) in {time.monotonic() - t0:.1f} s: "
                f"{program}")
        return SwBuild(program, out, variant, jpeg)


def _run(cmd: list[str], logfile: Path, what) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True)
    with open(logfile, "a") as fh:
        fh.write(" ".join(cmd) + "\n" + r.stdout + r.stderr)
    if r.returncode != 0:
        first = next((ln for ln in r.stderr.splitlines() if "error" in ln), r.stderr.strip()[:200])
        raise SwBuildError(f"compiling {what} failed: {first} (log: {logfile})")
