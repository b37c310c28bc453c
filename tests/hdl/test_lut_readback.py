"""LUT access ports read back with auto-increment (v1_ias_lut-programming.rst "automatic address
incremental mechanism"): the same random CSB sequence of S_LUT_ACCESS_CFG / S_LUT_ACCESS_DATA
writes and reads on the RTL (Amaranth simulator, whole core) and on the model, every read value
equal. SDP (nv_small_ew): every data read or write advances the address; CDP: a data read
advances it with ACCESS_TYPE=READ, a write with WRITE, sticking on the table's last entry
(verif/model/sdp.py, verif/model/lut.py record NVIDIA's RTL behaviour)."""
from __future__ import annotations

import random

import pytest

from hdl.config import NV_SMALL, NV_SMALL_EW
from hdl.regmap import REGMAP
from verif.model import Nvdla
from verif.trace.amaranth_engine import simulate


def _program(unit: str, rng: random.Random) -> list:
    """(op, register, value) steps: fill both tables, then runs of reads from random starts
    (some reaching the table's end), interleaved CFG reads."""
    steps = []
    for table, n in ((0, 65), (1, 257)):
        steps.append(("w", f"{unit}.S_LUT_ACCESS_CFG", (1 << 17) | (table << 16)))
        steps += [("w", f"{unit}.S_LUT_ACCESS_DATA", rng.randrange(1 << 16)) for _ in range(n)]
    for _ in range(6):
        table = rng.randrange(2)
        n = 65 if table == 0 else 257
        start = rng.choice([0, n - 3, rng.randrange(n)])
        steps.append(("w", f"{unit}.S_LUT_ACCESS_CFG", (table << 16) | start))   # READ
        for _ in range(rng.randrange(2, 7)):
            steps.append(("r", f"{unit}.S_LUT_ACCESS_DATA", None))
        steps.append(("r", f"{unit}.S_LUT_ACCESS_CFG", None))
    return steps


@pytest.mark.parametrize("unit,cfg", [("SDP", NV_SMALL_EW), ("CDP", NV_SMALL)])
def test_lut_read_auto_increment(unit, cfg):
    steps = _program(unit, random.Random(unit))
    model = Nvdla(cfg)
    want = []
    for op, reg, v in steps:
        if op == "w":
            model.write(reg, v)
        else:
            want.append(model.read(reg))
    got = []

    async def bench(h):
        for op, reg, v in steps:
            if op == "w":
                await h.reg_write(REGMAP.lookup(reg).addr, v)
            else:
                got.append(await h.reg_read(REGMAP.lookup(reg).addr))

    simulate(cfg, bench)
    assert len(got) == len(want)
    bad = [(i, g, w) for i, (g, w) in enumerate(zip(got, want)) if g != w]
    assert not bad, f"{unit}: first mismatches (read #, RTL, model): {bad[:5]}"
