"""SDP model: MRDMA / on-the-fly input, BS (X1), BN (X2) and EW (Y) sub-units, output converter,
WDMA or hand-off to PDP.

Specification: v1_ias_unit_description.rst "Single Data Point Processor" (block diagram: M -> X1
-> X2 -> Y -> C -> WDMA/PDP), v1_ias_programming_guide.rst "SDP programming" and its "Limitation /
SDP" section, v1_ias_precision.rst (convertor, truncate, shifter), format.rst "Bias Data Format" /
"Batch Normalization Data Format", v1_ias_lut-programming.rst (LUT of the Y sub-unit).

Integer datapath widths and rounding rules that the documents leave open were settled from NVIDIA's
nv_small RTL (vmod/nvdla/sdp/NV_NVDLA_SDP_HLS_*.v, vmod/vlibs/NV_NVDLA_HLS_shift*.v) and C model
(cmod/hls/sdp/sdp_x.cpp, sdp_c.cpp, cmod/sdp/NV_NVDLA_sdp.cpp); every such fact is cited where it
is used. All arithmetic is on int64 numpy arrays of shape (C, H, W).
"""
from __future__ import annotations

import numpy as np

from verif.model.formats import ModelConfigError, cube_addresses, read_cube, saturate

# ---------------------------------------------------------------------------------------------
# integer primitives (v1_ias_precision.rst; bit-exact with NVIDIA's RTL)
# ---------------------------------------------------------------------------------------------


def sign_extend(x, bits: int):
    """Two's complement value of the low ``bits`` bits of ``x`` (int or int64 array)."""
    if isinstance(x, np.ndarray):
        x = x.astype(np.int64) & ((1 << bits) - 1)
        return np.where(x >> (bits - 1) != 0, x - (1 << bits), x)
    x &= (1 << bits) - 1
    return x - (1 << bits) if x >> (bits - 1) else x


def shift_right_round(x: np.ndarray, shift: int, in_bits: int, out_bits: int) -> np.ndarray:
    """``saturate_round(x >> shift)`` (v1_ias_precision.rst "Truncate"/"Convertor").

    Round half away from zero, then saturate to the signed ``out_bits`` range. Observed in
    NVIDIA's RTL (vlibs/NV_NVDLA_HLS_shiftrightsu.v): the rounding increment is the first
    dropped bit, for negative values only when some lower dropped bit is also set; a shift of
    ``in_bits`` or more gives 0. ``x`` is an int64 array holding ``in_bits``-bit values.
    """
    x = np.asarray(x, dtype=np.int64)
    if shift >= in_bits:
        return np.zeros_like(x)
    if shift == 0:
        return saturate(x, out_bits)
    q = x >> shift
    guide = (x >> (shift - 1)) & 1
    sticky = (x & ((1 << (shift - 1)) - 1)) != 0
    q = q + (guide & ((x >= 0) | sticky))
    return saturate(q, out_bits)


def shift_left_sat(op, shift: int, out_bits: int = 32):
    """``saturate(op << shift)`` to ``out_bits`` signed bits (v1_ias_precision.rst "Shifter").

    Observed in NVIDIA's RTL (vlibs/NV_NVDLA_HLS_shiftleftsu.v): the 16-bit ALU operand is
    shifted left by up to 63 into 32 bits with saturation.
    """
    op = np.asarray(op, dtype=np.int64)
    if shift >= 40:     # any non-zero 16-bit operand saturates; avoid int64 overflow
        return np.where(op > 0, (1 << (out_bits - 1)) - 1, np.where(op < 0, -(1 << (out_bits - 1)), 0))
    return saturate(op << shift, out_bits)


ALU_MAX, ALU_MIN, ALU_SUM, ALU_EQL = 0, 1, 2, 3


