"""CDMA, the convolution DMA (v1_ias_unit_description.rst "Convolution DMA"; docs/conv.md
"CDMA"): fetches a layer's input feature cube and weights from memory into CBUF.

Two fetches run concurrently from ``start``, each a :class:`hdl.dma.ReadDma` on its own MCIF
read client (``cdma_dat``, ``cdma_wt``; :mod:`hdl.cdma.dma`):

* Feature data (D_DATAIN_FORMAT = FEATURE): the first ``band_lines`` lines (the *band*)
  surface by surface (for cb: for y < B: the W atoms of line y of surface cb), then line by line
  (for y: for surface cb: the W atoms), atom (x, y, cb) from ``D_DAIN_ADDR_*_0 + cb * SURF_STRIDE + y *
  LINE_STRIDE + x * atom_bytes`` to CBUF entry ``(dat_next + y * EPS + cb * W + x) mod DCAP``
  (EPS = D_ENTRY_PER_SLICE.ENTRIES+1, W = DATAIN_WIDTH+1, DCAP = (DATA_BANK+1) x depth, the
  data-bank ring; ``dat_next`` from ``keep``, 0 unless slices of the previous layer are
  reused): the atoms of one slice are consecutive ring entries. ``dat_slices`` counts the
  kept slices (``keep.dat_kept``) and the slices completely written (the band's all at once,
  when its last surface is in); ``band_cbs`` counts the band's surfaces written, so CSC can
  start its first stripe on the first surface (docs/conv.md "CDMA").
* Reuse across layers (docs/conv.md "Data and weight reuse across layers",
  :mod:`hdl.cbuf.keep`): ``keep.dat_reused`` skips the data fetch, ``keep.wt_reused`` the
  weight fetch (the kept weights are where the fetch would put them).
* Weights: the D_WEIGHT_BYTES bytes at D_WEIGHT_ADDR as whole entries (the last one completed
  from memory), entry n to ``(DATA_BANK+1) * depth + n % WCAP`` (WCAP = (WEIGHT_BANK+1) *
  depth, a ring); entry n is requested only when ``n < wt_released + WCAP`` (requests, not
  writes, are counted: data in flight always has room) and ``n < wt_read + WT_AHEAD`` (at most
  WT_AHEAD entries ahead of CSC's reading while feature data remains to be fetched, so that
  feature data, which CSC needs first, gets the memory bandwidth at the start of a layer instead
  of sharing it with weights needed much later; once the layer's slices are all written, only
  the ring limits the weights). ``wt_entries`` counts entries written.
* Compressed weights (``cfg.weight_compression``, D_WEIGHT_FORMAT = COMPRESSED; docs/conv.md
  "Compressed weights"): the D_WEIGHT_BYTES compressed bytes and the D_WMB_BYTES WMB bytes
  through the one weight client (:class:`hdl.dma.share.ReadShare`), expanded by
  :class:`hdl.cdma.expand.WtExpand` into the BYTE_PER_KERNEL x kernels uncompressed bytes,
  zero-filled to a multiple of 128, that go into the ring as above (the limits then hold the
  expanded entries, not the requests).

Feature data is stored as it is in memory (no converter in DC mode: the model's
``ConvCore._fetch_feature``, which matches NVIDIA's RTL on every nv_small dc_* trace). Channels
past DATAIN_CHANNEL in the last surface are whatever memory holds (CSC pairs them with zero
weights).

16-bit layers (configurations with ``cfg.conv16``, nv_full's ``int8_int16_fp16``; nothing of
this is built elsewhere; docs/conv16.md "CDMA"): CDMA's D_MISC_CFG.PROC_PRECISION INT16 or FP16
(IN_PRECISION is not read: in DC mode it equals PROC_PRECISION, the model refuses anything else,
``ConvCore._check_common``). CBUF's write ports keep their cbuf_bank_width-byte *units* (the
entries above), and every count CDMA gives CSC and CbufKeep (``wt_entries``, ``wt_released``,
``wt_read``, WT_AHEAD, the set and group-0 limits, ``keep``) counts units in every precision;
``dat_slices`` counts slices.

* DC data: memory atoms hold ``atom_bytes / 2`` little-endian 16-bit channels (format.rst
  "Feature Data Format"), so the surfaces are of ``memory_atomic / 2`` channels (the feature DMA
  is built so and given DATAIN_CHANNEL halved in INT8 layers, as hdl/sdp/rdma.py). A 16-bit
  entry is 2 x cbuf_bank_width bytes (the model's ``entry_bytes``; D_ENTRY_PER_SLICE counts
  them), units 2E and 2E+1, and holds R16 = 2R atoms, laid out as int8 entries with R16 for R
  (:meth:`Cdma.packed_entries`, the model's ``feature_entries_per_slice(..., elem_bytes=2)``);
  atom lane j of 16-bit entry E goes to unit ``2E + j // R``, lane ``j mod R``; slice y starts
  at unit ``dat_next + 2 y EPS`` of the data-bank ring.
* The converter (:meth:`Cdma.feature_convert`): INT16 elements through the int8 cells,
  saturated to 16 bits; FP16 data unchanged but for D_NAN_FLUSH_TO_ZERO (NaN -> +0).
* Weights: the same bytes in the same units as in INT8 (weight byte b in unit ``b //
  cbuf_bank_width``); FP16 weights NaN -> +0 with D_NAN_FLUSH_TO_ZERO (a register stage on the
  weight path, any data format: the model's ``ConvCore._weights``); kernel group 0 of the
  weights-first limit is BYTE_PER_KERNEL x atomic_k / 2 bytes.
* INT8 layers behave exactly as on an int8-only configuration.
* Image input: :class:`hdl.cdma.image.PixelFetch` decodes the 16-bit and packed 10-bit pixel
  formats in 16-bit layers and converts every channel to a 16-bit element (INT16, or FP16 with
  the int17 -> fp16 rounding; fp16 pixels unchanged but for the NaN flush; 16-bit pads); a
  line's units come in pairs (its 16-bit entries) and slice y starts at unit ``dat_next + 2 y
  EPS``. An INT8 layer with a 16-bit pixel format (NVIDIA's unmodelled "shrink") reads it as
  T_A8B8G8R8, as before (image.py's PixelFetch docstring lists the behaviour of every program
  the model refuses).
* The FP16 D_NAN/INF_INPUT_* counters read 0 (not modelled, docs/conv16.md open question 3).

Image input (D_DATAIN_FORMAT = PIXEL): :class:`hdl.cdma.image.PixelFetch` reads the image
lines (every pixel format of the configuration, x offset, mean / converter, left/right
padding) and delivers each line's CBUF entries; :meth:`Cdma.data_fetch` selects it by
D_DATAIN_FORMAT, both fetches share the ``cdma_dat`` client (layers never overlap, so nothing
of the other is in flight).
The slice writer puts a line's entries consecutively from its slice's first entry (as feature
atoms) and goes to the next slice after the entry marked ``slice_last``; no band (``band_end``
= ``keep.dat_kept``).
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.axi import DmaReadSignature
from hdl.cbuf import CbufGeometry, wr_layout
from hdl.cbuf.keep import keep_layout
from hdl.cdma.dma import BAND_BITS, ENTRY_COUNT_BITS, FeatureReadDma, WeightReadDma
from hdl.cdma.expand import WtExpand
from hdl.cdma.image import (CVT_BIASED_SHAPE, CVT_PRODUCT_SHAPE, CvtEn, PixelFetch, cvt_bias,
                            cvt_product, cvt_saturate)
from hdl.config import NvdlaConfig
from hdl.dma import read_dma_params
from hdl.dma.cube import CUBE_DIM_BITS
from hdl.dma.share import ReadShare
from hdl.dma.walker import log2
from hdl.lib.fixed import round_shift, saturate
from hdl.lib.gearbox import Merge
from hdl.lib.stream import Map, PipelineStage, SkidBuffer
from hdl.regfile import unit_layout
from hdl.regmap import REGMAP
from hdl.regmap.types import field_enum
from hdl.unit import connect_dma

__all__ = ["Cdma", "SLICE_COUNT_BITS", "WT_AHEAD"]

#: width of ``dat_slices`` (docs/conv.md: Out(14)); DATAIN_HEIGHT+1 slices, at most 8192
SLICE_COUNT_BITS = 14
#: weight entries fetched at most ahead of the furthest one CSC has read: 8 weight sets of a
#: full kernel group on nv_small (8 kernels x 8 channels = 8 entries each)
WT_AHEAD = 64

DatainFormat = field_enum("CDMA", "D_DATAIN_FORMAT", "DATAIN_FORMAT")
ProcPrecision = field_enum("CDMA", "D_MISC_CFG", "PROC_PRECISION")
NanToZero = field_enum("CDMA", "D_NAN_FLUSH_TO_ZERO", "NAN_TO_ZERO")


def fp16_nan_flush(value, elems: int):
    """``value`` (``elems`` little-endian fp16 bit patterns, element i in bits 16i..16i+15)
    with every NaN (exponent 31, mantissa non-zero) replaced by +0 (CDMA's D_NAN_FLUSH_TO_ZERO
    on FP16 data and weights: the model's ``ConvCore._fetch_feature`` / ``_weights``, from
    NVIDIA's nvdlav1 NV_NVDLA_CDMA_cvt.v / _wt.v). Combinational; returns an unsigned value of
    16 x ``elems`` bits."""
    out = []
    for i in range(elems):
        e = value.word_select(i, 16)
        nan = (e[10:15] == 0x1F) & (e[:10] != 0)
        out.append(Mux(nan, 0, e))
    return Cat(*out)


def check_config(cfg: NvdlaConfig):
    """Raise NotImplementedError for configurations docs/conv.md excludes: int8 only,
    ``cbuf_bank_width == mac_atomic_c`` bytes holding R >= 1 memory atoms, ``mac_atomic_k ==
    memory_atomic``, an AXI beat at least one atom wide."""
    if cfg.bpe != 8:
        raise NotImplementedError(f"CDMA: {cfg.name}: only int8 feature data is supported "
                                  f"(bpe {cfg.bpe})")
    if not (cfg.cbuf_bank_width == cfg.mac_atomic_c and cfg.atom_bytes <= cfg.cbuf_bank_width):
        raise NotImplementedError(
            f"CDMA: {cfg.name}: needs cbuf_bank_width ({cfg.cbuf_bank_width} B) == mac_atomic_c "
            f"({cfg.mac_atomic_c}) >= memory atom ({cfg.atom_bytes} B) (docs/conv.md)")
    if cfg.mac_atomic_k != cfg.memory_atomic:
        raise NotImplementedError(f"CDMA: {cfg.name}: needs mac_atomic_k ({cfg.mac_atomic_k}) == "
                                  f"memory_atomic ({cfg.memory_atomic}) (docs/conv.md)")
    if cfg.axi_data_bytes < cfg.atom_bytes:
        raise NotImplementedError(f"CDMA: {cfg.name}: AXI beat narrower than a memory atom")


class Cdma(wiring.Component):
    """The convolution DMA of one hardware layer (module docstring; docs/conv.md "CDMA").

    Parameters: ``cfg`` (:class:`hdl.config.NvdlaConfig`); ``weights_first``: the first band
    goes first (weights at most one weight set, atomic K x atomic C bytes, ahead of CSC's
    reading meanwhile), then kernel group 0's weights (``BYTE_PER_KERNEL`` x atomic K bytes,
    x atomic K / 2 in 16-bit layers,
    at most WCAP entries; WT_AHEAD does not hold), then the other lines, and while they come, the
    weights again at most one weight set ahead: for geometries whose CSC reads weights at
    least as fast as the bus delivers them, where the first stripe waits for group 0's
    weights, not for data (:func:`hdl.conv.weights_first`).

    Ports:
      ``regs`` In(unit_layout(CDMA, "cfg")): the consumer group's registers, stable while busy;
      ``start`` In(1): one-cycle pulse, begins the layer (ignored while ``busy``); every counter
      restarts at 0;
      ``busy`` Out(1): a fetch runs or data is in flight (from the cycle after ``start`` until
      both fetches have written their last entry);
      ``dat_done``, ``wt_done`` Out(1): one-cycle pulses, once per layer, in the first cycle
      after ``start`` in which the data fetch (resp. the weight fetch) has written its last
      entry (at once when there is nothing to fetch: kept in CBUF; compressed weights: and has
      taken the last compressed and WMB bytes it fetched). GLB's CDMA_DAT and CDMA_WT
      done interrupts: NVIDIA's CDMA raises each when its own fetch finishes, before CSC and
      CACC are done (NV_NVDLA_CDMA_status.v on nv_full; NVIDIA's v1 traces such as
      conv_8x8_fc_int16 wait for CDMA_DAT, CDMA_WT, CACC and SDP one at a time and clear the
      whole status after each);
      ``dat_dma``, ``wt_dma`` Out(DmaReadSignature(mem_address_width, primary_memif_width)):
      the MCIF read clients ``cdma_dat`` and ``cdma_wt``;
      ``dat_wr``, ``wt_wr`` Out(stream of :func:`hdl.cbuf.wr_layout`): CBUF write ports, one
      entry per transfer (addresses by :class:`hdl.cbuf.CbufGeometry`, docs/conv.md);
      ``dat_slices`` Out(14): input slices completely written this layer (a slice counts from
      the cycle after its last write transfer, when CBUF reads it back);
      ``band_lines`` In(14): lines of the layer's first band (sampled at ``start``; clipped to
      DATAIN_HEIGHT+1; 0: none), fetched surface by surface;
      ``band_step`` In(14): 0, the lines after the first band line by line; otherwise in
      further bands of that many lines (the last one shorter), each surface by surface
      (sampled at ``start``; used only after a non-empty first band);
      ``band_end`` Out(14): ``keep.dat_kept`` + the lines up to the end of the band being
      written (from the cycle after ``start``; it moves on with each band): slices below it
      and at or above ``dat_slices`` hold their first ``band_cbs`` channel blocks;
      ``band_cbs`` Out(14): surfaces of the band completely written (same timing as
      ``dat_slices``);
      ``wt_entries`` Out(32): weight entries written this layer (counted the same way; keeps
      counting past WCAP; cbuf_bank_width-byte units in 16-bit layers too);
      ``wt_released`` In(32): weight entries CSC no longer needs, cumulative this layer (0 from
      the cycle after ``start``; it only grows);
      ``wt_read`` In(32): one past the furthest weight entry CSC has read this layer (same
      timing as ``wt_released``);
      ``hw`` Out(unit_layout(CDMA, "hw")): CDMA's status register fields for its register
      file: S_CBUF_FLUSH_STATUS.FLUSH_DONE = 1 (CBUF needs no flush here), D_NAN/INF_* = 0
      (int8; not counted in FP16 layers either), and the D_PERF_* counters (below);
      ``keep`` In(:func:`hdl.cbuf.keep.keep_layout`): what the layer finds in CBUF (from
      :class:`hdl.cbuf.keep.CbufKeep`; sampled at ``start``; all zero: nothing kept). Its
      ``dat_kept`` slices count as written from the cycle after ``start``; the fetched slices
      follow them in the data-bank ring from entry ``dat_next`` (entry ``e`` of the ring is
      ``e mod DCAP``, DCAP = (DATA_BANK+1) x depth); ``dat_reused``: no data fetch (every
      slice is kept); ``wt_reused``: no weight fetch, ``wt_entries`` reads the layer's
      ``ceil(D_WEIGHT_BYTES / entry_bytes)`` from the cycle after ``start`` (the kept weights
      are at ring slots 0..).

    Performance counters (NVDLA_CDMA.rdl; counting as NV_NVDLA_CDMA_dc.v / _wt.v on nv_small:
    counting only while D_PERF_ENABLE.DMA_EN is set, held after the layer; a layer's start
    clears them when DMA_EN is set, else they keep their values): DAT_RD_STALL / WT_RD_STALL
    cycles in which the read request is offered and not accepted (32-bit, wraps);
    DAT_RD_LATENCY / WT_RD_LATENCY cycles with at least one requested beat not yet returned
    (32-bit, saturates).

    Throughput: each fetch one atom per cycle when memory and CBUF keep up.

    Raises NotImplementedError: see :func:`check_config`.
    """

    def __init__(self, cfg: NvdlaConfig, weights_first: bool = False):
        check_config(cfg)
        self.cfg = cfg
        self.weights_first = weights_first
        unit = REGMAP.unit("CDMA")
        aw, dw = cfg.mem_address_width, cfg.primary_memif_width
        self.geom = CbufGeometry.from_config(cfg)
        wr = stream.Signature(wr_layout(self.geom))
        super().__init__({
            "regs": In(unit_layout(unit, "cfg")),
            "start": In(1),
            "busy": Out(1),
            "dat_done": Out(1),
            "wt_done": Out(1),
            "dat_dma": Out(DmaReadSignature(aw, dw, cfg.secondary_memif)),
            "wt_dma": Out(DmaReadSignature(aw, dw, cfg.secondary_memif)),
            "dat_wr": Out(wr),
            "wt_wr": Out(wr),
            "dat_slices": Out(SLICE_COUNT_BITS),
            "band_lines": In(BAND_BITS),
            "band_step": In(BAND_BITS),
            "band_end": Out(SLICE_COUNT_BITS),
            "band_cbs": Out(SLICE_COUNT_BITS),
            "wt_entries": Out(ENTRY_COUNT_BITS),
            "wt_released": In(ENTRY_COUNT_BITS),
            "wt_read": In(ENTRY_COUNT_BITS),
            "hw": Out(unit_layout(unit, "hw")),
            "keep": In(keep_layout(self.geom)),
        })

    # ------------------------------------------------------------------ data
    def data_fetch(self, m: Module, start, hold, dc16=None, multi=None):
        """The data fetch of the layer's input format, started by ``start``.

        Returns ``(atoms, busy, slice_end)``: a stream of entry-wide atoms in CBUF entry order
        (slice after slice, inside a slice consecutive entries), the fetch's busy signal and
        the end of an image slice (``slice_last`` of the image entry on ``atoms``; feature
        slices end by their size). D_DATAIN_FORMAT selects the feature fetch or
        :class:`hdl.cdma.image.PixelFetch`; both share the ``dat_dma`` client.

        ``dc16`` (16-bit configurations, ``cfg.conv16``): the 1-bit value "a DC layer of 16-bit
        elements"; the feature DMA is then built with surfaces of ``memory_atomic / 2``
        channels and given DATAIN_CHANNEL halved in INT8 layers (hdl/sdp/rdma.py's precedent:
        the same surfaces either way, no wider channel count).

        ``multi`` (``cfg.batch`` configurations): the 1-bit value "a multi-batch layer"
        (D_BATCH_NUMBER.BATCHES > 0): the feature cube is fetched BATCHES+1 times, line by line
        (no band), each time D_BATCH_STRIDE bytes after the previous one (the feature DMA
        restarted when it has finished a cube), so the cubes' slices follow each other
        (docs/conv.md "Multi-batch")."""
        cfg, regs = self.cfg, self.regs
        pixel = Signal()
        m.d.comb += pixel.eq(regs.d_datain_format.datain_format == DatainFormat.PIXEL)
        if dc16 is None:
            m.submodules.dat_fetch = dma = FeatureReadDma(**read_dma_params(cfg))
            channel = regs.d_datain_size_1.datain_channel[:CUBE_DIM_BITS]
        else:
            m.submodules.dat_fetch = dma = FeatureReadDma(
                **dict(read_dma_params(cfg), atom_elems=cfg.memory_atomic // 2))
            ch = regs.d_datain_size_1.datain_channel[:CUBE_DIM_BITS]
            channel = Mux(dc16, ch, ch >> 1)
        m.submodules.img_fetch = img = PixelFetch(cfg)
        size0 = regs.d_datain_size_0
        base = Cat(regs.d_dain_addr_low_0.as_value(),
                   regs.d_dain_addr_high_0.as_value())[:cfg.mem_address_width]
        dstart, fetch_busy = start, dma.busy | img.busy
        if multi is not None:
            # the next cube when the DMA has finished one (nvdlav1 RTL NV_NVDLA_CDMA_dc.v: each
            # batch's address is the previous batch's plus D_BATCH_STRIDE; the model's
            # ConvCore._fetch_feature)
            cubes = Signal(5)                   # cubes started after the first
            bofs = Signal(cfg.mem_address_width)
            busy_d = Signal()
            restart = Signal()
            m.d.sync += [busy_d.eq(dma.busy), restart.eq(0)]
            with m.If(start):
                m.d.sync += [cubes.eq(0), bofs.eq(0)]
            with m.Elif(busy_d & ~dma.busy & multi
                        & (cubes != regs.d_batch_number.batches)):
                m.d.sync += [cubes.eq(cubes + 1), restart.eq(1),
                             bofs.eq(bofs + regs.d_batch_stride.as_value())]
            # (the layer's first cube from the data address: ``bofs`` is cleared at ``start``)
            base = Mux(start, base, (base + bofs)[:cfg.mem_address_width])
            dstart, fetch_busy = start | restart, fetch_busy | restart
        m.d.comb += [
            img.start.eq(start & pixel),
            img.regs.eq(regs),
            dma.start.eq(dstart & ~pixel),
            dma.band.eq(self.band_lines if multi is None else Mux(multi, 0, self.band_lines)),
            dma.step.eq(self.band_step if multi is None else Mux(multi, 0, self.band_step)),
            dma.hold.eq(hold),
            dma.cube.base.eq(base),
            dma.cube.line_stride.eq(regs.d_line_stride.as_value()),
            dma.cube.surface_stride.eq(regs.d_surf_stride.as_value()),
            dma.cube.width.eq(size0.datain_width[:CUBE_DIM_BITS]),
            dma.cube.height.eq(size0.datain_height[:CUBE_DIM_BITS]),
            dma.cube.channel.eq(channel),
        ]
        # one MCIF client for both (the layer's format is stable while either is busy)
        port, f, i = self.dat_dma, dma.dma, img.dma
        # the requests through a skid buffer: the walkers advance on a registered ready
        # (issue 10: MCIF's ready through the walker's request logic into the outstanding-beat
        # counter was CDMA's critical path on ECP5)
        rskid = m.submodules.dat_req_skid = SkidBuffer(f.req.payload.shape())
        m.d.comb += [
            rskid.i.valid.eq(Mux(pixel, i.req.valid, f.req.valid)),
            rskid.i.payload.eq(Mux(pixel, i.req.payload, f.req.payload)),
            f.req.ready.eq(rskid.i.ready & ~pixel),
            i.req.ready.eq(rskid.i.ready & pixel),
            port.req.valid.eq(rskid.o.valid),
            # with CVIF, the request's memory: D_DAIN_RAM_TYPE (hdl.unit.connect_dma)
            port.req.payload.eq(Cat(rskid.o.payload.as_value(),
                                    ~Value.cast(regs.d_dain_ram_type.datain_ram_type))
                                if cfg.secondary_memif else rskid.o.payload),
            rskid.o.ready.eq(port.req.ready),
            f.rsp.valid.eq(port.rsp.valid & ~pixel),
            i.rsp.valid.eq(port.rsp.valid & pixel),
            f.rsp.payload.eq(port.rsp.payload),
            i.rsp.payload.eq(port.rsp.payload),
            port.rsp.ready.eq(Mux(pixel, i.rsp.ready, f.rsp.ready)),
        ]
        fatoms = self.feature_convert(m, dma.atoms, dc16)
        atoms = stream.Signature(unsigned(cfg.cbuf_bank_width * 8)).create()
        m.d.comb += [
            atoms.valid.eq(Mux(pixel, img.atoms.valid, fatoms.valid)),
            atoms.payload.eq(Mux(pixel, img.atoms.payload.data, fatoms.payload)),
            fatoms.ready.eq(atoms.ready & ~pixel),
            img.atoms.ready.eq(atoms.ready & pixel),
        ]
        return atoms, fetch_busy, img.atoms.payload.slice_last

    def feature_convert(self, m: Module, atoms, dc16=None):
        """CDMA's input converter on feature atoms (D_CVT_CFG.CVT_EN; the model's
        ``ConvCore._fetch_feature`` records it from NVIDIA's nv_small RTL: the converter takes
        the direct-convolution writes too, each byte a signed int8 with CVT_OFFSET, never the
        means). An input register and three :class:`hdl.lib.stream.Map` stages (product;
        rounding bias; shift and saturation), so 4 cycles of latency at one entry per cycle;
        with CVT_EN off the bytes pass unchanged.

        ``dc16`` (16-bit configurations only: the 1-bit value "DC layer of 16-bit elements",
        from D_MISC_CFG.PROC_PRECISION; IN_PRECISION equals it in DC mode, the model refuses
        anything else): INT16 atoms hold ``atom_bytes / 2`` little-endian elements; cell i of
        the first half takes element i sign-extended (its 18-bit difference and 34-bit product
        fit a 16-bit element: the model's ``cdma_convert(..., out_bits=16)``, checked on
        601,500 vectors of NVIDIA's cell) and saturates to 16 bits (to 17 then 16 in NVIDIA's
        cell: the same values), CVT_OFFSET only; the other cells' results are unused. FP16
        atoms pass unchanged whatever CVT_EN says, each NaN made +0 when
        D_NAN_FLUSH_TO_ZERO.NAN_TO_ZERO is set (NVIDIA's nvdlav1 NV_NVDLA_CDMA_cvt.v, the
        model's ``_fetch_feature``). Same latency and rate.
        Returns the converted stream of memory atoms."""
        cfg, regs = self.cfg, self.regs
        lanes = cfg.atom_bytes
        cvt = regs.d_cvt_cfg
        elems = lanes // 2                      # 16-bit elements of an atom (dc16)
        if dc16 is not None:
            prec = regs.d_misc_cfg.proc_precision
            fp16 = Signal(name="fcvt_fp16")
            flush = Signal(name="fcvt_nan_flush")
            m.d.comb += [fp16.eq(dc16 & (prec == ProcPrecision.FP16)),
                         flush.eq(regs.d_nan_flush_to_zero.nan_to_zero == NanToZero.ENABLE)]

        def element(p, i):
            # cell i's input: byte i (INT8) or, in the first half, element i (INT16)
            if dc16 is None or i >= elems:
                return p.word_select(i, 8).as_signed()
            return Mux(dc16, p.word_select(i, 16).as_signed(), p.word_select(i, 8).as_signed())
        mid = data.StructLayout({"byte": unsigned(lanes * 8),
                                 "prod": data.ArrayLayout(CVT_PRODUCT_SHAPE, lanes)})
        biased = data.StructLayout({"byte": unsigned(lanes * 8),
                                    "biased": data.ArrayLayout(CVT_BIASED_SHAPE, lanes)})

        def product(mm, p):
            return {"byte": p, "prod": Cat(*(cvt_product(mm, element(p, i),
                                                         regs.d_cvt_offset.cvt_offset,
                                                         regs.d_cvt_scale.cvt_scale, f"fdiff{i}")
                                             for i in range(lanes)))}

        def bias(mm, p):
            return {"byte": p.byte,
                    "biased": Cat(*(cvt_bias(p.prod[i], cvt.cvt_truncate) for i in range(lanes)))}

        def finish(mm, p):
            conv = Cat(*(cvt_saturate(p.biased[i], cvt.cvt_truncate) for i in range(lanes)))
            if dc16 is None:
                return Mux(cvt.cvt_en == CvtEn.ENABLE, conv, p.byte)
            conv16 = Cat(*(saturate(round_shift(p.biased[i], cvt.cvt_truncate,
                                                CVT_PRODUCT_SHAPE), 16) for i in range(elems)))
            plain = Mux(fp16 & flush, fp16_nan_flush(p.byte, elems), p.byte)
            return Mux((cvt.cvt_en == CvtEn.ENABLE) & ~fp16, Mux(dc16, conv16, conv), plain)

        # the atoms are registered first: the latency buffer's block RAM read (4.3 ns on ECP5)
        # in front of the product was CDMA's critical path (issue 10)
        m.submodules.fcvt0 = s0 = PipelineStage(unsigned(lanes * 8))
        m.submodules.fcvt1 = s1 = Map(unsigned(lanes * 8), mid, product)
        # the rounding bias in a stage of its own (issue 10: bias, shifter and saturation in
        # one cycle were the image converter's critical path, 12.5 ns on ECP5)
        m.submodules.fcvt2 = s2 = Map(mid, biased, bias)
        m.submodules.fcvt3 = s3 = Map(biased, unsigned(lanes * 8), finish)
        wiring.connect(m, atoms, s0.i)
        wiring.connect(m, s0.o, s1.i)
        wiring.connect(m, s1.o, s2.i)
        wiring.connect(m, s2.o, s3.i)
        return s3.o

    def packed_entries(self, m: Module, begin, feature, band, x, yb, nband, cb, w_max, cb_max,
                       eps, dcap, fire, end_slice, dc16=None):
        """Feature entries when a CBUF entry holds R > 1 memory atoms (docs/conv.md "Where
        things live in CBUF"): memory surface ``cb`` is lane ``cb mod R`` of channel block
        ``cb // R``; block g of line y takes W entries from ``slice(y) + g*W``, except the last
        block when its L = ``cb_max mod R + 1`` atoms fit in a power-of-two part Lp < R of an
        entry: then P = R / Lp pixels share an entry (pixel x in entry ``x // P``, lanes from
        ``(x mod P) * Lp``), so a slice takes at most NVIDIA's D_ENTRY_PER_SLICE (the model's
        ``feature_entries_per_slice``). Walks in step with the fetch order of :meth:`elaborate`
        (the band surface by surface, then line by line; the same counters ``x``, ``yb``,
        ``cb``).

        ``dc16`` (16-bit configurations only; then also built for R = 1): the 1-bit value "DC
        layer of 16-bit elements". Such a layer has entries of 2 x cbuf_bank_width bytes (the
        model's ``entry_bytes``, EPS counts them) holding R16 = 2R memory atoms (surfaces of
        ``memory_atomic / 2`` channels), laid out by the same rule with R16 (the model's
        ``feature_entries_per_slice(..., elem_bytes=2)``); its entry E is the CBUF units 2E
        and 2E+1 (CBUF's write-port address counts cbuf_bank_width-byte units, docs/conv16.md
        "Interface changes"), so atom lane j of entry E is written to unit 2E + j // R, lane
        j mod R. The counters below count units (EPS and W doubled).

        Returns ``(addr, lane, block_done)``: the entry (ring address) and atom lane of the
        atom being written, and 1 when the band surface being finished completes a block."""
        geom = self.geom
        R, lr, abits = geom.atoms, geom.atom_shift, geom.addr_bits
        keep = self.keep
        w = w_max + 1
        lsb = Signal(abits, name="pk_line_base")        # slice base of the line being written
        gofs = Signal(abits, name="pk_block_offset")     # (cb // R) * W
        band0 = Signal(abits, name="pk_band_base")       # the band's first slice
        after = Signal(abits, name="pk_after_band")      # the slice after the band
        block_end = Signal(name="pk_block_end")        # surface cb is the last of its block
        if dc16 is None:
            lsh = geom.last_block_shift(m, cb_max[:lr], "pk_last_shift")   # log2 P, last block
            last_block = (cb >> lr) == (cb_max >> lr)
            sh = Signal(range(lr + 1), name="pk_shift")
            m.d.comb += sh.eq(Mux(feature & last_block, lsh, 0))
            xo = Signal(abits + 1, name="pk_x_entry")
            lane = Signal(lr, name="pk_lane")
            with m.Switch(sh):
                for k in range(lr + 1):
                    with m.Case(k):
                        m.d.comb += [xo.eq(x >> k),
                                     lane.eq(cb[:lr] | ((x[:k] << (lr - k)) if k else 0))]
            raw = Signal(abits + 2, name="pk_raw")
            w_u, eps_u = w, eps
            m.d.comb += block_end.eq((cb[:lr] == R - 1) | (cb == cb_max))
        else:
            # the int8 layout (R lanes) and the 16-bit one (R16 = 2R lanes of 2R-atom entries)
            lr16 = lr + 1
            g16 = CbufGeometry(geom.banks, geom.depth, 2 * geom.entry_bytes, 2 * R)
            lsh16 = g16.last_block_shift(m, cb_max[:lr16], "pk16_last_shift")
            last16 = (cb >> lr16) == (cb_max >> lr16)
            sh16 = Signal(range(lr16 + 1), name="pk16_shift")
            m.d.comb += sh16.eq(Mux(feature & last16, lsh16, 0))
            xo16 = Signal(abits + 1, name="pk16_x_entry")
            lane16 = Signal(lr16, name="pk16_lane")
            with m.Switch(sh16):
                for k in range(lr16 + 1):
                    with m.Case(k):
                        m.d.comb += [xo16.eq(x >> k),
                                     lane16.eq(cb[:lr16] | ((x[:k] << (lr16 - k)) if k else 0))]
            xo8 = Signal(abits + 1, name="pk_x_entry")
            lane8 = Signal(lr, name="pk_lane")
            if lr:
                lsh = geom.last_block_shift(m, cb_max[:lr], "pk_last_shift")
                last_block = (cb >> lr) == (cb_max >> lr)
                sh = Signal(range(lr + 1), name="pk_shift")
                m.d.comb += sh.eq(Mux(feature & last_block, lsh, 0))
                with m.Switch(sh):
                    for k in range(lr + 1):
                        with m.Case(k):
                            m.d.comb += [xo8.eq(x >> k),
                                         lane8.eq(cb[:lr] | ((x[:k] << (lr - k)) if k else 0))]
            else:
                m.d.comb += xo8.eq(x)
            # in units: 16-bit entry e is units 2e, 2e+1; lane j of it unit 2e + j // R
            xo = Signal(abits + 2, name="pk_x_unit")
            lane = Signal(lr, name="pk_unit_lane")
            m.d.comb += [xo.eq(Mux(dc16, Cat(lane16[lr], xo16), xo8)),
                         lane.eq(Mux(dc16, lane16[:lr], lane8))]
            raw = Signal(abits + 3, name="pk_raw")
            w_u, eps_u = Mux(dc16, w << 1, w), Mux(dc16, eps << 1, eps)
            m.d.comb += block_end.eq(Mux(dc16, cb[:lr16] == 2 * R - 1, cb[:lr] == R - 1)
                                     | (cb == cb_max))
        addr = Signal(abits, name="pk_addr")

        def wrap(v):                                     # into the data-bank ring (v < 2*DCAP)
            return Mux(v >= dcap, v - dcap, v)
        m.d.comb += [raw.eq(lsb + gofs + xo), addr.eq(wrap(raw))]
        lsb_next = Signal(abits + 1, name="pk_line_next")
        m.d.comb += lsb_next.eq(lsb + eps_u)
        with m.If(fire & band):
            with m.If((x == w_max) & (cb == 0) & (yb == nband - 1)):
                m.d.sync += after.eq(wrap(lsb_next))
            with m.If(x == w_max):                      # a line of the band ends
                with m.If(yb != nband - 1):
                    m.d.sync += lsb.eq(wrap(lsb_next))
                with m.Elif(cb != cb_max):
                    m.d.sync += [lsb.eq(band0), gofs.eq(Mux(block_end, gofs + w_u, gofs))]
                with m.Else():                          # band complete (the next one's base)
                    nxt = Mux(cb == 0, wrap(lsb_next), after)
                    m.d.sync += [lsb.eq(nxt), band0.eq(nxt), gofs.eq(0)]
        with m.Elif(fire):
            with m.If(end_slice):
                m.d.sync += [lsb.eq(wrap(lsb_next)), gofs.eq(0)]
            with m.Elif((x == w_max) & block_end):
                m.d.sync += gofs.eq(gofs + w_u)
        with m.If(begin):
            m.d.sync += [lsb.eq(keep.dat_next), band0.eq(keep.dat_next), gofs.eq(0)]
        return addr, lane, block_end

    def elaborate(self, platform):
        m = Module()
        cfg, regs = self.cfg, self.regs
        geom = self.geom
        abits = geom.addr_bits
        begin = Signal()
        m.d.comb += begin.eq(self.start & ~self.busy)
        feature = regs.d_datain_format.datain_format == DatainFormat.FEATURE

        keep = self.keep
        dat_fetch = ~keep.dat_reused             # feature or image data
        wt_fetch = ~keep.wt_reused

        # ---------------- data: atoms to consecutive entries, slice after slice ----------------
        # (a ring over the data banks: the slices start at keep.dat_next, after the kept ones)
        dat_hold = Signal()                      # the lines after the band wait (weights first)
        if cfg.conv16:
            # 16-bit layers (docs/conv16.md "CDMA"): PROC_PRECISION INT16 or FP16 (the reserved
            # code 3 counts as INT16); DC data in 16-bit surfaces and entries (``dc16``),
            # weights in kernel groups of atomic_k / 2 and FP16's NaN flush in either format
            prec = regs.d_misc_cfg.proc_precision
            wt16, dc16, wt_flush = Signal(), Signal(), Signal()
            m.d.comb += [
                wt16.eq(prec != ProcPrecision.INT8),
                dc16.eq(wt16 & feature),
                wt_flush.eq((prec == ProcPrecision.FP16)
                            & (regs.d_nan_flush_to_zero.nan_to_zero == NanToZero.ENABLE)),
            ]
        else:
            dc16 = None
        w_max = regs.d_datain_size_0.datain_width[:CUBE_DIM_BITS]
        h_max = regs.d_datain_size_0.datain_height[:CUBE_DIM_BITS]
        multi = None
        last_slice = h_max                      # the layer's last slice (fetched counts to it)
        if cfg.batch:
            # multi-batch (docs/conv.md "Multi-batch"): the N cubes' slices one after the other,
            # N x (DATAIN_HEIGHT+1) slices in all, fetched line by line (no band)
            multi = Signal()
            last_slice = Signal(SLICE_COUNT_BITS)
            nbm1 = regs.d_batch_number.batches
            m.d.comb += multi.eq(feature & (nbm1 != 0))
            m.d.sync += last_slice.eq((h_max + 1) * (nbm1 + 1) - 1)    # stable in a layer
        atoms, dat_busy, img_slice_end = self.data_fetch(m, begin & dat_fetch, dat_hold, dc16,
                                                         multi)
        cb_max = regs.d_datain_size_1.datain_channel[:CUBE_DIM_BITS] >> log2(cfg.memory_atomic)
        if cfg.conv16:                          # surfaces of memory_atomic / 2 16-bit channels
            cb_max = Mux(dc16, regs.d_datain_size_1.datain_channel[:CUBE_DIM_BITS]
                         >> log2(cfg.memory_atomic // 2), cb_max)
        eps = regs.d_entry_per_slice.entries + 1
        x, cb = Signal(CUBE_DIM_BITS), Signal(CUBE_DIM_BITS)
        entry = Signal(abits)                   # entry of the next atom
        slice_base = Signal(abits)              # first entry of the current slice
        # the band (surface by surface): line yb of surface cb starts at run0; cb_base is
        # (0, cb)'s entry
        band = Signal()                         # writing a band
        nband = Signal(BAND_BITS)               # the band's lines
        step = Signal(BAND_BITS)                # lines of the bands after the first (0: none)
        yb = Signal(BAND_BITS)
        run0, cb_base = Signal(abits), Signal(abits)
        dat_active = Signal()                   # slices remain to be written
        fetched = Signal(SLICE_COUNT_BITS)      # slices fetched this layer
        end_slice = Signal()
        dat_fire = Signal()
        dcap = Signal(abits + 1)                # entries of the data banks
        m.d.comb += dcap.eq(geom.wt_base(regs.d_bank.data_bank))
        entry_inc = Signal(abits + 1)
        slice_next = Signal(abits + 1)
        if cfg.conv16:
            # 16-bit image lines: slices of EPS 16-bit entries, 2 x EPS units apart
            img16 = Signal()
            m.d.comb += img16.eq(wt16 & ~feature)
            m.d.comb += [entry_inc.eq(entry + 1),
                         slice_next.eq(slice_base + Mux(img16, eps << 1, eps))]
        else:
            m.d.comb += [entry_inc.eq(entry + 1), slice_next.eq(slice_base + eps)]
        entry_inc_w = Mux(entry_inc == dcap, 0, entry_inc)
        slice_next_w = Mux(slice_next >= dcap, slice_next - dcap, slice_next)
        run_next, cb_next = Signal(abits + 1), Signal(abits + 1)
        m.d.comb += [run_next.eq(run0 + eps), cb_next.eq(cb_base + w_max + 1)]
        run_next_w = Mux(run_next >= dcap, run_next - dcap, run_next)
        cb_next_w = Mux(cb_next >= dcap, cb_next - dcap, cb_next)
        # the slice after the band (its first entry): run0's walk on the band's first surface
        # (cb 0: run0 is the slice base of line yb) goes one slice past the band's last line
        after = Signal(abits)
        band_after_w = Mux(cb == 0, run_next_w, after)
        if geom.atoms == 1 and cfg.conv16:
            # one atom per unit: int8 feature atoms at consecutive units (``entry``), 16-bit
            # ones packed two to a 16-bit entry (:meth:`packed_entries`)
            pk_addr, _, pk_done = self.packed_entries(
                m, begin, feature, band, x, yb, nband, cb, w_max, cb_max, eps, dcap, dat_fire,
                end_slice, dc16)
            wr_addr = Mux(dc16, pk_addr, entry)
            wr_data = atoms.payload
            block_done = Mux(dc16, pk_done, 1)
        elif geom.atoms > 1:
            pk_addr, wr_lane, block_done = self.packed_entries(
                m, begin, feature, band, x, yb, nband, cb, w_max, cb_max, eps, dcap, dat_fire,
                end_slice, dc16)
            wr_addr = Mux(feature, pk_addr, entry)     # image lines: consecutive entries
            m.d.comb += self.dat_wr.payload.mask.eq(Mux(feature, 1 << wr_lane,
                                                         (1 << geom.atoms) - 1))
            # a feature atom in every lane (the mask picks one); image entries whole
            wr_data = Mux(feature, atoms.payload[:cfg.atom_bytes * 8].replicate(geom.atoms),
                          atoms.payload)
        else:
            wr_addr, wr_data, block_done = entry, atoms.payload, 1
        m.d.comb += [
            self.dat_wr.valid.eq(atoms.valid),
            atoms.ready.eq(self.dat_wr.ready),
            self.dat_wr.payload.addr.eq(wr_addr),
            self.dat_wr.payload.data.eq(wr_data),
            dat_fire.eq(atoms.valid & self.dat_wr.ready),
            end_slice.eq(Mux(feature, (x == w_max) & (cb == cb_max), img_slice_end)),
        ]
        band_lines = Signal(BAND_BITS)
        lines = Signal(BAND_BITS)
        m.d.comb += [lines.eq(h_max + 1),
                     band_lines.eq(Mux(self.band_lines > lines, lines, self.band_lines))]
        if multi is not None:
            band_lines = Mux(multi, 0, band_lines)
        left = Signal(BAND_BITS)                # lines after the current band
        next_nband = Signal(BAND_BITS)
        m.d.comb += [left.eq(h_max + 1 - fetched - nband),
                     next_nband.eq(Mux(left < step, left, step))]
        with m.If(dat_fire & band & (x == w_max) & (cb == 0)):
            m.d.sync += after.eq(run_next_w)
        with m.If(dat_fire & band):
            with m.If(x != w_max):
                m.d.sync += [x.eq(x + 1), entry.eq(entry_inc_w)]
            with m.Elif(yb != nband - 1):               # next line of this surface
                m.d.sync += [x.eq(0), yb.eq(yb + 1), run0.eq(run_next_w), entry.eq(run_next_w)]
            with m.Elif(cb != cb_max):                  # next surface of the band
                m.d.sync += [x.eq(0), yb.eq(0), cb.eq(cb + 1), cb_base.eq(cb_next_w),
                             run0.eq(cb_next_w), entry.eq(cb_next_w),
                             self.band_cbs.eq(self.band_cbs + block_done)]
            with m.Else():                              # band complete
                m.d.sync += [x.eq(0), yb.eq(0), cb.eq(0), band.eq(0),
                             entry.eq(band_after_w), slice_base.eq(band_after_w),
                             self.band_cbs.eq(self.band_cbs + 1),
                             self.dat_slices.eq(self.dat_slices + nband),
                             fetched.eq(fetched + nband)]
                with m.If(fetched + nband == h_max + 1):
                    m.d.sync += dat_active.eq(0)
                with m.Elif(step != 0):                 # the next band (else line by line)
                    m.d.sync += [band.eq(1), nband.eq(next_nband), run0.eq(band_after_w),
                                 cb_base.eq(band_after_w), self.band_cbs.eq(0),
                                 self.band_end.eq(self.dat_slices + nband + next_nband)]
        with m.Elif(dat_fire):
            with m.If(x != w_max):
                m.d.sync += [x.eq(x + 1), entry.eq(entry_inc_w)]
            with m.Else():
                m.d.sync += [x.eq(0), cb.eq(cb + 1), entry.eq(entry_inc_w)]
            with m.If(end_slice):
                m.d.sync += [cb.eq(0), entry.eq(slice_next_w), slice_base.eq(slice_next_w),
                             self.dat_slices.eq(self.dat_slices + 1), fetched.eq(fetched + 1)]
                with m.If(fetched == last_slice):
                    m.d.sync += dat_active.eq(0)
        with m.If(begin):
            m.d.sync += [x.eq(0), cb.eq(0), entry.eq(keep.dat_next), slice_base.eq(keep.dat_next),
                         fetched.eq(0), self.dat_slices.eq(keep.dat_kept),
                         dat_active.eq(dat_fetch),
                         band.eq(dat_fetch & feature & (band_lines != 0)), nband.eq(band_lines),
                         step.eq(self.band_step),
                         yb.eq(0),
                         run0.eq(keep.dat_next), cb_base.eq(keep.dat_next),
                         self.band_cbs.eq(0),
                         self.band_end.eq(keep.dat_kept + Mux(dat_fetch & feature, band_lines, 0))]

        # ---------------- weights: a ring of WCAP entries after the data banks ----------------
        m.submodules.wt_fetch = wdma = WeightReadDma(**read_dma_params(cfg))
        if not cfg.weight_compression:
            connect_dma(m, wdma.dma, self.wt_dma, regs.d_weight_ram_type.weight_ram_type)
        eb_sh = log2(cfg.cbuf_bank_width)
        wbytes = regs.d_weight_bytes.weight_bytes
        n_entries = Signal(ENTRY_COUNT_BITS)    # entries written to the ring this layer
        # entries' worth of D_WEIGHT_BYTES (fetched; n_entries but with compressed weights)
        w_entries = Signal(ENTRY_COUNT_BITS) if cfg.weight_compression else n_entries
        m.d.comb += w_entries.eq((wbytes + (cfg.cbuf_bank_width - 1)) >> eb_sh)
        lr = geom.atom_shift                    # the DMA counts memory atoms, R per entry
        if cfg.weight_compression:
            # compressed weights (D_WEIGHT_FORMAT = COMPRESSED; hdl/cdma/expand.py): the
            # D_WEIGHT_BYTES compressed bytes and the D_WMB_BYTES WMB bytes come through the one
            # weight client (NVIDIA's CDMA_WT reads both); WtExpand writes the uncompressed
            # weights, BYTE_PER_KERNEL x kernels bytes, into the ring, which then counts their
            # entries. WGS is not read: it only paces NVIDIA's fetch (its value is checked by
            # the model, ConvCore._decompressed).
            compressed = Signal()
            dense = Signal(32)
            m.d.comb += [
                compressed.eq(regs.d_weight_format.weight_format.as_value() == 1),
                dense.eq((regs.d_weight_size_0.byte_per_kernel + 1)
                         * (regs.d_weight_size_1.weight_kernel + 1)),
                # whole 128-byte pieces, as D_WEIGHT_BYTES of uncompressed weights: CSC reads
                # nv_full's 16-bit layers' weights in rows of two 64-byte units, so an odd unit
                # count would leave it waiting for its last row for ever (found by the sweep)
                n_entries.eq(Mux(compressed, ((dense + 127) >> 7) << (7 - eb_sh), w_entries)),
            ]
            m.submodules.wmb_fetch = mdma = WeightReadDma(**read_dma_params(cfg))
            # as many requests in flight as both DMAs' buffers allow (one beat each at least):
            # fewer would cap the weight stream below the memory's rate at a long latency
            # (16 requests at 500 cycles: a quarter of the uncompressed rate, found by the sweep)
            m.submodules.wt_share = share = ReadShare(cfg.mem_address_width,
                                                      cfg.axi_data_bytes * 8,
                                                      requests=wdma.depth + mdma.depth)
            wiring.connect(m, wdma.dma, share.clients[0])
            wiring.connect(m, mdma.dma, share.clients[1])
            connect_dma(m, share.port, self.wt_dma, regs.d_weight_ram_type.weight_ram_type)
            a_sh = log2(cfg.atom_bytes)
            wmb_atoms = Signal(ENTRY_COUNT_BITS)
            m.d.comb += wmb_atoms.eq((regs.d_wmb_bytes.wmb_bytes + (cfg.atom_bytes - 1)) >> a_sh)
            m.submodules.wt_expand = wexp = WtExpand(cfg.atom_bytes, geom.atoms,
                                                     elem16=cfg.conv16)
            m.d.comb += [
                mdma.start.eq(begin & wt_fetch & compressed),
                mdma.cube.base.eq(Cat(regs.d_wmb_addr_low.as_value(),
                                      regs.d_wmb_addr_high.as_value())[:cfg.mem_address_width]),
                mdma.entries.eq(wmb_atoms),
                mdma.limit.eq(wmb_atoms),
                wexp.start.eq(begin & wt_fetch),
                wexp.entries.eq(n_entries),
                wexp.dense_bytes.eq(dense),
                wexp.wt_atoms.eq(w_entries << lr if lr else w_entries),
                wexp.wmb_atoms.eq(wmb_atoms),
                wexp.bypass.eq(~compressed),
            ]
            if cfg.conv16:
                m.d.comb += wexp.wide.eq(wt16)
            wiring.connect(m, wdma.atoms, wexp.wt)
            wiring.connect(m, mdma.atoms, wexp.wmb)
            wt_busy = wdma.busy | mdma.busy | wexp.busy
        else:
            compressed = None
            wt_busy = wdma.busy
        wcap = Signal(abits + 1)
        wbase = Signal(abits + 1)
        m.d.comb += [wcap.eq(geom.wt_cap(regs.d_bank.weight_bank)),
                     wbase.eq(geom.wt_base(regs.d_bank.data_bank))]
        limit = Signal(ENTRY_COUNT_BITS)        # entries below it may be requested
        wt_active = Signal()                    # weight entries still to be written
        ring_lim = Signal(ENTRY_COUNT_BITS)
        ahead_lim = Signal(ENTRY_COUNT_BITS)
        m.d.comb += [ring_lim.eq(self.wt_released + wcap), ahead_lim.eq(self.wt_read + WT_AHEAD)]
        # weights first (``weights_first``): after the band, the remaining lines wait until
        # kernel group 0's weights are requested (at most the ring's WCAP entries, so that they
        # never wait for CSC, and at most the layer's), and WT_AHEAD does not hold meanwhile
        g0_atoms = Signal(ENTRY_COUNT_BITS)
        if self.weights_first:
            bpk = Signal(19)
            g0 = Signal(ENTRY_COUNT_BITS)
            g0c = Signal(ENTRY_COUNT_BITS)
            lk = log2(cfg.mac_atomic_k)
            # kernel group 0: BYTE_PER_KERNEL x atomic_k bytes (16-bit layers: atomic_k / 2
            # kernels of BYTE_PER_KERNEL = R*S*C*2 bytes), in units
            g0_bytes = bpk << lk if not cfg.conv16 else Mux(wt16, bpk << (lk - 1), bpk << lk)
            m.d.comb += [bpk.eq(regs.d_weight_size_0.byte_per_kernel + 1),
                         g0.eq(g0_bytes + (cfg.cbuf_bank_width - 1) >> eb_sh),
                         g0c.eq(Mux(g0 < wcap, g0, wcap))]
            # registers: stable in a layer
            m.d.sync += g0_atoms.eq(Mux(g0c < n_entries, g0c, n_entries) << geom.atom_shift)
            req_atoms = Signal(ENTRY_COUNT_BITS)    # weight atoms requested this layer
            wq = self.wt_dma.req
            with m.If(begin):
                m.d.sync += req_atoms.eq(0)
            with m.Elif(wq.valid & wq.ready):
                m.d.sync += req_atoms.eq(req_atoms + ((wq.payload.len + 1)
                                                      << log2(cfg.axi_data_bytes // cfg.atom_bytes)))
            if compressed is None:
                m.d.comb += dat_hold.eq(wt_active & (req_atoms < g0_atoms))
        with m.If(begin):                       # wt_released/wt_read are the previous layer's
            m.d.sync += limit.eq(Mux(wcap < WT_AHEAD, wcap, WT_AHEAD))
        with m.Else():
            # WT_AHEAD holds only while feature data is still to come: after the data fetch the
            # weights fill the ring (the next kernel group's are fetched during this one's
            # stripes; nv_small_256 dc_8x16x128: 23,545 -> 21,625 cycles, nv_small unchanged)
            lim = Mux((ring_lim < ahead_lim) | ~dat_active | dat_hold, ring_lim, ahead_lim)
            if self.weights_first:
                # ... but the data goes first, but for kernel group 0's weights after the first
                # band: weights one weight set ahead of CSC's reading only. A band's channel
                # blocks are CSC's waits (its weights arrive in the order CSC uses them, its
                # lines only block by block), so the first band before group 0's weights, and
                # the later bands before the next groups' weights.
                set_lim = Signal(ENTRY_COUNT_BITS)
                set_entries = -(-cfg.mac_atomic_k * cfg.mac_atomic_c // cfg.cbuf_bank_width)
                m.d.comb += set_lim.eq(self.wt_read + set_entries)
                first_band = band & (fetched == 0)
                data_first = first_band | (dat_active & ~dat_hold)
                lim = Mux(data_first & (set_lim < ring_lim), set_lim, lim)
            m.d.sync += limit.eq(lim)
        m.d.comb += [
            wdma.start.eq(begin & wt_fetch),
            wdma.cube.base.eq(Cat(regs.d_weight_addr_low.as_value(),
                                  regs.d_weight_addr_high.as_value())[:cfg.mem_address_width]),
            wdma.entries.eq(w_entries << lr if lr else w_entries),
        ]
        if compressed is None:
            m.d.comb += wdma.limit.eq(limit << lr if lr else limit)
            watoms = wdma.atoms
        else:
            # uncompressed: the requests are held by the ring as always (WtExpand passes the
            # atoms on as entries); compressed: the fetch is held by the DMA's own buffer only,
            # and each uncompressed entry waits until it is below the limit
            m.d.comb += wdma.limit.eq(Mux(compressed, w_entries, limit) << lr)
            passed = Signal(ENTRY_COUNT_BITS)   # entries passed this layer
            m.submodules.wt_gate = gate = PipelineStage(unsigned(cfg.cbuf_bank_width * 8))
            ok = Signal()
            m.d.comb += ok.eq(passed < limit)
            m.d.comb += [gate.i.valid.eq(wexp.o.valid & ok), wexp.o.ready.eq(gate.i.ready & ok),
                         gate.i.payload.eq(wexp.o.payload)]
            with m.If(begin):
                m.d.sync += passed.eq(0)
            with m.Elif(gate.i.valid & gate.i.ready):
                m.d.sync += passed.eq(passed + 1)
            watoms = gate.o
            if self.weights_first:
                # kernel group 0 counted in uncompressed entries passed
                m.d.comb += dat_hold.eq(wt_active & (Mux(compressed, passed << lr, req_atoms)
                                                     < g0_atoms))
        # the weight stream's items: atoms, or entries when WtExpand makes them
        wbytes_item = cfg.cbuf_bank_width if compressed is not None else cfg.atom_bytes
        if cfg.conv16:
            # FP16 with D_NAN_FLUSH_TO_ZERO: NaN weights written as +0 (the model's
            # ``ConvCore._weights``, from NVIDIA's nvdlav1 NV_NVDLA_CDMA_wt.v); the weight stream
            # is 2-byte aligned (D_WEIGHT_ADDR is atom aligned), so each atom holds whole
            # elements. A register stage of its own, in every layer.
            elems = wbytes_item // 2
            m.submodules.wt_flush = wfl = Map(
                unsigned(wbytes_item * 8), unsigned(wbytes_item * 8),
                lambda mm, p: Mux(wt_flush, fp16_nan_flush(p, elems), p))
            wiring.connect(m, watoms, wfl.i)
            watoms = wfl.o
        if geom.atoms > 1 and compressed is None:
            # R consecutive atoms of the weight stream make one entry (atom j in lane j)
            m.submodules.wt_pack = pack = Merge(unsigned(cfg.atom_bytes * 8), geom.atoms)
            m.d.comb += pack.count.eq(geom.atoms)
            wiring.connect(m, watoms, pack.i)
            wentries = pack.o
            m.d.comb += self.wt_wr.payload.mask.eq((1 << geom.atoms) - 1)
        else:
            wentries = watoms
            if geom.atoms > 1:
                m.d.comb += self.wt_wr.payload.mask.eq((1 << geom.atoms) - 1)
        ring = Signal(abits)                    # n % WCAP of the next entry
        wt_fire = Signal()
        m.d.comb += [
            self.wt_wr.valid.eq(wentries.valid),
            wentries.ready.eq(self.wt_wr.ready),
            self.wt_wr.payload.addr.eq(wbase + ring),
            self.wt_wr.payload.data.eq(wentries.payload),
            wt_fire.eq(wentries.valid & self.wt_wr.ready),
        ]
        with m.If(wt_fire):
            m.d.sync += [ring.eq(Mux(ring == wcap - 1, 0, ring + 1)),
                         self.wt_entries.eq(self.wt_entries + 1)]
            with m.If(self.wt_entries + 1 == n_entries):
                m.d.sync += wt_active.eq(0)
        with m.If(begin):
            m.d.sync += [ring.eq(0), self.wt_entries.eq(Mux(wt_fetch, 0, n_entries)),
                         wt_active.eq(wt_fetch & (n_entries != 0))]

        m.d.comb += self.busy.eq(dat_active | wt_active | dat_busy | wt_busy)
        # each fetch's end (the done interrupts): from the cycle after ``begin`` until the pulse
        for name, out, working in (("dat", self.dat_done, dat_active | dat_busy),
                                   ("wt", self.wt_done, wt_active | wt_busy)):
            running = Signal(name=f"{name}_running")
            m.d.comb += out.eq(running & ~working)
            with m.If(begin):
                m.d.sync += running.eq(1)
            with m.Elif(out):
                m.d.sync += running.eq(0)

        # ---------------- status registers ----------------
        hw = self.hw
        m.d.comb += hw.s_cbuf_flush_status.flush_done.eq(1)   # NaN/Inf counters: 0 (int8)
        perf_en = regs.d_perf_enable.dma_en
        for name, port, field_stall, field_lat in (
                ("dat", self.dat_dma, hw.d_perf_dat_read_stall.dat_rd_stall,
                 hw.d_perf_dat_read_latency.dat_rd_latency),
                ("wt", self.wt_dma, hw.d_perf_wt_read_stall.wt_rd_stall,
                 hw.d_perf_wt_read_latency.wt_rd_latency)):
            stall = Signal(32, name=f"{name}_rd_stall")
            lat = Signal(32, name=f"{name}_rd_latency")
            outs = Signal(ENTRY_COUNT_BITS, name=f"{name}_outstanding")   # beats in flight
            req, rsp = port.req, port.rsp
            issued = Mux(req.valid & req.ready, req.payload.len + 1, 0)
            m.d.sync += outs.eq(outs + issued - (rsp.valid & rsp.ready))
            with m.If(self.busy & perf_en):
                with m.If(req.valid & ~req.ready):
                    m.d.sync += stall.eq(stall + 1)
                with m.If((outs != 0) & (lat != 0xFFFF_FFFF)):
                    m.d.sync += lat.eq(lat + 1)
            with m.If(begin & perf_en):
                # NV_NVDLA_CDMA_dc.v / _wt.v: the counter flops are enabled by op_en & dma_en
                # only (*_rd_stall_cen, *_rd_latency_cen), clear included
                m.d.sync += [stall.eq(0), lat.eq(0)]
            m.d.comb += [field_stall.eq(stall), field_lat.eq(lat)]
        return m
