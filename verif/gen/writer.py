"""The one trace writer: a register program written as a trace directory (``.cfg`` + ``.dat``)
in NVIDIA's format (v2_verif_guide.rst "Configuration File Format" / "Memory Surface File
Format"; parsed by :mod:`verif.trace.parser`), replayable by ``python -m verif.trace run DIR
--engine model|rtl``.

:class:`TraceWriter` collects commands in order (memory images, register writes, polls,
interrupt waits, checks) and :meth:`TraceWriter.write` writes them; ``check_crc`` lines whose CRC
is not known yet hold a placeholder, which :func:`fill_crcs_from_model` replaces by the CRCs of
the numpy model's output (the model is the bit-exact reference: a PASS on another engine is then
byte for byte equal to the model).

:func:`reg_value` builds a register word from field values by name through the register map
(a negative value of a signed field is written in two's complement; a value that does not fit its
field raises ValueError).
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from hdl.regmap import REGMAP, RegRef

__all__ = ["TraceWriter", "dat_text", "reg_ref", "reg_value", "fill_crcs_from_model"]


def dat_text(data: bytes, packet: int = 32) -> str:
    """``data`` as a ``.dat`` memory image: packets of ``packet`` bytes from offset 0."""
    return ",\n".join(f"{{offset:{o:#x}, size:{len(data[o:o + packet])}, payload:"
                      + " ".join(f"0x{b:02X}" for b in data[o:o + packet]) + "}"
                      for o in range(0, len(data), packet)) + "\n"


def reg_ref(unit: str, reg: str) -> RegRef:
    """The register ``reg`` (without the ``_0`` suffix, e.g. ``D_OP_ENABLE``) of ``unit``
    (``SDP``, ``PDP_RDMA``, ...). Raises KeyError for an unknown name."""
    return REGMAP.lookup(f"NVDLA_{unit}.{reg}_0")


def reg_value(unit: str, reg: str, base: int = 0, **fields: int) -> int:
    """Register word of ``unit.reg``: ``base`` with the named fields replaced (a signed field's
    negative value in two's complement). Raises KeyError for an unknown field, ValueError for a
    value outside the field's range (unsigned 0..2**w-1, signed -2**(w-1)..2**w-1)."""
    r = reg_ref(unit, reg).reg
    v = base
    for name, val in fields.items():
        f = r.field(name)
        if f is None:
            raise KeyError(f"{unit}.{reg} has no field {name}")
        width = f.msb - f.lsb + 1
        if not -(1 << (width - 1)) <= val < (1 << width) or (val < 0 and not f.signed):
            raise ValueError(f"{unit}.{reg}.{name}={val} does not fit {width} bits"
                             f"{' (signed)' if f.signed else ''}")
        mask = ((1 << width) - 1) << f.lsb
        v = (v & ~mask) | ((val << f.lsb) & mask)
    return v & 0xFFFF_FFFF


@dataclass
class _Check:
    sync: str
    base: int
    size: int
    crc: int | None
    mem: str = "pri_mem"


class TraceWriter:
    """A register program being written as a trace (commands kept in call order).

    ``name``: the trace's name (its directory's and ``.cfg`` file's name by default).
    Register names are ``(unit, reg)`` pairs (``("SDP", "D_OP_ENABLE")``) or NVIDIA's trace names
    (``"NVDLA_SDP.D_OP_ENABLE_0"``); both are checked against the register map.
    """

    def __init__(self, name: str):
        self.name = name
        self.lines: list[str | _Check] = []
        self.images: dict[str, bytes | Path] = {}

    @staticmethod
    def _name(reg) -> str:
        if isinstance(reg, tuple):
            return reg_ref(*reg).trace_name
        return REGMAP.lookup(reg).trace_name

    @staticmethod
    def _comment(text: str | None) -> str:
        return f"    // {text}" if text else ""

    def comment(self, text: str) -> None:
        self.lines.append(f"// {text}")

    def mem_init(self, base: int, size: int, mem: str = "pri_mem") -> None:
        """Zero ``size`` bytes at ``base`` of memory ``mem`` (``pri_mem``/``sec_mem``;
        ``ALL_ZERO``)."""
        self.lines.append(f"mem_init({mem}, {base:#x}, {size:#x}, ALL_ZERO);")

    def mem_load(self, base: int, data: bytes | Path, file: str | None = None,
                 init: bool = False, mem: str = "pri_mem") -> str:
        """Load ``data`` (bytes, or the path of an existing ``.dat`` image, copied) at ``base``
        of memory ``mem`` (``pri_mem``/``sec_mem``); ``file``: the image's file name (default
        ``<name>_<n>.dat``); ``init``: zero the region first (``mem_init`` of ``len(data)``
        bytes; bytes only). Returns the file name."""
        file = file or (Path(data).name if isinstance(data, Path) else f"{self.name}_{len(self.images)}.dat")
        if file in self.images:
            raise ValueError(f"image {file} loaded twice")
        self.images[file] = data
        if init:
            self.mem_init(base, len(data), mem)
        self.lines.append(f'mem_load({mem}, {base:#x}, "{file}");')
        return file

    def reg_write(self, reg, value: int, comment: str | None = None) -> None:
        if not 0 <= value <= 0xFFFF_FFFF:
            raise ValueError(f"{reg}: value {value:#x} does not fit 32 bits")
        self.lines.append(f"reg_write({self._name(reg)}, {value:#x});{self._comment(comment)}")

    def poll(self, reg, value: int, comment: str | None = None) -> None:
        self.lines.append(f"poll_reg_equal({self._name(reg)}, {value:#x});{self._comment(comment)}")

    def intr_notify(self, intr: str, sync: str) -> None:
        """Wait for interrupt ``intr`` (``<UNIT>_<group>``, e.g. ``SDP_0``), naming it ``sync``."""
        self.lines.append(f"intr_notify({intr}, {sync});")

    def check_crc(self, sync: str, base: int, size: int, crc: int | None = None,
                  mem: str = "pri_mem") -> None:
        """CRC-32 of ``size`` bytes at ``base`` of memory ``mem`` once ``sync`` fired; ``crc``
        None: a placeholder (see :func:`fill_crcs_from_model`)."""
        self.lines.append(_Check(sync, base, size, crc, mem))

    def check_nothing(self, sync: str) -> None:
        self.lines.append(f"check_nothing({sync});")

    @property
    def checks(self) -> list[_Check]:
        return [c for c in self.lines if isinstance(c, _Check)]

    def write(self, d: Path, crcs: list[int] | None = None, cfg_name: str | None = None) -> Path:
        """Write the trace into directory ``d`` (created; its ``.cfg`` replaced): ``crcs`` (one
        per ``check_crc``, in order) override the checks' CRCs; placeholders are 0. Returns the
        ``.cfg`` path."""
        d = Path(d)
        d.mkdir(parents=True, exist_ok=True)
        checks = self.checks
        if crcs is not None and len(crcs) != len(checks):
            raise ValueError(f"{len(crcs)} CRCs for {len(checks)} check_crc lines")
        for f in d.glob("*.cfg"):
            f.unlink()
        for file, data in self.images.items():
            if isinstance(data, Path):
                shutil.copy(data, d / file)
            else:
                (d / file).write_text(dat_text(data))
        out, k = [], 0
        for line in self.lines:
            if isinstance(line, _Check):
                crc = crcs[k] if crcs is not None else (line.crc if line.crc is not None else 0)
                k += 1
                mem = "1" if line.mem == "pri_mem" else line.mem     # "1": NVIDIA's nv_small traces
                out.append(f"check_crc({line.sync}, {mem}, {line.base:#x}, {line.size:#x}, {crc:#010x});")
            else:
                out.append(line)
        cfg = d / f"{cfg_name or d.name}.cfg"
        cfg.write_text("\n".join(out) + "\n")
        return cfg


def fill_crcs_from_model(writer: TraceWriter, d: Path, cfg, cfg_name: str | None = None):
    """Write ``writer`` into ``d`` with the numpy model's CRCs in its ``check_crc`` lines.

    Plays the program on the model once with placeholder CRCs and rewrites it with the CRCs of
    what the model wrote. Returns the model's ``TraceResult`` (``checks[i].data``: the model's
    bytes of check ``i``); when the model did not run the program to its end (e.g. it raised
    ``ModelConfigError``: ``result.message`` says so, and fewer checks than ``check_crc`` lines
    were made) the trace is left with placeholder CRCs."""
    from verif.trace.runner import run_model
    writer.write(d, cfg_name=cfg_name)
    (res,) = run_model([d], cfg)
    if len(res.checks) == len(writer.checks):
        writer.write(d, [c.actual for c in res.checks], cfg_name=cfg_name)
    return res
