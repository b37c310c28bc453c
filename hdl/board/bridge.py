"""UART-to-CSB/memory bridge: a byte protocol through which a host (a PC on the board's USB
serial port, or the simulation's host model :class:`hdl.board.host.UartHost`) writes and reads
NV_nvdla's registers over CSB, loads and reads back the on-chip memory, and waits for
``dla_intr``. docs/fpga.md, "Board top".

Protocol: the host sends one command (an opcode byte, then its fields, little-endian); the
board answers each command when it has done it, so the host sends the next one after the
answer. ``addr`` is a byte address (32 bits; bits 1:0 ignored: 32-bit words), ``n`` a count of
32-bit words (16 bits).

======  =========================  ====================================  ===================
opcode  command                    fields                                answer
======  =========================  ====================================  ===================
0x01    write register (posted)    addr[4] data[4]                       0x01 once CSB took it
0x02    read register              addr[4]                               data[4]
0x03    write memory               addr[4] n[2] then n words data[4]     0x03 after the last
0x04    read memory                addr[4] n[2]                          n words data[4]
0x05    fill memory                addr[4] n[2] value[4]                 0x05 when done
0x06    wait for interrupt         (none)                                0x06 once dla_intr is 1
                                   any byte sent while waiting cancels   0x00 (cancelled)
other   (ignored)                                                        0xEE
======  =========================  ====================================  ===================
"""
from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import enum, stream, wiring
from amaranth.lib.wiring import In, Out

from hdl.board.axi_ram import HostMemSignature
from hdl.csb import CsbSignature

__all__ = ["Op", "FIELD_BYTES", "BAD_OPCODE", "CANCELLED", "UartBridge"]


class Op(enum.Enum, shape=8):
    """The bridge's opcodes (module docstring)."""
    WRITE_REG = 0x01
    READ_REG = 0x02
    WRITE_MEM = 0x03
    READ_MEM = 0x04
    FILL_MEM = 0x05
    WAIT_INTR = 0x06


#: bytes of fields after each opcode (WRITE_MEM's data words follow separately)
FIELD_BYTES = {Op.WRITE_REG: 8, Op.READ_REG: 4, Op.WRITE_MEM: 6, Op.READ_MEM: 6,
               Op.FILL_MEM: 10, Op.WAIT_INTR: 0}
#: the answer to an unknown opcode
BAD_OPCODE = 0xEE
#: the answer to a WAIT_INTR cancelled by a byte from the host
CANCELLED = 0x00


