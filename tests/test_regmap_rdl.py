"""The project's register map equals NVIDIA's RDL, register for register, field for field.

Compiles every ``../shared/nvdla/spec/manual/NVDLA_*.rdl`` with systemrdl-compiler (after the two
textual fixes the shared README lists) and compares unit base, register names and byte addresses,
field names, bit ranges, reset values and access with hdl/regmap: 100 %, no exceptions.
"""
from __future__ import annotations

import pytest

from hdl.regmap import REGMAP
from verif.shared import have_shared

pytestmark = pytest.mark.skipif(not have_shared(), reason="../shared/nvdla (NVIDIA's RDL) is absent")


@pytest.fixture(scope="module")
def rdl_units():
    pytest.importorskip("systemrdl", reason="systemrdl-compiler is a test extra: pip install -e .[test]")
    from verif.nvidia_rdl import load_all
    return {u.name: u for u in load_all()}


def test_same_units(rdl_units):
    ours = {u.name: u.base for u in REGMAP.units}
    theirs = {n: u.base for n, u in rdl_units.items()}
    assert ours == theirs


def test_every_register_and_field(rdl_units):
    mismatches = []
    count = 0
    for u in REGMAP.units:
        rdl = rdl_units[u.name]
        theirs = {r.name: r for r in rdl.regs}
        ours = {r.name: r for r in u.registers}
        if set(ours) != set(theirs):
            mismatches.append(f"{u.name}: only ours {sorted(set(ours) - set(theirs))}, "
                              f"only NVIDIA {sorted(set(theirs) - set(ours))}")
        for name in set(ours) & set(theirs):
            a, b = ours[name], theirs[name]
            count += 1
            if a.offset != b.offset:
                mismatches.append(f"{u.name}.{name}: offset {a.offset:#x} != {b.offset:#x}")
            fa = [(f.name, f.lsb, f.msb, f.reset, f.access, dict(f.enums)) for f in a.fields]
            fb = [(f.name, f.lsb, f.msb, f.reset, f.access, dict(f.enums)) for f in b.fields]
            if sorted(fa, key=lambda t: t[1]) != sorted(fb, key=lambda t: t[1]):
                mismatches.append(f"{u.name}.{name}: fields {fa} != NVIDIA {fb}")
    assert not mismatches, "\n".join(mismatches)
    assert count == sum(len(u.registers) for u in REGMAP.units) and count > 400


def test_trace_names_resolve():
    """The trace spelling NVDLA_<UNIT>.<REG>_0 resolves to the right byte address."""
    assert REGMAP.lookup("NVDLA_SDP.D_DATA_CUBE_WIDTH_0").addr == 0x9000 + 0x3C
    assert REGMAP.lookup("NVDLA_GLB.S_INTR_STATUS_0").addr == 0x100C
    with pytest.raises(KeyError, match="NVDLA_SDP.NO_SUCH_0"):
        REGMAP.lookup("NVDLA_SDP.NO_SUCH_0")
