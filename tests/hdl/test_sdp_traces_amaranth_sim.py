"""End to end: NVIDIA's SDP passthrough traces on NvdlaCore in Amaranth's simulator, played by
the one trace player on the ``amaranth`` engine (verif/trace/amaranth_engine.py: the shared
sparse memory and AXI slave core with NVIDIA's player timing, 32-cycle reads, a request every
other cycle), checked against NVIDIA's golden CRCs.

The two 8192-atom traces take ~20 s each in the Python simulator; they are marked ``slow``
(deselected by default; run them with ``python -m pytest -m slow``). The same traces run on
Verilator in tests/test_traces.py (also under every memory timing profile).
"""
import pytest

from hdl.config import NV_SMALL
from verif.shared import have_shared, nvdla_dir
from verif.trace.amaranth_engine import play_on_amaranth
from verif.trace.parser import load_trace

FAST = ["sdp_1x1x1_pass_through_int8", "sdp_1x1x8_pass_through_int8_0", "sdp_8x8x32_bypass_int8_0",
        "sdp_8x8x32_bypass_int8_1", "sdp_4x22x42_bypass_int8"]
SLOW = ["sdp_8192x1x1_pass_through_int8_0", "sdp_1x8192x1_pass_through_int8_0"]
slow = pytest.mark.slow


@pytest.mark.skipif(not have_shared(), reason="../shared/nvdla (NVIDIA traces) is absent")
@pytest.mark.parametrize("name", FAST + [pytest.param(n, marks=slow) for n in SLOW])
def test_trace(name):
    trace = load_trace(nvdla_dir() / "traces" / "nv_small" / name)
    res = play_on_amaranth(trace, NV_SMALL)
    assert res.status == "PASS", res.message
    assert res.checks and all(c.ok for c in res.checks)
    atoms = res.axi["rd_beats"]
    assert res.axi["wr_beats"] == atoms > 0
    # per atom: the memory accepts a read every other cycle (2 cycles) and SDP's datapath takes
    # memory_atomic / throughput cycles (nv_small: 1 element per cycle, 8 cycles per atom, as
    # NVIDIA's RTL); the slower of the two, plus latency and fixed overhead
    lanes = max(NV_SMALL.sdp_bs_throughput, NV_SMALL.sdp_bn_throughput)
    per_atom = max(2, NV_SMALL.memory_atomic // lanes)
    assert res.cycles < per_atom * atoms + 120, (res.cycles, res.axi)
