"""Convolution pipeline model: CDMA, CBUF, CSC, CMAC, CACC (stub, being written)."""
from __future__ import annotations

import numpy as np


class ConvCore:
    """Direct/image convolution of one hardware layer; keeps CBUF contents across layers."""

    def __init__(self, cfg, mem):
        self.cfg, self.mem = cfg, mem

    def run(self, cdma, csc, cmac, cacc) -> np.ndarray:
        """Return the CACC output cube delivered to SDP, shape (K, H_out, W_out), int64."""
        raise NotImplementedError("convolution model not written yet")
