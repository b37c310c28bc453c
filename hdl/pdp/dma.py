"""PDP_RDMA and PDP WDMA: :class:`hdl.dma.ReadDma` / :class:`hdl.dma.WriteDma` whose walker visits
the split-width bands one after the other (band, then surface, line, atom; see
:mod:`hdl.pdp.bands`), so one DMA run covers a whole hardware layer and the next band's requests
follow the previous band's without a gap (the DMA base class's ``walker_class`` hook; the read
order is NVIDIA's PDP_RDMA order, v1_ias_programming_guide.rst "Offline processing with split
width").
"""
from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib.wiring import In

from hdl.config import NvdlaConfig
from hdl.dma import ReadDma, WriteDma, read_dma_params, write_dma_params
from hdl.dma.walker import CubeWalker, RunWalker
from hdl.pdp.bands import Bands, band_regs_layout

__all__ = ["BandWalker", "PdpReadDma", "PdpWriteDma"]


class BandWalker(RunWalker):
    """Runs of every band's sub-cube, band after band (a :class:`hdl.dma.walker.RunWalker`).

    Band ``b`` is the sub-cube of ``cube`` starting ``col`` atoms right of ``cube.base`` and
    ``width`` columns wide (input columns, or output columns when ``OUTPUT``), with the cube's
    strides, height and channels; ``cube.width`` is not used. A band's runs are those of a
    :class:`hdl.dma.walker.CubeWalker` on its sub-cube; ``last`` is set only on the last run of
    the last band. ``cube`` and ``band`` must stay stable while ``busy`` (they are register
    values). Extra input signal: ``band`` (:func:`hdl.pdp.bands.band_regs_layout`).
    Gap between bands: one cycle (the next band starts the cycle after the previous one's
    walker is idle).

    With ``half`` (a configuration with int8 and 16-bit precisions, ``cfg.bpe`` 8): the plain
    input signal ``half`` (stable while ``busy``, a register value like ``cube``), 1 for a layer
    of 2-byte elements (INT16/FP16): ``atom_elems // 2`` channels per atom, as the model's
    read_cube/write_cube with elem_bytes 2 (format.rst: an atom is 32 bytes whatever the
    element size); ``cube.channel`` still counts elements. The inner walker then counts
    surfaces of ``atom_elems // 2`` channels and is given ``cube.channel >> 1`` for an INT8
    layer ((C-1) >> log2(A) = ((C-1) >> 1) >> log2(A/2): exact, no wider field needed).
    """

    OUTPUT = False

    def __init__(self, *, half: bool = False, **kwargs):
        self.half_elems = half
        self._args = dict(kwargs, atom_elems=kwargs["atom_elems"] // 2) if half else kwargs
        super().__init__(**kwargs)
        #: band registers, driven by the owning DMA (a plain signal: the walker's signature is
        #: the RunWalker one the DMA base class instantiates)
        self.band = Signal(band_regs_layout(), name="band")
        if half:
            #: 1: a layer of 2-byte elements (see above)
            self.half = Signal(name="half")

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = CubeWalker(**self._args)
        m.submodules.bands = bands = Bands()
        active, wait, final = Signal(), Signal(), Signal()
        go = Signal()
        m.d.comb += [
            bands.regs.eq(self.band),
            go.eq(active & ~wait & ~inner.busy),
            inner.start.eq(go), bands.next.eq(go),
            bands.restart.eq(self.start & ~self.busy),
            inner.cube.eq(self.cube),
            self.busy.eq(active | wait | inner.busy),
        ]
        col, width = (bands.out_col, bands.out_width) if self.OUTPUT else (bands.col, bands.width)
        m.d.comb += [inner.cube.base.eq(self.cube.base + col * self.atom_bytes),
                     inner.cube.width.eq(width - 1)]
        if self.half_elems:
            m.d.comb += inner.cube.channel.eq(Mux(self.half, self.cube.channel,
                                                  self.cube.channel >> 1))
        m.d.sync += wait.eq(go)
        with m.If(go):
            m.d.sync += final.eq(bands.last)
            with m.If(bands.last):
                m.d.sync += active.eq(0)
        with m.If(self.start & ~self.busy):
            m.d.sync += [active.eq(1), final.eq(0)]
        # pass-through of the inner walker's runs; ``last`` only at the end of the last band
        m.d.comb += [
            self.runs.valid.eq(inner.runs.valid), inner.runs.ready.eq(self.runs.ready),
            self.runs.payload.eq(inner.runs.payload),
            self.runs.payload.last.eq(inner.runs.payload.last & final),
        ]
        return m


class _OutBandWalker(BandWalker):
    OUTPUT = True


class _BandDma:
    """Mixin: a ``band`` In(band_regs_layout) port forwarded to the BandWalker; with
    ``half=True`` also the plain input signal ``half`` (1: a layer of 2-byte elements,
    ``atom_elems // 2`` channels per atom; :class:`BandWalker`), stable during a layer."""

    def __init__(self, *args, half: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.half_elems = half
        if half:
            self.half = Signal(name="half")
            self._walker_args = dict(self._walker_args, half=True)

    def dma_members(self):
        return {**super().dma_members(), "band": In(band_regs_layout())}

    def add_walker(self, m: Module):
        walker, *rest = super().add_walker(m)
        m.d.comb += walker.band.eq(self.band)
        if self.half_elems:
            m.d.comb += walker.half.eq(self.half)
        return (walker, *rest)


class PdpReadDma(_BandDma, ReadDma):
    """PDP_RDMA: :class:`hdl.dma.ReadDma` on the primary memory (``cfg``) over all bands
    (:class:`BandWalker`). Ports as ReadDma plus ``band`` In(band_regs_layout); with ``half``
    the plain signal ``half`` (see :class:`_BandDma`)."""

    walker_class = BandWalker

    def __init__(self, cfg: NvdlaConfig, atom_shape, *, half: bool = False):
        super().__init__(**read_dma_params(cfg), atom_shape=atom_shape, half=half)


class PdpWriteDma(_BandDma, WriteDma):
    """PDP WDMA: :class:`hdl.dma.WriteDma` on the primary memory (``cfg``) over all bands'
    output sub-cubes; ``done`` after the last band's last write response. Ports as WriteDma
    plus ``band`` In(band_regs_layout); with ``half`` the plain signal ``half`` (see
    :class:`_BandDma`)."""

    walker_class = _OutBandWalker

    def __init__(self, cfg: NvdlaConfig, atom_shape, *, half: bool = False):
        super().__init__(**write_dma_params(cfg), atom_shape=atom_shape, half=half)
