"""Unit tests of the protocol monitors (verif/monitors.py) inside the AXI slave core, driven by a
cycle-based Python AXI master, and of the CSB monitor (issue 11 item 5): each rule is broken
once and the first violation must name the channel and the cycle."""
from __future__ import annotations

import pytest

from verif.axi_slave import AxiSlaveCore, MemTiming
from verif.mem import SparseMemory
from verif.monitors import NVIDIA_NV_SMALL_IDS, AxiMonitor, CsbMonitor, nvidia_ids, our_ids

PROFILES = [MemTiming.named("nvidia"), MemTiming.named("fast"), MemTiming.named("random", seed=2)]


class Bus:
    """A scripted AXI master: ``script[cycle]`` is a dict of master outputs changed before that
    cycle's evaluation (values persist); rready/bready are 1."""

    def __init__(self, core: AxiSlaveCore, script: dict[int, dict]):
        self.core, self.script = core, script
        self.o = {"arvalid": 0, "arid": 0, "araddr": 0, "arlen": 0, "awvalid": 0, "awid": 0,
                  "awaddr": 0, "awlen": 0, "wvalid": 0, "wdata": 0, "wstrb": 0xFF, "wlast": 0,
                  "rready": 1, "bready": 1}
        self.get = {n: (lambda n=n: self.o[n]) for n in self.o}

    def run(self, cycles: int) -> None:
        for c in range(cycles):
            self.o.update(self.script.get(c, {}))
            self.core.drive(self.get)
            if self.core.needs_settle:
                self.core.settle(self.get)


class HandshakeMaster:
    """A well-behaved master: issues ``reads`` (id, addr, len) and ``writes`` (id, addr, beats)
    holding each valid and payload until the handshake (W beats after their AW)."""

    def __init__(self, core, reads=(), writes=()):
        self.core = core
        self.reads, self.writes = list(reads), list(writes)
        self.o = {"arvalid": 0, "arid": 0, "araddr": 0, "arlen": 0, "awvalid": 0, "awid": 0,
                  "awaddr": 0, "awlen": 0, "wvalid": 0, "wdata": 0, "wstrb": 0xFF, "wlast": 0,
                  "rready": 1, "bready": 1}
        self.get = {n: (lambda n=n: self.o[n]) for n in self.o}
        self.wq = []

    def run(self, cycles: int) -> None:
        o, core = self.o, self.core
        for _ in range(cycles):
            if not o["arvalid"] and self.reads:
                i, a, n = self.reads.pop(0)
                o.update(arvalid=1, arid=i, araddr=a, arlen=n)
            if not o["awvalid"] and self.writes:
                i, a, n = self.writes.pop(0)
                o.update(awvalid=1, awid=i, awaddr=a, awlen=n - 1)
                self.wq += [(a + k, k == n - 1) for k in range(n)]
            if not o["wvalid"] and self.wq:
                d, last = self.wq.pop(0)
                o.update(wvalid=1, wdata=d, wlast=int(last))
            core.drive(self.get)
            if core.needs_settle:
                core.settle(self.get)
            out = core.out
            if o["arvalid"] and out["arready"]:
                o["arvalid"] = 0
            if o["awvalid"] and out["awready"]:
                o["awvalid"] = 0
            if o["wvalid"] and out["wready"]:
                o["wvalid"] = 0


def _core(timing=MemTiming.named("fast"), ids=None):
    return AxiSlaveCore(SparseMemory(32), 8, timing, ids=ids)


