"""CSB clock-domain crossing: NVIDIA's CSB port in the ``dla_csb_clk`` domain, carried into the
``dla_core_clk`` domain where the CSB slave (hdl/csb.py) decodes it (issue 10 item 5).

NVIDIA's port list has two clocks: the CSB port (``csb2nvdla_*`` in, ``nvdla2csb_*`` out) is
clocked by ``dla_csb_clk`` and everything else by ``dla_core_clk`` (in NVIDIA's RTL the port's
own logic, NV_NVDLA_csb_master, runs on the CSB clock and crosses into the core clock with
asynchronous FIFOs). :class:`CsbCdc` does the same with Amaranth's primitives:

* requests host -> core: an :class:`amaranth.lib.fifo.AsyncFIFO` (written in the host domain,
  read in the core domain) of :data:`CSB_REQUEST` items; on the core side the requests leave on a
  CSB port again (``csb2nvdla_valid``/``ready`` + payload) in the order they were accepted;
* responses core -> host: an ``AsyncFIFO`` of :data:`CSB_RESPONSE` items, one per
  ``nvdla2csb_valid`` (read) or ``nvdla2csb_wr_complete`` (non-posted write) pulse of the core
  side, presented on the host side as the same one-cycle pulses (registered outputs,
  ``nvdla2csb_data`` held until the next read response, as NVIDIA's csb_master);
* the core side cannot be stalled (CSB responses have no back-pressure), so the host side only
  accepts a request while fewer than ``resp_depth`` responses are owed (reads and non-posted
  writes accepted, responses not yet presented): the response FIFO can never be full when a
  response arrives. ``csb2nvdla_ready`` is low while the request FIFO is full or no response
  credit is left; it depends on registered state only (no path from ``csb2nvdla_valid``).

Why ``resp_depth`` credits are enough although the core side sees the FIFO's read pointer late:
a request accepted at host edge *T* reaches the core side through the request FIFO's 2-flop
pointer synchroniser and the slave's two stages (at least 3 core edges after *T*); the responses
presented before *T* (which freed the credit) cross through the same 2-flop synchroniser in the
other direction, so the writer sees them before the response of that request arrives.

Equal clocks work (the two domains may be driven by the same clock): each direction costs the
synchroniser's 2 cycles plus registers, 3 cycles for a request and 4 for a response (measured
with equal clocks: a read's ``nvdla2csb_valid`` 9 cycles after the request instead of the
slave's 2); posted writes still go one per cycle (the FIFOs are deeper than the pointer round
trip).

Resets: each FIFO is emptied by the reset of its write domain (AsyncFIFO's rule); the two domains
are reset together by ``NV_nvdla`` (``dla_reset_rstn`` asserted asynchronously in both, released
synchronously to each clock), so no request or response survives a reset. The response credits
are counted in the host domain.

Synchroniser flops are ``AsyncFIFO``'s ``produce_cdc``/``consume_cdc`` (``stage0``, ``stage1``)
and ``rst_cdc``: constraints/nv_nvdla.xdc matches them by these names.
"""
from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import AsyncFIFO
from amaranth.lib.wiring import In, Out

from hdl.csb import CsbSignature

__all__ = ["CSB_REQUEST", "CSB_RESPONSE", "CsbCdc"]

#: one CSB request as the port carries it (``addr`` is the WORD address, byte address >> 2)
CSB_REQUEST = data.StructLayout({"addr": 16, "wdat": 32, "write": 1, "nposted": 1})
#: one CSB response: ``write`` 1 for ``nvdla2csb_wr_complete``, 0 for a read's ``nvdla2csb_valid``
#: with ``data``
CSB_RESPONSE = data.StructLayout({"data": 32, "write": 1})


