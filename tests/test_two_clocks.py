"""Both clock domains of NV_nvdla honoured (issue 10 item 5): the CSB port runs in ``dla_csb_clk``
and crosses into ``dla_core_clk`` (hdl/csb_cdc.py).

* The SDP traces of the rtl manifest (verif/manifest.toml [rtl], ``sdp_*``) on the rtl engine
  with the CSB clock at 37 MHz and the core clock at 100 MHz (unrelated periods): every trace
  passes against NVIDIA's golden CRCs, with the CSB and AXI protocol monitors on (one CSB
  response per read, none for a posted write). One simulator process plays them all.
* The trace CLI's ``--csb-clock-mhz`` is checked before anything runs (exit status 2).
"""
from __future__ import annotations

import pytest

from hdl.config import NV_SMALL
from verif import manifest
from verif.shared import have_shared, nvdla_dir
from verif.trace.player import PASS
from needs import needs_verilator

CSB_MHZ, CORE_MHZ = 37.0, 100.0

SDP_TRACES = sorted(t for t in manifest.load().get("rtl", set())
                    if t.startswith("nv_small/sdp_")) if have_shared() else []


@pytest.mark.rtl
@needs_verilator
@pytest.mark.skipif(not SDP_TRACES, reason="../shared/nvdla (NVIDIA traces) is absent")
def test_sdp_manifest_with_unrelated_clocks():
    from verif.trace.runner import run
    dirs = [nvdla_dir() / "traces" / t for t in SDP_TRACES]
    res = list(run(dirs, "rtl", NV_SMALL, jobs=1, traces_per_process=len(dirs),
                   csb_period_ns=1000.0 / CSB_MHZ))
    assert sorted(r.name for r in res) == sorted(d.name for d in dirs)
    bad = [f"{r.name}: {r.status} {r.message}" for r in res if r.status != PASS]
    assert not bad, "\n".join(bad)
    assert all(r.cycles and r.cycles > 0 for r in res)


@pytest.mark.parametrize("args,msg", [
    (["--engine", "rtl", "--csb-clock-mhz", "0"], "must be within"),
    (["--engine", "amaranth", "--csb-clock-mhz", "37"], "equal to the core clock"),
    (["--engine", "model", "--csb-clock-mhz", "37"], "has no clocks"),
])
def test_cli_rejects_bad_csb_clock(args, msg, capsys, tmp_path):
    from verif.trace.__main__ import main
    assert main(["run", str(tmp_path), *args]) == 2
    assert msg in capsys.readouterr().err


def test_amaranth_engine_equal_clocks_only():
    from verif.trace.amaranth_engine import PERIOD, simulate

    async def bench(eng):
        pass

    with pytest.raises(ValueError, match="equal clocks"):
        simulate(NV_SMALL, bench, csb_period=PERIOD * 2.7)
