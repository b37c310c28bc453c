"""Data and weight reuse across convolution layers (issue 8; docs/conv.md "Data and weight
reuse across layers"): two-layer register programs built from NVIDIA's
dc_8x8x36_4x4x36x16_dilation trace, both layers queued back to back in the two ping-pong
register groups, played on the model and on the RTL, compared byte for byte.

* ``full``: layer 1 as NVIDIA's trace (SKIP_DATA_RLS + SKIP_WEIGHT_RLS), layer 2 the same layer
  with DATA_REUSE + WEIGHT_REUSE whose D_DAIN_ADDR / D_WEIGHT_ADDR point at other memory (random
  bytes): nothing is fetched, so layer 2's output equals layer 1's.
* ``partial``: one data bank (so the data-bank ring wraps); layer 1 releases RLS_SLICES+1 = 5
  of its 8 slices and keeps its weights (SKIP_WEIGHT_RLS); layer 2 sets DATA_REUSE and
  WEIGHT_REUSE and fetches 5 new lines (CDMA DATAIN_HEIGHT = 4) from the other memory: its 8
  slices are layer 1's last 3 then the 5 new lines, its weights layer 1's.

The expected bytes come from the model engine (its CRCs written into the programs' check_crc
lines); the RTL runs both programs in one simulator process.
"""
from __future__ import annotations

import random

import pytest

from hdl.config import NV_SMALL
from hdl.regmap import REGMAP
from verif.gen.writer import TraceWriter, fill_crcs_from_model
from verif.shared import nvdla_dir
from verif.trace.parser import load_trace
from verif.trace.player import PASS
from verif.trace.runner import run
from needs import needs_verilator

SRC = "dc_8x8x36_4x4x36x16_dilation_int8_0"
JUNK_DT, JUNK_WT = 0xB000_0000, 0xB001_0000      # "other memory": random bytes
JUNK_DT_SIZE, JUNK_WT_SIZE = 0xA000, 0x2400
DST2 = 0xA000_1000                               # layer 2's output

DATA_REUSE, WEIGHT_REUSE = 1 << 16, 1 << 20
SKIP_DATA_RLS, SKIP_WEIGHT_RLS = 1 << 24, 1 << 28


def _field(unit: str, reg: str, field: str):
    r = next(r for r in REGMAP.unit(unit).registers if r.name == reg)
    return next(f for f in r.fields if f.name == field)


def set_field(value: int, unit: str, reg: str, field: str, v: int) -> int:
    f = _field(unit, reg, field)
    mask = ((1 << f.width) - 1) << f.lsb
    return (value & ~mask) | ((v << f.lsb) & mask)


def write_program(d, layers, crcs=None):
    """Two layers of NVIDIA's SRC trace in register groups 0 and 1 (``layers``: two dicts
    ``(unit, reg) -> fn(value) -> value`` editing the trace's register writes), kicked off
    back to back; check_crc of both outputs (``crcs``: the two CRCs, placeholders when None).
    Written by the shared trace writer (verif/gen/writer.py); returns (source trace, its CRC,
    the writer)."""
    src = load_trace(nvdla_dir() / "traces" / "nv_small" / SRC)
    w = TraceWriter(d.name)
    checks = [c for c in src.commands if c.kind == "check_crc"]
    assert len(checks) == 1
    dst1, size = checks[0].args["base"], checks[0].args["size"]
    for c in src.commands:
        if c.kind == "mem_init":
            w.mem_init(c.args["base"], c.args["size"])
        elif c.kind == "mem_load":
            w.mem_load(c.args["base"], src.directory / c.args["file"])
    rng = random.Random(8)
    for name, base, n in (("junk_dt.dat", JUNK_DT, JUNK_DT_SIZE), ("junk_wt.dat", JUNK_WT, JUNK_WT_SIZE)):
        w.mem_load(base, bytes(rng.getrandbits(8) for _ in range(n)), file=name, init=True)
    w.mem_init(DST2, size)
    for g, edits in enumerate(layers):
        kick = []
        for c in src.commands:
            if c.kind not in ("reg_write", "poll_reg_equal"):
                continue
            ref, v = c.args["reg"], c.args["value"]
            unit, reg = ref.unit.name, ref.reg.name
            if g and unit == "GLB":
                continue
            if reg == "S_POINTER" and c.kind == "reg_write":
                v = g
            fn = edits.get((unit, reg))
            if fn is not None and c.kind == "reg_write":
                v = fn(v)
            if c.is_kickoff:
                kick.append((ref.trace_name, v))
            elif c.kind == "reg_write":
                w.reg_write(ref.trace_name, v)
            else:
                w.poll(ref.trace_name, v)
        for name, v in kick:
            w.reg_write(name, v)
    w.intr_notify("SDP_0", "sync_id_0")
    w.intr_notify("SDP_1", "sync_id_1")
    w.check_crc("sync_id_0", dst1, size)
    w.check_crc("sync_id_1", DST2, size)
    w.write(d, list(crcs) if crcs else None)
    return src, checks[0].args["crc"], w


