"""Constructors used by the register data table (``nvdla_registers.py``)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class F:
    """One register field: bits [lsb, msb], reset value, NVIDIA spec_access, enum values."""
    name: str
    lsb: int
    msb: int
    reset: int
    access: str
    enums: dict = field(default_factory=dict, hash=False, compare=True)

    @property
    def width(self) -> int:
        return self.msb - self.lsb + 1

    @property
    def mask(self) -> int:
        """Mask of the field's bits within the 32-bit register."""
        return ((1 << self.width) - 1) << self.lsb

    @property
    def writable(self) -> bool:
        """Software can write it (spec_access other than r and c)."""
        return self.access not in ("r", "c")


@dataclass(frozen=True)
class R:
    """One 32-bit register: name as NVIDIA's manual spells it (without the ``_0`` suffix)."""
    name: str
    offset: int
    fields: list

    @property
    def double_buffered(self) -> bool:
        """``D_`` registers exist once per ping-pong group; ``S_`` (and CFGROM) once."""
        return self.name.startswith("D_")

    @property
    def reset(self) -> int:
        v = 0
        for f in self.fields:
            v |= (f.reset << f.lsb) & f.mask
        return v

    @property
    def write_mask(self) -> int:
        m = 0
        for f in self.fields:
            if f.writable:
                m |= f.mask
        return m

    def field(self, name: str) -> F:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"register {self.name} has no field {name}")


@dataclass(frozen=True)
class U:
    """One unit's register block: name (``SDP``), byte base address, registers."""
    name: str
    base: int
    registers: list
