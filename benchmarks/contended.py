"""Contended traces: every policy's wall time against ``ideal``'s on the same trace.

Usage: python -m benchmarks.contended [--jobs 400] [--nodes 8] [--seed 0] [--load 0.85]
       [--noise 0.01] [--policies default,...] [--family] [--rounds 1]

The trace is :func:`benchmarks.asv_bench.instances.contended_trace` (jobs of 2-16
GPUs sharing host links for hours, docs/benchmarks.md "Contended traces").  Every
policy is first run on the trace's first two jobs (compiling what it needs), then
``ideal`` and the policies one after another in this process: the ratio is each
policy's wall time over ``ideal``'s in the same run (the target: at most 3x).
``--family`` runs the family's members (200 jobs on 4 nodes, 400 on 8, 1,000 on
16) instead of one.  ``--rounds N`` runs every policy N times, a whole sweep apart
(``ideal`` and each policy, then again), and takes each one's best wall and CPU
time: a burst of load on a shared machine stretches one round, not a policy's
every run.  Each round's ratios are printed as they come, and a policy's per-job
results must be the same in every round.
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


def per_job(run) -> tuple:
    """Every job's placement, start, end, iterations, busy and held time, and
    readjustments."""
    return tuple((name, j.nodes, j.start_ms, j.end_ms, j.done, j.busy_ms, j.pause_ms,
                  j.readjustments) for name, j in sorted(run.jobs.items()))


def table(n_jobs: int, n_nodes: int, seed: int, load: float, noise: float,
          policies: list[str], rounds: int = 1) -> dict[str, float]:
    """Print one member's table (each policy's best of ``rounds``, the rounds a
    sweep apart); returns each policy's best wall time (s)."""
    sc = contended_trace(n_jobs, n_nodes, seed, load)
    total = sum(j.iterations for j in sc.jobs)
    print(f"{sc.title}: {total:,} iterations, noise {noise:g}", flush=True)
    names = ["ideal", *[p for p in policies if p != "ideal"]]
    warm(sc, names, seed, noise)  # ideal too: every ratio's denominator
    walls: dict[str, list[float]] = {name: [] for name in names}
    cpus: dict[str, list[float]] = {name: [] for name in names}
    outcome: dict[str, tuple[float, float]] = {}
    jobs: dict[str, tuple] = {}
    header = (f"{'policy':>22} {'wall s':>8} {'/ ideal':>8} {'CPU s':>8} {'/ ideal':>8} "
              f"{'mean JCT h':>11} {'TCT h':>8}")
    for r in range(rounds):
        if rounds > 1:
            print(f"round {r + 1} of {rounds}", flush=True)
        print(header, flush=True)
        for name in names:
            wall, cpu, run = timed(sc, name, seed, noise)
            walls[name].append(wall)
            cpus[name].append(cpu)
            jct, tct = run.mean_jct_s() / 3600, run.tct_ms / 3.6e6
            outcome.setdefault(name, (jct, tct))
            if jobs.setdefault(name, per_job(run)) != per_job(run):
                raise SystemExit(f"Error: {name}'s per-job results differ between rounds "
                                 f"(mean JCT {outcome[name][0]} h, then {jct} h)")
            print(f"{name:>22} {wall:>8.2f} {wall / walls['ideal'][r]:>7.2f}x "
                  f"{cpu:>8.2f} {cpu / cpus['ideal'][r]:>7.2f}x "
                  f"{jct:>11.3f} {tct:>8.2f}", flush=True)
    best = {name: min(times) for name, times in walls.items()}
    if rounds > 1:
        best_cpu = {name: min(times) for name, times in cpus.items()}
        print(f"best of {rounds} rounds", flush=True)
        print(f"{header}   {'wall / ideal by round':>24}", flush=True)
        for name in names:
            spread = [w / i for w, i in zip(walls[name], walls["ideal"], strict=True)]
            print(f"{name:>22} {best[name]:>8.2f} {best[name] / best['ideal']:>7.2f}x "
                  f"{best_cpu[name]:>8.2f} {best_cpu[name] / best_cpu['ideal']:>7.2f}x "
                  f"{outcome[name][0]:>11.3f} {outcome[name][1]:>8.2f}   "
                  f"{min(spread):.2f}-{max(spread):.2f}x", flush=True)
    return best


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
    parser.add_argument("--rounds", type=int, default=1,
                        help="run every policy this many times, a sweep apart, and take "
                             "each one's best (default: 1)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds: must be at least 1, got {args.rounds}")
    policies = args.policies.split(",")
    for name in policies:
        if name not in CLUSTER_POLICIES:
            parser.error(f"--policies: unknown policy {name!r}")
    members = FAMILY if args.family else ((args.jobs, args.nodes),)
    for n_jobs, n_nodes in members:
        table(n_jobs, n_nodes, args.seed, args.load, args.noise, policies, args.rounds)


if __name__ == "__main__":
    main()
