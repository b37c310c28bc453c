"""PDP model: max / min / average pooling, offline (PDP_RDMA) or on the fly from SDP, with split
width.

Specification: v1_ias_unit_description.rst "Planar Data Processor", v1_ias_programming_guide.rst
"PDP programming" (working modes, D_POOLING_PADDING_CFG / D_POOLING_PADDING_VALUE_*_CFG) and its
"Limitation / PDP" section. Arithmetic widths and rounding that the documents leave open were
settled from NVIDIA's nv_small RTL (vmod/nvdla/pdp/NV_NVDLA_PDP_CORE_cal1d.v, _cal2d.v,
_unit1d.v) and cross-checked with the C model (cmod/pdp/NV_NVDLA_pdp.cpp); facts are cited where
used. Cubes are numpy int64 arrays of shape (C, H, W).
"""
from __future__ import annotations

import numpy as np

from verif.model.fp import fp16_isnan, fp16_to_fp17, fp17_add, fp17_mul, fp17_of_int, fp17_to_fp16
from verif.model.memory import ram
from verif.model.formats import (ModelConfigError, cube_addresses, flying_cube, read_cube,
                                 warn_limitation)

POOL_AVE, POOL_MAX, POOL_MIN = 0, 1, 2


def _sext(x, bits: int):
    x = np.asarray(x, dtype=np.int64) & ((1 << bits) - 1)
    return np.where(x >> (bits - 1) != 0, x - (1 << bits), x)


def _recip_round(v: np.ndarray, recip: int, out_bits: int) -> np.ndarray:
    """``v * recip / 2**16`` rounded half away from zero into ``out_bits`` bits.

    Observed in NVIDIA's RTL (NV_NVDLA_PDP_CORE_cal2d.v, "rounding 0.5=1, -0.5=-1"): the
    product with the 17-bit unsigned RECIP_KERNEL_* value has 16 fraction bits; a negative
    product rounds up only when the fraction exceeds one half; the result keeps ``out_bits``
    bits (for a non-negative product the low ``out_bits - 1`` integer bits plus the rounding
    carry), i.e. no saturation.
    """
    p = np.asarray(v, dtype=np.int64) * recip
    fl = p >> 16
    frac = p & 0xFFFF
    neg = p < 0
    pos_val = (fl & ((1 << (out_bits - 1)) - 1)) + (frac >= 0x8000)
    neg_val = fl + (frac > 0x8000)
    return _sext(np.where(neg, neg_val, pos_val), out_bits)


#: Widths of the integer AVE pipeline (width-pass sum, height-pass sum of the rows and of the
#: padding term, height-pass total, after the width division, output) per (configuration
#: family, INPUT_DATA); see :func:`pool_plane`.
#: nv_small (v2, int8 only): settled on NVIDIA's nv_small RTL. nv_full (v1): read from NVIDIA's
#: nvdlav1 RTL (NV_NVDLA_PDP_CORE_unit1d.v: 11-bit int8 / 22-bit int16 width sums; _cal2d.v: the
#: height total kept in 14 bits for int8, 22 for int16; the divisions rounded to 11 then 8 bits
#: for int8, 19 then 16 for int16); INT16 checked on it (NVIDIA's pdp_max_pooling_int16 and
#: random AVE/MIN programs), nv_full's 14-bit INT8 total not yet (it differs from nv_small's
#: only when a window's total reaches 2**13).
INT_WIDTHS = {("v2", 0): (11, 14, 15, 11, 8), ("v1", 0): (11, 14, 14, 11, 8),
              ("v1", 1): (22, 22, 22, 19, 16)}
# a v2-register-map configuration computing INT16 (e.g. nv_small+feature_data_type=
# int8_int16_fp16, the project's small 16-bit geometry) is no NVIDIA configuration: nvdlav1's is
# the only INT16 PDP there is, so its widths apply (as hdl/pdp/core16.py builds them)
INT_WIDTHS[("v2", 1)] = INT_WIDTHS[("v1", 1)]


