"""Constructors used by the register data table (``nvdla_registers.py``)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class F:
    """One register field: bits [lsb, msb], reset value, NVIDIA spec_access, enum values, and
    ``signed`` (two's complement; set from ``hdl/regmap/signed_fields.py``, not in the data table)."""
    name: str
    lsb: int
    msb: int
    reset: int
    access: str
    enums: dict = field(default_factory=dict, hash=False, compare=True)
    signed: bool = False

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

    def mask_where(self, keep) -> int:
        """OR of the bit masks of the fields for which ``keep(field)`` is true."""
        m = 0
        for f in self.fields:
            if keep(f):
                m |= f.mask
        return m

    def reset_where(self, keep) -> int:
        """Reset value of the fields for which ``keep(field)`` is true (other bits 0)."""
        v = 0
        for f in self.fields:
            if keep(f):
                v |= (f.reset << f.lsb) & f.mask
        return v

    @property
    def reset(self) -> int:
        return self.reset_where(lambda f: True)

    @property
    def write_mask(self) -> int:
        """Bits software can write (and the register keeps)."""
        return self.mask_where(lambda f: f.writable)

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
