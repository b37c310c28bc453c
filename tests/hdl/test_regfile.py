"""Ping-pong register file (v1_hwarch.rst "Ping-pong synchronization") in Amaranth's simulator."""
from amaranth.sim import Simulator

from hdl.regfile import STATUS_IDLE, STATUS_PENDING, STATUS_RUNNING, UnitRegFile
from hdl.regmap import REGMAP

SDP = REGMAP.unit("SDP")


def off(name):
    return REGMAP.lookup(f"SDP.{name}").reg.offset >> 2


def run(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-8, if_exists=True)
    sim.add_testbench(bench)
    sim.run()


async def write(ctx, rf, name, value):
    ctx.set(rf.bus.addr, off(name))
    ctx.set(rf.bus.wdata, value)
    ctx.set(rf.bus.we, 1)
    await ctx.tick()
    ctx.set(rf.bus.we, 0)


def read(ctx, rf, name):
    ctx.set(rf.bus.addr, off(name))
    return ctx.get(rf.bus.rdata)


def status(ctx, rf):
    v = read(ctx, rf, "S_STATUS")
    return v & 3, (v >> 16) & 3


def test_reset_values_and_readback():
    rf = UnitRegFile(SDP)

    async def bench(ctx):
        for r in SDP.registers:
            if r.name in ("S_STATUS", "S_POINTER", "D_OP_ENABLE"):
                continue
            f_r = sum(f.mask for f in r.fields if f.access in ("r", "wo", "wto"))
            assert read(ctx, rf, r.name) == r.reset & ~f_r, r.name
        await write(ctx, rf, "D_CVT_SCALE", 0xFFFF_1234)
        assert read(ctx, rf, "D_CVT_SCALE") == 0x1234          # only the field's bits stored
        ctx.set(rf.bus.addr, 0x3FF)                             # no register there
        assert ctx.get(rf.bus.rdata) == 0

    run(rf, bench)


def test_pingpong_groups():
    rf = UnitRegFile(SDP)

    async def bench(ctx):
        # program group 0
        await write(ctx, rf, "D_DATA_CUBE_WIDTH", 7)
        # program group 1
        await write(ctx, rf, "S_POINTER", 1)
        assert read(ctx, rf, "S_POINTER") == 1                  # producer 1, consumer 0
        await write(ctx, rf, "D_DATA_CUBE_WIDTH", 100)
        assert read(ctx, rf, "D_DATA_CUBE_WIDTH") == 100
        await write(ctx, rf, "S_POINTER", 0)
        assert read(ctx, rf, "D_DATA_CUBE_WIDTH") == 7
        # hardware sees the consumer group (0)
        assert ctx.get(rf.cfg.d_data_cube_width.width) == 7
        assert ctx.get(rf.op_en) == 0
        assert status(ctx, rf) == (STATUS_IDLE, STATUS_IDLE)

        await write(ctx, rf, "D_OP_ENABLE", 1)                  # arm group 0
        await write(ctx, rf, "S_POINTER", 1)
        await write(ctx, rf, "D_OP_ENABLE", 1)                  # arm group 1
        assert read(ctx, rf, "D_OP_ENABLE") == 1
        assert ctx.get(rf.op_en) == 1
        assert status(ctx, rf) == (STATUS_RUNNING, STATUS_PENDING)

        # hardware finishes group 0
        ctx.set(rf.done, 1)
        assert ctx.get(rf.done_grp) == 0b01
        await ctx.tick()
        ctx.set(rf.done, 0)
        assert ctx.get(rf.done_grp) == 0
        assert ctx.get(rf.consumer) == 1
        assert read(ctx, rf, "S_POINTER") == (1 << 16) | 1
        assert status(ctx, rf) == (STATUS_IDLE, STATUS_RUNNING)
        assert ctx.get(rf.op_en) == 1
        assert ctx.get(rf.cfg.d_data_cube_width.width) == 100   # now group 1

        # hardware finishes group 1
        ctx.set(rf.done, 1)
        assert ctx.get(rf.done_grp) == 0b10
        await ctx.tick()
        ctx.set(rf.done, 0)
        assert status(ctx, rf) == (STATUS_IDLE, STATUS_IDLE)
        assert ctx.get(rf.op_en) == 0
        assert ctx.get(rf.consumer) == 0
        assert read(ctx, rf, "D_OP_ENABLE") == 0

    run(rf, bench)


def test_hw_status_fields():
    rf = UnitRegFile(SDP)

    async def bench(ctx):
        ctx.set(rf.hw.d_perf_wdma_write_stall.wdma_stall, 0x1234)
        assert read(ctx, rf, "D_PERF_WDMA_WRITE_STALL") == 0x1234
        await write(ctx, rf, "D_PERF_WDMA_WRITE_STALL", 0)      # read-only: write ignored
        assert read(ctx, rf, "D_PERF_WDMA_WRITE_STALL") == 0x1234

    run(rf, bench)


