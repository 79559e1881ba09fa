"""Running one task of a sweep, wherever it runs (this process or a Dask worker).

:func:`run_task` is a plain top-level function of a :class:`~.spec.Task`, so that a
Dask worker can unpickle and call it; it builds the scenario and the policy from the
task's parameters, runs it, and returns the metrics as a flat mapping of numbers and
strings (the row of :func:`tdmcore.sim.report.summary_rows` for a simulator run, the
fields of :class:`~tdmcore.sim.scheduler_time.SchedulerTime` for a timing).
"""

from __future__ import annotations

import dataclasses
import hashlib
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from ..cluster import RunResult, run_cluster, warm_up
from ..policies import build_policy, cluster_policy, controller_config
from ..report import run_metric_names, summary_rows
from ..scenario_parts import Scenario
from ..scheduler_time import TIMED_METRICS, scheduler_time
from .spec import Task, task_scenario

__all__ = ["TIMED", "code_digest", "run_task", "tdmcore_version"]
#: Metrics that are wall-clock times: they differ between two runs of one task.
TIMED: frozenset[str] = frozenset({"wall_s", "decision_ms_p50", "decision_ms_p99",
                                   *TIMED_METRICS})


def tdmcore_version() -> str:
    """The installed tdmcore's version (the cache key and the workers' check)."""
    return metadata.version("tdmcore")


#: The files of the package whose content can change a result: code and data.
_CODE_SUFFIXES = (".py", ".pyx", ".csv", ".json", ".gz", ".yaml")


@cache
def code_digest() -> str:
    """sha256 of tdmcore's own code and data files (paths and contents).

    With the version it keys the results cache, so that a development checkout
    whose code changed under the same version number recomputes.
    """
    root = Path(__file__).resolve().parents[2]  # the tdmcore package
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.suffix in _CODE_SUFFIXES and "__pycache__" not in path.parts \
                and path.is_file():
            digest.update(path.relative_to(root).as_posix().encode("utf-8") + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()


def run_task(task: Task) -> dict[str, Any]:
    """Run one task and return its metrics (metric -> number or string).

    A process's first task of each policy runs a warm-up first (untimed,
    :func:`_warm_up_once`).  Raises whatever the run raises: the caller reports it
    with the task's parameters and retries once.  A :class:`SystemExit` (a policy
    that calls ``sys.exit``) is raised as a :class:`RuntimeError`: it ends the
    task, not the sweep (serial) or the Dask worker running it.
    """
    try:
        return _run_task(task)
    except SystemExit as exc:
        raise RuntimeError(f"the task raised SystemExit({exc.code!r})") from None


def _run_task(task: Task) -> dict[str, Any]:
    if task.run == "scheduler-time":
        built = build_policy(task.policy, task.namespace("metronome"))
        timed = cluster_policy(built)[0] if isinstance(built, str) else built
        result = scheduler_time(timed, seed=task.seed, **task.namespace("scenario"))
        return dataclasses.asdict(result)
    scenario = task_scenario(task)
    _warm_up_once(task, scenario)
    policy = build_policy(task.policy, task.namespace("metronome"))
    controller = controller_config(policy, task.namespace("controller"))
    run = run_cluster(scenario.sim, scenario.jobs, policy, seed=task.seed,
                      controller=controller, **task.namespace("run"))
    return _metrics(task.group, run)


#: The policies this process has run a warm-up for (:func:`_warm_up_once`).
_WARMED: set[str] = set()


def _warm_up_once(task: Task, scenario: Scenario) -> None:
    """:func:`~tdmcore.sim.cluster.warm_up` before this process times its first
    task of a policy, as ``tdmcore simulate`` does, so that no task's wall time and
    decision latencies include loading the compiled kernels.

    A built-in policy is warmed as itself; a policy of your own as ``metronome``,
    which loads the kernels of tdmcore's that it may call (its own code runs only
    in its tasks: it may count its calls or have other effects).
    """
    name = "metronome" if ":" in task.policy else task.policy
    if name not in _WARMED:
        warm_up(scenario.sim, scenario.jobs, name, seed=task.seed)
        _WARMED.add(name)


def _metrics(group: str, run: RunResult) -> dict[str, Any]:
    """The task's metrics: :func:`~tdmcore.sim.report.run_metric_names`, nothing else
    (a table row of one policy also has its changes against other policies of the
    same run, which a task of one policy never has: the sweep's ``compare`` makes
    those)."""
    (row,) = summary_rows({group: {run.policy: run}})
    return {k: row[k] for k in run_metric_names() if k in row}
