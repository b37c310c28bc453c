"""The interrupt budget derived from a trace's own work (verif/trace/budget.py, issue 11 item 8),
calibrated against NVIDIA's nv_small RTL cycle table, and the ``--max-cycles`` override."""
from __future__ import annotations

import pytest

from hdl.config import NV_SMALL
from verif.shared import nvdla_dir
from verif.trace import budget
from verif.trace.parser import load_trace
from verif.trace.reference import intr_budget as ref_budget
from verif.trace.reference import nvidia_cycles

TRACES = nvdla_dir() / "traces" / "nv_small"
needs_shared = pytest.mark.skipif(not nvidia_cycles() or not TRACES.is_dir(),
                                  reason="../shared/nvdla (NVIDIA traces, cycle table) is absent")


@needs_shared
def test_derived_budget_brackets_nvidia_cycles():
    """On every trace NVIDIA's table lists: at least 2x NVIDIA's cycles (no false hang on a
    design as fast as NVIDIA's, with margin for slower memory), and its work-dependent part at
    most 32x (a hang is still reported quickly)."""
    low, high = [], []
    for name, cyc in nvidia_cycles().items():
        d = TRACES / name
        if not d.is_dir():
            continue
        b = budget.intr_budget(load_trace(d), NV_SMALL)
        if b < 2 * cyc:
            low.append(f"{name}: {b} < 2 x {cyc}")
        if b - budget.FIXED > 32 * cyc:
            high.append(f"{name}: {b} - {budget.FIXED} > 32 x {cyc}")
    assert not low and not high, "\n".join(low + high)


@needs_shared
def test_work_counts_layers_bytes_and_atomic_ops():
    w = budget.work(load_trace(TRACES / "sdp_8192x1x1_pass_through_int8_0"), NV_SMALL)
    # 8192 x 1 x 1 (one channel padded to an 8-element atom): 64 KiB in, 64 KiB out
    assert w == {"bytes": 2 * 8192 * 8, "ops": 8192 * 8, "layers": 1}
    conv = budget.work(load_trace(TRACES / "dc_32x26x76_6x3x76x270_int8_0"), NV_SMALL)
    # 27 x 24 outputs x ceil(270/8) kernel groups x ceil(76/8) channel blocks x 6 x 3 taps
    assert conv["ops"] >= 27 * 24 * 34 * 10 * 18


@needs_shared
def test_trace_budget_sources():
    listed = load_trace(TRACES / "pdp_8x8x64_2x2_int8")
    assert budget.trace_budget(listed, NV_SMALL, 1234) == 1234          # --max-cycles wins
    assert budget.trace_budget(listed, NV_SMALL) == max(ref_budget(listed.name),
                                                        budget.intr_budget(listed, NV_SMALL))
    import dataclasses
    unlisted = dataclasses.replace(listed, name="my_own_pdp_trace")
    assert budget.trace_budget(unlisted, NV_SMALL) == budget.intr_budget(listed, NV_SMALL)
    assert budget.trace_budget(unlisted, NV_SMALL) < 200_000           # not a flat 20 M


def test_cli_rejects_bad_max_cycles(capsys):
    from verif.trace.__main__ import main
    assert main(["run", str(TRACES), "--engine", "rtl", "--max-cycles", "0"]) == 2
    assert "--max-cycles 0: must be >= 1" in capsys.readouterr().err


@pytest.mark.parametrize("mode, atoms", [("contract", 2 * 3 * 4 * 2 * 40 * 11),
                                         ("split", 3 * 4 * 40 + 40 * 4 * 3)])
def test_rubik_layers_count_their_atoms(mode, atoms, tmp_path):
    """A RUBIK layer's work: its atoms read and written, each a whole beat (a contract of 10,560
    atoms under nvidia timing took more than the fixed 20,000 cycles the budget gave it)."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    import bench_rubik
    from hdl.config import get_config
    cfg = get_config("nv_large+rubik=True+rubik_contract=True+rubik_reshape=True")
    d = bench_rubik.write_program(mode, mode, 40, 4, 40, 11, 2, 2, tmp_path, cfg)
    w = budget.work(load_trace(d), cfg)
    assert w["layers"] == 1 and w["bytes"] == atoms * cfg.axi_data_bytes
