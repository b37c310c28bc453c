"""RUBIK model: contract, split and merge of NVIDIA's nvdlav1 RUBIK (unit description "Rubik",
programming guide "Rubik programming"), as NVIDIA's RTL moves the bytes (vmod/nvdla/rubik; facts
read from it, not its code).

Every mode moves whole 32-byte atoms. Element size ``b``: 1 byte for IN_PRECISION INT8 (``A`` = 32
elements per atom), 2 bytes for INT16 and FP16 (``A`` = 16; FP16 is moved as its bytes). Addresses
and strides are bytes (their registers keep bits 31:5); ``W``, ``H`` = DATAIN_WIDTH/HEIGHT + 1,
``Cin`` = DATAIN_CHANNEL + 1, ``Cout`` = DATAOUT_CHANNEL + 1, ``G(n)`` = ceil(n / A).

* **Contract** (deconvolution's last phase): for ``sx``, ``sy`` = DECONV_X/Y_STRIDE + 1, every
  channel group ``g < G(Cout)``, ``h < H``, ``dy < sy``, ``w < W``, ``dx < sx`` one atom, unchanged:
  ``dst = OA + g*OSS + (h*sy + dy)*OLS + (w*sx + dx)*32`` from
  ``src = IA + g*ISS + h*ILS + (dy*sx + dx)*CONTRACT_STRIDE_0 + w*32``. DATAIN_CHANNEL and
  CONTRACT_STRIDE_1 are not used (NVIDIA's C model differs there; its RTL wins).
* **Split**: plane ``c < Cin``: ``OA + c*OPS + h*OLS + w*b`` takes element ``c`` of pixel (w, h) of
  the feature cube ``IA + (c//A)*ISS + h*ILS + w*32``; each plane line is written up to its next
  32-byte boundary, the bytes past ``W*b`` as 0.
* **Merge**: the inverse: atom ``OA + g*OSS + h*OLS + w*32`` holds element (w, h) of planes
  ``g*A .. g*A + A - 1`` (``IA + c*IPS + h*ILS + w*b``); channels past ``Cin`` are written 0.

Programs NVIDIA's RTL cannot run to a defined result raise :class:`ModelConfigError`:
RUBIK_MODE 3 or IN_PRECISION 3; split/merge with ``G(Cout) != G(Cin)`` (its read and write loops
disagree: a hang or stale data); contract with ``sx <= 8`` and ``W*sx > 8192`` (a 13-bit write
size); input and output bytes that meet (reads run ahead of writes).
"""
from __future__ import annotations

import numpy as np

from verif.model.formats import ModelConfigError
from verif.model.memory import Memory, ram

ATOM = 32
MODES = {0: "contract", 1: "split", 2: "merge"}
#: contract write requests are whole output lines up to this many atoms when sx <= 8
CONTRACT_LINE_LIMIT = 8192


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


