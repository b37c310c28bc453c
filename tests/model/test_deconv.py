"""Deconvolution end to end (issue 32 item 5; verif/gen/deconv.py): the guide's phase
convolutions plus RUBIK contract, played as a register program on the model (and the RTL where
it builds RUBIK), every phase cube and the output compared byte for byte with a plain numpy
transposed convolution; the numpy side checked against loops; illegal parameters refused."""
from __future__ import annotations

import itertools
import random
import warnings

import numpy as np
import pytest

from hdl.config import NV_FULL, NV_SMALL, get_config
from verif.gen.deconv import (DeconvLayout, build_deconv, deconv_reference, pack_feature, pack_weights,
                              phase_kernel, random_case, transposed_conv, unpack_feature)
from verif.gen.writer import fill_crcs_from_model
from verif.trace.runner import run_model
from needs import needs_verilator

#: the configuration the RTL of RUBIK is built for (v2 register map: nv_large with BDMA and
#: RUBIK, the one simulator build README's BDMA and RUBIK sweeps use too; nv_large's build is
#: too long for CI, so every RTL test here is ``slow``)
RTL_SPEC = "nv_large+bdma=True+rubik=True+rubik_contract=True+rubik_reshape=True"
RTL_CFG = get_config(RTL_SPEC)
MODEL_SEEDS = range(50)
#: seeds played on the RTL in the default run: schedule a with data reuse and K = 66 (three
#: channel surfaces) in the CV memory, schedule b with two buffers and whole-T padding,
#: schedule b with one buffer and strides 3x3, a 1x1 phase output (packed surfaces)
RTL_CI_SEEDS = (0, 3, 12, 39)


def _unbuilt() -> list[str]:
    from hdl.support import unbuilt
    return unbuilt(RTL_CFG)


needs_rubik_rtl = pytest.mark.skipif(bool(_unbuilt()), reason=f"the RTL does not build {RTL_SPEC} "
                                     f"yet: {'; '.join(_unbuilt())} (hdl.support.unbuilt)")


def play_on_model(case, cfg, tmp_path):
    """Write ``case``'s trace with the model's CRCs; the model's TraceResult (it must finish)."""
    from verif.model import LimitationWarning
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LimitationWarning)
        res = fill_crcs_from_model(case.prog.writer, tmp_path / case.prog.name, cfg)
    assert len(res.checks) == len(case.checks), \
        f"the model did not finish: {res.status}: {res.message}\n  {case.describe()}"
    return res


# ------------------------------------------------------------------------------- numpy side

def _loops_transposed(x, w, sx, sy):
    C, H, W = x.shape
    K, R, S, _ = w.shape
    t = np.zeros((K, (H - 1) * sy + R, (W - 1) * sx + S), np.int64)
    for k, c, y, xx, r, s in itertools.product(range(K), range(C), range(H), range(W), range(R), range(S)):
        t[k, y * sy + r, xx * sx + s] += int(x[c, y, xx]) * int(w[k, r, s, c])
    return t


@pytest.mark.parametrize("seed", range(6))
def test_transposed_conv_matches_loops(seed):
    """transposed_conv is the textbook sum out[k, y*sy + r, x*sx + s] += in[c,y,x] * w[k,r,s,c]."""
    rng = np.random.default_rng(seed)
    C, H, W, K, R, S = (int(v) for v in rng.integers(1, 4, 6))
    sx, sy = (int(v) for v in rng.integers(1, 4, 2))
    x = rng.integers(-128, 128, (C, H, W)).astype(np.int8)
    w = rng.integers(-128, 128, (K, R, S, C)).astype(np.int8)
    assert np.array_equal(transposed_conv(x, w, sx, sy), _loops_transposed(x, w, sx, sy))


