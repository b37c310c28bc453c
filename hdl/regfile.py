"""Per-unit register files generated from ``hdl.regmap.REGMAP``.

Implements v1_hwarch.rst "Ping-pong synchronization" and v1_ias_programming_guide.rst
(register group programming): every unit with an ``S_POINTER`` register keeps its ``D_`` registers
twice (register group 0 and 1); ``S_`` registers exist once.

* ``S_POINTER.PRODUCER`` (rw) selects which group CSB reads/writes of ``D_`` registers go to.
* ``S_POINTER.CONSUMER`` (r) is the group the hardware executes next (flips when a layer is done).
* Writing 1 to ``D_OP_ENABLE.OP_EN`` arms the producer group.
* ``S_STATUS.STATUS_<g>``: 0 IDLE, 1 RUNNING (armed and consumer == g), 2 PENDING (armed, waiting).
* When the datapath pulses ``done`` the consumer group's OP_EN clears (status goes IDLE), the
  consumer flips and ``done_grp[g]`` pulses for one cycle (to GLB, v1_hwarch "Interrupt").

Fields with access ``r`` read from the ``hw`` input port (hardware status), ``c`` fields read
their reset value, ``wo``/``wto`` fields read 0, everything else is stored (reset value from
REGMAP) and reads back what was written. Registers no datapath uses still exist.

The CSB side is a :class:`RegBusSignature` (word offset within the unit's 4 KiB window).
"""
from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from hdl.regmap import REGMAP, Register, Unit
from hdl.regmap.types import field_shape

__all__ = ["RegBusSignature", "reg_layout", "unit_layout", "view_unit", "UnitRegFile",
           "REG_OFFSET_BITS", "reg_word", "raw_field",
           "STATUS_IDLE", "STATUS_RUNNING", "STATUS_PENDING"]

REG_OFFSET_BITS = 10          # 4 KiB unit window / 4-byte registers = 1024 words
STATUS_IDLE, STATUS_RUNNING, STATUS_PENDING = 0, 1, 2   # S_STATUS encoding (programming guide)

_SPECIAL = ("S_POINTER", "S_STATUS", "D_OP_ENABLE")


class RegBusSignature(wiring.Signature):
    """Internal register bus from the CSB decoder to one unit (master's view).

    Members: ``addr`` Out(10) word offset of the register within the unit (byte offset >> 2);
    ``wdata`` Out(32); ``we`` Out(1) one-cycle write strobe; ``re`` Out(1) one-cycle read strobe
    (the cycle ``rdata`` is taken: registers with side effects on read, e.g. the LUT access
    ports' auto-increment); ``rdata`` In(32) combinational read data of the register at ``addr``
    (0 where no register lives).
    """

    def __init__(self):
        super().__init__({
            "addr": Out(REG_OFFSET_BITS),
            "wdata": Out(32),
            "we": Out(1),
            "re": Out(1),
            "rdata": In(32),
        })


def reg_word(unit: Unit, reg: str) -> int:
    """Word offset of register ``reg`` of ``unit`` on the register bus (``RegBusSignature.addr``,
    byte offset >> 2; e.g. a unit decoding its LUT access port itself). Raises StopIteration
    for an unknown register name."""
    return next(r for r in unit.registers if r.name == reg).offset >> 2


def raw_field(regs, unit: Unit, reg: str, field: str) -> Value:
    """Raw bits (unsigned, field width) of field ``field`` of register ``reg`` of ``unit`` in a
    register file's ``cfg`` view ``regs`` (the typed view gives enums and signed values; this
    gives the bits, e.g. to pack several fields into one struct)."""
    f = next(r for r in unit.registers if r.name == reg).field(field)
    return getattr(regs, reg.lower()).as_value()[f.lsb:f.lsb + f.width]


def _lname(name: str) -> str:
    return name.lower()


def reg_layout(unit: Unit, reg: Register) -> data.FlexibleLayout:
    """32-bit layout of one register of ``unit``: a field per REGMAP field (lower-case name) at
    its lsb, typed by :func:`hdl.regmap.types.field_shape` (enum class, signed or unsigned)."""
    return data.FlexibleLayout(32, {_lname(f.name): data.Field(field_shape(unit.name, reg.name, f), f.lsb)
                                    for f in reg.fields})


def _readable_stored_mask(reg: Register) -> int:
    """Stored bits that also read back (write-only trigger fields read 0)."""
    return reg.mask_where(lambda f: f.writable and f.access not in ("wo", "wto"))


def _hw_mask(reg: Register) -> int:
    """Bits driven by the hardware (read-only status fields)."""
    return reg.mask_where(lambda f: f.access == "r")


def _const_value(reg: Register) -> int:
    """Value of the constant (``c``) fields."""
    return reg.reset_where(lambda f: f.access == "c")


