"""Several read DMAs on one read client port (v1_ias_unit_description.rst "Convolution DMA":
CDMA's weight client reads the weights, their WMB and WGS through one port).

Requests are taken round-robin among the clients offering one; each taken request's client and
length go into a tag FIFO, and the port's read data, which comes back in request order
(:class:`hdl.axi.DmaReadSignature`), goes to the client at the FIFO's head until its burst's
last beat. Every client keeps the credit rule on its own (it requests only beats it has room
for, e.g. :class:`hdl.dma.ReadDma`), so the port's data is always taken at once.
"""
from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, fifo, wiring
from amaranth.lib.wiring import In, Out

from hdl.axi import AXI_LEN_WIDTH, DmaReadSignature

__all__ = ["ReadShare"]


class ReadShare(wiring.Component):
    """``n`` read clients to one read port, in request order (module docstring).

    Parameters: ``addr_width``, ``data_width`` (bits), ``n`` (clients, >= 2), ``requests``:
    the tag FIFO's depth, the most requests in flight on the port (a request waits while it is
    full; 16 covers a memory latency of 16 bursts).

    Ports: ``clients`` In(array of ``n`` :class:`hdl.axi.DmaReadSignature`); ``port``
    Out(:class:`hdl.axi.DmaReadSignature`). Timing: a request passes in its cycle (combinational
    arbitration, the round-robin pointer registered); read data passes combinationally.

    Raises ValueError: ``n < 2``.
    """

    def __init__(self, addr_width: int, data_width: int, n: int = 2, requests: int = 16):
        if n < 2:
            raise ValueError("ReadShare: at least two clients")
        self.n, self.requests = n, requests
        sig = DmaReadSignature(addr_width, data_width)
        super().__init__({"clients": In(sig).array(n),
                          "port": Out(DmaReadSignature(addr_width, data_width))})

    def elaborate(self, platform):
        m = Module()
        n = self.n
        tag = data.StructLayout({"client": range(n), "len": AXI_LEN_WIDTH})
        # (SyncFIFO: a tag can be read the cycle after it is written, when the first beat may
        # come back at the earliest; SyncFIFOBuffered's extra cycle would refuse that beat)
        m.submodules.tags = tags = fifo.SyncFIFO(width=tag.size, depth=self.requests)
        # round-robin: the first client offering a request from ``nxt`` on
        nxt = Signal(range(n))
        sel = Signal(range(n))
        any_req = Signal()
        for off in reversed(range(n)):
            for base in range(n):
                c = (base + off) % n
                with m.If((nxt == base) & self.clients[c].req.valid):
                    m.d.comb += [sel.eq(c), any_req.eq(1)]
        req = self.port.req
        for c, cl in enumerate(self.clients):
            with m.If(sel == c):
                m.d.comb += [req.payload.eq(cl.req.payload),
                             cl.req.ready.eq(req.ready & tags.w_rdy)]
        issue = Signal()
        w = data.View(tag, tags.w_data)
        m.d.comb += [req.valid.eq(any_req & tags.w_rdy),
                     issue.eq(req.valid & req.ready),
                     tags.w_en.eq(issue),
                     w.client.eq(sel), w.len.eq(req.payload.len)]
        with m.If(issue):
            m.d.sync += nxt.eq(Mux(sel == n - 1, 0, sel + 1))

        # read data to the client at the head, counted by its burst's length
        head = data.View(tag, tags.r_data)
        beat = Signal(AXI_LEN_WIDTH)
        rsp = self.port.rsp
        for c, cl in enumerate(self.clients):
            mine = tags.r_rdy & (head.client == c)
            m.d.comb += [cl.rsp.valid.eq(rsp.valid & mine), cl.rsp.payload.eq(rsp.payload)]
            with m.If(mine):
                m.d.comb += rsp.ready.eq(cl.rsp.ready)
        take = rsp.valid & rsp.ready
        last = beat == head.len
        m.d.comb += tags.r_en.eq(take & last)
        with m.If(take):
            m.d.sync += beat.eq(Mux(last, 0, beat + 1))
        return m
