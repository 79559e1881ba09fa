"""Elastic policies on DRAGON's workloads: run time and mean elapsed time (quality).

``track_mean_elapsed_s`` on DRAGON's Table 1 and its Poisson simulation (100 jobs,
mean gap 100 s, seed 0); see docs/elastic.md.
"""

from __future__ import annotations

from tdmcore.elastic import make_elastic_policy
from tdmcore.sim.elastic import run_elastic
from tdmcore.sim.elastic_workloads import dragon_poisson, dragon_table1

POLICIES = ["dragon", "locality", "kubeflow", "kod2", "weighted"]


class ElasticRun:
    params = (["table1", "poisson"], POLICIES)
    param_names = ["workload", "policy"]
    timeout = 300
    number = 1
    repeat = (1, 3, 60.0)

    def setup(self, workload: str, policy: str) -> None:
        self.cluster, self.jobs = (dragon_table1() if workload == "table1"
                                   else dragon_poisson(100, 100.0, 0))

    def time_run(self, workload: str, policy: str) -> None:
        run_elastic(make_elastic_policy(policy), self.cluster, self.jobs)

    def track_mean_elapsed_s(self, workload: str, policy: str) -> float:
        return run_elastic(make_elastic_policy(policy), self.cluster,
                           self.jobs).mean("elapsed_s")

    track_mean_elapsed_s.unit = "s"  # type: ignore[attr-defined]
