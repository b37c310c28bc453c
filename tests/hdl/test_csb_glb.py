"""CSB slave timing/decoding and GLB interrupts, through NvdlaCore (Amaranth simulator)."""
from amaranth.sim import Simulator

from hdl.config import NV_SMALL
from hdl.regmap import REGMAP
from hdl.top import NvdlaCore
from hdl_harness import Harness, Memory


def addr(name):
    return REGMAP.lookup(name).addr


def run(bench):
    dut = NvdlaCore(NV_SMALL)
    h = Harness(dut, Memory())
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def tb(ctx):
        await bench(ctx, h)
    sim.add_testbench(tb)
    sim.run()


def test_csb_timing_and_decode():
    async def bench(ctx, h):
        d = h.dut
        # read: request in cycle t, nvdla2csb_valid in cycle t+2
        assert ctx.get(d.csb2nvdla_ready) == 1
        outs = [await h.step(ctx, {"valid": 1, "addr": addr("GLB.S_NVDLA_HW_VERSION") >> 2})]
        outs += [await h.step(ctx) for _ in range(3)]
        assert [o["valid"] for o in outs] == [0, 0, 1, 0]
        assert outs[2]["data"] == REGMAP.lookup("GLB.S_NVDLA_HW_VERSION").reg.reset
        # posted write: no response; non-posted: wr_complete
        outs = [await h.step(ctx, {"valid": 1, "addr": addr("SDP.D_CVT_SCALE") >> 2, "wdat": 5,
                                   "write": 1})]
        outs += [await h.step(ctx) for _ in range(3)]
        assert not any(o["wr_complete"] or o["valid"] for o in outs)
        await h.csb_write(ctx, addr("SDP.D_CVT_SHIFT"), 3, nposted=True)
        assert await h.csb_read(ctx, addr("SDP.D_CVT_SCALE")) == 5
        assert await h.csb_read(ctx, addr("SDP.D_CVT_SHIFT")) == 3
        # unknown unit (0xe000 has no unit on nv_small) and unknown offset read 0
        await h.csb_write(ctx, 0xE000, 0xFFFFFFFF)
        assert await h.csb_read(ctx, 0xE000) == 0
        assert await h.csb_read(ctx, addr("SDP.D_CVT_SCALE") + 0xF00) == 0
        # CDMA flush status reads FLUSH_DONE after reset; every unit has its registers
        assert await h.csb_read(ctx, addr("CDMA.S_CBUF_FLUSH_STATUS")) == 1
        await h.csb_write(ctx, addr("CACC.D_DATAOUT_ADDR"), 0x80001000)
        assert await h.csb_read(ctx, addr("CACC.D_DATAOUT_ADDR")) == 0x80001000
        cfgrom = REGMAP.unit("CFGROM").registers[0]
        assert await h.csb_read(ctx, cfgrom.offset) == cfgrom.reset
        assert await h.csb_read(ctx, addr("MCIF.STATUS")) & (1 << 8)   # idle

    run(bench)


def test_glb_interrupt_set_mask_clear():
    async def bench(ctx, h):
        st, mask, setr = addr("GLB.S_INTR_STATUS"), addr("GLB.S_INTR_MASK"), addr("GLB.S_INTR_SET")
        assert await h.csb_read(ctx, st) == 0
        assert not (await h.step(ctx))["intr"]
        await h.csb_write(ctx, setr, 1 << 2)                 # CDP_DONE_SET0
        for _ in range(3):
            o = await h.step(ctx)
        assert o["intr"]
        assert await h.csb_read(ctx, st) == 1 << 2
        await h.csb_write(ctx, mask, 1 << 2)                 # masked: status kept, no interrupt
        for _ in range(3):
            o = await h.step(ctx)
        assert not o["intr"]
        assert await h.csb_read(ctx, st) == 1 << 2
        await h.csb_write(ctx, mask, 0)
        await h.csb_write(ctx, st, 1 << 2)                   # write 1 to clear
        for _ in range(3):
            o = await h.step(ctx)
        assert not o["intr"]
        assert await h.csb_read(ctx, st) == 0

    run(bench)
