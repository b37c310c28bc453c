"""Pieces shared by the simulated engines (rtl under cocotb, amaranth): unit status registers."""
from __future__ import annotations

from functools import lru_cache

from hdl.regmap import REGMAP
from verif.trace.player import TraceFailure


@lru_cache(maxsize=None)
def unit_status_regs() -> tuple:
    """``(unit name, byte address, register)`` of every unit's ``S_STATUS`` register."""
    return tuple((u.name, u.base + r.offset, r) for u in REGMAP.units for r in u.registers
                 if r.name == "S_STATUS")


async def busy_units(reg_read) -> list[str]:
    """Names (with the status value) of the units whose ``S_STATUS`` shows a busy register
    group, read through the engine's ``reg_read`` coroutine; a read that times out is named."""
    out = []
    for unit, addr, reg in unit_status_regs():
        try:
            v = await reg_read(addr)
        except TraceFailure:
            out.append(f"{unit}(S_STATUS read timed out)")
            continue
        if any(v & f.mask for f in reg.fields):
            out.append(f"{unit}(S_STATUS={v:#x})")
    return out
