"""NVIDIA's trace tests on the model and rtl engines, checked by NVIDIA's golden CRCs.

Every trace directory under ../shared/nvdla/traces/nv_small (and nv_small_generated) is a test
case per engine. A trace listed in verif/manifest.toml must PASS; an unlisted one is an expected
failure (xfail, never counted as a pass) and, if it passes anyway, is reported at the end of the run.
On the rtl engine unlisted traces run only with ``--rtl-all`` (they would wait out their budget).
Skipped with a reason when ../shared is absent.

The rtl manifest's traces also run under every memory timing profile (``RTL_PROFILES``: nvidia,
fast, random with 5 seeds, nvidia and random with ``primary_memif_max_burst=4``, and the wide
variant: SDP/PDP/CDP throughput 8 on nv_small_ew, alone and with 4-beat bursts under random
memory; the 4-beat-burst ones ``slow``, as nv_small_ew's 4-beat-burst variant: SLOW_PROFILES); the
convolution traces under CONV_PROFILES, the image-input ones under IMAGE_PROFILES and the
manifest's heavy ones under HEAVY_PROFILES only (``rtl_profile_traces``). To keep CI cheap, one simulator process per profile plays all of them
(``_rtl_batch``, cached for the session).
"""
from __future__ import annotations

from functools import lru_cache

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


#: NVIDIA's trace suites of the other v2 configurations, each played on the model of the
#: configuration of the same name (manifest sections model_<config>)
CONFIG_SUITES = ("nv_small_256", "nv_medium_512", "nv_large")


def _suite_ids(suite: str) -> list[str]:
    d = nvdla_dir() / "traces" / suite
    if not have_shared() or not d.is_dir():
        return []
    return [f"{suite}/{t.name}" for t in sorted(d.iterdir()) if any(t.glob("*.cfg"))]


CONFIG_TRACES = [(suite, tid) for suite in CONFIG_SUITES for tid in _suite_ids(suite)]


@needs_shared
def test_manifest_names_real_traces():
    """Every manifest entry is a trace that exists (a typo would otherwise never run)."""
    known = set(TRACES) | {tid for _, tid in CONFIG_TRACES}
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


#: the CRC NVIDIA's nv_small_256 RTL writes for the 4 sdp_*_ew_* traces (it has no EW
#: sub-unit; ../shared/nvdla/README.md)
EW_WITHOUT_EW_CRC = 0xC43621C5


@needs_shared
@pytest.mark.parametrize("suite,tid", CONFIG_TRACES or [("-", "<no traces>")],
                         ids=[t for _, t in CONFIG_TRACES] or None)
def test_model_other_configs(suite, tid):
    """NVIDIA's nv_small_256 / nv_medium_512 / nv_large traces on the model of that configuration;
    nv_small_256's EW traces also on nv_small_256_full, and on nv_small_256 itself they must give
    the CRC NVIDIA's nv_small_256 RTL gives."""
    from hdl.config import get_config
    from verif.trace.runner import run_model
    if suite == "-":
        pytest.skip("no trace suites of other configurations in ../shared/nvdla/traces")
    path = nvdla_dir() / "traces" / tid
    (res,) = run_model([path], get_config(suite))
    if suite == "nv_small_256" and "_ew_" in tid:
        assert res.status != PASS, f"{tid} passed on nv_small_256, which has no EW sub-unit"
        assert [c.actual for c in res.checks] == [EW_WITHOUT_EW_CRC], res.message
        (res,) = run_model([path], get_config("nv_small_256_full"))
        _check("model_nv_small_256_full", tid, res)
        return
    _check(f"model_{suite}", tid, res)


#: the wide variant's throughputs: every post-processing datapath at one atom (8 elements) per
#: cycle, SDP's EW at 4 (projects.spec's largest)
WIDE_EXTRA = ("+cdp_throughput=8+pdp_throughput=8+sdp_bn_throughput=8+sdp_bs_throughput=8"
              "+sdp_ew_throughput=4")
#: one simulator build plays both wide profiles, nv_small's rtl manifest (test_rtl_mem_profile
#: "wide") and the EW traces (test_rtl_ew "wide"): nv_small_ew is nv_small with SDP's EW and
#: LUT, which nv_small's traces leave bypassed (the model gives their goldens on it too); one
#: build less in CI than a wide nv_small and a wide nv_small_ew (stop 49: CI 63 minutes)
WIDE = "nv_small_ew" + WIDE_EXTRA

