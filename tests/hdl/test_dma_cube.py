# amaranth: UnusedElaboratable=no
# (test_cube_from_regs_unknown_register builds a register file only to bind from it and fail.)
"""hdl.dma.cube.cube_from_regs on a real SDP_RDMA register file (hdl.regfile.UnitRegFile) programmed
through its CSB-side bus in Amaranth's simulator: base low/high words (a 32-bit address width
drops the high word, a 64-bit one puts it in bits [63:32]), byte strides and minus-one cube sizes
(bits [12:0]) of the consumer register group."""
import random

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from hdl.dma import CUBE_DIM_BITS, cube_from_regs, cube_layout
from hdl.regfile import UnitRegFile
from hdl.regmap import REGMAP

SDP_RDMA = REGMAP.unit("SDP_RDMA")


def bench_top(addr_width):
    """A module holding the SDP_RDMA register file and a signal of its bound source cube."""
    m = Module()
    m.submodules.rf = rf = UnitRegFile(SDP_RDMA)
    cube = Signal(cube_layout(addr_width))
    m.d.comb += cube.eq(cube_from_regs(
        rf.cfg, base="d_src_base_addr", line_stride="d_src_line_stride",
        surface_stride="d_src_surface_stride", width="d_data_cube_width",
        height="d_data_cube_height", channel="d_data_cube_channel", addr_width=addr_width))
    return m, rf, cube


async def write(ctx, rf, name, value):
    """One CSB-side register write (one cycle of ``we``)."""
    ctx.set(rf.bus.addr, REGMAP.lookup(f"SDP_RDMA.{name}").reg.offset >> 2)
    ctx.set(rf.bus.wdata, value)
    ctx.set(rf.bus.we, 1)
    await ctx.tick()
    ctx.set(rf.bus.we, 0)


def random_regs(rng):
    """Random 32-bit values of the registers a source cube is bound from."""
    names = ["D_SRC_BASE_ADDR_LOW", "D_SRC_BASE_ADDR_HIGH", "D_SRC_LINE_STRIDE",
             "D_SRC_SURFACE_STRIDE", "D_DATA_CUBE_WIDTH", "D_DATA_CUBE_HEIGHT",
             "D_DATA_CUBE_CHANNEL"]
    return {n: rng.randrange(1 << 32) for n in names}


def expected_cube(regs, addr_width):
    """The geometry the registers describe: stored bits only (each register's field mask)."""
    stored = {n: v & REGMAP.lookup(f"SDP_RDMA.{n}").reg.write_mask for n, v in regs.items()}
    base = stored["D_SRC_BASE_ADDR_LOW"] | stored["D_SRC_BASE_ADDR_HIGH"] << 32
    dim = (1 << CUBE_DIM_BITS) - 1
    return dict(base=base % (1 << addr_width), line_stride=stored["D_SRC_LINE_STRIDE"],
                surface_stride=stored["D_SRC_SURFACE_STRIDE"],
                width=stored["D_DATA_CUBE_WIDTH"] & dim,
                height=stored["D_DATA_CUBE_HEIGHT"] & dim,
                channel=stored["D_DATA_CUBE_CHANNEL"] & dim)


def as_dict(const):
    return {k: getattr(const, k) for k in ("base", "line_stride", "surface_stride", "width",
                                           "height", "channel")}


@pytest.mark.parametrize("addr_width", [32, 64])
def test_cube_from_regs(addr_width):
    rng = random.Random(addr_width)
    m, rf, cube = bench_top(addr_width)
    fixed = {"D_SRC_BASE_ADDR_LOW": 0x89ab_cde0, "D_SRC_BASE_ADDR_HIGH": 0x1234_5678,
             "D_SRC_LINE_STRIDE": 0x180, "D_SRC_SURFACE_STRIDE": 0xa3_cb40,
             "D_DATA_CUBE_WIDTH": 0xffff_e007, "D_DATA_CUBE_HEIGHT": 0x1fff,
             "D_DATA_CUBE_CHANNEL": 0x2_0029}

    async def bench(ctx):
        # group 0 (producer = consumer = 0 after reset)
        for name, value in fixed.items():
            await write(ctx, rf, name, value)
        got = as_dict(ctx.get(cube))
        assert got == expected_cube(fixed, addr_width)
        # the high word is used exactly when the address is 64 bits wide
        assert got["base"] == (0x1234_5678_89ab_cde0 if addr_width == 64 else 0x89ab_cde0)
        assert (got["width"], got["height"], got["channel"]) == (7, 0x1fff, 0x29)
        assert (got["line_stride"], got["surface_stride"]) == (0x180, 0xa3_cb40)

        # program group 1: the cube shows the consumer group (0) until the consumer flips
        await write(ctx, rf, "S_POINTER", 1)
        for _ in range(5):
            regs = random_regs(rng)
            for name, value in regs.items():
                await write(ctx, rf, name, value)
            assert as_dict(ctx.get(cube)) == expected_cube(fixed, addr_width)
            await write(ctx, rf, "D_OP_ENABLE", 1)
            ctx.set(rf.done, 1)                   # group 0 done: consumer -> 1
            await ctx.tick()
            ctx.set(rf.done, 0)
            assert as_dict(ctx.get(cube)) == expected_cube(regs, addr_width)
            ctx.set(rf.done, 1)                   # group 1 done: consumer -> 0 again
            await ctx.tick()
            ctx.set(rf.done, 0)

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_cube_from_regs_unknown_register():
    rf = UnitRegFile(SDP_RDMA)
    with pytest.raises(AttributeError):
        cube_from_regs(rf.cfg, base="d_dst_base_addr", line_stride="d_src_line_stride",
                       surface_stride="d_src_surface_stride", width="d_data_cube_width",
                       height="d_data_cube_height", channel="d_data_cube_channel",
                       addr_width=32)
