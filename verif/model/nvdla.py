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

CSB accesses are checked (``RegisterAccessError``): the register must exist in the register map
and in the configuration, an address must be 4-byte aligned, a value must be an integer in
0..2**32-1 (no silent masking). Memory addresses wrap at ``cfg.mem_address_width`` bits, as the
RTL's address adders wrap them.
"""
from __future__ import annotations

import numbers

from hdl.config import NV_SMALL, NvdlaConfig
from hdl.regmap import regmap_for
from verif.model.memory import Memory
from verif.model.regs import UnitRegs
from verif.model.formats import ModelConfigError

CONV_UNITS = ("CDMA", "CSC", "CMAC_A", "CMAC_B", "CACC")
# GLB S_INTR_STATUS field prefix of each unit that raises a done interrupt
INTR_NAME = {"SDP": "SDP", "CDP": "CDP", "PDP": "PDP", "BDMA": "BDMA", "RBK": "RUBIK",
             "CACC": "CACC"}
# GLB interrupt field prefixes of each unit of the configuration (CDMA raises two); NVIDIA's GLB
# (nv_small branch, vmod/nvdla/glb) has status flops only for the units compiled in, mask flops
# for those and for CDP and PDP in any case (only BDMA's and RUBIK's mask flops are under their
# NVDLA_*_ENABLE), and S_INTR_SET reads 0
INTR_PREFIXES = {**{u: (p,) for u, p in INTR_NAME.items()}, "CDMA": ("CDMA_DAT", "CDMA_WT")}
INTR_MASK_ALWAYS = ("CDP", "PDP")


class RegisterAccessError(ValueError):
    """A CSB access the model rejects; the message says which rule: unknown register name,
    unaligned address, no register at the address, unit not in the configuration, value out of
    0..2**32-1."""


class Nvdla:
    """The model of one NVDLA instance of configuration ``cfg``.

    ``write(reg, value)`` / ``read(reg)`` take a byte address (int) or a trace-style register
    name (``"NVDLA_SDP.D_OP_ENABLE_0"``); values are 32-bit unsigned ints. ``mem`` is the primary
    memory (``verif.model.memory.Memory``, ``cfg.mem_address_width`` bits unless ``mem`` is
    given), ``cv_mem`` the secondary one when cfg.secondary_memif (None otherwise); each DMA
    engine uses the one its ``*_RAM_TYPE`` field names (:func:`verif.model.memory.ram`). ``intr`` is the level of ``dla_intr``.

    Raises ``RegisterAccessError`` for a bad register or value, TypeError for a register that is
    neither int nor str or a value that is not an int, and
    ``verif.model.formats.ModelConfigError`` when a layer's registers break a rule of the
    programming guide.
    """

    def __init__(self, cfg: NvdlaConfig = NV_SMALL, mem: Memory | None = None,
                 cv_mem: Memory | None = None):
        from verif.model import bdma, cdp, conv, pdp, rubik, sdp   # unit models
        self.cfg = cfg
        self.mem = mem if mem is not None else Memory(address_width=cfg.mem_address_width)
        #: the secondary memory (behind CVIF) when cfg.secondary_memif, else None
        self.cv_mem = None
        if cfg.secondary_memif:
            self.cv_mem = cv_mem if cv_mem is not None else Memory(address_width=cfg.mem_address_width)
        #: the configuration's register map (v1 on nv_full, v2 otherwise: hdl.regmap.regmap_for)
        self.regmap = regmap_for(cfg)
        self.units = {u.name: UnitRegs(u) for u in self.regmap.units if u.name in cfg.units()}
        self.glb = self.units["GLB"]
        self.intr_status = 0
        self.layers_run = 0       # hardware layers executed (for tests and statistics)
        #: why SDP_RDMA's group of an earlier layer never completes (verif/model/sdp.py
        #: SdpCore._check): the next layer that needs SDP_RDMA hangs; None while it is not stuck
        self.sdp_rdma_wedged: str | None = None
        self.cdma = self.units["CDMA"]
        self.cdma.hw_fields["FLUSH_DONE"] = 1
        self.conv = conv.ConvCore(cfg, self.mem, self.cv_mem)
        self.sdp = sdp.SdpCore(cfg, self.mem, self.cv_mem)
        self.pdp = pdp.PdpCore(cfg, self.mem, self.cv_mem) if cfg.pdp else None
        self.cdp = cdp.CdpCore(cfg, self.mem, self.cv_mem) if cfg.cdp else None
        self.rubik = (rubik.RubikCore(self.mem, self.cv_mem, cfg.mem_address_width)
                      if cfg.rubik else None)
        self.bdma = (bdma.BdmaCore(self.mem, self.cv_mem, cfg.mem_address_width,
                                   lambda g: self._raise("BDMA", g)) if cfg.bdma else None)
        self._intr_reg = self.regmap.lookup("NVDLA_GLB.S_INTR_STATUS_0").reg
        self._intr_bits, self._intr_mask_bits = self._glb_intr_bits()

    # ---- CSB ----
    def _resolve(self, reg) -> tuple[UnitRegs, int]:
        """(unit registers, byte offset in the unit) of a register name or byte address.
        Raises RegisterAccessError, TypeError."""
        if isinstance(reg, str):
            try:
                ref = self.regmap.lookup(reg)
            except KeyError as e:
                raise RegisterAccessError(f"unknown register name: {e.args[0]}") from None
        elif isinstance(reg, numbers.Integral) and not isinstance(reg, bool):
            addr = int(reg)
            if addr % 4:
                raise RegisterAccessError(f"register address {addr:#x} is not 4-byte aligned")
            ref = self.regmap.at(addr)
            if ref is None:
                u = self.regmap.unit_at(addr) if addr >= 0 else None
                inside = f" (offset {addr - u.base:#x} of NVDLA_{u.name})" if u is not None else ""
                raise RegisterAccessError(f"no register at address {addr:#x}{inside}")
        else:
            raise TypeError(f"register must be a byte address (int) or a register name (str), "
                            f"got {type(reg).__name__} {reg!r}")
        if ref.unit.name not in self.units:
            raise RegisterAccessError(f"{ref.trace_name} ({ref.addr:#x}): unit {ref.unit.name} is "
                                      f"not in configuration {self.cfg.name}")
        return self.units[ref.unit.name], ref.reg.offset

    def write(self, reg, value: int) -> None:
        """CSB write (byte address or register name) of a 32-bit unsigned ``value``. May run
        hardware layers. Raises RegisterAccessError, TypeError (see the class)."""
        ur, off = self._resolve(reg)
        if not isinstance(value, numbers.Integral) or isinstance(value, bool):
            raise TypeError(f"value for {self._name(ur, off)} must be an int, "
                            f"got {type(value).__name__} {value!r}")
        value = int(value)
        if not 0 <= value <= 0xFFFFFFFF:
            raise RegisterAccessError(f"value {value:#x} for {self._name(ur, off)} is outside "
                                      "0..0xffffffff (32 bits)")
        unit = ur.unit.name
        if unit == "GLB":
            name = ur.by_offset[off].name
            if name == "S_INTR_STATUS":
                self.intr_status &= ~value
                return
            if name == "S_INTR_SET":
                self.intr_status |= value & self._intr_bits
                return
            if name == "S_INTR_MASK":
                self.glb.single[name] = value & self._intr_mask_bits
                return
        name = ur.write(off, value)
        core = {"SDP": self.sdp, "CDP": self.cdp, "PDP": self.pdp, "BDMA": self.bdma}.get(unit)
        if core is not None and hasattr(core, "on_write"):
            core.on_write(ur, name, value)
        if name == "D_OP_ENABLE":
            self._schedule()

    def read(self, reg) -> int:
        """CSB read (byte address or register name). Raises RegisterAccessError, TypeError."""
        ur, off = self._resolve(reg)
        unit = ur.unit.name
        r = ur.by_offset[off]
        if unit == "GLB" and r.name == "S_INTR_STATUS":
            return self.intr_status
        core = {"SDP": self.sdp, "CDP": self.cdp, "PDP": self.pdp, "BDMA": self.bdma}.get(unit)
        if core is not None and hasattr(core, "on_read"):
            v = core.on_read(ur, r.name)
            if v is not None:
                return v
        return ur.read(off)

    def _glb_intr_bits(self) -> tuple[int, int]:
        """(S_INTR_STATUS bits, S_INTR_MASK bits) that exist in this configuration: the fields
        of the units it has (INTR_PREFIXES), the mask also those of INTR_MASK_ALWAYS."""
        glb = self.regmap.unit("GLB")
        regs = {r.name: r for r in glb.registers}
        status = mask = 0
        for unit, prefixes in INTR_PREFIXES.items():
            for p in prefixes:
                for g in (0, 1):
                    if unit in self.units:
                        status |= 1 << regs["S_INTR_STATUS"].field(f"{p}_DONE_STATUS{g}").lsb
                    if unit in self.units or unit in INTR_MASK_ALWAYS:
                        mask |= 1 << regs["S_INTR_MASK"].field(f"{p}_DONE_MASK{g}").lsb
        return status, mask

    @staticmethod
    def _name(ur: UnitRegs, off: int) -> str:
        return f"NVDLA_{ur.unit.name}.{ur.by_offset[off].name}_0"

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
            progress = self._try_sdp() or self._try_pdp() or self._try_cdp() or self._try_rbk()

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
        if need_rdma and self.sdp_rdma_wedged:
            # SDP_RDMA's group of an earlier layer never completed (verif/model/sdp.py _check):
            # NVIDIA's SDP_RDMA never moves on to this layer's group, so MRDMA / the operand
            # DMAs never start and the layer never finishes
            raise ModelConfigError(
                f"SDP layer {self.layers_run}: SDP_RDMA is still busy with an earlier layer whose "
                f"group never completes ({self.sdp_rdma_wedged}): this layer's SDP_RDMA group "
                f"never starts and the layer hangs")
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
            if self.sdp.rdma_wedge:
                self.sdp_rdma_wedged = self.sdp.rdma_wedge     # its group stays busy
            else:
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

    def _try_rbk(self) -> bool:
        if self.rubik is None or not self._armed("RBK"):
            return False
        self.rubik.run(self.units["RBK"].view())
        self._raise("RUBIK", self.units["RBK"].complete())
        self.layers_run += 1
        return True

    def busy_units(self) -> list[str]:
        """Units with an enabled group that has not run (waiting for a partner unit)."""
        busy = [n for n, u in self.units.items() if any(u.enabled)]
        if self.bdma is not None and (any(self.bdma.busy) or self.bdma.queue):
            busy.append("BDMA")
        return busy
