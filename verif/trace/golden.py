"""First-mismatch reports against NVIDIA's golden output bytes.

``../shared/nvdla/golden/<suite>/<test>/<base>_<size>.bin`` holds the exact bytes NVIDIA's nv_small
RTL wrote into each ``check_crc`` region. ``first_mismatch`` finds the first differing byte and
names it as the writing unit, its layer (n-th ``D_OP_ENABLE`` of that unit in the trace) and the
element coordinates (w, h, c) in that unit's output cube (format.rst feature layout:
``base + (c // atom) * surface_stride + h * line_stride + w * atom + c % atom``).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hdl.config import NvdlaConfig
from verif.shared import nvdla_dir
from verif.trace.parser import Trace

# unit -> (registers giving the output cube: base low/high, line stride, surface stride, W, H, C)
# W/H/C registers hold value-1; the unit in parentheses is the one that holds the register.
_OUT = {
    "SDP": (("SDP", "D_DST_BASE_ADDR_LOW"), ("SDP", "D_DST_BASE_ADDR_HIGH"), ("SDP", "D_DST_LINE_STRIDE"),
            ("SDP", "D_DST_SURFACE_STRIDE"), ("SDP", "D_DATA_CUBE_WIDTH"), ("SDP", "D_DATA_CUBE_HEIGHT"),
            ("SDP", "D_DATA_CUBE_CHANNEL")),
    "PDP": (("PDP", "D_DST_BASE_ADDR_LOW"), ("PDP", "D_DST_BASE_ADDR_HIGH"), ("PDP", "D_DST_LINE_STRIDE"),
            ("PDP", "D_DST_SURFACE_STRIDE"), ("PDP", "D_DATA_CUBE_OUT_WIDTH"), ("PDP", "D_DATA_CUBE_OUT_HEIGHT"),
            ("PDP", "D_DATA_CUBE_OUT_CHANNEL")),
    "CDP": (("CDP", "D_DST_BASE_ADDR_LOW"), ("CDP", "D_DST_BASE_ADDR_HIGH"), ("CDP", "D_DST_LINE_STRIDE"),
            ("CDP", "D_DST_SURFACE_STRIDE"), ("CDP_RDMA", "D_DATA_CUBE_WIDTH"), ("CDP_RDMA", "D_DATA_CUBE_HEIGHT"),
            ("CDP_RDMA", "D_DATA_CUBE_CHANNEL")),
}


@dataclass
class OutputCube:
    """Where one layer of a unit wrote its output cube (bytes; dims in elements)."""
    unit: str
    layer: int
    base: int
    line_stride: int
    surface_stride: int
    w: int
    h: int
    c: int

    def locate(self, addr: int, atom: int) -> tuple[int, int, int] | None:
        """(w, h, c) of the element at byte ``addr``, or None when it is outside the cube."""
        rel = addr - self.base
        if rel < 0 or self.surface_stride <= 0 or self.line_stride <= 0:
            return None
        s, r = divmod(rel, self.surface_stride)
        h, r = divmod(r, self.line_stride)
        w, k = divmod(r, atom)
        c = s * atom + k
        if w < self.w and h < self.h and c < self.c:
            return w, h, c
        return None


def output_cubes(trace: Trace) -> list[OutputCube]:
    """Every output cube the trace programs, from its register writes (per ping-pong group)."""
    vals: dict[tuple[str, int, str], int] = {}
    producer: dict[str, int] = {}
    count: dict[str, int] = {}
    cubes = []
    for c in trace.commands:
        if c.kind != "reg_write":
            continue
        ref, v = c.args["reg"], c.args["value"]
        u, r = ref.unit.name, ref.reg.name
        if r == "S_POINTER":
            producer[u] = v & 1
            continue
        vals[(u, producer.get(u, 0), r)] = v
        if c.is_kickoff and u in _OUT:
            def get(key):
                unit, reg = key
                return vals.get((unit, producer.get(unit, 0), reg), 0)
            lo, hi, ls, ss, w, h, ch = (get(k) for k in _OUT[u])
            cubes.append(OutputCube(u, count.get(u, 0), (hi << 32) | lo, ls, ss,
                                    (w & 0x1FFF) + 1, (h & 0x1FFF) + 1, (ch & 0x1FFF) + 1))
            count[u] = count.get(u, 0) + 1
    return cubes


def golden_file(trace: Trace, base: int, size: int) -> Path | None:
    """NVIDIA's golden bytes for a check region of this trace, if present."""
    suite = trace.directory.parent.name
    p = nvdla_dir() / "golden" / suite / trace.name / f"{base:x}_{size:x}.bin"
    return p if p.is_file() else None


def first_mismatch(trace: Trace, base: int, got: bytes, cfg: NvdlaConfig) -> str | None:
    """A one-line report of the first byte of ``got`` (read at ``base``) that differs from
    NVIDIA's golden, or None when there is no golden file or no difference."""
    gf = golden_file(trace, base, len(got))
    if gf is None:
        return None
    exp = np.frombuffer(gf.read_bytes(), np.uint8)
    act = np.frombuffer(got, np.uint8)
    if exp.size != act.size:
        return f"golden {gf} holds {exp.size} bytes, the checked region {act.size}"
    diff = np.flatnonzero(exp != act)
    if diff.size == 0:
        return None
    i = int(diff[0])
    addr = base + i
    where = f"address {addr:#x}"
    for cube in reversed(output_cubes(trace)):
        loc = cube.locate(addr, cfg.atom_bytes)
        if loc is not None:
            where = f"{cube.unit} layer {cube.layer} at w={loc[0]} h={loc[1]} c={loc[2]} ({addr:#x})"
            break
    return (f"first wrong byte: {where}: expected {exp[i]:#04x} ({exp[i].astype(np.int8)}), "
            f"got {act[i]:#04x} ({act[i].astype(np.int8)}); {diff.size} of {exp.size} bytes differ "
            f"(golden {gf})")
