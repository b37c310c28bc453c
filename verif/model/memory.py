"""Byte-addressed sparse memory for the model (DRAM behind MCIF, and CVSRAM when configured).

Pages of ``PAGE`` bytes are numpy uint8 arrays created on first write; unwritten bytes read 0.
"""
from __future__ import annotations

import numpy as np

PAGE = 1 << 20


class Memory:
    """Sparse byte memory with a 64-bit address space.

    ``read(addr, n)`` returns a fresh ``np.uint8`` array of n bytes; ``write(addr, data)`` takes
    bytes or any uint8-convertible array. ``gather(addrs)`` / ``scatter(addrs, values)`` read and
    write many single bytes at once (vectorised; addresses as an int64 array).
    """

    def __init__(self):
        self.pages: dict[int, np.ndarray] = {}

    def _page(self, index: int) -> np.ndarray:
        p = self.pages.get(index)
        if p is None:
            p = self.pages[index] = np.zeros(PAGE, np.uint8)
        return p

    def write(self, addr: int, data) -> None:
        buf = np.frombuffer(bytes(data), np.uint8) if isinstance(data, (bytes, bytearray)) \
            else np.asarray(data, dtype=np.uint8).ravel()
        pos = 0
        while pos < len(buf):
            a = addr + pos
            off = a % PAGE
            n = min(PAGE - off, len(buf) - pos)
            self._page(a // PAGE)[off:off + n] = buf[pos:pos + n]
            pos += n

    def fill(self, addr: int, size: int, value: int = 0) -> None:
        pos = 0
        while pos < size:
            a = addr + pos
            off = a % PAGE
            n = min(PAGE - off, size - pos)
            if value != 0 or a // PAGE in self.pages:    # an absent page already reads 0
                self._page(a // PAGE)[off:off + n] = value
            pos += n

    def read(self, addr: int, size: int) -> np.ndarray:
        out = np.zeros(size, np.uint8)
        pos = 0
        while pos < size:
            a = addr + pos
            off = a % PAGE
            n = min(PAGE - off, size - pos)
            p = self.pages.get(a // PAGE)
            if p is not None:
                out[pos:pos + n] = p[off:off + n]
            pos += n
        return out

    def gather(self, addrs) -> np.ndarray:
        """Bytes at many addresses (any shape); result has the same shape, dtype uint8."""
        addrs = np.asarray(addrs, dtype=np.int64)
        if addrs.size == 0:
            return np.zeros(addrs.shape, np.uint8)
        lo, hi = int(addrs.min()), int(addrs.max())
        return self.read(lo, hi - lo + 1)[addrs - lo]

    def scatter(self, addrs, values) -> None:
        """Write bytes ``values`` at ``addrs`` (same shape). Later duplicates win."""
        addrs = np.asarray(addrs, dtype=np.int64).ravel()
        if addrs.size == 0:
            return
        values = np.asarray(values).astype(np.uint8).ravel()
        lo, hi = int(addrs.min()), int(addrs.max())
        buf = self.read(lo, hi - lo + 1)
        buf[addrs - lo] = values
        # write back only the touched span
        self.write(lo, buf)
