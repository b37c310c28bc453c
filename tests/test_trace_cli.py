"""The trace CLI's options (``python -m verif.trace run``): memory profiles and timing overrides
validated before anything runs (exit 2, one-line error), ``--config``/``--set``, NOT-RUNNABLE
traces make the exit status 1 unless ``--allow-not-runnable``, the amaranth engine."""
from __future__ import annotations

import shutil

import pytest

from verif.shared import have_shared, nvdla_dir
from verif.trace.__main__ import main

needs_shared = pytest.mark.skipif(not have_shared(), reason="../shared/nvdla (NVIDIA traces) is absent")


def _trace(name="sdp_1x1x1_pass_through_int8"):
    return str(nvdla_dir() / "traces" / "nv_small" / name)


@pytest.mark.parametrize("opts, text", [
    (["--accept-every", "0"], "--accept-every 0: must be an integer >= 1"),
    (["--accept-every", "-3"], "--accept-every -3: must be an integer >= 1"),
    (["--read-latency", "-1"], "--read-latency -1: must be an integer >= 0"),
    (["--mem-profile", "random", "--read-latency", "-5"], "--read-latency -5"),
    (["--set", "primary_memif_max_burst=3"], "primary_memif_max_burst=3"),
    (["--set", "no_such_field=1"], "no_such_field"),
    (["--config", "nv_tiny"], "nv_tiny"),
])
def test_invalid_options_exit_2_before_running(opts, text, capsys, tmp_path):
    # the path does not even exist: the options are rejected before the traces are looked at
    assert main(["run", str(tmp_path / "absent"), "--engine", "rtl", *opts]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and text in err and "\n" not in err


def test_unknown_profile_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "x", "--mem-profile", "slow"])
    assert e.value.code == 2
    assert "--mem-profile" in capsys.readouterr().err


@needs_shared
def test_not_runnable_exit_status(tmp_path, capsys):
    d = tmp_path / "no_dat"
    d.mkdir()
    shutil.copy(next((nvdla_dir() / "traces" / "nv_small" / "sdp_8x8x32_bypass_int8_0").glob("*.cfg")), d)
    assert main(["run", str(d)]) == 1
    assert "NOT-RUNNABLE" in capsys.readouterr().out
    assert main(["run", str(d), "--allow-not-runnable"]) == 0
    assert "0 passed, 0 failed, 1 not runnable" in capsys.readouterr().out
    # a passing trace with a not-runnable one: still 1
    assert main(["run", str(d), _trace()]) == 1


@needs_shared
@pytest.mark.parametrize("profile", [["--mem-profile", "nvidia"], ["--mem-profile", "fast"],
                                     ["--mem-profile", "random", "--seed", "3"]])
def test_amaranth_engine_profiles(profile, capsys):
    assert main(["run", _trace("sdp_1x1x8_pass_through_int8_0"), "--engine", "amaranth", *profile]) == 0
    out = capsys.readouterr().out
    assert "1 passed, 0 failed, 0 not runnable" in out and f"memory {profile[1]}" in out


@needs_shared
def test_amaranth_timeout_report_names_busy_units_without_protocol_error(capsys):
    """Issue 36 item 2 on the amaranth engine: the timeout report's status reads (RBK's at
    0x11000 last) are each answered before the trace ends (the CSB monitor counts every response
    in the same tick the engine sees it), so the report shows the busy units and no protocol
    error (the rtl engine's case: tests/test_rtl_engine.py)."""
    assert main(["run", _trace("sdp_8x8x32_bypass_int8_0"), "--engine", "amaranth",
                 "--max-cycles", "300"]) == 1
    out = capsys.readouterr().out
    assert "no interrupt within 300 cycles" in out
    assert "units still busy: SDP_RDMA(S_STATUS=0x1), SDP(S_STATUS=0x1)" in out
    assert "protocol error" not in out
