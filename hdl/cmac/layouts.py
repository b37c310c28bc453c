"""Stream payloads of the convolution MAC path (docs/conv.md "CSC -> CMAC", "CMAC -> CACC").

* :func:`op_layout`: one atomic operation, CSC -> CMAC (a data atom, the weights of atomic_k
  kernels, the stripe position and the first/last flags of the accumulation);
* :func:`psum_layout`: one partial-sum atom, CMAC -> CACC (one signed sum per kernel, with the
  op's position and flags passed through);
* :func:`op16_layout`, :func:`psum16_layout`: the same two payloads in configurations that
  compute INT16 and FP16 beside INT8 (``cfg.conv16``, nv_full): 16-bit lanes and one word per
  MAC cell, whose meaning follows the layer's precision (docs/conv16.md "CMAC").
"""
from __future__ import annotations

from amaranth.hdl import signed
from amaranth.lib import data
from amaranth.utils import ceil_log2

__all__ = ["op_layout", "psum_layout", "op16_layout", "psum16_layout", "cell_layout",
           "PREC_INT8", "PREC_INT16", "PREC_FP16"]

#: D_MISC_CFG.PROC_PRECISION codes of CDMA, CSC, CMAC_A/B and CACC (v1 register map)
PREC_INT8, PREC_INT16, PREC_FP16 = 0, 1, 2


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


def _check_sizes(**sizes):
    for name, v in sizes.items():
        if v < 1:
            raise ValueError(f"{name} must be >= 1, not {v}")


def op16_layout(atomic_c: int, atomic_k: int, stripe_max: int) -> data.StructLayout:
    """Payload of CSC's ``op`` stream in ``cfg.conv16`` configurations (docs/conv16.md "CMAC";
    UD "Convolution MAC": ``atomic_k / 2`` MAC cells of ``atomic_c`` 16-bit multipliers).

    Fields (raw bit lanes; the layer's D_MISC_CFG.PROC_PRECISION gives their meaning):
        data: ``ArrayLayout(16, atomic_c)``; lane c is channel c: an int16 or fp16 pattern, or
            in INT8 the int8 datum in bits 7:0 (bits 15:8 are ignored).
        wt: ``ArrayLayout(ArrayLayout(16, atomic_c), atomic_k // 2)``; ``wt[j][c]``: in INT16
            and FP16 the weight of kernel j for channel c; in INT8 two int8 weights, kernel
            2j in bits 7:0 and kernel 2j+1 in bits 15:8 (NVIDIA pairs them on one data byte:
            NV_NVDLA_CMAC_CORE_active.v). 0 past the kernel group's end.
        n: ``range(atomic_c + 1)``: lanes 0..n-1 hold the op's channels; lanes from n on are
            no operands at all (an FP16 NaN or exponent there must not count; NVIDIA's CSC
            masks them, NV_NVDLA_csc.v ``sc2mac_*_mask``).
        pos, first, last: as :func:`op_layout`.

    Raises:
        ValueError: a size < 1 or an odd atomic_k.
    """
    _check_sizes(atomic_c=atomic_c, atomic_k=atomic_k, stripe_max=stripe_max)
    if atomic_k % 2:
        raise ValueError(f"atomic_k must be even, not {atomic_k}")
    lanes = data.ArrayLayout(16, atomic_c)
    return data.StructLayout({
        "data": lanes,
        "wt": data.ArrayLayout(lanes, atomic_k // 2),
        "n": range(atomic_c + 1),
        "pos": range(stripe_max),
        "first": 1,
        "last": 1,
    })


def cell_layout(atomic_c: int) -> data.UnionLayout:
    """One MAC cell's word of a :func:`psum16_layout` atom (NVIDIA's ``mac_out_data``, 44
    bits at atomic_c 64, NV_NVDLA_CMAC_CORE_mac.v), with ``lc = log2(atomic_c)``:

    * ``i8``: ``ArrayLayout(signed(16 + lc), 2)``: the exact sums of kernels 2j and 2j+1;
    * ``i16``: ``signed(32 + lc)``: the exact sum of 16x16 products (38 bits at 64);
    * ``fp``: ``{s: signed(32 + lc), t: 4, nan: 1, nan_bits: 16}``: the FP16 word of
      verif/model/conv_fp16.py ``cmac_words``, value ``s * 2**(4*t - 50)``, or when ``nan``
      the fp16 NaN pattern ``nan_bits`` (the lowest-lane NaN weight, else the lowest NaN
      datum)."""
    _check_sizes(atomic_c=atomic_c)
    lc = ceil_log2(atomic_c)
    return data.UnionLayout({
        "i8": data.ArrayLayout(signed(16 + lc), 2),
        "i16": signed(32 + lc),
        "fp": data.StructLayout({"s": signed(32 + lc), "t": 4, "nan": 1, "nan_bits": 16}),
    })


def psum16_layout(atomic_c: int, cells: int, stripe_max: int) -> data.StructLayout:
    """Payload of CMAC's ``psum`` stream in ``cfg.conv16`` configurations: one
    :func:`cell_layout` word per MAC cell (``cells`` = atomic_k / 2 for the whole array, half
    that for CMAC_A or CMAC_B), ``pos``/``first``/``last`` passed through.

    Raises:
        ValueError: a size < 1.
    """
    _check_sizes(atomic_c=atomic_c, cells=cells, stripe_max=stripe_max)
    return data.StructLayout({
        "sum": data.ArrayLayout(cell_layout(atomic_c), cells),
        "pos": range(stripe_max),
        "first": 1,
        "last": 1,
    })
