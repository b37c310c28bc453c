"""AXI4 master signatures with NVIDIA's NV_nvdla.v port naming, and NVDLA's internal DMA client
signatures (v1_hwarch.rst "Memory interface": DMA engines talk to MCIF/CVIF which speak AXI4).

Member names are the suffixes of NVIDIA's ports: the top level prefixes them with
``nvdla_core2dbb_`` (primary, DBB) or ``nvdla_core2cvsram_`` (secondary, CV SRAM), e.g.
``nvdla_core2dbb_aw_awvalid``. Bursts are INCR of up to 16 beats (``*len`` = beats - 1); IDs are
8 bits as in NV_nvdla.v.
"""
from __future__ import annotations

from amaranth.hdl import unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AXI_ID_WIDTH", "AXI_LEN_WIDTH", "AxiMasterSignature", "DmaReadSignature",
           "DmaWriteSignature", "read_req_layout", "write_req_layout", "write_data_layout"]

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


def read_req_layout(addr_width: int, cv: bool = False) -> data.StructLayout:
    """DMA read request: one AXI burst: ``addr`` byte address of its first beat (beat aligned,
    ``addr_width`` bits), ``len`` beats minus one (AXI ARLEN encoding, AXI_LEN_WIDTH bits). The
    burst must not cross a 4 KB boundary (AXI rule; the requester guarantees it).

    ``cv`` (a configuration with the secondary memory interface): one more bit ``cv``, the
    memory of the request: 1 = secondary (CVIF, ``nvdla_core2cvsram``), 0 = primary (MCIF),
    i.e. the inverse of the client's ``*_RAM_TYPE`` register field (CV = 0, MC = 1)."""
    fields = {"addr": unsigned(addr_width), "len": unsigned(AXI_LEN_WIDTH)}
    if cv:
        fields["cv"] = unsigned(1)
    return data.StructLayout(fields)


def write_req_layout(addr_width: int, cv: bool = False) -> data.StructLayout:
    """DMA write request: one AXI burst, same fields as :func:`read_req_layout` (``len`` in
    AWLEN encoding); its ``len + 1`` data beats follow on the client's ``data`` stream."""
    return read_req_layout(addr_width, cv)


def write_data_layout(data_width: int) -> data.StructLayout:
    """One write data beat: ``data`` (``data_width`` bits), ``strb`` (one bit per byte)."""
    return data.StructLayout({"data": unsigned(data_width), "strb": unsigned(data_width // 8)})


class DmaReadSignature(wiring.Signature):
    """A DMA read client (client's view).

    Members: ``req`` Out(stream of :func:`read_req_layout` ``(addr_width)``): one burst per
    request; ``rsp`` In(stream of ``unsigned(data_width)``): the read data beats, in request
    order (each burst's ``len + 1`` beats in address order).

    ``cv``: the requests carry the memory they go to (:func:`read_req_layout`); a unit's client
    port has it on a configuration with the secondary memory interface, a DMA engine's never.

    Credit rule: the client only issues requests whose beats it has buffer space for, so that
    it never stalls the shared AXI R channel for long.
    """

    def __init__(self, addr_width: int, data_width: int, cv: bool = False):
        self.addr_width, self.data_width, self.cv = addr_width, data_width, cv
        super().__init__({
            "req": Out(stream.Signature(read_req_layout(addr_width, cv))),
            "rsp": In(stream.Signature(unsigned(data_width))),
        })


class DmaWriteSignature(wiring.Signature):
    """A DMA write client (client's view).

    Members: ``req`` Out(stream of :func:`write_req_layout` ``(addr_width)``): one burst per
    request; ``data`` Out(stream of :func:`write_data_layout` ``(data_width)``): the beats of
    the requested bursts, in request order (MCIF takes a burst's beats after its request and
    marks the last with WLAST); ``done`` In(1): one-cycle pulse per completed burst (AXI B
    response).

    ``cv``: as :class:`DmaReadSignature`'s.

    A client should offer a request only when its beats are ready (or about to be), because
    MCIF keeps the AXI W channel for that burst until its last beat.
    """

    def __init__(self, addr_width: int, data_width: int, cv: bool = False):
        self.addr_width, self.data_width, self.cv = addr_width, data_width, cv
        super().__init__({
            "req": Out(stream.Signature(write_req_layout(addr_width, cv))),
            "data": Out(stream.Signature(write_data_layout(data_width))),
            "done": In(1),
        })
