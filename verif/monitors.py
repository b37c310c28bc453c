"""Protocol monitors of the simulated engines: AXI4 (the DUT's DBB master port) and CSB.

Both are simulator-independent and cheap: they are fed by the engines from values the engines
read anyway, and record the FIRST violation as a message (``error``) naming the clock cycle and
the channel; they never raise from inside a simulator callback. The engines turn a recorded
violation into a trace failure (``verif.trace.engine_common.SimEngineBase._check_error``).

:class:`AxiMonitor` (issue 11 item 5) - called by :class:`verif.axi_slave.AxiSlaveCore` once per
evaluated cycle with the master's ``*valid`` values and the slave's ``*ready`` values that the
next rising edge will sample (a handshake is ``valid and ready`` in that snapshot). Checks, for
the master (the DUT):

* AR, AW, W: once ``*valid`` is high without ``*ready``, it stays high and the payload
  (AR/AW: id, addr, len; W: data, strb, last) stays unchanged until the handshake;
* AR/AW: a burst never crosses a 4 KB boundary; the ID is one of the allowed read/write IDs
  (the client table: ``hdl/dma/clients.py`` for our RTL, :func:`nvidia_ids` of the
  configuration for NVIDIA's);
* W: each burst has ``awlen + 1`` beats with ``wlast`` on the last one and only there (W beats
  may come before their AW, as AXI allows);
* after a reset in the middle of a layer (``quiet``, set by the engine until the next layer is
  enabled) no request or W beat at all; after :meth:`AxiMonitor.reset` nothing from before it
  may complete (an R/B response to a request from before it; W beats without an AW are flagged
  by :meth:`AxiMonitor.check_idle` at the end of a trace); the rtl engine also checks that no
  ``*valid`` is high at the end of the reset pulse;

and, for the slave (our memory model, so that a broken model cannot hide a DUT bug): every R
beat and B response answers an outstanding request of its ID, ``rlast`` on a burst's last beat.

Cost: the slave core calls :meth:`AxiMonitor.requests` only on cycles with a request/data
valid or a stalled channel (``any_stall``), and :meth:`AxiMonitor.r_beat`/``b_resp`` at its
own R/B handshakes; AR/AW payloads are read on the cycles a
request is presented, W data only while W is stalled (else just ``wlast``).

:class:`CsbMonitor` - fed with the engine's own CSB requests and the DUT's responses
(``nvdla2csb_valid`` for reads, ``nvdla2csb_wr_complete`` for non-posted writes): exactly one
response per read or non-posted write, in request order, none for posted writes.
"""
from __future__ import annotations

from collections import deque

__all__ = ["AxiMonitor", "CsbMonitor", "NVIDIA_NV_SMALL_IDS", "nvidia_ids", "our_ids"]

#: AXI IDs of NVIDIA's nv_small MCIF (nvdla/hw nv_small, vmod/nvdla/nocif: the ``tieoff_axid_*``
#: defines - sdp 1, pdp 2, cdp 3, sdp_b 5, sdp_n 6, cdma_dat 8, cdma_wt 9 - for the read clients
#: cdma_dat, cdma_wt, sdp, sdp_b, sdp_n, pdp, cdp and the write clients sdp, pdp, cdp).
NVIDIA_NV_SMALL_IDS = {"read": frozenset({1, 2, 3, 5, 6, 8, 9}), "write": frozenset({1, 2, 3})}


def nvidia_ids(cfg) -> dict:
    """Allowed AXI IDs of NVIDIA's RTL of configuration ``cfg`` (an ``NvdlaConfig``): its MCIF's
    ``tieoff_axid_*`` defines (nvdla/hw master, vmod/include/NV_NVDLA_MCIF_define.vh: bdma 0,
    sdp 1, pdp 2, cdp 3, rbk 4, sdp_b 5, sdp_n 6, sdp_e 7, cdma_dat 8, cdma_wt 9) for the clients
    the configuration has: nv_small's set, plus SDP's EW read client (7) with ``sdp_ew`` (seen
    on NVIDIA's nv_large: arid 7 in sdp_13x4x29_ew_lut_int8), BDMA (0) and RUBIK (4) reading
    and writing when the configuration has them."""
    read, write = set(NVIDIA_NV_SMALL_IDS["read"]), set(NVIDIA_NV_SMALL_IDS["write"])
    if getattr(cfg, "sdp_ew", False):
        read.add(7)
    for flag, axid in (("bdma", 0), ("rubik", 4)):
        if getattr(cfg, flag, False):
            read.add(axid)
            write.add(axid)
    return {"read": frozenset(read), "write": frozenset(write)}

