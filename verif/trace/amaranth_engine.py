"""The ``amaranth`` engine of the trace player: ``hdl.top.NvdlaCore`` in Amaranth's simulator.

No Verilator, no cocotb: the design is simulated straight from its Amaranth description (slow,
about a thousand cycles per second; for small traces and unit-level semantics tests).

* memory: the environment's one sparse memory (:class:`verif.mem.SparseMemory`, addresses wrapped
  at ``cfg.mem_address_width``); the player's ``mem_*`` calls go straight into it.
* AXI: the shared slave core (:class:`verif.axi_slave.AxiSlaveCore`, timing profile
  :class:`verif.axi_slave.MemTiming`) runs in a background testbench, evaluated once per cycle
  right after each clock edge (reads the settled DUT outputs, sets the slave inputs for the next
  edge, then ``settle`` for the random profile) - the same place in the cycle as the rtl
  engine's falling-edge evaluation, so both engines count the same cycles.
* CSB driver (NVIDIA's player timing, as the rtl engine, cycle for cycle): one request per
  cycle when ``csb2nvdla_ready``, posted writes, reads wait for ``nvdla2csb_valid`` and the next
  request follows one cycle after the response. Clocks: :func:`play_on_amaranth` simulates the
  CSB port in its own ``csb`` clock domain, through the clock-domain crossing
  (``hdl.csb_cdc.CsbCdc``) as ``NV_nvdla``, clocked like the core (equal clocks, the same
  edges: the driver acts on the core clock's edges); :func:`simulate` does so with
  ``csb_period=PERIOD`` and by default keeps the CSB port in the core clock (no crossing).
* protocol monitors (:mod:`verif.monitors`): the AXI monitor inside the slave core (IDs of
  the client table, ``hdl/dma/clients.py``) and the CSB monitor (requests as driven, responses
  sampled after every tick); a violation fails the trace.
* time: ``cycle`` counts clock edges since the simulation started (the engine's testbench
  ticks; nothing else advances time); ``write_accept_cycle`` is the edge that accepted the last
  ``reg_write``.

Use :func:`simulate` to run a coroutine ``bench(engine)`` on a fresh ``NvdlaCore`` (one
simulation each), or :func:`play_on_amaranth` to play one trace.
"""
from __future__ import annotations

from dataclasses import replace

from amaranth.sim import Simulator

from hdl.config import NvdlaConfig
from hdl.top import CSB_DOMAIN, NvdlaCore
from verif.axi_slave import MASTER_OUTPUTS, SLAVE_INPUTS, AxiSlaveCore, MemTiming, port_name
from verif.mem import SparseMemory
from verif.monitors import CsbMonitor, our_ids
from verif.trace.engine_common import SimEngineBase
from verif.trace.player import TraceFailure, TraceResult, play

DBB = "nvdla_core2dbb_"
CVSRAM = "nvdla_core2cvsram_"
PERIOD = 1e-8      # seconds (the simulated clock; only cycles matter)


def _port(dut, name: str, prefix: str = DBB):
    return getattr(dut, prefix + port_name(name))


