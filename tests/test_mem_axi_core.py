"""Unit tests of the shared sparse memory (verif/mem.py) and the AXI4 slave core with its timing
profiles (verif/axi_slave.py), driven by a small cycle-based AXI master written here."""
from __future__ import annotations

import random

import numpy as np
import pytest

from verif.axi_slave import AxiSlaveCore, MemTiming, MemTimingError
from verif.mem import PAGE, SparseMemory
from verif.model.memory import Memory

# ---- memory ----------------------------------------------------------------------------------


def test_memory_wraps_at_address_width():
    m = SparseMemory(32)
    m.write(0xFFFF_FFFC, bytes([1, 2, 3, 4, 5, 6, 7, 8]))     # runs past 4 GiB
    assert m.read(0, 4).tobytes() == bytes([5, 6, 7, 8])       # ... and continues at 0
    assert m.read(0xFFFF_FFFC, 8).tobytes() == bytes(range(1, 9))
    assert m.read(0x1_0000_0000, 4).tobytes() == bytes([5, 6, 7, 8])   # 2**32 is address 0
    assert m.read_word(0x1_0000_0000, 4) == 0x08070605
    m.fill(0xFFFF_FFFE, 4, 0xAA)
    assert m.read(0xFFFF_FFFC, 8).tobytes() == bytes([1, 2, 0xAA, 0xAA, 0xAA, 0xAA, 7, 8])
    m.write_word(0x2_0000_0008, 8, 0x1122334455667788, 0x0F)   # strobes, wrapped address
    assert m.read(8, 8).tobytes() == bytes.fromhex("8877665500000000")
    # a 64-bit memory does not wrap at 4 GiB
    w = SparseMemory(64)
    w.write(0xFFFF_FFFC, bytes(range(1, 9)))
    assert w.read(0, 4).tobytes() == bytes(4)
    assert w.read(0x1_0000_0000, 4).tobytes() == bytes([5, 6, 7, 8])
    with pytest.raises(ValueError, match="address_width"):
        SparseMemory(8)


def test_memory_gather_scatter_across_wrap():
    m = SparseMemory(32)
    addrs = (np.arange(-24, 40, dtype=np.int64) + (1 << 32)).reshape(8, 8)   # straddles 4 GiB
    vals = (np.arange(64) * 7 % 251).astype(np.uint8).reshape(8, 8)
    m.scatter(addrs, vals)
    assert len(m.pages) == 2                     # the top page and page 0, nothing in between
    assert (m.gather(addrs) == vals).all()
    assert m.read(0, 40).tobytes() == vals.ravel()[24:].tobytes()
    assert (m.gather(addrs & 0xFFFF_FFFF) == vals).all()      # same bytes, unwrapped addresses
    # sparse addresses on many pages (the page-by-page path), duplicates: later wins
    a = np.array([5, PAGE * 100 + 1, 5, (1 << 32) - 1, PAGE * 3], dtype=np.int64)
    m.scatter(a, [1, 2, 3, 4, 5])
    assert m.gather(a).tolist() == [3, 2, 3, 4, 5]
    assert m.gather(np.zeros((0, 3), np.int64)).shape == (0, 3)


def test_model_memory_is_the_shared_memory():
    assert Memory is SparseMemory
    m = Memory()                                  # default: 64-bit address space
    m.write(0x1_8000_0000, b"\x01\x02")
    assert m.read(0x1_8000_0000, 2).tolist() == [1, 2] and m.read(0x8000_0000, 2).tolist() == [0, 0]


# ---- timing profiles ---------------------------------------------------------------------------


def test_timing_profiles_and_validation():
    assert MemTiming() == MemTiming.named("nvidia") == MemTiming(32, 2, "nvidia", 0)
    assert (MemTiming.named("fast").read_latency, MemTiming.named("fast").accept_every) == (1, 1)
    r = MemTiming.named("random", seed=7, read_latency=40)
    assert (r.profile, r.seed, r.read_latency) == ("random", 7, 40)
    for kw, opt in (({"accept_every": 0}, "--accept-every 0"), ({"accept_every": -2}, "--accept-every -2"),
                    ({"read_latency": -1}, "--read-latency -1")):
        with pytest.raises(MemTimingError, match=opt):
            MemTiming.named("nvidia", **kw)
    with pytest.raises(MemTimingError, match="--mem-profile 'slow'"):
        MemTiming.named("slow")
    with pytest.raises(MemTimingError, match="--seed"):
        MemTiming(profile="random", seed="x")
    with pytest.raises(MemTimingError, match="--accept-every"):
        MemTiming(accept_every=1.5)