@pytest.mark.parametrize("seed", range(20))
def test_phase_convolutions_are_the_transposed_conv(seed):
    """The guide's method in plain numpy: phase (dy, dx)'s stride-1 convolution (zero padding
    ``pad``) with phase_kernel's sampled, flipped sub-kernel, interleaved as the contract does,
    is the window of the transposed convolution that deconv_reference defines."""
    rng = random.Random(seed)
    sx, sy = rng.randint(1, 4), rng.randint(1, 4)
    R, S = rng.randint(1, 3 * sy), rng.randint(1, 3 * sx)
    C, K, W, H = rng.randint(1, 3), rng.randint(1, 3), rng.randint(1, 5), rng.randint(1, 5)
    rs, ss = -(-R // sy), -(-S // sx)
    pl, pr, pt, pb = (rng.randint(0, k - 1) for k in (ss, ss, rs, rs))
    if W + pl + pr < ss or H + pt + pb < rs:
        pr, pb = ss - 1, rs - 1
        pl, pt = max(pl, ss - 1 - pr), max(pt, rs - 1 - pb)
    nr = np.random.default_rng(seed)
    x = nr.integers(-8, 8, (C, H, W)).astype(np.int8)
    w = nr.integers(-8, 8, (K, R, S, C)).astype(np.int8)
    wo, ho = pl + W + pr - ss + 1, pt + H + pb - rs + 1
    out = np.zeros((K, ho * sy, wo * sx), np.int64)
    xp = np.zeros((C, pt + H + pb, pl + W + pr), np.int64)
    xp[:, pt:pt + H, pl:pl + W] = x
    for dy, dx in itertools.product(range(sy), range(sx)):
        sub = phase_kernel(w, sx, sy, dx, dy).astype(np.int64)
        for k, o, q in itertools.product(range(K), range(ho), range(wo)):
            out[k, o * sy + dy, q * sx + dx] = np.sum(sub[k].transpose(2, 0, 1) * xp[:, o:o + rs, q:q + ss])
    ref = deconv_reference(x, w, sx, sy, (pl, pr, pt, pb), 0)
    assert np.array_equal(np.clip(out, -128, 127), ref)
    # the window: D[Y, X] = T[Y + (R'-1-PT)*sy, X + (S'-1-PL)*sx]
    t = transposed_conv(x, w, sx, sy)
    oy, ox = (rs - 1 - pt) * sy, (ss - 1 - pl) * sx
    win = t[:, oy:oy + ho * sy, ox:ox + wo * sx]
    assert np.array_equal(out[:, :win.shape[1], :win.shape[2]], win)
    assert not out[:, win.shape[1]:, :].any() and not out[:, :, win.shape[2]:].any()


def test_full_padding_gives_the_whole_transposed_conv():
    """pad = (S'-1, S'-1, R'-1, R'-1): the output is all of T (then zeros to a multiple of the
    strides); no padding: the guide's W' = W - S' + 1 phases."""
    rng = np.random.default_rng(7)
    x = rng.integers(-3, 4, (5, 3, 4)).astype(np.int8)
    w = rng.integers(-3, 4, (40, 5, 3, 5)).astype(np.int8)          # the guide's figure: x stride 2, y stride 3
    t = transposed_conv(x, w, 2, 3)
    full = deconv_reference(x, w, 2, 3, pad=(1, 1, 1, 1))
    assert full.shape == (40, 12, 10) and t.shape == (40, 11, 9)
    assert np.array_equal(full[:, :11, :9], t) and not full[:, 11:].any() and not full[:, :, 9:].any()
    valid = deconv_reference(x, w, 2, 3)
    assert valid.shape == (40, (3 - 2 + 1) * 3, (4 - 2 + 1) * 2)
    assert np.array_equal(valid, t[:, 3:3 + 6, 2:2 + 6])


def test_rounding_and_saturation():
    """shift: division rounding half away from zero, then int8 saturation."""
    x = np.array([[[1]]], np.int8)
    w = np.array([5, -5, 6, -6, 7, 127, -128, 3, -3], np.int8).reshape(9, 1, 1, 1)
    got = deconv_reference(x, w, 1, 1, shift=1)[:, 0, 0]
    assert got.tolist() == [3, -3, 3, -3, 4, 64, -64, 2, -2]
    w2 = np.full((1, 1, 1, 4), 127, np.int8)
    x2 = np.full((4, 1, 1), 127, np.int8)
    assert deconv_reference(x2, w2, 1, 1, shift=0)[0, 0, 0] == 127
    assert deconv_reference(-x2, w2, 1, 1, shift=0)[0, 0, 0] == -128


def test_memory_images_follow_format_rst():
    """Feature images: (c//32)*surface + h*line + w*32 + c%32; weights: groups of atomic K,
    1x1xatomic-C small cubes scanned C' -> K -> W -> H -> C, padded to 128 bytes."""
    rng = np.random.default_rng(1)
    cube = rng.integers(-128, 128, (40, 3, 2)).astype(np.int8)
    img = pack_feature(cube, 96, 320)
    assert img[1 * 320 + 2 * 96 + 1 * 32 + 5] == np.uint8(cube[37, 2, 1])
    assert np.array_equal(unpack_feature(img, 2, 3, 40, 96, 320), cube)
    w = rng.integers(-128, 128, (5, 2, 3, 7)).astype(np.int8)
    data = pack_weights(w, 4, 4)
    order = []
    for k0 in (0, 4):
        for c0 in (0, 4):
            for r, s, k in itertools.product(range(2), range(3), range(k0, min(k0 + 4, 5))):
                order += [w[k, r, s, c] for c in range(c0, min(c0 + 4, 7))]
    assert len(data) == 256 and data[:len(order)] == np.array(order, np.int8).tobytes()
    assert not any(data[len(order):])


# ------------------------------------------------------------------------------- the model

@pytest.mark.parametrize("seed", MODEL_SEEDS)
def test_model_random_deconvolution(seed, tmp_path):
    """Random legal deconvolution ``seed`` (verif.gen.deconv.random_case) on the model of nv_large
    with RUBIK: every phase cube and the contract's output equal the numpy transposed
    convolution byte for byte (the other memory untouched); the written trace replays with the
    model's CRCs."""
    case = random_case(seed, RTL_CFG)
    res = play_on_model(case, RTL_CFG, tmp_path)
    bad = case.compare([c.data for c in res.checks])
    assert bad is None, f"seed {seed}: {bad}\n  {case.describe()}"
    (again,) = run_model([tmp_path / case.prog.name], RTL_CFG)
    assert again.status == "PASS", again.message


def test_random_cases_cover_the_method():
    """Over the model seeds: both schedules (b with one and two buffers), data reuse and not,
    strides 1 to 5+ on each axis, padded sub-kernels up to the whole T, weights kept
    (SKIP_WEIGHT_RLS), K over 64 (three atoms), a 1x1 phase output, surfaces in the CV memory,
    saturated and unsaturated outputs."""
    seen = set()
    for seed in MODEL_SEEDS:
        c = random_case(seed, RTL_CFG)
        g, lay = c.geom, c.layout
        seen |= {f"schedule {lay.schedule}" + (f"/{min(lay.buffers, g.sy)}" if lay.schedule == "b" else ""),
                 f"reuse {lay.reuse_data}", f"sx {min(g.sx, 5)}", f"sy {min(g.sy, 5)}"}
        seen.add("full pad" if (g.pl, g.pt) == (g.Ss - 1, g.Rs - 1) and g.Ss * g.Rs > 1 else "")
        seen.add("no pad" if (g.pl, g.pr, g.pt, g.pb) == (0, 0, 0, 0) else "")
        seen.add("skip weights" if any("SKIP_WEIGHT_RLS" in lay_.desc for lay_ in c.prog.layers) else "")
        seen.add("K>64" if g.K > 64 else "")
        seen.add("1x1" if g.wo == g.ho == 1 else "")
        seen.add("CV" if 0 in lay.rams.values() else "")
        sat = np.mean(np.abs(c.expected.astype(int)) >= 127)
        seen.add("saturated" if sat > 0.2 else "unsaturated" if sat == 0 else "")
    want = {"schedule a", "schedule b/1", "schedule b/2", "reuse True", "reuse False", "full pad",
            "no pad", "skip weights", "K>64", "1x1", "CV", "saturated", "unsaturated"}
    want |= {f"{ax} {n}" for ax in ("sx", "sy") for n in range(1, 6)}
    assert want <= seen, want - seen


def test_fixed_deconvolution_on_the_model(tmp_path):
    """The unit description's contract figure (x stride 2, y stride 3), 40 kernels 5x3x5 on a
    4x3x5 input, both schedules and the whole-T padding: the model writes the reference."""
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (5, 3, 4)).astype(np.int8)
    w = rng.integers(-128, 128, (40, 5, 3, 5)).astype(np.int8)
    for i, (schedule, pad) in enumerate((("a", (0, 0, 0, 0)), ("b", (0, 0, 0, 0)), ("a", (1, 1, 1, 1)))):
        case = build_deconv(RTL_CFG, x, w, 2, 3, pad=pad, shift=9, layout=DeconvLayout(schedule=schedule),
                            name=f"deconv_fixed_{i}")
        assert len(case.prog.layers) == (7 if schedule == "a" else 9)
        res = play_on_model(case, RTL_CFG, tmp_path)
        assert case.compare([c.data for c in res.checks]) is None, case.describe()


