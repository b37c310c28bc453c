"""Amaranth-simulator harness for NvdlaCore: a CSB driver, a Python AXI memory model and a trace
runner (cocotb-free; the Verilator/cocotb bench lives in sim/ and verif/).

Memory model (per cycle): ``ar_arready``/``aw_awready`` are high every ``accept_every`` cycles,
read data returns ``read_latency`` cycles after the AR handshake (in order), write responses
``write_latency`` cycles after both AW and W arrived. Memory is a sparse dict of bytes.
"""
from __future__ import annotations

from collections import deque
from pathlib import Path

from amaranth.sim import Simulator

from hdl.regmap import REGMAP
from hdl.top import NvdlaCore

TRACES = Path("/work/shared/nvdla/traces/nv_small")
GOLDEN = Path("/work/shared/nvdla/golden/nv_small")
P = "nvdla_core2dbb_"


class Memory:
    """Sparse byte-addressed memory."""

    def __init__(self):
        self.b: dict[int, int] = {}

    def write(self, addr: int, data: bytes):
        for i, x in enumerate(data):
            self.b[addr + i] = x

    def read(self, addr: int, n: int) -> bytes:
        return bytes(self.b.get(addr + i, 0) for i in range(n))


class Harness:
    """Drives one NvdlaCore inside an async testbench; call the coroutine methods from it."""

    def __init__(self, dut: NvdlaCore, mem: Memory, *, read_latency=32, write_latency=16,
                 accept_every=2):
        self.dut, self.mem = dut, mem
        self.beat = dut.cfg.primary_memif_width // 8
        self.read_latency, self.write_latency, self.accept_every = read_latency, write_latency, accept_every
        self.cycle = 0
        self.rq = deque()      # (due, id, data)
        self.awq = deque()
        self.wq = deque()
        self.bq = deque()      # (due, id)
        self.reads = 0
        self.writes = 0

    def sig(self, name):
        return getattr(self.dut, name)

    async def step(self, ctx, csb=None):
        """One clock cycle: drive memory channels (and CSB inputs from ``csb`` dict), tick.
        Returns a dict of CSB response outputs sampled before the edge."""
        d, c = self.dut, self.cycle
        accept = (c % self.accept_every) == 0
        ctx.set(self.sig(P + "ar_arready"), accept)
        ctx.set(self.sig(P + "aw_awready"), accept)
        ctx.set(self.sig(P + "w_wready"), 1)
        rv = bool(self.rq) and self.rq[0][0] <= c
        ctx.set(self.sig(P + "r_rvalid"), rv)
        if rv:
            ctx.set(self.sig(P + "r_rid"), self.rq[0][1])
            ctx.set(self.sig(P + "r_rdata"), self.rq[0][2])
            ctx.set(self.sig(P + "r_rlast"), 1)
        bv = bool(self.bq) and self.bq[0][0] <= c
        ctx.set(self.sig(P + "b_bvalid"), bv)
        if bv:
            ctx.set(self.sig(P + "b_bid"), self.bq[0][1])
        csb = csb or {}
        ctx.set(d.csb2nvdla_valid, csb.get("valid", 0))
        if csb:
            ctx.set(d.csb2nvdla_addr, csb["addr"])
            ctx.set(d.csb2nvdla_wdat, csb.get("wdat", 0))
            ctx.set(d.csb2nvdla_write, csb.get("write", 0))
            ctx.set(d.csb2nvdla_nposted, csb.get("nposted", 0))

        # sample handshakes (settled combinational values)
        if accept and ctx.get(self.sig(P + "ar_arvalid")):
            addr, rid = ctx.get(self.sig(P + "ar_araddr")), ctx.get(self.sig(P + "ar_arid"))
            data = int.from_bytes(self.mem.read(addr, self.beat), "little")
            self.rq.append((c + self.read_latency, rid, data))
            self.reads += 1
        if rv and ctx.get(self.sig(P + "r_rready")):
            self.rq.popleft()
        if accept and ctx.get(self.sig(P + "aw_awvalid")):
            self.awq.append((ctx.get(self.sig(P + "aw_awaddr")), ctx.get(self.sig(P + "aw_awid"))))
        if ctx.get(self.sig(P + "w_wvalid")):
            self.wq.append((ctx.get(self.sig(P + "w_wdata")), ctx.get(self.sig(P + "w_wstrb"))))
        while self.awq and self.wq:
            (addr, wid), (data, strb) = self.awq.popleft(), self.wq.popleft()
            raw = data.to_bytes(self.beat, "little")
            for i in range(self.beat):
                if strb >> i & 1:
                    self.mem.b[addr + i] = raw[i]
            self.bq.append((c + self.write_latency, wid))
            self.writes += 1
        if bv and ctx.get(self.sig(P + "b_bready")):
            self.bq.popleft()
        out = {"valid": ctx.get(d.nvdla2csb_valid), "data": ctx.get(d.nvdla2csb_data),
               "wr_complete": ctx.get(d.nvdla2csb_wr_complete), "intr": ctx.get(d.dla_intr)}
        await ctx.tick()
        self.cycle += 1
        return out

    async def csb_write(self, ctx, byte_addr: int, value: int, nposted=False):
        await self.step(ctx, {"valid": 1, "addr": byte_addr >> 2, "wdat": value, "write": 1,
                              "nposted": int(nposted)})
        if nposted:
            for _ in range(10):
                if (await self.step(ctx))["wr_complete"]:
                    return
            raise AssertionError("no wr_complete")

    async def csb_read(self, ctx, byte_addr: int) -> int:
        await self.step(ctx, {"valid": 1, "addr": byte_addr >> 2, "write": 0})
        for _ in range(10):
            o = await self.step(ctx)
            if o["valid"]:
                return o["data"]
        raise AssertionError("no read response")

    async def wait_intr(self, ctx, timeout=200000) -> int:
        for _ in range(timeout):
            if (await self.step(ctx))["intr"]:
                return self.cycle
        raise AssertionError("timeout waiting for dla_intr")