def view_unit(unit: Unit) -> Unit:
    """The unit whose fields type a register file's ``cfg``/``hw`` views: v2's unit of the same
    name (``hdl.regmap.REGMAP``) when there is one, else ``unit`` itself.

    The datapaths are written against v2's field layouts. v1's map (nv_full, ``hdl/regmap/v1.py``)
    has the same registers at the same offsets; each of its fields is v2's with fewer bits
    stored: addresses, strides and byte counts keep bits 31:5 (31:7) where v2's field starts at
    bit 0, so v2's field reads the byte value with the bits below 0; CBUF bank and entry fields
    are narrower from the same lsb, so v2's field reads the same value. A v1 register file
    therefore stores v1's bits (CSB reads and resets are v1's) and shows v2's view.

    Raises ValueError naming a field of ``unit`` that is not inside the view's field of that
    name (the view would then read another value than the one stored).
    """
    try:
        view = REGMAP.unit(unit.name)
    except KeyError:
        return unit
    if view is unit:
        return unit
    vregs = {r.name: r for r in view.registers}
    for r in unit.registers:
        vr = vregs.get(r.name)
        if vr is None or vr.offset != r.offset:
            raise ValueError(f"{unit.name}.{r.name}: not at the same offset in v2's map")
        for f in r.fields:
            try:
                vf = vr.field(f.name)
            except KeyError:
                raise ValueError(f"{unit.name}.{r.name}.{f.name}: no such field in v2's map") from None
            same_value = (vf.lsb == f.lsb and f.msb <= vf.msb) or (vf.lsb == 0 and vf.msb == f.msb)
            if not same_value or f.access != vf.access:
                raise ValueError(f"{unit.name}.{r.name}.{f.name}: bits {f.msb}:{f.lsb} do not read "
                                 f"the same value through v2's bits {vf.msb}:{vf.lsb}")
    return view


def is_pingpong(unit: Unit) -> bool:
    names = {r.name for r in unit.registers}
    return all(n in names for n in _SPECIAL)


def unit_layout(unit: Unit, which: str) -> data.StructLayout:
    """Layout of a unit's ``cfg`` (``which="cfg"``: software-programmed registers as the hardware
    sees them, D_ registers from the consumer group) or ``hw`` (``which="hw"``: registers with
    read-only status fields the hardware drives). Member names are lower-case register names;
    each member is the 32-bit :func:`reg_layout` of that register.
    """
    pp = is_pingpong(unit)
    members = {}
    for r in unit.registers:
        if pp and r.name in _SPECIAL:
            continue
        if which == "cfg" and r.write_mask:
            members[_lname(r.name)] = reg_layout(unit, r)
        elif which == "hw" and _hw_mask(r):
            members[_lname(r.name)] = reg_layout(unit, r)
    return data.StructLayout(members)