def test_compare_names_the_first_wrong_element(tmp_path):
    """A wrong byte in the output is reported as layer, w/h/c, expected and got; a byte written
    into the unused memory too."""
    case = random_case(0, RTL_CFG)
    res = play_on_model(case, RTL_CFG, tmp_path)
    datas = [bytearray(c.data) for c in res.checks]
    i = next(k for k, c in enumerate(case.checks) if c.label.endswith("output)") and c.surface)
    o = case.output
    off = 1 * o.surf + 2 * o.line + 3 * 32 + 4          # c = 36, h = 2, w = 3
    datas[i][off] ^= 0x40
    msg = case.compare(datas)
    exp = int(case.expected[36, 2, 3])
    assert msg == (f"{case.checks[i].label} at w=3 h=2 c=36: expected {exp}, got "
                   f"{int(np.int8(np.uint8(exp & 0xFF) ^ 0x40))} (1 of {case.expected.size} elements differ)")
    datas[i][off] ^= 0x40
    j = next(k for k, c in enumerate(case.checks) if c.surface is None)
    datas[j][5] = 1
    assert "expected 0 (never written)" in case.compare(datas)


# nv_full plays the same trace (registers by name, its v1 map: addresses, strides and byte
# counts in bits 31:5 or 31:7, which the model reads as bytes through GroupView.bytes)
@pytest.mark.parametrize("seed", range(10))
def test_model_nv_full(seed, tmp_path):
    """nv_full (v1 register map): the same generated programs, the same reference."""
    case = random_case(seed, NV_FULL)
    res = play_on_model(case, NV_FULL, tmp_path)
    assert case.compare([c.data for c in res.checks]) is None, case.describe()


