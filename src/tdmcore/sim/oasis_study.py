"""The OASiS evaluations (§V-A): policies side by side, and the performance ratio
against the offline optimum under estimated price bounds (the paper's Fig. 6).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ..admission import ADMISSION_POLICIES, OasisPolicy, make_admission_policy
from ..oasis import PriceBounds, offline_optimum
from .oasis_setting import OasisSetting, oasis_setting
from .slotted import SlottedRun, run_slotted

__all__ = ["RatioRow", "compare_admission", "performance_ratio_study"]


def compare_admission(setting: OasisSetting, policies: Iterable[str] | None = None,
                      progress: Callable[[str], None] | None = None) -> dict[str, SlottedRun]:
    """Run each named policy (default: all of :data:`ADMISSION_POLICIES`) on the same
    cluster and jobs."""
    names = list(ADMISSION_POLICIES if policies is None else policies)
    for name in names:
        if name not in ADMISSION_POLICIES:
            raise ValueError(f"policies: unknown policy {name!r}; choose from "
                             f"{', '.join(ADMISSION_POLICIES)}")
    runs = {}
    for name in names:
        runs[name] = run_slotted(make_admission_policy(name), setting.cluster, setting.jobs)
        if progress is not None:
            progress(name)
    return runs


@dataclass(frozen=True)
class RatioRow:
    """One point of Fig. 6: offline optimum / OASiS total utility."""

    servers: int
    priority_high: float
    scale: float
    seed: int
    offline: float
    online: float

    @property
    def ratio(self) -> float:
        return self.offline / self.online if self.online > 0 else float("inf")


def performance_ratio_study(
    server_counts: Sequence[int] = (4, 6, 8),
    priority_highs: Sequence[float] = (10.0, 50.0, 100.0),
    scales: Sequence[float] = (0.25, 0.5, 1.0, 2.0, 4.0),
    seeds: Sequence[int] = (0, 1, 2),
    *,
    n_jobs: int = 10,
    n_slots: int = 15,
    time_limit_s: float = 120.0,
    progress: Callable[[], None] | None = None,
) -> list[RatioRow]:
    """Offline optimum (MILP of problem (1)) over OASiS's utility on small instances.

    As in §V-A / Fig. 6: the servers (split evenly between workers and PSs) and the
    priority range ``g1 in [1, high]`` vary, and OASiS gets ``U`` and ``L`` estimated
    at ``scale`` times their values from :meth:`PriceBounds.from_jobs` (25 %-400 %).
    Instances are small (``n_jobs`` jobs of 1-3 epochs, 2-8 chunks, 30 s slots) so the
    MILP solves in seconds; the offline optimum is computed once per instance.
    """
    rows = []
    for servers in server_counts:
        if isinstance(servers, bool) or not isinstance(servers, int) or servers < 2:
            raise ValueError(f"server_counts: expected integers >= 2, got {servers!r}")
        for high in priority_highs:
            for seed in seeds:
                setting = oasis_setting(n_jobs, servers // 2, servers - servers // 2, n_slots,
                                        seed, priority=(1.0, float(high)), epochs=(1, 3),
                                        chunks=(2, 8), slot_s=30.0)
                cluster = setting.cluster
                offline = offline_optimum(list(setting.jobs), cluster.worker_capacity,
                                          cluster.ps_capacity, cluster.n_slots,
                                          time_limit_s=time_limit_s).total_utility
                actual = PriceBounds.from_jobs(list(setting.jobs), n_slots)
                for scale in scales:
                    policy = OasisPolicy(actual, u_scale=scale, l_scale=scale)
                    online = run_slotted(policy, cluster, setting.jobs).total_utility
                    rows.append(RatioRow(servers, float(high), float(scale), seed, offline,
                                         online))
                    if progress is not None:
                        progress()
    return rows