def x_subunit(x: np.ndarray, *, alu_bypass: bool, alu_algo: int, alu_op, alu_shift: int,
              mul_bypass: bool, mul_prelu: bool, mul_op, mul_shift: int,
              relu_bypass: bool) -> np.ndarray:
    """One BS (X1) or BN (X2) sub-unit on 32-bit input ``x`` (int64 array, any shape).

    ``alu_op``/``mul_op``: 16-bit signed operands (scalar or broadcastable array).
    Order ALU -> MUL -> truncate -> ReLU (unit description "Function Description": "Block X1/X2
    ... Bias addition, BatchNorm, PReLU, ReLU"). Facts from NVIDIA's nv_small RTL
    (NV_NVDLA_SDP_HLS_X_int_alu/mul/trt/relu.v):
      * ALU: operand = saturate32(op16 << ALU_SHIFT_VALUE); MAX/MIN/SUM on 33 bits; any algo
        other than MAX/MIN is SUM. Bypassed ALU passes x (sign-extended to 33 bits).
      * MUL: 33-bit x times 16-bit op = 49-bit product. PReLU: non-negative x passes unchanged
        (low 32 bits, no truncation); negative x is multiplied.
      * truncate: the 49-bit value (the product, or the sign-extended ALU output when MUL is
        bypassed — the shift applies even then) is shifted right by MUL_SHIFT_VALUE[5:0] with
        round-half-away-from-zero and saturated to 32 bits.
      * ReLU: max(x, 0) on 32 bits.
    Returns int64 32-bit values.
    """
    x = np.asarray(x, dtype=np.int64)
    if alu_bypass:
        a = x
    else:
        op = shift_left_sat(alu_op, alu_shift, 32)
        if alu_algo == ALU_MAX:
            a = np.maximum(x, op)
        elif alu_algo == ALU_MIN:
            a = np.minimum(x, op)
        else:
            a = x + op
    if mul_bypass:
        y = shift_right_round(a, mul_shift & 0x3F, 49, 32)
    else:
        prod = a * np.asarray(mul_op, dtype=np.int64)
        y = shift_right_round(prod, mul_shift & 0x3F, 49, 32)
        if mul_prelu:
            y = np.where(a >= 0, sign_extend(a, 32), y)
    if not relu_bypass:
        y = np.maximum(y, 0)
    return y


def output_convert(x: np.ndarray, offset: int, scale: int, shift: int, out_bits: int = 8,
                   mid_bits: int = 17) -> np.ndarray:
    """SDP output converter C (v1_ias_precision.rst "Convertor"):
    ``saturate(round((x - offset) * scale >> shift))``.

    Observed in NVIDIA's RTL (NV_NVDLA_SDP_HLS_C_int.v): 32-bit x minus 32-bit signed CVT_OFFSET
    on 33 bits, times 16-bit signed CVT_SCALE on 49 bits, shifted right by CVT_SHIFT (6 bits)
    with round-half-away-from-zero and saturation to 17 bits, then saturated to int8/int16.
    The EW operand converters (cmod sdp_y_cvt.cpp) are the same with ``mid_bits=49`` and
    ``out_bits=32``.
    """
    d = (np.asarray(x, dtype=np.int64) - offset) * scale
    t = shift_right_round(d, shift, 49, min(mid_bits, 49))
    return saturate(t, out_bits)


# ---------------------------------------------------------------------------------------------
# LUT (Y sub-unit) — v1_ias_lut-programming.rst
# ---------------------------------------------------------------------------------------------
LE_ENTRIES, LO_ENTRIES = 65, 257


