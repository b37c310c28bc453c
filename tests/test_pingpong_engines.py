"""Ping-pong and GLB interrupt semantics, one register program on all three engines.

The program (written here as a trace, played by the one trace player) queues two SDP layers in
both register groups (v1_hwarch.rst "Ping-pong synchronization": software writes the producer
group through ``S_POINTER``, arms it with ``D_OP_ENABLE``; the unit runs its consumer group,
clears that group's enable, flips the consumer pointer and raises ``SDP_DONE_STATUS<g>``) with
group 1's done interrupt masked in ``GLB.S_INTR_MASK`` (the status bit is still recorded,
``dla_intr`` stays low until it is unmasked). Observable outcome, the same on the ``model``,
``amaranth`` and ``rtl`` engines: the player services ``SDP_0`` (clearing only the unmasked
bit), ``S_INTR_STATUS`` then reads exactly ``SDP_DONE_STATUS1``, ``S_STATUS`` is idle,
``S_POINTER`` reads producer 1 / consumer 0, the producer group's ``D_OP_ENABLE`` reads 0;
unmasking raises the interrupt that the player matches to ``SDP_1``; both outputs have the CRC
of the converter outputs computed with the numpy model's ``output_convert``. The two timed
engines (same RTL) also take the same number of cycles.
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from hdl.config import NV_SMALL
from verif.gen.writer import TraceWriter
from verif.model.sdp import output_convert
from verif.trace.player import PASS
from needs import needs_verilator

SRC, DST0, DST1 = 0x8000_0000, 0x8010_0000, 0x8020_0000
W, H, C = 3, 2, 12                  # two surfaces, the last one partial (4 of 8 channels)
GROUPS = [(DST0, 0, 1, 0), (DST1, -20, 3, 2)]          # (dst, cvt offset, scale, shift)


def _src() -> bytes:
    atom = NV_SMALL.atom_bytes
    return bytes((i * 37 + 11) & 0xFF for i in range(W * H * atom * -(-C // NV_SMALL.memory_atomic)))


def _expected(off, scale, shift) -> bytes:
    x = np.frombuffer(_src(), np.int8).astype(np.int64)
    return (output_convert(x, off, scale, shift) & 0xFF).astype(np.uint8).tobytes()


def write_program(d, src_base: int = SRC, *, back_to_back: bool = False) -> None:
    """The test's trace directory: ``pingpong.cfg`` and its memory images (written by the shared
    trace writer, verif/gen/writer.py); the input cube at ``src_base`` (a cube running past
    4 GiB is loaded as two images, its end at address 0).

    ``back_to_back``: nothing masked, and the player waits for ``SDP_1`` right after servicing
    ``SDP_0`` (two ``intr_notify`` lines in a row): its posted clear of ``S_INTR_STATUS`` is still
    on its way (GLB registers ``dla_intr``) when it starts waiting for the next interrupt."""
    src = _src()
    top = (1 << NV_SMALL.mem_address_width) - src_base      # bytes below the top of memory
    parts = [(src_base, src)] if top >= len(src) else [(src_base, src[:top]), (0, src[top:])]
    w = TraceWriter("pingpong")
    for i, (base, data) in enumerate(parts):
        w.mem_load(base, data, file=f"src{i}.dat")
    atom = NV_SMALL.atom_bytes
    line, surf = W * atom, W * H * atom
    w.reg_write("NVDLA_GLB.S_INTR_MASK_0", 0 if back_to_back else 2, "SDP_DONE_MASK1")
    for g, (dst, off, scale, shift) in enumerate(GROUPS):
        w.reg_write("NVDLA_SDP.S_POINTER_0", g)
        w.reg_write("NVDLA_SDP_RDMA.S_POINTER_0", g)
        for unit in ("SDP_RDMA", "SDP"):
            w.reg_write(f"NVDLA_{unit}.D_DATA_CUBE_WIDTH_0", W - 1)
            w.reg_write(f"NVDLA_{unit}.D_DATA_CUBE_HEIGHT_0", H - 1)
            w.reg_write(f"NVDLA_{unit}.D_DATA_CUBE_CHANNEL_0", C - 1)
        for name, v, note in (
                ("SDP_RDMA.D_SRC_BASE_ADDR_LOW", src_base, None),
                ("SDP_RDMA.D_SRC_LINE_STRIDE", line, None),
                ("SDP_RDMA.D_SRC_SURFACE_STRIDE", surf, None),
                ("SDP_RDMA.D_SRC_DMA_CFG", 1, None),
                ("SDP_RDMA.D_BRDMA_CFG", 1, None),
                ("SDP_RDMA.D_NRDMA_CFG", 1, None),
                ("SDP_RDMA.D_ERDMA_CFG", 1, None),
                ("SDP_RDMA.D_FEATURE_MODE_CFG", 0, "INT8, flying off"),
                ("SDP.D_FEATURE_MODE_CFG", 0, None),
                ("SDP.D_DATA_FORMAT", 0, None),
                ("SDP.D_DP_BS_CFG", 1, None),
                ("SDP.D_DP_BN_CFG", 1, None),
                ("SDP.D_DP_EW_CFG", 1, None),
                ("SDP.D_DST_DMA_CFG", 1, None),
                ("SDP.D_DST_BASE_ADDR_LOW", dst, None),
                ("SDP.D_DST_LINE_STRIDE", line, None),
                ("SDP.D_DST_SURFACE_STRIDE", surf, None),
                ("SDP.D_CVT_OFFSET", off & 0xFFFFFFFF, None),
                ("SDP.D_CVT_SCALE", scale, None),
                ("SDP.D_CVT_SHIFT", shift, None)):
            w.reg_write(f"NVDLA_{name}_0", v, note)
    for g in range(2):
        w.reg_write("NVDLA_SDP.S_POINTER_0", g)
        w.reg_write("NVDLA_SDP_RDMA.S_POINTER_0", g)
        w.reg_write("NVDLA_SDP_RDMA.D_OP_ENABLE_0", 1)
        w.reg_write("NVDLA_SDP.D_OP_ENABLE_0", 1)
    size = len(_src())
    w.intr_notify("SDP_0", "layer0")
    if not back_to_back:
        w.poll("NVDLA_GLB.S_INTR_STATUS_0", 0x2, "group 1 done, masked: recorded")
        w.poll("NVDLA_SDP.S_STATUS_0", 0)
        w.poll("NVDLA_SDP_RDMA.S_STATUS_0", 0)
        w.poll("NVDLA_SDP.S_POINTER_0", 1, "producer 1, consumer back to 0")
        w.poll("NVDLA_SDP.D_OP_ENABLE_0", 0)
        w.reg_write("NVDLA_GLB.S_INTR_MASK_0", 0, "unmask: dla_intr rises")
    w.intr_notify("SDP_1", "layer1")
    for dst, off, scale, shift in GROUPS:
        w.check_crc("layer1", dst, size, zlib.crc32(_expected(off, scale, shift)) & 0xFFFFFFFF)
    w.write(d, cfg_name="pingpong")


def _check(res) -> None:
    assert res.status == PASS, res.message
    assert len(res.checks) == 2 and all(c.ok for c in res.checks)
    assert [(c.base, c.actual) for c in res.checks] == [
        (g[0], zlib.crc32(_expected(*g[1:])) & 0xFFFFFFFF) for g in GROUPS]


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    d = tmp_path_factory.mktemp("pingpong") / "pingpong"
    write_program(d)
    return d


@pytest.fixture(scope="module")
def amaranth_result(program):
    from verif.trace.runner import run_amaranth
    (res,) = run_amaranth([program], NV_SMALL)
    return res


@pytest.fixture(scope="module")
def straddle(tmp_path_factory):
    """The same program with the input cube straddling 4 GiB (surface 0 at 0xffffffd0: the
    address adders wrap, the cube continues at address 0)."""
    d = tmp_path_factory.mktemp("straddle") / "straddle"
    write_program(d, src_base=0xFFFF_FFD0)
    return d


def test_model(program, straddle):
    from verif.trace.runner import run_model
    for p in (program, straddle):
        (res,) = run_model([p], NV_SMALL)
        _check(res)
        assert res.cycles is None


def test_amaranth(amaranth_result, straddle):
    from verif.trace.runner import run_amaranth
    _check(amaranth_result)
    assert amaranth_result.cycles > 0
    (res,) = run_amaranth([straddle], NV_SMALL)
    _check(res)


@pytest.mark.rtl
@needs_verilator
def test_rtl(program, amaranth_result, straddle):
    from verif.trace.runner import run
    res = {r.name: r for r in run([program, straddle], "rtl", NV_SMALL, traces_per_process=2)}
    _check(res["pingpong"])
    _check(res["straddle"])
    assert res["pingpong"].cycles == amaranth_result.cycles   # same RTL and memory timing


# ---- the player's interrupt protocol after a posted clear -------------------------------------
# Two intr_notify lines in a row: after servicing SDP_0 the player waits for SDP_1 while its
# posted clear of S_INTR_STATUS is still on its way and the registered dla_intr still high. The
# player used to read S_INTR_STATUS then (0) and fail with "dla_intr is high but S_INTR_STATUS &
# ~S_INTR_MASK is 0"; it now lets the line drop first (verif/trace/player.py
# Player._wait_intr_settled). The amaranth engine reproduced the failure before the fix.

@pytest.fixture(scope="module")
def back_to_back(tmp_path_factory):
    d = tmp_path_factory.mktemp("b2b") / "back_to_back"
    write_program(d, back_to_back=True)
    return d


def test_back_to_back_model_and_amaranth(back_to_back):
    from verif.trace.runner import run_amaranth, run_model
    (res,) = run_model([back_to_back], NV_SMALL)
    _check(res)
    (res,) = run_amaranth([back_to_back], NV_SMALL)
    _check(res)
    assert res.cycles > 0


@pytest.mark.rtl
@needs_verilator
def test_back_to_back_rtl(back_to_back):
    from verif.trace.runner import run, run_amaranth
    (res,) = run([back_to_back], "rtl", NV_SMALL, traces_per_process=1)
    _check(res)
    (ref,) = run_amaranth([back_to_back], NV_SMALL)
    assert res.cycles == ref.cycles


class _StuckGlb:
    """A timed engine whose dla_intr rises once SDP_0 is done and never drops, whatever the
    status says (a GLB that does not follow its status): the player must fail with a clear
    message, not loop or blame the status read."""
    name = "fake"
    address_width = 32

    def __init__(self):
        from verif.trace.player import GLB_INTR_STATUS
        self.status_addr = GLB_INTR_STATUS.addr
        self.cycle, self.status = 0, 1          # SDP_DONE_STATUS0 (bit 0 in NVIDIA's layout)

    async def mem_write(self, addr, data, mem="pri_mem"): pass
    async def mem_fill(self, addr, size, value, mem="pri_mem"): pass
    async def mem_read(self, addr, size, mem="pri_mem"): return bytes(size)
    async def reg_write(self, addr, value):
        self.cycle += 1
        if addr == self.status_addr:
            self.status &= ~value
    async def reg_read(self, addr):
        self.cycle += 3
        return self.status if addr == self.status_addr else 0
    async def wait_intr(self, max_cycles): return True
    async def wait_cycles(self, n): self.cycle += n
    async def busy_units(self): return []


def test_stuck_interrupt_line_is_a_clear_failure(tmp_path):
    import asyncio

    from hdl.regmap import REGMAP
    from verif.trace.parser import load_trace
    from verif.trace.player import FAIL, play
    assert REGMAP.lookup("NVDLA_GLB.S_INTR_STATUS_0").reg.field("SDP_DONE_STATUS0").lsb == 0
    d = tmp_path / "stuck"
    d.mkdir()
    (d / "stuck.cfg").write_text("reg_write(NVDLA_SDP.D_OP_ENABLE_0, 0x1);\n"
                                 "intr_notify(SDP_0, a);\nintr_notify(SDP_1, b);\n"
                                 "check_nothing(b);\n")
    res = asyncio.run(play(load_trace(d), _StuckGlb(), intr_budget=1000, intr_drop_budget=20))
    assert res.status == FAIL
    assert "dla_intr still high" in res.message and "cleared S_INTR_STATUS bits 0x1" in res.message
