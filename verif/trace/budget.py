"""Cycle budget of a trace derived from the program's own work (issue 11 item 8).

A layer that never finishes must be reported fast, also for traces NVIDIA's cycle table does
not list (a user's own trace, a generated program), instead of after a flat 20 M cycles.

:func:`work` replays the trace's ``reg_write`` commands (per unit and register group, following
``S_POINTER``'s producer bit) and, at every kick-off (``D_OP_ENABLE`` bit 0), adds what the
enabled layer must do:

* ``bytes``: bytes each DMA of the layer moves, in whole atoms of ``cfg.atom_bytes``: SDP_RDMA's
  input cube (unless on the fly from CACC), each BRDMA/NRDMA/ERDMA operand cube it fetches
  (``*_DISABLE`` = 0: up to 2 operands of 2 bytes per element, counted as 4 cubes), SDP's output
  (unless on the fly to PDP); PDP_RDMA's input (twice; none on the fly) and PDP's output cube; CDP_RDMA's input and CDP's output (same size);
  CDMA's input feature cube and weights (``D_WEIGHT_BYTES``; the cubes and outputs of a
  multi-batch layer times its N); each BDMA operation's copy, read
  and written (counted at its ``CFG_OP.EN``); RUBIK's atoms read and written, each as a whole
  beat;
* ``ops``: element-steps of the datapaths: SDP/PDP/CDP elements (input cube, channels padded
  to the atom; PDP's twice, for the overlap of split-width bands), and for a convolution the atomic operations of CMAC (``docs/conv.md``: output
  width x height x kernel groups of ``mac_atomic_k`` x channel blocks of ``mac_atomic_c`` x
  kernel width x height), times ``memory_atomic`` cycles each at worst.

:func:`intr_budget` turns that into cycles: ``MARGIN`` x (bytes / beat bytes x
``CYCLES_PER_BEAT`` + ops) + ``FIXED`` (the fixed part covers reset-to-kick-off, the 500-cycle
worst latency of the ``random`` memory profile on the first and last requests and the
interrupt service). With ``cfg`` throughputs above 1 the element-steps stay counted at 1 per
cycle (a safe upper bound). Calibration (``tests/test_budget.py``): on every trace of NVIDIA's
nv_small cycle table the budget is at least 2x NVIDIA's cycles and its work part at most 32x.

:func:`trace_budget` is what the engines use: ``--max-cycles N`` (``override``) wins; else, when
NVIDIA's table lists the trace, the larger of 4x NVIDIA's cycles (``reference.intr_budget``, at
least 100 k: the second source) and the derived budget; else the derived budget.
"""
from __future__ import annotations

from collections import defaultdict

from hdl.regmap import REGMAP

MARGIN = 8
CYCLES_PER_BEAT = 2          # nvidia profile: one request every other cycle
FIXED = 20_000

__all__ = ["work", "intr_budget", "trace_budget", "MARGIN", "FIXED"]


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


class _Regs:
    """Register values per (unit, group) as the trace writes them (reset value 0)."""

    def __init__(self):
        self.producer: dict[str, int] = defaultdict(int)
        self.vals: dict[tuple, dict] = defaultdict(dict)

    def write(self, ref, value: int) -> None:
        unit, reg = ref.unit.name, ref.reg
        if reg.name == "S_POINTER":
            self.producer[unit] = value & 1
        grp = self.producer[unit] if reg.name.startswith("D_") else 0
        self.vals[(unit, grp)][reg.name] = (reg, value)

    def field(self, unit: str, reg: str, field: str, group: int | None = None) -> int:
        g = self.producer[unit] if group is None else group
        rv = self.vals[(unit, g)].get(reg)
        if rv is None:
            r = next((r for u in REGMAP.units if u.name == unit for r in u.registers
                      if r.name == reg), None)
            if r is None:
                return 0
            f = next((f for f in r.fields if f.name == field), None)
            return f.reset if f is not None else 0
        r, v = rv
        f = next((f for f in r.fields if f.name == field), None)
        if f is None:
            return 0
        return (v >> f.lsb) & ((1 << (f.msb - f.lsb + 1)) - 1)


def _cube(regs: _Regs, unit: str, names: tuple, atom_elems: int) -> tuple[int, int]:
    """(elements with channels padded to the atom, same in bytes at 1 byte/element) of the
    cube whose width/height/channel registers (minus one) are ``names`` = ((reg, field) x 3)."""
    w, h, c = (regs.field(unit, r, f) + 1 for r, f in names)
    n = w * h * _ceil(c, atom_elems) * atom_elems
    return n, n


