"""The RUBIK model (verif/model/rubik.py) against plain-Python loops over NVIDIA's RTL mapping:
contract (deconvolution's reorder), split (feature cube to planes, plane-line tails written 0)
and merge (planes to a feature cube, missing channels 0), int8 and 16-bit elements, both memories;
the ping-pong groups and RUBIK_DONE interrupts; the programs NVIDIA's RTL cannot run refused."""
from __future__ import annotations

import random

import pytest

from hdl.config import NV_FULL
from verif.model import Nvdla
from verif.model.formats import ModelConfigError

R = "NVDLA_RBK."


def prog(dla: Nvdla, group: int, **regs) -> None:
    """Program register group ``group`` (field values by register: see the calls) and enable it."""
    dla.write(R + "S_POINTER_0", group)
    for name, value in regs.items():
        dla.write(R + name + "_0", value)
    dla.write(R + "D_OP_ENABLE_0", 1)


def base(dla, mode, prec, W, H, cin, cout, ia, oa, ram_in=1, ram_out=1, **more):
    regs = dict(D_MISC_CFG=mode | (prec << 8), D_DAIN_RAM_TYPE=ram_in, D_DAOUT_RAM_TYPE=ram_out,
                D_DATAIN_SIZE_0=(W - 1) | ((H - 1) << 16), D_DATAIN_SIZE_1=cin - 1,
                D_DATAOUT_SIZE_1=cout - 1, D_DAIN_ADDR_LOW=ia & 0xFFFFFFFF, D_DAIN_ADDR_HIGH=ia >> 32,
                D_DAOUT_ADDR_LOW=oa & 0xFFFFFFFF, D_DAOUT_ADDR_HIGH=oa >> 32)
    regs.update(more)
    return regs


