"""PDP share line buffer limit ("Limitation / PDP": first/mid/last_out_width within the maximum
flying width): verif.model.pdp.line_buffer_width and the model's rejection of wider outputs.

nv_small's NV_NVDLA_PDP_CORE_cal2d.v keeps 1 output line in flight when the vertical stride is at
least the kernel height, else kh / ceil(kh/2) / (2 or 3) / 2 lines for strides 1 / 2 / 3 / 4+,
and gives each line 128 / 64 / 32 / 16 columns of its 8 banks of 16 columns for 1 / 2 / 3-4 /
5-8 lines. Observed on NVIDIA's RTL through our player: AVE 3x5 stride 4x1 with 20 output
columns hangs (PDP stays busy), MAX 8x5 stride 4x1 with 18 writes values that follow no window,
while the same kernels with 16 (split bands 2 + 16) and 5 columns pass; a band of 17 or 19 in a
split layer fails the same way (issue 11 generated programs pdp 37 and 44).
"""
from __future__ import annotations

import pytest

from test_pdp_narrow_bands import run_split
from verif.model import ModelConfigError
from verif.model.pdp import line_buffer_width

# (kh, sy) -> columns, from the rule in the module docstring
TABLE = {(1, 1): 128, (2, 2): 128, (8, 8): 128, (3, 5): 128,
         (2, 1): 64, (3, 1): 32, (4, 1): 32, (5, 1): 16, (8, 1): 16,
         (3, 2): 64, (4, 2): 64, (5, 2): 32, (8, 2): 32,
         (4, 3): 64, (6, 3): 64, (7, 3): 32, (8, 3): 32,
         (5, 4): 64, (8, 4): 64, (8, 7): 64}


@pytest.mark.parametrize("kh, sy", sorted(TABLE))
def test_line_buffer_width(kh, sy):
    assert line_buffer_width(kh, sy) == TABLE[(kh, sy)]


def test_wider_band_is_rejected():
    """A split band of 17 output columns with kernel height 5, stride 1 (16 columns) is rejected
    naming D_PARTIAL_WIDTH_OUT; the same layer with kernel height 1 runs."""
    ins, outs = [2, 17], [1, 17]                      # MAX k2 s1: first_in 2, last_in 17
    run_split(1, 2, 1, 0, 0, ins, outs)               # kh 1: 128 columns, fine
    with pytest.raises(ModelConfigError, match="D_PARTIAL_WIDTH_OUT.*17.*16 columns"):
        run_split(1, 2, 1, 0, 0, ins, outs, kh=5)
