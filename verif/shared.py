"""Locate NVIDIA's material in ``../shared`` beside the checkout (read-only, never copied).

``NVDLA_SHARED`` overrides the location.
"""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def shared_dir() -> Path:
    """The ``shared`` directory: ``$NVDLA_SHARED`` or ``<repo>/../shared``. May not exist."""
    env = os.environ.get("NVDLA_SHARED")
    return Path(env) if env else REPO_ROOT.parent / "shared"


def nvdla_dir() -> Path:
    return shared_dir() / "nvdla"


def have_shared() -> bool:
    """True when ``../shared/nvdla`` is present (tests needing it skip with a reason otherwise)."""
    return (nvdla_dir() / "traces").is_dir()
