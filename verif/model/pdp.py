"""PDP model: pooling (stub, being written)."""
from __future__ import annotations


class PdpCore:
    def __init__(self, cfg, mem):
        self.cfg, self.mem = cfg, mem

    def run(self, rdma, pdp, flying_input):
        raise NotImplementedError("PDP model not written yet")
