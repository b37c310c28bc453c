"""Profile-guided simulator builds (issue 12; ``sim.build`` ``pgo``, ``verif.trace.pgo``).

* The nv_small build of ``sim.build``'s defaults is profile-guided (the suite's own builds are
  not: tests/conftest.py): the instrumented model played
  every training program (random programs of each layer type) to the model's bytes, wrote a
  profile, and the final model was compiled from it (``-fprofile-use`` in its compile log).
* ``$NVDLA_SIM_PGO`` switches it.
* A training that fails costs only speed: the reason is returned and printed, never raised.
* The training is injected (``sim.build`` does not import the verification layer above it):
  ``verif.trace.pgo.build_sim`` passes it, the cache key holds its recipe, and without one no
  build is profile-guided (``pgo=True`` is refused).
"""
from __future__ import annotations

import pytest

import sim.build as sb
from needs import needs_verilator
from verif.trace import pgo


@pytest.mark.rtl
@needs_verilator
def test_nv_small_build_is_trained_and_compiled_from_the_profile(monkeypatch):
    # the suite builds without profile guidance (tests/conftest.py); users' builds have it
    monkeypatch.setenv(sb.PGO_ENV, "1")
    b = pgo.build_sim("nv_small")
    n = len(pgo.KINDS) * len(pgo.SEEDS)
    assert b.pgo.startswith(f"trained on {n} random programs"), b.pgo
    assert f": {n} passed," in b.pgo, b.pgo          # every program matched the model's bytes
    assert sorted(p.name.rsplit("#", 1)[-1] for p in (b.directory / "pgo").glob("*.gcda")), \
        "no profile written"
    log = (b.directory / "build-pgo.log").read_text()
    assert "-fprofile-use=" in log and "-fprofile-generate" not in log


@pytest.mark.parametrize("value, on", [(None, True), ("1", True), ("0", False), ("off", False),
                                       ("No", False), ("false", False), ("", True)])
def test_pgo_environment_switch(monkeypatch, value, on):
    if value is None:
        monkeypatch.delenv(sb.PGO_ENV, raising=False)
    else:
        monkeypatch.setenv(sb.PGO_ENV, value)
    assert sb.build_pgo() is on


def test_failed_training_is_reported_not_raised(tmp_path, capsys):
    def broken(build, rtl_filelist):
        raise ValueError("no generator for this configuration")
    b = sb.SimBuild("nv_small", "0" * 16, tmp_path, False, tmp_path / "NV_nvdla.f", 0.0, False)
    note = sb._train(b, tmp_path / "pgo", None, sb.Training("broken", broken))
    assert "training failed (ValueError: no generator for this configuration)" in note
    assert "compiled without a profile" in note
    assert note in capsys.readouterr().err


def test_training_without_a_profile_is_reported(tmp_path, capsys):
    t = sb.Training("none", lambda build, rtl_filelist: "trained on 0 random programs")
    b = sb.SimBuild("nv_small", "0" * 16, tmp_path, False, tmp_path / "NV_nvdla.f", 0.0, False)
    note = sb._train(b, tmp_path / "pgo", None, t)
    assert "wrote no profile (trained on 0 random programs)" in note
    assert note in capsys.readouterr().err


def test_sim_build_does_not_import_verif():
    """The simulator build sits below the verification layer: importing it (a fresh
    interpreter) loads no ``verif`` module; the project's training comes from verif."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", "import sys, sim.build; "
                          "print(sorted(m for m in sys.modules if m.split('.')[0] == 'verif'))"],
                         cwd=sb.REPO, capture_output=True, text=True, check=True,
                         env={**__import__("os").environ, "PYTHONPATH": str(sb.REPO)})
    assert out.stdout.strip() == "[]", out.stdout
    assert pgo.TRAINING.recipe == pgo.RECIPE and pgo.TRAINING.train is pgo.train


def test_pgo_needs_a_training(monkeypatch):
    with pytest.raises(ValueError, match="profile-guided build needs a training"):
        sb.build_sim("nv_small", pgo=True)
    seen = {}

    def fake(config, **kw):
        seen.update(kw, config=config)
        return "built"
    monkeypatch.setattr(sb, "build_sim", fake)
    assert pgo.build_sim("nv_small", waves=True) == "built"
    assert seen == {"config": "nv_small", "waves": True, "training": pgo.TRAINING}
