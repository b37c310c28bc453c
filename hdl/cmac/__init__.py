"""CMAC: the convolution MAC array (v1_ias_unit_description.rst "Convolution MAC"; docs/conv.md
"CMAC"). :func:`op_layout` / :func:`psum_layout` are the stream payloads around it; :class:`Cmac`
is one half (CMAC_A or CMAC_B) of NVIDIA's MAC array, :class:`CmacArray` both halves joined."""
from hdl.cmac.layouts import op_layout, psum_layout
from hdl.cmac.mac import Cmac, CmacArray
from hdl.cmac.mac16 import Cmac16Int, cmac16_int_latency

__all__ = ["op_layout", "psum_layout", "Cmac", "CmacArray"]
__all__ += ["Cmac16Int", "cmac16_int_latency"]     # cfg.conv16 configurations (docs/conv16.md)
from hdl.cmac.fp16 import Cmac16Fp  # noqa: E402
__all__ += ["Cmac16Fp"]     # the FP16 engine of cfg.conv16 configurations (docs/conv16.md)