class SdpCore:
    """SDP data path of one NVDLA (``cfg``: NvdlaConfig, ``mem``: Memory).

    ``run(rdma, sdp, flying_input)``: ``rdma``/``sdp`` are GroupViews of SDP_RDMA (None when
    SDP_RDMA is not part of the layer) and SDP; ``flying_input`` is the (K, H, W) int64 cube from
    CACC when D_FEATURE_MODE_CFG.FLYING_MODE=ON (32-bit values: unit description "Convolution
    Accumulator": "The bit width between CACC and SDP is 32"). Returns the output cube (int8 values
    in int64, shape (C', H, W) with C' = C rounded up to whole atoms of cfg.memory_atomic
    channels, the atom's padding lanes included) when OUTPUT_DST=PDP, else writes it through WDMA
    and returns None.
    """

    def __init__(self, cfg, mem):
        self.cfg, self.mem = cfg, mem
        self.lut_le = np.zeros(LE_ENTRIES, np.int64)   # 16-bit signed entries
        self.lut_lo = np.zeros(LO_ENTRIES, np.int64)
        self.lut_addr = 0
        self.status_unequal = False

    # ---- CSB hooks: LUT access (v1_ias_lut-programming.rst) and status ----------------------
    def _lut_table(self, regs):
        tid = (regs.single["S_LUT_ACCESS_CFG"] >> 16) & 1
        return (self.lut_lo, LO_ENTRIES) if tid else (self.lut_le, LE_ENTRIES)

    def on_write(self, regs, name: str, value: int) -> None:
        """S_LUT_ACCESS_CFG sets the table (LE/LO) and start address; each S_LUT_ACCESS_DATA
        write stores one 16-bit entry and advances the address ("automatic address incremental
        mechanism", v1_ias_lut-programming.rst)."""
        if name == "S_LUT_ACCESS_CFG":
            self.lut_addr = value & 0x3FF
        elif name == "S_LUT_ACCESS_DATA":
            table, n = self._lut_table(regs)
            if (regs.single["S_LUT_ACCESS_CFG"] >> 17) & 1 and self.lut_addr < n:   # WRITE
                table[self.lut_addr] = sign_extend(value & 0xFFFF, 16)
            self.lut_addr += 1

    def on_read(self, regs, name: str):
        """S_LUT_ACCESS_DATA reads the entry at the current address (READ access type, address
        advances); D_STATUS.STATUS_UNEQUAL reports the last EQL-mode comparison."""
        if name == "S_LUT_ACCESS_DATA":
            table, n = self._lut_table(regs)
            v = int(table[self.lut_addr]) & 0xFFFF if self.lut_addr < n else 0
            if not (regs.single["S_LUT_ACCESS_CFG"] >> 17) & 1:
                self.lut_addr += 1
            return v
        if name == "D_STATUS":
            return int(self.status_unequal)
        return None

    # ---- operand sources -------------------------------------------------------------------
    def _subunits(self):
        subs = []
        if self.cfg.sdp_bs:
            subs.append(("BS", "BRDMA"))
        if self.cfg.sdp_bn:
            subs.append(("BN", "NRDMA"))
        if self.cfg.sdp_ew:
            subs.append(("EW", "ERDMA"))
        return subs

    @staticmethod
    def _uses(sdp, sub: str) -> tuple[bool, bool]:
        """(ALU takes its operand from memory, MUL takes its operand from memory) for ``sub``."""
        if sdp.f(f"{sub}_BYPASS"):
            return False, False
        alu = not sdp.f(f"{sub}_ALU_BYPASS") and sdp.f(f"{sub}_ALU_SRC") == 1
        mul = not sdp.f(f"{sub}_MUL_BYPASS") and sdp.f(f"{sub}_MUL_SRC") == 1
        return alu, mul

    def needs_memory_operands(self, sdp) -> bool:
        """True when a non-bypassed BS/BN (and EW when configured) ALU or MUL takes its operand
        from memory (``*_SRC = MEM``), i.e. SDP_RDMA must run with the layer even on the fly."""
        return any(any(self._uses(sdp, sub)) for sub, _ in self._subunits())

    def _read_operands(self, rdma, sdp, sub: str, dma: str, c: int, h: int, w: int):
        """Operands of sub-unit ``sub`` read by ``dma`` (BRDMA/NRDMA/ERDMA).

        Returns ``(alu, mul)``: each None or an int64 array broadcastable to (c, h, w) (c already
        padded to whole atoms). Memory layout (format.rst "Bias Data Format", "Batch
        Normalization Data Format"; settled from NVIDIA's cmod NV_NVDLA_sdp.cpp
        SdpRdmaCore/ExtractRdmaResponsePayloadCore): an element is 1 or 2 bytes per component
        (DATA_SIZE; little endian, sign-extended to 16 bits) and has 2 components (ALU first, then
        MUL) when DATA_USE=BOTH. PER_KERNEL: element c at ``base + c * bpe`` (one contiguous
        read). PER_ELEMENT: feature layout with ``bpe``-byte elements:
        ``base + (c // atom) * SURFACE_STRIDE + h * LINE_STRIDE + (w * atom + c % atom) * bpe``.
        """
        alu_mem, mul_mem = self._uses(sdp, sub)
        if not (alu_mem or mul_mem):
            return None, None
        if rdma is None:
            raise ModelConfigError(f"SDP {sub}: operand from MEM but SDP_RDMA is not part of the layer")
        if rdma.f(f"{dma}_DISABLE"):
            raise ModelConfigError(
                f"SDP_RDMA.D_{dma}_CFG.{dma}_DISABLE=YES while SDP.D_DP_{sub}_*_SRC=MEM "
                f"(programming guide 'SDP programming': operands from memory need the {dma})")
        use = rdma.f(f"{dma}_DATA_USE")   # 0 MUL, 1 ALU, 2 BOTH
        if use == 3:
            raise ModelConfigError(f"SDP_RDMA.D_{dma}_CFG.{dma}_DATA_USE=3 is not a defined value")
        if alu_mem and use == 0 or mul_mem and use == 1:
            raise ModelConfigError(
                f"SDP_RDMA.D_{dma}_CFG.{dma}_DATA_USE={['MUL', 'ALU', 'BOTH'][use]} does not supply "
                f"the {'ALU' if alu_mem and use == 0 else 'MUL'} operand SDP.D_DP_{sub} takes from MEM")
        bpc = 2 if rdma.f(f"{dma}_DATA_SIZE") else 1
        ncomp = 2 if use == 2 else 1
        bpe = bpc * ncomp
        per_element = rdma.f(f"{dma}_DATA_MODE") == 1
        base = rdma.addr(f"D_{sub}_BASE_ADDR_HIGH", f"D_{sub}_BASE_ADDR_LOW")
        atom = self.cfg.memory_atomic
        if per_element:
            line = rdma.reg(f"D_{sub}_LINE_STRIDE")
            surf = rdma.reg(f"D_{sub}_SURFACE_STRIDE")
            cc = np.arange(c, dtype=np.int64)
            off = ((cc // atom) * surf + (cc % atom) * bpe)[:, None, None] \
                + (np.arange(h, dtype=np.int64) * line)[None, :, None] \
                + (np.arange(w, dtype=np.int64) * atom * bpe)[None, None, :]
            addr = base + off
        else:
            addr = (base + np.arange(c, dtype=np.int64) * bpe)[:, None, None]

        def comp(k):
            a0 = addr + k * bpc
            v = self.mem.gather(a0).astype(np.int64)
            if bpc == 2:
                v = v | (self.mem.gather(a0 + 1).astype(np.int64) << 8)
                return sign_extend(v, 16)
            return sign_extend(v, 8)

        if use == 2:
            return (comp(0) if alu_mem else None), (comp(1) if mul_mem else None)
        if use == 1:
            return comp(0), None
        return None, comp(0)

    # ---- checks ---------------------------------------------------------------------------
    def _check(self, rdma, sdp) -> None:
        """Programming guide "Limitation / SDP" rules and what this model implements."""
        cfg = self.cfg
        if sdp.f("WINOGRAD") and not cfg.winograd:
            raise ModelConfigError("SDP.D_FEATURE_MODE_CFG.WINOGRAD=ON but the configuration has no Winograd")
        if sdp.f("BATCH_NUMBER") and not cfg.batch:
            raise ModelConfigError("SDP.D_FEATURE_MODE_CFG.BATCH_NUMBER != 0 but the configuration has no batch mode")
        if sdp.f("WINOGRAD") or sdp.f("BATCH_NUMBER"):
            raise ModelConfigError("SDP Winograd/multi-batch output ordering is not modelled")
        proc, out = sdp.field("D_DATA_FORMAT", "PROC_PRECISION"), sdp.field("D_DATA_FORMAT", "OUT_PRECISION")
        if proc != 0 or out != 0:
            raise ModelConfigError(
                f"SDP.D_DATA_FORMAT PROC_PRECISION={proc} OUT_PRECISION={out}: only INT8 is modelled "
                f"(configuration feature_data_type={cfg.feature_data_type})")
        if rdma is not None and sdp.f("FLYING_MODE") == 0:
            if rdma.field("D_FEATURE_MODE_CFG", "IN_PRECISION") != 0:
                raise ModelConfigError("SDP_RDMA.D_FEATURE_MODE_CFG.IN_PRECISION: only INT8 is modelled")
            if rdma.field("D_FEATURE_MODE_CFG", "FLYING_MODE") != 0:
                raise ModelConfigError("SDP_RDMA.D_FEATURE_MODE_CFG.FLYING_MODE=ON while SDP's is OFF")
        for sub, _ in self._subunits():
            if sdp.f(f"{sub}_BYPASS"):
                continue
            if sdp.f(f"{sub}_MUL_PRELU") and not sdp.f(f"{sub}_MUL_BYPASS") and not sdp.f(f"{sub}_ALU_BYPASS"):
                raise ModelConfigError(
                    f"SDP.D_DP_{sub}_CFG: {sub}_MUL_PRELU=YES needs {sub}_ALU_BYPASS=YES "
                    "(programming guide Limitation/SDP: 'If PReLU is enabled for one sub-unit, the "
                    "ALU in that unit MUST be bypassed')")
        if sdp.f("OUTPUT_DST") == 1 and not cfg.pdp:
            raise ModelConfigError("SDP.D_FEATURE_MODE_CFG.OUTPUT_DST=PDP but the configuration has no PDP")

    # ---- main ------------------------------------------------------------------------------
    def run(self, rdma, sdp, flying_input):
        """Execute one SDP hardware layer (see class docstring)."""
        self._check(rdma, sdp)
        cfg = self.cfg
        atom = cfg.memory_atomic
        w = sdp.f("WIDTH") + 1
        h = sdp.f("HEIGHT") + 1
        c = sdp.f("CHANNEL") + 1
        cp = -(-c // atom) * atom          # the hardware processes whole atoms

        if sdp.f("FLYING_MODE") == 1:
            if flying_input is None:
                raise ModelConfigError("SDP.D_FEATURE_MODE_CFG.FLYING_MODE=ON without a convolution layer")
            fi = np.asarray(flying_input, dtype=np.int64)
            if fi.shape[1:] != (h, w) or fi.shape[0] < c:
                raise ModelConfigError(
                    f"SDP.D_DATA_CUBE_WIDTH/HEIGHT/CHANNEL {w}x{h}x{c} do not match the convolution "
                    f"output {fi.shape[2]}x{fi.shape[1]}x{fi.shape[0]} (W x H x K)")
            x = np.zeros((cp, h, w), np.int64)
            x[:c] = fi[:c]
        else:
            if rdma is None:
                raise ModelConfigError("SDP.D_FEATURE_MODE_CFG.FLYING_MODE=OFF needs SDP_RDMA (MRDMA)")
            rw, rh, rc = (rdma.field("D_DATA_CUBE_WIDTH", "WIDTH") + 1,
                          rdma.field("D_DATA_CUBE_HEIGHT", "HEIGHT") + 1,
                          rdma.field("D_DATA_CUBE_CHANNEL", "CHANNEL") + 1)
            if (rw, rh, rc) != (w, h, c):
                raise ModelConfigError(
                    f"SDP_RDMA.D_DATA_CUBE_* {rw}x{rh}x{rc} differ from SDP.D_DATA_CUBE_* {w}x{h}x{c}")
            base = rdma.addr("D_SRC_BASE_ADDR_HIGH", "D_SRC_BASE_ADDR_LOW")
            x = read_cube(self.mem, base, w, h, cp, rdma.reg("D_SRC_LINE_STRIDE"),
                          rdma.reg("D_SRC_SURFACE_STRIDE"), atom).view(np.int8).astype(np.int64)

        self.status_unequal = False
        for sub, dma in self._subunits():
            if sdp.f(f"{sub}_BYPASS"):
                continue
            alu_m, mul_m = self._read_operands(rdma, sdp, sub, dma, cp, h, w)
            if sub == "EW":
                x = self._y_subunit(sdp, x, alu_m, mul_m)
                continue
            alu_op = alu_m if alu_m is not None else sdp.fs(f"{sub}_ALU_OPERAND")
            mul_op = mul_m if mul_m is not None else sdp.fs(f"{sub}_MUL_OPERAND")
            x = x_subunit(
                x, alu_bypass=bool(sdp.f(f"{sub}_ALU_BYPASS")), alu_algo=sdp.f(f"{sub}_ALU_ALGO"),
                alu_op=alu_op, alu_shift=sdp.f(f"{sub}_ALU_SHIFT_VALUE"),
                mul_bypass=bool(sdp.f(f"{sub}_MUL_BYPASS")), mul_prelu=bool(sdp.f(f"{sub}_MUL_PRELU")),
                mul_op=mul_op, mul_shift=sdp.f(f"{sub}_MUL_SHIFT_VALUE"),
                relu_bypass=bool(sdp.f(f"{sub}_RELU_BYPASS")))

        if self._eql_mode(sdp):
            # programming guide "Compare mode": the converter passes data and nothing is
            # written to memory; software reads D_STATUS.STATUS_UNEQUAL
            return None
        out = output_convert(x, sdp.fs("CVT_OFFSET"), sdp.fs("CVT_SCALE"), sdp.f("CVT_SHIFT"), 8)

        if sdp.f("OUTPUT_DST") == 1:
            # all lanes of the last atom go to PDP (it writes whole atoms too)
            return out
        dst = sdp.addr("D_DST_BASE_ADDR_HIGH", "D_DST_BASE_ADDR_LOW")
        # WDMA writes whole atoms (channels c..cp-1 of the last surface carry the pipeline's
        # values for the atom's padding lanes)
        addrs = cube_addresses(dst, w, h, cp, sdp.reg("D_DST_LINE_STRIDE"),
                               sdp.reg("D_DST_SURFACE_STRIDE"), atom)
        self.mem.scatter(addrs, out & 0xFF)
        return None

    def _eql_mode(self, sdp) -> bool:
        return bool(self.cfg.sdp_ew and not sdp.f("EW_BYPASS") and not sdp.f("EW_ALU_BYPASS")
                    and sdp.f("EW_ALU_ALGO") == ALU_EQL)

    # ---- Y (EW) sub-unit: only when cfg.sdp_ew ---------------------------------------------
    def _y_subunit(self, sdp, x, alu_m, mul_m):
        """Y (EW) sub-unit on 32-bit ``x``: MUL -> ALU -> LUT (unit description "Function
        Description": "Block Y is primarily designed for element-wise ... An extra LUT").

        Facts from NVIDIA's C model (cmod/hls/sdp/sdp_y.cpp, sdp_y_core.cpp, sdp_y_cvt.cpp), the
        source of the Y RTL: operands from memory (16 bits) pass a converter
        ``round((op - EW_*_CVT_OFFSET) * EW_*_CVT_SCALE >> EW_*_CVT_TRUNCATE)`` (33/49 bits,
        saturated to 32) unless EW_*_CVT_BYPASS; register operands are 32 bits and are not
        converted. MUL comes first: 32x32-bit product shifted right by EW_TRUNCATE with
        round-half-away-from-zero and saturation to 32 bits (PReLU passes non-negative x);
        then ALU MAX/MIN/SUM/EQL on 33 bits saturated to 32 (EQL gives 0 when equal, else 1).
        """
        if not sdp.f("EW_MUL_BYPASS"):
            if mul_m is not None:
                op = mul_m if sdp.f("EW_MUL_CVT_BYPASS") else output_convert(
                    mul_m, sdp.fs("EW_MUL_CVT_OFFSET"), sdp.fs("EW_MUL_CVT_SCALE"),
                    sdp.f("EW_MUL_CVT_TRUNCATE"), 32, mid_bits=49)
            else:
                op = sdp.fs("EW_MUL_OPERAND")
            t = sdp.f("EW_TRUNCATE")
            prod = x * np.asarray(op, dtype=np.int64)
            y = shift_right_round(prod, min(t, 64), 64, 32) if t < 64 else np.zeros_like(prod)
            if sdp.f("EW_MUL_PRELU"):
                y = np.where(x >= 0, x, y)
            x = y
        if not sdp.f("EW_ALU_BYPASS"):
            if alu_m is not None:
                op = alu_m if sdp.f("EW_ALU_CVT_BYPASS") else output_convert(
                    alu_m, sdp.fs("EW_ALU_CVT_OFFSET"), sdp.fs("EW_ALU_CVT_SCALE"),
                    sdp.f("EW_ALU_CVT_TRUNCATE"), 32, mid_bits=49)
            else:
                op = sdp.fs("EW_ALU_OPERAND")
            op = np.asarray(op, dtype=np.int64)
            algo = sdp.f("EW_ALU_ALGO")
            if algo == ALU_MAX:
                x = np.maximum(x, op)
            elif algo == ALU_MIN:
                x = np.minimum(x, op)
            elif algo == ALU_EQL:
                neq = x != op
                self.status_unequal = bool(np.any(neq))
                x = neq.astype(np.int64)
            else:
                x = saturate(x + op, 32)
        if not sdp.f("EW_LUT_BYPASS"):
            if not self.cfg.sdp_lut:
                raise ModelConfigError("SDP.D_DP_EW_CFG.EW_LUT_BYPASS=NO but the configuration has no SDP LUT")
            x = self._lut(sdp, x)
        return x

    def _lut(self, sdp, x):
        """LUT lookup and interpolation (v1_ias_lut-programming.rst). The tables are held
        (``lut_le``/``lut_lo``, loaded through S_LUT_ACCESS_CFG/DATA) but the index/interpolation
        arithmetic (NVIDIA cmod sdp_y_idx.cpp / sdp_y_inp.cpp) is not modelled yet."""
        raise ModelConfigError("SDP.D_DP_EW_CFG.EW_LUT_BYPASS=NO: the SDP LUT datapath is not modelled yet")