def pool_plane(x: np.ndarray, method: int, kw: int, kh: int, sx: int, sy: int,
               pl: int, pt: int, pr: int, pb: int, ow: int, oh: int,
               pad_values=(0,) * 7, recip_w: int = 0, recip_h: int = 0,
               widths=INT_WIDTHS[("v2", 0)]) -> np.ndarray:
    """Pool a (C, H, W) int8- or int16-valued int64 cube into (C, oh, ow) (unit description
    "Planar Data Processor"; vectorised over C, H, W; loops over kernel taps). ``widths``:
    (width-pass sum, height-pass sums, height-pass total, width-divided, output) bits,
    :data:`INT_WIDTHS`; the text below gives nv_small's int8 values (11, 14, 15, 11, 8).

    Output element (oy, ox) covers input rows ``oy*sy - pt .. + kh`` and columns
    ``ox*sx - pl .. + kw``; positions outside the input are padding.
      * MAX / MIN: over the input elements of the window only (padding is ignored: programming
        guide "Register definition": the padding value is used in AVE mode only).
      * AVE, facts from NVIDIA's nv_small RTL: the width pass sums the real elements of each
        window row (11 bits); if ``n`` of its ``kw`` positions are real and n < kw it adds
        PAD_VALUE_{kw-n}X[10:0] (sign-extended) wrapping to 11 bits (cal1d.v). The height pass
        sums the real rows (14 bits); if ``m`` < kh rows are real it adds
        (PAD_VALUE_{kh-m}X * kw)[13:0] (sign-extended) wrapping to 15 bits (cal2d.v). The sum
        is then multiplied by RECIP_KERNEL_WIDTH and rounded to 11 bits, then by
        RECIP_KERNEL_HEIGHT and rounded to 8 bits (see ``_recip_round``).
    ``pad_values``: raw 19-bit register values of PAD_VALUE_1X..7X.
    """
    x = np.asarray(x, dtype=np.int64)
    c, h, w = x.shape
    span_w = (ow - 1) * sx + kw
    span_h = (oh - 1) * sy + kh
    wp = max(span_w, pl + w)
    hp = max(span_h, pt + h)
    if method == POOL_AVE:
        fill = 0
    elif method == POOL_MAX:
        fill = -(1 << 20)
    else:
        fill = 1 << 20
    # ---- width pass over the real rows ----
    xp = np.full((c, h, wp), fill, np.int64)
    xp[:, :, pl:pl + w] = x
    realw = np.zeros(wp, np.int64)
    realw[pl:pl + w] = 1
    sl_w = [slice(k, k + (ow - 1) * sx + 1, sx) for k in range(kw)]
    if method == POOL_AVE:
        rows = sum(xp[:, :, s] for s in sl_w)
        n = sum(realw[s] for s in sl_w)                       # (ow,) real columns per window
        wb, hs, hb, wa, wo = widths
        pb_ = min(wb, 19)                                     # PAD_VALUE bits the width pass adds
        pads = np.array([0] + [int(v) & ((1 << pb_) - 1) for v in pad_values] + [0] * 8, np.int64)
        add = _sext(pads[kw - n], pb_) * (n != kw)
        rows = _sext(rows + add[None, None, :], wb)
    else:
        f = np.maximum if method == POOL_MAX else np.minimum
        rows = xp[:, :, sl_w[0]]
        for s in sl_w[1:]:
            rows = f(rows, xp[:, :, s])
    # ---- height pass ----
    rp = np.full((c, hp, ow), fill, np.int64)
    rp[:, pt:pt + h, :] = rows
    realh = np.zeros(hp, np.int64)
    realh[pt:pt + h] = 1
    sl_h = [slice(k, k + (oh - 1) * sy + 1, sy) for k in range(kh)]
    if method == POOL_AVE:
        tot = _sext(sum(rp[:, s, :] for s in sl_h), hs)
        m = sum(realh[s] for s in sl_h)                       # (oh,) real rows per window
        padv = np.array([0] + [_sext(int(v), 19) * kw for v in pad_values] + [0] * 8, np.int64)
        add = _sext(padv[kh - m], hs) * (m != kh)
        tot = _sext(tot + add[None, :, None], hb)
        avg_w = _recip_round(tot, recip_w, wa)
        return _recip_round(avg_w, recip_h, wo)
    f = np.maximum if method == POOL_MAX else np.minimum
    out = rp[:, sl_h[0], :]
    for s in sl_h[1:]:
        out = f(out, rp[:, s, :])
    return out


def _fp16_pick(d0: np.ndarray, d1: np.ndarray, method: int) -> np.ndarray:
    """MAX / MIN of two fp16 bit patterns as nv_full's PDP compares them (NVIDIA's nvdlav1 RTL,
    NV_NVDLA_PDP_CORE_unit1d.v / _cal2d.v): sign and magnitude of the raw bits (infinities and
    denormals order as numbers, +0 above -0), one input passed unchanged; a NaN wins, ``d0``'s
    first."""
    s0, s1 = (d0 >> 15) & 1, (d1 >> 15) & 1
    gt = (d0 & 0x7FFF) > (d1 & 0x7FFF)
    if method == POOL_MAX:
        take0 = np.where(s0 == s1, np.where(s0 == 0, gt, ~gt), s0 == 0)
    else:
        take0 = np.where(s0 == s1, np.where(s0 == 0, ~gt, gt), s0 == 1)
    out = np.where(take0, d0, d1)
    out = np.where(fp16_isnan(d1), d1, out)
    return np.where(fp16_isnan(d0), d0, out)


