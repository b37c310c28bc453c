# amaranth: UnusedElaboratable=no
"""CMAC MAC array (hdl/cmac): exact sums of int8 x int8 products against a plain-Python formula,
with random stalls on both sides, and one op per cycle at full rate (docs/conv.md "CMAC")."""
from __future__ import annotations

import random

import pytest

from hdl.cmac import Cmac, op_layout, psum_layout
from hdl.config import NV_SMALL
from streams import simulate_streams, stream_get, stream_put


def _random_op(rng, atomic_c, atomic_k, stripe_max, extreme=False):
    if extreme:
        pick = lambda: rng.choice([-128, 127, -128, -1, 0])   # noqa: E731
    else:
        pick = lambda: rng.randrange(-128, 128)                # noqa: E731
    return {
        "data": [pick() for _ in range(atomic_c)],
        "wt": [[pick() for _ in range(atomic_c)] for _ in range(atomic_k)],
        "pos": rng.randrange(stripe_max),
        "first": rng.randrange(2),
        "last": rng.randrange(2),
    }


def _expected(op, first_cell, cells):
    return {
        "sum": [sum(d * w for d, w in zip(op["data"], op["wt"][first_cell + k]))
                for k in range(cells)],
        "pos": op["pos"], "first": op["first"], "last": op["last"],
    }


def _run(atomic_c, atomic_k, cells, first_cell, result_bits, stripe_max, ops, *, seed,
         p_in, p_out, timestamps=None):
    dut = Cmac(atomic_c, cells, result_bits, stripe_max, first_cell, atomic_k=atomic_k)
    rng_in, rng_out = random.Random(seed), random.Random(seed + 1)
    got = []

    async def producer(ctx):
        await stream_put(ctx, dut.op, ops, rng=rng_in, p_stall=p_in)

    async def consumer(ctx):
        got.extend(await stream_get(ctx, dut.psum, len(ops), rng=rng_out, p_stall=p_out,
                                    timestamps=timestamps))

    simulate_streams(dut, [producer], [consumer], [("op", dut.op), ("psum", dut.psum)])
    return got


@pytest.mark.parametrize("atomic_c,atomic_k,cells,first_cell,stripe_max", [
    (8, 8, 4, 0, 16),     # nv_small CMAC_A
    (8, 8, 4, 4, 16),     # nv_small CMAC_B
    (4, 2, 2, 0, 3),      # tiny, the whole kernel group in one instance
    (2, 2, 1, 1, 1),      # tiny, one cell, stripe of one pixel
])
def test_cmac_random_ops_with_stalls(atomic_c, atomic_k, cells, first_cell, stripe_max):
    result_bits = 16 + max(1, (atomic_c - 1).bit_length())
    rng = random.Random(atomic_c * 100 + first_cell)
    ops = [_random_op(rng, atomic_c, atomic_k, stripe_max, extreme=i % 3 == 0)
           for i in range(150)]
    # the extremes: every product -128 x -128 (the largest sum) and -128 x 127 (the smallest)
    ops.append({"data": [-128] * atomic_c, "wt": [[-128] * atomic_c] * atomic_k,
                "pos": stripe_max - 1, "first": 1, "last": 1})
    ops.append({"data": [-128] * atomic_c, "wt": [[127] * atomic_c] * atomic_k,
                "pos": 0, "first": 0, "last": 1})
    got = _run(atomic_c, atomic_k, cells, first_cell, result_bits, stripe_max, ops,
               seed=7, p_in=0.3, p_out=0.4)
    exp = [_expected(op, first_cell, cells) for op in ops]
    assert exp[-2]["sum"][0] == atomic_c * 16384 and exp[-1]["sum"][0] == -atomic_c * 16256
    lay = psum_layout(cells, result_bits, stripe_max)
    for i, (g, e) in enumerate(zip(got, exp)):
        assert g == lay.const(e), f"op {i}: got {g}, expected {e}"


def test_cmac_one_op_per_cycle_nv_small():
    cfg = NV_SMALL
    cells = cfg.mac_atomic_k // 2
    rng = random.Random(3)
    ops = [_random_op(rng, cfg.mac_atomic_c, cfg.mac_atomic_k, 16) for _ in range(64)]
    ts = []
    got = _run(cfg.mac_atomic_c, cfg.mac_atomic_k, cells, 0, cfg.mac_result_width, 16, ops,
               seed=1, p_in=0, p_out=0, timestamps=ts)
    lay = psum_layout(cells, cfg.mac_result_width, 16)
    assert got == [lay.const(_expected(op, 0, cells)) for op in ops]
    assert ts[-1] - ts[0] == len(ops) - 1          # no bubble: one op per cycle
    assert ts[0] <= 4                               # latency 3 on nv_small


def test_cmac_rejects_bad_sizes():
    with pytest.raises(ValueError):
        Cmac(8, 4, 18, 16)                 # 8 products of int8 need 19 bits
    with pytest.raises(ValueError):
        Cmac(8, 4, 19, 16, 4, atomic_k=6)  # kernels 4..7 of 6
    with pytest.raises(ValueError):
        Cmac(6, 4, 19, 16)
    assert op_layout(8, 8, 16).size == 8 * 8 + 8 * 8 * 8 + 4 + 2


def test_cmac_array_fork_join_with_stalls():
    """CMAC_A + CMAC_B joined: all atomic_k sums, in order, under random stalls."""
    from hdl.cmac import CmacArray
    cfg = NV_SMALL
    ac, ak, rb = cfg.mac_atomic_c, cfg.mac_atomic_k, cfg.mac_result_width
    rng = random.Random(9)
    ops = [_random_op(rng, ac, ak, 16, extreme=i % 4 == 0) for i in range(120)]
    dut = CmacArray(ac, ak, rb, 16)
    got = []

    async def producer(ctx):
        await stream_put(ctx, dut.op, ops, rng=random.Random(1), p_stall=0.3)

    async def consumer(ctx):
        got.extend(await stream_get(ctx, dut.psum, len(ops), rng=random.Random(2), p_stall=0.4))

    simulate_streams(dut, [producer], [consumer], [("op", dut.op), ("psum", dut.psum)])
    lay = psum_layout(ak, rb, 16)
    assert got == [lay.const(_expected(op, 0, ak)) for op in ops]
