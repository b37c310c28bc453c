"""Cost of the Dask execution layer (``verif.cluster``, issue 35): a benchmark, not a test.

``python scripts/bench_cluster.py [--cluster local:2|tcp://HOST:PORT] [-n 400] [--model]``

Prints the cluster start-up time, the wall time of ``-n`` tasks that do nothing
(``verif.cluster.echo_task``) through ``verif.cluster.run_tasks`` (at most one task per worker
thread in flight, as every CLI runs them) and from that the scheduler overhead per task
(milliseconds, wall and worker-thread time); with ``--model`` also the nv_small model-engine
suite here one trace after another and on the cluster one task per trace.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from verif import cluster as dc  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cluster", default="local:2")
    ap.add_argument("-n", type=int, default=400, help="no-op tasks")
    ap.add_argument("--model", action="store_true",
                    help="also the nv_small model suite here and on the cluster")
    args = ap.parse_args(argv)
    try:
        spec = dc.parse_cluster(args.cluster)
    except dc.ClusterError as e:
        ap.exit(2, f"error: {e}\n")
    t0 = time.monotonic()
    with dc.connect(spec) as client:
        t_up = time.monotonic() - t0
        n_slots = dc.slots(client)
        print(f"cluster {spec}: {n_slots} worker threads, up in {t_up:.2f} s")
        # warm-up: the first task on each worker imports verif.cluster
        list(dc.run_tasks(client, [dc.Task([i], dc.echo_task, (i,)) for i in range(n_slots)]))
        tasks = [dc.Task([i], dc.echo_task, (i,), label=str(i)) for i in range(args.n)]
        t1 = time.monotonic()
        got = list(dc.run_tasks(client, tasks))
        dt = time.monotonic() - t1
        assert sorted(i for i, _, _ in got) == list(range(args.n))
        print(f"{args.n} no-op tasks in {dt:.2f} s: {1000 * dt / args.n:.2f} ms wall per task, "
              f"{1000 * dt * n_slots / args.n:.2f} ms of a worker thread per task")
        if args.model:
            from hdl.config import NV_SMALL
            from verif.shared import nvdla_dir
            from verif.trace.parser import find_traces
            from verif.trace.runner import run_model
            dirs = find_traces([nvdla_dir() / "traces" / "nv_small"])
            t2 = time.monotonic()
            here = {r.name: (r.status, [c.actual for c in r.checks]) for r in run_model(dirs, NV_SMALL)}
            t_here = time.monotonic() - t2
            t3 = time.monotonic()
            there = {r.name: (r.status, [c.actual for c in r.checks])
                     for _, r in dc.run_traces(client, dirs, "model", NV_SMALL)}
            t_there = time.monotonic() - t3
            print(f"model suite ({len(dirs)} traces): here {t_here:.1f} s, on the cluster "
                  f"{t_there:.1f} s (one task per trace); same verdicts and CRCs: {here == there}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
