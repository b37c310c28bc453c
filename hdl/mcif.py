"""MCIF: memory client interface to the DBB AXI4 port (v1_hwarch.rst "Memory interface",
v1_ias_unit_description.rst "MCIF").

Read side: round-robin arbitration between ``cfg.num_dma_read_clients`` read clients; each
granted request becomes one single-beat AXI read (``arlen`` = 0) with ``arid`` = client index.
Any number of reads may be outstanding: AXI returns data in order per ID, and the data of ID i is
routed to client i's ``rsp`` stream (``rready`` follows that client's ``rsp.ready``). Clients
bound their own outstanding requests by their buffer space (credit rule, see
:class:`hdl.axi.DmaReadSignature`), so MCIF needs no reorder buffer.

Write side: round-robin between ``cfg.num_dma_write_clients`` write clients; a granted request
drives AW (``awid`` = client index, ``awlen`` = 0) and W (``wlast`` = 1) together; B responses
pulse the client's ``done``. ``bready`` is always 1.

AR and AW/W outputs are registered (one request per cycle at full rate).
"""
from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.axi import AxiMasterSignature, DmaReadSignature, DmaWriteSignature
from hdl.config import NvdlaConfig

__all__ = ["Mcif", "round_robin"]


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


class Mcif(wiring.Component):
    """Memory client interface (primary memory, DBB).

    Parameters: ``cfg`` (:class:`hdl.config.NvdlaConfig`); ``n_read``/``n_write`` clients
    (default cfg.num_dma_read_clients / cfg.num_dma_write_clients).

    Ports: ``axi`` Out(:class:`hdl.axi.AxiMasterSignature`) (cfg.mem_address_width,
    cfg.primary_memif_width); ``rd`` In(DmaReadSignature).array(n_read); ``wr``
    In(DmaWriteSignature).array(n_write); ``idle`` Out(1): no AXI transaction outstanding.
    """

    def __init__(self, cfg: NvdlaConfig, n_read: int | None = None, n_write: int | None = None):
        self.cfg = cfg
        self.n_read = n_read or cfg.num_dma_read_clients
        self.n_write = n_write or cfg.num_dma_write_clients
        super().__init__({
            "axi": Out(AxiMasterSignature(cfg.mem_address_width, cfg.primary_memif_width)),
            "rd": In(DmaReadSignature(cfg)).array(self.n_read),
            "wr": In(DmaWriteSignature(cfg)).array(self.n_write),
            "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        axi = self.axi

        # ---- read request arbitration -> registered AR channel ----
        rd_last = Signal(range(max(self.n_read, 2)))
        rgrant, rany = round_robin(m, [c.req.valid for c in self.rd], rd_last, "rd")
        ar_valid = Signal()
        ar_load = ~ar_valid | axi.ar_arready
        m.d.comb += [axi.ar_arvalid.eq(ar_valid), axi.ar_arlen.eq(0)]
        with m.If(axi.ar_arready):
            m.d.sync += ar_valid.eq(0)
        for i, c in enumerate(self.rd):
            with m.If(rany & (rgrant == i)):
                m.d.comb += c.req.ready.eq(ar_load)
                with m.If(ar_load):
                    m.d.sync += [ar_valid.eq(1), axi.ar_araddr.eq(c.req.payload.addr),
                                 axi.ar_arid.eq(i), rd_last.eq(i)]

        # ---- read data return, routed by ID (in order per ID) ----
        for i, c in enumerate(self.rd):
            hit = axi.r_rid == i
            m.d.comb += [c.rsp.payload.eq(axi.r_rdata), c.rsp.valid.eq(axi.r_rvalid & hit)]
            with m.If(hit):
                m.d.comb += axi.r_rready.eq(c.rsp.ready)
        with m.If(axi.r_rid >= self.n_read):
            m.d.comb += axi.r_rready.eq(1)       # unknown ID: drop rather than hang

        # ---- write request arbitration -> registered AW + W ----
        wr_last = Signal(range(max(self.n_write, 2)))
        wgrant, wany = round_robin(m, [c.req.valid for c in self.wr], wr_last, "wr")
        aw_valid = Signal()
        w_valid = Signal()
        w_load = (~aw_valid | axi.aw_awready) & (~w_valid | axi.w_wready)
        m.d.comb += [axi.aw_awvalid.eq(aw_valid), axi.aw_awlen.eq(0),
                     axi.w_wvalid.eq(w_valid), axi.w_wlast.eq(1)]
        with m.If(axi.aw_awready):
            m.d.sync += aw_valid.eq(0)
        with m.If(axi.w_wready):
            m.d.sync += w_valid.eq(0)
        for i, c in enumerate(self.wr):
            with m.If(wany & (wgrant == i)):
                m.d.comb += c.req.ready.eq(w_load)
                with m.If(w_load):
                    m.d.sync += [aw_valid.eq(1), w_valid.eq(1),
                                 axi.aw_awaddr.eq(c.req.payload.addr), axi.aw_awid.eq(i),
                                 axi.w_wdata.eq(c.req.payload.data),
                                 axi.w_wstrb.eq(c.req.payload.strb), wr_last.eq(i)]
        m.d.comb += axi.b_bready.eq(1)
        for i, c in enumerate(self.wr):
            m.d.comb += c.done.eq(axi.b_bvalid & (axi.b_bid == i))

        # ---- outstanding counters for MCIF STATUS.IDLE ----
        rd_out = Signal(16)
        wr_out = Signal(16)
        ar_fire = axi.ar_arvalid & axi.ar_arready
        r_fire = axi.r_rvalid & axi.r_rready & axi.r_rlast
        aw_fire = axi.aw_awvalid & axi.aw_awready
        b_fire = axi.b_bvalid
        m.d.sync += [rd_out.eq(rd_out + ar_fire - r_fire), wr_out.eq(wr_out + aw_fire - b_fire)]
        m.d.comb += self.idle.eq((rd_out == 0) & (wr_out == 0) & ~ar_valid & ~aw_valid & ~w_valid)
        return m
