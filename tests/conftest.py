"""Shared pytest fixtures and options for the NVDLA project."""
from __future__ import annotations

UNLISTED_PASSES: list[str] = []


def pytest_addoption(parser):
    parser.addoption("--rtl-all", action="store_true", default=False,
                     help="also run traces that are not in the rtl manifest on the RTL (slow: units "
                          "not yet built in RTL wait out their cycle budget)")


def pytest_configure(config):
    config.addinivalue_line("markers", "rtl: runs Verilator simulations")
    config.addinivalue_line("markers", "slow: long benchmarks/sweeps, not run in CI")


def pytest_terminal_summary(terminalreporter):
    if UNLISTED_PASSES:
        terminalreporter.section("traces that pass but are not in verif/manifest.toml")
        for name in sorted(UNLISTED_PASSES):
            terminalreporter.write_line(name)
