"""The rtl ``Engine`` of the trace player: an ``NV_nvdla`` simulated by Verilator under cocotb.

Pieces (all on NVIDIA's NV_nvdla ports):

* memory: the environment's one sparse memory (:class:`verif.mem.SparseMemory`, addresses
  wrapped at the width of ``nvdla_core2dbb_ar_araddr``); ``mem_write``/``mem_fill``/``mem_read``
  of the player go straight into it (no AXI traffic, no simulated time).
* :class:`AxiResponder` - the cocotb adapter of the shared AXI4 slave core
  (:class:`verif.axi_slave.AxiSlaveCore`, timing profiles :class:`verif.axi_slave.MemTiming`:
  ``nvidia`` by default, i.e. read data 32 cycles after the request is taken, one request
  every other cycle) on ``nvdla_core2dbb_*``. The core is evaluated once per cycle at the
  falling edge of ``dla_core_clk`` and sets the slave inputs for the next rising edge (the
  ``random`` profile also waits for ``ReadOnly`` to see the settled ``rready``/``bready``).
  Speed: raw GPI handle access (no LogicArray conversions), only changed inputs are written,
  and while nothing is in flight the adapter sleeps until ``arvalid``/``awvalid``/``wvalid``
  rise or ``rready`` changes (the skipped cycles are reported to the core).
* the CSB master (timing as NVIDIA's player drives CSB): one request per cycle when
  ``csb2nvdla_ready``, posted writes (``nposted=0``), reads wait for ``nvdla2csb_valid``
  (``csb_timeout`` cycles at most).
* protocol monitors (:mod:`verif.monitors`): the AXI monitor inside the slave core sees every
  cycle the core evaluates (IDs allowed: ``axi_ids``); the CSB monitor counts the engine's own
  requests and every cycle ``nvdla2csb_valid``/``nvdla2csb_wr_complete`` is high (a coroutine
  woken by their rising edges, so no per-cycle cost while they are low). A violation fails the
  trace at the engine's next call (``_check_error``) or at :meth:`RtlEngine.final_check`.
* :class:`RtlEngine` - the ``verif.trace.player.Engine``: ``cycle`` counts ``dla_core_clk``
  rising edges since reset release (computed from simulation time, no per-cycle Python),
  ``wait_intr`` waits for an edge of ``dla_intr`` or a Timer, ``busy_units`` reads every unit's
  ``S_STATUS``; ``address_width`` is the AXI address width in bits.
"""
from __future__ import annotations

import cocotb
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import FallingEdge, First, ReadOnly, RisingEdge, Timer

from verif.axi_slave import MASTER_OUTPUTS, SLAVE_INPUTS, AxiSlaveCore, MemTiming, port_name
from verif.mem import SparseMemory
from verif.monitors import CsbMonitor
from verif.trace.engine_common import SimEngineBase, kickoff_addrs
from verif.trace.player import TraceFailure

__all__ = ["AxiResponder", "MemTiming", "RtlEngine", "SparseMemory"]

_DEPOSIT = 0  # cocotb _GPISetAction.DEPOSIT (inertial write)


class _Sig:
    """Fast raw access to one DUT signal (bypasses cocotb's LogicArray conversions)."""
    __slots__ = ("h", "width", "name", "mask")

    def __init__(self, handle):
        self.h = handle._handle
        self.width = len(handle)
        self.name = handle._name
        self.mask = (1 << self.width) - 1

    def get(self) -> int:
        if self.width <= 32:
            return self.h.get_signal_val_long() & self.mask   # the GPI value is signed
        return int(self.h.get_signal_val_binstr(), 2)

    def set(self, v: int) -> None:
        if self.width <= 32:
            self.h.set_signal_val_int(_DEPOSIT, v)
        else:
            self.h.set_signal_val_binstr(_DEPOSIT, format(v, f"0{self.width}b"))


