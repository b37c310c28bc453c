"""Shared pytest fixtures and options for the NVDLA project."""
from __future__ import annotations

import os

from sim.build import OPT_ENV, PGO_ENV

UNLISTED_PASSES: list[str] = []

#: The tests' Verilator simulators are compiled at -O1 without profile guidance (unless
#: $NVDLA_SIM_OPT / $NVDLA_SIM_PGO say otherwise): building them is most of the suite's time.
#: Measured on nv_small_256 (2 cores, one busy with other work, 2026-11-30): -O3 -march=native
#: with profile guidance (sim.build's default for users) builds in 210 s and plays 40 of
#: NVIDIA's nv_small_256 traces in 10.3 s; -O3 without it in 88 s; -O1 without it in 57 s and
#: plays them in 13.3 s. The suite plays few cycles per simulator, so -O1 saves far more build
#: time than it loses in simulation. Set at import, so that the xdist workers and every
#: simulator process they start inherit it; tests/test_sim_pgo.py asks for profile guidance.
os.environ.setdefault(OPT_ENV, "-O1")
os.environ.setdefault(PGO_ENV, "0")

#: One test per distinct Verilator simulator the default run builds (build seconds measured on a
#: clean clone of stop 49, two busy cores, at -O3 with profile guidance: nv_medium_512 921,
#: nv_small_256 543, nv_small 453 and needed by most RTL tests, the wide nv_small_ew 584,
#: nv_small_256_full 581, nv_small_ew 543, nv_small's xrand 226; at -O1 without it, a clean clone
#: on 2026-11-30: the wide nv_small_ew 90, nv_medium_512 73, nv_small_256_full 65, nv_small_256
#: 48, nv_small_ew 44, xrand 44, nv_small 40, and test_sim_pgo's profile-guided nv_small 73). They run first, so that the two xdist workers build different
#: simulators side by side; in collection order a worker reaches a test whose simulator the other
#: worker is still building and waits on its file lock (``sim.build``), idle: stop 49 lost ~500 s
#: so on nv_small_ew's build and ~200 s on nv_small's. xdist starts each worker with two tests
#: (the first worker the first two, ...), so the longest builds are paired across the workers.
BUILD_FIRST = (
    # nv_small+feature_data_type=int8_int16_fp16 (issue 33's 16-bit units beside INT8: 12 MB of
    # Verilog): the longest, ~330 s beside other work on 2026-11-30
    "tests/test_gen_programs.py::test_rtl_fixed_seeds[nv_small+feature_data_type=int8_int16_fp16+weight_compression=True-dc-]",
    "tests/test_traces.py::test_rtl_other_configs[nv_medium_512-nvidia]",
    "tests/test_gen_programs.py::test_rtl_fixed_seeds[nv_small_256-dc-]",
    "tests/test_traces.py::test_rtl_mem_profile[random1]",
    "tests/test_traces.py::test_rtl_ew[wide]",
    "tests/test_gen_programs.py::test_rtl_fixed_seeds[nv_small_256_full-dc-]",
    "tests/test_traces.py::test_rtl_ew[nvidia]",
    # nv_small with multi-batch and compressed weights (issue 34)
    "tests/test_gen_programs.py::test_rtl_fixed_seeds[nv_small+batch=True+max_batch=32+weight_compression=True-batch-]",
    "tests/test_rtl_reliability.py::test_xrand_one_seed_over_manifest",
)


def pytest_addoption(parser):
    parser.addoption("--rtl-all", action="store_true", default=False,
                     help="also run traces that are not in the rtl manifest on the RTL (slow: units "
                          "not yet built in RTL wait out their cycle budget)")


def pytest_configure(config):
    config.addinivalue_line("markers", "rtl: runs Verilator simulations")
    config.addinivalue_line("markers", "slow: long benchmarks/sweeps, not run in CI")
    # xdist's load scheduling hands each worker a quarter of the suite at once by default, so
    # the BUILD_FIRST tests would all queue on the first worker; one test at a time (two kept
    # pending per worker) gives the next one to whichever worker is free.
    if getattr(config.option, "maxschedchunk", False) is None:
        config.option.maxschedchunk = 1


def pytest_collection_modifyitems(config, items):
    """Run the BUILD_FIRST tests first, in that order; every other test keeps its place."""
    first = {nodeid: i for i, nodeid in enumerate(BUILD_FIRST)}
    items.sort(key=lambda item: first.get(item.nodeid, len(first)))


def pytest_terminal_summary(terminalreporter):
    if UNLISTED_PASSES:
        terminalreporter.section("traces that pass but are not in verif/manifest.toml")
        for name in sorted(UNLISTED_PASSES):
            terminalreporter.write_line(name)
