"""Trace parser and player behaviour on bad input and on NVIDIA's interrupt protocol."""
from __future__ import annotations

import asyncio
import zlib

import pytest

from hdl.regmap import REGMAP
from verif.trace.parser import TraceDataError, TraceSyntaxError, load_dat, load_trace, parse_line
from verif.trace.player import FAIL, NOT_RUNNABLE, PASS, play


def test_reg_write_resolves_names():
    c = parse_line("reg_write(NVDLA_SDP.D_DATA_CUBE_WIDTH_0, 0x7);  // comment", "t.cfg", 3)
    assert c.kind == "reg_write" and c.args["reg"].addr == 0x903C and c.args["value"] == 7


@pytest.mark.parametrize("line, match", [
    ("reg_write(NVDLA_SDP.NOPE_0, 1);", r"t.cfg:9: no register 'NVDLA_SDP.NOPE_0'"),
    ("reg_write(NVDLA_SDP.D_DATA_CUBE_WIDTH_0);", r"t.cfg:9: reg_write takes 2 arguments"),
    ("reg_write(NVDLA_SDP.D_DATA_CUBE_WIDTH_0, zz);", r"t.cfg:9: value 'zz' is not a number"),
    ("frobnicate(1);", r"t.cfg:9: unknown command 'frobnicate'"),
    ("intr_notify(SDP, sync_id_0);", r"t.cfg:9: interrupt id 'SDP'"),
    ("mem_load(pri_mem, 0x0, noquotes.dat);", r"t.cfg:9: mem_load file name must be quoted"),
    ("reg_write NVDLA_SDP", r"t.cfg:9: cannot parse"),
    ("mem_init(cv_mem, 0x0, 0x10, ALL_ZERO);", r"t.cfg:9: memory 'cv_mem' is not one of pri_mem, sec_mem"),
    ("check_crc(s, 2, 0x0, 0x10, 0x0);", r"t.cfg:9: memory '2' is not one of"),
])
def test_malformed_lines_name_file_and_line(line, match):
    with pytest.raises(TraceSyntaxError, match=match):
        parse_line(line, "t.cfg", 9)


def test_dat_packets_merge_and_validate(tmp_path):
    p = tmp_path / "a.dat"
    p.write_text("{offset:0x0, size:2, payload:0x01 0x02},\n{offset:0x2, size:1, payload:0xff},\n"
                 "{offset:0x10, size:1, payload:0x07}\n")
    assert load_dat(p) == [(0, b"\x01\x02\xff"), (0x10, b"\x07")]
    p.write_text("{offset:0x0, size:3, payload:0x01 0x02},\n")
    with pytest.raises(TraceDataError, match=r"a.dat:1: packet 1 at offset 0x0 says size 3 but has 2"):
        load_dat(p)
    with pytest.raises(TraceDataError, match="does not exist"):
        load_dat(tmp_path / "missing.dat")


class FakeEngine:
    """A minimal Engine: memory dict, registers dict; D_OP_ENABLE of SDP raises SDP_DONE."""
    name = "fake"

    def __init__(self, fire=True):
        self.mem = bytearray(0x100)
        self.regs = {}
        self.status = 0
        self.fire = fire
        self.cycle = 0

    async def mem_write(self, addr, data, mem="pri_mem"):
        self.mem[addr:addr + len(data)] = data

    async def mem_fill(self, addr, size, value, mem="pri_mem"):
        self.mem[addr:addr + size] = bytes([value]) * size

    async def mem_read(self, addr, size, mem="pri_mem"):
        return bytes(self.mem[addr:addr + size])

    async def reg_write(self, addr, value):
        if addr == REGMAP.lookup("NVDLA_GLB.S_INTR_STATUS_0").addr:
            self.status &= ~value
        elif addr == REGMAP.lookup("NVDLA_SDP.D_OP_ENABLE_0").addr and self.fire:
            self.mem[0:4] = b"\x01\x02\x03\x04"
            self.status |= 1          # SDP_DONE_STATUS0
        self.regs[addr] = value

    async def reg_read(self, addr):
        if addr == REGMAP.lookup("NVDLA_GLB.S_INTR_STATUS_0").addr:
            return self.status
        return self.regs.get(addr, 0)

    async def wait_intr(self, max_cycles):
        self.cycle += 10
        return bool(self.status)

    async def wait_cycles(self, n):
        self.cycle += n

    async def busy_units(self):
        return ["SDP"] if not self.fire else []


