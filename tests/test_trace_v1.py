"""NVIDIA's v1 trace format (verif/trace/v1.py): parser errors name file:line, ``.dat`` images,
and the player on the model of nv_full (NVIDIA's own v1 traces where ../shared has them)."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hdl.config import NV_FULL, NV_SMALL
from needs import needs_verilator
from verif.axi_slave import MemTiming
from verif.shared import have_shared, nvdla_dir
from verif.trace.model_engine import ModelEngine
from verif.trace.parser import TraceDataError, TraceSyntaxError, find_traces
from verif.trace.player import FAIL, NOT_RUNNABLE, PASS
from verif.trace.runner import run
from verif.trace.v1 import load_v1_dat, load_v1_trace, parse_txn_line, play_v1

V1 = nvdla_dir() / "traces" / "nv_full_v1"
needs_v1 = pytest.mark.skipif(not have_shared() or not V1.is_dir(),
                              reason="../shared/nvdla/traces/nv_full_v1 (NVIDIA's v1 traces) is absent")


def _trace(tmp_path: Path, text: str, files: dict | None = None) -> Path:
    d = tmp_path / "t"
    d.mkdir()
    (d / "input.txn").write_text(text)
    for name, body in (files or {}).items():
        (d / name).write_text(body)
    return d


def _rows(data: bytes, header: str = "Data_size = 0x40\n") -> str:
    return header + "".join(" ".join(f"0x{b:02x}" for b in data[i:i + 32]) + "\n"
                            for i in range(0, len(data), 32))


def test_parse_commands():
    c = parse_txn_line("write_reg 0xffff100b 0x800 #NVDLA_BDMA.CFG_DST_SURF_0", "f", 3)
    assert c.kind == "write_reg" and c.args["reg"].trace_name == "NVDLA_BDMA.CFG_DST_SURF_0"
    assert c.args["reg"].addr == 0x402C and c.args["value"] == 0x800
    c = parse_txn_line("read_reg 0xffff0003 0x00000040 0x00000040 #GLB", "f", 4)
    assert (c.args["mask"], c.args["expected"]) == (0x40, 0x40)
    c = parse_txn_line("load_mem 0x50000000 0x1000 sample_surf.dat ", "f", 5)
    assert c.args == {"addr": 0x50000000, "size": 0x1000, "mem": "sec_mem", "file": "sample_surf.dat"}
    assert parse_txn_line("   # comment", "f", 1) is None
    assert parse_txn_line("wait", "f", 1).kind == "wait"


@pytest.mark.parametrize("line, why", [
    ("write_reg 0xffff100b", "takes 2 arguments"),
    ("poke 0x1 0x2", "unknown command 'poke'"),
    ("write_reg 0xffff0fff 0x1", "no v1 register at CSB address 0x0000ffff"[:20]),
    ("read_reg 0xffff0003 0x40 0x41", "outside its mask"),
    ("load_mem 0x40000000 0x10 a.dat", "neither secondary"),
    ("dump_mem 0x80000000 0x0 a.dat", "of 0 bytes"),
    ("write_reg 0xffff100b 0xzz", "not a hexadecimal number"),
])
def test_malformed_lines_name_file_and_line(line, why):
    with pytest.raises(TraceSyntaxError, match=r"^f:7: .*" + why[:12].replace("(", r"\(")):
        parse_txn_line(line, "f", 7)


def test_trace_must_check_its_last_write(tmp_path):
    d = _trace(tmp_path, "wait\nwrite_reg 0xffff100c 0x1\n")
    with pytest.raises(TraceSyntaxError, match=r"input.txn:2: nothing checks this write"):
        load_v1_trace(d)


def test_dat_rows_and_size(tmp_path):
    data = bytes(range(64))
    p = tmp_path / "a.dat"
    p.write_text(_rows(data))
    assert load_v1_dat(p, 40) == data[:40]
    with pytest.raises(TraceDataError, match="64 bytes of data, the trace needs 96"):
        load_v1_dat(p, 96)
    p.write_text("Data_size = 1\n0x01 0x02\n")
    with pytest.raises(TraceDataError, match=r"a.dat:2: a data row must be 32 bytes"):
        load_v1_dat(p, 2)


def test_player_reads_back_and_compares_memory(tmp_path):
    """load_mem then dump_mem of the same bytes passes; a changed expected byte fails naming the
    address and the bytes; a register read-back that differs fails naming the line."""
    data = bytes((7 * i + 3) & 0xFF for i in range(64))
    good = _trace(tmp_path, "load_mem 0x80000100 0x40 in.dat\ndump_mem 0x80000100 0x40 in.dat\n"
                  "write_reg 0xffff100b 0x800\nread_reg 0xffff100b 0xffffffe0 0x800\n",
                  {"in.dat": _rows(data)})
    from verif.trace.model_engine import ModelEngine
    r = asyncio.run(play_v1(load_v1_trace(good), ModelEngine(NV_FULL)))
    assert r.status == PASS, r.message
    bad = data[:9] + bytes([data[9] ^ 1]) + data[10:]
    (good / "out.dat").write_text(_rows(bad))
    txn = (good / "input.txn").read_text().replace("dump_mem 0x80000100 0x40 in.dat", "dump_mem 0x80000100 0x40 out.dat")
    (good / "input.txn").write_text(txn.replace("0xffffffe0 0x800", "0xffffffe0 0x820"))
    r = asyncio.run(play_v1(load_v1_trace(good), ModelEngine(NV_FULL)))
    assert r.status == FAIL and "input.txn:2: dump_mem pri_mem 0x80000100+0x40" in r.message
    assert f"first difference at 0x80000109 (offset 0x9): expected {bad[9]:#04x}, got {data[9]:#04x}" in r.message
    (good / "out.dat").write_text(_rows(data))
    r = asyncio.run(play_v1(load_v1_trace(good), ModelEngine(NV_FULL)))
    assert r.status == FAIL and "input.txn:4: NVDLA_BDMA.CFG_DST_SURF_0 & 0xffffffe0 is 0x800" in r.message


@needs_v1
def test_nvidia_sanity0_on_the_model():
    """NVIDIA's sanity0 (BDMA register read-back) on the model of nv_full; refused on nv_small;
    not runnable on our RTL of the nv_full preset (Winograd is not built; without it, multi-batch
    and weight compression, it plays: the slow test_nvidia_sanity_on_our_rtl)."""
    res = list(run(find_traces([V1 / "sanity0"]), "model", NV_FULL))
    assert [r.status for r in res] == [PASS], res[0].message
    res = list(run(find_traces([V1 / "sanity0"]), "model", NV_SMALL))
    assert res[0].status == FAIL and "--config nv_full" in res[0].message
    res = list(run(find_traces([V1 / "sanity0"]), "rtl", NV_FULL))
    assert res[0].status == NOT_RUNNABLE


#: nv_full computing int16 and fp16 as NVIDIA's nvdlav1 RTL does (issue 33; the model only)
NV_FULL_ALL = "nv_full+feature_data_type=int8_int16_fp16"


@needs_v1
def test_nvidia_int16_pooling_on_the_model():
    """NVIDIA's pdp_max_pooling_int16 (8x8x64 int16, MAX 2x2 stride 1) writes NVIDIA's bytes
    on the model of nv_full with its three precisions; its read-back of PDP's D_OP_ENABLE
    right after arming the layer (1 on the hardware, the layer still running) is not a check
    on the untimed model, which has finished the layer: the trace's checks are the others."""
    from hdl.config import get_config
    res = list(run(find_traces([V1 / "pdp_max_pooling_int16"]), "model", get_config(NV_FULL_ALL)))
    assert [r.status for r in res] == [PASS], res[0].message
    t = load_v1_trace(V1 / "pdp_max_pooling_int16")
    cmds = t.commands
    i = next(i for i, c in enumerate(cmds) if c.kind == "dump_mem")
    cmds[i].args["file"] = "input_feature_map.dat"   # other bytes as the golden: caught
    r = asyncio.run(play_v1(t, ModelEngine(get_config(NV_FULL_ALL))))
    assert r.status == FAIL and "dump_mem" in r.message