# ---- AXI core driven by a Python master ---------------------------------------------------------

class Master:
    """Cycle-based AXI master: issues ``reads`` [(id, addr, len)] and ``writes`` [(id, addr,
    [beats])] in order (valid held until the handshake), accepts R/B with a random ``rready``
    /``bready`` (probability ``ready_p``). Records R beats and B responses in handshake order."""

    def __init__(self, core: AxiSlaveCore, reads=(), writes=(), ready_p=1.0, seed=1):
        self.core, self.rng, self.ready_p = core, random.Random(seed), ready_p
        self.reads, self.writes = list(reads), list(writes)
        self.wbeats = [(w[0], b, i == len(w[2]) - 1) for w in self.writes for i, b in enumerate(w[2])]
        self.o = {"arvalid": 0, "arid": 0, "araddr": 0, "arlen": 0, "awvalid": 0, "awid": 0,
                  "awaddr": 0, "awlen": 0, "wvalid": 0, "wdata": 0, "wstrb": 0xFF, "wlast": 0,
                  "rready": 1, "bready": 1}
        self.i = dict(core.out)
        self.r_beats, self.b_ids, self.ar_cycles, self.r_cycles = [], [], [], []
        self.cycle = 0
        self.get = {n: (lambda n=n: self.o[n]) for n in self.o}

    def _present(self):
        o = self.o
        if self.reads and not o["arvalid"]:
            rid, addr, ln = self.reads.pop(0)
            o.update(arvalid=1, arid=rid, araddr=addr, arlen=ln)
        if self.writes and not o["awvalid"]:
            wid, addr, beats = self.writes.pop(0)
            o.update(awvalid=1, awid=wid, awaddr=addr, awlen=len(beats) - 1)
        if self.wbeats and not o["wvalid"]:
            _, data, last = self.wbeats.pop(0)
            o.update(wvalid=1, wdata=data, wlast=int(last))
        o["rready"] = int(self.rng.random() < self.ready_p)
        o["bready"] = int(self.rng.random() < self.ready_p)

    def step(self):
        self._present()
        for n, v in self.core.drive(self.get):
            self.i[n] = v
        if self.core.needs_settle:
            self.core.settle(self.get)
        # the clock edge: handshakes
        o, i = self.o, self.i
        self.cycle += 1
        if o["arvalid"] and i["arready"]:
            o["arvalid"] = 0
            self.ar_cycles.append(self.cycle)
        if o["awvalid"] and i["awready"]:
            o["awvalid"] = 0
        if o["wvalid"] and i["wready"]:
            o["wvalid"] = 0
        if i["rvalid"] and o["rready"]:
            self.r_beats.append((i["rid"], i["rdata"], i["rlast"]))
            self.r_cycles.append(self.cycle)
        if i["bvalid"] and o["bready"]:
            self.b_ids.append(i["bid"])

    def run(self, n_beats: int, n_b: int = 0, limit: int = 100_000):
        while len(self.r_beats) < n_beats or len(self.b_ids) < n_b:
            self.step()
            assert self.cycle < limit, "AXI core stalled"
        for _ in range(50):                       # nothing more may come
            self.step()
        assert len(self.r_beats) == n_beats and len(self.b_ids) == n_b


def _mem_with_pattern():
    m = SparseMemory(32)
    m.write(0x8000_0000, (np.arange(1 << 16) * 13 % 256).astype(np.uint8))
    return m


def _split_bursts(beats):
    """R beats -> list of (id, [data]) bursts, checking no other ID interleaves inside a burst."""
    out, cur = [], None
    for rid, data, last in beats:
        if cur is None:
            cur = (rid, [])
        assert rid == cur[0], "beats of another ID inside a burst"
        cur[1].append(data)
        if last:
            out.append(cur)
            cur = None
    assert cur is None, "burst without rlast"
    return out


