"""The OASiS setting end to end: run time and total utility of each slotted policy.

``track_`` records quality (total utility, acceptance) beside the ``time_`` runs, on
``oasis_setting(n_jobs, 20, 20, 200, seed=0)`` (see docs/oasis.md, "OASiS against
its baselines").
"""

from __future__ import annotations

from tdmcore.oasis.admission import make_admission_policy
from tdmcore.sim.oasis_setting import oasis_setting
from tdmcore.sim.slotted import run_slotted

POLICIES = ["oasis", "fifo", "drf", "rrh", "dorm"]


class AdmissionRun:
    params = ([100, 250], POLICIES)
    param_names = ["jobs", "policy"]
    timeout = 300
    number = 1
    repeat = (1, 3, 60.0)

    def setup(self, jobs: int, policy: str) -> None:
        self.setting = oasis_setting(jobs, 20, 20, 200, seed=0)

    def time_run(self, jobs: int, policy: str) -> None:
        run_slotted(make_admission_policy(policy), self.setting.cluster, self.setting.jobs)

    def track_total_utility(self, jobs: int, policy: str) -> float:
        return run_slotted(make_admission_policy(policy), self.setting.cluster,
                           self.setting.jobs).total_utility

    track_total_utility.unit = "utility"  # type: ignore[attr-defined]

    def track_acceptance_rate(self, jobs: int, policy: str) -> float:
        return run_slotted(make_admission_policy(policy), self.setting.cluster,
                           self.setting.jobs).acceptance_rate

    track_acceptance_rate.unit = "share"  # type: ignore[attr-defined]
