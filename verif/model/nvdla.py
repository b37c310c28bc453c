"""Register-level functional model of NVDLA: the ``model`` engine of the trace player.

It holds every unit's registers with the real ping-pong groups and producer/consumer pointers
(verif/model/regs.py), executes a hardware layer as soon as every unit the layer needs has its
consumer group enabled (v1_hwarch.rst "Ping-pong synchronization"; a pipeline is the set of units
of one hardware layer: CDMA+CSC+CMAC_A+CMAC_B+CACC feed SDP on the fly, SDP may feed PDP on the
fly, SDP_RDMA/PDP_RDMA/CDP_RDMA read memory for their unit), then completes each unit's group and
raises its GLB done interrupt. Execution is untimed: a layer finishes within the CSB write that
starts it.

Example::

    from hdl.config import NV_SMALL
    from verif.model import Nvdla
    dla = Nvdla(NV_SMALL)
    dla.mem.write(0x80000000, data)
    dla.write("NVDLA_SDP.D_DATA_CUBE_WIDTH_0", 7)      # or dla.write(0x903c, 7)
    ...
    dla.write("NVDLA_SDP.D_OP_ENABLE_0", 1)
    assert dla.intr                                     # GLB done interrupt pending
"""
from __future__ import annotations

from hdl.config import NV_SMALL, NvdlaConfig
from hdl.regmap import REGMAP, UNIT_SPAN, decode
from verif.model.memory import Memory
from verif.model.regs import UnitRegs

CONV_UNITS = ("CDMA", "CSC", "CMAC_A", "CMAC_B", "CACC")
# GLB S_INTR_STATUS field prefix of each unit that raises a done interrupt
INTR_NAME = {"SDP": "SDP", "CDP": "CDP", "PDP": "PDP", "BDMA": "BDMA", "RBK": "RUBIK",
             "CACC": "CACC"}