@pytest.mark.parametrize("seed", range(4))
def test_contract_matches_the_loops(seed):
    rng = random.Random(seed)
    dla = Nvdla(NV_FULL)
    prec = rng.choice((0, 1, 2))
    A = 32 if prec == 0 else 16
    W, H, K = rng.randint(1, 6), rng.randint(1, 4), rng.randint(1, 40)
    sx, sy = rng.randint(1, 4), rng.randint(1, 3)
    G = -(-K // A)
    ils = 32 * (W + rng.randint(0, 2))
    iss = ils * H + 32 * rng.randint(0, 2)
    cs0 = G * iss + 32 * rng.randint(0, 3)
    ols = 32 * (W * sx + rng.randint(0, 2))
    oss = ols * H * sy + 32 * rng.randint(0, 2)
    ia, oa = 0x8000_0000 + 32 * rng.randint(0, 50), 0x8100_0000 + 32 * rng.randint(0, 50)
    mem_in = {1: dla.mem, 0: dla.cv_mem}
    ram_in, ram_out = rng.randint(0, 1), rng.randint(0, 1)
    n_in = cs0 * sx * sy + iss * G
    data = rng.randbytes(n_in)
    mem_in[ram_in].write(ia, data)
    prog(dla, 0, **base(dla, 0, prec, W, H, K + rng.randint(0, 9), K, ia, oa, ram_in, ram_out,
                                D_DAIN_LINE_STRIDE=ils, D_DAIN_SURF_STRIDE=iss,
                                D_CONTRACT_STRIDE_0=cs0, D_CONTRACT_STRIDE_1=rng.getrandbits(27) << 5,
                                D_DAOUT_LINE_STRIDE=ols, D_DAOUT_SURF_STRIDE=oss,
                                D_DECONV_STRIDE=(sx - 1) | ((sy - 1) << 16)))
    assert dla.read("NVDLA_GLB.S_INTR_STATUS_0") == 1 << 8          # RUBIK_DONE_STATUS0
    out = mem_in[ram_out]
    for g in range(G):
        for h in range(H):
            for dy in range(sy):
                for w in range(W):
                    for dx in range(sx):
                        s = g * iss + h * ils + (dy * sx + dx) * cs0 + w * 32
                        d = oa + g * oss + (h * sy + dy) * ols + (w * sx + dx) * 32
                        assert out.read_bytes(d, 32) == data[s:s + 32], (g, h, dy, w, dx)


@pytest.mark.parametrize("seed", range(4))
def test_split_then_merge(seed):
    """Split a random cube into planes (checked element by element, line tails 0), merge the
    planes back (padding channels 0): the cube's channels come back."""
    rng = random.Random(100 + seed)
    dla = Nvdla(NV_FULL)
    prec = rng.choice((0, 1, 2))
    b = 1 if prec == 0 else 2
    A = 32 // b
    W, H, C = rng.randint(1, 70), rng.randint(1, 3), rng.randint(1, 40)
    G = -(-C // A)
    ils = 32 * (W + rng.randint(0, 2))
    iss = ils * H + 32 * rng.randint(0, 1)
    pls = 32 * (-(-W * b // 32) + rng.randint(0, 2))
    ops = pls * H + 32 * rng.randint(0, 2)
    ia, pa, ma = 0x8000_0000, 0x8200_0000, 0x8400_0000
    data = rng.randbytes(iss * G)
    dla.mem.write(ia, data)
    dla.mem.write(pa, bytes([0xEE]) * (ops * C))
    prog(dla, 0, **base(dla, 1, prec, W, H, C, C, ia, pa, D_DAIN_LINE_STRIDE=ils,
                        D_DAIN_SURF_STRIDE=iss, D_DAOUT_LINE_STRIDE=pls, D_DAOUT_PLANAR_STRIDE=ops))
    for c in range(C):
        for h in range(H):
            line = dla.mem.read_bytes(pa + c * ops + h * pls, -(-W * b // 32) * 32)
            for w in range(W):
                s = (c // A) * iss + h * ils + w * 32 + (c % A) * b
                assert line[w * b:w * b + b] == data[s:s + b], (c, h, w)
            assert line[W * b:] == bytes(len(line) - W * b)          # the tail: zeros
    oss = 32 * W * H + 32 * rng.randint(0, 1)
    dla.mem.write(ma, bytes([0xEE]) * (oss * G))
    prog(dla, 1, **base(dla, 2, prec, W, H, C, C, pa, ma, D_DAIN_LINE_STRIDE=pls,
                        D_DAIN_PLANAR_STRIDE=ops, D_DAOUT_LINE_STRIDE=32 * W, D_DAOUT_SURF_STRIDE=oss))
    for g in range(G):
        for h in range(H):
            for w in range(W):
                got = dla.mem.read_bytes(ma + g * oss + h * 32 * W + w * 32, 32)
                for i in range(A):
                    c = g * A + i
                    want = data[g * iss + h * ils + w * 32 + i * b:][:b] if c < C else bytes(b)
                    assert got[i * b:i * b + b] == want, (g, h, w, i)
    assert dla.read("NVDLA_GLB.S_INTR_STATUS_0") == 0x300


@pytest.mark.parametrize("regs, why", [
    (dict(D_MISC_CFG=3), "RUBIK_MODE = 3"),
    (dict(D_MISC_CFG=1 | (3 << 8)), "IN_PRECISION = 3"),
    (dict(D_MISC_CFG=1, D_DATAIN_SIZE_1=31, D_DATAOUT_SIZE_1=32), "loops disagree"),
    (dict(D_MISC_CFG=0, D_DATAIN_SIZE_0=4095, D_DECONV_STRIDE=2), "13-bit write size"),
    (dict(D_MISC_CFG=0, D_DAIN_LINE_STRIDE=32, D_DAIN_SURF_STRIDE=32, D_DAOUT_ADDR_LOW=0x0,
          D_DAOUT_LINE_STRIDE=32, D_DAOUT_SURF_STRIDE=32), "meets the input"),
])
def test_programs_the_hardware_cannot_run_are_refused(regs, why):
    dla = Nvdla(NV_FULL)
    with pytest.raises(ModelConfigError, match=why):
        prog(dla, 0, **regs)
