"""The rtl ``Engine`` of the trace player: an ``NV_nvdla`` simulated by Verilator under cocotb.

Pieces (all on NVIDIA's NV_nvdla ports):

* memory (``memory=``): ``sim`` (default) - the in-simulation AXI memory of the testbench top
  (``sim/tb``: C++ through DPI-C, evaluated at every falling edge of ``dla_core_clk`` exactly
  where the Python adapter evaluates its core, same timing profiles and protocol monitor, so
  every profile gives the same cycles as ``python``: ``random`` draws CPython's random numbers
  for the same seed in the same order and sleeps while idle as the adapter does); no Python
  runs per cycle, ``mem`` is its backdoor (:class:`sim.tb.simmem.SimMemory`) and ``axi`` its
  counters/error (:class:`sim.tb.simmem.SimAxi`). ``python`` - the reference: the sparse
  memory :class:`verif.mem.SparseMemory` served by :class:`AxiResponder`. Addresses wrap at the
  width of ``nvdla_core2dbb_ar_araddr`` in both; ``mem_write``/``mem_fill``/``mem_read`` of the
  player go straight into the memory (no AXI traffic, no simulated time). The secondary memory
  (``sec_mem``, on ``nvdla_core2cvsram_*`` when the DUT has that port) is served the same way
  by the same kind of memory: with ``sim`` the in-simulation memory's second instance (port
  ``PORT_CV`` of :mod:`sim.tb.simmem`; ``cv_mem``/``cv_axi``), with ``python`` a second
  :class:`AxiResponder` with its own sparse memory; either way its own contents, the same
  timing profile with the seed + 1 (its own random stream), its own protocol monitor and
  counters (``cv_axi``: ``rd_beats``, ``wr_beats``, ``rd_reqs``, ``wr_reqs``). The
  in-simulation memory draws the ``random`` profile's numbers as Python does and sleeps when
  the adapter sleeps, so every profile gives the same cycles with both memories.
* :class:`AxiResponder` (``memory="python"``) - the cocotb adapter of the shared AXI4 slave core
  (:class:`verif.axi_slave.AxiSlaveCore`, timing profiles :class:`verif.axi_slave.MemTiming`:
  ``nvidia`` by default, i.e. read data 32 cycles after the request is taken, one request
  every other cycle) on ``nvdla_core2dbb_*``. The core is evaluated once per cycle at the
  falling edge of ``dla_core_clk`` and sets the slave inputs for the next rising edge (the
  ``random`` profile also waits for ``ReadOnly`` to see the settled ``rready``/``bready``).
  Speed: raw GPI handle access (no LogicArray conversions), only changed inputs are written,
  and while nothing is in flight the adapter sleeps until ``arvalid``/``awvalid``/``wvalid``
  rise or ``rready`` changes (the skipped cycles are reported to the core).
* the CSB master (timing as NVIDIA's player drives CSB) in ``dla_csb_clk`` (period
  ``csb_period_ns``, default the core's; the two clocks may be unrelated, the DUT crosses CSB
  into its core clock): one request per CSB cycle when ``csb2nvdla_ready``, posted writes
  (``nposted=0``), reads wait for ``nvdla2csb_valid`` (``csb_timeout`` CSB cycles at most).
* protocol monitors (:mod:`verif.monitors`): the AXI monitor inside the slave core sees every
  cycle the core evaluates (IDs allowed: ``axi_ids``); the CSB monitor counts the engine's own
  requests and every cycle ``nvdla2csb_valid``/``nvdla2csb_wr_complete`` is high (a coroutine
  woken by their rising edges, so no per-cycle cost while they are low). A violation fails the
  trace at the engine's next call (``_check_error``) or at the end of the trace
  (:meth:`RtlEngine.end_check`: first :meth:`RtlEngine.drain_csb`, then
  :meth:`RtlEngine.final_check`). The monitor's coroutine and ``reg_read`` wake at the same
  falling edge of ``dla_csb_clk``; when ``reg_read`` runs first, the monitor counts that
  response only after the caller's code up to its next ``await`` has run - so a trace that
  ends right after a read (the status reads of a timeout report) must let that edge finish
  before the end-of-trace check (issue 36 item 2).
* clocks (``clocks=``): ``tb`` (default with the testbench top of ``sim.build``) - generated
  inside the simulation (``sim/tb/top.py``: Verilog delay loops, no GPI callback per edge) and,
  when the two periods are equal, ``dla_csb_clk`` is ``dla_core_clk`` itself (one event per
  edge); ``gpi`` - cocotb ``Clock``s on the top's clock ports (one when the periods are equal).
  The engine awaits edges of the clocks the DUT gets (``tb_core_clk``/``tb_csb_clk`` of the
  testbench top, else the ports), so every mode sees the same edges.
* :class:`RtlEngine` - the ``verif.trace.player.Engine``: ``cycle`` counts ``dla_core_clk``
  rising edges since reset release (computed from simulation time, no per-cycle Python),
  ``wait_intr`` waits for an edge of ``dla_intr`` or a Timer, ``busy_units`` reads every unit's
  ``S_STATUS``; ``address_width`` is the AXI address width in bits.
"""
from __future__ import annotations

