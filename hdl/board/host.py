"""The host side of the UART bridge's protocol (:mod:`hdl.board.bridge`), transport-agnostic:
:class:`BridgeClient` turns register and memory operations into command bytes and parses the
answers, over any pair of coroutines ``send(bytes)`` / ``recv(n) -> bytes`` (the simulation's
UART line model, :class:`verif.trace.board_engine.SimUartLine`, or a serial port). docs/fpga.md,
"Board top".
"""
from __future__ import annotations

import struct

from hdl.board.bridge import BAD_OPCODE, CANCELLED, Op

__all__ = ["BridgeClient", "BridgeError", "MAX_WORDS"]

#: most 32-bit words one memory command moves (its 16-bit count)
MAX_WORDS = 0xFFFF


class BridgeError(RuntimeError):
    """The board answered a command with something else than its acknowledgement (the message
    names the command and the byte)."""


class BridgeClient:
    """Commands of the bridge protocol over ``send``/``recv`` (async callables: ``await
    send(data: bytes)``, ``await recv(n) -> bytes`` of exactly ``n`` bytes). Addresses are byte
    addresses, 4-byte aligned (ValueError otherwise); values 32-bit unsigned."""

    def __init__(self, send, recv):
        self.send, self.recv = send, recv

    @staticmethod
    def _aligned(addr: int) -> int:
        if addr & 3 or not 0 <= addr < 1 << 32:
            raise ValueError(f"bridge address {addr:#x}: must be a 4-byte aligned 32-bit address")
        return addr

    async def _ack(self, op: Op) -> None:
        (b,) = await self.recv(1)
        if b != op.value:
            what = "unknown opcode" if b == BAD_OPCODE else f"answer {b:#04x}"
            raise BridgeError(f"bridge {op.name}: {what} instead of the acknowledgement "
                              f"{op.value:#04x}")

    async def reg_write(self, addr: int, value: int) -> None:
        """Posted CSB write of ``value`` to register byte address ``addr``."""
        await self.send(struct.pack("<BII", Op.WRITE_REG.value, self._aligned(addr),
                                    value & 0xFFFFFFFF))
        await self._ack(Op.WRITE_REG)

    async def reg_read(self, addr: int) -> int:
        """CSB read of register byte address ``addr``."""
        await self.send(struct.pack("<BI", Op.READ_REG.value, self._aligned(addr)))
        return struct.unpack("<I", await self.recv(4))[0]

    async def mem_write(self, addr: int, words) -> None:
        """Write the 32-bit ``words`` from byte address ``addr`` up (any number: split into
        commands of :data:`MAX_WORDS`)."""
        words = list(words)
        addr = self._aligned(addr)
        for i in range(0, len(words), MAX_WORDS):
            chunk = words[i:i + MAX_WORDS]
            await self.send(struct.pack("<BIH", Op.WRITE_MEM.value, addr + 4 * i, len(chunk))
                            + struct.pack(f"<{len(chunk)}I", *chunk))
            await self._ack(Op.WRITE_MEM)

    async def mem_read(self, addr: int, n: int) -> list:
        """``n`` 32-bit words from byte address ``addr`` up."""
        addr, out = self._aligned(addr), []
        for i in range(0, n, MAX_WORDS):
            k = min(MAX_WORDS, n - i)
            await self.send(struct.pack("<BIH", Op.READ_MEM.value, addr + 4 * i, k))
            out += struct.unpack(f"<{k}I", await self.recv(4 * k))
        return out

    async def mem_fill(self, addr: int, n: int, value: int = 0) -> None:
        """Write ``value`` to ``n`` 32-bit words from byte address ``addr`` up (done by the
        board: 1 cycle a word)."""
        addr = self._aligned(addr)
        for i in range(0, n, MAX_WORDS):
            k = min(MAX_WORDS, n - i)
            await self.send(struct.pack("<BIHI", Op.FILL_MEM.value, addr + 4 * i, k,
                                        value & 0xFFFFFFFF))
            await self._ack(Op.FILL_MEM)

    async def wait_intr(self, recv_first=None) -> bool:
        """Wait until ``dla_intr`` is high (at once if it is): True. ``recv_first``: an async
        callable returning the first answer byte or None when the caller gives up waiting
        (default: wait for good); the wait is then cancelled and False returned (True when the
        interrupt came in the meantime)."""
        await self.send(bytes([Op.WAIT_INTR.value]))
        b = await (recv_first() if recv_first else self.recv(1))
        if b is None:
            await self.send(bytes([CANCELLED]))
            (b,) = await self.recv(1)
            if b == CANCELLED:
                return False
            if b == Op.WAIT_INTR.value:      # raced: answered, the cancel byte was an opcode
                await self.recv(1)           # BAD_OPCODE
                return True
        elif not isinstance(b, int):
            (b,) = b
        if b != Op.WAIT_INTR.value:
            raise BridgeError(f"bridge WAIT_INTR: answer {b:#04x} instead of the "
                              f"acknowledgement {Op.WAIT_INTR.value:#04x}")
        return True
