"""SDP_RDMA MRDMA: reads the SDP input feature cube from memory (v1_ias_unit_description.rst
"SDP" / "SDP_RDMA"; format.rst "Feature data").

Feature-data layout (format.rst "Feature data", packed memory atoms): a surface holds
``cfg.memory_atomic`` channels; element (w, h, c) is at byte
``base + (c // atom)*surface_stride + h*line_stride + w*atom_bytes + (c % atom)``. The last
surface is partial when C is not a multiple of the atom; it still occupies whole atoms, so every
surface is read as whole atoms (the padding lanes pass through the datapath like data lanes).

Traversal order (both MRDMA and WDMA): surface, then line (h), then atom (w) innermost.
"""
from __future__ import annotations

from amaranth.hdl import Module, Signal, signed, unsigned
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.axi import DmaReadSignature
from hdl.config import NvdlaConfig

__all__ = ["atom_layout", "cube_ports", "CubeWalker", "SdpRdma", "CUBE_DIM_BITS"]

CUBE_DIM_BITS = 13     # D_DATA_CUBE_WIDTH/HEIGHT/CHANNEL fields are [12:0], minus-one encoded


def atom_layout(cfg: NvdlaConfig) -> data.ArrayLayout:
    """One memory atom: cfg.memory_atomic signed elements of cfg.bpe bits (8 x int8 = 8 bytes on
    nv_small), lane i = channel (c % atom) = byte i of the atom in memory."""
    return data.ArrayLayout(signed(cfg.bpe), cfg.memory_atomic)


CUBE_PORT_NAMES = ("start", "base", "line_stride", "surface_stride", "width", "height", "channel")


def cube_ports(cfg: NvdlaConfig) -> dict:
    """Signature members that describe one feature cube in memory (format.rst "Feature data"):
    ``start`` pulse, ``base`` byte address, ``line_stride``/``surface_stride`` bytes, and
    ``width``/``height``/``channel`` minus-one encoded element counts (CUBE_DIM_BITS wide)."""
    return {
        "start": In(1),
        "base": In(cfg.mem_address_width), "line_stride": In(32), "surface_stride": In(32),
        "width": In(CUBE_DIM_BITS), "height": In(CUBE_DIM_BITS), "channel": In(CUBE_DIM_BITS),
    }


def add_walker(m: Module, dma: wiring.Component) -> "CubeWalker":
    """Instantiate a CubeWalker in ``m`` driven by the cube ports of ``dma`` (see cube_ports)."""
    m.submodules.walker = walker = CubeWalker(dma.cfg)
    for n in CUBE_PORT_NAMES:
        m.d.comb += getattr(walker, n).eq(getattr(dma, n))
    return walker