def pool_plane_fp16(x: np.ndarray, method: int, kw: int, kh: int, sx: int, sy: int,
                    pl: int, pt: int, pr: int, pb: int, ow: int, oh: int,
                    pad_values=(0,) * 7, recip_w: int = 0, recip_h: int = 0) -> np.ndarray:
    """Pool a (C, H, W) cube of fp16 bit patterns (int64) into (C, oh, ow) fp16 bit patterns,
    as nv_full's PDP computes INPUT_DATA=FP16 (windows as :func:`pool_plane`). Facts from
    NVIDIA's nvdlav1 RTL (NV_NVDLA_PDP_CORE_cal1d.v, _unit1d.v, _cal2d.v), checked on it:

    * MAX / MIN: :func:`_fp16_pick` over the window's real elements, along each row with the
      running value first, then down the rows with the new row first; padding is ignored.
    * AVE, every step an fp17 operator of :mod:`verif.model.fp`, strictly in this order (fp
      addition is not associative): each row's real elements added left to right; then the
      width padding PAD_VALUE_{kw-n}X[16:0] (fp17 bits; +0 when all kw columns are real) added;
      the rows added top to bottom (the new row as first operand); then PAD_VALUE_{kh-m}X[16:0]
      times the kernel width (+0 when all kh rows are real); times RECIP_KERNEL_WIDTH[16:0],
      times RECIP_KERNEL_HEIGHT[16:0] (both fp17 bits in this mode); converted to fp16.
    """
    x = np.asarray(x, dtype=np.int64)
    c, h, w = x.shape
    wp = max((ow - 1) * sx + kw, pl + w)
    hp = max((oh - 1) * sy + kh, pt + h)
    ave = method == POOL_AVE
    xs = fp16_to_fp17(x) if ave else x
    xp = np.zeros((c, h, wp), np.int64)
    xp[:, :, pl:pl + w] = xs
    realw = np.zeros(wp, bool)
    realw[pl:pl + w] = True
    sl_w = [slice(k, k + (ow - 1) * sx + 1, sx) for k in range(kw)]

    def fold(taps, new_first):
        """Combine the real taps (``(values, real)`` in window order) one after another, the
        running value as the first operand, or the new tap with ``new_first``."""
        acc = started = None
        for val, real in taps:
            a, b = (val, acc) if new_first else (acc, val)
            comb = val if acc is None else fp17_add(a, b) if ave else _fp16_pick(a, b, method)
            acc = val if acc is None else np.where(real & started, comb, np.where(real, val, acc))
            started = real if started is None else started | real
        return acc

    # along each row left to right, the running value first
    rows = fold([(xp[:, :, s], realw[s]) for s in sl_w], new_first=False)
    if ave:
        n = sum(realw[s].astype(np.int64) for s in sl_w)
        padw = np.array([0] + [int(v) & 0x1FFFF for v in pad_values] + [0] * 8, np.int64)
        rows = fp17_add(rows, np.where(n != kw, padw[kw - n], 0)[None, None, :])
    rp = np.zeros((c, hp, ow), np.int64)
    rp[:, pt:pt + h, :] = rows
    realh = np.zeros(hp, bool)
    realh[pt:pt + h] = True
    sl_h = [slice(k, k + (oh - 1) * sy + 1, sy) for k in range(kh)]
    # down the rows top to bottom, the new row first
    out = fold([(rp[:, s, :], realh[s][None, :, None]) for s in sl_h], new_first=True)
    if not ave:
        return out
    m = sum(realh[s].astype(np.int64) for s in sl_h)
    padh = np.array([0] + [int(v) & 0x1FFFF for v in pad_values] + [0] * 8, np.int64)
    padk = fp17_mul(np.where(m != kh, padh[kh - m], 0), fp17_of_int(kw))
    out = fp17_add(out, padk[None, :, None])
    out = fp17_mul(fp17_mul(out, recip_w & 0x1FFFF), recip_h & 0x1FFFF)
    return fp17_to_fp16(out)


