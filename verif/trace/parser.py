"""Parser for NVIDIA's trace-test register programs (``.cfg``) and memory images (``.dat``).

Grammar (v2_verif_guide.rst "Configuration File Format" and "Memory Surface File Format"):
one command per line, ``//`` comments, commands ``reg_write(NAME, VALUE)``,
``poll_reg_equal(NAME, VALUE)``, ``intr_notify(INTR_ID, SYNC_ID)``,
``check_crc(SYNC_ID, MEM, BASE, SIZE, CRC)``, ``check_nothing(SYNC_ID)``,
``mem_init(MEM, BASE, SIZE, PATTERN)``, ``mem_load(MEM, BASE, "FILE")``.
A ``.dat`` file holds packets ``{offset:0x20, size:4, payload:0x00 0x10 0x20 0x30}`` joined by commas.

Errors: ``TraceSyntaxError`` names the file and line of a malformed command; ``TraceDataError``
names a missing or malformed ``.dat`` file (the player reports the trace NOT-RUNNABLE).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hdl.regmap import REGMAP, RegRef


class TraceSyntaxError(ValueError):
    """A malformed ``.cfg`` line; the message starts with ``file:line:``."""


class TraceDataError(ValueError):
    """A ``.dat`` memory image is missing or malformed; the message names the file."""


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


_CMD = re.compile(r"^\s*([a-z_]+)\s*\((.*)\)\s*;?\s*$")
_ARITY = {"reg_write": 2, "poll_reg_equal": 2, "intr_notify": 2, "check_crc": 5,
          "check_nothing": 1, "mem_init": 4, "mem_load": 3}


def _int(text: str, where: str, what: str) -> int:
    try:
        return int(text.strip(), 0)
    except ValueError:
        raise TraceSyntaxError(f"{where}: {what} {text.strip()!r} is not a number") from None


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
        a = {"reg": _reg(args[0], where), "value": _int(args[1], where, "value") & 0xFFFFFFFF}
    elif kind == "intr_notify":
        intr = args[0]
        m2 = re.fullmatch(r"([A-Z_]+)_([01])", intr)
        if not m2:
            raise TraceSyntaxError(f"{where}: interrupt id {intr!r} is not <UNIT>_<group 0|1>")
        a = {"unit": m2.group(1), "group": int(m2.group(2)), "sync": args[1]}
    elif kind == "check_crc":
        a = {"sync": args[0], "mem": args[1], "base": _int(args[2], where, "base"),
             "size": _int(args[3], where, "size"), "crc": _int(args[4], where, "crc")}
    elif kind == "check_nothing":
        a = {"sync": args[0]}
    elif kind == "mem_init":
        if args[3] != "ALL_ZERO":
            raise TraceSyntaxError(f"{where}: mem_init pattern {args[3]!r} is not supported (ALL_ZERO is)")
        a = {"mem": args[0], "base": _int(args[1], where, "base"), "size": _int(args[2], where, "size"),
             "pattern": args[3]}
    else:  # mem_load
        fn = args[2]
        if not (fn.startswith('"') and fn.endswith('"')):
            raise TraceSyntaxError(f"{where}: mem_load file name must be quoted, got {fn}")
        a = {"mem": args[0], "base": _int(args[1], where, "base"), "file": fn[1:-1]}
    return Command(kind, a, file, line)


def parse_cfg(path: Path) -> list[Command]:
    """All commands of one ``.cfg`` file in order. Raises TraceSyntaxError, OSError."""
    cmds = []
    for i, text in enumerate(Path(path).read_text().splitlines(), 1):
        c = parse_line(text, str(path), i)
        if c is not None:
            cmds.append(c)
    return cmds


def load_trace(directory: Path) -> Trace:
    """The trace in ``directory`` (its single ``.cfg``). Raises TraceSyntaxError, FileNotFoundError."""
    directory = Path(directory)
    cfgs = sorted(directory.glob("*.cfg"))
    if len(cfgs) != 1:
        raise FileNotFoundError(f"{directory}: expected exactly one .cfg file, found {len(cfgs)}")
    return Trace(directory.name, directory, cfgs[0], parse_cfg(cfgs[0]))


def find_traces(paths) -> list[Path]:
    """Trace directories under PATHs: a directory with a ``.cfg`` is a trace; otherwise its
    immediate subdirectories that hold one. Sorted by name within each PATH."""
    out = []
    for p in map(Path, paths):
        if any(p.glob("*.cfg")):
            out.append(p)
        elif p.is_dir():
            out.extend(sorted(d for d in p.iterdir() if d.is_dir() and any(d.glob("*.cfg"))))
        else:
            raise FileNotFoundError(f"{p}: not a trace directory nor a directory of traces")
    return out


_PACKET = re.compile(r"\{\s*offset\s*:\s*(0x[0-9a-fA-F]+|\d+)\s*,\s*size\s*:\s*(\d+|0x[0-9a-fA-F]+)\s*,"
                     r"\s*payload\s*:\s*([^}]*)\}")


def load_dat(path: Path) -> list[tuple[int, bytes]]:
    """Memory image as contiguous ``(offset, bytes)`` runs (adjacent packets merged).

    Raises TraceDataError naming the file when it is missing or a packet is malformed
    (payload length different from its size field).
    """
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise TraceDataError(f"memory image {path} does not exist") from None
    runs: list[tuple[int, bytearray]] = []
    for m in _PACKET.finditer(text):
        off, size = int(m.group(1), 0), int(m.group(2), 0)
        hexes = m.group(3).split()
        if len(hexes) != size:
            line = text.count("\n", 0, m.start()) + 1
            raise TraceDataError(f"{path}:{line}: packet at offset {off:#x} says size {size} "
                                 f"but has {len(hexes)} payload bytes")
        data = bytes(np.array([int(h, 16) for h in hexes], dtype=np.uint8)) if size else b""
        if runs and runs[-1][0] + len(runs[-1][1]) == off:
            runs[-1][1].extend(data)
        else:
            runs.append((off, bytearray(data)))
    if not runs and text.strip() not in ("", "{}", "{ }"):
        raise TraceDataError(f"{path}: no {{offset:, size:, payload:}} packets found")
    return [(o, bytes(b)) for o, b in runs]