def beat_lanes(cfg: NvdlaConfig) -> tuple[int, int]:
    """(bytes per AXI beat, memory atoms per beat). Raises AssertionError when an atom is wider
    than a beat (not supported)."""
    beat_bytes = cfg.primary_memif_width // 8
    assert cfg.atom_bytes <= beat_bytes, "atom wider than the AXI beat is not supported"
    return beat_bytes, max(1, beat_bytes // cfg.atom_bytes)


def _log2(x: int) -> int:
    assert x > 0 and x & (x - 1) == 0, x
    return x.bit_length() - 1


class CubeWalker(wiring.Component):
    """Atom address generator for a feature cube (format.rst "Feature data").

    Ports (all sizes in bytes unless noted):
      ``start`` In(1) pulse: latch the config and begin (ignored while ``busy``);
      ``base`` In(cfg.mem_address_width) cube base address; ``line_stride`` In(32),
      ``surface_stride`` In(32); ``width``/``height``/``channel`` In(13) minus-one encoded
      element counts;
      ``addr`` Out(stream of {addr, last}): byte address of each atom in traversal order
      (surface, line, atom), ``last`` on the final atom; ``busy`` Out(1).
    Rate: one address per cycle.
    """

    def __init__(self, cfg: NvdlaConfig):
        self.cfg = cfg
        aw = cfg.mem_address_width
        super().__init__({
            **cube_ports(cfg),
            "addr": Out(stream.Signature(data.StructLayout({"addr": unsigned(aw), "last": 1}))),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        aw = cfg.mem_address_width
        atom_shift = _log2(cfg.memory_atomic)
        w = Signal(CUBE_DIM_BITS)
        h = Signal(CUBE_DIM_BITS)
        s = Signal(CUBE_DIM_BITS)
        w_max = Signal(CUBE_DIM_BITS)
        h_max = Signal(CUBE_DIM_BITS)
        s_max = Signal(CUBE_DIM_BITS)
        lstride = Signal(32)
        sstride = Signal(32)
        addr = Signal(aw)
        line = Signal(aw)
        surf = Signal(aw)
        busy = Signal()

        end_w, end_h, end_s = w == w_max, h == h_max, s == s_max
        m.d.comb += [self.busy.eq(busy), self.addr.valid.eq(busy),
                     self.addr.payload.addr.eq(addr),
                     self.addr.payload.last.eq(end_w & end_h & end_s)]

        with m.If(self.start & ~busy):
            m.d.sync += [busy.eq(1), w.eq(0), h.eq(0), s.eq(0),
                         w_max.eq(self.width), h_max.eq(self.height),
                         s_max.eq(self.channel >> atom_shift),
                         lstride.eq(self.line_stride), sstride.eq(self.surface_stride),
                         addr.eq(self.base), line.eq(self.base), surf.eq(self.base)]
        with m.If(self.addr.valid & self.addr.ready):
            with m.If(~end_w):
                m.d.sync += [w.eq(w + 1), addr.eq(addr + cfg.atom_bytes)]
            with m.Elif(~end_h):
                m.d.sync += [w.eq(0), h.eq(h + 1), line.eq(line + lstride),
                             addr.eq(line + lstride)]
            with m.Elif(~end_s):
                m.d.sync += [w.eq(0), h.eq(0), s.eq(s + 1), surf.eq(surf + sstride),
                             line.eq(surf + sstride), addr.eq(surf + sstride)]
            with m.Else():
                m.d.sync += busy.eq(0)
        return m


class SdpRdma(wiring.Component):
    """SDP MRDMA (memory read of the SDP input cube; BRDMA/NRDMA/ERDMA are not implemented).

    Ports: the :class:`CubeWalker` configuration ports (``start``, ``base``, ``line_stride``,
    ``surface_stride``, ``width``, ``height``, ``channel``; from SDP_RDMA D_SRC_* and
    D_DATA_CUBE_*), ``dma`` Out(:class:`hdl.axi.DmaReadSignature`) to MCIF, ``atoms``
    Out(stream of :func:`atom_layout`) in traversal order, ``busy`` Out(1).

    Reads are issued as fast as MCIF accepts them while fewer than ``depth`` atoms are in flight
    or buffered (credit rule); the latency FIFO of ``depth`` entries (cfg.primary_memif_width bits)
    absorbs the memory latency, so ``depth`` should exceed latency x request rate.
    Throughput: one atom per cycle when memory keeps up.
    """

    def __init__(self, cfg: NvdlaConfig, depth: int | None = None):
        self.cfg = cfg
        if depth is None:
            depth = 64
            while depth < cfg.primary_memif_latency + 16:
                depth *= 2
        self.depth = depth
        super().__init__({
            **cube_ports(cfg),
            "dma": Out(DmaReadSignature(cfg)),
            "atoms": Out(stream.Signature(atom_layout(cfg))),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        beat_bytes, lanes = beat_lanes(cfg)
        atom_bits = cfg.atom_bytes * 8
        walker = add_walker(m, self)

        m.submodules.lat_fifo = lat = fifo.SyncFIFOBuffered(width=cfg.primary_memif_width,
                                                            depth=self.depth)
        inflight = Signal(range(self.depth + 1))
        credit = inflight < self.depth
        issue = Signal()
        pop = Signal()
        m.d.comb += [
            self.dma.req.valid.eq(walker.addr.valid & credit),
            self.dma.req.payload.addr.eq(walker.addr.payload.addr & ~(beat_bytes - 1)),
            walker.addr.ready.eq(self.dma.req.ready & credit),
            issue.eq(self.dma.req.valid & self.dma.req.ready),
            lat.w_data.eq(self.dma.rsp.payload),
            lat.w_en.eq(self.dma.rsp.valid),
            self.dma.rsp.ready.eq(lat.w_rdy),
        ]
        m.d.sync += inflight.eq(inflight + issue - pop)

        if lanes > 1:
            lane_bits = _log2(lanes)
            m.submodules.lane_fifo = lane_fifo = fifo.SyncFIFOBuffered(width=lane_bits,
                                                                      depth=self.depth)
            lane_lsb = _log2(cfg.atom_bytes)
            m.d.comb += [lane_fifo.w_data.eq(walker.addr.payload.addr[lane_lsb:lane_lsb + lane_bits]),
                         lane_fifo.w_en.eq(issue)]
            lane = Signal(lane_bits)
            m.d.comb += [lane.eq(lane_fifo.r_data), lane_fifo.r_en.eq(pop)]
            m.d.comb += self.atoms.payload.eq(lat.r_data.word_select(lane, atom_bits))
        else:
            m.d.comb += self.atoms.payload.eq(lat.r_data[:atom_bits])

        m.d.comb += [self.atoms.valid.eq(lat.r_rdy), lat.r_en.eq(self.atoms.ready),
                     pop.eq(lat.r_rdy & self.atoms.ready),
                     self.busy.eq(walker.busy | (inflight != 0))]
        return m
