"""CSC weight-set collection (hdl/csc/wtset.py WtCollect; docs/conv.md "CSC") alone in Amaranth's
simulator: sets of ``kg*cw`` bytes starting at any byte ``off`` of their first CBUF entry, with
garbage before and after them in the entries, come out aligned (the set's byte 0 at byte 0),
with ``kg``/``cw``, under random input gaps and output back-pressure (stream rules checked);
at full rate one entry is taken per cycle."""
from __future__ import annotations

import random
import sys

import pytest

from hdl.config import NV_SMALL
from hdl.csc.wtset import (WtCollect, WtUnpack, WtUnpackSerial, aligned_set_layout,
                           serial_unpack, set_entries)
from streams import as_bits, simulate_streams, stream_get, stream_put

AC, AK = NV_SMALL.mac_atomic_c, NV_SMALL.mac_atomic_k
EB = NV_SMALL.cbuf_bank_width               # bytes per CBUF entry


def _sets(rng: random.Random, n: int):
    """``n`` random sets at nv_small's geometry: see :func:`_entry_items`."""
    return _entry_items(rng, AC, AK, EB, n)


def _simulate(dut, items: list, nsets: int, seed: int, p_in: float, p_out: float,
              stamps: list | None) -> list:
    """Feed the entries ``items`` to ``dut.i`` under random gaps (``p_in``), take ``nsets``
    outputs from ``dut.o`` under random back-pressure (``p_out``)."""
    rng = random.Random(seed)
    il = dut.i.payload.shape()
    got = []

    async def producer(ctx):
        await stream_put(ctx, dut.i, [il.const(it) for it in items], rng=rng, p_stall=p_in)

    async def consumer(ctx):
        got.extend(await stream_get(ctx, dut.o, nsets, rng=random.Random(seed + 1),
                                    p_stall=p_out, timestamps=stamps))

    simulate_streams(dut, [producer], [consumer], [("i", dut.i), ("o", dut.o)])
    return got


def _run(seed: int, n: int, p_in: float, p_out: float, stamps: list | None = None):
    sets, items = _sets(random.Random(seed), n)
    got = _simulate(WtCollect(AC, AK, EB), items, len(sets), seed + 1000, p_in, p_out, stamps)
    for idx, ((kg, cw, body), out) in enumerate(zip(sets, got)):
        raw = as_bits(out.bytes).to_bytes(AK * AC, "little")
        assert (out.kg, out.cw) == (kg, cw), f"set {idx}"
        assert list(raw[:kg * cw]) == body, f"set {idx}: kg={kg} cw={cw}"
    return sets, items


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_collect_random(seed):
    _run(seed, 60, p_in=0.3, p_out=0.5)


def test_collect_full_rate():
    """No gaps, no back-pressure: one entry per cycle (set i leaves the cycle after its last
    entry), whatever the sets' offsets."""
    stamps = []
    sets, items = _run(7, 40, p_in=0.0, p_out=0.0, stamps=stamps)
    ends = [i for i, it in enumerate(items) if it["tag"]["set_last"]]
    assert [t - stamps[0] for t in stamps] == [e - ends[0] for e in ends]


@pytest.mark.parametrize("ac,ak", [(NV_SMALL.mac_atomic_c, NV_SMALL.mac_atomic_k), (64, 16)])
def test_unpack_random(ac, ak):
    """WtUnpack: ``wt[k][c]`` = set byte ``k*cw + c`` for k < kg and c < cw, else 0 (format.rst
    "Basic Weight for Direct Convolution": kg kernels of cw bytes, kernel-major), at nv_small's
    geometry and nv_medium_512's (atomic C 64, atomic K 16), under random stalls."""
    rng = random.Random(ac * 100 + ak)
    lay = aligned_set_layout(ac, ak)
    dut = WtUnpack(ac, ak, lay)
    sets = []
    for _ in range(40):
        kg, cw = rng.randint(1, ak), rng.randint(1, ac)
        if rng.random() < 0.2:
            kg, cw = ak, ac
        sets.append((kg, cw, [rng.randrange(256) for _ in range(ak * ac)]))
    got = []

    async def producer(ctx):
        await stream_put(ctx, dut.i, [lay.const({"bytes": b, "kg": kg, "cw": cw})
                                      for kg, cw, b in sets], rng=rng)

    async def consumer(ctx):
        got.extend(await stream_get(ctx, dut.o, len(sets), rng=random.Random(5)))

    simulate_streams(dut, [producer], [consumer], [("i", dut.i), ("o", dut.o)])
    for idx, ((kg, cw, b), out) in enumerate(zip(sets, got)):
        raw = as_bits(out).to_bytes(ak * ac, "little")
        want = bytes(b[k * cw + c] if k < kg and c < cw else 0
                     for k in range(ak) for c in range(ac))
        assert raw == want, f"set {idx}: kg={kg} cw={cw}"


