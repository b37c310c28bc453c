"""SDP_RDMA MRDMA: reads the SDP input feature cube from memory (v1_ias_unit_description.rst
"SDP" / "SDP_RDMA"; format.rst "Feature data"), a :class:`hdl.dma.ReadDma` on the primary
memory. The last surface is partial when C is not a multiple of the atom; it still occupies whole
atoms, so every surface is read as whole atoms (the padding lanes pass through the datapath like
data lanes).
"""
from __future__ import annotations

from hdl.config import NvdlaConfig
from hdl.dma import ReadDma, atom_layout, read_dma_params

__all__ = ["atom_layout", "SdpRdma"]


class SdpRdma(ReadDma):
    """SDP MRDMA (BRDMA/NRDMA: :mod:`hdl.sdp.brdma`): :class:`hdl.dma.ReadDma` with the
    primary-memory parameters of ``cfg`` and :func:`atom_layout` atoms. Ports as ReadDma
    (``cube`` from SDP_RDMA D_SRC_* and D_DATA_CUBE_*)."""

    def __init__(self, cfg: NvdlaConfig):
        self.cfg = cfg
        super().__init__(**read_dma_params(cfg), atom_shape=atom_layout(cfg))
