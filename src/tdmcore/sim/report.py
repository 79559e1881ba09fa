"""Tables of cluster-simulator runs: one row per (group, policy) and one per job.

docs/simulator.md: per job the iteration-time distribution, time per
1,000 iterations, JCT, waiting time and readjustments; per run TCT, Gamma,
acceptance, decision latency and the simulation's wall time.  Each policy is also
given relative to ``default`` and to ``ideal`` (percent change of the mean JCT and
of the high- and low-priority jobs' time per 1,000 iterations; negative = faster).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import cache
from typing import Any

import numpy as np

from .cluster import RunResult

__all__ = ["job_rows", "run_metric_names", "summary_rows"]


def _mean(values: list[float]) -> float:
    clean = [x for x in values if math.isfinite(x)]
    return float(np.mean(clean)) if clean else math.nan


def _per_1000(run: RunResult, high: bool) -> float:
    return _mean([j.per_1000_s for j in run.jobs.values()
                  if (j.priority > 0) == high and j.durations_ms.size])


def _change(value: float, ref: float) -> float:
    if not (math.isfinite(value) and math.isfinite(ref)) or ref == 0:
        return math.nan
    return round(100.0 * (value - ref) / ref, 2) + 0.0  # + 0.0: never -0.0


def _r(x: float, digits: int = 3) -> float:
    return round(x, digits) + 0.0 if math.isfinite(x) else math.nan  # never -0.0


def summary_rows(runs: Mapping[str, Mapping[str, RunResult]]) -> list[dict[str, Any]]:
    """One row per (group, policy): ``runs[group][policy]``."""
    rows: list[dict[str, Any]] = []
    for group, by_policy in runs.items():
        ref = {name: by_policy.get(name) for name in ("default", "ideal")}
        for policy, run in by_policy.items():
            jct = run.mean_jct_s()
            hi, lo = _per_1000(run, True), _per_1000(run, False)
            dec = run.decision_s * 1e3
            row: dict[str, Any] = {
                "group": group, "policy": policy, "jobs": len(run.jobs),
                "finished": sum(j.end_ms is not None for j in run.jobs.values()),
                "jct_s": _r(jct, 2), "tct_s": _r(run.tct_ms / 1e3, 2),
                "per_1000_high_s": _r(hi), "per_1000_low_s": _r(lo),
                "gamma": _r(run.gamma, 4), "acceptance": _r(run.acceptance, 3),
                "wait_s": _r(_mean([(j.wait_ms or 0.0) / 1e3 for j in run.jobs.values()
                                    if j.start_ms is not None]), 2),
                "readjustments": run.readjustments,
                "pattern_updates": run.pattern_updates,
                "recalculations": run.recalculations,
                "decision_ms_p50": _r(float(np.median(dec)), 3) if dec.size else math.nan,
                "decision_ms_p99": _r(float(np.percentile(dec, 99)), 3) if dec.size
                else math.nan,
                "wall_s": _r(run.wall_s, 3),
            }
            for name, other in ref.items():
                if other is None:
                    continue
                row[f"jct_vs_{name}_pct"] = _change(jct, other.mean_jct_s())
                row[f"high_vs_{name}_pct"] = _change(hi, _per_1000(other, True))
                row[f"low_vs_{name}_pct"] = _change(lo, _per_1000(other, False))
                row[f"gamma_vs_{name}_pct"] = _change(run.gamma, other.gamma)
            rows.append(row)
    keys: list[str] = []
    for row in rows:  # every row gets every column (CSV needs one header)
        keys.extend(k for k in row if k not in keys)
    return [{k: row.get(k, math.nan) for k in keys} for row in rows]


def job_rows(runs: Mapping[str, Mapping[str, RunResult]]) -> list[dict[str, Any]]:
    """One row per (group, policy, job) with its iteration-time percentiles."""
    rows: list[dict[str, Any]] = []
    for group, by_policy in runs.items():
        for policy, run in by_policy.items():
            for job in run.jobs.values():
                p = job.percentiles()
                rows.append({
                    "group": group, "policy": policy, "job": job.name, "model": job.model,
                    "priority": "high" if job.priority > 0 else "low",
                    "nodes": " ".join(job.nodes),
                    "arrival_s": _r(job.arrival_ms / 1e3, 3),
                    "wait_s": _r(job.wait_ms / 1e3, 3) if job.wait_ms is not None
                    else math.nan,
                    "jct_s": _r(job.jct_ms / 1e3, 3) if job.jct_ms is not None else math.nan,
                    "iterations": int(job.durations_ms.size),
                    "per_1000_s": _r(job.per_1000_s),
                    "p5_ms": _r(float(p[0])), "p25_ms": _r(float(p[1])),
                    "p50_ms": _r(float(p[2])), "p75_ms": _r(float(p[3])),
                    "p95_ms": _r(float(p[4])),
                    "readjustments": job.readjustments, "pause_ms": _r(job.pause_ms, 1),
                    "accepted_on_arrival": job.accepted_on_arrival,
                })
    return rows


#: Row fields that identify a run rather than measure it.
_LABELS = ("group", "policy")


@cache
def run_metric_names() -> tuple[str, ...]:
    """The metrics of one run: the columns :func:`summary_rows` gives a run of one
    policy, labels aside (read off an empty run, so new columns come along).  A
    sweep's ``simulate`` task reports these."""
    empty = RunResult(policy="p", jobs={}, tct_ms=0.0, gamma=0.0, link_names=(),
                      link_capacity_gbps=np.zeros(0), link_sent_gbit=np.zeros(0),
                      util_t_ms=np.zeros(0), util_gbps=np.zeros((0, 0)),
                      decision_s=np.zeros(0), recalculations=0, pattern_updates=0,
                      wall_s=math.nan)
    (row,) = summary_rows({"g": {empty.policy: empty}})
    return tuple(k for k in row if k not in _LABELS)
