"""NVIDIA's nv_small RTL cycle counts per trace (../shared/nvdla/reference/nv_small_nvidia_rtl_cycles.tsv).

Used for the cycle comparison in reports and to size each trace's interrupt budget.
"""
from __future__ import annotations

from functools import lru_cache

from verif.shared import nvdla_dir

DEFAULT_INTR_BUDGET = 20_000_000     # cycles, when NVIDIA's count is unknown
BUDGET_FACTOR = 4                    # we allow 4x NVIDIA's cycles before declaring a hang
MIN_BUDGET = 100_000


@lru_cache(maxsize=None)
def nvidia_cycles() -> dict[str, int]:
    """``{trace name: cycles from the last kick-off to the last interrupt on NVIDIA's RTL}``
    (empty when ../shared is absent)."""
    p = nvdla_dir() / "reference" / "nv_small_nvidia_rtl_cycles.tsv"
    out: dict[str, int] = {}
    if not p.is_file():
        return out
    for line in p.read_text().splitlines()[1:]:
        cols = line.split("\t")
        if len(cols) >= 3 and cols[2].isdigit():
            out[cols[0]] = int(cols[2])
    return out


def intr_budget(trace_name: str) -> int:
    """Cycles to wait for one interrupt of this trace: 4x NVIDIA's whole-trace count (at least
    100k; the bar is to be at least as fast as NVIDIA's RTL), or 20M cycles for a trace NVIDIA's
    table does not list."""
    ref = nvidia_cycles().get(trace_name)
    return DEFAULT_INTR_BUDGET if ref is None else max(BUDGET_FACTOR * ref, MIN_BUDGET)
