"""Shared building blocks for every NVDLA unit.

* :mod:`hdl.lib.stream` -- ``lib.stream`` pipeline stage, map stage and skid buffer.
* :mod:`hdl.lib.fixed` -- fixed-point primitives of v1_ias_precision.rst (rounding right shift,
  saturation, sign extension, truncation, saturating left shift).
* :mod:`hdl.lib.memory` -- block-RAM conventions (``RDWR_UNDEFINED``: no read of an entry in
  the cycle it is written).
"""
