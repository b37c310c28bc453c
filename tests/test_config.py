"""The configuration presets equal NVIDIA's spec defines (../shared/nvdla/spec/defs)."""
from __future__ import annotations

import re

import pytest

from hdl.config import NV_LARGE, NV_SMALL, ConfigError, NvdlaConfig, get_config
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


def parse_spec(name: str) -> dict[str, str]:
    defs = {}
    for line in (nvdla_dir() / "spec" / "defs" / f"{name}.spec").read_text().splitlines():
        m = re.match(r"\s*#define\s+(\w+)", line)
        if m:
            defs[m.group(1)] = ""
    return defs


@pytest.mark.skipif(not have_shared(), reason="../shared/nvdla (spec defines) is absent")
@pytest.mark.parametrize("cfg", [NV_SMALL, NV_LARGE], ids=lambda c: c.name)
def test_preset_matches_spec(cfg):
    defs = parse_spec(cfg.name)
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
        if key == "SECONDARY_MEMIF_WIDTH" and not cfg.secondary_memif:
            continue          # unused when the secondary interface is disabled
        assert got == want, f"{attr}={got} but {cfg.name}.spec says {key}_{vals[0]}"
    dtype = "int8" if "FEATURE_DATA_TYPE_INT8" in defs else "int16_fp16"
    assert cfg.feature_data_type == dtype


def test_derived_values():
    # projects.spec: NVDLA_MEMIF_WIDTH = max(primary width, atomic*BPE[, secondary width])
    assert NV_SMALL.memif_width == 64 and NV_SMALL.dma_mask_bits == 1 and NV_SMALL.atom_bytes == 8
    assert NV_LARGE.memif_width == 512 and NV_LARGE.bpe == 8
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
