"""SDP model: MRDMA/BRDMA/NRDMA input, BS/BN/EW sub-units, output converter, WDMA (stub)."""
from __future__ import annotations

import numpy as np


class SdpCore:
    def __init__(self, cfg, mem):
        self.cfg, self.mem = cfg, mem

    def needs_memory_operands(self, sdp) -> bool:
        """True when a non-bypassed BS/BN/EW ALU or MUL takes its operand from memory."""
        return False

    def run(self, rdma, sdp, flying_input):
        raise NotImplementedError("SDP model not written yet")
