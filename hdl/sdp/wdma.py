"""SDP WDMA: writes the SDP output cube to memory (v1_ias_unit_description.rst "SDP" WDMA;
format.rst "Feature data"): D_DST_BASE_ADDR_HIGH/LOW, D_DST_LINE_STRIDE, D_DST_SURFACE_STRIDE
(bytes), cube size from SDP's D_DATA_CUBE_WIDTH/HEIGHT/CHANNEL (minus-one encoded).

Atoms arrive in the traversal order of :class:`hdl.sdp.rdma.CubeWalker` (surface, line, atom)
and each becomes one single-beat write (strobes cover the atom's bytes within the AXI beat).
``done`` pulses once every write of the layer has its AXI B response.
"""
from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.axi import DmaWriteSignature
from hdl.config import NvdlaConfig
from hdl.sdp.rdma import add_walker, atom_layout, beat_lanes, cube_ports

__all__ = ["SdpWdma"]


class SdpWdma(wiring.Component):
    """SDP write DMA.

    Ports: ``start`` In(1) pulse; ``base`` In(cfg.mem_address_width), ``line_stride`` In(32),
    ``surface_stride`` In(32) (bytes); ``width``/``height``/``channel`` In(13) minus-one;
    ``atoms`` In(stream of atom_layout(cfg)); ``dma`` Out(:class:`hdl.axi.DmaWriteSignature`);
    ``done`` Out(1) one-cycle pulse when the whole cube is written and acknowledged;
    ``busy`` Out(1). Throughput: one atom per cycle.
    """

    def __init__(self, cfg: NvdlaConfig):
        self.cfg = cfg
        super().__init__({
            **cube_ports(cfg),
            "atoms": In(stream.Signature(atom_layout(cfg))),
            "dma": Out(DmaWriteSignature(cfg)),
            "done": Out(1),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        beat_bytes, lanes = beat_lanes(cfg)
        atom_bits = cfg.atom_bytes * 8
        walker = add_walker(m, self)

        req = self.dma.req
        fire = Signal()
        m.d.comb += [
            req.valid.eq(walker.addr.valid & self.atoms.valid),
            walker.addr.ready.eq(req.ready & self.atoms.valid),
            self.atoms.ready.eq(req.ready & walker.addr.valid),
            fire.eq(req.valid & req.ready),
            req.payload.addr.eq(walker.addr.payload.addr & ~(beat_bytes - 1)),
        ]
        atom_strb = (1 << cfg.atom_bytes) - 1
        if lanes > 1:
            lane_lsb = cfg.atom_bytes.bit_length() - 1
            lane = walker.addr.payload.addr[lane_lsb:lane_lsb + (lanes.bit_length() - 1)]
            m.d.comb += [req.payload.data.eq(self.atoms.payload.as_value() << (lane * atom_bits)),
                         req.payload.strb.eq(atom_strb << (lane * cfg.atom_bytes))]
        else:
            m.d.comb += [req.payload.data.eq(self.atoms.payload.as_value()),
                         req.payload.strb.eq(atom_strb)]

        running = Signal()
        all_sent = Signal()
        outstanding = Signal(32)
        m.d.sync += outstanding.eq(outstanding + fire - self.dma.done)
        with m.If(self.start & ~running):
            m.d.sync += [running.eq(1), all_sent.eq(0)]
        with m.If(fire & walker.addr.payload.last):
            m.d.sync += all_sent.eq(1)
        with m.If(running & all_sent & (outstanding == 0)):
            m.d.comb += self.done.eq(1)
            m.d.sync += [running.eq(0), all_sent.eq(0)]
        m.d.comb += self.busy.eq(running)
        return m
