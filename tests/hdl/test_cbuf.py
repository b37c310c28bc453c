"""CBUF (hdl.cbuf.Cbuf, docs/conv.md "CBUF"): random writes through both write ports then reads
through both read ports with random stalls and back-pressure, both ports on the same banks
(conflicts resolved by waiting), read-after-write in the next cycle, full throughput, and the
layout helpers."""
import random

import pytest

from hdl.cbuf import Cbuf, CbufGeometry
from streams import simulate_streams, stream_get, stream_put

BANKS, DEPTH, EB = 4, 8, 2


def _rand_entry(rng):
    return rng.getrandbits(EB * 8)


def _mk_writer(port, items, key, wrote, rng, p_stall):
    async def tb(ctx):
        await stream_put(ctx, port, [{"addr": a, "data": d} for a, d in items], rng=rng,
                         p_stall=p_stall)
        wrote[key] = True
    return tb


def _mk_reader(req, resp, addrs, key, wrote, got, rng, p_stall):
    async def prod(ctx):
        while not all(wrote.values()):
            await ctx.tick()
        await stream_put(ctx, req, [{"addr": a} for a in addrs], rng=rng, p_stall=p_stall)

    async def cons(ctx):
        while not all(wrote.values()):
            await ctx.tick()
        got[key] = [r.data for r in await stream_get(ctx, resp, len(addrs), rng=rng,
                                                      p_stall=p_stall)]
    return [prod, cons]


