"""Read NVDLA v1's register map from NVIDIA's C header ``../shared/nvdla/spec/v1/arnvdla.h``.

The header (nvdlav1's C model) defines, per register, ``NVDLA_<UNIT>_<REG>_0`` as
``_MK_ADDR_CONST(byte address)`` and per field ``..._0_<FIELD>_RANGE msb:lsb``,
``..._0_<FIELD>_DEFAULT _MK_MASK_CONST(reset)`` and one ``..._0_<FIELD>_<ENUM>
_MK_ENUM_CONST(value)`` per enum value. Used by ``tests/test_regmap_v1.py`` to prove
``hdl.regmap.REGMAP_V1`` equal to it; never copied into the project.
"""
from __future__ import annotations

import re
from pathlib import Path

from verif.shared import nvdla_dir

_ADDR = re.compile(r"#define NVDLA_(\w+)_0\s+_MK_ADDR_CONST\((0x[0-9a-fA-F]+)\)")
_RANGE = re.compile(r"#define NVDLA_(\w+)_RANGE\s+(\d+):(\d+)")
_DEFAULT = re.compile(r"#define NVDLA_(\w+)_DEFAULT\s+_MK_MASK_CONST\((0x[0-9a-fA-F]+)\)")
_ENUM = re.compile(r"#define (NVDLA_\w+)\s+_MK_ENUM_CONST\((\d+)\)")


def header_path() -> Path:
    """``../shared/nvdla/spec/v1/arnvdla.h``; raises FileNotFoundError when absent."""
    p = nvdla_dir() / "spec" / "v1" / "arnvdla.h"
    if not p.is_file():
        raise FileNotFoundError(f"NVIDIA's v1 register header {p} does not exist")
    return p


def load_header(path: Path | None = None) -> tuple[dict, dict, dict]:
    """``(registers, fields, enums)`` of arnvdla.h: ``registers`` maps ``<UNIT>_<REG>`` (e.g.
    ``BDMA_CFG_LINE``) to its byte address; ``fields`` maps it to ``{field: (lsb, msb, reset)}``;
    ``enums`` maps a full define name (``NVDLA_BDMA_CFG_CMD_0_SRC_RAM_TYPE_MC``) to its value.
    Raises FileNotFoundError, ValueError when a field has a range but no default."""
    text = (path or header_path()).read_text()
    regs = {m.group(1): int(m.group(2), 16) for m in _ADDR.finditer(text)}

    def split(name: str) -> tuple[str, str] | None:
        """``<UNIT>_<REG>_0_<FIELD>`` -> (register, field), the longest register that fits (a
        register name may itself end in ``_0``: MCIF_CFG_RD_WEIGHT_0)."""
        best = None
        for i in range(len(name)):
            if name.startswith("_0_", i) and name[:i] in regs:
                best = (name[:i], name[i + 3:])
        return best

    ranges: dict[str, dict[str, list]] = {}
    for m in _RANGE.finditer(text):
        rf = split(m.group(1))
        if rf:
            ranges.setdefault(rf[0], {})[rf[1]] = [int(m.group(3)), int(m.group(2)), None]
    for m in _DEFAULT.finditer(text):
        rf = split(m.group(1))
        f = ranges.get(rf[0], {}).get(rf[1]) if rf else None
        if f is not None:
            f[2] = int(m.group(2), 16)
    fields = {}
    for reg, fs in ranges.items():
        for name, (lsb, msb, reset) in fs.items():
            if reset is None:
                raise ValueError(f"arnvdla.h: field {reg}_0_{name} has a range but no _DEFAULT")
        fields[reg] = {n: tuple(v) for n, v in fs.items()}
    enums = {m.group(1): int(m.group(2)) for m in _ENUM.finditer(text)}
    return regs, fields, enums
