"""AXI4 memory slave core and memory timing profiles, independent of any simulator.

:class:`AxiSlaveCore` is evaluated once per clock cycle between two rising edges (the cocotb
adapter in ``verif.trace.rtl_engine`` calls it at the falling edge; the Amaranth adapter in
``verif.trace.amaranth_engine`` after each tick). Each call of :meth:`AxiSlaveCore.drive` reads
the master's outputs through a mapping of zero-argument getters (``arvalid arid araddr arlen``,
``awvalid awid awaddr awlen``, ``wvalid wdata wstrb wlast``, ``rready``, ``bready``; read lazily,
only when needed) and returns the slave inputs that change for the next rising edge as
``[(name, value)]`` with names ``arready awready wready rvalid rid rdata rlast bvalid bid``.
With ``needs_settle`` (the ``random`` profile) the adapter then calls :meth:`settle` once the new
inputs have propagated, so the core knows ``rready``/``bready`` at that edge.

Timing (:class:`MemTiming`, chosen by profile name):

``nvidia`` (default) and ``fast`` - NVIDIA's trace player's memory as observed (facts, no code
taken from it): AR and AW are each accepted one request per ``accept_every`` cycles: when
``*valid`` is seen while ``*ready`` is high the request is taken and ``*ready`` goes low for
``accept_every - 1`` cycles (the request is taken one cycle before the master's handshake when
``accept_every`` > 1). Read data is read from memory when the request is taken and enters a
delay line of ``read_latency`` slots; every cycle one slot is pushed and, when ``rready`` is
high, one is popped onto ``rvalid``/``rdata`` (first beat ``read_latency`` cycles after the take,
beats of a burst on consecutive cycles, in request order). ``wready`` is always 1; one W beat per
cycle is written once its AW was taken; ``bvalid`` in the cycle the last beat is written (if
``bready``). ``nvidia``: read_latency 32, accept_every 2; ``fast``: 1 and 1.

``random`` (``seed``) - a stress memory, deterministic per seed: every cycle ``arready``,
``awready`` and ``wready`` are low with probability ``STALL`` (and ``*ready`` stays low
``accept_every - 1`` cycles after an accepted request); each read request and each write
response gets its own latency, uniform in 0..``read_latency`` cycles (default 500) after its
handshake; among the responses that are due, the ID served next is drawn at random (responses
of different IDs come back out of order; the order within one ID is the request order, as AXI
requires); a burst's beats are not interleaved with other IDs but ``rvalid``/``bvalid`` drop
for a cycle with probability ``STALL`` between beats and responses; once driven, a beat is held
until its handshake.

Bookkeeping: ``rd_beats``/``wr_beats`` (R and W beats), ``rd_reqs``/``wr_reqs`` (AR and AW
requests). Protocol errors are recorded in ``error`` (the first one), never raised from inside
the simulator: the core's own (``wlast`` not on the burst's last beat) and those of its
:class:`verif.monitors.AxiMonitor` (``monitor``, on by default: valid held until ready, payload
stable while stalled, W beats per burst, 4 KB boundaries, IDs, responses only to outstanding
requests): its ``requests`` at the end of :meth:`AxiSlaveCore.drive` (in-order profiles) or of
:meth:`AxiSlaveCore.settle` (``random``) on every cycle with a valid or a stalled channel, with
the values the next rising edge samples, and ``r_beat``/``b_resp`` where the core completes an
R beat or B response (in-order: driven while ``rready``/``bready`` is high, as the core has
always assumed; random: seen at ``settle``).
"""
from __future__ import annotations

import random
from collections import deque
from dataclasses import asdict, dataclass

from verif.monitors import AxiMonitor

PROFILES = ("nvidia", "fast", "random")
_DEFAULTS = {"nvidia": (32, 2), "fast": (1, 1), "random": (500, 1)}   # (read_latency, accept_every)
STALL = 0.25     # random profile: probability of a ready/valid stall cycle on each channel

SLAVE_INPUTS = ("arready", "awready", "wready", "rvalid", "rid", "rdata", "rlast", "bvalid", "bid")
MASTER_OUTPUTS = ("arvalid", "arid", "araddr", "arlen", "awvalid", "awid", "awaddr", "awlen",
                  "wvalid", "wdata", "wstrb", "wlast", "rready", "bready")


