"""SDP operand DMAs against the operands their sub-units take from memory (issue 36 item 1), and
1 x 1 cubes moved as one run (NVIDIA's ``cfg_mode_1x1_pack``), on the numpy model.

The rule (verif/model/sdp.py ``SdpCore._check`` and ``untaken_operand_fits``; settled on NVIDIA's
nv_small RTL with programs of verif/gen/sdp.py): an operand taken from memory that its DMA does
not fetch hangs the layer; an operand fetched that nothing takes is ignored by the data path,
but SDP_RDMA's group never completes, so the next layer that needs SDP_RDMA hangs; with
DATA_USE = BOTH and the other operand taken, the layer completes only while the untaken operand
fits NVIDIA's FIFOs. The programs come from the generator with ``force`` (one layer unless
``layers``), so the model runs them exactly as the trace player does.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from hdl.config import NV_SMALL
from verif.gen.run import generate as generate_kind, prepare
from verif.gen.sdp import generate
from verif.model.formats import ModelConfigError
from verif.model.memory import Memory
from verif.trace.runner import run_model

from test_sdp import ATOM, fetch, layer, place_cube, setf
from verif.model.sdp import SdpCore

OFF = dict(take=(False, False), disable=1, use=0, size=0, mode=0)


def run(tmp_path, seed, *, layers=None, **force):
    """The model's result of generator program ``seed`` with ``force``: (completed, message,
    bytes of each check)."""
    force.setdefault("BN", OFF)
    prog = generate(seed, NV_SMALL, mismatch=True, force=force, layers=layers)
    prog.writer.name += "_" + "_".join(f"{k}{v}" for k, v in sorted(force.items()) if k == "cube")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = prepare(prog, tmp_path, NV_SMALL)
    return p.prog.legal, p.model.message, [c.data for c in p.model.checks]


@pytest.mark.parametrize("take,use,disable", [
    ((True, False), 0, 0),      # ALU from memory, DATA_USE=MUL
    ((False, True), 1, 0),      # MUL from memory, DATA_USE=ALU
    ((True, True), 1, 0),       # both from memory, only ALU fetched
    ((True, False), 2, 1),      # ALU from memory, DMA disabled
])
def test_operand_taken_but_not_fetched_hangs(tmp_path, take, use, disable):
    """NVIDIA's core waits for an operand no DMA sends: rejected, naming both registers."""
    done, msg, _ = run(tmp_path, 11, cube=(3, 2, 12),
                       BS=dict(take=take, disable=disable, use=use, size=0, mode=1))
    assert not done
    assert "ModelConfigError" in msg and "SDP_RDMA.D_BRDMA_CFG.BRDMA_" in msg and "SDP.D_DP_BS" in msg, msg


@pytest.mark.parametrize("use", [0, 1, 2])
def test_untaken_fetch_completes_as_if_not_fetched(tmp_path, use):
    """An operand fetched that nothing takes does not change the output (NVIDIA's RTL
    completed such layers with these bytes): the same trace with the DMA disabled (its
    D_BRDMA_CFG write with DISABLE set) writes the same bytes."""
    force = dict(cube=(7, 3, 20), BS=dict(take=(False, False), disable=0, use=use, size=1, mode=1))
    force["BN"] = OFF
    prog = generate(12, NV_SMALL, mismatch=True, force=force)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = prepare(prog, tmp_path, NV_SMALL)
    assert p.prog.legal, p.model.message
    cfg = next(p.dir.glob("*.cfg"))
    text = cfg.read_text()
    head = "reg_write(NVDLA_SDP_RDMA.D_BRDMA_CFG_0, "
    i = text.index(head) + len(head)
    j = text.index(")", i)
    assert int(text[i:j], 0) & 1 == 0
    cfg.write_text(text[:i] + hex(int(text[i:j], 0) | 1) + text[j:])
    (res,) = run_model([p.dir], NV_SMALL)
    assert res.status == "PASS", res.message        # the CRCs of the fetching run
    assert [c.data for c in res.checks] == [c.data for c in p.model.checks]


