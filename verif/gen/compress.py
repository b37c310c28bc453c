"""Weight compression into NVDLA's sparse format (format.rst "Sparse Compression option";
issue 34 item 3): what a user, or a generator, needs to program a layer with
D_WEIGHT_FORMAT=COMPRESSED.

:func:`compress_weights` takes the uncompressed weight bytes in NVDLA's layout (format.rst
"Weight Format": kernel groups back to back) and returns the three surfaces CDMA fetches:

* the compressed weights: the non-zero elements in order, packed, zero-filled to a multiple of
  128 bytes (D_WEIGHT_BYTES is its length);
* the WMB (weight mask bits): one bit per element, 1 for a non-zero element, little-endian bit
  order (bit ``i % 8`` of byte ``i // 8`` for element ``i``), one run through every kernel
  group, zero-filled to a multiple of 128 bytes (D_WMB_BYTES);
* the WGS (weight group sizes): per kernel group, the bytes of its non-zero elements, a
  little-endian 32-bit word each, zero-filled to a multiple of 128 bytes.

An element is ``elem_bytes`` bytes (1 for INT8, 2 for INT16 and FP16: "1 bit represents 2
bytes"); it counts as zero when all its bytes are 0 (an FP16 -0.0 is kept).
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CompressedWeights", "compress_weights"]


def _pad128(b: bytes) -> bytes:
    return b + bytes(-len(b) % 128)


@dataclass(frozen=True)
class CompressedWeights:
    """The three surfaces of compressed weights (bytes, each a multiple of 128 long) and the
    non-zero byte count of each kernel group (``group_bytes``, what WGS holds)."""
    weights: bytes
    wmb: bytes
    wgs: bytes
    group_bytes: tuple[int, ...]


def compress_weights(dense: bytes, group_elems: list[int] | tuple[int, ...],
                     elem_bytes: int = 1) -> CompressedWeights:
    """Compress ``dense`` (uncompressed weight bytes in NVDLA's layout) whose kernel groups
    hold ``group_elems[g]`` elements each, in memory order (a group of ``k`` kernels of R x S x
    C holds ``k*R*S*C`` elements; the last group may hold fewer kernels). Raises ValueError
    when the group sizes do not add up to ``len(dense) // elem_bytes`` or ``elem_bytes`` is not
    1 or 2."""
    if elem_bytes not in (1, 2):
        raise ValueError(f"elem_bytes={elem_bytes}: 1 (INT8) or 2 (INT16, FP16)")
    n = len(dense) // elem_bytes
    if len(dense) % elem_bytes or sum(group_elems) != n:
        raise ValueError(f"kernel groups of {sum(group_elems)} elements in all; the weights hold "
                         f"{len(dense)} bytes = {len(dense) / elem_bytes:g} elements")
    bits = bytearray(-(-n // 8))
    out = bytearray()
    sizes = []
    i = 0
    for count in group_elems:
        start = len(out)
        for _ in range(count):
            e = dense[i * elem_bytes:(i + 1) * elem_bytes]
            if any(e):
                bits[i // 8] |= 1 << (i % 8)
                out += e
            i += 1
        sizes.append(len(out) - start)
    wgs = b"".join(s.to_bytes(4, "little") for s in sizes)
    return CompressedWeights(_pad128(bytes(out)), _pad128(bytes(bits)), _pad128(wgs), tuple(sizes))
