"""CDP: cross-channel data processor (LRN), memory to memory (v1_ias_unit_description.rst "Cross
Channel Data Processor", v1_ias_programming_guide.rst "CDP", v1_ias_lut-programming.rst).

Hardware layer = CDP_RDMA (:class:`hdl.cdp.dma.CdpReadDma`, line / group of positions / surface /
position order, groups of up to one burst window) ->
:class:`hdl.cdp.core.CdpCore` (input converter, LRN square sum, two-table LUT, multiplier,
output converter; INT8, and INT16 / FP16 cores beside it below) -> CDP WDMA
(:class:`hdl.cdp.dma.CdpWriteDma`, same order). CDP_RDMA and CDP keep separate register files
and ping-pong pointers; a layer starts when the consumer groups of both are enabled and
completes when the WDMA has every write response; both register files then see ``done`` and
CDP's per-group done pulse goes to GLB (S_INTR_STATUS.CDP_DONE_STATUS<g>).

LUT access port (NVIDIA nv_small NV_NVDLA_CDP_reg.v, facts only; also verif/model/lut.py): a
write of S_LUT_ACCESS_CFG loads the access address, table and type; a write of
S_LUT_ACCESS_DATA with ACCESS_TYPE=WRITE stores the entry and advances the address, which stays
on the table's last entry. The register file (hdl/regfile.py) has no hooks for this, so the unit
decodes the CSB register bus (``csb_cdp``: addr/wdata/we) in parallel with the register file
and drives the read data of S_LUT_ACCESS_CFG (live address/table/type) and S_LUT_ACCESS_DATA
(the addressed entry) itself. A CSB read of S_LUT_ACCESS_DATA (the bus's ``re`` strobe) with
ACCESS_TYPE=READ returns the entry and advances the address the same way.

LUT statistics (D_PERF_LUT_UFLOW/OFLOW/HYBRID/LE_HIT/LO_HIT) count every element of a layer
(saturating at 2**32-1) and are latched into the register group that completed, at the end of the
layer (NV_NVDLA_CDP_DP_intp.v; not gated by D_PERF_ENABLE). The register file's status input is
not per group, so the unit keeps both groups' values and shows the one of the CSB producer group
(S_POINTER.PRODUCER, tracked from the same bus). D_OUT_SATURATION (without fp16) and the NaN/Inf
counters read 0 (NVIDIA's nv_small ties them to 0). D_PERF_WRITE_STALL counts the cycles the WDMA's write
request to MCIF was stalled while D_PERF_ENABLE.DMA_EN; CDP_RDMA's D_PERF_READ_STALL counts the
cycles CDP_RDMA's read request waited for MCIF while CDP_RDMA's D_PERF_ENABLE.DMA_EN; both on
32-bit wrapping counters that are never cleared (:func:`hdl.unit.perf_stall_counter`, as PDP's).

INT16 and FP16 (a configuration whose ``cfg.precisions`` include them, e.g.
``nv_full+feature_data_type=int8_int16_fp16``): a second :class:`hdl.cdp.core.CdpCore` at
:data:`hdl.cdp.core.INT16` (``core_int16``: 16-bit data, 17-bit x, 37-bit square sum, START[37:0],
INDEX_SELECT[6:0], DATOUT_OFFSET[31:0], 50-bit output product, int16 outputs; widths of NVIDIA's
nv_full RTL as recorded in verif/model/cdp.py ``WIDTHS``) and
:class:`hdl.cdp.core_fp16.CdpFp16Core` (``core_fp16``) sit beside the INT8 CdpCore. CDP's
D_DATA_FORMAT.INPUT_DATA_TYPE routes a layer: 1 to the INT16 core, 2 to the FP16 core, any
other value (0, and the undefined 3) to the INT8 core (CDP's field is used, not CDP_RDMA's
D_DATA_FORMAT.INPUT_DATA, which the model requires to be equal). A 16-bit type (1 or 2) also makes
both DMA walkers count ``atom_elems // 2`` channels per atom (whole atoms are read and written,
as the model's read_cube/write_cube with elem_bytes 2), so the read and write sides always
agree on the number of atoms; INT16 element k of an atom is in bytes 2k (low) and 2k+1. The
INT16 core takes the INT8 core's parameters except INDEX_SELECT (7 bits instead of 6). The LUT
access port writes every core's tables with the same 16-bit entries (the model keeps one
LutStorage for every precision) and reads the INT8 CdpCore's copy back. The LUT statistics come
from the core of the running layer (INT16: the model's counts over every element, invalid lanes
included; NVIDIA's nv_full RTL was observed to give another D_PERF_LUT_HYBRID in INT16,
verif/model/cdp.py's docstring: not settled, the model's is implemented). D_OUT_SATURATION
counts the FP16 core's outputs of magnitude 0x7BFF, latched into the completed group at the end
of an FP16 layer only: an INT8 or INT16 layer leaves it unchanged, as the model (its INT
statistics have no OUT_SATURATION). Without int16/fp16 the unit is INT8 only (nv_small's data
type) and D_OUT_SATURATION reads 0.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import wiring

from hdl.cdp import lut
from hdl.cdp.core import INT16, CdpCore, params_layout
from hdl.cdp.core_fp16 import CdpFp16Core
from hdl.cdp.dma import CdpReadDma, CdpWalker, CdpWriteDma, group_of
from hdl.dma import atom_layout, cube_from_regs, cube_layout, read_dma_params, write_dma_params
from hdl.regfile import raw_field, reg_word
from hdl.regmap import REGMAP
from hdl.unit import DatapathUnit, connect_dma, rdma_read_stall, wdma_write_stall

__all__ = ["Cdp", "CdpCore", "CdpReadDma", "CdpWriteDma", "CdpWalker"]

_CDP = REGMAP.unit("CDP")


def _word(reg: str) -> int:
    """Word offset of CDP register ``reg`` on the register bus."""
    return reg_word(_CDP, reg)


def _field(regs, reg: str, field: str) -> Value:
    """Raw bits of field ``field`` of CDP register ``reg`` in a register-file ``cfg`` view."""
    return raw_field(regs, _CDP, reg, field)


class Cdp(DatapathUnit):
    """CDP unit with its CDP_RDMA and CDP register files (port convention: :mod:`hdl.unit`).

    Ports: ``csb_cdp_rdma``/``csb_cdp`` In(:class:`hdl.regfile.RegBusSignature`);
    ``cdp_rdma`` Out(DmaReadSignature); ``cdp_wdma`` Out(DmaWriteSignature); ``done_grp``
    Out(2); ``busy`` Out(1).
    """

    REGISTER_FILES = ("CDP_RDMA", "CDP")
    READ_CLIENTS = ("cdp_rdma",)
    WRITE_CLIENTS = ("cdp_wdma",)
    INTERRUPT = "cdp"

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        rf_rdma = self.add_register_file(m, "CDP_RDMA")
        rf = self.add_register_file(m, "CDP", connect_bus=False)   # LUT port decoded below

        int16 = "int16" in cfg.precisions
        fp16 = "fp16" in cfg.precisions
        half = {"half": True} if int16 or fp16 else {}
        m.submodules.rdma = rdma = CdpReadDma(**read_dma_params(cfg), atom_shape=atom_layout(cfg),
                                              **half)
        m.submodules.core = core = CdpCore(cfg)
        m.submodules.wdma = wdma = CdpWriteDma(**write_dma_params(cfg),
                                               atom_shape=atom_layout(cfg), **half)
        if not half:
            wiring.connect(m, rdma.atoms, core.i)
            wiring.connect(m, core.o, wdma.atoms)
            cores = [core]
        else:
            # INT16 layers (CDP.D_DATA_FORMAT.INPUT_DATA_TYPE = 1) through CdpCore at INT16,
            # FP16 ones (2) through CdpFp16Core, the others through CdpCore (INT8); 16-bit
            # elements (INT16 or FP16) also size both DMAs
            dtype = rf.cfg.d_data_format.input_data_type.as_value()
            is_int16, is_fp16 = Signal(), Signal()
            m.d.comb += [is_int16.eq(int16 & (dtype == INT16.code)),
                         is_fp16.eq(fp16 & (dtype == 2)),
                         rdma.half.eq(is_int16 | is_fp16), wdma.half.eq(is_int16 | is_fp16)]
            routes = [(core, ~(is_int16 | is_fp16))]
            if int16:
                m.submodules.core_int16 = core_i16 = CdpCore(cfg, INT16)
                routes.append((core_i16, is_int16))
            if fp16:
                m.submodules.core_fp16 = core16 = CdpFp16Core(cfg)
                routes.append((core16, is_fp16))
            cores = [cr for cr, _ in routes]
            ready, payload, valid = core.i.ready, core.o.payload.as_value(), core.o.valid
            for cr, sel in routes:
                m.d.comb += [cr.i.payload.eq(rdma.atoms.payload),
                             cr.i.valid.eq(rdma.atoms.valid & sel),
                             cr.o.ready.eq(wdma.atoms.ready & sel)]
                if cr is not core:
                    ready = Mux(sel, cr.i.ready, ready)
                    payload = Mux(sel, cr.o.payload.as_value(), payload)
                    valid = Mux(sel, cr.o.valid, valid)
            m.d.comb += [rdma.atoms.ready.eq(ready), wdma.atoms.payload.eq(payload),
                         wdma.atoms.valid.eq(valid)]
        connect_dma(m, rdma.dma, self.cdp_rdma, rf_rdma.cfg.d_src_dma_cfg.src_ram_type)
        connect_dma(m, wdma.dma, self.cdp_wdma, rf.cfg.d_dst_dma_cfg.dst_ram_type)

        # ---- CSB: register file plus the LUT access port and the producer pointer ----
        bus = self.csb_cdp
        m.d.comb += [rf.bus.addr.eq(bus.addr), rf.bus.wdata.eq(bus.wdata), rf.bus.we.eq(bus.we)]
        w_cfg, w_data, w_ptr = (_word("S_LUT_ACCESS_CFG"), _word("S_LUT_ACCESS_DATA"),
                                _word("S_POINTER"))
        acc = next(r for r in _CDP.registers if r.name == "S_LUT_ACCESS_CFG")
        f_addr, f_tab, f_typ = (acc.field("LUT_ADDR"), acc.field("LUT_TABLE_ID"),
                                acc.field("LUT_ACCESS_TYPE"))
        ptr = next(r for r in _CDP.registers if r.name == "S_POINTER")
        lut_addr, lut_table, lut_type = Signal(10), Signal(), Signal()
        producer = Signal()
        access_write = 1                                  # LUT_ACCESS_TYPE WRITE
        data_we = bus.we & (bus.addr == w_data)
        table_last = Mux(lut_table, lut.LO_ENTRIES - 1, lut.LE_ENTRIES - 1)
        with m.If(bus.we & (bus.addr == w_cfg)):
            m.d.sync += [lut_addr.eq(bus.wdata[f_addr.lsb:f_addr.lsb + f_addr.width]),
                         lut_table.eq(bus.wdata[f_tab.lsb]), lut_type.eq(bus.wdata[f_typ.lsb])]
        data_re = bus.re & (bus.addr == w_data)
        with m.If(((data_we & (lut_type == access_write)) | (data_re & (lut_type != access_write)))
                  & (lut_addr != table_last)):
            m.d.sync += lut_addr.eq(lut_addr + 1)
        with m.If(bus.we & (bus.addr == w_ptr)):
            m.d.sync += producer.eq(bus.wdata[ptr.field("PRODUCER").lsb])
        # the LUT access port writes every core's tables with the same 16-bit entries (the
        # model's one LutStorage of all precisions) and reads back CdpCore's
        for cr in cores:
            m.d.comb += [cr.lut_we.eq(data_we & (lut_type == access_write)),
                         cr.lut_table.eq(lut_table), cr.lut_addr.eq(lut_addr),
                         cr.lut_wdata.eq(bus.wdata[:16])]
        cfg_read = (lut_addr << f_addr.lsb) | (lut_table << f_tab.lsb) | (lut_type << f_typ.lsb)
        m.d.comb += bus.rdata.eq(Mux(bus.addr == w_cfg, cfg_read,
                                     Mux(bus.addr == w_data, core.lut_rdata, rf.bus.rdata)))

        # ---- geometry and parameters (consumer groups) ----
        aw = cfg.mem_address_width
        rc, c = rf_rdma.cfg, rf.cfg
        dst_cube = Signal(cube_layout(aw))
        m.d.comb += [
            dst_cube.base.eq(Cat(c.d_dst_base_addr_low.as_value(),
                                 c.d_dst_base_addr_high.as_value())[:aw]),
            dst_cube.line_stride.eq(c.d_dst_line_stride.as_value()),
            dst_cube.surface_stride.eq(c.d_dst_surface_stride.as_value()),
            dst_cube.width.eq(rc.d_data_cube_width.as_value()),
            dst_cube.height.eq(rc.d_data_cube_height.as_value()),
            dst_cube.channel.eq(rc.d_data_cube_channel.as_value()),
        ]
        m.d.comb += [
            rdma.cube.eq(cube_from_regs(
                rc, base="d_src_base_addr", line_stride="d_src_line_stride",
                surface_stride="d_src_surface_stride", width="d_data_cube_width",
                height="d_data_cube_height", channel="d_data_cube_channel", addr_width=aw)),
            # CDP has no cube size registers of its own: CDP_RDMA's D_DATA_CUBE_*
            wdma.cube.eq(dst_cube),
            # the WDMA and the core cut the read cube's groups of positions (hdl/cdp/dma.py)
            wdma.group.eq(group_of(rdma.cube)),
        ]
        p = core.p
        f = lambda reg, fld: _field(c, reg, fld)          # noqa: E731
        lp = p.lut
        m.d.comb += [
            p.channel.eq(rc.d_data_cube_channel.as_value()[:13]),
            p.width.eq(rdma.cube.width), p.height.eq(rdma.cube.height),
            p.group.eq(group_of(rdma.cube)),
            p.datin_offset.eq(f("D_DATIN_OFFSET", "DATIN_OFFSET")),
            p.datin_scale.eq(f("D_DATIN_SCALE", "DATIN_SCALE")),
            p.datin_shifter.eq(f("D_DATIN_SHIFTER", "DATIN_SHIFTER")),
            p.datout_offset.eq(f("D_DATOUT_OFFSET", "DATOUT_OFFSET")),
            p.datout_scale.eq(f("D_DATOUT_SCALE", "DATOUT_SCALE")),
            p.datout_shifter.eq(f("D_DATOUT_SHIFTER", "DATOUT_SHIFTER")),
            p.normalz_len.eq(f("D_LRN_CFG", "NORMALZ_LEN")),
            p.sqsum_bypass.eq(f("D_FUNC_BYPASS", "SQSUM_BYPASS")),
            p.mul_bypass.eq(f("D_FUNC_BYPASS", "MUL_BYPASS")),
            lp.le_exp.eq(f("S_LUT_CFG", "LUT_LE_FUNCTION") == 0),
            lp.le_index_offset.eq(f("S_LUT_INFO", "LUT_LE_INDEX_OFFSET")),
            lp.le_index_select.eq(f("S_LUT_INFO", "LUT_LE_INDEX_SELECT")[:6]),
            lp.lo_index_select.eq(f("S_LUT_INFO", "LUT_LO_INDEX_SELECT")[:6]),
            lp.uflow_priority.eq(f("S_LUT_CFG", "LUT_UFLOW_PRIORITY")),
            lp.oflow_priority.eq(f("S_LUT_CFG", "LUT_OFLOW_PRIORITY")),
            lp.hybrid_priority.eq(f("S_LUT_CFG", "LUT_HYBRID_PRIORITY")),
        ]
        for t in ("LE", "LO"):
            for which in ("START", "END"):
                lo_bits = f(f"S_LUT_{t}_{which}_LOW", f"LUT_{t}_{which}_LOW")
                hi_bits = f(f"S_LUT_{t}_{which}_HIGH", f"LUT_{t}_{which}_HIGH")
                m.d.comb += getattr(lp, f"{t.lower()}_{which.lower()}").eq(
                    Cat(lo_bits, hi_bits).as_signed())
            for flow in ("UFLOW", "OFLOW"):
                m.d.comb += [
                    getattr(lp, f"{t.lower()}_{flow.lower()}_scale").eq(
                        f(f"S_LUT_{t}_SLOPE_SCALE", f"LUT_{t}_SLOPE_{flow}_SCALE")),
                    getattr(lp, f"{t.lower()}_{flow.lower()}_shift").eq(
                        f(f"S_LUT_{t}_SLOPE_SHIFT", f"LUT_{t}_SLOPE_{flow}_SHIFT")),
                ]

        if int16:
            # CdpCore at INT16: the same fields, INDEX_SELECT[6:0] (hdl/cdp/core.py INT16)
            pi, lpi = core_i16.p, core_i16.p.lut
            m.d.comb += [pi[name].eq(p[name]) for name, _ in params_layout() if name != "lut"]
            m.d.comb += [lpi[name].eq(lp[name]) for name, _ in lut.params_layout()
                         if name not in ("le_index_select", "lo_index_select")]
            m.d.comb += [
                lpi.le_index_select.eq(f("S_LUT_INFO", "LUT_LE_INDEX_SELECT")[:INT16.select_bits]),
                lpi.lo_index_select.eq(f("S_LUT_INFO", "LUT_LO_INDEX_SELECT")[:INT16.select_bits]),
            ]

        if fp16:
            # CdpFp16Core's parameters (hdl/cdp/core_fp16.py params_layout): START/END the
            # _LOW words as fp32, INDEX_SELECT all 8 bits, slope scales fp16 (shifts unused)
            p16, lp16 = core16.p, core16.p.lut
            m.d.comb += [
                p16.channel.eq(p.channel), p16.width.eq(p.width), p16.height.eq(p.height),
                p16.group.eq(p.group), p16.normalz_len.eq(p.normalz_len),
                p16.sqsum_bypass.eq(p.sqsum_bypass), p16.mul_bypass.eq(p.mul_bypass),
                p16.nan_to_zero.eq(f("D_NAN_FLUSH_TO_ZERO", "NAN_TO_ZERO")),
                lp16.le_exp.eq(lp.le_exp), lp16.le_index_offset.eq(lp.le_index_offset),
                lp16.le_index_select.eq(f("S_LUT_INFO", "LUT_LE_INDEX_SELECT")),
                lp16.lo_index_select.eq(f("S_LUT_INFO", "LUT_LO_INDEX_SELECT")),
                lp16.uflow_priority.eq(lp.uflow_priority),
                lp16.oflow_priority.eq(lp.oflow_priority),
                lp16.hybrid_priority.eq(lp.hybrid_priority),
            ]
            for t in ("LE", "LO"):
                for which in ("START", "END"):
                    m.d.comb += getattr(lp16, f"{t.lower()}_{which.lower()}").eq(
                        f(f"S_LUT_{t}_{which}_LOW", f"LUT_{t}_{which}_LOW"))
                for flow in ("UFLOW", "OFLOW"):
                    m.d.comb += getattr(lp16, f"{t.lower()}_{flow.lower()}_scale").eq(
                        f(f"S_LUT_{t}_SLOPE_SCALE", f"LUT_{t}_SLOPE_{flow}_SCALE"))

        # ---- layer control ----
        start = self.add_layer_control(m, [rf_rdma, rf], wdma.done)
        m.d.comb += [rdma.start.eq(start), wdma.start.eq(start)]

        # ---- LUT statistics: counted in the layer, latched into the completed group ----
        for k, name in enumerate(lut.STAT_NAMES):
            cnt = Signal(33, name=f"cnt_{name}")
            inc = core.stat_counts[k]
            if int16:
                inc = Mux(is_int16, core_i16.stat_counts[k], inc)
            if fp16:
                inc = Mux(is_fp16, core16.stat_counts[k], inc)
            with m.If(start):
                m.d.sync += cnt.eq(0)
            with m.Elif(inc != 0):
                nxt = cnt + inc
                m.d.sync += cnt.eq(Mux(nxt > 0xFFFFFFFF, 0xFFFFFFFF, nxt))
            grp = [Signal(32, name=f"{name}_g{g}") for g in range(2)]
            for g in range(2):
                with m.If(wdma.done & (rf.consumer == g)):
                    m.d.sync += grp[g].eq(cnt)
            reg = f"d_perf_lut_{name}"
            m.d.comb += getattr(rf.hw, reg).as_value().eq(Mux(producer, grp[1], grp[0]))

        if fp16:
            # ---- D_OUT_SATURATION: FP16 outputs of magnitude 0x7BFF (CdpFp16Core), counted
            # as the LUT statistics, latched into the completed group at the end of an FP16
            # layer only (the model updates it only after FP16 layers: verif/model/cdp.py
            # CdpCore.run writes the fields of the layer's statistics, and cdp_compute's INT8 /
            # INT16 statistics have no OUT_SATURATION, so an INT8 or INT16 layer leaves the
            # group's value as it was) ----
            sat = Signal(33)
            sat_fp16 = Signal()                # the running layer is FP16 (latched at start)
            with m.If(start):
                m.d.sync += [sat.eq(0), sat_fp16.eq(is_fp16)]
            with m.Elif(core16.sat_count != 0):
                nxt = sat + core16.sat_count
                m.d.sync += sat.eq(Mux(nxt > 0xFFFFFFFF, 0xFFFFFFFF, nxt))
            sat_grp = [Signal(32, name=f"out_saturation_g{g}") for g in range(2)]
            for g in range(2):
                with m.If(wdma.done & (rf.consumer == g) & sat_fp16):
                    m.d.sync += sat_grp[g].eq(sat)
            m.d.comb += rf.hw.d_out_saturation.as_value().eq(
                Mux(producer, sat_grp[1], sat_grp[0]))

        # ---- D_PERF_WRITE_STALL (D_PERF_ENABLE.DMA_EN), as PDP's (hdl/pdp/__init__.py) ----
        # nv_small NV_NVDLA_CDP_wdma.v (facts only): cycles in which the consumer group's
        # DMA_EN is set and the WDMA's one DMA write request (command or data) is valid but not
        # accepted, on a 32-bit wrapping counter whose clear (the last data beat accepted) never
        # acts (it only acts in a stalled cycle): cumulative from reset; copied at the last data
        # beat into the group that ran (a per-layer toggle, equal to the consumer pointer).
        wdma_write_stall(m, "CDP", rf, bus, self.cdp_wdma)

        # ---- CDP_RDMA D_PERF_READ_STALL (CDP_RDMA's D_PERF_ENABLE.DMA_EN) ----
        # nv_small NV_NVDLA_CDP_RDMA_ig.v, the same counter as PDP_RDMA's (hdl/pdp/__init__.py):
        # stalled read-request cycles while DMA_EN of CDP_RDMA's running group, 32 bits,
        # wrapping, never cleared (its clear only acts in a stalled cycle, which never is the
        # cycle the cube's last request is accepted), copied into the running group's
        # D_PERF_READ_STALL at the end of the cube's requests (here: at the layer's done, the
        # same value); CSB reads see CDP_RDMA's producer group.
        rdma_read_stall(m, "CDP_RDMA", rf_rdma, self.csb_cdp_rdma, self.cdp_rdma.req)
        return m
