"""Random register programs (verif/gen/, issue 11 items 1, 2, 4, 9): the trace writer, the
generators' legality on the model, the model's rejection of programs NVIDIA's hardware cannot
complete, and a small fixed set of seeds per layer type on the RTL against the model
(``scripts/sweep.py`` runs many more).
"""
from __future__ import annotations

import warnings
import zlib

import pytest

from hdl.config import NV_SMALL
from verif.gen.run import GenError, first_difference, generate, prepare, run_programs
from verif.gen.dc import generate as dc_generate
from verif.gen.writer import TraceWriter, dat_text, reg_value
from verif.trace.parser import load_dat, load_trace
from verif.trace.runner import run_model
from needs import needs_verilator

#: direct-convolution seeds played on the RTL in CI: small layers (a few hundred to 2,000 atomic
#: operations per layer, one to three layers) covering data reuse (all, partial, none kept),
#: weight reuse, dilation, strides, padding; 10 and 14 with SDP operands from memory on the fly
#: (10: three layers, BRDMA; 14: BRDMA per kernel and NRDMA per element)
DC_CI_SEEDS = (0, 4, 11, 10, 14)
#: sdp_operands seeds played on the RTL in CI (issue 36 item 1): 1 completes with DATA_USE = BOTH
#: and an untaken operand that fits, 10 with BRDMA and NRDMA fetching operands nothing takes;
#: 0 hangs with DATA_USE = BOTH and an untaken operand that does not fit, 3 on an ALU operand
#: taken from memory that BRDMA (DATA_USE = MUL) does not fetch
SDP_OPERANDS_CI_SEEDS = (0, 1, 3, 10)
#: seeds per layer type played on the RTL in CI (a few programs each, one to three layers in
#: both ping-pong groups)
CI_SEEDS = {"sdp": (0, 1, 2), "pdp": (0, 1, 2), "cdp": (0, 1, 2), "sdp_operands": SDP_OPERANDS_CI_SEEDS,
            "dc": DC_CI_SEEDS, "img": (0, 1)}
MODEL_SEEDS = range(40)


def test_reg_value_fields():
    """Fields by name through the register map: signed fields take negative values; values
    that do not fit raise."""
    v = reg_value("SDP", "D_DP_BS_CFG", BS_BYPASS=1, BS_ALU_ALGO=2, BS_RELU_BYPASS=1)
    assert v == 1 | (2 << 2) | (1 << 6)
    assert reg_value("PDP", "D_POOLING_PADDING_CFG", PAD_LEFT=3, PAD_BOTTOM=7) == 3 | (7 << 12)
    assert reg_value("SDP", "D_CVT_OFFSET", CVT_OFFSET=-1) == 0xFFFF_FFFF
    assert reg_value("SDP", "D_DP_BS_ALU_SRC_VALUE", BS_ALU_OPERAND=-2) == 0xFFFE
    with pytest.raises(ValueError):
        reg_value("SDP", "D_CVT_SHIFT", CVT_SHIFT=64)
    with pytest.raises(ValueError):
        reg_value("SDP", "D_CVT_SHIFT", CVT_SHIFT=-1)          # unsigned field
    with pytest.raises(KeyError):
        reg_value("SDP", "D_CVT_SHIFT", NO_SUCH_FIELD=0)


def test_writer_round_trip(tmp_path):
    """What the writer writes is what the parser reads: commands in order, images byte for
    byte, placeholder and explicit CRCs."""
    data = bytes(range(256)) * 3 + b"\x01\x02"
    w = TraceWriter("rt")
    w.mem_load(0x8000_0000, data, init=True)
    w.mem_init(0x8010_0000, 0x40)
    w.reg_write(("SDP", "S_POINTER"), 1, "group 1")
    w.reg_write("NVDLA_SDP.D_OP_ENABLE_0", 1)
    w.intr_notify("SDP_1", "s1")
    w.poll(("SDP", "D_OP_ENABLE"), 0)
    w.check_crc("s1", 0x8010_0000, 0x40)
    w.check_crc("s1", 0x8000_0000, len(data), zlib.crc32(data))
    d = tmp_path / "rt"
    w.write(d)
    t = load_trace(d)
    assert [c.kind for c in t.commands] == ["mem_init", "mem_load", "mem_init", "reg_write", "reg_write",
                                             "intr_notify", "poll_reg_equal", "check_crc", "check_crc"]
    assert t.commands[3].args["reg"].trace_name == "NVDLA_SDP.S_POINTER_0"
    assert [c.args["crc"] for c in t.commands if c.kind == "check_crc"] == [0, zlib.crc32(data)]
    assert load_dat(d / t.commands[1].args["file"]) == [(0, data)]
    w.write(d, [5, 6])
    assert [c.args["crc"] for c in load_trace(d).commands if c.kind == "check_crc"] == [5, 6]
    with pytest.raises(ValueError):
        w.write(d, [1])
    assert dat_text(b"\xab").strip() == "{offset:0x0, size:1, payload:0xAB}"


