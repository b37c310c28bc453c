"""The one sparse byte memory of the verification environment.

Used by the numpy model (``verif.model``: DRAM behind MCIF, CV SRAM) and by both simulated
engines (the AXI responder of ``verif.axi_slave`` serves it to the DUT). Pages of ``PAGE`` bytes
are numpy ``uint8`` arrays created on first write; never-written bytes read 0.

Addresses wrap at the memory's address width exactly as the RTL's address adders do: byte
``a`` is stored at ``a & (2**address_width - 1)``, so a region that runs past the top of the
address space continues at address 0 (an input cube straddling 4 GiB on a 32-bit configuration
reads the same bytes on the model as on the RTL).
"""
from __future__ import annotations

import numpy as np

PAGE_BITS = 20
PAGE = 1 << PAGE_BITS          # bytes per page
_OFF = PAGE - 1
#: a gather/scatter whose (wrapped) addresses span at most this many bytes copies the span
#: once; a wider one (e.g. across the wrap) is done page by page
_SPAN_LIMIT = 64 * PAGE


class SparseMemory:
    """Sparse byte memory of ``2**address_width`` bytes (``address_width`` in bits, 12..64).

    ``read(addr, n)`` returns a fresh ``np.uint8`` array of n bytes; ``write(addr, data)`` takes
    bytes or any uint8-convertible array; ``fill(addr, size, value)`` sets ``size`` bytes.
    ``gather(addrs)`` / ``scatter(addrs, values)`` read and write many single bytes at once
    (vectorised; addresses as an integer array of any shape). ``read_word``/``write_word`` move
    one aligned AXI beat (``nbytes`` bytes, little-endian int, byte strobes).
    Every address is taken modulo ``2**address_width``. Raises ValueError for an address width
    outside 12..64 or a negative size.
    """

    def __init__(self, address_width: int = 64):
        if not 12 <= int(address_width) <= 64:
            raise ValueError(f"address_width={address_width}: must be 12..64 bits")
        self.address_width = int(address_width)
        self.mask = (1 << self.address_width) - 1
        self.pages: dict[int, np.ndarray] = {}

    # ---- helpers -----------------------------------------------------------------------------
    def _page(self, index: int) -> np.ndarray:
        p = self.pages.get(index)
        if p is None:
            p = self.pages[index] = np.zeros(PAGE, np.uint8)
        return p

    def _chunks(self, addr: int, size: int):
        """(page index, page offset, position in the region, length) for each piece of the
        region ``addr``..``addr+size-1`` (wrapped); a piece never crosses a page or the wrap."""
        if size < 0:
            raise ValueError(f"negative size {size}")
        mask, pos = self.mask, 0
        while pos < size:
            a = (addr + pos) & mask
            off = a & _OFF
            n = min(PAGE - off, size - pos, mask - a + 1)
            yield a >> PAGE_BITS, off, pos, n
            pos += n

    # ---- block access --------------------------------------------------------------------------
    def write(self, addr: int, data) -> None:
        buf = np.frombuffer(bytes(data), np.uint8) if isinstance(data, (bytes, bytearray, memoryview)) \
            else np.asarray(data, dtype=np.uint8).ravel()
        for pn, off, pos, n in self._chunks(addr, len(buf)):
            self._page(pn)[off:off + n] = buf[pos:pos + n]

    def fill(self, addr: int, size: int, value: int = 0) -> None:
        for pn, off, _, n in self._chunks(addr, size):
            if value == 0 and n == PAGE:
                self.pages.pop(pn, None)                 # an absent page reads 0
            elif value != 0 or pn in self.pages:
                self._page(pn)[off:off + n] = value

    def read(self, addr: int, size: int) -> np.ndarray:
        out = np.zeros(size, np.uint8)
        for pn, off, pos, n in self._chunks(addr, size):
            p = self.pages.get(pn)
            if p is not None:
                out[pos:pos + n] = p[off:off + n]
        return out

    def read_bytes(self, addr: int, size: int) -> bytes:
        """``read`` as ``bytes``."""
        return self.read(addr, size).tobytes()

    # ---- AXI beats -------------------------------------------------------------------------------
    def read_word(self, addr: int, nbytes: int) -> int:
        """Little-endian word of ``nbytes`` bytes at ``addr`` (aligned to ``nbytes``, a power of
        two up to the page size, so within one page)."""
        a = addr & self.mask
        p = self.pages.get(a >> PAGE_BITS)
        if p is None:
            return 0
        po = a & _OFF
        return int.from_bytes(p[po:po + nbytes].tobytes(), "little")

    def write_word(self, addr: int, nbytes: int, value: int, strb: int) -> None:
        """Write the bytes of ``value`` (little-endian, ``nbytes``) whose bit in ``strb`` is 1, at
        ``addr`` aligned to ``nbytes``."""
        a = addr & self.mask
        p = self._page(a >> PAGE_BITS)
        po = a & _OFF
        data = np.frombuffer(value.to_bytes(nbytes, "little"), np.uint8)
        if strb == (1 << nbytes) - 1:
            p[po:po + nbytes] = data
        else:
            keep = np.array([(strb >> i) & 1 for i in range(nbytes)], bool)
            p[po:po + nbytes][keep] = data[keep]

    # ---- many single bytes ---------------------------------------------------------------------
    def _wrapped(self, addrs) -> np.ndarray:
        a = np.asarray(addrs)
        if self.address_width >= 63:
            return a.astype(np.int64, copy=False) if a.dtype != np.uint64 else a
        return a.astype(np.int64, copy=False) & np.int64(self.mask)

    def _by_page(self, flat: np.ndarray):
        """Yield (page index, indices into ``flat``) grouping ``flat`` by page (sorted once)."""
        pn = flat >> PAGE_BITS
        order = np.argsort(pn, kind="stable")
        spn = pn[order]
        cuts = np.flatnonzero(np.diff(spn)) + 1
        starts = np.concatenate(([0], cuts))
        ends = np.concatenate((cuts, [len(spn)]))
        for s, e in zip(starts, ends):
            yield int(spn[s]), order[s:e]

    def gather(self, addrs) -> np.ndarray:
        """Bytes at many addresses (any shape); result has the same shape, dtype uint8."""
        a = self._wrapped(addrs)
        if a.size == 0:
            return np.zeros(a.shape, np.uint8)
        lo, hi = int(a.min()), int(a.max())
        if hi - lo < _SPAN_LIMIT:
            return self.read(lo, hi - lo + 1)[a - lo]
        flat = a.ravel()
        out = np.zeros(flat.shape, np.uint8)
        for pn, idx in self._by_page(flat):
            p = self.pages.get(pn)
            if p is not None:
                out[idx] = p[flat[idx] & _OFF]
        return out.reshape(a.shape)

    def scatter(self, addrs, values) -> None:
        """Write bytes ``values`` at ``addrs`` (same number of elements). Later duplicates win."""
        a = self._wrapped(addrs).ravel()
        if a.size == 0:
            return
        values = np.asarray(values).astype(np.uint8).ravel()
        lo, hi = int(a.min()), int(a.max())
        if hi - lo < _SPAN_LIMIT:
            buf = self.read(lo, hi - lo + 1)
            buf[a - lo] = values
            self.write(lo, buf)          # write back only the touched span
            return
        for pn, idx in self._by_page(a):   # stable sort keeps "later duplicates win"
            self._page(pn)[a[idx] & _OFF] = values[idx]
