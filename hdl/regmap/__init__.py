"""The project's NVDLA register map: one description for RTL, testbench, model and C header.

Source of truth: ``nvdla_registers.py`` (a data table; see ``scripts/gen_regmap.py``), proven equal
to NVIDIA's RDL (``../shared/nvdla/spec/manual``) by ``tests/test_regmap_rdl.py``.

Naming follows NVIDIA's traces and opendla.h: a register is spelled ``NVDLA_<UNIT>.<REG>_0``
(e.g. ``NVDLA_SDP.D_DATA_CUBE_WIDTH_0``) in traces and ``<UNIT>_<REG>_0`` in C. ``D_`` registers
are double-buffered (one copy per ping-pong register group, hwarch "Ping-pong synchronization");
``S_`` registers are single. Addresses here are byte addresses; the CSB port carries word
addresses (byte address >> 2).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

from hdl.regmap._dsl import F as Field
from hdl.regmap._dsl import R as Register
from hdl.regmap._dsl import U as Unit
from hdl.regmap.nvdla_registers import UNITS
from hdl.regmap.signed_fields import SIGNED_FIELDS
from hdl.regmap.v1 import v1_units

__all__ = ["Field", "Register", "Unit", "RegisterMap", "RegRef", "REGMAP", "REGMAP_V1",
           "regmap_for"]

UNIT_SPAN = 0x1000   # bytes of address space per unit (hwarch: 4 KiB per sub-unit)


@dataclass(frozen=True)
class RegRef:
    """A register located in the map: its unit, the register and its byte address."""
    unit: Unit
    reg: Register

    @property
    def addr(self) -> int:
        """Byte address (unit base + register offset)."""
        return self.unit.base + self.reg.offset

    @property
    def trace_name(self) -> str:
        return f"NVDLA_{self.unit.name}.{self.reg.name}_0"


class RegisterMap:
    """Every unit's registers, addressable by name or byte address.

    ``units`` is ordered by base address. Lookups raise ``KeyError`` with the name or address that
    is not in the map.
    """

    def __init__(self, units: list[Unit]):
        self.units = sorted(units, key=lambda u: u.base)

    @cached_property
    def _by_unit(self) -> dict[str, Unit]:
        return {u.name: u for u in self.units}

    @cached_property
    def _by_addr(self) -> dict[int, RegRef]:
        return {u.base + r.offset: RegRef(u, r) for u in self.units for r in u.registers}

    @cached_property
    def _by_name(self) -> dict[tuple[str, str], RegRef]:
        return {(u.name, r.name): RegRef(u, r) for u in self.units for r in u.registers}

    def unit(self, name: str) -> Unit:
        """Unit by name (``SDP``, ``NVDLA_SDP`` and ``sdp`` all work)."""
        key = name.upper().removeprefix("NVDLA_")
        try:
            return self._by_unit[key]
        except KeyError:
            raise KeyError(f"no NVDLA unit named {name!r}") from None

    def lookup(self, name: str) -> RegRef:
        """Register by trace spelling ``NVDLA_SDP.D_DATA_CUBE_WIDTH_0`` (``_0`` optional),
        or ``SDP.D_DATA_CUBE_WIDTH``. Raises KeyError naming the register."""
        try:
            unit, reg = name.split(".")
        except ValueError:
            raise KeyError(f"register name {name!r} is not of the form NVDLA_<UNIT>.<REG>_0") from None
        unit = unit.upper().removeprefix("NVDLA_")
        reg = reg.upper()
        ref = self._by_name.get((unit, reg))
        if ref is None and reg.endswith("_0"):
            ref = self._by_name.get((unit, reg[:-2]))
        if ref is None:
            raise KeyError(f"no register {name!r} in the NVDLA register map")
        return ref

    def at(self, addr: int) -> RegRef | None:
        """Register at a byte address, or None when no register lives there."""
        return self._by_addr.get(addr)

    def unit_at(self, addr: int) -> Unit | None:
        """The unit whose 4 KiB window holds byte address ``addr`` (None if none)."""
        for u in self.units:
            if u.base <= addr < u.base + UNIT_SPAN:
                return u
        return None

    def __iter__(self):
        for u in self.units:
            for r in u.registers:
                yield RegRef(u, r)


def _mark_signed(units: list[Unit], table: dict) -> list[Unit]:
    """Copies of ``units`` whose fields named in ``table`` ({unit: {register: (field, ...)}})
    have ``signed=True``. Raises KeyError naming an entry of ``table`` that is not in the map."""
    by_unit = {u.name: u for u in units}
    for un, regs in table.items():
        if un not in by_unit:
            raise KeyError(f"signed_fields: no unit {un}")
        by_reg = {r.name: r for r in by_unit[un].registers}
        for rn, fns in regs.items():
            if rn not in by_reg:
                raise KeyError(f"signed_fields: no register {un}.{rn}")
            for fn in fns:
                by_reg[rn].field(fn)     # KeyError naming the register when absent
    out = []
    for u in units:
        regs = []
        for r in u.registers:
            want = table.get(u.name, {}).get(r.name, ())
            fields = [replace(f, signed=True) if f.name in want else f for f in r.fields]
            regs.append(replace(r, fields=fields))
        out.append(replace(u, registers=regs))
    return out


REGMAP = RegisterMap(_mark_signed(UNITS, SIGNED_FIELDS))

#: NVDLA v1's map (nvdlav1, nv_full): v2's units at v1's base addresses, v1's field changes, no
#: CFGROM (``hdl/regmap/v1.py``; proven equal to arnvdla.h by tests/test_regmap_v1.py)
REGMAP_V1 = RegisterMap(v1_units(_mark_signed(UNITS, SIGNED_FIELDS)))


def regmap_for(cfg) -> RegisterMap:
    """The register map of configuration ``cfg`` (an ``hdl.config.NvdlaConfig``, or None):
    REGMAP_V1 when ``cfg.register_map == "v1"`` (nv_full), else REGMAP (v2; also for None, e.g. an
    engine without a configuration). Raises ValueError for another value."""
    version = getattr(cfg, "register_map", "v2")
    if version == "v2":
        return REGMAP
    if version == "v1":
        return REGMAP_V1
    raise ValueError(f"{getattr(cfg, 'name', cfg)}: register_map {version!r} is not v1 or v2")


def decode(reg: Register, value: int) -> dict[str, int]:
    """Split a 32-bit register value into its fields: ``{field name: value}``."""
    return {f.name: (value >> f.lsb) & ((1 << f.width) - 1) for f in reg.fields}
