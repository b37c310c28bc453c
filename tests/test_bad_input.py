"""Bad input as a new user tries it (issue 6 item 7): every case is an error that names the
file and line (or packet), never a silent PASS, a silently dropped packet or a long walk."""
from __future__ import annotations

import asyncio
import time
import zlib

import pytest

from hdl.regmap import REGMAP
from verif.shared import have_shared, nvdla_dir
from verif.trace import __main__ as cli
from verif.trace.parser import (MAX_REGION_BYTES, TraceDataError, TraceSyntaxError, find_traces,
                                load_dat, load_trace, parse_line)
from verif.trace.player import FAIL, PASS, play

INTR_SET = REGMAP.lookup("NVDLA_GLB.S_INTR_SET_0").addr
INTR_STATUS = REGMAP.lookup("NVDLA_GLB.S_INTR_STATUS_0").addr
# a complete trace that passes on any engine with NVIDIA's GLB: S_INTR_SET raises SDP_DONE0
GOOD = ("reg_write(NVDLA_GLB.S_INTR_SET_0, 0x1);\n"
        "intr_notify(SDP_0, sync0);\n"
        "check_nothing(sync0);\n")


def make_trace(root, name, cfg: str | bytes, dats: dict | None = None):
    """A trace directory ``root/name`` with ``name.cfg`` and the given ``.dat`` files."""
    d = root / name
    d.mkdir()
    p = d / f"{name}.cfg"
    p.write_bytes(cfg if isinstance(cfg, bytes) else cfg.encode())
    for fn, text in (dats or {}).items():
        (d / fn).write_bytes(text if isinstance(text, bytes) else text.encode())
    return d


class RecordingEngine:
    """An Engine that records every call and raises SDP_DONE0 on S_INTR_SET (no real DUT)."""
    name = "recording"
    cycle = None

    def __init__(self, **attrs):
        self.calls = []
        self.status = 0
        self.__dict__.update(attrs)

    async def mem_write(self, addr, data, mem="pri_mem"):
        self.calls.append(("mem_write", addr, len(data)))

    async def mem_fill(self, addr, size, value, mem="pri_mem"):
        self.calls.append(("mem_fill", addr, size))

    async def mem_read(self, addr, size, mem="pri_mem"):
        self.calls.append(("mem_read", addr, size))
        return bytes(size)

    async def reg_write(self, addr, value):
        self.calls.append(("reg_write", addr, value))
        if addr == INTR_SET:
            self.status |= value
        elif addr == INTR_STATUS:     # write one to clear
            self.status &= ~value

    async def reg_read(self, addr):
        return self.status if addr == INTR_STATUS else 0

    async def wait_intr(self, max_cycles):
        return bool(self.status)

    async def wait_cycles(self, n):
        pass

    async def busy_units(self):
        return []


def test_good_trace_passes(tmp_path):
    r = asyncio.run(play(load_trace(make_trace(tmp_path, "good", GOOD)), RecordingEngine()))
    assert r.status == PASS, r.message


# ---- 1. a kick-off with nothing checking its result ----------------------------------------

def test_no_check_after_last_kickoff_is_a_syntax_error(tmp_path):
    d = make_trace(tmp_path, "t", GOOD + "reg_write(NVDLA_SDP.D_DATA_CUBE_WIDTH_0, 0x7);\n"
                   "reg_write(NVDLA_SDP.D_OP_ENABLE_0, 0x1);\nintr_notify(SDP_0, sync1);\n")
    with pytest.raises(TraceSyntaxError, match=rf"{d / 't.cfg'}:5: no check_crc or check_nothing "
                       r"after this kick-off \(NVDLA_SDP.D_OP_ENABLE_0 = 0x1\)"):
        load_trace(d)


def test_disabling_write_is_not_a_kickoff(tmp_path):
    # D_OP_ENABLE = 0 (bit 0 clear) starts nothing: nothing to check after it
    load_trace(make_trace(tmp_path, "t", GOOD + "reg_write(NVDLA_SDP.D_OP_ENABLE_0, 0x0);\n"))


def test_trace_without_any_check_is_a_syntax_error(tmp_path):
    d = make_trace(tmp_path, "t", "reg_write(NVDLA_SDP.D_DATA_CUBE_WIDTH_0, 0x7);\n")
    with pytest.raises(TraceSyntaxError, match=rf"{d / 't.cfg'}:1: no check_crc or check_nothing: "
                       "the trace checks nothing"):
        load_trace(d)


