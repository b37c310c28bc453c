"""Convolution pipeline model: CDMA, CBUF, CSC, CMAC, CACC of one hardware layer.

Bit-exact functional model of NVDLA's convolution core for direct convolution (feature input)
and image input (v1_ias_programming_guide.rst "Convolution pipeline programming";
v1_ias_unit_description.rst CDMA/CSC/CMAC/CACC; format.rst "Feature Data Format",
"Pixel Format", "Weight Format"; v1_ias_precision.rst "Convolution convertors").

Data flow modelled (one call of :meth:`ConvCore.run` per hardware layer):

* CDMA fetches the input cube into CBUF. Feature data is stored as it is in memory. Pixel data is
  reordered to R/Y, G/U, B/V, A/X channels, converted (mean or offset, scale, truncate, int8
  saturation) and padded left/right with CDMA's pad value (``ConvCore._fetch_pixels``).
* CBUF keeps data slices and weights across layers (DATA_REUSE / WEIGHT_REUSE, D_RELEASE,
  SKIP_DATA_RLS / SKIP_WEIGHT_RLS): the state lives in the ConvCore object.
* CSC walks the output cube with its own copies of padding (left/top), stride and dilation,
  supplying CSC's pad value for positions outside the stored cube.
* CMAC multiplies int8 data by int8 weights; CACC accumulates, rounds by CLIP_TRUNCATE and
  saturates to int32, the values delivered to SDP.

Facts settled from NVIDIA's sources (nvdla/hw, branch nv_small RTL ``vmod`` and nvdlav1 ``cmod``)
are cited where they are used. The arithmetic is done with exact integer-valued float64 matrix
products over im2col views (every partial sum is an integer below 2**53, so BLAS is exact).
"""
from __future__ import annotations

import numpy as np

from verif.model.conv_fp16 import conv_dc_fp16, conv_img_fp16
from verif.model.fp import fp16_isnan
from verif.model.memory import Memory, ram
from verif.model.formats import ModelConfigError, read_cube

# --------------------------------------------------------------------------------------------
# pixel formats (format.rst "Pixel Format", tab_pixel_formats)
# --------------------------------------------------------------------------------------------
# PIXEL_FORMAT code -> (name, bytes per pixel of each plane, channel order).
# ``order[i]`` is the byte of the pixel (plane-0 bytes, then plane-1 bytes) that becomes CBUF
# channel i; channels are R/Y, G/U, B/V, A/X and take mean MEAN_RY, MEAN_GU, MEAN_BV, MEAN_AX.
# Observed in NVIDIA cmod (cdma ImageConv...: "Store to CBUF in the order of RGBA") and nv_small
# RTL (NV_NVDLA_CDMA_IMG_ctrl pixel_order): the YUV formats are byte orders only, the X byte of
# X8* formats is channel 3 exactly like alpha (also confirmed on NVIDIA's RTL by the
# nv_small_generated traces).
PIXEL_FORMATS_INT8 = {
    0: ("T_R8", (1,), (0,)),
    12: ("T_A8B8G8R8", (4,), (0, 1, 2, 3)),
    16: ("T_X8B8G8R8", (4,), (0, 1, 2, 3)),
    13: ("T_A8R8G8B8", (4,), (2, 1, 0, 3)),
    17: ("T_X8R8G8B8", (4,), (2, 1, 0, 3)),
    26: ("T_A8Y8U8V8", (4,), (2, 1, 0, 3)),
    14: ("T_B8G8R8A8", (4,), (1, 2, 3, 0)),
    18: ("T_B8G8R8X8", (4,), (1, 2, 3, 0)),
    27: ("T_V8U8Y8A8", (4,), (1, 2, 3, 0)),
    15: ("T_R8G8B8A8", (4,), (3, 2, 1, 0)),
    19: ("T_R8G8B8X8", (4,), (3, 2, 1, 0)),
    28: ("T_Y8___U8V8_N444", (1, 2), (0, 2, 1)),
    29: ("T_Y8___V8U8_N444", (1, 2), (0, 1, 2)),
}


# nv_full's 16-bit pixel formats (format.rst tab_pixel_formats; nvdlav1 RTL
# NV_NVDLA_CDMA_IMG_ctrl/_IMG_sg reorders, agreeing with NVIDIA's C model): code -> (name,
# bytes per pixel of each plane, container precision (1 INT16, 2 FP16), channel order).
# ``order[i]`` is the 16-bit element of the pixel (plane 0's, then plane 1's) that becomes CBUF
# channel i; the whole little-endian word is the component (no shift for 10/12-bit formats).
PIXEL_FORMATS_16 = {
    1: ("T_R10", (2,), 1, (0,)), 2: ("T_R12", (2,), 1, (0,)), 3: ("T_R16", (2,), 1, (0,)),
    4: ("T_R16_I", (2,), 1, (0,)), 5: ("T_R16_F", (2,), 2, (0,)),
    6: ("T_A16B16G16R16", (8,), 1, (0, 1, 2, 3)), 7: ("T_X16B16G16R16", (8,), 1, (0, 1, 2, 3)),
    8: ("T_A16B16G16R16_F", (8,), 2, (0, 1, 2, 3)),
    9: ("T_A16Y16U16V16", (8,), 1, (2, 1, 0, 3)), 10: ("T_V16U16Y16A16", (8,), 1, (1, 2, 3, 0)),
    11: ("T_A16Y16U16V16_F", (8,), 2, (2, 1, 0, 3)),
    30: ("T_Y10___U10V10_N444", (2, 4), 1, (0, 2, 1)), 31: ("T_Y10___V10U10_N444", (2, 4), 1, (0, 1, 2)),
    32: ("T_Y12___U12V12_N444", (2, 4), 1, (0, 2, 1)), 33: ("T_Y12___V12U12_N444", (2, 4), 1, (0, 1, 2)),
    34: ("T_Y16___U16V16_N444", (2, 4), 1, (0, 2, 1)), 35: ("T_Y16___V16U16_N444", (2, 4), 1, (0, 1, 2)),
}
# packed 10-bit formats (one 32-bit little-endian word per pixel, INT16 container): code ->
# (name, (lsb, width) of the word's field for CBUF channels 0..3); a 10-bit field becomes
# ``f << 6``, the 2-bit alpha ``a << 14`` (nvdlav1 NV_NVDLA_CDMA_IMG_pack, C model the same)
PIXEL_FORMATS_10 = {
    20: ("T_A2B10G10R10", ((0, 10), (10, 10), (20, 10), (30, 2))),
    21: ("T_A2R10G10B10", ((20, 10), (10, 10), (0, 10), (30, 2))),
    24: ("T_A2Y10U10V10", ((20, 10), (10, 10), (0, 10), (30, 2))),
    22: ("T_B10G10R10A2", ((2, 10), (12, 10), (22, 10), (0, 2))),
    25: ("T_V10U10Y10A2", ((2, 10), (12, 10), (22, 10), (0, 2))),
    23: ("T_R10G10B10A2", ((22, 10), (12, 10), (2, 10), (0, 2))),
}


def pixel_format(fmt: int) -> tuple[str, tuple, int, int]:
    """(name, bytes per pixel of each plane, container precision 0 INT8 / 1 INT16 / 2 FP16,
    CBUF channels) of PIXEL_FORMAT ``fmt``; KeyError for an undefined code."""
    if fmt in PIXEL_FORMATS_INT8:
        name, bpp, order = PIXEL_FORMATS_INT8[fmt]
        return name, bpp, 0, len(order)
    if fmt in PIXEL_FORMATS_16:
        name, bpp, cont, order = PIXEL_FORMATS_16[fmt]
        return name, bpp, cont, len(order)
    name, fields = PIXEL_FORMATS_10[fmt]
    return name, (4,), 1, len(fields)


