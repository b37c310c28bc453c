"""Convolution pipeline model (verif/model/conv.py) against independent naive formulas.

Every expected value here is computed with plain Python loops over small random cubes: direct
summation of the convolution, per-pixel conversion with byte orders derived from the pixel
format names (format.rst: components listed from most to least significant byte of a
little-endian word), and a bit-level transcription of the rounding rules. NVIDIA's traces cover
the common cases; these tests cover dilation with padding and stride, every int8 pixel format,
X offsets, mean/converter variants, CBUF reuse across layers, and illegal register combinations.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

from hdl.config import NV_SMALL, get_config
from hdl.regmap import REGMAP
from verif.model.conv import ConvCore, PIXEL_FORMATS_INT8, cacc_truncate
from verif.model.formats import ModelConfigError, write_cube
from verif.model.memory import Memory
from verif.model.regs import GroupView, UnitRegs

CFG = NV_SMALL
ATOM_C, ATOM_K = CFG.mac_atomic_c, CFG.mac_atomic_k


# ----------------------------------------------------------------------------- helpers
class Layer:
    """Register groups of CDMA, CSC, CMAC_A, CACC for one layer (group 0), set field by field
    (``regmap``: v2's, or v1's for nv_full, whose address, stride and byte-count fields keep
    their upper bits only: :meth:`set` takes them in bytes)."""

    #: fields given in bytes (v1 keeps bits 31:5, or 31:7 for WEIGHT_BYTES)
    BYTE_FIELDS = {"LINE_STRIDE", "SURF_STRIDE", "DATAIN_ADDR_LOW_0", "WEIGHT_ADDR_LOW",
                   "WEIGHT_BYTES", "DATAOUT_ADDR"}

    def __init__(self, regmap=REGMAP):
        self.v1 = regmap is not REGMAP
        self.u = {n: UnitRegs(regmap.unit(n)) for n in ("CDMA", "CSC", "CMAC_A", "CACC")}

    def set(self, unit, **fields):
        ur = self.u[unit]
        for name, val in fields.items():
            r, f = ur._field_index[name]
            if self.v1 and name in self.BYTE_FIELDS:
                val >>= f.lsb
            regs = ur.groups[0] if r.double_buffered else ur.single
            regs[r.name] = (regs[r.name] & ~(((1 << f.width) - 1) << f.lsb)) | ((val & ((1 << f.width) - 1)) << f.lsb)

    def both(self, **fields):
        for unit in ("CDMA", "CSC"):
            ur = self.u[unit]
            self.set(unit, **{k: v for k, v in fields.items() if k in ur._field_index})

    def views(self, precision=0):
        for n in ("CMAC_A", "CACC"):
            self.set(n, PROC_PRECISION=precision)
        return tuple(GroupView(self.u[n], 0) for n in ("CDMA", "CSC", "CMAC_A", "CACC"))


def rtl_cacc(a: int, t: int, acc_bits: int = 34) -> int:
    """Bit-level CACC output rounding (NV_NVDLA_CACC_CALC_int8; _int16 with ``acc_bits`` 48 in
    nvdlav1): the sum saturated to ``acc_bits``, then {pd, 16'b0} >>> t, guide bit, 15 sticky
    bits, round, saturate to int32."""
    a = max(-(1 << (acc_bits - 1)), min((1 << (acc_bits - 1)) - 1, a))
    y = (a << 16) >> t
    sticky = y & 0x7FFF
    guide = (y >> 15) & 1
    sft = y >> 16
    r = sft + (1 if guide and (a >= 0 or sticky) else 0)
    return max(-(1 << 31), min((1 << 31) - 1, r))


def round_away(num: int, t: int) -> int:
    """num / 2**t rounded half away from zero (exact, Python ints)."""
    if t == 0:
        return num
    q, rem = divmod(abs(num), 1 << t)
    if 2 * rem >= (1 << t):
        q += 1
    return q if num >= 0 else -q


def naive_weights_to_memory(w, atom_c=ATOM_C, atom_k=ATOM_K, elem_bytes=1) -> bytes:
    """format.rst DC weight mapping by explicit scan: groups of atom_k kernels; in a group scan
    C-blocks (slowest), then H, then W, then K, then C within the block (fastest); elements of
    ``elem_bytes`` bytes, little-endian."""
    k, r, s, c = len(w), len(w[0]), len(w[0][0]), len(w[0][0][0])
    out = bytearray()
    for g0 in range(0, k, atom_k):
        ks = range(g0, min(k, g0 + atom_k))
        for c0 in range(0, c, atom_c):
            for ri in range(r):
                for si in range(s):
                    for ki in ks:
                        for ci in range(c0, min(c, c0 + atom_c)):
                            out += (w[ki][ri][si][ci] & ((1 << 8 * elem_bytes) - 1)).to_bytes(elem_bytes, "little")
    return bytes(out)


def naive_dc(x, w, ho, wo, sx, sy, dx, dy, pl, pt, pad):
    """Direct summation: x[c][h][w], w[k][r][s][c]; outside positions read pad."""
    c, h, wd = len(x), len(x[0]), len(x[0][0])
    k, r, s = len(w), len(w[0]), len(w[0][0])
    out = [[[0] * wo for _ in range(ho)] for _ in range(k)]
    for ki in range(k):
        for yo in range(ho):
            for xo in range(wo):
                acc = 0
                for ri in range(r):
                    for si in range(s):
                        yy, xx = yo * sy - pt + ri * dy, xo * sx - pl + si * dx
                        inside = 0 <= yy < h and 0 <= xx < wd
                        for ci in range(c):
                            acc += w[ki][ri][si][ci] * (x[ci][yy][xx] if inside else pad)
                out[ki][yo][xo] = acc
    return out


def rnd_cube(rng, c, h, w):
    return [[[rng.randint(-128, 127) for _ in range(w)] for _ in range(h)] for _ in range(c)]


def rnd_weights(rng, k, r, s, c):
    return [[[[rng.randint(-128, 127) for _ in range(c)] for _ in range(s)] for _ in range(r)] for _ in range(k)]


def program_dc(L, *, w, h, c, k, r, s, sx=1, sy=1, dx=1, dy=1, pl=0, pr=0, pt=0, pb=0,
               pad=0, trunc=0, dat=0x8000_0000, wt=0x9000_0000, ho=None, wo=None,
               csc_h=None, misc=None, rls=0, data_bank=7, weight_bank=7):
    sd, rd = (s - 1) * dx + 1, (r - 1) * dy + 1
    wo = wo or (pl + w + pr - sd) // sx + 1
    ho = ho or (pt + (csc_h or h) + pb - rd) // sy + 1
    ls = w * 8
    L.both(CONV_MODE=0, IN_PRECISION=0, PROC_PRECISION=0, DATAIN_FORMAT=0, DATAIN_WIDTH=w - 1, DATAIN_HEIGHT=h - 1,
           DATAIN_CHANNEL=c - 1, DATAIN_WIDTH_EXT=w - 1, DATAIN_HEIGHT_EXT=(csc_h or h) - 1,
           DATAIN_CHANNEL_EXT=c - 1, ENTRIES=w * -(-c // ATOM_C) - 1, WEIGHT_BYTES=-(-r * s * c * k // 128) * 128,
           DATA_BANK=data_bank, WEIGHT_BANK=weight_bank, PAD_VALUE=pad)
    L.set("CDMA", DATAIN_HEIGHT_EXT=h - 1, LINE_STRIDE=ls, SURF_STRIDE=ls * h,
          DATAIN_ADDR_LOW_0=dat, WEIGHT_ADDR_LOW=wt, BYTE_PER_KERNEL=r * s * c - 1,
          WEIGHT_KERNEL=k - 1, CONV_X_STRIDE=sx - 1, CONV_Y_STRIDE=sy - 1,
          PAD_LEFT=pl, PAD_RIGHT=pr, PAD_TOP=pt, PAD_BOTTOM=pb)
    L.set("CSC", WEIGHT_WIDTH_EXT=s - 1, WEIGHT_HEIGHT_EXT=r - 1, WEIGHT_CHANNEL_EXT=c - 1,
          WEIGHT_KERNEL=k - 1, DATAOUT_WIDTH=wo - 1, DATAOUT_HEIGHT=ho - 1, DATAOUT_CHANNEL=k - 1,
          CONV_X_STRIDE_EXT=sx - 1, CONV_Y_STRIDE_EXT=sy - 1, X_DILATION_EXT=dx - 1,
          Y_DILATION_EXT=dy - 1, PAD_LEFT=pl, PAD_TOP=pt, RLS_SLICES=rls,
          ATOMICS=wo * ho - 1)
    L.set("CACC", DATAOUT_WIDTH=wo - 1, DATAOUT_HEIGHT=ho - 1, DATAOUT_CHANNEL=k - 1,
          CLIP_TRUNCATE=trunc)
    for key, v in (misc or {}).items():
        L.both(**{key: v})
    return ho, wo


def load_dc(mem, x, w, dat=0x8000_0000, wt=0x9000_0000):
    cube = np.array(x, np.int64)
    c, h, wd = cube.shape
    write_cube(mem, cube, dat, wd * 8, wd * 8 * h, 8)
    mem.write(wt, naive_weights_to_memory(w))


# ----------------------------------------------------------------------------- CACC
def test_cacc_truncate_matches_bit_level_rtl_rule():
    rng = random.Random(1)
    vals = [rng.randint(-(1 << 34), 1 << 34) for _ in range(300)]
    vals += [rng.randint(-4000, 4000) for _ in range(300)]
    vals += [-(1 << 19) - 1, -(1 << 19), (1 << 19), -(3 << 18) - 1, (1 << 33) + 5, -(1 << 40)]
    for t in range(32):
        got = cacc_truncate(np.array(vals, np.int64), t)
        assert [rtl_cacc(v, t) for v in vals] == got.tolist(), t
    # below 17 bits of shift the rule is exact round-half-away-from-zero
    for t in range(17):
        small = [v for v in vals if abs(v) < (1 << 33)]
        assert cacc_truncate(np.array(small, np.int64), t).tolist() == \
            [max(-(1 << 31), min((1 << 31) - 1, round_away(v, t))) for v in small]


# ----------------------------------------------------------------------------- direct conv
@pytest.mark.parametrize("case", [
    dict(w=9, h=7, c=11, k=5, r=3, s=2, sx=2, sy=1, dx=2, dy=3, pl=1, pr=2, pt=2, pb=1, trunc=3),
    dict(w=6, h=8, c=20, k=10, r=2, s=3, sx=1, sy=2, dx=3, dy=2, pl=3, pr=4, pt=1, pb=2, trunc=0),
    dict(w=5, h=5, c=3, k=9, r=3, s=3, sx=3, sy=3, dx=1, dy=1, pl=2, pr=2, pt=2, pb=0, trunc=5),
    dict(w=4, h=3, c=17, k=1, r=1, s=1, sx=2, sy=1, dx=5, dy=7, pl=0, pr=0, pt=0, pb=0, trunc=1),
])
def test_direct_conv_dilation_padding_stride(case):
    rng = random.Random(hash(tuple(case.values())) & 0xFFFF)
    pad = rng.randint(-128, 127)
    x = rnd_cube(rng, case["c"], case["h"], case["w"])
    w = rnd_weights(rng, case["k"], case["r"], case["s"], case["c"])
    mem, L = Memory(), Layer()
    load_dc(mem, x, w)
    ho, wo = program_dc(L, pad=(pad & 0xFF) | 0x5A00, **case)   # high pad byte is ignored
    out = ConvCore(CFG, mem).run(*L.views())
    acc = naive_dc(x, w, ho, wo, case["sx"], case["sy"], case["dx"], case["dy"], case["pl"], case["pt"], pad)
    exp = [[[round_away(v, case["trunc"]) for v in row] for row in ch] for ch in acc]
    assert out.shape == (case["k"], ho, wo)
    assert out.tolist() == exp


# ----------------------------------------------------------------------------- int16 (nv_full)
#: nv_full computing int8, int16 and fp16 (v1 register map)
NV_FULL_ALL = get_config("nv_full+feature_data_type=int8_int16_fp16")


@pytest.mark.parametrize("case", [
    dict(w=5, h=4, c=70, k=20, r=2, s=3, sx=1, sy=2, dx=2, dy=1, pl=2, pr=3, pt=1, pb=1, trunc=9),
    dict(w=9, h=3, c=16, k=3, r=3, s=1, sx=2, sy=1, dx=1, dy=1, pl=0, pr=0, pt=2, pb=2, trunc=0),
    dict(w=3, h=5, c=33, k=17, r=1, s=2, sx=1, sy=1, dx=3, dy=1, pl=1, pr=1, pt=0, pb=0, trunc=31),
])
def test_int16_direct_conv_nv_full(case):
    """An int16 layer on nv_full (PROC_PRECISION INT16): two-byte elements (16 per 32-byte
    atom), weights in 16-kernel groups, 128-byte CBUF entries, CSC's 16-bit pad value, the
    48-bit accumulator; against direct summation and the bit-level rounding."""
    from hdl.regmap import REGMAP_V1
    rng = random.Random(str(case))
    pad = rng.randint(-32768, 32767)
    c, h, wd = case["c"], case["h"], case["w"]
    x = [[[rng.randint(-32768, 32767) for _ in range(wd)] for _ in range(h)] for _ in range(c)]
    w = [[[[rng.randint(-32768, 32767) for _ in range(c)] for _ in range(case["s"])]
          for _ in range(case["r"])] for _ in range(case["k"])]
    mem, L = Memory(), Layer(REGMAP_V1)
    ls = wd * 32
    write_cube(mem, np.array(x, np.int64), 0x8000_0000, ls, ls * h, 32, 2)
    mem.write(0x9000_0000, naive_weights_to_memory(w, 64, 16, 2))
    ho, wo = program_dc(L, pad=pad & 0xFFFF, misc=dict(IN_PRECISION=1, PROC_PRECISION=1),
                        data_bank=3, weight_bank=3, **case)
    nbytes = case["r"] * case["s"] * c * 2
    L.both(ENTRIES=wd * -(-c // 64) - 1, WEIGHT_BYTES=-(-nbytes * case["k"] // 128) * 128)
    L.set("CDMA", LINE_STRIDE=ls, SURF_STRIDE=ls * h, BYTE_PER_KERNEL=nbytes - 1)
    out = ConvCore(NV_FULL_ALL, mem).run(*L.views(precision=1))
    acc = naive_dc(x, w, ho, wo, case["sx"], case["sy"], case["dx"], case["dy"], case["pl"],
                   case["pt"], pad)
    assert out.tolist() == [[[rtl_cacc(v, case["trunc"], 48) for v in row] for row in ch] for ch in acc]


def test_reuse_across_a_precision_change_is_refused():
    """An INT16 layer keeps its slices and weights (SKIP_DATA_RLS, SKIP_WEIGHT_RLS); an FP16
    layer that sets DATA_REUSE, or WEIGHT_REUSE, on the same banks would read them as fp16:
    refused (verif/model/conv.py ``_check_reuse_precision``); the INT16 layer itself, and
    reuse in the same precision, run."""
    from hdl.regmap import REGMAP_V1
    case = dict(w=5, h=4, c=20, k=4, r=2, s=2)
    rng = random.Random(7)
    c, h, wd = case["c"], case["h"], case["w"]
    x = [[[rng.randint(-300, 300) for _ in range(wd)] for _ in range(h)] for _ in range(c)]
    w = [[[[rng.randint(-300, 300) for _ in range(c)] for _ in range(case["s"])]
          for _ in range(case["r"])] for _ in range(case["k"])]
    mem = Memory()
    ls = wd * 32
    write_cube(mem, np.array(x, np.int64), 0x8000_0000, ls, ls * h, 32, 2)
    mem.write(0x9000_0000, naive_weights_to_memory(w, 64, 16, 2))
    nbytes = case["r"] * case["s"] * c * 2

    def layer(prec, **misc):
        L = Layer(REGMAP_V1)
        program_dc(L, misc=dict(IN_PRECISION=prec, PROC_PRECISION=prec, SKIP_DATA_RLS=1,
                                SKIP_WEIGHT_RLS=1, **misc), data_bank=3, weight_bank=3, **case)
        L.both(ENTRIES=wd * -(-c // 64) - 1, WEIGHT_BYTES=-(-nbytes * case["k"] // 128) * 128)
        L.set("CDMA", LINE_STRIDE=ls, SURF_STRIDE=ls * h, BYTE_PER_KERNEL=nbytes - 1)
        return L.views(precision=prec)

    for flag in ("DATA_REUSE", "WEIGHT_REUSE"):
        core = ConvCore(NV_FULL_ALL, mem)
        first = core.run(*layer(1))
        assert core.run(*layer(1, **{flag: 1})).tolist() == first.tolist()   # same precision
        with pytest.raises(ModelConfigError, match=f"{flag} in a FP16 layer: the .* kept in "
                                                   "CBUF are INT16"):
            core.run(*layer(2, **{flag: 1}))


def test_int16_and_fp16_input_converter():
    """CDMA's converter on nv_full's 16-bit feature data (nvdlav1 RTL, NV_NVDLA_CDMA_CVT_cell):
    int16 elements, signed, minus CVT_OFFSET, times CVT_SCALE, shifted by CVT_TRUNCATE with
    rounding half away from zero, saturated to int16; fp16 bits pass unchanged (NaNs become +0
    with NAN_TO_ZERO, in the data and in the weights). A 1x1 kernel of weight 1 shows the
    converted data."""
    from hdl.regmap import REGMAP_V1
    rng = random.Random(7)
    vals = [rng.randint(-32768, 32767) for _ in range(40)] + [32767, -32768, 0, 1, -1]
    for off, scale, trunc in ((-1234, 3, 1), (5, -20000, 2), (0, 1, 0), (100, 7, 40)):
        mem, L = Memory(), Layer(REGMAP_V1)
        write_cube(mem, np.array([[vals]], np.int64), 0x8000_0000, len(vals) * 32, len(vals) * 32, 32, 2)
        mem.write(0x9000_0000, naive_weights_to_memory([[[[1]]]], 64, 16, 2))
        program_dc(L, w=len(vals), h=1, c=1, k=1, r=1, s=1, misc=dict(IN_PRECISION=1, PROC_PRECISION=1))
        L.both(ENTRIES=len(vals) - 1, WEIGHT_BYTES=128)
        L.set("CDMA", LINE_STRIDE=len(vals) * 32, SURF_STRIDE=len(vals) * 32, BYTE_PER_KERNEL=1,
              CVT_EN=1, CVT_OFFSET=off & 0xFFFF, CVT_SCALE=scale & 0xFFFF, CVT_TRUNCATE=trunc)
        out = ConvCore(NV_FULL_ALL, mem).run(*L.views(precision=1))
        want = [max(-32768, min(32767, round_away((v - off) * scale, trunc))) for v in vals]
        assert out[0, 0].tolist() == want, (off, scale, trunc)
    # fp16: CVT_EN has no effect; NAN_TO_ZERO flushes NaN data to +0 (the NaN word would win)
    f16 = [0x3C00, 0x7E01, 0xC000]
    for flush in (0, 1):
        mem, L = Memory(), Layer(REGMAP_V1)
        write_cube(mem, np.array([[f16]], np.int64), 0x8000_0000, 3 * 32, 3 * 32, 32, 2)
        mem.write(0x9000_0000, naive_weights_to_memory([[[[0x3C00]]]], 64, 16, 2))
        program_dc(L, w=3, h=1, c=1, k=1, r=1, s=1, misc=dict(IN_PRECISION=2, PROC_PRECISION=2))
        L.both(ENTRIES=2, WEIGHT_BYTES=128)
        L.set("CDMA", LINE_STRIDE=96, SURF_STRIDE=96, BYTE_PER_KERNEL=1, CVT_EN=1,
              CVT_OFFSET=77, CVT_SCALE=3, CVT_TRUNCATE=1, NAN_TO_ZERO=flush)
        out = ConvCore(NV_FULL_ALL, mem).run(*L.views(precision=2))[0, 0].tolist()
        assert out[0] == 0x3F800000 and out[2] == 0xC0000000           # 1.0 and -2.0, unconverted
        assert out[1] == (0 if flush else 0x7F800201)                   # +0, or the NaN's payload
    # fp16 NaN weights: written to CBUF as +0 with NAN_TO_ZERO (NV_NVDLA_CDMA_wt.v), else the
    # cell's word is that NaN
    for flush in (0, 1):
        mem, L = Memory(), Layer(REGMAP_V1)
        write_cube(mem, np.array([[[0x3C00]], [[0x4000]]], np.int64), 0x8000_0000, 32, 32, 32, 2)
        mem.write(0x9000_0000, naive_weights_to_memory([[[[0xFD23, 0x3C00]]]], 64, 16, 2))
        program_dc(L, w=1, h=1, c=2, k=1, r=1, s=1, misc=dict(IN_PRECISION=2, PROC_PRECISION=2))
        L.both(ENTRIES=0, WEIGHT_BYTES=128)
        L.set("CDMA", LINE_STRIDE=32, SURF_STRIDE=32, BYTE_PER_KERNEL=3, NAN_TO_ZERO=flush)
        out = int(ConvCore(NV_FULL_ALL, mem).run(*L.views(precision=2))[0, 0, 0])
        assert out == (0x40000000 if flush else 0xFF800123)             # 2.0, or the NaN


def test_int16_entries_count_128_byte_entries():
    """NVIDIA's conv_8x8_fc_int16 programs D_ENTRY_PER_SLICE 3 for 8 pixels of 32 int16
    channels (512 bytes: four 128-byte entries): accepted; 2 (three entries) refused."""
    from hdl.regmap import REGMAP_V1
    from verif.model.conv import feature_entries_per_slice
    assert feature_entries_per_slice(NV_FULL_ALL, 8, 32, 2) == 4
    assert feature_entries_per_slice(NV_FULL_ALL, 8, 64, 1) == 8      # int8: 64-byte entries
    mem, L = Memory(), Layer(REGMAP_V1)
    case = dict(w=8, h=8, c=32, k=16, r=8, s=8)
    ho, wo = program_dc(L, misc=dict(IN_PRECISION=1, PROC_PRECISION=1), **case)
    L.both(ENTRIES=2, WEIGHT_BYTES=8 * 8 * 32 * 2 * 16)
    L.set("CDMA", LINE_STRIDE=8 * 32, SURF_STRIDE=8 * 32 * 8, BYTE_PER_KERNEL=8 * 8 * 32 * 2 - 1)
    with pytest.raises(ModelConfigError, match="ENTRIES"):
        ConvCore(NV_FULL_ALL, mem).run(*L.views(precision=1))
    L.both(ENTRIES=3)
    assert ConvCore(NV_FULL_ALL, mem).run(*L.views(precision=1)).shape == (16, 1, 1)


def test_output_window_smaller_than_padded_input():
    """CSC's DATAOUT size decides the output even when it covers less than the padded input
    (NVIDIA's dilation trace does this)."""
    rng = random.Random(7)
    x, w = rnd_cube(rng, 8, 6, 6), rnd_weights(rng, 2, 2, 2, 8)
    mem, L = Memory(), Layer()
    load_dc(mem, x, w)
    program_dc(L, w=6, h=6, c=8, k=2, r=2, s=2, pl=1, pt=1, pr=1, pb=1, wo=3, ho=2, pad=3)
    out = ConvCore(CFG, mem).run(*L.views())
    assert out.tolist() == naive_dc(x, w, 2, 3, 1, 1, 1, 1, 1, 1, 3)


# ----------------------------------------------------------------------------- image input
CH = {"R": 0, "Y": 0, "G": 1, "U": 1, "B": 2, "V": 2, "A": 3, "X": 3}


def memory_byte_channels(name: str) -> list[list[int]]:
    """Channel of each memory byte, per plane, from the format name alone: components are listed
    from the most significant byte down of a little-endian word, so memory byte 0 is the last
    component. 'T_Y8___U8V8_N444' has planes 'Y8' and 'U8V8'."""
    body = name[2:].replace("_N444", "")
    planes = body.split("___")
    res = []
    for p in planes:
        comps = [p[i] for i in range(0, len(p), 2)]
        res.append([CH[ch] for ch in reversed(comps)])
    return res


@pytest.mark.parametrize("fmt", sorted(PIXEL_FORMATS_INT8))
@pytest.mark.parametrize("variant", ["mean", "offset", "nocvt"])
def test_image_every_pixel_format(fmt, variant):
    name = PIXEL_FORMATS_INT8[fmt][0]
    planes = memory_byte_channels(name)
    cpix = sum(len(p) for p in planes)
    rng = random.Random(fmt * 7 + len(variant))
    W, H, R, S, K = 7, 5, 2, 3, 9
    pl, pr, pt, pb, sx, sy = 1, 2, 1, 1, 2, 1
    xoff = rng.randint(0, 31)
    if len(planes) == 2 and xoff >= 8:
        xoff %= 8   # semi-planar: the Y plane must not fetch past the padded line (test below)
    sign = variant != "offset" and fmt % 2 == 1
    means = [rng.randint(-300, 300) for _ in range(4)]
    offset, scale, trunc = rng.randint(-100, 100), rng.randint(-700, 700), rng.randint(0, 9)
    pad_cdma, pad_csc = rng.randint(0, 255), rng.randint(0, 255)
    mem, L = Memory(), Layer()
    bases, strides = [0x8000_0000, 0x8800_0000], [64 * 2, 96 * 2]
    # pixel bytes as the hardware fetches them: start = base + (xoff mod pixels per 8-B atom),
    # plane 0 one atom later when PAD_LEFT mod pixels per atom lies in (that, xoff] (NVIDIA's
    # count of left-padding atoms compares the whole offset; observed on its RTL)
    pix = [[[0] * cpix for _ in range(W)] for _ in range(H)]
    for p, chans in enumerate(planes):
        bpp = len(chans)
        ppa = 8 // bpp
        xo = xoff % ppa + (ppa if p == 0 and xoff % ppa < pl % ppa <= xoff else 0)
        raw = bytes(rng.randrange(256) for _ in range(strides[p] * H))
        mem.write(bases[p], raw)
        for y in range(H):
            for x in range(W):
                for b, ch in enumerate(chans):
                    pix[y][x][ch] = raw[y * strides[p] + (xo + x) * bpp + b]

    def convert(v, ch):
        if variant == "nocvt":
            return v - 256 if v >= 128 else v
        v = v - 256 if (sign and v >= 128) else v
        m = means[ch] if variant == "mean" else offset
        return max(-128, min(127, round_away((v - m) * scale, trunc)))

    Wp = pl + W + pr
    lines = []
    for y in range(H):
        ln = [pad_cdma - 256 if pad_cdma >= 128 else pad_cdma] * (pl * cpix)
        for x in range(W):
            ln += [convert(pix[y][x][ch], ch) for ch in range(cpix)]
        ln += [pad_cdma - 256 if pad_cdma >= 128 else pad_cdma] * (pr * cpix)
        lines.append(ln)
    cw = S * cpix
    wts = [[[[rng.randint(-128, 127) for _ in range(cw)]] for _ in range(R)] for _ in range(K)]
    mem.write(0x9000_0000, naive_weights_to_memory(wts))
    wo, ho = (Wp - S) // sx + 1, (pt + H + pb - R) // sy + 1
    L.both(CONV_MODE=0, IN_PRECISION=0, PROC_PRECISION=0, DATAIN_FORMAT=1, DATAIN_WIDTH_EXT=W - 1, DATAIN_HEIGHT_EXT=H - 1,
           DATAIN_CHANNEL_EXT=cpix - 1, ENTRIES=-(-Wp * cpix // 8) - 1, WEIGHT_BYTES=-(-R * cw * K // 128) * 128,
           DATA_BANK=3, WEIGHT_BANK=3, PAD_VALUE=pad_csc)
    L.set("CDMA", PIXEL_FORMAT=fmt, DATAIN_WIDTH=W - 1, DATAIN_HEIGHT=H - 1, DATAIN_CHANNEL=cpix - 1,
          PIXEL_X_OFFSET=xoff, DATAIN_ADDR_LOW_0=bases[0], DATAIN_ADDR_LOW_1=bases[1],
          LINE_STRIDE=strides[0], UV_LINE_STRIDE=strides[1], PIXEL_SIGN_OVERRIDE=int(sign),
          MEAN_FORMAT=int(variant == "mean"), MEAN_RY=means[0], MEAN_GU=means[1], MEAN_BV=means[2],
          MEAN_AX=means[3], CVT_EN=int(variant != "nocvt"), CVT_OFFSET=offset, CVT_SCALE=scale,
          CVT_TRUNCATE=trunc, PAD_VALUE=pad_cdma, PAD_LEFT=pl, PAD_RIGHT=pr, PAD_TOP=pt,
          PAD_BOTTOM=pb, CONV_X_STRIDE=sx - 1, CONV_Y_STRIDE=sy - 1, WEIGHT_ADDR_LOW=0x9000_0000,
          BYTE_PER_KERNEL=R * cw - 1, WEIGHT_KERNEL=K - 1)
    L.set("CSC", WEIGHT_WIDTH_EXT=0, WEIGHT_HEIGHT_EXT=R - 1, WEIGHT_CHANNEL_EXT=cw - 1,
          WEIGHT_KERNEL=K - 1, DATAOUT_WIDTH=wo - 1, DATAOUT_HEIGHT=ho - 1, DATAOUT_CHANNEL=K - 1,
          CONV_X_STRIDE_EXT=sx - 1, CONV_Y_STRIDE_EXT=sy - 1, PAD_LEFT=7, PAD_TOP=pt)
    L.set("CACC", DATAOUT_WIDTH=wo - 1, DATAOUT_HEIGHT=ho - 1, DATAOUT_CHANNEL=K - 1, CLIP_TRUNCATE=2)
    out = ConvCore(CFG, mem).run(*L.views())
    padc = pad_csc - 256 if pad_csc >= 128 else pad_csc
    exp = []
    for k in range(K):
        ch = []
        for yo in range(ho):
            row = []
            for xo in range(wo):
                acc = 0
                for r in range(R):
                    y = yo * sy - pt + r
                    for j in range(cw):
                        d = lines[y][xo * sx * cpix + j] if 0 <= y < H else padc
                        acc += wts[k][r][0][j] * d
                row.append(round_away(acc, 2))
            ch.append(row)
        exp.append(ch)
    assert out.tolist() == exp


# ----------------------------------------------------------------------------- CBUF reuse
def test_partial_data_reuse_and_weight_reuse_across_layers():
    """Layer 1 releases RLS_SLICES+1 slices and keeps its weights; layer 2 sets DATA_REUSE and
    WEIGHT_REUSE, fetches only new slices and sees kept + new slices (Limitation RLS_SLICES)."""
    rng = random.Random(11)
    c, w, h1, h2, k, r, s = 10, 5, 6, 3, 4, 3, 2
    x1, x2 = rnd_cube(rng, c, h1, w), rnd_cube(rng, c, h2, w)
    wts = rnd_weights(rng, k, r, s, c)
    mem = Memory()
    load_dc(mem, x1, wts)
    write_cube(mem, np.array(x2, np.int64), 0x8100_0000, w * 8, w * 8 * h2, 8)
    core = ConvCore(CFG, mem)
    L1 = Layer()
    program_dc(L1, w=w, h=h1, c=c, k=k, r=r, s=s, pt=1, pl=1, pad=5, rls=1,
               misc=dict(SKIP_WEIGHT_RLS=1))
    ho1, wo1 = (1 + h1 - r) + 1, (1 + w - s) + 1
    assert core.run(*L1.views()).tolist() == naive_dc(x1, wts, ho1, wo1, 1, 1, 1, 1, 1, 1, 5)
    mem.write(0x9000_0000, bytes(4096))          # weights must come from CBUF now
    L2 = Layer()
    kept = h1 - 2
    program_dc(L2, w=w, h=h2, c=c, k=k, r=r, s=s, dat=0x8100_0000, csc_h=kept + h2, pad=-3,
               misc=dict(DATA_REUSE=1, WEIGHT_REUSE=1))
    xs = [x1[ci][2:] + x2[ci] for ci in range(c)]
    ho2, wo2 = kept + h2 - r + 1, w - s + 1
    assert core.run(*L2.views()).tolist() == naive_dc(xs, wts, ho2, wo2, 1, 1, 1, 1, 0, 0, -3)


def test_full_data_reuse_skips_fetch_and_no_reuse_drops_slices():
    rng = random.Random(12)
    c, w, h, k = 9, 4, 5, 3
    x, wts = rnd_cube(rng, c, h, w), rnd_weights(rng, k, 2, 2, c)
    mem = Memory()
    load_dc(mem, x, wts)
    core = ConvCore(CFG, mem)
    L1 = Layer()
    # (weights padded to 128 bytes stay: SKIP_WEIGHT_RLS, see test_weight_ring_out_of_step)
    program_dc(L1, w=w, h=h, c=c, k=k, r=2, s=2, misc=dict(SKIP_DATA_RLS=1, SKIP_WEIGHT_RLS=1))
    first = core.run(*L1.views()).tolist()
    mem.write(0x8000_0000, bytes(4096))          # a fetch would now read zeros
    L2 = Layer()
    program_dc(L2, w=w, h=h, c=c, k=k, r=2, s=2, trunc=1, misc=dict(DATA_REUSE=1, SKIP_WEIGHT_RLS=1))
    exp = [[[round_away(v, 1) for v in row] for row in ch] for ch in naive_dc(x, wts, h - 1, w - 1, 1, 1, 1, 1, 0, 0, 0)]
    assert first == naive_dc(x, wts, h - 1, w - 1, 1, 1, 1, 1, 0, 0, 0)
    assert core.run(*L2.views()).tolist() == exp
    # layer 3 without DATA_REUSE fetches again (zeros now)
    L3 = Layer()
    program_dc(L3, w=w, h=h, c=c, k=k, r=2, s=2, misc=dict(SKIP_WEIGHT_RLS=1))
    assert not core.run(*L3.views()).any()
    # DATA_REUSE with a different data bank does not reuse: fetch + size check
    L4 = Layer()
    program_dc(L4, w=w, h=h, c=c, k=k, r=2, s=2, csc_h=h + 1, data_bank=5, misc=dict(DATA_REUSE=1))
    with pytest.raises(ModelConfigError, match="DATAIN_HEIGHT_EXT"):
        core.run(*L4.views())


def test_weight_ring_out_of_step():
    """Weights padded past their last CBUF entry (3 x 2x2x9 = 108 bytes in 14 entries,
    WEIGHT_BYTES 128 = 16 entries) released normally leave NVIDIA's CSC 2 entries behind CDMA:
    the next layer fetching weights into the same banks is rejected; a bank change resets the
    ring; kept weights (SKIP_WEIGHT_RLS) are released whole and leave it in step."""
    rng = random.Random(5)
    c, w, h, k = 9, 4, 5, 3
    mem = Memory()
    load_dc(mem, rnd_cube(rng, c, h, w), rnd_weights(rng, k, 2, 2, c))
    core = ConvCore(CFG, mem)
    for misc in (dict(SKIP_WEIGHT_RLS=1), {}):
        L = Layer()
        program_dc(L, w=w, h=h, c=c, k=k, r=2, s=2, misc=misc)
        core.run(*L.views())                           # in step so far
    L = Layer()
    program_dc(L, w=w, h=h, c=c, k=k, r=2, s=2)
    with pytest.raises(ModelConfigError, match="2 entries before"):
        core.run(*L.views())
    L = Layer()
    program_dc(L, w=w, h=h, c=c, k=k, r=2, s=2, data_bank=5)
    core.run(*L.views())                               # other banks: the ring starts afresh


# ----------------------------------------------------------------------------- illegal
def _base_layer(**kw):
    mem, L = Memory(), Layer()
    args = dict(w=6, h=6, c=8, k=2, r=3, s=3)
    args.update(kw)
    program_dc(L, **args)
    return ConvCore(CFG, mem), L


def test_semi_planar_x_offset_past_the_line():
    """T_Y8___V8U8_N444, W 9, no padding: PIXEL_X_OFFSET 8 still fits the line's atoms (NVIDIA's
    RTL and the model agree), 31 makes the Y plane fetch 2 atoms too many (NVIDIA's RTL then
    delivers wrong lines): rejected."""
    from verif.model.conv import PIXEL_FORMATS_INT8
    fmt = next(f for f, v in PIXEL_FORMATS_INT8.items() if v[0] == "T_Y8___V8U8_N444")
    core = ConvCore(CFG, Memory())
    regs = {"PAD_LEFT": 0, "PAD_RIGHT": 0}
    cdma = type("V", (), {"f": staticmethod(lambda n: regs[n])})
    core._check_semi_planar_x_offset(cdma, PIXEL_FORMATS_INT8[fmt][1], 9, 8)
    with pytest.raises(ModelConfigError, match="PIXEL_X_OFFSET=31"):
        core._check_semi_planar_x_offset(cdma, PIXEL_FORMATS_INT8[fmt][1], 9, 31)


@pytest.mark.parametrize("wbytes", [144, 384])
def test_weight_bytes_128_multiple(wbytes):
    """R*S*C*K = 144 bytes: D_WEIGHT_BYTES must be 256 (the exact count hangs NVIDIA's RTL;
    more than the rounding is not what the hardware's CBUF accounting expects)."""
    core, L = _base_layer()
    L.both(WEIGHT_BYTES=wbytes)
    with pytest.raises(ModelConfigError, match="multiple of 128"):
        core.run(*L.views())


@pytest.mark.parametrize("kw,field,match", [
    (dict(pl=3, pr=0, wo=4), "PAD_LEFT", "PAD_LEFT"),
    (dict(pb=3, ho=4), "PAD_BOTTOM", "PAD_BOTTOM"),
    (dict(misc=dict(WEIGHT_REUSE=1)), "WEIGHT_REUSE", "WEIGHT_REUSE"),
    (dict(misc=dict(CONV_MODE=1)), "CONV_MODE", "Winograd"),
    (dict(wo=6), "DATAOUT", "exceeds the padded input"),
])
def test_illegal_register_combinations(kw, field, match):
    core, L = _base_layer(**kw)
    with pytest.raises(ModelConfigError, match=match):
        core.run(*L.views())


def test_inconsistent_cdma_csc_sizes_rejected():
    core, L = _base_layer()
    L.set("CDMA", BYTE_PER_KERNEL=10)
    with pytest.raises(ModelConfigError, match="BYTE_PER_KERNEL"):
        core.run(*L.views())
    core, L = _base_layer()
    L.set("CDMA", DATAIN_CHANNEL=3)
    with pytest.raises(ModelConfigError, match="D_DATAIN_SIZE"):
        core.run(*L.views())
    core, L = _base_layer()
    L.set("CACC", DATAOUT_CHANNEL=5)
    with pytest.raises(ModelConfigError, match="DATAOUT_CHANNEL"):
        core.run(*L.views())


def test_image_dilation_rejected():
    core, L = _base_layer()
    L.both(DATAIN_FORMAT=1)
    L.set("CSC", X_DILATION_EXT=1)
    with pytest.raises(ModelConfigError, match="dilation"):
        core.run(*L.views())


# ----------------------------------------------------------------------------- multi-batch (nv_full)
#: nv_full with multi-batch (Winograd and weight compression are not modelled)
NV_FULL_BATCH = get_config("nv_full+winograd=False+weight_compression=False")


def batch_layer(n, case, stride, dat=0x8000_0000, wt=0x9000_0000):
    """An int8 multi-batch DC layer on nv_full (v1 register map): ``n`` cubes ``stride``
    bytes apart (CDMA D_BATCH_STRIDE), BATCHES = n-1 in CDMA, CSC and CACC."""
    from hdl.regmap import REGMAP_V1
    L = Layer(REGMAP_V1)
    ho, wo = program_dc(L, data_bank=7, weight_bank=7, **case)
    ls = case["w"] * 32
    L.both(ENTRIES=case["w"] * -(-case["c"] // 64) - 1, BATCHES=n - 1)
    L.set("CDMA", LINE_STRIDE=ls, SURF_STRIDE=ls * case["h"], DATAIN_ADDR_LOW_0=dat,
          WEIGHT_ADDR_LOW=wt)
    L.set("CACC", BATCHES=n - 1)
    u = L.u["CDMA"]
    r, f = u._field_index["BATCH_STRIDE"]
    u.groups[0][r.name] = stride & ~((1 << f.lsb) - 1)
    return L, ho, wo


@pytest.mark.parametrize("n,case", [
    (3, dict(w=4, h=3, c=40, k=5, r=2, s=2, sx=1, sy=1, dx=1, dy=2, pl=1, pr=0, pt=1, pb=0, trunc=3)),
    (17, dict(w=2, h=2, c=9, k=33, r=2, s=2, sx=1, sy=1, dx=1, dy=1, pl=0, pr=0, pt=0, pb=0, trunc=0)),
])
def test_multi_batch_direct_conv_nv_full(n, case):
    """A multi-batch layer (unit description "Multi-Batch Mode"): N cubes D_BATCH_STRIDE
    apart, one set of kernels; the model returns (N, K, H_out, W_out), each cube's output the
    direct summation of that cube (plain loops, bit-level rounding)."""
    rng = random.Random(f"batch{n}")
    stride = 32 * (case["w"] * case["h"] * -(-case["c"] // 32) + 3)
    xs = [rnd_cube(rng, case["c"], case["h"], case["w"]) for _ in range(n)]
    w = rnd_weights(rng, case["k"], case["r"], case["s"], case["c"])
    mem = Memory()
    ls = case["w"] * 32
    for b, x in enumerate(xs):
        write_cube(mem, np.array(x, np.int64), 0x8000_0000 + b * stride, ls, ls * case["h"], 32)
    mem.write(0x9000_0000, naive_weights_to_memory(w, 64, 32))
    L, ho, wo = batch_layer(n, case, stride)
    out = ConvCore(NV_FULL_BATCH, mem).run(*L.views())
    assert out.shape == (n, case["k"], ho, wo)
    for b, x in enumerate(xs):
        acc = naive_dc(x, w, ho, wo, case["sx"], case["sy"], case["dx"], case["dy"], case["pl"],
                       case["pt"], 0)
        assert out[b].tolist() == [[[rtl_cacc(v, case["trunc"]) for v in row] for row in ch]
                                   for ch in acc], b


def test_multi_batch_refusals():
    """What the model refuses in a multi-batch layer: CSC/CACC counting other batches than
    CDMA, DATA_REUSE (into or after one), the cubes overflowing the data banks, and multi-batch
    on a configuration without it."""
    case = dict(w=2, h=2, c=8, k=2, r=1, s=1)
    mem = Memory()
    L, *_ = batch_layer(3, case, 256)
    L.set("CSC", BATCHES=1)
    with pytest.raises(ModelConfigError, match="CSC.D_BATCH_NUMBER.BATCHES=1 differs"):
        ConvCore(NV_FULL_BATCH, mem).run(*L.views())
    L, *_ = batch_layer(3, case, 256)
    L.both(DATA_REUSE=1)
    with pytest.raises(ModelConfigError, match="DATA_REUSE with BATCHES=2"):
        ConvCore(NV_FULL_BATCH, mem).run(*L.views())
    core = ConvCore(NV_FULL_BATCH, mem)
    L, *_ = batch_layer(3, case, 256)
    core.run(*L.views())
    L, *_ = batch_layer(1, case, 256)
    L.both(DATA_REUSE=1)
    with pytest.raises(ModelConfigError, match="DATA_REUSE after a multi-batch layer"):
        core.run(*L.views())
    big = dict(w=16, h=60, c=64, k=1, r=1, s=1)       # 16 entries a slice, 960 a cube
    # 8 data banks: 4,096 INT8 entries, but a multi-batch layer's N cubes within 256 a bank
    # (programming guide, Strategy selection c; NVIDIA's RTL hangs beyond it): 2 x 960 run,
    # 3 x 960 = 2,880 > 2,048 are refused, as 5 x 960 > 4,096
    for n, ok in ((2, True), (3, False), (5, False)):
        L, *_ = batch_layer(n, big, 1 << 16)
        L.both(DATA_BANK=7)
        if ok:
            ConvCore(NV_FULL_BATCH, mem).run(*L.views())
            continue
        with pytest.raises(ModelConfigError, match=f"{n} batches x 60 slices of 16 entries "
                                                    "exceed 8 banks of 256"):
            ConvCore(NV_FULL_BATCH, mem).run(*L.views())
    L, *_ = batch_layer(2, case, 256)
    with pytest.raises(ModelConfigError, match="multi-batch is not in"):
        ConvCore(get_config("nv_full+batch=False+winograd=False+weight_compression=False"),
                 mem).run(*L.views())


# ----------------------------------------------------------------------------- compressed weights
#: nv_full with weight compression (Winograd and multi-batch off)
NV_FULL_COMP = get_config("nv_full+winograd=False+batch=False")


def compressed_layer(mem, case, w, wt=0x9000_0000, wmb=0xA000_0000, wgs=0xB000_0000):
    """An int8 DC layer on nv_full (v1 map) whose weights ``w`` are stored compressed
    (verif.gen.compress): returns the Layer, ho, wo."""
    from hdl.regmap import REGMAP_V1
    from verif.gen.compress import compress_weights
    k, r, s, c = case["k"], case["r"], case["s"], case["c"]
    dense = naive_weights_to_memory(w, 64, 32)
    cw = compress_weights(dense, [min(32, k - g) * r * s * c for g in range(0, k, 32)])
    mem.write(wt, cw.weights)
    mem.write(wmb, cw.wmb)
    mem.write(wgs, cw.wgs)
    L = Layer(REGMAP_V1)
    ho, wo = program_dc(L, data_bank=7, weight_bank=6, **case)
    ls = case["w"] * 32
    L.both(ENTRIES=case["w"] * -(-c // 64) - 1, WEIGHT_FORMAT=1, WEIGHT_BYTES=len(cw.weights))
    L.set("CDMA", LINE_STRIDE=ls, SURF_STRIDE=ls * case["h"])
    for unit in ("CDMA", "CSC"):
        u = L.u[unit]
        rr, f = u._field_index["WMB_BYTES"]
        u.groups[0][rr.name] = len(cw.wmb)
    u = L.u["CDMA"]
    for name, v in (("D_WMB_ADDR_LOW", wmb), ("D_WGS_ADDR_LOW", wgs)):
        u.groups[0][name] = v
    return L, ho, wo, cw


@pytest.mark.parametrize("case", [
    dict(w=4, h=3, c=70, k=40, r=2, s=3, sx=1, sy=1, dx=1, dy=1, pl=1, pr=1, pt=0, pb=0, trunc=4),
    dict(w=3, h=3, c=8, k=3, r=3, s=3, sx=2, sy=1, dx=1, dy=1, pl=1, pr=1, pt=1, pb=1, trunc=0),
])
@pytest.mark.parametrize("sparsity", [0.0, 0.6, 0.95, 1.0])
def test_compressed_weights_nv_full(case, sparsity):
    """D_WEIGHT_FORMAT=COMPRESSED (format.rst "Sparse Compression option"): the model expands
    the WMB and the packed non-zero weights back and computes what the uncompressed weights
    give (direct summation); two kernel groups in the first case (40 kernels, 32 per group)."""
    rng = random.Random(f"comp{sparsity}{case['k']}")
    x = rnd_cube(rng, case["c"], case["h"], case["w"])
    w = [[[[0 if rng.random() < sparsity else rng.randint(-128, 127) for _ in range(case["c"])]
           for _ in range(case["s"])] for _ in range(case["r"])] for _ in range(case["k"])]
    mem = Memory()
    write_cube(mem, np.array(x, np.int64), 0x8000_0000, case["w"] * 32, case["w"] * 32 * case["h"], 32)
    L, ho, wo, cw = compressed_layer(mem, case, w)
    nzb = sum(cw.group_bytes)
    if sparsity == 1.0:         # nothing to fetch: refused (not settled on NVIDIA's RTL)
        assert cw.weights == b"" and not any(cw.wmb)
        with pytest.raises(ModelConfigError, match="no non-zero weight"):
            ConvCore(NV_FULL_COMP, mem).run(*L.views())
        return
    if len(cw.weights) // 64 != -(-nzb // 64):
        # D_WEIGHT_BYTES rounded to 128 covers a 64-byte CBUF entry the weights do not fill:
        # refused (not settled on NVIDIA's RTL)
        with pytest.raises(ModelConfigError, match="rounding to 128 covers one more"):
            ConvCore(NV_FULL_COMP, mem).run(*L.views())
        return
    out = ConvCore(NV_FULL_COMP, mem).run(*L.views())
    acc = naive_dc(x, w, ho, wo, case["sx"], case["sy"], case["dx"], case["dy"], case["pl"], case["pt"], 0)
    assert out.tolist() == [[[rtl_cacc(v, case["trunc"]) for v in row] for row in ch] for ch in acc]


def test_compressed_weights_refusals():
    """Compressed weights the model refuses: a WGS word that is not its kernel group's
    non-zero bytes, D_WEIGHT_BYTES other than those bytes rounded up to 128, D_WMB_BYTES other
    than the WMB's, the WMB bank (bank 15) given to data or weights, and compression on a
    configuration without it."""
    case = dict(w=2, h=2, c=40, k=40, r=1, s=1)
    rng = random.Random(7)
    w = rnd_weights(rng, 40, 1, 1, 40)
    def fresh():
        mem = Memory()
        return mem, compressed_layer(mem, case, w)
    mem, (L, _, _, cw) = fresh()
    mem.write(0xB000_0004, (cw.group_bytes[1] + 1).to_bytes(4, "little"))
    with pytest.raises(ModelConfigError, match="WGS of kernel group 1"):
        ConvCore(NV_FULL_COMP, mem).run(*L.views())
    mem, (L, *_) = fresh()
    L.both(WEIGHT_BYTES=len(cw.weights) + 128)
    with pytest.raises(ModelConfigError, match="non-zero weights rounded up to 128"):
        ConvCore(NV_FULL_COMP, mem).run(*L.views())
    mem, (L, *_) = fresh()
    for unit in ("CDMA", "CSC"):
        u = L.u[unit]
        u.groups[0]["D_WMB_BYTES"] = len(cw.wmb) + 128
    with pytest.raises(ModelConfigError, match="D_WMB_BYTES="):
        ConvCore(NV_FULL_COMP, mem).run(*L.views())
    mem, (L, *_) = fresh()
    L.both(DATA_BANK=7, WEIGHT_BANK=7)
    with pytest.raises(ModelConfigError, match="the last CBUF bank holds the WMB"):
        ConvCore(NV_FULL_COMP, mem).run(*L.views())
    mem, (L, *_) = fresh()
    with pytest.raises(ModelConfigError, match="has no weight compression"):
        ConvCore(get_config("nv_full+winograd=False+batch=False+weight_compression=False"),
                 mem).run(*L.views())
