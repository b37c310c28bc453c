# amaranth: UnusedElaboratable=no
"""The Tang Mega 138K board top and its bitstream flow (hdl/board/tang_mega_138k.py,
``python -m hdl.board``): the pins Amaranth's platform constrains (amaranth-boards' Pro Dock
pinout), the refusals, and (slow, about a minute) the whole flow on the reduced ``glb`` core:
synth_gowin, nextpnr-himbaechel-gowin and gowin_pack write a bitstream and the 50 MHz clock
is met."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("amaranth_boards", reason="the [fpga] extra (amaranth-boards) is not installed")

from hdl.board.__main__ import main                                      # noqa: E402
from hdl.board.tang_mega_138k import TangMega138kPlatform, TangMega138kTop  # noqa: E402
from hdl.board.top import NvdlaBoard                                      # noqa: E402
from hdl.config import NV_SMALL, get_config                               # noqa: E402


def test_pins_of_the_board():
    plan = TangMega138kPlatform().prepare(TangMega138kTop(NV_SMALL, core="glb"), name="b")
    cst = plan.files["b.cst"]
    locs = dict(re.findall(r'IO_LOC "(\w+)" (\w+);', cst))
    assert locs == {"clk50_0__io": "P16", "uart_0__rx__io": "P15", "uart_0__tx__io": "N16",
                    "led_0__io": "R26"}
    # the committed constraint file is the one the flow writes (line order aside)
    committed = Path(__file__).resolve().parents[3] / "constraints" / "tang_mega_138k.cst"
    assert set(committed.read_text().splitlines()) == set(cst.splitlines())


def test_refusals():
    with pytest.raises(ValueError, match="cycles per bit"):
        TangMega138kTop(NV_SMALL, baud=40_000_000)
    with pytest.raises(ValueError, match="core 'x' is not one of"):
        NvdlaBoard(NV_SMALL, divisor=4, core="x")
    with pytest.raises(ValueError, match="secondary memory interface"):
        NvdlaBoard(get_config("nv_medium_1024_full"), divisor=4)
    with pytest.raises(ValueError, match="power of two"):
        TangMega138kTop(NV_SMALL, mem_bytes=3000, core="glb")


def test_cli_usage_errors(tmp_path, capsys):
    assert main(["--config", "nope", "-o", str(tmp_path)]) == 2
    assert "unknown configuration 'nope'" in capsys.readouterr().err
    assert main(["--config", "nv_medium_1024_full", "-o", str(tmp_path)]) == 2
    assert "secondary memory interface" in capsys.readouterr().err


@pytest.mark.slow
def test_glb_bitstream(tmp_path, capsys):
    assert main(["--core", "glb", "-o", str(tmp_path)]) == 0
    fs = tmp_path / "nvdla_board.fs"
    assert fs.stat().st_size > 1_000_000
    assert set(fs.read_bytes()[:4096]) <= set(b"01\n")       # gowin_pack's text bitstream
    report = (tmp_path / "report.md").read_text()
    fmax = float(re.search(r"\| \S+ \| ([\d.]+) \| 50 \|", report).group(1))
    assert fmax >= 50
