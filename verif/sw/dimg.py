"""NVIDIA's ``.dimg`` image files (the runtime's output, ``o_000000.dimg`` in its goldens): read
the header and find the first element that differs from a golden image.

Layout (umd/apps/runtime/DlaImage.cpp ``NvDlaImage::serialize``, observed on the goldens):
``DIMG``, a u32 version, the metadata ``NvDlaImage::Metadata`` as seven little-endian u32
(surface format, width, height, channel, line stride, surface stride, size), then the elements
channel by channel, line by line, pixel by pixel (``packData``), ``bpe`` bytes each.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

HEADER = struct.Struct("<4sI7I")


class DimgError(ValueError):
    """Not a ``.dimg`` image (bad magic, truncated)."""


@dataclass
class Dimg:
    """A parsed image: format code, width, height, channel, strides, size, and ``data`` (the
    packed elements, channel-major)."""
    version: int
    fmt: int
    width: int
    height: int
    channel: int
    line_stride: int
    surface_stride: int
    size: int
    data: bytes

    @property
    def bpe(self) -> int:
        """Bytes per element (from the data length)."""
        n = self.width * self.height * self.channel
        return len(self.data) // n if n else 0

    def describe(self) -> str:
        """``WxHxC format F, N byte(s) per element``."""
        return (f"{self.width}x{self.height}x{self.channel} format {self.fmt:#x}, {self.bpe} "
                f"byte(s) per element")


def parse(blob: bytes) -> Dimg:
    """Parse ``.dimg`` bytes. Raises DimgError."""
    if len(blob) < HEADER.size:
        raise DimgError(f"{len(blob)} bytes: shorter than the {HEADER.size}-byte header")
    magic, version, *meta = HEADER.unpack_from(blob)
    if magic != b"DIMG":
        raise DimgError(f"magic {magic!r}, not b'DIMG'")
    return Dimg(version, *meta, data=blob[HEADER.size:])


def first_difference(got: bytes, golden: bytes) -> str | None:
    """One line naming the first element of ``got`` that differs from ``golden`` (as w, h, c and
    the two values), the header field that differs, or None when the images are equal."""
    if got == golden:
        return None
    try:
        g, e = parse(got), parse(golden)
    except DimgError as x:
        return f"not comparable as images: {x}"
    for name in ("version", "fmt", "width", "height", "channel", "line_stride",
                 "surface_stride", "size"):
        if getattr(g, name) != getattr(e, name):
            return f"header field {name}: {getattr(g, name)} != golden {getattr(e, name)}"
    if len(g.data) != len(e.data):
        return f"{len(g.data)} data bytes != golden {len(e.data)}"
    bpe = e.bpe or 1
    diff = next(i for i in range(len(e.data)) if g.data[i] != e.data[i])
    k = diff // bpe
    w, h, c = k % e.width, (k // e.width) % e.height, k // (e.width * e.height)
    ge = g.data[k * bpe:(k + 1) * bpe][::-1].hex()
    ee = e.data[k * bpe:(k + 1) * bpe][::-1].hex()
    n_bad = sum(1 for i in range(0, len(e.data), bpe) if g.data[i:i + bpe] != e.data[i:i + bpe])
    return (f"first wrong element w={w} h={h} c={c}: 0x{ge} != golden 0x{ee} "
            f"({n_bad} of {len(e.data) // bpe} elements differ; image {e.describe()})")