class AxiResponder:
    """cocotb adapter of :class:`verif.axi_slave.AxiSlaveCore` on the ``<prefix>_{aw,w,b,ar,r}_*``
    ports of ``dut`` (module docstring). ``period_steps``: clock period in simulator steps."""

    def __init__(self, dut, prefix: str, clk, mem, timing: MemTiming = MemTiming(),
                 period_steps: int = 1, ids: dict | None = None, monitor: bool = True):
        self.clk, self.period = clk, period_steps
        sig = {n: _Sig(getattr(dut, f"{prefix}_{port_name(n)}")) for n in SLAVE_INPUTS + MASTER_OUTPUTS}
        self.get = {n: sig[n].get for n in MASTER_OUTPUTS}
        self.put = {n: sig[n].set for n in SLAVE_INPUTS}
        self.core = AxiSlaveCore(mem, sig["rdata"].width // 8, timing, ids=ids, monitor=monitor)
        self._edge_handles = [getattr(dut, f"{prefix}_{c}_{c}valid") for c in ("ar", "aw", "w")]
        self._rready_handle = getattr(dut, f"{prefix}_r_rready")
        self._task = None

    def __getattr__(self, name):          # counters and error of the core (rd_beats, ...)
        if name in ("rd_beats", "wr_beats", "rd_reqs", "wr_reqs", "error", "idle"):
            return getattr(self.core, name)
        raise AttributeError(name)

    def drive_idle(self) -> None:
        """Drive the core's current slave inputs (after a reset: ready high, no valid)."""
        for n, v in self.core.out.items():
            self.put[n](v)

    def drive_quiet(self) -> None:
        """Drive every ready and response valid low (the memory while the DUT is in reset)."""
        for n in ("arready", "awready", "wready", "rvalid", "bvalid"):
            self.put[n](0)

    def valids(self) -> list[str]:
        """Names of the master's request/data valids that are high now."""
        return [n for n in ("arvalid", "awvalid", "wvalid") if self.get[n]()]

    def start(self, mem=None, *, keep_error: bool = False) -> None:
        """Reset the core (serving ``mem`` if given; ``keep_error``: keep a protocol error
        already recorded) and run it once per cycle."""
        self.stop()
        self.core.reset(mem, keep_error=keep_error)
        self.drive_idle()
        self._task = cocotb.start_soon(self._run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self):
        fall = FallingEdge(self.clk)
        P = self.period
        core, get, put = self.core, self.get, self.put
        settle = ReadOnly() if core.needs_settle else None
        await fall
        while True:
            for n, v in core.drive(get):
                put[n](v)
            if settle is not None:
                await settle
                core.settle(get)
            if core.seen or not core.idle:
                await fall
                continue
            # Nothing in flight: sleep until a request/data valid rises or rready changes.
            rready = get["rready"]()
            t_last = get_sim_time("step")
            await First(*(RisingEdge(h) for h in self._edge_handles), self._rready_handle.value_change)
            await fall
            core.skip((get_sim_time("step") - t_last) // P - 1, rready)


class RtlEngine(SimEngineBase):
    """``Engine`` on an NV_nvdla DUT under cocotb. Call ``await start()`` once (clocks, reset,
    memory model); ``await reset()`` between traces. ``period_ns``: clock period."""

    name = "rtl"

    def __init__(self, dut, *, timing: MemTiming = MemTiming(), period_ns: int = 10,
                 reset_cycles: int = 20, post_reset_cycles: int = 8192, csb_timeout: int = 10_000,
                 axi_ids: dict | None = None, monitors: bool = True):
        self.dut = dut
        #: AXI protocol monitor on (False only to measure its cost)
        self.monitors = monitors
        #: allowed ARID/AWID values ({"read": [...], "write": [...]}; None: any)
        self.axi_ids = axi_ids
        self.csb_mon = CsbMonitor()
        self.in_reset = False
        self.timing = timing
        self.period_ns = period_ns
        self.reset_cycles, self.post_reset_cycles = reset_cycles, post_reset_cycles
        self.csb_timeout = csb_timeout
        self.clk = dut.dla_core_clk
        #: AXI address width in bits (the memory wraps addresses there, as the RTL's adders do)
        self.address_width = len(dut.nvdla_core2dbb_ar_araddr)
        self.mem = SparseMemory(self.address_width)
        self._t0_step: int | None = None
        self._started = False
        # CSB
        self.c_valid = _Sig(dut.csb2nvdla_valid)
        self.c_ready = _Sig(dut.csb2nvdla_ready)
        self.c_addr = _Sig(dut.csb2nvdla_addr)
        self.c_wdat = _Sig(dut.csb2nvdla_wdat)
        self.c_write = _Sig(dut.csb2nvdla_write)
        self.c_nposted = _Sig(dut.csb2nvdla_nposted)
        self.r_valid = _Sig(dut.nvdla2csb_valid)
        self.r_data = _Sig(dut.nvdla2csb_data)
        self.r_wrc = _Sig(dut.nvdla2csb_wr_complete)
        self.intr = dut.dla_intr
        self._intr = _Sig(dut.dla_intr)
        self._csb_seq = 0
        self._fall = FallingEdge(self.clk)
        self.axi = None  # created in start() once the period in steps is known
        self.csb_reads = self.csb_writes = 0

    # ---- time ---------------------------------------------------------------------------
    @property
    def period_steps(self) -> int:
        return self._period_steps

    @property
    def cycle(self) -> int:
        """``dla_core_clk`` rising edges since reset release (0 at the release edge)."""
        if self._t0_step is None:
            return 0
        return (get_sim_time("step") - self._t0_step) // self._period_steps

    def sim_steps(self) -> int:
        return get_sim_time("step")

    async def wait_cycles(self, n: int) -> None:
        if n > 0:
            await Timer(n * self.period_ns, "ns")

    async def wait_intr(self, max_cycles: int) -> bool:
        self._check_error()
        if self._intr.get():
            return True
        t = Timer(max_cycles * self.period_ns, "ns")
        got = await First(RisingEdge(self.intr), t)
        self._check_error()
        return got is not t

    # ---- start / reset --------------------------------------------------------------------
    async def start(self) -> None:
        """Start clocks, tie off static inputs, create the memory model, reset."""
        dut = self.dut
        for name in ("dla_core_clk", "dla_csb_clk"):
            cocotb.start_soon(Clock(getattr(dut, name), self.period_ns, "ns").start(start_high=False))
        for name in ("global_clk_ovr_on", "tmc2slcg_disable_clock_gating", "test_mode"):
            if hasattr(dut, name):
                getattr(dut, name).value = 0
        for n in ("c", "ma", "mb", "p", "o", "a"):
            name = f"nvdla_pwrbus_ram_{n}_pd"
            if hasattr(dut, name):
                getattr(dut, name).value = 0
        # secondary memory interface (absent on nv_small): never accept anything
        if hasattr(dut, "nvdla_core2cvsram_ar_arready"):
            for ch, sig in (("aw", "awready"), ("w", "wready"), ("ar", "arready"),
                            ("b", "bvalid"), ("r", "rvalid")):
                getattr(dut, f"nvdla_core2cvsram_{ch}_{sig}").value = 0
        self.c_valid.set(0)
        self.c_addr.set(0)
        self.c_wdat.set(0)
        self.c_write.set(0)
        self.c_nposted.set(0)
        await Timer(1, "ns")
        self._period_steps = int(round(self.period_ns * 1e-9 / self._step_seconds()))
        self.axi = AxiResponder(dut, "nvdla_core2dbb", self.clk, self.mem, self.timing,
                                self._period_steps, ids=self.axi_ids, monitor=self.monitors)
        self.axi.drive_idle()
        self._started = True
        cocotb.start_soon(self._csb_watch())
        await self.reset()

    @staticmethod
    def _step_seconds() -> float:
        from cocotb.simulator import get_precision
        return 10.0 ** get_precision()

    async def reset(self, *, mid_layer: bool = False) -> None:
        """Assert dla_reset_rstn/direct_reset_ for ``reset_cycles``, release, then let the DUT
        idle ``post_reset_cycles`` (NVIDIA's player: 8192).

        The memory model drops everything in flight and drives its readies and response valids
        low while the DUT is in reset; at the end of the reset the DUT must drive no AXI valid
        (else a protocol error). Between traces (default) the memory is cleared and protocol
        errors are forgotten. ``mid_layer`` (a reset while a layer runs, issue 11 item 3): the
        memory and any protocol error recorded so far are kept, and until the next layer is
        enabled (a ``D_OP_ENABLE`` write with bit 0 set) any AXI request or W beat is a
        protocol error (a beat of the aborted layer after the reset)."""
        dut = self.dut
        self.in_reset = True
        self.axi.stop()
        if not mid_layer:
            self.mem = SparseMemory(self.address_width)
        self.axi.core.reset(self.mem, keep_error=mid_layer)
        self.axi.drive_quiet()
        await self._fall
        dut.dla_reset_rstn.value = 0
        dut.direct_reset_.value = 0
        self.c_valid.set(0)
        await Timer(self.reset_cycles * self.period_ns, "ns")
        await self._fall
        mon = self.axi.core.monitor
        still = self.axi.valids()
        if still and mon is not None and mon.error is None:
            mon.error = (f"AXI at the end of a {self.reset_cycles}-cycle reset: the DUT still "
                         f"drives {', '.join(still)}")
        self.axi.drive_idle()
        dut.dla_reset_rstn.value = 1
        dut.direct_reset_.value = 1
        await RisingEdge(self.clk)
        self._t0_step = get_sim_time("step")
        self.in_reset = False
        self.axi.start(self.mem, keep_error=mid_layer)
        if mon is not None:
            mon.quiet = mid_layer
        self.csb_mon.reset(keep_error=mid_layer)
        self.csb_reads = self.csb_writes = 0
        await self.wait_cycles(self.post_reset_cycles)

    def final_check(self) -> str | None:
        """At the end of a trace: the first protocol violation (AXI, CSB, a CSB request left
        without its response), or None."""
        self.csb_mon.check_idle(self.cycle)
        mon = self.axi.core.monitor
        if mon is not None:
            mon.check_idle(self.cycle)
        return self.axi.error or self.csb_mon.error

    # ---- CSB --------------------------------------------------------------------------------
    async def _csb_watch(self) -> None:
        """CSB monitor feed: every cycle a response output is high is one response (sampled at
        the falling edge; sleeps on their rising edges otherwise)."""
        v, w, mon = self.r_valid, self.r_wrc, self.csb_mon
        hv, hw = self.dut.nvdla2csb_valid, self.dut.nvdla2csb_wr_complete
        while True:
            await First(RisingEdge(hv), RisingEdge(hw))
            while True:
                await self._fall
                a, b = v.get(), w.get()
                if not (a or b):
                    break
                if self._t0_step is None or self.in_reset:
                    continue
                if a:
                    mon.response("read", self.cycle + 1)
                if b:
                    mon.response("write", self.cycle + 1)

    async def _csb_release(self, seq: int) -> None:
        await self._fall
        if self._csb_seq == seq:
            self.c_valid.set(0)

    async def _csb_issue(self, addr: int, wdat: int, write: int) -> None:
        """CSB request with the timing of NVIDIA's player: at a falling edge where csb2nvdla_ready is 1, drive one request
        for the next rising edge; valid drops one cycle later unless another request follows."""
        if addr & 3 or not 0 <= addr >> 2 < 1 << self.c_addr.width:
            raise TraceFailure(f"CSB address {addr:#x} is not a word address the port can carry")
        waited = 0
        while True:
            await self._fall
            if self.c_ready.get():
                break
            waited += 1
            if waited > self.csb_timeout:
                raise TraceFailure(f"csb2nvdla_ready stayed low for {self.csb_timeout} cycles "
                                   f"(request to {addr:#x})")
        self.c_addr.set(addr >> 2)
        self.c_wdat.set(wdat & 0xFFFFFFFF)
        self.c_write.set(write)
        self.c_nposted.set(0)
        self.c_valid.set(1)
        self.csb_mon.request("read" if not write else "posted", self.cycle + 1, addr)
        self._csb_seq += 1
        cocotb.start_soon(self._csb_release(self._csb_seq))

    async def reg_write(self, addr: int, value: int) -> None:
        self._check_error()
        await self._csb_issue(addr, value, 1)
        mon = self.axi.core.monitor
        if mon is not None and mon.quiet and value & 1 and addr in kickoff_addrs():
            mon.quiet = False                       # a layer is enabled: its traffic may start
        self.csb_writes += 1
        # the request was driven after a falling edge; the DUT samples it at the next rising edge
        self.write_accept_cycle = self.cycle + 1

    async def reg_read(self, addr: int) -> int:
        self._check_error()
        await self._csb_issue(addr, 0, 0)
        self.csb_reads += 1
        for _ in range(self.csb_timeout):
            await self._fall
            if self.r_valid.get():
                return self.r_data.get()
        raise TraceFailure(f"CSB read of {addr:#x} got no nvdla2csb_valid within "
                           f"{self.csb_timeout} cycles")

