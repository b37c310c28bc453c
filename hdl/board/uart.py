"""8N1 UART receiver and transmitter (docs/fpga.md, "Board top"): one start bit, 8 data bits
LSB first, one stop bit, ``divisor`` clock cycles per bit (the clock frequency over the baud
rate, e.g. 50 MHz / 115,200 baud = 434). Both sides are streams of bytes (``lib.stream``).
"""
from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

__all__ = ["UartRx", "UartTx", "check_divisor"]


def check_divisor(divisor: int) -> int:
    """``divisor`` (clock cycles per bit) if it is an int of at least 2; ValueError otherwise."""
    if not isinstance(divisor, int) or divisor < 2:
        raise ValueError(f"UART divisor {divisor!r}: clock cycles per bit must be an int >= 2")
    return divisor


class UartRx(wiring.Component):
    """UART receiver: ``rx`` (the line, idle high; synchronised by two flip-flops here) to the
    byte stream ``o`` (``stream.Signature(8)``, valid for one byte until taken).

    The start bit's falling edge starts a byte; each bit is sampled in its middle
    (``divisor // 2`` cycles after the edge, then every ``divisor`` cycles); a byte whose stop
    bit is 0 is dropped and counted in ``framing_errors`` (8 bits, saturating). A byte that
    arrives while the previous one is still untaken replaces it (``overruns`` counts them).
    ``divisor``: clock cycles per bit, >= 2 (ValueError otherwise)."""

    def __init__(self, divisor: int):
        self.divisor = check_divisor(divisor)
        super().__init__({"rx": In(1, init=1), "o": Out(stream.Signature(8)),
                          "framing_errors": Out(8), "overruns": Out(8)})

    def elaborate(self, platform):
        m = Module()
        rx = Signal(init=1)
        m.submodules.sync_rx = FFSynchronizer(self.rx, rx, init=1)
        cnt = Signal(range(self.divisor + 1))
        bit = Signal(range(10))
        shreg = Signal(8)
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(~rx):
                    m.d.sync += [cnt.eq(self.divisor // 2 - 1), bit.eq(0)]
                    m.next = "BITS"
            with m.State("BITS"):
                with m.If(cnt != 0):
                    m.d.sync += cnt.eq(cnt - 1)
                with m.Else():
                    m.d.sync += [cnt.eq(self.divisor - 1), bit.eq(bit + 1)]
                    with m.If(bit == 0):            # middle of the start bit
                        with m.If(rx):
                            m.next = "IDLE"         # a glitch, not a start bit
                    with m.Elif(bit <= 8):
                        m.d.sync += shreg.eq((shreg >> 1) | (rx << 7))
                    with m.Else():                  # middle of the stop bit
                        with m.If(rx):
                            m.d.sync += [self.o.payload.eq(shreg), self.o.valid.eq(1)]
                            with m.If(self.o.valid & ~self.o.ready & (self.overruns != 255)):
                                m.d.sync += self.overruns.eq(self.overruns + 1)
                        with m.Elif(self.framing_errors != 255):
                            m.d.sync += self.framing_errors.eq(self.framing_errors + 1)
                        m.next = "IDLE"
        return m


class UartTx(wiring.Component):
    """UART transmitter: the byte stream ``i`` (``stream.Signature(8)``) to the line ``tx``
    (idle high), 8N1, ``divisor`` clock cycles per bit (>= 2, ValueError otherwise). A byte is
    taken when the previous one's stop bit has been sent."""

    def __init__(self, divisor: int):
        self.divisor = check_divisor(divisor)
        super().__init__({"i": In(stream.Signature(8)), "tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        cnt = Signal(range(self.divisor))
        left = Signal(range(11))
        shreg = Signal(10, init=0x3FF)
        m.d.comb += [self.tx.eq(shreg[0]), self.i.ready.eq(left == 0)]
        with m.If(left == 0):
            with m.If(self.i.valid):
                m.d.sync += [shreg.eq((self.i.payload << 1) | (1 << 9)), left.eq(10),
                             cnt.eq(self.divisor - 1)]
        with m.Elif(cnt != 0):
            m.d.sync += cnt.eq(cnt - 1)
        with m.Else():
            m.d.sync += [shreg.eq((shreg >> 1) | (1 << 9)), left.eq(left - 1),
                         cnt.eq(self.divisor - 1)]
        return m