def test_other_rubik_configurations(tmp_path):
    """nv_medium_1024_full with RUBIK (atomic C 32, 32 CBUF banks of 32-byte entries) and nv_large
    with RUBIK but no secondary memory: a few cases each give the reference."""
    for spec in ("nv_medium_1024_full+rubik=True+rubik_contract=True+rubik_reshape=True",
                 RTL_SPEC + "+secondary_memif=False"):
        cfg = get_config(spec)
        for seed in range(4):
            case = random_case(seed, cfg)
            res = play_on_model(case, cfg, tmp_path)
            assert case.compare([c.data for c in res.checks]) is None, f"{spec}: {case.describe()}"


def test_run_registers_the_kind(tmp_path):
    """``verif.gen.run`` kind ``deconv``: for configurations with RUBIK (scripts/sweep.py --unit
    deconv), legal on the model (GenError otherwise); refused without RUBIK."""
    from verif.gen.run import generate, kinds_for, prepare
    assert "deconv" in kinds_for(RTL_CFG) and "deconv" not in kinds_for(NV_SMALL)
    p = prepare(generate("deconv", 5, RTL_CFG), tmp_path, RTL_CFG)
    assert len(p.model.checks) == len(p.prog.writer.checks) > 0
    with pytest.raises(ValueError, match="no RUBIK"):
        generate("deconv", 0, NV_SMALL)


# ------------------------------------------------------------------------------- refusals

def _x(c=3, h=4, w=5):
    return np.ones((c, h, w), np.int8)


def _w(k=4, r=3, s=3, c=3):
    return np.ones((k, r, s, c), np.int8)


