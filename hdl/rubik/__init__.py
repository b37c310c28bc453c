"""RUBIK: the data-reshape engine of nv_full (unit description "Rubik", programming guide "Rubik
programming"): contract (deconvolution's last phase), split (a feature cube to planes) and merge
(planes to a feature cube), from either memory to either memory.

What it computes is what NVIDIA's nvdlav1 RUBIK computes, as verif/model/rubik.py lists it (shared
with the model only through the register map): every mode moves whole 32-byte atoms; ``b`` = 1
byte per element for IN_PRECISION INT8, 2 for INT16/FP16 (moved as bytes), ``A`` = 32 / b
elements per atom; W, H = DATAIN_WIDTH/HEIGHT + 1; C = DATAIN_CHANNEL + 1 (split, merge) or
DATAOUT_CHANNEL + 1 (contract); G = ceil(C / A); J = ceil(W / A).

How this design moves them: a :class:`hdl.dma.nest.NestReadDma` and a
:class:`hdl.dma.nest.NestWriteDma` each walk a loop nest of the mode (:func:`nests`, addresses
from the consumer group's registers), joined by the atom stream:

* contract: the write nest writes G x H*sy lines of W*sx atoms. With one atom per AXI beat the
  read nest visits the source atoms in the order of the destination's lines (group, line h,
  phase row dy, pixel w, phase column dx: one atom per run) and the atoms pass unchanged. With
  two atoms per beat (nv_full) it reads chunks of ``CONTRACT_CHUNK`` pixels of each phase's
  line (group, h, dy, chunk, dx: one run per chunk and phase) and
  :class:`hdl.rubik.contract.ContractBuffer` puts them in the destination's order.
* split: reads G x H lines of W pixel atoms; :class:`_Reshape` cuts every line into J blocks of
  A atoms (the last padded with zero atoms), transposes each (:class:`Transposer`) and keeps
  the A plane atoms of channels below C; the write nest puts atom (g, h, j, c) at
  ``OA + (g*A + c)*OPS + h*OLS + j*32``. The zero padding is the line tail NVIDIA writes as 0.
* merge: the read nest takes blocks of A plane atoms (g, h, j, c) (none past C: zero atoms
  stand for them, so channels past C are written 0); the transposed blocks give pixel atoms,
  kept for w < W; written as G x H lines of W atoms.

Throughput when memory keeps up: contract two atoms per cycle each way on 64-byte beats (one
on 32-byte beats: one atom per request); split and merge one atom per cycle (with 64-byte beats
the DMAs are ``wide`` and :class:`hdl.dma.group.Ungroup` feeds the transposer). A layer starts
two cycles after its group is armed (strides times the deconvolution strides are registered) and
completes at the last write response. RUBIK_MODE 3 (no mode) completes at once without moving
data; IN_PRECISION 3 moves 2-byte elements (the model refuses both). D_PERF_READ_STALL /
D_PERF_WRITE_STALL count the cycles of the running layer whose read request (write request or
data) waits, while its D_PERF_ENABLE.PERF_EN is set, restarting at each layer: cycles of this
design, so they differ from NVIDIA's (the untimed model reads 0).
"""
from __future__ import annotations

from amaranth.hdl import C, Cat, Module, Mux, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.config import NvdlaConfig
from hdl.dma import read_dma_params, write_dma_params
from hdl.dma.cube import CUBE_DIM_BITS
from hdl.dma.group import Ungroup
from hdl.dma.nest import LOOPS, NestReadDma, NestWriteDma, nest_layout
from hdl.rubik.contract import ContractBuffer
from hdl.rubik.transpose import Transposer
from hdl.unit import DatapathUnit, connect_dma

__all__ = ["Rubik", "ATOM_BYTES", "CONTRACT", "SPLIT", "MERGE"]

ATOM_BYTES = 32                      # RUBIK moves 32-byte atoms (programming guide)
#: contract's read runs on 64-byte beats (atoms per phase line chunk: hdl/rubik/contract.py)
CONTRACT_CHUNK = 8
#: DECONV_X_STRIDE + 1 at most (a 5-bit field)
MAX_DECONV_STRIDE = 32
CONTRACT, SPLIT, MERGE = 0, 1, 2     # D_MISC_CFG.RUBIK_MODE


