"""Read NVIDIA's SystemRDL register map from ``../shared`` (never copied into the project).

NVIDIA's ``.rdl`` files are nearly standard SystemRDL; ``../shared/nvdla/README.md`` lists the two
textual fixes systemrdl-compiler needs: quote the bare-word ``spec_access`` values, and give the
anonymous root ``addrmap`` a type name. Each unit file is compiled by its own compiler instance.

Used by the register-map conformance test (``tests/test_regmap_rdl.py``) and by
``scripts/gen_regmap.py``, which (re)writes the project's own register description.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from verif.shared import shared_dir


@dataclass(frozen=True)
class RdlField:
    name: str
    lsb: int
    msb: int
    reset: int
    access: str            # NVIDIA's spec_access: r, rw, rwo, rwt, rwto, wo, wto, c
    enums: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class RdlReg:
    name: str
    offset: int            # bytes from the unit base
    fields: tuple[RdlField, ...]


@dataclass(frozen=True)
class RdlUnit:
    name: str              # e.g. "SDP" (the RDL instance is NVDLA_SDP)
    base: int              # byte address
    regs: tuple[RdlReg, ...]


def rdl_dir() -> Path:
    """``../shared/nvdla/spec/manual``; raises FileNotFoundError when ../shared is absent."""
    d = shared_dir() / "nvdla" / "spec" / "manual"
    if not d.is_dir():
        raise FileNotFoundError(f"NVIDIA's RDL directory {d} does not exist")
    return d


def _patched_source(path: Path) -> str:
    text = path.read_text()
    text = re.sub(r"(spec_access\s*=\s*)([A-Za-z]+)\s*;", r'\1"\2";', text)
    text = re.sub(r"^addrmap\s*\{", "addrmap addrmap_NVDLA_t {", text, flags=re.M)
    # The root instance name after the closing brace is then redundant (and non-standard).
    text = re.sub(r"^\}\s*addrmap_NVDLA\w*\s*;", "};", text, flags=re.M)
    return text


def load_unit(path: Path) -> RdlUnit:
    """Compile one NVIDIA unit ``.rdl`` file and return its registers and fields.

    Raises systemrdl.RDLCompileError when the file does not compile after the two fixes.
    """
    import tempfile

    from systemrdl import RDLCompiler
    from systemrdl.node import FieldNode, RegNode

    rdlc = RDLCompiler()
    with tempfile.TemporaryDirectory() as tmp:
        patched = Path(tmp) / path.name
        patched.write_text(_patched_source(path))
        rdlc.compile_file(str(patched))
        root = rdlc.elaborate(top_def_name="addrmap_NVDLA_t")
    (inst,) = list(root.top.children())
    base = inst.absolute_address
    regs = []
    for reg in inst.descendants():
        if not isinstance(reg, RegNode):
            continue
        fields = []
        for f in reg.fields():
            assert isinstance(f, FieldNode)
            enc = f.get_property("encode")
            enums = tuple((m.name, m.value) for m in enc) if enc is not None else ()
            fields.append(RdlField(
                name=f.inst_name, lsb=f.low, msb=f.high,
                reset=int(f.get_property("reset") or 0),
                access=str(f.get_property("spec_access")), enums=enums))
        regs.append(RdlReg(reg.inst_name, reg.absolute_address - base, tuple(fields)))
    name = inst.inst_name
    assert name.startswith("NVDLA_"), name
    return RdlUnit(name[len("NVDLA_"):], base, tuple(regs))


def load_all() -> list[RdlUnit]:
    """Every unit file under ``../shared/nvdla/spec/manual`` (``nvdla.rdl`` is only imports)."""
    return [load_unit(p) for p in sorted(rdl_dir().glob("NVDLA_*.rdl"))]
