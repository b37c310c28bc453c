"""The simulation-only testbench top ``nvdla_tb`` around any port-compatible ``NV_nvdla``.

``nvdla_tb`` re-exports every port of ``NV_nvdla`` under the same name and direction (so code
using ``dut.<port>`` works unchanged) and adds one input, ``tb_mem_internal``:

* 0 - the DUT's AXI slave inputs on ``nvdla_core2dbb_*`` (``arready awready wready rvalid rid
  rdata rlast bvalid bid``) come from the top's ports (the Python responder drives them);
* 1 - they come from the in-simulation AXI memory (``sim/tb/axi_mem.cpp``, DPI-C): one call
  ``tb_axi_eval`` at every falling edge of ``dla_core_clk`` with the master's outputs returns
  the slave inputs for the next rising edge (held in registers); ``tb_axi_settle`` at every
  rising edge gives the memory ``rready``/``bready`` as that edge samples them (used by the
  ``random`` profile only).

When ``NV_nvdla`` has the secondary memory interface (every ``nvdla_core2cvsram_*`` AXI port,
``CV_PREFIX``), ``tb_mem_internal`` switches it too: its slave inputs come from the memory's
second instance (port number 1 of the DPI-C calls; the primary port is 0), with its own
memory, timing and monitor. The DPI-C data arguments are as wide as the wider of the two ports
(a narrower port is zero-extended / uses the low bits). ``has_cv(ports)`` tells whether a port
list has that interface (any ``nvdla_core2cvsram_*`` port; ``tb_source`` then needs all of
the AXI ports the memory uses, else ValueError).

The master outputs stay visible as top outputs in both modes.

Clocks (issue 12: no GPI callback per clock edge, one clock when the periods are equal): the
DUT's ``dla_core_clk`` and ``dla_csb_clk`` are the top's wires ``tb_core_clk``/``tb_csb_clk``,
which the engine awaits instead of the ports. Inputs (set before the clocks start; all 0 is the
plain port mode):

* ``tb_clk_gen`` - 0: the clocks are the top's ports ``dla_core_clk``/``dla_csb_clk`` (driven by
  cocotb ``Clock``s); 1: generated here (``always``-style delay loops, Verilator ``--timing``),
  starting low when ``tb_clk_gen`` rises, first rising edge half a period later (as cocotb's
  ``Clock(...).start(start_high=False)``);
* ``tb_core_half_ps``/``tb_csb_half_ps`` [31:0] - generated half periods in ps (> 0);
* ``tb_csb_same`` - 1: ``dla_csb_clk`` is ``dla_core_clk`` itself (equal periods, equal phase:
  one clock, so each edge is one event; no CSB generator runs, ``dla_csb_clk`` port unused).

``ports_of(files, dirs)`` finds ``module NV_nvdla`` in the given sources (or ``NV_nvdla.v``/
``.sv`` in a library directory) and returns its ports (ANSI or non-ANSI declarations; range
expressions are copied verbatim, widths evaluated when they are plain arithmetic).
``tb_source(ports)`` returns the SystemVerilog text. Raises ``ValueError`` when the module or
one of the AXI ports the memory needs is not found.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

DUT = "NV_nvdla"
TB_TOP = "nvdla_tb"
PREFIX = "nvdla_core2dbb"
#: the secondary memory interface (CVIF), served by port 1 of the in-simulation memory
CV_PREFIX = "nvdla_core2cvsram"
#: port numbers of the in-simulation memory's instances (sim/tb/axi_mem.cpp, sim/tb/simmem.py)
PORTS = {PREFIX: 0, CV_PREFIX: 1}
#: the C++ memory model compiled into every simulator
CPP = Path(__file__).with_name("axi_mem.cpp")
#: the DUT's clock ports and the top's wires that drive them (module docstring: Clocks)
CLOCKS = {"dla_core_clk": "tb_core_clk", "dla_csb_clk": "tb_csb_clk"}

_SLAVE = ("ar_arready", "aw_awready", "w_wready", "r_rvalid", "r_rid", "r_rdata", "r_rlast",
          "b_bvalid", "b_bid")
_MASTER = ("ar_arvalid", "ar_arid", "ar_araddr", "ar_arlen", "aw_awvalid", "aw_awid", "aw_awaddr",
           "aw_awlen", "w_wvalid", "w_wdata", "w_wstrb", "w_wlast", "r_rready", "b_bready")


@dataclass(frozen=True)
class Port:
    """A port of ``NV_nvdla``: ``direction`` input/output/inout, ``range`` the packed range as
    written (``"[64 -1:0]"`` or ``""``), ``width`` in bits (None when not plain arithmetic)."""
    name: str
    direction: str
    range: str
    width: int | None


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def _width(rng: str) -> int | None:
    if not rng:
        return 1
    m = re.fullmatch(r"\[\s*([^:\]]+?)\s*:\s*([^\]]+?)\s*\]", rng)
    if not m:
        return None
    try:
        vals = []
        for e in m.groups():
            if not re.fullmatch(r"[0-9\s+\-*/()]+", e):
                return None
            vals.append(int(eval(e.replace("/", "//"), {"__builtins__": {}})))  # noqa: S307 - digits only
        return abs(vals[0] - vals[1]) + 1
    except (SyntaxError, ZeroDivisionError, ValueError):
        return None


_DECL = re.compile(r"\b(input|output|inout)\b\s*((?:(?:wire|reg|logic|var|signed|unsigned)\s+)*)"
                   r"(\[[^\]]*\])?\s*([^;]*)")


def _module_text(text: str) -> str | None:
    m = re.search(r"\bmodule\s+" + DUT + r"\b", text)
    if not m:
        return None
    end = text.find("endmodule", m.end())
    return text[m.end():end if end >= 0 else len(text)]


def parse_ports(text: str) -> list[Port]:
    """Ports of ``module NV_nvdla`` in the Verilog ``text`` (comments allowed), in declaration
    order. Raises ValueError when the module is not in the text."""
    body = _module_text(_strip_comments(text))
    if body is None:
        raise ValueError(f"no module {DUT} in the text")
    # ANSI: declarations inside the header's parentheses; non-ANSI: statements in the body
    depth, i, start = 0, 0, body.find("(")
    hdr_end = -1
    semi = body.find(";")
    if start >= 0 and (semi < 0 or start < semi):
        for i in range(start, len(body)):
            c = body[i]
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    hdr_end = i
                    break
    header = body[start + 1:hdr_end] if hdr_end > 0 else ""
    ports: dict[str, Port] = {}
    if re.search(r"\b(input|output|inout)\b", header):
        # split on commas, a direction keyword starts a new declaration group
        cur = None
        for part in header.split(","):
            part = part.strip()
            m = _DECL.match(part)
            if m:
                rng = (m.group(3) or "").strip()
                cur = (m.group(1), rng)
                name = m.group(4).strip()
            else:
                name = part
            name = re.split(r"[\s=]", name.strip())[0] if name.strip() else ""
            if cur and name:
                ports[name] = Port(name, cur[0], cur[1], _width(cur[1]))
    else:
        rest = body[hdr_end + 1:] if hdr_end > 0 else body
        for stmt in rest.split(";"):
            m = _DECL.search(stmt)
            if not m or stmt[:m.start()].strip():
                continue
            rng = (m.group(3) or "").strip()
            for name in m.group(4).split(","):
                name = name.strip().split("=")[0].strip()
                if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", name):
                    ports[name] = Port(name, m.group(1), rng, _width(rng))
    return list(ports.values())


def ports_of(files, dirs=()) -> list[Port]:
    """Ports of ``NV_nvdla`` from the first source file defining it (``files``, then
    ``NV_nvdla.v``/``.sv`` in the library directories ``dirs``). Raises ValueError."""
    cands = [Path(f) for f in files] + [Path(d) / f"{DUT}{e}" for d in dirs for e in (".v", ".sv")]
    for f in cands:
        if not f.is_file():
            continue
        text = f.read_text(errors="replace")
        if re.search(r"\bmodule\s+" + DUT + r"\b", text):
            return parse_ports(text)
    raise ValueError(f"no source defines module {DUT} (looked in {len(cands)} file(s))")


def has_cv(ports: list[Port]) -> bool:
    """Whether ``ports`` (of ``NV_nvdla``) include the secondary memory interface: any
    ``nvdla_core2cvsram_*`` port (``tb_source`` then requires all of its AXI ports)."""
    return any(p.name.startswith(CV_PREFIX + "_") for p in ports)


def _axi_widths(by: dict, prefix: str) -> dict:
    """Widths in bits of the AXI ports ``<prefix>_<channel>_<signal>`` the memory needs.
    Raises ValueError when one is missing, not plain arithmetic, or out of the memory's range."""
    w = {}
    for s in _SLAVE + _MASTER:
        p = by.get(f"{prefix}_{s}")
        if p is None:
            raise ValueError(f"{DUT} has no port {prefix}_{s}")
        if p.width is None:
            raise ValueError(f"{DUT} port {p.name}: range {p.range} is not plain arithmetic")
        w[s] = p.width
    dw = w["r_rdata"]
    if dw != w["w_wdata"] or dw % 8 or dw > 512:
        raise ValueError(f"{DUT} {prefix}: data width {dw} (r) / {w['w_wdata']} (w): must be "
                         "equal, a multiple of 8, at most 512")
    for s in ("ar_araddr", "aw_awaddr", "w_wstrb"):
        if w[s] > 64:
            raise ValueError(f"{DUT} port {prefix}_{s}: wider than 64 bits")
    for s in ("ar_arid", "aw_awid", "r_rid", "b_bid", "ar_arlen", "aw_awlen"):
        if w[s] > 31:
            raise ValueError(f"{DUT} port {prefix}_{s}: wider than 31 bits")
    return w


