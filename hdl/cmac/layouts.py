"""Stream payloads of the convolution MAC path (docs/conv.md "CSC -> CMAC", "CMAC -> CACC").

* :func:`op_layout`: one atomic operation, CSC -> CMAC (a data atom, the weights of atomic_k
  kernels, the stripe position and the first/last flags of the accumulation);
* :func:`psum_layout`: one partial-sum atom, CMAC -> CACC (one signed sum per kernel, with the
  op's position and flags passed through).
"""
from __future__ import annotations

from amaranth.hdl import signed
from amaranth.lib import data

__all__ = ["op_layout", "psum_layout"]


def op_layout(atomic_c: int, atomic_k: int, stripe_max: int) -> data.StructLayout:
    """Payload of CSC's ``op`` stream (docs/conv.md "CSC"): one atomic operation.

    Fields:
        data: ``ArrayLayout(signed(8), atomic_c)`` the data atom (pad value outside the input).
        wt: ``ArrayLayout(ArrayLayout(signed(8), atomic_c), atomic_k)``; ``wt[k][c]`` is the
            weight of kernel k (of the kernel group) for channel c (0 past the end).
        pos: ``range(stripe_max)`` pixel index inside the stripe.
        first: 1 bit, first (channel block, r, s) of the stripe (start the accumulation).
        last: 1 bit, last (channel block, r, s) of the stripe (the pixel's sum is complete).

    Raises:
        ValueError: a size < 1.
    """
    for name, v in (("atomic_c", atomic_c), ("atomic_k", atomic_k), ("stripe_max", stripe_max)):
        if v < 1:
            raise ValueError(f"{name} must be >= 1, not {v}")
    atom = data.ArrayLayout(signed(8), atomic_c)
    return data.StructLayout({
        "data": atom,
        "wt": data.ArrayLayout(atom, atomic_k),
        "pos": range(stripe_max),
        "first": 1,
        "last": 1,
    })


def psum_layout(atomic_k: int, result_bits: int, stripe_max: int) -> data.StructLayout:
    """Payload of CMAC's ``psum`` stream (docs/conv.md "CMAC"): one partial-sum atom.

    Fields:
        sum: ``ArrayLayout(signed(result_bits), atomic_k)``; ``sum[k] = sum_c data[c]*wt[k][c]``
            (``result_bits`` = cfg.mac_result_width, 19 on nv_small: exact for int8 x int8 x
            atomic_c).
        pos, first, last: as in :func:`op_layout`, passed through.

    Raises:
        ValueError: a size < 1.
    """
    for name, v in (("atomic_k", atomic_k), ("result_bits", result_bits),
                    ("stripe_max", stripe_max)):
        if v < 1:
            raise ValueError(f"{name} must be >= 1, not {v}")
    return data.StructLayout({
        "sum": data.ArrayLayout(signed(result_bits), atomic_k),
        "pos": range(stripe_max),
        "first": 1,
        "last": 1,
    })