def _run(seed, same_banks, p_stall, banks=BANKS):
    rng = random.Random(seed)
    g = CbufGeometry(banks, DEPTH, EB)
    dut = Cbuf(banks, DEPTH, EB)
    addrs = list(range(g.entries))
    rng.shuffle(addrs)
    if same_banks:        # both ports on all banks (disjoint addresses): many conflicts
        dat_addrs, wt_addrs = addrs[::2], addrs[1::2]
    else:                 # data banks [0, 2), weight banks [2, 4) as in legal programs
        dat_addrs = [a for a in addrs if a < banks // 2 * DEPTH]
        wt_addrs = [a for a in addrs if a >= banks // 2 * DEPTH]
    mem = {}
    dat_w = [(a, _rand_entry(rng)) for a in dat_addrs]
    wt_w = [(a, _rand_entry(rng)) for a in wt_addrs]
    # rewrite some entries: the last write wins
    dat_w += [(a, _rand_entry(rng)) for a in rng.sample(dat_addrs, 5)]
    wt_w += [(a, _rand_entry(rng)) for a in rng.sample(wt_addrs, 5)]
    for a, d in dat_w + wt_w:
        mem[a] = d
    dat_r = [rng.choice(dat_addrs) for _ in range(60)]
    wt_r = [rng.choice(wt_addrs if not same_banks else addrs) for _ in range(60)]
    got = {"dat": [], "wt": []}
    wrote = {"dat": False, "wt": False}
    producers = [_mk_writer(dut.dat_wr, dat_w, "dat", wrote, rng, p_stall),
                 _mk_writer(dut.wt_wr, wt_w, "wt", wrote, rng, p_stall)]
    dp, dc = _mk_reader(dut.dat_rd_req, dut.dat_rd_resp, dat_r, "dat", wrote, got, rng, p_stall)
    wp, wc = _mk_reader(dut.wt_rd_req, dut.wt_rd_resp, wt_r, "wt", wrote, got, rng, p_stall)
    simulate_streams(dut, producers + [dp, wp], [dc, wc],
                     [("dat_rd_resp", dut.dat_rd_resp), ("wt_rd_resp", dut.wt_rd_resp)])
    assert got["dat"] == [mem[a] for a in dat_r]
    assert got["wt"] == [mem[a] for a in wt_r]


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("same_banks", [False, True])
def test_random_writes_then_reads(seed, same_banks):
    _run(seed, same_banks, p_stall=0.3)


@pytest.mark.parametrize("banks", [6, 16])
@pytest.mark.parametrize("same_banks", [False, True])
def test_bank_groups(banks, same_banks):
    """More banks than one read-mux group (4): 6 (a partial last group) and 16 (4 groups)."""
    _run(11, same_banks, p_stall=0.3, banks=banks)


def test_no_stalls_same_banks():
    _run(5, True, p_stall=0.0)


def test_read_after_write_next_cycle():
    """A read request in the cycle right after the write of that entry returns the new data;
    interleaved writes and reads of one port pair."""
    rng = random.Random(7)
    dut = Cbuf(BANKS, DEPTH, EB)
    ops = [(rng.randrange(2 * DEPTH), _rand_entry(rng)) for _ in range(40)]
    got = []

    async def tb(ctx):
        for a, d in ops:
            ctx.set(dut.dat_wr.valid, 1)
            ctx.set(dut.dat_wr.payload, {"addr": a, "data": d})
            await ctx.tick().until(dut.dat_wr.ready)
            ctx.set(dut.dat_wr.valid, 0)
            ctx.set(dut.dat_rd_req.valid, 1)
            ctx.set(dut.dat_rd_req.payload, {"addr": a})
            await ctx.tick().until(dut.dat_rd_req.ready)
            ctx.set(dut.dat_rd_req.valid, 0)

    async def cons(ctx):
        got.extend(r.data for r in await stream_get(ctx, dut.dat_rd_resp, len(ops), rng=rng))

    simulate_streams(dut, [tb], [cons], [("dat_rd_resp", dut.dat_rd_resp)])
    assert got == [d for _, d in ops]


def test_full_throughput():
    """No stalls anywhere: N reads on each port take N cycles (responses every cycle)."""
    rng = random.Random(3)
    dut = Cbuf(BANKS, DEPTH, EB)
    n = 32
    stamps = {"dat": [], "wt": []}

    def prod(req, base):
        async def tb(ctx):
            await stream_put(ctx, req, [{"addr": base + (i % DEPTH)} for i in range(n)],
                             rng=rng, p_stall=0)
        return tb

    def cons(resp, key):
        async def tb(ctx):
            await stream_get(ctx, resp, n, rng=rng, p_stall=0, timestamps=stamps[key])
        return tb

    simulate_streams(dut, [prod(dut.dat_rd_req, 0), prod(dut.wt_rd_req, 3 * DEPTH)],
                     [cons(dut.dat_rd_resp, "dat"), cons(dut.wt_rd_resp, "wt")], [])
    for key in stamps:
        assert stamps[key][-1] - stamps[key][0] == n - 1, key
        assert stamps[key][0] <= 3, key


def test_geometry():
    g = CbufGeometry(32, 512, 8)
    assert (g.addr_bits, g.entry_bits, g.entries) == (14, 64, 16384)
    assert g.wt_base(7) == 8 * 512 and g.wt_cap(3) == 4 * 512
    assert g.wt_entry(4 * 512 + 5, 7, 3) == 8 * 512 + 5
    assert g.dat_entry(2, 1, 3, 40, 10) == 93
    with pytest.raises(ValueError):
        CbufGeometry(32, 500, 8)


@pytest.mark.parametrize("atoms, eb, pairs", [(4, 8, False), (2, 4, False), (2, 4, True),
                                               (1, 2, True)])
@pytest.mark.parametrize("same_banks", [False, True])
def test_masked_atom_lanes(atoms, eb, pairs, same_banks):
    """R > 1 memory atoms per entry (nv_small_256: 4 atoms of 8 bytes in 32-byte entries): each
    write carries a lane mask and changes only those atom lanes; the others keep what an
    earlier write put there (reference: a plain-Python byte array per entry). With ``pairs``
    (16-bit layers' row pairs, docs/conv16.md "CBUF") a read of entry u returns entries
    u & ~1 and u | 1 side by side."""
    rng = random.Random(atoms * 10 + same_banks + 100 * pairs)
    banks, abytes = 4, eb // atoms
    g = CbufGeometry(banks, DEPTH, eb, atoms, pairs)
    dut = Cbuf(banks, DEPTH, eb, atoms, pairs)
    addrs = list(range(g.entries))
    if same_banks:
        dat_addrs, wt_addrs = addrs[::2], addrs[1::2]
    else:
        dat_addrs = [a for a in addrs if a < banks // 2 * DEPTH]
        wt_addrs = [a for a in addrs if a >= banks // 2 * DEPTH]
    mem = {a: [0] * eb for a in addrs}

    def writes(pool, n):
        out = []
        for a in pool:               # every entry whole first (no undefined lanes read back)
            out.append((a, rng.getrandbits(eb * 8), (1 << atoms) - 1))
        for _ in range(n):            # then single lanes and random masks on top
            out.append((rng.choice(pool), rng.getrandbits(eb * 8), rng.randrange(1, 1 << atoms)))
        return out
    dat_w, wt_w = writes(dat_addrs, 40), writes(wt_addrs, 40)
    for a, d, mask in dat_w + wt_w:     # the two ports never write one entry (disjoint pools)
        for lane in range(atoms):
            if mask >> lane & 1:
                for b in range(lane * abytes, (lane + 1) * abytes):
                    mem[a][b] = d >> (8 * b) & 0xFF
    want = {a: sum(v << (8 * i) for i, v in enumerate(bs)) for a, bs in mem.items()}
    if pairs:
        want = {a: want[a & ~1] | want[a | 1] << (8 * eb) for a in want}
    dat_r = [rng.choice(dat_addrs) for _ in range(50)]
    wt_r = [rng.choice(wt_addrs) for _ in range(50)]
    got = {"dat": [], "wt": []}
    wrote = {"dat": False, "wt": False}

    def writer(port, items, key):
        async def tb(ctx):
            await stream_put(ctx, port, [{"addr": a, "data": d, **({"mask": k} if atoms > 1 else {})}
                                         for a, d, k in items], rng=rng, p_stall=0.3)
            wrote[key] = True
        return tb
    dp, dc = _mk_reader(dut.dat_rd_req, dut.dat_rd_resp, dat_r, "dat", wrote, got, rng, 0.3)
    wp, wc = _mk_reader(dut.wt_rd_req, dut.wt_rd_resp, wt_r, "wt", wrote, got, rng, 0.3)
    simulate_streams(dut, [writer(dut.dat_wr, dat_w, "dat"), writer(dut.wt_wr, wt_w, "wt"), dp, wp],
                     [dc, wc], [("dat_rd_resp", dut.dat_rd_resp), ("wt_rd_resp", dut.wt_rd_resp)])
    assert got["dat"] == [want[a] for a in dat_r]
    assert got["wt"] == [want[a] for a in wt_r]


def test_pairs_from_config():
    """16-bit configurations (cfg.conv16) read row pairs: nv_full's 16 banks of 256 x 128 B
    (UD "Convolution Buffer"); the others do not."""
    from hdl.cbuf import rd_resp_layout
    from hdl.config import get_config
    full = CbufGeometry.from_config(get_config("nv_full+feature_data_type=int8_int16_fp16"))
    assert full.pairs and rd_resp_layout(full).size == 1024 and full.depth // 2 == 256
    small = CbufGeometry.from_config(get_config("nv_small"))
    assert not small.pairs and rd_resp_layout(small).size == 64
    with pytest.raises(ValueError):
        CbufGeometry(4, 1, 8, 1, True)
