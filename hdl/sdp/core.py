"""SDP core datapath with the BS/BN/EW sub-units bypassed: the output converter only
(v1_ias_unit_description.rst "SDP", output converter: D_CVT_OFFSET / D_CVT_SCALE / D_CVT_SHIFT).

Per element (int8 in, int8 out, OUT_PRECISION = INT8):

    y = saturate_int8(round((x - offset) * scale / 2**shift))

* ``x`` is the int8 input sign-extended to 32 bits, ``offset`` the signed 32-bit D_CVT_OFFSET,
  ``scale`` the signed 16-bit D_CVT_SCALE, ``shift`` the 6-bit D_CVT_SHIFT; the product is exact
  (33 x 16 -> 49 bits).
* Rounding matches NVIDIA's ``shiftrightsatsu``: round half away from zero (a positive value
  rounds up at exactly .5, a negative one only when the dropped part exceeds .5 in magnitude
  after the arithmetic shift); a shift of 49 or more yields 0.
* Saturation to [-128, 127] (NVIDIA saturates to 17 bits and then to 8; same result).

Offset 0, scale 1, shift 0 is the identity. Two pipeline stages with valid/ready back-pressure;
throughput one atom (cfg.memory_atomic elements) per cycle.
"""
from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal, signed
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.config import NvdlaConfig
from hdl.sdp.rdma import atom_layout

__all__ = ["SdpCore"]

_PROD_BITS = 49


class SdpCore(wiring.Component):
    """SDP output converter on a stream of atoms.

    Ports: ``i`` In(stream of atom_layout(cfg)), ``o`` Out(stream of atom_layout(cfg)),
    ``cvt_offset`` In(signed 32), ``cvt_scale`` In(signed 16), ``cvt_shift`` In(6) (held stable
    for the whole layer).
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
        n = self.cfg.memory_atomic

        # stage 1: (x - offset) * scale
        s1_valid = Signal()
        s1_prod = [Signal(signed(_PROD_BITS), name=f"s1_prod{i}") for i in range(n)]
        s1_ready = ~s1_valid | ~self.o.valid | self.o.ready
        m.d.comb += self.i.ready.eq(s1_ready)
        with m.If(s1_ready):
            m.d.sync += s1_valid.eq(self.i.valid)
            with m.If(self.i.valid):
                for i in range(n):
                    diff = self.i.payload[i].as_signed() - self.cvt_offset
                    m.d.sync += s1_prod[i].eq(diff * self.cvt_scale)

        # stage 2: rounding right shift + saturation to int8 -> output register
        shift = self.cvt_shift
        with m.If(~self.o.valid | self.o.ready):
            m.d.sync += self.o.valid.eq(s1_valid)
            with m.If(s1_valid):
                for i in range(n):
                    p = s1_prod[i]
                    floor = Signal(signed(_PROD_BITS), name=f"floor{i}")
                    guide = Signal(name=f"guide{i}")
                    sticky = Signal(name=f"sticky{i}")
                    rnd = Signal(signed(_PROD_BITS + 1), name=f"rnd{i}")
                    low_mask = (Const(1, _PROD_BITS + 1) << shift) - 1      # bits below the point
                    m.d.comb += [
                        floor.eq(p >> shift),
                        guide.eq(((p << 1) >> shift)[0]),
                        sticky.eq((p.as_unsigned() & (low_mask >> 1)[:_PROD_BITS]) != 0),
                        rnd.eq(floor + (guide & (~p[-1] | sticky))),
                    ]
                    sat = Mux(shift >= _PROD_BITS, 0,
                              Mux(rnd > 127, 127, Mux(rnd < -128, -128, rnd)))
                    m.d.sync += self.o.payload[i].eq(sat)
        return m