def test_first_difference_names_unit_and_element(tmp_path):
    prog = generate("pdp", 3, NV_SMALL)
    p = prepare(prog, tmp_path, NV_SMALL)
    c = p.model.checks[0]
    got = bytearray(c.data)
    got[0] ^= 0xFF
    rep = first_difference(p.dir, c.base, c.data, bytes(got), NV_SMALL)
    assert rep.startswith("first wrong byte: PDP layer 0 at w=0 h=0 c=0") and "1 of" in rep


@pytest.mark.parametrize("kind", ["sdp", "pdp", "cdp", "dc", "img"])
def test_generated_programs_are_legal(kind, tmp_path):
    """Every generated program runs to its end on the model (``prepare`` raises GenError when
    the model rejects one with ModelConfigError), with output to check, and the generators
    use both ping-pong groups back to back (multi-layer programs)."""
    layers = []
    for seed in MODEL_SEEDS:
        p = prepare(generate(kind, seed, NV_SMALL), tmp_path, NV_SMALL)
        assert len(p.model.checks) == len(p.prog.writer.checks) == len(p.prog.layers)
        layers.append(len(p.prog.layers))
        if seed < 5:        # the written CRCs are the model's: the trace now passes on it
            (res,) = run_model([p.dir], NV_SMALL)
            assert res.status == "PASS", res.message
    # image programs are one layer each (verif/gen/img.py); the others chain one to three
    assert set(layers) == {1} if kind == "img" else {1, 2, 3} <= set(layers)


def test_dc_programs_cover_the_pipeline(tmp_path):
    """The DC generator draws what the programming guide lets vary (verif/gen/dc.py), each
    legal on the model: data reuse of all kept slices, partial reuse (kept + new lines, and
    nothing kept), weight reuse, strides, dilation, all four paddings, weights streaming
    through weight banks smaller than them, channel and kernel counts that are not whole atoms,
    D_WEIGHT_BYTES in 128-byte units, SDP operands from memory on the fly; and its outputs are
    not mostly saturated constants (the SDP's shifts follow the data's magnitude)."""
    infos, varied = [], 0
    for seed in range(50):      # fixed seeds: weights larger than the weight banks in ~7 % of
        # programs; about half of these small layers' outputs saturate
        prog = dc_generate(seed, NV_SMALL)
        p = prepare(prog, tmp_path, NV_SMALL)
        for lay, c in zip(prog.layers, p.model.checks):
            infos.append(lay.info)
            varied += len(set(c.data)) >= 8
    got = {
        "data reuse (all)": any(i["data"] == "full" for i in infos),
        "partial reuse": any(i["data"] == "partial" and i["kept"] > 0 for i in infos),
        "reuse, nothing kept": any(i["data"] == "partial" and i["kept"] == 0 for i in infos),
        "weight reuse": any(i["wt_reuse"] for i in infos),
        "stride x, y": any(i["sx"] > 1 for i in infos) and any(i["sy"] > 1 for i in infos),
        "dilation x, y": any(i["dx"] > 1 for i in infos) and any(i["dy"] > 1 for i in infos),
        "padding": all(any(i[k] > 0 for i in infos) for k in ("pl", "pr", "pt", "pb")),
        "weights > weight banks": any(i["wbytes"] > i["wb"] * NV_SMALL.cbuf_bank_depth
                                      * NV_SMALL.cbuf_bank_width for i in infos),
        "partial atoms": any(i["C"] % 8 for i in infos) and any(i["K"] % 8 for i in infos),
        # NVIDIA's RTL hangs on weight bytes that are not a multiple of 128 (verif/gen/dc.py)
        "weight bytes in 128-byte units": all(i["wbytes"] % 128 == 0 for i in infos),
        "SDP operands from memory (ALU, MUL, both)": {u for i in infos for u in i["sdp_mem"].values()}
        == {0, 1, 2},
    }
    assert all(got.values()), [k for k, v in got.items() if not v]
    assert varied >= len(infos) // 2, f"only {varied} of {len(infos)} outputs have 8+ distinct bytes"


