# amaranth: UnusedElaboratable=no
# (test_refuses_... constructs Bdma objects that raise or are never elaborated.)
"""hdl.bdma.Bdma, the unit alone, against the BDMA model (verif/model/bdma.py) as the reference:
random groups of random operations (line size, repeats, strides, both memories, 64-bit
addresses) programmed through the register bus, served by two behavioural memories (MC and CV
SRAM, chosen by each request's ``cv``) with random request stalls, response delays and gaps;
after each group's ``done_grp`` pulse both memories equal the model's; STATUS.FREE_SLOT after
every CFG_OP.EN, IDLE and GRPn_BUSY as the model reads them; a launch without operations never
completes. Geometries: nv_large's 256-bit beats (with BDMA, bursts of 1 and 4 beats), nv_full's
512-bit beats, and a configuration without the secondary memory (RAM type CV reaches MC)."""
import random

import pytest
from amaranth.sim import Simulator
from streams import dma_memory_benches, reg_read, reg_write

from hdl.bdma import Bdma
from hdl.config import NV_FULL, NV_LARGE
from hdl.regmap import REGMAP
from verif.mem import SparseMemory
from verif.model import Nvdla

UNIT = REGMAP.unit("BDMA")
MC, CV = 1, 0

NV_LARGE_BDMA = NV_LARGE.derive(name="nv_large_bdma", bdma=True)
GEOMS = {
    "nv_large_bdma": NV_LARGE_BDMA,
    "nv_large_bdma_burst4": NV_LARGE_BDMA.derive(name="nv_large_bdma_burst4", primary_memif_max_burst=4),
    "nv_full": NV_FULL,
    "no_cvif": NV_LARGE_BDMA.derive(name="no_cvif", secondary_memif=False, secondary_memif_width=None,
                                    secondary_memif_latency=None, secondary_memif_max_burst=None),
}


def random_op(rng, k: int, wide: bool) -> dict:
    size, lines, surfs = rng.randint(0, 15), rng.randint(0, 7), rng.randint(0, 3)
    lb = (size + 1) * 32
    sline = rng.choice((lb, lb + 32, 32 * rng.randint(0, size + 1), 0))
    dline = lb + 32 * rng.randint(0, 2)
    ssurf = sline * (lines + 1) + 32 * rng.randint(0, 2) if sline else rng.choice((0, lb))
    dsurf = dline * (lines + 1) + 32 * rng.randint(0, 2)
    high = (1 << 32) if wide and rng.random() < 0.3 else 0
    return dict(src=high + 0x1000_0000 + 0x10_0000 * k + 32 * rng.randint(0, 64),
                dst=high + 0x4000_0000 + 0x10_0000 * k + 32 * rng.randint(0, 64),
                size=size, lines=lines, surfs=surfs, sline=sline, dline=dline, ssurf=ssurf,
                dsurf=dsurf, src_ram=rng.choice((MC, CV)), dst_ram=rng.choice((MC, CV)))


def op_writes(op: dict, rng) -> list[tuple[str, int]]:
    """The register writes of one operation (random bits 4:0 in addresses and strides: the
    hardware drops them), ending with CFG_OP.EN."""
    lo = (lambda: rng.getrandbits(5)) if rng.random() < 0.5 else (lambda: 0)
    return [("CFG_SRC_ADDR_LOW", (op["src"] & 0xFFFFFFFF) | lo()), ("CFG_SRC_ADDR_HIGH", op["src"] >> 32),
            ("CFG_DST_ADDR_LOW", (op["dst"] & 0xFFFFFFFF) | lo()), ("CFG_DST_ADDR_HIGH", op["dst"] >> 32),
            ("CFG_LINE", op["size"]), ("CFG_LINE_REPEAT", op["lines"]),
            ("CFG_SURF_REPEAT", op["surfs"]), ("CFG_SRC_LINE", op["sline"] | lo()),
            ("CFG_DST_LINE", op["dline"] | lo()), ("CFG_SRC_SURF", op["ssurf"] | lo()),
            ("CFG_DST_SURF", op["dsurf"] | lo()), ("CFG_CMD", op["src_ram"] | (op["dst_ram"] << 1)),
            ("CFG_OP", 1)]