@pytest.mark.parametrize("kwargs, match", [
    (dict(shift=17), "shift=17"),
    (dict(shift=-1), "shift=-1"),
    (dict(pad=(2, 0, 0, 0)), "pad left=2"),
    (dict(pad=(0, 0, 0, 5)), "pad bottom=5"),
    (dict(pad=(0, 0)), "pad="),
    (dict(sx=0), "sx=0"),
    (dict(sy=33), "sy=33"),
    (dict(kernel=_w(c=4)), "kernel: 4 channels"),
    (dict(kernel=_w(k=2000), sx=2, sy=3), "K=2000"),
    (dict(feature=_x().astype(np.int16) * 200), "feature: int8 values"),
    (dict(feature=np.ones((3, 4), np.int8)), "feature: expected 3 dimensions"),
    (dict(feature=_x(w=1, h=1)), "smaller than the sub-kernel"),
    (dict(kernel=_w(r=70, s=3), sx=2, sy=2), "sub-kernel 35x2"),
    (dict(layout=DeconvLayout(schedule="c")), "schedule='c'"),
    (dict(layout=DeconvLayout(schedule="b", buffers=3)), "buffers=3"),
    (dict(layout=DeconvLayout(in_gap=(16, 0))), "in_gap=16"),
    (dict(layout=DeconvLayout(data_banks=16)), "data_banks=16"),
    (dict(layout=DeconvLayout(grains=5000)), "grains=5000"),
    (dict(layout=DeconvLayout(rams=dict(output=0)), cfg=RTL_CFG.derive(name="x", secondary_memif=False)),
     r"rams\['output'\]=CV"),
    (dict(layout=DeconvLayout(rams=dict(nowhere=1))), "nowhere"),
    (dict(cfg=NV_SMALL), "no RUBIK"),
])
def test_illegal_parameters_raise(kwargs, match):
    args = dict(cfg=RTL_CFG, feature=_x(), kernel=_w(), sx=2, sy=2)
    args.update(kwargs)
    cfg, x, w, sx, sy = (args.pop(k) for k in ("cfg", "feature", "kernel", "sx", "sy"))
    with pytest.raises(ValueError, match=match):
        build_deconv(cfg, x, w, sx, sy, **args)


def test_input_too_large_for_cbuf():
    with pytest.raises(ValueError, match="exceed .* CBUF banks"):
        build_deconv(RTL_CFG, np.ones((64, 300, 200), np.int8), _w(c=64), 2, 2)


# ------------------------------------------------------------------------------- the RTL

def _play_on_rtl(seeds, tmp_path):
    from verif.axi_slave import MemTiming
    from verif.trace.runner import run
    cases, model = {}, {}
    for s in seeds:
        case = random_case(s, RTL_CFG)
        model[case.prog.name] = play_on_model(case, RTL_CFG, tmp_path)
        cases[case.prog.name] = case
    res = {r.name: r for r in run([tmp_path / n for n in cases], "rtl", RTL_CFG, jobs=1,
                                  timing=MemTiming.named("random", seed=1),
                                  traces_per_process=len(cases))}
    bad = []
    for name, case in cases.items():
        r = res.get(name)
        if r is None or len(r.checks) != len(case.checks):
            bad.append(f"{name}: {r.status if r else 'no result'}: {r.message if r else ''}\n  {case.describe()}")
            continue
        # the RTL's regions: a check that passed has the model's CRC (the trace's golden), so
        # its bytes are the model's (the testbench returns the bytes of failing checks only);
        # those bytes, or the RTL's own where a check failed, against the numpy reference
        datas = [c.data if not c.ok else m.data for c, m in zip(r.checks, model[name].checks)]
        diff = case.compare(datas)
        if r.status != "PASS":
            bad.append(f"{name}: {r.status}: {r.message}; against numpy: {diff}\n  {case.describe()}")
        elif diff:
            bad.append(f"{name}: {diff}\n  {case.describe()}")
    assert not bad, "\n".join(bad)


@pytest.mark.slow
@pytest.mark.rtl
@needs_verilator
@needs_rubik_rtl
def test_rtl_deconvolution(tmp_path):
    """A few random deconvolutions on the RTL of nv_large with RUBIK (random memory timing): the
    bytes equal the numpy reference (and the model's CRCs)."""
    _play_on_rtl(RTL_CI_SEEDS, tmp_path)


@pytest.mark.slow
@pytest.mark.rtl
@needs_verilator
@needs_rubik_rtl
def test_rtl_deconvolution_all_seeds(tmp_path):
    """All model seeds on the RTL of nv_large with RUBIK."""
    _play_on_rtl(MODEL_SEEDS, tmp_path)
