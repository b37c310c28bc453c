# amaranth: UnusedElaboratable=no
"""The board top's pieces (hdl/board/: UART, bridge, AXI block RAM) in Amaranth's simulator,
without NVDLA: a host (hdl.board.host.BridgeClient over the simulated serial line) writes and
reads registers of a CSB target modelled in the testbench, loads, fills and reads back the RAM,
waits for (and cancels a wait for) the interrupt; an AXI master modelled in the testbench writes
bursts with byte strobes and reads them back with random RREADY stalls. Checked: every value and
byte read equals what a Python model of the memory and registers holds."""
from __future__ import annotations

import random

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from hdl.axi import AxiMasterSignature
from hdl.board.axi_ram import AxiRam
from hdl.board.bridge import UartBridge
from hdl.board.host import BridgeClient
from hdl.board.uart import UartRx, UartTx, check_divisor
from hdl.csb import CsbSignature
from verif.trace.board_engine import SimUartLine

DIV = 4
RAM = 1024


class Fixture(wiring.Component):
    """UART + bridge + AxiRam; the bridge's CSB master and the RAM's AXI port are top ports."""

    def __init__(self):
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), "intr": In(1),
                          "csb": In(CsbSignature()),
                          "axi": In(AxiMasterSignature(32, 64))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.urx = urx = UartRx(DIV)
        m.submodules.utx = utx = UartTx(DIV)
        m.submodules.br = br = UartBridge()
        m.submodules.ram = ram = AxiRam(RAM)
        m.d.comb += [urx.rx.eq(self.rx), self.tx.eq(utx.tx), br.intr.eq(self.intr)]
        wiring.connect(m, urx.o, br.rx)
        wiring.connect(m, br.tx, utx.i)
        wiring.connect(m, br.mem, ram.host)
        for name, member in CsbSignature().members.items():
            a, b = getattr(self.csb, name), getattr(br.csb, name)
            m.d.comb += (a.eq(b) if member.flow == wiring.In else b.eq(a))
        for name, member in ram.axi.signature.members.items():
            a, b = getattr(self.axi, name), getattr(ram.axi, name)
            m.d.comb += (b.eq(a) if member.flow == wiring.In else a.eq(b))
        return m


class _Eng:
    def __init__(self, ctx):
        self.ctx, self.cycle = ctx, 0

    async def tick(self):
        await self.ctx.tick()
        self.cycle += 1


def _run(bench):
    dut = Fixture()
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    regs = {}

    async def csb_target(ctx):
        """A CSB slave: ready always, read data 2 cycles after the request."""
        ctx.set(dut.csb.csb2nvdla_ready, 1)
        pending = []
        async for clk_edge, rst, valid, addr, wdat, write in ctx.tick().sample(
                dut.csb.csb2nvdla_valid, dut.csb.csb2nvdla_addr, dut.csb.csb2nvdla_wdat,
                dut.csb.csb2nvdla_write):
            ctx.set(dut.csb.nvdla2csb_valid, 0)
            if pending and pending[0][0] == 0:
                ctx.set(dut.csb.nvdla2csb_valid, 1)
                ctx.set(dut.csb.nvdla2csb_data, pending.pop(0)[1])
            pending = [(t - 1, v) for t, v in pending]
            if valid:
                if write:
                    regs[addr] = wdat
                else:
                    pending.append((1, regs.get(addr, 0xDEAD0000 | addr)))

    async def main(ctx):
        eng = _Eng(ctx)
        line = SimUartLine(eng, dut.rx, dut.tx, DIV, timeout=20_000)
        await bench(ctx, dut, eng, BridgeClient(line.send, line.recv), line, regs)

    sim.add_process(csb_target)
    sim.add_testbench(main)
    sim.run()


def test_divisor_checked():
    with pytest.raises(ValueError, match="cycles per bit"):
        UartRx(1)
    assert check_divisor(2) == 2


