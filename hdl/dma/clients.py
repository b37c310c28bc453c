"""The DMA client table of MCIF (v1_hwarch.rst "Memory interface"): which unit's DMA engine is
which MCIF read/write client. The client index is also the AXI ID of its requests
(ARID/AWID), by which MCIF routes read data and write responses back.

Units not built yet get their entries when they are added; ``cfg.num_dma_read_clients`` /
``cfg.num_dma_write_clients`` bound the table (NVIDIA's nv_small MCIF has 7 read and 3 write
ports).
"""
from __future__ import annotations

from hdl.config import NvdlaConfig

__all__ = ["READ_CLIENTS", "EW_READ_CLIENTS", "WRITE_CLIENTS", "BDMA_READ_CLIENT", "BDMA_WRITE_CLIENT",
           "RBK_READ_CLIENT", "RBK_WRITE_CLIENT",
           "read_clients",
           "write_clients", "read_client", "write_client", "dma_params", "read_dma_params", "write_dma_params"]

# index = MCIF read client = ARID; nv_small's 7 read ports (v1_hwarch "Memory interface"):
# SDP's MRDMA, BRDMA (X1 operands), NRDMA (X2 operands), PDP_RDMA, CDP_RDMA, CDMA feature and
# weight fetch
READ_CLIENTS = ("sdp_mrdma", "sdp_brdma", "sdp_nrdma", "pdp_rdma", "cdp_rdma", "cdma_dat", "cdma_wt")
# clients of optional sub-units, after the base table so that the base indices never move:
# SDP's ERDMA (Y/EW operands) when cfg.sdp_ew (NVIDIA's nv_small has no EW, so no ERDMA port)
EW_READ_CLIENTS = ("sdp_erdma",)
# the Bridge DMA's read and write engines (hdl/bdma), after the others: indices 8 and 3
BDMA_READ_CLIENT, BDMA_WRITE_CLIENT = "bdma_rd", "bdma_wr"
# RUBIK's read and write engines (hdl/rubik), after BDMA's: indices 9 and 4 (nv_full has 10 read
# and 5 write clients)
RBK_READ_CLIENT, RBK_WRITE_CLIENT = "rbk_rd", "rbk_wr"
# index = MCIF write client = AWID; nv_small's 3 write ports: SDP, PDP and CDP write DMAs
WRITE_CLIENTS = ("sdp_wdma", "pdp_wdma", "cdp_wdma")


def _table(fixed: tuple, optional: tuple) -> tuple:
    """``fixed`` then the ``(name, present)`` pairs of ``optional``, an absent one as None,
    without trailing Nones."""
    out = list(fixed) + [name if present else None for name, present in optional]
    while len(out) > len(fixed) and out[-1] is None:
        out.pop()
    return tuple(out)


def read_clients(cfg: NvdlaConfig) -> tuple:
    """The MCIF read clients of configuration ``cfg`` in index (= ARID) order: the 7 of
    READ_CLIENTS, then ``sdp_erdma`` (7) when cfg.sdp_ew, ``bdma_rd`` (8) when cfg.bdma and
    ``rbk_rd`` (9) when cfg.rubik; an index no client of ``cfg`` uses holds None (ERDMA's
    without SDP's EW, when BDMA is there)."""
    return _table(READ_CLIENTS, ((EW_READ_CLIENTS[0], cfg.sdp_ew), (BDMA_READ_CLIENT, cfg.bdma),
                                 (RBK_READ_CLIENT, cfg.rubik)))


def write_clients(cfg: NvdlaConfig) -> tuple:
    """The MCIF write clients of ``cfg`` in index (= AWID) order: WRITE_CLIENTS, then
    ``bdma_wr`` (3) when cfg.bdma and ``rbk_wr`` (4) when cfg.rubik (None where absent)."""
    return _table(WRITE_CLIENTS, ((BDMA_WRITE_CLIENT, cfg.bdma), (RBK_WRITE_CLIENT, cfg.rubik)))


def read_client(name: str) -> int:
    """MCIF read client index (= ARID) of DMA engine ``name`` (``sdp_erdma``: 7, present only
    in configurations with cfg.sdp_ew; ``bdma_rd``: 8; ``rbk_rd``: 9; see
    :func:`read_clients`). Raises ValueError if unknown."""
    return (READ_CLIENTS + EW_READ_CLIENTS + (BDMA_READ_CLIENT, RBK_READ_CLIENT)).index(name)


def write_client(name: str) -> int:
    """MCIF write client index (= AWID) of DMA engine ``name`` (``bdma_wr``: 3, ``rbk_wr``: 4).
    Raises ValueError if unknown."""
    return (WRITE_CLIENTS + (BDMA_WRITE_CLIENT, RBK_WRITE_CLIENT)).index(name)


def dma_params(cfg: NvdlaConfig) -> dict:
    """Explicit parameters of a primary-memory (DBB) :class:`hdl.dma.ReadDma` /
    :class:`hdl.dma.WriteDma` derived from ``cfg``: ``addr_width`` (bits), ``atom_bytes``,
    ``atom_elems`` (channels per atom), ``beat_bytes`` (AXI data bytes), ``max_burst`` (beats,
    cfg.primary_memif_max_burst). The FIFO ``depth`` is the caller's choice."""
    return dict(addr_width=cfg.mem_address_width, atom_bytes=cfg.atom_bytes,
                atom_elems=cfg.memory_atomic, beat_bytes=cfg.axi_data_bytes,
                max_burst=cfg.primary_memif_max_burst)


def read_dma_params(cfg: NvdlaConfig) -> dict:
    """:func:`dma_params` plus the latency FIFO ``depth`` (beats) of a primary-memory
    :class:`hdl.dma.ReadDma`: a power of two, at least 64 and at least
    cfg.primary_memif_latency + 16, so that requests keep flowing over the memory latency."""
    depth = 64
    while depth < cfg.primary_memif_latency + 16:
        depth *= 2
    return dict(dma_params(cfg), depth=depth)


def write_dma_params(cfg: NvdlaConfig) -> dict:
    """:func:`dma_params` plus the data FIFO ``depth`` (beats) of a primary-memory
    :class:`hdl.dma.WriteDma`: 4 bursts of cfg.primary_memif_max_burst beats, at least 8.
    A beat stays in the FIFO from its push until MCIF has taken the burst's request through its
    AW stage and the beat through its W stage: 5 cycles with a memory that is always ready, so
    4 entries (this function's minimum until 2026-11) let a write DMA send 4 beats in 5
    cycles, 80 % of the bus, on every configuration (measured in the Amaranth simulator, WriteDma
    into Mcif: 1,024 beats in 1,279 cycles; with 5 or more entries 1,024);
    tests/hdl/test_mcif.py checks one beat per cycle."""
    return dict(dma_params(cfg), depth=max(8, 4 * cfg.primary_memif_max_burst))