def _s(v: int, bits: int) -> int:
    """Two's complement value of the low ``bits`` bits of ``v``."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def round_shift(x: np.ndarray, shift: int) -> np.ndarray:
    """``x / 2**shift`` rounded half away from zero (exact, int64; v1_ias_precision.rst
    "Convertor": round half away from zero). ``shift`` >= 0."""
    x = np.asarray(x, dtype=np.int64)
    if shift == 0:
        return x.copy()
    q = np.abs(x) + (np.int64(1) << np.int64(shift - 1))
    return np.sign(x) * (q >> np.int64(shift))


def cdma_convert(raw: np.ndarray, signed: bool, offset: np.ndarray | int, scale: int,
                 truncate: int, out_bits: int = 8, in_bits: int | None = None) -> np.ndarray:
    """CDMA input converter for int8 pixel bytes (v1_ias_precision.rst "Convertor"; format.rst
    "Precision Conversion" equation 1): ``sat_int8(round((x - offset) * scale >> truncate))``.

    ``raw`` uint8 bytes (any shape); ``signed`` is PIXEL_SIGN_OVERRIDE (byte sign- rather than
    zero-extended, programming guide "CDMA.PIXEL_SIGN_OVERRIDE"); ``offset`` the signed 16-bit
    mean or CVT_OFFSET (broadcast against ``raw``); ``scale`` signed 16-bit CVT_SCALE;
    ``truncate`` the 6-bit CVT_TRUNCATE. Returns int64 values in [-128, 127].
    Observed in NVIDIA RTL (NV_NVDLA_CDMA_CVT_cell, NV_NVDLA_HLS_shiftrightsu): 18-bit subtract,
    34-bit product, right shift with round half away from zero (full sticky), a shift of 34 or
    more gives 0, then saturation to 17 and to 8 bits.

    ``out_bits`` 16: nv_full's INT16 layers, ``raw`` 16-bit elements (uint16 words, ``signed``:
    sign-extended from bit 15): the same cell, saturated to 17 then 16 bits (nvdlav1 RTL,
    NV_NVDLA_CDMA_CVT_cell, checked by simulating that cell on 601,500 vectors).
    ``in_bits`` (default ``out_bits``): the width of ``raw`` (an 8-bit pixel converted to 16
    bits: 8); ``out_bits`` 17: the cell's int17 value, before the last saturation (FP16 output).
    """
    x = raw.astype(np.int64)
    half = 1 << (out_bits - 1)
    if signed:
        top = 1 << ((in_bits or out_bits) - 1)
        x = np.where(x >= top, x - 2 * top, x)
    v = (x - np.asarray(offset, dtype=np.int64)) * np.int64(scale)
    if truncate >= 34:
        v = np.zeros_like(v)
    else:
        v = round_shift(v, truncate)
    return np.clip(np.clip(v, -(1 << 16), (1 << 16) - 1), -half, half - 1)


def cacc_truncate(acc: np.ndarray, truncate: int, acc_bits: int = 34) -> np.ndarray:
    """CACC output stage (v1_ias_precision.rst "Truncate"; cc_out_trunc): accumulator ``acc``
    (int64, any shape) shifted right by CLIP_TRUNCATE with rounding, saturated to int32.
    ``acc_bits``: the saturating accumulator's width, 34 for int8 and 48 for int16 (observed in
    NVIDIA's nvdlav1 RTL, NV_NVDLA_CACC_CALC_int16: a 38-bit CMAC sum added to a 48-bit
    accumulator saturated to 48 bits, then the same shift, guide bit, 15 sticky bits, rounding
    and int32 saturation as int8's).

    Observed in NVIDIA nv_small RTL (NV_NVDLA_CACC_CALC_int8): the accumulator is 34-bit
    saturating; the shift keeps one guide bit and only 15 sticky bits below it, and rounds half
    away from zero (a positive value adds the guide bit; a negative one only when a sticky bit is
    set too); the result saturates to int32. Partial sums saturate at every accumulation step in
    hardware; here the full sum is saturated once (identical unless a partial sum leaves the
    accumulator's range, which needs more than 2**19 full-scale int8 or 2**17 int16 products).
    """
    top = 1 << (acc_bits - 1)
    a = np.clip(np.asarray(acc, dtype=np.int64), -top, top - 1)
    t = int(truncate)
    if t == 0:
        r = a
    else:
        fl = a >> np.int64(t)                          # arithmetic shift: floor
        guide = (a >> np.int64(t - 1)) & 1
        lo = max(0, t - 16)
        nbits = (t - 1) - lo
        sticky = ((a >> np.int64(lo)) & np.int64((1 << nbits) - 1)) != 0 if nbits > 0 \
            else np.zeros(a.shape, bool)
        point5 = (guide == 1) & ((a >= 0) | sticky)
        r = fl + point5.astype(np.int64)
    return np.clip(r, -(1 << 31), (1 << 31) - 1)


def read_weights(mem, base: int, k: int, r: int, s: int, c: int, atom_c: int,
                 atom_k: int, elem_bytes: int = 1) -> np.ndarray:
    """Uncompressed direct-convolution weights (format.rst "Basic Weight for Direct
    Convolution"): kernels in groups of ``atom_k`` (mac_atomic_k; int16/fp16 groups hold half
    as many: pass ``atom_k // 2``); each kernel cut into 1x1x``atom_c``-element small cubes
    (last one shorter, no zero fill); a group is scanned C'->K->W->H->C; groups packed back to
    back. ``elem_bytes`` 1 (int8) or 2 (int16, little-endian). Returns (K, R, S, C) int64
    signed weights."""
    kk = np.arange(k, dtype=np.int64)[:, None, None, None]
    rr = np.arange(r, dtype=np.int64)[None, :, None, None]
    ss = np.arange(s, dtype=np.int64)[None, None, :, None]
    cc = np.arange(c, dtype=np.int64)[None, None, None, :]
    g, kin = kk // atom_k, kk % atom_k
    kg = np.minimum(atom_k, k - g * atom_k)            # kernels in this group
    cb, ci = cc // atom_c, cc % atom_c
    cw = np.minimum(atom_c, c - cb * atom_c)            # width of this channel block
    off = (g * atom_k * r * s * c + cb * atom_c * r * s * kg + (rr * s + ss) * kg * cw
           + kin * cw + ci)
    if elem_bytes == 2:
        a = base + 2 * off
        words = mem.gather(a).astype(np.uint16) | (mem.gather(a + 1).astype(np.uint16) << 8)
        return words.view(np.int16).astype(np.int64)
    return mem.gather(base + off).view(np.int8).astype(np.int64)


def decompress_weights(wt: bytes, wmb: bytes, n: int, elem_bytes: int = 1) -> bytes:
    """Sparse-compressed weights (format.rst "Sparse Compression option") back to the
    uncompressed weight bytes of ``n`` elements: WMB bit ``i`` (little-endian bits: bit ``i %
    8`` of WMB byte ``i // 8``) says whether element ``i`` of the uncompressed order is
    non-zero; the non-zero elements follow each other in ``wt``, ``elem_bytes`` bytes each.
    Both streams run through the whole layer without alignment between kernel groups (NVIDIA's
    nvdlav1 cmod, NV_NVDLA_csc get_decompressed_weight: the WMB bit and weight indices carry
    over from one kernel group to the next; WGS only paces CDMA's fetch, NV_NVDLA_CDMA_wt.v
    wt_required_bytes). Raises ModelConfigError when ``wmb`` has fewer than ``n`` bits or
    ``wt`` fewer bytes than its set bits ask for."""
    if len(wmb) * 8 < n:
        raise ModelConfigError(f"D_WMB_BYTES={len(wmb)}: {n} weight elements need {-(-n // 8)} "
                               "bytes of WMB")
    bits = np.unpackbits(np.frombuffer(wmb, np.uint8), bitorder="little")[:n].astype(bool)
    nz = int(bits.sum())
    if nz * elem_bytes > len(wt):
        raise ModelConfigError(f"D_WEIGHT_BYTES={len(wt)}: the WMB marks {nz} non-zero weights, "
                               f"{nz * elem_bytes} bytes")
    dense = np.zeros((n, elem_bytes), np.uint8)
    dense[bits] = np.frombuffer(wt[:nz * elem_bytes], np.uint8).reshape(nz, elem_bytes)
    return dense.tobytes()


def read_weights_post_ext(mem, base: int, k: int, r: int, cw: int, ext: int, atom_k: int,
                          elem_bytes: int = 1) -> np.ndarray:
    """Image weights with channel post-extension ``ext`` (2 or 4 lines; format.rst "Weight
    Channel Post-extension for image input"): ``ext`` neighbour kernel lines of ``cw`` bytes are
    combined into one channel vector (the last vector has ``r % ext`` lines when R is not
    divisible, no zero fill), then mapped like direct-convolution weights. Observed in NVIDIA
    cmod (csc weight sequencer): the vector of lines [g*ext, g*ext+ext) of each kernel of a
    group is ``cw * lines`` bytes, kernel after kernel, vector after vector. ``elem_bytes`` 2:
    int16/fp16 elements (little-endian) in groups of ``atom_k`` = mac_atomic_k // 2 kernels
    (nvdlav1 C model and RTL: the same vectors of two-byte elements).
    Returns (K, R, 1, cw) int64 (signed; fp16 patterns as int16 values)."""
    out = np.zeros((k, r, 1, cw), np.int64)
    groups = -(-r // ext)
    gbase = 0
    for g0 in range(0, k, atom_k):
        kg = min(atom_k, k - g0)
        off = gbase
        for g in range(groups):
            lines = min(ext, r - g * ext)
            n = lines * cw
            raw = mem.read(off + base, kg * n * elem_bytes)
            blk = raw.view(np.int8 if elem_bytes == 1 else "<i2").astype(np.int64).reshape(kg, lines, cw)
            out[g0:g0 + kg, g * ext:g * ext + lines, 0, :] = blk
            off += kg * n * elem_bytes
        gbase += kg * r * cw * elem_bytes
    return out



def feature_entries_per_slice(cfg, width: int, channels: int, elem_bytes: int = 1) -> int:
    """CBUF entries one input slice (one line of ``width`` pixels x ``channels``) of feature data
    takes in direct convolution.

    A CBUF entry (``cfg.cbuf_bank_width`` bytes, one atomic C) holds R = entry / memory atom
    atoms. Whole groups of R atoms take one entry per pixel; the last group's L = T mod R atoms
    (T = ceil(C x BPE / atom)) are packed densely: ceil(L x W / R) entries, except L = 3, which
    takes a whole entry per pixel. This is NVIDIA's compiler's formula
    (umd ConvCoreNode::calculateEPS, ``sw/`` in ../shared) and NVIDIA's nv_small_256 traces,
    which program it, pass on NVIDIA's nv_small_256 RTL (e.g. dc_24x44x14_5x3x14x41: W 24, C 14,
    2 atoms of 8 bytes in 32-byte entries: 12 entries). On nv_small (R = 1): W x ceil(C / 8).

    ``elem_bytes`` 2: int16/fp16 on a configuration whose sizes count int8 elements (nv_full,
    int8_int16_fp16): its entries are :func:`entry_bytes` wide, two CBUF half-entries.
    """
    r = entry_bytes(cfg, elem_bytes) // cfg.atom_bytes
    atoms = -(-channels * cfg.bpe * elem_bytes // (8 * cfg.atom_bytes))
    last = atoms % r
    frac = width if last == 3 else -(-last * width // r)
    return atoms // r * width + frac


def entry_bytes(cfg, elem_bytes: int = 1) -> int:
    """Bytes of one CBUF entry as D_ENTRY_PER_SLICE, D_BANK and the weight ring count them.

    ``cfg.cbuf_bank_width`` for int8; int16/fp16 on nv_full (``elem_bytes`` 2) take both
    halves of its 128-byte RAM word: NVIDIA's nvdlav1 RTL stores 256 x 128 bytes per bank
    (NV_NVDLA_cbuf: 12-bit entry addresses, 1024-bit reads, CDMA writes one 64-byte half or
    both, ``cdma2buf_dat_wr_hsel``); NVIDIA's int16 traces program 128-byte entries
    (conv_8x8_fc_int16: 8 pixels x 32 int16 channels in 4 entries) and NVIDIA's compiler counts
    nv_full's entries at 128 bytes (umd TargetConfig), while int8 layers count 64-byte halves
    (the spec file's 64 x 512; random int8 programs pass on that RTL so)."""
    return cfg.cbuf_bank_width * elem_bytes


def _check_reuse_precision(flag: str, what: str, kept: int, prec: int) -> None:
    """Raise :class:`ModelConfigError` when a layer reuses CBUF ``what`` (``flag``: CSC
    D_MISC_CFG.DATA_REUSE / WEIGHT_REUSE) kept by a layer of another PROC_PRECISION. NVIDIA's
    CSC decides reuse without the precision (its nvdlav1 NV_NVDLA_CSC_sg.v keys it on the
    convolution mode: docs/conv16.md "Open questions"), so the kept bytes would be read as elements of the other size or format; what
    the hardware computes then is not settled (no generator draws it)."""
    if kept != prec:
        names = ("INT8", "INT16", "FP16", "3")
        raise ModelConfigError(
            f"CSC.D_MISC_CFG.{flag} in a {names[prec]} layer: the {what} kept in CBUF are "
            f"{names[kept]} (CDMA D_MISC_CFG.PROC_PRECISION changed; reuse across precisions is "
            "not modelled: NVIDIA's CSC does not check it)")


class ConvCore:
    """Direct/image convolution of one hardware layer; keeps CBUF contents across layers.

    ``run(cdma, csc, cmac_a, cacc)`` takes the GroupViews of the layer (verif/model/regs.py) and
    returns the cube CACC delivers to SDP: shape (K, H_out, W_out) int64, int32-ranged (an
    FP16 layer on nv_full: fp32 bit patterns, verif/model/conv_fp16.py), with
    K = CSC DATAOUT_CHANNEL+1, H_out/W_out = CSC DATAOUT_HEIGHT/WIDTH+1; a multi-batch layer
    (D_BATCH_NUMBER.BATCHES = N-1 > 0) returns the N cubes, shape (N, K, H_out, W_out).

    CBUF state kept between layers: ``self.data`` (slices left in CBUF, see :meth:`_data`) and
    ``self.weights`` (weights kept by SKIP_WEIGHT_RLS). Raises ModelConfigError for register
    combinations the programming guide forbids ("Limitation" / "Convolution").
    """

    def __init__(self, cfg, mem, cv_mem=None):
        # cv_mem: the secondary memory (CVIF) or None (verif.model.memory.ram)
        self.cfg, self.mem, self.cv_mem = cfg, mem, cv_mem
        self.data: dict | None = None       # CBUF data slices of the previous layer
        self.weights: dict | None = None    # CBUF weights of the previous layer
        # CBUF weight-ring drift: {"banks": (DATA_BANK, WEIGHT_BANK), "entries": n}, see _weights
        self.wt_drift: dict | None = None
        self.layers = 0

    # ---------------------------------------------------------------- checks
    def _elem_bytes(self, cdma) -> int:
        """Bytes per element of the layer: 2 for INT16 and FP16 on nv_full (int8_int16_fp16),
        else 1 (every other configuration counts its sizes in its own elements)."""
        if self.cfg.feature_data_type == "int8_int16_fp16" and cdma.f("PROC_PRECISION") in (1, 2):
            return 2
        return 1

    def _fp16(self, cdma) -> bool:
        return self.cfg.feature_data_type == "int8_int16_fp16" and cdma.f("PROC_PRECISION") == 2

    @staticmethod
    def _check_image_precision(cdma, proc: int) -> None:
        """Image precisions on nv_full (format.rst tab_precision_conversion_conv and
        tab_pixel_formats; nvdlav1 RTL NV_NVDLA_CDMA_cvt splits writes into lanes by
        IN_PRECISION alone): IN_PRECISION is the pixel format's container; converting (IN !=
        PROC) needs CVT_EN; fp16 pixels give FP16 only; a 16-bit container to INT8 (the
        converter's "shrink" path) is not modelled."""
        names = ("INT8", "INT16", "FP16", "3")
        fmt, inp = cdma.f("PIXEL_FORMAT"), cdma.f("IN_PRECISION")
        try:
            name, _, cont, _ = pixel_format(fmt)
        except KeyError:
            raise ModelConfigError(f"CDMA.D_DATAIN_FORMAT.PIXEL_FORMAT={fmt} is undefined") from None
        if inp != cont:
            raise ModelConfigError(f"CDMA.D_MISC_CFG.IN_PRECISION={names[inp]}: pixel format {name} "
                                   f"holds {names[cont]} components (format.rst tab_pixel_formats)")
        if inp != proc and not cdma.f("CVT_EN"):
            raise ModelConfigError(f"CDMA.D_MISC_CFG IN_PRECISION={names[inp]} PROC_PRECISION="
                                   f"{names[proc]} needs CDMA.D_CVT_CFG.CVT_EN (format.rst precision "
                                   "conversion table)")
        if cont == 2 and proc != 2 or cont == 1 and proc == 0:
            raise ModelConfigError(f"pixel format {name} ({names[cont]}) to PROC_PRECISION={names[proc]}: "
                                   "not a conversion format.rst lists" if cont == 2 else
                                   f"pixel format {name} (INT16) to INT8: the converter's shrink path "
                                   "is not modelled")

    def _check_common(self, cdma, csc, cmac, cacc):
        cfg = self.cfg
        for unit, v in (("CDMA", cdma), ("CSC", csc), ("CMAC_A", cmac), ("CACC", cacc)):
            if v.f("CONV_MODE") == 1:
                if not cfg.winograd:
                    raise ModelConfigError(f"{unit}.D_MISC_CFG.CONV_MODE=WINOGRAD: {cfg.name} has no "
                                           "Winograd (v2_scalability.rst)")
                raise ModelConfigError(f"{unit}.D_MISC_CFG.CONV_MODE=WINOGRAD is not modelled")
            if cfg.feature_data_type == "int8" and v.f("PROC_PRECISION") != 0:
                raise ModelConfigError(f"{unit}.D_MISC_CFG.PROC_PRECISION must be INT8 on {cfg.name} "
                                       "(programming guide Limitation: Data Format)")
        for unit, v in (("CDMA", cdma), ("CSC", csc)):
            if cfg.feature_data_type == "int8" and v.f("IN_PRECISION") != 0:
                raise ModelConfigError(f"{unit}.D_MISC_CFG.IN_PRECISION must be INT8 on {cfg.name}")
            if v.f("WEIGHT_FORMAT") == 1 and not cfg.weight_compression:
                raise ModelConfigError(f"{unit}.D_WEIGHT_FORMAT=COMPRESSED: {cfg.name} has no weight "
                                       "compression")
            if v.f("BATCHES") != 0 and not cfg.batch:
                raise ModelConfigError(f"{unit}.D_BATCH_NUMBER.BATCHES={v.f('BATCHES')}: multi-batch "
                                       f"is not in {cfg.name}")
        self._check_batch(cdma, csc, cacc)
        if cdma.f("WEIGHT_FORMAT") != csc.f("WEIGHT_FORMAT"):
            raise ModelConfigError(f"CDMA.D_WEIGHT_FORMAT={cdma.f('WEIGHT_FORMAT')} differs from "
                                   f"CSC's {csc.f('WEIGHT_FORMAT')}")
        if csc.f("WEIGHT_FORMAT") == 1:
            # programming guide Limitation / Convolution / General: bank 15 holds the WMB
            nb = csc.f("DATA_BANK") + 1 + csc.f("WEIGHT_BANK") + 1
            if nb > cfg.cbuf_bank_number - 1:
                raise ModelConfigError(f"CSC.D_BANK: DATA_BANK+1 + WEIGHT_BANK+1 = {nb} with compressed "
                                       f"weights: at most {cfg.cbuf_bank_number - 1} (the last CBUF bank "
                                       "holds the WMB; programming guide Limitation: Convolution)")
        if cfg.feature_data_type == "int8_int16_fp16":
            names = ("INT8", "INT16", "FP16", "3")
            proc = cdma.f("PROC_PRECISION")
            for unit, v in (("CSC", csc), ("CMAC_A", cmac), ("CACC", cacc)):
                if v.f("PROC_PRECISION") != proc:
                    raise ModelConfigError(f"{unit}.D_MISC_CFG.PROC_PRECISION={names[v.f('PROC_PRECISION')]} "
                                           f"differs from CDMA's {names[proc]}")
            if proc == 3:
                raise ModelConfigError("CDMA.D_MISC_CFG.PROC_PRECISION=3 is reserved")
            if cdma.f("DATAIN_FORMAT") == 1:
                self._check_image_precision(cdma, proc)
            if cdma.f("DATAIN_FORMAT") == 0 and cdma.f("IN_PRECISION") != proc:
                # format.rst tab_precision_conversion_conv: feature data is never converted
                raise ModelConfigError(f"CDMA.D_MISC_CFG IN_PRECISION={names[cdma.f('IN_PRECISION')]} "
                                       f"PROC_PRECISION={names[proc]}: direct convolution converts no "
                                       "precision (format.rst, Precision conversion for convolutional layer)")

        # "For any register, if it has the same name across pipeline stage, it means they have
        # the same value" (programming guide, Register definition)
        # (CDMA/CSC D_DATAIN_SIZE_EXT_0 legally differ with partial data reuse: not compared)
        same = [("D_MISC_CFG", None), ("D_DATAIN_FORMAT", "DATAIN_FORMAT"), ("D_BANK", None),
                ("D_ENTRY_PER_SLICE", None), ("D_WEIGHT_BYTES", None)]
        for reg, field in same:
            a = cdma.field(reg, field) if field else cdma.reg(reg)
            b = csc.field(reg, field) if field else csc.reg(reg)
            if a != b:
                raise ModelConfigError(f"CDMA.{reg}={a:#x} differs from CSC.{reg}={b:#x}: registers of the "
                                       "same name must hold the same value (programming guide, Register definition)")
        for f in ("DATAOUT_WIDTH", "DATAOUT_HEIGHT", "DATAOUT_CHANNEL"):
            if csc.f(f) != cacc.f(f):
                raise ModelConfigError(f"CSC.{f}={csc.f(f)} differs from CACC.{f}={cacc.f(f)}")
        db, wb = csc.f("DATA_BANK") + 1, csc.f("WEIGHT_BANK") + 1
        if db + wb > cfg.cbuf_bank_number:
            raise ModelConfigError(f"CSC.D_BANK: DATA_BANK+1 + WEIGHT_BANK+1 = {db + wb} exceeds the "
                                   f"{cfg.cbuf_bank_number} CBUF banks")
        k = csc.f("WEIGHT_KERNEL") + 1
        if cdma.f("WEIGHT_KERNEL") + 1 != k:
            raise ModelConfigError(f"CDMA.D_WEIGHT_SIZE_1.WEIGHT_KERNEL+1={cdma.f('WEIGHT_KERNEL') + 1} "
                                   f"differs from CSC.D_WEIGHT_SIZE_EXT_1.WEIGHT_KERNEL+1={k}")
        if csc.f("DATAOUT_CHANNEL") + 1 != k:
            raise ModelConfigError(f"CSC.D_DATAOUT_SIZE_1.DATAOUT_CHANNEL+1={csc.f('DATAOUT_CHANNEL') + 1} "
                                   f"must equal the kernel count WEIGHT_KERNEL+1={k}")

    def _check_batch(self, cdma, csc, cacc) -> None:
        """Multi-batch (unit description "Multi-Batch Mode"; programming guide "Strategy
        selection" c and Limitation "Multi-batch"): CDMA, CSC and CACC count the same
        D_BATCH_NUMBER.BATCHES+1 cubes; direct convolution of feature data only (unit
        description "Image input": no multi-batch for pixel formats; Winograd is refused
        before); the cubes are fetched whole (no DATA_REUSE into or out of a batch layer: not
        settled on NVIDIA's RTL, refused)."""
        n = cdma.f("BATCHES")
        if not n and not csc.f("BATCHES") and not cacc.f("BATCHES"):
            return
        for unit, v in (("CSC", csc), ("CACC", cacc)):
            if v.f("BATCHES") != n:
                raise ModelConfigError(f"{unit}.D_BATCH_NUMBER.BATCHES={v.f('BATCHES')} differs from "
                                       f"CDMA's {n}")
        if cdma.f("DATAIN_FORMAT") == 1:
            raise ModelConfigError(f"CDMA.D_BATCH_NUMBER.BATCHES={n} with image input: multi-batch is "
                                   "for feature data only (unit description, Image input)")
        if csc.f("DATA_REUSE"):
            raise ModelConfigError(f"CSC.D_MISC_CFG.DATA_REUSE with BATCHES={n}: CBUF reuse across "
                                   "multi-batch layers is not modelled")

    # ---------------------------------------------------------------- CDMA: data
    def _fetch_feature(self, cdma, batch: int = 0) -> np.ndarray:
        """CDMA direct-convolution fetch: the feature cube (C, H, W) int64 as stored in memory
        (format.rst "Feature Data Format"; D_LINE_STRIDE / D_SURF_STRIDE in bytes), through
        CDMA's input converter when D_CVT_CFG.CVT_EN is set.

        Observed in NVIDIA nv_small RTL (NV_NVDLA_CDMA_cvt: ``cvt_wr_en`` takes the DC writes as
        well as the image ones; NV_NVDLA_CDMA_dc ties the mean and unsigned flags of its writes
        to 0) and on its runs of generated programs (every pixel of a CVT_EN program arrived at
        CMAC as the converted value): feature bytes are converted as signed int8 with CVT_OFFSET
        (never the per-channel means, whatever MEAN_FORMAT says), CVT_SCALE and CVT_TRUNCATE.
        The padding CSC inserts is not converted.

        ``batch``: the cube of that batch in a multi-batch layer, D_BATCH_STRIDE bytes after
        the previous one (nvdlav1 RTL NV_NVDLA_CDMA_dc.v: each batch's request address is the
        previous batch's plus the stride, the first the data address)."""
        w, h, c = cdma.f("DATAIN_WIDTH") + 1, cdma.f("DATAIN_HEIGHT") + 1, cdma.f("DATAIN_CHANNEL") + 1
        base = cdma.addr("D_DAIN_ADDR_HIGH_0", "D_DAIN_ADDR_LOW_0")
        if batch:
            base += batch * cdma.bytes("BATCH_STRIDE")
        eb = self._elem_bytes(cdma)
        raw = read_cube(ram(self.mem, self.cv_mem, cdma.f("DATAIN_RAM_TYPE")), base, w, h, c,
                        cdma.bytes("LINE_STRIDE"), cdma.bytes("SURF_STRIDE"),
                        self.cfg.atom_bytes, eb)
        if self._fp16(cdma):
            # fp16 bit patterns, never converted (CVT_EN or not); NAN_TO_ZERO turns NaNs into
            # +0 (nvdlav1 RTL, NV_NVDLA_CDMA_cvt: the converter cell passes fp16 bits, the
            # NaN flush acts on the written data)
            x = raw.astype(np.int64)
            if cdma.f("NAN_TO_ZERO"):
                x = np.where(fp16_isnan(x), 0, x)
            return x
        if eb == 2:
            if cdma.f("CVT_EN"):       # int16: always signed, CVT_OFFSET (never the means)
                return cdma_convert(raw, True, _s(cdma.f("CVT_OFFSET"), 16),
                                    _s(cdma.f("CVT_SCALE"), 16), cdma.f("CVT_TRUNCATE"), 16)
            return raw.view(np.int16).astype(np.int64)
        if cdma.f("CVT_EN"):
            return cdma_convert(raw, True, _s(cdma.f("CVT_OFFSET"), 16), _s(cdma.f("CVT_SCALE"), 16),
                                cdma.f("CVT_TRUNCATE"))
        return raw.view(np.int8).astype(np.int64)

    def _fetch_pixels(self, cdma) -> np.ndarray:
        """CDMA image fetch and conversion (format.rst "Pixel Format"; programming guide
        "CDMA.PIXEL_X/Y_OFFSET", "CDMA.PIXEL_SIGN_OVERRIDE"; precision "cc_cvt").

        Returns the CBUF lines as (Cpix, H, PAD_LEFT + W + PAD_RIGHT) int64: channel-reordered,
        converted pixels, with CDMA's pad value in the left/right padding columns.

        nv_full's 16-bit images (facts from NVIDIA's nvdlav1 RTL NV_NVDLA_CDMA_IMG_*,
        NV_NVDLA_CDMA_cvt, agreeing with its C model): a 16-bit container's component is its
        whole little-endian word (packed 10-bit: ``f << 6``, alpha ``a << 14``), extended to 17
        bits signed when PIXEL_SIGN_OVERRIDE is set, else unsigned; the converter cell is
        int8's with int16 saturation for PROC INT16, and its int17 value rounded to fp16
        (ties to even, +-65504 at most, never -0) for PROC FP16; fp16 pixels pass unchanged
        (CVT_EN or not), a NaN one +0 with NAN_TO_ZERO; without CVT_EN (IN = PROC) the container
        goes to CBUF as it is (read as int16). The left/right padding holds all 16 bits of
        PAD_VALUE for 16-bit PROC precisions.
        """
        cfg = self.cfg
        fmt = cdma.f("PIXEL_FORMAT")
        try:
            name, bpp, cont, cpix = pixel_format(fmt)
        except KeyError:
            raise ModelConfigError(f"CDMA.D_DATAIN_FORMAT.PIXEL_FORMAT={fmt} is undefined") from None
        if cont and len(cfg.precisions) == 1:
            raise ModelConfigError(f"CDMA.D_DATAIN_FORMAT.PIXEL_FORMAT={fmt}: needs int16/fp16 input "
                                   f"precision, {cfg.name} is int8 only (format.rst tab_pixel_formats)")
        if cdma.f("PIXEL_MAPPING") != 0:
            raise ModelConfigError("CDMA.D_DATAIN_FORMAT.PIXEL_MAPPING must be PITCH_LINEAR")
        if cdma.f("PIXEL_Y_OFFSET") != 0:
            raise ModelConfigError("CDMA.D_PIXEL_OFFSET.PIXEL_Y_OFFSET must be 0 for pitch linear "
                                   "(programming guide Limitation: Image)")
        w, h, c = cdma.f("DATAIN_WIDTH") + 1, cdma.f("DATAIN_HEIGHT") + 1, cdma.f("DATAIN_CHANNEL") + 1
        if c != cpix:
            raise ModelConfigError(f"CDMA.D_DATAIN_SIZE_1.DATAIN_CHANNEL+1={c}: format "
                                   f"{name} has {cpix} channels (tab_pixel_formats)")
        xoff = cdma.f("PIXEL_X_OFFSET")
        if cont and xoff >= cfg.atom_bytes // bpp[0]:
            # nvdlav1 RTL NV_NVDLA_CDMA_IMG_ctrl asserts it (programming guide: the offset is
            # (roi & 0x1F) / bytes per pixel)
            raise ModelConfigError(f"CDMA.D_PIXEL_OFFSET.PIXEL_X_OFFSET={xoff} must be below the "
                                   f"{cfg.atom_bytes // bpp[0]} pixels of a memory atom of {name}")
        if len(bpp) == 2:
            self._check_semi_planar_x_offset(cdma, bpp, w, xoff)
        planes = []
        for p, (b, hi, lo, stride) in enumerate(zip(bpp, ("D_DAIN_ADDR_HIGH_0", "D_DAIN_ADDR_HIGH_1"),
                                                    ("D_DAIN_ADDR_LOW_0", "D_DAIN_ADDR_LOW_1"),
                                                    ("LINE_STRIDE", "UV_LINE_STRIDE"))):
            # Observed in NVIDIA nv_small RTL (NV_NVDLA_CDMA_IMG_ctrl pixel_planar*_mask) and on
            # its runs: the x offset counts pixels inside one memory atom only, i.e. the low
            # log2(atom_bytes / bytes_per_pixel) bits of PIXEL_X_OFFSET are used (bit 0 for
            # 4-byte pixels on nv_small; format.rst's 0..31 ranges assume 32-byte atoms).
            mask = cfg.atom_bytes // b - 1
            xo = xoff & mask
            base = cdma.addr(hi, lo) + xo * b
            # Observed on NVIDIA's nv_small and nv_small_256 RTL (NV_NVDLA_CDMA_IMG_ctrl
            # pixel_planar0_lp_burst) and confirmed on 160 generated image layers through
            # --rtl-filelist: plane 0's count of left-padding atoms compares the WHOLE
            # PIXEL_X_OFFSET with PAD_LEFT's in-atom part (plane 1 compares the in-atom offset).
            # When only the whole offset reaches it (xo < PAD_LEFT & mask <= PIXEL_X_OFFSET) one
            # padding atom too few is counted, and every line arrives one memory atom later
            # in memory: its pixels start one atom further on.
            if p == 0 and xo < (cdma.f("PAD_LEFT") & mask) <= xoff:
                base += cfg.atom_bytes
            ls = cdma.bytes(stride)
            addrs = base + np.arange(h, dtype=np.int64)[:, None] * ls + np.arange(w * b, dtype=np.int64)[None, :]
            planes.append(ram(self.mem, self.cv_mem, cdma.f("DATAIN_RAM_TYPE"))
                          .gather(addrs).reshape(h, w, b))
        px = np.concatenate(planes, axis=2).astype(np.int64)     # (H, W, bytes per pixel)
        if fmt in PIXEL_FORMATS_10:
            word = px[:, :, 0] | px[:, :, 1] << 8 | px[:, :, 2] << 16 | px[:, :, 3] << 24
            raw = np.stack([((word >> lsb) & ((1 << n) - 1)) << (16 - n)
                            for lsb, n in PIXEL_FORMATS_10[fmt][1]])
        elif cont:
            el = px[:, :, 0::2] | px[:, :, 1::2] << 8              # 16-bit elements
            raw = np.stack([el[:, :, i] for i in PIXEL_FORMATS_16[fmt][3]])
        else:
            raw = np.stack([px[:, :, i] for i in PIXEL_FORMATS_INT8[fmt][2]])   # (Cpix, H, W)
        proc = cdma.f("PROC_PRECISION") if len(cfg.precisions) > 1 else 0
        if cont == 2:
            val = np.where(fp16_isnan(raw), 0, raw) if cdma.f("NAN_TO_ZERO") else raw
        elif cdma.f("CVT_EN"):
            # Observed in NVIDIA cmod (process_one_element_*) and confirmed on its RTL: the
            # converter subtracts the per-channel mean when MEAN_FORMAT is enabled, otherwise
            # CVT_OFFSET, never both; with CVT_EN off the byte passes unchanged (no mean).
            if cdma.f("MEAN_FORMAT"):
                means = [_s(cdma.f(m), 16) for m in ("MEAN_RY", "MEAN_GU", "MEAN_BV", "MEAN_AX")]
                off = np.array(means[:cpix], np.int64)[:, None, None]
            else:
                off = _s(cdma.f("CVT_OFFSET"), 16)
            args = (bool(cdma.f("PIXEL_SIGN_OVERRIDE")), off, _s(cdma.f("CVT_SCALE"), 16),
                    cdma.f("CVT_TRUNCATE"))
            in_bits = 16 if cont else 8
            if proc == 2:
                q = cdma_convert(raw, *args, out_bits=17, in_bits=in_bits)
                val = np.clip(q, -65504, 65504).astype(np.float16).view(np.uint16).astype(np.int64)
            else:
                val = cdma_convert(raw, *args, out_bits=16 if proc else 8, in_bits=in_bits)
        else:
            val = raw.astype(np.uint16 if cont else np.uint8).view(np.int16 if cont else np.int8)
        pl, pr = cdma.f("PAD_LEFT"), cdma.f("PAD_RIGHT")
        # Observed in NVIDIA nv_small RTL (NV_NVDLA_CDMA_cvt cvt_out_pad_mask) and cmod
        # (pad_value_8): the left/right padding of image lines is the low byte of CDMA's
        # D_ZERO_PADDING_VALUE inserted after the converter, not passed through it (all 16 bits
        # for 16-bit PROC precisions: an int16 or an fp16 pattern, nvdlav1's cvt)
        pv = cdma.f("PAD_VALUE")
        pad = _s(pv, 8) if proc == 0 else _s(pv, 16) if proc == 1 else pv & 0xFFFF
        out = np.full((cpix, h, pl + w + pr), pad, np.int64)
        out[:, :, pl:pl + w] = val
        return out

    def _check_semi_planar_x_offset(self, cdma, bpp, w: int, xoff: int) -> None:
        """Semi-planar formats: NVIDIA's nv_small RTL (NV_NVDLA_CDMA_IMG_ctrl) counts a line's
        right-padding atoms per plane as ``((PL + W-1 + PR) >> sft) + 2 - lp - (((W-1 + xo) >>
        sft) + 1)`` (``sft`` = log2 of the pixels per atom, ``xo`` the plane's x offset: the
        whole PIXEL_X_OFFSET for plane 0, its in-atom part for plane 1). Observed through
        --rtl-filelist: when that count is negative for a two-plane format the lines arrive
        wrong (Y bytes of the next line taken from the UV plane), for one-plane formats it is
        harmless (the model's results hold). Raises ModelConfigError for the former."""
        pl, pr = cdma.f("PAD_LEFT"), cdma.f("PAD_RIGHT")
        for p, b in enumerate(bpp):
            sft = (self.cfg.atom_bytes // b).bit_length() - 1
            mask = (1 << sft) - 1
            xo = xoff if p == 0 else xoff & mask
            lp = (pl >> sft) + (0 if xo >= (pl & mask) else 1)
            rp = ((pl + w - 1 + pr) >> sft) + 2 - lp - (((w - 1 + xo) >> sft) + 1)
            if rp < 0:
                raise ModelConfigError(
                    f"CDMA.D_PIXEL_OFFSET.PIXEL_X_OFFSET={xoff} with DATAIN_WIDTH+1={w}, PAD_LEFT={pl}, "
                    f"PAD_RIGHT={pr}: plane {p} of this semi-planar format would need {-rp} atoms fewer "
                    "than its x offset fetches (NVIDIA's RTL then delivers wrong lines; keep "
                    "PIXEL_X_OFFSET + DATAIN_WIDTH within the line's padded atoms)")

    def _data(self, cdma, csc) -> tuple[np.ndarray, str]:
        """The data slices CSC sees this layer, after CBUF reuse/release rules.

        Programming guide "<CDMA|CSC>.WEIGHT/DATA_REUSE", "CSC.D_RELEASE" and Limitation
        "CSC::RLS_SLICES"; observed in NVIDIA cmod (csc DataLoadSequenceThread) and nv_small RTL
        (NV_NVDLA_CDMA_dc: the fetch is skipped when DATA_REUSE follows a SKIP_DATA_RLS layer of
        the same mode and banks; NV_NVDLA_CSC_dl slice_left): a layer keeps its last
        H - (RLS_SLICES+1) slices (all with SKIP_DATA_RLS); the next layer uses them before its
        own fetched slices when it sets DATA_REUSE, else they are dropped.
        """
        img = cdma.f("DATAIN_FORMAT") == 1
        key = ("img" if img else "dc", csc.f("DATA_BANK"), csc.f("WEIGHT_BANK"))
        reuse = csc.f("DATA_REUSE")
        prev = self.data if (self.data is not None and self.data["key"] == key) else None
        if reuse and prev is not None and prev.get("batches"):
            raise ModelConfigError(f"CSC.D_MISC_CFG.DATA_REUSE after a multi-batch layer "
                                   f"({prev['batches']} cubes): not modelled")
        if reuse and prev is not None:
            _check_reuse_precision("DATA_REUSE", "slices", prev["prec"], cdma.f("PROC_PRECISION"))
        if reuse and prev is not None and prev["skip_rls"]:
            cube = prev["cube"]                                # entire reuse: CDMA fetch skipped
            how = "reused"
        else:
            new = self._fetch_pixels(cdma) if img else self._fetch_feature(cdma)
            if reuse and prev is not None and prev["cube"].shape[2] > 0 and prev["cube"].shape[1] > 0:
                old = prev["cube"]
                if old.shape[0] != new.shape[0] or old.shape[2] != new.shape[2]:
                    raise ModelConfigError("DATA_REUSE: slices left in CBUF have width/channels "
                                           f"{old.shape[2]}/{old.shape[0]}, the new fetch {new.shape[2]}/{new.shape[0]}")
                cube = np.concatenate([old, new], axis=1)
                how = "partial"
            else:
                cube = new
                how = "fetched"
        h_ext = csc.f("DATAIN_HEIGHT_EXT") + 1
        if cube.shape[1] != h_ext:
            raise ModelConfigError(f"CSC.D_DATAIN_SIZE_EXT_0.DATAIN_HEIGHT_EXT+1={h_ext} but CBUF holds "
                                   f"{cube.shape[1]} slices ({how}; programming guide Limitation: RLS_SLICES "
                                   "counts unreleased slices into DATAIN_HEIGHT_EXT)")
        return cube, ("img" if img else "dc")

    def _release_data(self, csc, cube, mode, prec):
        key = (mode, csc.f("DATA_BANK"), csc.f("WEIGHT_BANK"))
        if csc.f("SKIP_DATA_RLS"):
            self.data = {"key": key, "cube": cube, "skip_rls": True, "prec": prec}
        else:
            rls = csc.f("RLS_SLICES") + 1
            self.data = {"key": key, "cube": cube[:, rls:, :], "skip_rls": False, "prec": prec}

    # ---------------------------------------------------------------- CDMA: weights
    def _weights(self, cdma, csc, mode, shape) -> np.ndarray:
        """Weights (K, R, S, C) int64 for this layer: fetched (format.rst "Weight Format") or
        kept in CBUF from the previous layer (WEIGHT_REUSE after SKIP_WEIGHT_RLS; the cmod
        rejects WEIGHT_REUSE after a layer that released its weights)."""
        key = (mode, csc.f("DATA_BANK"), csc.f("WEIGHT_BANK"))
        banks = key[1:]
        if self.wt_drift is not None and self.wt_drift["banks"] != banks:
            self.wt_drift = None        # a bank change: CSC's pending handshake resets the ring
        if self.wt_drift is not None and not csc.f("WEIGHT_REUSE"):
            d = self.wt_drift["entries"]
            raise ModelConfigError(
                f"CBUF weight ring out of step: an earlier layer's D_WEIGHT_BYTES wrote {d} CBUF "
                "entries more than the R*S*C*K bytes CSC read and released (it released them "
                "without SKIP_WEIGHT_RLS), so with the same D_BANK NVIDIA's CSC reads this "
                f"layer's weights {d} entries before where CDMA writes them (observed on NVIDIA's "
                "nv_small RTL, NV_NVDLA_CSC_wl wt_entry_st: a normal release frees the entries "
                "read, a release of kept weights frees WEIGHT_BYTES). Pad weights only in layers "
                "that keep them (SKIP_WEIGHT_RLS), or change D_BANK")
        if csc.f("WEIGHT_REUSE"):
            w = self.weights
            if w is None or w["key"] != key:
                raise ModelConfigError("CSC.D_MISC_CFG.WEIGHT_REUSE: no weights kept in CBUF (previous layer "
                                       "needs SKIP_WEIGHT_RLS and the same CONV_MODE, DATAIN_FORMAT and D_BANK; "
                                       "programming guide Limitation: Convolution)")
            _check_reuse_precision("WEIGHT_REUSE", "weights", w["prec"], cdma.f("PROC_PRECISION"))
            if w.get("format", 0) != csc.f("WEIGHT_FORMAT"):
                raise ModelConfigError("WEIGHT_REUSE of weights kept in the other D_WEIGHT_FORMAT "
                                       "(compressed / uncompressed): not modelled")
            if w["w"].shape != shape:
                raise ModelConfigError(f"WEIGHT_REUSE: kept weights are {w['w'].shape}, layer needs {shape}")
            return w["w"]
        k, r, s, c = shape
        base = cdma.addr("D_WEIGHT_ADDR_HIGH", "D_WEIGHT_ADDR_LOW")
        ext = 1 << csc.f("Y_EXTENSION")
        mem = ram(self.mem, self.cv_mem, cdma.f("WEIGHT_RAM_TYPE"))
        eb = self._elem_bytes(cdma)
        if csc.f("WEIGHT_FORMAT") == 1:
            mem, base = self._decompressed(cdma, csc, mem, base, k, r * s * c,
                                           self.cfg.mac_atomic_k // eb, eb), 0
        if ext > 1:
            wts = read_weights_post_ext(mem, base, k, r, c, ext, self.cfg.mac_atomic_k // eb, eb)
        else:
            wts = read_weights(mem, base, k, r, s, c, self.cfg.mac_atomic_c,
                               self.cfg.mac_atomic_k // eb, eb)
        if not self._fp16(cdma):
            return wts
        wts = wts & 0xFFFF                                         # fp16 bit patterns
        if cdma.f("NAN_TO_ZERO"):
            # NaN weights are written to CBUF as +0 (nvdlav1 RTL, NV_NVDLA_CDMA_wt.v: nan_pass =
            # ~NAN_TO_ZERO | ~fp16 selects the weight bytes masked by their NaN flags; seen on
            # NVIDIA's RTL: a random fp16 program's NaN weights did not make NaN outputs)
            wts = np.where(fp16_isnan(wts), 0, wts)
        return wts

    def _decompressed(self, cdma, csc, mem, base: int, k: int, per_kernel: int, atom_k: int,
                      eb: int):
        """Compressed weights of ``k`` kernels of ``per_kernel`` elements, in kernel groups of
        ``atom_k`` (D_WEIGHT_FORMAT=COMPRESSED), as a memory holding
        their uncompressed bytes at 0 (:func:`decompress_weights`): CDMA fetches D_WEIGHT_BYTES
        bytes of non-zero weights from D_WEIGHT_ADDR and D_WMB_BYTES bytes of WMB from
        D_WMB_ADDR, the same memory (programming guide Limitation: "WMB and weight data MUST
        has the same RAM type"). D_WEIGHT_BYTES is the compressed size rounded up to 128 bytes
        (nvdlav1 RTL NV_NVDLA_CDMA_wt.v fetches D_WEIGHT_BYTES and requires it all for the last
        kernel group; the cmod fails a layer whose CBUF weight entries are not all used), as is
        D_WMB_BYTES the WMB's (format.rst: both surfaces aligned to 128 bytes); other counts
        are refused. WGS, a 32-bit word per kernel group at D_WGS_ADDR, must hold each
        group's non-zero bytes (NVIDIA's RTL paces the weight fetch by it, NV_NVDLA_CDMA_wt.v
        wt_required_bytes: other values are refused, their outcome is not settled). Sets
        ``self.nz_bytes`` (bytes of non-zero weights)."""
        n = k * per_kernel
        wbytes, wmb_bytes = csc.bytes("WEIGHT_BYTES"), csc.bytes("WMB_BYTES")
        if cdma.bytes("WMB_BYTES") != wmb_bytes:
            raise ModelConfigError(f"CDMA.D_WMB_BYTES={cdma.bytes('WMB_BYTES')} differs from CSC's {wmb_bytes}")
        need_wmb = -(-(-(-n // 8)) // 128) * 128
        if wmb_bytes != need_wmb:
            raise ModelConfigError(f"D_WMB_BYTES={wmb_bytes} must be the WMB's {-(-n // 8)} bytes ({n} "
                                   "weight elements, a bit each) rounded up to 128 (format.rst, Sparse "
                                   "Compression option)")
        wmb = mem.read(cdma.addr("D_WMB_ADDR_HIGH", "D_WMB_ADDR_LOW"), wmb_bytes)
        dense = decompress_weights(mem.read(base, wbytes), wmb, n, eb)
        bits = np.unpackbits(np.frombuffer(wmb, np.uint8), bitorder="little")[:n].astype(np.int64)
        self.nz_bytes = int(bits.sum()) * eb
        groups = -(-k // atom_k)
        wgs = np.frombuffer(mem.read(cdma.addr("D_WGS_ADDR_HIGH", "D_WGS_ADDR_LOW"), 4 * groups), "<u4")
        for g in range(groups):
            nzg = int(bits[g * atom_k * per_kernel:min(k, (g + 1) * atom_k) * per_kernel].sum()) * eb
            if int(wgs[g]) != nzg:
                raise ModelConfigError(f"WGS of kernel group {g} (D_WGS_ADDR + {4 * g}) = {int(wgs[g])}, "
                                       f"but the WMB marks {nzg} bytes of non-zero weights in it")
        if not self.nz_bytes:
            raise ModelConfigError("compressed weights with no non-zero weight (D_WEIGHT_BYTES=0): "
                                   "not settled on NVIDIA's RTL")
        if wbytes != -(-self.nz_bytes // 128) * 128:
            raise ModelConfigError(f"D_WEIGHT_BYTES={wbytes} with compressed weights must be the "
                                   f"{self.nz_bytes} bytes of non-zero weights rounded up to 128 "
                                   "(format.rst, Sparse Compression option)")
        ent_b = entry_bytes(self.cfg, eb)
        if wbytes // ent_b != -(-self.nz_bytes // ent_b):
            # the rounding covers a CBUF entry the weights do not fill: how NVIDIA's CSC
            # releases it is not settled (uncompressed weights: _weights' ring drift)
            raise ModelConfigError(f"D_WEIGHT_BYTES={wbytes}: {self.nz_bytes} bytes of non-zero weights "
                                   f"fill {-(-self.nz_bytes // ent_b)} CBUF entries of {ent_b} bytes, the "
                                   "rounding to 128 covers one more (compressed weights: not settled on "
                                   "NVIDIA's RTL)")
        out = Memory()
        out.write(0, dense)
        return out

    # ---------------------------------------------------------------- run
    def run(self, cdma, csc, cmac, cacc) -> np.ndarray:
        """Execute one convolution hardware layer; see the class docstring."""
        cfg = self.cfg
        self._check_common(cdma, csc, cmac, cacc)
        eb = self._elem_bytes(cdma)
        ent_b = entry_bytes(cfg, eb)
        img = cdma.f("DATAIN_FORMAT") == 1
        k = csc.f("WEIGHT_KERNEL") + 1
        wo, ho = csc.f("DATAOUT_WIDTH") + 1, csc.f("DATAOUT_HEIGHT") + 1
        sx, sy = csc.f("CONV_X_STRIDE_EXT") + 1, csc.f("CONV_Y_STRIDE_EXT") + 1
        dx, dy = csc.f("X_DILATION_EXT") + 1, csc.f("Y_DILATION_EXT") + 1
        r = csc.f("WEIGHT_HEIGHT_EXT") + 1
        s = csc.f("WEIGHT_WIDTH_EXT") + 1
        cw = csc.f("WEIGHT_CHANNEL_EXT") + 1
        c_in = csc.f("DATAIN_CHANNEL_EXT") + 1
        w_in = csc.f("DATAIN_WIDTH_EXT") + 1
        ext = 1 << csc.f("Y_EXTENSION") if csc.f("Y_EXTENSION") < 3 else None
        # CSC's copies of stride / padding / dilation drive the arithmetic (observed in NVIDIA
        # nv_small RTL NV_NVDLA_CSC_dl: datain_w_cnt_st = -pad_left, datain_h_cnt_st = -pad_top);
        # CDMA's stride is not used by the data path; CDMA's padding only matters for images
        # (left/right padding is inserted by CDMA, CSC's PAD_LEFT is ignored for images).
        if (cdma.f("CONV_X_STRIDE") + 1, cdma.f("CONV_Y_STRIDE") + 1) != (sx, sy):
            raise ModelConfigError(f"CDMA.D_CONV_STRIDE ({cdma.f('CONV_X_STRIDE') + 1},{cdma.f('CONV_Y_STRIDE') + 1}) "
                                   f"differs from CSC.D_CONV_STRIDE_EXT ({sx},{sy}) (programming guide "
                                   "CSC.CONV_STRIDE_X/Y_EXT: equal for direct and image convolution)")
        if ext is None:
            raise ModelConfigError("CSC.D_POST_Y_EXTENSION.Y_EXTENSION=3 is reserved (1, 2 or 4 lines)")
        pt = csc.f("PAD_TOP")
        if cdma.f("PAD_TOP") != pt:
            raise ModelConfigError(f"CDMA.D_ZERO_PADDING.PAD_TOP={cdma.f('PAD_TOP')} differs from CSC PAD_TOP={pt}")
        self.layers += 1
        if not img:
            if (csc.f("PAD_LEFT") != cdma.f("PAD_LEFT")):
                raise ModelConfigError(f"CDMA.D_ZERO_PADDING.PAD_LEFT={cdma.f('PAD_LEFT')} differs from "
                                       f"CSC PAD_LEFT={csc.f('PAD_LEFT')}")
            if ext != 1:
                raise ModelConfigError("CSC.D_POST_Y_EXTENSION: channel post-extension is for image input only")
            if cw != c_in:
                raise ModelConfigError(f"CSC WEIGHT_CHANNEL_EXT+1={cw} must equal DATAIN_CHANNEL_EXT+1={c_in} "
                                       "for direct convolution (programming guide WEIGHT_SIZE_EXT table)")
            if (cdma.f("DATAIN_CHANNEL") + 1, cdma.f("DATAIN_WIDTH") + 1) != (c_in, w_in):
                raise ModelConfigError("CDMA.D_DATAIN_SIZE width/channel differ from CSC.D_DATAIN_SIZE_EXT "
                                       "(direct convolution: equal, programming guide DATAIN_SIZE_EXT table)")
            bpk = r * s * cw * eb
            sd, rd = (s - 1) * dx + 1, (r - 1) * dy + 1
            pl, pr, pb = csc.f("PAD_LEFT"), cdma.f("PAD_RIGHT"), cdma.f("PAD_BOTTOM")
            need_entries = feature_entries_per_slice(cfg, w_in, c_in, eb)
        else:
            if (dx, dy) != (1, 1):
                raise ModelConfigError("CSC.D_DILATION_EXT: dilation is not supported for image input "
                                       "(programming guide Limitation: Image)")
            if s != 1:
                raise ModelConfigError(f"CSC.D_WEIGHT_SIZE_EXT_0.WEIGHT_WIDTH_EXT+1={s}: image weights are "
                                       "pre-extended to width 1 (programming guide WEIGHT_SIZE_EXT table)")
            if cw % c_in:
                raise ModelConfigError(f"CSC WEIGHT_CHANNEL_EXT+1={cw} must be the kernel width times "
                                       f"DATAIN_CHANNEL_EXT+1={c_in} for image input")
            if ext > 1 and cw * ext > cfg.mac_atomic_c:
                raise ModelConfigError(f"CSC.D_POST_Y_EXTENSION: {ext}-line post-extension needs kernel "
                                       f"line bytes*{ext} <= {cfg.mac_atomic_c} (one atomic channel)")
            # unit description table "Limits of channel post-extension" (conv_x_stride *
            # ori_channel_size <= 32 at 2 lines, 16 at 4 lines for 64 atomic channels): NVIDIA's
            # nv_small RTL sends CMAC mostly empty atoms when it is broken (observed through
            # --rtl-filelist: T_X8R8G8B8, 2 lines, x stride 2)
            if ext > 1 and sx * c_in * ext > cfg.mac_atomic_c:
                raise ModelConfigError(f"CSC.D_POST_Y_EXTENSION: {ext}-line post-extension needs "
                                       f"CONV_X_STRIDE_EXT+1 ({sx}) * DATAIN_CHANNEL_EXT+1 ({c_in}) <= "
                                       f"{cfg.mac_atomic_c // ext} (unit description: Limits of channel "
                                       "post-extension)")
            bpk = r * cw * eb
            sd, rd = cw // c_in, r
            pl, pr, pb = cdma.f("PAD_LEFT"), cdma.f("PAD_RIGHT"), cdma.f("PAD_BOTTOM")
            need_entries = -(-((pl + cdma.f("DATAIN_WIDTH") + 1 + pr) * c_in) // cfg.cbuf_bank_width)
        if cdma.f("BYTE_PER_KERNEL") + 1 != bpk:
            raise ModelConfigError(f"CDMA.D_WEIGHT_SIZE_0.BYTE_PER_KERNEL+1={cdma.f('BYTE_PER_KERNEL') + 1} "
                                   f"must be R*S*C={bpk}")
        # programming guide "<CDMA|CSC>.WEIGHT_BYTES": R*S*C*BPE*K; NVIDIA's traces program it
        # rounded up to 128 bytes (format.rst: "Append 0s ... for 128-byte alignment"), and
        # NVIDIA's nv_small RTL never finishes a layer whose count is not a multiple of 128
        # (observed through --rtl-filelist: 246 bytes hang with CDMA and CSC busy, 256 pass)
        wbytes = csc.bytes("WEIGHT_BYTES")
        compressed = csc.f("WEIGHT_FORMAT") == 1        # D_WEIGHT_BYTES checked in _weights
        if not compressed and wbytes != -(-bpk * k // 128) * 128:
            raise ModelConfigError(f"CSC.D_WEIGHT_BYTES={wbytes} must be R*S*C*K={bpk * k} rounded up to "
                                   "a multiple of 128 bytes (programming guide <CDMA|CSC>.WEIGHT_BYTES; "
                                   "NVIDIA's RTL hangs on a count that is not a multiple of 128)")
        # programming guide Limitation: "Left/Right padding should be less than S, Top/Bottom
        # padding should be less than R" (S, R dilated: NVIDIA's dc_8192x1x1 trace pads 15 with a
        # 2x3 kernel dilated to 23x31)
        for name, p, lim in (("PAD_LEFT", pl, sd), ("PAD_RIGHT", pr, sd), ("PAD_TOP", pt, rd),
                             ("PAD_BOTTOM", pb, rd)):
            if p >= lim:
                dim = "width" if name in ("PAD_LEFT", "PAD_RIGHT") else "height"
                raise ModelConfigError(f"D_ZERO_PADDING.{name}={p} must be less than the "
                                       f"{'' if img else 'dilated '}kernel {dim} {lim} "
                                       "(programming guide Limitation: Convolution)")
        if csc.f("ENTRIES") + 1 < need_entries:
            raise ModelConfigError(f"CSC.D_ENTRY_PER_SLICE.ENTRIES+1={csc.f('ENTRIES') + 1} is less than the "
                                   f"{need_entries} CBUF entries of one input slice")

        nb = cdma.f("BATCHES") + 1
        cube, mode = self._data(cdma, csc)      # batch 0 (no reuse with batches: _check_batch)
        cubes = [cube] + [self._fetch_feature(cdma, b) for b in range(1, nb)]
        h_in = cube.shape[1]
        # programming guide "Strategy selection" c: BATCH_NUMBER * entry_per_slice * H entries
        # within the data banks (nvdlav1 RTL NV_NVDLA_CDMA_dc.v: entry_per_batch = data
        # entries * batches, entries required per grain of lines = grain * entry_per_batch)
        data_entries = (csc.f("ENTRIES") + 1) * h_in * nb
        cap = (csc.f("DATA_BANK") + 1) * (cfg.cbuf_bank_depth * cfg.cbuf_bank_width // ent_b)
        # a multi-batch layer's cubes within 256 entries per data bank, whatever the entry size
        # (programming guide "Strategy selection" c: ceil(BATCH_NUMBER * entry_per_slice * H /
        # 256) <= BANKS_FOR_DATA; nv_full's banks of 256 two-unit entries, so an INT8 layer of
        # one-unit entries gets half a bank's units): NVIDIA's nv_full RTL never finishes the
        # batch programs beyond it (verif/gen/dc.py generate_batch seeds 36, 42 and 62 of the
        # first 63; all 60 within it give the model's bytes)
        bcap = (csc.f("DATA_BANK") + 1) * (cfg.cbuf_bank_depth // 2)
        if nb > 1 and data_entries > bcap:
            raise ModelConfigError(f"CSC.D_BANK.DATA_BANK: {nb} batches x {h_in} slices of "
                                   f"{csc.f('ENTRIES') + 1} entries exceed {csc.f('DATA_BANK') + 1} "
                                   f"banks of {cfg.cbuf_bank_depth // 2} (programming guide, Strategy "
                                   "selection: multi-batch; NVIDIA's RTL hangs beyond it)")
        if data_entries > cap:
            raise ModelConfigError(f"CSC.D_BANK.DATA_BANK: {nb} x {h_in} slices of {csc.f('ENTRIES') + 1} "
                                   f"entries exceed {csc.f('DATA_BANK') + 1} banks ({cap} entries); only "
                                   "full-input mode exists (programming guide Features)")
        # output window must stay inside the padded input (Limitation: right/bottom padding)
        w_pad = pl + (w_in if not img else cdma.f("DATAIN_WIDTH") + 1) + pr
        if (wo - 1) * sx + sd > w_pad or (ho - 1) * sy + rd > pt + h_in + pb:
            raise ModelConfigError(f"CSC.D_DATAOUT_SIZE_0 {wo}x{ho}: the output window exceeds the padded "
                                   f"input {w_pad}x{pt + h_in + pb} (programming guide Limitation: "
                                   "(Output-1)*stride + S <= PL + Input + PR)")

        wshape = (k, r, s if not img else 1, cw)
        wts = self._weights(cdma, csc, mode, wshape)
        # observed in NVIDIA RTL (CSC_dl): pad_value[7:0] for int8, all 16 bits for int16
        pad_csc = _s(csc.f("PAD_VALUE"), 8 * eb)

        outs = []
        for cube in cubes:
            if self._fp16(cdma) and img:
                out = conv_img_fp16(cube, wts, ho, wo, sx, sy, pt, csc.f("PAD_VALUE") & 0xFFFF, ext,
                                    cfg.mac_atomic_c)
            elif self._fp16(cdma):
                # fp32 patterns; CLIP_TRUNCATE does not apply (verif/model/conv_fp16.py)
                out = conv_dc_fp16(cube, wts, ho, wo, sx, sy, dx, dy, pl, pt,
                                   csc.f("PAD_VALUE") & 0xFFFF, cfg.mac_atomic_c)
            else:
                if not img:
                    acc = self._conv_dc(cube, wts, ho, wo, sx, sy, dx, dy, pl, pt, pad_csc)
                else:
                    acc = self._conv_img(cube, wts, ho, wo, sx, sy, pt, pad_csc)
                out = cacc_truncate(acc, cacc.f("CLIP_TRUNCATE"), 48 if eb == 2 else 34)
            outs.append(out)
        out = outs[0] if nb == 1 else np.stack(outs)

        if nb > 1:
            # nothing a later layer may reuse (_check_batch refuses DATA_REUSE after it)
            self.data = {"key": (mode, csc.f("DATA_BANK"), csc.f("WEIGHT_BANK")), "batches": nb}
        else:
            self._release_data(csc, cube, mode, cdma.f("PROC_PRECISION"))
        key = (mode, csc.f("DATA_BANK"), csc.f("WEIGHT_BANK"))
        if csc.f("SKIP_WEIGHT_RLS"):
            self.weights = {"key": key, "w": wts, "prec": cdma.f("PROC_PRECISION"),
                            "format": csc.f("WEIGHT_FORMAT")}
        else:
            # a normal release frees the entries CSC read; CDMA wrote WEIGHT_BYTES (see _weights;
            # reused weights have this layer's shape, so the same WEIGHT_BYTES)
            self.weights = None
            drift = wbytes // ent_b - -(-(self.nz_bytes if compressed else bpk * k) // ent_b)
            if drift:
                self.wt_drift = {"banks": key[1:], "entries": drift}
        return out

    # ---------------------------------------------------------------- CSC + CMAC
    @staticmethod
    def _conv_dc(cube, wts, ho, wo, sx, sy, dx, dy, pl, pt, pad):
        """Direct convolution of (C,H,W) ``cube`` with (K,R,S,C) ``wts``: out[k,y,x] = sum over
        r,s,c of wts[k,r,s,c] * in[c, y*sy - pt + r*dy, x*sx - pl + s*dx], positions outside the
        cube reading ``pad`` (CSC's pad value). Returns (K, ho, wo) int64."""
        c, h, w = cube.shape
        k, r, s, _ = wts.shape
        hp = max(pt + h, (ho - 1) * sy + (r - 1) * dy + 1)
        wp = max(pl + w, (wo - 1) * sx + (s - 1) * dx + 1)
        p = np.full((c, hp, wp), float(pad))
        p[:, pt:pt + h, pl:pl + w] = cube
        cols = np.empty((r, s, c, ho * wo))
        for ri in range(r):
            for si in range(s):
                y0, x0 = ri * dy, si * dx
                cols[ri, si] = p[:, y0:y0 + (ho - 1) * sy + 1:sy, x0:x0 + (wo - 1) * sx + 1:sx].reshape(c, -1)
        res = wts.reshape(k, -1).astype(np.float64) @ cols.reshape(r * s * c, -1)
        return np.rint(res).astype(np.int64).reshape(k, ho, wo)

    @staticmethod
    def _conv_img(cube, wts, ho, wo, sx, sy, pt, pad):
        """Image convolution (programming guide: image weights are pre-extended to 1 x R x
        (S*C)): each CBUF line is the byte sequence of (padded) pixels, C bytes per pixel;
        out[k,y,x] = sum over r, j of wts[k,r,0,j] * line[y*sy - pt + r][x*sx*C + j]; lines
        outside the stored slices read ``pad``. Returns (K, ho, wo) int64."""
        cpix, h, wpx = cube.shape
        k, r, _, cw = wts.shape
        lines = cube.transpose(1, 2, 0).reshape(h, wpx * cpix).astype(np.float64)
        nl = max(pt + h, (ho - 1) * sy + r)
        L = max(wpx * cpix, (wo - 1) * sx * cpix + cw)
        p = np.full((nl, L), float(pad))
        p[:, wpx * cpix:] = 0.0
        p[pt:pt + h, :wpx * cpix] = lines
        xi = (np.arange(wo) * sx * cpix)[:, None] + np.arange(cw)[None, :]      # (wo, cw)
        cols = np.empty((r, cw, ho, wo))
        for ri in range(r):
            rows = p[ri:ri + (ho - 1) * sy + 1:sy]                               # (ho, L)
            cols[ri] = rows[:, xi].transpose(2, 0, 1)
        res = wts.reshape(k, -1).astype(np.float64) @ cols.reshape(r * cw, -1)
        return np.rint(res).astype(np.int64).reshape(k, ho, wo)
