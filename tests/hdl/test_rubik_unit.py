# amaranth: UnusedElaboratable=no
# (test_refuses_... constructs Rubik objects that raise.)
"""hdl.rubik.Rubik, the unit alone, against the RUBIK model (verif/model/rubik.py) as the
reference: the random layers of verif/gen/rubik.py (contract, split, merge; int8, int16, fp16;
widths past a 32-pixel block; partial channel groups), each from and to a random memory (MC or
CV SRAM), programmed through the register bus into alternating register groups, served by two
behavioural memories with random request stalls, response delays and gaps; after each layer's
``done_grp`` both memories equal the model's (the DUT's memories and the model's are separate).
Geometries: nv_large's 256-bit beats with RUBIK (bursts of 1 and 4 beats) and nv_full's 512-bit
beats; plus the plain formulas of the transposer and the loop-nest walker."""
import random
import re

import pytest
from amaranth.sim import Simulator
from streams import dma_memory_benches, reg_write

from hdl.config import NV_FULL, NV_LARGE, NV_SMALL
from hdl.dma.nest import LOOPS, NestWalker
from hdl.regmap import REGMAP
from hdl.rubik import Rubik
from hdl.rubik.transpose import Transposer
from verif.gen.rubik import generate
from verif.mem import SparseMemory
from verif.model import Nvdla

UNIT = REGMAP.unit("RBK")
MC, CV = 1, 0
NV_LARGE_RBK = NV_LARGE.derive(name="nv_large_rbk", rubik=True, rubik_contract=True, rubik_reshape=True)
GEOMS = {
    "nv_large_rbk": NV_LARGE_RBK,
    "nv_large_rbk_burst4": NV_LARGE_RBK.derive(name="nv_large_rbk_burst4", primary_memif_max_burst=4),
    "nv_full": NV_FULL,
}


def _images(prog) -> list[tuple[int, bytes]]:
    """The (base, bytes) memory loads of a generated program's trace."""
    out = []
    for line in prog.writer.lines:
        mo = re.match(r'mem_load\(\w+, (0x[0-9a-f]+), "([^"]+)"\);', str(line))
        if mo:
            out.append((int(mo.group(1), 16), prog.writer.images[mo.group(2)]))
    return out


def run_rubik(cfg, seed: int, p_ready: float = 0.7, max_latency: int = 12):
    rng = random.Random(seed)
    dut = Rubik(cfg)
    aw = cfg.mem_address_width
    dut_mem = {MC: SparseMemory(aw), CV: SparseMemory(aw)}
    model = Nvdla(cfg, mem=SparseMemory(aw), cv_mem=SparseMemory(aw))
    model_mem = {MC: model.mem, CV: model.cv_mem}
    serve = {0: dut_mem[MC], 1: dut_mem[CV]}      # by the request's cv bit (1 = CV SRAM)
    prog = generate(seed, cfg)
    for base, data in _images(prog):
        for mem in (*dut_mem.values(), *model_mem.values()):
            mem.write(base, data)
    log, fails = [], []
    R = "NVDLA_RBK."

    async def bench(ctx):
        bus = dut.csb_rbk

        async def both(reg, value):
            await reg_write(ctx, bus, UNIT, reg, value)
            model.write(R + reg + "_0", value)

        for li, layer in enumerate(prog.layers):
            g = li % 2
            rams = {"D_DAIN_RAM_TYPE": rng.choice((MC, CV)), "D_DAOUT_RAM_TYPE": rng.choice((MC, CV))}
            await both("S_POINTER", g)
            for unit, reg, value in layer.writes:
                assert unit == "RBK"
                await both(reg, rams.get(reg, value))
            await both("D_OP_ENABLE", 1)
            for _ in range(400_000):
                done = ctx.get(dut.done_grp)
                await ctx.tick()
                if done:
                    break
            else:
                fails.append(f"layer {li} ({layer.desc}): no done_grp in 400000 cycles")
                return
            if done != 1 << g:
                fails.append(f"layer {li}: done_grp {done:#b}, expected group {g}")
            dst = rams["D_DAOUT_RAM_TYPE"]
            for base, n in layer.out:
                got, want = dut_mem[dst].read_bytes(base, n), model_mem[dst].read_bytes(base, n)
                if not any(want):
                    fails.append(f"layer {li} ({layer.desc}): the model wrote only zeros (a check "
                                 "that cannot fail)")
                if got != want:
                    i = next(i for i in range(n) if got[i] != want[i])
                    fails.append(f"layer {li} ({layer.desc}): byte {i} of {base:#x} is "
                                 f"{got[i]:#04x}, model {want[i]:#04x}")
            for m in (MC, CV):       # nothing written to the other memory (or elsewhere)
                if m != dst and dut_mem[m].read_bytes(layer.out[0][0], layer.out[0][1]) != \
                        model_mem[m].read_bytes(layer.out[0][0], layer.out[0][1]):
                    fails.append(f"layer {li}: the other memory's output region differs")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for tb in dma_memory_benches(dut.rbk_rd, dut.rbk_wr, cfg.axi_data_bytes, serve, rng, log,
                                 p_ready=p_ready, max_latency=max_latency,
                                 p_gap=0.2 if max_latency else 0.0):
        sim.add_testbench(tb, background=True)
    sim.add_testbench(bench)
    sim.run()
    assert not log, log[:5]
    assert not fails, "\n".join(fails[:10])


@pytest.mark.parametrize("geom", list(GEOMS))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_rubik_against_the_model(geom, seed):
    run_rubik(GEOMS[geom], seed)