#: memory timing profile x configuration spec the rtl manifest's traces must pass under:
#: name -> (config spec, profile, seed)
RTL_PROFILES = {
    "nvidia": ("nv_small", "nvidia", 0),
    "fast": ("nv_small", "fast", 0),
    **{f"random{s}": ("nv_small", "random", s) for s in range(1, 6)},
    "nvidia-burst4": ("nv_small+primary_memif_max_burst=4", "nvidia", 0),
    "random1-burst4": ("nv_small+primary_memif_max_burst=4", "random", 1),
    # the wide variant (WIDE): every post-processing datapath at one atom per cycle
    "wide": (WIDE, "nvidia", 0),
    "wide-random2-burst4": (WIDE + "+primary_memif_max_burst=4", "random", 2),
}
#: profiles whose simulator build is another variant again: behind the ``slow`` marker (README
#: "Running the tests": ``-m slow -k ...``). CI keeps the wide build; 4-beat bursts on nv_small's
#: 64-bit bus are CI's on nv_small_256_full (the same bus: random programs of every layer type,
#: tests/test_gen_programs.py, and tests/test_sim_memory.py) and nv_medium_512 (NVIDIA's traces),
#: so nv_small's own burst-4 build (the heavy convolution trace included) is slow (stop 49: CI
#: took 63 minutes)
SLOW_PROFILES = {"wide-random2-burst4", "nvidia-burst4", "random1-burst4"}
RTL_MANIFEST = sorted(t for t in MANIFEST.get("rtl", ()) if t in TRACES)
#: the manifest's slow traces (``heavy``: the 5-million-cycle convolution) play only under these
HEAVY_PROFILES = ("nvidia", "random1", "nvidia-burst4")
#: convolution traces (dc_*) play under these: issue 8 asks for the nvidia and a random memory
#: profile and 4-beat bursts; "wide" feeds SDP's 8-lane datapath from CACC. random2..5 and
#: wide-random2-burst4 vary the post-processing units' memory timing.
CONV_PROFILES = ("nvidia", "fast", "random1", "nvidia-burst4", "random1-burst4", "wide")
#: image-input traces (img_*, 30 layers of about 320 thousand cycles each) play under these:
#: issue 9 asks for the nvidia and a random memory profile
IMAGE_PROFILES = ("nvidia", "random1")


def rtl_profile_traces(profile: str) -> list[str]:
    """The rtl manifest's traces played under memory profile ``profile`` (see HEAVY_PROFILES,
    CONV_PROFILES, IMAGE_PROFILES)."""
    heavy = manifest.heavy("rtl")
    return [t for t in RTL_MANIFEST
            if (t not in heavy or profile in HEAVY_PROFILES)
            and ("/dc_" not in t or profile in CONV_PROFILES)
            and ("/img_" not in t or profile in IMAGE_PROFILES)]


@lru_cache(maxsize=None)
def _rtl_batch(profile: str) -> dict:
    """{trace id: TraceResult} of the rtl manifest's traces played in ONE simulator process
    under ``RTL_PROFILES[profile]``."""
    from hdl.config import get_config
    from verif.axi_slave import MemTiming
    from verif.trace.runner import run
    spec, name, seed = RTL_PROFILES[profile]
    traces = rtl_profile_traces(profile)
    dirs = [nvdla_dir() / "traces" / t for t in traces]
    by_name = {d.name: t for d, t in zip(dirs, traces)}
    return {by_name[r.name]: r for r in run(dirs, "rtl", get_config(spec), jobs=1,
                                            timing=MemTiming.named(name, seed=seed),
                                            traces_per_process=len(dirs))}


@needs_shared
@pytest.mark.rtl
@pytest.mark.parametrize("tid", [t for t in TRACES if t.startswith("nv_small/")] or ["<no traces>"])
def test_rtl(tid, request):
    if tid in RTL_MANIFEST:
        _check("rtl", tid, _rtl_batch("nvidia")[tid])
        return
    if not request.config.getoption("--rtl-all"):
        pytest.skip("not in the rtl manifest (run with --rtl-all to try it)")
    from verif.trace.runner import run
    (res,) = run([nvdla_dir() / "traces" / tid], "rtl", NV_SMALL)
    _check("rtl", tid, res)


@needs_shared
@pytest.mark.rtl
@pytest.mark.parametrize("profile", [pytest.param(p, marks=pytest.mark.slow) if p in SLOW_PROFILES
                                     else p for p in RTL_PROFILES if p != "nvidia"])
