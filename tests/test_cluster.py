"""Regressions on Dask distributed (``verif.cluster``, issue 35): ``--cluster`` parsing and its
one-line errors (exit 2), the reports, and a real cluster on this machine (``dask scheduler``
and two ``dask worker`` processes on loopback addresses, stopped at the end) running nv_small
traces on the model and rtl engines and a 20-program sweep through ``--cluster
tcp://127.0.0.1:PORT`` with the same verdicts, cycles and CRCs as the local runs; a worker
killed mid-batch loses no item; a task over its wall-clock limit is reported as failed; a
failing program's trace directory comes back from the worker.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from verif import cluster as dc
from verif.shared import have_shared, nvdla_dir, shared_dir
from verif.trace.__main__ import main as trace_main
from needs import needs_verilator

REPO = Path(__file__).resolve().parents[1]
needs_shared = pytest.mark.skipif(not have_shared(), reason="../shared/nvdla (NVIDIA traces) is absent")

#: small rtl-manifest traces (a few thousand cycles each)
RTL_TRACES = ("sdp_1x1x1_pass_through_int8", "pdp_8x8x32_1x1_int8_0", "cdp_8x8x32_lrn3_int8_0",
              "sdp_8x8x32_bypass_int8_0")
#: the batch a worker is killed in the middle of
KILL_TRACES = RTL_TRACES + ("sdp_3x3x33_bn_int8_reg_0", "pdp_8x8x64_2x2_ave_int8_0",
                            "sdp_3x3x33_bs_int8_reg_0", "cdp_8x8x32_lrn5_int8_0")
MODEL_TRACES = RTL_TRACES + ("dc_1x1x8_1x1x8x1_int8_0", "sdp_pdp_32x16x32_pass_through_int8_0")


def _trace(name: str) -> Path:
    return nvdla_dir() / "traces" / "nv_small" / name


# --- without a cluster --------------------------------------------------------------------------

@pytest.mark.parametrize("text, want", [
    ("local", dc.ClusterSpec("local", workers=3)),
    ("local:2", dc.ClusterSpec("local", workers=2)),
    ("tcp://127.0.0.1:8786", dc.ClusterSpec("tcp", address="tcp://127.0.0.1:8786")),
    ("tcp://sched.example:1234", dc.ClusterSpec("tcp", address="tcp://sched.example:1234")),
    (None, None),
])
def test_parse_cluster(text, want):
    assert dc.parse_cluster(text, jobs=3) == want


@pytest.mark.parametrize("text", ["local:0", "local:x", "tcp://127.0.0.1", "127.0.0.1:8786",
                                  "tcp://h:99999", "remote", ""])
def test_parse_cluster_rejects(text):
    with pytest.raises(dc.ClusterError) as e:
        dc.parse_cluster(text)
    assert f"--cluster {text}" in str(e.value) and "\n" not in str(e.value)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_trace_cli_bad_cluster_exit_2(capsys, tmp_path):
    assert trace_main(["run", str(tmp_path), "--cluster", "tcp://nowhere"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --cluster tcp://nowhere") and "\n" not in err
    assert trace_main(["run", str(tmp_path), "--cluster", "local", "--task-timeout", "0"]) == 2
    assert "--task-timeout 0" in capsys.readouterr().err


@needs_shared
def test_unreachable_scheduler_fails_fast_naming_it(capsys, monkeypatch):
    monkeypatch.setattr(dc, "CONNECT_TIMEOUT_S", 2.0)
    addr = f"tcp://127.0.0.1:{_free_port()}"       # nothing listens there
    t0 = time.monotonic()
    assert trace_main(["run", str(_trace(RTL_TRACES[0])), "--cluster", addr]) == 2
    assert time.monotonic() - t0 < 60
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: --cluster {addr}: cannot reach the Dask scheduler")
    assert "\n" not in err


@pytest.mark.parametrize("script", ["sweep.py", "bench_resources.py"])
def test_scripts_bad_cluster_exit_2(script):
    p = subprocess.run([sys.executable, str(REPO / "scripts" / script), "--cluster", "local:0"],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[-1] == \
        "error: --cluster local:0: local:N needs N >= 1"


def test_in_order_and_batches():
    assert dc.batches(list(range(7)), 3) == [[0, 1, 2], [3, 4, 5], [6]]
    got = list(dc.in_order(iter([(2, "c"), (0, "a"), (3, "d"), (1, "b")]), 4))
    assert got == [(0, "a"), (1, "b"), (2, "c"), (3, "d")]


def test_pack_round_trip(tmp_path):
    (tmp_path / "a" / "sub").mkdir(parents=True)
    (tmp_path / "a" / "x.cfg").write_text("cfg")
    (tmp_path / "a" / "sub" / "y.dat").write_bytes(bytes(range(256)))
    out = dc.unpack_dir(dc.pack_dir(tmp_path / "a"), tmp_path / "b")
    assert (out / "x.cfg").read_text() == "cfg"
    assert (out / "sub" / "y.dat").read_bytes() == bytes(range(256))


def test_reports(tmp_path):
    recs = [dc.ItemRecord("t1", "pass", 1.5, "", {"cycles": 10}),
            dc.ItemRecord("t2", "fail", 0.5, "FAIL: no interrupt\nmore", {"cycles": None}),
            dc.ItemRecord("t3", "skip", 0.0, "missing memory image")]
    dc.write_reports(recs, suite="s", junit=tmp_path / "j.xml", report=tmp_path / "r.json",
                     meta={"cluster": "local:2"})
    dc.write_reports(recs, suite="s", report=tmp_path / "r.md")
    root = ET.parse(tmp_path / "j.xml").getroot()
    assert (root.tag, root.get("tests"), root.get("failures"), root.get("skipped")) == \
        ("testsuite", "3", "1", "1")
    cases = root.findall("testcase")
    assert [c.get("name") for c in cases] == ["t1", "t2", "t3"]
    assert cases[1].find("failure").get("message") == "FAIL: no interrupt"
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["counts"] == {"pass": 1, "fail": 1, "skip": 1} and rep["cluster"] == "local:2"
    assert rep["items"][0] == {"name": "t1", "status": "pass", "seconds": 1.5, "message": "",
                               "cycles": 10}
    md = (tmp_path / "r.md").read_text()
    assert "| t2 | fail | - | 0.50 | FAIL: no interrupt |" in md
    dc.write_reports([dc.ItemRecord("t", "pass", details={"crcs": [["0x1", "0x1"], ["0x2", "0x3"]]})],
                     suite="s", report=tmp_path / "c.md")
    assert "| t | pass | 0x1/0x1, 0x2/0x3 | 0.00 |  |" in (tmp_path / "c.md").read_text()


# --- a real cluster on loopback -------------------------------------------------------------------

class DaskCluster:
    """``dask scheduler`` and ``dask worker`` processes on 127.0.0.1 (each in its own process
    group and temporary directory); :meth:`stop` kills them all."""

    def __init__(self, root: Path, workers: int = 2, env: dict | None = None):
        self.root = root
        self.procs: list[subprocess.Popen] = []
        self.env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
            NVDLA_SHARED=str(shared_dir()), **(env or {}))
        sfile = root / "scheduler.json"
        self.procs.append(self._start(
            ["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--scheduler-file", str(sfile)], root / "scheduler"))
        t0 = time.monotonic()
        while not sfile.is_file() or not sfile.read_text().strip():
            if time.monotonic() - t0 > 60 or self.procs[0].poll() is not None:
                self.stop()
                raise RuntimeError(f"dask scheduler did not start; log: {root / 'scheduler.log'}")
            time.sleep(0.2)
        self.address = json.loads(sfile.read_text())["address"]
        self.workers = [self._start(
            ["worker", self.address, "--nworkers", "1", "--nthreads", "1", "--host", "127.0.0.1",
             "--no-dashboard", "--memory-limit", "0", "--local-directory", str(root / f"w{k}")],
            root / f"w{k}") for k in range(workers)]
        self.procs += self.workers
        from distributed import Client
        with Client(self.address, timeout=30) as c:
            c.wait_for_workers(workers, timeout=90)

    def _start(self, args: list[str], d: Path) -> subprocess.Popen:
        d.mkdir(parents=True, exist_ok=True)
        with open(d.with_suffix(".log"), "w") as log:
            return subprocess.Popen([sys.executable, "-m", "dask", *args], cwd=d, env=self.env,
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def kill(self, p: subprocess.Popen) -> None:
        """SIGKILL a process and its children (the worker under its nanny)."""
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(timeout=30)

    def stop(self) -> None:
        for p in reversed(self.procs):
            self.kill(p)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = DaskCluster(tmp_path_factory.mktemp("dask"))
    try:
        yield c
    finally:
        c.stop()


def _lines(out: str) -> list[str]:
    """The per-trace lines of the trace CLI without the wall seconds, sorted."""
    return sorted(" ".join(w for w in ln.split()[:4]) for ln in out.splitlines()
                  if ln.split() and ln.split()[0] in ("PASS", "FAIL", "NOT-RUNNABLE"))


def _cli(args, capsys, tmp_path, tag):
    rep = tmp_path / f"{tag}.json"
    rc = trace_main(["run", *args, "--report", str(rep)])
    out = capsys.readouterr().out
    items = {i["name"]: (i["status"], i["cycles"], i["crcs"])
             for i in json.loads(rep.read_text())["items"]}
    return rc, out, items


@needs_shared
def test_model_traces_on_cluster_match_local(cluster, capsys, tmp_path):
    paths = [str(_trace(t)) for t in MODEL_TRACES]
    rc_l, out_l, local = _cli(paths, capsys, tmp_path, "local")
    rc_c, out_c, remote = _cli(paths + ["--cluster", cluster.address,
                                        "--junit-xml", str(tmp_path / "j.xml")],
                               capsys, tmp_path, "cluster")
    assert rc_l == rc_c == 0
    assert remote == local and len(remote) == len(MODEL_TRACES)
    assert all(s == "pass" and crcs and all(e == a for e, a in crcs)
               for s, _, crcs in remote.values())
    # printed in the order of the paths, then the same summary
    names = [ln.split()[1] for ln in out_c.splitlines() if ln.startswith("PASS")]
    assert names == list(MODEL_TRACES)
    assert f"{len(MODEL_TRACES)} passed, 0 failed, 0 not runnable" in out_c
    assert f"on cluster {cluster.address}" in out_c
    assert ET.parse(tmp_path / "j.xml").getroot().get("tests") == str(len(MODEL_TRACES))


@needs_shared
def test_local_cluster_matches_local_pool(capsys, tmp_path):
    """--cluster local:2 (a LocalCluster started and stopped by the CLI): the same items."""
    paths = [str(_trace(t)) for t in MODEL_TRACES[:3]]
    _, _, local = _cli(paths, capsys, tmp_path, "local")
    rc, out, remote = _cli(paths + ["--cluster", "local:2"], capsys, tmp_path, "cluster")
    assert rc == 0 and remote == local and "on cluster local:2" in out


@pytest.mark.rtl
@needs_shared
@needs_verilator
def test_rtl_traces_on_cluster_match_local(cluster, capsys, tmp_path):
    from verif.trace.pgo import build_sim
    build_sim("nv_small")             # the workers find it in the checkout's cache
    paths = [str(_trace(t)) for t in RTL_TRACES]
    rc_l, out_l, local = _cli(paths + ["--engine", "rtl", "-j", "2"], capsys, tmp_path, "local")
    rc_c, out_c, remote = _cli(paths + ["--engine", "rtl", "--cluster", cluster.address],
                               capsys, tmp_path, "cluster")
    assert rc_l == rc_c == 0
    assert remote == local and len(remote) == len(RTL_TRACES)
    assert all(s == "pass" and c > 0 for s, c, _ in remote.values())
    assert _lines(out_c) == _lines(out_l)


def _sweep(args, tmp_path, tag):
    rep = tmp_path / f"{tag}.json"
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "sweep.py"), "--unit", "sdp",
                        "-n", "20", "--seed", "100", "--keep", str(tmp_path / f"keep_{tag}"),
                        "--report", str(rep), *args],
                       capture_output=True, text=True, cwd=REPO, timeout=1800,
                       env=dict(os.environ, PYTHONPATH=str(REPO)))
    items = {i["name"]: (i["status"], i["cycles"]) for i in json.loads(rep.read_text())["items"]}
    table = [ln for ln in p.stdout.splitlines() if ln.startswith("sdp ")]
    return p.returncode, items, table, p


@pytest.mark.rtl
@needs_shared
@needs_verilator
def test_sweep_on_cluster_matches_local(cluster, tmp_path):
    from verif.trace.pgo import build_sim
    build_sim("nv_small")
    rc_l, local, table_l, _ = _sweep(["-j", "2"], tmp_path, "local")
    rc_c, remote, table_c, p = _sweep(["--cluster", cluster.address], tmp_path, "cluster")
    assert rc_c == rc_l, p.stderr[-2000:]
    assert len(remote) == 20 and remote == local
    assert table_c == table_l and table_c[0].split()[:3] == ["sdp", "20", "20"]


@pytest.mark.rtl
@needs_shared
@needs_verilator
def test_failing_program_comes_back_replayable(cluster, tmp_path):
    """Every AXI ID forbidden: each program fails on the monitor; its trace directory is
    fetched back from the worker under keep/ and replays (and fails the same way) locally."""
    from distributed import Client
    from hdl.config import NV_SMALL
    keep = tmp_path / "keep"
    with Client(cluster.address) as client:
        got = dict(dc.run_sweep(client, [("sdp", 0), ("sdp", 1)], NV_SMALL, per_task=2,
                                keep=keep, mem_profile="nvidia", mem_seed=1,
                                axi_ids={"read": [], "write": []}))
    assert sorted(got) == [0, 1]
    for i, (status, msg, _) in got.items():
        assert status == "fail" and "is not a client ID" in msg, msg
        kept = [d for d in keep.iterdir() if str(d) in msg]
        assert len(kept) == 1 and any(kept[0].glob("*.cfg")), msg
        # the kept directory is a complete trace: it passes locally with the right AXI IDs
        assert trace_main(["run", str(kept[0]), "--engine", "rtl", "--mem-profile", "nvidia"]) == 0


@pytest.mark.rtl
@needs_shared
@needs_verilator
def test_task_timeout_reported_as_failure(cluster):
    from distributed import Client
    from hdl.config import NV_SMALL
    with Client(cluster.address) as client:
        got = dict(dc.run_traces(client, [_trace(t) for t in RTL_TRACES[:2]], "rtl", NV_SMALL,
                                 per_task=1, timeout=0.05))
    assert sorted(got) == [0, 1]
    for r in got.values():
        assert r.status == "FAIL" and "timed out after 0.05 s" in r.message, r.message


@pytest.mark.rtl
@needs_shared
@needs_verilator
@pytest.mark.parametrize("allowed_failures", [3, 0])
def test_worker_killed_mid_batch_loses_no_item(tmp_path, allowed_failures):
    """A worker SIGKILLed (with its nanny) while the batch runs. With the scheduler's default
    ``allowed-failures`` (3) its task is re-run on the other worker: every trace is reported
    once, with the local run's verdict and cycles. With 0 the trace it was running is reported
    FAIL (KilledWorker, naming the worker), the others pass as locally: none is dropped."""
    from distributed import Client
    from hdl.config import NV_SMALL
    from verif.trace.pgo import build_sim
    from verif.trace.runner import run
    build_sim("nv_small")
    dirs = [_trace(t) for t in KILL_TRACES]
    local = {r.name: (r.status, r.cycles) for r in run(dirs, "rtl", NV_SMALL, jobs=2)}
    c = DaskCluster(tmp_path, env={"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES":
                                   str(allowed_failures)})
    try:
        got, killed, in_flight = {}, None, ()
        with Client(c.address) as client:
            pids = client.run(os.getpid)                  # {worker address: its pid}
            for i, r in dc.run_traces(client, dirs, "rtl", NV_SMALL, per_task=1):
                assert i not in got, f"{r.name} reported twice"
                got[i] = r
                if killed is None:
                    killed, in_flight = _kill_mid_task(c, client, pids)
        assert sorted(got) == list(range(len(dirs)))
        assert killed, "no worker was caught with a task in flight: nothing was tested"
        # the victim was running a task when it died, and is gone from the cluster
        assert killed and killed not in info_after(c.address)
        remote = {r.name: (r.status, r.cycles) for r in got.values()}
        if allowed_failures:
            assert remote == local
        else:
            # every task the scheduler had on the victim when it died (the one executing, and
            # one queued behind it if any) comes back KilledWorker; the others as locally
            lost = [r for r in got.values() if r.status == "FAIL"]
            assert len(lost) == len(in_flight) and all(
                "KilledWorker" in r.message and killed in r.message for r in lost), \
                (in_flight, [r.message for r in lost])
            names = {r.name for r in lost}
            assert {n: v for n, v in remote.items() if n not in names} == \
                {n: v for n, v in local.items() if n not in names}
    finally:
        c.stop()


def _kill_mid_task(c: DaskCluster, client, pids: dict) -> tuple[str | None, tuple]:
    """SIGKILL a worker that certainly has a task in flight: each busy worker is frozen
    (SIGSTOP of its process group: nanny, worker and simulator), and after a second, so that
    a result it sent before freezing reaches the scheduler, the scheduler is asked what the
    frozen worker still has. Returns ``(worker address, its task keys)``, or ``(None, ())``
    when no busy worker still had a task (it is let go on; the caller tries again later)."""
    for w in [w for w, keys in client.processing().items() if keys]:
        p = next((p for p in c.workers if _is_child(pids.get(w), p.pid)), None)
        if p is None:
            continue
        os.killpg(p.pid, signal.SIGSTOP)
        time.sleep(1.0)
        keys = tuple(client.processing([w]).get(w, ()))
        if keys:
            c.kill(p)
            return w, keys
        os.killpg(p.pid, signal.SIGCONT)
    return None, ()


def info_after(address: str) -> dict:
    """The scheduler's workers now."""
    from distributed import Client
    with Client(address, timeout=30) as client:
        return client.scheduler_info()["workers"]


