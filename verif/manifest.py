"""The trace manifest: per engine, the traces that must pass (read from verif/manifest.toml).

A listed trace failing fails the suite; a trace that passes but is not listed is reported at the
end of the pytest run so the manifest can be extended.
"""
from __future__ import annotations

import tomllib
from pathlib import Path

MANIFEST = Path(__file__).with_name("manifest.toml")


def load(path: Path = MANIFEST) -> dict[str, set[str]]:
    """``{section: {suite/trace, ...}}`` (suite is ``nv_small`` or ``nv_small_generated``).

    Sections are engines (``rtl``, ``model``) or engine variants run with another configuration
    (``model_ew``: see ``configs()``)."""
    data = tomllib.loads(path.read_text())
    return {engine: set(sec.get("must_pass", [])) for engine, sec in data.items()}


def configs(path: Path = MANIFEST) -> dict[str, str]:
    """``{section: configuration preset name}`` (default nv_small)."""
    data = tomllib.loads(path.read_text())
    return {engine: sec.get("config", "nv_small") for engine, sec in data.items()}


def heavy(engine: str = "rtl", path: Path = MANIFEST) -> set[str]:
    """Traces of ``engine``'s section too slow to play under every memory profile (key
    ``heavy``): tests/test_traces.py plays them under a few profiles only, and the reliability
    sweeps (X randomisation, soak) leave them out."""
    data = tomllib.loads(path.read_text())
    return set(data.get(engine, {}).get("heavy", []))
