"""Register programs outside the programming guide's rules that NVIDIA's RTL still runs to a defined
result (issue 7 item 6): the model computes that result with a ``LimitationWarning``.

Each case is a small register program written through ``Nvdla.write`` (the CSB view), with the
expected bytes from a plain-Python formula (CDP: the INT8 program's bytes and the model's
``cdp_compute``). The RTL fact behind each case is cited in the model where the behaviour is
implemented (verif/model/pdp.py, cdp.py). Every program here was also recorded as a trace (register
writes, memory image, CRC of the model's output) and passed on NVIDIA's own nv_small RTL
(../shared/tools/nvidia-rtl) through our player, the same way as tests/model/test_sdp_prelu_alu.py.
"""
from __future__ import annotations

import random
import warnings

import numpy as np
import pytest

from hdl.config import NV_SMALL
from hdl.regmap import REGMAP
from verif.model import LimitationWarning, ModelConfigError, Nvdla

ATOM = NV_SMALL.memory_atomic
SRC, DST = 0x8000_0000, 0x8010_0000


def write(dla, name, **fields):
    """Write register ``UNIT.REG`` with the given fields (others 0)."""
    ref = REGMAP.lookup(f"NVDLA_{name}_0")
    v = 0
    for f, val in fields.items():
        fd = ref.reg.field(f)
        v |= (val << fd.lsb) & fd.mask
    dla.write(ref.addr, v)


def pdp_max_2x2(dla, w, h, c, rdma_flying_mode):
    """PDP offline, MAX pooling 2x2 stride 2, no padding; PDP_RDMA.D_FLYING_MODE as given
    (1 = OFF_FLYING as the guide programs it, 0 = ON_FLYING)."""
    line, surf = w * ATOM, w * h * ATOM
    ow, oh = w // 2, h // 2
    for u in ("PDP_RDMA", "PDP"):
        write(dla, f"{u}.D_DATA_CUBE_IN_WIDTH", CUBE_IN_WIDTH=w - 1)
        write(dla, f"{u}.D_DATA_CUBE_IN_HEIGHT", CUBE_IN_HEIGHT=h - 1)
        write(dla, f"{u}.D_DATA_CUBE_IN_CHANNEL", CUBE_IN_CHANNEL=c - 1)
    write(dla, "PDP_RDMA.D_FLYING_MODE", FLYING_MODE=rdma_flying_mode)
    dla.write("NVDLA_PDP_RDMA.D_SRC_BASE_ADDR_LOW_0", SRC)
    dla.write("NVDLA_PDP_RDMA.D_SRC_LINE_STRIDE_0", line)
    dla.write("NVDLA_PDP_RDMA.D_SRC_SURFACE_STRIDE_0", surf)
    write(dla, "PDP_RDMA.D_SRC_RAM_CFG", SRC_RAM_TYPE=1)     # MC: nv_small has no SRAM port
    write(dla, "PDP_RDMA.D_POOLING_KERNEL_CFG", KERNEL_WIDTH=1, KERNEL_STRIDE_WIDTH=1)
    write(dla, "PDP.D_DATA_CUBE_OUT_WIDTH", CUBE_OUT_WIDTH=ow - 1)
    write(dla, "PDP.D_DATA_CUBE_OUT_HEIGHT", CUBE_OUT_HEIGHT=oh - 1)
    write(dla, "PDP.D_DATA_CUBE_OUT_CHANNEL", CUBE_OUT_CHANNEL=c - 1)
    write(dla, "PDP.D_OPERATION_MODE_CFG", POOLING_METHOD=1, FLYING_MODE=1, SPLIT_NUM=0)
    write(dla, "PDP.D_POOLING_KERNEL_CFG", KERNEL_WIDTH=1, KERNEL_HEIGHT=1,
          KERNEL_STRIDE_WIDTH=1, KERNEL_STRIDE_HEIGHT=1)
    dla.write("NVDLA_PDP.D_DST_BASE_ADDR_LOW_0", DST)
    dla.write("NVDLA_PDP.D_DST_LINE_STRIDE_0", ow * ATOM)
    dla.write("NVDLA_PDP.D_DST_SURFACE_STRIDE_0", ow * oh * ATOM)
    write(dla, "PDP.D_DST_RAM_CFG", DST_RAM_TYPE=1)
    return ow, oh


