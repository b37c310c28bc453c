"""PDP unit with INT16 and FP16 (hdl/pdp/__init__.py on a configuration whose precisions
include them): whole programs from the random program generator (verif.gen.pdp.generate: one
or two offline layers in both ping-pong groups) played on the unit alone in Amaranth's
simulator against the random-timing fake MCIF of tests/hdl/test_pdp_perf.py (run_unit), and
against the numpy model (verif.model.Nvdla): the written bytes of every layer. INT16 and FP16
layers go through PdpCore16 with 16 two-byte channels per 32-byte atom (the DMAs' ``half``);
one INT8 program on the same unit shows the routing to PdpCore. The whole design
(hdl/support.py) still refuses this configuration (other units lack 16-bit paths)."""
from __future__ import annotations

import pytest

from hdl.config import get_config
from hdl.pdp import Pdp
from test_pdp_perf import run_unit
from unit_programs import check_outputs, model_after, program, unit_memory
from verif.gen.pdp import generate

SPEC = "nv_full+feature_data_type=int8_int16_fp16"


# (seed, layers, precisions of its layers in order): seeds whose programs draw them (checked)
CASES = [
    (11, 2, [1, 2]),        # INT16 MAX 1x5, then FP16 MIN 7x8 with padding on every side
    (37, 1, [1]),           # INT16 AVE 1x8, split in two bands, 7 lines of bottom padding
    (76, 1, [2]),           # FP16 AVE 5x2, left padding, NAN_TO_ZERO
    (23, 2, [0, 0]),        # INT8 on the same unit: PdpCore
]


@pytest.fixture(scope="module")
def unit_cfg():
    return get_config(SPEC)


@pytest.mark.parametrize("seed, layers, precs", CASES)
def test_generated_program(unit_cfg, seed, layers, precs):
    _play(unit_cfg, seed, layers, precs)


def test_sixteen_bit_elements_only():
    """A configuration of 16-bit elements only (cfg.bpe 16, 16 channels in 32-byte atoms):
    no INT8 core, the DMAs count the configuration's own atoms (no ``half``); FP16 MAX 6x8
    with 7 lines of bottom padding."""
    cfg = get_config("nv_full+feature_data_type=int16_fp16+mac_atomic_c=32+mac_atomic_k=16"
                     "+memory_atomic=16")
    _play(cfg, 34, 1, [2])


def _play(cfg, seed, layers, precs):
    """Play generated program ``seed`` (``layers`` layers drawing precisions ``precs``) on the
    unit and on the model; compare the written bytes."""
    loads, writes, outs = program(generate, seed, cfg, layers)
    fmt = [v for u, r, v in writes if u == "PDP" and r == "D_DATA_FORMAT"]
    assert fmt == precs, f"seed {seed} drew precisions {fmt}, expected {precs}"
    model = model_after(cfg, loads, writes, quiet=True)
    mem = unit_memory(cfg, loads)
    run_unit(Pdp(cfg), writes, mem=mem, layers=layers, seed=seed, max_cycles=40_000)
    check_outputs(mem, model, outs)