PAGE_4K = 4096
_AR, _AW, _W = ("arid", "araddr", "arlen"), ("awid", "awaddr", "awlen"), ("wdata", "wstrb", "wlast")


def our_ids(cfg) -> dict:
    """Allowed AXI IDs of the project's RTL for configuration ``cfg`` (an ``NvdlaConfig``): the
    MCIF client indices of its client table (hdl/dma/clients.py: ``read_clients(cfg)`` where
    the table depends on the configuration, e.g. SDP's ERDMA with ``sdp_ew``)."""
    from hdl.dma import clients
    reads, writes = clients.read_clients(cfg), clients.write_clients(cfg)
    return {"read": frozenset(i for i, c in enumerate(reads) if c is not None),
            "write": frozenset(i for i, c in enumerate(writes) if c is not None)}


class AxiMonitor:
    """AXI4 protocol checks (module docstring) for a port of ``data_bytes`` bytes per beat.

    ``ids``: ``{"read": set, "write": set}`` of allowed ARID/AWID values (None: any ID).
    ``error``: the first violation (``"AXI <channel> at cycle N: ..."``) or None.
    Counters: ``handshakes`` per channel (``ar aw w r b``).
    """

    def __init__(self, data_bytes: int, ids: dict | None = None):
        self.nbytes = int(data_bytes)
        self.read_ids = None if ids is None else frozenset(ids["read"])
        self.write_ids = None if ids is None else frozenset(ids["write"])
        self.reset()

    # ---- state -----------------------------------------------------------------------------
    def reset(self, keep_error: bool = False) -> None:
        """The DUT and the memory forget everything in flight (after a reset of both): nothing
        issued before may complete afterwards. ``keep_error``: keep ``error`` and the counters
        (a reset in the middle of a test), else start afresh."""
        self.stall = {"ar": None, "aw": None, "w": None}   # payload held since a stalled cycle
        #: a channel is stalled: :meth:`cycle` must run even on a cycle without any valid
        self.any_stall = False
        self.rd_out: dict[int, deque] = {}   # id -> deque of beats left per burst
        self.wr_resp: dict[int, int] = {}    # id -> write bursts complete, awaiting B
        self.aw_lens: deque = deque()        # (id, beats) of AWs whose W beats are not all seen
        self.w_early: deque = deque()        # beat counts of W bursts that came before their AW
        self.w_beats = 0                     # beats of the current W burst so far
        #: set by an engine after a reset in the middle of a layer: until it clears it (the
        #: next layer is enabled) any AXI request or W beat is a beat of the aborted layer
        self.quiet = False
        if not keep_error or not hasattr(self, "error"):
            self.error: str | None = None
            self.handshakes = dict.fromkeys(("ar", "aw", "w", "r", "b"), 0)

    def _fail(self, now: int, ch: str, msg: str) -> None:
        if self.error is None:
            self.error = f"AXI {ch.upper()} at cycle {now}: {msg}"

    @property
    def outstanding(self) -> dict:
        """``{"read": bursts awaiting R beats, "write": bursts awaiting W beats or B}``."""
        return {"read": sum(len(q) for q in self.rd_out.values()),
                "write": len(self.aw_lens) + sum(self.wr_resp.values())}

    # ---- per cycle ---------------------------------------------------------------------------
    def cycle(self, now: int, get, out: dict, arv: int, awv: int, wv: int, pre=None) -> None:
        """One cycle: ``arv``/``awv``/``wv`` the master's valids and ``out`` the slave's outputs
        (``*ready``, ``rvalid``/``rid``/``rlast``, ``bvalid``/``bid``) as the next rising edge
        (cycle ``now``) samples them; ``get[name]()`` reads any other master output. ``pre``
        (optional): an object whose ``pre_ar``/``pre_aw`` ((id, addr, len)) hold values already
        read this cycle, or None. (The slave core calls :meth:`requests` and reports its R/B
        handshakes itself with :meth:`r_beat`/:meth:`b_resp`, which is cheaper.)"""
        self.requests(now, get, out, arv, awv, wv, pre)
        if out["rvalid"] and get["rready"]():
            self.r_beat(now, out["rid"], out["rlast"])
        if out["bvalid"] and get["bready"]():
            self.b_resp(now, out["bid"])

    def requests(self, now: int, get, out: dict, arv: int, awv: int, wv: int, pre=None) -> None:
        """The AR, AW and W channels of one cycle (see :meth:`cycle`); needed only on cycles
        with a valid or a stalled channel (``any_stall``)."""
        st = self.stall
        if self.quiet and (arv or awv or wv):
            names = [n for n, v in (("arvalid", arv), ("awvalid", awv), ("wvalid", wv)) if v]
            self._fail(now, names[0][:-5], f"{', '.join(names)} after a reset in the middle of a "
                                           "layer, before any layer was enabled again (a request "
                                           "or beat of the aborted layer)")
        if arv or st["ar"] is not None:
            self._request(now, "ar", _AR, get, arv, out["arready"], pre and pre.pre_ar)
        if awv or st["aw"] is not None:
            self._request(now, "aw", _AW, get, awv, out["awready"], pre and pre.pre_aw)
        if wv or st["w"] is not None:
            self._wbeat(now, get, wv, out["wready"])
        self.any_stall = st["ar"] is not None or st["aw"] is not None or st["w"] is not None

    def _held_error(self, now: int, ch: str, held: tuple, p, names: tuple) -> None:
        if p is None:
            self._fail(now, ch, f"{ch}valid dropped before {ch}ready (stalled since cycle "
                                f"{held[0]}, {self._fmt(names, held[1])})")
        else:
            self._fail(now, ch, f"payload changed while stalled (since cycle {held[0]}): "
                                f"{self._fmt(names, held[1])} -> {self._fmt(names, p)}")

    @staticmethod
    def _fmt(names: tuple, vals: tuple) -> str:
        return " ".join(f"{n}={v:#x}" for n, v in zip(names, vals))

    def _request(self, now: int, ch: str, names: tuple, get, valid: int, ready: int,
                 p: tuple | None = None) -> None:
        held = self.stall[ch]
        if not valid:
            self._held_error(now, ch, held, None, names)
            self.stall[ch] = None
            return
        if p is None:
            p = (get[names[0]](), get[names[1]](), get[names[2]]())
        if held is None:
            # a new request: outstanding from the first cycle it is presented (a master may not
            # withdraw it; the in-order memory profiles take it one cycle before the handshake)
            self._new_request(now, ch, p, names)
        elif p != held[1]:
            self._held_error(now, ch, held, p, names)
        if not ready:
            if held is None:
                self.stall[ch] = (now, p)
            return
        self.stall[ch] = None
        self.handshakes[ch] += 1

    def _new_request(self, now: int, ch: str, p: tuple, names: tuple) -> None:
        rid, addr, ln = p
        ids = self.read_ids if ch == "ar" else self.write_ids
        if ids is not None and rid not in ids:
            self._fail(now, ch, f"{ch}id {rid} is not a client ID (allowed {sorted(ids)}; "
                                f"{self._fmt(names, p)})")
        start = addr & ~(self.nbytes - 1)
        end = start + (ln + 1) * self.nbytes - 1
        if start // PAGE_4K != end // PAGE_4K:
            self._fail(now, ch, f"burst {start:#x}..{end:#x} ({ln + 1} beats) crosses a 4 KB "
                                f"boundary ({self._fmt(names, p)})")
        if ch == "ar":
            self.rd_out.setdefault(rid, deque()).append(ln + 1)
        else:
            self.aw_lens.append((rid, ln + 1))
            if self.w_early:
                self._match_w(now, self.w_early.popleft())

    def _match_w(self, now: int, beats: int) -> None:
        """A W burst of ``beats`` beats (ended by wlast) against the oldest AW."""
        wid, n = self.aw_lens.popleft()
        if beats != n:
            self._fail(now, "w", f"burst of {beats} beats ended by wlast, but its AW (id {wid}) "
                                 f"has awlen {n - 1} ({n} beats)")
        self.wr_resp[wid] = self.wr_resp.get(wid, 0) + 1

    def _wbeat(self, now: int, get, valid: int, ready: int) -> None:
        held = self.stall["w"]
        if not valid:
            self._held_error(now, "w", held, None, _W)
            self.stall["w"] = None
            return
        if held is None and ready:             # not stalled: only wlast matters
            last = get["wlast"]()
        else:
            p = (get["wdata"](), get["wstrb"](), get["wlast"]())
            if held is not None and p != held[1]:
                self._held_error(now, "w", held, p, _W)
            if not ready:
                if held is None:
                    self.stall["w"] = (now, p)
                return
            self.stall["w"] = None
            last = p[2]
        self.handshakes["w"] += 1
        self.w_beats += 1
        if self.aw_lens and not self.w_early:
            wid, n = self.aw_lens[0]
            if not last and self.w_beats >= n:
                self._fail(now, "w", f"beat {self.w_beats} of a {n}-beat burst (awid {wid}, "
                                     f"awlen {n - 1}) without wlast")
            elif last:
                self._match_w(now, self.w_beats)
                self.w_beats = 0
        elif last:
            self.w_early.append(self.w_beats)
            self.w_beats = 0

    def check_idle(self, now: int) -> None:
        """At the end of a trace: no W data is left without its AW (or the reverse)."""
        if self.w_early or self.w_beats:
            self._fail(now, "w", f"{len(self.w_early)} complete W burst(s) and {self.w_beats} "
                                 "beat(s) without an AW at the end of the trace")
        elif self.aw_lens:
            wid, n = self.aw_lens[0]
            self._fail(now, "aw", f"{len(self.aw_lens)} AW burst(s) without their W beats at "
                                  f"the end of the trace (oldest: awid {wid}, {n} beats)")

    def r_beat(self, now: int, rid: int, rlast: int) -> None:
        """An R handshake at cycle ``now``."""
        self.handshakes["r"] += 1
        q = self.rd_out.get(rid)
        if not q:
            self._fail(now, "r", f"R beat with rid {rid}: no read of that ID outstanding")
            return
        q[0] -= 1
        if bool(rlast) != (q[0] == 0):
            self._fail(now, "r", f"rlast={rlast} with {q[0]} beats of the burst (rid {rid}) left")
        if q[0] == 0 or rlast:
            q.popleft()

    def b_resp(self, now: int, bid: int) -> None:
        """A B handshake at cycle ``now``."""
        self.handshakes["b"] += 1
        n = self.wr_resp.get(bid, 0)
        if n == 0:
            self._fail(now, "b", f"B response with bid {bid}: no complete write burst of that "
                                 "ID outstanding")
            return
        self.wr_resp[bid] = n - 1


