"""Bad input to the build tools (issue 6 item 7): ``python -m hdl.build`` output paths and
``--set``, Verilator file lists as NVIDIA ships them (``sim.build.parse_filelist``), and cache
directories named by configuration specs."""
from __future__ import annotations

import os
import time

import pytest

import hdl.build
import sim.build
from sim.build import TOPLEVEL, parse_filelist


@pytest.fixture
def no_elaboration(monkeypatch):
    """hdl.build.build replaced by a recorder: a test fails if it would elaborate."""
    calls = []

    def fake_build(cfg, out):
        calls.append((cfg, out))
        return [out / "NV_nvdla.v", out / "NV_nvdla.f"]
    monkeypatch.setattr(hdl.build, "build", fake_build)
    return calls


# ---- hdl.build -o / --c-header / --set -----------------------------------------------------

@pytest.mark.parametrize("make_out, why", [
    (lambda t: t / "file", "exists and is not a directory"),
    (lambda t: t / "file" / "sub", "Not a directory"),
])
def test_unwritable_out_is_one_line_exit_2_before_elaborating(tmp_path, capsys, no_elaboration,
                                                               make_out, why):
    (tmp_path / "file").write_text("x")
    out = make_out(tmp_path)
    assert hdl.build.main(["-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: -o {out}: ") and why in err
    assert no_elaboration == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_out_directory(tmp_path, capsys, no_elaboration):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        assert hdl.build.main(["-o", str(ro)]) == 2
    finally:
        ro.chmod(0o700)
    assert "Permission denied" in capsys.readouterr().err and no_elaboration == []


def test_unwritable_c_header_before_elaborating(tmp_path, capsys, no_elaboration):
    (tmp_path / "file").write_text("x")
    assert hdl.build.main(["-o", str(tmp_path / "out"), "--c-header", str(tmp_path / "file" / "h.h")]) == 2
    assert "error: --c-header" in capsys.readouterr().err and no_elaboration == []
    assert hdl.build.main(["-o", str(tmp_path / "out"), "--c-header", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err and no_elaboration == []


def test_set_overrides_the_configuration(tmp_path, capsys, no_elaboration):
    assert hdl.build.main(["-o", str(tmp_path), "--set", "primary_memif_max_burst=4"]) == 0
    (cfg, out), = no_elaboration
    assert cfg.primary_memif_max_burst == 4 and cfg.name == "nv_small+primary_memif_max_burst=4"
    with pytest.raises(SystemExit) as exc:        # argparse error: usage + one line, exit 2
        hdl.build.main(["-o", str(tmp_path), "--set", "primary_memif_max_burst=x"])
    assert exc.value.code == 2
    assert "primary_memif_max_burst=x" in capsys.readouterr().err


@pytest.mark.parametrize("spec, missing", [
    ("nv_small_256+mac_atomic_k=16", "the convolution pipeline for atomic K 16 with 8-channel "
                                     "memory atoms"),
    ("nv_large+secondary_memif_width=512", "a secondary memory interface 512 bits wide beside "
                                           "a 256-bit primary one"),
    ("nv_full", "Winograd convolution yet"),
    ("nv_small+bdma=True", "BDMA on AXI beats of 8 bytes (it moves 32-byte atoms)"),
    ("nv_small+weight_data_type=int8_int16_fp16", "int8 feature data with int8_int16_fp16 weights"),
    ("nv_large+rubik=True+rubik_contract=True", "RUBIK without both contract and split/merge"),
    ("nv_small+rubik=True+rubik_contract=True+rubik_reshape=True",
     "RUBIK on AXI beats of 8 bytes (it moves 32-byte atoms)"),
])
def test_unbuilt_configuration_is_one_line_exit_2(spec, missing, tmp_path, capsys, no_elaboration):
    """Issue 30 item 1: a configuration the RTL does not build yet stops hdl.build (and sim.build,
    and the trace CLI's rtl engine) with one line naming what is missing; nothing is built."""
    assert hdl.build.main(["--config", spec, "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {spec}: the RTL does not build ")
    assert missing in err and not no_elaboration
    assert sim.build.main(["--config", spec]) == 2
    assert missing in capsys.readouterr().err
    from verif.trace.__main__ import main as trace_main
    assert trace_main(["run", str(tmp_path), "--engine", "rtl", "--config", spec]) == 2
    assert missing in capsys.readouterr().err


def test_built_configurations_list_nothing_missing():
    from hdl.config import get_config
    from hdl.support import unbuilt
    for spec in ("nv_small", "nv_small_ew", "nv_small+primary_memif_max_burst=4", "nv_small_256",
                 "nv_small_256_full", "nv_medium_512", "nv_medium_1024_full", "nv_large",
                 "nv_medium_1024_full+secondary_memif=false",
                 "nv_full+winograd=False+batch=False+weight_compression=False",
                 "nv_small+feature_data_type=int8_int16_fp16",
                 "nv_full+winograd=False+batch=False+weight_compression=False"
                 "+feature_data_type=int8_int16_fp16"):
        assert unbuilt(get_config(spec)) == [], spec


def test_one_way_to_find_verilator():
    import sim.verilator
    assert hdl.build.verilator_env is sim.verilator.verilator_env
    assert not hasattr(hdl.build, "shutil")


# ---- sim.build file lists -------------------------------------------------------------------

@pytest.fixture
def rtl(tmp_path):
    """A small RTL tree: rtl/top.v, lib/ (a -y directory), vlib/cells.v, inc/defs.vh."""
    for f in ("rtl/top.v", "rtl/sub/b.v", "lib/ram.v", "vlib/cells.v", "inc/defs.vh", "inc2/x.vh"):
        p = tmp_path / f
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("// test\n")
    return tmp_path


def test_filelist_as_nvidia_ships_it(rtl, monkeypatch):
    (rtl / "rtl" / "sub" / "nested.f").write_text("b.v  // relative to this list\n")
    (rtl / "rtl" / "nested_F.f").write_text("-F sub/nested.f\n")
    f = rtl / "NV_nvdla.f"
    f.write_text(
        "# NVIDIA-style list\n"
        "--top-module NV_nvdla\n-o NV_nvdla_sim --Mdir obj_dir -cc --exe --build\n"
        "-j 4 --x-assign fast -CFLAGS \"-O2 -g\" --timing -Wno-fatal\n"
        "-y lib -v vlib/cells.v +libext+.v+.sv\n"
        "+incdir+inc+inc2 -Iinc\n+define+SYNTHESIS +define+NVDLA_DEPTH=4 -DFOO=1\n"
        "-f rtl/nested_F.f\n"
        "rtl/top.v\n")
    monkeypatch.chdir("/")                        # relative to the list, not the cwd
    fl = parse_filelist(f)
    r = rtl.resolve()
    assert fl.files == [r / "vlib/cells.v", r / "rtl/sub/b.v", r / "rtl/top.v"]
    assert fl.dirs == [r / "lib", r / "inc", r / "inc2", r / "inc"]
    assert fl.args == [
        "-j", "4", "--x-assign", "fast", "-CFLAGS", "-O2 -g", "--timing", "-Wno-fatal",
        "-y", str(r / "lib"), "-v", str(r / "vlib/cells.v"), "+libext+.v+.sv",
        f"+incdir+{r / 'inc'}", f"+incdir+{r / 'inc2'}", f"-I{r / 'inc'}",
        "+define+SYNTHESIS", "+define+NVDLA_DEPTH=4", "-DFOO=1",
        str(r / "rtl/sub/b.v"), str(r / "rtl/top.v")]
    # no option value is taken for a source file, none of the runner's options is kept
    assert not any(a in fl.args for a in ("NV_nvdla", "NV_nvdla_sim", "obj_dir", "--top-module", "-o"))


def test_filelist_quotes_values_with_spaces_for_verilator():
    assert sim.build._quote("-O2 -g") == '"-O2 -g"' and sim.build._quote("-O2") == "-O2"


@pytest.mark.parametrize("text, exc, match", [
    ("--top-module Other\nrtl/top.v\n", ValueError, rf"--top-module Other: the trace player drives {TOPLEVEL}"),
    ("rtl/top.v\n--Mdir\n", ValueError, r"option --Mdir needs a value"),
    ("rtl/top.v\n-CFLAGS \"-O2\n", ValueError, r"NV_nvdla.f:2: No closing quotation"),
    ("rtl/top.v\nrtl/gone.v\n", FileNotFoundError, r"NV_nvdla.f: missing source file\(s\): .*rtl/gone.v"),
    ("-v vlib/none.v rtl/top.v\n", FileNotFoundError, r"missing source file\(s\): .*vlib/none.v"),
    ("-f nope.f\n", FileNotFoundError, r"RTL file list .*nope.f does not exist"),
])
def test_bad_filelist_errors(rtl, text, exc, match):
    f = rtl / "NV_nvdla.f"
    f.write_text(text)
    with pytest.raises(exc, match=match):
        parse_filelist(f)


def test_filelist_option_value_is_not_a_missing_source(rtl):
    # the bug of issue 6: "--top-module NV_nvdla" read NV_nvdla as a source file
    f = rtl / "NV_nvdla.f"
    f.write_text("--top-module NV_nvdla -top NV_nvdla --prefix Vx -o sim rtl/top.v\n")
    assert parse_filelist(f).files == [(rtl / "rtl/top.v").resolve()]


# ---- sim.build: configuration specs as cache names, --set -----------------------------------

def test_prune_handles_config_specs(tmp_path, monkeypatch):
    monkeypatch.setattr(sim.build, "BUILD_ROOT", tmp_path)
    sim_dir = tmp_path / "sim"
    spec = "nv_small+primary_memif_max_burst=4"
    names = [f"{spec}-{i:016x}" for i in range(5)] + [
        f"{spec}-{9:016x}-fst", f"nv_small-{1:016x}", f"{spec}+sdp_lut=True-{1:016x}",
        f"nv_small_ew-{1:016x}", f"{spec}-scratch"]
    old = time.time() - 7200                      # older than _prune's min_age_s (1 h)
    for i, n in enumerate(names):
        (sim_dir / n).mkdir(parents=True)
        os.utime(sim_dir / n, (old + 10 * i, old + 10 * i))
    keep = sim_dir / names[4]
    sim.build._prune(spec, False, keep=keep)
    left = sorted(d.name for d in sim_dir.iterdir())
    # kept: the new build and the 2 newest others of this spec and variant (n=3); nothing of
    # another spec or variant is touched
    assert left == sorted(names[2:])


def test_sim_build_cli_takes_set(monkeypatch, capsys, tmp_path):
    seen = {}

    def fake_build_sim(config, **kw):
        seen["config"] = config
        raise sim.build.SimBuildError("stop here")
    monkeypatch.setattr(sim.build, "build_sim", fake_build_sim)
    assert sim.build.main(["--set", "primary_memif_max_burst=4"]) == 1
    assert seen["config"] == "nv_small+primary_memif_max_burst=4"
    with pytest.raises(SystemExit) as exc:
        sim.build.main(["--set", "nope=1"])
    assert exc.value.code == 2
    assert "no configuration parameter 'nope'" in capsys.readouterr().err
