"""SDP WDMA: writes the SDP output cube to memory (v1_ias_unit_description.rst "SDP" WDMA;
format.rst "Feature data"), a :class:`hdl.dma.WriteDma` on the primary memory. Geometry from SDP
D_DST_BASE_ADDR_HIGH/LOW, D_DST_LINE_STRIDE, D_DST_SURFACE_STRIDE (bytes) and SDP's
D_DATA_CUBE_WIDTH/HEIGHT/CHANNEL (minus-one encoded).
"""
from __future__ import annotations

from hdl.config import NvdlaConfig
from hdl.dma import WriteDma, write_dma_params
from hdl.sdp.rdma import atom_layout, sdp_dma_elems

__all__ = ["SdpWdma"]


class SdpWdma(WriteDma):
    """SDP write DMA: :class:`hdl.dma.WriteDma` with the primary-memory parameters of ``cfg``
    and :func:`hdl.sdp.rdma.atom_layout` atoms. Ports as WriteDma (``done`` pulses when the
    whole cube is written and acknowledged; with runtime INT16 ``atom_elems`` is
    :func:`hdl.sdp.rdma.sdp_dma_elems` and the channel count is given in its units, see
    :mod:`hdl.sdp.rdma`)."""

    def __init__(self, cfg: NvdlaConfig):
        self.cfg = cfg
        super().__init__(**dict(write_dma_params(cfg), atom_elems=sdp_dma_elems(cfg)),
                         atom_shape=atom_layout(cfg))
