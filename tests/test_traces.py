"""NVIDIA's trace tests on both engines, checked by NVIDIA's golden CRCs.

Every trace directory under ../shared/nvdla/traces/nv_small (and nv_small_generated) is a test
case per engine. A trace listed in verif/manifest.toml must PASS; an unlisted one is an expected
failure (xfail, never counted as a pass) and, if it passes anyway, is reported at the end of the run.
On the rtl engine unlisted traces run only with ``--rtl-all`` (they would wait out their budget).
Skipped with a reason when ../shared is absent.
"""
from __future__ import annotations

import pytest

from hdl.config import NV_SMALL
from verif import manifest
from verif.shared import have_shared, nvdla_dir
from verif.trace.player import PASS

from conftest import UNLISTED_PASSES

SUITES = ("nv_small", "nv_small_generated")
MANIFEST = manifest.load()


def _trace_ids() -> list[str]:
    if not have_shared():
        return []
    ids = []
    for s in SUITES:
        d = nvdla_dir() / "traces" / s
        if d.is_dir():
            ids += [f"{s}/{t.name}" for t in sorted(d.iterdir()) if any(t.glob("*.cfg"))]
    return ids


TRACES = _trace_ids()
needs_shared = pytest.mark.skipif(not have_shared(), reason="../shared/nvdla (NVIDIA traces) is absent")


def _check(engine: str, tid: str, result) -> None:
    listed = tid in MANIFEST.get(engine, set())
    if result.status == PASS:
        if not listed:
            UNLISTED_PASSES.append(f"{engine}: {tid}")
        return
    text = f"{tid} on {engine}: {result.status}: {result.message}"
    if listed:
        pytest.fail(text, pytrace=False)
    pytest.xfail(f"not in the {engine} manifest: {text}")


@needs_shared
def test_manifest_names_real_traces():
    """Every manifest entry is a trace that exists (a typo would otherwise never run)."""
    known = set(TRACES)
    for engine, names in MANIFEST.items():
        missing = sorted(names - known)
        assert not missing, f"{engine} manifest names traces that do not exist: {missing}"


@needs_shared
@pytest.mark.parametrize("tid", TRACES or ["<no traces>"])
def test_model(tid):
    from verif.trace.runner import run_model
    (res,) = run_model([nvdla_dir() / "traces" / tid], NV_SMALL)
    _check("model", tid, res)


EW_TRACES = [t for t in TRACES if t.startswith("nv_small/sdp_") and "_ew_" in t]


@needs_shared
@pytest.mark.parametrize("tid", EW_TRACES or ["<no traces>"])
def test_model_ew(tid):
    """The sdp_*_ew_* traces on a configuration with SDP EW/LUT enabled."""
    from hdl.config import get_config
    from verif.trace.runner import run_model
    cfg = get_config(manifest.configs()["model_ew"])
    (res,) = run_model([nvdla_dir() / "traces" / tid], cfg)
    _check("model_ew", tid, res)


@needs_shared
@pytest.mark.rtl
@pytest.mark.parametrize("tid", [t for t in TRACES if t.startswith("nv_small/")] or ["<no traces>"])
def test_rtl(tid, request):
    if tid not in MANIFEST["rtl"] and not request.config.getoption("--rtl-all"):
        pytest.skip("not in the rtl manifest (run with --rtl-all to try it)")
    from verif.trace.runner import run
    (res,) = run([nvdla_dir() / "traces" / tid], "rtl", NV_SMALL)
    _check("rtl", tid, res)
