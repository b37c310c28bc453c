"""The ``model`` engine: the trace player's Engine on the numpy model (untimed)."""
from __future__ import annotations

from hdl.config import NvdlaConfig
from verif.mem import SparseMemory
from verif.model import Nvdla
from verif.trace.player import memory_of


class ModelEngine:
    """Engine protocol (verif/trace/player.py) over ``verif.model.Nvdla``. ``cycle`` is None.

    The model's memories are the shared sparse memory wrapped at ``cfg.mem_address_width`` bits
    (``address_width``), as the RTL's address adders wrap: the primary one (``pri_mem``) and,
    when cfg.secondary_memif, the secondary one (``sec_mem``).
    """
    name = "model"

    def __init__(self, cfg: NvdlaConfig):
        self.cfg = cfg
        self.address_width = cfg.mem_address_width
        self.dla = Nvdla(cfg, mem=SparseMemory(self.address_width),
                         cv_mem=SparseMemory(self.address_width) if cfg.secondary_memif else None)

    @property
    def cycle(self):
        return None

    def _mem(self, mem):
        return memory_of(mem, self.dla.mem, self.dla.cv_mem, self.cfg.name)

    async def mem_write(self, addr, data, mem="pri_mem"):
        self._mem(mem).write(addr, data)

    async def mem_fill(self, addr, size, value, mem="pri_mem"):
        self._mem(mem).fill(addr, size, value)

    async def mem_read(self, addr, size, mem="pri_mem"):
        return self._mem(mem).read(addr, size).tobytes()

    async def reg_write(self, addr, value):
        self.dla.write(addr, value)

    async def reg_read(self, addr):
        return self.dla.read(addr)

    async def wait_intr(self, max_cycles):
        # Untimed: whatever could run has run; an interrupt is either pending now or never comes.
        return self.dla.intr

    async def wait_cycles(self, n):
        return None

    async def busy_units(self):
        return self.dla.busy_units()