def _axi_block(prefix: str, tag: str, w: dict, dw_max: int) -> str:
    """SV of one port's memory connection: the registers ``<tag>_<signal>`` holding the slave
    inputs and the two DPI-C calls with the port number ``PORTS[prefix]``."""
    P, n, dw = prefix, PORTS[prefix], w["r_rdata"]
    wdata = f"{P}_w_wdata" if dw == dw_max else f"{{{dw_max - dw}'b0, {P}_w_wdata}}"
    args = (f"{n}, {P}_ar_arvalid, int'({P}_ar_arid), longint'({P}_ar_araddr), int'({P}_ar_arlen), "
            f"{P}_aw_awvalid, int'({P}_aw_awid), longint'({P}_aw_awaddr), int'({P}_aw_awlen), "
            f"{P}_w_wvalid, {wdata}, longint'({P}_w_wstrb), {P}_w_wlast, {P}_r_rready, "
            f"{P}_b_bready")
    t = tag
    return f"""  // {P}: port {n} of the in-simulation memory
  bit {t}_ar_arready, {t}_aw_awready, {t}_w_wready, {t}_r_rvalid, {t}_r_rlast, {t}_b_bvalid;
  int {t}_rid_i, {t}_bid_i;
  bit [{dw_max - 1}:0] {t}_rdata_i;
  wire [{w['r_rid'] - 1}:0] {t}_r_rid = {t}_rid_i[{w['r_rid'] - 1}:0];
  wire [{w['b_bid'] - 1}:0] {t}_b_bid = {t}_bid_i[{w['b_bid'] - 1}:0];
  wire [{dw - 1}:0] {t}_r_rdata = {t}_rdata_i[{dw - 1}:0];

  // at the falling edge: the master's outputs in, the slave inputs of the next rising edge out
  always @(negedge tb_core_clk)
    if (tb_mem_internal)
      tb_axi_eval({args},
                  {t}_ar_arready, {t}_aw_awready, {t}_w_wready, {t}_r_rvalid, {t}_rid_i,
                  {t}_rdata_i, {t}_r_rlast, {t}_b_bvalid, {t}_bid_i);
  // at the rising edge: rready/bready as that edge samples them (random profile)
  always @(posedge tb_core_clk)
    if (tb_mem_internal)
      tb_axi_settle({args});
"""


