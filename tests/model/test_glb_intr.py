"""The model's GLB interrupt registers follow the configuration as NVIDIA's GLB does (nv_small
branch, vmod/nvdla/glb/NV_NVDLA_GLB_CSB_reg.v and NV_NVDLA_GLB_ic.v): status bits exist only for
the units compiled in; the mask bits of BDMA and RUBIK only with their unit, those of CDP and PDP
always; S_INTR_SET reads 0. Facts checked by field name from the register map."""
import pytest

from hdl.config import NV_FULL, NV_SMALL
from hdl.regmap import REGMAP
from verif.model import Nvdla

ST = REGMAP.lookup("NVDLA_GLB.S_INTR_STATUS_0").reg
MK = REGMAP.lookup("NVDLA_GLB.S_INTR_MASK_0").reg
SET = REGMAP.lookup("NVDLA_GLB.S_INTR_SET_0").reg


def bits(reg, kind, prefixes):
    return sum(1 << reg.field(f"{p}_DONE_{kind}{g}").lsb for p in prefixes for g in (0, 1))


CONV = ("SDP", "CDMA_DAT", "CDMA_WT", "CACC")


@pytest.mark.parametrize("cfg, status, mask", [
    (NV_SMALL, CONV + ("CDP", "PDP"), CONV + ("CDP", "PDP")),
    (NV_FULL, CONV + ("CDP", "PDP", "BDMA", "RUBIK"), CONV + ("CDP", "PDP", "BDMA", "RUBIK")),
    (NV_SMALL.derive(name="nv_small_nocdp_nopdp", cdp=False, pdp=False), CONV, CONV + ("CDP", "PDP")),
], ids=lambda v: getattr(v, "name", None))
def test_glb_intr_bits_follow_configuration(cfg, status, mask):
    dla = Nvdla(cfg)
    dla.write("NVDLA_GLB.S_INTR_MASK_0", 0xFFFFFFFF)
    assert dla.read("NVDLA_GLB.S_INTR_MASK_0") == bits(MK, "MASK", mask)
    dla.write("NVDLA_GLB.S_INTR_SET_0", 0xFFFFFFFF)
    assert dla.read("NVDLA_GLB.S_INTR_STATUS_0") == bits(ST, "STATUS", status)
    assert dla.read("NVDLA_GLB.S_INTR_SET_0") == 0
    assert not dla.intr                                 # every present source masked
    dla.write("NVDLA_GLB.S_INTR_MASK_0", 0)
    assert dla.intr
    dla.write("NVDLA_GLB.S_INTR_STATUS_0", 0xFFFFFFFF)
    assert dla.read("NVDLA_GLB.S_INTR_STATUS_0") == 0 and not dla.intr


def test_glb_intr_absent_unit_set_is_ignored():
    dla = Nvdla(NV_SMALL)                               # nv_small: no BDMA, no RUBIK
    dla.write("NVDLA_GLB.S_INTR_SET_0", bits(SET, "SET", ("BDMA", "RUBIK")))
    assert dla.read("NVDLA_GLB.S_INTR_STATUS_0") == 0 and not dla.intr
