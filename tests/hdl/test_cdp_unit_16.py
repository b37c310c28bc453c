"""CDP unit with INT16 and FP16 (hdl/cdp/__init__.py on a configuration whose precisions include
them): whole layers from the random program generator (verif.gen.cdp.generate: LUT prologue, one
or two layers in both ping-pong groups) played on the unit alone in Amaranth's simulator against
the random-timing fake MCIF of tests/hdl/test_pdp_perf.py (run_unit), against the numpy model
(verif.model.Nvdla): the written bytes of every layer, D_PERF_LUT_* and D_OUT_SATURATION of both
groups. FP16 programs go through CdpFp16Core, INT16 programs through CdpCore at INT16, both with
16 two-byte elements per atom (the DMAs' 16-bit element walk); one INT8 program on the same unit
shows the routing to CdpCore (and that D_OUT_SATURATION stays as it was: only FP16 layers
update it, as in the model). The INT16 seeds' programs mostly give saturated outputs;
tests/hdl/test_cdp_core_int16.py covers that datapath's values. D_PERF_LUT_HYBRID in INT16: the
model's count is compared (NVIDIA's nv_full RTL was observed to differ, verif/model/cdp.py's
docstring: not settled). The whole design (hdl/support.py) still refuses this configuration
(int16/fp16 data is not built in every unit)."""
from __future__ import annotations

import pytest

from hdl.cdp import Cdp
from hdl.config import get_config
from test_pdp_perf import run_unit
from unit_programs import check_outputs, model_after, program, unit_memory
from verif.gen.cdp import generate

SPEC = "nv_full+feature_data_type=int8_int16_fp16"
STATS = ("D_PERF_LUT_UFLOW", "D_PERF_LUT_OFLOW", "D_PERF_LUT_HYBRID", "D_PERF_LUT_LE_HIT",
         "D_PERF_LUT_LO_HIT", "D_OUT_SATURATION")

# (seed, layers, precision): seeds whose programs draw that precision (checked below)
CASES = [
    (11, 2, 2), (15, 1, 2), (2, 2, 2),
    # INT16: 3 exponential LE, 3x1x30 and 9x1x18, NORMALZ_LEN 3 and 9 (START ~2**20, 2**21);
    # 79 linear LE, 6x4x11 and 8x4x28, NORMALZ_LEN 5 and 7, overflows, both saturation bounds;
    # 27 linear LE, LE_START = -344801536 (beyond INT8's START[21:0]), 5x1x17 with SQSUM_BYPASS
    (3, 2, 1), (79, 2, 1), (27, 2, 1),
    (13, 1, 0),
]


@pytest.fixture(scope="module")
def unit_cfg():
    return get_config(SPEC)


@pytest.mark.parametrize("seed, layers, prec", CASES)
def test_generated_program(unit_cfg, seed, layers, prec):
    cfg = unit_cfg
    loads, writes, outs = program(generate, seed, cfg, layers)
    fmt = {v for u, r, v in writes if r == "D_DATA_FORMAT"}
    assert fmt == {prec}, f"seed {seed} drew precision {fmt}, expected {prec}"
    model = model_after(cfg, loads, writes)
    want_stats = []
    for g in range(2):
        model.write("NVDLA_CDP.S_POINTER_0", g)
        want_stats.append([model.read(f"NVDLA_CDP.{r}_0") for r in STATS])
    mem = unit_memory(cfg, loads)
    reads = []
    for g in range(2):
        reads += [("CDP", "S_POINTER", g)] + [("CDP", r) for r in STATS]
    _, got = run_unit(Cdp(cfg), writes, mem=mem, layers=layers, reads=reads, seed=seed,
                      max_cycles=40_000)
    check_outputs(mem, model, outs)
    n = len(STATS)
    assert [got[:n], got[n:]] == want_stats