class Nvdla:
    """The model of one NVDLA instance of configuration ``cfg``.

    ``write(reg, value)`` / ``read(reg)`` take a byte address or a trace-style register name.
    ``mem`` is the primary memory (``verif.model.memory.Memory``). ``intr`` is the level of
    ``dla_intr``. Raises ``verif.model.formats.ModelConfigError`` when a layer's registers break a
    rule of the programming guide.
    """

    def __init__(self, cfg: NvdlaConfig = NV_SMALL, mem: Memory | None = None):
        from verif.model import cdp, conv, pdp, sdp   # unit models
        self.cfg = cfg
        self.mem = mem if mem is not None else Memory()
        self.units = {u.name: UnitRegs(u) for u in REGMAP.units if u.name in cfg.units()}
        self.glb = self.units["GLB"]
        self.intr_status = 0
        self.layers_run = 0
        self.cdma = self.units["CDMA"]
        self.cdma.hw_fields["FLUSH_DONE"] = 1
        self.conv = conv.ConvCore(cfg, self.mem)
        self.sdp = sdp.SdpCore(cfg, self.mem)
        self.pdp = pdp.PdpCore(cfg, self.mem) if cfg.pdp else None
        self.cdp = cdp.CdpCore(cfg, self.mem) if cfg.cdp else None
        self._intr_reg = REGMAP.lookup("NVDLA_GLB.S_INTR_STATUS_0").reg

    # ---- CSB ----
    def _resolve(self, reg) -> tuple[UnitRegs | None, int, int]:
        addr = REGMAP.lookup(reg).addr if isinstance(reg, str) else int(reg)
        u = REGMAP.unit_at(addr)
        if u is None or u.name not in self.units:
            return None, addr, 0
        return self.units[u.name], addr, addr - u.base

    def write(self, reg, value: int) -> None:
        """CSB write (byte address or register name). May run hardware layers."""
        ur, addr, off = self._resolve(reg)
        if ur is None:
            return
        value &= 0xFFFFFFFF
        unit = ur.unit.name
        if unit == "GLB":
            name = ur.by_offset.get(off).name if off in ur.by_offset else None
            if name == "S_INTR_STATUS":
                self.intr_status &= ~value
                return
            if name == "S_INTR_SET":
                self.intr_status |= value & self._intr_reg.write_mask
                return
        name = ur.write(off, value)
        if name is None:
            return
        core = {"SDP": self.sdp, "CDP": self.cdp, "PDP": self.pdp}.get(unit)
        if core is not None and hasattr(core, "on_write"):
            core.on_write(ur, name, value)
        if name == "D_OP_ENABLE":
            self._schedule()

    def read(self, reg) -> int:
        """CSB read (byte address or register name)."""
        ur, addr, off = self._resolve(reg)
        if ur is None:
            return 0
        unit = ur.unit.name
        r = ur.by_offset.get(off)
        if unit == "GLB" and r is not None and r.name == "S_INTR_STATUS":
            return self.intr_status
        core = {"SDP": self.sdp, "CDP": self.cdp, "PDP": self.pdp}.get(unit)
        if core is not None and r is not None and hasattr(core, "on_read"):
            v = core.on_read(ur, r.name)
            if v is not None:
                return v
        return ur.read(off)

    @property
    def intr_mask(self) -> int:
        return self.glb.single["S_INTR_MASK"]

    @property
    def intr(self) -> bool:
        """``dla_intr``: a done interrupt is pending and not masked."""
        return bool(self.intr_status & ~self.intr_mask)

    # ---- sequencing ----
    def _raise(self, prefix: str, group: int) -> None:
        f = self._intr_reg.field(f"{prefix}_DONE_STATUS{group}")
        self.intr_status |= 1 << f.lsb

    def _armed(self, unit: str) -> bool:
        u = self.units.get(unit)
        return u is not None and u.armed

    def _schedule(self) -> None:
        """Run every hardware layer whose units are all armed, until none is."""
        progress = True
        while progress:
            progress = self._try_sdp() or self._try_pdp() or self._try_cdp()

    def _sdp_needs_rdma(self, sdp) -> bool:
        if sdp.f("FLYING_MODE") == 0:       # OFF: input cube from memory through MRDMA
            return True
        return self.sdp.needs_memory_operands(sdp)

    def _try_sdp(self) -> bool:
        if not self._armed("SDP"):
            return False
        sdp_u, rdma_u = self.units["SDP"], self.units["SDP_RDMA"]
        sdp = sdp_u.view()
        flying = sdp.f("FLYING_MODE") == 1
        need_rdma = self._sdp_needs_rdma(sdp)
        if need_rdma and not rdma_u.armed:
            return False
        if flying and not all(self._armed(u) for u in CONV_UNITS):
            return False
        to_pdp = sdp.f("OUTPUT_DST") == 1
        if to_pdp and not self._armed("PDP"):
            return False
        conv_out = None
        if flying:
            v = {u: self.units[u].view() for u in CONV_UNITS}
            conv_out = self.conv.run(v["CDMA"], v["CSC"], v["CMAC_A"], v["CACC"])
        out = self.sdp.run(rdma_u.view() if need_rdma else None, sdp, conv_out)
        if to_pdp:
            pdp_u = self.units["PDP"]
            self.pdp.run(None, pdp_u.view(), out)
        # complete every unit of the hardware layer and raise its done interrupt
        if flying:
            cdma_g = self.units["CDMA"].complete()
            self._raise("CDMA_DAT", cdma_g)
            self._raise("CDMA_WT", cdma_g)
            for u in ("CSC", "CMAC_A", "CMAC_B"):
                self.units[u].complete()
            self._raise("CACC", self.units["CACC"].complete())
        if need_rdma:
            rdma_u.complete()
        self._raise("SDP", sdp_u.complete())
        if to_pdp:
            self._raise("PDP", self.units["PDP"].complete())
        self.layers_run += 1
        return True

    def _try_pdp(self) -> bool:
        if self.pdp is None or not self._armed("PDP"):
            return False
        pdp = self.units["PDP"].view()
        if pdp.f("FLYING_MODE") == 0:      # ON_FLYING: runs with the SDP layer feeding it
            return False
        if not self._armed("PDP_RDMA"):
            return False
        self.pdp.run(self.units["PDP_RDMA"].view(), pdp, None)
        self.units["PDP_RDMA"].complete()
        self._raise("PDP", self.units["PDP"].complete())
        self.layers_run += 1
        return True

    def _try_cdp(self) -> bool:
        if self.cdp is None or not (self._armed("CDP") and self._armed("CDP_RDMA")):
            return False
        self.cdp.run(self.units["CDP_RDMA"].view(), self.units["CDP"].view())
        self.units["CDP_RDMA"].complete()
        self._raise("CDP", self.units["CDP"].complete())
        self.layers_run += 1
        return True

    def busy_units(self) -> list[str]:
        """Units with an enabled group that has not run (waiting for a partner unit)."""
        return [n for n, u in self.units.items() if any(u.enabled)]
