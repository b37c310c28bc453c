"""Register fields that hold two's-complement (signed) values.

NVIDIA's RDL has no signedness property, so this table states it, one entry per field, with the
source: the field description in ``../shared/nvdla/spec/manual/NVDLA_<UNIT>.rdl`` ("signed value",
"signed data", "always signed"), v1_ias_programming_guide.rst and v1_ias_precision.rst (converter
offsets/scales and ALU/multiplier operands are signed), and the traces (negative values written
sign-extended to the field width). ``hdl.regmap`` marks these fields ``signed=True``; the RTL
register files give them ``signed(width)`` shapes and the C header notes them. A name here that is
not in the map is an error at import (no silent typo).
"""
from __future__ import annotations

# LUT registers SDP and CDP share (lut-programming.rst; RDL "signed data"/"signed value"): entries,
# index offset/select, slope scale and shift (a negative shift shifts left).
_LUT = {
    "S_LUT_ACCESS_DATA": ("LUT_DATA",),
    "S_LUT_INFO": ("LUT_LE_INDEX_OFFSET", "LUT_LE_INDEX_SELECT", "LUT_LO_INDEX_SELECT"),
    **{f"S_LUT_{t}_SLOPE_{k}": (f"LUT_{t}_SLOPE_UFLOW_{k}", f"LUT_{t}_SLOPE_OFLOW_{k}")
       for t in ("LE", "LO") for k in ("SCALE", "SHIFT")},
}

#: {unit: {register: (field, ...)}}
SIGNED_FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    # CDMA RDL: "Mean value is always signed integer value", "CVT_OFFSET is signed 16-bit value",
    # "CVT_SCALE is signed 16-bit value", "PAD_VALUE in CDMA is always signed integer".
    "CDMA": {
        "D_MEAN_GLOBAL_0": ("MEAN_RY", "MEAN_GU"),
        "D_MEAN_GLOBAL_1": ("MEAN_BV", "MEAN_AX"),
        "D_CVT_OFFSET": ("CVT_OFFSET",),
        "D_CVT_SCALE": ("CVT_SCALE",),
        "D_ZERO_PADDING_VALUE": ("PAD_VALUE",),
    },
    # CSC RDL: "PAD_VALUE in CSC is always signed value".
    "CSC": {"D_ZERO_PADDING_VALUE": ("PAD_VALUE",)},
    # SDP: operands and converter parameters (programming guide "SDP", precision guide "SDP");
    # LUT entries, index offset/select, slope scale/shift (RDL: "signed value").
    "SDP": {
        **_LUT,
        "D_DP_BS_ALU_SRC_VALUE": ("BS_ALU_OPERAND",),
        "D_DP_BS_MUL_SRC_VALUE": ("BS_MUL_OPERAND",),
        "D_DP_BN_ALU_SRC_VALUE": ("BN_ALU_OPERAND",),
        "D_DP_BN_MUL_SRC_VALUE": ("BN_MUL_OPERAND",),
        "D_DP_EW_ALU_SRC_VALUE": ("EW_ALU_OPERAND",),
        "D_DP_EW_ALU_CVT_OFFSET_VALUE": ("EW_ALU_CVT_OFFSET",),
        "D_DP_EW_ALU_CVT_SCALE_VALUE": ("EW_ALU_CVT_SCALE",),
        "D_DP_EW_MUL_SRC_VALUE": ("EW_MUL_OPERAND",),
        "D_DP_EW_MUL_CVT_OFFSET_VALUE": ("EW_MUL_CVT_OFFSET",),
        "D_DP_EW_MUL_CVT_SCALE_VALUE": ("EW_MUL_CVT_SCALE",),
        "D_CVT_OFFSET": ("CVT_OFFSET",),
        "D_CVT_SCALE": ("CVT_SCALE",),
    },
    # PDP RDL: padding value "is a signed value ... reg setting need signed bit extended".
    "PDP": {f"D_POOLING_PADDING_VALUE_{k}_CFG": (f"PAD_VALUE_{k}X",) for k in range(1, 8)},
    # CDP RDL: converter offsets/scales "signed data"; LUT data, index offset/select, coverage
    # range high words, slope scale/shift "signed value".
    "CDP": {
        **_LUT,
        "S_LUT_LE_START_HIGH": ("LUT_LE_START_HIGH",),
        "S_LUT_LE_END_HIGH": ("LUT_LE_END_HIGH",),
        "S_LUT_LO_START_HIGH": ("LUT_LO_START_HIGH",),
        "S_LUT_LO_END_HIGH": ("LUT_LO_END_HIGH",),
        "D_DATIN_OFFSET": ("DATIN_OFFSET",),
        "D_DATIN_SCALE": ("DATIN_SCALE",),
        "D_DATOUT_OFFSET": ("DATOUT_OFFSET",),
        "D_DATOUT_SCALE": ("DATOUT_SCALE",),
    },
}
