"""The rtl ``Engine`` of the trace player: an ``NV_nvdla`` simulated by Verilator under cocotb.

Pieces (all on NVIDIA's NV_nvdla ports):

* :class:`SparseMemory` - the DRAM behind the AXI port: 64 KiB pages allocated on first write, so
  regions at 0x80000000.. of ~11 MB cost only what they use. ``mem_write``/``mem_fill``/
  ``mem_read`` of the player go straight into it (no AXI traffic, no simulated time).
* :class:`AxiResponder` - the AXI4 slave on ``nvdla_core2dbb_*``, our own memory model whose
  timing matches what NVIDIA's Verilator trace player was observed to do (the player the
  reference cycle table was measured with; facts below, no code taken from it). It is evaluated
  once per cycle between two rising edges (at the falling edge of ``dla_core_clk``), reads the
  DUT's outputs and sets its inputs for the next rising edge:

  - request acceptance (``accept_every``, default 2): AR and AW each independently. When
    ``*valid`` is seen while the model's ``*ready`` was high, the request is taken and ``*ready``
    is driven low for ``accept_every - 1`` cycles; so a request is handshaken every
    ``accept_every`` cycles at most, and (as in NVIDIA's model) the model takes the request one
    cycle before the DUT's handshake.
  - read latency (``read_latency``, default 32): read data is read from memory when the request is
    taken and enters a delay line that holds ``read_latency`` entries; every cycle one entry (a
    beat, or an empty slot when nothing is waiting) is pushed and, when ``rready`` is high, one is
    popped onto ``rvalid/rdata``. The first beat of a request is thus driven ``read_latency``
    cycles after the model takes the request (31 after the DUT's AR handshake); beats of one burst
    follow on consecutive cycles; ``rready`` low stalls the line and lengthens the latency (as in
    NVIDIA's model).
  - writes: ``wready`` is always 1; one W beat per cycle is written to memory once its AW was
    taken; the write response ``bvalid`` is driven in the cycle the last beat is written (if
    ``bready``).
  - bookkeeping: R and W beats are counted (``rd_beats``, ``wr_beats``, compare with the
    reference table's axi_rd_beats/axi_wr_beats).

  Cost: one Python wake-up per cycle while a transfer is in flight; when nothing is in flight the
  model sleeps until ``arvalid``/``awvalid``/``wvalid``/``rready`` change.
* the CSB master (timing as NVIDIA's player drives CSB): one request per cycle when ``csb2nvdla_ready``, posted
  writes (``nposted=0``), reads wait for ``nvdla2csb_valid`` (``csb_timeout`` cycles at most).
* :class:`RtlEngine` - the ``verif.trace.player.Engine``: ``cycle`` counts ``dla_core_clk``
  rising edges since reset release (computed from simulation time, no per-cycle Python),
  ``wait_intr`` waits for an edge of ``dla_intr`` or a Timer, ``busy_units`` reads every unit's
  ``S_STATUS``.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import cocotb
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import FallingEdge, First, RisingEdge, Timer

from hdl.regmap import REGMAP
from verif.trace.player import TraceFailure

PAGE_BITS = 16
PAGE = 1 << PAGE_BITS
_MASK = PAGE - 1
_DEPOSIT = 0  # cocotb _GPISetAction.DEPOSIT (inertial write)


class SparseMemory:
    """Byte-addressed sparse memory (64 KiB pages, zero where never written)."""

    def __init__(self):
        self.pages: dict[int, bytearray] = {}

    def _page(self, n: int) -> bytearray:
        p = self.pages.get(n)
        if p is None:
            p = self.pages[n] = bytearray(PAGE)
        return p

    def write(self, addr: int, data: bytes) -> None:
        off, n = 0, len(data)
        while off < n:
            a = addr + off
            po = a & _MASK
            k = min(PAGE - po, n - off)
            self._page(a >> PAGE_BITS)[po:po + k] = data[off:off + k]
            off += k

    def fill(self, addr: int, size: int, value: int = 0) -> None:
        end = addr + size
        a = addr
        while a < end:
            po = a & _MASK
            k = min(PAGE - po, end - a)
            pn = a >> PAGE_BITS
            if value == 0 and k == PAGE:
                self.pages.pop(pn, None)
            elif value != 0 or pn in self.pages:
                self._page(pn)[po:po + k] = bytes([value]) * k
            a += k

    def read(self, addr: int, size: int) -> bytes:
        out = bytearray()
        end = addr + size
        a = addr
        while a < end:
            po = a & _MASK
            k = min(PAGE - po, end - a)
            p = self.pages.get(a >> PAGE_BITS)
            out += p[po:po + k] if p is not None else bytes(k)
            a += k
        return bytes(out)

    def read_word(self, addr: int, nbytes: int) -> int:
        """Little-endian word at ``addr`` (aligned to ``nbytes``, so within one page)."""
        p = self.pages.get(addr >> PAGE_BITS)
        if p is None:
            return 0
        po = addr & _MASK
        return int.from_bytes(p[po:po + nbytes], "little")

    def write_word(self, addr: int, nbytes: int, value: int, strb: int) -> None:
        p = self._page(addr >> PAGE_BITS)
        po = addr & _MASK
        full = (1 << nbytes) - 1
        data = value.to_bytes(nbytes, "little")
        if strb == full:
            p[po:po + nbytes] = data
        else:
            for i in range(nbytes):
                if strb >> i & 1:
                    p[po + i] = data[i]


@dataclass(frozen=True)
class MemTiming:
    """Memory timing model parameters (see module docstring). Defaults = NVIDIA's player."""
    read_latency: int = 32
    accept_every: int = 2


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
    """AXI4 memory slave on the ``<prefix>_{aw,w,b,ar,r}_*`` ports with the player timing of the module docstring."""

    def __init__(self, dut, prefix: str, clk, mem: SparseMemory, timing: MemTiming = MemTiming(),
                 period_steps: int = 1):
        self.mem, self.timing, self.clk = mem, timing, clk
        self.period = period_steps

        def s(ch, name):
            return _Sig(getattr(dut, f"{prefix}_{ch}_{name}"))
        self.awvalid, self.awready, self.awid, self.awlen, self.awaddr = (
            s("aw", n) for n in ("awvalid", "awready", "awid", "awlen", "awaddr"))
        self.wvalid, self.wready, self.wdata, self.wstrb, self.wlast = (
            s("w", n) for n in ("wvalid", "wready", "wdata", "wstrb", "wlast"))
        self.bvalid, self.bready, self.bid = (s("b", n) for n in ("bvalid", "bready", "bid"))
        self.arvalid, self.arready, self.arid, self.arlen, self.araddr = (
            s("ar", n) for n in ("arvalid", "arready", "arid", "arlen", "araddr"))
        self.rvalid, self.rready, self.rid, self.rlast, self.rdata = (
            s("r", n) for n in ("rvalid", "rready", "rid", "rlast", "rdata"))
        self.nbytes = self.rdata.width // 8
        self._edge_handles = [getattr(dut, f"{prefix}_{c}_{c}valid") for c in ("ar", "aw", "w")]
        self._rready_handle = getattr(dut, f"{prefix}_r_rready")
        self._task = None
        self.error: str | None = None
        self.reset_state()

    def reset_state(self) -> None:
        self.aw_fifo: deque = deque()      # [id, addr, len]
        self.w_fifo: deque = deque()       # (data, strb, last)
        self.b_fifo: deque = deque()       # id
        self.r_fifo: deque = deque()       # (id, last, data) waiting to enter the delay line
        # delay line: ints are runs of empty slots, tuples are beats
        self.r0: deque = deque([self.timing.read_latency] if self.timing.read_latency else [])
        self.r0_beats = 0
        self.ar_rdy = self.aw_rdy = 1
        self.ar_wait = self.aw_wait = 0
        self.rvalid_on = self.bvalid_on = 0
        self.rd_beats = self.wr_beats = 0
        self.rd_reqs = self.wr_reqs = 0

    def drive_idle(self) -> None:
        self.awready.set(1)
        self.wready.set(1)
        self.arready.set(1)
        self.bvalid.set(0)
        self.rvalid.set(0)

    def start(self) -> None:
        self.stop()
        self.reset_state()
        self.drive_idle()
        self._task = cocotb.start_soon(self._run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    @property
    def idle(self) -> bool:
        return not (self.r_fifo or self.r0_beats or self.b_fifo or (self.aw_fifo and self.w_fifo)
                    or self.ar_wait or self.aw_wait or self.rvalid_on or self.bvalid_on)

    def _eval(self) -> bool:
        """One cycle of the memory model. Returns True if any *valid was seen."""
        nb = self.nbytes
        seen = False
        # write request
        if self.awvalid.get():
            seen = True
            if self.aw_rdy:
                self.aw_fifo.append([self.awid.get(), self.awaddr.get() & ~(nb - 1), self.awlen.get()])
                self.wr_reqs += 1
                self.aw_wait = self.timing.accept_every - 1
            elif self.aw_wait:
                self.aw_wait -= 1
        elif self.aw_wait and not self.aw_rdy:
            self.aw_wait -= 1
        rdy = 1 if self.aw_wait == 0 else 0
        if rdy != self.aw_rdy:
            self.aw_rdy = rdy
            self.awready.set(rdy)
        # write data
        if self.wvalid.get():
            seen = True
            self.w_fifo.append((self.wdata.get(), self.wstrb.get(), self.wlast.get()))
            self.wr_beats += 1
        # read request
        if self.arvalid.get():
            seen = True
            if self.ar_rdy:
                addr = self.araddr.get() & ~(nb - 1)
                n = self.arlen.get() + 1
                rid = self.arid.get()
                rw = self.mem.read_word
                for i in range(n):
                    self.r_fifo.append((rid, 1 if i == n - 1 else 0, rw(addr + i * nb, nb)))
                self.rd_reqs += 1
                self.ar_wait = self.timing.accept_every - 1
            elif self.ar_wait:
                self.ar_wait -= 1
        elif self.ar_wait and not self.ar_rdy:
            self.ar_wait -= 1
        rdy = 1 if self.ar_wait == 0 else 0
        if rdy != self.ar_rdy:
            self.ar_rdy = rdy
            self.arready.set(rdy)
        # write FIFOs -> memory, one beat per cycle
        if self.aw_fifo and self.w_fifo:
            aw = self.aw_fifo[0]
            data, strb, last = self.w_fifo.popleft()
            if bool(last) != (aw[2] == 0) and self.error is None:
                self.error = (f"AXI write: wlast={last} but {aw[2]} beats remain for the burst "
                              f"at {aw[1]:#x} (awlen/wlast mismatch)")
            self.mem.write_word(aw[1], nb, data, strb)
            if last:
                self.aw_fifo.popleft()
                self.b_fifo.append(aw[0])
            else:
                aw[2] -= 1
                aw[1] += nb
        # read response: push one entry into the delay line, pop one when rready
        r0 = self.r0
        if self.r_fifo:
            r0.append(self.r_fifo.popleft())
            self.r0_beats += 1
        elif r0 and type(r0[-1]) is int:
            r0[-1] += 1
        else:
            r0.append(1)
        out = 0
        if self.rready.get() and r0:
            head = r0[0]
            if type(head) is int:
                if head == 1:
                    r0.popleft()
                else:
                    r0[0] = head - 1
            else:
                r0.popleft()
                self.r0_beats -= 1
                rid, rlast, rdata = head
                self.rid.set(rid)
                self.rlast.set(rlast)
                self.rdata.set(rdata)
                self.rd_beats += 1
                out = 1
        if out != self.rvalid_on:
            self.rvalid_on = out
            self.rvalid.set(out)
        # write response
        out = 0
        if self.b_fifo and self.bready.get():
            self.bid.set(self.b_fifo.popleft())
            out = 1
        if out != self.bvalid_on:
            self.bvalid_on = out
            self.bvalid.set(out)
        return seen

    async def _run(self):
        fall = FallingEdge(self.clk)
        P = self.period
        await fall
        while True:
            seen = self._eval()
            if seen or not self.idle:
                await fall
                continue
            # Nothing in flight: sleep until a request/data valid or rready changes. Skipped
            # cycles only push empty slots into the delay line (and pop them when rready).
            rready = self.rready.get()
            t_last = get_sim_time("step")
            await First(*(RisingEdge(h) for h in self._edge_handles), self._rready_handle.value_change)
            await fall
            skipped = (get_sim_time("step") - t_last) // P - 1
            if not rready and skipped > 0:
                if self.r0 and type(self.r0[-1]) is int:
                    self.r0[-1] += skipped
                else:
                    self.r0.append(skipped)


def _unit_status_regs():
    out = []
    for u in REGMAP.units:
        for r in u.registers:
            if r.name == "S_STATUS":
                out.append((u.name, u.base + r.offset, r))
    return out


class RtlEngine:
    """``Engine`` on an NV_nvdla DUT under cocotb. Call ``await start()`` once (clocks, reset,
    memory model); ``await reset()`` between traces. ``period_ns``: clock period."""

    name = "rtl"

    def __init__(self, dut, *, timing: MemTiming = MemTiming(), period_ns: int = 10,
                 reset_cycles: int = 20, post_reset_cycles: int = 8192, csb_timeout: int = 10_000):
        self.dut = dut
        self.timing = timing
        self.period_ns = period_ns
        self.reset_cycles, self.post_reset_cycles = reset_cycles, post_reset_cycles
        self.csb_timeout = csb_timeout
        self.clk = dut.dla_core_clk
        self.mem = SparseMemory()
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
                                self._period_steps)
        self.axi.drive_idle()
        self._started = True
        await self.reset()

    @staticmethod
    def _step_seconds() -> float:
        from cocotb.simulator import get_precision
        return 10.0 ** get_precision()

    async def reset(self) -> None:
        """Assert dla_reset_rstn/direct_reset_ for ``reset_cycles``, clear memory and the AXI
        model, release, then let the DUT idle ``post_reset_cycles`` (NVIDIA's player: 8192)."""
        dut = self.dut
        self.axi.stop()
        self.axi.drive_idle()
        await self._fall
        dut.dla_reset_rstn.value = 0
        dut.direct_reset_.value = 0
        self.c_valid.set(0)
        self.mem = SparseMemory()
        self.axi.mem = self.mem
        await Timer(self.reset_cycles * self.period_ns, "ns")
        await self._fall
        dut.dla_reset_rstn.value = 1
        dut.direct_reset_.value = 1
        await RisingEdge(self.clk)
        self._t0_step = get_sim_time("step")
        self.axi.start()
        self.csb_reads = self.csb_writes = 0
        await self.wait_cycles(self.post_reset_cycles)

    def _check_error(self) -> None:
        if self.axi is not None and self.axi.error:
            raise TraceFailure(f"AXI protocol error at cycle {self.cycle}: {self.axi.error}")

    # ---- memory ---------------------------------------------------------------------------
    async def mem_write(self, addr: int, data: bytes) -> None:
        self.mem.write(addr, data)

    async def mem_fill(self, addr: int, size: int, value: int) -> None:
        self.mem.fill(addr, size, value)

    async def mem_read(self, addr: int, size: int) -> bytes:
        return self.mem.read(addr, size)

    # ---- CSB --------------------------------------------------------------------------------
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
        self._csb_seq += 1
        cocotb.start_soon(self._csb_release(self._csb_seq))

    async def reg_write(self, addr: int, value: int) -> None:
        self._check_error()
        await self._csb_issue(addr, value, 1)
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

    async def busy_units(self) -> list[str]:
        out = []
        for unit, addr, reg in _unit_status_regs():
            try:
                v = await self.reg_read(addr)
            except TraceFailure:
                out.append(f"{unit}(S_STATUS read timed out)")
                continue
            groups = [f.name[-1] for f in reg.fields if (v & f.mask)]
            if groups:
                out.append(f"{unit}(S_STATUS={v:#x})")
        return out
