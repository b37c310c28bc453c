"""MCIF: memory client interface to the DBB AXI4 port (v1_hwarch.rst "Memory interface",
v1_ias_unit_description.rst "MCIF"). CVIF, the interface to the on-chip SRAM on the secondary
port (``nvdla_core2cvsram_*``), is a second instance with the same clients (``hdl/top.py``,
``hdl/dma/route.py``).

Read side: round-robin arbitration between the read clients; each granted request is one AXI
burst (``arlen`` = request ``len``) with ``arid`` = client index (:mod:`hdl.dma.clients`). Any
number of bursts may be outstanding. Read data beats are routed by ``rid`` to that client's
``rsp`` stream as they come (``rready`` follows that client's ``rsp.ready``, and is high while
no beat is offered): AXI keeps beats of
one ID in order but may return, and interleave, different IDs in any order, which needs no
reorder buffer here because every client receives only its own beats. Clients bound their own
outstanding beats by their buffer space (credit rule, :class:`hdl.axi.DmaReadSignature`).

Write side: round-robin between the write clients for AW (``awid`` = client index, ``awlen`` =
request ``len``). Every accepted AW queues (client, len) in the W-order FIFO; the W channel
serves the head entry only, taking exactly ``len + 1`` beats from that client's ``data`` stream
and marking the last one with ``wlast`` (AXI4 has no write interleaving: W beats follow AW order,
one burst at a time). B responses pulse the client's ``done`` (``bready`` is always 1).

AR, AW and W outputs are registered (:class:`hdl.lib.stream.PipelineStage`), one transfer per
cycle per channel at full rate. ``idle`` (MCIF STATUS.IDLE) is high when no AXI transaction is
queued or outstanding.
"""
from __future__ import annotations

from amaranth.hdl import Module, Signal, unsigned
from amaranth.lib import data, fifo, wiring
from amaranth.lib.wiring import In, Out

from hdl.axi import (AXI_ID_WIDTH, AXI_LEN_WIDTH, AxiMasterSignature, DmaReadSignature,
                     DmaWriteSignature)
from hdl.config import NvdlaConfig
from hdl.dma.clients import read_clients, write_clients
from hdl.lib.stream import PipelineStage

__all__ = ["Mcif", "round_robin"]

OUTSTANDING_BITS = 16     # bursts in flight per direction (for idle)


def round_robin(m: Module, valids: list, last: Signal, name: str):
    """Combinational round-robin pick: the lowest index > ``last`` with its valid set, else the
    lowest valid index. Returns (``grant`` index signal, ``any`` signal)."""
    n = len(valids)
    grant_lo = Signal(range(max(n, 2)), name=f"{name}_grant_lo")
    grant_hi = Signal(range(max(n, 2)), name=f"{name}_grant_hi")
    has_hi = Signal(name=f"{name}_has_hi")
    any_ = Signal(name=f"{name}_any")
    for i in reversed(range(n)):
        with m.If(valids[i]):
            m.d.comb += grant_lo.eq(i)
        if i > 0:   # index 0 is never "after" last
            with m.If(valids[i] & (last < i)):
                m.d.comb += [grant_hi.eq(i), has_hi.eq(1)]
    grant = Signal(range(max(n, 2)), name=f"{name}_grant")
    with m.If(has_hi):
        m.d.comb += grant.eq(grant_hi)
    with m.Else():
        m.d.comb += grant.eq(grant_lo)
    m.d.comb += any_.eq(_or(valids))
    return grant, any_


def _or(sigs):
    acc = sigs[0]
    for s in sigs[1:]:
        acc = acc | s
    return acc


def _addr_layout(addr_width: int) -> data.StructLayout:
    return data.StructLayout({"addr": unsigned(addr_width), "len": unsigned(AXI_LEN_WIDTH),
                              "id": unsigned(AXI_ID_WIDTH)})


