"""CSB slave timing/decoding and GLB interrupts, through NvdlaCore (Amaranth simulator, driven
by the amaranth trace engine's CSB driver)."""
from hdl.config import NV_SMALL
from hdl.regmap import REGMAP
from verif.trace.amaranth_engine import simulate


def addr(name):
    return REGMAP.lookup(name).addr


def run(bench):
    async def tb(eng):
        await bench(eng.ctx, eng)
    simulate(NV_SMALL, tb)


def test_csb_timing_and_decode():
    async def bench(ctx, h):
        d = h.dut
        # read: request in cycle t, nvdla2csb_valid in cycle t+2
        assert ctx.get(d.csb2nvdla_ready) == 1
        outs = [await h.csb_step( {"valid": 1, "addr": addr("GLB.S_NVDLA_HW_VERSION") >> 2})]
        outs += [await h.csb_step() for _ in range(3)]
        assert [o["valid"] for o in outs] == [0, 0, 1, 0]
        assert outs[2]["data"] == REGMAP.lookup("GLB.S_NVDLA_HW_VERSION").reg.reset
        # posted write: no response; non-posted: wr_complete
        outs = [await h.csb_step( {"valid": 1, "addr": addr("SDP.D_CVT_SCALE") >> 2, "wdat": 5,
                                   "write": 1})]
        outs += [await h.csb_step() for _ in range(3)]
        assert not any(o["wr_complete"] or o["valid"] for o in outs)
        await h.reg_write(addr("SDP.D_CVT_SHIFT"), 3, nposted=True)
        assert await h.reg_read(addr("SDP.D_CVT_SCALE")) == 5
        assert await h.reg_read(addr("SDP.D_CVT_SHIFT")) == 3
        # unknown unit (0xe000 has no unit on nv_small) and unknown offset read 0
        await h.reg_write(0xE000, 0xFFFFFFFF)
        assert await h.reg_read(0xE000) == 0
        assert await h.reg_read(addr("SDP.D_CVT_SCALE") + 0xF00) == 0
        # CDMA flush status reads FLUSH_DONE after reset; every unit has its registers
        assert await h.reg_read(addr("CDMA.S_CBUF_FLUSH_STATUS")) == 1
        await h.reg_write(addr("CACC.D_DATAOUT_ADDR"), 0x80001000)
        assert await h.reg_read(addr("CACC.D_DATAOUT_ADDR")) == 0x80001000
        cfgrom = REGMAP.unit("CFGROM").registers[0]
        assert await h.reg_read(cfgrom.offset) == cfgrom.reset
        assert await h.reg_read(addr("MCIF.STATUS")) & (1 << 8)   # idle

    run(bench)


def test_glb_interrupt_set_mask_clear():
    async def bench(ctx, h):
        st, mask, setr = addr("GLB.S_INTR_STATUS"), addr("GLB.S_INTR_MASK"), addr("GLB.S_INTR_SET")
        assert await h.reg_read(st) == 0
        assert not (await h.csb_step())["intr"]
        await h.reg_write(setr, 1 << 2)                 # CDP_DONE_SET0
        for _ in range(3):
            o = await h.csb_step()
        assert o["intr"]
        assert await h.reg_read(st) == 1 << 2
        await h.reg_write(mask, 1 << 2)                 # masked: status kept, no interrupt
        for _ in range(3):
            o = await h.csb_step()
        assert not o["intr"]
        assert await h.reg_read(st) == 1 << 2
        await h.reg_write(mask, 0)
        await h.reg_write(st, 1 << 2)                   # write 1 to clear
        for _ in range(3):
            o = await h.csb_step()
        assert not o["intr"]
        assert await h.reg_read(st) == 0

    run(bench)
