"""NVDLA v1's register map (hdl/regmap/v1.py) equals NVIDIA's arnvdla.h, field for field.

For every unit of ``REGMAP_V1``: each register's byte address, each field's bit range and reset
value, each enum value; and every register arnvdla.h lists is in the map, except GEC's (NVIDIA's
nvdlav1 RTL answers the GEC window without registers, hdl/regmap/v1.py).
"""
from __future__ import annotations

import pytest

from hdl.config import NV_FULL, NV_LARGE
from hdl.regmap import REGMAP, REGMAP_V1, regmap_for
from verif.shared import have_shared

needs_shared = pytest.mark.skipif(not have_shared(), reason="../shared/nvdla (NVIDIA's arnvdla.h) is absent")


@pytest.fixture(scope="module")
def header():
    from verif.nvidia_v1h import load_header
    return load_header()


@needs_shared
def test_every_register_and_field(header):
    regs, fields, enums = header
    bad, count = [], 0
    for ref in REGMAP_V1:
        full = f"{ref.unit.name}_{ref.reg.name}"
        if full not in regs:
            bad.append(f"{full}: not in arnvdla.h")
            continue
        count += 1
        if regs[full] != ref.addr:
            bad.append(f"{full}: address {ref.addr:#x} != arnvdla.h {regs[full]:#x}")
        ours = {f.name: (f.lsb, f.msb, f.reset) for f in ref.reg.fields}
        if ours != fields.get(full, {}):
            bad.append(f"{full}: fields {ours} != arnvdla.h {fields.get(full)}")
        for f in ref.reg.fields:
            for e, v in f.enums.items():
                name = f"NVDLA_{full}_0_{f.name}_{e}"
                if enums.get(name) != v:
                    bad.append(f"{name}: {v} != arnvdla.h {enums.get(name)}")
    assert not bad, "\n".join(bad)
    assert count == sum(len(u.registers) for u in REGMAP_V1.units) > 350


@needs_shared
def test_nothing_left_out_but_gec(header):
    regs, _, _ = header
    ours = {f"{r.unit.name}_{r.reg.name}" for r in REGMAP_V1}
    left = sorted(k for k in regs if k not in ours)
    assert left and all(k.startswith("GEC_") for k in left), left


def test_v1_addresses_and_config():
    """The v1 traces' word addresses (0xffff100b = BDMA CFG_DST_SURF, 0xffff0003 = GLB
    S_INTR_STATUS) land on the right registers; nv_full uses v1, the others v2."""
    assert REGMAP_V1.at(0x100B * 4).trace_name == "NVDLA_BDMA.CFG_DST_SURF_0"
    assert REGMAP_V1.at(0x0003 * 4).trace_name == "NVDLA_GLB.S_INTR_STATUS_0"
    assert REGMAP.lookup("NVDLA_BDMA.CFG_DST_SURF_0").addr == 0x1002C
    assert regmap_for(NV_FULL) is REGMAP_V1 and regmap_for(NV_LARGE) is REGMAP
    assert "CFGROM" not in NV_FULL.units() and "CFGROM" in NV_LARGE.units()
    # v1 keeps address bits 4:0 out of its address fields (32-byte units)
    assert REGMAP_V1.lookup("NVDLA_SDP.D_DST_BASE_ADDR_LOW_0").reg.field("DST_BASE_ADDR_LOW").lsb == 5
    assert REGMAP.lookup("NVDLA_SDP.D_DST_BASE_ADDR_LOW_0").reg.field("DST_BASE_ADDR_LOW").lsb == 0