def test_cfgrom_read_only():
    unit = REGMAP.unit("CFGROM")
    rf = UnitRegFile(unit, read_only=True)
    reg = unit.registers[0]

    async def bench(ctx):
        ctx.set(rf.bus.addr, reg.offset >> 2)
        assert ctx.get(rf.bus.rdata) == reg.reset
        ctx.set(rf.bus.wdata, 0)
        ctx.set(rf.bus.we, 1)
        await ctx.delay(1e-8)           # CFGROM is purely combinational (no clock domain)
        ctx.set(rf.bus.we, 0)
        assert ctx.get(rf.bus.rdata) == reg.reset

    run(rf, bench)


def test_typed_fields():
    """Typed register binding: signed fields read back sign-extended through the cfg view, enum
    fields are the register map's lib.enum classes (RDL enum names and values)."""
    from amaranth.hdl import Shape
    from amaranth.lib import enum

    from hdl.regmap.types import field_enum
    rf = UnitRegFile(SDP)
    off_view = rf.cfg.d_cvt_offset.cvt_offset
    assert Shape.cast(off_view.shape()) == Shape(32, signed=True)
    assert Shape.cast(rf.cfg.d_cvt_scale.cvt_scale.shape()) == Shape(16, signed=True)
    assert Shape.cast(rf.cfg.d_cvt_shift.cvt_shift.shape()) == Shape(6, signed=False)
    flying = field_enum("SDP", "D_FEATURE_MODE_CFG", "FLYING_MODE")
    assert issubclass(flying, enum.Enum)
    assert {m.name: m.value for m in flying} == \
        REGMAP.lookup("SDP.D_FEATURE_MODE_CFG").reg.field("FLYING_MODE").enums
    assert rf.cfg.d_feature_mode_cfg.flying_mode.shape() is flying

    async def bench(ctx):
        await write(ctx, rf, "D_CVT_OFFSET", 0xFFFF_FF80)          # -128
        await write(ctx, rf, "D_CVT_SCALE", 0x8001)                # -32767
        await write(ctx, rf, "D_FEATURE_MODE_CFG", 1)              # FLYING_MODE = ON
        assert ctx.get(rf.cfg.d_cvt_offset.cvt_offset) == -128
        assert ctx.get(rf.cfg.d_cvt_scale.cvt_scale) == -32767
        assert ctx.get(rf.cfg.d_feature_mode_cfg.flying_mode) == flying.ON

    run(rf, bench)


def test_signed_table_names_real_fields():
    """Every field the signedness table names exists and is marked signed; nothing else is."""
    from hdl.regmap.signed_fields import SIGNED_FIELDS
    want = {(u, r, f) for u, regs in SIGNED_FIELDS.items() for r, fs in regs.items() for f in fs}
    got = {(ref.unit.name, ref.reg.name, f.name) for ref in REGMAP for f in ref.reg.fields if f.signed}
    assert got == want and len(want) > 50


def test_pingpong_random_writes_and_flips():
    """Random CSB writes (any register, either group, S_POINTER flips) and layer-done pulses,
    some in the same cycle as a write: every cycle the ``cfg`` view equals the consumer group's
    values and a read of a D_ register returns the producer group's (plain-Python reference of
    the two groups and the pointers; the register groups load under one enable, issue 12)."""
    import random

    rng = random.Random(1212)
    rf = UnitRegFile(SDP)
    dregs = [r for r in SDP.registers if r.double_buffered and r.write_mask
             and r.name not in ("D_OP_ENABLE",) and not any(f.access in ("wo", "wto") for f in r.fields)]
    assert len(dregs) > 20
    groups = [{r.name: r.reset & r.write_mask for r in dregs} for _ in range(2)]
    producer = consumer = 0
    armed = [0, 0]

    async def bench(ctx):
        nonlocal producer, consumer
        for cycle in range(3000):
            done = armed[consumer] and rng.random() < 0.2
            kind = rng.random()
            ctx.set(rf.done, done)
            ctx.set(rf.bus.we, 0)
            if kind < 0.5:
                r = rng.choice(dregs)
                v = rng.getrandbits(32)
                ctx.set(rf.bus.addr, r.offset >> 2)
                ctx.set(rf.bus.wdata, v)
                ctx.set(rf.bus.we, 1)
                groups[producer][r.name] = v & r.write_mask
            elif kind < 0.6:
                producer = rng.getrandbits(1)
                ctx.set(rf.bus.addr, off("S_POINTER"))
                ctx.set(rf.bus.wdata, producer)
                ctx.set(rf.bus.we, 1)
            elif kind < 0.7:
                ctx.set(rf.bus.addr, off("D_OP_ENABLE"))
                ctx.set(rf.bus.wdata, 1)
                ctx.set(rf.bus.we, 1)
                armed[producer] = 1
            if done:
                armed[consumer] = 0
                consumer ^= 1
            await ctx.tick()
            ctx.set(rf.bus.we, 0)
            ctx.set(rf.done, 0)
            assert ctx.get(rf.consumer) == consumer, cycle
            for r in rng.sample(dregs, 4):
                got = ctx.get(rf.cfg[r.name.lower()].as_value())
                assert got == groups[consumer][r.name], (cycle, r.name, hex(got))
                ctx.set(rf.bus.addr, r.offset >> 2)
                rmask = sum(f.mask for f in r.fields if f.access not in ("r", "wo", "wto"))
                assert ctx.get(rf.bus.rdata) & rmask == groups[producer][r.name] & rmask, (cycle, r.name)

    run(rf, bench)


