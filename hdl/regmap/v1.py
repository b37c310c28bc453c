"""NVDLA v1's register map (the nvdlav1 branch: nv_full), as changes to v2's.

v1 is the register map of NVIDIA's nv_full RTL, its v1 traces (``../shared/nvdla/traces/nv_full_v1``)
and the nv_full build of its firmware; ``../shared/nvdla/spec/v1/arnvdla.h`` describes it.
``tests/test_regmap_v1.py`` proves the map built here equal to that header, register for
register and field for field (bit range and reset value). It differs from v2 (``nvdla_registers.py``)
in three ways only:

* unit base addresses (:data:`V1_BASES`): GLB at 0x0, MCIF 0x2000, CVIF 0x3000, BDMA 0x4000,
  CDMA 0x5000 ... RBK 0x10000 (v2: CFGROM 0x0, GLB 0x1000, ..., BDMA 0x10000, RBK 0x11000);
  every v2 register of those units sits at the same offset inside its unit;
* v1 has no CFGROM. Its 4 KiB window at 0x1000 is GEC (arnvdla.h lists 32 GEC registers), which
  NVIDIA's nvdlav1 RTL does not implement: vmod/nvdla/glb/NV_NVDLA_GLB_fc.v answers every GEC
  access without holding any register (a "fake client"). GEC is left out of this map;
* 74 fields (:data:`V1_FIELDS`) have other bit ranges or reset values: v1's addresses and
  strides are in 32-byte units (bits 4:0 are not stored: nv_full's memory atom is 32 bytes),
  its CBUF bank fields are 4 bits (16 banks), ENTRY_PER_SLICE 12 bits, and the SDP
  bypass/disable fields reset to 0 (NVIDIA's nvdlav1 RTL agrees: NV_NVDLA_SDP_REG_dual.v resets
  ``bs_bypass`` to 0, the nv_small branch to 1).

Access types and enum values are v2's (arnvdla.h carries neither in a form that differs).
"""
from __future__ import annotations

from dataclasses import replace

from hdl.regmap._dsl import U

#: byte base address of each v1 unit (arnvdla.h; v2's CFGROM has no v1 counterpart)
V1_BASES = {
    "GLB": 0x0, "MCIF": 0x2000, "CVIF": 0x3000, "BDMA": 0x4000, "CDMA": 0x5000, "CSC": 0x6000,
    "CMAC_A": 0x7000, "CMAC_B": 0x8000, "CACC": 0x9000, "SDP_RDMA": 0xA000, "SDP": 0xB000,
    "PDP_RDMA": 0xC000, "PDP": 0xD000, "CDP_RDMA": 0xE000, "CDP": 0xF000, "RBK": 0x10000,
}

