"""NVIDIA's v1 trace tests (nvdlav1, nv_full): parser and player.

A v1 trace is a directory holding ``input.txn`` (``../shared/nvdla/traces/nv_full_v1/<test>``),
``.dat`` memory images and optionally ``plusargs.txt``. The format, as NVIDIA's own flow reads it
(nvdla/hw nvdlav1: verif/verilator/input_txn_to_verilator.pl turns the text into commands,
verif/verilator/nvdla.cpp plays them; observed behaviour, not their code):

* one command per line, ``#`` starts a comment; commands are
  ``write_reg ADDR VALUE``, ``read_reg ADDR MASK EXPECTED`` (read until ``value & MASK ==
  EXPECTED``), ``wait`` (until ``dla_intr`` is high; the trace clears GLB's status itself),
  ``load_mem ADDR SIZE FILE`` and ``dump_mem ADDR SIZE FILE`` (the ``SIZE`` bytes at ``ADDR``
  must equal the file's first ``SIZE`` bytes);
* ``ADDR`` of a register is ``0xffffWWWW``: the low 16 bits are a v1 word address (byte address
  ``WWWW * 4`` in ``hdl.regmap.REGMAP_V1``), the high 16 bits are ignored (NVIDIA's CSB "misc"
  bits);
* a memory address's top nibble selects the memory: 0x5 the secondary memory (CV SRAM,
  ``sec_mem``), 0x8 the primary one (DBB, ``pri_mem``); anything else is an error (nvdla.cpp
  aborts "AXI event to bad offset");
* a ``.dat`` file is a text header (``Data_size = ...``) then rows of 32 bytes ``0xHH`` (a row
  may start with one space); only rows count, 32 bytes each, and the file must hold at least
  ``SIZE`` bytes (the perl script dies otherwise).
* ``plusargs.txt``: ``+read_reg_poll_retries=N`` (polls of one ``read_reg``);
  ``+continue_on_fail`` is accepted and ignored (a failed ``read_reg`` fails the trace here).

Errors: :class:`verif.trace.parser.TraceSyntaxError` names ``file:line`` of a malformed
command; :class:`verif.trace.parser.TraceDataError` a missing or malformed ``.dat``.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from hdl.regmap import REGMAP_V1, decode
from verif.trace.parser import WORD_MAX, Command, TraceDataError, TraceSyntaxError, _read_text
from verif.trace.player import FAIL, NOT_RUNNABLE, PASS, TraceFailure, TraceResult

TXN = "input.txn"
ROW_BYTES = 32
#: memory of each top address nibble (nvdla.cpp: 0x5 -> axi_cvsram, 0x8 -> axi_dbb)
MEMORY_OF_NIBBLE = {0x5: "sec_mem", 0x8: "pri_mem"}
_ARITY = {"write_reg": 2, "read_reg": 3, "wait": 0, "load_mem": 3, "dump_mem": 3}
#: polls of one read_reg when plusargs.txt does not say (NVIDIA's traces all say 100000)
DEFAULT_POLL_RETRIES = 100_000


_INTR_STATUS = REGMAP_V1.lookup("GLB.S_INTR_STATUS")
_INTR_MASK = REGMAP_V1.lookup("GLB.S_INTR_MASK")
#: bits of GLB's done status in the order a layer raises them on the hardware (V1Player)
_STAGE_ORDER = tuple(f.lsb for prefix in ("CDMA_DAT", "CDMA_WT", "CACC", "SDP", "PDP", "CDP",
                                          "RUBIK", "BDMA")
                     for f in _INTR_STATUS.reg.fields if f.name.startswith(prefix + "_DONE"))

#: one ``input.txn`` command: ``kind`` (a key of ``_ARITY``), parsed ``args``, file and line
#: (the v2 parser's :class:`verif.trace.parser.Command`, with v1's command kinds)
V1Command = Command


@dataclass
class V1Trace:
    """A v1 trace: name, directory, commands in file order, read_reg poll retries."""
    name: str
    directory: Path
    txn: Path
    commands: list[V1Command] = field(default_factory=list)
    poll_retries: int = DEFAULT_POLL_RETRIES

    def missing_files(self) -> list[Path]:
        """``.dat`` files named by ``load_mem``/``dump_mem`` that do not exist."""
        return [self.directory / c.args["file"] for c in self.commands
                if c.kind in ("load_mem", "dump_mem") and not (self.directory / c.args["file"]).is_file()]


def is_v1_trace(directory: Path) -> bool:
    """True when ``directory`` holds an ``input.txn`` (a v1 trace)."""
    return (Path(directory) / TXN).is_file()


def _num(text: str, where: str, what: str) -> int:
    try:
        v = int(text, 16) if not text.lower().startswith("0x") else int(text, 0)
    except ValueError:
        raise TraceSyntaxError(f"{where}: {what} {text!r} is not a hexadecimal number") from None
    if not 0 <= v <= WORD_MAX:
        raise TraceSyntaxError(f"{where}: {what} {text} does not fit 32 bits")
    return v


def _register(word_addr: int, where: str):
    """The REGMAP_V1 register at CSB address ``word_addr`` (low 16 bits a word address)."""
    ref = REGMAP_V1.at((word_addr & 0xFFFF) * 4)
    if ref is None:
        raise TraceSyntaxError(f"{where}: no v1 register at CSB address {word_addr:#010x} "
                               f"(byte address {(word_addr & 0xFFFF) * 4:#x})")
    return ref


def _memory(addr: int, where: str) -> str:
    mem = MEMORY_OF_NIBBLE.get(addr >> 28)
    if mem is None:
        raise TraceSyntaxError(f"{where}: memory address {addr:#010x} is neither secondary "
                               "(0x5xxxxxxx) nor primary (0x8xxxxxxx) memory")
    return mem


def parse_txn_line(text: str, file: str, line: int) -> V1Command | None:
    """One ``input.txn`` line; None for blank and comment lines. Raises TraceSyntaxError."""
    body = text.split("#", 1)[0].strip()
    if not body:
        return None
    where = f"{file}:{line}"
    kind, *args = body.split()
    if kind not in _ARITY:
        raise TraceSyntaxError(f"{where}: unknown command {kind!r} (known: {', '.join(_ARITY)})")
    if len(args) != _ARITY[kind]:
        raise TraceSyntaxError(f"{where}: {kind} takes {_ARITY[kind]} arguments, got {len(args)}")
    if kind == "write_reg":
        a = {"reg": _register(_num(args[0], where, "address"), where),
             "value": _num(args[1], where, "value")}
    elif kind == "read_reg":
        a = {"reg": _register(_num(args[0], where, "address"), where),
             "mask": _num(args[1], where, "mask"), "expected": _num(args[2], where, "expected value")}
        if a["expected"] & ~a["mask"]:
            raise TraceSyntaxError(f"{where}: read_reg expects {a['expected']:#x}, which has bits "
                                   f"outside its mask {a['mask']:#x}: it can never match")
    elif kind == "wait":
        a = {}
    else:
        addr, size = _num(args[0], where, "address"), _num(args[1], where, "size")
        if size == 0:
            raise TraceSyntaxError(f"{where}: {kind} of 0 bytes")
        mem = _memory(addr, where)
        if _memory(addr + size - 1, where) != mem or (addr + size - 1) >> 28 != addr >> 28:
            raise TraceSyntaxError(f"{where}: {kind} {addr:#x}+{size:#x} leaves its 256 MiB memory window")
        a = {"addr": addr, "size": size, "mem": mem, "file": args[2]}
    return V1Command(kind, a, file, line)


def _poll_retries(path: Path) -> int:
    """``+read_reg_poll_retries=N`` of ``plusargs.txt`` (DEFAULT_POLL_RETRIES when absent)."""
    if not path.is_file():
        return DEFAULT_POLL_RETRIES
    for word in _read_text(path, TraceSyntaxError).split():
        m = re.fullmatch(r"\+read_reg_poll_retries=(\d+)", word)
        if m:
            return max(1, int(m.group(1)))
    return DEFAULT_POLL_RETRIES


def load_v1_trace(directory: Path) -> V1Trace:
    """The v1 trace in ``directory``. Raises TraceSyntaxError (a malformed line, naming
    file:line; a trace whose last command that starts work is followed by no ``read_reg``,
    ``wait`` or ``dump_mem``), FileNotFoundError (no input.txn)."""
    directory = Path(directory)
    txn = directory / TXN
    if not txn.is_file():
        raise FileNotFoundError(f"{directory}: no {TXN} (not a v1 trace)")
    cmds = []
    for i, text in enumerate(_read_text(txn, TraceSyntaxError).splitlines(), 1):
        c = parse_txn_line(text, str(txn), i)
        if c is not None:
            cmds.append(c)
    checks = [i for i, c in enumerate(cmds) if c.kind in ("read_reg", "wait", "dump_mem")]
    if not checks:
        raise TraceSyntaxError(f"{txn}:1: no read_reg, wait or dump_mem: the trace checks nothing")
    writes = [i for i, c in enumerate(cmds) if c.kind == "write_reg"]
    if writes and writes[-1] > checks[-1]:
        c = cmds[writes[-1]]
        raise TraceSyntaxError(f"{c.where}: nothing checks this write or what it starts "
                               f"({c.args['reg'].trace_name} = {c.args['value']:#x})")
    return V1Trace(directory.name, directory, txn, cmds, _poll_retries(directory / "plusargs.txt"))


def load_v1_dat(path: Path, size: int) -> bytes:
    """The first ``size`` bytes of a v1 ``.dat`` image (rows of 32 ``0xHH`` bytes after a text
    header; a row may start with one space). Raises TraceDataError naming the file (missing,
    not UTF-8, a row that is not 32 bytes, fewer than ``size`` bytes)."""
    path = Path(path)
    try:
        text = _read_text(path, TraceDataError)
    except FileNotFoundError:
        raise TraceDataError(f"memory image {path} does not exist") from None
    out = bytearray()
    for n, line in enumerate(text.splitlines(), 1):
        if not re.match(r" ?0x", line):
            continue
        hexes = line.split()
        if len(hexes) != ROW_BYTES or not all(re.fullmatch(r"0x[0-9a-fA-F]{2}", h) for h in hexes):
            raise TraceDataError(f"{path}:{n}: a data row must be {ROW_BYTES} bytes 0xHH, got "
                                 f"{line.strip()[:60]!r}")
        out += bytes(int(h, 16) for h in hexes)
        if len(out) >= size:
            return bytes(out[:size])
    raise TraceDataError(f"{path}: {len(out)} bytes of data, the trace needs {size}")


def first_difference(got: bytes, want: bytes, base: int) -> str:
    """``address: expected 0x.. got 0x..`` of the first differing byte and the count of
    differing bytes (empty when equal)."""
    if got == want:
        return ""
    diff = [i for i in range(min(len(got), len(want))) if got[i] != want[i]]
    i = diff[0]
    return (f"first difference at {base + i:#x} (offset {i:#x}): expected {want[i]:#04x}, got "
            f"{got[i]:#04x}; {len(diff)} of {len(want)} bytes differ")


class V1Player:
    """Plays one :class:`V1Trace` on an Engine (verif/trace/player.py) whose configuration uses
    the v1 register map. ``intr_budget``: cycles a ``wait`` may take; a ``read_reg`` polls
    ``trace.poll_retries`` times, ``poll_interval`` cycles apart (untimed engines: once)."""

    def __init__(self, trace: V1Trace, engine, *, intr_budget: int = 2_000_000,
                 poll_interval: int = 16):
        self.trace, self.engine = trace, engine
        self.intr_budget, self.poll_interval = intr_budget, poll_interval
        self.current = None
        self.checks = 0
        #: untimed engines: done bits raised together but still to come one by one (see _staged)
        self.later = 0

    # An untimed engine (the model) finishes a layer as its last unit is enabled and raises
    # its done bits at once (a convolution: CDMA's data and weight, CACC's and SDP's); the
    # hardware raises them later, one after the other, and NVIDIA's traces read the status
    # right after enabling (0), then wait for each bit, clear the whole status and read it
    # back (conv_8x8_fc_int16: wait, CDMA_DAT 1, clear, 0, wait, CDMA_WT 1, ...;
    # googlenet_conv2_3x3_int16 reads 0 after enabling). So on an untimed engine the player
    # holds new done bits back (hidden from status reads and from clearing writes) and lets
    # them come one per ``wait``, or per unmet read of the status (a poll), in the pipeline's
    # order.
    def _staged(self, name: str) -> bool:
        return self.engine.cycle is None and name.endswith("GLB.S_INTR_STATUS_0")

    def _reveal(self) -> None:
        nxt = next((b for b in _STAGE_ORDER if self.later >> b & 1), None)
        self.later = 0 if nxt is None else self.later & ~(1 << nxt)

    async def _write(self, ref, value: int) -> None:
        eng = self.engine
        if eng.cycle is not None:
            await eng.reg_write(ref.addr, value)
            return
        before = await eng.reg_read(_INTR_STATUS.addr)
        if self._staged(ref.trace_name):
            value &= ~self.later
        await eng.reg_write(ref.addr, value)
        self.later |= await eng.reg_read(_INTR_STATUS.addr) & ~before

    async def _wait(self) -> bool:
        eng = self.engine
        if eng.cycle is not None or not self.later:
            return await eng.wait_intr(self.intr_budget)
        status = await eng.reg_read(_INTR_STATUS.addr)
        mask = await eng.reg_read(_INTR_MASK.addr)
        while not status & ~self.later & ~mask:       # masked bits raise no interrupt
            if not self.later:
                return False
            self._reveal()
        return True

    async def _busy(self) -> str:
        busy = await self.engine.busy_units()
        return ", ".join(busy) if busy else "none"

    async def run(self) -> None:
        eng = self.engine
        for c in self.trace.commands:
            self.current = c
            a = c.args
            if c.kind == "write_reg":
                await self._write(a["reg"], a["value"])
            elif c.kind == "read_reg":
                tries, timing_dependent = 0, False
                while True:
                    got = await eng.reg_read(a["reg"].addr)
                    if self._staged(a["reg"].trace_name):
                        got &= ~self.later
                    if got & a["mask"] == a["expected"]:
                        break
                    name = a["reg"].trace_name
                    if self._staged(name) and self.later:
                        self._reveal()
                        continue
                    if eng.cycle is None and a["expected"] & 1 and not got & 1 \
                            and name.endswith(".D_OP_ENABLE_0"):
                        # NVIDIA's traces read D_OP_ENABLE back right after arming a layer: 1
                        # while it runs on the hardware; an untimed engine (the model) has
                        # finished the layer at once, so 0 is what it reads then. Not a check.
                        timing_dependent = True
                        break
                    if not a["expected"] & 1 and got & 1 \
                            and name.endswith(".S_CBUF_FLUSH_STATUS_0"):
                        # googlenet_conv2_3x3_int16 reads FLUSH_DONE 0 at its line 135, as if
                        # the CBUF flush after reset were still running. NVIDIA's nvdlav1 CDMA
                        # flushes for 4096 cycles after reset (NV_NVDLA_CDMA_cvt.v, a 13-bit
                        # index) and its own Verilator bench waits 4096 cycles before playing
                        # (verif/verilator/nvdla.cpp), so its RTL reads 1 there as well
                        # (observed after a warm-up trace: NVIDIA's nv_full RTL reads 1 there
                        # 45,000 times); the model and our RTL need no flush. Not a check.
                        timing_dependent = True
                        break
                    tries += 1
                    if eng.cycle is None or tries >= self.trace.poll_retries:
                        raise TraceFailure(
                            f"{c.where}: {a['reg'].trace_name} & {a['mask']:#x} is "
                            f"{got & a['mask']:#x} (read {got:#x}), expected {a['expected']:#x}"
                            + (f" after {tries} reads" if eng.cycle is not None else "")
                            + f"; units still busy: {await self._busy()}")
                    await eng.wait_cycles(self.poll_interval)
                self.checks += not timing_dependent
            elif c.kind == "wait":
                if not await self._wait():
                    raise TraceFailure(f"{c.where}: no interrupt within {self.intr_budget} cycles; "
                                       f"units still busy: {await self._busy()}")
                self.checks += 1
            elif c.kind == "load_mem":
                data = load_v1_dat(self.trace.directory / a["file"], a["size"])
                await eng.mem_write(a["addr"], data, mem=a["mem"])
            else:   # dump_mem
                want = load_v1_dat(self.trace.directory / a["file"], a["size"])
                got = bytes(await eng.mem_read(a["addr"], a["size"], mem=a["mem"]))
                if got != want:
                    raise TraceFailure(f"{c.where}: dump_mem {a['mem']} {a['addr']:#x}+{a['size']:#x} "
                                       f"!= {a['file']}: {first_difference(got, want, a['addr'])}")
                self.checks += 1


#: units whose precision fields set the arithmetic they compute in (RUBIK moves elements as
#: bytes in any precision: not listed)
COMPUTING_UNITS = ("CDMA", "CSC", "CMAC_A", "CMAC_B", "CACC", "SDP_RDMA", "SDP", "PDP_RDMA", "PDP",
                   "CDP_RDMA", "CDP")


def precision_refusal(trace: V1Trace, cfg) -> str | None:
    """Why configuration ``cfg`` (an ``hdl.config.NvdlaConfig``) cannot compute ``trace``, or
    None: the first ``write_reg`` that sets a computing unit's precision field (``*PRECISION``,
    ``INPUT_DATA``) to other than INT8 when ``cfg.feature_data_type`` is int8. NVIDIA's int16
    traces (sanity3, conv_8x8_fc_int16, ...) would otherwise wait out their interrupt budget on
    an int8-only design."""
    if cfg is None or getattr(cfg, "feature_data_type", "int8") != "int8":
        return None
    for c in trace.commands:
        if c.kind != "write_reg" or c.args["reg"].unit.name not in COMPUTING_UNITS:
            continue
        ref = c.args["reg"]
        values = decode(ref.reg, c.args["value"])
        for f in ref.reg.fields:
            v = values[f.name]
            if v and ("PRECISION" in f.name or f.name == "INPUT_DATA"):
                name = next((k for k, e in f.enums.items() if e == v), str(v))
                return (f"{c.where}: {ref.trace_name} sets {f.name} to {name}; {cfg.name} computes "
                        "int8 only (feature_data_type int8: int16/fp16 are not built yet)")
    return None


async def play_v1(trace: V1Trace, engine, *, precision_check: bool = True, **kw) -> TraceResult:
    """Run a v1 trace on ``engine``; never raises for a trace-level failure. A missing ``.dat``
    makes it NOT-RUNNABLE; with ``precision_check`` (our engines: not NVIDIA's RTL, which
    computes every precision) a trace that :func:`precision_refusal` refuses on the engine's
    configuration FAILs before anything runs. Other keywords go to :class:`V1Player`."""
    t0 = time.monotonic()
    missing = trace.missing_files()
    if missing:
        return TraceResult(trace.name, NOT_RUNNABLE, "missing memory image(s): "
                           + ", ".join(str(p) for p in missing))
    why = precision_refusal(trace, getattr(engine, "cfg", None)) if precision_check else None
    if why:
        return TraceResult(trace.name, FAIL, why, None, time.monotonic() - t0)
    p = V1Player(trace, engine, **kw)
    try:
        await p.run()
    except TraceFailure as e:
        return TraceResult(trace.name, FAIL, str(e), engine.cycle, time.monotonic() - t0)
    except (TraceDataError, TraceSyntaxError) as e:
        return TraceResult(trace.name, FAIL, str(e), engine.cycle, time.monotonic() - t0)
    except Exception as e:  # the engine rejected the program (e.g. ModelConfigError)
        where = f" at {p.current.where}" if p.current is not None else ""
        return TraceResult(trace.name, FAIL, f"{type(e).__name__}{where}: {e}", engine.cycle,
                           time.monotonic() - t0)
    return TraceResult(trace.name, PASS, f"{p.checks} checks", engine.cycle, time.monotonic() - t0)