def _pdp_layer(extra=(), warn=None):
    """Run the 2x2 max-pooling layer of :func:`pdp_max_2x2` on a random 4x4x12 cube after the
    register writes ``extra`` ((name, fields) pairs), expecting a LimitationWarning matching
    ``warn`` (None: no warning); check the output against max pooling in Python."""
    w, h, c = 4, 4, 12
    cp = -(-c // ATOM) * ATOM
    rng = random.Random(7)
    cube = [[[rng.randint(-128, 127) for _ in range(w)] for _ in range(h)] for _ in range(cp)]
    dla = Nvdla(NV_SMALL)
    line, surf = w * ATOM, w * h * ATOM
    for ci in range(cp):
        for y in range(h):
            for x in range(w):
                dla.mem.write(SRC + (ci // ATOM) * surf + y * line + x * ATOM + ci % ATOM,
                              bytes([cube[ci][y][x] & 0xFF]))
    ow, oh = pdp_max_2x2(dla, w, h, c, 1)
    for name, fields in extra:
        write(dla, name, **fields)
    dla.write("NVDLA_PDP_RDMA.D_OP_ENABLE_0", 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dla.write("NVDLA_PDP.D_OP_ENABLE_0", 1)
    msgs = [str(x.message) for x in caught if issubclass(x.category, LimitationWarning)]
    if warn is None:
        assert msgs == []
    else:
        assert len(msgs) == 1 and warn in msgs[0], msgs
    assert dla.layers_run == 1 and dla.intr
    assert dla.read("NVDLA_GLB.S_INTR_STATUS_0") == 1 << REGMAP.lookup(
        "NVDLA_GLB.S_INTR_STATUS_0").reg.field("PDP_DONE_STATUS0").lsb
    for ci in range(cp):
        for y in range(oh):
            for x in range(ow):
                want = max(cube[ci][2 * y + j][2 * x + i] for j in range(2) for i in range(2))
                b = int(dla.mem.read(DST + (ci // ATOM) * ow * oh * ATOM + y * ow * ATOM + x * ATOM
                                     + ci % ATOM, 1)[0])
                assert (b - 256 if b > 127 else b) == want, (ci, y, x)


def test_pdp_reference_layer():
    _pdp_layer()


def test_pdp_rdma_flying_mode_is_ignored():
    """PDP offline with PDP_RDMA.D_FLYING_MODE=ON_FLYING: NVIDIA's RTL ignores PDP_RDMA's
    FLYING_MODE (NV_NVDLA_PDP_rdma.v leaves reg2dp_flying_mode unconnected), so the layer reads
    and pools the cube exactly as with OFF_FLYING; the model warns and computes that."""
    _pdp_layer([("PDP_RDMA.D_FLYING_MODE", dict(FLYING_MODE=0))], "PDP_RDMA.D_FLYING_MODE=ON_FLYING")


@pytest.mark.parametrize("pdp_type, rdma_type", [(1, 1), (2, 2), (1, 0), (0, 2)])
def test_pdp_input_data_is_int8_on_nv_small(pdp_type, rdma_type):
    """INPUT_DATA INT16/FP16 on nv_small: NVIDIA's nv_small RTL ignores PDP's and PDP_RDMA's
    INPUT_DATA (NV_NVDLA_pdp.v leaves reg2dp_input_data unconnected; PDP_RDMA_ig/eg never read
    theirs), so the INT8 layer runs; PDP_RDMA's field alone is not even checked by the model."""
    extra = [("PDP.D_DATA_FORMAT", dict(INPUT_DATA=pdp_type)),
             ("PDP_RDMA.D_DATA_FORMAT", dict(INPUT_DATA=rdma_type))]
    _pdp_layer(extra, f"PDP.D_DATA_FORMAT.INPUT_DATA={pdp_type}" if pdp_type else None)


def _cdp_output(types):
    """One CDP layer (LRN 3 channels, a random LUT) on a random 2x3x13 cube with CDP_RDMA /
    CDP input types ``types``; returns (output bytes, LimitationWarning messages, the input)."""
    w, h, c = 2, 3, 13
    cp = -(-c // ATOM) * ATOM
    line, surf = w * ATOM, w * h * ATOM
    rng = random.Random(3)
    src = bytes(rng.randrange(256) for _ in range(surf * cp // ATOM))
    dla = Nvdla(NV_SMALL)
    dla.mem.write(SRC, src)
    write(dla, "CDP.S_LUT_ACCESS_CFG", LUT_ACCESS_TYPE=1, LUT_TABLE_ID=0)
    for _ in range(65):
        write(dla, "CDP.S_LUT_ACCESS_DATA", LUT_DATA=rng.randrange(-1024, 1024) & 0xFFFF)
    write(dla, "CDP.S_LUT_ACCESS_CFG", LUT_ACCESS_TYPE=1, LUT_TABLE_ID=1)
    for _ in range(257):
        write(dla, "CDP.S_LUT_ACCESS_DATA", LUT_DATA=rng.randrange(-1024, 1024) & 0xFFFF)
    write(dla, "CDP.S_LUT_CFG", LUT_LE_FUNCTION=1)
    write(dla, "CDP.S_LUT_INFO", LUT_LE_INDEX_SELECT=4, LUT_LO_INDEX_SELECT=8)
    write(dla, "CDP.S_LUT_LE_END_LOW", LUT_LE_END_LOW=1 << 10)
    write(dla, "CDP.S_LUT_LO_END_LOW", LUT_LO_END_LOW=1 << 16)
    write(dla, "CDP_RDMA.D_DATA_CUBE_WIDTH", WIDTH=w - 1)
    write(dla, "CDP_RDMA.D_DATA_CUBE_HEIGHT", HEIGHT=h - 1)
    write(dla, "CDP_RDMA.D_DATA_CUBE_CHANNEL", CHANNEL=c - 1)
    dla.write("NVDLA_CDP_RDMA.D_SRC_BASE_ADDR_LOW_0", SRC)
    dla.write("NVDLA_CDP_RDMA.D_SRC_LINE_STRIDE_0", line)
    dla.write("NVDLA_CDP_RDMA.D_SRC_SURFACE_STRIDE_0", surf)
    write(dla, "CDP_RDMA.D_SRC_DMA_CFG", SRC_RAM_TYPE=1)
    write(dla, "CDP.D_DST_DMA_CFG", DST_RAM_TYPE=1)
    write(dla, "CDP_RDMA.D_DATA_FORMAT", INPUT_DATA=types[0])
    dla.write("NVDLA_CDP.D_DST_BASE_ADDR_LOW_0", DST)
    dla.write("NVDLA_CDP.D_DST_LINE_STRIDE_0", line)
    dla.write("NVDLA_CDP.D_DST_SURFACE_STRIDE_0", surf)
    write(dla, "CDP.D_DATA_FORMAT", INPUT_DATA_TYPE=types[1])
    write(dla, "CDP.D_LRN_CFG", NORMALZ_LEN=0)
    write(dla, "CDP.D_DATIN_SCALE", DATIN_SCALE=1)
    write(dla, "CDP.D_DATOUT_SCALE", DATOUT_SCALE=1)
    write(dla, "CDP.D_DATOUT_SHIFTER", DATOUT_SHIFTER=10)
    dla.write("NVDLA_CDP_RDMA.D_OP_ENABLE_0", 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dla.write("NVDLA_CDP.D_OP_ENABLE_0", 1)
    assert dla.layers_run == 1 and dla.intr
    msgs = [str(x.message) for x in caught if issubclass(x.category, LimitationWarning)]
    return bytes(dla.mem.read(DST, surf * cp // ATOM)), msgs, src, dla


@pytest.mark.parametrize("types", [(1, 1), (2, 2), (0, 1), (2, 0)])
def test_cdp_input_data_is_int8_on_nv_small(types):
    """CDP_RDMA.INPUT_DATA / CDP.INPUT_DATA_TYPE other than INT8, equal or not: NVIDIA's nv_small
    RTL reads neither (NV_NVDLA_cdp.v leaves reg2dp_input_data_type unconnected; CDP_RDMA_ig/eg
    never use reg2dp_input_data), so the INT8 layer runs: the same bytes as with INT8, which are
    the model's cdp_compute of the int8 cube; a LimitationWarning names the fields."""
    from verif.model.cdp import cdp_compute
    from verif.model.lut import LutParams
    ref, msgs, src, dla = _cdp_output((0, 0))
    assert msgs == []
    got, msgs, _, _ = _cdp_output(types)
    assert got == ref
    assert len(msgs) == 1
    assert f"INPUT_DATA={types[0]} / CDP.D_DATA_FORMAT.INPUT_DATA_TYPE={types[1]}" in msgs[0]
    w, h, cp = 2, 3, 16
    d = np.frombuffer(src, np.int8).astype(np.int64).reshape(cp // ATOM, h, w, ATOM)
    d = d.transpose(0, 3, 1, 2).reshape(cp, h, w)
    cdp = dla.cdp
    out, _ = cdp_compute(d, 13, cdp.lut.tables[0], cdp.lut.tables[1],
                         LutParams.from_view(dla.units["CDP"].view(group=0)),
                         0, False, False, (0, 1, 0), (0, 1, 10))
    want = (out.reshape(cp // ATOM, ATOM, h, w).transpose(0, 2, 3, 1) & 0xFF).astype(np.uint8).tobytes()
    assert ref == want


def pdp_program(dla, w, h, c, method, kw, kh, sx, sy, pad=(0, 0, 0, 0)):
    """PDP offline layer on the W x H x C cube at SRC, any kernel/stride/padding
    (pad = left, top, right, bottom); returns the output width and height."""
    pl, pt, pr, pb = pad
    ow, oh = (pl + w + pr - kw) // sx + 1, (pt + h + pb - kh) // sy + 1
    pdp_max_2x2(dla, w, h, c, 1)
    write(dla, "PDP.D_OPERATION_MODE_CFG", POOLING_METHOD=method, FLYING_MODE=1, SPLIT_NUM=0)
    write(dla, "PDP.D_POOLING_KERNEL_CFG", KERNEL_WIDTH=kw - 1, KERNEL_HEIGHT=kh - 1,
          KERNEL_STRIDE_WIDTH=sx - 1, KERNEL_STRIDE_HEIGHT=sy - 1)
    write(dla, "PDP_RDMA.D_POOLING_KERNEL_CFG", KERNEL_WIDTH=kw - 1, KERNEL_STRIDE_WIDTH=sx - 1)
    write(dla, "PDP.D_POOLING_PADDING_CFG", PAD_LEFT=pl, PAD_TOP=pt, PAD_RIGHT=pr, PAD_BOTTOM=pb)
    write(dla, "PDP_RDMA.D_POOLING_PADDING_CFG", PAD_WIDTH=pl)
    write(dla, "PDP.D_DATA_CUBE_OUT_WIDTH", CUBE_OUT_WIDTH=ow - 1)
    write(dla, "PDP.D_DATA_CUBE_OUT_HEIGHT", CUBE_OUT_HEIGHT=oh - 1)
    dla.write("NVDLA_PDP.D_DST_LINE_STRIDE_0", ow * ATOM)
    dla.write("NVDLA_PDP.D_DST_SURFACE_STRIDE_0", ow * oh * ATOM)
    return ow, oh


@pytest.mark.parametrize("kw, kh, sx, sy, pad", [
    (1, 1, 1, 1, (0, 0, 0, 0)), (1, 1, 2, 2, (0, 0, 0, 0)), (2, 1, 2, 1, (0, 0, 0, 0)),
    (1, 2, 1, 2, (0, 0, 0, 0)), (2, 2, 2, 2, (0, 0, 0, 0)), (3, 3, 1, 1, (0, 0, 0, 0)),
    (3, 2, 1, 1, (1, 0, 1, 0))])
def test_pdp_pooling_method_3(kw, kh, sx, sy, pad):
    """POOLING_METHOD=3 (no value of the enum): NVIDIA's nv_small RTL writes each sample for a
    1x1 kernel and 0 for any larger kernel (every one of these programs was run on NVIDIA's RTL
    through our player and gave exactly these bytes)."""
    w, h, c = 4, 4, 12
    cp = -(-c // ATOM) * ATOM
    rng = random.Random(7)
    cube = [[[rng.randint(-128, 127) for _ in range(w)] for _ in range(h)] for _ in range(cp)]
    dla = Nvdla(NV_SMALL)
    line, surf = w * ATOM, w * h * ATOM
    for ci in range(cp):
        for y in range(h):
            for x in range(w):
                dla.mem.write(SRC + (ci // ATOM) * surf + y * line + x * ATOM + ci % ATOM,
                              bytes([cube[ci][y][x] & 0xFF]))
    ow, oh = pdp_program(dla, w, h, c, 3, kw, kh, sx, sy, pad)
    dla.mem.fill(DST, ow * oh * cp, 0x5A)
    dla.write("NVDLA_PDP_RDMA.D_OP_ENABLE_0", 1)
    with pytest.warns(LimitationWarning) as caught:     # (1x1/2 on 4x4 also has a remainder)
        dla.write("NVDLA_PDP.D_OP_ENABLE_0", 1)
    assert any("POOLING_METHOD=3" in str(x.message) for x in caught)
    assert dla.layers_run == 1 and dla.intr
    for ci in range(cp):
        for y in range(oh):
            for x in range(ow):
                want = cube[ci][y * sy][x * sx] if kw * kh == 1 else 0
                b = int(dla.mem.read(DST + (ci // ATOM) * ow * oh * ATOM + y * ow * ATOM + x * ATOM
                                     + ci % ATOM, 1)[0])
                assert (b - 256 if b > 127 else b) == want, (ci, y, x)


def _pool_ref(cube, method, kw, kh, sx, sy, pad, ow, oh):
    """Plain-Python MAX/MIN pooling (padding ignored) or AVE with zero padding and NVIDIA's
    reciprocal rounding left out (callers use MAX/MIN)."""
    pl, pt = pad[0], pad[1]
    h, w = len(cube), len(cube[0])
    out = []
    for oy in range(oh):
        row = []
        for ox in range(ow):
            vals = [cube[y][x] for y in range(oy * sy - pt, oy * sy - pt + kh)
                    for x in range(ox * sx - pl, ox * sx - pl + kw) if 0 <= y < h and 0 <= x < w]
            row.append(max(vals) if method == 1 else min(vals))
        out.append(row)
    return out


@pytest.mark.parametrize("w, h, method, kw, kh, sx, sy, pad", [
    (5, 5, 1, 2, 2, 2, 2, (0, 0, 0, 0)),          # one column and one line left over
    (4, 4, 1, 3, 3, 2, 2, (1, 1, 1, 1)),          # (1+4+1-3) % 2 = 1
    (7, 5, 2, 3, 2, 3, 2, (0, 0, 0, 0))])         # MIN, two columns and one line left over
def test_pdp_output_size_with_remainder(w, h, method, kw, kh, sx, sy, pad):
    """(pad+in+pad-kernel) % stride != 0 with the natural output size (pad+in+pad-kernel)//stride
    + 1: NVIDIA's nv_small RTL writes the windows that fit and leaves the remainder unused (the
    three programs were run on NVIDIA's RTL through our player and gave these bytes); the
    model warns. Another output size stays a ModelConfigError."""
    c = 12
    cp = -(-c // ATOM) * ATOM
    rng = random.Random(11)
    cube = [[[rng.randint(-128, 127) for _ in range(w)] for _ in range(h)] for _ in range(cp)]
    dla = Nvdla(NV_SMALL)
    line, surf = w * ATOM, w * h * ATOM
    for ci in range(cp):
        for y in range(h):
            for x in range(w):
                dla.mem.write(SRC + (ci // ATOM) * surf + y * line + x * ATOM + ci % ATOM,
                              bytes([cube[ci][y][x] & 0xFF]))
    ow, oh = pdp_program(dla, w, h, c, method, kw, kh, sx, sy, pad)
    assert (pad[0] + w + pad[2] - kw) % sx or (pad[1] + h + pad[3] - kh) % sy
    dla.write("NVDLA_PDP_RDMA.D_OP_ENABLE_0", 1)
    with pytest.warns(LimitationWarning, match="% stride"):
        dla.write("NVDLA_PDP.D_OP_ENABLE_0", 1)
    assert dla.layers_run == 1 and dla.intr
    for ci in range(cp):
        want = _pool_ref(cube[ci], method, kw, kh, sx, sy, pad, ow, oh)
        for y in range(oh):
            for x in range(ow):
                b = int(dla.mem.read(DST + (ci // ATOM) * ow * oh * ATOM + y * ow * ATOM + x * ATOM
                                     + ci % ATOM, 1)[0])
                assert (b - 256 if b > 127 else b) == want[y][x], (ci, y, x)
    # one output column fewer than the natural size: values that follow no window on NVIDIA's
    # RTL (observed with MIN 2x2/1 on 5 columns and 3 outputs): still an error
    dla = Nvdla(NV_SMALL)
    pdp_program(dla, w, h, c, method, kw, kh, sx, sy, pad)
    write(dla, "PDP.D_DATA_CUBE_OUT_WIDTH", CUBE_OUT_WIDTH=ow - 2)
    dla.write("NVDLA_PDP_RDMA.D_OP_ENABLE_0", 1)
    with pytest.raises(ModelConfigError, match="CUBE_OUT_WIDTH"), warnings.catch_warnings():
        warnings.simplefilter("ignore", LimitationWarning)
        dla.write("NVDLA_PDP.D_OP_ENABLE_0", 1)