class Mcif(wiring.Component):
    """Memory client interface (primary memory, DBB).

    Parameters: ``cfg`` (:class:`hdl.config.NvdlaConfig`: cfg.mem_address_width,
    cfg.primary_memif_width); ``n_read``/``n_write`` clients (default
    cfg.num_dma_read_clients, or more when the client table of ``cfg`` has more
    (:func:`hdl.dma.clients.read_clients`), / cfg.num_dma_write_clients); ``w_order_depth``: AW bursts whose
    W beats are not all sent yet (entries of the W-order FIFO; AW stalls when it is full).

    Ports: ``axi`` Out(:class:`hdl.axi.AxiMasterSignature`); ``rd``
    In(:class:`hdl.axi.DmaReadSignature`).array(n_read); ``wr``
    In(:class:`hdl.axi.DmaWriteSignature`).array(n_write); ``idle`` Out(1): no AXI transaction
    queued or outstanding.
    """

    def __init__(self, cfg: NvdlaConfig, n_read: int | None = None, n_write: int | None = None,
                 *, w_order_depth: int = 8):
        self.cfg = cfg
        # at least one port per client of the table (hdl/dma/clients.py read_clients: ERDMA is
        # the 8th on a configuration with SDP's EW sub-unit)
        self.n_read = n_read or max(cfg.num_dma_read_clients, len(read_clients(cfg)))
        self.n_write = n_write or max(cfg.num_dma_write_clients, len(write_clients(cfg)))
        self.w_order_depth = w_order_depth
        aw, dw = cfg.mem_address_width, cfg.primary_memif_width
        super().__init__({
            "axi": Out(AxiMasterSignature(aw, dw)),
            "rd": In(DmaReadSignature(aw, dw)).array(self.n_read),
            "wr": In(DmaWriteSignature(aw, dw)).array(self.n_write),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        axi = self.axi
        aw = self.cfg.mem_address_width

        # ---- AR: arbitration -> register stage -> AXI ----
        m.submodules.ar_stage = ar = PipelineStage(_addr_layout(aw))
        rd_last = Signal(range(max(self.n_read, 2)))
        rgrant, rany = round_robin(m, [c.req.valid for c in self.rd], rd_last, "rd")
        m.d.comb += [ar.i.valid.eq(rany), ar.i.payload.id.eq(rgrant)]
        for i, c in enumerate(self.rd):
            with m.If(rgrant == i):
                m.d.comb += [ar.i.payload.addr.eq(c.req.payload.addr),
                             ar.i.payload.len.eq(c.req.payload.len),
                             c.req.ready.eq(rany & ar.i.ready)]
        with m.If(ar.i.valid & ar.i.ready):
            m.d.sync += rd_last.eq(rgrant)
        m.d.comb += [axi.ar_arvalid.eq(ar.o.valid), axi.ar_araddr.eq(ar.o.payload.addr),
                     axi.ar_arlen.eq(ar.o.payload.len), axi.ar_arid.eq(ar.o.payload.id),
                     ar.o.ready.eq(axi.ar_arready)]

        # ---- R: routed by ID, beat by beat (any interleaving of IDs) ----
        # rready is high while no beat is offered: a memory that offers the next beat only
        # to a ready master (NVIDIA's trace player's memory, the ``nvidia`` and ``fast``
        # profiles of verif/axi_slave.py) would otherwise wait forever behind a stale ``rid``
        # whose client is full (e.g. SDP's NRDMA, all its beats received, while CDMA's are
        # still to come: a deadlock). A client with beats in flight has room for them
        # (credit rule), so the beat it is then offered is taken.
        for i, c in enumerate(self.rd):
            hit = axi.r_rid == i
            m.d.comb += [c.rsp.payload.eq(axi.r_rdata), c.rsp.valid.eq(axi.r_rvalid & hit)]
            with m.If(hit):
                m.d.comb += axi.r_rready.eq(c.rsp.ready | ~axi.r_rvalid)
        with m.If(axi.r_rid >= self.n_read):
            m.d.comb += axi.r_rready.eq(1)       # unknown ID: drop rather than hang

        # ---- AW: arbitration -> register stage -> AXI; (client, len) -> W-order FIFO ----
        order_layout = data.StructLayout({"id": unsigned(AXI_ID_WIDTH),
                                          "len": unsigned(AXI_LEN_WIDTH)})
        m.submodules.w_order = w_order = fifo.SyncFIFOBuffered(width=order_layout.size,
                                                               depth=self.w_order_depth)
        m.submodules.aw_stage = aws = PipelineStage(_addr_layout(aw))
        wr_last = Signal(range(max(self.n_write, 2)))
        wgrant, wany = round_robin(m, [c.req.valid for c in self.wr], wr_last, "wr")
        aw_fire = Signal()
        m.d.comb += [aws.i.valid.eq(wany & w_order.w_rdy), aws.i.payload.id.eq(wgrant),
                     aw_fire.eq(aws.i.valid & aws.i.ready)]
        for i, c in enumerate(self.wr):
            with m.If(wgrant == i):
                m.d.comb += [aws.i.payload.addr.eq(c.req.payload.addr),
                             aws.i.payload.len.eq(c.req.payload.len),
                             c.req.ready.eq(wany & w_order.w_rdy & aws.i.ready)]
        order_in = data.View(order_layout, w_order.w_data)
        m.d.comb += [order_in.id.eq(wgrant), order_in.len.eq(aws.i.payload.len),
                     w_order.w_en.eq(aw_fire)]
        with m.If(aw_fire):
            m.d.sync += wr_last.eq(wgrant)
        m.d.comb += [axi.aw_awvalid.eq(aws.o.valid), axi.aw_awaddr.eq(aws.o.payload.addr),
                     axi.aw_awlen.eq(aws.o.payload.len), axi.aw_awid.eq(aws.o.payload.id),
                     aws.o.ready.eq(axi.aw_awready)]

        # ---- W: the head burst of the W-order FIFO owns the channel until its last beat ----
        w_layout = data.StructLayout({"data": unsigned(self.cfg.primary_memif_width),
                                      "strb": unsigned(self.cfg.primary_memif_width // 8),
                                      "last": 1})
        m.submodules.w_stage = ws = PipelineStage(w_layout)
        head = data.View(order_layout, w_order.r_data)
        beat = Signal(AXI_LEN_WIDTH)              # beats of the head burst already sent
        w_fire = Signal()
        m.d.comb += [ws.i.payload.last.eq(beat == head.len),
                     w_fire.eq(ws.i.valid & ws.i.ready)]
        for i, c in enumerate(self.wr):
            with m.If(w_order.r_rdy & (head.id == i)):
                m.d.comb += [ws.i.valid.eq(c.data.valid),
                             ws.i.payload.data.eq(c.data.payload.data),
                             ws.i.payload.strb.eq(c.data.payload.strb),
                             c.data.ready.eq(ws.i.ready)]
        with m.If(w_fire):
            with m.If(ws.i.payload.last):
                m.d.sync += beat.eq(0)
            with m.Else():
                m.d.sync += beat.eq(beat + 1)
        m.d.comb += w_order.r_en.eq(w_fire & ws.i.payload.last)
        m.d.comb += [axi.w_wvalid.eq(ws.o.valid), axi.w_wdata.eq(ws.o.payload.data),
                     axi.w_wstrb.eq(ws.o.payload.strb), axi.w_wlast.eq(ws.o.payload.last),
                     ws.o.ready.eq(axi.w_wready)]

        # ---- B: write responses complete a burst ----
        m.d.comb += axi.b_bready.eq(1)
        for i, c in enumerate(self.wr):
            m.d.comb += c.done.eq(axi.b_bvalid & (axi.b_bid == i))

        # ---- outstanding bursts for MCIF STATUS.IDLE ----
        rd_out = Signal(OUTSTANDING_BITS)
        wr_out = Signal(OUTSTANDING_BITS)
        ar_sent = axi.ar_arvalid & axi.ar_arready
        r_done = axi.r_rvalid & axi.r_rready & axi.r_rlast
        aw_sent = axi.aw_awvalid & axi.aw_awready
        b_done = axi.b_bvalid & axi.b_bready
        m.d.sync += [rd_out.eq(rd_out + ar_sent - r_done), wr_out.eq(wr_out + aw_sent - b_done)]
        m.d.comb += self.idle.eq((rd_out == 0) & (wr_out == 0) & ~ar.o.valid & ~aws.o.valid
                                 & ~ws.o.valid & (w_order.level == 0))
        return m
