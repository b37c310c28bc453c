"""nv_full's image input in INT16 and FP16 (verif/model/conv.py ``_fetch_pixels``,
``cdma_convert``; verif/model/conv_fp16.py ``conv_img_fp16``) against plain-Python references:
the converter's int17 value and its fp16 rounding per element, and the FP16 image convolution's
atoms (chunks of 64 elements of the pre-extended window, outermost; kernel rows, or groups of
post-extended lines whose windows follow one another) built one output at a time. CMAC's word
and CACC's accumulation (``cmac_words``, ``cacc_add``) are tested in test_conv_fp16.py."""
from __future__ import annotations

import math
import random
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest

from hdl.config import get_config
from verif.gen.common import fp16_of as f16
from verif.model.conv import cdma_convert
from verif.model.conv_fp16 import cacc_add, cacc_to_fp32, cmac_words, conv_img_fp16

FULL = get_config("nv_full+feature_data_type=int8_int16_fp16")


def ref_cell(x: int, signed: bool, in_bits: int, off: int, scale: int, t: int) -> int:
    """The converter cell's int17 value: x extended from ``in_bits``, minus the offset, times
    the scale, shifted right by t rounding half away from zero, saturated to int17."""
    if signed and x >= 1 << (in_bits - 1):
        x -= 1 << in_bits
    p = (x - off) * scale
    q = math.floor(abs(p) / 2 ** t + 0.5) if t < 64 else 0
    q = q if p >= 0 else -q
    return max(-65536, min(65535, q))


@pytest.mark.parametrize("in_bits", [8, 16])
def test_converter_int16_and_fp16_outputs(in_bits):
    rng = random.Random(in_bits)
    raw = np.array([rng.getrandbits(in_bits) for _ in range(3000)], np.int64)
    for _ in range(20):
        signed, off, scale, t = rng.random() < 0.5, rng.randint(-32768, 32767), \
            rng.randint(-32768, 32767), rng.randint(0, 40)
        v16 = cdma_convert(raw, signed, off, scale, t, 16, in_bits)
        v17 = cdma_convert(raw, signed, off, scale, t, 17, in_bits)
        want = [ref_cell(int(x), signed, in_bits, off, scale, t) for x in raw]
        assert v17.tolist() == want
        assert v16.tolist() == [max(-32768, min(32767, q)) for q in want]
        # FP16 output: the int17 value to fp16, nearest even, +-65504 at most, never -0
        fp = np.clip(v17, -65504, 65504).astype(np.float16).view(np.uint16)
        assert fp.tolist() == [0 if q == 0 else f16(max(-65504, min(65504, q))) for q in want]


def ref_img_fp16(lines, wts, ho, wo, sx, sy, pt, pad, ext, cpix):
    """One output at a time: the atoms of (chunk, kernel row) or (line group) in CSC's order,
    each the concatenated windows of its lines, through CMAC's word and CACC's sum."""
    h, n = lines.shape
    k, r, _, cw = wts.shape
    out = np.zeros((k, ho, wo), np.int64)
    parts = [(c, min(cw, c + 64)) for c in range(0, cw, 64)] if ext == 1 else [(0, cw)]
    groups = [[ri] for ri in range(r)] if ext == 1 else \
        [list(range(g, min(r, g + ext))) for g in range(0, r, ext)]
    for y in range(ho):
        for x in range(wo):
            acc = np.zeros((k, 1), object)
            nan = np.full((k, 1), -1, np.int64)
            for c0, c1 in parts:
                for rows in groups:
                    d, w = [], []
                    for ri in rows:
                        line = y * sy - pt + ri
                        for j in range(c0, c1):
                            d.append(int(lines[line, x * sx * cpix + j]) if 0 <= line < h else pad)
                        w.append(wts[:, ri, 0, c0:c1])
                    acc, nan = cacc_add(acc, nan, cmac_words(np.concatenate(w, 1), np.array([d])))
            out[:, y, x] = cacc_to_fp32(acc, nan)[:, 0]
    return out


