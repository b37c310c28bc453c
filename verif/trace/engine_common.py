"""Pieces shared by the simulated engines (rtl under cocotb, amaranth): the memory side of the
``Engine`` protocol, AXI protocol-error reporting and the busy-unit readout of every ``S_STATUS``."""
from __future__ import annotations

from functools import lru_cache

from hdl.regmap import REGMAP, RegisterMap, regmap_for
from verif.trace.player import TraceFailure, memory_of


#: registers whose bit 0 starts work: a unit's register group, or a BDMA group
KICKOFF_REGS = ("D_OP_ENABLE", "CFG_LAUNCH0", "CFG_LAUNCH1")


@lru_cache(maxsize=None)
def kickoff_addrs(regmap: RegisterMap = REGMAP) -> frozenset:
    """Byte addresses of every unit's ``D_OP_ENABLE`` register and BDMA's ``CFG_LAUNCH0/1`` (bit
    0 set there starts a layer or a BDMA group) in ``regmap`` (v2's by default)."""
    return frozenset(u.base + r.offset for u in regmap.units for r in u.registers
                     if r.name in KICKOFF_REGS)


@lru_cache(maxsize=None)
def unit_status_regs(regmap: RegisterMap = REGMAP) -> tuple:
    """``(unit name, byte address, register)`` of every unit's ``S_STATUS`` register (and
    BDMA's ``STATUS``, whose GRP0/1_BUSY fields say the same) in ``regmap``."""
    out = []
    for u in regmap.units:
        for r in u.registers:
            if r.name == "S_STATUS":
                out.append((u.name, u.base + r.offset, r))
            elif u.name == "BDMA" and r.name == "STATUS":
                busy = tuple(f for f in r.fields if f.name.endswith("_BUSY"))
                out.append((u.name, u.base + r.offset, type(r)(r.name, r.offset, list(busy))))
    return tuple(out)


async def busy_units(reg_read, regmap: RegisterMap = REGMAP) -> list[str]:
    """Names (with the status value) of the units whose ``S_STATUS`` shows a busy register
    group, read through the engine's ``reg_read`` coroutine; a read that times out is named.
    ``regmap``: the DUT's register map (v1 on nv_full)."""
    out = []
    for unit, addr, reg in unit_status_regs(regmap):
        try:
            v = await reg_read(addr)
        except TraceFailure:
            out.append(f"{unit}(S_STATUS read timed out)")
            continue
        if any(v & f.mask for f in reg.fields):
            out.append(f"{unit}(S_STATUS={v:#x})")
    return out


class SimEngineBase:
    """What the rtl and amaranth engines share. A subclass sets ``mem`` (a
    :class:`verif.mem.SparseMemory`), ``axi`` (an object with an ``error`` attribute: the AXI slave
    core or its adapter; may be None before start), ``cycle`` and ``reg_read``.

    With the secondary memory interface (``nvdla_core2cvsram``) the subclass also sets
    ``cv_mem`` and ``cv_axi``: the memory and AXI slave behind that port (None otherwise).

    The player's ``mem_*`` calls go straight into ``mem`` or ``cv_mem`` (``pri_mem`` /
    ``sec_mem``; no AXI traffic, no simulated time).
    """

    mem = None
    axi = None
    cv_mem = None
    cv_axi = None

    def _check_error(self) -> None:
        """Raise TraceFailure when an AXI slave (or its monitor) or the CSB monitor
        (``csb_mon``, optional) recorded a protocol error."""
        for port, axi in (("", self.axi), ("CV SRAM port: ", self.cv_axi)):
            if axi is not None and axi.error:
                raise TraceFailure(f"protocol error (seen at cycle {self.cycle}): {port}{axi.error}")
        mon = getattr(self, "csb_mon", None)
        if mon is not None and mon.error:
            raise TraceFailure(f"protocol error (seen at cycle {self.cycle}): {mon.error}")

    def _mem(self, mem: str):
        cfg = getattr(self, "cfg", None)
        return memory_of(mem, self.mem, self.cv_mem, getattr(cfg, "name", ""))

    async def mem_write(self, addr: int, data: bytes, mem: str = "pri_mem") -> None:
        self._mem(mem).write(addr, data)

    async def mem_fill(self, addr: int, size: int, value: int, mem: str = "pri_mem") -> None:
        self._mem(mem).fill(addr, size, value)

    async def mem_read(self, addr: int, size: int, mem: str = "pri_mem") -> bytes:
        return self._mem(mem).read_bytes(addr, size)

    async def busy_units(self) -> list[str]:
        return await busy_units(self.reg_read, regmap_for(getattr(self, "cfg", None)))