def _layer(regs: _Regs, unit: str, cfg) -> tuple[int, int]:
    """(bytes, ops) of the layer that a kick-off of ``unit`` starts (0, 0 for a unit whose
    work another unit's kick-off counts, e.g. SDP_RDMA's with SDP's)."""
    ae = cfg.memory_atomic
    if unit == "SDP":
        e, b = _cube(regs, "SDP", (("D_DATA_CUBE_WIDTH", "WIDTH"), ("D_DATA_CUBE_HEIGHT", "HEIGHT"),
                                   ("D_DATA_CUBE_CHANNEL", "CHANNEL")), ae)
        flying = regs.field("SDP", "D_FEATURE_MODE_CFG", "FLYING_MODE")      # input from CACC
        if flying:      # a multi-batch convolution's N cubes (BATCH_NUMBER = N-1)
            n = regs.field("SDP", "D_FEATURE_MODE_CFG", "BATCH_NUMBER") + 1
            e, b = e * n, b * n
        to_pdp = regs.field("SDP", "D_FEATURE_MODE_CFG", "OUTPUT_DST")       # output to PDP
        nbytes = b * ((0 if flying else 1) + (0 if to_pdp else 1))
        for op in ("BRDMA", "NRDMA", "ERDMA"):
            if not regs.field("SDP_RDMA", f"D_{op}_CFG", f"{op}_DISABLE",
                              regs.producer["SDP_RDMA"]):
                nbytes += 4 * b
        return nbytes, e
    if unit == "PDP":
        e, b = _cube(regs, "PDP", (("D_DATA_CUBE_IN_WIDTH", "CUBE_IN_WIDTH"),
                                   ("D_DATA_CUBE_IN_HEIGHT", "CUBE_IN_HEIGHT"),
                                   ("D_DATA_CUBE_IN_CHANNEL", "CUBE_IN_CHANNEL")), ae)
        _, bo = _cube(regs, "PDP", (("D_DATA_CUBE_OUT_WIDTH", "CUBE_OUT_WIDTH"),
                                    ("D_DATA_CUBE_OUT_HEIGHT", "CUBE_OUT_HEIGHT"),
                                    ("D_DATA_CUBE_OUT_CHANNEL", "CUBE_OUT_CHANNEL")), ae)
        # split-width bands re-read their overlap: the input counted twice (none on the fly)
        on_fly = regs.field("PDP", "D_OPERATION_MODE_CFG", "FLYING_MODE") == 0
        return (0 if on_fly else b * 2) + bo, 2 * e
    if unit == "CDP":
        e, b = _cube(regs, "CDP_RDMA", (("D_DATA_CUBE_WIDTH", "WIDTH"), ("D_DATA_CUBE_HEIGHT", "HEIGHT"),
                                        ("D_DATA_CUBE_CHANNEL", "CHANNEL")), ae)
        return 2 * b, e
    if unit == "CACC":        # a convolution: CDMA, CSC, CMAC, CACC are all enabled for it
        ow = regs.field("CSC", "D_DATAOUT_SIZE_0", "DATAOUT_WIDTH") + 1
        oh = regs.field("CSC", "D_DATAOUT_SIZE_0", "DATAOUT_HEIGHT") + 1
        k = regs.field("CSC", "D_DATAOUT_SIZE_1", "DATAOUT_CHANNEL") + 1
        c = regs.field("CSC", "D_WEIGHT_SIZE_EXT_1", "WEIGHT_CHANNEL_EXT") + 1
        r = regs.field("CSC", "D_WEIGHT_SIZE_EXT_0", "WEIGHT_HEIGHT_EXT") + 1
        s = regs.field("CSC", "D_WEIGHT_SIZE_EXT_0", "WEIGHT_WIDTH_EXT") + 1
        batches = regs.field("CSC", "D_BATCH_NUMBER", "BATCHES") + 1
        ops = ow * oh * _ceil(k, cfg.mac_atomic_k) * _ceil(c, cfg.mac_atomic_c) * r * s * batches
        iw = regs.field("CDMA", "D_DATAIN_SIZE_0", "DATAIN_WIDTH") + 1
        ih = regs.field("CDMA", "D_DATAIN_SIZE_0", "DATAIN_HEIGHT") + 1
        ic = regs.field("CDMA", "D_DATAIN_SIZE_1", "DATAIN_CHANNEL") + 1
        data = iw * ih * _ceil(ic, ae) * ae * batches
        wt = regs.field("CDMA", "D_WEIGHT_BYTES", "WEIGHT_BYTES") or r * s * c * k
        out = ow * oh * _ceil(k, ae) * ae * batches
        return data + wt + out, ops + out
    if unit == "RBK":
        # RUBIK moves 32-byte atoms, each counted as a whole beat (contract reads, split writes
        # and merge reads are one-atom requests), read and written
        mode = regs.field("RBK", "D_MISC_CFG", "RUBIK_MODE")
        a = 32 if regs.field("RBK", "D_MISC_CFG", "IN_PRECISION") == 0 else 16
        w = regs.field("RBK", "D_DATAIN_SIZE_0", "DATAIN_WIDTH") + 1
        h = regs.field("RBK", "D_DATAIN_SIZE_0", "DATAIN_HEIGHT") + 1
        if mode == 0:
            cout = regs.field("RBK", "D_DATAOUT_SIZE_1", "DATAOUT_CHANNEL") + 1
            sx = regs.field("RBK", "D_DECONV_STRIDE", "DECONV_X_STRIDE") + 1
            sy = regs.field("RBK", "D_DECONV_STRIDE", "DECONV_Y_STRIDE") + 1
            atoms = 2 * _ceil(cout, a) * h * sy * w * sx
        else:
            c = regs.field("RBK", "D_DATAIN_SIZE_1", "DATAIN_CHANNEL") + 1
            atoms = _ceil(c, a) * h * w + c * h * _ceil(w, a)
        return atoms * max(32, cfg.axi_data_bytes), 0
    return 0, 0


