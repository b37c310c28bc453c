"""verif/gen/compress.py (format.rst "Sparse Compression option") against a plain re-reading
of the three surfaces: element by element, the WMB bit says zero or the next packed element;
WGS holds each kernel group's packed bytes; every surface is zero-filled to 128 bytes."""
from __future__ import annotations

import random

import pytest

from verif.gen.compress import compress_weights


def expand(weights: bytes, wmb: bytes, n: int, eb: int) -> bytes:
    out, j = bytearray(), 0
    for i in range(n):
        if wmb[i // 8] >> (i % 8) & 1:
            out += weights[j:j + eb]
            j += eb
        else:
            out += bytes(eb)
    return bytes(out)


@pytest.mark.parametrize("eb", [1, 2])
@pytest.mark.parametrize("seed", range(6))
def test_round_trip_and_group_sizes(eb, seed):
    rng = random.Random(f"{eb}-{seed}")
    groups = [rng.randint(1, 700) for _ in range(rng.randint(1, 4))]
    sparsity = rng.choice((0.0, 0.5, 0.9, 1.0))
    n = sum(groups)
    dense = b"".join(bytes(eb) if rng.random() < sparsity else
                     rng.randint(1, (1 << 8 * eb) - 1).to_bytes(eb, "little") for _ in range(n))
    cw = compress_weights(dense, groups, eb)
    assert len(cw.weights) % 128 == len(cw.wmb) % 128 == len(cw.wgs) % 128 == 0
    assert len(cw.wmb) == -(-(-(-n // 8)) // 128) * 128
    assert expand(cw.weights, cw.wmb, n, eb) == dense
    start = 0
    for g, count in enumerate(groups):
        part = dense[start * eb:(start + count) * eb]
        nz = sum(eb for i in range(count) if any(part[i * eb:(i + 1) * eb]))
        assert cw.group_bytes[g] == nz == int.from_bytes(cw.wgs[4 * g:4 * g + 4], "little")
        start += count
    assert not any(cw.wgs[4 * len(groups):])
    assert not any(cw.weights[sum(cw.group_bytes):])


def test_fp16_negative_zero_is_kept_and_bad_sizes_raise():
    cw = compress_weights(bytes([0, 0x80, 0, 0]), [2], 2)       # -0.0, +0.0
    assert cw.wmb[0] == 0b01 and cw.weights[:2] == bytes([0, 0x80])
    with pytest.raises(ValueError, match="kernel groups of 3 elements"):
        compress_weights(bytes(4), [3], 1)
    with pytest.raises(ValueError, match="elem_bytes=4"):
        compress_weights(bytes(4), [1], 4)