@pytest.mark.parametrize("timing", PROFILES, ids=str)
def test_legal_traffic_passes(timing):
    core = _core(timing, ids={"read": {0, 3}, "write": {1}})
    m = HandshakeMaster(core, reads=[(k % 2 * 3, 0x8000_0000 + 64 * k, k % 4) for k in range(40)],
                        writes=[(1, 0x9000_0000 + 32 * k, 1 + k % 4) for k in range(40)])
    m.run(30_000)
    assert core.error is None
    mon = core.monitor
    assert mon.handshakes["ar"] == 40 and mon.handshakes["aw"] == 40
    assert mon.handshakes["r"] == sum(k % 4 + 1 for k in range(40))
    assert mon.handshakes["b"] == 40 and mon.outstanding == {"read": 0, "write": 0}
    mon.check_idle(core.now)
    assert core.error is None


def test_valid_dropped_before_ready():
    # nvidia profile: AR accepted one request every other cycle -> the second request stalls
    core = _core(MemTiming.named("nvidia"))
    Bus(core, {0: dict(arvalid=1, arid=0, araddr=0x1000, arlen=0),
               2: dict(arvalid=1, araddr=0x1008), 3: dict(arvalid=0)}).run(10)
    assert core.error is not None and core.error.startswith("AXI AR at cycle 4")
    assert "arvalid dropped before arready" in core.error


def test_payload_changed_while_stalled():
    core = _core(MemTiming.named("nvidia"))
    Bus(core, {0: dict(awvalid=1, awid=0, awaddr=0x2000, awlen=0),
               2: dict(awaddr=0x2008), 3: dict(awaddr=0x2010)}).run(6)
    assert core.error is not None and core.error.startswith("AXI AW at cycle 4")
    assert "payload changed while stalled" in core.error and "awaddr=0x2010" in core.error


def test_w_payload_changed_while_stalled():
    # random profile stalls wready; keep wvalid high and change wdata every cycle
    core = _core(MemTiming.named("random", seed=5))
    script = {0: dict(awvalid=1, awaddr=0x3000, awlen=15)}
    for c in range(1, 60):
        script[c] = dict(wvalid=1, wdata=c, wlast=0)
    Bus(core, script).run(60)
    assert core.error is not None and "AXI W at cycle" in core.error
    assert "payload changed while stalled" in core.error


def test_burst_crossing_4k():
    core = _core()
    Bus(core, {0: dict(arvalid=1, arid=0, araddr=0x8000_0FF8, arlen=1), 1: dict(arvalid=0)}).run(4)
    assert core.error is not None and core.error.startswith("AXI AR at cycle 1")
    assert "crosses a 4 KB boundary" in core.error
    ok = _core()
    Bus(ok, {0: dict(arvalid=1, arid=0, araddr=0x8000_0FF0, arlen=1), 1: dict(arvalid=0)}).run(8)
    assert ok.error is None


def test_id_outside_client_table():
    core = _core(ids=NVIDIA_NV_SMALL_IDS)
    Bus(core, {0: dict(arvalid=1, arid=4, araddr=0x100, arlen=0), 1: dict(arvalid=0)}).run(4)
    assert core.error is not None and "arid 4 is not a client ID" in core.error
    assert "allowed [1, 2, 3, 5, 6, 8, 9]" in core.error


def test_nvidia_ids_per_configuration():
    """NVIDIA's MCIF IDs (NV_NVDLA_MCIF_define.vh tieoff_axid_*): nv_small's seven read
    clients, SDP's EW reader (7) where the configuration has SDP EW, BDMA (0) and RUBIK (4)."""
    from hdl.config import get_config
    assert nvidia_ids(get_config("nv_small")) == NVIDIA_NV_SMALL_IDS
    large = nvidia_ids(get_config("nv_large"))
    assert large["read"] == {1, 2, 3, 5, 6, 7, 8, 9} and large["write"] == {1, 2, 3}
    full = nvidia_ids(get_config("nv_full"))
    assert full["read"] == set(range(10)) and full["write"] == {0, 1, 2, 3, 4}