def _entry_items(rng: random.Random, ac: int, ak: int, eb: int, n: int, *, aligned=False):
    """``n`` random sets for the serial unpacker: (kg, cw, set bytes) and their entries, each
    set from byte ``off`` of its first entry (``off`` 0 with ``aligned``)."""
    sets, items = [], []
    for _ in range(n):
        kg, cw, off = rng.randint(1, ak), rng.randint(1, ac), rng.randrange(eb)
        if aligned or rng.random() < 0.3:
            kg, cw = ak, ac
        if aligned:
            off = 0
        body = [rng.randrange(256) for _ in range(kg * cw)]
        nent = (off + kg * cw + eb - 1) // eb
        assert nent <= set_entries(ac, ak, eb)
        sb = ([rng.randrange(256) for _ in range(off)] + body
              + [rng.randrange(256) for _ in range(nent * eb - off - kg * cw)])
        sets.append((kg, cw, body))
        for j in range(nent):
            items.append({"data": int.from_bytes(bytes(sb[j * eb:(j + 1) * eb]), "little"),
                          "tag": {"set_first": int(j == 0), "set_last": int(j == nent - 1),
                                  "off": off, "kg": kg, "cw": cw}})
    return sets, items


def _run_serial(ac, ak, eb, seed, n, p_in, p_out, *, aligned=False, stamps=None):
    sets, items = _entry_items(random.Random(seed), ac, ak, eb, n, aligned=aligned)
    got = _simulate(WtUnpackSerial(ac, ak, eb), items, len(sets), seed + 1000, p_in, p_out,
                    stamps)
    for idx, ((kg, cw, b), out) in enumerate(zip(sets, got)):
        raw = as_bits(out).to_bytes(ak * ac, "little")
        want = bytes(b[k * cw + c] if k < kg and c < cw else 0
                     for k in range(ak) for c in range(ac))
        assert raw == want, f"set {idx}: kg={kg} cw={cw}"
    return sets


# Amaranth's Python simulator writes each signal's mask as a decimal literal: nv_large's
# 16,384-bit weight set needs more than Python's default 4,300 digits
sys.set_int_max_str_digits(0)

# nv_small's geometry, a narrow atomic C in wide entries, nv_medium_1024_full's (atomic C
# 32 x K 32) and nv_large's (atomic C 64 x K 32)
SERIAL_GEOMS = [(8, 8, 8), (8, 4, 32), (32, 32, 32), (64, 32, 64)]


@pytest.mark.parametrize("ac,ak,eb", SERIAL_GEOMS)
@pytest.mark.parametrize("seed", [1, 2])
def test_unpack_serial_random(ac, ak, eb, seed):
    """WtUnpackSerial: every set's ``wt[k][c]`` = set byte ``k*cw + c`` (0 past kg, cw), sets
    starting at any byte of their first entry, under random input gaps and back-pressure."""
    _run_serial(ac, ak, eb, seed, 30 if ac * ak > 512 else 80, p_in=0.3, p_out=0.4)


@pytest.mark.parametrize("ac,ak,eb", SERIAL_GEOMS)
def test_unpack_serial_full_rate(ac, ak, eb):
    """No gaps, no back-pressure, whole entry-aligned sets: one kernel per cycle, so set i
    leaves ``ak`` cycles after set i-1 (the entries' own rate when ``ac == eb``)."""
    stamps = []
    sets = _run_serial(ac, ak, eb, 9, 12, p_in=0.0, p_out=0.0, aligned=True, stamps=stamps)
    assert all(kg == ak for kg, _, _ in sets)
    assert [b - a for a, b in zip(stamps, stamps[1:])] == [ak] * (len(sets) - 1)


def test_serial_unpack_choice():
    """The serial path is chosen for sets of 1,024 bytes and more: nv_large's, not nv_small's
    or nv_small_256's."""
    assert serial_unpack(64, 32) and serial_unpack(32, 32)
    assert not serial_unpack(8, 8) and not serial_unpack(32, 8) and not serial_unpack(32, 16)