class RubikCore:
    """The RUBIK of one model instance (``mem``/``cv_mem``: primary and secondary memory, None
    without CVIF). :meth:`run` executes the consumer group's layer."""

    def __init__(self, mem: Memory, cv_mem: Memory | None, address_width: int):
        self.mem, self.cv_mem = mem, cv_mem
        self.mask = (1 << address_width) - 1

    def run(self, v) -> None:
        """One layer from ``v`` (the RBK unit's ``GroupView``). Raises ModelConfigError."""
        mode, prec = v.f("RUBIK_MODE"), v.f("IN_PRECISION")
        if mode not in MODES:
            raise ModelConfigError(f"RBK D_MISC_CFG.RUBIK_MODE = {mode}: not CONTRACT, SPLIT or "
                                   "MERGE (NVIDIA's RTL selects no consistent mode)")
        if prec == 3:
            raise ModelConfigError("RBK D_MISC_CFG.IN_PRECISION = 3 is not INT8, INT16 or FP16")
        b = 1 if prec == 0 else 2
        A = ATOM // b
        W, H = v.f("DATAIN_WIDTH") + 1, v.f("DATAIN_HEIGHT") + 1
        cin, cout = v.f("DATAIN_CHANNEL") + 1, v.f("DATAOUT_CHANNEL") + 1

        def addr(high: str, low: str) -> int:
            return ((v.reg(high) << 32) | (v.reg(low) & ~(ATOM - 1))) & self.mask

        def stride(reg: str) -> int:
            return v.reg(reg) & ~(ATOM - 1)
        ia, oa = addr("D_DAIN_ADDR_HIGH", "D_DAIN_ADDR_LOW"), addr("D_DAOUT_ADDR_HIGH", "D_DAOUT_ADDR_LOW")
        src = ram(self.mem, self.cv_mem, v.f("DATAIN_RAM_TYPE"))
        dst = ram(self.mem, self.cv_mem, v.f("DATAOUT_RAM_TYPE"))
        ils, iss, ips = stride("D_DAIN_LINE_STRIDE"), stride("D_DAIN_SURF_STRIDE"), stride("D_DAIN_PLANAR_STRIDE")
        ols, oss, ops = stride("D_DAOUT_LINE_STRIDE"), stride("D_DAOUT_SURF_STRIDE"), stride("D_DAOUT_PLANAR_STRIDE")
        u64 = np.uint64
        if MODES[mode] == "contract":
            sx, sy = v.f("DECONV_X_STRIDE") + 1, v.f("DECONV_Y_STRIDE") + 1
            cs0 = stride("D_CONTRACT_STRIDE_0")
            if sx <= 8 and W * sx > CONTRACT_LINE_LIMIT:
                raise ModelConfigError(
                    f"RBK contract: DATAIN_WIDTH + 1 = {W} times DECONV_X_STRIDE + 1 = {sx} is "
                    f"{W * sx} atoms per output line, over NVIDIA's 13-bit write size ({CONTRACT_LINE_LIMIT})")
            g, h, dy, w, dx = np.meshgrid(*(np.arange(n, dtype=u64) for n in (_ceil(cout, A), H, sy, W, sx)),
                                          indexing="ij")
            s_atoms = (u64(ia) + g * u64(iss) + h * u64(ils) + (dy * u64(sx) + dx) * u64(cs0) + w * u64(ATOM)).ravel()
            d_atoms = (u64(oa) + g * u64(oss) + (h * u64(sy) + dy) * u64(ols) + (w * u64(sx) + dx) * u64(ATOM)).ravel()
            offs = np.arange(ATOM, dtype=u64)
            s_bytes = (s_atoms[:, None] + offs).ravel() & u64(self.mask)
            d_bytes = (d_atoms[:, None] + offs).ravel() & u64(self.mask)
            self._check_apart(src, dst, s_bytes, d_bytes)
            dst.scatter(d_bytes, src.gather(s_bytes))
            return
        if _ceil(cout, A) != _ceil(cin, A):
            raise ModelConfigError(
                f"RBK {MODES[mode]}: DATAIN_CHANNEL + 1 = {cin} and DATAOUT_CHANNEL + 1 = {cout} are "
                f"{_ceil(cin, A)} and {_ceil(cout, A)} atoms of channels: NVIDIA's read and write "
                "loops disagree (a hang, or stale data for the next layer); program them equal")
        line_atoms = _ceil(W * b, ATOM)          # one plane line, whole atoms
        c = np.arange(cin, dtype=u64)[:, None, None, None]
        hh = np.arange(H, dtype=u64)[None, :, None, None]
        ww = np.arange(W, dtype=u64)[None, None, :, None]
        k = np.arange(b, dtype=u64)[None, None, None, :]
        feat = u64(ia if mode == 1 else oa) + (c // u64(A)) * u64(iss if mode == 1 else oss) \
            + hh * u64(ils if mode == 1 else ols) + ww * u64(ATOM) + (c % u64(A)) * u64(b) + k
        plane = u64(oa if mode == 1 else ia) + c * u64(ops if mode == 1 else ips) \
            + hh * u64(ols if mode == 1 else ils) + ww * u64(b) + k
        feat, plane = feat.ravel() & u64(self.mask), plane.ravel() & u64(self.mask)
        if mode == 1:      # split: planes, each line's tail to the atom boundary written 0
            tail_n = line_atoms * ATOM - W * b
            tails = (u64(oa) + np.arange(cin, dtype=u64)[:, None, None] * u64(ops)
                     + np.arange(H, dtype=u64)[None, :, None] * u64(ols) + u64(W * b)
                     + np.arange(tail_n, dtype=u64)[None, None, :]).ravel() & u64(self.mask)
            self._check_apart(src, dst, feat, np.concatenate([plane, tails]))
            vals = src.gather(feat)
            dst.scatter(plane, vals)
            if tails.size:
                dst.scatter(tails, np.zeros(tails.size, np.uint8))
        else:              # merge: feature atoms, channels past Cin written 0
            groups = _ceil(cin, A)
            gg = np.arange(groups, dtype=u64)[:, None, None, None]
            pad = np.arange(ATOM, dtype=u64)[None, None, None, :]
            atoms = (u64(oa) + gg * u64(oss) + hh * u64(ols) + ww * u64(ATOM) + pad).ravel() & u64(self.mask)
            self._check_apart(src, dst, plane, atoms)
            dst.scatter(atoms, np.zeros(atoms.size, np.uint8))
            dst.scatter(feat, src.gather(plane))

    @staticmethod
    def _check_apart(src: Memory, dst: Memory, reads: np.ndarray, writes: np.ndarray) -> None:
        """ModelConfigError when the layer writes a byte it reads (in the same memory): NVIDIA's
        RUBIK reads ahead of its writes, so the result would depend on timing."""
        if src is not dst:
            return
        if np.intersect1d(reads, writes).size:
            raise ModelConfigError("RBK: the output meets the input (the same bytes read and "
                                   "written); NVIDIA's RUBIK reads ahead of its writes, so the "
                                   "result depends on timing")
