"""``python -m hdl.board``: the Tang Mega 138K bitstream of the board top
(:func:`hdl.board.tang_mega_138k.build_bitstream`; docs/fpga.md, "Board top").

Exit status: 0 with the bitstream written, 2 on a usage error, 3 when a tool failed.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from hdl.board.top import CORES, DEFAULT_MEM_BYTES
from hdl.board.tang_mega_138k import DEFAULT_BAUD, board_lines, build_bitstream
from hdl.config import add_config_arguments, config_from_args
from hdl.pnr_gowin import GowinError


def main(argv=None) -> int:
    """Command line (module docstring); returns the exit status."""
    ap = argparse.ArgumentParser(prog="python -m hdl.board",
                                 description="Tang Mega 138K bitstream of NV_nvdla with its UART "
                                             "bridge and block-RAM memory (Gowin GW5A-138, "
                                             "open toolchain from PyPI)")
    add_config_arguments(ap)
    ap.add_argument("--core", choices=sorted(CORES), default="nvdla",
                    help="nvdla: the whole design (default); glb: CSB and GLB only, the flow "
                         "proven in minutes")
    ap.add_argument("--baud", type=int, default=DEFAULT_BAUD, help="UART rate (default %(default)s)")
    ap.add_argument("--mem-bytes", type=int, default=DEFAULT_MEM_BYTES,
                    help="on-chip memory behind the DBB port, a power of two (default %(default)s)")
    ap.add_argument("--seed", type=int, default=1, help="nextpnr seed")
    ap.add_argument("--nextpnr-opt", action="append", default=[], metavar="OPT",
                    help="extra nextpnr-himbaechel-gowin option (repeatable; a value joined with "
                         "'=', e.g. --nextpnr-opt=--placer-heap-beta=0.5)")
    ap.add_argument("--no-pack", action="store_true", help="stop after place and route")
    ap.add_argument("-o", "--out", default="build/tang_mega_138k", help="output directory")
    args = ap.parse_args(argv)
    try:
        cfg = config_from_args(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    t0 = time.monotonic()

    def say(msg):
        print(f"[{time.monotonic() - t0:7.1f} s] {msg}", file=sys.stderr, flush=True)
    try:
        b = build_bitstream(Path(args.out), cfg, core=args.core, baud=args.baud,
                            mem_bytes=args.mem_bytes, seed=args.seed, pack=not args.no_pack,
                            nextpnr_args=tuple(a for o in args.nextpnr_opt
                                               for a in o.split("=", 1)),
                            progress=say)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except GowinError as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
    text = "\n".join(board_lines(args.core, b)) + "\n"
    (Path(args.out) / "report.md").write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
