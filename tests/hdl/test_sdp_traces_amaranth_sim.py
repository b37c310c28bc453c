"""End to end: NVIDIA's SDP passthrough traces on NvdlaCore in Amaranth's simulator (CSB writes
from the .cfg, Python AXI memory with 32-cycle read latency accepting a request every other
cycle), output compared byte for byte with the golden dumps.

The two 8192-atom traces take ~1-2 minutes each in the Python simulator; they are marked
``slow`` (deselected by default; run them with ``python -m pytest -m slow``). The same traces run
on Verilator in tests/test_traces.py.
"""
import pytest

from hdl.config import NV_SMALL
from hdl_harness import GOLDEN, TRACES, run_trace

FAST = ["sdp_1x1x1_pass_through_int8", "sdp_1x1x8_pass_through_int8_0", "sdp_8x8x32_bypass_int8_0",
        "sdp_8x8x32_bypass_int8_1", "sdp_4x22x42_bypass_int8"]
SLOW = ["sdp_8192x1x1_pass_through_int8_0", "sdp_1x8192x1_pass_through_int8_0"]
slow = pytest.mark.slow


@pytest.mark.parametrize("name", FAST + [pytest.param(n, marks=slow) for n in SLOW])
def test_trace(name):
    if not (TRACES / name).is_dir() or not (GOLDEN / name).is_dir():
        pytest.skip("NVIDIA traces not available")
    mem, checks, stats = run_trace(name, NV_SMALL)
    assert checks, "trace has no check"
    assert stats["intr_status"] & 1, "SDP_DONE_STATUS0 not set"
    for base, size, gold in checks:
        assert gold is not None
        got = mem.read(base, size)
        bad = [i for i in range(size) if got[i] != gold[i]]
        assert not bad, f"{len(bad)} bytes differ, first at {base + bad[0]:#x}"
    atoms = stats["reads"]
    assert stats["writes"] == atoms
    # memory accepts a read every other cycle: 2 cycles/atom + latency + fixed overhead
    assert stats["cycles"] < 2 * atoms + 120, stats
