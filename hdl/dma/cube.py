"""Feature-cube geometry in memory (format.rst "Feature data") and its binding from a unit's
register file.

A cube is ``width`` x ``height`` x ``channel`` elements (each count minus-one encoded, as NVDLA's
D_DATA_CUBE_* registers hold them, 13 bits). Channels are split into surfaces of one memory atom
each (``atom_elems`` channels); element (w, h, c) lives at byte
``base + (c // atom_elems) * surface_stride + h * line_stride + w * atom_bytes + (c % atom_elems)``
(for 1-byte elements). ``base``, ``line_stride`` and ``surface_stride`` are in bytes.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Mux, signed, unsigned
from amaranth.lib import data

__all__ = ["CUBE_DIM_BITS", "STRIDE_BITS", "atom_layout", "cube_layout", "cube_from_regs",
           "one_run_if_1x1"]

CUBE_DIM_BITS = 13     # D_DATA_CUBE_WIDTH/HEIGHT/CHANNEL fields are [12:0], minus-one encoded
STRIDE_BITS = 32       # D_*_LINE_STRIDE / D_*_SURFACE_STRIDE registers are 32-bit byte strides


def atom_layout(cfg) -> data.ArrayLayout:
    """One memory atom of feature data as the units' datapaths see it: cfg.memory_atomic signed
    elements of cfg.bpe bits (8 x int8 = 8 bytes on nv_small); lane i = channel c % atom = byte
    i of the atom in memory (format.rst "Feature data")."""
    return data.ArrayLayout(signed(cfg.bpe), cfg.memory_atomic)


def cube_layout(addr_width: int) -> data.StructLayout:
    """Geometry of one feature cube in memory.

    Fields: ``base`` (``addr_width`` bits, byte address of element (0, 0, 0)), ``line_stride``
    and ``surface_stride`` (STRIDE_BITS bits, bytes), ``width``/``height``/``channel``
    (CUBE_DIM_BITS bits each, element counts minus one).
    """
    return data.StructLayout({
        "base": unsigned(addr_width),
        "line_stride": unsigned(STRIDE_BITS),
        "surface_stride": unsigned(STRIDE_BITS),
        "width": unsigned(CUBE_DIM_BITS),
        "height": unsigned(CUBE_DIM_BITS),
        "channel": unsigned(CUBE_DIM_BITS),
    })


def _reg(regs, name: str):
    """The raw bits of register ``name`` of a register-file ``cfg`` view (the one place that
    knows how register fields are read; every cube register has a single field at bit 0)."""
    return getattr(regs, name).as_value()


def cube_from_regs(regs, *, base: str, line_stride: str, surface_stride: str, width: str,
                   height: str, channel: str, addr_width: int) -> data.View:
    """Cube geometry (:func:`cube_layout`) read from a unit's register-file view.

    Args:
        regs: the ``cfg`` view of a :class:`hdl.regfile.UnitRegFile` (consumer group values).
        base: register name prefix of the base address: ``<base>_low`` and ``<base>_high`` are
            concatenated (low word first) and truncated to ``addr_width`` bits,
            e.g. ``"d_src_base_addr"``.
        line_stride, surface_stride: register names of the byte strides,
            e.g. ``"d_src_line_stride"``.
        width, height, channel: register names of the minus-one element counts,
            e.g. ``"d_data_cube_width"`` (bits [12:0] are used).
        addr_width: memory address width in bits.

    Returns:
        a read-only ``data.View`` of :func:`cube_layout` ``(addr_width)``.

    Raises:
        AttributeError: a register name is not in ``regs``.
    """
    bits = Cat(
        Cat(_reg(regs, base + "_low"), _reg(regs, base + "_high"))[:addr_width],
        _reg(regs, line_stride)[:STRIDE_BITS],
        _reg(regs, surface_stride)[:STRIDE_BITS],
        _reg(regs, width)[:CUBE_DIM_BITS],
        _reg(regs, height)[:CUBE_DIM_BITS],
        _reg(regs, channel)[:CUBE_DIM_BITS],
    )
    return data.View(cube_layout(addr_width), bits)


def one_run_if_1x1(cube, one_by_one, run_stride: int) -> data.View:
    """``cube`` (a :func:`cube_layout` view) with its surface stride replaced by ``run_stride``
    bytes while ``one_by_one`` (1 bit: the cube is 1 x 1, ``width`` = ``height`` = 0; a register
    of it may be passed to keep the comparison off the DMA's start path) is set: its surfaces
    then follow each other as one contiguous run from the base address, as NVIDIA's SDP DMAs
    move such a cube whatever the surface stride (nv_small RTL, NV_NVDLA_SDP_MRDMA_ig.v /
    NV_NVDLA_SDP_RDMA_ig.v / NV_NVDLA_SDP_WDMA_cmd.v ``cfg_mode_1x1_pack``: one request for the
    whole cube; the model's ``verif.model.sdp.one_by_one``). ``run_stride``: the bytes of one
    surface of the run (a memory atom for feature data). Combinational, no statements."""
    lay = cube_layout(len(cube.base))
    return data.View(lay, Cat(cube.base, cube.line_stride,
                              Mux(one_by_one, run_stride, cube.surface_stride)[:STRIDE_BITS],
                              cube.width, cube.height, cube.channel))
