"""The model's byte memory: the verification environment's one sparse memory (``verif.mem``).

``Memory(address_width=64)``: pages of numpy ``uint8`` created on first write, unwritten bytes
read 0, addresses wrapped at ``address_width`` bits as the RTL's address adders wrap them
(construct it with ``cfg.mem_address_width`` to model a configuration's address space).
API: ``read``/``write``/``fill``/``gather``/``scatter`` (see :class:`verif.mem.SparseMemory`).
"""
from __future__ import annotations

from verif.mem import PAGE, SparseMemory

Memory = SparseMemory

__all__ = ["Memory", "PAGE"]