def port_name(name: str) -> str:
    """The flat AXI port suffix of a channel signal, e.g. ``arvalid`` -> ``ar_arvalid``
    (``<prefix>_ar_arvalid`` on NV_nvdla / NvdlaCore)."""
    ch = name[:2] if name[:2] in ("ar", "aw") else name[0]
    return f"{ch}_{name}"


class MemTimingError(ValueError):
    """An invalid memory timing option; the message names the option and the allowed values."""


@dataclass(frozen=True)
class MemTiming:
    """Memory timing of the simulated engines (see module docstring). Validated on construction.

    ``profile``: ``nvidia``, ``fast`` or ``random``. ``read_latency``: cycles (nvidia/fast: the
    delay line's length; random: the largest per-request latency), ``>= 0``. ``accept_every``:
    cycles per accepted AR/AW request, ``>= 1``. ``seed``: random profile's seed (an int).
    Raises :class:`MemTimingError` naming the option. Use :meth:`named` for a profile's
    defaults with overrides.
    """
    read_latency: int = 32
    accept_every: int = 2
    profile: str = "nvidia"
    seed: int = 0

    def __post_init__(self):
        if self.profile not in PROFILES:
            raise MemTimingError(f"--mem-profile {self.profile!r}: not one of {', '.join(PROFILES)}")
        for opt, v, lo in (("read-latency", self.read_latency, 0), ("accept-every", self.accept_every, 1)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise MemTimingError(f"--{opt} {v!r}: must be an integer >= {lo} (cycles)")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise MemTimingError(f"--seed {self.seed!r}: must be an integer")

    @classmethod
    def named(cls, profile: str = "nvidia", *, seed: int = 0, read_latency: int | None = None,
              accept_every: int | None = None) -> "MemTiming":
        """Profile ``profile`` with its default latency/acceptance rate unless overridden."""
        if profile not in PROFILES:
            raise MemTimingError(f"--mem-profile {profile!r}: not one of {', '.join(PROFILES)}")
        lat, acc = _DEFAULTS[profile]
        return cls(lat if read_latency is None else read_latency,
                   acc if accept_every is None else accept_every, profile, seed)

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        s = f"{self.profile} (read latency {self.read_latency}, accept every {self.accept_every}"
        return s + (f", seed {self.seed})" if self.profile == "random" else ")")


class AxiSlaveCore:
    """Cycle-based AXI4 slave serving ``mem`` (:class:`verif.mem.SparseMemory`-like: ``read_word``,
    ``write_word``) with ``data_bytes`` bytes per beat, timing ``timing`` (module docstring).

    Per cycle: ``changes = core.drive(get)`` (``get[name]()`` reads a master output), apply the
    changes, and if ``core.needs_settle`` call ``core.settle(get)`` once they have propagated.
    ``idle``: nothing in flight (an adapter may stop calling ``drive`` until a ``*valid`` rises;
    it then reports the skipped cycles with :meth:`skip`).
    """

    def __init__(self, mem, data_bytes: int, timing: MemTiming = MemTiming(), *,
                 monitor: "AxiMonitor | bool | None" = True, ids: dict | None = None):
        self.mem, self.nbytes, self.timing = mem, int(data_bytes), timing
        self.needs_settle = timing.profile == "random"
        if monitor is True:
            monitor = AxiMonitor(self.nbytes, ids)
        #: the protocol monitor (verif.monitors.AxiMonitor) or None
        self.monitor = monitor or None
        self._v = (0, 0, 0)               # arvalid, awvalid, wvalid read by the last drive()
        self.pre_ar = self.pre_aw = self._rb = self._bb = None
        self.reset()

    @property
    def error(self) -> str | None:
        """The first protocol error: the core's own, else its monitor's (None: none)."""
        if self._error is None and self.monitor is not None:
            return self.monitor.error
        return self._error

    @error.setter
    def error(self, v: str | None) -> None:
        self._error = v

    def reset(self, mem=None, *, keep_error: bool = False) -> None:
        """Forget everything in flight and the counters (``mem``: a new memory to serve).
        ``keep_error``: keep the first protocol error (a reset in the middle of a test: what
        was in flight is dropped, as a memory reset with the DUT would)."""
        err = self.error if keep_error else None
        if mem is not None:
            self.mem = mem
        t = self.timing
        self.rng = random.Random(t.seed)
        self.now = 0
        self.out = {"arready": 1, "awready": 1, "wready": 1, "rvalid": 0, "rid": 0, "rdata": 0,
                    "rlast": 0, "bvalid": 0, "bid": 0}
        self.aw_fifo: deque = deque()      # [id, addr, beats left - 1]
        self.w_fifo: deque = deque()       # (data, strb, last)
        self.ar_wait = self.aw_wait = 0
        self.rd_beats = self.wr_beats = self.rd_reqs = self.wr_reqs = 0
        self._error: str | None = None
        if self.monitor is not None:
            self.monitor.reset(keep_error=keep_error)
        if keep_error and self.error is None:
            self._error = err
        # nvidia/fast: in-order delay line
        self.b_fifo: deque = deque()       # ids
        self.r_fifo: deque = deque()       # (id, last, data) waiting to enter the delay line
        self.r0: deque = deque([t.read_latency] if t.read_latency else [])  # ints: empty slots
        self.r0_beats = 0
        # random: per-ID queues of [due, beats] / due, the beat or response being driven
        self.rq: dict[int, deque] = {}
        self.bq: dict[int, deque] = {}
        self.r_burst: deque = deque()
        self.r_cur = self.b_cur = None
        self.r_ready_seen = self.b_ready_seen = 0
        self.seen = False                  # a *valid was high in the last drive()

    @property
    def idle(self) -> bool:
        o = self.out
        return not (self.r_fifo or self.r0_beats or self.b_fifo or (self.aw_fifo and self.w_fifo)
                    or self.ar_wait or self.aw_wait or o["rvalid"] or o["bvalid"]
                    or self.r_cur or self.b_cur or self.r_burst or any(self.rq.values())
                    or any(self.bq.values()))

    def skip(self, cycles: int, rready: int) -> None:
        """``cycles`` cycles passed without ``drive`` while idle, with ``rready`` constant."""
        if cycles <= 0:
            return
        self.now += cycles
        if not self.needs_settle and not rready:      # the delay line filled with empty slots
            r0 = self.r0
            if r0 and type(r0[-1]) is int:
                r0[-1] += cycles
            else:
                r0.append(cycles)

    def _set(self, ch: list, name: str, v: int) -> None:
        if self.out[name] != v:
            self.out[name] = v
            ch.append((name, v))

    def _write_beat(self) -> None:
        """Write FIFOs -> memory, one beat; returns the ID of a finished burst, else None."""
        aw = self.aw_fifo[0]
        data, strb, last = self.w_fifo.popleft()
        if bool(last) != (aw[2] == 0) and self.error is None:
            self.error = (f"AXI write: wlast={last} but {aw[2]} beats remain for the burst "
                          f"at {aw[1]:#x} (awlen/wlast mismatch)")
        self.mem.write_word(aw[1], self.nbytes, data, strb)
        if last or aw[2] == 0:
            self.aw_fifo.popleft()
            return aw[0]
        aw[2] -= 1
        aw[1] += self.nbytes
        return None

    def _read_burst(self, get) -> list:
        nb = self.nbytes
        raw, ln, rid = get["araddr"](), get["arlen"](), get["arid"]()
        self.pre_ar = (rid, raw, ln)          # for the monitor: read once per cycle
        addr = raw & ~(nb - 1)
        n = ln + 1
        rw = self.mem.read_word
        self.rd_reqs += 1
        return [(rid, 1 if i == n - 1 else 0, rw(addr + i * nb, nb)) for i in range(n)]

    def drive(self, get) -> list:
        """One cycle; returns the slave inputs that change, ``[(name, value)]``."""
        self.now += 1
        self.seen = False
        # values of master outputs this cycle's drive read (None: not read), for the monitor
        self.pre_ar = self.pre_aw = self._rb = self._bb = None
        if self.needs_settle:
            return self._drive_random(get)
        ch = self._drive_inorder(get)
        mon = self.monitor
        if mon is not None:
            if self.seen or mon.any_stall:
                mon.requests(self.now, get, self.out, *self._v, pre=self)
            if self._rb is not None:
                mon.r_beat(self.now, *self._rb)
            if self._bb is not None:
                mon.b_resp(self.now, self._bb)
        return ch

    def settle(self, get) -> None:
        """Random profile: sample ``rready``/``bready`` as the next edge will see them."""
        o, mon = self.out, self.monitor
        if o["rvalid"]:
            self.r_ready_seen = get["rready"]()
        if o["bvalid"]:
            self.b_ready_seen = get["bready"]()
        if mon is not None:
            if self.seen or mon.any_stall:
                mon.requests(self.now, get, o, *self._v, pre=self)
            if o["rvalid"] and self.r_ready_seen:
                mon.r_beat(self.now, o["rid"], o["rlast"])
            if o["bvalid"] and self.b_ready_seen:
                mon.b_resp(self.now, o["bid"])

    # ---- nvidia / fast ----------------------------------------------------------------------------
    def _drive_inorder(self, get) -> list:
        ch: list = []
        acc = self.timing.accept_every - 1
        # write request
        awv = get["awvalid"]()
        if awv:
            self.seen = True
            if self.out["awready"]:
                p = self.pre_aw = (get["awid"](), get["awaddr"](), get["awlen"]())
                self.aw_fifo.append([p[0], p[1] & ~(self.nbytes - 1), p[2]])
                self.wr_reqs += 1
                self.aw_wait = acc
            elif self.aw_wait:
                self.aw_wait -= 1
        elif self.aw_wait and not self.out["awready"]:
            self.aw_wait -= 1
        self._set(ch, "awready", 1 if self.aw_wait == 0 else 0)
        # write data (wready is always 1)
        wv = get["wvalid"]()
        if wv:
            self.seen = True
            self.w_fifo.append((get["wdata"](), get["wstrb"](), get["wlast"]()))
            self.wr_beats += 1
        # read request
        arv = get["arvalid"]()
        self._v = (arv, awv, wv)
        if arv:
            self.seen = True
            if self.out["arready"]:
                self.r_fifo.extend(self._read_burst(get))
                self.ar_wait = acc
            elif self.ar_wait:
                self.ar_wait -= 1
        elif self.ar_wait and not self.out["arready"]:
            self.ar_wait -= 1
        self._set(ch, "arready", 1 if self.ar_wait == 0 else 0)
        if self.aw_fifo and self.w_fifo:
            done = self._write_beat()
            if done is not None:
                self.b_fifo.append(done)
        # read response: push one slot into the delay line, pop one when rready
        r0 = self.r0
        if self.r_fifo:
            r0.append(self.r_fifo.popleft())
            self.r0_beats += 1
        elif r0 and type(r0[-1]) is int:
            r0[-1] += 1
        else:
            r0.append(1)
        out = 0
        if r0 and get["rready"]():
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
                self._set(ch, "rid", rid)
                self._set(ch, "rlast", rlast)
                self._set(ch, "rdata", rdata)
                self.rd_beats += 1
                out = 1
                self._rb = (rid, rlast)           # driven with rready high: the next edge takes it
        self._set(ch, "rvalid", out)
        # write response
        out = 0
        if self.b_fifo and get["bready"]():
            bid = self.b_fifo.popleft()
            self._set(ch, "bid", bid)
            self._bb = bid
            out = 1
        self._set(ch, "bvalid", out)
        return ch

    # ---- random ---------------------------------------------------------------------------------
    def _latency(self) -> int:
        return self.rng.randint(0, self.timing.read_latency)

    def _pick_due(self, queues: dict) -> int | None:
        due = [i for i, q in queues.items() if q and q[0][0] <= self.now]
        return self.rng.choice(due) if due else None

    def _drive_random(self, get) -> list:
        ch: list = []
        rnd, now = self.rng.random, self.now
        acc = self.timing.accept_every - 1
        # handshakes of the edge that just passed (beats/responses held until taken)
        if self.r_cur is not None and self.r_ready_seen:
            self.r_cur = None
            self.rd_beats += 1
        if self.b_cur is not None and self.b_ready_seen:
            self.b_cur = None
        # AW / AR: ready for the next edge drawn first; a valid request meets it there
        vs = {}
        for c in ("aw", "ar"):
            wait = getattr(self, f"{c}_wait")
            rdy = 1 if wait == 0 and rnd() >= STALL else 0
            if wait:
                setattr(self, f"{c}_wait", wait - 1)
            valid = vs[c] = get[f"{c}valid"]()
            self.seen |= bool(valid)
            if rdy and valid:
                setattr(self, f"{c}_wait", acc)
                if c == "aw":
                    p = self.pre_aw = (get["awid"](), get["awaddr"](), get["awlen"]())
                    self.aw_fifo.append([p[0], p[1] & ~(self.nbytes - 1), p[2]])
                    self.wr_reqs += 1
                else:
                    beats = self._read_burst(get)
                    self.rq.setdefault(beats[0][0], deque()).append([now + 1 + self._latency(), beats])
            self._set(ch, f"{c}ready", rdy)
        # W
        rdy = 1 if rnd() >= STALL else 0
        valid = get["wvalid"]()
        self._v = (vs["ar"], vs["aw"], valid)
        self.seen |= bool(valid)
        if rdy and valid:
            self.w_fifo.append((get["wdata"](), get["wstrb"](), get["wlast"]()))
            self.wr_beats += 1
        self._set(ch, "wready", rdy)
        if self.aw_fifo and self.w_fifo:
            done = self._write_beat()
            if done is not None:
                self.bq.setdefault(done, deque()).append([now + 1 + self._latency(), done])
        # R: continue the current burst, else start the burst of a due ID (random choice)
        if self.r_cur is None and rnd() >= STALL:
            if not self.r_burst:
                i = self._pick_due(self.rq)
                if i is not None:
                    self.r_burst.extend(self.rq[i].popleft()[1])
            if self.r_burst:
                self.r_cur = self.r_burst.popleft()
                rid, rlast, rdata = self.r_cur
                self._set(ch, "rid", rid)
                self._set(ch, "rlast", rlast)
                self._set(ch, "rdata", rdata)
        self._set(ch, "rvalid", 0 if self.r_cur is None else 1)
        # B
        if self.b_cur is None and rnd() >= STALL:
            i = self._pick_due(self.bq)
            if i is not None:
                self.bq[i].popleft()
                self.b_cur = i
                self._set(ch, "bid", i)
        self._set(ch, "bvalid", 0 if self.b_cur is None else 1)
        if not self.out["rvalid"]:
            self.r_ready_seen = 0
        if not self.out["bvalid"]:
            self.b_ready_seen = 0
        return ch


def add_timing_arguments(parser) -> None:
    """The memory-timing options of every CLI that runs a simulated engine (the trace CLI,
    ``verif.sw``): ``--mem-profile``, ``--seed``, ``--read-latency``, ``--accept-every``; turn the
    parsed arguments into a :class:`MemTiming` with :func:`timing_from_args`."""
    parser.add_argument("--mem-profile", choices=PROFILES, default="nvidia",
                        help="rtl/amaranth memory timing: nvidia (default: read data 32 cycles after "
                             "the request, a request every other cycle, as NVIDIA's player), fast "
                             "(latency 1, a request every cycle), random (latency 0..500 per "
                             "request, random stalls, out-of-order IDs; see --seed)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the random memory profile (default 0)")
    parser.add_argument("--read-latency", type=int, default=None,
                        help="override the profile's read latency in cycles (nvidia 32, fast 1; "
                             "random: the largest latency, 500), >= 0")
    parser.add_argument("--accept-every", type=int, default=None,
                        help="override: the memory accepts one AXI request every N cycles "
                             "(nvidia 2, fast and random 1), >= 1")


def timing_from_args(args) -> MemTiming:
    """The :class:`MemTiming` of the options :func:`add_timing_arguments` added. Raises
    :class:`MemTimingError` naming a bad option."""
    return MemTiming.named(args.mem_profile, seed=args.seed, read_latency=args.read_latency,
                           accept_every=args.accept_every)