class CsbMonitor:
    """CSB request/response bookkeeping (module docstring). The engine calls
    :meth:`request` for every request the DUT accepted (``kind``: ``read``, ``posted`` or
    ``nposted``) and :meth:`response` for every cycle a response is presented (``kind``:
    ``read`` for ``nvdla2csb_valid``, ``write`` for ``nvdla2csb_wr_complete``).
    ``error``: the first violation (``"CSB at cycle N: ..."``) or None."""

    def __init__(self):
        self.error: str | None = None
        self.reset()

    def reset(self, keep_error: bool = False) -> None:
        """Forget outstanding requests (the DUT was reset); ``keep_error``: keep ``error``."""
        self.pending: deque = deque()       # (kind expected: read/write, cycle, address)
        self.requests = self.responses = 0
        if not keep_error:
            self.error = None

    def _fail(self, now, msg: str) -> None:
        if self.error is None:
            self.error = f"CSB at cycle {now}: {msg}"

    def request(self, kind: str, now: int, addr: int) -> None:
        self.requests += 1
        if kind == "read":
            self.pending.append(("read", now, addr))
        elif kind == "nposted":
            self.pending.append(("write", now, addr))
        elif kind != "posted":
            raise ValueError(f"CSB request kind {kind!r}")

    def response(self, kind: str, now: int) -> None:
        self.responses += 1
        what = "nvdla2csb_valid" if kind == "read" else "nvdla2csb_wr_complete"
        if not self.pending:
            self._fail(now, f"{what} with no request outstanding"
                            + (" (posted writes get no response)" if kind == "write" else ""))
            return
        exp, t, addr = self.pending[0]
        if exp != kind:
            self._fail(now, f"{what} while the oldest outstanding request is a "
                            f"{'read' if exp == 'read' else 'non-posted write'} of {addr:#x} "
                            f"(cycle {t})")
            return
        self.pending.popleft()

    def check_idle(self, now) -> None:
        """At the end of a trace: every request got its response."""
        if self.pending:
            kind, t, addr = self.pending[0]
            self._fail(now, f"{len(self.pending)} request(s) without a response (oldest: "
                            f"{kind} of {addr:#x} at cycle {t})")