#: (unit, register, field) -> (lsb, msb, reset) where v1 differs from v2 (arnvdla.h ``_RANGE``
#: and ``_DEFAULT`` of each field)
V1_FIELDS = {
    ('CDMA', 'D_DAIN_ADDR_LOW_0', 'DATAIN_ADDR_LOW_0'): (5, 31, 0x0),
    ('CDMA', 'D_DAIN_ADDR_LOW_1', 'DATAIN_ADDR_LOW_1'): (5, 31, 0x0),
    ('CDMA', 'D_LINE_STRIDE', 'LINE_STRIDE'): (5, 31, 0x0),
    ('CDMA', 'D_LINE_UV_STRIDE', 'UV_LINE_STRIDE'): (5, 31, 0x0),
    ('CDMA', 'D_SURF_STRIDE', 'SURF_STRIDE'): (5, 31, 0x0),
    ('CDMA', 'D_BATCH_STRIDE', 'BATCH_STRIDE'): (5, 31, 0x0),
    ('CDMA', 'D_ENTRY_PER_SLICE', 'ENTRIES'): (0, 11, 0x0),
    ('CDMA', 'D_WEIGHT_ADDR_LOW', 'WEIGHT_ADDR_LOW'): (5, 31, 0x0),
    ('CDMA', 'D_WEIGHT_BYTES', 'WEIGHT_BYTES'): (7, 31, 0x0),
    ('CDMA', 'D_WGS_ADDR_LOW', 'WGS_ADDR_LOW'): (5, 31, 0x0),
    ('CDMA', 'D_WMB_ADDR_LOW', 'WMB_ADDR_LOW'): (5, 31, 0x0),
    ('CDMA', 'D_WMB_BYTES', 'WMB_BYTES'): (7, 27, 0x0),
    ('CDMA', 'D_BANK', 'DATA_BANK'): (0, 3, 0x0),
    ('CDMA', 'D_BANK', 'WEIGHT_BANK'): (16, 19, 0x0),
    ('CSC', 'D_ENTRY_PER_SLICE', 'ENTRIES'): (0, 11, 0x0),
    ('CSC', 'D_WEIGHT_BYTES', 'WEIGHT_BYTES'): (7, 31, 0x0),
    ('CSC', 'D_WMB_BYTES', 'WMB_BYTES'): (7, 27, 0x0),
    ('CSC', 'D_BANK', 'DATA_BANK'): (0, 3, 0x0),
    ('CSC', 'D_BANK', 'WEIGHT_BANK'): (16, 19, 0x0),
    ('CACC', 'D_DATAOUT_ADDR', 'DATAOUT_ADDR'): (5, 31, 0x0),
    ('CACC', 'D_LINE_STRIDE', 'LINE_STRIDE'): (5, 23, 0x0),
    ('CACC', 'D_SURF_STRIDE', 'SURF_STRIDE'): (5, 23, 0x0),
    ('SDP_RDMA', 'D_SRC_BASE_ADDR_LOW', 'SRC_BASE_ADDR_LOW'): (5, 31, 0x0),
    ('SDP_RDMA', 'D_SRC_LINE_STRIDE', 'SRC_LINE_STRIDE'): (5, 31, 0x0),
    ('SDP_RDMA', 'D_SRC_SURFACE_STRIDE', 'SRC_SURFACE_STRIDE'): (5, 31, 0x0),
    ('SDP_RDMA', 'D_BRDMA_CFG', 'BRDMA_DISABLE'): (0, 0, 0x0),
    ('SDP_RDMA', 'D_BS_BASE_ADDR_LOW', 'BS_BASE_ADDR_LOW'): (5, 31, 0x0),
    ('SDP_RDMA', 'D_BS_LINE_STRIDE', 'BS_LINE_STRIDE'): (5, 31, 0x0),
    ('SDP_RDMA', 'D_BS_SURFACE_STRIDE', 'BS_SURFACE_STRIDE'): (5, 31, 0x0),
    ('SDP_RDMA', 'D_BS_BATCH_STRIDE', 'BS_BATCH_STRIDE'): (5, 31, 0x0),
    ('SDP_RDMA', 'D_NRDMA_CFG', 'NRDMA_DISABLE'): (0, 0, 0x0),
    ('SDP_RDMA', 'D_BN_BASE_ADDR_LOW', 'BN_BASE_ADDR_LOW'): (5, 31, 0x0),
    ('SDP_RDMA', 'D_BN_LINE_STRIDE', 'BN_LINE_STRIDE'): (5, 31, 0x0),
    ('SDP_RDMA', 'D_BN_SURFACE_STRIDE', 'BN_SURFACE_STRIDE'): (5, 31, 0x0),
    ('SDP_RDMA', 'D_BN_BATCH_STRIDE', 'BN_BATCH_STRIDE'): (5, 31, 0x0),
    ('SDP_RDMA', 'D_ERDMA_CFG', 'ERDMA_DISABLE'): (0, 0, 0x0),
    ('SDP_RDMA', 'D_EW_BASE_ADDR_LOW', 'EW_BASE_ADDR_LOW'): (5, 31, 0x0),
    ('SDP_RDMA', 'D_EW_LINE_STRIDE', 'EW_LINE_STRIDE'): (5, 31, 0x0),
    ('SDP_RDMA', 'D_EW_SURFACE_STRIDE', 'EW_SURFACE_STRIDE'): (5, 31, 0x0),
    ('SDP_RDMA', 'D_EW_BATCH_STRIDE', 'EW_BATCH_STRIDE'): (5, 31, 0x0),
    ('SDP', 'D_DST_BASE_ADDR_LOW', 'DST_BASE_ADDR_LOW'): (5, 31, 0x0),
    ('SDP', 'D_DST_LINE_STRIDE', 'DST_LINE_STRIDE'): (5, 31, 0x0),
    ('SDP', 'D_DST_SURFACE_STRIDE', 'DST_SURFACE_STRIDE'): (5, 31, 0x0),
    ('SDP', 'D_DP_BS_CFG', 'BS_BYPASS'): (0, 0, 0x0),
    ('SDP', 'D_DP_BS_CFG', 'BS_ALU_BYPASS'): (1, 1, 0x0),
    ('SDP', 'D_DP_BS_CFG', 'BS_MUL_BYPASS'): (4, 4, 0x0),
    ('SDP', 'D_DP_BS_CFG', 'BS_MUL_PRELU'): (5, 5, 0x0),
    ('SDP', 'D_DP_BS_CFG', 'BS_RELU_BYPASS'): (6, 6, 0x0),
    ('SDP', 'D_DP_BN_CFG', 'BN_BYPASS'): (0, 0, 0x0),
    ('SDP', 'D_DP_BN_CFG', 'BN_ALU_BYPASS'): (1, 1, 0x0),
    ('SDP', 'D_DP_BN_CFG', 'BN_MUL_BYPASS'): (4, 4, 0x0),
    ('SDP', 'D_DP_BN_CFG', 'BN_RELU_BYPASS'): (6, 6, 0x0),
    ('SDP', 'D_DP_EW_CFG', 'EW_BYPASS'): (0, 0, 0x0),
    ('SDP', 'D_DP_EW_CFG', 'EW_ALU_BYPASS'): (1, 1, 0x0),
    ('SDP', 'D_DP_EW_CFG', 'EW_MUL_BYPASS'): (4, 4, 0x0),
    ('SDP', 'D_DP_EW_CFG', 'EW_LUT_BYPASS'): (6, 6, 0x0),
    ('SDP', 'D_DP_EW_ALU_CFG', 'EW_ALU_CVT_BYPASS'): (1, 1, 0x0),
    ('SDP', 'D_DP_EW_MUL_CFG', 'EW_MUL_CVT_BYPASS'): (1, 1, 0x0),
    ('SDP', 'D_DST_BATCH_STRIDE', 'DST_BATCH_STRIDE'): (5, 31, 0x0),
    ('PDP_RDMA', 'D_SRC_BASE_ADDR_LOW', 'SRC_BASE_ADDR_LOW'): (5, 31, 0x0),
    ('PDP_RDMA', 'D_SRC_LINE_STRIDE', 'SRC_LINE_STRIDE'): (5, 31, 0x0),
    ('PDP_RDMA', 'D_SRC_SURFACE_STRIDE', 'SRC_SURFACE_STRIDE'): (5, 31, 0x0),
    ('PDP', 'D_SRC_BASE_ADDR_LOW', 'SRC_BASE_ADDR_LOW'): (5, 31, 0x0),
    ('PDP', 'D_SRC_LINE_STRIDE', 'SRC_LINE_STRIDE'): (5, 31, 0x0),
    ('PDP', 'D_SRC_SURFACE_STRIDE', 'SRC_SURFACE_STRIDE'): (5, 31, 0x0),
    ('PDP', 'D_DST_BASE_ADDR_LOW', 'DST_BASE_ADDR_LOW'): (5, 31, 0x0),
    ('PDP', 'D_DST_LINE_STRIDE', 'DST_LINE_STRIDE'): (5, 31, 0x0),
    ('PDP', 'D_DST_SURFACE_STRIDE', 'DST_SURFACE_STRIDE'): (5, 31, 0x0),
    ('CDP_RDMA', 'D_SRC_BASE_ADDR_LOW', 'SRC_BASE_ADDR_LOW'): (5, 31, 0x0),
    ('CDP_RDMA', 'D_SRC_LINE_STRIDE', 'SRC_LINE_STRIDE'): (5, 31, 0x0),
    ('CDP_RDMA', 'D_SRC_SURFACE_STRIDE', 'SRC_SURFACE_STRIDE'): (5, 31, 0x0),
    ('CDP', 'D_DST_BASE_ADDR_LOW', 'DST_BASE_ADDR_LOW'): (5, 31, 0x0),
    ('CDP', 'D_DST_LINE_STRIDE', 'DST_LINE_STRIDE'): (5, 31, 0x0),
    ('CDP', 'D_DST_SURFACE_STRIDE', 'DST_SURFACE_STRIDE'): (5, 31, 0x0),
}


def v1_units(v2_units: list[U]) -> list[U]:
    """The v1 units: copies of ``v2_units`` (``hdl.regmap.nvdla_registers.UNITS``, with their
    signed marks) rebased to :data:`V1_BASES`, CFGROM dropped and :data:`V1_FIELDS` applied.
    Raises KeyError naming an entry of V1_FIELDS or V1_BASES that is not in the v2 map."""
    by_name = {u.name: u for u in v2_units}
    for name in V1_BASES:
        if name not in by_name:
            raise KeyError(f"V1_BASES: no v2 unit {name}")
    left = dict(V1_FIELDS)
    out = []
    for u in v2_units:
        if u.name not in V1_BASES:
            continue
        regs = []
        for r in u.registers:
            fields = []
            for f in r.fields:
                ch = left.pop((u.name, r.name, f.name), None)
                if ch is not None:
                    f = replace(f, lsb=ch[0], msb=ch[1], reset=ch[2])
                fields.append(f)
            regs.append(replace(r, fields=fields))
        out.append(replace(u, base=V1_BASES[u.name], registers=regs))
    if left:
        raise KeyError(f"V1_FIELDS: no such v2 field(s) {sorted(left)}")
    return out
