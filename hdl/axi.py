"""AXI4 master signatures with NVIDIA's NV_nvdla.v port naming, and NVDLA's internal DMA client
signatures (v1_hwarch.rst "Memory interface": DMA engines talk to MCIF/CVIF which speak AXI4).

Member names are the suffixes of NVIDIA's ports: the top level prefixes them with
``nvdla_core2dbb_`` (primary, DBB) or ``nvdla_core2cvsram_`` (secondary, CV SRAM), e.g.
``nvdla_core2dbb_aw_awvalid``. Only single-beat bursts are issued (``*len`` = 0); IDs are 8 bits
as in NV_nvdla.v.
"""
from __future__ import annotations

from amaranth.hdl import unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.config import NvdlaConfig

__all__ = ["AXI_ID_WIDTH", "AXI_LEN_WIDTH", "AxiMasterSignature", "DmaReadSignature",
           "DmaWriteSignature", "read_req_layout", "write_req_layout"]

AXI_ID_WIDTH = 8     # NV_nvdla.v: *_awid[7:0], *_arid[7:0], *_bid[7:0], *_rid[7:0]
AXI_LEN_WIDTH = 4    # NV_nvdla.v: *_awlen[3:0], *_arlen[3:0]


class AxiMasterSignature(wiring.Signature):
    """AXI4 master (NVDLA's view): address width ``addr_width`` bits, data ``data_width`` bits.

    Members (directions as NV_nvdla.v): aw_awvalid, aw_awready, aw_awid[7:0], aw_awlen[3:0],
    aw_awaddr; w_wvalid, w_wready, w_wdata, w_wstrb[data_width/8], w_wlast; b_bvalid, b_bready,
    b_bid[7:0]; ar_arvalid, ar_arready, ar_arid[7:0], ar_arlen[3:0], ar_araddr; r_rvalid,
    r_rready, r_rid[7:0], r_rlast, r_rdata.
    """

    def __init__(self, addr_width: int, data_width: int):
        self.addr_width = addr_width
        self.data_width = data_width
        super().__init__({
            "aw_awvalid": Out(1), "aw_awready": In(1), "aw_awid": Out(AXI_ID_WIDTH),
            "aw_awlen": Out(AXI_LEN_WIDTH), "aw_awaddr": Out(addr_width),
            "w_wvalid": Out(1), "w_wready": In(1), "w_wdata": Out(data_width),
            "w_wstrb": Out(data_width // 8), "w_wlast": Out(1),
            "b_bvalid": In(1), "b_bready": Out(1), "b_bid": In(AXI_ID_WIDTH),
            "ar_arvalid": Out(1), "ar_arready": In(1), "ar_arid": Out(AXI_ID_WIDTH),
            "ar_arlen": Out(AXI_LEN_WIDTH), "ar_araddr": Out(addr_width),
            "r_rvalid": In(1), "r_rready": Out(1), "r_rid": In(AXI_ID_WIDTH), "r_rlast": In(1),
            "r_rdata": In(data_width),
        })


def read_req_layout(cfg: NvdlaConfig) -> data.StructLayout:
    """DMA read request: ``addr`` byte address (cfg.mem_address_width bits) of one AXI data beat
    (cfg.axi_data_bytes bytes, aligned)."""
    return data.StructLayout({"addr": unsigned(cfg.mem_address_width)})


def write_req_layout(cfg: NvdlaConfig) -> data.StructLayout:
    """DMA write request: one AXI beat: ``addr`` (bytes, beat aligned), ``data``
    (cfg.primary_memif_width bits), ``strb`` (one bit per byte)."""
    return data.StructLayout({
        "addr": unsigned(cfg.mem_address_width),
        "data": unsigned(cfg.primary_memif_width),
        "strb": unsigned(cfg.primary_memif_width // 8),
    })


class DmaReadSignature(wiring.Signature):
    """A DMA read client (client's view): ``req`` Out(stream of :func:`read_req_layout`),
    ``rsp`` In(stream of one beat of read data, cfg.primary_memif_width bits), returned in request
    order. The client must only issue requests it has buffer space for (credit rule), so that
    MCIF never blocks the shared AXI R channel for long."""

    def __init__(self, cfg: NvdlaConfig):
        super().__init__({
            "req": Out(stream.Signature(read_req_layout(cfg))),
            "rsp": In(stream.Signature(unsigned(cfg.primary_memif_width))),
        })


class DmaWriteSignature(wiring.Signature):
    """A DMA write client (client's view): ``req`` Out(stream of :func:`write_req_layout`),
    ``done`` In(1): one-cycle pulse per completed write (AXI B response)."""

    def __init__(self, cfg: NvdlaConfig):
        super().__init__({
            "req": Out(stream.Signature(write_req_layout(cfg))),
            "done": In(1),
        })