def _v1_write_read(unit_name, reg, value):
    """(CSB read-back, the register's 32-bit cfg view) after writing ``value`` to ``reg`` of
    v1's ``unit_name`` register file."""
    from hdl.regmap import REGMAP_V1
    unit = REGMAP_V1.unit(unit_name)
    rf = UnitRegFile(unit)
    got = {}

    async def bench(ctx):
        ctx.set(rf.bus.addr, REGMAP_V1.lookup(f"{unit_name}.{reg}").reg.offset >> 2)
        ctx.set(rf.bus.wdata, value)
        ctx.set(rf.bus.we, 1)
        await ctx.tick()
        ctx.set(rf.bus.we, 0)
        got["csb"] = ctx.get(rf.bus.rdata)
        got["view"] = ctx.get(getattr(rf.cfg, reg.lower()).as_value())

    run(rf, bench)
    return got["csb"], got["view"]


def test_v1_byte_fields_read_as_bytes():
    # v1 keeps CDMA's address in bits 31:5 (arnvdla.h); the datapath's (v2) view reads the byte
    # address, bits 4:0 zero; CSB reads back what v1 stores
    csb, view = _v1_write_read("CDMA", "D_DAIN_ADDR_LOW_0", 0x1234_567F)
    assert csb == view == 0x1234_5660
    csb, view = _v1_write_read("CACC", "D_LINE_STRIDE", 0xFFFF_FFFF)   # v1 bits 23:5
    assert csb == view == 0x00FF_FFE0
    csb, view = _v1_write_read("CSC", "D_WEIGHT_BYTES", 0x1234_56FF)  # v1 bits 31:7
    assert csb == view == 0x1234_5680


def test_v1_narrow_fields_and_resets():
    # v1's CBUF bank fields are 4 bits (16 banks): the v2 5-bit view reads the same value
    csb, view = _v1_write_read("CDMA", "D_BANK", 0x001F_001F)
    assert csb == view == 0x000F_000F
    # v1's SDP D_DP_BS_CFG resets to 0 (v2: bypass bits set)
    from hdl.regmap import REGMAP_V1
    reg = REGMAP_V1.lookup("SDP.D_DP_BS_CFG").reg
    assert reg.reset == 0 and REGMAP.lookup("SDP.D_DP_BS_CFG").reg.reset != 0
    rf = UnitRegFile(REGMAP_V1.unit("SDP"))
    got = {}

    async def bench(ctx):
        ctx.set(rf.bus.addr, reg.offset >> 2)
        got["csb"] = ctx.get(rf.bus.rdata)
        got["bypass"] = ctx.get(rf.cfg.d_dp_bs_cfg.bs_bypass).value

    run(rf, bench)
    assert got == {"csb": 0, "bypass": 0}


def test_view_unit_refuses_a_field_v2_reads_otherwise():
    from dataclasses import replace

    import pytest

    from hdl.regfile import view_unit
    from hdl.regmap import REGMAP_V1
    v1 = REGMAP_V1.unit("CDMA")
    assert view_unit(v1) is REGMAP.unit("CDMA")
    assert view_unit(SDP) is SDP
    # a field moved up without keeping v2's msb would read a scaled value: refused
    regs = []
    for r in v1.registers:
        if r.name == "D_BANK":
            r = replace(r, fields=[replace(f, lsb=1) if f.name == "DATA_BANK" else f
                                   for f in r.fields])
        regs.append(r)
    with pytest.raises(ValueError, match="D_BANK.DATA_BANK"):
        view_unit(replace(v1, registers=regs))
