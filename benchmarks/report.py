"""One-shot table of the rotation-search targets (docs/benchmarks.md), per seed.

Usage: python -m benchmarks.report [--seeds 0 1 2 3 4] [--decision] [--oasis] [--network]
       [--milp [--milp-sizes 20 50 100] [--milp-time-limit 600]]
       [--philly JOBS NODES [--philly-policies default,metronome-no-monitor,metronome]
        [--philly-cap S]]
       [--heavy [--heavy-count 500] [--cpu]] [--growth] [--rotation]
The rotation-search table is printed when no other section is asked for, or
with --rotation.  --seeds applies to the rotation, --network, --oasis and --milp
tables; --decision, --heavy, --growth and --philly use their own fixed seeds.
Each instance is solved by tdmcore (median of 20 runs) and by the naive peer
(one run) in the same process, after checking that both give the same answer.
The MILP of OASiS's problem (27) can stop at its time limit: its status says
whether it proved optimality; only then must the payoffs agree (1e-6 relative),
otherwise its incumbent must not beat tdmcore's optimum.
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks.asv_bench.bench_decision import decision_samples, decision_vs_peer
from benchmarks.asv_bench.bench_network import speedup as network_speedup
from benchmarks.asv_bench.bench_oasis import agree, milp_comparison
from benchmarks.asv_bench.bench_oasis import speedup as oasis_speedup
from benchmarks.asv_bench.bench_rotation import heavy_speedup, speedup
from benchmarks.asv_bench.instances import heavy_link

CASES = [("first", 4, 72), ("optimal", 5, 72), ("first", 5, 72), ("optimal", 4, 72),
         ("first", 3, 144), ("optimal", 3, 144)]


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--decision", action="store_true",
                        help="time one pod's full decision on 10..10,000 nodes "
                             "(clusters seeded 0..19), beside the per-node peer on "
                             "1,000 and 10,000 nodes (seeds 0..4)")
    parser.add_argument("--heavy", action="store_true",
                        help="the rotation search on heavily contended links "
                             "without a perfect rotation (k = 4, 72 bins), worst of "
                             "--heavy-count instances, against the naive peer")
    parser.add_argument("--heavy-count", type=_at_least_one, default=50,
                        help="instances for --heavy (default: 50)")
    parser.add_argument("--cpu", action="store_true",
                        help="--heavy: time both sides with the thread's CPU clock "
                             "instead of the wall clock (a shared machine)")
    parser.add_argument("--growth", action="store_true",
                        help="how the search's time grows with k (2..6) and bins "
                             "(72, 144, 360) on heavily contended links, seeds 0..9")
    parser.add_argument("--oasis", action="store_true",
                        help="time OASiS's best schedule (T=100, 100+100 servers) "
                             "against the straightforward DP")
    parser.add_argument("--milp", action="store_true",
                        help="time OASiS's best schedule against the MILP of "
                             "problem (27) (HiGHS), T = servers = each of --milp-sizes")
    parser.add_argument("--milp-sizes", type=int, nargs="+", default=[20, 50, 100],
                        help="T = worker servers = PS servers (default: 20 50 100)")
    parser.add_argument("--milp-time-limit", type=float, default=600.0,
                        help="MILP time limit per instance, seconds (default: 600)")
    parser.add_argument("--network", action="store_true",
                        help="the flow-level network model against its naive peer")
    parser.add_argument("--philly", type=int, nargs=2, metavar=("JOBS", "NODES"),
                        help="time the simulator on the first JOBS Philly jobs on NODES "
                             "nodes (noise 0, seed 0), one policy after another, with the "
                             "peak memory of the process")
    parser.add_argument("--philly-policies", default="default,metronome-no-monitor,metronome",
                        help="comma-separated (default: default,metronome-no-monitor,"
                             "metronome)")
    parser.add_argument("--philly-cap", type=float, default=None,
                        help="truncate Philly jobs to this many seconds")
    parser.add_argument("--rotation", action="store_true",
                        help="the rotation-search table (the default when no other "
                             "section is asked for)")
    args = parser.parse_args()
    if args.philly:
        from tdmcore import _validation as v
        from tdmcore.sim.cluster import CLUSTER_POLICIES

        for name in args.philly_policies.split(","):  # all checked before any is run
            if name not in CLUSTER_POLICIES:
                parser.error(f"--philly-policies: unknown policy {name!r}"
                             f"{v.did_you_mean(name, CLUSTER_POLICIES)}")
    asked = any((args.philly, args.network, args.milp, args.oasis, args.decision, args.heavy,
                 args.growth))
    if args.philly:
        philly_table(*args.philly, args.philly_policies.split(","), args.philly_cap)
    if args.network:
        print(f"{'jobs':>5} {'links':>5} {'iters':>5} {'seed':>4} {'tdmcore ms':>11} "
              f"{'naive s':>8} {'ratio':>6}")
        for n_jobs, n_links, iters in ((4, 4, 50), (16, 8, 50), (64, 16, 20)):
            for seed in args.seeds:
                fast, slow, ratio = network_speedup(n_jobs, n_links, iters, seed)
                print(f"{n_jobs:>5} {n_links:>5} {iters:>5} {seed:>4} {fast * 1e3:>11.2f} "
                      f"{slow:>8.2f} {ratio:>5.0f}x")
    if args.milp:
        milp_table(args.seeds, args.milp_sizes, args.milp_time_limit)
    if args.oasis:
        print(f"{'oasis seed':>10} {'tdmcore ms':>11} {'straight DP ms':>15} {'ratio':>7}")
        for seed in args.seeds:
            fast, slow, ratio = oasis_speedup(seed)
            print(f"{seed:>10} {fast * 1e3:>11.3f} {slow * 1e3:>15.1f} {ratio:>6.0f}x")
    if args.decision:
        decision_table()
    if args.heavy:
        heavy_table(args.heavy_count, args.cpu)
    if args.growth:
        growth_table()
    if asked and not args.rotation:
        return
    print(f"{'mode':8} {'k':>2} {'bins':>4} {'seed':>4} {'tdmcore ms':>11} {'naive ms':>10} "
          f"{'ratio':>8}")
    for mode, k, bins in CASES:
        rows = speedup(mode, k, bins, seeds=args.seeds)
        for seed, tdm, peer, ratio in rows:
            print(f"{mode:8} {k:>2} {bins:>4} {seed:>4} {tdm * 1e3:>11.3f} {peer * 1e3:>10.1f} "
                  f"{ratio:>7.0f}x")
        med_t = np.median([r[1] for r in rows]) * 1e3
        med_r = np.median([r[3] for r in rows])
        print(f"{mode:8} {k:>2} {bins:>4} {'med':>4} {med_t:>11.3f} {'':>10} {med_r:>7.0f}x")


def decision_table() -> None:
    print(f"{'nodes':>6} {'median ms':>10} {'p99 ms':>8} {'max ms':>8} {'CPU p99 ms':>11}  "
          "(seeds 0-19 x 5 decisions, fresh snapshot each)", flush=True)
    for nodes in (10, 100, 1000, 5000, 10000):
        wall, busy = decision_samples(nodes, cpu=True)
        lat, cpu = np.array(wall) * 1e3, np.array(busy) * 1e3
        print(f"{nodes:>6} {np.median(lat):>10.2f} {np.percentile(lat, 99):>8.2f} "
              f"{lat.max():>8.2f} {np.percentile(cpu, 99):>11.2f}", flush=True)
    print(f"{'nodes':>6} {'seed':>4} {'tdmcore ms':>11} {'per-node peer ms':>17} {'ratio':>7}")
    for nodes in (1000, 10000):
        for seed in range(5):
            fast, peer = decision_vs_peer(nodes, seed)
            print(f"{nodes:>6} {seed:>4} {fast * 1e3:>11.2f} {peer * 1e3:>17.0f} "
                  f"{peer / fast:>6.0f}x", flush=True)


def heavy_table(count: int, cpu: bool = False) -> None:
    import time

    timer = time.thread_time if cpu else time.perf_counter
    for mode in ("first", "optimal"):
        rows, skipped = heavy_speedup(mode, n_instances=count, timer=timer)
        tdm = np.array([r[1] for r in rows]) * 1e3
        ratio = np.array([r[3] for r in rows])
        worst = rows[int(tdm.argmax())]
        low = rows[int(ratio.argmin())]
        shown = skipped if len(skipped) <= 20 else f"{len(skipped)} seeds"
        print(f"heavy {mode} ({'thread CPU' if cpu else 'wall'} clock): {count} instances "
              f"without a perfect rotation (seeds "
              f"{rows[0][0]}-{rows[-1][0]}, {len(skipped)} skipped: {shown})")
        print(f"  tdmcore ms: median {np.median(tdm):.3f}, p90 {np.percentile(tdm, 90):.3f}, "
              f"p99 {np.percentile(tdm, 99):.3f}, worst {tdm.max():.3f} (seed {worst[0]}); "
              f"{int((tdm >= 1.0).sum())} at 1 ms or more")
        print(f"  speed-up: median {np.median(ratio):.0f}x, p10 {np.percentile(ratio, 10):.0f}x, "
              f"p1 {np.percentile(ratio, 1):.0f}x, smallest {ratio.min():.0f}x (seed {low[0]}: "
              f"{low[1] * 1e3:.3f} ms vs {low[2] * 1e3:.1f} ms); "
              f"{int((ratio < 100).sum())} below 100x", flush=True)
        missed = [f"{seed} ({fast * 1e3:.3f} ms, {r:.0f}x)" for seed, fast, _, r in rows
                  if r < 100 or fast >= 1e-3]
        print(f"  missing a target (below 100x or at 1 ms or more): "
              f"{', '.join(missed) if missed else 'none'}")
        print(f"  {'seed':>4} {'tdmcore ms':>11} {'naive ms':>9} {'ratio':>7}   (slowest five)")
        for seed, fast, peer, r in sorted(rows, key=lambda row: -row[1])[:5]:
            print(f"  {seed:>4} {fast * 1e3:>11.3f} {peer * 1e3:>9.1f} {r:>6.0f}x")
        print(f"  {'seed':>4} {'tdmcore ms':>11} {'naive ms':>9} {'ratio':>7}   (smallest "
              f"speed-ups)")
        for seed, fast, peer, r in sorted(rows, key=lambda row: row[3])[:5]:
            print(f"  {seed:>4} {fast * 1e3:>11.3f} {peer * 1e3:>9.1f} {r:>6.0f}x", flush=True)


def growth_table() -> None:
    import timeit

    from benchmarks.asv_bench.bench_rotation import _run, _run_naive

    print(f"{'mode':8} {'k':>2} {'bins':>4} {'no perfect':>10} {'median ms':>10} "
          f"{'worst ms':>9} {'naive median ms':>16}  (heavy_link seeds 0-9)", flush=True)
    cases = [(k, 72) for k in (2, 3, 4, 5, 6)] + [(4, 144), (4, 360)]
    for mode in ("first", "optimal"):
        for k, bins in cases:
            times, peers, plain = [], [], 0
            for seed in range(10):
                inst = heavy_link(k, bins, seed)
                got = _run(inst, mode)
                plain += not got.perfect
                times.append(float(np.median(timeit.repeat(lambda i=inst, m=mode: _run(i, m),
                                                           number=1, repeat=10))))
                if k <= 4 and bins == 72:
                    tic = timeit.default_timer()
                    want = _run_naive(inst, mode)
                    peers.append(timeit.default_timer() - tic)
                    if tuple(got.rotations.tolist()) != tuple(want[0]):
                        raise AssertionError(f"disagreement: heavy seed {seed}, k {k}")
            peer = f"{np.median(peers) * 1e3:>16.1f}" if peers else f"{'-':>16}"
            print(f"{mode:8} {k:>2} {bins:>4} {plain:>7}/10 {np.median(times) * 1e3:>10.3f} "
                  f"{max(times) * 1e3:>9.3f} {peer}", flush=True)


def philly_table(n_jobs: int, n_nodes: int, policies: list[str], cap: float | None) -> None:
    import resource
    import time

    from tdmcore.metronome.link import clear_plan_cache
    from tdmcore.sim.cluster import run_cluster
    from tdmcore.sim.scenarios import philly

    sc = philly(n_jobs, n_nodes, max_duration_s=cap)
    total = sum(j.iterations for j in sc.jobs)
    print(f"philly: {n_jobs} jobs on {n_nodes} nodes, {total:,} iterations, "
          f"cap {cap or 'none'} s")
    print(f"{'policy':>22} {'wall s':>8} {'finished':>8} {'mean JCT h':>10} {'peak GB':>8}")
    for name in policies:
        clear_plan_cache()  # each policy plans from scratch
        tic = time.perf_counter()
        run = run_cluster(sc.sim, sc.jobs, name, seed=0, noise_sigma=0.0)
        wall = time.perf_counter() - tic
        done = sum(j.end_ms is not None for j in run.jobs.values())
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
        print(f"{name:>22} {wall:>8.1f} {done:>8} {run.mean_jct_s() / 3600:>10.3f} "
              f"{peak:>8.2f}", flush=True)


def _payoff(x: float | None) -> str:
    return f"{x:>15.6f}" if x is not None else f"{'none':>15}"


def milp_table(seeds, sizes, time_limit_s) -> None:
    print(f"{'milp seed':>9} {'T':>4} {'servers':>7} {'tdmcore ms':>11} {'MILP s':>8} "
          f"{'status':>10} {'ends':>7} {'tdmcore payoff':>15} {'MILP payoff':>15} "
          f"{'agree':>6} {'ratio':>9}", flush=True)
    wrong = []
    for size in sizes:
        for seed in seeds:
            fast, got, res = milp_comparison(size, size, seed, time_limit_s)
            if res.optimal:
                ok = agree(got, res.payoff)
                mark = "yes" if ok else "NO"
            else:  # an incumbent: a lower bound of the optimum
                ok = res.payoff is None or (got is not None and res.payoff <= got + 1e-6)
                mark = "bound" if ok else "NO"
            if not ok:
                wrong.append((seed, size))
            print(f"{seed:>9} {size:>4} {size:>7} {fast * 1e3:>11.3f} {res.seconds:>8.2f} "
                  f"{res.status:>10} {res.ends_solved:>3}/{res.ends:<3} {_payoff(got)} "
                  f"{_payoff(res.payoff)} {mark:>6} {res.seconds / fast:>8.0f}x", flush=True)
    if wrong:
        raise AssertionError(f"best_schedule and the MILP disagree on (seed, size) {wrong}")


if __name__ == "__main__":
    main()
