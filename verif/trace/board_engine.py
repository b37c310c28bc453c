"""The ``board`` engine of the trace player: the board top (:class:`hdl.board.top.NvdlaBoard`:
NV_nvdla's core, the UART bridge, block RAM on the DBB port) in Amaranth's simulator, driven
only through its UART pins, as a PC drives the real board (docs/fpga.md, "Board top").

Every player operation goes through the bridge protocol (:class:`hdl.board.host.BridgeClient`)
on the simulated serial line: ``mem_init`` is a FILL_MEM command, ``mem_load`` WRITE_MEM (a
region not 4-byte aligned is read, merged and written back), ``check_crc`` reads the region
back with READ_MEM, register accesses are CSB reads and writes through the bridge, and
``wait_intr`` is the bridge's WAIT_INTR command. ``cycle`` counts clock edges since the start;
the player's cycle counts therefore include UART time and are not comparable to NVIDIA's.

The board's memory wraps at ``mem_bytes`` (:class:`hdl.board.axi_ram.AxiRam`): a trace runs
when its regions do not overlap modulo that size (checked before anything runs,
:func:`regions_fit`).
"""
from __future__ import annotations

from amaranth.sim import Simulator

from hdl.board.host import BridgeClient
from hdl.board.top import NvdlaBoard
from hdl.config import NvdlaConfig
from verif.trace.engine_common import busy_units
from verif.trace.player import TraceFailure, TraceResult, play

__all__ = ["SimUartLine", "BoardEngine", "regions_fit", "play_on_board"]

PERIOD = 1e-8       # seconds (only cycles matter)


