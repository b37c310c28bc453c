"""CDP unit with FP16 (hdl/cdp/__init__.py on a configuration whose precisions include fp16):
whole layers from the random program generator (verif.gen.cdp.generate: LUT prologue, one or
two layers in both ping-pong groups) played on the unit alone in Amaranth's simulator against
the random-timing fake MCIF of tests/hdl/test_pdp_perf.py (run_unit), against the numpy model
(verif.model.Nvdla): the written bytes of every layer, D_PERF_LUT_* and D_OUT_SATURATION of
both groups. FP16 programs go through CdpFp16Core with 16-element atoms; one INT8 program on
the same unit shows the routing to CdpCore (and that D_OUT_SATURATION stays as it was).
INT16 programs on this unit (CdpCore at INT16) are played by tests/hdl/test_cdp_unit_int16.py,
which reuses this file's ``_program``. The whole design (hdl/support.py) still refuses this
configuration (int16/fp16 data is not built in every unit)."""
from __future__ import annotations

import re

import pytest

from hdl.cdp import Cdp
from hdl.config import get_config
from test_pdp_perf import run_unit
from verif.gen.cdp import generate
from verif.mem import SparseMemory
from verif.model import Nvdla

SPEC = "nv_full+feature_data_type=int8_int16_fp16"
STATS = ("D_PERF_LUT_UFLOW", "D_PERF_LUT_OFLOW", "D_PERF_LUT_HYBRID", "D_PERF_LUT_LE_HIT",
         "D_PERF_LUT_LO_HIT", "D_OUT_SATURATION")
_WRITE = re.compile(r"reg_write\(NVDLA_(\w+)\.(\w+)_0, (0x[0-9a-fA-F]+)\);")
_LOAD = re.compile(r'mem_load\(pri_mem, (0x[0-9a-fA-F]+), "([^"]+)"\);')


def _program(seed: int, cfg, layers: int):
    """The generated program's memory images, register writes ``(unit, reg, value)`` in order
    and output regions; intr_notify waits are not needed with at most two layers."""
    prog = generate(seed, cfg, layers=layers)
    loads, writes = [], []
    for line in prog.writer.lines:
        if not isinstance(line, str):
            continue
        if mw := _WRITE.fullmatch(line.split("    //")[0]):
            writes.append((mw[1], mw[2], int(mw[3], 16)))
        elif ml := _LOAD.fullmatch(line):
            loads.append((int(ml[1], 16), bytes(prog.writer.images[ml[2]])))
    outs = [o for lay in prog.layers for o in lay.out]
    return loads, writes, outs


# (seed, layers, precision): seeds whose programs draw that precision (checked below)
CASES = [(11, 2, 2), (15, 1, 2), (2, 2, 2), (13, 1, 0)]


@pytest.fixture(scope="module")
def unit_cfg():
    return get_config(SPEC)


@pytest.mark.parametrize("seed, layers, prec", CASES)
def test_generated_program(unit_cfg, seed, layers, prec):
    cfg = unit_cfg
    loads, writes, outs = _program(seed, cfg, layers)
    fmt = {v for u, r, v in writes if r == "D_DATA_FORMAT"}
    assert fmt == {prec}, f"seed {seed} drew precision {fmt}, expected {prec}"
    # the model
    model = Nvdla(cfg)
    for base, data in loads:
        model.mem.write(base, data)
    for unit, reg, value in writes:
        model.write(f"NVDLA_{unit}.{reg}_0", value)
    want_stats = []
    for g in range(2):
        model.write("NVDLA_CDP.S_POINTER_0", g)
        want_stats.append([model.read(f"NVDLA_CDP.{r}_0") for r in STATS])
    # the unit
    mem = SparseMemory(cfg.mem_address_width)
    for base, data in loads:
        mem.write(base, data)
    reads = []
    for g in range(2):
        reads += [("CDP", "S_POINTER", g)] + [("CDP", r) for r in STATS]
    _, got = run_unit(Cdp(cfg), writes, mem=mem, layers=layers, reads=reads, seed=seed,
                      max_cycles=40_000)
    for base, size in outs:
        assert mem.read_bytes(base, size) == model.mem.read_bytes(base, size), \
            f"output at {base:#x}"
    n = len(STATS)
    assert [got[:n], got[n:]] == want_stats
