"""The test order of ``tests/conftest.py``: the tests that build the default run's simulators
come first (``BUILD_FIRST``), so that a renamed or removed test cannot silently bring back the
workers' wait on each other's simulator builds."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import BUILD_FIRST

REPO = Path(__file__).resolve().parents[1]


def test_build_first_tests_are_collected_first():
    p = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
                       capture_output=True, text=True, cwd=REPO, timeout=600)
    ids = [ln for ln in p.stdout.splitlines() if "::" in ln]
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    missing = [t for t in BUILD_FIRST if t not in ids]
    assert not missing, f"BUILD_FIRST names tests the default run does not collect: {missing}"
    assert ids[:len(BUILD_FIRST)] == list(BUILD_FIRST)
