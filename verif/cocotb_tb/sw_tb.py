"""cocotb test module: NVIDIA's runtime + firmware (``verif.sw``) on the simulated NV_nvdla.

Driven by ``verif.sw.runner`` (through ``verif.trace.rtl_runner._run_batch``) with the
environment variable ``NVDLA_SW_TB`` (JSON): ``program``, ``loadable``, ``image`` (or null),
``workdir`` (where the program runs and writes ``output.dimg``), ``timing`` (the fields of
``verif.axi_slave.MemTiming``), ``engine`` (RtlEngine keyword arguments), ``intr_budget``,
``debug``, ``waves`` (the FST path or null) and ``results`` (a JSON-lines file). One result
line: ``ok``, ``message``, ``exit_code``, ``stats``, ``cycles``, ``firmware_errors``, and the
simulation's ``sim_cycles``, ``sim_wall``, AXI ``rd_beats``/``wr_beats``/``rd_reqs``/``wr_reqs``
(primary port; ``cv_rd_beats``... of the secondary port ``nvdla_core2cvsram`` when the DUT has it).
The AXI and CSB monitors (``verif.monitors``) run throughout; a violation fails the run.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import cocotb

from verif.axi_slave import MemTiming
from verif.sw.host import run_program
from verif.trace.rtl_engine import RtlEngine

ENV = "NVDLA_SW_TB"


@cocotb.test()
async def run_sw(dut):
    cfg = json.loads(os.environ[ENV])
    eng = RtlEngine(dut, timing=MemTiming(**cfg.get("timing", {})), **cfg.get("engine", {}))
    if cfg.get("config"):
        from hdl.config import get_config
        # the DUT's configuration: its register map (v1 on nv_full) places the host's status
        # reads and kick-off counts (verif/sw/host.py)
        eng.cfg = get_config(cfg["config"])
    waves = cfg.get("waves")
    await eng.start()
    t0, c0 = time.monotonic(), eng.cycle
    out = await run_program(eng, Path(cfg["program"]), Path(cfg["loadable"]), Path(cfg["workdir"]),
                            image=Path(cfg["image"]) if cfg.get("image") else None,
                            intr_budget=int(cfg["intr_budget"]), debug=bool(cfg.get("debug")),
                            probe=tuple(cfg["probe"]) if cfg.get("probe") else None,
                            on_timeout=(lambda: f"waveform: {waves}") if waves else None)
    err = await eng.end_check()
    msg, ok = out.message, out.ok
    if err and err not in msg:
        msg = f"protocol error: {err}" + (f"; {msg}" if msg else "")
        ok = False
    if not ok and waves and waves not in msg:
        msg += f"; waveform: {waves}"
    ax = eng.axi
    rec = {"ok": ok, "message": msg, "exit_code": out.exit_code, "stats": out.stats,
           "cycles": out.cycles, "firmware_errors": out.firmware_errors,
           "timeline": out.timeline,
           "probe": out.probe.hex() if out.probe is not None else None,
           "log": str(out.log) if out.log else None,
           "sim_cycles": eng.cycle - c0, "sim_wall": time.monotonic() - t0,
           "rd_beats": ax.rd_beats, "wr_beats": ax.wr_beats, "rd_reqs": ax.rd_reqs,
           "wr_reqs": ax.wr_reqs}
    if eng.cv_axi is not None:
        rec.update({f"cv_{k}": getattr(eng.cv_axi, k) for k in ("rd_beats", "wr_beats", "rd_reqs",
                                                                "wr_reqs")})
    with open(cfg["results"], "a") as fh:
        fh.write(json.dumps(rec) + "\n")
    dut._log.info("verif.sw: %s %s (cycles %s, %d simulated)", "PASS" if ok else "FAIL", msg,
                  out.cycles, rec["sim_cycles"])