#: NVIDIA's v1 traces with an int16 convolution layer (direct convolution, SDP on the fly)
INT16_CONV = ("conv_8x8_fc_int16", "googlenet_conv2_3x3_int16", "sanity3", "sanity3_cvsram")


@needs_v1
def test_nvidia_int16_convolutions_on_the_model():
    """NVIDIA's int16 convolution traces write NVIDIA's bytes on the model of nv_full with its
    three precisions (128-byte CBUF entries, 16-kernel weight groups, CACC's 48-bit sums): an
    8x8x32 fully connected layer of 16 kernels, GoogLeNet's conv2 3x3 (192 kernels, 187 KB out,
    into the secondary memory), sanity3 in either memory. The model finishes the layer as it is
    enabled; the player lets its four done bits come one per wait as the traces expect."""
    from hdl.config import get_config
    res = list(run(find_traces([V1 / t for t in INT16_CONV]), "model", get_config(NV_FULL_ALL)))
    assert [r.status for r in res] == [PASS] * len(INT16_CONV), [r.message for r in res]
    t = load_v1_trace(V1 / "conv_8x8_fc_int16")
    i = next(i for i, c in enumerate(t.commands) if c.kind == "dump_mem")
    t.commands[i].args["file"] = "input_feature_map.dat"   # other bytes as the golden: caught
    r = asyncio.run(play_v1(t, ModelEngine(get_config(NV_FULL_ALL))))
    assert r.status == FAIL and "dump_mem" in r.message


