"""cocotb test module: plays NVIDIA trace tests on the simulated NV_nvdla.

Driven by ``verif.trace.rtl_runner`` through the environment variable ``NVDLA_TRACE_TB`` (JSON):
``traces`` (trace directories, played in order, DUT reset and memory cleared between them),
``results`` (a JSON-lines file: one object per finished trace, appended and flushed as each
trace ends, so a crash loses only the trace that was running), ``timing`` (the fields of
``verif.axi_slave.MemTiming``: read_latency, accept_every, profile, seed),
``player`` (Player keyword arguments: intr_budget, poll_budget), ``engine`` (RtlEngine keyword
arguments), ``waves`` (the FST path, for failure messages, or null).

Each result: name, status, message, cycles, wall, checks (where, base, size, expected, actual;
``data`` base64 only for failing checks), plus ``sim_cycles`` (clock cycles simulated for the
trace, from reset release), ``rd_beats``/``wr_beats`` (AXI beats), ``rd_reqs``/``wr_reqs``.
"""
from __future__ import annotations

import base64
import json
import os
import time

import cocotb

from verif.axi_slave import MemTiming
from verif.trace.parser import TraceSyntaxError, load_trace
from verif.trace.player import FAIL, TraceResult, play
from verif.trace.rtl_engine import RtlEngine

ENV = "NVDLA_TRACE_TB"


def result_to_json(res: TraceResult, **extra) -> dict:
    return {
        "name": res.name, "status": res.status, "message": res.message, "cycles": res.cycles,
        "wall": res.wall,
        "checks": [{"where": c.where, "base": c.base, "size": c.size, "expected": c.expected,
                    "actual": c.actual,
                    "data": "" if c.ok else base64.b64encode(c.data).decode()} for c in res.checks],
        **extra,
    }


@cocotb.test()
async def play_traces(dut):
    cfg = json.loads(os.environ[ENV])
    eng = RtlEngine(dut, timing=MemTiming(**cfg.get("timing", {})), **cfg.get("engine", {}))
    waves = cfg.get("waves")
    on_timeout = (lambda: f"waveform: {waves}") if waves else None
    await eng.start()
    first = True
    with open(cfg["results"], "a") as out:
        for tdir in cfg["traces"]:
            if not first:
                await eng.reset()
            first = False
            t0 = time.monotonic()
            c0 = eng.cycle
            try:
                trace = load_trace(tdir)
            except (TraceSyntaxError, FileNotFoundError, OSError) as e:
                res = TraceResult(os.path.basename(tdir.rstrip("/")), FAIL, f"cannot load trace: {e}")
            else:
                res = await play(trace, eng, on_timeout=on_timeout, **cfg.get("player", {}))
            if res.status == FAIL and waves and waves not in res.message:
                res.message += f"; waveform: {waves}"
            ax = eng.axi
            rec = result_to_json(res, sim_cycles=eng.cycle - c0, sim_wall=time.monotonic() - t0,
                                 rd_beats=ax.rd_beats, wr_beats=ax.wr_beats,
                                 rd_reqs=ax.rd_reqs, wr_reqs=ax.wr_reqs)
            out.write(json.dumps(rec) + "\n")
            out.flush()
            dut._log.info("%s: %s %s (cycles %s, %d simulated in %.1f s)", res.name, res.status,
                          res.message, res.cycles, rec["sim_cycles"], rec["sim_wall"])
