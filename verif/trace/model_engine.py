"""The ``model`` engine: the trace player's Engine on the numpy model (untimed)."""
from __future__ import annotations

from hdl.config import NvdlaConfig
from verif.mem import SparseMemory
from verif.model import Nvdla


class ModelEngine:
    """Engine protocol (verif/trace/player.py) over ``verif.model.Nvdla``. ``cycle`` is None.

    The model's memory is the shared sparse memory wrapped at ``cfg.mem_address_width`` bits
    (``address_width``), as the RTL's address adders wrap.
    """
    name = "model"

    def __init__(self, cfg: NvdlaConfig):
        self.address_width = cfg.mem_address_width
        self.dla = Nvdla(cfg, mem=SparseMemory(self.address_width))

    @property
    def cycle(self):
        return None

    async def mem_write(self, addr, data):
        self.dla.mem.write(addr, data)

    async def mem_fill(self, addr, size, value):
        self.dla.mem.fill(addr, size, value)

    async def mem_read(self, addr, size):
        return self.dla.mem.read(addr, size).tobytes()

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