def test_rtl_mem_profile(profile):
    """The rtl manifest's traces under the fast / random memory and with 4-beat bursts (one
    test per profile: one simulator process, so pytest-xdist never runs a batch twice)."""
    assert RTL_MANIFEST, "the rtl manifest names no trace"
    res = _rtl_batch(profile)
    bad = [f"{t}: {r.status}: {r.message}" for t, r in sorted(res.items()) if r.status != PASS]
    assert sorted(res) == rtl_profile_traces(profile) and not bad, \
        f"under {profile} {RTL_PROFILES[profile]}:\n" + "\n".join(bad or ["missing results"])


#: the rtl_ew manifest (nv_small_ew: SDP Y/EW, LUT, ERDMA) under the nvidia and a random memory
#: profile, with 4-beat bursts, and with the X datapaths at 8 elements per cycle and Y at 4
#: (projects.spec: SDP_EW_THROUGHPUT is 1, 2 or 4)
EW_PROFILES = {
    "nvidia": ("", "nvidia", 0),
    "random1": ("", "random", 1),
    "nvidia-burst4": ("+primary_memif_max_burst=4", "nvidia", 0),
    "wide": (WIDE_EXTRA, "nvidia", 0),          # the build of RTL_PROFILES["wide"]
}
#: EW profiles with a simulator build of their own that CI leaves out: ``slow`` (4-beat bursts
#: run in CI on nv_small_256_full and nv_medium_512, see SLOW_PROFILES; the wide EW variant stays
#: in CI, sharing the build of RTL_PROFILES["wide"])
SLOW_EW_PROFILES = {"nvidia-burst4"}


@needs_shared
@pytest.mark.rtl
@pytest.mark.parametrize("profile", [pytest.param(p, marks=pytest.mark.slow) if p in SLOW_EW_PROFILES
                                     else p for p in EW_PROFILES])
def test_rtl_ew(profile):
    """The sdp_*_ew_* traces on the RTL of nv_small_ew, one simulator process per profile."""
    from hdl.config import get_config
    from verif.axi_slave import MemTiming
    from verif.trace.runner import run
    names = sorted(t for t in MANIFEST.get("rtl_ew", ()) if t in TRACES)
    assert names, "the rtl_ew manifest names no trace"
    extra, timing, seed = EW_PROFILES[profile]
    cfg = get_config(manifest.configs()["rtl_ew"] + extra)
    res = list(run([nvdla_dir() / "traces" / t for t in names], "rtl", cfg, jobs=1,
                   timing=MemTiming.named(timing, seed=seed), traces_per_process=len(names)))
    bad = [f"{r.name}: {r.status}: {r.message}" for r in res if r.status != PASS]
    assert len(res) == len(names) and not bad, f"nv_small_ew{extra} under {timing}:\n" + "\n".join(bad)


#: memory profiles the other configurations' rtl manifests play under: name -> (profile, seed)
OTHER_PROFILES = {"nvidia": ("nvidia", 0), "random3": ("random", 3)}


@needs_shared
@pytest.mark.rtl
@pytest.mark.parametrize("profile", list(OTHER_PROFILES))
@pytest.mark.parametrize("config", ["nv_small_256", "nv_medium_512"])
def test_rtl_other_configs(config, profile):
    """NVIDIA's traces of nv_small_256 / nv_medium_512 on our RTL of that configuration (one
    simulator process per configuration and profile): the rtl_<config> manifest must pass, and
    nv_small_256's EW traces must give the CRC NVIDIA's nv_small_256 RTL gives."""
    from hdl.config import get_config
    from verif.axi_slave import MemTiming
    from verif.trace.runner import run
    names = sorted(MANIFEST.get(f"rtl_{config}", ()))
    assert names, f"the rtl_{config} manifest names no trace"
    ew = [t for _, t in CONFIG_TRACES if t.startswith(config + "/") and "_ew_" in t]
    timing, seed = OTHER_PROFILES[profile]
    dirs = [nvdla_dir() / "traces" / t for t in names + ew]
    res = {r.name: r for r in run(dirs, "rtl", get_config(config), jobs=1,
                                  timing=MemTiming.named(timing, seed=seed),
                                  traces_per_process=len(dirs))}
    bad = [f"{t}: {res[t.split('/')[1]].status}: {res[t.split('/')[1]].message}"
           for t in names if res[t.split("/")[1]].status != PASS]
    for t in ew:
        r = res[t.split("/")[1]]
        if [c.actual for c in r.checks] != [EW_WITHOUT_EW_CRC]:
            bad.append(f"{t}: CRCs {[hex(c.actual) for c in r.checks]}, NVIDIA's RTL gives "
                       f"{EW_WITHOUT_EW_CRC:#x}: {r.message}")
    assert len(res) == len(dirs) and not bad, f"{config} under {profile}:\n" + "\n".join(bad)