class _AllAtOnce:
    """An untimed engine whose write to CDMA.D_OP_ENABLE (v1 word 0x1404) raises CDMA's data
    and weight, CACC's and SDP's done bits at once (GLB status 0x150001), as the model does."""
    cycle = None

    def __init__(self):
        self.status, self.mask = 0, 0

    async def reg_write(self, addr, value):
        if addr == 0x1404 * 4:
            self.status |= 0x150001
        elif addr == 0xC:
            self.status &= ~value

    async def reg_read(self, addr):
        return {0xC: self.status, 0x4: self.mask}.get(addr, 0)

    async def wait_intr(self, budget):
        return bool(self.status & ~self.mask)

    async def busy_units(self):
        return []


def test_untimed_engine_done_bits_come_one_per_wait(tmp_path):
    """On an untimed engine a layer's done bits are raised together; the player holds them
    back and shows them one per ``wait`` in the pipeline's order (CDMA data, CDMA weight, CACC,
    SDP), a clear-all write clearing only those shown, as NVIDIA's traces expect of the
    hardware; a wait with none left fails."""
    lines = ["write_reg 0xffff1404 0x1", "read_reg 0xffff0003 0xffffffff 0x0"]
    for bit in (16, 18, 20, 0):
        lines += ["wait", f"read_reg 0xffff0003 0xffffffff {1 << bit:#x}",
                  "write_reg 0xffff0003 0xffffffff", "read_reg 0xffff0003 0xffffffff 0x0"]
    d = tmp_path / "t"
    d.mkdir()
    (d / "input.txn").write_text("\n".join(lines + ["wait"]) + "\n")
    r = asyncio.run(play_v1(load_v1_trace(d), _AllAtOnce(), precision_check=False))
    assert r.status == FAIL and f"input.txn:{len(lines) + 1}: no interrupt" in r.message, r.message
    (d / "input.txn").write_text("\n".join(lines) + "\n")
    r = asyncio.run(play_v1(load_v1_trace(d), _AllAtOnce(), precision_check=False))
    assert r.status == PASS, r.message


