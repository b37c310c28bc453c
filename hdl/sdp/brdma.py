"""SDP BRDMA / NRDMA operands (X1 / X2 operands from memory): the read geometry and the unpacking
of operand bytes into per-channel ALU/MUL operands.

Memory format (format.rst "Bias Data Format", "Batch Normalization Data Format";
v1_ias_programming_guide.rst "SDP programming"; SDP_RDMA D_BRDMA_CFG / D_NRDMA_CFG fields
DATA_USE, DATA_SIZE, DATA_MODE; the byte order settled in the bit-exact model's docstring,
``verif/model/sdp.py`` ``_read_operands``): an operand element has 1 or 2 bytes per component
(DATA_SIZE ONE_BYTE / TWO_BYTE, little endian, sign-extended to 16 bits) and 2 components, ALU
first then MUL, when DATA_USE = BOTH, so ``k`` = 1, 2 or 4 bytes per element.

* PER_ELEMENT: a feature-like cube of ``k``-byte elements: element (w, h, c) at
  ``base + (c // atom) * SURFACE_STRIDE + h * LINE_STRIDE + (w * atom + c % atom) * k``, i.e.
  a cube of ``k * W`` memory atoms per line; the ``k`` atoms of (w, h) hold the operands of the
  data atom (w, h) of the same surface.
* PER_KERNEL: element c at ``base + c * k``: ``k`` atoms per surface (channel group), used by
  every (w, h) of that surface.

:func:`operand_cube` gives the :class:`hdl.dma.ReadDma` cube for both modes (width / height /
strides rewritten so that the DMA reads exactly the operand atoms in data traversal order: surface,
line, atom); :class:`OperandUnpack` collects each data atom's ``k`` operand atoms, decodes them
into ``atom`` x (alu, mul) 16-bit operands and repeats each group once per data atom it serves
(1 for PER_ELEMENT, W*H for PER_KERNEL).

INT16 layers (a configuration with runtime INT16, :class:`hdl.sdp.Sdp`; the model's
``SdpCore._read_operands`` with ``_epa`` channels per group): the same element layout with
``atom = atom_bytes // 2`` channels per group and two-byte components (``k`` = 2 or 4), so a
data atom's operands fill ``k / 2`` memory atoms (``half`` of :func:`operand_cube` and
:class:`OperandUnpack`).
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.dma.cube import CUBE_DIM_BITS, cube_layout
from hdl.lib.fixed import sign_extend
from hdl.lib.stream import Map, SkidBuffer
from hdl.lib.gearbox import Merge, Repeat
from hdl.sdp.x import X_OP_BITS, operand_layout

__all__ = ["MAX_BYTES_PER_ELEM", "REPEAT_BITS", "operand_fmt_layout", "bytes_per_elem",
           "operand_cube", "OperandUnpack"]

MAX_BYTES_PER_ELEM = 4            # two 2-byte components (DATA_USE=BOTH, DATA_SIZE=TWO_BYTE)
REPEAT_BITS = 2 * CUBE_DIM_BITS   # W*H data atoms per surface (PER_KERNEL repeat count)


def operand_fmt_layout() -> data.StructLayout:
    """Operand memory format of one sub-unit, from D_<B|N>RDMA_CFG: ``use`` (2 bits: 0 MUL,
    1 ALU, 2 BOTH), ``two_byte`` (DATA_SIZE), ``per_element`` (DATA_MODE)."""
    return data.StructLayout({"use": 2, "two_byte": 1, "per_element": 1})


def bytes_per_elem(fmt):
    """``k`` = operand bytes per element (1, 2 or 4) of an :func:`operand_fmt_layout` value."""
    both = fmt.use == 2
    return Mux(fmt.two_byte, Mux(both, 4, 2), Mux(both, 2, 1))


def operand_cube(data_cube, fmt, *, base, line_stride, surface_stride, atom_bytes: int,
                 addr_width: int, half=None) -> data.View:
    """The :func:`hdl.dma.cube.cube_layout` view (combinational, no statements) of the operand
    cube that serves the data cube ``data_cube`` (a cube_layout view) in format ``fmt`` (an
    :func:`operand_fmt_layout` value; see the module docstring), from the operand base address
    ``base`` and byte strides ``line_stride`` / ``surface_stride`` (D_<BS|BN>_* registers).

    PER_ELEMENT: width ``k * W``, the data cube's height and channels, the given strides (a
    1 x 1 cube: surface stride ``k * atom_bytes``, one contiguous run as NVIDIA reads it).
    PER_KERNEL: width ``k`` atoms, height 1, surface stride ``k * atom_bytes`` (contiguous).

    ``half`` (None, or a 1-bit value on a configuration with runtime INT16, see
    :class:`hdl.sdp.Sdp`): 1 in an INT16 layer, whose data atoms hold ``atom_bytes // 2``
    channels, so that one data atom's operands fill ``q = k / 2`` memory atoms instead of ``k``
    (``fmt.two_byte`` must then be 1: ``k`` is 2 or 4); every ``k`` above reads ``q`` then
    (format.rst "Bias Data Format": the same element layout, ``atom_bytes // 2`` channels per
    group, 16 on nv_full; the model's ``SdpCore._read_operands`` with ``_epa`` channels per
    group). ``data_cube.channel`` is whatever the operand DMA's walker takes
    (:class:`hdl.sdp.Sdp` passes its surface count in the walker's units).

    Widths: the PER_ELEMENT width ``k * W - 1`` is cut to CUBE_DIM_BITS (data widths above
    8192 / k atoms are not supported).
    """
    k = bytes_per_elem(fmt)
    one_by_one = (data_cube.width == 0) & (data_cube.height == 0)
    # k * W as a shift by log2(k) (issue 10: a multiplier here, a DSP block in the path from
    # the configuration into the operand DMA's walker, was SDP's critical path on ECP5)
    k_log2 = fmt.two_byte + (fmt.use == 2)
    if half is not None:
        # INT16: q = k / 2 atoms per data atom (k is 2 or 4: two-byte operands)
        both = fmt.use == 2
        k = Mux(half, Mux(both, 2, 1), k)
        k_log2 = Mux(half, both, k_log2)
    per_w = (((data_cube.width + 1) << k_log2) - 1)[:CUBE_DIM_BITS]
    kern_stride = (k * atom_bytes)
    lay = cube_layout(addr_width)
    return data.View(lay, Cat(
        base[:addr_width],
        Mux(fmt.per_element, line_stride, kern_stride)[:32],
        # a 1 x 1 PER_ELEMENT cube is read as one run (NVIDIA's cfg_mode_1x1_pack,
        # NV_NVDLA_SDP_RDMA_ig.v; hdl.dma.cube.one_run_if_1x1): k atoms per surface
        Mux(fmt.per_element & ~one_by_one, surface_stride, kern_stride)[:32],
        Mux(fmt.per_element, per_w, k - 1)[:CUBE_DIM_BITS],
        Mux(fmt.per_element, data_cube.height, 0)[:CUBE_DIM_BITS],
        data_cube.channel[:CUBE_DIM_BITS],
    ))


class OperandUnpack(wiring.Component):
    """Operand atoms from memory -> one group of ``atom_elems`` (alu, mul) operands per data atom.

    Args:
        atom_bytes: bytes per memory atom (the DMA's atom); must equal ``atom_elems`` (int8
            feature data: one operand byte per channel and component).
        atom_elems: channels per data atom.

    Ports: ``i`` In(stream of unsigned(8 * atom_bytes)) operand atoms in DMA order; ``o``
    Out(stream of ``ArrayLayout(operand_layout(), atom_elems)``), lane e = channel
    ``c % atom_elems``; both components of a lane hold the decoded value when DATA_USE is not
    BOTH (the caller takes the one its source selects); ``fmt`` In(:func:`operand_fmt_layout`);
    ``repeat`` In(REPEAT_BITS): data atoms served by each group (1 PER_ELEMENT, W*H
    PER_KERNEL); both stable for a layer. Latency 4 cycles; one data atom's operands per cycle
    once its ``k`` operand atoms are in; with ``registered_ready`` (for a core taking at most
    one data atom every two cycles) at most one group every two cycles, and the ready signal of
    the output does not reach the input (:class:`hdl.lib.gearbox.Repeat`).

    With ``half`` (a configuration with runtime INT16, :class:`hdl.sdp.Sdp`) the port ``half``
    In(1), stable for a layer: 1 in an INT16 layer, whose data atoms hold ``atom_elems // 2``
    channels: a group is then collected from ``k / 2`` operand atoms (``fmt.two_byte`` must be
    1, ``k`` 2 or 4) and its lanes ``0 .. atom_elems // 2 - 1`` hold the operands (the same
    two-byte decoding as INT8's, format.rst "Bias Data Format"); the other lanes are
    meaningless.

    Raises ValueError: ``atom_bytes != atom_elems``.
    """

    def __init__(self, atom_bytes: int, atom_elems: int, *, registered_ready: bool = False,
                 half: bool = False):
        if atom_bytes != atom_elems:
            raise ValueError(f"operand unpacking needs one byte per channel per atom "
                             f"(atom_bytes {atom_bytes} != atom_elems {atom_elems})")
        self.atom_bytes, self.atom_elems = atom_bytes, atom_elems
        self.registered_ready = registered_ready
        self.has_half = half
        self.group = data.ArrayLayout(operand_layout(), atom_elems)
        members = {
            "i": In(stream.Signature(unsigned(8 * atom_bytes))),
            "o": Out(stream.Signature(self.group)),
            "fmt": In(operand_fmt_layout()),
            "repeat": In(REPEAT_BITS),
        }
        if half:
            members["half"] = In(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        ab, n, fmt = self.atom_bytes, self.atom_elems, self.fmt
        m.submodules.collect = collect = Merge(unsigned(8 * ab), MAX_BYTES_PER_ELEM)
        if self.has_half:
            # INT16: k / 2 atoms per group (two-byte operands: 2 with DATA_USE = BOTH, else 1)
            m.d.comb += collect.count.eq(Mux(self.half, Mux(fmt.use == 2, 2, 1),
                                             bytes_per_elem(fmt)))
        else:
            m.d.comb += collect.count.eq(bytes_per_elem(fmt))

        def decode(m, atoms):
            raw = Cat(*[atoms[j] for j in range(MAX_BYTES_PER_ELEM)])

            def byte(b):
                return raw[8 * b:8 * b + 8]

            def s16(lo, hi=None):
                v = byte(lo) if hi is None else Cat(byte(lo), byte(hi))
                return sign_extend(v, len(v), X_OP_BITS)

            both = fmt.use == 2
            out = []
            for e in range(n):
                one_alu, one_mul = s16(e), s16(e)                      # k = 1
                b1_alu, b1_mul = s16(2 * e), s16(2 * e + 1)            # k = 2, 1-byte BOTH
                w_val = s16(2 * e, 2 * e + 1)                          # k = 2, 2-byte single
                b2_alu, b2_mul = s16(4 * e, 4 * e + 1), s16(4 * e + 2, 4 * e + 3)   # k = 4
                alu = Mux(fmt.two_byte, Mux(both, b2_alu, w_val), Mux(both, b1_alu, one_alu))
                mul = Mux(fmt.two_byte, Mux(both, b2_mul, w_val), Mux(both, b1_mul, one_mul))
                out.append({"alu": alu, "mul": mul})
            sig = Signal(self.group, name="ops")
            for e, v in enumerate(out):
                m.d.comb += [sig[e].alu.eq(v["alu"]), sig[e].mul.eq(v["mul"])]
            return sig

        m.submodules.decode = dec = Map(collect.wide, self.group, decode)
        # issue 10: the core's join ready ran through the repeat counter, the decoder and the
        # collector into the input skid buffer (SDP's critical path, 12.6 ns on ECP5)
        m.submodules.repeat = rep = Repeat(self.group, REPEAT_BITS,
                                           registered_ready=self.registered_ready)
        m.d.comb += rep.count.eq(self.repeat)
        # a skid buffer in front: the ready chain from the repeat counter through the stages
        # into the operand DMA's credit counter was SDP's critical path (issue 10)
        m.submodules.in_skid = skid = SkidBuffer(unsigned(8 * ab))
        wiring.connect(m, wiring.flipped(self.i), skid.i)
        wiring.connect(m, skid.o, collect.i)
        wiring.connect(m, collect.o, dec.i)
        wiring.connect(m, dec.o, rep.i)
        wiring.connect(m, rep.o, wiring.flipped(self.o))
        return m

