"""Random RUBIK register programs (programming guide "Rubik programming"; NVIDIA's RTL's mapping
in verif/model/rubik.py).

A program is 1 to 3 independent layers in alternating ping-pong groups (``verif.gen.common.emit``),
each a contract, split or merge of int8, int16 or fp16 elements (moved as bytes):

* contract: a W x H x K output of ``sx`` x ``sy`` phases (``DECONV_X/Y_STRIDE`` 1..4, sometimes
  9..12: NVIDIA's write requests change at 9), the phase cubes ``CONTRACT_STRIDE_0`` apart
  (the guide's ``ceil(K*b/32) * surface stride``, or more), a random CONTRACT_STRIDE_1 (the RTL
  does not use it) and DATAIN_CHANNEL (neither);
* split / merge: a W x H x C feature cube to C planes and back, DATAOUT_CHANNEL equal to
  DATAIN_CHANNEL or another count with as many atoms of channels (the RTL takes the planes from
  DATAIN_CHANNEL); plane lines and planes 64-byte aligned as the guide asks, or only 32-byte
  aligned in one layer of five.

Widths 1..80 (past one 64-pixel request of split/merge), heights 1..4, channels 1..48; line and
surface strides with random gaps. Every output region is zeroed and checked.
"""
from __future__ import annotations

import random

from verif.gen.common import Alloc, Layer, Program, emit, rand_bytes, regs
from verif.gen.writer import TraceWriter

