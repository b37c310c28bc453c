"""PDP split width with a band narrower than the overlap (against "Limitation / PDP"): the
next band starts left of the cube's first column, and the PDP_RDMA band walker
(hdl.pdp.dma.BandWalker with hdl.pdp.bands.Bands, signed ``col``) reads from there, below the
cube's base address, as NVIDIA's nv_small PDP_RDMA does (NV_NVDLA_PDP_RDMA_ig.v: band b > 0
starts at the previous band's start plus its width minus kernel_width - stride_x);
verif/model/pdp.py computes the same result (tests/model/test_pdp_narrow_bands.py).

The walker's addresses are checked against the band geometry written out in Python
(tests/hdl/test_pdp_split.py ``_bands``/``test_band_walker``: random ready), for input and
output walkers; the output bands never move left.
"""
from __future__ import annotations

import pytest

from test_pdp_split import test_band_walker as band_walker_check
from verif.model.pdp import POOL_AVE, POOL_MAX

# (name, method, w, h, surfaces, kw, kh, sx, sy, pl, pt, pr, pb, ins, outs)
NARROW = [
    # first band 2 columns, overlap 3: band 1 starts at column -1 (pdp_1103's layer 2 kind)
    ("first_narrow", POOL_MAX, 11, 3, 2, 6, 2, 3, 1, 4, 0, 0, 0, [2, 9], [1, 3]),
    # overlap 6, bands of 3: band 1 at column -3, band 2 at 0 (pdp_1120's layer 0 kind)
    ("mid_narrow", POOL_AVE, 10, 2, 3, 7, 1, 1, 1, 5, 0, 0, 0, [3, 3, 4], [2, 3, 4]),
    # overlap 6, every band narrow: bands at -5, -3, -1
    ("all_narrow", POOL_MAX, 8, 2, 1, 8, 1, 2, 1, 7, 0, 1, 0, [1, 2, 2, 3], [1, 1, 1, 2]),
]


@pytest.mark.parametrize("output", [False, True])
@pytest.mark.parametrize("max_burst", [1, 4])
@pytest.mark.parametrize("case", NARROW, ids=[c[0] for c in NARROW])
def test_band_walker_left_of_base(case, max_burst, output):
    band_walker_check(case, max_burst, output)