class _Reshape(wiring.Component):
    """The split / merge datapath between the read and write DMAs (module docstring): blocks of
    A atoms in (zero atoms where the read nest has none), transposed, the atoms the write nest
    has no place for dropped.

    Ports: ``go`` In(1) pulse: start a layer with the geometry on the inputs (latched at
    ``go``), also while the previous layer's last steps (drops only) run: ``split`` In(1) (0:
    merge), ``wide`` In(1) (2-byte elements, A = 16),
    ``w1``/``h1``/``c1`` In(13) (W, H, C minus one); ``i`` In(stream of 256 bits) from the read
    DMA, ``o`` Out(stream) to the write DMA; ``busy`` Out(1) until the last block has left.
    """

    def __init__(self):
        n = ATOM_BYTES * 8
        super().__init__({"go": In(1), "split": In(1), "wide": In(1),
                          "w1": In(CUBE_DIM_BITS), "h1": In(CUBE_DIM_BITS), "c1": In(CUBE_DIM_BITS),
                          "i": In(stream.Signature(n)), "o": Out(stream.Signature(n)),
                          "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.tr = tr = Transposer(ATOM_BYTES)
        # the geometry, latched at go: the unit's registers switch to the other group when the
        # layer completes (its last write response), while this layer's last block may still
        # be stepping through its dropped atoms (with live registers, those steps kept atoms
        # of the next layer's geometry: found behind a wide write DMA, which took them)
        wide, split = Signal(), Signal()
        w1, h1, c1 = (Signal(CUBE_DIM_BITS, name=n) for n in ("w1_l", "h1_l", "c1_l"))
        with m.If(self.go):
            m.d.sync += [wide.eq(self.wide), split.eq(self.split), w1.eq(self.w1),
                         h1.eq(self.h1), c1.eq(self.c1)]
        a1 = Mux(wide, ATOM_BYTES // 2 - 1, ATOM_BYTES - 1)      # A - 1
        a = a1 + 1
        j, h, g = (Signal(CUBE_DIM_BITS, name=n) for n in ("j", "h", "g"))
        wbase, cbase = Signal(CUBE_DIM_BITS + 1), Signal(CUBE_DIM_BITS + 1)   # j*A, g*A
        pwbase, pcbase = Signal(CUBE_DIM_BITS + 1), Signal(CUBE_DIM_BITS + 1)  # the block leaving
        k = Signal(range(ATOM_BYTES))
        active, first, flush = Signal(), Signal(), Signal()
        j1 = Mux(wide, w1 >> 4, w1 >> 5)      # J - 1
        g1 = Mux(wide, c1 >> 4, c1 >> 5)      # G - 1

        real = Signal()   # this step's input atom comes from memory (else a zero atom)
        keep = Signal()   # this step's output atom goes to memory (else it is dropped)
        m.d.comb += [
            real.eq(~flush & (Mux(split, wbase, cbase) + k <= Mux(split, w1, c1))),
            keep.eq(~first & (Mux(split, pcbase, pwbase) + k <= Mux(split, c1, w1))),
        ]
        in_ok = ~real | self.i.valid
        out_ok = ~keep | self.o.ready
        fire = Signal()
        m.d.comb += [
            fire.eq(active & in_ok & out_ok),
            self.i.ready.eq(active & real & out_ok),
            self.o.valid.eq(active & keep & in_ok),
            self.o.payload.eq(tr.o),
            tr.i.eq(Mux(real, self.i.payload, 0)), tr.step.eq(fire), tr.wide.eq(wide),
            tr.clear.eq(self.go), self.busy.eq(active),
        ]
        with m.If(fire):
            with m.If(k != a1):
                m.d.sync += k.eq(k + 1)
            with m.Else():
                # a block has entered (and the one before it left)
                m.d.sync += [k.eq(0), first.eq(0), pwbase.eq(wbase), pcbase.eq(cbase)]
                with m.If(flush):
                    m.d.sync += active.eq(0)
                with m.Elif(j != j1):
                    m.d.sync += [j.eq(j + 1), wbase.eq(wbase + a)]
                with m.Elif(h != h1):
                    m.d.sync += [j.eq(0), wbase.eq(0), h.eq(h + 1)]
                with m.Elif(g != g1):
                    m.d.sync += [j.eq(0), wbase.eq(0), h.eq(0), g.eq(g + 1), cbase.eq(cbase + a)]
                with m.Else():
                    m.d.sync += flush.eq(1)
        # a layer starts here even while the previous one's flush block runs: its write DMA has
        # taken every atom it kept, so what remains of it are dropped steps (the next layer can
        # start a few cycles after the last atom, when the write response comes that soon)
        with m.If(self.go):
            m.d.sync += [active.eq(1), first.eq(1), flush.eq(0), k.eq(0),
                         j.eq(0), h.eq(0), g.eq(0), wbase.eq(0), cbase.eq(0)]
        return m


def nests(m: Module, r, addr_width: int, chunk: int = 0):
    """The read and write loop nests of the layer in the register-file view ``r`` (consumer
    group): returns ``(mode, wide, ia, oa, rd_nest, wr_nest)``, ``ia``/``oa`` the byte
    addresses (``addr_width`` bits) and the nests :func:`hdl.dma.nest.nest_layout` signals,
    registered (valid two cycles after the registers are). ``chunk`` (a power of two, or 0):
    contract reads each phase's line in runs of ``chunk`` atoms for
    :class:`hdl.rubik.contract.ContractBuffer` instead of one atom per run."""
    aw = addr_width

    def field(reg, name):
        return Value.cast(getattr(getattr(r, reg), name))

    def atoms(reg, name):
        """A byte address or stride field kept in bits 31:5 of its register."""
        return Cat(C(0, 5), field(reg, name))

    mode = Signal(2)
    wide = Signal()
    m.d.sync += [mode.eq(field("d_misc_cfg", "rubik_mode")),
                 wide.eq(field("d_misc_cfg", "in_precision") != 0)]
    ia = Signal(aw)
    oa = Signal(aw)
    m.d.sync += [ia.eq(Cat(atoms("d_dain_addr_low", "dain_addr_low"),
                           field("d_dain_addr_high", "dain_addr_high"))[:aw]),
                 oa.eq(Cat(atoms("d_daout_addr_low", "daout_addr_low"),
                           field("d_daout_addr_high", "daout_addr_high"))[:aw])]
    ils, iss, ips = (atoms(f"d_dain_{n}_stride", f"dain_{n}_stride") for n in ("line", "surf", "planar"))
    ols, oss, ops = (atoms(f"d_daout_{n}_stride", f"daout_{n}_stride") for n in ("line", "surf", "planar"))
    cs0 = atoms("d_contract_stride_0", "contract_stride_0")
    sx1 = field("d_deconv_stride", "deconv_x_stride")
    sy1 = field("d_deconv_stride", "deconv_y_stride")
    w1 = field("d_datain_size_0", "datain_width")
    h1 = field("d_datain_size_0", "datain_height")
    cin1 = field("d_datain_size_1", "datain_channel")
    cout1 = field("d_dataout_size_1", "dataout_channel")

    # registered products (the deconvolution strides times a stride, A times a planar stride)
    p_cs0 = Signal(aw)       # sx * CONTRACT_STRIDE_0
    p_ols = Signal(aw)       # sy * out line stride
    p_line = Signal(CUBE_DIM_BITS + 6)   # W * sx atoms
    a_ips, a_ops = Signal(aw), Signal(aw)
    wide_now = field("d_misc_cfg", "in_precision") != 0
    m.d.sync += [p_cs0.eq((cs0 * (sx1 + 1))[:aw]), p_ols.eq((ols * (sy1 + 1))[:aw]),
                 p_line.eq((w1 + 1) * (sx1 + 1)),
                 a_ips.eq(Mux(wide_now, ips << 4, ips << 5)[:aw]),
                 a_ops.eq(Mux(wide_now, ops << 4, ops << 5)[:aw])]

    lay = nest_layout(aw)
    rd_n, wr_n = Signal(lay, name="rd_nest"), Signal(lay, name="wr_nest")

    def nest(sig, loops, last_count=0, line=0, last_line=None):
        loops = list(loops) + [(0, 0)] * (LOOPS - len(loops))
        stmts = [sig.last_count.eq(last_count), sig.line.eq(line),
                 sig.last_line.eq(line if last_line is None else last_line)]
        for i, (cnt, stride) in enumerate(loops):
            stmts += [sig.loops[i].count.eq(cnt), sig.loops[i].stride.eq(stride)]
        return stmts

    sh = Mux(wide_now, 4, 5)
    gc1, gi1 = cout1 >> sh, cin1 >> sh          # groups minus one (contract, split/merge)
    j1 = w1 >> sh
    lastc = Mux(wide_now, cin1[:4], cin1[:5])   # channels of the last group minus one
    a1 = Mux(wide_now, 15, 31)                  # channels of a group minus one (A - 1)
    mode_now = field("d_misc_cfg", "rubik_mode")
    with m.Switch(mode_now):
        with m.Case(CONTRACT):
            if chunk:
                # each phase's line in chunks of `chunk` atoms (the last: W mod chunk or chunk)
                cb = chunk.bit_length() - 1
                m.d.sync += nest(rd_n, [(gc1, iss), (h1, ils), (sy1, p_cs0),
                                        (w1 >> cb, chunk * ATOM_BYTES), (sx1, cs0)],
                                 last_count=sx1, line=chunk - 1, last_line=w1[:cb])
            else:
                m.d.sync += nest(rd_n, [(gc1, iss), (h1, ils), (sy1, p_cs0), (w1, ATOM_BYTES),
                                        (sx1, cs0)], last_count=sx1)
            m.d.sync += nest(wr_n, [(gc1, oss), (h1, p_ols), (sy1, ols)], line=p_line - 1)
        with m.Case(SPLIT):
            m.d.sync += nest(rd_n, [(gi1, iss), (h1, ils)], line=w1)
            m.d.sync += nest(wr_n, [(gi1, a_ops), (h1, ols), (j1, ATOM_BYTES), (0, 0), (a1, ops)],
                             last_count=lastc)
        with m.Default():
            m.d.sync += nest(rd_n, [(gi1, a_ips), (h1, ils), (j1, ATOM_BYTES), (0, 0), (a1, ips)],
                             last_count=lastc)
            m.d.sync += nest(wr_n, [(gi1, oss), (h1, ols)], line=w1)
    return mode, wide, ia, oa, rd_n, wr_n


class Rubik(DatapathUnit):
    """The RUBIK unit (module docstring) of configuration ``cfg`` (needs cfg.rubik and AXI beats
    of at least 32 bytes: ValueError otherwise).

    Ports (hdl/unit.py convention): ``csb_rbk`` In(RegBusSignature); ``rbk_rd``
    Out(DmaReadSignature) and ``rbk_wr`` Out(DmaWriteSignature) (requests with ``cv`` when
    cfg.secondary_memif: D_DAIN_RAM_TYPE / D_DAOUT_RAM_TYPE); ``done_grp`` Out(2) (GLB's
    RUBIK_DONE_STATUSg); ``busy`` Out(1): a layer runs.
    """

    REGISTER_FILES = ("RBK",)
    READ_CLIENTS = ("rbk_rd",)
    WRITE_CLIENTS = ("rbk_wr",)
    INTERRUPT = "rubik"
    INTERRUPT_UNIT = "RBK"

    def __init__(self, cfg: NvdlaConfig):
        if not cfg.rubik:
            raise ValueError(f"{cfg.name}: no RUBIK in this configuration (rubik=False)")
        if cfg.axi_data_bytes < ATOM_BYTES:
            raise ValueError(f"{cfg.name}: RUBIK moves {ATOM_BYTES}-byte atoms; AXI beats of "
                             f"{cfg.axi_data_bytes} bytes are narrower")
        super().__init__(cfg)

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        rf = self.add_register_file(m, "RBK")
        r = rf.cfg
        # two atoms per AXI beat (nv_full): wide atom streams, contract through the reorder buffer
        two = cfg.axi_data_bytes == 2 * ATOM_BYTES
        atoms = {"atom_bytes": ATOM_BYTES, "atom_elems": 1, "wide": two}
        m.submodules.rd = rd = NestReadDma(**{**read_dma_params(cfg), **atoms})
        m.submodules.wr = wr = NestWriteDma(**{**write_dma_params(cfg), **atoms})
        m.submodules.reshape = rs = _Reshape()
        mode, wide, ia, oa, rd_n, wr_n = nests(m, r, cfg.mem_address_width,
                                               CONTRACT_CHUNK if two else 0)

        done = Signal()
        start = self.add_layer_control(m, [rf], done)
        # the nests are registered twice from the consumer group's registers: start 2 cycles on
        go1, go = Signal(), Signal()
        m.d.sync += [go1.eq(start), go.eq(go1)]
        moves = mode != 3
        m.d.comb += [
            rd.start.eq(go & moves), rd.cube.base.eq(ia), rd.nest.eq(rd_n),
            wr.start.eq(go & moves), wr.cube.base.eq(oa), wr.nest.eq(wr_n),
            rs.go.eq(go & moves & (mode != CONTRACT)), rs.split.eq(mode == SPLIT), rs.wide.eq(wide),
            rs.w1.eq(r.d_datain_size_0.datain_width), rs.h1.eq(r.d_datain_size_0.datain_height),
            rs.c1.eq(r.d_datain_size_1.datain_channel),
            done.eq(wr.done | (go & ~moves)),
        ]
        # contract: the atoms pass unchanged (one per beat) or through the reorder buffer (two
        # per beat); split / merge: one atom per cycle through the reshape datapath
        contract = mode == CONTRACT
        if two:
            m.submodules.ungroup = ug = Ungroup(ATOM_BYTES, 2)
            m.submodules.contract = cb = ContractBuffer(ATOM_BYTES, CONTRACT_CHUNK,
                                                        MAX_DECONV_STRIDE)
            m.d.comb += [
                cb.go.eq(go), cb.sx1.eq(r.d_deconv_stride.deconv_x_stride),
                cb.w1.eq(r.d_datain_size_0.datain_width),
                cb.i.valid.eq(rd.atoms.valid & contract), cb.i.payload.eq(rd.atoms.payload),
                ug.i.valid.eq(rd.atoms.valid & ~contract), ug.i.payload.eq(rd.atoms.payload),
                rd.atoms.ready.eq(Mux(contract, cb.i.ready, ug.i.ready)),
                rs.i.valid.eq(ug.o.valid), rs.i.payload.eq(ug.o.payload), ug.o.ready.eq(rs.i.ready),
                wr.atoms.valid.eq(Mux(contract, cb.o.valid, rs.o.valid)),
                wr.atoms.payload.data.eq(Mux(contract, cb.o.payload.data, rs.o.payload)),
                wr.atoms.payload.count.eq(Mux(contract, cb.o.payload.count, 1)),
                cb.o.ready.eq(wr.atoms.ready & contract),
                rs.o.ready.eq(wr.atoms.ready & ~contract),
            ]
        else:
            m.d.comb += [
                rs.i.valid.eq(rd.atoms.valid & ~contract), rs.i.payload.eq(rd.atoms.payload),
                rd.atoms.ready.eq(Mux(contract, wr.atoms.ready, rs.i.ready)),
                wr.atoms.valid.eq(Mux(contract, rd.atoms.valid, rs.o.valid)),
                wr.atoms.payload.eq(Mux(contract, rd.atoms.payload, rs.o.payload)),
                rs.o.ready.eq(wr.atoms.ready & ~contract),
            ]
        connect_dma(m, rd.dma, self.rbk_rd, r.d_dain_ram_type.datain_ram_type)
        connect_dma(m, wr.dma, self.rbk_wr, r.d_daout_ram_type.dataout_ram_type)

        # stall counters of the running layer (module docstring)
        perf = Value.cast(r.d_perf_enable.perf_en)
        rd_stall = self.rbk_rd.req.valid & ~self.rbk_rd.req.ready
        wr_stall = ((self.rbk_wr.req.valid & ~self.rbk_wr.req.ready)
                    | (self.rbk_wr.data.valid & ~self.rbk_wr.data.ready))
        rd_cnt, wr_cnt = Signal(32), Signal(32)
        with m.If(start):
            m.d.sync += [rd_cnt.eq(0), wr_cnt.eq(0)]
        with m.Elif(perf):
            with m.If(rd_stall):
                m.d.sync += rd_cnt.eq(rd_cnt + 1)
            with m.If(wr_stall):
                m.d.sync += wr_cnt.eq(wr_cnt + 1)
        m.d.comb += [rf.hw.d_perf_read_stall["rd_stall_cnt"].eq(rd_cnt),
                     rf.hw.d_perf_write_stall["wr_stall_cnt"].eq(wr_cnt)]
        return m