ATOM = 32


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _layer(rng: random.Random, alloc: Alloc, w: TraceWriter) -> Layer:
    mode = rng.choice(("contract", "split", "merge"))
    prec = rng.choice((0, 0, 1, 2))
    b = 1 if prec == 0 else 2
    A = ATOM // b
    W, H = (rng.randint(1, 80) if rng.random() < 0.4 else rng.randint(1, 12)), rng.randint(1, 4)
    gap = lambda: ATOM * rng.choice((0, 0, 1, 2))          # noqa: E731
    misc = regs("RBK", "D_MISC_CFG", RUBIK_MODE=("contract", "split", "merge").index(mode),
                IN_PRECISION=prec)
    ws = []
    if mode == "contract":
        K = rng.randint(1, 48)
        G = _ceil(K, A)
        sx = rng.randint(1, 4) if rng.random() < 0.85 else rng.randint(9, 12)
        sy = rng.randint(1, 3)
        W = min(W, 40)
        ils = ATOM * W + gap()
        iss = ils * H + gap()
        cs0 = G * iss + gap()
        n_in = cs0 * (sx * sy - 1) + iss * G
        ia = alloc.take(n_in)
        w.mem_load(ia, rand_bytes(rng, n_in))
        ols = ATOM * W * sx + gap()
        oss = ols * H * sy + gap()
        n_out = oss * (G - 1) + ols * (H * sy - 1) + ATOM * W * sx
        oa = alloc.take(n_out)
        cin = rng.randint(1, 4096)                       # not used by the RTL
        ws += [regs("RBK", "D_DAIN_LINE_STRIDE", DAIN_LINE_STRIDE=ils >> 5),
               regs("RBK", "D_DAIN_SURF_STRIDE", DAIN_SURF_STRIDE=iss >> 5),
               regs("RBK", "D_CONTRACT_STRIDE_0", CONTRACT_STRIDE_0=cs0 >> 5),
               regs("RBK", "D_CONTRACT_STRIDE_1", CONTRACT_STRIDE_1=rng.getrandbits(27)),
               regs("RBK", "D_DAOUT_LINE_STRIDE", DAOUT_LINE_STRIDE=ols >> 5),
               regs("RBK", "D_DAOUT_SURF_STRIDE", DAOUT_SURF_STRIDE=oss >> 5),
               regs("RBK", "D_DECONV_STRIDE", DECONV_X_STRIDE=sx - 1, DECONV_Y_STRIDE=sy - 1)]
        cout = K
        desc = f"contract {['int8', 'int16', 'fp16'][prec]} {W}x{H}x{K} s{sx}x{sy}"
    else:
        C = rng.randint(1, 48)
        G = _ceil(C, A)
        # DATAOUT_CHANNEL: equal, or another count of the same atoms of channels
        other = rng.randint((G - 1) * A + 1, G * A)
        cin, cout = C, (C if rng.random() < 0.7 else other)
        align = ATOM if rng.random() < 0.2 else 2 * ATOM
        pline = _ceil(W * b, align) * align + align * rng.choice((0, 0, 1))
        plane = _ceil(pline * H, align) * align + align * rng.choice((0, 0, 1))
        fls = ATOM * W + gap()
        fss = fls * H + gap()
        n_feat, n_planes = fss * G, plane * C
        if mode == "split":
            ia, n_out = alloc.take(n_feat), n_planes
            w.mem_load(ia, rand_bytes(rng, n_feat))
            oa = alloc.take(n_planes, align)
            ws += [regs("RBK", "D_DAIN_LINE_STRIDE", DAIN_LINE_STRIDE=fls >> 5),
                   regs("RBK", "D_DAIN_SURF_STRIDE", DAIN_SURF_STRIDE=fss >> 5),
                   regs("RBK", "D_DAOUT_LINE_STRIDE", DAOUT_LINE_STRIDE=pline >> 5),
                   regs("RBK", "D_DAOUT_PLANAR_STRIDE", DAOUT_PLANAR_STRIDE=plane >> 5)]
        else:
            ia, n_out = alloc.take(n_planes, align), n_feat
            w.mem_load(ia, rand_bytes(rng, n_planes))
            oa = alloc.take(n_feat)
            ws += [regs("RBK", "D_DAIN_LINE_STRIDE", DAIN_LINE_STRIDE=pline >> 5),
                   regs("RBK", "D_DAIN_PLANAR_STRIDE", DAIN_PLANAR_STRIDE=plane >> 5),
                   regs("RBK", "D_DAOUT_LINE_STRIDE", DAOUT_LINE_STRIDE=fls >> 5),
                   regs("RBK", "D_DAOUT_SURF_STRIDE", DAOUT_SURF_STRIDE=fss >> 5)]
        desc = (f"{mode} {['int8', 'int16', 'fp16'][prec]} {W}x{H}x{C} out channels {cout} "
                f"align {align}")
    ws = [misc,
          regs("RBK", "D_DAIN_RAM_TYPE", DATAIN_RAM_TYPE=1),
          regs("RBK", "D_DAOUT_RAM_TYPE", DATAOUT_RAM_TYPE=1),
          regs("RBK", "D_DATAIN_SIZE_0", DATAIN_WIDTH=W - 1, DATAIN_HEIGHT=H - 1),
          regs("RBK", "D_DATAIN_SIZE_1", DATAIN_CHANNEL=min(cin, 8192) - 1),
          regs("RBK", "D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=cout - 1),
          regs("RBK", "D_DAIN_ADDR_LOW", DAIN_ADDR_LOW=(ia & 0xFFFFFFFF) >> 5),
          regs("RBK", "D_DAIN_ADDR_HIGH", DAIN_ADDR_HIGH=ia >> 32),
          regs("RBK", "D_DAOUT_ADDR_LOW", DAOUT_ADDR_LOW=(oa & 0xFFFFFFFF) >> 5),
          regs("RBK", "D_DAOUT_ADDR_HIGH", DAOUT_ADDR_HIGH=oa >> 32),
          regs("RBK", "D_PERF_ENABLE", PERF_EN=rng.getrandbits(1))] + ws
    return Layer(("RBK",), ws, [(oa, n_out)], desc)


def generate(seed: int, cfg) -> Program:
    """The RUBIK program of ``seed`` for ``cfg`` (ValueError without RUBIK)."""
    if not cfg.rubik:
        raise ValueError(f"{cfg.name} has no RUBIK (rubik=False)")
    rng = random.Random(f"rubik-{seed}")
    w = TraceWriter(f"rubik_{seed}")
    prog = Program("rubik", seed, w)
    alloc = Alloc(rng)
    for _ in range(rng.randint(1, 3)):
        prog.layers.append(_layer(rng, alloc, w))
    emit(prog, intrs=("RUBIK",))
    return prog
