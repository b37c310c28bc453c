"""Routing one DMA client between the two memory interfaces (v1_hwarch.rst "Memory interface":
each DMA engine reaches the primary memory through MCIF and the on-chip SRAM through CVIF; the
engine's ``*_RAM_TYPE`` register field chooses one per surface it reads or writes).

The client's requests carry ``cv`` (:func:`hdl.axi.read_req_layout`); each goes to the MCIF port
(``cv`` = 0) or the CVIF port (``cv`` = 1) of the router. A client's read data must come back in
request order and its write beats must follow its requests in order, but the two interfaces are
independent: the router therefore lets a client switch memories only when nothing of it is in
flight on the other one (a request for the other memory waits until the outstanding read beats,
or the write bursts not yet acknowledged, are zero). A layer's engine keeps one memory for all
its requests, so the wait only happens between layers (or between the surfaces of an SDP/CDMA
layer that live in different memories), and the client's own beat order needs no reorder buffer.
"""
from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.axi import AXI_LEN_WIDTH, DmaReadSignature, DmaWriteSignature

__all__ = ["ReadRoute", "WriteRoute"]


def _request(m: Module, client, ports, cur, idle, issue) -> None:
    """Requests of ``client`` to ``ports[cv]``; a request for the other memory than ``cur`` waits
    for ``idle``. ``issue``: set when a request is taken."""
    req = client.req
    switch_ok = idle | (req.payload.cv == cur)
    for cv, port in enumerate(ports):
        sel = req.payload.cv == cv
        m.d.comb += [port.req.valid.eq(req.valid & sel & switch_ok),
                     port.req.payload.addr.eq(req.payload.addr),
                     port.req.payload.len.eq(req.payload.len)]
        with m.If(sel):
            m.d.comb += req.ready.eq(port.req.ready & switch_ok)
    m.d.comb += issue.eq(req.valid & req.ready)
    with m.If(issue):
        m.d.sync += cur.eq(req.payload.cv)


class ReadRoute(wiring.Component):
    """One read client to MCIF and CVIF (module docstring).

    Parameters: ``addr_width``, ``data_width`` (bits), ``max_beats``: the most read beats the
    client can have in flight (its credit, e.g. its latency FIFO depth).

    Ports: ``client`` In(:class:`hdl.axi.DmaReadSignature` with ``cv``); ``mc``, ``cv``
    Out(:class:`hdl.axi.DmaReadSignature`): to MCIF's and CVIF's port of this client.
    """

    def __init__(self, addr_width: int, data_width: int, max_beats: int):
        self.max_beats = max_beats
        super().__init__({"client": In(DmaReadSignature(addr_width, data_width, cv=True)),
                          "mc": Out(DmaReadSignature(addr_width, data_width)),
                          "cv": Out(DmaReadSignature(addr_width, data_width))})

    def elaborate(self, platform):
        m = Module()
        ports = (self.mc, self.cv)
        cur = Signal()                                  # memory of the beats in flight
        pending = Signal(range(self.max_beats + (1 << AXI_LEN_WIDTH) + 1))
        issue = Signal()
        _request(m, self.client, ports, cur, pending == 0, issue)
        rsp = self.client.rsp
        src = [p.rsp for p in ports]
        # the other memory has no beat of this client (the switching rule): its ready is 1, so
        # that interface's RREADY, which follows whichever client its RID names, never idles
        # low on this client's account (a memory that advances its read pipeline only while
        # RREADY is high, as NVIDIA's trace player's does, would otherwise stall for good
        # once a CV read comes behind a client that last used MC: found on nv_large's
        # cdp_8x8x64_lrn9 trace)
        m.d.comb += [rsp.valid.eq(Mux(cur, src[1].valid, src[0].valid)),
                     rsp.payload.eq(Mux(cur, src[1].payload, src[0].payload)),
                     src[0].ready.eq(Mux(cur, 1, rsp.ready)), src[1].ready.eq(Mux(cur, rsp.ready, 1))]
        beat = rsp.valid & rsp.ready
        m.d.sync += pending.eq(pending + Mux(issue, self.client.req.payload.len + 1, 0) - beat)
        return m


class WriteRoute(wiring.Component):
    """One write client to MCIF and CVIF (module docstring).

    Parameters: ``addr_width``, ``data_width`` (bits), ``max_bursts``: the most bursts the
    client can have requested and not yet acknowledged (B responses).

    Ports: ``client`` In(:class:`hdl.axi.DmaWriteSignature` with ``cv``); ``mc``, ``cv``
    Out(:class:`hdl.axi.DmaWriteSignature`): to MCIF's and CVIF's port of this client.
    """

    def __init__(self, addr_width: int, data_width: int, max_bursts: int = 1 << 12):
        self.max_bursts = max_bursts
        super().__init__({"client": In(DmaWriteSignature(addr_width, data_width, cv=True)),
                          "mc": Out(DmaWriteSignature(addr_width, data_width)),
                          "cv": Out(DmaWriteSignature(addr_width, data_width))})

    def elaborate(self, platform):
        m = Module()
        ports = (self.mc, self.cv)
        cur = Signal()                                  # memory of the bursts in flight
        pending = Signal(range(self.max_bursts + 1))
        issue = Signal()
        _request(m, self.client, ports, cur, pending == 0, issue)
        data = self.client.data
        # a burst's beats go where its request went: the current memory (the other interface
        # has no burst of this client, so it would not take them anyway)
        for cv, port in enumerate(ports):
            mine = cur == cv
            m.d.comb += [port.data.valid.eq(data.valid & mine),
                         port.data.payload.eq(data.payload)]
            with m.If(mine):
                m.d.comb += data.ready.eq(port.data.ready)
        done = Signal()
        m.d.comb += [done.eq(self.mc.done | self.cv.done), self.client.done.eq(done)]
        m.d.sync += pending.eq(pending + issue - done)
        return m