def run_bdma(cfg, seed: int, groups: int = 4, max_ops: int = 5, p_ready: float = 0.7):
    rng = random.Random(seed)
    dut = Bdma(cfg)
    wide = cfg.mem_address_width > 32
    aw = cfg.mem_address_width
    # the DUT's memories and the model's own (never shared: the comparison must be able to fail);
    # without CVIF, RAM type CV reaches the primary memory on both sides
    dut_mc = SparseMemory(aw)
    dut_cv = SparseMemory(aw) if cfg.secondary_memif else dut_mc
    model = Nvdla(cfg, mem=SparseMemory(aw), cv_mem=SparseMemory(aw) if cfg.secondary_memif else None)
    model_mem = {MC: model.mem, CV: model.cv_mem or model.mem}
    dut_mem = {MC: dut_mc, CV: dut_cv}
    serve = {0: dut_mc, 1: dut_cv}      # by the request's cv bit (1 = CV SRAM)
    log, fails = [], []
    plan = [(rng.randint(0, 1), [random_op(rng, 8 * gi + k, wide) for k in range(rng.randint(1, max_ops))])
            for gi in range(groups)]
    B = "NVDLA_BDMA."

    async def bench(ctx):
        bus = dut.csb_bdma

        async def write(reg, value):
            await reg_write(ctx, bus, UNIT, reg, value)

        async def read(reg):
            return await reg_read(ctx, bus, UNIT, reg)

        await write("CFG_STATUS", 1)          # STALL_COUNT_EN
        model.write(B + "CFG_STATUS_0", 1)
        stalls = []
        for gi, (g, ops) in enumerate(plan):
            for op in ops:
                lb = (op["size"] + 1) * 32
                n = op["ssurf"] * op["surfs"] + op["sline"] * op["lines"] + lb
                data = rng.randbytes(n)
                dut_mem[op["src_ram"]].write(op["src"], data)
                model_mem[op["src_ram"]].write(op["src"], data)
                for reg, v in op_writes(op, rng):
                    await write(reg, v)
                    model.write(B + reg + "_0", v)
                    got, want = await read("STATUS"), model.read(B + "STATUS_0")
                    if (got & 0xFF) != (want & 0xFF):
                        fails.append(f"group {gi}: FREE_SLOT {got & 0xFF} != model {want & 0xFF}")
            await write(f"CFG_LAUNCH{g}", 1)
            model.write(B + f"CFG_LAUNCH{g}_0", 1)
            st = await read("STATUS")
            if not (st >> (9 + g)) & 1 or (st >> 8) & 1:
                fails.append(f"group {gi}: STATUS {st:#x} right after the launch of group {g}")
            for cycle in range(200_000):
                done = ctx.get(dut.done_grp)
                await ctx.tick()
                if done:
                    break
            else:
                fails.append(f"group {gi}: no done_grp in 200000 cycles")
                return
            if done != 1 << g:
                fails.append(f"group {gi}: done_grp {done:#b}, expected group {g}")
            await ctx.tick().repeat(2)
            stalls.append((await read(f"STATUS_GRP{g}_READ_STALL"), await read(f"STATUS_GRP{g}_WRITE_STALL")))
            st = await read("STATUS")
            if st != model.read(B + "STATUS_0"):
                fails.append(f"group {gi}: STATUS {st:#x} != model {model.read(B + 'STATUS_0'):#x}")
            for op in ops:
                lb = (op["size"] + 1) * 32
                n = op["dsurf"] * op["surfs"] + op["dline"] * op["lines"] + lb
                got = dut_mem[op["dst_ram"]].read_bytes(op["dst"], n)
                want = model_mem[op["dst_ram"]].read_bytes(op["dst"], n)
                if got != want:
                    i = next(i for i in range(n) if got[i] != want[i])
                    fails.append(f"group {gi} op dst {op['dst']:#x}: byte {i} is {got[i]:#04x}, "
                                 f"model {want[i]:#04x}")
        # memories that stall: both stall counters counted something (they count this design's
        # cycles, so no model value to compare with)
        if p_ready < 1 and not (sum(r for r, _ in stalls) and sum(w for _, w in stalls)):
            fails.append(f"stall counters stayed 0 under a stalling memory: {stalls}")
        if p_ready == 1 and any(r for r, _ in stalls):
            fails.append(f"read stalls counted with a memory that never stalls: {stalls}")
        # a launch without any operation never completes
        await write("CFG_LAUNCH0", 1)
        for _ in range(300):
            if ctx.get(dut.done_grp):
                fails.append("a group of no operation completed")
            await ctx.tick()
        st = await read("STATUS")
        if st & (1 << 9) == 0 or st & (1 << 8):
            fails.append(f"after an empty launch: STATUS {st:#x} (GRP0_BUSY 1, IDLE 0 expected)")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for tb in dma_memory_benches(dut.bdma_rd, dut.bdma_wr, dut.cfg.axi_data_bytes, serve, rng, log,
                                 p_ready=p_ready):
        sim.add_testbench(tb, background=True)
    sim.add_testbench(bench)
    sim.run()
    assert not log, log[:5]
    assert not fails, "\n".join(fails[:10])


@pytest.mark.parametrize("geom", list(GEOMS))
@pytest.mark.parametrize("seed", [1, 2])
def test_bdma_against_the_model(geom, seed):
    run_bdma(GEOMS[geom], seed)


def test_bdma_many_operations_without_stalls():
    """Twelve operations in one group, memories that never stall (FREE_SLOT read back after
    every register write as the queue fills)."""
    run_bdma(NV_FULL, 7, groups=1, max_ops=12, p_ready=1.0)


def test_refuses_configurations_without_bdma_or_with_narrow_beats():
    with pytest.raises(ValueError, match="no BDMA"):
        Bdma(NV_LARGE)
    from hdl.config import NV_SMALL
    with pytest.raises(ValueError, match="narrower"):
        Bdma(NV_SMALL.derive(name="s", bdma=True))