@pytest.mark.parametrize("cpix, s, r, ext, sx, sy, pt", [
    (4, 20, 2, 1, 1, 1, 1),      # cw 80: two chunks (64 + 16), chunk outermost
    (3, 3, 3, 2, 2, 1, 0),       # two-line post-extension, a partial last group
    (1, 9, 7, 4, 1, 2, 3),       # four lines, top padding rows of CSC's pad value
])
def test_conv_img_fp16_atoms(cpix, s, r, ext, sx, sy, pt):
    rng = random.Random(cpix * 100 + ext)
    h, wpx, k = 6, 26, 5
    cw = s * cpix
    wo = (wpx - s) // sx + 1
    ho = (pt + h - r) // sy + 1
    vals = [f16(rng.uniform(-4, 4)) for _ in range(h * wpx * cpix)]
    vals[3] = 0x7E05                                       # a NaN in the data
    cube = np.array(vals, np.int64).reshape(h, wpx, cpix).transpose(2, 0, 1)
    wts = np.array([f16(rng.uniform(-1, 1)) if rng.random() < 0.9 else 0
                    for _ in range(k * r * cw)], np.int64).reshape(k, r, 1, cw)
    pad = f16(0.5)
    got = conv_img_fp16(cube, wts, ho, wo, sx, sy, pt, pad, ext)
    lines = cube.transpose(1, 2, 0).reshape(h, wpx * cpix)
    assert np.array_equal(got, ref_img_fp16(lines, wts, ho, wo, sx, sy, pt, pad, ext, cpix))


def test_image_programs_of_every_16_bit_container_on_the_model():
    """The image generator on nv_full draws INT16 and FP16 layers from 8-bit, 16-bit, packed
    10-bit and fp16 pixels, with and without post-extension; each runs on the model, and their
    outputs vary (not mostly saturated or NaN)."""
    from verif.gen.run import generate, prepare
    seen, varied, n = set(), 0, 0
    root = Path(tempfile.mkdtemp())
    for seed in range(40):
        prog = generate("img", seed, FULL)
        d = prog.layers[0].desc
        if not d.startswith(("int16 ", "fp16 ")):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = prepare(prog, root, FULL)
        prec, fmt = d.split()[:2]
        seen.add((prec, "10" if "10G10" in fmt or "10U10" in fmt or "Y10V10" in fmt else
                  "f" if fmt.endswith("_F") else "8" if "8" in fmt else "16"))
        seen.add(("ext", d.split("ext=")[1].split()[0]))
        data = max((np.frombuffer(bytes(c.data), "<u2") for c in p.model.checks),
                   key=lambda a: int((a != 0).sum()))
        n += 1
        varied += len(set(data.tolist())) >= 16
    assert {("int16", "8"), ("int16", "16"), ("int16", "10"), ("fp16", "8"), ("fp16", "10"),
            ("ext", "1"), ("ext", "2"), ("ext", "4")} <= seen, seen
    assert varied >= n * 3 // 4, (varied, n)


@pytest.mark.parametrize("case, match", [
    (dict(fmt=12, mode="nocvt", prec=1), "needs CDMA.D_CVT_CFG.CVT_EN"),     # 8-bit -> INT16
    (dict(fmt=3, mode="nocvt", prec=2), "needs CDMA.D_CVT_CFG.CVT_EN"),      # int16 -> FP16
    (dict(fmt=3, mode="offset", prec=0), "shrink path is not modelled"),     # int16 -> INT8
    (dict(fmt=5, mode="offset", prec=1), "not a conversion format.rst lists"),   # fp16 -> INT16
])
def test_image_precisions_the_model_refuses(case, match, tmp_path):
    """Image precisions outside format.rst's conversion table (or not modelled) are refused
    with a ModelConfigError naming the registers."""
    from verif.gen.img import ImgCase, generate
    from verif.gen.run import GenError, prepare
    with pytest.raises(GenError, match=match):
        prepare(generate(1, FULL, ImgCase(**case)), tmp_path, FULL)
