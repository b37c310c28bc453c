"""SDP: single data point processor, memory-to-memory mode (v1_ias_unit_description.rst "SDP").

Hardware layer = SDP_RDMA MRDMA (+ BRDMA / NRDMA operands) -> SDP core (X1 BS, X2 BN, output
converter; :mod:`hdl.sdp.core`) -> SDP WDMA, joined by ``amaranth.lib.stream`` interfaces.
SDP_RDMA and SDP keep separate register files and ping-pong pointers (v1_hwarch.rst "Ping-pong synchronization"); a layer starts when the consumer
groups of both are enabled (D_OP_ENABLE) and completes when WDMA has all write responses; then
both register files see ``done`` and SDP's per-group done pulse goes to GLB
(S_INTR_STATUS.SDP_DONE_STATUS<g>).

BRDMA / NRDMA (:mod:`hdl.sdp.brdma`) read the X1 / X2 operands when a non-bypassed ALU or
multiplier takes them from memory (D_DP_<X>_ALU/MUL_CFG SRC = MEM); they start with the layer.

Output to PDP (D_FEATURE_MODE_CFG.OUTPUT_DST = PDP, programming guide "PDP" on-the-fly): the
converter's atoms go out on ``pdp_flying`` (hdl/top.py connects it to PDP's) instead of WDMA,
which stays idle (the numpy model writes nothing to memory then). The layer is done when PDP has
taken the cube's last atom and PDP's layer is done (``pdp_done``): verif/model/nvdla.py completes
the fused SDP->PDP layer's groups together, SDP's interrupt status bit with PDP's, so that
software sees both in one S_INTR_STATUS read.

Not implemented yet (the registers exist and read back): EW (Y) ALU/multiplier/LUT, ERDMA,
flying mode (input from CACC), batches, int16/fp16.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from hdl.dma import CUBE_DIM_BITS, ReadDma, cube_from_regs, read_dma_params
from hdl.dma.walker import log2
from hdl.sdp.brdma import OperandUnpack, operand_cube
from hdl.sdp.core import SdpCore
from hdl.sdp.rdma import SdpRdma, atom_layout
from hdl.sdp.wdma import SdpWdma
from hdl.unit import DatapathUnit

__all__ = ["Sdp", "SdpRdma", "SdpCore", "SdpWdma", "atom_layout"]


class Sdp(DatapathUnit):
    """SDP unit with its SDP_RDMA and SDP register files (port convention: :mod:`hdl.unit`).

    Ports: ``csb_sdp_rdma``/``csb_sdp`` In(:class:`hdl.regfile.RegBusSignature`) (CSB side of the
    SDP_RDMA and SDP register files); ``sdp_mrdma`` Out(DmaReadSignature) (MRDMA client);
    ``sdp_brdma`` / ``sdp_nrdma`` Out(DmaReadSignature) (X1 / X2 operand clients; idle when
    cfg.sdp_bs / cfg.sdp_bn is off);
    ``sdp_wdma`` Out(DmaWriteSignature) (WDMA client); ``done_grp`` Out(2) per-group done pulse to
    GLB; ``busy`` Out(1); ``pdp_flying`` Out(stream of :func:`atom_layout`) the output atoms
    (surface, line, column order) when OUTPUT_DST = PDP; ``pdp_done`` In(1) PDP's layer-done
    pulse (any group).
    """

    REGISTER_FILES = ("SDP_RDMA", "SDP")
    READ_CLIENTS = ("sdp_mrdma", "sdp_brdma", "sdp_nrdma")
    WRITE_CLIENTS = ("sdp_wdma",)
    INTERRUPT = "sdp"

    def extra_members(self, cfg) -> dict:
        return {"pdp_flying": Out(stream.Signature(atom_layout(cfg))), "pdp_done": In(1)}

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        rf_rdma = self.add_register_file(m, "SDP_RDMA")
        rf_sdp = self.add_register_file(m, "SDP")

        m.submodules.rdma = rdma = SdpRdma(cfg)
        m.submodules.core = core = SdpCore(cfg)
        m.submodules.wdma = wdma = SdpWdma(cfg)
        wiring.connect(m, rdma.atoms, core.i)
        # converter output: WDMA, or PDP when OUTPUT_DST = PDP
        to_pdp = Signal()
        fly = self.pdp_flying
        m.d.comb += [
            wdma.atoms.valid.eq(core.o.valid & ~to_pdp), wdma.atoms.payload.eq(core.o.payload),
            fly.valid.eq(core.o.valid & to_pdp), fly.payload.eq(core.o.payload),
            core.o.ready.eq(Mux(to_pdp, fly.ready, wdma.atoms.ready)),
        ]
        wiring.connect(m, rdma.dma, wiring.flipped(self.sdp_mrdma))
        wiring.connect(m, wdma.dma, wiring.flipped(self.sdp_wdma))

        aw = cfg.mem_address_width
        sc, rc = rf_sdp.cfg, rf_rdma.cfg
        src_cube = cube_from_regs(
            rc, base="d_src_base_addr", line_stride="d_src_line_stride",
            surface_stride="d_src_surface_stride", width="d_data_cube_width",
            height="d_data_cube_height", channel="d_data_cube_channel", addr_width=aw)
        m.d.comb += [
            rdma.cube.eq(src_cube),
            wdma.cube.eq(cube_from_regs(
                sc, base="d_dst_base_addr", line_stride="d_dst_line_stride",
                surface_stride="d_dst_surface_stride", width="d_data_cube_width",
                height="d_data_cube_height", channel="d_data_cube_channel", addr_width=aw)),
            # typed fields (hdl/regmap/types.py): offset and scale are signed
            core.cvt_offset.eq(sc.d_cvt_offset.cvt_offset),
            core.cvt_scale.eq(sc.d_cvt_scale.cvt_scale),
            core.cvt_shift.eq(sc.d_cvt_shift.cvt_shift),
        ]

        m.d.comb += to_pdp.eq(Value.cast(sc.d_feature_mode_cfg.output_dst))
        # atoms PDP takes: the layer ends with the cube's last one when OUTPUT_DST = PDP
        dims = [Signal(CUBE_DIM_BITS + 1, name=f"fly_{n}") for n in ("w", "h", "s")]
        cnt = [Signal(CUBE_DIM_BITS + 1, name=f"fly_{n}_cnt") for n in ("w", "h", "s")]
        m.d.comb += [dims[0].eq(src_cube.width), dims[1].eq(src_cube.height),
                     dims[2].eq(src_cube.channel >> log2(cfg.memory_atomic))]
        last = [c == d for c, d in zip(cnt, dims)]
        fly_done = Signal()
        m.d.comb += fly_done.eq(fly.valid & fly.ready & last[0] & last[1] & last[2])
        with m.If(fly.valid & fly.ready):
            m.d.sync += cnt[0].eq(Mux(last[0], 0, cnt[0] + 1))
            with m.If(last[0]):
                m.d.sync += cnt[1].eq(Mux(last[1], 0, cnt[1] + 1))
                with m.If(last[1]):
                    m.d.sync += cnt[2].eq(Mux(last[2], 0, cnt[2] + 1))

        fly_sent = Signal()     # PDP took the last atom of this layer
        with m.If(fly_done):
            m.d.sync += fly_sent.eq(1)

        # layer control: start when both consumer groups are armed, finish on WDMA done (or
        # with PDP's layer once it took the last atom)
        start = self.add_layer_control(m, [rf_rdma, rf_sdp],
                                       Mux(to_pdp, fly_sent & self.pdp_done, wdma.done))
        with m.If(start):
            m.d.sync += fly_sent.eq(0)
        m.d.comb += [rdma.start.eq(start), wdma.start.eq(start & ~to_pdp)]

        # X1 (BS) / X2 (BN): configuration, register operands, operand DMAs (BRDMA / NRDMA)
        for sub, dma_name in (("bs", "brdma"), ("bn", "nrdma")):
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
            if not getattr(cfg, f"sdp_{sub}"):
                continue
            opdma = ReadDma(**read_dma_params(cfg))
            unpack = OperandUnpack(cfg.atom_bytes, cfg.memory_atomic)
            m.submodules[dma_name] = opdma
            m.submodules[f"{sub}_unpack"] = unpack
            wiring.connect(m, opdma.dma, wiring.flipped(getattr(self, f"sdp_{dma_name}")))
            wiring.connect(m, opdma.atoms, unpack.i)
            wiring.connect(m, unpack.o, getattr(core, f"{sub}_op"))
            dcfg = getattr(rc, f"d_{dma_name}_cfg")
            fmt = unpack.fmt
            m.d.comb += [
                fmt.use.eq(Value.cast(getattr(dcfg, f"{dma_name}_data_use"))),
                fmt.two_byte.eq(Value.cast(getattr(dcfg, f"{dma_name}_data_size"))),
                fmt.per_element.eq(Value.cast(getattr(dcfg, f"{dma_name}_data_mode"))),
                unpack.repeat.eq(Mux(fmt.per_element, 1,
                                     (src_cube.width + 1) * (src_cube.height + 1))),
                opdma.cube.eq(operand_cube(
                    src_cube, fmt,
                    base=Cat(getattr(rc, f"d_{sub}_base_addr_low").as_value(),
                             getattr(rc, f"d_{sub}_base_addr_high").as_value()),
                    line_stride=getattr(rc, f"d_{sub}_line_stride").as_value(),
                    surface_stride=getattr(rc, f"d_{sub}_surface_stride").as_value(),
                    atom_bytes=cfg.atom_bytes, addr_width=aw)),
                # the operand DMA runs with the layer when the sub-unit reads memory operands
                opdma.start.eq(start & getattr(core, f"{sub}_mem_en")),
            ]
        return m
