# amaranth: UnusedElaboratable=no
"""The board top (hdl/board/top.py: NV_nvdla's core, UART bridge, block RAM) runs one of NVIDIA's
nv_small traces end to end in Amaranth's simulator, driven only through its UART pins
(verif/trace/board_engine.py): memory filled and loaded through the bridge, the registers
written over CSB through it, the interrupt waited for with WAIT_INTR, the output read back with
READ_MEM and its CRC compared with the trace's golden one. About a minute (elaboration of the
whole core included): marked slow."""
from __future__ import annotations

import pytest

from hdl.config import NV_SMALL
from verif.trace.board_engine import play_on_board, regions_fit
from verif.shared import have_shared, nvdla_dir
from verif.trace.parser import load_trace
from verif.trace.runner import run

pytestmark = pytest.mark.skipif(not have_shared(), reason="../shared/nvdla (NVIDIA traces) is absent")


def _trace(name):
    return load_trace(nvdla_dir() / "traces" / "nv_small" / name)


def test_regions_fit():
    t = _trace("sdp_1x1x1_pass_through_int8")
    assert regions_fit(t, 16384) is None
    # 0x80000400+8 and 0x90000040+8 collide in a 64-byte memory... at offsets 0 and 0
    assert "share bytes" in regions_fit(t, 64)


def test_trace_not_fitting_is_refused_before_running():
    """dc_1x1x8's surfaces at 0x90000000 and 0xa0000000 share the board memory's bytes: FAIL,
    the regions named, nothing simulated (the ``board`` engine of ``python -m verif.trace``)."""
    (res,) = run([nvdla_dir() / "traces" / "nv_small" / "dc_1x1x8_1x1x8x1_int8_0"], "board",
                 NV_SMALL)
    assert res.status == "FAIL"
    assert "does not fit the board memory" in res.message and "0xa0000000" in res.message


@pytest.mark.slow
def test_sdp_trace_through_uart():
    t = _trace("sdp_1x1x1_pass_through_int8")
    res = play_on_board(t, NV_SMALL, divisor=2, mem_bytes=16384)
    assert res.status == "PASS", res.message
    assert [(c.expected, c.actual) for c in res.checks] == [(0xCB0EA2DB, 0xCB0EA2DB)]
    assert len(res.checks[0].data) == 8          # the 8 output bytes, read over the UART
    assert res.uart_cycles > res.cycles > 0
