"""How well a window of a fixed set's iterations predicts its jobs' mean iteration time.

Usage: python -m benchmarks.stationarity [--seeds 200] [--warmup 20] [--windows 20 50 100 200]

The question behind a closed form for overlapping transfers (docs/benchmarks.md,
"Again, best of three rounds"; not built): once the set of jobs on some shared links
stops changing, does a short window of exact iterations predict each job's mean
iteration time until the set changes?  Seed ``s`` draws 2-5 jobs (periods
100-1,000 ms, duty cycles 0.1-0.5, 5-25 Gbps, starts 0-500 ms apart), each spanning
2-3 of 2-4 shared 25 Gbps links, runs them through the event loop
(:func:`tdmcore.sim.engine.network.simulate_flows`, noise 0.01, the default
contention efficiency) until the first one ends, and compares each job's mean over
``W`` iterations after ``warmup`` with its mean from ``warmup`` to that end.
"""

from __future__ import annotations

import argparse

import numpy as np

ITERATIONS = 3000


def errors(seeds: int, warmup: int, windows: list[int]) -> dict[int, np.ndarray]:
    """Per window length: each job's relative error (one entry per job long enough)."""
    from tdmcore.sim.engine.network import FlowJob, simulate_flows

    out: dict[int, list[float]] = {w: [] for w in windows}
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        n_links, k = int(rng.integers(2, 5)), int(rng.integers(2, 6))
        jobs = []
        for i in range(k):
            span = rng.choice(n_links, size=int(rng.integers(2, min(3, n_links) + 1)),
                              replace=False)
            jobs.append(FlowJob(f"j{i}", float(rng.uniform(100, 1000)),
                                float(rng.uniform(0.1, 0.5)), float(rng.uniform(5, 25)),
                                tuple(int(x) for x in span), ITERATIONS,
                                float(rng.uniform(0, 500))))
        run = simulate_flows(jobs, [25.0] * n_links, noise_sigma=0.01, seed=seed)
        change = min(ends[-1] for ends in run.iteration_end_ms)  # the set changes here
        for j, job in enumerate(jobs):
            ends = run.iteration_end_ms[j]
            d = np.diff(np.concatenate(([job.start_ms], ends[ends <= change])))
            for w in windows:
                if len(d) >= warmup + w + 50:
                    rest = d[warmup:].mean()
                    out[w].append(abs(d[warmup:warmup + w].mean() - rest) / rest)
    return {w: np.asarray(e) for w, e in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=200, help="seeds 0..N-1 (default 200)")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--windows", type=int, nargs="+", default=[20, 50, 100, 200])
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error(f"--seeds: must be at least 1, got {args.seeds}")
    if args.warmup < 0 or min(args.windows) < 1:
        parser.error("--warmup: must be at least 0, and --windows at least 1")
    found = errors(args.seeds, args.warmup, args.windows)
    print(f"seeds 0-{args.seeds - 1}, warm-up {args.warmup} iterations: the error of a "
          f"job's mean iteration time over W iterations")
    print(f"{'W':>5} {'jobs':>6} {'median':>8} {'p90':>7} {'p99':>7} {'worst':>7}")
    for w, e in found.items():
        if not e.size:
            print(f"{w:>5} {0:>6}  (no job ran long enough)")
            continue
        q = np.percentile(e * 100, [50, 90, 99])
        print(f"{w:>5} {e.size:>6} {q[0]:>7.2f}% {q[1]:>6.2f}% {q[2]:>6.2f}% "
              f"{e.max() * 100:>6.2f}%")


if __name__ == "__main__":
    main()
