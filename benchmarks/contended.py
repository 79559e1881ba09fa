"""Contended traces: every policy's wall time against ``ideal``'s on the same trace.

Usage: python -m benchmarks.contended [--jobs 400] [--nodes 8] [--seed 0] [--load 0.85]
       [--noise 0.01] [--policies default,...] [--family]

The trace is :func:`benchmarks.asv_bench.instances.contended_trace` (jobs of 2-16
GPUs sharing host links for hours, docs/benchmarks.md "Contended traces").  Every
policy is first run on the trace's first two jobs (compiling what it needs), then
``ideal`` and the policies one after another in this process: the ratio is each
policy's wall time over ``ideal``'s in the same run (the target: at most 3x).
``--family`` runs the family's members (200 jobs on 4 nodes, 400 on 8, 1,000 on
16) instead of one.
"""

from __future__ import annotations

import argparse
import time

from benchmarks.asv_bench.instances import contended_trace

FAMILY = ((200, 4), (400, 8), (1000, 16))


def timed(sc, policy: str, seed: int, noise: float):
    """Run ``policy`` on scenario ``sc``: (wall s, CPU s of this process, the run)."""
    from tdmcore.metronome.link import clear_plan_cache
    from tdmcore.sim.cluster import run_cluster

    clear_plan_cache()  # no plan from an earlier run: each policy plans from scratch
    tic, cpu = time.perf_counter(), time.process_time()
    run = run_cluster(sc.sim, sc.jobs, policy, seed=seed, noise_sigma=noise)
    return time.perf_counter() - tic, time.process_time() - cpu, run


def warm(sc, policies: list[str], seed: int, noise: float) -> None:
    """Compile what each policy needs: run it on the trace's first two jobs."""
    from tdmcore.sim.cluster import run_cluster

    for name in policies:
        run_cluster(sc.sim, sc.jobs[:2], name, seed=seed, noise_sigma=noise)


def table(n_jobs: int, n_nodes: int, seed: int, load: float, noise: float,
          policies: list[str]) -> dict[str, float]:
    """Print one member's table; returns each policy's wall time (s)."""
    sc = contended_trace(n_jobs, n_nodes, seed, load)
    total = sum(j.iterations for j in sc.jobs)
    print(f"{sc.title}: {total:,} iterations, noise {noise:g}", flush=True)
    warm(sc, policies, seed, noise)
    print(f"{'policy':>22} {'wall s':>8} {'/ ideal':>8} {'CPU s':>8} {'/ ideal':>8} "
          f"{'mean JCT h':>11} {'TCT h':>8}", flush=True)
    walls: dict[str, float] = {}
    cpus: dict[str, float] = {}
    for name in ["ideal", *[p for p in policies if p != "ideal"]]:
        walls[name], cpus[name], run = timed(sc, name, seed, noise)
        print(f"{name:>22} {walls[name]:>8.2f} {walls[name] / walls['ideal']:>7.2f}x "
              f"{cpus[name]:>8.2f} {cpus[name] / cpus['ideal']:>7.2f}x "
              f"{run.mean_jct_s() / 3600:>11.3f} {run.tct_ms / 3.6e6:>8.2f}", flush=True)
    return walls


def main() -> None:
    from tdmcore.sim.cluster import CLUSTER_POLICIES

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--load", type=float, default=0.85)
    parser.add_argument("--noise", type=float, default=0.01,
                        help="compute noise sigma (default: the simulator's 0.01)")
    parser.add_argument("--policies", default=",".join(CLUSTER_POLICIES),
                        help="comma-separated (default: all seven)")
    parser.add_argument("--family", action="store_true",
                        help="the family's members (jobs, nodes): "
                             + ", ".join(f"{j}/{n}" for j, n in FAMILY))
    args = parser.parse_args()
    policies = args.policies.split(",")
    for name in policies:
        if name not in CLUSTER_POLICIES:
            parser.error(f"--policies: unknown policy {name!r}")
    members = FAMILY if args.family else ((args.jobs, args.nodes),)
    for n_jobs, n_nodes in members:
        table(n_jobs, n_nodes, args.seed, args.load, args.noise, policies)


if __name__ == "__main__":
    main()