def test_int16_program_refused_on_an_int8_design_before_it_runs(tmp_path):
    """A v1 trace that sets a computing unit's precision to INT16 fails at once, naming the
    write, on an int8 configuration (it would wait out its interrupt budget); RUBIK's precision
    (elements moved as bytes) and an int16 configuration are not refused."""
    from verif.trace.v1 import precision_refusal
    d = _trace(tmp_path, "write_reg 0xffff1405 0x00000000\n"      # CDMA D_MISC_CFG: int8
                         "write_reg 0xffff4003 0x00000100\n"      # RBK D_MISC_CFG: int16
                         "write_reg 0xffff3421 0x00000001\n"      # PDP D_DATA_FORMAT: int16
                         "wait\n")
    t = load_v1_trace(d)
    why = precision_refusal(t, NV_FULL)
    assert why == (f"{t.txn}:3: NVDLA_PDP.D_DATA_FORMAT_0 sets INPUT_DATA to INT16; nv_full "
                   "computes int8 only (feature_data_type int8: int16/fp16 are not built yet)")
    from types import SimpleNamespace
    assert precision_refusal(t, SimpleNamespace(name="int16", feature_data_type="int16_fp16")) is None
    r = asyncio.run(play_v1(t, ModelEngine(NV_FULL)))
    assert r.status == FAIL and r.message == why
    t.commands.pop(2)
    assert precision_refusal(t, NV_FULL) is None


#: nv_full without the convolution features our RTL does not build yet (issue 34)
NV_FULL_BUILT = "nv_full+winograd=False+batch=False+weight_compression=False"
#: NVIDIA's v1 traces that are int8 or precision-free (the others need issue 33's int16)
SANITY = ("sanity0", "sanity1", "sanity1_cvsram", "sanity2", "sanity2_cvsram")


@needs_v1
@needs_verilator
@pytest.mark.rtl
@pytest.mark.slow       # nv_full's simulator: hdl.build ~10 min, Verilator ~5-15 min on 2 cores
@pytest.mark.parametrize("profile", ["nvidia", "random"])
def test_nvidia_sanity_on_our_rtl(profile):
    """NVIDIA's BDMA traces (register read-back, copies polled and by interrupt, both memories)
    on our RTL of nv_full: its v1 register map in the register files and CSB decoder."""
    from hdl.config import get_config
    res = list(run(find_traces([V1 / n for n in SANITY]), "rtl", get_config(NV_FULL_BUILT),
                   timing=MemTiming.named(profile, seed=5)))
    assert [(r.name, r.status) for r in res] == [(n, PASS) for n in SANITY], \
        [r.message for r in res if r.status != PASS]


#: NVIDIA's int16 v1 traces (issue 33: "pass on the model and our RTL")
INT16_V1 = INT16_CONV + ("pdp_max_pooling_int16", "sdp_relu_int16")


@needs_v1
@needs_verilator
@pytest.mark.rtl
@pytest.mark.slow       # hdl.build ~9 min / 6.7 GB, Verilator -O1 ~12 min: docs/conv16.md
@pytest.mark.parametrize("profile", ["nvidia", "random"])
def test_nvidia_int16_traces_on_our_rtl(profile):
    """NVIDIA's int16 v1 traces (convolutions with SDP on the fly, pooling, SDP) on our RTL of
    nv_full computing int8, int16 and fp16: NVIDIA's output bytes, and the convolutions' four
    interrupts (CDMA_DAT, CDMA_WT, CACC, SDP) one per ``wait``, each cleared before the next
    comes (CDMA's two when its fetches end: hdl/conv.py)."""
    from hdl.config import get_config
    res = list(run(find_traces([V1 / n for n in INT16_V1]), "rtl",
                   get_config(NV_FULL_BUILT + "+feature_data_type=int8_int16_fp16"),
                   timing=MemTiming.named(profile, seed=5)))
    assert [(r.name, r.status) for r in res] == [(n, PASS) for n in INT16_V1], \
        [r.message for r in res if r.status != PASS]


@needs_v1
def test_every_nvidia_v1_trace_parses():
    dirs = find_traces([V1])
    assert len(dirs) == 11
    for d in dirs:
        t = load_v1_trace(d)
        assert not t.missing_files() and t.poll_retries >= 1
        for c in t.commands:
            if c.kind in ("load_mem", "dump_mem"):
                assert len(load_v1_dat(d / c.args["file"], c.args["size"])) == c.args["size"]