def test_our_ids_follow_the_client_table():
    from hdl.config import NV_SMALL
    from hdl.dma.clients import READ_CLIENTS, WRITE_CLIENTS, read_client, write_client
    ids = our_ids(NV_SMALL)
    assert ids["read"] == set(range(len(READ_CLIENTS))) and ids["write"] == set(range(len(WRITE_CLIENTS)))
    assert read_client("cdma_wt") in ids["read"] and write_client("cdp_wdma") in ids["write"]


@pytest.mark.parametrize("wlast_at, msg", [(1, "burst of 2 beats ended by wlast, but its AW"),
                                           (None, "beat 4 of a 4-beat burst")])
def test_wlast_must_end_the_burst(wlast_at, msg):
    core = _core()
    script = {0: dict(awvalid=1, awid=0, awaddr=0x4000, awlen=3), 1: dict(awvalid=0)}
    for k in range(4):
        script[1 + k] = dict(wvalid=1, wdata=k, wlast=int(k == wlast_at))
    script[5] = dict(wvalid=0)
    Bus(core, script).run(8)
    assert core.error is not None and msg in core.monitor.error


def test_w_before_aw_is_legal():
    core = _core()
    script = {0: dict(wvalid=1, wdata=1, wlast=0), 1: dict(wdata=2, wlast=1), 2: dict(wvalid=0),
              4: dict(awvalid=1, awid=0, awaddr=0x5000, awlen=1), 5: dict(awvalid=0)}
    Bus(core, script).run(12)
    assert core.monitor.error is None and core.monitor.handshakes["b"] == 1


def test_responses_only_to_outstanding_requests():
    mon = AxiMonitor(8)
    out = {"arready": 1, "awready": 1, "wready": 1, "rvalid": 1, "rid": 2, "rlast": 1,
           "bvalid": 0, "bid": 0}
    get = {"rready": lambda: 1, "bready": lambda: 1}
    mon.cycle(7, get, out, 0, 0, 0)
    assert mon.error == "AXI R at cycle 7: R beat with rid 2: no read of that ID outstanding"
    mon = AxiMonitor(8)
    out.update(rvalid=0, bvalid=1, bid=1)
    mon.cycle(9, get, out, 0, 0, 0)
    assert mon.error.startswith("AXI B at cycle 9: B response with bid 1")


def test_quiet_after_mid_layer_reset_and_in_reset():
    core = _core()
    core.monitor.quiet = True
    Bus(core, {3: dict(awvalid=1, awaddr=0x6000, awlen=0)}).run(5)
    assert core.error is not None and core.error.startswith("AXI AW at cycle 4")
    assert "before any layer was enabled again" in core.error
    # a reset that keeps the error; then one that starts afresh
    core.reset(keep_error=True)
    assert core.error is not None
    core.reset()
    assert core.error is None and core.monitor.quiet is False


def test_check_idle_flags_w_without_aw():
    core = _core()
    Bus(core, {0: dict(wvalid=1, wdata=1, wlast=1), 1: dict(wvalid=0)}).run(3)
    assert core.error is None
    core.monitor.check_idle(core.now)
    assert core.error is not None and "without an AW at the end of the trace" in core.error


def test_csb_monitor():
    m = CsbMonitor()
    m.request("posted", 1, 0x1000)
    m.request("read", 2, 0x1004)
    m.response("read", 5)
    m.request("nposted", 6, 0x1008)
    m.response("write", 9)
    m.check_idle(10)
    assert m.error is None and m.requests == 3 and m.responses == 2
    m.response("write", 12)
    assert m.error == ("CSB at cycle 12: nvdla2csb_wr_complete with no request outstanding "
                       "(posted writes get no response)")
    m = CsbMonitor()
    m.request("read", 1, 0x2000)
    m.response("write", 3)
    assert "oldest outstanding request is a read of 0x2000" in m.error
    m = CsbMonitor()
    m.request("read", 1, 0x2000)
    m.check_idle(50)
    assert m.error.startswith("CSB at cycle 50: 1 request(s) without a response")
    m.reset()
    assert m.error is None
