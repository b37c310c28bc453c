"""cocotb self-test of the in-simulation memory (run by tests/test_sim_memory.py on any
``sim.build`` simulator): the backdoor (write/read/fill round trips, zeros where never written,
wrap at the address width, whole pages freed by a zero fill), the configuration errors, and
the second instance (``PORT_CV``, the secondary port's memory: its own contents, counters and
error; there are two ports). Needs no traffic: the DUT is held in reset."""
from __future__ import annotations

import random

import cocotb
import numpy as np
from cocotb.triggers import Timer

from sim.tb.simmem import PORT_CV, PORT_DBB, SimAxi, SimMemError, SimMemLib, SimMemory
from verif.axi_slave import MemTiming
from verif.mem import SparseMemory


@cocotb.test()
async def backdoor_round_trip(dut):
    dut.tb_mem_internal.value = 0
    await Timer(1, "ns")
    lib = SimMemLib()
    aw = len(dut.nvdla_core2dbb_ar_araddr)
    lib.configure(MemTiming(), len(dut.nvdla_core2dbb_r_rdata) // 8, aw, None)
    mem, ref = SimMemory(lib, aw), SparseMemory(aw)
    rng = random.Random(5)
    top = 1 << aw
    # random writes/fills (some straddling 64 KiB pages and the top of the address space)
    for i in range(200):
        a = rng.choice([rng.randrange(top), top - rng.randrange(1, 300), 0x8000_0000 - 5,
                        (rng.randrange(top) | 0xFFFF) - rng.randrange(40)])
        n = rng.randrange(1, 3000)
        if i % 5 == 4:
            v = rng.choice([0, rng.randrange(256)])
            mem.fill(a, n, v)
            ref.fill(a, n, v)
        else:
            data = bytes(rng.randrange(256) for _ in range(n))
            (mem.write(a, data) if i % 2 else mem.write(a, np.frombuffer(data, np.uint8)))
            ref.write(a, data)
    for _ in range(300):
        a, n = rng.randrange(top), rng.randrange(0, 5000)
        assert mem.read_bytes(a, n) == ref.read_bytes(a, n), (hex(a), n)
    assert mem.read_bytes(top - 2, 4) == ref.read_bytes(top - 2, 4)
    # words with strobes
    mem.write_word(0x1000, 8, 0x1122334455667788, 0xFF)
    mem.write_word(0x1000, 8, 0xAAAAAAAAAAAAAAAA, 0x0F)
    assert mem.read_bytes(0x1000, 8) == bytes.fromhex("aaaaaaaa44332211")
    assert mem.read_word(0x1000, 8) == 0x11223344AAAAAAAA
    # a zero fill of whole pages frees them; clear() frees everything
    mem.clear()
    mem.write(0x40000, b"\x01" * 0x30000)
    assert mem.pages == 3
    mem.fill(0x40000, 0x20000, 0)
    assert mem.pages == 1 and mem.read_bytes(0x5FFFF, 2) == b"\x00\x01"
    mem.clear()
    assert mem.pages == 0 and mem.read_bytes(0x60000, 4) == bytes(4)
    # counters and error API
    axi = SimAxi(lib)
    assert (axi.rd_beats, axi.wr_beats, axi.rd_reqs, axi.wr_reqs) == (0, 0, 0, 0)
    assert axi.error is None and axi.idle
    axi.error = "first"
    axi.error = "second"
    assert axi.error == "first"
    axi.reset(keep_error=True)
    assert axi.error == "first"
    axi.reset()
    assert axi.error is None
    axi.quiet = True
    assert axi.quiet
    try:
        lib.configure(MemTiming(), 65, aw, None)
    except SimMemError as e:
        assert "data_bytes=65" in str(e)
    else:
        raise AssertionError("data_bytes=65 accepted")

    # the second instance: its own memory and error, configured on its own
    cv = SimMemLib(PORT_CV)
    cv.configure(MemTiming.named("random", seed=7), 4, aw, None)
    cmem, cax = SimMemory(cv, aw), SimAxi(cv)
    mem.write(0x2000, b"\x11" * 16)
    cmem.write(0x2000, b"\x22" * 8)
    assert mem.read_bytes(0x2000, 16) == b"\x11" * 16
    assert cmem.read_bytes(0x2000, 16) == b"\x22" * 8 + bytes(8)
    cax.error = "cv only"
    assert cax.error == "cv only" and axi.error is None
    cmem.clear()
    assert cmem.pages == 0 and mem.pages == 1
    assert SimMemLib(PORT_DBB).port == 0
    try:
        SimMemLib(2)
    except ValueError as e:
        assert "ports 0..1" in str(e)
    else:
        raise AssertionError("port 2 accepted")
