"""The OASiS evaluations (§V-A): policies side by side, and the performance ratio
against the offline optimum under estimated price bounds (the paper's Fig. 6).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from .. import _validation as v
from ..oasis.admission import (
    ADMISSION_POLICIES,
    AdmissionPolicy,
    OasisPolicy,
    make_admission_policy,
)
from ..oasis.admission.base import as_seed
from ..oasis.online import PriceBounds, offline_optimum
from .oasis_setting import OasisSetting, oasis_setting
from .slotted import SlottedRun, run_slotted

__all__ = ["RatioRow", "compare_admission", "performance_ratio_study", "summarize"]


def compare_admission(setting: OasisSetting,
                      policies: Iterable[str | AdmissionPolicy] | None = None,
                      progress: Callable[[str], None] | None = None) -> dict[str, SlottedRun]:
    """Run each policy — a name of :data:`ADMISSION_POLICIES` (default: all of them) or
    a configured policy object — on the same cluster and jobs; results by policy name."""
    chosen: list[AdmissionPolicy] = []
    for item in (ADMISSION_POLICIES if policies is None else policies):
        if isinstance(item, str):
            if item not in ADMISSION_POLICIES:
                raise ValueError(f"policies: unknown policy {item!r}"
                                 f"{v.did_you_mean(item, ADMISSION_POLICIES)}; choose from "
                                 f"{', '.join(ADMISSION_POLICIES)}")
            chosen.append(make_admission_policy(item))
        elif hasattr(item, "step") and hasattr(item, "reset"):
            chosen.append(item)
        else:
            raise ValueError(f"policies: expected names or policies, got {item!r:.60}")
    seen: set[str] = set()
    for policy in chosen:
        if policy.name in seen:
            raise ValueError(f"policies: two policies named {policy.name!r}")
        seen.add(policy.name)
    runs = {}
    for policy in chosen:
        runs[policy.name] = run_slotted(policy, setting.cluster, setting.jobs)
        if progress is not None:
            progress(policy.name)
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
    #: whether the MILP proved the offline optimum (else ``offline`` is a lower bound
    #: of it and ``ratio`` understates the true ratio)
    offline_optimal: bool = True

    @property
    def ratio(self) -> float:
        return self.offline / self.online if self.online > 0 else float("inf")


#: The largest server count, job count and slot count of a ratio instance: the
#: offline MILP has a variable per job, slot and server, and these instances are
#: meant to be solved (up to 10^6 variables).
RATIO_MAX = 100
#: The largest upper end of a priority range: utilities far beyond it lose the
#: MILP's precision (the solver finds no solution).
RATIO_MAX_PRIORITY = 1e6


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
    MILP solves in seconds; the offline optimum is computed once per instance.  A row
    whose MILP hit ``time_limit_s`` says so (``offline_optimal`` False).  Servers are
    split ``servers // 2`` worker servers, the rest PS servers.
    """
    for servers in server_counts:
        v.whole("server_counts", servers, 2, RATIO_MAX)
    for high in priority_highs:
        if not 1 <= v.real_number("priority_highs", high) <= RATIO_MAX_PRIORITY:
            raise ValueError(f"priority_highs: expected numbers in [1, "
                             f"{RATIO_MAX_PRIORITY:g}], got {high!r}")
    v.whole("n_jobs", n_jobs, 1, RATIO_MAX)
    v.whole("n_slots", n_slots, 1, RATIO_MAX)
    for scale in scales:
        v.positive_float("scales", scale)
    for seed in seeds:
        as_seed("seeds", seed)
    for name, seq in (("server_counts", server_counts), ("priority_highs", priority_highs),
                      ("scales", scales), ("seeds", seeds)):
        if len(seq) == 0:
            raise ValueError(f"{name}: expected at least one value")
    rows = []
    for servers in server_counts:
        for high in priority_highs:
            for seed in seeds:
                setting = oasis_setting(n_jobs, servers // 2, servers - servers // 2, n_slots,
                                        seed, priority=(1.0, float(high)), epochs=(1, 3),
                                        chunks=(2, 8), slot_s=30.0)
                cluster = setting.cluster
                best = offline_optimum(list(setting.jobs), cluster.worker_capacity,
                                       cluster.ps_capacity, cluster.n_slots,
                                       time_limit_s=time_limit_s)
                actual = PriceBounds.from_jobs(list(setting.jobs), n_slots)
                for scale in scales:
                    policy = OasisPolicy(actual, u_scale=scale, l_scale=scale)
                    online = run_slotted(policy, cluster, setting.jobs).total_utility
                    rows.append(RatioRow(servers, float(high), float(scale), seed,
                                         best.total_utility, online, best.optimal))
                    if progress is not None:
                        progress()
    return rows


def summarize(runs: dict[str, SlottedRun]) -> list[dict[str, float | int | str]]:
    """One row per policy: total utility (and relative to ``oasis`` when it ran),
    acceptance, finished jobs, utility and median lateness per class, decision time."""
    import numpy as np

    base = runs["oasis"].total_utility if "oasis" in runs else None
    rows: list[dict[str, float | int | str]] = []
    for name, run in runs.items():
        row: dict[str, float | int | str] = {
            "policy": name,
            "total_utility": round(run.total_utility, 3),
            "vs_oasis": (round(run.total_utility / base, 4) if base else float("nan")),
            "accepted": round(run.acceptance_rate, 4),
            "finished": run.finished,
            "jobs": len(run.jobs),
        }
        by_class = run.utility_by_class()
        for cls in ("insensitive", "sensitive", "critical"):
            row[f"utility_{cls}"] = round(by_class.get(cls, 0.0), 3)
        for cls in ("sensitive", "critical"):
            late = run.lateness(cls)
            row[f"lateness_{cls}_p50"] = float(np.median(late)) if late.size else float("nan")
        # decision time of the slots with an arrival or a completion (the others are
        # replays of earlier decisions)
        events = sorted({o.arrival for o in run.outcomes if o.arrival < len(run.decision_s)}
                        | {o.finish + 1 for o in run.outcomes
                           if o.finish is not None and o.finish + 1 < len(run.decision_s)})
        times = run.decision_s[events] if events else run.decision_s
        row["decision_ms_p50"] = round(float(np.median(times)) * 1e3, 4)
        row["decision_ms_p99"] = round(float(np.quantile(times, 0.99)) * 1e3, 4)
        row["wall_s"] = round(run.wall_s, 3)
        rows.append(row)
    return rows