def _is_child(pid: int | None, parent: int) -> bool:
    """True when ``pid`` is ``parent`` or its descendant (Linux /proc)."""
    while pid and pid > 1:
        if pid == parent:
            return True
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return False


def _units_row(out: Path) -> list[str]:
    """The glb row of units.md without its wall-seconds column."""
    row = next(ln for ln in (out / "units.md").read_text().splitlines() if ln.startswith("| glb |"))
    return [c.strip() for c in row.strip("|").split("|")][:-1]


def test_synthesis_on_cluster_matches_local(cluster, tmp_path):
    """bench_resources --units glb: the same row as here; the unit's output directory comes
    back from the worker."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    runs = {}
    for tag, extra in (("here", []), ("cluster", ["--cluster", cluster.address])):
        p = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_resources.py"),
                            "--units", "glb", "-o", str(tmp_path / tag),
                            "--junit-xml", str(tmp_path / f"{tag}.xml"), *extra],
                           capture_output=True, text=True, cwd=REPO, timeout=900, env=env)
        assert p.returncode == 0, p.stderr[-2000:]
        runs[tag] = _units_row(tmp_path / tag)
    assert runs["cluster"] == runs["here"] and runs["here"][-1] == "pass"
    assert (tmp_path / "cluster" / "glb" / "report.json").is_file()
    assert json.loads((tmp_path / "cluster" / "glb" / "report.json").read_text())["top"]
    case = ET.parse(tmp_path / "cluster.xml").getroot().find("testcase")
    assert case.get("name") == "glb" and case.find("failure") is None