def _trace(tmp_path, crc, extra=""):
    d = tmp_path / "t1"
    d.mkdir()
    (d / "t1.cfg").write_text(
        'mem_init(pri_mem, 0x0, 0x10, ALL_ZERO);\n' + extra +
        "reg_write(NVDLA_SDP.D_OP_ENABLE_0, 0x1);\nintr_notify(SDP_0, sync_id_0);\n"
        f"check_crc(sync_id_0, 1, 0x0, 0x4, {crc:#x});\n")
    return load_trace(d)


def test_player_pass_and_crc_fail(tmp_path):
    good = zlib.crc32(b"\x01\x02\x03\x04")
    r = asyncio.run(play(_trace(tmp_path, good), FakeEngine()))
    assert r.status == PASS, r.message
    (tmp_path / "t1" / "t1.cfg").unlink()
    (tmp_path / "t1").rmdir()
    r = asyncio.run(play(_trace(tmp_path, good ^ 1), FakeEngine()))
    assert r.status == FAIL and "CRC" in r.message


def test_player_timeout_names_busy_units(tmp_path):
    r = asyncio.run(play(_trace(tmp_path, 0), FakeEngine(fire=False), intr_budget=100))
    assert r.status == FAIL and "no interrupt within 100 cycles" in r.message and "SDP" in r.message


def test_missing_dat_is_not_runnable(tmp_path):
    r = asyncio.run(play(_trace(tmp_path, 0, 'mem_load(pri_mem, 0x0, "gone.dat");\n'), FakeEngine()))
    assert r.status == NOT_RUNNABLE and "gone.dat" in r.message


def test_sync_notify_and_wait(tmp_path):
    """v2_verif_guide "Configuration File Format": sync_notify/sync_wait order OP_ENABLE writes
    between resource sequencers (NVIDIA's nv_large dc_8x8x32_1x1x32x32 uses them). Played in file
    order they are no-ops; a sync_wait with no earlier sync_notify would never be released."""
    c = parse_line("sync_notify(NVDLA_CACC, L0_CACC_OP_EN);", "t.cfg", 4)
    assert c.kind == "sync_notify" and c.args == {"resource": "NVDLA_CACC", "sync": "L0_CACC_OP_EN"}
    good = zlib.crc32(b"\x01\x02\x03\x04")
    ok = "sync_notify(NVDLA_CACC, a);\nsync_wait(NVDLA_CSC, a);\n"
    r = asyncio.run(play(_trace(tmp_path, good, ok), FakeEngine()))
    assert r.status == PASS, r.message
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "t1").mkdir()
    (bad / "t1" / "t1.cfg").write_text(
        "sync_wait(NVDLA_CSC, a);\nsync_notify(NVDLA_CACC, a);\n"
        "reg_write(NVDLA_SDP.D_OP_ENABLE_0, 0x1);\nintr_notify(SDP_0, s);\ncheck_nothing(s);\n")
    with pytest.raises(TraceSyntaxError, match=r"t1.cfg:1: sync_wait waits for sync id 'a', which no "
                                               r"earlier sync_notify sends"):
        load_trace(bad / "t1")


def test_interrupt_id_is_case_insensitive():
    """NVIDIA's nv_large dc_8x8x32_1x1x32x32 writes intr_notify(cdma_dat_0, ...)."""
    c = parse_line("intr_notify(cdma_dat_0, s0);", "t.cfg", 1)
    assert c.args == {"unit": "CDMA_DAT", "group": 0, "sync": "s0"}


def test_memory_names():
    """``pri_mem``/``sec_mem`` as written; NVIDIA's nv_small traces' ``1`` is the primary memory."""
    assert parse_line("check_crc(s, 1, 0x0, 0x10, 0x0);", "t.cfg", 1).args["mem"] == "pri_mem"
    assert parse_line("check_crc(s, sec_mem, 0x0, 0x10, 0x0);", "t.cfg", 1).args["mem"] == "sec_mem"
    assert parse_line('mem_load(sec_mem, 0x0, "a.dat");', "t.cfg", 1).args["mem"] == "sec_mem"
