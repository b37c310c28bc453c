"""The model's register programming model: ping-pong groups, pointers, status, interrupts."""
from __future__ import annotations

from hdl.config import NV_SMALL
from verif.model import Nvdla


def test_producer_selects_group_and_consumer_is_read_only():
    dla = Nvdla(NV_SMALL)
    dla.write("NVDLA_PDP.D_DATA_CUBE_IN_WIDTH_0", 5)
    dla.write("NVDLA_PDP.S_POINTER_0", 1)               # producer -> group 1
    assert dla.read("NVDLA_PDP.D_DATA_CUBE_IN_WIDTH_0") == 0
    dla.write("NVDLA_PDP.D_DATA_CUBE_IN_WIDTH_0", 9)
    assert dla.read("NVDLA_PDP.D_DATA_CUBE_IN_WIDTH_0") == 9
    dla.write("NVDLA_PDP.S_POINTER_0", 0xFFFF_0000)     # CONSUMER (bit 16) is not writable
    assert dla.read("NVDLA_PDP.S_POINTER_0") == 0
    assert dla.read("NVDLA_PDP.D_DATA_CUBE_IN_WIDTH_0") == 5


def test_enable_without_partner_stays_pending_and_status_shows_it():
    dla = Nvdla(NV_SMALL)
    dla.write("NVDLA_PDP.D_OPERATION_MODE_CFG_0", 0x10)   # offline (OFF_FLYING): needs PDP_RDMA
    dla.write("NVDLA_PDP.D_OP_ENABLE_0", 1)
    assert dla.read("NVDLA_PDP.S_STATUS_0") & 0x3 == 1    # group 0 RUNNING (waiting for PDP_RDMA)
    assert dla.read("NVDLA_PDP.D_OP_ENABLE_0") == 1
    assert dla.busy_units() == ["PDP"] and not dla.intr


def test_glb_interrupt_mask_set_and_clear():
    dla = Nvdla(NV_SMALL)
    dla.write("NVDLA_GLB.S_INTR_SET_0", 1 << 4)          # PDP_DONE_SET0
    assert dla.read("NVDLA_GLB.S_INTR_STATUS_0") == 1 << 4 and dla.intr
    dla.write("NVDLA_GLB.S_INTR_MASK_0", 1 << 4)
    assert not dla.intr
    dla.write("NVDLA_GLB.S_INTR_STATUS_0", 1 << 4)       # write one to clear
    assert dla.read("NVDLA_GLB.S_INTR_STATUS_0") == 0


def test_cbuf_flush_done_and_hw_version():
    dla = Nvdla(NV_SMALL)
    assert dla.read("NVDLA_CDMA.S_CBUF_FLUSH_STATUS_0") == 1
    from hdl.regmap import REGMAP
    assert dla.read("NVDLA_GLB.S_NVDLA_HW_VERSION_0") == REGMAP.lookup("NVDLA_GLB.S_NVDLA_HW_VERSION_0").reg.reset