@pytest.mark.parametrize("timing", [MemTiming.named("nvidia"), MemTiming.named("fast"),
                                    MemTiming.named("random", seed=3), MemTiming.named("random", seed=4)],
                         ids=str)
def test_read_bursts_data_and_order(timing):
    mem = _mem_with_pattern()
    core = AxiSlaveCore(mem, 8, timing)
    rng = random.Random(5)
    reqs = [(rng.randrange(4), 0x8000_0000 + 8 * rng.randrange(4096), rng.randrange(4)) for _ in range(60)]
    m = Master(core, reads=reqs, ready_p=0.7 if timing.profile == "random" else 1.0)
    m.run(sum(r[2] + 1 for r in reqs))
    bursts = _split_bursts(m.r_beats)
    assert core.rd_reqs == len(reqs) and core.rd_beats == len(m.r_beats)
    # per ID: request order and data; every burst has arlen + 1 beats read from memory
    for i in range(4):
        want = [[mem.read_word(a + 8 * k, 8) for k in range(n + 1)] for rid, a, n in reqs if rid == i]
        assert [d for rid, d in bursts if rid == i] == want
    order = [rid for rid, _ in bursts]
    issued = [r[0] for r in reqs]
    if timing.profile == "random":
        assert order != issued, "random profile: responses of different IDs must be reordered"
    else:
        assert order == issued


def test_nvidia_read_latency_and_request_rate():
    core = AxiSlaveCore(_mem_with_pattern(), 8, MemTiming.named("nvidia"))
    m = Master(core, reads=[(0, 0x8000_0000 + 8 * k, 0) for k in range(8)])
    m.run(8)
    assert [b - a for a, b in zip(m.ar_cycles, m.ar_cycles[1:])] == [2] * 7    # every other cycle
    # first beat: read_latency cycles after the request is taken (one cycle before the handshake)
    assert m.r_cycles[0] - (m.ar_cycles[0] - 1) == 32
    fast = AxiSlaveCore(_mem_with_pattern(), 8, MemTiming.named("fast"))
    m = Master(fast, reads=[(0, 0x8000_0000 + 8 * k, 0) for k in range(8)])
    m.run(8)
    assert [b - a for a, b in zip(m.ar_cycles, m.ar_cycles[1:])] == [1] * 7
    assert m.r_cycles[0] - m.ar_cycles[0] == 1


def test_random_profile_deterministic_per_seed():
    def trace(seed):
        core = AxiSlaveCore(_mem_with_pattern(), 8, MemTiming.named("random", seed=seed))
        m = Master(core, reads=[(k % 3, 0x8000_0000 + 64 * k, 1) for k in range(30)])
        m.run(60)
        return m.r_beats, m.r_cycles
    assert trace(11) == trace(11)
    assert trace(11) != trace(12)


@pytest.mark.parametrize("timing", [MemTiming.named("nvidia"), MemTiming.named("random", seed=9)], ids=str)
def test_write_bursts_strobes_and_responses(timing):
    mem = SparseMemory(32)
    core = AxiSlaveCore(mem, 8, timing)
    writes = [(k % 2, 0x9000_0000 + 32 * k, [(k << 8) | b for b in range(1 + k % 4)]) for k in range(20)]
    m = Master(core, writes=writes, ready_p=0.6)
    m.run(0, n_b=len(writes))
    for wid, addr, beats in writes:
        for j, v in enumerate(beats):
            assert mem.read_word(addr + 8 * j, 8) == v
    assert core.wr_reqs == 20 and core.wr_beats == sum(len(w[2]) for w in writes)
    assert core.error is None
    for i in range(2):                            # B responses in request order per ID
        assert m.b_ids.count(i) == 10


def test_wlast_mismatch_is_reported():
    core = AxiSlaveCore(SparseMemory(32), 8, MemTiming.named("fast"))
    m = Master(core, writes=[(0, 0x100, [1, 2])])
    m.wbeats = [(0, 1, True), (0, 2, True)]       # wlast on the first of two beats
    for _ in range(20):
        m.step()
    assert core.error and "awlen/wlast mismatch" in core.error
