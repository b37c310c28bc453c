"""Image-input register programs, RTL against the model (issue 9 item 3).

Small generated image layers (``verif/gen/img.py``: CDMA pixel fetch -> CSC image mode -> CMAC
-> CACC -> SDP bypass) for what no NVIDIA trace exercises: every one of the 13 int8 pixel
formats (T_R8, the packed 4-byte orders, the semi-planar N444 formats with their second plane
D_DAIN_ADDR_*_1 and D_LINE_UV_STRIDE), channel post-extension (CSC D_POST_Y_EXTENSION 2 and 4
lines), pixel X offsets, mean vs converter vs no conversion, padding. The expected bytes are
the numpy model's (``verif.gen.run.prepare``); a legal program the model rejects is a
generator error. All programs run on the RTL in one simulator process (random memory profile,
seed 1); a failure names the case and seed and keeps the trace (copied to /tmp/img_fails/).
"""
from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

from hdl.config import NV_SMALL
from verif.gen.img import PIXEL_FORMATS, ImgCase, generate
from verif.gen.run import prepare, run_programs
from verif.trace.runner import run_model
from needs import needs_verilator

FAIL_DIR = Path("/tmp/img_fails")
_MODES = ("mean", "offset", "nocvt")

#: (case id, seed, options): seeds fixed
CASES = (
    # every int8 pixel format once, the conversion mode cycling over mean/offset/none
    [(f"fmt{f}_{PIXEL_FORMATS[f][0]}", 0, ImgCase(f, mode=_MODES[i % 3]))
     for i, f in enumerate(sorted(PIXEL_FORMATS))]
    + [
        # channel post-extension: 2 lines (1-, 4- and 3-channel pixels), 4 lines (T_R8, S <= 2)
        ("ext2_R8_s3", 1, ImgCase(0, ext=2, s=3)),
        ("ext2_A8B8G8R8", 1, ImgCase(12, ext=2, s=1, mode="mean")),
        ("ext2_N444", 1, ImgCase(28, ext=2, s=1, mode="offset")),
        ("ext4_R8_s2", 1, ImgCase(0, ext=4, s=2, mode="mean")),
        ("ext4_R8_s1", 2, ImgCase(0, ext=4, s=1, mode="nocvt")),
        # X offsets inside the memory atom (1-, 2- and 4-byte planes)
        ("xoff5_R8", 3, ImgCase(0, xoff=5, mode="offset")),
        ("xoff1_A8R8G8B8", 3, ImgCase(13, xoff=1, mode="mean")),
        ("xoff3_N444", 3, ImgCase(29, xoff=3, mode="mean")),
        # mean on / off on the same drawn layer (same seed): only the conversion differs
        ("mean_on_B8G8R8A8", 4, ImgCase(14, mode="mean")),
        ("mean_off_B8G8R8A8", 4, ImgCase(14, mode="offset")),
        ("no_pad_X8B8G8R8", 5, ImgCase(16, pad=False)),
    ]
)
MODEL_SEEDS = range(6)


def _prepare(case_id, seed, case, root):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = generate(seed, NV_SMALL, case)
        prog.writer.name = f"{case_id}_s{seed}"
        return prepare(prog, root, NV_SMALL)


def test_cases_cover_every_format_and_option():
    assert {c.fmt for _, _, c in CASES} == set(PIXEL_FORMATS) and len(PIXEL_FORMATS) == 13
    assert {c.ext for _, _, c in CASES} == {1, 2, 4}
    assert {c.mode for _, _, c in CASES} >= set(_MODES)
    assert any(c.xoff for _, _, c in CASES)


def test_generated_image_programs_are_legal(tmp_path):
    """Every case (and more seeds of every format) runs to its end on the model
    (``prepare`` raises GenError naming the rule when it rejects one) and the written CRCs
    are the model's (the trace passes on the model)."""
    for case_id, seed, case in CASES:
        p = _prepare(case_id, seed, case, tmp_path)
        assert len(p.model.checks) == 1
    for fmt in PIXEL_FORMATS:
        for seed in MODEL_SEEDS:
            exts = (1, 2) + ((4,) if fmt == 0 else ())
            for ext in exts:
                _prepare(f"m{fmt}_e{ext}", seed, ImgCase(fmt, ext=ext), tmp_path)
    (res,) = run_model([_prepare(*CASES[0], tmp_path).dir], NV_SMALL)
    assert res.status == "PASS", res.message


def test_conversion_changes_output(tmp_path):
    """The mean/offset pair differ only in the conversion: their outputs differ (a wrong mean
    or ignored MEAN_FORMAT cannot pass both)."""
    a = _prepare("mean_on", 4, ImgCase(14, mode="mean"), tmp_path)
    b = _prepare("mean_off", 4, ImgCase(14, mode="offset"), tmp_path)
    assert a.model.checks[0].data != b.model.checks[0].data


@pytest.mark.rtl
@needs_verilator
def test_img_programs_rtl_vs_model(tmp_path):
    """Every case on the RTL writes exactly the model's bytes (one simulator process)."""
    preps = [_prepare(cid, seed, case, tmp_path) for cid, seed, case in CASES]
    outs = list(run_programs(preps, NV_SMALL, mem_profile="random", mem_seed=1, jobs=1,
                             per_process=len(preps)))
    assert len(outs) == len(preps)
    bad = []
    for o in outs:
        if not o.ok:
            FAIL_DIR.mkdir(exist_ok=True)
            dst = FAIL_DIR / o.dir.name
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(o.dir, dst)
            bad.append(f"{o.message}\n  copied to: {dst}")
    assert not bad, "\n".join(bad)
