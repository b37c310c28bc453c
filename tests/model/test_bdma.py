"""The BDMA model (verif/model/bdma.py) against plain-Python copies and NVIDIA's RTL facts: the
operation queue and FREE_SLOT, groups and their interrupts, line/surface repeat with strides in
both memories, the programs NVIDIA's RTL leaves undefined."""
from __future__ import annotations

import random

import pytest

from hdl.config import NV_FULL, NV_LARGE
from verif.model import Nvdla
from verif.model.formats import ModelConfigError

B = "NVDLA_BDMA."
MC, CV = 1, 0


def program(dla: Nvdla, src: int, dst: int, size: int, lines: int, surfs: int, sline: int,
            dline: int, ssurf: int, dsurf: int, src_ram: int = MC, dst_ram: int = MC) -> None:
    """Write one operation's registers and CFG_OP.EN (sizes as the registers hold them: N - 1)."""
    for reg, v in (("CFG_SRC_ADDR_LOW", src & 0xFFFFFFFF), ("CFG_SRC_ADDR_HIGH", src >> 32),
                   ("CFG_DST_ADDR_LOW", dst & 0xFFFFFFFF), ("CFG_DST_ADDR_HIGH", dst >> 32),
                   ("CFG_LINE", size), ("CFG_LINE_REPEAT", lines), ("CFG_SURF_REPEAT", surfs),
                   ("CFG_SRC_LINE", sline), ("CFG_DST_LINE", dline), ("CFG_SRC_SURF", ssurf),
                   ("CFG_DST_SURF", dsurf), ("CFG_CMD", src_ram | (dst_ram << 1))):
        dla.write(B + reg + "_0", v)
    dla.write(B + "CFG_OP_0", 1)


def reference_copy(src_bytes: dict, op: dict) -> dict:
    """Plain-Python BDMA copy: {dst address: byte} from {src address: byte}."""
    out = {}
    for s in range(op["surfs"] + 1):
        for ln in range(op["lines"] + 1):
            for b in range((op["size"] + 1) * 32):
                a = op["src"] + s * op["ssurf"] + ln * op["sline"] + b
                out[op["dst"] + s * op["dsurf"] + ln * op["dline"] + b] = src_bytes[a]
    return out


def status(dla: Nvdla) -> dict:
    v = dla.read(B + "STATUS_0")
    return {"free": v & 0xFF, "idle": (v >> 8) & 1, "grp0": (v >> 9) & 1, "grp1": (v >> 10) & 1}


def test_registers_read_back_and_live_at_v1_addresses():
    dla = Nvdla(NV_FULL)
    dla.write(0x100B * 4, 0xF0A5A500)          # sanity0: CFG_DST_SURF by its v1 word address
    assert dla.read(0x100B * 4) & 0xFFFFFFE0 == 0xF0A5A500
    assert status(dla) == {"free": 20, "idle": 1, "grp0": 0, "grp1": 0}
    dla.write(B + "CFG_OP_0", 0)                # EN written 0: reads back 0, queues nothing
    assert dla.read(B + "CFG_OP_0") == 0 and status(dla)["idle"] == 1


@pytest.mark.parametrize("seed", range(6))
def test_random_copies_match_plain_python(seed):
    """Random operations (line size, repeats, strides, both memories, 64-bit addresses on
    nv_full) in groups 0 and 1; every destination byte as the plain-Python copy says, GLB's
    BDMA_DONE_STATUS<g> raised per group, the rest of memory untouched."""
    rng = random.Random(seed)
    dla = Nvdla(NV_FULL)
    mems = {MC: dla.mem, CV: dla.cv_mem}
    for it, group in enumerate((0, 1, 0)):
        ops, expect = [], {}
        for _ in range(rng.randint(1, 4)):
            size, lines, surfs = rng.randint(0, 5), rng.randint(0, 4), rng.randint(0, 3)
            lb = (size + 1) * 32
            sline = lb + 32 * rng.randint(0, 3)
            dline = lb + 32 * rng.randint(0, 3)
            ssurf = sline * (lines + 1) + 32 * rng.randint(0, 2)
            dsurf = dline * (lines + 1) + 32 * rng.randint(0, 2)
            high = rng.choice([0, 0, 1 << 32])
            region = 0x100_0000 * it + 0x10_0000 * len(ops)
            src = high + 0x1000_0000 + region + 32 * rng.randint(0, 100)
            dst = high + 0x4000_0000 + region + 32 * rng.randint(0, 100)
            op = dict(src=src, dst=dst, size=size, lines=lines, surfs=surfs, sline=sline,
                      dline=dline, ssurf=ssurf, dsurf=dsurf, src_ram=rng.choice([MC, CV]),
                      dst_ram=rng.choice([MC, CV]))
            span = ssurf * surfs + sline * lines + lb
            data = bytes(rng.getrandbits(8) for _ in range(span))
            mems[op["src_ram"]].write(src, data)
            got = reference_copy({src + i: b for i, b in enumerate(data)}, op)
            for a, b in got.items():
                expect[(op["dst_ram"], a)] = b
            ops.append(op)
            program(dla, **op)
        assert status(dla)["idle"] == 0
        dla.write(B + f"CFG_LAUNCH{group}_0", 1)
        st = dla.read("NVDLA_GLB.S_INTR_STATUS_0")
        assert st == 0x40 << group, hex(st)
        dla.write("NVDLA_GLB.S_INTR_STATUS_0", st)
        for (ram, a), b in expect.items():
            assert int(mems[ram].read(a, 1)[0]) == b, (seed, ram, hex(a))
        assert status(dla) == {"free": 20, "idle": 1, "grp0": 0, "grp1": 0}
        # a byte just past each destination line is not written (nothing was there: 0)
        for op in ops:
            lb = (op["size"] + 1) * 32
            if op["dline"] > lb:
                assert int(mems[op["dst_ram"]].read(op["dst"] + lb, 1)[0]) == 0


