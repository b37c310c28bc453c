"""The port convention every NVDLA datapath unit follows, so that ``hdl/top.py`` hooks each one
up the same way (CSB register files, MCIF clients, GLB done interrupt).

A datapath unit is a :class:`amaranth.lib.wiring.Component` that owns its register files and
declares, as class attributes:

* ``REGISTER_FILES``: the register-map units it owns (``("PDP_RDMA", "PDP")``); it has one port
  ``csb_<name lower>`` In(:class:`hdl.regfile.RegBusSignature`) per register file;
* ``READ_CLIENTS`` / ``WRITE_CLIENTS``: its DMA engines, by their names in the MCIF client table
  (``hdl/dma/clients.py``); one port per engine named like it, Out(DmaReadSignature) or
  Out(DmaWriteSignature) of the primary memory interface;
* ``INTERRUPT``: its GLB interrupt source (``"pdp"`` for S_INTR_STATUS.PDP_DONE_STATUS<g>); the
  port ``done_grp`` Out(2) pulses bit g for one cycle when register group g completes;

and a ``busy`` Out(1) port. :func:`unit_members` builds those members.
"""
from __future__ import annotations

from amaranth.lib.wiring import In, Out

from hdl.axi import DmaReadSignature, DmaWriteSignature
from hdl.config import NvdlaConfig
from hdl.regfile import RegBusSignature

__all__ = ["unit_members"]


def unit_members(cfg: NvdlaConfig, register_files, read_clients, write_clients) -> dict:
    """Signature members of a datapath unit (see the module docstring): ``csb_<rf>`` per
    register file, one DMA port per read/write client (cfg.mem_address_width address bits,
    cfg.primary_memif_width data bits), ``done_grp`` Out(2), ``busy`` Out(1)."""
    aw, dw = cfg.mem_address_width, cfg.primary_memif_width
    members = {f"csb_{rf.lower()}": In(RegBusSignature()) for rf in register_files}
    members.update({c: Out(DmaReadSignature(aw, dw)) for c in read_clients})
    members.update({c: Out(DmaWriteSignature(aw, dw)) for c in write_clients})
    members.update(done_grp=Out(2), busy=Out(1))
    return members
