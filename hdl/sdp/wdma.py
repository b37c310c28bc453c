"""SDP WDMA: writes the SDP output cube to memory (v1_ias_unit_description.rst "SDP" WDMA;
format.rst "Feature data"), a :class:`hdl.dma.WriteDma` on the primary memory. Geometry from SDP
D_DST_BASE_ADDR_HIGH/LOW, D_DST_LINE_STRIDE, D_DST_SURFACE_STRIDE (bytes) and SDP's
D_DATA_CUBE_WIDTH/HEIGHT/CHANNEL (minus-one encoded).

Multi-batch (configurations with ``cfg.batch``; D_FEATURE_MODE_CFG.BATCH_NUMBER = N-1 > 0,
docs/conv.md "Multi-batch"): the atoms arrive from CACC batch fastest (surface, line, atom,
batch) and atom (x, y, s) of batch b goes to the cube's address + b x D_DST_BATCH_STRIDE, one
atom per request (:class:`hdl.dma.batch.BatchWalker`).
"""
from __future__ import annotations

from hdl.config import NvdlaConfig
from amaranth.hdl import Module, Signal

from hdl.dma import WriteDma, write_dma_params
from hdl.dma.batch import BATCH_BITS, BatchWalker
from hdl.dma.cube import STRIDE_BITS
from hdl.sdp.rdma import atom_layout, sdp_dma_elems

__all__ = ["SdpWdma"]


class SdpWdma(WriteDma):
    """SDP write DMA: :class:`hdl.dma.WriteDma` with the primary-memory parameters of ``cfg``
    and :func:`hdl.sdp.rdma.atom_layout` atoms. Ports as WriteDma (``done`` pulses when the
    whole cube is written and acknowledged; with runtime INT16 ``atom_elems`` is
    :func:`hdl.sdp.rdma.sdp_dma_elems` and the channel count is given in its units, see
    :mod:`hdl.sdp.rdma`).

    With ``cfg.batch`` the walker is a :class:`hdl.dma.batch.BatchWalker` and the DMA has its two
    plain inputs ``batches`` (N-1, :data:`hdl.dma.batch.BATCH_BITS` bits) and ``batch_stride``
    (bytes), sampled at ``start``; without, they are not built (the walk is the cube's)."""

    def __init__(self, cfg: NvdlaConfig):
        self.cfg = cfg
        if cfg.batch:
            self.walker_class = BatchWalker
            self.batches = Signal(BATCH_BITS, name="batches")
            self.batch_stride = Signal(STRIDE_BITS, name="batch_stride")
        super().__init__(**dict(write_dma_params(cfg), atom_elems=sdp_dma_elems(cfg)),
                         atom_shape=atom_layout(cfg))

    def add_walker(self, m: Module):
        out = super().add_walker(m)
        if self.cfg.batch:
            m.d.comb += [out[0].batches.eq(self.batches),
                         out[0].batch_stride.eq(self.batch_stride)]
        return out
