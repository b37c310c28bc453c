"""Reliability of the RTL beyond single traces (issue 11 items 6, 7, 3), on the rtl engine.

* X randomisation (item 6): the rtl manifest played on the X-randomising Verilator build
  (``--x-assign unique --x-initial unique``, ``sim.build`` ``xrand``) must give the same
  results as the normal build: every trace passes with the same cycle count. CI runs ONE seed
  over the whole manifest in one simulator process (about the cost of one memory profile in
  tests/test_traces.py); ``slow`` adds more seeds (each seed is a simulator process).
* Soak (item 7): every trace of the rtl manifest back to back in ONE simulation without a reset
  (``mode="soak"``: producer pointers follow the consumers, see ``verif.trace.soak``); every
  trace must pass.
* Reset in the middle of a layer (item 3): for an SDP, a PDP and a CDP layer, ``dla_reset_rstn``
  is asserted once the layer has written some AXI W beats, released, then a clean trace is
  played without another reset: it passes, no unit of the aborted layer issues a request or
  beat after the reset (AXI monitor, ``RtlEngine.reset(mid_layer=True)``), and the aborted
  layer's output region is unchanged after the reset.

All of them also run the AXI/CSB protocol monitors (on in every rtl simulation).
"""
from __future__ import annotations

import tomllib
from functools import lru_cache

import pytest

from sim.build import REPO
from verif import manifest
from verif.shared import nvdla_dir

TRACES = nvdla_dir() / "traces"
MANIFEST = tomllib.loads((REPO / "verif" / "manifest.toml").read_text()).get("rtl", {}).get("must_pass", [])
#: the manifest without its heavy traces (the 5-million-cycle convolution: verif/manifest.py heavy)
RTL_MANIFEST = sorted(t for t in MANIFEST if (TRACES / t).is_dir() and t not in manifest.heavy("rtl"))

needs_traces = pytest.mark.skipif(not RTL_MANIFEST, reason="../shared/nvdla traces are absent")


def _run(dirs, **kw):
    from verif.trace.rtl_runner import run_rtl
    return list(run_rtl(dirs, traces_per_process=len(dirs), **kw))


@lru_cache(maxsize=None)
def _baseline() -> dict:
    """{trace name: cycles} of the rtl manifest on the normal build, nvidia memory profile."""
    return {r.name: r for r in _run([TRACES / t for t in RTL_MANIFEST])}


def _xrand(seed: int) -> None:
    base = _baseline()
    got = {r.name: r for r in _run([TRACES / t for t in RTL_MANIFEST], xrand_seed=seed)}
    bad = [f"{n}: {r.status} {r.message}" for n, r in sorted(got.items()) if r.status != "PASS"]
    diff = [f"{n}: {r.cycles} cycles with random initial values, {base[n].cycles} without"
            for n, r in sorted(got.items()) if n in base and r.cycles != base[n].cycles]
    assert len(got) == len(RTL_MANIFEST) and not bad and not diff, "\n".join(bad + diff)


@needs_traces
@pytest.mark.rtl
def test_xrand_one_seed_over_manifest():
    _xrand(1)


@needs_traces
@pytest.mark.rtl
@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3, 4])
def test_xrand_more_seeds(seed):
    _xrand(seed)


@needs_traces
@pytest.mark.rtl
def test_soak_manifest_back_to_back_without_reset():
    res = _run([TRACES / t for t in RTL_MANIFEST], mode="soak")
    bad = [f"{r.name}: {r.status} {r.message}" for r in res if r.status != "PASS"]
    assert len(res) == len(RTL_MANIFEST) and not bad, "\n".join(bad)


#: (aborted layer, clean trace): a long layer of each post-processing unit
RESET_PAIRS = [
    ("nv_small/sdp_8192x1x1_pass_through_int8_0", "nv_small/sdp_8x8x32_bypass_int8_0"),
    ("nv_small/pdp_28x28x8_2x2_max_int8_0", "nv_small/pdp_8x8x64_2x2_int8"),
    ("nv_small/cdp_8x8x64_lrn9_int8", "nv_small/cdp_8x8x32_lrn3_int8_0"),
]


@needs_traces
@pytest.mark.rtl
@pytest.mark.parametrize("profile", ["nvidia", "random"])
def test_reset_in_mid_layer(profile):
    from verif.axi_slave import MemTiming
    dirs = [TRACES / t for pair in RESET_PAIRS for t in pair]
    res = _run(dirs, mode="reset_mid", abort_after_wbeats=16,
               timing=MemTiming.named(profile, seed=1))
    by = {r.name: r for r in res}
    bad = [f"{n}: {r.status} {r.message}" for n, r in sorted(by.items()) if r.status != "PASS"]
    want = {f"{a.split('/')[1]}+{c.split('/')[1]}" for a, c in RESET_PAIRS}
    assert set(by) == want and not bad, "\n".join(bad)
    for r in res:                      # the reset hit a running layer
        assert "reset at cycle" in r.message and "busy: none" not in r.message