def _misc(v):
    return lambda _old: v


def _both(reg, fn):
    return {("CDMA", reg): fn, ("CSC", reg): fn}


def _bank0(v):
    return set_field(v, "CSC", "D_BANK", "DATA_BANK", 0)


def _layer2_addrs():
    return {("CDMA", "D_DAIN_ADDR_LOW_0"): lambda _v: JUNK_DT,
            ("CDMA", "D_WEIGHT_ADDR_LOW"): lambda _v: JUNK_WT,
            ("SDP", "D_DST_BASE_ADDR_LOW"): lambda _v: DST2}


def _height(h):
    def fn(v):
        return set_field(v, "CDMA", "D_DATAIN_SIZE_0", "DATAIN_HEIGHT", h - 1)
    return fn


PROGRAMS = {
    "full": [
        _both("D_MISC_CFG", _misc(SKIP_DATA_RLS | SKIP_WEIGHT_RLS)),
        {**_both("D_MISC_CFG", _misc(DATA_REUSE | WEIGHT_REUSE)), **_layer2_addrs()},
    ],
    "partial": [
        {**_both("D_MISC_CFG", _misc(SKIP_WEIGHT_RLS)), **_both("D_BANK", _bank0),
         ("CSC", "D_RELEASE"): lambda _v: 4},                               # releases 5 slices
        {**_both("D_MISC_CFG", _misc(DATA_REUSE | WEIGHT_REUSE)), **_both("D_BANK", _bank0),
         **_layer2_addrs(), ("CDMA", "D_DATAIN_SIZE_0"): _height(5),
         ("CDMA", "D_DATAIN_SIZE_EXT_0"): _height(5)},                      # 3 kept + 5 new
    ],
}


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """The programs with the model's CRCs, and the model's output bytes of each layer."""
    from verif.trace.runner import run_model
    root = tmp_path_factory.mktemp("conv_reuse")
    out = {}
    for name, layers in PROGRAMS.items():
        d = root / name
        src, src_crc, w = write_program(d, layers)
        res = fill_crcs_from_model(w, d, NV_SMALL)   # the model's CRCs into check_crc
        assert len(res.checks) == 2, res.message
        (res2,) = run_model([d], NV_SMALL)
        assert res2.status == PASS, res2.message
        out[name] = (d, [c.data for c in res.checks], src_crc, [c.actual for c in res.checks])
    return out


def test_model_reuse_programs(programs):
    """The model accepts both programs; layer 1 computes NVIDIA's output (its CRC is the
    trace's), full reuse gives layer 2 layer 1's output, and partial reuse a different one
    (the new lines come from the other memory)."""
    d, data, src_crc, crcs = programs["full"]
    assert crcs[0] == src_crc
    assert data[0] == data[1] and any(data[1])
    d, data, src_crc, crcs = programs["partial"]
    assert crcs[0] == src_crc
    assert data[0] != data[1]


@pytest.mark.rtl
@needs_verilator
def test_rtl_reuse_programs(programs):
    """Both programs on the RTL (one simulator process): the model's outputs (the programs'
    check_crc lines hold the CRC-32 of the model's output bytes, so PASS is byte for byte)."""
    dirs = [programs[n][0] for n in PROGRAMS]
    res = {r.name: r for r in run(dirs, "rtl", NV_SMALL, traces_per_process=len(dirs))}
    for name in PROGRAMS:
        r = res[name]
        assert r.status == PASS, f"{name}: {r.message}"
        assert [(c.expected, c.actual) for c in r.checks] == [(c, c) for c in programs[name][3]]
        assert r.cycles
