"""CACC: the convolution accumulator (v1_ias_unit_description.rst "Convolution Accumulator";
docs/conv.md "CACC"): adds up the partial sums of a stripe in an assembly buffer, rounds the
finished sums to int32 and delivers them to SDP. :class:`Cacc` is the component; in
``cfg.conv16`` configurations it also accumulates INT16 and FP16 layers (docs/conv16.md "CACC"),
with the FP48 arithmetic of :mod:`hdl.cacc.acc16`."""
from hdl.cacc.acc import Cacc, cacc_round

__all__ = ["Cacc", "cacc_round"]
