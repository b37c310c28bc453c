"""The model's byte memory: the verification environment's one sparse memory (``verif.mem``).

``Memory(address_width=64)``: pages of numpy ``uint8`` created on first write, unwritten bytes
read 0, addresses wrapped at ``address_width`` bits as the RTL's address adders wrap them
(construct it with ``cfg.mem_address_width`` to model a configuration's address space).
API: ``read``/``write``/``fill``/``gather``/``scatter`` (see :class:`verif.mem.SparseMemory`).
"""
from __future__ import annotations

from verif.mem import PAGE, SparseMemory

Memory = SparseMemory

__all__ = ["Memory", "PAGE", "ram"]


def ram(mem: Memory, cv_mem: Memory | None, ram_type: int) -> Memory:
    """The memory a DMA engine's ``*_RAM_TYPE`` register field names (CV = 0, MC = 1; e.g.
    SDP_RDMA D_SRC_DMA_CFG.SRC_RAM_TYPE): ``cv_mem`` (the secondary memory behind CVIF) for CV
    on a configuration with the secondary memory interface, else ``mem`` (the primary memory
    behind MCIF). ``cv_mem`` is None on a configuration without CVIF, whose engines ignore the
    field (NVIDIA's nv_small RTL has no CVIF path: every request goes to MCIF)."""
    return cv_mem if (cv_mem is not None and ram_type == 0) else mem