from dataclasses import replace

import cocotb
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import FallingEdge, First, ReadOnly, RisingEdge, Timer

from hdl.regmap import regmap_for
from verif.axi_slave import MASTER_OUTPUTS, SLAVE_INPUTS, AxiSlaveCore, MemTiming, port_name
from verif.mem import SparseMemory
from verif.monitors import CsbMonitor
from verif.trace.engine_common import SimEngineBase, kickoff_addrs
from verif.trace.player import TraceFailure

__all__ = ["AxiResponder", "CLOCKS", "MEMORIES", "MemTiming", "RtlEngine", "SparseMemory"]

#: memory models of the rtl engine: ``sim`` (in the simulation, C++ through DPI-C: sim/tb) and
#: ``python`` (:class:`AxiResponder`, the reference)
MEMORIES = ("sim", "python")
#: clock sources of the rtl engine (module docstring): ``tb`` (generated in the testbench top)
#: and ``gpi`` (cocotb ``Clock`` on the ports)
CLOCKS = ("tb", "gpi")

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
    memory model); ``await reset()`` between traces. ``period_ns``: ``dla_core_clk`` period
    (``cycle`` counts it); ``csb_period_ns``: ``dla_csb_clk`` period (default ``period_ns``),
    rounded to an even number of picoseconds. ``clocks``: ``tb`` or ``gpi`` (module docstring;
    a DUT without the testbench top always gets ``gpi``)."""

    name = "rtl"

    def __init__(self, dut, *, timing: MemTiming = MemTiming(), period_ns: int = 10,
                 reset_cycles: int = 20, post_reset_cycles: int = 8192, csb_timeout: int = 10_000,
                 axi_ids: dict | None = None, monitors: bool = True, memory: str = "sim",
                 csb_period_ns: float | None = None, clocks: str = "tb"):
        if memory not in MEMORIES:
            raise ValueError(f"memory={memory!r}: one of {', '.join(MEMORIES)}")
        if clocks not in CLOCKS:
            raise ValueError(f"clocks={clocks!r}: one of {', '.join(CLOCKS)}")
        if memory == "sim" and not hasattr(dut, "tb_mem_internal"):
            raise ValueError("memory='sim' needs the testbench top of sim.build (no tb_mem_internal "
                             "port on this DUT)")
        self.dut = dut
        #: ``sim``: the in-simulation AXI memory (C++, sim/tb); ``python``: AxiResponder
        self.memory = memory
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
        #: dla_csb_clk period in ns (default: the core period): the CSB master and monitor act
        #: on its falling edges; rounded to an even number of ps in start()
        self.csb_period_ns = period_ns if csb_period_ns is None else csb_period_ns
        if not self.csb_period_ns > 0:
            raise ValueError(f"csb_period_ns={csb_period_ns}: must be > 0")
        #: the testbench top's clock wires exist (sim/tb/top.py): edges are awaited there
        self._tb_clocks = hasattr(dut, "tb_clk_gen")
        #: ``tb`` or ``gpi`` (module docstring)
        self.clocks = clocks if self._tb_clocks else "gpi"
        self.csb_clk = dut.tb_csb_clk if self._tb_clocks else dut.dla_csb_clk
        self._csb_fall = FallingEdge(self.csb_clk)
        self.clk = dut.tb_core_clk if self._tb_clocks else dut.dla_core_clk
        #: AXI address width in bits (the memory wraps addresses there, as the RTL's adders do)
        self.address_width = len(dut.nvdla_core2dbb_ar_araddr)
        self._simlib = None
        if memory == "sim":
            from sim.tb.simmem import SimMemLib, SimMemory
            self._simlib = SimMemLib()
            self.mem = SimMemory(self._simlib, self.address_width)
        else:
            self.mem = SparseMemory(self.address_width)
        #: the secondary memory (``sec_mem``) behind ``nvdla_core2cvsram_*`` when the DUT has
        #: that port: the same kind of memory as ``mem`` (module docstring)
        self.has_cv = hasattr(dut, "nvdla_core2cvsram_ar_arvalid")
        self._cv_simlib = None
        if self.has_cv:
            if memory == "sim":
                from sim.tb.simmem import PORT_CV, SimMemLib, SimMemory
                self._cv_simlib = SimMemLib(PORT_CV)
                self.cv_mem = SimMemory(self._cv_simlib, self.address_width)
            else:
                self.cv_mem = SparseMemory(self.address_width)
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
        # periods in ps, even: whole ps half periods
        core_ps, csb_ps = (2 * max(1, round(ns * 500)) for ns in (self.period_ns, self.csb_period_ns))
        self.csb_period_ns = csb_ps / 1000
        # equal periods: one clock for both domains (both start low at the same time, so their
        # edges coincide anyway; one source makes each edge one event)
        same = csb_ps == core_ps
        if self._tb_clocks:
            dut.tb_csb_same.value = int(same)
        if self.clocks == "tb":
            dut.tb_core_half_ps.value = core_ps // 2
            dut.tb_csb_half_ps.value = csb_ps // 2
            dut.tb_clk_gen.value = 1
        else:
            if self._tb_clocks:
                dut.tb_clk_gen.value = 0
            cocotb.start_soon(Clock(dut.dla_core_clk, self.period_ns, "ns").start(start_high=False))
            if not (same and self._tb_clocks):
                cocotb.start_soon(Clock(dut.dla_csb_clk, csb_ps, "ps").start(start_high=False))
        for name in ("global_clk_ovr_on", "tmc2slcg_disable_clock_gating", "test_mode"):
            if hasattr(dut, name):
                getattr(dut, name).value = 0
        for n in ("c", "ma", "mb", "p", "o", "a"):
            name = f"nvdla_pwrbus_ram_{n}_pd"
            if hasattr(dut, name):
                getattr(dut, name).value = 0
        # the secondary memory interface (absent on nv_small): created below
        self.c_valid.set(0)
        self.c_addr.set(0)
        self.c_wdat.set(0)
        self.c_write.set(0)
        self.c_nposted.set(0)
        await Timer(1, "ns")
        self._period_steps = int(round(self.period_ns * 1e-9 / self._step_seconds()))
        self._csb_period_steps = int(round(self.csb_period_ns * 1e-9 / self._step_seconds()))
        # the CV SRAM: same timing profile, its own random stream (another seed)
        cv_timing = replace(self.timing, seed=self.timing.seed + 1)
        if self.memory == "sim":
            from sim.tb.simmem import MODE_IDLE, SimAxi
            self._simlib.configure(self.timing, len(dut.nvdla_core2dbb_r_rdata) // 8,
                                   self.address_width, self.axi_ids, self.monitors)
            self.axi = SimAxi(self._simlib)
            self.axi.set_mode(MODE_IDLE)
            if self.has_cv:
                self._cv_simlib.configure(cv_timing, len(dut.nvdla_core2cvsram_r_rdata) // 8,
                                          self.address_width, self.axi_ids, self.monitors)
                self.cv_axi = SimAxi(self._cv_simlib)
                self.cv_axi.set_mode(MODE_IDLE)
            dut.tb_mem_internal.value = 1
        else:
            if hasattr(dut, "tb_mem_internal"):
                dut.tb_mem_internal.value = 0
            self.axi = AxiResponder(dut, "nvdla_core2dbb", self.clk, self.mem, self.timing,
                                    self._period_steps, ids=self.axi_ids, monitor=self.monitors)
            self.axi.drive_idle()
            if self.has_cv:
                self.cv_axi = AxiResponder(dut, "nvdla_core2cvsram", self.clk, self.cv_mem,
                                           cv_timing, self._period_steps, ids=self.axi_ids,
                                           monitor=self.monitors)
                self.cv_axi.drive_idle()
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
        protocol error (a beat of the aborted layer after the reset).

        The in-simulation memory (``memory="sim"``) follows the same steps with one difference:
        its outputs change at falling edges only, so the readies drop at the falling edge where
        the reset is asserted (the Python responder drops them when ``reset`` is called)."""
        dut = self.dut
        sim = self.memory == "sim"
        self.in_reset = True
        ports = self._ports()
        if sim:
            from sim.tb.simmem import MODE_IDLE, MODE_QUIET, MODE_RUN
            for axi, mem, _ in ports:
                axi.set_mode(MODE_QUIET)
                if not mid_layer:
                    mem.clear()
                axi.reset(keep_error=mid_layer)
        else:
            for axi, _, _ in ports:
                axi.stop()
            if not mid_layer:
                self.mem = SparseMemory(self.address_width)
                if self.has_cv:
                    self.cv_mem = SparseMemory(self.address_width)
            ports = self._ports()
            for axi, mem, _ in ports:
                axi.core.reset(mem, keep_error=mid_layer)
                axi.drive_quiet()
        await self._fall
        dut.dla_reset_rstn.value = 0
        dut.direct_reset_.value = 0
        self.c_valid.set(0)
        await Timer(self.reset_cycles * self.period_ns, "ns")
        if sim:
            for axi, _, _ in ports:
                axi.set_mode(MODE_IDLE)       # idle outputs from the next falling edge on
        await self._fall
        for axi, _, prefix in ports:
            mon = axi.core.monitor
            still = [n for n in ("arvalid", "awvalid", "wvalid")
                     if _Sig(getattr(dut, f"{prefix}_{port_name(n)}")).get()]
            if still and mon is not None and mon.error is None:
                mon.error = (f"AXI at the end of a {self.reset_cycles}-cycle reset: the DUT still "
                             f"drives {', '.join(still)}")
            if not sim:
                axi.drive_idle()
        dut.dla_reset_rstn.value = 1
        dut.direct_reset_.value = 1
        await RisingEdge(self.clk)
        self._t0_step = get_sim_time("step")
        self.in_reset = False
        for axi, mem, _ in ports:
            if sim:
                axi.reset(keep_error=mid_layer)
                axi.set_mode(MODE_RUN)
            else:
                axi.start(mem, keep_error=mid_layer)
            if axi.core.monitor is not None:
                axi.core.monitor.quiet = mid_layer
        self.csb_mon.reset(keep_error=mid_layer)
        self.csb_reads = self.csb_writes = 0
        await self.wait_cycles(self.post_reset_cycles)

    def _ports(self) -> list:
        """``(axi, memory, port prefix)`` of the primary port and, when the DUT has it, the
        secondary one (``axi``: :class:`AxiResponder` or :class:`sim.tb.simmem.SimAxi`)."""
        out = [(self.axi, self.mem, "nvdla_core2dbb")]
        if self.has_cv:
            out.append((self.cv_axi, self.cv_mem, "nvdla_core2cvsram"))
        return out

    async def drain_csb(self) -> None:
        """Let the CSB monitor see the responses still due before the end-of-trace check: wait
        (whole ``dla_csb_clk`` cycles) while a read or non-posted write is outstanding, for at
        most ``csb_timeout`` CSB cycles after the oldest one was issued (``reg_read``'s own
        limit; a request older than that returns at once and stays outstanding, so a response
        that never comes is still reported by :meth:`final_check`). Needed after a trace that
        ends with a read (module docstring: the monitor may count the last read's response
        only after ``reg_read`` has returned it); costs no time when nothing is outstanding."""
        mon = self.csb_mon
        while mon.pending:
            waited = (self.cycle - mon.pending[0][1]) * self._period_steps
            if waited >= self.csb_timeout * self._csb_period_steps:
                return
            await self._csb_fall

    async def end_check(self) -> str | None:
        """At the end of a trace: :meth:`drain_csb`, then :meth:`final_check`, in the read-only
        phase of the current time step, then one simulator step later (so the caller may drive
        signals again). There both memories have evaluated the current clock edge: the
        in-simulation memory evaluates a falling edge before any cocotb coroutine runs, the
        Python adapter in one of them, possibly after the caller's; the AXI counters read after
        this call (``axi``/``cv_axi``: ``rd_beats`` ...) are the same with both memories even
        while reads are still in flight at the end of a trace (the ``random`` profile's
        latencies outlast short traces)."""
        await self.drain_csb()
        await ReadOnly()
        err = self.final_check()
        await Timer(1, "step")
        return err

    def final_check(self) -> str | None:
        """At the end of a trace: the first protocol violation (AXI, CSB, a CSB request left
        without its response), or None. Call :meth:`end_check` instead unless the CSB monitor
        is known to be up to date (see :meth:`drain_csb`)."""
        self.csb_mon.check_idle(self.cycle)
        mon = self.axi.core.monitor
        if mon is not None:
            mon.check_idle(self.cycle)
        cv_err = None
        if self.cv_axi is not None:
            if self.cv_axi.core.monitor is not None:
                self.cv_axi.core.monitor.check_idle(self.cycle)
            cv_err = self.cv_axi.error and f"CV SRAM port: {self.cv_axi.error}"
        return self.axi.error or cv_err or self.csb_mon.error

    # ---- CSB --------------------------------------------------------------------------------
    async def _csb_watch(self) -> None:
        """CSB monitor feed: every ``dla_csb_clk`` cycle a response output is high is one
        response (sampled at the CSB clock's falling edge; sleeps on their rising edges
        otherwise). Cycle numbers given to the monitor are core cycles."""
        v, w, mon = self.r_valid, self.r_wrc, self.csb_mon
        hv, hw = self.dut.nvdla2csb_valid, self.dut.nvdla2csb_wr_complete
        while True:
            await First(RisingEdge(hv), RisingEdge(hw))
            while True:
                await self._csb_fall
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
        await self._csb_fall
        if self._csb_seq == seq:
            self.c_valid.set(0)

    async def _csb_issue(self, addr: int, wdat: int, write: int) -> None:
        """CSB request with the timing of NVIDIA's player, in ``dla_csb_clk``: at a falling edge
        where csb2nvdla_ready is 1, drive one request for the next rising edge; valid drops one
        cycle later unless another request follows. ``csb_timeout`` counts CSB cycles."""
        if addr & 3 or not 0 <= addr >> 2 < 1 << self.c_addr.width:
            raise TraceFailure(f"CSB address {addr:#x} is not a word address the port can carry")
        waited = 0
        while True:
            await self._csb_fall
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
        if value & 1 and addr in kickoff_addrs(regmap_for(getattr(self, "cfg", None))):
            for axi in (self.axi, self.cv_axi):     # a layer is enabled: its traffic may start
                mon = axi.core.monitor if axi is not None else None
                if mon is not None and mon.quiet:
                    mon.quiet = False
        self.csb_writes += 1
        # the request was driven after a falling edge of dla_csb_clk; the DUT samples it at the
        # next rising edge of that clock, half a CSB period later (in core cycles)
        self.write_accept_cycle = self._core_cycle_at(
            get_sim_time("step") + self._csb_period_steps // 2)

    def _core_cycle_at(self, step: int) -> int:
        """``cycle`` at simulation time ``step``."""
        return 0 if self._t0_step is None else (step - self._t0_step) // self._period_steps

    async def reg_read(self, addr: int) -> int:
        self._check_error()
        await self._csb_issue(addr, 0, 0)
        self.csb_reads += 1
        for _ in range(self.csb_timeout):
            await self._csb_fall
            if self.r_valid.get():
                return self.r_data.get()
        raise TraceFailure(f"CSB read of {addr:#x} got no nvdla2csb_valid within "
                           f"{self.csb_timeout} cycles")