class UartBridge(wiring.Component):
    """The protocol engine (module docstring). Ports: ``rx`` (``In(stream.Signature(8))``: bytes
    from the host), ``tx`` (``Out(stream.Signature(8))``: bytes to the host), ``csb``
    (``In(CsbSignature())``: the CSB master, to NV_nvdla's ``csb2nvdla_*``/``nvdla2csb_*``;
    addresses to CSB are word addresses, ``addr >> 2``, 16 bits), ``mem``
    (``Out(HostMemSignature())``: to :class:`hdl.board.axi_ram.AxiRam`'s host port), ``intr``
    (``In(1)``: ``dla_intr``)."""

    def __init__(self):
        super().__init__({"rx": In(stream.Signature(8)), "tx": Out(stream.Signature(8)),
                          "csb": In(CsbSignature()), "mem": Out(HostMemSignature()),
                          "intr": In(1)})

    def elaborate(self, platform):
        m = Module()
        rx, tx, csb, mem = self.rx, self.tx, self.csb, self.mem
        op = Signal(8)
        fields = Signal(80)                 # the command's field bytes, first at bits 7:0
        idx = Signal(range(11))             # field bytes received
        need = Signal(range(11))            # field bytes of this command
        addr = fields[0:32]
        n = Signal(16)
        word = Signal(32)                   # data word being received / sent
        wbytes = Signal(range(5))           # bytes of ``word`` received or still to send
        waddr = Signal(32)                  # memory address of the next word

        def put_field(byte):
            with m.Switch(idx):
                for i in range(10):
                    with m.Case(i):
                        m.d.sync += fields[8 * i:8 * i + 8].eq(byte)
            m.d.sync += idx.eq(idx + 1)

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += rx.ready.eq(1)
                with m.If(rx.valid):
                    m.d.sync += [op.eq(rx.payload), idx.eq(0)]
                    with m.Switch(rx.payload):
                        for o, nb in FIELD_BYTES.items():
                            with m.Case(o.value):
                                m.d.sync += need.eq(nb)
                                m.next = "FIELDS"
                        with m.Default():
                            m.d.sync += word.eq(BAD_OPCODE)
                            m.next = "ACK"
            with m.State("FIELDS"):
                with m.If(idx == need):
                    m.d.sync += [n.eq(fields[32:48]), waddr.eq(fields[0:32]), wbytes.eq(0)]
                    with m.Switch(op):
                        with m.Case(Op.WRITE_REG.value, Op.READ_REG.value):
                            m.next = "CSB_REQ"
                        with m.Case(Op.WRITE_MEM.value):
                            m.next = "WM_DATA"
                        with m.Case(Op.READ_MEM.value):
                            m.next = "RM_REQ"
                        with m.Case(Op.FILL_MEM.value):
                            m.d.sync += word.eq(fields[48:80])
                            m.next = "FILL"
                        with m.Case(Op.WAIT_INTR.value):
                            m.next = "WAIT_INTR"
                with m.Else():
                    m.d.comb += rx.ready.eq(1)
                    with m.If(rx.valid):
                        put_field(rx.payload)
            # --- registers over CSB
            with m.State("CSB_REQ"):
                is_write = op == Op.WRITE_REG.value
                m.d.comb += [csb.csb2nvdla_valid.eq(1), csb.csb2nvdla_addr.eq(addr[2:18]),
                             csb.csb2nvdla_wdat.eq(fields[32:64]),
                             csb.csb2nvdla_write.eq(is_write), csb.csb2nvdla_nposted.eq(0)]
                with m.If(csb.csb2nvdla_ready):
                    with m.If(is_write):
                        m.d.sync += word.eq(op)
                        m.next = "ACK"
                    with m.Else():
                        m.next = "CSB_WAIT"
            with m.State("CSB_WAIT"):
                with m.If(csb.nvdla2csb_valid):
                    m.d.sync += [word.eq(csb.nvdla2csb_data), wbytes.eq(4)]
                    m.next = "SEND"
            # --- memory
            with m.State("WM_DATA"):
                with m.If(n == 0):
                    m.d.sync += word.eq(op)
                    m.next = "ACK"
                with m.Elif(wbytes == 4):
                    m.next = "MEM_WRITE"
                with m.Else():
                    m.d.comb += rx.ready.eq(1)
                    with m.If(rx.valid):
                        m.d.sync += [word.eq((word >> 8) | (rx.payload << 24)),
                                     wbytes.eq(wbytes + 1)]
            with m.State("MEM_WRITE"):
                m.d.comb += [mem.valid.eq(1), mem.write.eq(1), mem.addr.eq(waddr),
                             mem.wdata.eq(word)]
                with m.If(mem.ready):
                    m.d.sync += [waddr.eq(waddr + 4), n.eq(n - 1), wbytes.eq(0)]
                    m.next = "WM_DATA"
            with m.State("FILL"):
                with m.If(n == 0):
                    m.d.sync += word.eq(op)
                    m.next = "ACK"
                with m.Else():
                    m.d.comb += [mem.valid.eq(1), mem.write.eq(1), mem.addr.eq(waddr),
                                 mem.wdata.eq(word)]
                    with m.If(mem.ready):
                        m.d.sync += [waddr.eq(waddr + 4), n.eq(n - 1)]
            with m.State("RM_REQ"):
                with m.If(n == 0):
                    m.next = "IDLE"
                with m.Else():
                    m.d.comb += [mem.valid.eq(1), mem.addr.eq(waddr)]
                    with m.If(mem.ready):
                        m.d.sync += [waddr.eq(waddr + 4), n.eq(n - 1)]
                        m.next = "RM_WAIT"
            with m.State("RM_WAIT"):
                with m.If(mem.rvalid):
                    m.d.sync += [word.eq(mem.rdata), wbytes.eq(4)]
                    m.next = "SEND"
            # --- interrupt
            with m.State("WAIT_INTR"):
                m.d.comb += rx.ready.eq(~self.intr)
                with m.If(self.intr):
                    m.d.sync += word.eq(op)
                    m.next = "ACK"
                with m.Elif(rx.valid):              # the host gave up: cancelled
                    m.d.sync += word.eq(CANCELLED)
                    m.next = "ACK"
            # --- answers
            with m.State("ACK"):                 # one byte: word[7:0]
                m.d.comb += [tx.valid.eq(1), tx.payload.eq(word[0:8])]
                with m.If(tx.ready):
                    m.next = "IDLE"
            with m.State("SEND"):                # wbytes bytes of word, LSB first
                m.d.comb += [tx.valid.eq(1), tx.payload.eq(word[0:8])]
                with m.If(tx.ready):
                    m.d.sync += [word.eq(word >> 8), wbytes.eq(wbytes - 1)]
                    with m.If(wbytes == 1):
                        with m.If(op == Op.READ_MEM.value):
                            m.next = "RM_REQ"
                        with m.Else():
                            m.next = "IDLE"
        return m