class SimUartLine:
    """The host end of the board's serial line in an Amaranth testbench: ``send`` drives
    ``rx`` (8N1, ``divisor`` cycles a bit), ``recv`` samples ``tx`` in the middle of each bit.
    ``tick`` is the engine's one-cycle coroutine (it counts cycles); ``timeout``: cycles
    ``recv`` waits for a start bit before TraceFailure."""

    def __init__(self, engine, rx, tx, divisor: int, timeout: int = 1_000_000):
        self.engine, self.rx, self.tx, self.divisor, self.timeout = engine, rx, tx, divisor, timeout

    async def send(self, data: bytes) -> None:
        """Drive ``data`` onto ``rx``, byte after byte (10 bits of ``divisor`` cycles each)."""
        ctx = self.engine.ctx
        for b in data:
            for bit in [0] + [(b >> i) & 1 for i in range(8)] + [1]:
                ctx.set(self.rx, bit)
                for _ in range(self.divisor):
                    await self.engine.tick()

    async def recv(self, n: int, timeout: int | None = None) -> bytes:
        """The next ``n`` bytes on ``tx``; TraceFailure when a start bit takes more than
        ``timeout`` cycles (default: the line's) or a stop bit is 0."""
        ctx, out = self.engine.ctx, bytearray()
        timeout = self.timeout if timeout is None else timeout
        for _ in range(n):
            waited = 0
            while ctx.get(self.tx):
                await self.engine.tick()
                waited += 1
                if waited > timeout:
                    raise TraceFailure(f"board UART: no answer within {timeout} cycles "
                                       f"({len(out)} of {n} bytes received)")
            for _ in range(self.divisor // 2):       # to the middle of the start bit
                await self.engine.tick()
            b = 0
            for i in range(8):
                for _ in range(self.divisor):
                    await self.engine.tick()
                b |= ctx.get(self.tx) << i
            for _ in range(self.divisor):            # the stop bit's middle
                await self.engine.tick()
            if not ctx.get(self.tx):
                raise TraceFailure(f"board UART: framing error (stop bit 0) in byte {len(out)}")
            out.append(b)
        return bytes(out)


class BoardEngine:
    """``Engine`` (verif/trace/player.py) on an :class:`hdl.board.top.NvdlaBoard` in Amaranth's
    simulator, through its UART only (module docstring). Created by :func:`play_on_board`."""

    name = "board"

    def __init__(self, dut: NvdlaBoard):
        self.dut, self.cfg = dut, dut.cfg
        self.address_width = 32
        self.ctx = None
        self._cycle = 0
        self.line = SimUartLine(self, dut.rx, dut.tx, dut.divisor)
        self.host = BridgeClient(self.line.send, self.line.recv)
        self.uart_bytes = 0

    @property
    def cycle(self) -> int:
        """Clock edges since the start of the simulation."""
        return self._cycle

    async def tick(self) -> None:
        """Advance one clock cycle."""
        await self.ctx.tick()
        self._cycle += 1

    @staticmethod
    def _check_mem(mem: str) -> None:
        if mem != "pri_mem":
            raise TraceFailure(f"the board has one memory (pri_mem); the trace uses {mem}")

    async def mem_fill(self, addr: int, size: int, value: int, mem: str = "pri_mem") -> None:
        self._check_mem(mem)
        if value & ~0xFF:
            raise TraceFailure(f"mem_fill value {value:#x} is not a byte")
        lo, hi = (addr + 3) & ~3, (addr + size) & ~3
        if lo >= hi:
            await self.mem_write(addr, bytes([value]) * size)
            return
        await self.mem_write(addr, bytes([value]) * (lo - addr))
        await self.host.mem_fill(lo, (hi - lo) // 4, value * 0x01010101)
        await self.mem_write(hi, bytes([value]) * (addr + size - hi))

    async def mem_write(self, addr: int, data: bytes, mem: str = "pri_mem") -> None:
        self._check_mem(mem)
        if not data:
            return
        lo, hi = addr & ~3, (addr + len(data) + 3) & ~3
        if lo != addr or hi != addr + len(data):        # merge with the words' other bytes
            old = bytearray(await self.mem_read(lo, hi - lo))
            old[addr - lo:addr - lo + len(data)] = data
            data = bytes(old)
        await self.host.mem_write(lo, [int.from_bytes(data[i:i + 4], "little")
                                       for i in range(0, len(data), 4)])

    async def mem_read(self, addr: int, size: int, mem: str = "pri_mem") -> bytes:
        self._check_mem(mem)
        lo, hi = addr & ~3, (addr + size + 3) & ~3
        words = await self.host.mem_read(lo, (hi - lo) // 4)
        raw = b"".join(w.to_bytes(4, "little") for w in words)
        return raw[addr - lo:addr - lo + size]

    async def reg_write(self, addr: int, value: int) -> None:
        await self.host.reg_write(addr, value)

    async def reg_read(self, addr: int) -> int:
        return await self.host.reg_read(addr)

    async def wait_intr(self, max_cycles: int) -> bool:
        async def first():
            try:
                return await self.line.recv(1, timeout=max_cycles)
            except TraceFailure:
                return None
        return await self.host.wait_intr(first)

    async def wait_cycles(self, n: int) -> None:
        for _ in range(max(0, n)):
            await self.tick()

    async def busy_units(self) -> list[str]:
        return await busy_units(self.reg_read)


def regions_fit(trace, mem_bytes: int) -> str | None:
    """None when the trace's memory regions (``mem_init``, ``mem_load``, ``check_crc``) do not
    overlap each other modulo ``mem_bytes`` unless they overlap in the address space too, else
    a one-line reason."""
    spans = []
    for c in trace.commands:
        if c.kind in ("mem_init", "check_crc") and "base" in c.args:
            spans.append((c.args["base"], c.args["base"] + c.args["size"]))
    spans = sorted(set(spans))
    for i, (a0, a1) in enumerate(spans):
        if a1 - a0 > mem_bytes:
            return f"region {a0:#x}+{a1 - a0:#x} is larger than the board memory ({mem_bytes} bytes)"
        for b0, b1 in spans[i + 1:]:
            if a0 < b1 and b0 < a1:
                continue            # overlapping in the address space: the same bytes
            for k in (-1, 0, 1):    # overlapping modulo mem_bytes
                s0, s1 = b0 % mem_bytes + k * mem_bytes, b0 % mem_bytes + k * mem_bytes + (b1 - b0)
                if a0 % mem_bytes < s1 and s0 < a0 % mem_bytes + (a1 - a0):
                    return (f"regions {a0:#x}+{a1 - a0:#x} and {b0:#x}+{b1 - b0:#x} share bytes "
                            f"of the board's {mem_bytes}-byte memory")
    return None


def play_on_board(trace, cfg: NvdlaConfig, *, divisor: int = 2, mem_bytes: int = 16384,
                  vcd: str | None = None, **player_kw) -> TraceResult:
    """Play ``trace`` (a parsed ``verif.trace.parser.Trace``) on a fresh simulation of
    ``NvdlaBoard(cfg, divisor=divisor, mem_bytes=mem_bytes)`` through its UART; the result
    carries ``.uart_cycles`` (the simulation's cycles). A trace whose regions collide in the
    board memory is FAIL before anything runs (:func:`regions_fit`)."""
    why = regions_fit(trace, mem_bytes)
    if why:
        return TraceResult(trace.name, "FAIL", f"does not fit the board memory: {why}")
    dut = NvdlaBoard(cfg, divisor=divisor, mem_bytes=mem_bytes)
    eng = BoardEngine(dut)
    out = {}
    sim = Simulator(dut)
    sim.add_clock(PERIOD)

    async def bench(ctx):
        eng.ctx = ctx
        ctx.set(dut.rx, 1)
        for _ in range(4):
            await eng.tick()
        out["res"] = await play(trace, eng, **player_kw)

    sim.add_testbench(bench)
    if vcd:
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim.run()
    res = out["res"]
    res.uart_cycles = eng.cycle
    return res
