"""Memory layouts of feature data for the model (format.rst "Feature Data Format").

A feature cube of W x H x C int8 elements is stored as ceil(C / atom) surfaces; each surface holds
``atom`` channels (cfg.memory_atomic: 8 on nv_small, 32 on nv_full) as lines of W atoms. Element
(w, h, c) lives at ``base + (c // atom) * surface_stride + h * line_stride + w * atom + c % atom``
(bytes). Cubes are numpy arrays of shape (C, H, W).

int16 and fp16 elements (``elem_bytes=2``, nv_full) take two bytes, little-endian, so an atom of
``atom`` bytes holds ``atom // 2`` channels (format.rst "Feature Data Format": a 32-byte atom
holds 32 int8 or 16 int16/fp16 elements): element (w, h, c) starts at ``base + (c // n) *
surface_stride + h * line_stride + w * atom + (c % n) * 2`` with ``n = atom // 2``.
"""
from __future__ import annotations

import warnings

import numpy as np

from verif.model.memory import Memory


class ModelConfigError(ValueError):
    """A register program NVIDIA's hardware cannot run (it would hang, or the configuration lacks
    the feature), or one outside what the model implements; the message names register and rule.

    Programs that merely break a documented programming-guide limitation but that NVIDIA's RTL
    runs to a defined result are computed as the RTL computes them, with a
    :class:`LimitationWarning` instead.
    """


class LimitationWarning(UserWarning):
    """A register program breaks a limitation documented in v1_ias_programming_guide.rst
    ("Limitation" sections) that NVIDIA's RTL nevertheless runs; the model computes what the RTL
    computes (the fact is cited where the warning is issued). Filter it with
    ``warnings.simplefilter("ignore", LimitationWarning)`` or make it an error with
    ``warnings.simplefilter("error", LimitationWarning)``."""


def warn_limitation(message: str, stacklevel: int = 3) -> None:
    """Issue a :class:`LimitationWarning` with ``message`` (register, value and rule)."""
    warnings.warn(message, LimitationWarning, stacklevel=stacklevel)


def cube_addresses(base: int, w: int, h: int, c: int, line_stride: int, surf_stride: int,
                   atom: int, elem_bytes: int = 1) -> np.ndarray:
    """Byte address of every element (its low byte), shape (C, H, W), int64; ``atom`` in bytes,
    ``elem_bytes`` 1 (int8) or 2 (int16/fp16: ``atom // 2`` channels per atom)."""
    cc = np.arange(c, dtype=np.int64)
    per_atom = atom // elem_bytes
    off_c = (cc // per_atom) * surf_stride + (cc % per_atom) * elem_bytes
    off_h = np.arange(h, dtype=np.int64) * line_stride
    off_w = np.arange(w, dtype=np.int64) * atom
    return base + off_c[:, None, None] + off_h[None, :, None] + off_w[None, None, :]


def read_cube(mem: Memory, base: int, w: int, h: int, c: int, line_stride: int, surf_stride: int,
              atom: int, elem_bytes: int = 1) -> np.ndarray:
    """Raw elements of a feature cube, shape (C, H, W): uint8 bytes (``.view(np.int8)`` for int8
    data) or, with ``elem_bytes=2``, little-endian uint16 words (``.view(np.int16)`` for int16,
    ``.view(np.float16)`` for fp16)."""
    a = cube_addresses(base, w, h, c, line_stride, surf_stride, atom, elem_bytes)
    if elem_bytes == 1:
        return mem.gather(a)
    return mem.gather(a).astype(np.uint16) | (mem.gather(a + 1).astype(np.uint16) << 8)


def write_cube(mem: Memory, cube: np.ndarray, base: int, line_stride: int, surf_stride: int,
               atom: int, elem_bytes: int = 1) -> None:
    """Write a (C, H, W) cube in feature layout: int8/uint8 values, or with ``elem_bytes=2`` the
    low 16 bits of each value (int16 values or fp16 bit patterns) little-endian. Bytes of a
    surface's last atom beyond C are left untouched (the hardware writes whole atoms; see
    callers when the pad bytes matter)."""
    c, h, w = cube.shape
    a = cube_addresses(base, w, h, c, line_stride, surf_stride, atom, elem_bytes)
    v = cube.astype(np.int64)
    mem.scatter(a, v & 0xFF)
    if elem_bytes == 2:
        mem.scatter(a + 1, (v >> 8) & 0xFF)


def saturate(x: np.ndarray, bits: int) -> np.ndarray:
    """Clamp to the signed range of ``bits`` bits (int64 in, int64 out)."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return np.clip(x, lo, hi)


def flying_cube(flying_input, w: int, h: int, c: int, cp: int, regs: str, source: str) -> np.ndarray:
    """An on-the-fly input cube (from the upstream unit) as (cp, h, w) int64, channels beyond
    what the upstream unit delivered zero. Raises ModelConfigError when the programmed W x H x C
    (registers ``regs``) does not match what ``source`` delivers."""
    fi = np.asarray(flying_input, dtype=np.int64)
    if fi.shape[1:] != (h, w) or fi.shape[0] < c:
        raise ModelConfigError(f"{regs} {w}x{h}x{c} do not match {source} "
                               f"{fi.shape[2]}x{fi.shape[1]}x{fi.shape[0]} (W x H x C)")
    x = np.zeros((cp, h, w), np.int64)
    n = min(cp, fi.shape[0])
    x[:n] = fi[:n]
    return x
