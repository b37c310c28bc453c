"""The host side of the pipe protocol between NVIDIA's runtime + firmware process and Python
(the C side is ``verif/sw/csrc/channel.h``; keep the two in step).

A request is a header ``<op u32, payload length u32, a u64, b u64>`` and its payload; every
request gets one reply ``<status i32, payload length u32, value u64>`` and its payload. A reply
with a non-zero status ends the run: its payload says why, the child prints it and exits 3.
"""
from __future__ import annotations

import os
import select
import struct
from dataclasses import dataclass

VERSION = 1

HELLO, REG_WRITE, REG_READ, MEM_WRITE, MEM_READ, WAIT_INTR, NOTE, LOG, DONE = range(1, 10)
OP_NAMES = {HELLO: "hello", REG_WRITE: "register write", REG_READ: "register read",
            MEM_WRITE: "memory write", MEM_READ: "memory read", WAIT_INTR: "interrupt wait",
            NOTE: "note", LOG: "log", DONE: "done"}

REQ = struct.Struct("<IIQQ")
REP = struct.Struct("<iIQ")

#: the largest payload a request may carry (a buffer copied to the engine's memory)
MAX_PAYLOAD = 1 << 30


class ChannelClosed(Exception):
    """The child closed its end (it exited or crashed)."""


class ChannelTimeout(Exception):
    """The child sent nothing for the allowed wall time."""


class ProtocolError(Exception):
    """A request the host does not understand (a malformed header)."""


@dataclass
class Request:
    """One request: ``op``, ``a``, ``b`` and the ``payload`` bytes."""
    op: int
    a: int
    b: int
    payload: bytes


class Channel:
    """The host's end: ``rfd`` (requests from the child) and ``wfd`` (replies to it).
    ``timeout``: wall seconds :meth:`receive` waits for the next request."""

    def __init__(self, rfd: int, wfd: int, timeout: float = 300.0):
        self.rfd, self.wfd, self.timeout = rfd, wfd, timeout

    def _read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            ready, _, _ = select.select([self.rfd], [], [], self.timeout)
            if not ready:
                raise ChannelTimeout(f"the runtime process sent nothing for {self.timeout:g} s")
            chunk = os.read(self.rfd, min(n - len(out), 1 << 20))
            if not chunk:
                raise ChannelClosed()
            out += chunk
        return bytes(out)

    def receive(self) -> Request:
        """The next request (blocks). Raises ChannelClosed, ChannelTimeout, ProtocolError."""
        op, length, a, b = REQ.unpack(self._read(REQ.size))
        if op not in OP_NAMES or length > MAX_PAYLOAD:
            raise ProtocolError(f"malformed request header (op {op}, payload {length} bytes)")
        return Request(op, a, b, self._read(length) if length else b"")

    def reply(self, value: int = 0, payload: bytes = b"", status: int = 0) -> None:
        """Answer the current request; ``status`` != 0 ends the child's run (``payload``: why).
        A child that is gone already is ignored (its exit status tells)."""
        data = REP.pack(status, len(payload), value & 0xFFFFFFFFFFFFFFFF) + payload
        try:
            while data:
                n = os.write(self.wfd, data)
                data = data[n:]
        except (BrokenPipeError, OSError):
            pass