def test_free_slots_and_the_21st_operation():
    """FREE_SLOT: 20 with one operation waiting (it sits in the FIFO's output register), 21 - k
    for k; the RTL holds 21; a 22nd EN is dropped by the RTL: the model refuses it."""
    dla = Nvdla(NV_FULL)
    frees = []
    for _ in range(21):
        program(dla, 0x8000_0000, 0x8100_0000, 0, 0, 0, 32, 32, 32, 32)
        frees.append(status(dla)["free"])
    assert frees == [20] + list(range(19, -1, -1))
    with pytest.raises(ModelConfigError, match="FREE_SLOT = 0"):
        program(dla, 0x8000_0000, 0x8100_0000, 0, 0, 0, 32, 32, 32, 32)


def test_operations_snapshot_their_registers():
    """Register writes after CFG_OP.EN do not change the queued operation."""
    dla = Nvdla(NV_FULL)
    dla.mem.write(0x8000_0000, bytes(range(64)))
    program(dla, 0x8000_0000, 0x8100_0000, 1, 0, 0, 64, 64, 64, 64)
    dla.write(B + "CFG_DST_ADDR_LOW_0", 0x8200_0000)
    dla.write(B + "CFG_LAUNCH0_0", 1)
    assert dla.mem.read_bytes(0x8100_0000, 64) == bytes(range(64))
    assert dla.mem.read_bytes(0x8200_0000, 64) == bytes(64)
    assert dla.read(B + "CFG_LAUNCH0_0") == 1 and dla.read(B + "CFG_OP_0") == 1   # plain flops


def test_launch_without_operations_never_completes():
    dla = Nvdla(NV_FULL)
    dla.write(B + "CFG_LAUNCH1_0", 1)
    assert status(dla)["grp1"] == 1 and not dla.intr and "BDMA" in dla.busy_units()
    program(dla, 0x8000_0000, 0x8100_0000, 0, 0, 0, 32, 32, 32, 32)
    dla.write(B + "CFG_LAUNCH0_0", 1)          # BDMA is stuck: this group never runs either
    assert status(dla)["grp0"] == 1 and not dla.intr


@pytest.mark.parametrize("reg", ["CFG_LINE_REPEAT", "CFG_SURF_REPEAT"])
def test_repeats_past_13_bits_are_refused(reg):
    dla = Nvdla(NV_FULL)
    dla.write(B + reg + "_0", 8192)
    with pytest.raises(ModelConfigError, match="13 bits"):
        dla.write(B + "CFG_OP_0", 1)


def test_reading_what_the_group_writes_is_refused():
    """An operation reading bytes it or an earlier operation of its group writes has a
    timing-dependent result on NVIDIA's RTL; after the interrupt, in a later group, it is fine."""
    dla = Nvdla(NV_FULL)
    program(dla, 0x8000_0000, 0x8000_0040, 3, 0, 0, 128, 128, 128, 128)    # overlaps itself
    with pytest.raises(ModelConfigError, match="reads bytes that itself writes"):
        dla.write(B + "CFG_LAUNCH0_0", 1)
    dla = Nvdla(NV_FULL)
    program(dla, 0x8000_0000, 0x8100_0000, 0, 0, 0, 32, 32, 32, 32)
    program(dla, 0x8100_0000, 0x8200_0000, 0, 0, 0, 32, 32, 32, 32)
    with pytest.raises(ModelConfigError, match="operation 0 of the group"):
        dla.write(B + "CFG_LAUNCH0_0", 1)
    dla = Nvdla(NV_FULL)
    # the same memory range in the other memory, and interleaved lines that never meet, are fine
    program(dla, 0x8000_0000, 0x8000_0000, 0, 3, 0, 64, 64, 256, 256, src_ram=MC, dst_ram=CV)
    program(dla, 0x9000_0000, 0x9000_0020, 0, 3, 0, 64, 64, 256, 256)
    dla.write(B + "CFG_LAUNCH0_0", 1)
    assert dla.intr


def test_without_secondary_memory_every_access_goes_to_the_primary():
    """A configuration with BDMA but no CVIF (nv_large with bdma on): RAM type CV reaches the
    primary memory, as every DMA of such a configuration does."""
    cfg = NV_LARGE.derive(name="nv_large_bdma", bdma=True, secondary_memif=False,
                          secondary_memif_width=None, secondary_memif_latency=None,
                          secondary_memif_max_burst=None)
    dla = Nvdla(cfg)
    dla.mem.write(0x1000, bytes(range(32)))
    program(dla, 0x1000, 0x2000, 0, 0, 0, 32, 32, 32, 32, src_ram=CV, dst_ram=CV)
    dla.write("NVDLA_BDMA.CFG_LAUNCH0_0", 1)
    assert dla.mem.read_bytes(0x2000, 32) == bytes(range(32))
    assert dla.read("NVDLA_GLB.S_INTR_STATUS_0") & (1 << 6)
