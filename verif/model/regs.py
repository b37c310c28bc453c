"""Register state of one unit with NVDLA's ping-pong programming model.

v1_hwarch.rst "Ping-pong synchronization" and the programming guide: each unit has single
(``S_``) registers and two groups of double-buffered (``D_``) registers. ``S_POINTER.PRODUCER``
selects which group CSB accesses to ``D_`` registers reach; ``CONSUMER`` (read-only) is the group
the hardware runs next. Writing 1 to ``D_OP_ENABLE`` arms the producer group; when the hardware
finishes a group it clears that group's ``OP_EN``, its ``S_STATUS`` field returns to IDLE and
CONSUMER flips.
"""
from __future__ import annotations

from hdl.regmap import Register, Unit, decode


class UnitRegs:
    """Registers of one unit (``unit``: the regmap Unit). Offsets are bytes from the unit base."""

    def __init__(self, unit: Unit):
        self.unit = unit
        self.by_offset = {r.offset: r for r in unit.registers}
        self.by_name = {r.name: r for r in unit.registers}
        self.single = {r.name: r.reset for r in unit.registers if not r.double_buffered}
        self.groups = [{r.name: r.reset for r in unit.registers if r.double_buffered} for _ in (0, 1)]
        self.producer = 0
        self.consumer = 0
        self.enabled = [False, False]
        self._field_index: dict[str, tuple[Register, object]] = {}
        seen = set()
        for r in unit.registers:
            for f in r.fields:
                if f.name in seen:
                    self._field_index.pop(f.name, None)
                else:
                    self._field_index[f.name] = (r, f)
                seen.add(f.name)
        self.hw_fields: dict[str, int] = {}   # values of read-only fields the hardware drives
        # the same for read-only fields of D_ registers, per register group (e.g. statistics)
        self.group_hw_fields: list[dict[str, int]] = [{}, {}]

    # ---- CSB side ----
    def write(self, offset: int, value: int) -> str:
        """CSB write of a 32-bit ``value`` to the register at byte ``offset`` (KeyError when no
        register is there; ``verif.model.Nvdla`` checks accesses first). Returns its name."""
        r = self.by_offset[offset]
        if r.name == "S_POINTER":
            self.producer = decode(r, value).get("PRODUCER", 0)
            return r.name
        keep = r.write_mask
        if r.double_buffered:
            regs = self.groups[self.producer]
            regs[r.name] = (regs[r.name] & ~keep) | (value & keep)
            if r.name == "D_OP_ENABLE" and value & 1:
                self.enabled[self.producer] = True
        else:
            self.single[r.name] = (self.single[r.name] & ~keep) | (value & keep)
        return r.name

    def read(self, offset: int) -> int:
        """CSB read of the register at byte ``offset`` (KeyError when no register is there)."""
        r = self.by_offset[offset]
        if r.name == "S_POINTER":
            return self.producer | (self.consumer << 16)
        if r.name == "S_STATUS":
            st = [0, 0]
            for g in (0, 1):
                if self.enabled[g]:
                    st[g] = 1 if g == self.consumer else 2   # RUNNING / PENDING
            return st[0] | (st[1] << 16)
        if r.name == "D_OP_ENABLE":
            return int(self.enabled[self.producer])
        v = self.groups[self.producer][r.name] if r.double_buffered else self.single[r.name]
        hw = self.hw_fields
        if r.double_buffered and self.group_hw_fields[self.producer]:
            hw = {**hw, **self.group_hw_fields[self.producer]}
        for f in r.fields:
            if f.access == "r" and f.name in hw:
                v = (v & ~f.mask) | ((hw[f.name] << f.lsb) & f.mask)
        return v

    # ---- hardware side ----
    @property
    def armed(self) -> bool:
        """The consumer group is enabled (the unit would run it now)."""
        return self.enabled[self.consumer]

    def view(self, group: int | None = None) -> "GroupView":
        """Read-only view of the registers as the hardware sees them for ``group``
        (default: the consumer group)."""
        return GroupView(self, self.consumer if group is None else group)

    def complete(self) -> int:
        """The hardware finished the consumer group: disarm it, flip CONSUMER. Returns the group."""
        g = self.consumer
        self.enabled[g] = False
        self.groups[g]["D_OP_ENABLE"] = 0
        self.consumer ^= 1
        return g


class GroupView:
    """One register group of a unit as its hardware sees it (D_ of ``group`` plus the S_ regs).

    ``v.reg("D_DATA_CUBE_WIDTH")`` is the raw 32-bit value; ``v.field("D_DATA_CUBE_WIDTH",
    "WIDTH")`` one field; ``v.f("WIDTH")`` a field by its name alone when that name is unique in
    the unit (KeyError otherwise); ``v.fs(...)`` the same sign-extended from the field width.
    """

    def __init__(self, regs: UnitRegs, group: int):
        self.regs, self.group = regs, group
        self.unit = regs.unit.name

    def reg(self, name: str) -> int:
        r = self.regs.by_name.get(name)
        if r is None:
            raise KeyError(f"{self.unit} has no register {name}")
        return self.regs.groups[self.group][name] if r.double_buffered else self.regs.single[name]

    def field(self, reg: str, field: str) -> int:
        f = self.regs.by_name[reg].field(field)
        return (self.reg(reg) >> f.lsb) & ((1 << f.width) - 1)

    def f(self, field: str) -> int:
        try:
            r, fd = self.regs._field_index[field]
        except KeyError:
            raise KeyError(f"{self.unit}: field {field} is unknown or not unique; use field(reg, field)") from None
        return (self.reg(r.name) >> fd.lsb) & ((1 << fd.width) - 1)

    def bytes(self, field: str) -> int:
        """A byte count, address or stride field (by its unique name) as bytes: the field's bits
        where they sit in the register, the bits below it 0. The same as :meth:`f` in v2's map,
        where these fields start at bit 0; v1's map keeps them in bits 31:5 (31:7 for the
        WEIGHT_BYTES / WMB_BYTES counts), i.e. in 32- (128-) byte units (``arnvdla.h``)."""
        r, fd = self.regs._field_index[field]
        return self.f(field) << fd.lsb

    def fs(self, field: str, reg: str | None = None) -> int:
        """Field value sign-extended (two's complement over the field width)."""
        if reg is None:
            r, fd = self.regs._field_index[field]
        else:
            fd = self.regs.by_name[reg].field(field)
        v = self.field(reg, field) if reg else self.f(field)
        return v - (1 << fd.width) if v >> (fd.width - 1) else v

    def addr(self, high: str, low: str) -> int:
        """64-bit address from a HIGH/LOW register pair (register names)."""
        return (self.reg(high) << 32) | self.reg(low)