def tb_source(ports: list[Port]) -> str:
    """SystemVerilog of ``nvdla_tb`` (module docstring) for ``NV_nvdla`` with ``ports``.
    Raises ValueError when an AXI port of ``nvdla_core2dbb`` (or, when the DUT has any
    ``nvdla_core2cvsram_*`` port, of that interface) is missing or has no plain width."""
    by = {p.name: p for p in ports}
    axi = {PREFIX: _axi_widths(by, PREFIX)}
    if has_cv(ports):
        axi[CV_PREFIX] = _axi_widths(by, CV_PREFIX)
    dw = max(w["r_rdata"] for w in axi.values())
    tags = {PREFIX: "m", CV_PREFIX: "cv"}
    decl = []
    for p in ports:
        rng = f" {p.range}" if p.range else ""
        decl.append(f"  {p.direction} wire{rng} {p.name},")
    decl.append("  input wire tb_mem_internal,")
    decl.append("  input wire tb_clk_gen,")
    decl.append("  input wire tb_csb_same,")
    decl.append("  input wire [31:0] tb_core_half_ps,")
    decl.append("  input wire [31:0] tb_csb_half_ps")
    for c in CLOCKS:
        if c not in by:
            raise ValueError(f"{DUT} has no port {c}")
    conns = []
    for p in ports:
        for P in axi:
            s = p.name[len(P) + 1:] if p.name.startswith(P + "_") else None
            if s in _SLAVE:
                conns.append(f"    .{p.name}(tb_mem_internal ? {tags[P]}_{s} : {p.name})")
                break
        else:
            if p.name in CLOCKS:
                conns.append(f"    .{p.name}({CLOCKS[p.name]})")
            else:
                conns.append(f"    .{p.name}({p.name})")
    sig = ("input int port, input bit arvalid, input int arid, input longint araddr, "
           "input int arlen, input bit awvalid, input int awid, input longint awaddr, "
           f"input int awlen, input bit wvalid, input bit [{dw - 1}:0] wdata, input longint wstrb, "
           "input bit wlast, input bit rready, input bit bready")
    blocks = "\n".join(_axi_block(P, tags[P], w, dw) for P, w in axi.items())
    return f"""// generated by sim/tb/top.py: simulation-only testbench top around {DUT}
// (every {DUT} port re-exported; tb_mem_internal=1: the AXI slave inputs of
// {", ".join(axi)} come from the in-simulation memory sim/tb/axi_mem.cpp through DPI-C)
module {TB_TOP} (
{chr(10).join(decl)}
);
  timeunit 1ps;
  timeprecision 1ps;

  // clocks (module docstring of sim/tb/top.py): generated (tb_clk_gen) or from the ports;
  // dla_csb_clk is dla_core_clk itself when tb_csb_same
  bit gen_core_clk = 1'b0, gen_csb_clk = 1'b0;
  initial begin
    wait (tb_clk_gen);
    forever #(tb_core_half_ps) gen_core_clk = ~gen_core_clk;
  end
  initial begin
    wait (tb_clk_gen && !tb_csb_same);
    forever #(tb_csb_half_ps) gen_csb_clk = ~gen_csb_clk;
  end
  wire tb_core_clk = tb_clk_gen ? gen_core_clk : dla_core_clk;
  wire tb_csb_clk = tb_csb_same ? tb_core_clk : tb_clk_gen ? gen_csb_clk : dla_csb_clk;

  import "DPI-C" function void tb_axi_eval({sig},
    output bit arready, output bit awready, output bit wready, output bit rvalid, output int rid,
    output bit [{dw - 1}:0] rdata, output bit rlast, output bit bvalid, output int bid);
  import "DPI-C" function void tb_axi_settle({sig});

{blocks}
  {DUT} u_nvdla (
{(","+chr(10)).join(conns)}
  );
endmodule
"""