# NVIDIA's nv_small RTL, DATA_USE = BOTH with one operand taken: the largest untaken operand (in
# memory atoms) that completes, by DATA_SIZE, DATA_MODE and W x H (see untaken_operand_fits)
BOTH_LIMITS = [
    # (size, mode, (W, H), atoms that complete, atoms that hang)
    (0, 1, (4, 1), 4, 5), (1, 1, (3, 1), 3, 4),              # PER_ELEMENT, one atom per surface
    (0, 0, (1, 1), 4, 5), (1, 0, (1, 1), 3, 4),              # PER_KERNEL, W x H = 1
    (0, 0, (4, 1), 2, 3), (1, 0, (4, 1), 1, 2),              # PER_KERNEL, W x H = 4
]


@pytest.mark.parametrize("size,mode,wh,fits,hangs", BOTH_LIMITS)
@pytest.mark.parametrize("untaken", ["ALU", "MUL"])
def test_both_with_one_untaken_operand_limit(tmp_path, size, mode, wh, fits, hangs, untaken):
    take = (untaken != "ALU", untaken != "MUL")
    for atoms, completes in ((fits, True), (hangs, False)):
        # PER_ELEMENT: one channel atom, `atoms` pixels; PER_KERNEL: `atoms` channel atoms
        cube = (atoms, 1, ATOM) if mode else (*wh, ATOM * atoms)
        done, msg, _ = run(tmp_path / f"{atoms}", 13, cube=cube,
                           BS=dict(take=take, disable=0, use=2, size=size, mode=mode))
        assert done == completes, (atoms, msg)
        if not done:
            assert "the layer hangs" in msg and "BRDMA_DATA_USE=BOTH" in msg, msg


def test_untaken_fetch_wedges_sdp_rdma_for_the_next_layer(tmp_path):
    """SDP_RDMA's group of a layer that fetched an untaken operand never completes: the next
    SDP layer (which needs MRDMA) hangs; the model says so at that layer."""
    done, msg, _ = run(tmp_path, 14, layers=2, cube=(3, 2, 12),
                       BS=dict(take=(False, False), disable=0, use=1, size=0, mode=0))
    assert not done
    assert "SDP layer 1: SDP_RDMA is still busy" in msg and "BRDMA_DATA_USE=ALU" in msg, msg
    done, msg, _ = run(tmp_path / "ok", 14, layers=2, cube=(3, 2, 12),
                       BS=dict(take=(False, False), disable=1, use=1, size=0, mode=0))
    assert done, msg


def test_generator_covers_every_combination(tmp_path):
    """The ``sdp_operands`` kind draws, over 60 seeds, each of: missing operand (rejected),
    untaken fetch that completes, BOTH with one untaken that completes and that hangs, and
    matching DMAs; the model completes some and rejects others."""
    seen = set()
    for seed in range(60):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = prepare(generate_kind("sdp_operands", seed, NV_SMALL), tmp_path, NV_SMALL)
        d = p.prog.describe()
        msg = p.model.message
        if "does not supply" in msg or "DISABLE=YES while" in msg:
            seen.add("missing")
        elif "the layer hangs" in msg:
            seen.add("both-overflow")
        elif p.prog.legal:
            seen.add("completes")
            if "fetches alu+mul" in d and ("takes alu from" in d or "takes mul from" in d):
                seen.add("both-fits")
    assert seen >= {"missing", "both-overflow", "completes", "both-fits"}, seen


def test_one_by_one_cube_is_one_run():
    """A 1 x 1 x 16 layer: MRDMA reads both atoms from the base address on and WDMA writes
    them there, whatever the surface strides (NVIDIA's cfg_mode_1x1_pack)."""
    mem = Memory()
    sdp, rdma = layer(1, 1, 16)
    x = np.arange(-8, 8, dtype=np.int64).reshape(16, 1, 1)
    place_cube(mem, 0x1000, x, 8, 8)                     # contiguous input
    for r, f, v in (("D_SRC_BASE_ADDR_LOW", "SRC_BASE_ADDR_LOW", 0x1000),
                    ("D_SRC_LINE_STRIDE", "SRC_LINE_STRIDE", 0x40),
                    ("D_SRC_SURFACE_STRIDE", "SRC_SURFACE_STRIDE", 0x200)):
        setf(rdma, r, **{f: v})
    for r, f, v in (("D_DST_BASE_ADDR_LOW", "DST_BASE_ADDR_LOW", 0x4000),
                    ("D_DST_LINE_STRIDE", "DST_LINE_STRIDE", 0x20),
                    ("D_DST_SURFACE_STRIDE", "DST_SURFACE_STRIDE", 0x20)):
        setf(sdp, r, **{f: v})
    for sub in ("BS", "BN"):
        setf(sdp, f"D_DP_{sub}_CFG", **{f"{sub}_BYPASS": 1})
    SdpCore(NV_SMALL, mem).run(rdma.view(), sdp.view(), None)
    assert fetch(mem, 0x4000, 16, 1, 1, 8, 8).ravel().tolist() == list(range(-8, 8))
    assert bytes(mem.read(0x4020, 8)) == bytes(8)          # not at the surface stride