class AmaranthEngine(SimEngineBase):
    """``Engine`` (verif/trace/player.py) on an ``NvdlaCore`` inside an Amaranth simulation.

    Created by :func:`simulate`; its coroutines must be awaited from the testbench that
    :func:`simulate` runs. ``timing``: memory timing profile; ``csb_timeout``: cycles a CSB
    read waits for its response (TraceFailure after that). ``address_width`` (bits) is
    ``cfg.mem_address_width``.
    """

    name = "amaranth"

    def __init__(self, dut: NvdlaCore, *, timing: MemTiming = MemTiming(), csb_timeout: int = 10_000):
        self.dut, self.cfg, self.timing, self.csb_timeout = dut, dut.cfg, timing, csb_timeout
        self.address_width = dut.cfg.mem_address_width
        self.mem = SparseMemory(self.address_width)
        self.axi = AxiSlaveCore(self.mem, dut.cfg.primary_memif_width // 8, timing,
                                ids=our_ids(dut.cfg))
        if dut.cfg.secondary_memif:
            # the CV SRAM behind CVIF: its own memory, same timing profile (another seed)
            self.cv_mem = SparseMemory(self.address_width)
            self.cv_axi = AxiSlaveCore(self.cv_mem, dut.cfg.secondary_memif_width // 8,
                                       replace(timing, seed=timing.seed + 1), ids=our_ids(dut.cfg))
        self.csb_mon = CsbMonitor()
        self.ctx = None
        self._cycle = 0
        self._at_fall = False          # see _to_fall
        self._csb_pending = False      # a CSB request is driven for the next edge
        self.write_accept_cycle: int | None = None
        self.csb_reads = self.csb_writes = 0

    # ---- simulator processes ---------------------------------------------------------------------
    async def axi_testbench(self, ctx) -> None:
        """Background testbench: the AXI slave cores (DBB, and CV SRAM when the configuration
        has it), once per cycle after each edge."""
        dut = self.dut
        ports = [(self.axi, DBB)] + ([(self.cv_axi, CVSRAM)] if self.cv_axi is not None else [])
        sides = []
        for core, prefix in ports:
            get = {n: (lambda s=_port(dut, n, prefix): ctx.get(s)) for n in MASTER_OUTPUTS}
            put = {n: _port(dut, n, prefix) for n in SLAVE_INPUTS}
            for n, v in core.out.items():
                ctx.set(put[n], v)
            sides.append((core, get, put))
        while True:
            await ctx.tick()
            for core, get, put in sides:
                for n, v in core.drive(get):
                    ctx.set(put[n], v)
                if core.needs_settle:
                    core.settle(get)

    # ---- time ---------------------------------------------------------------------------------------
    @property
    def cycle(self) -> int:
        """Clock edges since the start of the simulation."""
        return self._cycle

    async def tick(self) -> None:
        """Advance one clock cycle (a CSB request driven before it is released after it)."""
        ctx, d = self.ctx, self.dut
        await ctx.tick()
        self._cycle += 1
        if ctx.get(d.nvdla2csb_valid):          # CSB monitor: one response per cycle high
            self.csb_mon.response("read", self._cycle)
        if ctx.get(d.nvdla2csb_wr_complete):
            self.csb_mon.response("write", self._cycle)
        if self._csb_pending:
            self.ctx.set(self.dut.csb2nvdla_valid, 0)
            self._csb_pending = False

    async def _to_fall(self) -> None:
        """Where the rtl engine awaits a falling edge: one cycle passes unless the engine stands
        just after a rising edge (after ``wait_intr`` saw the interrupt rise, or at the start)."""
        if self._at_fall:
            await self.tick()
        self._at_fall = True

    async def wait_cycles(self, n: int) -> None:
        for _ in range(max(0, n)):
            await self.tick()
        if n > 0:
            # the rtl engine's Timer ends in the time step of a clock edge, before that edge's
            # falling-edge trigger: its next "await falling edge" passes no rising edge
            self._at_fall = False

    async def wait_intr(self, max_cycles: int) -> bool:
        intr = self.dut.dla_intr
        self._check_error()
        if self.ctx.get(intr):
            return True
        for _ in range(max_cycles):
            await self.tick()
            if self.ctx.get(intr):
                self._at_fall = False          # the rtl engine wakes at the rising edge
                self._check_error()
                return True
        self._check_error()
        return False


    # ---- CSB -------------------------------------------------------------------------------------------
    async def csb_step(self, csb: dict | None = None) -> dict:
        """One cycle at the CSB port: drive the request ``csb`` (keys ``addr`` - a WORD address,
        ``wdat``, ``write``, ``nposted``; None: no request) for the next edge, sample the
        response outputs (``valid``, ``data``, ``wr_complete``, ``intr``, ``ready``) before that
        edge, then tick. For cycle-exact CSB tests; traces use ``reg_write``/``reg_read``."""
        if self._at_fall:                      # let a request of reg_write/reg_read be taken
            await self.tick()
            self._at_fall = False
        self._drive(csb)
        d, ctx = self.dut, self.ctx
        out = {"valid": ctx.get(d.nvdla2csb_valid), "data": ctx.get(d.nvdla2csb_data),
               "wr_complete": ctx.get(d.nvdla2csb_wr_complete), "intr": ctx.get(d.dla_intr),
               "ready": ctx.get(d.csb2nvdla_ready)}
        await self.tick()
        return out

    def _drive(self, csb: dict | None) -> None:
        d, ctx = self.dut, self.ctx
        ctx.set(d.csb2nvdla_valid, 1 if csb else 0)
        if csb:
            ctx.set(d.csb2nvdla_addr, csb["addr"])
            ctx.set(d.csb2nvdla_wdat, csb.get("wdat", 0) & 0xFFFFFFFF)
            ctx.set(d.csb2nvdla_write, csb.get("write", 0))
            ctx.set(d.csb2nvdla_nposted, csb.get("nposted", 0))
            self._csb_pending = True
            kind = "read" if not csb.get("write") else ("nposted" if csb.get("nposted") else "posted")
            self.csb_mon.request(kind, self._cycle + 1, csb["addr"] << 2)

    async def _csb_issue(self, addr: int, wdat: int, write: int, nposted: int = 0) -> None:
        """At a falling edge where ``csb2nvdla_ready`` is 1, drive one request for the next
        rising edge (released after it unless another request follows), as the rtl engine."""
        if addr & 3 or not 0 <= addr >> 2 < 1 << len(self.dut.csb2nvdla_addr):
            raise TraceFailure(f"CSB address {addr:#x} is not a word address the port can carry")
        for _ in range(self.csb_timeout):
            await self._to_fall()
            if self.ctx.get(self.dut.csb2nvdla_ready):
                break
        else:
            raise TraceFailure(f"csb2nvdla_ready stayed low for {self.csb_timeout} cycles "
                               f"(request to {addr:#x})")
        self._drive({"addr": addr >> 2, "wdat": wdat, "write": write, "nposted": nposted})

    async def reg_write(self, addr: int, value: int, *, nposted: bool = False) -> None:
        """Posted CSB write (``nposted``: non-posted, waits for ``nvdla2csb_wr_complete``)."""
        self._check_error()
        await self._csb_issue(addr, value, 1, int(nposted))
        self.csb_writes += 1
        self.write_accept_cycle = self.cycle + 1      # the next rising edge takes it
        if nposted:
            for _ in range(self.csb_timeout):
                await self.tick()
                if self.ctx.get(self.dut.nvdla2csb_wr_complete):
                    return
            raise TraceFailure(f"non-posted CSB write to {addr:#x}: no nvdla2csb_wr_complete")

    async def reg_read(self, addr: int) -> int:
        self._check_error()
        await self._csb_issue(addr, 0, 0)
        self.csb_reads += 1
        for _ in range(self.csb_timeout):
            await self.tick()
            if self.ctx.get(self.dut.nvdla2csb_valid):
                return self.ctx.get(self.dut.nvdla2csb_data)
        raise TraceFailure(f"CSB read of {addr:#x} got no nvdla2csb_valid within "
                           f"{self.csb_timeout} cycles")



