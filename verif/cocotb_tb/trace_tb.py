"""cocotb test module: plays NVIDIA trace tests on the simulated NV_nvdla.

Driven by ``verif.trace.rtl_runner`` through the environment variable ``NVDLA_TRACE_TB`` (JSON):
``traces`` (trace directories, played in order), ``warmup`` (trace directories played first,
results not written), ``results`` (a JSON-lines file: one object
per finished trace, appended and flushed as each trace ends, so a crash loses only the trace
that was running), ``timing`` (the fields of ``verif.axi_slave.MemTiming``: read_latency,
accept_every, profile, seed), ``player`` (Player keyword arguments: intr_budget - an override of
the per-trace budget of ``verif.trace.budget.trace_budget`` -, poll_budget), ``engine``
(RtlEngine keyword arguments, e.g. ``axi_ids``, ``csb_period_ns`` - the ``dla_csb_clk``
period -, ``memory`` - ``sim``, the in-simulation AXI memory, or ``python``), ``config`` (the configuration spec, for the
cycle budget), ``waves`` (the FST path, for failure messages, or null), and ``mode``:

* ``traces`` (default): the DUT is reset and the memory cleared between traces;
* ``soak`` (issue 11 item 7): no reset between traces (memory cleared only): before each trace
  every unit's producer pointer is set to its consumer pointer (as software does) and the
  trace's register groups are renamed accordingly (:func:`verif.trace.soak.remap_groups`);
* ``reset_mid`` (issue 11 item 3): ``traces`` are pairs (aborted, clean): the aborted trace is
  played until its layer has written ``abort_after_wbeats`` (default 16) AXI W beats, then
  ``dla_reset_rstn`` is asserted (``RtlEngine.reset(mid_layer=True)``: the memory drops what
  is in flight, any later request or beat before the next layer is enabled is a protocol
  error, the memory image is kept and compared after the post-reset idle time), then the clean
  trace is played without another reset. One result per pair, named ``<aborted>+<clean>``.

Each result: name, status, message, cycles, wall, checks (where, base, size, expected, actual;
``data`` base64 only for failing checks), plus ``sim_cycles`` (clock cycles simulated for the
trace, from reset release), ``rd_beats``/``wr_beats`` (AXI beats), ``rd_reqs``/``wr_reqs``
(of the primary port; ``cv_rd_beats``/``cv_wr_beats``/``cv_rd_reqs``/``cv_wr_reqs``: of the
secondary port ``nvdla_core2cvsram`` when the DUT has it, else absent),
``budget`` (the interrupt budget used), ``sim_cpu`` (CPU seconds of the simulator process
for the trace), ``t_ready`` (``time.time()`` once the engine had started: clocks running, first
reset done; the runner turns it into the start-up time of the process). A protocol violation seen by the AXI or CSB monitor
(:mod:`verif.monitors`) fails the trace even when its CRCs match.
"""
from __future__ import annotations

import base64
import json
import os
import time

import cocotb
from cocotb.triggers import Timer

from verif.axi_slave import MemTiming
from verif.trace.parser import TraceSyntaxError, load_trace
from verif.trace.player import FAIL, PASS, TraceResult, play
from verif.trace.rtl_engine import RtlEngine
from verif.trace.v1 import V1Trace, is_v1_trace, load_v1_trace, play_v1

ENV = "NVDLA_TRACE_TB"
#: cycles a v1 trace's ``wait`` may take (``--max-cycles`` overrides it)
V1_INTR_BUDGET = 2_000_000


def result_to_json(res: TraceResult, **extra) -> dict:
    return {
        "name": res.name, "status": res.status, "message": res.message, "cycles": res.cycles,
        "wall": res.wall,
        "checks": [{"where": c.where, "base": c.base, "size": c.size, "expected": c.expected,
                    "actual": c.actual,
                    "data": "" if c.ok else base64.b64encode(c.data).decode()} for c in res.checks],
        **extra,
    }


def _config(spec: str | None):
    from hdl.config import NV_SMALL, get_config
    try:
        return get_config(spec) if spec else NV_SMALL
    except Exception:       # a file-list build named freely (e.g. "test_stub"): nv_small sizes
        return NV_SMALL


async def _protocol_verdict(eng: RtlEngine, res: TraceResult) -> TraceResult:
    # end_check, not final_check: the CSB responses still due (the last status read of a
    # timeout report) are counted first, so no false "request(s) without a response"
    err = await eng.end_check()
    if err and err not in res.message:
        res.message = f"protocol error: {err}" + (f"; {res.message}" if res.message else "")
        res.status = FAIL
    return res