def test_registers_memory_interrupt():
    rng = random.Random(1)

    async def bench(ctx, dut, eng, host, line, regs):
        await host.reg_write(0x5004, 0x12345678)
        await host.reg_write(0xA008, 0xCAFEF00D)
        assert regs == {0x5004 >> 2: 0x12345678, 0xA008 >> 2: 0xCAFEF00D}
        assert await host.reg_read(0x5004) == 0x12345678
        assert await host.reg_read(0x10) == 0xDEAD0004
        model = [0] * (RAM // 4)
        words = [rng.getrandbits(32) for _ in range(37)]
        await host.mem_write(0x80000000 + 4 * 11, words)       # wraps at RAM bytes
        model[11:48] = words
        await host.mem_fill(0x100, 20, 0xA5A5A5A5)
        model[64:84] = [0xA5A5A5A5] * 20
        assert await host.mem_read(0, RAM // 4) == model
        # an interrupt already high answers at once; a wait can be cancelled
        ctx.set(dut.intr, 1)
        assert await host.wait_intr()
        ctx.set(dut.intr, 0)

        async def give_up():
            for _ in range(50):
                await eng.tick()
            return None
        assert not await host.wait_intr(give_up)
        assert await host.reg_read(0x5004) == 0x12345678       # still in step

    _run(bench)


def test_axi_bursts_with_strobes_and_stalls():
    rng = random.Random(2)

    async def bench(ctx, dut, eng, host, line, regs):
        axi = dut.axi
        model = bytearray(RAM)
        ctx.set(axi.b_bready, 1)
        for burst in range(30):
            addr = rng.randrange(0, RAM // 8 - 16) * 8
            n = rng.randrange(1, 17)
            if rng.random() < 0.5:            # write burst
                ctx.set(axi.aw_awvalid, 1)
                ctx.set(axi.aw_awaddr, 0x80000000 | addr)
                ctx.set(axi.aw_awlen, n - 1)
                ctx.set(axi.aw_awid, burst)
                while not ctx.get(axi.aw_awready):
                    await eng.tick()
                await eng.tick()
                ctx.set(axi.aw_awvalid, 0)
                for i in range(n):
                    data, strb = rng.getrandbits(64), rng.getrandbits(8)
                    ctx.set(axi.w_wvalid, 1)
                    ctx.set(axi.w_wdata, data)
                    ctx.set(axi.w_wstrb, strb)
                    ctx.set(axi.w_wlast, i == n - 1)
                    while not ctx.get(axi.w_wready):
                        await eng.tick()
                    await eng.tick()
                    for b in range(8):
                        if strb >> b & 1:
                            model[addr + 8 * i + b] = data >> (8 * b) & 0xFF
                ctx.set(axi.w_wvalid, 0)
                while not ctx.get(axi.b_bvalid):
                    await eng.tick()
                assert ctx.get(axi.b_bid) == burst
                await eng.tick()
            else:                              # read burst, RREADY random
                ctx.set(axi.ar_arvalid, 1)
                ctx.set(axi.ar_araddr, addr)
                ctx.set(axi.ar_arlen, n - 1)
                ctx.set(axi.ar_arid, burst)
                while not ctx.get(axi.ar_arready):
                    await eng.tick()
                await eng.tick()
                ctx.set(axi.ar_arvalid, 0)
                got = []
                while len(got) < n:
                    ready = rng.random() < 0.6
                    ctx.set(axi.r_rready, ready)
                    if ready and ctx.get(axi.r_rvalid):
                        assert ctx.get(axi.r_rid) == burst
                        assert ctx.get(axi.r_rlast) == (len(got) == n - 1)
                        got.append(ctx.get(axi.r_rdata))
                    await eng.tick()
                ctx.set(axi.r_rready, 0)
                assert got == [int.from_bytes(model[addr + 8 * i:addr + 8 * i + 8], "little")
                               for i in range(n)]
        # the host port sees what the AXI side wrote
        words = await host.mem_read(0, RAM // 4)
        assert b"".join(w.to_bytes(4, "little") for w in words) == bytes(model)

    _run(bench)


def test_glb_board_through_uart():
    """The reduced board build's top (``NvdlaBoard(core="glb")``: CSB slave and GLB) through its
    UART pins: GLB's version register reads back its reset value, a software interrupt
    (S_INTR_SET) raises ``intr`` and ends a WAIT_INTR, and clearing it lowers ``intr``."""
    from hdl.board.top import NvdlaBoard
    from hdl.config import NV_SMALL
    from hdl.regmap import REGMAP

    glb = REGMAP.unit("GLB")
    reg = {r.name: glb.base + r.offset for r in glb.registers}
    dut = NvdlaBoard(NV_SMALL, divisor=DIV, mem_bytes=256, core="glb")
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def main(ctx):
        eng = _Eng(ctx)
        line = SimUartLine(eng, dut.rx, dut.tx, DIV, timeout=20_000)
        host = BridgeClient(line.send, line.recv)
        version = next(r for r in glb.registers if r.name == "S_NVDLA_HW_VERSION").reset
        assert await host.reg_read(reg["S_NVDLA_HW_VERSION"]) == version
        assert not ctx.get(dut.intr)
        await host.reg_write(reg["S_INTR_SET"], 1)          # SDP_DONE_SET0
        assert await host.wait_intr()
        assert ctx.get(dut.intr)
        assert await host.reg_read(reg["S_INTR_STATUS"]) == 1
        await host.reg_write(reg["S_INTR_STATUS"], 1)       # write 1 to clear
        for _ in range(8):
            await eng.tick()
        assert not ctx.get(dut.intr)
        await host.mem_write(0x80000010, [0x01020304])
        assert await host.mem_read(0x10, 1) == [0x01020304]

    sim.add_testbench(main)
    sim.run()