def simulate(cfg: NvdlaConfig, bench, *, timing: MemTiming = MemTiming(), vcd: str | None = None,
             csb_period: float | None = None, **engine_kw) -> AmaranthEngine:
    """Run ``await bench(engine)`` on a fresh ``NvdlaCore(cfg)`` in Amaranth's simulator (the
    memory and AXI core of ``engine`` serve the DUT); returns the engine when ``bench`` returns
    (its memory and counters remain readable). ``vcd``: write a VCD waveform to that path.
    ``csb_period`` (seconds): None (default) simulates ``NvdlaCore(cfg)`` with its CSB port in
    the core clock (the CSB slave's exact timing); a period builds ``NvdlaCore(cfg,
    csb_clock=True)`` as ``NV_nvdla`` does (the CSB port in the ``csb`` domain, crossed into the
    core clock by ``hdl.csb_cdc.CsbCdc``) and clocks the ``csb`` domain with it. Only
    ``csb_period == PERIOD`` (equal clocks, the same edges) is supported: this engine counts and
    drives everything on the core clock's edges (the rtl engine runs unrelated clocks).
    Exceptions raised by ``bench`` propagate; ValueError for another ``csb_period``."""
    if csb_period is not None and csb_period != PERIOD:
        raise ValueError(f"amaranth engine: csb_period {csb_period} s: only the core clock's "
                         f"period {PERIOD} s (equal clocks) is supported")
    dut = NvdlaCore(cfg, csb_clock=csb_period is not None)
    eng = AmaranthEngine(dut, timing=timing, **engine_kw)
    sim = Simulator(dut)
    sim.add_clock(PERIOD)
    if csb_period is not None:
        sim.add_clock(csb_period, domain=CSB_DOMAIN)
    sim.add_testbench(eng.axi_testbench, background=True)

    async def main(ctx):
        eng.ctx = ctx
        ctx.set(dut.csb2nvdla_valid, 0)
        await bench(eng)

    sim.add_testbench(main)
    if vcd:
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim.run()
    return eng


def play_on_amaranth(trace, cfg: NvdlaConfig, *, timing: MemTiming = MemTiming(),
                     csb_period: float | None = PERIOD, **player_kw) -> TraceResult:
    """Play ``trace`` (a parsed ``verif.trace.parser.Trace``) on a fresh simulation; the
    TraceResult carries ``.axi`` = dict of the AXI counters (rd_beats, wr_beats, rd_reqs, wr_reqs).
    ``csb_period``: see :func:`simulate`; by default the CSB port has its own clock, equal to
    the core's, through the clock-domain crossing, as ``NV_nvdla`` on the rtl engine (the two
    engines count the same cycles); None: the CSB port in the core clock, no crossing."""
    out = {}

    async def bench(eng):
        out["res"] = await play(trace, eng, **player_kw)

    eng = simulate(cfg, bench, timing=timing, csb_period=csb_period)
    res = out["res"]
    eng.csb_mon.check_idle(eng.cycle)
    for axi in (eng.axi, eng.cv_axi):
        if axi is not None and axi.monitor is not None:
            axi.monitor.check_idle(eng.cycle)
    err = (eng.axi.error or (eng.cv_axi.error and f"CV SRAM port: {eng.cv_axi.error}" if eng.cv_axi else None)
           or eng.csb_mon.error)
    if err and err not in res.message:
        res.message = f"protocol error: {err}" + (f"; {res.message}" if res.message else "")
        res.status = "FAIL"
    res.axi = {k: getattr(eng.axi, k) for k in ("rd_beats", "wr_beats", "rd_reqs", "wr_reqs")}
    return res
