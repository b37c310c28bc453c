"""The configuration presets equal NVIDIA's spec defines (../shared/nvdla/spec/defs)."""
from __future__ import annotations

import re

import pytest

from hdl.config import NV_FULL, NV_LARGE, NV_MEDIUM_512, NV_SMALL, NV_SMALL_256, PRESETS, ConfigError, NvdlaConfig, get_config
from verif.shared import have_shared, nvdla_dir

# spec define -> (config attribute, how the define's suffix maps to the value)
FLAGS = {
    "WEIGHT_COMPRESSION": "weight_compression", "WINOGRAD": "winograd", "BATCH": "batch",
    "SECONDARY_MEMIF": "secondary_memif", "SDP_LUT": "sdp_lut", "SDP_BS": "sdp_bs", "SDP_BN": "sdp_bn",
    "SDP_EW": "sdp_ew", "BDMA": "bdma", "RUBIK": "rubik", "RUBIK_CONTRACT": "rubik_contract",
    "RUBIK_RESHAPE": "rubik_reshape", "PDP": "pdp", "CDP": "cdp", "RETIMING": "retiming",
}
SIZES = {
    "MAC_ATOMIC_C_SIZE": "mac_atomic_c", "MAC_ATOMIC_K_SIZE": "mac_atomic_k",
    "MEMORY_ATOMIC_SIZE": "memory_atomic", "MAX_BATCH_SIZE": "max_batch",
    "CBUF_BANK_NUMBER": "cbuf_bank_number", "CBUF_BANK_WIDTH": "cbuf_bank_width",
    "CBUF_BANK_DEPTH": "cbuf_bank_depth", "SDP_BS_THROUGHPUT": "sdp_bs_throughput",
    "SDP_BN_THROUGHPUT": "sdp_bn_throughput", "SDP_EW_THROUGHPUT": "sdp_ew_throughput",
    "PDP_THROUGHPUT": "pdp_throughput", "CDP_THROUGHPUT": "cdp_throughput",
    "PRIMARY_MEMIF_LATENCY": "primary_memif_latency", "SECONDARY_MEMIF_LATENCY": "secondary_memif_latency",
    "PRIMARY_MEMIF_MAX_BURST_LENGTH": "primary_memif_max_burst",
    "PRIMARY_MEMIF_WIDTH": "primary_memif_width",
    "SECONDARY_MEMIF_MAX_BURST_LENGTH": "secondary_memif_max_burst",
    "SECONDARY_MEMIF_WIDTH": "secondary_memif_width", "MEM_ADDRESS_WIDTH": "mem_address_width",
    "NUM_DMA_READ_CLIENTS": "num_dma_read_clients", "NUM_DMA_WRITE_CLIENTS": "num_dma_write_clients",
}


#: preset -> NVIDIA's spec files, first one first: a define the first leaves out comes from the
#: next (nv_full.spec leaves out data types, retiming, address width and client counts, which
#: v1's nv_large.spec, the same configuration, gives)
SPEC_FILES = {
    "nv_small": ["nv_small"], "nv_small_256": ["nv_small_256"],
    "nv_small_256_full": ["nv_small_256_full"], "nv_medium_512": ["nv_medium_512"],
    "nv_medium_1024_full": ["nv_medium_1024_full"], "nv_large": ["nv_large.master"],
    "nv_full": ["nv_full", "nv_large"],
}


def parse_spec(name: str) -> dict[str, str]:
    defs = {}
    for line in (nvdla_dir() / "spec" / "defs" / f"{name}.spec").read_text().splitlines():
        m = re.match(r"\s*#define\s+(\w+)", line)
        if m:
            defs[m.group(1)] = ""
    return defs


def spec_defines(preset: str) -> list[str]:
    """The defines of ``preset``'s spec files, each key taken from the first file defining it."""
    keys = list(FLAGS) + list(SIZES) + ["FEATURE_DATA_TYPE", "WEIGHT_DATA_TYPE"]

    def family(define):                 # the longest key naming it (SDP_BS_THROUGHPUT, not SDP_BS)
        hits = [k for k in keys if define.startswith(k + "_")]
        return max(hits, key=len) if hits else None

    out, seen = [], set()
    for f in SPEC_FILES[preset]:
        defs = [d for d in parse_spec(f) if family(d) and family(d) not in seen]
        seen |= {family(d) for d in defs}
        out += defs
    return out


def test_every_spec_file_has_a_preset():
    assert set(SPEC_FILES) | {"nv_small_ew"} == set(PRESETS)
    if have_shared():
        names = {p.name.removesuffix(".spec") for p in (nvdla_dir() / "spec" / "defs").glob("*.spec")}
        used = {f for files in SPEC_FILES.values() for f in files}
        assert names - used == {"projects", "projects.master"}


