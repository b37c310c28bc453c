"""hdl.dma.batch.BatchWalker: N cubes ``batch_stride`` apart walked (surface, line, atom, batch)
one atom per run, against the plain formula, under random consumer stalls; with one batch the
CubeWalker's maximal runs (the same walker the ordinary layers use). Two geometries: nv_small's
8-byte atoms on 8-byte beats and nv_full's 32-byte atoms on 64-byte beats."""
import random

import pytest
from streams import stream_get
from test_dma_walker import ADDR_WIDTH, check_runs, random_cube, run_sim, start_cube

from hdl.dma.batch import BatchWalker


def batch_atoms(cube, nb, stride, atom_bytes, atom_elems):
    """Plain-Python addresses of the N = ``nb`` cubes' atoms, batch fastest."""
    out = []
    for s in range(cube["channel"] // atom_elems + 1):
        for h in range(cube["height"] + 1):
            for w in range(cube["width"] + 1):
                for b in range(nb):
                    out.append((cube["base"] + b * stride + s * cube["surface_stride"]
                                + h * cube["line_stride"] + w * atom_bytes) % (1 << ADDR_WIDTH))
    return out


@pytest.mark.parametrize("atom_bytes,atom_elems,beat_bytes,max_burst",
                         [(8, 8, 8, 4), (32, 32, 64, 4)])
def test_batch_walker(atom_bytes, atom_elems, beat_bytes, max_burst):
    rng = random.Random(atom_bytes)
    dut = BatchWalker(addr_width=ADDR_WIDTH, atom_bytes=atom_bytes, atom_elems=atom_elems,
                      beat_bytes=beat_bytes, max_burst=max_burst)
    jobs = []
    for k in range(16):
        cube = random_cube(rng, atom_bytes, atom_elems)
        cube["width"] = rng.randrange(0, 6)
        nb = [1, 2, 32][k % 3] if k < 6 else rng.randrange(1, 33)
        size = (cube["channel"] // atom_elems + 1) * cube["surface_stride"]
        stride = (size + rng.randrange(0, 3) * atom_bytes) if k % 2 else rng.randrange(1, 64) * atom_bytes
        jobs.append((cube, nb, stride))

    async def bench(ctx):
        for cube, nb, stride in jobs:
            ctx.set(dut.batches, nb - 1)
            ctx.set(dut.batch_stride, stride)
            await start_cube(ctx, dut, cube)
            ctx.set(dut.batches, rng.randrange(32))      # sampled at start only
            want = batch_atoms(cube, nb, stride, atom_bytes, atom_elems)
            if nb == 1:
                # the CubeWalker's maximal runs
                runs = []
                while not runs or not runs[-1]["last"]:
                    r, = await stream_get(ctx, dut.runs, 1, rng=rng)
                    runs.append({"addr": r.addr, "count": r.count, "last": r.last})
                check_runs(runs, cube, atom_bytes, atom_elems, beat_bytes, max_burst)
            else:
                runs = await stream_get(ctx, dut.runs, len(want), rng=rng)
                assert [r.addr for r in runs] == want
                assert all(r.count == 1 for r in runs)
                assert [r.last for r in runs] == [0] * (len(want) - 1) + [1]
            for _ in range(2):
                await ctx.tick()
            assert not ctx.get(dut.busy) and not ctx.get(dut.runs.valid)

    run_sim(dut, bench, stable=[("runs", dut.runs)])