def line_buffer_width(kh: int, sy: int) -> int:
    """The widest output (per split band, in columns) PDP's share line buffer holds for kernel
    height ``kh`` and vertical stride ``sy`` ("Limitation / PDP": first/mid/last_out_width
    within the maximum flying width; unit description "Buffer Size Estimation").

    Facts from NVIDIA's nv_small RTL (NV_NVDLA_PDP_CORE_cal2d.v): 8 line-buffer banks of
    16 * atom / throughput entries, one output column of a throughput-wide element group per
    entry, i.e. 16 columns per bank; the layer keeps ``lines`` output lines in flight: 1 when
    the stride is at least the kernel, else kh for stride 1, ceil(kh / 2) for stride 2, 2 (kh up
    to 6) or 3 for stride 3, 2 for larger strides; banks are merged 8 / 4 / 2 / 1 per line for
    1 / 2 / 3-4 / 5-8 lines, so the width limit is 128 / 64 / 32 / 16 columns (its assertions
    "cube_out_width setting out of range"). Wider outputs hang the layer or write values that
    follow no window (observed on NVIDIA's RTL through our player)."""
    if sy >= kh:
        lines = 1
    elif sy == 1:
        lines = kh
    elif sy == 2:
        lines = -(-kh // 2)
    elif sy == 3:
        lines = 2 if kh <= 6 else 3
    else:
        lines = 2
    merge = 8 if lines == 1 else 4 if lines == 2 else 2 if lines <= 4 else 1
    return 16 * merge


class PdpCore:
    """PDP of one NVDLA (``cfg``: NvdlaConfig, ``mem``: Memory).

    ``run(rdma, pdp, flying_input)``: ``rdma``/``pdp`` GroupViews of PDP_RDMA (None on the fly)
    and PDP; ``flying_input`` the (C', H, W) cube SDP produced (C' >= CUBE_IN_CHANNEL, int8
    values) when D_OPERATION_MODE_CFG.FLYING_MODE=ON_FLYING. Writes the pooled cube through
    WDMA (D_DST_*), whole atoms of ``cfg.memory_atomic`` channels.
    """

    def __init__(self, cfg, mem, cv_mem=None):
        # cv_mem: the secondary memory (CVIF) or None (verif.model.memory.ram)
        self.cfg, self.mem, self.cv_mem = cfg, mem, cv_mem

    # ---- programming-guide limitations --------------------------------------------------
    def _geometry(self, pdp):
        g = dict(
            w=pdp.f("CUBE_IN_WIDTH") + 1, h=pdp.f("CUBE_IN_HEIGHT") + 1, c=pdp.f("CUBE_IN_CHANNEL") + 1,
            ow=pdp.f("CUBE_OUT_WIDTH") + 1, oh=pdp.f("CUBE_OUT_HEIGHT") + 1,
            oc=pdp.f("CUBE_OUT_CHANNEL") + 1,
            kw=pdp.f("KERNEL_WIDTH") + 1, kh=pdp.f("KERNEL_HEIGHT") + 1,
            sx=pdp.f("KERNEL_STRIDE_WIDTH") + 1, sy=pdp.f("KERNEL_STRIDE_HEIGHT") + 1,
            pl=pdp.f("PAD_LEFT"), pt=pdp.f("PAD_TOP"), pr=pdp.f("PAD_RIGHT"), pb=pdp.f("PAD_BOTTOM"),
            method=pdp.f("POOLING_METHOD"), split=pdp.f("SPLIT_NUM"))
        return g

    def _check(self, pdp, g, flying: bool) -> None:
        """Raise ModelConfigError for settings the programming guide ("Limitation / PDP") forbids.

        Reviewed against NVIDIA's nv_small RTL (issue 7 item 6); kept as errors unless noted:
          * POOLING_METHOD=3 (not a value of the register's enum) only warns: NVIDIA's RTL
            writes the sample for a 1x1 kernel and 0 for any larger one (see below).
          * CUBE_OUT_CHANNEL != CUBE_IN_CHANNEL: NV_NVDLA_PDP_WDMA_cmd.v / _dat.v count output
            surfaces from CUBE_OUT_CHANNEL while the core produces CUBE_IN_CHANNEL of data: the
            write side and the data disagree (the layer cannot complete normally).
          * KERNEL_WIDTH/HEIGHT above 8 are undefined values of the register's enum (1..8).
          * INPUT_DATA other than INT8 only warns on an INT8-only configuration (the RTL ignores
            it, see below); PDP_RDMA.D_FLYING_MODE too (see ``run``).
          * an output size with a remainder ((pad+in+pad-kernel) % stride != 0) only warns when it
            is the natural one, (pad+in+pad-kernel)//stride+1 (see below).
          * padding >= kernel (NVIDIA's RTL completes such layers but writes values that follow
            no window: MAX 2x2 with PAD_LEFT=2 wrote the last window's maximum everywhere),
            other output sizes,
            split widths that do not tile it: the line-buffer and counter logic of
            NV_NVDLA_PDP_CORE_cal1d.v / _cal2d.v is sized and sequenced for the documented
            ranges; what it writes outside them was not settled.
          * an output (split band) wider than the share line buffer holds
            (:func:`line_buffer_width`): NVIDIA's RTL hangs or writes values that follow no
            window.
          * a split band narrower than the overlap kernel_w - stride_x only warns: NVIDIA's RTL
            pools the memory left of the cube for the next band (see ``_check_split``, ``run``).
        """
        R = "PDP"
        if g["method"] == 3:
            # not a value of the register's enum, but NVIDIA's nv_small RTL runs it: its pooling
            # function (NV_NVDLA_PDP_CORE_cal1d.v / _cal2d.v) combines two samples to 0 for a
            # type that is not AVE/MAX/MIN, so a 1x1 kernel passes each sample and any larger
            # kernel writes 0 (observed on NVIDIA's RTL through our player: kernels 1x1 with
            # strides 1 and 2, 2x1, 1x2, 2x2, 3x3, and 3x2 with padding); see ``run``.
            warn_limitation(f"{R}.D_OPERATION_MODE_CFG.POOLING_METHOD=3 is not AVE/MAX/MIN; computing "
                            "what NVIDIA's RTL writes: the sample for a 1x1 kernel, else 0",
                            stacklevel=4)
        if g["kw"] > 8 or g["kh"] > 8:
            raise ModelConfigError(f"{R}.D_POOLING_KERNEL_CFG: kernel {g['kw']}x{g['kh']} exceeds the "
                                   "maximum supported pooling kernel size 8")
        if self.cfg.feature_data_type != "int8":
            prec = pdp.f("INPUT_DATA")
            if prec == 3 or ("int8", "int16", "fp16")[prec] not in self.cfg.precisions:
                raise ModelConfigError(f"{R}.D_DATA_FORMAT.INPUT_DATA={prec} is not one of "
                                       f"{self.cfg.name}'s precisions {self.cfg.precisions}")
        elif pdp.f("INPUT_DATA") != 0:
            # nv_small's RTL ignores the field: NV_NVDLA_pdp.v leaves PDP's reg2dp_input_data
            # unconnected (its uses in NV_NVDLA_PDP_CORE_cal1d.v / _cal2d.v / _WDMA_cmd.v are
            # commented out) and PDP_RDMA's is used by neither NV_NVDLA_PDP_RDMA_ig.v nor _eg.v:
            # the INT8 pipeline runs whatever the value.
            warn_limitation(f"{R}.D_DATA_FORMAT.INPUT_DATA={pdp.f('INPUT_DATA')}: {self.cfg.name} "
                            "supports INT8 only and its RTL ignores the field; computing INT8",
                            stacklevel=4)
        if g["oc"] != g["c"]:
            # NVIDIA's RTL (8 output channels for 12 input) completes the layer having written
            # only the surfaces CUBE_OUT_CHANNEL covers; what happens to the core's data for the
            # other surfaces (left in the pipeline for the next layer?) is not settled: kept
            raise ModelConfigError(f"{R}.D_DATA_CUBE_OUT_CHANNEL ({g['oc']}) must equal CUBE_IN_CHANNEL ({g['c']})")
        if g["pl"] >= g["kw"] or g["pr"] >= g["kw"]:
            raise ModelConfigError(f"{R}.D_POOLING_PADDING_CFG: PAD_LEFT={g['pl']}/PAD_RIGHT={g['pr']} "
                                   f"must be less than the kernel width {g['kw']} (Limitation/PDP)")
        if g["pt"] >= g["kh"] or g["pb"] >= g["kh"]:
            raise ModelConfigError(f"{R}.D_POOLING_PADDING_CFG: PAD_TOP={g['pt']}/PAD_BOTTOM={g['pb']} "
                                   f"must be less than the kernel height {g['kh']} (Limitation/PDP)")
        # The guide writes "CUBE_IN_WIDTH + PL == (CUBE_OUT_WIDTH-1)*stride_x + kernel_width" for
        # non-split mode; NVIDIA's own traces (e.g. pdp_8x8x64_2x2_int8, PR=1) satisfy it only
        # with PR added, as in its split-mode rules and "(PL+W+PR-Kernel_W)%stride_x == 0".
        for dim, n, p0, p1, k, s, o, reg in (("width", g["w"], g["pl"], g["pr"], g["kw"], g["sx"], g["ow"], "WIDTH"),
                                               ("height", g["h"], g["pt"], g["pb"], g["kh"], g["sy"], g["oh"], "HEIGHT")):
            if (p0 + n + p1 - k) % s == 0 and n + p0 + p1 == (o - 1) * s + k:
                continue
            if not g["split"] and n + p0 + p1 >= k and o == (p0 + n + p1 - k) // s + 1:
                # The natural output size with a remainder: the last (pad+in+pad-kernel) % stride
                # input lines/columns lie in no window. NVIDIA's nv_small RTL runs it and writes
                # the windows that fit, the remainder unused (observed on NVIDIA's RTL through our
                # player: MAX 2x2/2 on 5x5, AVE 3x3/2 on 6x6, MAX 3x3/2 with padding 1 on 4x4,
                # and a 1x1/2 kernel on 4x4); an output size other than that gives values that
                # follow no window (MIN 2x2/1 on 5 columns with 3 outputs): kept as an error.
                warn_limitation(
                    f"{R}.D_DATA_CUBE_OUT_{reg}={o - 1}: (pad+in+pad-kernel) % stride = "
                    f"({p0}+{n}+{p1}-{k}) % {s} != 0 breaks Limitation/PDP; computing what NVIDIA's "
                    f"RTL writes: the {o} windows that fit, the last {(p0 + n + p1 - k) % s} "
                    f"{'columns' if dim == 'width' else 'lines'} unused", stacklevel=4)
                continue
            raise ModelConfigError(
                f"{R}.D_DATA_CUBE_OUT_{reg}={o - 1}: input {dim} {n} + padding {p0}+{p1} must equal "
                f"(out-1)*stride + kernel = ({o}-1)*{s}+{k} with (pad+in+pad-kernel) % stride == 0, "
                f"or the output size be ({p0}+{n}+{p1}-{k})//{s}+1 (Limitation/PDP)")
        limit = line_buffer_width(g["kh"], g["sy"])
        outs = self._split_widths(pdp, g, "PARTIAL_WIDTH_OUT") if g["split"] else [g["ow"]]
        if max(outs) > limit:
            # NVIDIA's nv_small RTL hangs (AVE 3x5 stride 4x1, 20 outputs) or writes values that
            # follow no window (MAX 8x5 stride 4x1, 18 outputs: the second output line of the
            # first columns) beyond it (observed through our player); see line_buffer_width.
            reg = "D_PARTIAL_WIDTH_OUT" if g["split"] else "D_DATA_CUBE_OUT_WIDTH"
            raise ModelConfigError(
                f"{R}.{reg}: output width {max(outs)} (per split band) exceeds the share line "
                f"buffer's {limit} columns for kernel height {g['kh']} / stride {g['sy']} "
                "(Limitation/PDP: out widths must fit the maximum flying width)")
        if g["split"] and flying:
            raise ModelConfigError(f"{R}.D_OPERATION_MODE_CFG: SPLIT_NUM must be 0 on the fly "
                                   "(programming guide 'On-the-fly processing')")
        if g["split"]:
            self._check_split(pdp, g)

    @staticmethod
    def _split_widths(view, g, prefix: str):
        n = g["split"] + 1
        first = view.f(f"{prefix}_FIRST") + 1
        mid = view.f(f"{prefix}_MID") + 1
        last = view.f(f"{prefix}_LAST") + 1
        return [first] + [mid] * (n - 2) + [last]

    def _band_reads(self, pdp, g):
        """Per split band: (first column read, columns read, left padding, right padding,
        output columns); see ``run``."""
        ins = self._split_widths(pdp, g, "PARTIAL_WIDTH_IN")
        outs = self._split_widths(pdp, g, "PARTIAL_WIDTH_OUT")
        overlap = g["kw"] - g["sx"]
        start, bands = 0, []
        for i, (wi, wo) in enumerate(zip(ins, outs)):
            c0, n = (0, wi) if i == 0 else (start - overlap, wi + overlap)
            bands.append((c0, n, g["pl"] if i == 0 else 0, g["pr"] if i == len(ins) - 1 else 0, wo))
            start += wi
        return bands

    def _check_split(self, pdp, g) -> None:
        """Split-width rules of "Limitation / PDP" (split_num = SPLIT_NUM + 1 bands)."""
        kw, sx = g["kw"], g["sx"]
        ins = self._split_widths(pdp, g, "PARTIAL_WIDTH_IN")
        outs = self._split_widths(pdp, g, "PARTIAL_WIDTH_OUT")
        overlap = kw - sx
        if sum(outs) != g["ow"]:
            raise ModelConfigError(
                f"PDP.D_PARTIAL_WIDTH_OUT: first+mid*(split_num-2)+last = {sum(outs)} must equal "
                f"CUBE_OUT_WIDTH+1 = {g['ow']} (Limitation/PDP split mode)")
        for i, (wi, wo) in enumerate(zip(ins, outs)):
            lead = g["pl"] if i == 0 else (overlap if overlap > 0 else 0)
            trail = g["pr"] if i == len(ins) - 1 else 0
            if i == 0:
                ok = wi + g["pl"] == (wo - 1) * sx + kw
            elif i == len(ins) - 1:
                ok = wi + g["pr"] + overlap == (wo - 1) * sx + kw
            else:
                ok = wi + overlap == (wo - 1) * sx + kw
            if not ok:
                which = "FIRST" if i == 0 else "LAST" if i == len(ins) - 1 else "MID"
                raise ModelConfigError(
                    f"PDP.D_PARTIAL_WIDTH_IN/OUT {which}: in width {wi} (+ padding {lead}/{trail}, "
                    f"overlap {overlap}) does not cover (out {wo} - 1)*stride {sx} + kernel {kw} "
                    "(Limitation/PDP split mode)")
        # bands tile the input: first..last input widths add up to the cube width
        if sum(ins) != g["w"]:
            raise ModelConfigError(
                f"PDP.D_PARTIAL_WIDTH_IN: band input widths add up to {sum(ins)}, not CUBE_IN_WIDTH+1 = {g['w']}")
        # "if kernel_w >= kernel_stride, kernel_w - stride_x should be <= <first|mid>_in_width"
        # (the other half, stride_x - kernel_w < <last|mid>_in_width, follows from the width
        # equations above). NVIDIA's nv_small RTL runs a band narrower than the overlap: the
        # next band's read starts left of its own first column by the overlap
        # (NV_NVDLA_PDP_RDMA_ig.v), so a band after a narrow one starts left of column 0 and
        # pools the memory there (base + column * atom, column < 0) as data where the unsplit
        # pooling would pad (``run``; confirmed on NVIDIA's RTL through our player: MAX 6-wide
        # kernel stride 3 PAD_LEFT 4 with a 2-column first band, MIN and AVE 7-wide stride 1
        # PAD_LEFT 5 with 3-column first and mid bands, several surfaces and line gaps).
        names = ["FIRST"] + ["MID"] * (len(ins) - 2) + ["LAST"]
        narrow = [f"{nm}={wi}" for nm, wi in zip(names[:-1], ins[:-1]) if wi < overlap]
        if narrow:
            warn_limitation(
                f"PDP.D_PARTIAL_WIDTH_IN {', '.join(dict.fromkeys(narrow))} narrower than the "
                f"overlap kernel_w - stride_x = {kw}-{sx} = {overlap} breaks Limitation/PDP split "
                "mode; computing what NVIDIA's RTL writes: a later band reads the memory left of "
                "D_SRC_BASE_ADDR as data where the unsplit pooling pads", stacklevel=5)

    # ---- main -----------------------------------------------------------------------------
    def precision(self, pdp) -> int:
        """The layer's INPUT_DATA (0 INT8, 1 INT16, 2 FP16); always 0 on an int8-only
        configuration, whose RTL ignores the field (see ``_check``)."""
        return 0 if self.cfg.feature_data_type == "int8" else pdp.f("INPUT_DATA")

    def run(self, rdma, pdp, flying_input):
        """Execute one PDP hardware layer (see class docstring). INT16 and FP16 (nv_full) use
        two-byte elements, ``atom_bytes // 2`` channels per atom (format.rst), INT16 through
        :func:`pool_plane` with :data:`INT_WIDTHS`, FP16 through :func:`pool_plane_fp16`."""
        cfg = self.cfg
        g = self._geometry(pdp)
        flying = pdp.f("FLYING_MODE") == 0
        self._check(pdp, g, flying)
        prec = self.precision(pdp)
        eb = 1 if prec == 0 else 2                    # bytes per element
        atom_b = cfg.atom_bytes
        atom = atom_b // eb                           # channels per atom
        if prec and g["method"] == 3:
            raise ModelConfigError("PDP.D_OPERATION_MODE_CFG.POOLING_METHOD=3 is not AVE/MAX/MIN "
                                   "(what nv_full's RTL writes for it in INT16/FP16 is not settled)")
        if prec and not flying and rdma is not None and rdma.f("INPUT_DATA") != prec:
            # PDP_RDMA's format sets the atoms read per element column, PDP's the core and the
            # write side (NVIDIA's nvdlav1 RTL, NV_NVDLA_PDP_RDMA_ig.v / NV_NVDLA_pdp.v): a
            # mismatch feeds the core atoms it does not expect (not settled)
            raise ModelConfigError(f"PDP_RDMA.D_DATA_FORMAT.INPUT_DATA={rdma.f('INPUT_DATA')} "
                                   f"differs from PDP's INPUT_DATA={prec}")

        def load(mem, base, n):
            raw = read_cube(mem, base, n, h, cp, ls, ss, atom_b, eb)
            if prec == 0:
                return raw.view(np.int8).astype(np.int64)
            if prec == 1:
                return raw.view(np.int16).astype(np.int64)
            raw = raw.astype(np.int64)
            if pdp.f("NAN_TO_ZERO"):
                # NV_NVDLA_PDP_nan.v: FP16 NaN inputs read by PDP_RDMA become +0 (not on the fly)
                raw = np.where(fp16_isnan(raw), 0, raw)
            return raw

        w, h, c = g["w"], g["h"], g["c"]
        cp = -(-c // atom) * atom
        if flying:
            if flying_input is None:
                raise ModelConfigError("PDP.D_OPERATION_MODE_CFG.FLYING_MODE=ON_FLYING without an SDP layer")
            x = flying_cube(flying_input, w, h, c, cp, "PDP.D_DATA_CUBE_IN_*", "SDP's output")
        else:
            if rdma is None:
                raise ModelConfigError("PDP.D_OPERATION_MODE_CFG.FLYING_MODE=OFF_FLYING needs PDP_RDMA")
            if rdma.f("FLYING_MODE") != 1:
                # NVIDIA's nv_small RTL ignores PDP_RDMA's FLYING_MODE: NV_NVDLA_PDP_rdma.v wires
                # the reg2dp_flying_mode output of NV_NVDLA_PDP_RDMA_reg.v to nothing (PDP_RDMA
                # reads its cube whenever its group is enabled), and the PDP core picks its input
                # by PDP's own FLYING_MODE (NV_NVDLA_pdp.v datin_src_cfg, _CORE_preproc.v
                # onfly_en). So the layer runs offline as programmed; only a warning, since the
                # programming guide's PDP sequences set both registers alike.
                warn_limitation("PDP_RDMA.D_FLYING_MODE=ON_FLYING while PDP's is OFF_FLYING (the "
                                "programming guide sets both alike); NVIDIA's RTL ignores PDP_RDMA's "
                                "FLYING_MODE: computing the offline layer", stacklevel=3)
            rw, rh, rc = rdma.f("CUBE_IN_WIDTH") + 1, rdma.f("CUBE_IN_HEIGHT") + 1, rdma.f("CUBE_IN_CHANNEL") + 1
            if (rw, rh, rc) != (w, h, c):
                # a PDP_RDMA cube shorter than PDP's hangs NVIDIA's RTL (observed: height 2 for 4)
                raise ModelConfigError(
                    f"PDP_RDMA.D_DATA_CUBE_IN_* {rw}x{rh}x{rc} differ from PDP.D_DATA_CUBE_IN_* {w}x{h}x{c}")
            if rdma.f("SPLIT_NUM") != g["split"]:
                raise ModelConfigError("PDP_RDMA.D_OPERATION_MODE_CFG.SPLIT_NUM differs from PDP's SPLIT_NUM")
            base = rdma.addr("D_SRC_BASE_ADDR_HIGH", "D_SRC_BASE_ADDR_LOW")
            ls, ss = rdma.reg("D_SRC_LINE_STRIDE"), rdma.reg("D_SRC_SURFACE_STRIDE")
            src_mem = ram(self.mem, self.cv_mem, rdma.f("SRC_RAM_TYPE"))
            x = load(src_mem, base, w)
        pads = [pdp.reg(f"D_POOLING_PADDING_VALUE_{i}_CFG") & 0x7FFFF for i in range(1, 8)]
        method = g["method"]
        widths = INT_WIDTHS[("v1" if cfg.register_map == "v1" else "v2", prec)] if prec < 2 else None

        def pool(xx, pl, pr, ow):
            args = (g["kw"], g["kh"], g["sx"], g["sy"], pl, g["pt"], pr, g["pb"], ow, g["oh"],
                    pads, pdp.f("RECIP_KERNEL_WIDTH"), pdp.f("RECIP_KERNEL_HEIGHT"))
            if prec == 2:
                return pool_plane_fp16(xx, method, *args)
            return pool_plane(xx, POOL_MAX if method == 3 else method, *args, widths=widths)

        if method == 3 and g["kw"] * g["kh"] > 1:      # see _check: NVIDIA's RTL writes 0
            out = np.zeros((cp, g["oh"], g["ow"]), np.int64)
        elif g["split"]:
            # Split width, as NVIDIA's nv_small RTL runs it (NV_NVDLA_PDP_RDMA_ig.v: band b > 0
            # is read from (its first column - overlap) for (its width + overlap) columns,
            # overlap = kernel_width - stride_x, negative for a stride above the kernel; the
            # core pools each band on its own, PAD_LEFT on the first band only, PAD_RIGHT on
            # the last). With the split rules this is the unsplit pooling, except when a band
            # is narrower than the overlap ("Limitation / PDP": kernel_w - stride_x <=
            # first|mid_in_width): then a later band's first windows start left of column 0
            # and NVIDIA's RDMA reads the memory there (base + column * atom, column < 0) as
            # data where the unsplit pooling has padding (checked by _check_split).
            out = np.concatenate([pool(load(src_mem, (base + c0 * atom_b) % (1 << 64), n), pl, pr, ow)
                                  for c0, n, pl, pr, ow in self._band_reads(pdp, g)], axis=2)
        else:                                           # method 3 with a 1x1 kernel: the sample
            out = pool(x, g["pl"], g["pr"], g["ow"])
        dst = pdp.addr("D_DST_BASE_ADDR_HIGH", "D_DST_BASE_ADDR_LOW")
        addrs = cube_addresses(dst, g["ow"], g["oh"], cp, pdp.reg("D_DST_LINE_STRIDE"),
                               pdp.reg("D_DST_SURFACE_STRIDE"), atom_b, eb)
        dmem = ram(self.mem, self.cv_mem, pdp.f("DST_RAM_TYPE"))
        dmem.scatter(addrs, out & 0xFF)
        if eb == 2:
            dmem.scatter(addrs + 1, (out >> 8) & 0xFF)