@pytest.mark.skipif(not have_shared(), reason="../shared/nvdla (spec defines) is absent")
@pytest.mark.parametrize("name", list(SPEC_FILES))
def test_preset_matches_spec(name):
    cfg = PRESETS[name]
    defs = spec_defines(name)
    for key, attr in FLAGS.items():
        en, dis = f"{key}_ENABLE" in defs, f"{key}_DISABLE" in defs
        assert en != dis, f"{cfg.name}.spec: neither or both of {key}_ENABLE/_DISABLE"
        assert getattr(cfg, attr) == en, f"{attr}: {getattr(cfg, attr)} but spec says {key}_{'ENABLE' if en else 'DISABLE'}"
    for key, attr in SIZES.items():
        vals = [d[len(key) + 1:] for d in defs if d.startswith(key + "_")]
        assert len(vals) == 1, f"{cfg.name}.spec: {key}_* defined {vals}"
        want = None if vals[0] == "x" else int(vals[0])
        got = getattr(cfg, attr)
        if key == "SDP_EW_THROUGHPUT" and not cfg.sdp_ew:
            want = 0          # projects.spec: throughput 0 when the sub-unit is disabled
        if key.startswith("SECONDARY_MEMIF") and not cfg.secondary_memif:
            continue          # unused when the secondary interface is disabled
        assert got == want, f"{attr}={got} but {cfg.name}.spec says {key}_{vals[0]}"
    for key, attr in (("FEATURE_DATA_TYPE", "feature_data_type"), ("WEIGHT_DATA_TYPE", "weight_data_type")):
        want = "int8" if f"{key}_INT8" in defs else "int16_fp16"
        assert getattr(cfg, attr) == want


def test_derived_values():
    # projects.spec: NVDLA_MEMIF_WIDTH = max(primary width, atomic*BPE[, secondary width])
    assert NV_SMALL.memif_width == 64 and NV_SMALL.dma_mask_bits == 1 and NV_SMALL.atom_bytes == 8
    assert NV_FULL.memif_width == 512 and NV_FULL.bpe == 8 and NV_FULL.dma_mask_bits == 2
    assert NV_LARGE.memif_width == 256 and NV_LARGE.dma_mask_bits == 1
    assert NV_MEDIUM_512.memif_width == 128 and NV_MEDIUM_512.atom_bytes == 16
    assert NV_SMALL_256.cbuf_bytes == 128 * 1024 and NV_SMALL_256.atom_bytes == 8
    assert NV_SMALL.mac_result_width == 19     # BPE*2 + log2(atomic C)
    assert NV_SMALL.cbuf_bytes == 128 * 1024


def test_invalid_combinations_name_the_parameter():
    with pytest.raises(ConfigError, match="mac_atomic_c"):
        NV_SMALL.derive(mac_atomic_c=16)
    with pytest.raises(ConfigError, match="sdp_ew_throughput"):
        NV_SMALL.derive(sdp_ew=True)
    with pytest.raises(ConfigError, match="sdp_lut needs sdp_ew"):
        NV_SMALL.derive(sdp_lut=True)
    with pytest.raises(ConfigError, match="unknown configuration 'nv_tiny'"):
        get_config("nv_tiny")
    assert isinstance(get_config("nv_small"), NvdlaConfig)


def test_validation_allows_every_value_projects_spec_allows():
    # each value one of NVIDIA's configurations uses, alone on top of the nearest preset
    NV_SMALL.derive(sdp_bs_throughput=16, sdp_bn_throughput=2, pdp_throughput=4, cdp_throughput=2)
    NV_SMALL.derive(primary_memif_width=128, primary_memif_latency=1024, mem_address_width=64)
    NV_SMALL_256.derive(mac_atomic_k=16, memory_atomic=16)
    NV_LARGE.derive(primary_memif_width=512, secondary_memif_width=64, secondary_memif_max_burst=4)


def test_hardware_rules_name_parameter_and_rule():
    with pytest.raises(ConfigError, match=r"cbuf_bank_width=8 bytes must hold one atomic C"):
        NV_SMALL.derive(mac_atomic_c=32)
    with pytest.raises(ConfigError, match=r"memory_atomic=32 exceeds mac_atomic_c=8"):
        NV_SMALL.derive(memory_atomic=32)
    with pytest.raises(ConfigError, match=r"mac_atomic_k=16 exceeds mac_atomic_c=8"):
        NV_SMALL.derive(mac_atomic_k=16)
    with pytest.raises(ConfigError, match=r"sdp_ew_throughput=8 is not one of \[1, 2, 4\]"):
        NV_LARGE.derive(sdp_ew_throughput=8)
    with pytest.raises(ConfigError, match=r"primary_memif_width=96"):
        NV_SMALL.derive(primary_memif_width=96)
    with pytest.raises(ConfigError, match=r"batch needs max_batch"):
        NV_SMALL.derive(batch=True)