def _bdma_bytes(regs: _Regs) -> int:
    """Bytes one BDMA operation copies (the registers as written up to its CFG_OP.EN):
    ``(SIZE + 1) * 32`` per line, ``LINE_REPEAT + 1`` lines, ``SURF_REPEAT + 1`` surfaces."""
    vals = regs.vals[("BDMA", 0)]

    def get(name: str, mask: int) -> int:
        return vals[name][1] & mask if name in vals else 0
    return ((get("CFG_LINE", 0x1FFF) + 1) * 32 * (get("CFG_LINE_REPEAT", 0xFFFFFF) + 1)
            * (get("CFG_SURF_REPEAT", 0xFFFFFF) + 1))


def work(trace, cfg) -> dict:
    """``{"bytes": ..., "ops": ..., "layers": ...}`` summed over the trace's kick-offs (module
    docstring). ``trace``: a parsed ``verif.trace.parser.Trace``; ``cfg``: an ``NvdlaConfig``."""
    regs = _Regs()
    tot = {"bytes": 0, "ops": 0, "layers": 0}
    for c in trace.commands:
        if c.kind != "reg_write":
            continue
        ref, v = c.args["reg"], c.args["value"]
        regs.write(ref, v)
        if ref.unit.name == "BDMA" and ref.reg.name == "CFG_OP" and v & 1:
            tot["bytes"] += 2 * _bdma_bytes(regs)       # read and written
            tot["layers"] += 1
        elif ref.reg.name == "D_OP_ENABLE" and v & 1:
            b, o = _layer(regs, ref.unit.name, cfg)
            if b or o:
                tot["bytes"] += b
                tot["ops"] += o
                tot["layers"] += 1
    return tot


def intr_budget(trace, cfg) -> int:
    """Cycles to wait for one interrupt of ``trace``, derived from its work (module docstring)."""
    w = work(trace, cfg)
    beats = _ceil(w["bytes"], cfg.axi_data_bytes)
    return MARGIN * (beats * CYCLES_PER_BEAT + w["ops"] * max(1, cfg.memory_atomic // 8)) + FIXED


def trace_budget(trace, cfg, override: int | None = None) -> int:
    """The interrupt budget the engines use for ``trace`` (module docstring)."""
    if override is not None:
        return int(override)
    from verif.trace.reference import intr_budget as ref_budget, nvidia_cycles
    own = intr_budget(trace, cfg)
    if trace.name in nvidia_cycles():
        return max(ref_budget(trace.name), own)
    return own
