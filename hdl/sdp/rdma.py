"""SDP_RDMA MRDMA: reads the SDP input feature cube from memory (v1_ias_unit_description.rst
"SDP" / "SDP_RDMA"; format.rst "Feature data"), a :class:`hdl.dma.ReadDma` on the primary
memory. The last surface is partial when C is not a multiple of the atom; it still occupies whole
atoms, so every surface is read as whole atoms (the padding lanes pass through the datapath like
data lanes).

INT16 (and FP16, :func:`has_fp16`) layers on a configuration with runtime INT16
(:func:`has_int16`): the atoms hold
:func:`int16_elems` two-byte channels; SDP's DMAs are then built with that many channels per
atom (the walkers count surfaces ``channel >> log2(atom_elems)``, the only use of it) and
:class:`hdl.sdp.Sdp` gives them the channel count halved in INT8 layers (``(C - 1) >> 1``, the
same surfaces), so that INT16's surfaces (up to 512 of them for 8192 channels) fit the 13-bit
channel field.
"""
from __future__ import annotations

from hdl.config import NvdlaConfig
from hdl.dma import ReadDma, atom_layout, read_dma_params

__all__ = ["atom_layout", "SdpRdma", "has_int16", "has_fp16", "int16_elems", "sdp_dma_elems"]


def has_int16(cfg: NvdlaConfig) -> bool:
    """The configuration computes INT16 layers beside INT8 ones on its one-byte atoms
    (cfg.precisions has int16 and cfg.bpe is 8: nv_full's ``int8_int16_fp16``): SDP then
    selects its INT16 datapath per layer (SDP D_DATA_FORMAT.PROC_PRECISION = 1; see
    :class:`hdl.sdp.Sdp`). ``int16_fp16`` (cfg.bpe 16) has 16-bit elements in every layer
    already; configurations without int16 build nothing of it."""
    return "int16" in cfg.precisions and cfg.bpe == 8


def has_fp16(cfg: NvdlaConfig) -> bool:
    """The configuration computes FP16 layers too (SDP D_DATA_FORMAT.PROC_PRECISION = 2), on
    the two-byte atoms of :func:`has_int16`: cfg.precisions has fp16 besides int16 on one-byte
    atoms (nv_full's ``int8_int16_fp16``; :mod:`hdl.sdp.fp16`). Else nothing of it is built."""
    return has_int16(cfg) and "fp16" in cfg.precisions


def int16_elems(cfg: NvdlaConfig) -> int:
    """Channels per atom in an INT16 layer: ``cfg.atom_bytes // 2`` two-byte elements
    (format.rst "Feature Data Format": little-endian int16; the model's ``SdpCore._epa``)."""
    return cfg.atom_bytes // 2


def sdp_dma_elems(cfg: NvdlaConfig) -> int:
    """``atom_elems`` of SDP's DMAs (module docstring): :func:`int16_elems` with runtime INT16,
    else cfg.memory_atomic."""
    return int16_elems(cfg) if has_int16(cfg) else cfg.memory_atomic


class SdpRdma(ReadDma):
    """SDP MRDMA (BRDMA/NRDMA: :mod:`hdl.sdp.brdma`): :class:`hdl.dma.ReadDma` with the
    primary-memory parameters of ``cfg`` and :func:`atom_layout` atoms. Ports as ReadDma
    (``cube`` from SDP_RDMA D_SRC_* and D_DATA_CUBE_*; with runtime INT16 ``atom_elems`` is
    :func:`sdp_dma_elems`, module docstring)."""

    def __init__(self, cfg: NvdlaConfig):
        self.cfg = cfg
        super().__init__(**dict(read_dma_params(cfg), atom_elems=sdp_dma_elems(cfg)),
                         atom_shape=atom_layout(cfg))