class UnitRegFile(wiring.Component):
    """Register file of one NVDLA unit, generated from its REGMAP entry.

    Parameters: ``unit`` (a :class:`hdl.regmap.Unit` of the configuration's map, v2's or v1's:
    which bits are stored, their resets and what CSB reads); ``read_only`` (CFGROM: every
    register is a constant equal to its REGMAP reset value, writes ignored). The ``cfg`` and
    ``hw`` views are typed by :func:`view_unit` (v2's fields, which v1's stored bits read through).

    Ports:
      ``bus``: In(:class:`RegBusSignature`) CSB side.
      ``cfg``: Out(:func:`unit_layout` "cfg") programmed values; D_ registers of the consumer group.
      ``hw``: In(:func:`unit_layout` "hw") values of the ``r`` (hardware status) fields.
      For ping-pong units (S_POINTER/S_STATUS/D_OP_ENABLE present) also:
      ``op_en`` Out(1) the consumer group is armed; ``consumer`` Out(1);
      ``done`` In(1) one-cycle pulse: the datapath finished the consumer group;
      ``done_grp`` Out(2) one-cycle done pulse per group (bit g = group g) for GLB.
    """

    def __init__(self, unit: Unit, *, read_only: bool = False):
        self.unit = unit
        self.read_only = read_only
        self.pingpong = is_pingpong(unit) and not read_only
        view = view_unit(unit)
        self._cfg_layout = unit_layout(view, "cfg")
        self._hw_layout = unit_layout(view, "hw")
        members = {"bus": In(RegBusSignature())}
        if not read_only:
            members["cfg"] = Out(self._cfg_layout)
            members["hw"] = In(self._hw_layout)
        if self.pingpong:
            members.update(op_en=Out(1), consumer=Out(1), done=In(1), done_grp=Out(2))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        bus = self.bus
        regs = {r.name: r for r in self.unit.registers}
        sel = {r.name: bus.addr == (r.offset >> 2) for r in self.unit.registers}
        wr = {n: bus.we & s for n, s in sel.items()}

        if self.read_only:
            with m.Switch(bus.addr):
                for r in self.unit.registers:
                    with m.Case(r.offset >> 2):
                        m.d.comb += bus.rdata.eq(r.reset)
                with m.Default():
                    m.d.comb += bus.rdata.eq(0)
            return m

        pp = self.pingpong
        producer = Signal()
        consumer = Signal()
        op_en = [Signal(name=f"op_en{g}") for g in range(2)]
        if pp:
            # the consumer pointer of the next cycle: flips when the datapath is done
            consumer_next = Signal()
            m.d.comb += consumer_next.eq(Mux(self.done, ~consumer, consumer))
            # The register groups change only on a CSB write, the consumer group's view also
            # when the consumer pointer flips: all of them load under this one enable (the same
            # values: without a write or a flip each next state equals the present one), so
            # Verilator computes their next states only in the cycles it is set (issue 12: the
            # register files were ~30 % of the per-cycle code) and FPGA flops take it as their
            # clock enable.
            upd = Signal()
            m.d.comb += upd.eq(bus.we | self.done)

        read_values = {}
        for r in self.unit.registers:
            if pp and r.name in _SPECIAL:
                continue
            smask, rmask, hmask, cval = (r.write_mask, _readable_stored_mask(r), _hw_mask(r),
                                         _const_value(r))
            lname = _lname(r.name)
            hw_val = self.hw[lname].as_value() if hmask else Const(0, 32)
            if smask:
                groups = 2 if (pp and r.double_buffered) else 1
                store = [Signal(32, init=r.reset & smask, name=f"{lname}_g{g}" if groups == 2 else lname)
                         for g in range(groups)]
                if groups == 2:
                    # the consumer group's values as a register of their own, loaded with the
                    # next cycle's pointer and group values: always equal to Mux(consumer,
                    # group 1, group 0), without the pointer's fan-out into every datapath
                    # (issue 10: it started the SDP's critical path)
                    # (expressions, not named signals, so that the simulator computes them
                    # only under the enable ``upd``)
                    cfg_reg = Signal(32, init=r.reset & smask, name=f"{lname}_cfg")
                    with m.If(upd):
                        for g in range(2):
                            with m.If(wr[r.name] & (producer == g)):
                                m.d.sync += store[g].eq(bus.wdata & smask)
                        m.d.sync += cfg_reg.eq(Mux(wr[r.name] & (producer == consumer_next),
                                                   bus.wdata & smask,
                                                   Mux(consumer_next, store[1], store[0])))
                    cur_sw = Mux(producer, store[1], store[0])
                    cur_hw = cfg_reg
                else:
                    with m.If(wr[r.name]):
                        m.d.sync += store[0].eq(bus.wdata & smask)
                    cur_sw = cur_hw = store[0]
                m.d.comb += self.cfg[lname].eq(cur_hw)
                read_values[r.name] = (cur_sw & rmask) | (hw_val & hmask) | cval
            else:
                read_values[r.name] = (hw_val & hmask) | cval

        if pp:
            # v1_hwarch "Ping-pong synchronization": producer/consumer pointers and OP_EN per group.
            ptr = regs["S_POINTER"]
            f_prod, f_cons = ptr.field("PRODUCER"), ptr.field("CONSUMER")
            with m.If(wr["S_POINTER"]):
                m.d.sync += producer.eq(bus.wdata[f_prod.lsb])
            read_values["S_POINTER"] = (producer << f_prod.lsb) | (consumer << f_cons.lsb)

            f_op = regs["D_OP_ENABLE"].field("OP_EN")
            for g in range(2):
                with m.If(wr["D_OP_ENABLE"] & (producer == g)):
                    m.d.sync += op_en[g].eq(bus.wdata[f_op.lsb])
                # hardware completion wins over a same-cycle CSB write to the same group
                with m.If(self.done & (consumer == g)):
                    m.d.sync += op_en[g].eq(0)
            m.d.sync += consumer.eq(consumer_next)
            read_values["D_OP_ENABLE"] = Mux(producer, op_en[1], op_en[0]) << f_op.lsb

            st = regs["S_STATUS"]
            status = 0
            for g in range(2):
                f = st.field(f"STATUS_{g}")
                sv = Mux(op_en[g], Mux(consumer == g, STATUS_RUNNING, STATUS_PENDING), STATUS_IDLE)
                status = status | (sv.as_unsigned() << f.lsb)
            read_values["S_STATUS"] = status

            m.d.comb += [
                self.op_en.eq(Mux(consumer, op_en[1], op_en[0])),
                self.consumer.eq(consumer),
                self.done_grp.eq(Mux(self.done, Mux(consumer, 0b10, 0b01), 0)),
            ]

        with m.Switch(bus.addr):
            for r in self.unit.registers:
                with m.Case(r.offset >> 2):
                    m.d.comb += bus.rdata.eq(read_values[r.name])
            with m.Default():
                m.d.comb += bus.rdata.eq(0)
        return m
