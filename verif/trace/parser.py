"""Parser for NVIDIA's trace-test register programs (``.cfg``) and memory images (``.dat``).

Grammar (v2_verif_guide.rst "Configuration File Format" and "Memory Surface File Format"):
one command per line, ``//`` comments, commands ``reg_write(NAME, VALUE)``,
``poll_reg_equal(NAME, VALUE)``, ``intr_notify(INTR_ID, SYNC_ID)``,
``check_crc(SYNC_ID, MEM, BASE, SIZE, CRC)``, ``check_nothing(SYNC_ID)``,
``mem_init(MEM, BASE, SIZE, PATTERN)``, ``mem_load(MEM, BASE, "FILE")``,
``sync_notify(RESOURCE, SYNC_ID)``, ``sync_wait(RESOURCE, SYNC_ID)`` (the guide's per-resource
sequencers ordering OP_ENABLE writes, CACC -> CMAC -> CSC; NVIDIA's nv_large traces use them).
A ``.dat`` file holds packets ``{offset:0x20, size:4, payload:0x00 0x10 0x20 0x30}`` joined by commas.

Checks made here, before anything runs (each error names the file and line):

* every line is UTF-8 and a known command with the right arguments;
* register values (``reg_write``/``poll_reg_equal``) and CRCs fit 32 bits (0 to 2**32-1);
* bases and sizes are not negative, sizes are at most ``MAX_REGION_BYTES``;
* every ``sync_wait`` waits for a sync id a ``sync_notify`` earlier in the file sends (the
  player runs commands in file order, which is then a valid order of the guide's sequencers);
* a trace checks something: at least one ``check_crc``/``check_nothing``, and one after the
  last kick-off (a ``D_OP_ENABLE`` write with bit 0 set), otherwise it would PASS unchecked.

:meth:`Trace.check_address_space` checks the memory regions against an address width (the
player calls it with the engine's width).

Errors: ``TraceSyntaxError`` names the file and line of a malformed command or trace;
``TraceDataError`` names a missing or malformed ``.dat`` file, with line and packet.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from hdl.regmap import REGMAP, RegRef

#: Largest ``mem_init``/``check_crc`` region accepted (bytes): NVIDIA's nv_small traces use at
#: most 16.5 MB; a larger region is a typo that would otherwise walk gigabytes of memory.
MAX_REGION_BYTES = 1 << 30

WORD_MAX = (1 << 32) - 1


class TraceSyntaxError(ValueError):
    """A malformed ``.cfg`` line or trace; the message starts with ``file:line:``."""


class TraceDataError(ValueError):
    """A ``.dat`` memory image is missing or malformed; the message names the file (and, when
    malformed, ``file:line: packet N``)."""


@dataclass(frozen=True)
class Command:
    """One trace command. ``args`` holds the parsed arguments by name (see module docstring)."""
    kind: str
    args: dict
    file: str
    line: int

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def is_kickoff(self) -> bool:
        """A ``reg_write`` of some unit's ``D_OP_ENABLE`` (starts a layer) or of BDMA's
        ``CFG_LAUNCH0/1`` (starts a BDMA group) with bit 0 set."""
        return (self.kind == "reg_write"
                and self.args["reg"].reg.name in ("D_OP_ENABLE", "CFG_LAUNCH0", "CFG_LAUNCH1")
                and bool(self.args["value"] & 1))


def region_error(base: int, size: int, address_width: int) -> str | None:
    """Why the byte region ``[base, base + size)`` is not inside an ``address_width``-bit
    address space (None when it is)."""
    top = 1 << address_width
    if base < 0 or size < 0:
        return f"region {base:#x}+{size:#x} is negative"
    if base + size > top:
        return (f"region {base:#x}..{base + size - 1:#x} is outside the {address_width}-bit "
                f"address space (0..{top - 1:#x})")
    return None


@dataclass
class Trace:
    """A trace test: its directory, name and commands in file order."""
    name: str
    directory: Path
    cfg: Path
    commands: list[Command] = field(default_factory=list)

    def missing_files(self) -> list[Path]:
        """``.dat`` files named by ``mem_load`` that do not exist."""
        return [self.directory / c.args["file"] for c in self.commands
                if c.kind == "mem_load" and not (self.directory / c.args["file"]).is_file()]

    def check_address_space(self, address_width: int, images: dict | None = None) -> None:
        """Raise TraceSyntaxError (``file:line``) when a ``mem_init``/``check_crc`` region or a
        ``mem_load`` lies outside ``[0, 2**address_width)`` bytes. ``images`` maps a
        ``mem_load`` file name to its loaded ``.dat`` runs (``load_dat``); without it only the
        base of a ``mem_load`` is checked."""
        for c in self.commands:
            a = c.args
            if c.kind in ("mem_init", "check_crc"):
                why = region_error(a["base"], a["size"], address_width)
            elif c.kind == "mem_load":
                runs = (images or {}).get(a["file"])
                end = max((off + len(data) for off, data in runs), default=0) if runs else 1
                why = region_error(a["base"], end, address_width)
                if why and runs:
                    why = f"{a['file']} spans {end:#x} bytes from {a['base']:#x}: {why}"
            else:
                continue
            if why:
                raise TraceSyntaxError(f"{c.where}: {c.kind}: {why}")


_CMD = re.compile(r"^\s*([a-z_]+)\s*\((.*)\)\s*;?\s*$")
_ARITY = {"reg_write": 2, "poll_reg_equal": 2, "intr_notify": 2, "check_crc": 5,
          "check_nothing": 1, "mem_init": 4, "mem_load": 3, "sync_notify": 2, "sync_wait": 2}


#: the memories of NVIDIA's trace format: primary (MCIF, DBB) and secondary (CVIF, CV SRAM)
MEMORIES = ("pri_mem", "sec_mem")


def _mem_name(text: str, where: str) -> str:
    """A memory name of ``mem_init``/``mem_load``/``check_crc`` (``MEMORIES``; ``1``, which
    NVIDIA's nv_small traces write in ``check_crc``, is ``pri_mem``: NVIDIA's Verilator flow,
    verif/verilator/new_trace_to_verilator.py, accepts only memory type "1", its one memory);
    raises TraceSyntaxError (``file:line``) for anything else."""
    if text == "1":
        return "pri_mem"
    if text not in MEMORIES:
        raise TraceSyntaxError(f"{where}: memory {text!r} is not one of {', '.join(MEMORIES)}")
    return text


def _int(text: str, where: str, what: str, lo: int = 0, hi: int | None = None) -> int:
    """``text`` as an integer (decimal or 0x-hex) in ``[lo, hi]``; TraceSyntaxError otherwise."""
    try:
        v = int(text.strip(), 0)
    except ValueError:
        raise TraceSyntaxError(f"{where}: {what} {text.strip()!r} is not a number") from None
    if v < lo or (hi is not None and v > hi):
        rng = f"{lo:#x}..{hi:#x}" if hi is not None else f">= {lo}"
        raise TraceSyntaxError(f"{where}: {what} {text.strip()} is out of range ({rng})")
    return v


def _reg(text: str, where: str) -> RegRef:
    try:
        return REGMAP.lookup(text.strip())
    except KeyError as e:
        raise TraceSyntaxError(f"{where}: {e.args[0]}") from None


def parse_line(text: str, file: str, line: int) -> Command | None:
    """Parse one ``.cfg`` line; None for blank and comment lines. Raises TraceSyntaxError."""
    body = text.split("//", 1)[0].strip()
    if not body:
        return None
    where = f"{file}:{line}"
    m = _CMD.match(body)
    if not m:
        raise TraceSyntaxError(f"{where}: cannot parse {body!r}")
    kind, argtext = m.group(1), m.group(2)
    if kind not in _ARITY:
        raise TraceSyntaxError(f"{where}: unknown command {kind!r} (known: {', '.join(_ARITY)})")
    args = [a.strip() for a in argtext.split(",")]
    if len(args) != _ARITY[kind] or any(a == "" for a in args):
        raise TraceSyntaxError(f"{where}: {kind} takes {_ARITY[kind]} arguments, got {argtext!r}")
    if kind in ("reg_write", "poll_reg_equal"):
        a = {"reg": _reg(args[0], where), "value": _int(args[1], where, "value", 0, WORD_MAX)}
    elif kind == "intr_notify":
        intr = args[0]
        # NVIDIA's nv_large dc_8x8x32_1x1x32x32 writes cdma_dat_0: the unit is case-insensitive
        m2 = re.fullmatch(r"([A-Za-z_]+)_([01])", intr)
        if not m2:
            raise TraceSyntaxError(f"{where}: interrupt id {intr!r} is not <UNIT>_<group 0|1>")
        a = {"unit": m2.group(1).upper(), "group": int(m2.group(2)), "sync": args[1]}
    elif kind == "check_crc":
        a = {"sync": args[0], "mem": _mem_name(args[1], where), "base": _int(args[2], where, "base"),
             "size": _int(args[3], where, "size", 0, MAX_REGION_BYTES),
             "crc": _int(args[4], where, "crc", 0, WORD_MAX)}
    elif kind == "check_nothing":
        a = {"sync": args[0]}
    elif kind in ("sync_notify", "sync_wait"):
        a = {"resource": args[0], "sync": args[1]}
    elif kind == "mem_init":
        if args[3] != "ALL_ZERO":
            raise TraceSyntaxError(f"{where}: mem_init pattern {args[3]!r} is not supported (ALL_ZERO is)")
        a = {"mem": _mem_name(args[0], where), "base": _int(args[1], where, "base"),
             "size": _int(args[2], where, "size", 0, MAX_REGION_BYTES), "pattern": args[3]}
    else:  # mem_load
        fn = args[2]
        if not (len(fn) >= 2 and fn.startswith('"') and fn.endswith('"')):
            raise TraceSyntaxError(f"{where}: mem_load file name must be quoted, got {fn}")
        a = {"mem": _mem_name(args[0], where), "base": _int(args[1], where, "base"),
             "file": fn[1:-1]}
    return Command(kind, a, file, line)


def _read_text(path: Path, error) -> str:
    """UTF-8 text of ``path``; a byte that is not UTF-8 raises ``error`` naming file:line."""
    raw = Path(path).read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise error(f"{path}:{line}: byte {raw[e.start]:#04x} is not UTF-8 text") from None


def parse_cfg(path: Path) -> list[Command]:
    """All commands of one ``.cfg`` file in order. Raises TraceSyntaxError (malformed line or
    non-UTF-8 byte, naming file:line), OSError."""
    cmds = []
    for i, text in enumerate(_read_text(path, TraceSyntaxError).splitlines(), 1):
        c = parse_line(text, str(path), i)
        if c is not None:
            cmds.append(c)
    return cmds


def check_program(cmds: list[Command], path: Path) -> None:
    """Trace-level rules of a parsed ``.cfg`` (raise TraceSyntaxError naming file:line):
    every ``check_crc``/``check_nothing`` waits for a sync id some ``intr_notify`` fires, every
    ``sync_wait`` for one an earlier ``sync_notify`` sends; the
    trace checks something, and something after its last kick-off."""
    sent = set()
    for c in cmds:
        if c.kind == "sync_notify":
            sent.add(c.args["sync"])
        elif c.kind == "sync_wait" and c.args["sync"] not in sent:
            raise TraceSyntaxError(f"{c.where}: sync_wait waits for sync id {c.args['sync']!r}, which "
                                   "no earlier sync_notify sends (commands run in file order)")
    notified = {c.args["sync"] for c in cmds if c.kind == "intr_notify"}
    checks = [i for i, c in enumerate(cmds) if c.kind in ("check_crc", "check_nothing")]
    for i in checks:
        if cmds[i].args["sync"] not in notified:
            raise TraceSyntaxError(f"{cmds[i].where}: {cmds[i].kind} waits for sync id "
                                   f"{cmds[i].args['sync']!r}, which no intr_notify fires")
    kicks = [i for i, c in enumerate(cmds) if c.is_kickoff]
    if not checks:
        raise TraceSyntaxError(f"{path}:1: no check_crc or check_nothing: the trace checks nothing")
    if kicks and kicks[-1] > checks[-1]:
        k = cmds[kicks[-1]]
        raise TraceSyntaxError(f"{k.where}: no check_crc or check_nothing after this kick-off "
                               f"({k.args['reg'].trace_name} = {k.args['value']:#x}): its result "
                               "would go unchecked")


def load_trace(directory: Path) -> Trace:
    """The trace in ``directory`` (its single ``.cfg``). Raises TraceSyntaxError (see
    ``parse_cfg`` and ``check_program``), FileNotFoundError."""
    directory = Path(directory)
    cfgs = sorted(directory.glob("*.cfg"))
    if len(cfgs) != 1:
        raise FileNotFoundError(f"{directory}: expected exactly one .cfg file, found {len(cfgs)}")
    cmds = parse_cfg(cfgs[0])
    check_program(cmds, cfgs[0])
    return Trace(directory.name, directory, cfgs[0], cmds)


def last_writes(trace: Trace) -> dict:
    """The last value ``trace``'s program writes to each register, keyed ``UNIT.REGISTER``
    (for figures computed from a layer's registers, e.g. scripts/bench_conv.py)."""
    out = {}
    for c in trace.commands:
        if c.kind == "reg_write":
            ref = c.args["reg"]
            out[f"{ref.unit.name}.{ref.reg.name}"] = c.args["value"]
    return out


def reg_field(regs: dict, unit: str, reg: str, lsb: int, width: int) -> int:
    """Bits ``lsb .. lsb+width-1`` of ``regs["UNIT.REG"]`` (:func:`last_writes`; 0 when the
    register is never written)."""
    return (regs.get(f"{unit}.{reg}", 0) >> lsb) & ((1 << width) - 1)


def find_traces(paths) -> list[Path]:
    """Trace directories under PATHs: a directory with a ``.cfg`` (or, a v1 trace, an
    ``input.txn``) is a trace; otherwise its immediate subdirectories that hold one. Sorted by name within each PATH."""
    out = []

    def is_trace(d: Path) -> bool:       # a v2 trace (.cfg) or a v1 one (input.txn, verif/trace/v1.py)
        return any(d.glob("*.cfg")) or (d / "input.txn").is_file()
    for p in map(Path, paths):
        if p.is_dir() and is_trace(p):
            out.append(p)
        elif p.is_dir():
            out.extend(sorted(d for d in p.iterdir() if d.is_dir() and is_trace(d)))
        else:
            raise FileNotFoundError(f"{p}: not a trace directory nor a directory of traces")
    return out


_NUM = r"(0x[0-9a-fA-F]+|\d+)"
# one well-formed packet, the separator after it (a comma, or nothing at the end of the file)
# and the whitespace up to the next packet
_PACKET = re.compile(r"\{\s*offset\s*:\s*" + _NUM + r"\s*,\s*size\s*:\s*" + _NUM +
                     r"\s*,\s*payload\s*:((?:\s*0x[0-9a-fA-F]{1,2}(?:\s+0x[0-9a-fA-F]{1,2})*)?)"
                     r"\s*\}\s*(,?)\s*")
_OUTER = re.compile(r"\{\s*[{}]")      # a '{' that wraps all packets (or an empty image)
_KEY = re.compile(r"([^\s:,{}]+)\s*:")
_HEXBYTE = re.compile(r"0x[0-9a-fA-F]{1,2}")


def _packet_error(text: str, pos: int, n: int) -> str:
    """Why the text at ``pos`` (not whitespace) is not packet number ``n``'s well-formed
    ``{offset:, size:, payload:}`` followed by a comma."""
    if text[pos] != "{":
        end = text.find("{", pos)
        junk = text[pos:end if end >= 0 else len(text)].strip()
        return f"unexpected text {junk[:40]!r} before packet {n}"
    close = text.find("}", pos)
    nxt = text.find("{", pos + 1)
    if close < 0 or (0 <= nxt < close):
        return f"packet {n} has no closing '}}'"
    inner = text[pos + 1:close]
    keys = _KEY.findall(inner)
    if keys != ["offset", "size", "payload"]:
        return f"packet {n} has keys {keys}, expected ['offset', 'size', 'payload']"
    parts = inner.split(",")
    if len(parts) != 3:
        return f"packet {n} needs a comma between each of offset, size and payload"
    vals = [p.split(":", 1)[1].strip() for p in parts]
    for what, v in zip(("offset", "size"), vals):
        if not re.fullmatch(_NUM, v):
            return f"packet {n} {what} {v!r} is not a number"
    for h in vals[2].split():
        if not _HEXBYTE.fullmatch(h):
            return f"packet {n} (offset {vals[0]}) payload byte {h!r} is not 0x00..0xff"
    after = text[close + 1:].lstrip()
    if after and after[0] != ",":
        return f"packet {n} (offset {vals[0]}) is not followed by a comma"
    return f"packet {n} is not {{offset:N, size:N, payload:0xHH ...}}"


def load_dat(path: Path) -> list[tuple[int, bytes]]:
    """Memory image as contiguous ``(offset, bytes)`` runs (adjacent packets merged), offsets
    in bytes from the ``mem_load`` base.

    Every character of the file must belong to a packet ``{offset:N, size:N, payload:0xHH ...}``
    or be whitespace or the comma after a packet; the packets may be wrapped in one outer
    ``{ ... }`` (as most of NVIDIA's images are). Raises TraceDataError naming the file when it
    is missing or not UTF-8, and ``file:line: packet N`` (1-based) for a malformed packet: a
    missing comma, a wrong key, a payload byte that is not ``0x00``..``0xff``, a payload length
    different from ``size``, or text between packets.
    """
    path = Path(path)
    try:
        text = _read_text(path, TraceDataError)
    except FileNotFoundError:
        raise TraceDataError(f"memory image {path} does not exist") from None

    def fail(pos: int, why: str):
        line = text.count("\n", 0, pos) + 1
        raise TraceDataError(f"{path}:{line}: {why}")

    runs: list[tuple[int, bytearray]] = []
    pos, end = len(text) - len(text.lstrip()), len(text.rstrip())
    if _OUTER.match(text, pos):             # most of NVIDIA's images: { {packet}, ... }
        if text[end - 1] != "}" or end - 1 <= pos:
            fail(end, "the file's opening '{' (around all packets) has no closing '}'")
        pos, end = pos + 1, end - 1
        pos += len(text[pos:end]) - len(text[pos:end].lstrip())
    n = 0
    match = _PACKET.match
    while pos < end:
        n += 1
        m = match(text, pos, end)
        if m is None or (not m.group(4) and m.end() < end):
            fail(pos, _packet_error(text[:end], pos, n))
        off, size, payload = int(m.group(1), 0), int(m.group(2), 0), m.group(3)
        count = payload.count("0x")
        if count != size:
            fail(pos, f"packet {n} at offset {off:#x} says size {size} but has {count} payload bytes")
        digits = payload.replace("0x", "")
        if len(digits) - digits.count(" ") == 2 * size:   # every byte is 0xHH: the fast path
            data = bytes.fromhex(digits)
        else:
            data = bytes(int(h, 16) for h in payload.split())
        if runs and runs[-1][0] + len(runs[-1][1]) == off:
            runs[-1][1].extend(data)
        else:
            runs.append((off, bytearray(data)))
        pos = m.end()
    return [(o, bytes(b)) for o, b in runs]
