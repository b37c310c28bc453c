"""Generated register programs played on one unit and on the model (shared by the unit tests
of tests/hdl that take their programs from verif.gen: test_cdp_unit_16, test_pdp_unit_16, ...).

:func:`program` turns a generated program (``verif.gen.<kind>.generate``) into its memory images,
register writes and output regions; :func:`model_after` plays the writes on the numpy model
(verif.model.Nvdla); :func:`unit_memory` is the unit's memory with the same images (for
tests/hdl/test_pdp_perf.py's ``run_unit``); :func:`check_outputs` compares the output regions."""
from __future__ import annotations

import re
import warnings

from verif.mem import SparseMemory
from verif.model import Nvdla

__all__ = ["program", "model_after", "unit_memory", "check_outputs", "WRITE", "LOAD"]

#: a trace .cfg register write and memory load line (verif/gen/writer.py)
WRITE = re.compile(r"reg_write\(NVDLA_(\w+)\.(\w+)_0, (0x[0-9a-fA-F]+)\);")
LOAD = re.compile(r'mem_load\(pri_mem, (0x[0-9a-fA-F]+), "([^"]+)"\);')


def program(generate, seed: int, cfg, layers: int):
    """``(loads, writes, outs)`` of ``generate(seed, cfg, layers=layers)``: memory images
    ``(base, bytes)``, register writes ``(unit, register, value)`` in order, output regions
    ``(base, size)``. Intr_notify waits are dropped (not needed with at most two layers, one per
    ping-pong group)."""
    prog = generate(seed, cfg, layers=layers)
    loads, writes = [], []
    for line in prog.writer.lines:
        if not isinstance(line, str):
            continue
        if mw := WRITE.fullmatch(line.split("    //")[0]):
            writes.append((mw[1], mw[2], int(mw[3], 16)))
        elif ml := LOAD.fullmatch(line):
            loads.append((int(ml[1], 16), bytes(prog.writer.images[ml[2]])))
    outs = [o for lay in prog.layers for o in lay.out]
    return loads, writes, outs


def model_after(cfg, loads, writes, *, quiet: bool = False) -> Nvdla:
    """The model of ``cfg`` after the images ``loads`` and the register ``writes`` (``quiet``:
    its warnings, e.g. programming-guide limitations, suppressed)."""
    model = Nvdla(cfg)
    for base, data in loads:
        model.mem.write(base, data)
    with warnings.catch_warnings():
        if quiet:
            warnings.simplefilter("ignore")
        for unit, reg, value in writes:
            model.write(f"NVDLA_{unit}.{reg}_0", value)
    return model


def unit_memory(cfg, loads) -> SparseMemory:
    """A memory of ``cfg``'s address width holding the images ``loads``."""
    mem = SparseMemory(cfg.mem_address_width)
    for base, data in loads:
        mem.write(base, data)
    return mem


def check_outputs(mem, model, outs) -> None:
    """Assert that every output region ``(base, size)`` holds the model's bytes in ``mem``."""
    for base, size in outs:
        assert mem.read_bytes(base, size) == model.mem.read_bytes(base, size), \
            f"output at {base:#x}"
