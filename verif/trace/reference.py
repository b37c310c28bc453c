"""NVIDIA's RTL cycle counts per trace (../shared/nvdla/reference/<config>_nvidia_rtl_cycles.tsv:
nv_small's and nv_small_256's).

Used for the cycle comparison in reports and to size each trace's interrupt budget.
"""
from __future__ import annotations

from functools import lru_cache

from verif.shared import nvdla_dir

DEFAULT_INTR_BUDGET = 20_000_000     # cycles, when NVIDIA's count is unknown
BUDGET_FACTOR = 4                    # we allow 4x NVIDIA's cycles before declaring a hang
MIN_BUDGET = 100_000


#: configurations whose traces are NVIDIA's of another configuration's table
SAME_TABLE = {"nv_small_ew": "nv_small"}


def suite_dir(config: str):
    """NVIDIA's trace suite of configuration ``config`` (a preset name or spec such as
    ``nv_small+primary_memif_max_burst=4``): ``../shared/nvdla/traces/<preset>`` (nv_small's for
    nv_small_ew, and for a preset without a suite of its own)."""
    base = config.split("+")[0]
    root = nvdla_dir() / "traces" / SAME_TABLE.get(base, base)
    return root if root.is_dir() else nvdla_dir() / "traces" / "nv_small"


@lru_cache(maxsize=None)
def nvidia_cycles(config: str = "nv_small") -> dict[str, int]:
    """``{trace name: cycles from the last kick-off to the last interrupt on NVIDIA's RTL}`` of
    configuration ``config`` (a preset name or spec such as ``nv_small+primary_memif_max_burst=4``:
    its preset's table; empty when ../shared or the table is absent)."""
    base = config.split("+")[0]
    p = nvdla_dir() / "reference" / f"{SAME_TABLE.get(base, base)}_nvidia_rtl_cycles.tsv"
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


def measured_cycles(traces, rtl_filelist, config: str, jobs: int = 1,
                    timing=None) -> dict[str, int]:
    """``{trace name: cycles}`` measured now by playing ``traces`` (trace directories) on
    another NV_nvdla given by its Verilator file list ``rtl_filelist`` (NVIDIA's RTL of
    ``config``, built by ``../shared/tools/nvidia-rtl``), for the configurations without a table
    (nv_large, nv_medium_512). ``timing``: ``verif.axi_slave.MemTiming`` (default ``nvidia``).
    Traces that fail or hang on that RTL are left out (their row shows no NVIDIA figure); the
    simulator build (minutes; cached under build/sim) happens first."""
    from verif.axi_slave import MemTiming
    from verif.trace.rtl_runner import run_rtl
    timing = timing or MemTiming.named("nvidia")
    return {r.name: r.cycles
            for r in run_rtl(list(traces), config=config, rtl_filelist=rtl_filelist, jobs=jobs,
                             timing=timing)
            if r.status == "PASS" and r.cycles}