def test_single_output_untaken_fetch_finishes_once(tmp_path):
    """A 1 x 1 x one-atom fetch that nothing takes is one output, which the core's operand
    packer keeps: its DMA finishes (NVIDIA's RTL ran the next layer), the packer stays full, so
    the same fetch in the next layer wedges SDP_RDMA and the third layer hangs (NVIDIA's RTL:
    layer 1 done, no interrupt for layer 2)."""
    bs = dict(take=(True, False), disable=0, use=2, size=0, mode=0)     # MUL fetched, not taken
    done, msg, _ = run(tmp_path / "2", 16, layers=2, cube=(1, 1, 8), BS=bs)
    assert done, msg
    done, msg, _ = run(tmp_path / "3", 16, layers=3, cube=(1, 1, 8), BS=bs)
    assert not done and "SDP layer 2: SDP_RDMA is still busy" in msg, msg


def test_taking_an_operand_left_in_the_packer_hangs():
    """After a single-output fetch nothing took, a layer that takes that operand from memory
    would first take the stale one with its cube end: rejected, naming the sub-unit."""
    core = SdpCore(NV_SMALL, Memory())
    sdp, rdma = layer(1, 1, 8)
    for sub in ("BS", "BN"):
        setf(sdp, f"D_DP_{sub}_CFG", **{f"{sub}_BYPASS": 1})
    setf(rdma, "D_BRDMA_CFG", BRDMA_DISABLE=0, BRDMA_DATA_USE=1)       # ALU fetched, BS bypassed
    core.run(rdma.view(), sdp.view(), None)
    assert core.stale_ops == {("BS", "ALU")} and core.rdma_wedge is None
    setf(sdp, "D_DP_BS_CFG", BS_BYPASS=0, BS_ALU_BYPASS=0, BS_MUL_BYPASS=1)
    setf(sdp, "D_DP_BS_ALU_CFG", BS_ALU_SRC=1)
    with pytest.raises(ModelConfigError, match="BS ALU operand packer still holds"):
        core.run(rdma.view(), sdp.view(), None)


def test_one_byte_operands_refused_in_int16_and_fp16(tmp_path):
    """nv_full's SDP_RDMA in INT16 or FP16 with an enabled operand DMA reading one-byte
    components: NVIDIA's RTL sizes its fetches for two-byte elements whenever PROC_PRECISION is
    not INT8, asserts that INT16 never does it (NV_NVDLA_SDP_BRDMA_ig.v: "NO SIZE of 1Byte
    supported if proc precision is INT16") and, run anyway, feeds later layers the surplus it
    fetched (an FP16 program hung on it); the model refuses the layer. Two-byte operands and
    INT8's one-byte ones run."""
    from hdl.config import get_config
    from verif.gen.run import GenError
    cfg = get_config("nv_full+feature_data_type=int8_int16_fp16")
    take = {"take": (True, False), "disable": 0, "use": 1, "mode": 0}
    for prec, name in ((1, "INT16"), (2, "FP16")):
        with pytest.raises(GenError, match=f"ONE_BYTE with PROC_PRECISION={name}"):
            prepare(generate(1, cfg, layers=1, force={"prec": prec, "BS": dict(take, size=0)}),
                    tmp_path, cfg)
    for prec, size in ((1, 1), (2, 1), (0, 0)):
        p = prepare(generate(1, cfg, layers=1, force={"prec": prec, "BS": dict(take, size=size)}),
                    tmp_path, cfg)
        assert p.prog.legal and len(p.model.checks) == 1
