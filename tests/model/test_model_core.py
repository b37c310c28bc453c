"""The model's register programming model: ping-pong groups, pointers, status, interrupts;
rejected register accesses; memory address width."""
from __future__ import annotations

import numpy as np
import pytest

from hdl.config import NV_FULL, NV_SMALL
from hdl.regmap import REGMAP
from verif.model import Nvdla
from verif.model.nvdla import RegisterAccessError


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
    assert dla.read("NVDLA_GLB.S_NVDLA_HW_VERSION_0") == REGMAP.lookup("NVDLA_GLB.S_NVDLA_HW_VERSION_0").reg.reset


# ---- bad accesses: each names the rule it breaks --------------------------------------------
SDP_WIDTH = REGMAP.lookup("NVDLA_SDP.D_DATA_CUBE_WIDTH_0").addr


@pytest.mark.parametrize("reg, exc, match", [
    ("NVDLA_SDP.NOPE_0", RegisterAccessError, r"unknown register name: no register 'NVDLA_SDP.NOPE_0'"),
    ("SDP_WIDTH", RegisterAccessError, r"unknown register name: register name 'SDP_WIDTH' is not of the form"),
    (SDP_WIDTH + 2, RegisterAccessError, rf"register address {SDP_WIDTH + 2:#x} is not 4-byte aligned"),
    (0x9FFC, RegisterAccessError, r"no register at address 0x9ffc \(offset 0xffc of NVDLA_SDP\)"),
    (0x7FFF_FFF0, RegisterAccessError, r"no register at address 0x7ffffff0$"),
    (-4, RegisterAccessError, r"no register at address -0x4$"),
    ("NVDLA_BDMA.CFG_STATUS_0", RegisterAccessError, r"unit BDMA is not in configuration nv_small"),
    (1.5, TypeError, r"register must be a byte address \(int\) or a register name \(str\), got float"),
    (None, TypeError, r"got NoneType"),
])
def test_bad_register_is_rejected_on_write_and_read(reg, exc, match):
    dla = Nvdla(NV_SMALL)
    with pytest.raises(exc, match=match):
        dla.write(reg, 1)
    with pytest.raises(exc, match=match):
        dla.read(reg)


@pytest.mark.parametrize("value, exc, match", [
    (1 << 32, RegisterAccessError, r"value 0x100000000 for NVDLA_SDP.D_DATA_CUBE_WIDTH_0 is outside 0..0xffffffff"),
    (-1, RegisterAccessError, r"value -0x1 for NVDLA_SDP.D_DATA_CUBE_WIDTH_0 is outside"),
    (7.0, TypeError, r"value for NVDLA_SDP.D_DATA_CUBE_WIDTH_0 must be an int, got float 7.0"),
    ("7", TypeError, r"must be an int, got str '7'"),
    (True, TypeError, r"must be an int, got bool"),
])
def test_bad_value_is_rejected_and_register_unchanged(value, exc, match):
    dla = Nvdla(NV_SMALL)
    dla.write(SDP_WIDTH, 5)
    with pytest.raises(exc, match=match):
        dla.write("NVDLA_SDP.D_DATA_CUBE_WIDTH_0", value)
    assert dla.read(SDP_WIDTH) == 5


def test_good_accesses_by_address_name_and_numpy_int():
    dla = Nvdla(NV_SMALL)
    dla.write(np.uint32(SDP_WIDTH), np.int64(0xFFFF_FFFF))
    assert dla.read("NVDLA_SDP.D_DATA_CUBE_WIDTH_0") == REGMAP.lookup(
        "NVDLA_SDP.D_DATA_CUBE_WIDTH_0").reg.write_mask


def test_memory_wraps_at_configured_address_width():
    dla = Nvdla(NV_SMALL)                       # mem_address_width 32: 4 GiB wraps to 0
    assert dla.mem.address_width == NV_SMALL.mem_address_width == 32
    dla.mem.write(0xFFFF_FFFE, b"\x01\x02\x03\x04")
    assert bytes(dla.mem.read(0, 2)) == b"\x03\x04"
    assert bytes(dla.mem.read(0xFFFF_FFFE, 4)) == b"\x01\x02\x03\x04"
    big = Nvdla(NV_FULL)                       # 64-bit: no wrap at 4 GiB
    big.mem.write(0xFFFF_FFFE, b"\x01\x02\x03\x04")
    assert bytes(big.mem.read(0, 2)) == b"\x00\x00"
    assert bytes(big.mem.read(0x1_0000_0000, 2)) == b"\x03\x04"
