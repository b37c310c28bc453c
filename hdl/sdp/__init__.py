"""SDP: single data point processor (v1_ias_unit_description.rst "SDP").

Hardware layer = input (SDP_RDMA MRDMA from memory, or CACC on the fly) -> SDP core (X1 BS, X2
BN, Y EW with its LUT when configured, output converter; :mod:`hdl.sdp.core`) -> SDP WDMA (or
PDP on the fly), joined by ``amaranth.lib.stream`` interfaces. SDP_RDMA and SDP keep separate
register files and ping-pong pointers (v1_hwarch.rst "Ping-pong synchronization"); a layer
starts when the consumer groups of both are enabled (D_OP_ENABLE) and completes when WDMA has
all write responses; then both register files see ``done`` and SDP's per-group done pulse goes
to GLB (S_INTR_STATUS.SDP_DONE_STATUS<g>).

Input on the fly (D_FEATURE_MODE_CFG.FLYING_MODE = ON_FLYING; docs/conv.md "SDP on the fly"):
the core takes int32 atoms from ``cacc_flying`` (cube order surface / line / pixel, size from
SDP's D_DATA_CUBE_*) instead of MRDMA, which does not run; SDP_RDMA then takes part in the layer
only when an operand DMA runs (as verif/model/nvdla.py ``_sdp_needs_rdma``). MRDMA's int8 atoms
are sign-extended to 32 bits so that the core sees one input format.

BRDMA / NRDMA / ERDMA (:mod:`hdl.sdp.brdma`) read the X1 / X2 / Y operands when a non-bypassed
ALU or multiplier takes them from memory (D_DP_<X>_ALU/MUL_CFG SRC = MEM); they start with the
layer. ERDMA exists when cfg.sdp_ew: it is MCIF read client ``sdp_erdma`` (hdl/dma/clients.py;
the instance's READ_CLIENTS list it).

Output to PDP (D_FEATURE_MODE_CFG.OUTPUT_DST = PDP, programming guide "PDP" on-the-fly): the
converter's atoms go out on ``pdp_flying`` (hdl/top.py connects it to PDP's) instead of WDMA,
which stays idle (the numpy model writes nothing to memory then). The layer is done when PDP has
taken the cube's last atom and PDP's layer is done (``pdp_done``): verif/model/nvdla.py completes
the fused SDP->PDP layer's groups together, SDP's interrupt status bit with PDP's, so that
software sees both in one S_INTR_STATUS read.

LUT access (S_LUT_ACCESS_CFG / S_LUT_ACCESS_DATA, decoded here beside the register file) and the
D_PERF_* counters (LUT statistics, output saturation, WDMA stall; per group, NV_NVDLA_SDP_reg.v)
are described where they are built in :meth:`Sdp.elaborate`.

Compare mode (cfg.sdp_ew, EW on, EW ALU on with EW_ALU_ALGO = EQL; NVIDIA's RTL, facts from
nv_small / nvdlav1 NV_NVDLA_SDP_core.v, NV_NVDLA_SDP_HLS_C_int.v, NV_NVDLA_SDP_WDMA_DAT_out.v,
NV_NVDLA_SDP_WDMA_dmaif.v): the Y sub-unit's 0/1 results pass the output converter unchanged
(:mod:`hdl.sdp.y`; the converter is set to the identity here), WDMA takes the atoms without a
single memory request (nothing is written) and the layer completes with its interrupt once the
cube's last atom is taken (no write responses to wait for).

D_STATUS.STATUS_UNEQUAL (same sources and NV_NVDLA_SDP_reg.v): a live flag, cleared at the layer
start, ORs every byte of every atom WDMA takes: in every layer, not only in compare mode (after
an ordinary layer it is 1 when any written byte, padding lanes of the last atom included, is
non-zero); with OUTPUT_DST = PDP WDMA takes zero atoms (flag 0). Each register group holds a
copy, loaded when its layer is done and cleared when its OP_EN is set, like the D_PERF_*
registers (below).

Operand DMAs that disagree with the sub-units' operand sources (issue 36 item 1; the model's
``SdpCore._check`` and ``untaken_operand_fits`` give NVIDIA's behaviour and its sources):

* an operand a non-bypassed ALU or multiplier takes from memory that its BRDMA/NRDMA/ERDMA does
  not fetch (DMA disabled, or DATA_USE not selecting it): NVIDIA's core waits for it forever;
  here the layer is armed but never started (``stuck``: nothing is read or written, the unit
  stays busy and the player's cycle budget names it);
* an operand fetched that nothing takes: the layer runs without it (the operand DMA reads only
  for sub-units that take memory operands) and completes, but NVIDIA's DMA never finishes, so
  SDP_RDMA's group stays armed (``wedged``) and every later layer that needs SDP_RDMA is never
  started, unless the fetch is a single output (1 x 1 x one atom), which the core's operand
  packer keeps (``stale_*``: the DMA finishes; the next untaken fetch of that operand wedges, a
  later layer taking it is never started); with DATA_USE = BOTH and the other operand taken,
  the layer is ``stuck`` unless the untaken operand fits NVIDIA's FIFOs (``_both_absorbed``).

The checks are over the operand sources and the cube's size (counts one-hot up to 4), so they
cost a few gates.

INT16 (a configuration whose precisions include int16 on one-byte atoms, nv_full's
``int8_int16_fp16``: :func:`hdl.sdp.rdma.has_int16`; built only there, so every other
configuration's SDP is unchanged): a layer with SDP D_DATA_FORMAT.PROC_PRECISION = 1 runs INT16
end to end as the bit-exact model computes it (verif/model/sdp.py ``SdpCore._check`` / ``run``
/ ``_epa`` and their docstrings: NVIDIA's nvdlav1 SDP computes INT16 with INT8's arithmetic):

* memory atoms hold ``atom_bytes // 2`` little-endian int16 elements (format.rst "Feature Data
  Format"); MRDMA's are sign-extended to 32 bits in lanes 0 .. atom/2 - 1 of the core's input
  (the lanes above unused), and the core (:class:`hdl.sdp.core.SdpCore`, its ``int16`` port)
  splits an atom into half as many element groups, computes every sub-unit, the LUT (32-bit
  input and output) and the converter as in INT8, saturates the converter's output to 16 bits
  and packs two bytes an element; compare mode keeps the low 16 bits;
* the SDP_RDMA / SDP DMAs count surfaces of ``atom_bytes // 2`` channels (hdl/sdp/rdma.py: built
  with that many channels per atom, given the channel count halved in INT8 layers), and so do
  the operand-fit checks above, the 1 x 1 x one-atom test and the on-the-fly atom counters;
* operands from memory are two bytes per element whatever DATA_SIZE says (NVIDIA's operand DMAs
  fetch two-byte elements in INT16; the model refuses ONE_BYTE), ``atom_bytes // 2`` channels per
  operand group (:class:`hdl.sdp.brdma.OperandUnpack`, :func:`hdl.sdp.brdma.operand_cube`);
* D_PERF_OUT_SATURATION and D_PERF_LUT_* count per element (a lane of the datapath beyond an
  INT16 atom's elements, when the throughput exceeds them, carries no channel and is not
  counted); D_STATUS.STATUS_UNEQUAL ORs the bytes of the written int16 elements;
* on the fly from CACC (FLYING_MODE = ON_FLYING): the model takes CACC's int32 values whatever
  the precision (only the output side differs), so ``cacc_flying`` carries one INT16 atom per
  item: surface s's channels ``e s .. e s + e - 1`` (``e`` = atom_bytes // 2) in lanes
  0 .. e - 1 (the lanes above ignored), in the same surface / line / pixel order; CACC's INT16
  is not built here, whichever unit drives the port must deliver that;
* output to PDP (OUTPUT_DST = PDP) in INT16: ``pdp_flying`` carries the packed int16 atoms as
  WDMA would write them (PDP's INT16 input on the fly is PDP's own matter, not checked here).

Only PROC_PRECISION = 1 selects INT16; OUT_PRECISION and SDP_RDMA's D_FEATURE_MODE_CFG
precisions are not read (the model refuses anything but INT16 to INT16 with SDP_RDMA agreeing).

FP16 (the same configurations, :func:`hdl.sdp.rdma.has_fp16`; built only there): a layer with
SDP D_DATA_FORMAT.PROC_PRECISION = 2 runs FP16 as the bit-exact model computes it
(verif/model/sdp.py ``SdpCore.run``, ``x_subunit_fp``, ``_y_subunit_fp``, ``sdp_lut_fp``;
:mod:`hdl.sdp.fp16` has the arithmetic and its sources):

* it has INT16's two-byte atoms: everything above about INT16's DMAs, operand groups, counts,
  the 1 x 1 x one-atom test, the on-the-fly counters and the packed output atoms holds for it
  (``is16`` below is "two-byte layer"); MRDMA's elements are fp16 patterns, CACC's on-the-fly
  items fp32 patterns in lanes 0 .. atom_bytes/2 - 1 (the lanes above ignored), widened /
  taken as fp32 by the core (``fp_cfg.in_fp32`` = FLYING_MODE), a NaN flushed to +0 with
  D_FEATURE_MODE_CFG.NAN_TO_ZERO (NV_NVDLA_SDP_cmux.v);
* BS / BN / EW operands (register or memory) are fp16 patterns, EW's register operands fp32
  patterns; the LUT reads its entries and slope scales as fp16, START / END as fp32;
* the output is fp16, or int16 with OUT_PRECISION = INT16 (the only OUT_PRECISION read); the
  CVT_* registers are not used; compare mode writes nothing as in INT8 / INT16 (the low 16 bits
  of EW's result reach WDMA, whose bytes D_STATUS.STATUS_UNEQUAL ORs);
* D_PERF_LUT_* count as in INT16 (the model's statistics); D_PERF_OUT_SATURATION counts nothing
  in FP16 layers (not settled against NVIDIA's RTL).

Multi-batch (``cfg.batch``, D_FEATURE_MODE_CFG.BATCH_NUMBER = N-1; docs/conv.md "Multi-batch"):
on the fly from CACC only (the model refuses the rest: memory input, operands from memory, output
to PDP, compare mode); CACC's atoms come batch fastest (surface, line, pixel, batch), the
on-the-fly counters count N per position, and WDMA writes batch b's atoms D_DST_BATCH_STRIDE x b
after the cube's address, a 1 x 1 cube not packed (:mod:`hdl.sdp.wdma`).

Not implemented (the registers exist and read back): Winograd, the NaN/Inf counters.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, Value, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from hdl.dma import (CUBE_DIM_BITS, ReadDma, cube_from_regs, cube_layout, one_run_if_1x1,
                     read_dma_params)
from hdl.dma.walker import log2
from hdl.regfile import raw_field, reg_word
from hdl.regmap import REGMAP
from hdl.sdp import lut
from hdl.sdp.brdma import OperandUnpack, operand_cube
from hdl.lib.fixed import sign_extend
from hdl.lib.stream import SkidBuffer
from hdl.sdp.core import SdpCore, core_lanes, wide_atom_layout
from hdl.sdp.rdma import SdpRdma, atom_layout, has_fp16, has_int16, int16_elems, sdp_dma_elems
from hdl.sdp.wdma import SdpWdma
from hdl.sdp.x import ALU_EQL
from hdl.unit import DatapathUnit, connect_dma

__all__ = ["Sdp", "SdpRdma", "SdpCore", "SdpWdma", "atom_layout"]

_SDP = REGMAP.unit("SDP")


def _reg(reg: str):
    return next(r for r in _SDP.registers if r.name == reg)


def _word(reg: str) -> int:
    """Word offset of SDP register ``reg`` on the register bus."""
    return reg_word(_SDP, reg)


def _field(regs, reg: str, field: str) -> Value:
    """Raw bits of field ``field`` of SDP register ``reg`` in a register-file ``cfg`` view."""
    return raw_field(regs, _SDP, reg, field)


def _atom_counter(m: Module, dims: list[Value], step: Value, name: str) -> Value:
    """Count ``step`` pulses over a cube of ``dims`` = (width, height, surfaces), or (batches,
    width, height, surfaces) in a multi-batch configuration, each a register value (size - 1),
    the first fastest; return a 1-bit value high on the step that takes the cube's last atom
    (the count then restarts at 0)."""
    names = "whs" if len(dims) == 3 else "bwhs"
    cnt = [Signal(len(d), name=f"{name}_{n}_cnt") for d, n in zip(dims, names)]
    last = [c == d for c, d in zip(cnt, dims)]

    def nest(k):
        m.d.sync += cnt[k].eq(Mux(last[k], 0, cnt[k] + 1))
        if k + 1 < len(dims):
            with m.If(last[k]):
                nest(k + 1)
    with m.If(step):
        nest(0)
    end = step
    for x in last:
        end = end & x
    return end


class Sdp(DatapathUnit):
    """SDP unit with its SDP_RDMA and SDP register files (port convention: :mod:`hdl.unit`).

    Ports: ``csb_sdp_rdma``/``csb_sdp`` In(:class:`hdl.regfile.RegBusSignature`) (CSB side of the
    SDP_RDMA and SDP register files); ``sdp_mrdma`` Out(DmaReadSignature) (MRDMA client);
    ``sdp_brdma`` / ``sdp_nrdma`` Out(DmaReadSignature) (X1 / X2 operand clients; idle when
    cfg.sdp_bs / cfg.sdp_bn is off);
    ``sdp_wdma`` Out(DmaWriteSignature) (WDMA client); ``done_grp`` Out(2) per-group done pulse to
    GLB; ``busy`` Out(1); ``pdp_flying`` Out(stream of :func:`atom_layout`) the output atoms
    (surface, line, column order) when OUTPUT_DST = PDP; ``pdp_done`` In(1) PDP's layer-done
    pulse (any group); ``cacc_flying`` In(stream of ArrayLayout(signed(32), cfg.memory_atomic))
    the input atoms on the fly from CACC (every configuration; idle unless connected; an INT16
    layer's atoms in lanes 0 .. atom_bytes/2 - 1, an FP16 layer's fp32 patterns there, module
    docstring);
    ``sdp_erdma`` Out(DmaReadSignature) (Y operand client) when cfg.sdp_ew.
    """

    REGISTER_FILES = ("SDP_RDMA", "SDP")
    READ_CLIENTS = ("sdp_mrdma", "sdp_brdma", "sdp_nrdma")
    WRITE_CLIENTS = ("sdp_wdma",)
    INTERRUPT = "sdp"

    def __init__(self, cfg):
        if cfg.sdp_ew and "sdp_erdma" not in self.READ_CLIENTS:
            # ERDMA (Y operands): an extra MCIF read client (hdl/dma/clients.py read_clients)
            self.READ_CLIENTS = self.READ_CLIENTS + ("sdp_erdma",)
        super().__init__(cfg)

    def extra_members(self, cfg) -> dict:
        return {"pdp_flying": Out(stream.Signature(atom_layout(cfg))), "pdp_done": In(1),
                "cacc_flying": In(stream.Signature(
                    data.ArrayLayout(signed(32), cfg.memory_atomic)))}

    @staticmethod
    def _both_absorbed(dcfg, dma_name: str, data_cube, atom: int):
        """1 when the untaken operand of a DATA_USE = BOTH fetch whose sub-unit takes the other
        one fits NVIDIA's operand DMA, so that the layer completes (issue 36 item 1): the closed
        form of the model's ``verif.model.sdp.untaken_operand_fits`` (settled on NVIDIA's
        nv_small RTL; the model's docstring has the mechanism). With A untaken atoms:
        PER_KERNEL (and a 1 x 1 PER_ELEMENT cube, one request): A = channel atoms, at most
        ``base`` + 2 when W x H = 1, + 1 when W x H is 2 or 3, + 0 beyond (``base`` 2 for
        one-byte, 1 for two-byte operands); PER_ELEMENT otherwise: A = W x H x channel atoms,
        at most 3 (two-byte operands, or an odd W) or 4. Every limit is at most 4: the counts
        are decoded one-hot up to 4 (no multiplier on the layer's start path)."""
        # counts 1..4 one-hot from the minus-one register fields (two levels of logic: a
        # multiplier here put DSP blocks on the layer's start path, 57 MHz on ECP5)
        def onehot(minus_one):
            return [minus_one == k for k in range(4)]          # count 1, 2, 3, 4
        w, h = onehot(data_cube.width), onehot(data_cube.height)
        c = onehot(data_cube.channel >> log2(atom))

        def le(x, n):                                           # count <= n (n in 1..4)
            return Cat(*x[:n]).any()
        two_byte = Value.cast(getattr(dcfg, f"{dma_name}_data_size"))
        per_element = Value.cast(getattr(dcfg, f"{dma_name}_data_mode"))
        wh1 = w[0] & h[0]
        wh_le3 = (w[0] & le(h, 3)) | (h[0] & le(w, 3))
        kern = Mux(two_byte,
                   Mux(wh1, le(c, 3), Mux(wh_le3, le(c, 2), le(c, 1))),
                   Mux(wh1, le(c, 4), Mux(wh_le3, le(c, 3), le(c, 2))))
        prod_le3 = (w[0] & h[0] & le(c, 3)) | (w[0] & c[0] & le(h, 3)) | (h[0] & c[0] & le(w, 3))
        prod_4 = ((w[0] & h[0] & c[3]) | (w[0] & c[0] & h[3]) | (h[0] & c[0] & w[3])
                  | (w[1] & h[1] & c[0]) | (w[1] & c[1] & h[0]) | (h[1] & c[1] & w[0]))
        elem = prod_le3 | (~two_byte & data_cube.width[0] & prod_4)    # W even: limit 4
        fits = Signal(name=f"{dma_name}_untaken_fits")
        m = Module()
        m.d.comb += fits.eq(Mux(per_element & ~wh1, elem, kern))
        return m, fits

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        rf_rdma = self.add_register_file(m, "SDP_RDMA")
        m.submodules.core = core = SdpCore(cfg)
        rf_sdp = self.add_register_file(m, "SDP", connect_bus=False)   # LUT port decoded below

        # ---- CSB: SDP's register file plus the LUT access port (S_LUT_ACCESS_CFG/DATA,
        # v1_ias_lut-programming.rst "automatic address incremental mechanism"; the model's
        # SdpCore.on_write, after nvdlav1 NV_NVDLA_SDP_reg.v): a write of S_LUT_ACCESS_CFG loads
        # the address, table and access type; every write of S_LUT_ACCESS_DATA stores the entry
        # when the type is WRITE and the address is inside the table, and advances the address.
        # A read of S_LUT_ACCESS_DATA (the bus's ``re`` strobe) returns the addressed entry and
        # advances the address too, whatever the access type (nvdlav1 NV_NVDLA_SDP_reg.v).
        bus = self.csb_sdp
        m.d.comb += [rf_sdp.bus.addr.eq(bus.addr), rf_sdp.bus.wdata.eq(bus.wdata),
                     rf_sdp.bus.we.eq(bus.we)]
        w_cfg, w_data, w_ptr, w_op = (_word("S_LUT_ACCESS_CFG"), _word("S_LUT_ACCESS_DATA"),
                                      _word("S_POINTER"), _word("D_OP_ENABLE"))
        f_addr, f_tab, f_typ = (_reg("S_LUT_ACCESS_CFG").field(n) for n in
                                ("LUT_ADDR", "LUT_TABLE_ID", "LUT_ACCESS_TYPE"))
        lut_addr, lut_table, lut_type = Signal(10), Signal(), Signal()
        producer = Signal()               # CSB producer group (S_POINTER.PRODUCER)
        data_we = bus.we & (bus.addr == w_data)
        op_en_write = Signal()
        m.d.comb += op_en_write.eq(bus.we & (bus.addr == w_op) &
                                   bus.wdata[_reg("D_OP_ENABLE").field("OP_EN").lsb])
        with m.If(bus.we & (bus.addr == w_cfg)):
            m.d.sync += [lut_addr.eq(bus.wdata[f_addr.lsb:f_addr.lsb + f_addr.width]),
                         lut_table.eq(bus.wdata[f_tab.lsb]), lut_type.eq(bus.wdata[f_typ.lsb])]
        with m.If(data_we | (bus.re & (bus.addr == w_data))):
            m.d.sync += lut_addr.eq(lut_addr + 1)
        with m.If(bus.we & (bus.addr == w_ptr)):
            m.d.sync += producer.eq(bus.wdata[_reg("S_POINTER").field("PRODUCER").lsb])
        m.d.comb += [core.lut_we.eq(data_we & lut_type),          # LUT_ACCESS_TYPE 1 = WRITE
                     core.lut_table.eq(lut_table), core.lut_addr.eq(lut_addr),
                     core.lut_wdata.eq(bus.wdata[:16]),
                     bus.rdata.eq(Mux(bus.addr == w_data, core.lut_rdata, rf_sdp.bus.rdata))]

        m.submodules.rdma = rdma = SdpRdma(cfg)
        m.submodules.wdma = wdma = SdpWdma(cfg)
        sc, rc = rf_sdp.cfg, rf_rdma.cfg
        # runtime INT16 (module docstring): the layer's SDP D_DATA_FORMAT.PROC_PRECISION = 1
        # selects it for the core and every DMA
        half = has_int16(cfg)
        fp = has_fp16(cfg)
        if half and not fp:
            is16 = Signal(name="int16")
            m.d.comb += [is16.eq(_field(sc, "D_DATA_FORMAT", "PROC_PRECISION") == 1),
                         core.int16.eq(is16)]
        elif fp:
            # runtime FP16 too (module docstring): FP16 layers (PROC_PRECISION = 2) have the
            # two-byte atoms of INT16 layers (``is16`` below: every DMA and count of atoms)
            prec = _field(sc, "D_DATA_FORMAT", "PROC_PRECISION")
            is16 = Signal(name="two_byte")
            m.d.comb += [is16.eq((prec == 1) | (prec == 2)), core.int16.eq(prec == 1),
                         core.fp_cfg.fp16.eq(prec == 2),
                         core.fp_cfg.nan_to_zero.eq(_field(sc, "D_FEATURE_MODE_CFG",
                                                           "NAN_TO_ZERO")),
                         core.fp_cfg.out_int16.eq(_field(sc, "D_DATA_FORMAT",
                                                         "OUT_PRECISION") == 1)]
        # input: MRDMA's int8 atoms sign-extended to 32 bits, or CACC's int32 atoms on the fly
        # (D_FEATURE_MODE_CFG.FLYING_MODE = ON_FLYING; docs/conv.md "SDP on the fly")
        flying = Signal()
        m.d.comb += flying.eq(Value.cast(sc.d_feature_mode_cfg.flying_mode))
        if fp:
            # FP16 on the fly: CACC's fp32 patterns (MRDMA's elements are fp16)
            m.d.comb += core.fp_cfg.in_fp32.eq(flying)
        # a skid buffer after MRDMA: the core's join (its ready from the other inputs' valid
        # and the configuration's enables) no longer runs combinationally into MRDMA's latency
        # FIFO and beat counter (issue 10: SDP's critical path on ECP5, 12.3 ns)
        m.submodules.mrdma_skid = mskid = SkidBuffer(atom_layout(cfg))
        wiring.connect(m, rdma.atoms, mskid.i)
        # its atoms sign-extended by wiring alone, not in a register stage of their own (issue
        # 36: a cycle of latency; the core's Split registers them next)
        ext_atom = Signal(wide_atom_layout(cfg))
        if half:
            # INT16: element j = bytes 2j, 2j + 1 (little endian, format.rst "Feature Data
            # Format") sign-extended, in lanes 0 .. atom/2 - 1 (the lanes above are unused)
            mp = mskid.o.payload
            m.d.comb += [ext_atom[k].eq(sign_extend(mp[k], cfg.bpe, 32))
                         for k in range(cfg.memory_atomic)]
            with m.If(is16):
                m.d.comb += [ext_atom[j].eq(sign_extend(Cat(mp[2 * j], mp[2 * j + 1]), 16, 32))
                             for j in range(int16_elems(cfg))]
        else:
            m.d.comb += [ext_atom[k].eq(sign_extend(mskid.o.payload[k], cfg.bpe, 32))
                         for k in range(cfg.memory_atomic)]
        cacc = self.cacc_flying
        # on the fly, SDP takes exactly its layer's atoms, and only while its layer runs: CACC
        # may offer the next layer's first atoms while this layer's last writes are in flight,
        # and those must wait for this group's completion and the next group's registers
        # (found by verif/gen/dc.py programs that reuse a group over layers)
        fly_open = Signal()
        m.d.comb += [
            core.i.valid.eq(Mux(flying, cacc.valid & fly_open, mskid.o.valid)),
            core.i.payload.eq(Mux(flying, cacc.payload.as_value(), ext_atom.as_value())),
            cacc.ready.eq(flying & fly_open & core.i.ready),
            mskid.o.ready.eq(~flying & core.i.ready),
        ]
        # converter output: WDMA, or PDP when OUTPUT_DST = PDP, or nowhere in compare mode
        # (NVIDIA's WDMA then takes every atom at once and requests nothing:
        # NV_NVDLA_SDP_WDMA_DAT_out.v dma_wr_rdy / dma_wr_req_vld with cfg_mode_quite)
        to_pdp = Signal()
        eql = Signal()          # compare mode (module docstring)
        fly = self.pdp_flying
        m.d.comb += [
            wdma.atoms.valid.eq(core.o.valid & ~to_pdp & ~eql),
            wdma.atoms.payload.eq(core.o.payload),
            fly.valid.eq(core.o.valid & to_pdp), fly.payload.eq(core.o.payload),
            core.o.ready.eq(Mux(to_pdp, fly.ready, eql | wdma.atoms.ready)),
        ]
        connect_dma(m, rdma.dma, self.sdp_mrdma, rc.d_src_dma_cfg.src_ram_type)
        connect_dma(m, wdma.dma, self.sdp_wdma, sc.d_dst_dma_cfg.dst_ram_type)

        aw = cfg.mem_address_width
        src_cube = cube_from_regs(
            rc, base="d_src_base_addr", line_stride="d_src_line_stride",
            surface_stride="d_src_surface_stride", width="d_data_cube_width",
            height="d_data_cube_height", channel="d_data_cube_channel", addr_width=aw)
        dst_cube = cube_from_regs(
            sc, base="d_dst_base_addr", line_stride="d_dst_line_stride",
            surface_stride="d_dst_surface_stride", width="d_data_cube_width",
            height="d_data_cube_height", channel="d_data_cube_channel", addr_width=aw)
        # runtime INT16: the DMAs count surfaces of int16_elems channels (hdl/sdp/rdma.py);
        # an INT8 layer gives them its channel count halved (the same surfaces), and every
        # count of channel atoms below is taken from these cubes in the same units
        walk_atom = sdp_dma_elems(cfg)
        if half:
            def walk(cube, name):
                w = Signal(cube_layout(aw), name=name)
                m.d.comb += [w.eq(cube), w.channel.eq(Mux(is16, cube.channel,
                                                          cube.channel >> 1))]
                return w
            src_cube, dst_cube = walk(src_cube, "src_walk"), walk(dst_cube, "dst_walk")
        # the data cube as the core sees it (SDP's D_DATA_CUBE_*: also when on the fly, where
        # SDP_RDMA's copy may not be programmed)
        data_cube = dst_cube
        # a 1 x 1 cube is moved as one run of atoms from the base address, whatever the surface
        # strides (NVIDIA's cfg_mode_1x1_pack: hdl.dma.cube.one_run_if_1x1); from registers
        # (a layer constant that settles a cycle after the group flips, before the DMAs start)
        src_1x1, dst_1x1 = Signal(name="src_1x1"), Signal(name="dst_1x1")
        m.d.sync += [src_1x1.eq((src_cube.width == 0) & (src_cube.height == 0)),
                     dst_1x1.eq((dst_cube.width == 0) & (dst_cube.height == 0))]
        nbm1 = Signal(5, name="batches")     # D_FEATURE_MODE_CFG.BATCH_NUMBER: batches - 1
        if cfg.batch:
            # multi-batch (docs/conv.md "Multi-batch"): CACC's atoms come batch fastest and
            # WDMA walks the N cubes so (hdl/sdp/wdma.py); a 1 x 1 cube is not packed then
            # (nvdlav1 RTL NV_NVDLA_SDP_WDMA_cmd.v: cfg_mode_1x1_nbatch = 1x1_pack & !batch)
            m.d.comb += [nbm1.eq(sc.d_feature_mode_cfg.batch_number),
                         wdma.batches.eq(nbm1),
                         wdma.batch_stride.eq(sc.d_dst_batch_stride.as_value())]
            m.d.sync += dst_1x1.eq((dst_cube.width == 0) & (dst_cube.height == 0)
                                   & (sc.d_feature_mode_cfg.batch_number == 0))
        m.d.comb += [
            rdma.cube.eq(one_run_if_1x1(src_cube, src_1x1, cfg.atom_bytes)),
            wdma.cube.eq(one_run_if_1x1(dst_cube, dst_1x1, cfg.atom_bytes)),
            # typed fields (hdl/regmap/types.py): offset and scale are signed; the identity in
            # compare mode, where NVIDIA's converter passes its input (Y already kept the low
            # bits an int8 output keeps: hdl/sdp/y.py)
            core.cvt_offset.eq(Mux(eql, 0, sc.d_cvt_offset.cvt_offset)),
            core.cvt_scale.eq(Mux(eql, 1, sc.d_cvt_scale.cvt_scale)),
            core.cvt_shift.eq(Mux(eql, 0, sc.d_cvt_shift.cvt_shift)),
        ]

        m.d.comb += to_pdp.eq(Value.cast(sc.d_feature_mode_cfg.output_dst))
        if cfg.sdp_ew:
            # NV_NVDLA_SDP_core.v cfg_mode_eql (tied to 0 without NVDLA_SDP_EW_ENABLE)
            m.d.comb += eql.eq(~_field(sc, "D_DP_EW_CFG", "EW_BYPASS")
                               & ~_field(sc, "D_DP_EW_CFG", "EW_ALU_BYPASS")
                               & (_field(sc, "D_DP_EW_CFG", "EW_ALU_ALGO") == ALU_EQL))
        # atoms PDP takes (or compare mode drops): the layer ends with the cube's last one when
        # OUTPUT_DST = PDP or in compare mode
        sink = Signal()
        m.d.comb += sink.eq(Mux(to_pdp, fly.valid & fly.ready, eql & core.o.valid))
        dims = [Signal(CUBE_DIM_BITS + 1, name=f"fly_{n}") for n in ("w", "h", "s")]
        m.d.comb += [dims[0].eq(data_cube.width), dims[1].eq(data_cube.height),
                     dims[2].eq(data_cube.channel >> log2(walk_atom))]
        if cfg.batch:           # N atoms per position, batch fastest
            dims = [nbm1] + dims
        fly_done = _atom_counter(m, dims, sink, "fly_out")
        fly_in_last = _atom_counter(m, dims, cacc.valid & cacc.ready, "fly_in")

        fly_sent = Signal()     # PDP took the last atom of this layer
        with m.If(fly_done):
            m.d.sync += fly_sent.eq(1)

        # layer control: start when both consumer groups are armed, finish on WDMA done (or
        # with PDP's layer once it took the last atom)
        # SDP_RDMA takes part unless on the fly with no operand from memory (model:
        # verif/model/nvdla.py _sdp_needs_rdma)
        mem_ops = Signal()
        m.d.comb += mem_ops.eq(core.bs_mem_en | core.bn_mem_en | core.ew_mem_en)
        # operand DMAs against what the sub-units take from memory (issue 36 item 1; the model's
        # SdpCore._check states NVIDIA's behaviour with its sources): an operand taken but not
        # fetched (DMA disabled, or DATA_USE not selecting it) never arrives: the layer is armed
        # but never started (``stuck``: nothing is read or written, the unit stays busy and the
        # player's cycle budget names it); an operand fetched that nothing takes runs the layer
        # without it (the operand DMA reads only for the sub-units that take memory operands),
        # but NVIDIA's DMA then never finishes, so SDP_RDMA's group stays armed (``wedged``)
        # and every later layer that needs SDP_RDMA never starts; with DATA_USE = BOTH and the
        # other operand taken, the layer hangs unless the untaken operand fits NVIDIA's FIFOs
        uses_rdma = Signal()
        m.d.comb += uses_rdma.eq(~flying | mem_ops)
        subs = [("bs", "brdma", core.bs_cfg, core.bs_sel.alu_mem, core.bs_sel.mul_mem)
                if cfg.sdp_bs else None,
                ("bn", "nrdma", core.bn_cfg, core.bn_sel.alu_mem, core.bn_sel.mul_mem)
                if cfg.sdp_bn else None,
                ("ew", "erdma", core.ew_cfg, core.ew_cfg.alu.mem, core.ew_cfg.mul.mem)
                if cfg.sdp_ew else None]
        # a stream of a single output (1 x 1 x one atom) reaches its cube end in the core's
        # operand packer, which keeps it (``stale_*``, the model's SdpCore.stale_ops): that DMA
        # finishes; a later untaken fetch of that operand wedges, a later layer taking it hangs
        one_out = Signal()
        m.d.comb += one_out.eq((data_cube.width == 0) & (data_cube.height == 0)
                               & (data_cube.channel < walk_atom))
        missing, wedge, overflow, stale_next = [], [], [], []
        for sub, dma_name, c, alu_src, mul_src in filter(None, subs):
            dcfg = getattr(rc, f"d_{dma_name}_cfg")
            use = Value.cast(getattr(dcfg, f"{dma_name}_data_use"))       # 0 MUL 1 ALU 2 BOTH
            dma_on = ~Value.cast(getattr(dcfg, f"{dma_name}_disable")) & uses_rdma
            alu_take = ~c.bypass & ~c.alu_bypass & alu_src
            mul_take = ~c.bypass & ~c.mul_bypass & mul_src
            fed_alu = dma_on & ((use == 1) | (use == 2))
            fed_mul = dma_on & ((use == 0) | (use == 2))
            stale_alu, stale_mul = Signal(name=f"{sub}_stale_alu"), Signal(name=f"{sub}_stale_mul")
            extra_alu, extra_mul = fed_alu & ~alu_take, fed_mul & ~mul_take
            missing.append((alu_take & (~fed_alu | stale_alu)) | (mul_take & (~fed_mul | stale_mul)))
            wedge.append((extra_alu & (~one_out | stale_alu)) | (extra_mul & (~one_out | stale_mul)))
            stale_next += [stale_alu.eq(stale_alu | (extra_alu & one_out)),
                           stale_mul.eq(stale_mul | (extra_mul & one_out))]
            fit_m, fits = self._both_absorbed(dcfg, dma_name, data_cube, walk_atom)
            m.submodules[f"{dma_name}_fit"] = fit_m
            overflow.append((use == 2) & dma_on & (alu_take ^ mul_take) & ~fits)
        wedged = Signal()       # SDP_RDMA's group of an earlier layer never completes
        # SDP_RDMA's group completes with this layer (it takes part and no fetch wedges it):
        # taken at the start from the layer's constant configuration (issue 10: the decode ran
        # on into the register file's done and every configuration register's load enable,
        # 84 MHz on ECP5)
        rdma_completes = Signal()
        stuck = Signal()
        m.d.comb += stuck.eq(Cat(*missing, *overflow).any() | (wedged & uses_rdma))
        # (compare mode: with the last atom; NVIDIA's WDMA raises the done interrupt for it
        # without write responses, NV_NVDLA_SDP_WDMA_dmaif.v intr0_internal)
        armed = self.add_layer_control(m, [rf_rdma, rf_sdp],
                                       Mux(to_pdp, fly_sent & self.pdp_done,
                                           Mux(eql, fly_done, wdma.done)),
                                       uses={"SDP_RDMA": uses_rdma},
                                       completes={"SDP_RDMA": rdma_completes})
        start = Signal()
        m.d.comb += start.eq(armed & ~stuck)
        with m.If(start):
            m.d.sync += rdma_completes.eq(uses_rdma & ~Cat(*wedge).any())
        with m.If(start & uses_rdma):
            m.d.sync += stale_next
            with m.If(Cat(*wedge).any()):
                m.d.sync += wedged.eq(1)
        with m.If(start):
            m.d.sync += fly_sent.eq(0)
        with m.If(start & flying):
            m.d.sync += fly_open.eq(1)
        with m.Elif(fly_in_last):
            m.d.sync += fly_open.eq(0)
        # the DMAs start a cycle after the layer (issue 10: the configuration's decode into
        # ``stuck`` and ``start`` ran on into every walker's load enables, SDP's critical path
        # on ECP5, 10.6 ns); the configuration holds while the layer runs
        dma_start = Signal()
        m.d.sync += dma_start.eq(start)
        m.d.comb += [rdma.start.eq(dma_start & ~flying),
                     wdma.start.eq(dma_start & ~to_pdp & ~eql)]

        # X1 (BS) / X2 (BN): configuration and register operands
        for sub in ("bs", "bn"):
            xc = getattr(core, f"{sub}_cfg")
            sel = getattr(core, f"{sub}_sel")
            dp = getattr(sc, f"d_dp_{sub}_cfg")
            alu_cfg = getattr(sc, f"d_dp_{sub}_alu_cfg")
            mul_cfg = getattr(sc, f"d_dp_{sub}_mul_cfg")

            def f(view, name, sub=sub):
                return Value.cast(getattr(view, f"{sub}_{name}"))
            m.d.comb += [
                xc.bypass.eq(f(dp, "bypass")), xc.alu_bypass.eq(f(dp, "alu_bypass")),
                xc.alu_algo.eq(f(dp, "alu_algo")), xc.mul_bypass.eq(f(dp, "mul_bypass")),
                xc.mul_prelu.eq(f(dp, "mul_prelu")), xc.relu_bypass.eq(f(dp, "relu_bypass")),
                xc.alu_shift.eq(f(alu_cfg, "alu_shift_value")),
                # NVIDIA's truncate uses MUL_SHIFT_VALUE[5:0] (verif/model/sdp.py x_subunit)
                xc.mul_shift.eq(f(mul_cfg, "mul_shift_value")[:6]),
                sel.alu_mem.eq(f(alu_cfg, "alu_src")), sel.mul_mem.eq(f(mul_cfg, "mul_src")),
                sel.alu.eq(getattr(sc, f"d_dp_{sub}_alu_src_value")[f"{sub}_alu_operand"]),
                sel.mul.eq(getattr(sc, f"d_dp_{sub}_mul_src_value")[f"{sub}_mul_operand"]),
            ]

        # Y (EW): configuration, 32-bit register operands, operand converters, LUT registers
        yc = core.ew_cfg

        def raw(reg, field):
            return _field(sc, reg, field)
        m.d.comb += [
            yc.bypass.eq(raw("D_DP_EW_CFG", "EW_BYPASS")),
            yc.alu_bypass.eq(raw("D_DP_EW_CFG", "EW_ALU_BYPASS")),
            yc.alu_algo.eq(raw("D_DP_EW_CFG", "EW_ALU_ALGO")),
            yc.mul_bypass.eq(raw("D_DP_EW_CFG", "EW_MUL_BYPASS")),
            yc.mul_prelu.eq(raw("D_DP_EW_CFG", "EW_MUL_PRELU")),
            yc.lut_bypass.eq(raw("D_DP_EW_CFG", "EW_LUT_BYPASS") | (0 if cfg.sdp_lut else 1)),
            yc.truncate.eq(raw("D_DP_EW_TRUNCATE_VALUE", "EW_TRUNCATE")),
        ]
        for k in ("ALU", "MUL"):
            oc = getattr(yc, k.lower())
            m.d.comb += [
                oc.mem.eq(raw(f"D_DP_EW_{k}_CFG", f"EW_{k}_SRC")),
                oc.cvt_bypass.eq(raw(f"D_DP_EW_{k}_CFG", f"EW_{k}_CVT_BYPASS")),
                oc.operand.eq(raw(f"D_DP_EW_{k}_SRC_VALUE", f"EW_{k}_OPERAND")),
                oc.cvt_offset.eq(raw(f"D_DP_EW_{k}_CVT_OFFSET_VALUE", f"EW_{k}_CVT_OFFSET")),
                oc.cvt_scale.eq(raw(f"D_DP_EW_{k}_CVT_SCALE_VALUE", f"EW_{k}_CVT_SCALE")),
                oc.cvt_truncate.eq(raw(f"D_DP_EW_{k}_CVT_TRUNCATE_VALUE",
                                       f"EW_{k}_CVT_TRUNCATE")),
            ]
        lp = core.lut_p
        m.d.comb += [
            lp.le_exp.eq(raw("S_LUT_CFG", "LUT_LE_FUNCTION") == 0),          # 0 = EXPONENT
            lp.le_index_offset.eq(raw("S_LUT_INFO", "LUT_LE_INDEX_OFFSET")),
            lp.le_index_select.eq(raw("S_LUT_INFO", "LUT_LE_INDEX_SELECT")),
            lp.lo_index_select.eq(raw("S_LUT_INFO", "LUT_LO_INDEX_SELECT")),
            lp.uflow_priority.eq(raw("S_LUT_CFG", "LUT_UFLOW_PRIORITY")),
            lp.oflow_priority.eq(raw("S_LUT_CFG", "LUT_OFLOW_PRIORITY")),
            lp.hybrid_priority.eq(raw("S_LUT_CFG", "LUT_HYBRID_PRIORITY")),
        ]
        for t in ("LE", "LO"):
            for which in ("START", "END"):
                m.d.comb += getattr(lp, f"{t.lower()}_{which.lower()}").eq(
                    raw(f"S_LUT_{t}_{which}", f"LUT_{t}_{which}"))
            for flow in ("UFLOW", "OFLOW"):
                m.d.comb += [
                    getattr(lp, f"{t.lower()}_{flow.lower()}_scale").eq(
                        raw(f"S_LUT_{t}_SLOPE_SCALE", f"LUT_{t}_SLOPE_{flow}_SCALE")),
                    getattr(lp, f"{t.lower()}_{flow.lower()}_shift").eq(
                        raw(f"S_LUT_{t}_SLOPE_SHIFT", f"LUT_{t}_SLOPE_{flow}_SHIFT")),
                ]

        # operand DMAs (BRDMA / NRDMA / ERDMA): read when their sub-unit takes memory operands
        for sub, dma_name in (("bs", "brdma"), ("bn", "nrdma"), ("ew", "erdma")):
            if not getattr(cfg, f"sdp_{sub}"):
                continue
            opdma = ReadDma(**dict(read_dma_params(cfg), atom_elems=walk_atom))
            # the core takes a data atom every atom / lanes cycles: when that is two or more,
            # the unpacker's output ready is a register (see OperandUnpack; an INT16 layer's
            # atoms may then come every cycle, their operand groups every other one)
            unpack = OperandUnpack(cfg.atom_bytes, cfg.memory_atomic,
                                   registered_ready=core_lanes(cfg) < cfg.memory_atomic,
                                   half=half)
            m.submodules[dma_name] = opdma
            m.submodules[f"{sub}_unpack"] = unpack
            connect_dma(m, opdma.dma, getattr(self, f"sdp_{dma_name}"),
                        getattr(getattr(rc, f"d_{dma_name}_cfg"), f"{dma_name}_ram_type"))
            wiring.connect(m, opdma.atoms, unpack.i)
            wiring.connect(m, unpack.o, getattr(core, f"{sub}_op"))
            dcfg = getattr(rc, f"d_{dma_name}_cfg")
            fmt = unpack.fmt
            # data atoms per operand group, registered: the W x H product is a layer constant
            # (it settles a cycle after the register group flips, long before the operand DMA's
            # first atom arrives) and kept out of the unpacker's counter path (issue 10)
            repeat = Signal.like(unpack.repeat, name=f"{sub}_repeat")
            m.d.sync += repeat.eq(Mux(fmt.per_element, 1,
                                      (data_cube.width + 1) * (data_cube.height + 1)))
            # the operand cube registered too (issue 10: its width arithmetic ran on into the
            # operand DMA's walker load at start, 10.3 ns); the DMAs start two cycles after the
            # register group flips at the earliest (``dma_start``), so it has settled by then
            m.d.sync += opdma.cube.eq(operand_cube(
                data_cube, fmt,
                base=Cat(getattr(rc, f"d_{sub}_base_addr_low").as_value(),
                         getattr(rc, f"d_{sub}_base_addr_high").as_value()),
                line_stride=getattr(rc, f"d_{sub}_line_stride").as_value(),
                surface_stride=getattr(rc, f"d_{sub}_surface_stride").as_value(),
                atom_bytes=cfg.atom_bytes, addr_width=aw, half=is16 if half else None))
            two_byte = Value.cast(getattr(dcfg, f"{dma_name}_data_size"))
            if half:
                # INT16 operands are two bytes whatever DATA_SIZE says: NVIDIA's nvdlav1
                # operand DMAs size their fetch for two-byte elements whenever PROC_PRECISION is
                # not INT8 (ONE_BYTE is refused by the model: SdpCore._check)
                two_byte = two_byte | is16
                m.d.comb += unpack.half.eq(is16)
            m.d.comb += [
                fmt.use.eq(Value.cast(getattr(dcfg, f"{dma_name}_data_use"))),
                fmt.two_byte.eq(two_byte),
                fmt.per_element.eq(Value.cast(getattr(dcfg, f"{dma_name}_data_mode"))),
                unpack.repeat.eq(repeat),
                # the operand DMA runs with the layer when the sub-unit reads memory operands
                opdma.start.eq(dma_start & getattr(core, f"{sub}_mem_en")),
            ]

        # ---- D_PERF_* counters (NV_NVDLA_SDP_reg.v: a group's copy takes the live counter when
        # its layer is done and clears when its OP_EN is set; the register file's status input
        # is not per group, so the CSB producer group's copy is shown, as CDP does) ----
        def per_group(name, field, live):
            """Group copies of the live value ``live`` shown in hardware field ``field``: a
            group's copy takes it when the group's layer is done and clears when its OP_EN is
            set; CSB reads see the producer group's copy."""
            grp = [Signal(len(field), name=f"{name}_g{g}") for g in range(2)]
            for g in range(2):
                with m.If(rf_sdp.done & (rf_sdp.consumer == g)):
                    m.d.sync += grp[g].eq(live)
                with m.If(op_en_write & (producer == g)):
                    m.d.sync += grp[g].eq(0)
            m.d.comb += field.eq(Mux(producer, grp[1], grp[0]))

        def perf(name, reg, enable, inc):
            """Live counter of one D_PERF_* register: cleared at the layer start (with the DMAs'
            start, a cycle later: nothing counts before it; issue 10) and adding
            ``inc`` while ``enable`` (else holding, clear included), saturating at 2**32-1."""
            cnt = Signal(32, name=f"perf_{name}")
            with m.If(enable):
                with m.If(dma_start):
                    m.d.sync += cnt.eq(0)
                with m.Elif(inc != 0):
                    nxt = cnt + inc
                    m.d.sync += cnt.eq(Mux(nxt > 0xFFFFFFFF, 0xFFFFFFFF, nxt))
            per_group(f"perf_{name}", getattr(rf_sdp.hw, reg).as_value(), cnt)

        # D_STATUS.STATUS_UNEQUAL (module docstring; NV_NVDLA_SDP_WDMA_DAT_out.v
        # dp2reg_status_unequal): OR of every byte of the atoms WDMA takes (written, or dropped
        # in compare mode), cleared at the layer start (``dma_start``); the group copy is loaded
        # with the value including the atom taken in the done cycle (compare mode ends on its
        # last atom)
        unequal = Signal()
        took = Signal()
        m.d.comb += took.eq(core.o.valid & core.o.ready & ~to_pdp
                            & (core.o.payload.as_value() != 0))
        with m.If(dma_start):
            m.d.sync += unequal.eq(0)
        with m.Elif(took):
            m.d.sync += unequal.eq(1)
        per_group("status_unequal", Value.cast(rf_sdp.hw.d_status.status_unequal),
                  unequal | took)

        # LUT statistics (verif/model/sdp.py _latch_lut_stats; nvdlav1 NV_NVDLA_SDP_CORE_Y_lut.v):
        # every LUT sample of the layer while D_PERF_ENABLE.PERF_LUT_EN
        lut_en = raw("D_PERF_ENABLE", "PERF_LUT_EN")
        for k, name in enumerate(lut.STAT_NAMES):
            perf(f"lut_{name}", f"d_perf_lut_{name}", lut_en, core.stat_counts[k])
        # output saturation (NV_NVDLA_SDP_core.v "PERF STATISTIC: SATURATION"): converter
        # outputs whose 17-bit truncation saturated, while PERF_SAT_EN
        perf("out_saturation", "d_perf_out_saturation", raw("D_PERF_ENABLE", "PERF_SAT_EN"),
             core.sat_count)
        # WDMA stall (NV_NVDLA_SDP_WDMA_intr.v: cycles with a write request not accepted, while
        # the layer runs with PERF_DMA_EN): here a burst request or a data beat MCIF does not take
        wr = self.sdp_wdma
        stall = Signal()
        m.d.comb += stall.eq((wr.req.valid & ~wr.req.ready) | (wr.data.valid & ~wr.data.ready))
        perf("wdma_stall", "d_perf_wdma_write_stall",
             raw("D_PERF_ENABLE", "PERF_DMA_EN") & (self.busy | start), stall)
        return m
