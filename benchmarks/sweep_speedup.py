"""Speed-up of a sweep on a local Dask cluster over the same tasks run serially, in the
same run (a benchmark, not a test).

::

    python -m benchmarks.sweep_speedup --workers 2 --seeds 18

The tasks: ``metronome-trace`` over ``--hours`` at load ``--load`` for seeds 0 ..
``--seeds - 1`` (each seed its own trace) under ``default`` and ``diktyo``: about a
second of simulation each on an idle core, so that the cluster's start-up (spawning
worker processes that import tdmcore) does not hide the work.  One untimed task
loads the compiled kernels first.  Each of ``--rounds`` rounds runs the tasks
serially in this process and on a ``LocalCluster`` of ``--workers`` processes (timed
from its start to its close), the serial run first in even rounds and second in odd
ones; every table must agree with the first on every metric that is not a wall-clock
time.  Prints each round's two wall times and their ratio, the median ratio, the
cluster's start-and-close time alone, and the load average (the machine may be
shared: the ratio is the figure to compare).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from typing import Any

from tdmcore.sim import sweep
from tdmcore.sim.sweep.tasks import TIMED


def _plain(outcomes: list[sweep.Outcome]) -> list[dict[str, Any]]:
    out = []
    for o in outcomes:
        if o.metrics is None:
            raise SystemExit(f"task failed: {o.task.describe()}: {o.error}")
        out.append({k: "nan" if isinstance(v, float) and math.isnan(v) else v
                    for k, v in o.metrics.items() if k not in TIMED})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="More in the module's docstring and docs/sweeps.md.")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=18)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--load", type=float, default=0.85)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    spec = sweep.parse_spec({
        "name": "speedup", "scenario": "metronome-trace",
        "policies": ["default", "diktyo"],
        "seeds": list(range(args.seeds)),
        "set": {"scenario.hours": args.hours, "scenario.load": args.load}})
    tasks = list(spec.tasks)
    load = os.getloadavg()
    sweep.run_tasks(tasks[:1], serial=True)  # the kernels, untimed
    reference = None
    rounds = []
    for r in range(args.rounds):
        times = {}
        for mode in (("serial", "dask") if r % 2 == 0 else ("dask", "serial")):
            tic = time.perf_counter()
            outcomes = sweep.run_tasks(tasks, serial=mode == "serial",
                                       workers=None if mode == "serial" else args.workers)
            times[mode] = time.perf_counter() - tic
            plain = _plain(outcomes)
            if reference is None:
                reference = plain
            elif plain != reference:
                raise SystemExit(f"round {r}: the {mode} run differs from the first run")
        rounds.append({"serial_s": round(times["serial"], 2), "dask_s": round(times["dask"], 2),
                       "speedup": round(times["serial"] / times["dask"], 2)})
    tic = time.perf_counter()
    from tdmcore.sim.sweep.execute import _client

    with _client(None, args.workers) as client:
        client.run(int)  # every worker up
    startup_s = time.perf_counter() - tic
    ratios = sorted(r["speedup"] for r in rounds)
    print(json.dumps({
        "tasks": len(tasks), "workers": args.workers,
        "seeds": f"0-{args.seeds - 1}", "hours": args.hours, "load": args.load,
        "rounds": rounds, "median_speedup": ratios[len(ratios) // 2] if len(ratios) % 2
        else round((ratios[len(ratios) // 2 - 1] + ratios[len(ratios) // 2]) / 2, 2),
        "cluster_start_and_close_s": round(startup_s, 2),
        "loadavg_before": [round(x, 2) for x in load],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(), "identical": True}, indent=1))

if __name__ == "__main__":
    main()
