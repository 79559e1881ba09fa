"""The cluster simulator: wall time of a run and the quality of each policy.

``time_run`` / ``track_*`` on the shipped scenarios, seed 0: the 4 h
``metronome-trace`` (docs/benchmarks.md: all policies together < 30 s) and the
snapshots S1 and S5 (10 minutes of training per job).  ``track_mean_jct_s`` and
``track_gamma`` are the quality figures (docs/simulator.md).  The naive peer of
the flow kernel itself is in :mod:`bench_network`.  :class:`PhillyScale` times
Philly slices on 1,024 nodes (the 10-minute, 4 GB target) and their peak memory.
"""

from __future__ import annotations

from typing import Any

from tdmcore.metronome.link import clear_plan_cache
from tdmcore.sim.cluster import CLUSTER_POLICIES, RunResult, run_cluster
from tdmcore.sim.scenarios import metronome_snapshots, metronome_trace

SCENARIOS = ["trace", "S1", "S5"]
_CACHE: dict[tuple[str, str], RunResult] = {}


def _scenario(name: str) -> Any:
    return metronome_trace(0) if name == "trace" else metronome_snapshots(600.0)[name]


class ClusterRun:
    params = (SCENARIOS, list(CLUSTER_POLICIES))
    param_names = ["scenario", "policy"]
    timeout = 300
    number = 1
    repeat = (1, 3, 60.0)

    def setup(self, scenario: str, policy: str) -> None:
        self.scenario = _scenario(scenario)
        run_cluster(self.scenario.sim, self.scenario.jobs[:1], policy)  # compile
        clear_plan_cache()  # each sample plans from scratch (number = 1)

    def time_run(self, scenario: str, policy: str) -> None:
        run_cluster(self.scenario.sim, self.scenario.jobs, policy)

    def _run(self, scenario: str, policy: str) -> RunResult:
        key = (scenario, policy)
        if key not in _CACHE:
            _CACHE[key] = run_cluster(self.scenario.sim, self.scenario.jobs, policy)
        return _CACHE[key]

    def track_mean_jct_s(self, scenario: str, policy: str) -> float:
        return self._run(scenario, policy).mean_jct_s()

    track_mean_jct_s.unit = "s"  # type: ignore[attr-defined]

    def track_gamma(self, scenario: str, policy: str) -> float:
        return self._run(scenario, policy).gamma

    track_gamma.unit = "fraction"  # type: ignore[attr-defined]


class TraceAllPolicies:
    """The performance target: the 4 h trace with every policy, one after another."""

    timeout = 300
    number = 1
    repeat = (1, 3, 120.0)

    def setup(self) -> None:
        self.scenario = metronome_trace(0)
        for policy in CLUSTER_POLICIES:  # compile every path once
            run_cluster(self.scenario.sim, self.scenario.jobs[:1], policy)
        clear_plan_cache()  # each sample plans from scratch (number = 1)

    def time_all_policies(self) -> None:
        for policy in CLUSTER_POLICIES:
            run_cluster(self.scenario.sim, self.scenario.jobs, policy)


class PhillyScale:
    """The scale target (docs/benchmarks.md): Philly jobs on 1,024 nodes, seed 0,
    noise 0, under ``default`` and ``metronome`` (< 10 min, < 4 GB for 10,000 jobs).

    ``time_run`` and ``peakmem_run`` (asv's peak resident memory of the process)
    per slice, ``track_finished`` that every job ended.  The 10,000-job slice takes
    minutes under ``metronome``: run it with ``asv run --bench PhillyScale``.
    """

    params = ([1000, 10000], ["default", "metronome"])
    param_names = ["jobs", "policy"]
    timeout = 3600
    number = 1
    repeat = 1

    def setup(self, jobs: int, policy: str) -> None:
        from tdmcore.sim.scenarios import philly

        self.scenario = philly(jobs, 1024)
        run_cluster(self.scenario.sim, self.scenario.jobs[:1], policy)  # compile
        clear_plan_cache()  # each sample plans from scratch (number = 1)

    def _run(self, policy: str) -> RunResult:
        return run_cluster(self.scenario.sim, self.scenario.jobs, policy, seed=0,
                           noise_sigma=0.0)

    def time_run(self, jobs: int, policy: str) -> None:
        self._run(policy)

    def peakmem_run(self, jobs: int, policy: str) -> None:
        self._run(policy)

    def track_finished(self, jobs: int, policy: str) -> float:
        run = self._run(policy)
        return sum(j.end_ms is not None for j in run.jobs.values()) / jobs

    track_finished.unit = "fraction"  # type: ignore[attr-defined]


class ContendedTrace:
    """The contended-simulation target (docs/benchmarks.md, "Contended traces"): a
    member of the contended family (jobs/nodes, seed 0, load 0.85, noise 0.01) under
    each policy.  ``time_run`` is its wall time; ``track_cpu_ratio_to_ideal`` is its
    CPU time over ``ideal``'s, the two run one after the other in one process (the
    target: at most 3).  The script ``python -m benchmarks.contended`` prints the
    same for every policy of a member at once.
    """

    params = (["200/4", "400/8", "1000/16"], list(CLUSTER_POLICIES))
    param_names = ["member", "policy"]
    timeout = 3600
    number = 1
    repeat = 1

    def setup(self, member: str, policy: str) -> None:
        from benchmarks.asv_bench.instances import contended_trace
        from benchmarks.contended import warm

        n_jobs, n_nodes = (int(x) for x in member.split("/"))
        self.scenario = contended_trace(n_jobs, n_nodes, 0)
        warm(self.scenario, sorted({policy, "ideal"}), 0, 0.01)
        clear_plan_cache()  # each sample plans from scratch (number = 1)

    def time_run(self, member: str, policy: str) -> None:
        run_cluster(self.scenario.sim, self.scenario.jobs, policy, seed=0, noise_sigma=0.01)

    def track_cpu_ratio_to_ideal(self, member: str, policy: str) -> float:
        from benchmarks.contended import timed

        _, ideal, _ = timed(self.scenario, "ideal", 0, 0.01)
        _, own, _ = timed(self.scenario, policy, 0, 0.01)
        return own / ideal

    track_cpu_ratio_to_ideal.unit = "ratio"  # type: ignore[attr-defined]
