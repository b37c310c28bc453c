"""End to end: SDP's output on the fly to PDP (SDP D_FEATURE_MODE_CFG.OUTPUT_DST = PDP, PDP
D_OPERATION_MODE_CFG.FLYING_MODE = ON_FLYING) on NvdlaCore in Amaranth's simulator, with NVIDIA's
trace sdp_pdp_32x16x32_pass_through_int8_0 checked against its golden CRC.

The fused layer reads the input cube once (SDP's MRDMA; PDP_RDMA takes no part) and writes it
once (PDP's WDMA; SDP's WDMA stays idle); both SDP_0 and PDP_0 interrupts fire (the player fails
on a missing or unexpected one).
"""
import pytest

from hdl.config import NV_SMALL
from verif.shared import have_shared, nvdla_dir
from verif.trace.amaranth_engine import play_on_amaranth
from verif.trace.parser import load_trace


@pytest.mark.slow
@pytest.mark.skipif(not have_shared(), reason="../shared/nvdla (NVIDIA traces) is absent")
def test_sdp_to_pdp_on_the_fly():
    trace = load_trace(nvdla_dir() / "traces" / "nv_small" / "sdp_pdp_32x16x32_pass_through_int8_0")
    res = play_on_amaranth(trace, NV_SMALL)
    assert res.status == "PASS", res.message
    assert res.checks and all(c.ok for c in res.checks)
    atoms = 32 * 16 * (32 // NV_SMALL.memory_atomic)
    beats_per_atom = NV_SMALL.atom_bytes * 8 // NV_SMALL.primary_memif_width
    # one read of the cube (MRDMA), one write (PDP WDMA): nothing through PDP_RDMA or SDP WDMA
    assert res.axi["rd_beats"] == res.axi["wr_beats"] == atoms * beats_per_atom, res.axi
