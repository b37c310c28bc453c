"""CDP model: LRN with LUT (stub, being written)."""
from __future__ import annotations


class CdpCore:
    def __init__(self, cfg, mem):
        self.cfg, self.mem = cfg, mem

    def run(self, rdma, cdp):
        raise NotImplementedError("CDP model not written yet")