def test_dc_programs_16_bit_on_nv_full(tmp_path):
    """On nv_full computing int8, int16 and fp16 the DC generator draws all three precisions,
    every program legal on the model: 16-bit layers program their precision in every unit,
    kernels of two-byte weights (BYTE_PER_KERNEL = R*S*C*2), 128-byte CBUF entries
    (D_ENTRY_PER_SLICE of 8+ pixels of 17..32 channels: 2 atoms per pixel, four atoms to an
    entry); int16 layers have SDP in INT16, with more than 16 kernels (two weight groups), more
    than 64 channels (two weight cubes) and SDP operands from memory in some, and outputs that
    vary (8+ distinct int16 values in most); fp16 layers have SDP in FP16 writing FP16 or
    INT16."""
    from hdl.config import get_config
    cfg = get_config("nv_full+feature_data_type=int8_int16_fp16")
    precs, varied, infos, outs = set(), 0, [], set()
    for seed in range(40):
        prog = dc_generate(seed, cfg)
        p = prepare(prog, tmp_path, cfg)
        assert p.prog.legal and len(p.model.checks) == len(prog.layers)
        for lay, c in zip(prog.layers, p.model.checks):
            i = lay.info
            precs.add(i["prec"])
            if i["prec"] == 0:
                continue
            regs = {(u, r): v for u, r, v in lay.writes}
            for u in ("CDMA", "CSC", "CMAC_A", "CMAC_B", "CACC"):
                assert regs[(u, "D_MISC_CFG")] >> 12 & 3 == i["prec"]       # PROC_PRECISION
            assert regs[("CDMA", "D_WEIGHT_SIZE_0")] + 1 == i["R"] * i["S"] * i["C"] * 2
            if 17 <= i["C"] <= 32 and i["W"] >= 8:
                assert i["eps"] == -(-i["W"] // 2)
            fmt = regs[("SDP", "D_DATA_FORMAT")]
            if i["prec"] == 2:
                assert fmt & 3 == 2 and fmt >> 2 & 3 in (1, 2)
                outs.add(fmt >> 2 & 3)
                continue
            assert fmt & 0xF == 0b0101                                   # INT16 in and out
            infos.append(i)
            varied += len(set(zip(c.data[::2], c.data[1::2]))) >= 8
    assert precs == {0, 1, 2} and outs == {1, 2}
    assert any(i["K"] > 16 for i in infos) and any(i["C"] > 64 for i in infos)
    assert any(i["sdp_mem"] for i in infos)            # BS/BN operands from memory in INT16
    assert varied >= len(infos) // 2, f"only {varied} of {len(infos)} int16 outputs vary"


def test_batch_programs_on_nv_full(tmp_path):
    """Multi-batch programs (verif/gen/dc.py ``generate_batch``) run to their end on the model
    of nv_full: every layer programs its N in CDMA, CSC, CACC (BATCHES) and SDP (BATCH_NUMBER),
    checks N output cubes D_DST_BATCH_STRIDE apart (64-byte aligned base and strides), and the
    draws cover the three precisions, inner-product layers (1 x 1 output), N of 2..4 and over
    16, and outputs that differ between the cubes of a layer."""
    from hdl.config import get_config
    cfg = get_config("nv_full+winograd=False+weight_compression=False+feature_data_type=int8_int16_fp16")
    precs, ns, fc, differ, layers = set(), set(), 0, 0, 0
    for seed in range(20):
        prog = generate("batch", seed, cfg)
        p = prepare(prog, tmp_path, cfg)
        assert p.prog.legal and len(p.model.checks) == len(prog.writer.checks)
        data = {}                  # a region's bytes in both memories (nv_full has CVIF)
        for c in p.model.checks:
            data[c.base] = data.get(c.base, b"") + c.data
        for lay in prog.layers:
            i, n = lay.info, lay.info["batches"]
            regs = {(u, r): v for u, r, v in lay.writes}
            for u in ("CDMA", "CSC", "CACC"):
                assert regs[(u, "D_BATCH_NUMBER")] & 0x1F == n - 1
            assert regs[("SDP", "D_FEATURE_MODE_CFG")] >> 8 & 0x1F == n - 1
            bases = [a for a, _ in lay.out]
            stride = regs[("SDP", "D_DST_BATCH_STRIDE")]
            assert bases == [bases[0] + b * stride for b in range(n)] and bases[0] % 64 == 0
            assert regs[("SDP", "D_DST_LINE_STRIDE")] % 64 == regs[("SDP", "D_DST_SURFACE_STRIDE")] % 64 == 0
            precs.add(i["prec"])
            ns.add(n)
            fc += (i["wo"], i["ho"]) == (1, 1)
            layers += 1
            differ += len({data[a] for a in bases}) > 1
    assert precs == {0, 1, 2} and fc >= 3 and min(ns) <= 4 and max(ns) > 16
    assert differ >= layers // 2


def test_compressed_programs_on_nv_full(tmp_path):
    """Programs with compressed weights (verif/gen/dc.py ``generate_compressed``) run to their
    end on the model of nv_full: every layer sets D_WEIGHT_FORMAT=COMPRESSED in CDMA and CSC,
    leaves the last CBUF bank to the WMB, and its D_WEIGHT_BYTES / D_WMB_BYTES are the
    compressed surfaces' sizes; the draws cover the three precisions, sparse and dense weights
    (under 10 % and over 80 % zeros), more than one kernel group, SDP operands from memory."""
    from hdl.config import get_config
    cfg = get_config("nv_full+winograd=False+batch=False+feature_data_type=int8_int16_fp16")
    precs, sp, groups, mem_ops = set(), [], 0, 0
    for seed in range(24):
        prog = generate("compressed", seed, cfg)
        p = prepare(prog, tmp_path, cfg)
        assert p.prog.legal and len(p.model.checks) == len(prog.writer.checks)
        for lay in prog.layers:
            i = lay.info
            regs = {(u, r): v for u, r, v in lay.writes}
            for u in ("CDMA", "CSC"):
                assert regs[(u, "D_WEIGHT_FORMAT")] & 1 == 1
                assert regs[(u, "D_WEIGHT_BYTES")] == -(-i["nz_bytes"] // 128) * 128 > 0
            assert i["db"] + i["wb"] <= cfg.cbuf_bank_number - 1
            precs.add(i["prec"])
            sp.append(i["sparsity"])
            groups += i["K"] > cfg.mac_atomic_k // (2 if i["prec"] else 1)
            mem_ops += bool(i["sdp_mem"])
    assert precs == {0, 1, 2} and min(sp) < 0.1 and max(sp) > 0.8 and groups and mem_ops


def test_batch_compressed_programs_on_nv_full(tmp_path):
    """Multi-batch programs with compressed weights (verif/gen/dc.py
    ``generate_batch_compressed``, kind ``batch_compressed`` on configurations with both modes)
    run to their end on the model of nv_full: every layer programs N > 1 cubes and
    D_WEIGHT_FORMAT=COMPRESSED with the compressed sizes, leaves the last CBUF bank to the
    WMB; the draws cover the three precisions, inner-product layers and N over 16."""
    from hdl.config import get_config
    from verif.gen.run import kinds_for
    cfg = get_config("nv_full+winograd=False+feature_data_type=int8_int16_fp16")
    assert "batch_compressed" in kinds_for(cfg)
    assert "batch_compressed" not in kinds_for(get_config("nv_full+winograd=False+batch=False"))
    precs, ns, fc = set(), set(), 0
    for seed in range(20):
        prog = generate("batch_compressed", seed, cfg)
        p = prepare(prog, tmp_path, cfg)
        assert p.prog.legal and len(p.model.checks) == len(prog.writer.checks)
        for lay in prog.layers:
            i, n = lay.info, lay.info["batches"]
            regs = {(u, r): v for u, r, v in lay.writes}
            for u in ("CDMA", "CSC"):
                assert regs[(u, "D_WEIGHT_FORMAT")] & 1 == 1
                assert regs[(u, "D_WEIGHT_BYTES")] == -(-i["nz_bytes"] // 128) * 128 > 0
                assert regs[(u, "D_BATCH_NUMBER")] & 0x1F == n - 1 > 0
            assert i["db"] + i["wb"] <= cfg.cbuf_bank_number - 1
            precs.add(i["prec"])
            ns.add(n)
            fc += (i["wo"], i["ho"]) == (1, 1)
    assert precs == {0, 1, 2} and fc >= 2 and max(ns) > 16


def test_fc_program_sparsity():
    """``fc_program(sparsity=S)`` (scripts/bench_compressed.py): the same inner-product layer
    with compressed weights of exactly S zeros (to the 128-byte rounding of the non-zero
    bytes), its D_WEIGHT_BYTES / D_WMB_BYTES the compressed sizes."""
    from hdl.config import get_config
    from verif.gen.dc import fc_program
    cfg = get_config("nv_full+winograd=False+batch=False")
    lay = fc_program(cfg, 2, 2, 512, 64, 1, sparsity=0.5).layers[0]
    regs = {(u, r): v for u, r, v in lay.writes}
    assert abs(lay.info["nz_bytes"] - 65536) <= 128
    assert regs[("CDMA", "D_WEIGHT_BYTES")] == -(-lay.info["nz_bytes"] // 128) * 128
    assert regs[("CDMA", "D_WMB_BYTES")] == 2 * 2 * 512 * 64 // 8
    dense = fc_program(cfg, 2, 2, 512, 64, 1).layers[0]
    assert {(u, r): v for u, r, v in dense.writes}[("CDMA", "D_WEIGHT_BYTES")] == 131072


def test_sdp_and_cdp_programs_all_precisions_on_nv_full(tmp_path):
    """On nv_full computing int8, int16 and fp16: SDP programs run the EW (Y) sub-unit in each
    precision, with its ALU and MUL operands from memory, the LUT (loaded once per program in
    one precision) and EQL's compare mode among them; CDP programs draw all three precisions;
    every program legal on the model."""
    from hdl.config import get_config
    cfg = get_config("nv_full+feature_data_type=int8_int16_fp16")
    ew, seen = set(), set()
    for seed in range(30):
        prog = generate("sdp", seed, cfg)
        p = prepare(prog, tmp_path, cfg)
        assert p.prog.legal and len(p.model.checks) == len(prog.writer.checks) > 0
        for lay in prog.layers:
            regs = {(u, r): v for u, r, v in lay.writes}
            cfg_ew = regs[("SDP", "D_DP_EW_CFG")]
            if cfg_ew & 1:
                continue                                         # EW bypassed
            ew.add(regs[("SDP", "D_DATA_FORMAT")] & 3)
            seen |= {k for k, on in (("lut", not cfg_ew >> 6 & 1),
                                     ("eql", not cfg_ew >> 1 & 1 and cfg_ew >> 2 & 3 == 3),
                                     ("mem", not regs[("SDP_RDMA", "D_ERDMA_CFG")] & 1)) if on}
        prog = generate("cdp", seed, cfg)
        p = prepare(prog, tmp_path, cfg)
        assert p.prog.legal and len(p.model.checks) == len(prog.writer.checks) > 0
        seen.add(f"cdp{dict(((u, r), v) for u, r, v in prog.layers[0].writes)[('CDP', 'D_DATA_FORMAT')]}")
    assert ew == {0, 1, 2}
    assert seen == {"lut", "eql", "mem", "cdp0", "cdp1", "cdp2"}, seen


@pytest.mark.parametrize("spec", ["nv_full+feature_data_type=int8_int16_fp16",
                                  "nv_small+feature_data_type=int8_int16_fp16"])
def test_program_precisions_and_sweep_selection(spec):
    """``program_precisions`` (v1 and v2 register maps) names the precisions the layer
    descriptions name (dc/img/pdp/cdp descriptions start with int16 or fp16, or with neither
    for INT8), and the sweep's ``--precision`` selection keeps exactly the first programs with
    a layer in the precisions asked for."""
    import re
    from hdl.config import get_config
    from scripts.sweep import _select_seeds
    from verif.gen.common import program_precisions
    cfg = get_config(spec)
    seen = set()
    for kind in ("dc", "img", "pdp", "cdp"):
        for seed in range(12):
            prog = generate(kind, seed, cfg)
            want = set()
            for lay in prog.layers:
                m = re.search(r"(?:^|; )(int16|fp16)[ ;]", lay.desc) or re.match(r"(int8|int16|fp16) ",
                                                                                 lay.desc)
                want.add(m.group(1) if m else "int8")
            got = program_precisions(prog, cfg)
            assert got == want, (kind, seed, got, prog.describe())
            seen |= got
    assert seen == {"int8", "int16", "fp16"}
    seeds, precs = _select_seeds(["pdp", "dc"], 5, 6, cfg, ["fp16"])
    for kind, chosen in seeds.items():
        assert len(chosen) == 6 and chosen[0] >= 5
        for seed in range(5, chosen[-1] + 1):
            assert (seed in chosen) == ("fp16" in precs[(kind, seed)]), (kind, seed)


def test_sdp_operand_programs_rejected_name_both_sides(tmp_path):
    """Issue 36 item 1: an ``sdp_operands`` program the model rejects (NVIDIA's RTL never
    finishes it) is rejected with ModelConfigError naming SDP_RDMA's DMA register and SDP's
    sub-unit registers; one it completes has every check's bytes. (The rule itself:
    tests/model/test_sdp_operand_dma.py.)"""
    outcomes = set()
    for seed in MODEL_SEEDS:
        prog = generate("sdp_operands", seed, NV_SMALL)
        p = prepare(prog, tmp_path, NV_SMALL)           # GenError unless completed or rejected
        msg = p.model.message
        if prog.legal:
            assert len(p.model.checks) == len(prog.writer.checks)
        else:
            assert "ModelConfigError" in msg and "SDP_RDMA.D_" in msg and "SDP.D_DP_" in msg, msg
            assert not p.model.checks
        outcomes.add(prog.legal)
    assert outcomes == {True, False}


def test_generator_error_when_the_model_rejects_a_legal_program(tmp_path):
    """A 'legal' program the model rejects is reported as a generator error (GenError)."""
    prog = generate("sdp_operands", 0, NV_SMALL)
    prog.legal = True
    with pytest.raises(GenError, match="rejected a generated legal program"):
        prepare(prog, tmp_path, NV_SMALL)


#: seeds per layer type played on nv_small_256 (R = 4 memory atoms per CBUF entry, atomic C 32):
#: random programs pack the last channel block as often as not (issue 30)
WIDE_CI_SEEDS = {"dc": (1000, 1001, 1002, 1003), "sdp": (1000,), "pdp": (1000,), "cdp": (1000,),
                 "img": (1000, 1017)}   # img: 4- and 2-line post-extension, 8- and 12-byte lines
#: seeds per layer type played on nv_small_256_full: its secondary memory interface (CVIF), every
#: surface in either memory (verif.gen.common.spread_over_memories)
CVIF_CI_SEEDS = {"dc": (1000, 1001), "sdp": (1000, 1001), "pdp": (1000,), "cdp": (1000,),
                 "img": (1000,)}
#: seeds per layer type played on nv_small+feature_data_type=int8_int16_fp16 (issue 33: the
#: small geometry of the 16-bit precisions beside INT8, ``cfg.conv16``): INT16, FP16 and INT8
#: programs of every type (dc 3 int16, 0 fp16, 11 int8 with weight reuse; img 0 int16, 1 fp16,
#: 4 int8; sdp 0 int16, 4 fp16, 9 fp16 -> int16; pdp 1 fp16, 2 int16; cdp 0 fp16, 1 int8,
#: 3 int16; sdp_operands 1 fp16, 7 fp16 -> int16, the first of them never completing)
#: dc 1334 and img 1401: FP16 NaN data with K not a multiple of the kernel group (CACC's lanes
#: past DATAOUT_CHANNEL are delivered as 0, not as the padding cells' NaN words)
CONV16_CI_SEEDS = {"dc": (0, 3, 11, 1334), "img": (0, 1, 4, 1401), "sdp": (0, 4, 9), "pdp": (1, 2),
                   "cdp": (0, 1, 3), "sdp_operands": (1, 7), "compressed": (0, 2, 19)}
#: with weight compression: compressed INT16/FP16 layers whose uncompressed weights end in
#: the middle of a row of two CBUF units (fp16 164 bytes, int16 756, fp16 6,438: CSC waited for
#: the row's second unit before CDMA filled the last 128 bytes)
CONV16_SMALL = "nv_small+feature_data_type=int8_int16_fp16+weight_compression=True"
#: multi-batch programs on nv_small's geometry with batch (issue 34; docs/conv.md "Multi-batch"):
#: two-layer programs whose second layer's first cube once came from the first layer's last
#: batch address (seeds 0, 1, 2, 4: CDMA's cube offset was cleared with the start, not before
#: it), N = 31 with one pixel a stripe (3), N = 22 with a 5 x 4 output (4)
#: compressed weights on the same simulator (docs/conv.md "Compressed weights"): three-layer
#: programs of 40..87 % zeros (1, 2, 3) and one without zeros (9); both modes in one layer (the
#: batch_compressed kind)
BATCH_SMALL = "nv_small+batch=True+max_batch=32+weight_compression=True"
BATCH_CI_SEEDS = {"batch": (0, 1, 2, 3, 4), "compressed": (1, 2, 3, 9),
                  "batch_compressed": (0, 1, 2)}
RTL_CI_CASES = ([("nv_small", k, s) for k, s in CI_SEEDS.items()]
                + [("nv_small_256", k, s) for k, s in WIDE_CI_SEEDS.items()]
                + [("nv_small_256_full", k, s) for k, s in CVIF_CI_SEEDS.items()]
                + [(CONV16_SMALL, k, s) for k, s in CONV16_CI_SEEDS.items()]
                + [(BATCH_SMALL, k, s) for k, s in BATCH_CI_SEEDS.items()])


@pytest.mark.rtl
@needs_verilator
@pytest.mark.parametrize("config, kind, seeds", RTL_CI_CASES, ids=lambda v: v if isinstance(v, str) else "")
def test_rtl_fixed_seeds(config, kind, seeds, tmp_path):
    """A few programs per layer type on the RTL of nv_small, nv_small_256,
    nv_small_256_full, nv_small computing INT16/FP16 and nv_small with multi-batch and
    compressed weights (random memory profile, seed 1): those the model completes write exactly
    the model's bytes (in both memories with CVIF); those it
    rejects (operand DMAs that NVIDIA's RTL never finishes, issue 36 item 1) fail on the cycle
    budget naming the busy units, never with a result."""
    from hdl.config import get_config
    cfg = get_config(config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        preps = [prepare(generate(kind, s, cfg), tmp_path, cfg) for s in seeds]
    outs = list(run_programs(preps, cfg, mem_profile="random", mem_seed=1, jobs=1,
                             per_process=len(preps)))
    assert len(outs) == len(preps)
    bad = [o.message for o in outs if not o.ok]
    assert not bad, "\n".join(bad)


#: nv_full computing int8, int16 and fp16: with multi-batch (issue 34), and with multi-batch and
#: compressed weights (Winograd is not built)
BATCH_FULL = "nv_full+winograd=False+weight_compression=False+feature_data_type=int8_int16_fp16"
MODES_FULL = "nv_full+winograd=False+feature_data_type=int8_int16_fp16"


@pytest.mark.rtl
@needs_verilator
@pytest.mark.slow       # nv_full's simulator: hdl.build ~10 min / 6.5 GB, Verilator ~15-20 min
@pytest.mark.parametrize("config, kind, n", [(BATCH_FULL, "batch", 20),
                                             (MODES_FULL, "compressed", 32)])
def test_rtl_mode_programs_on_nv_full(config, kind, n, tmp_path):
    """Programs of nv_full's convolution modes on our RTL of nv_full, random memory profile:
    the model's bytes (README "nv_full's multi-batch and compressed weights"). Multi-batch
    seeds 0..19 (INT8, INT16 and FP16, N up to 32, inner-product layers among them; NVIDIA's
    nv_full RTL gives the same bytes on them); compressed weights seeds 0..31 (INT8, INT16 and
    FP16, 0..100 % zeros, uncompressed weights ending mid-row among them)."""
    from hdl.config import get_config
    cfg = get_config(config)
    preps = [prepare(generate(kind, s, cfg), tmp_path, cfg) for s in range(n)]
    outs = list(run_programs(preps, cfg, mem_profile="random", mem_seed=1, jobs=1,
                             per_process=len(preps)))
    bad = [o.message for o in outs if not o.ok]
    assert len(outs) == len(preps) and not bad, "\n".join(bad)


#: DC programs whose second layer SDP once took partly with the first layer's registers
#: (random memory, seed 1): SDP accepted CACC's atoms on the fly after its layer's last atom
#: while its last write responses were outstanding, so CACC's first atoms of the next layer went
#: through the previous group's BS/BN/converter (fixed: hdl/sdp/__init__.py counts the layer's
#: atoms on the fly; the first wrong byte was SDP layer 1 at w=0 h=0 c=0)
DC_SDP_HANDOVER_SEEDS = (9, 13, 16)


@pytest.mark.rtl
@needs_verilator
def test_rtl_dc_layer_handover(tmp_path):
    """Back-to-back DC layers whose first layer's last SDP writes are slow (random memory):
    every layer writes exactly the model's bytes."""
    # as first drawn: SDP operands from registers (seed 13 would draw memory operands now)
    preps = [prepare(dc_generate(s, NV_SMALL, sdp_mem_rate=0), tmp_path, NV_SMALL)
             for s in DC_SDP_HANDOVER_SEEDS]
    outs = list(run_programs(preps, NV_SMALL, mem_profile="random", mem_seed=1, jobs=1,
                             per_process=len(preps)))
    assert len(outs) == len(preps)
    bad = [o.message for o in outs if not o.ok]
    assert not bad, "\n".join(bad)


#: DC programs with SDP operands from memory that deadlocked under NVIDIA's in-order memory (the
#: ``nvidia`` profile offers the next R beat only while ``rready`` is high): MCIF's ``rready``
#: followed the stale ``rid`` of a full SDP NRDMA while CDMA's beats were still to come, so
#: nothing moved again (fixed: hdl/mcif.py, ``rready`` high while no beat is offered)
DC_IN_ORDER_SEEDS = (62014, 62043)


@pytest.mark.rtl
@needs_verilator
def test_rtl_dc_in_order_memory(tmp_path):
    """DC programs whose SDP reads operands beside CDMA's fetch, on NVIDIA's in-order memory
    profile: every layer writes exactly the model's bytes (no deadlock on the R channel)."""
    preps = [prepare(dc_generate(s, NV_SMALL), tmp_path, NV_SMALL) for s in DC_IN_ORDER_SEEDS]
    outs = list(run_programs(preps, NV_SMALL, mem_profile="nvidia", jobs=1,
                             per_process=len(preps)))
    assert len(outs) == len(preps)
    bad = [o.message for o in outs if not o.ok]
    assert not bad, "\n".join(bad)


@pytest.mark.rtl
@needs_verilator
def test_rtl_dc_weight_bytes_not_a_multiple_of_128_hangs(tmp_path):
    """Item 9 for the convolution pipeline: D_WEIGHT_BYTES not a multiple of 128 (NVIDIA's
    nv_small RTL never finishes such a layer) is rejected by the model and, on the RTL, fails
    on the cycle budget naming busy units without writing a result."""
    import re

    from verif.axi_slave import MemTiming
    from verif.trace.runner import run
    p = prepare(generate("dc", 0, NV_SMALL), tmp_path, NV_SMALL)
    cfg = next(p.dir.glob("*.cfg"))
    text = cfg.read_text()
    wb = re.compile(r"(reg_write\(NVDLA_(?:CDMA|CSC)\.D_WEIGHT_BYTES_0, )0x([0-9a-f]+)\)")
    assert wb.search(text)
    cfg.write_text(wb.sub(lambda mo: f"{mo.group(1)}{int(mo.group(2), 16) - 8:#x})", text))
    model = next(run_model([p.dir], NV_SMALL))
    assert "ModelConfigError" in model.message and "multiple of 128" in model.message, model.message
    res = next(run([p.dir], "rtl", NV_SMALL, timing=MemTiming.named("random", seed=1)))
    assert res.status != "PASS"
    assert "no interrupt within" in res.message and "units still busy: " in res.message, res.message
    assert "units still busy: none" not in res.message, res.message


@pytest.mark.rtl
@needs_verilator
def test_rtl_sdp_operand_fetch_nothing_takes_across_layers(tmp_path):
    """Issue 36 item 1 across layers, as NVIDIA's nv_small RTL ran these programs: an operand
    fetch nothing takes leaves SDP_RDMA's group busy, so the next layer hangs (seed 14, two
    layers); a single-output fetch (1x1x8) finishes into the core's operand packer, so the
    second layer runs and the third, whose same fetch finds the packer full, hangs (seed 16)."""
    from verif.gen.sdp import generate as sdp_generate
    off = dict(take=(False, False), disable=1, use=0, size=0, mode=0)
    preps = []
    for seed, layers, bs, cube in (
            (14, 2, dict(take=(False, False), disable=0, use=1, size=0, mode=0), (3, 2, 12)),
            (16, 2, dict(take=(True, False), disable=0, use=2, size=0, mode=0), (1, 1, 8)),
            (16, 3, dict(take=(True, False), disable=0, use=2, size=0, mode=0), (1, 1, 8))):
        prog = sdp_generate(seed, NV_SMALL, mismatch=True, layers=layers,
                            force={"cube": cube, "BS": bs, "BN": off})
        prog.writer.name += f"_L{layers}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            preps.append(prepare(prog, tmp_path, NV_SMALL))
    assert [p.prog.legal for p in preps] == [False, True, False]
    outs = {o.dir.name: o for o in run_programs(preps, NV_SMALL, mem_profile="random",
                                                  mem_seed=2, jobs=1, per_process=3)}
    assert [outs[p.dir.name].status for p in preps] == ["hang-ok", "pass", "hang-ok"], \
        [outs[p.dir.name].message for p in preps]


def test_bdma_programs_are_legal_and_cover_the_unit(tmp_path):
    """BDMA programs (verif/gen/bdma.py) run to their end on the model of nv_full (v1 register
    map: the same .cfg, placed by name) and of nv_large with BDMA, with a CRC per destination;
    over 40 seeds they use both memories in each direction, both register groups, two groups in
    flight, chains through an earlier group's output, addresses above 4 GiB and register bits
    4:0 that the hardware drops; refused for a configuration without BDMA."""
    from hdl.config import NV_FULL, NV_LARGE
    seen = {"dirs": set(), "groups": set(), "chain": 0, "high": 0, "low_bits": 0, "two_in_flight": 0}
    for cfg in (NV_FULL, NV_LARGE.derive(name="nv_large_bdma", bdma=True)):
        for seed in range(40 if cfg is NV_FULL else 5):
            p = prepare(generate("bdma", seed, cfg), tmp_path, cfg)
            assert len(p.model.checks) == len(p.prog.writer.checks) == len(p.prog.layers)
            if seed < 3:
                (res,) = run_model([p.dir], cfg)
                assert res.status == "PASS", res.message
            text = next(p.dir.glob("*.cfg")).read_text()
            for lay in p.prog.layers:
                seen["dirs"].add(lay.desc.split()[1])
            seen["groups"] |= {g for g in (0, 1) if f"CFG_LAUNCH{g}_0, 0x1" in text}
            seen["high"] += "ADDR_HIGH_0, 0x1)" in text
            seen["chain"] += any("src 0x" in lay.desc and lay.desc.split("src ")[1].split()[0]
                                 in {f"{b:#x}" for lay2 in p.prog.layers for b, _ in lay2.out}
                                 for lay in p.prog.layers)
            lows = [int(line.split(", ")[1].rstrip(");"), 0) for line in text.splitlines()
                    if line.startswith("reg_write(NVDLA_BDMA.CFG_SRC_ADDR_LOW")]
            seen["low_bits"] += any(v & 31 for v in lows)
            cmds = [line for line in text.splitlines() if "CFG_LAUNCH" in line or "intr_notify" in line]
            seen["two_in_flight"] += any("CFG_LAUNCH" in a and "CFG_LAUNCH" in b for a, b in zip(cmds, cmds[1:]))
    assert seen["dirs"] == {"se->se", "se->pr", "pr->se", "pr->pr"}, seen["dirs"]
    assert seen["groups"] == {0, 1}
    assert min(seen["chain"], seen["high"], seen["low_bits"], seen["two_in_flight"]) > 0, seen
    with pytest.raises(ValueError, match="no BDMA"):
        generate("bdma", 0, NV_SMALL)


def test_rubik_programs_are_legal_and_cover_the_modes(tmp_path):
    """RUBIK programs (verif/gen/rubik.py) run to their end on the model of nv_full, a CRC per
    layer output per memory; over 30 seeds: each mode in each precision, phases of 9 and more,
    DATAOUT_CHANNEL other than DATAIN_CHANNEL, 32-byte-aligned planes; refused without RUBIK."""
    from hdl.config import NV_FULL
    descs = []
    for seed in range(30):
        p = prepare(generate("rubik", seed, NV_FULL), tmp_path, NV_FULL)
        assert len(p.model.checks) == len(p.prog.writer.checks) == 2 * len(p.prog.layers)
        if seed < 3:
            (res,) = run_model([p.dir], NV_FULL)
            assert res.status == "PASS", res.message
        descs += [lay.desc for lay in p.prog.layers]
    for mode in ("contract", "split", "merge"):
        for prec in ("int8", "int16", "fp16"):
            assert any(d.startswith(f"{mode} {prec}") for d in descs), (mode, prec)
    import re
    assert any(int(re.search(r" s(\d+)x", d).group(1)) >= 9 for d in descs if d.startswith("contract"))
    assert any(int(d.split()[-3]) != int(d.split()[2].split("x")[2]) for d in descs if not d.startswith("contract"))
    assert any(d.endswith("align 32") for d in descs)
    with pytest.raises(ValueError, match="no RUBIK"):
        generate("rubik", 0, NV_SMALL)