def test_rubik_memory_without_stalls():
    run_rubik(NV_FULL, 11, p_ready=1.0)


@pytest.mark.parametrize("seed", [7, 9, 10])
def test_rubik_memory_without_latency(seed):
    """Write responses the cycle after the last beat: a split/merge layer completes a few
    cycles after its last atom, while its transposer still steps through the last block's
    dropped atoms; the next layer starts then (it hung, waiting for them, until 2026-11-28)."""
    run_rubik(NV_LARGE_RBK, seed, p_ready=1.0, max_latency=0)


@pytest.mark.parametrize("atom_bytes", [32, 8])
@pytest.mark.parametrize("wide", [0, 1])
def test_transposer_blocks(atom_bytes, wide):
    """Blocks of A atoms in, each block's transpose out during the next block (plain formula:
    output atom k of block n, element r = element k of input atom r of block n)."""
    rng = random.Random(atom_bytes * 2 + wide)
    dut = Transposer(atom_bytes)
    b = 2 if wide else 1
    A = atom_bytes // b
    blocks = [[rng.randbytes(atom_bytes) for _ in range(A)] for _ in range(5)]
    outs = []

    async def bench(ctx):
        ctx.set(dut.wide, wide)
        ctx.set(dut.clear, 1)
        await ctx.tick()
        ctx.set(dut.clear, 0)
        for blk in blocks + [[bytes(atom_bytes)] * A]:
            for atom in blk:
                while rng.random() < 0.3:              # idle cycles change nothing
                    ctx.set(dut.step, 0)
                    await ctx.tick()
                ctx.set(dut.i, int.from_bytes(atom, "little"))
                ctx.set(dut.step, 1)
                outs.append(ctx.get(dut.o).to_bytes(atom_bytes, "little"))
                await ctx.tick()
            ctx.set(dut.step, 0)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    for n, blk in enumerate(blocks):
        got = outs[(n + 1) * A:(n + 2) * A]
        for k in range(A):
            want = b"".join(blk[r][k * b:(k + 1) * b] for r in range(A))
            assert got[k] == want, f"block {n} atom {k}: {got[k].hex()} != {want.hex()}"


@pytest.mark.parametrize("beat_bytes,max_burst", [(32, 1), (64, 4)])
def test_nest_walker_atoms(beat_bytes, max_burst):
    """Every atom address of random nests (plain formula: base + sum(i_k * stride_k) + i*32, the
    innermost loop's count changed in the outermost loop's last iteration, the line's length in
    the last iteration of the loop outside the innermost), in order, as runs that never cross a
    burst window."""
    rng = random.Random(beat_bytes)
    aw = 40
    dut = NestWalker(addr_width=aw, atom_bytes=32, atom_elems=1, beat_bytes=beat_bytes,
                     max_burst=max_burst)
    win = beat_bytes * max_burst
    cases = []
    for n_case in range(8):
        counts = [rng.randint(0, 2) for _ in range(LOOPS)]
        strides = [32 * rng.randint(0, 300) for _ in range(LOOPS)]
        last, line = rng.randint(0, 3), rng.choice((0, 0, 3, 17))
        last_line = line if n_case % 2 else rng.choice((0, 2, 7, 20))
        base = 32 * rng.randint(0, 1 << 20)
        want = []

        def walk(k, addr, outer_last, chunk_last):
            if k == LOOPS:
                n_line = last_line if chunk_last else line
                want.extend((addr + 32 * i) % (1 << aw) for i in range(n_line + 1))
                return
            n = (last if outer_last else counts[k]) if k == LOOPS - 1 else counts[k]
            for i in range(n + 1):
                walk(k + 1, addr + i * strides[k], outer_last or (k == 0 and i == counts[0]),
                     chunk_last or (k == LOOPS - 2 and i == n))
        walk(0, base, False, False)
        cases.append((base, counts, strides, last, line, last_line, want))

    async def bench(ctx):
        for base, counts, strides, last, line, last_line, want in cases:
            ctx.set(dut.cube.base, base)
            for k in range(LOOPS):
                ctx.set(dut.nest.loops[k].count, counts[k])
                ctx.set(dut.nest.loops[k].stride, strides[k])
            ctx.set(dut.nest.last_count, last)
            ctx.set(dut.nest.line, line)
            ctx.set(dut.nest.last_line, last_line)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            got, lasts = [], []
            while True:
                ready = rng.random() < 0.7
                ctx.set(dut.runs.ready, ready)
                await ctx.delay(1e-9)
                if ctx.get(dut.runs.valid) and ready:
                    a, c, lst = (ctx.get(dut.runs.payload.addr), ctx.get(dut.runs.payload.count),
                                 ctx.get(dut.runs.payload.last))
                    assert a // win == (a + 32 * c - 1) // win, f"run {a:#x}+{c} crosses a window"
                    got += [a + 32 * i for i in range(c)]
                    lasts.append(lst)
                    if lst:
                        await ctx.tick()
                        break
                await ctx.tick()
            assert got == want
            assert lasts[-1] and not any(lasts[:-1])
            assert not ctx.get(dut.busy)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_refuses_configurations_without_rubik_or_with_narrow_beats():
    with pytest.raises(ValueError, match="no RUBIK"):
        Rubik(NV_LARGE)
    with pytest.raises(ValueError, match="narrower"):
        Rubik(NV_SMALL.derive(name="s", rubik=True, rubik_contract=True, rubik_reshape=True))
