"""SDP core datapath with the BS/BN/EW sub-units bypassed: the output converter only
(v1_ias_unit_description.rst "SDP", output converter: D_CVT_OFFSET / D_CVT_SCALE / D_CVT_SHIFT).

Per element (int8 in, int8 out, OUT_PRECISION = INT8):

    y = saturate_int8(round((x - offset) * scale / 2**shift))

* ``x`` is the int8 input sign-extended to 32 bits, ``offset`` the signed 32-bit D_CVT_OFFSET,
  ``scale`` the signed 16-bit D_CVT_SCALE, ``shift`` the 6-bit D_CVT_SHIFT; the product is exact
  (33 x 16 -> 49 bits).
* Rounding half away from zero (v1_ias_precision.rst "Convertor"), as NVIDIA's RTL does it;
  a shift of 49 or more yields 0: :func:`hdl.lib.fixed.shift_right_round`.
* Saturation to [-128, 127] (NVIDIA saturates to 17 bits and then to 8; same result):
  :func:`hdl.lib.fixed.truncate` = round then :func:`hdl.lib.fixed.saturate`.

Offset 0, scale 1, shift 0 is the identity. Two pipeline stages (:class:`hdl.lib.stream.Map`:
the product, then round/saturate) with valid/ready back-pressure; latency 2 cycles, throughput
one atom (cfg.memory_atomic elements) per cycle.
"""
from __future__ import annotations

from amaranth.hdl import Module, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.config import NvdlaConfig
from hdl.lib.fixed import truncate
from hdl.lib.stream import Map
from hdl.sdp.rdma import atom_layout

__all__ = ["SdpCore"]

_PROD_BITS = 49          # (int8 - int32) * int16: 33 x 16 bits, exact


class SdpCore(wiring.Component):
    """SDP output converter on a stream of atoms.

    Ports: ``i`` In(stream of atom_layout(cfg)), ``o`` Out(stream of atom_layout(cfg)),
    ``cvt_offset`` In(signed 32), ``cvt_scale`` In(signed 16), ``cvt_shift`` In(6) (held stable
    for the whole layer). Latency 2 cycles, one atom per cycle.
    """

    def __init__(self, cfg: NvdlaConfig):
        self.cfg = cfg
        super().__init__({
            "i": In(stream.Signature(atom_layout(cfg))),
            "o": Out(stream.Signature(atom_layout(cfg))),
            "cvt_offset": In(signed(32)),
            "cvt_scale": In(signed(16)),
            "cvt_shift": In(6),
        })

    def elaborate(self, platform):
        m = Module()
        atom = atom_layout(self.cfg)
        lanes = self.cfg.memory_atomic
        products = data.ArrayLayout(signed(_PROD_BITS), lanes)

        def scale(m, x):
            """stage 1: (x - offset) * scale per lane, exact (49 bits)."""
            return [(x[k] - self.cvt_offset) * self.cvt_scale for k in range(lanes)]

        def round_saturate(m, p):
            """stage 2: round half away from zero by cvt_shift, saturate to the element width."""
            return [truncate(p[k], self.cvt_shift, self.cfg.bpe) for k in range(lanes)]

        m.submodules.mul = mul = Map(atom, products, scale)
        m.submodules.cvt = cvt = Map(products, atom, round_saturate)
        wiring.connect(m, wiring.flipped(self.i), mul.i)
        wiring.connect(m, mul.o, cvt.i)
        wiring.connect(m, cvt.o, wiring.flipped(self.o))
        return m
