"""Back-to-back traces without a reset (issue 11 item 7: state must not leak between layers).

NVIDIA's traces assume the state after reset: every unit's producer and consumer pointers at
group 0 (they write ``S_POINTER`` = 0 and wait for ``<UNIT>_0`` interrupts). Without a reset a
unit's consumer pointer is wherever the previous layers left it, so software does what a driver
does: it programs the group the hardware consumes next. :func:`prepare` reads every unit's
``S_POINTER``, sets the producer to the consumer, and :func:`remap_groups` renames the trace's
groups: ``S_POINTER`` writes and ``intr_notify(<UNIT>_<g>)`` use ``g xor consumer``. It also
acknowledges every interrupt status bit still set and puts S_INTR_MASK back to its reset value
(nothing masked), as a driver does before a new job: NVIDIA's pdp_*/cdp_* traces never write
S_INTR_MASK and rely on its reset value, while the dc_* traces mask every source but SDP, and
masked events still set their status bits. Nothing else in the trace changes (its ``D_`` registers go to the
producer group, as they always do).
"""
from __future__ import annotations

import dataclasses
from functools import lru_cache

from hdl.regmap import REGMAP

__all__ = ["pointer_regs", "remap_groups", "prepare", "intr_unit_to_reg_unit"]


@lru_cache(maxsize=None)
def pointer_regs() -> tuple:
    """``(unit name, byte address)`` of every unit's ``S_POINTER``."""
    return tuple((u.name, u.base + r.offset) for u in REGMAP.units for r in u.registers
                 if r.name == "S_POINTER")


def intr_unit_to_reg_unit(name: str) -> str:
    """The register unit whose consumer pointer names the group of interrupt ``<name>_<g>``
    (``CDMA_DAT``/``CDMA_WT`` -> ``CDMA``, ``RUBIK`` -> ``RBK``, else the same name)."""
    units = {u.name for u in REGMAP.units}
    if name in units:
        return name
    if name.startswith("CDMA"):
        return "CDMA"
    if name == "RUBIK":
        return "RBK"
    return name


def remap_groups(trace, offset: dict[str, int]):
    """A copy of ``trace`` whose register groups are renamed by ``offset`` (unit -> 0/1, xor):
    ``S_POINTER`` producer bits and ``intr_notify`` groups."""
    cmds = []
    for c in trace.commands:
        if c.kind == "reg_write" and c.args["reg"].reg.name == "S_POINTER":
            off = offset.get(c.args["reg"].unit.name, 0)
            c = dataclasses.replace(c, args=dict(c.args, value=c.args["value"] ^ off))
        elif c.kind == "intr_notify":
            off = offset.get(intr_unit_to_reg_unit(c.args["unit"]), 0)
            c = dataclasses.replace(c, args=dict(c.args, group=c.args["group"] ^ off))
        cmds.append(c)
    return dataclasses.replace(trace, commands=cmds)


async def prepare(engine, trace):
    """Unmask every interrupt source, acknowledge pending status bits, read every ``S_POINTER`` through ``engine``,
    point each producer at its consumer, and return ``trace`` with its groups renamed to match
    (:func:`remap_groups`)."""
    mask = REGMAP.lookup("GLB.S_INTR_MASK")
    await engine.reg_write(mask.addr, mask.reg.reset)    # reset value: nothing masked
    status = REGMAP.lookup("GLB.S_INTR_STATUS").addr
    pending = await engine.reg_read(status)
    if pending:
        await engine.reg_write(status, pending)          # write 1 to clear
    offset = {}
    for unit, addr in pointer_regs():
        v = await engine.reg_read(addr)
        cons = (v >> 16) & 1
        offset[unit] = cons
        if (v & 1) != cons:
            await engine.reg_write(addr, cons)
    return remap_groups(trace, offset)