class CsbCdc(wiring.Component):
    """NVIDIA's CSB port crossed from ``host_domain`` to ``core_domain`` (module docstring).

    Args (keyword only):
        host_domain: clock domain of the ``host`` port (``dla_csb_clk``; default ``"csb"``).
        core_domain: clock domain of the ``core`` port (``dla_core_clk``; default ``"sync"``).
        req_depth: entries of the request FIFO (a power of 2, >= 2; default 8).
        resp_depth: entries of the response FIFO (a power of 2, >= 2; default 8) = the number of
            responses that may be owed to the host at once.

    Ports:
        host: Out(:class:`hdl.csb.CsbSignature`): NVIDIA's CSB port (``csb2nvdla_*`` in,
            ``nvdla2csb_*`` out), in ``host_domain``.
        core: In(:class:`hdl.csb.CsbSignature`): the same protocol toward the CSB slave
            (``csb2nvdla_*`` out, honouring its ``csb2nvdla_ready``; ``nvdla2csb_*`` in: at most
            one response per cycle, one per read and per non-posted write), in ``core_domain``.

    Raises ValueError for a depth that is not a power of 2 of at least 2.
    """

    def __init__(self, *, host_domain: str = "csb", core_domain: str = "sync",
                 req_depth: int = 8, resp_depth: int = 8):
        for name, d in (("req_depth", req_depth), ("resp_depth", resp_depth)):
            if d < 2 or d & (d - 1):
                raise ValueError(f"CsbCdc {name}={d}: must be a power of 2, at least 2")
        self.host_domain, self.core_domain = host_domain, core_domain
        self.req_depth, self.resp_depth = req_depth, resp_depth
        super().__init__({"host": Out(CsbSignature()), "core": In(CsbSignature())})

    def elaborate(self, platform):
        m = Module()
        host, core = self.host, self.core
        hd, cd = self.host_domain, self.core_domain

        m.submodules.req_fifo = req_fifo = AsyncFIFO(
            width=CSB_REQUEST.size, depth=self.req_depth, w_domain=hd, r_domain=cd)
        m.submodules.resp_fifo = resp_fifo = AsyncFIFO(
            width=CSB_RESPONSE.size, depth=self.resp_depth, w_domain=cd, r_domain=hd)

        # ---- host domain: requests in, with response credits --------------------------------
        owed = Signal(range(self.resp_depth + 1))       # responses owed to the host
        credit = Signal()
        m.d.comb += credit.eq(owed < self.resp_depth)

        # the host's request as a stream into the request FIFO; ready = FIFO not full and a
        # response credit left (registered state only)
        req_in = stream.Signature(CSB_REQUEST).create(path=("req_in",))
        m.d.comb += [
            req_in.valid.eq(host.csb2nvdla_valid & credit),
            req_in.payload.addr.eq(host.csb2nvdla_addr),
            req_in.payload.wdat.eq(host.csb2nvdla_wdat),
            req_in.payload.write.eq(host.csb2nvdla_write),
            req_in.payload.nposted.eq(host.csb2nvdla_nposted),
            host.csb2nvdla_ready.eq(req_fifo.w_rdy & credit),
        ]
        w = req_fifo.w_stream
        m.d.comb += [w.valid.eq(req_in.valid), w.payload.eq(req_in.payload), req_in.ready.eq(w.ready)]
        accepted = req_in.valid & req_in.ready
        owes = accepted & (~req_in.payload.write | req_in.payload.nposted)

        # responses out: one FIFO item per cycle, presented as registered one-cycle pulses
        resp_out = stream.Signature(CSB_RESPONSE).create(path=("resp_out",))
        r = resp_fifo.r_stream
        m.d.comb += [resp_out.valid.eq(r.valid), resp_out.payload.eq(r.payload),
                     r.ready.eq(resp_out.ready), resp_out.ready.eq(1)]
        presented = resp_out.valid          # ready is always 1: taken the cycle it is valid
        m.d[hd] += [
            host.nvdla2csb_valid.eq(presented & ~resp_out.payload.write),
            host.nvdla2csb_wr_complete.eq(presented & resp_out.payload.write),
            owed.eq(owed + owes - presented),
        ]
        with m.If(presented & ~resp_out.payload.write):
            m.d[hd] += host.nvdla2csb_data.eq(resp_out.payload.data)

        # ---- core domain: requests out, responses in ----------------------------------------
        req_out = stream.Signature(CSB_REQUEST).create(path=("req_out",))
        r = req_fifo.r_stream
        m.d.comb += [req_out.valid.eq(r.valid), req_out.payload.eq(r.payload), r.ready.eq(req_out.ready)]
        m.d.comb += [
            core.csb2nvdla_valid.eq(req_out.valid),
            core.csb2nvdla_addr.eq(req_out.payload.addr),
            core.csb2nvdla_wdat.eq(req_out.payload.wdat),
            core.csb2nvdla_write.eq(req_out.payload.write),
            core.csb2nvdla_nposted.eq(req_out.payload.nposted),
            req_out.ready.eq(core.csb2nvdla_ready),
        ]

        # a response pulse from the slave is always taken: the credits guarantee room
        resp_in = stream.Signature(CSB_RESPONSE).create(path=("resp_in",))
        m.d.comb += [
            resp_in.valid.eq(core.nvdla2csb_valid | core.nvdla2csb_wr_complete),
            resp_in.payload.data.eq(core.nvdla2csb_data),
            resp_in.payload.write.eq(core.nvdla2csb_wr_complete),
        ]
        w = resp_fifo.w_stream
        m.d.comb += [w.valid.eq(resp_in.valid), w.payload.eq(resp_in.payload), resp_in.ready.eq(w.ready)]
        return m