@cocotb.test()
async def play_traces(dut):
    cfg = json.loads(os.environ[ENV])
    eng = RtlEngine(dut, timing=MemTiming(**cfg.get("timing", {})), **cfg.get("engine", {}))
    hw = _config(cfg.get("config"))
    waves = cfg.get("waves")
    on_timeout = (lambda: f"waveform: {waves}") if waves else None
    player = dict(cfg.get("player", {}))
    override = player.pop("intr_budget", None)
    mode = cfg.get("mode", "traces")
    eng.cfg = hw          # the DUT's configuration: its register map places trace registers
    await eng.start()
    t_ready = time.time()

    def load(tdir):
        try:
            if is_v1_trace(tdir):
                return load_v1_trace(tdir), None
            return load_trace(tdir), None
        except (TraceSyntaxError, FileNotFoundError, OSError) as e:
            return None, TraceResult(os.path.basename(str(tdir).rstrip("/")), FAIL,
                                     f"cannot load trace: {e}")

    async def run_one(trace, **kw):
        from verif.trace.budget import trace_budget
        if isinstance(trace, V1Trace):       # NVIDIA's v1 format (verif/trace/v1.py)
            budget = override or V1_INTR_BUDGET
            res = await play_v1(trace, eng, intr_budget=budget,
                                precision_check=cfg.get("own_rtl", True))
            return await _protocol_verdict(eng, res), budget
        budget = trace_budget(trace, hw, override)
        res = await play(trace, eng, on_timeout=on_timeout, intr_budget=budget, **player, **kw)
        return await _protocol_verdict(eng, res), budget

    def emit(out, res, c0, t0, p0=None, **extra):
        if res.status == FAIL and waves and waves not in res.message:
            res.message += f"; waveform: {waves}"
        ax, cv = eng.axi, eng.cv_axi
        if cv is not None:
            extra = {f"cv_{k}": getattr(cv, k) for k in ("rd_beats", "wr_beats", "rd_reqs",
                                                          "wr_reqs")} | extra
        cpu = None if p0 is None else time.process_time() - p0
        rec = result_to_json(res, sim_cycles=eng.cycle - c0, sim_wall=time.monotonic() - t0,
                             sim_cpu=cpu,
                             rd_beats=ax.rd_beats, wr_beats=ax.wr_beats,
                             rd_reqs=ax.rd_reqs, wr_reqs=ax.wr_reqs, t_ready=t_ready, **extra)
        out.write(json.dumps(rec) + "\n")
        out.flush()
        dut._log.info("%s: %s %s (cycles %s, %d simulated in %.1f s)", res.name, res.status,
                      res.message, res.cycles, rec["sim_cycles"], rec["sim_wall"])

    with open(cfg["results"], "a") as out:
        if mode == "reset_mid":
            dirs = cfg["traces"]
            for i in range(0, len(dirs) - 1, 2):
                if i:
                    await eng.reset()
                t0, c0 = time.monotonic(), eng.cycle
                res = await _reset_mid(eng, dirs[i], dirs[i + 1], load, run_one,
                                       int(cfg.get("abort_after_wbeats", 16)))
                emit(out, res, c0, t0)
            return
        first = True
        for wdir in cfg.get("warmup", []):      # played, not reported (run_rtl's ``warmup``)
            trace, _ = load(wdir)
            if trace is not None:
                await run_one(trace)
            await eng.reset()
        for tdir in cfg["traces"]:
            if not first and mode != "soak":
                await eng.reset()
            first = False
            t0, c0, p0 = time.monotonic(), eng.cycle, time.process_time()
            trace, res = load(tdir)
            budget = None
            if trace is not None:
                if mode == "soak":
                    from verif.trace.soak import prepare
                    trace = await prepare(eng, trace)
                res, budget = await run_one(trace)
            emit(out, res, c0, t0, p0, budget=budget)


async def _reset_mid(eng: RtlEngine, abort_dir, clean_dir, load, run_one, after_wbeats: int):
    """Issue 11 item 3 (module docstring); returns the clean trace's result, renamed and FAILed
    with the reason when the abort did not happen mid-layer or the memory changed after it."""
    aborted, bad = load(abort_dir)
    clean, bad2 = load(clean_dir)
    if bad or bad2:
        return bad or bad2
    name = f"{aborted.name}+{clean.name}"
    ax = eng.axi

    async def first():
        return await run_one(aborted)

    task = cocotb.start_soon(first())
    while not task.done() and ax.wr_beats < after_wbeats:
        await Timer(16 * eng.period_ns, "ns")
    if task.done():
        return TraceResult(name, FAIL, f"{aborted.name} finished ({task.result()[0].status}) "
                                       f"before {after_wbeats} W beats: no layer to abort")
    busy = await _busy_quick(eng)
    task.cancel()
    abort_cycle, wb = eng.cycle, ax.wr_beats
    # the aborted layer's output regions, as the memory holds them at the reset
    regions = [(c.args["base"], c.args["size"]) for c in aborted.commands if c.kind == "check_crc"]
    await eng.reset(mid_layer=True)
    snap = [eng.mem.read_bytes(b, s) for b, s in regions]
    res, _ = await run_one(clean)
    res.name = name
    after = [eng.mem.read_bytes(b, s) for b, s in regions]
    overlap = any(_overlaps(b, s, c.args["base"], c.args["size"]) for b, s in regions
                  for c in clean.commands if c.kind in ("mem_init", "check_crc"))
    if not overlap and snap != after and res.status == PASS:
        res.status = FAIL
        res.message = ("the aborted layer's output region changed after the reset "
                       "(memory written by a beat of the aborted layer)")
    note = (f"reset at cycle {abort_cycle} after {wb} W beats of {aborted.name} "
            f"(busy: {', '.join(busy) or 'none'})")
    res.message = f"{res.message}; {note}" if res.message else note
    if not busy and res.status == PASS:
        res.status = FAIL
        res.message = f"no unit was busy at the reset: not a mid-layer reset; {note}"
    return res


async def _busy_quick(eng: RtlEngine) -> list[str]:
    return await eng.busy_units()


def _overlaps(a: int, n: int, b: int, m: int) -> bool:
    return a < b + m and b < a + n