def load_trace_memory(trace_dir: Path, mem: Memory):
    from verif.trace.parser import load_dat, load_trace
    tr = load_trace(trace_dir)
    for c in tr.commands:
        if c.kind == "mem_init":
            mem.write(c.args["base"], bytes(c.args["size"]))
        elif c.kind == "mem_load":
            for off, data in load_dat(trace_dir / c.args["file"]):
                mem.write(c.args["base"] + off, data)
    return tr


def run_trace(name: str, cfg, **mem_kw):
    """Run one trace on NvdlaCore; returns (memory, checks, stats).

    ``checks``: list of (base, size, golden bytes or None). ``stats``: cycles from the first
    D_OP_ENABLE write to the interrupt, AXI read/write counts.
    """
    trace_dir = TRACES / name
    mem = Memory()
    tr = load_trace_memory(trace_dir, mem)
    dut = NvdlaCore(cfg)
    h = Harness(dut, mem, **mem_kw)
    stats = {}
    checks = []
    intr_status = REGMAP.lookup("GLB.S_INTR_STATUS").addr

    async def tb(ctx):
        first_enable = None
        for _ in range(4):
            await h.step(ctx)
        for c in tr.commands:
            if c.kind == "reg_write":
                if c.args["reg"].reg.name == "D_OP_ENABLE" and first_enable is None:
                    first_enable = h.cycle
                await h.csb_write(ctx, c.args["reg"].addr, c.args["value"])
            elif c.kind == "poll_reg_equal":
                for _ in range(100000):
                    if await h.csb_read(ctx, c.args["reg"].addr) == c.args["value"]:
                        break
                else:
                    raise AssertionError(f"{c.where}: poll timeout")
            elif c.kind == "intr_notify":
                end = await h.wait_intr(ctx)
                stats.setdefault("cycles", end - (first_enable or 0))
                st = await h.csb_read(ctx, intr_status)
                await h.csb_write(ctx, intr_status, st)
                stats.setdefault("intr_status", st)
            elif c.kind == "check_crc":
                gold = GOLDEN / name / f"{c.args['base']:x}_{c.args['size']:x}.bin"
                checks.append((c.args["base"], c.args["size"], gold.read_bytes() if gold.exists() else None))
        for _ in range(4):
            await h.step(ctx)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    stats.update(reads=h.reads, writes=h.writes)
    return mem, checks, stats