def test_check_of_a_sync_id_nothing_fires_is_a_syntax_error(tmp_path):
    d = make_trace(tmp_path, "t", GOOD + "check_nothing(sync9);\n")
    with pytest.raises(TraceSyntaxError, match=rf"{d / 't.cfg'}:4: check_nothing waits for sync id "
                       "'sync9', which no intr_notify fires"):
        load_trace(d)


@pytest.mark.skipif(not have_shared(), reason="needs NVIDIA's traces in ../shared/nvdla")
def test_nvidia_traces_still_load():
    traces = nvdla_dir() / "traces"
    dirs = find_traces([traces / "nv_small", traces / "nv_small_generated"])
    assert len(dirs) == 94
    for d in dirs:
        load_trace(d)


# ---- 2. non-UTF-8 .cfg: one trace's error, the batch goes on --------------------------------

def test_non_utf8_cfg_names_file_and_line(tmp_path):
    d = make_trace(tmp_path, "t", GOOD.encode() + b"// caf\xe9\n")
    with pytest.raises(TraceSyntaxError, match=rf"{d / 't.cfg'}:4: byte 0xe9 is not UTF-8 text"):
        load_trace(d)


def test_batch_goes_on_after_a_non_utf8_cfg(tmp_path, capsys):
    make_trace(tmp_path, "a_bad", b"reg_write(NVDLA_SDP.D_DATA_CUBE_WIDTH_0, 0x7);\xff\n" + GOOD.encode())
    make_trace(tmp_path, "b_good", GOOD)
    rc = cli.main(["run", str(tmp_path), "--engine", "model"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "FAIL         a_bad" in out and "a_bad.cfg:1: byte 0xff is not UTF-8 text" in out
    assert "PASS         b_good" in out
    assert out.rstrip().endswith("1 passed, 1 failed, 0 not runnable")


# ---- 3. malformed .dat packets ---------------------------------------------------------------

GOOD_DAT = "{\n{offset:0x0, size:2, payload:0x01 0x02} ,\n{offset:0x2, size:2, payload:0x03 0x04} ,\n}\n"


def test_wrapped_and_unwrapped_dat_files(tmp_path):
    p = tmp_path / "a.dat"
    p.write_text(GOOD_DAT)
    assert load_dat(p) == [(0, b"\x01\x02\x03\x04")]
    p.write_text("{offset:0x10, size:1, payload:0x7},\n{offset:32, size:0x1, payload:0xAb},")
    assert load_dat(p) == [(0x10, b"\x07"), (0x20, b"\xab")]
    for empty in ("", "{}", "{ }\n", "\n"):
        p.write_text(empty)
        assert load_dat(p) == []


@pytest.mark.parametrize("text, match", [
    # missing comma between packets
    ("{offset:0x0, size:1, payload:0x01}\n{offset:0x1, size:1, payload:0x02},\n",
     r"a.dat:1: packet 1 \(offset 0x0\) is not followed by a comma"),
    # missing comma inside a packet
    ("{offset:0x0, size:1, payload:0x01},\n{offset:0x1 size:1, payload:0x02},\n",
     r"a.dat:2: packet 2 needs a comma between each of offset, size and payload"),
    # bad key
    ("{offset:0x0, size:1, payload:0x01},\n{offset:0x1, length:1, payload:0x02},\n",
     r"a.dat:2: packet 2 has keys \['offset', 'length', 'payload'\], expected"),
    # wrong byte count
    ("{\n{offset:0x0, size:1, payload:0x01},\n{offset:0x1, size:3, payload:0x02 0x03},\n}\n",
     r"a.dat:3: packet 2 at offset 0x1 says size 3 but has 2 payload bytes"),
    # bad hex byte
    ("{offset:0x0, size:2, payload:0x01 0xg2},\n",
     r"a.dat:1: packet 1 \(offset 0x0\) payload byte '0xg2' is not 0x00..0xff"),
    ("{offset:0x0, size:1, payload:0x100},\n",
     r"a.dat:1: packet 1 \(offset 0x0\) payload byte '0x100' is not 0x00..0xff"),
    ("{offset:0x0, size:2, payload:0x010x02},\n",
     r"a.dat:1: packet 1 \(offset 0x0\) payload byte '0x010x02' is not 0x00..0xff"),
    # bad number
    ("{offset:zz, size:1, payload:0x01},\n", r"a.dat:1: packet 1 offset 'zz' is not a number"),
    # garbage between packets
    ("{offset:0x0, size:1, payload:0x01},\nhello\n{offset:0x1, size:1, payload:0x02},\n",
     r"a.dat:2: unexpected text 'hello' before packet 2"),
    ("{offset:0x0, size:1, payload:0x01},\ntrailing junk",
     r"a.dat:2: unexpected text 'trailing junk' before packet 2"),
    # unclosed packet, unclosed outer brace
    ("{offset:0x0, size:1, payload:0x01,\n{offset:0x1, size:1, payload:0x02},\n",
     r"a.dat:1: packet 1 has no closing '}'"),
    ("{\n{offset:0x0, size:1, payload:0x01},\n",
     r"a.dat:2: the file's opening '{' \(around all packets\) has no closing '}'"),
    # not UTF-8
    (b"{offset:0x0, size:1, payload:0x01},\n{offset:0x1, size:1, payload:\xff},\n",
     r"a.dat:2: byte 0xff is not UTF-8 text"),
])
def test_malformed_dat_names_file_line_and_packet(tmp_path, text, match):
    p = tmp_path / "a.dat"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(TraceDataError, match=match):
        load_dat(p)


def test_malformed_dat_fails_the_trace_before_anything_runs(tmp_path):
    d = make_trace(tmp_path, "t", 'mem_load(pri_mem, 0x80000000, "in.dat");\n' + GOOD,
                   {"in.dat": "{offset:0x0, size:2, payload:0x01},\n"})
    eng = RecordingEngine()
    r = asyncio.run(play(load_trace(d), eng))
    assert r.status == FAIL
    assert f"{d / 'in.dat'}:1: packet 1 at offset 0x0 says size 2 but has 1 payload bytes" in r.message
    assert eng.calls == []


def test_malformed_dat_is_a_failure_on_the_cli(tmp_path, capsys):
    make_trace(tmp_path, "t", 'mem_load(pri_mem, 0x80000000, "in.dat");\n' + GOOD,
               {"in.dat": "{offset:0x0, size:1, payload:0x01} garbage\n"})
    assert cli.main(["run", str(tmp_path / "t"), "--engine", "model"]) == 1
    out = capsys.readouterr().out
    assert "in.dat:1: packet 1 (offset 0x0) is not followed by a comma" in out
    assert out.rstrip().endswith("0 passed, 1 failed, 0 not runnable")


def test_load_dat_stays_fast(tmp_path):
    # 2 MB of text, 32-byte packets (NVIDIA's largest images are 5 MB)
    pkt = " ".join(f"0x{i:02x}" for i in range(32))
    text = "{\n" + "".join(f"{{offset:{i * 32:#x}, size:32, payload:{pkt}}} ,\n" for i in range(12_000)) + "}\n"
    p = tmp_path / "big.dat"
    p.write_text(text)
    t0 = time.perf_counter()
    runs = load_dat(p)
    dt = time.perf_counter() - t0
    assert runs == [(0, bytes(range(32)) * 12_000)]
    assert dt < 2.0, f"load_dat took {dt:.2f} s for {len(text) / 1e6:.1f} MB"


# ---- 4. regions outside the address space ---------------------------------------------------

@pytest.mark.parametrize("line, what", [
    ("mem_init(pri_mem, 0xffffff00, 0x200, ALL_ZERO);", "mem_init: region 0xffffff00..0x1000000ff"),
    (f"check_crc(sync0, pri_mem, 0x100000000, 0x10, {zlib.crc32(bytes(16)):#x});",
     "check_crc: region 0x100000000..0x10000000f"),
    ('mem_load(pri_mem, 0x100000000, "in.dat");', "mem_load: in.dat spans 0x2 bytes from 0x100000000"),
    ('mem_load(pri_mem, 0xffffffff, "in.dat");', "mem_load: in.dat spans 0x2 bytes from 0xffffffff"),
])
def test_region_outside_address_space_fails_before_anything_runs(tmp_path, line, what):
    d = make_trace(tmp_path, "t", GOOD + line + "\n",
                   {"in.dat": "{offset:0x0, size:2, payload:0x01 0x02},\n"})
    eng = RecordingEngine()                           # no address_width attribute: 32 bits
    r = asyncio.run(play(load_trace(d), eng))
    assert r.status == FAIL
    assert f"{d / 't.cfg'}:4: {what}" in r.message and "outside the 32-bit address space" in r.message
    assert eng.calls == []
    # the engine's address width, or the keyword, allows it
    assert asyncio.run(play(load_trace(d), RecordingEngine(address_width=40))).status == PASS
    assert asyncio.run(play(load_trace(d), RecordingEngine(), address_width=33)).status == PASS
    r = asyncio.run(play(load_trace(d), RecordingEngine(address_width=40), address_width=32))
    assert r.status == FAIL and "32-bit" in r.message


def test_mem_load_inside_address_space_up_to_the_top(tmp_path):
    d = make_trace(tmp_path, "t", 'mem_load(pri_mem, 0xfffffffe, "in.dat");\n' + GOOD,
                   {"in.dat": "{offset:0x0, size:2, payload:0x01 0x02},\n"})
    eng = RecordingEngine()
    assert asyncio.run(play(load_trace(d), eng)).status == PASS
    assert ("mem_write", 0xFFFF_FFFE, 2) in eng.calls


@pytest.mark.parametrize("line, match", [
    (f"mem_init(pri_mem, 0x0, {1 << 50:#x}, ALL_ZERO);",
     rf"t.cfg:7: size {1 << 50:#x} is out of range \(0x0..{MAX_REGION_BYTES:#x}\)"),
    (f"check_crc(s, pri_mem, 0x0, {MAX_REGION_BYTES + 1:#x}, 0x0);", r"t.cfg:7: size 0x40000001 is out of range"),
    ("mem_init(pri_mem, -0x10, 0x10, ALL_ZERO);", r"t.cfg:7: base -0x10 is out of range \(>= 0\)"),
    ('mem_load(pri_mem, -1, "a.dat");', r"t.cfg:7: base -1 is out of range"),
])
def test_absurd_or_negative_regions_are_syntax_errors(line, match):
    t0 = time.perf_counter()
    with pytest.raises(TraceSyntaxError, match=match):
        parse_line(line, "t.cfg", 7)
    assert time.perf_counter() - t0 < 0.1


def test_huge_region_on_a_64_bit_engine_is_rejected_at_once(tmp_path):
    d = tmp_path / "t"
    d.mkdir()
    (d / "t.cfg").write_text(GOOD + f"mem_init(pri_mem, {1 << 50:#x}, {1 << 50:#x}, ALL_ZERO);\n")
    with pytest.raises(TraceSyntaxError, match=r"t.cfg:4: size 0x4000000000000 is out of range"):
        load_trace(d)


# ---- 5. register values that do not fit 32 bits ---------------------------------------------

@pytest.mark.parametrize("line, match", [
    ("reg_write(NVDLA_SDP.D_DATA_CUBE_WIDTH_0, 0x100000000);",
     r"t.cfg:3: value 0x100000000 is out of range \(0x0..0xffffffff\)"),
    ("reg_write(NVDLA_SDP.D_DATA_CUBE_WIDTH_0, -1);", r"t.cfg:3: value -1 is out of range"),
    ("poll_reg_equal(NVDLA_SDP.S_STATUS_0, 4294967296);", r"t.cfg:3: value 4294967296 is out of range"),
    ("check_crc(s, pri_mem, 0x0, 0x10, 0x1ffffffff);", r"t.cfg:3: crc 0x1ffffffff is out of range"),
])
def test_values_wider_than_32_bits_are_syntax_errors(line, match):
    with pytest.raises(TraceSyntaxError, match=match):
        parse_line(line, "t.cfg", 3)


def test_largest_32_bit_value_is_kept():
    c = parse_line("reg_write(NVDLA_SDP.D_DATA_CUBE_WIDTH_0, 0xffffffff);", "t.cfg", 3)
    assert c.args["value"] == 0xFFFF_FFFF


def test_golden_of_another_length_is_reported_not_crashed(tmp_path, monkeypatch):
    from hdl.config import NV_SMALL
    from verif.trace import golden
    g = tmp_path / "g.bin"
    g.write_bytes(bytes(8))
    monkeypatch.setattr(golden, "golden_file", lambda trace, base, size: g)
    trace = load_trace(make_trace(tmp_path, "t", GOOD))
    assert golden.first_mismatch(trace, 0, bytes(4), NV_SMALL) == \
        f"golden {g} holds 8 bytes, the checked region 4"
