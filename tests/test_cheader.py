"""The generated C header compiles and its constants equal the register map."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from hdl.config import NV_SMALL
from hdl.regmap import REGMAP
from hdl.regmap.cheader import render


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler on this machine")
def test_header_compiles_and_values_match(tmp_path):
    (tmp_path / "nvdla_regs.h").write_text(render(NV_SMALL))
    checks = [("SDP_D_DATA_CUBE_WIDTH_0", REGMAP.lookup("NVDLA_SDP.D_DATA_CUBE_WIDTH_0").addr),
              ("GLB_S_INTR_STATUS_0", 0x100C),
              ("SDP_D_FEATURE_MODE_CFG_0_OUTPUT_DST_FIELD", 1 << 1),
              ("SDP_D_FEATURE_MODE_CFG_0_OUTPUT_DST_PDP", 1),
              ("GLB_S_NVDLA_HW_VERSION_0_RESET_VAL", REGMAP.lookup("NVDLA_GLB.S_NVDLA_HW_VERSION_0").reg.reset)]
    body = "\n".join(f'    if ((unsigned long)({n}) != {v:#x}UL) {{ printf("{n}\\n"); bad = 1; }}' for n, v in checks)
    (tmp_path / "t.c").write_text(f'#include <stdio.h>\n#include "nvdla_regs.h"\n'
                                  f"int main(void) {{ int bad = 0;\n{body}\n    return bad; }}\n")
    subprocess.run(["cc", "-Wall", "-Werror", "-o", str(tmp_path / "t"), str(tmp_path / "t.c")], check=True)
    r = subprocess.run([str(tmp_path / "t")], capture_output=True, text=True)
    assert r.returncode == 0, f"constants differ from the register map: {r.stdout}"


def test_header_omits_absent_units():
    text = render(NV_SMALL)
    assert "#define BDMA_" not in text and "#define RBK_" not in text and "CDP_RDMA_D_OP_ENABLE_0" in text


def test_nv_full_header_uses_the_v1_map():
    """nv_full's header places the units where NVIDIA's v1 header (arnvdla.h) does: GLB at 0x0,
    BDMA at 0x4000, RBK at 0x10000; no CFGROM; v1's 32-byte address fields."""
    from hdl.config import NV_FULL
    text = render(NV_FULL)
    assert "#define BDMA_CFG_DST_SURF_0 " in text
    defs = dict(line.split(None, 2)[1:] for line in text.splitlines()
                if line.startswith("#define ") and len(line.split(None, 2)) == 3)
    assert defs["GLB_S_INTR_STATUS_0"] == "(_MK_ADDR_CONST(0xc))"
    assert defs["BDMA_CFG_DST_SURF_0"] == "(_MK_ADDR_CONST(0x402c))"
    assert defs["RBK_S_STATUS_0"] == "(_MK_ADDR_CONST(0x10000))"
    assert defs["SDP_D_DST_BASE_ADDR_LOW_0_DST_BASE_ADDR_LOW_SHIFT"] == "(_MK_SHIFT_CONST(5))"
    assert not any(k.startswith("CFGROM_") for k in defs)


def test_header_only_cli_for_a_configuration_without_rtl(tmp_path, capsys):
    """``python -m hdl.build --config nv_full --c-header H --header-only`` writes nv_full's v1
    header although the RTL does not build nv_full; without --c-header it is a usage error."""
    import hdl.build
    h = tmp_path / "nvdla_full.h"
    assert hdl.build.main(["--config", "nv_full", "--c-header", str(h), "--header-only"]) == 0
    assert "(_MK_ADDR_CONST(0x4034))" in h.read_text()          # BDMA CFG_LAUNCH0 at v1's 0x4000
    assert hdl.build.main(["--config", "nv_full", "--header-only"]) == 2
    assert "--header-only needs --c-header" in capsys.readouterr().err
