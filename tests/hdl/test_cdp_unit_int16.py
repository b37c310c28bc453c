"""CDP unit with INT16 (hdl/cdp/__init__.py on a configuration whose precisions include int16):
whole programs from the random program generator (verif.gen.cdp.generate: LUT prologue, one or
two layers in both ping-pong groups) played on the unit alone in Amaranth's simulator against
the random-timing fake MCIF of tests/hdl/test_pdp_perf.py (run_unit), against the numpy model
(verif.model.Nvdla), as tests/hdl/test_cdp_unit_fp16.py does for FP16: the written bytes of every
layer, D_PERF_LUT_* and D_OUT_SATURATION of both groups. INT16 programs go through CdpCore at
INT16 (16 int16 elements per atom; the DMAs' 16-bit element walk). The seeds' programs draw
INT16 (checked): exponential and linear LE tables, a START value beyond INT8's START[21:0],
SQSUM_BYPASS, every NORMALZ_LEN, two layers in both groups (CASES). The generator's INT16
programs mostly give saturated outputs; tests/hdl/test_cdp_core_int16.py covers the datapath's
values.

D_PERF_LUT_HYBRID: the model's count is compared (NVIDIA's nv_full RTL was observed to differ
in INT16, verif/model/cdp.py's docstring: not settled). D_OUT_SATURATION: an INT16 layer leaves
it as it was in the model (0 here)."""
from __future__ import annotations

import pytest

from hdl.cdp import Cdp
from hdl.config import get_config
from test_cdp_unit_fp16 import SPEC, STATS, _program
from test_pdp_perf import run_unit
from verif.mem import SparseMemory
from verif.model import Nvdla

# (seed, layers): seeds whose programs draw INT16 (checked below)
#   3: exponential LE, 3x1x30 and 9x1x18, NORMALZ_LEN 3 and 9 (START ~2**20, 2**21)
#  79: linear LE, 6x4x11 and 8x4x28, NORMALZ_LEN 5 and 7, overflows, both saturation bounds
#  27: linear LE, LE_START = -344801536 (beyond START[21:0]), 5x1x17 with SQSUM_BYPASS, 2x2x3
CASES = [(3, 2), (79, 2), (27, 2)]


@pytest.fixture(scope="module")
def unit_cfg():
    return get_config(SPEC)


@pytest.mark.parametrize("seed, layers", CASES)
def test_generated_program(unit_cfg, seed, layers):
    cfg = unit_cfg
    loads, writes, outs = _program(seed, cfg, layers)
    fmt = {v for u, r, v in writes if r == "D_DATA_FORMAT"}
    assert fmt == {1}, f"seed {seed} drew precision {fmt}, expected INT16 (1)"
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
