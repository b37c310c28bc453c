"""Which configurations the RTL builds today, and one line naming what a refused one lacks.

Every CLI that elaborates ``NV_nvdla`` (``hdl.build``, ``sim.build``, the trace CLI's rtl and
amaranth engines, ``hdl.synth``) calls :func:`check_buildable` first, so a configuration whose
features are not built yet stops with one line naming them instead of building something else
(issue 30 item 1). The model (``verif.model``) has its own limits and does not use this.
"""
from __future__ import annotations

from hdl.config import NvdlaConfig

__all__ = ["UnbuiltConfig", "unbuilt", "check_buildable", "CONV16_UNBUILT"]


#: what the RTL lacks of the 16-bit precisions beside INT8 (``cfg.conv16``, nv_full's
#: int8_int16_fp16; issue 33, docs/conv16.md): nothing since every unit computes them
CONV16_UNBUILT: tuple[str, ...] = ()


class UnbuiltConfig(ValueError):
    """A configuration the RTL cannot build yet; the message is one line naming what is missing."""


def unbuilt(cfg: NvdlaConfig) -> list[str]:
    """The features ``cfg`` names that the RTL does not build yet, each a short phrase; empty
    when ``hdl.top.NV_nvdla(cfg)`` builds exactly what ``cfg`` names."""
    missing = []
    # the weights' precision is each layer's (D_MISC_CFG.PROC_PRECISION): weight_data_type
    # names nothing more than the feature data's
    if cfg.feature_data_type == "int16_fp16" or cfg.weight_data_type not in ("int8", cfg.feature_data_type):
        missing.append(f"{cfg.feature_data_type} feature data with {cfg.weight_data_type} "
                       f"weights (int8, and int8_int16_fp16 with int8 or int8_int16_fp16 "
                       f"weights, are built)")
    elif cfg.conv16:
        missing.extend(CONV16_UNBUILT)
    if cfg.winograd:
        missing.append("Winograd convolution")
    # hdl/rubik builds contract, split and merge together, on 32-byte atoms
    if cfg.rubik and not (cfg.rubik_contract and cfg.rubik_reshape):
        missing.append("RUBIK without both contract and split/merge (hdl/rubik builds both)")
    if cfg.rubik and cfg.axi_data_bytes < 32:
        missing.append(f"RUBIK on AXI beats of {cfg.axi_data_bytes} bytes (it moves 32-byte atoms)")
    # hdl/bdma: 32-byte atoms on the DMA engines, one per AXI beat at least
    if cfg.bdma and cfg.axi_data_bytes < 32:
        missing.append(f"BDMA on AXI beats of {cfg.axi_data_bytes} bytes (it moves 32-byte atoms)")
    # CVIF is MCIF's logic on the CV SRAM port, its clients the same DMA engines (hdl/top.py)
    if cfg.secondary_memif and cfg.secondary_memif_width != cfg.primary_memif_width:
        missing.append(f"a secondary memory interface {cfg.secondary_memif_width} bits wide "
                       f"beside a {cfg.primary_memif_width}-bit primary one")
    # docs/conv.md: CACC delivers output atoms of atomic K channels, one memory atom each
    if cfg.mac_atomic_k != cfg.memory_atomic:
        missing.append(f"the convolution pipeline for atomic K {cfg.mac_atomic_k} with "
                       f"{cfg.memory_atomic}-channel memory atoms")
    if cfg.axi_data_bytes < cfg.atom_bytes:
        missing.append(f"AXI beats ({cfg.axi_data_bytes} B) narrower than a memory atom "
                       f"({cfg.atom_bytes} B)")
    return missing


def check_buildable(cfg: NvdlaConfig) -> None:
    """Raise :class:`UnbuiltConfig` (one line) when :func:`unbuilt` lists anything for ``cfg``."""
    missing = unbuilt(cfg)
    if missing:
        raise UnbuiltConfig(f"{cfg.name}: the RTL does not build {'; '.join(missing)} yet")
