"""Sweeps: specs checked before any task runs, Dask equal to serial, failures
reported and retried once, the cache, the comparison columns, the shipped specs."""

from __future__ import annotations

import csv
import json
import math
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from tdmcore.app.cli import cli
from tdmcore.app.lifecycle import main
from tdmcore.metronome.controller import ControllerConfig
from tdmcore.metronome.policies import MetronomeConfig, MetronomePolicy, make_policy
from tdmcore.sim import sweep
from tdmcore.sim.cluster import check_run_options, run_cluster
from tdmcore.sim.report import run_metric_names
from tdmcore.sim.scenarios import S3_PERIOD_GAP_MS, metronome_snapshots, period_gap
from tdmcore.sim.scheduler_time import scheduler_time, sharing_state
from tdmcore.sim.sweep import execute
from tdmcore.sim.sweep import tasks as sweep_tasks
from tdmcore.sim.sweep.spec import task_scenario
from tdmcore.sim.sweep.tasks import TIMED

#: A small sweep: two snapshots, two policies (one taking the swept thresholds), two
#: seeds, 60 s windows; 12 tasks of well under a second each.
SMALL = {
    "name": "small",
    "scenario": "metronome-snapshots",
    "groups": ["S2", "S3"],
    "policies": ["default", "metronome"],
    "seeds": [0, 1],
    "set": {"scenario.window_s": 60},
    "grid": {"controller.a_t": [1.05, 1.15], "controller.o_t": [3]},
    "metrics": ["per_1000_low_s", "readjustments"],
}


def _deterministic(outcomes: list[sweep.Outcome]) -> list[dict[str, Any]]:
    """Each outcome's metrics without the wall-clock ones, NaN made comparable."""
    out = []
    for o in outcomes:
        assert o.metrics is not None, o.error
        out.append({k: ("nan" if isinstance(v, float) and math.isnan(v) else v)
                    for k, v in o.metrics.items() if k not in TIMED})
    return out


def _write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data), "utf-8")
    return path


# ----------------------------------------------------------------------------- the spec
def test_small_spec_expands_each_policy_over_the_parameters_it_takes() -> None:
    spec = sweep.parse_spec(SMALL)
    # default takes no controller.* parameter: one task per (group, seed);
    # metronome: one per (group, a_t, seed)
    assert len(spec.tasks) == 2 * (2 + 2 * 2)
    default = [t for t in spec.tasks if t.policy == "default"]
    assert {dict(t.params).get("controller.a_t") for t in default} == {None}
    assert all(dict(t.params)["scenario.window_s"] == 60 for t in spec.tasks)
    assert spec.swept == ("controller.a_t",)
    assert len(set(spec.tasks)) == len(spec.tasks)


@pytest.mark.parametrize(("change", "message"), [
    ({"grid": {"controller.o_tt": [3]}},
     "grid.controller.o_tt: unknown parameter (did you mean controller.o_t?)"),
    ({"grid": {"o_t": [3]}}, "grid.o_t: a parameter is NAMESPACE.NAME"),
    ({"grid": {"engine.x": [3]}}, "grid.engine.x: unknown namespace 'engine'"),
    ({"grid": {"controller.o_t": [0]}}, "grid.controller.o_t: expected an integer >= 1"),
    ({"grid": {"controller.a_t": []}}, "grid.controller.a_t: expected a non-empty list"),
    ({"grid": {"controller.a_t": [1.1, 1.1]}}, "grid.controller.a_t[1]: 1.1 is listed twice"),
    # values, not spellings: 30 and 30.0 are one value (their reprs differ)
    ({"set": {}, "grid": {"scenario.window_s": [30, 30.0]}},
     "grid.scenario.window_s[1]: 30.0 is listed twice (as 30)"),
    # a bool field takes a bool: 'off' was read as true, 1 and 0 as true and false
    ({"grid": {"metronome.monitor": ["off", True, False]}},
     "grid.metronome.monitor: expected a bool, got 'off'"),
    ({"grid": {"controller.monitor": [1, 0]}}, "grid.controller.monitor: expected a bool"),
    ({"grid": {"run.skip_ahead": ["no", 0]}}, "grid.run.skip_ahead: expected a bool"),
    ({"set": {"scenario.window_s": 60, "run.queue": "lifo"}},
     "set.run.queue: expected one of backoff, fifo"),
    ({"grid": {"controler.o_t": [3]}},
     "grid.controler.o_t: unknown namespace 'controler' (did you mean controller.o_t?)"),
    ({"grid": {"cluster.background_gbps": [[0, 0, 0, 0]]}},
     "grid.cluster.background_gbps[0]: expected a number, string or boolean, got a list"),
    ({"grid": {"cluster.background_gbps": [0, 30]}},
     "grid.cluster.background_gbps: must stay below each link's capacity"),
    ({"set": {"scenario.window_s": 60, "cluster.latency_ms": "low"}},
     "set.cluster.latency_ms: expected a number, got 'low'"),
    ({"name": "a/b"}, "name: 'a/b' holds '/'; the name is part of the report's file names"),
    ({"name": "x\\y"}, "name: 'x\\\\y' holds '\\\\'"),
    ({"seeds": [0, 2**63]},
     "seeds[1]: expected an integer in [0, 2^63 - 1], got 9223372036854775808"),
    ({"set": {"metronome.gt_ms": -1}}, "set.metronome.gt_ms: must be >= 0"),
    ({"policies": ["default"], "grid": {"metronome.bins": [72, 144]}},
     "grid.metronome.bins: no policy of the sweep takes metronome.*"),
    ({"policies": ["metronme"]}, "policies[0]: unknown policy 'metronme' (did you mean"),
    ({"groups": ["S9"]}, "groups[0]: unknown group 'S9'"),
    ({"metrics": ["jct"]}, "metrics[0]: unknown metric 'jct'"),
    ({"seeds": [0, -1]}, "seeds[1]: expected an integer in [0, 2^63 - 1], got -1"),
    ({"scenario": "philly", "set": {"scenario.n_jobs": 0}},
     "set.scenario.n_jobs: expected an integer >= 1"),
    ({"scenario": "period-gap", "groups": None, "grid": {"scenario.gap_ms": [5, 40]}},
     "grid.scenario.gap_ms: expected 0 <= gap_ms <= 35"),
    ({"scenario": "nowhere"}, "scenario: unknown scenario 'nowhere'"),
    ({"run": "simulate", "grdi": {}}, "unknown field(s) ['grdi'] (did you mean 'grid'"),
    ({"compare": ["ideal"]}, "compare[0]: 'ideal' is not one of the sweep's policies"),
    ({"run": "scheduler-time"}, "scenario: scheduler-time builds its own cluster"),
])
def test_a_bad_spec_is_one_error_line_naming_the_field(change, message, tmp_path, capsys,
                                                       monkeypatch) -> None:
    data = {**SMALL, **change}
    data = {k: v for k, v in data.items() if v is not None}
    path = _write(tmp_path / "bad.yaml", data)
    monkeypatch.setattr(execute, "run_task", _never)  # nothing may run
    with pytest.raises(SystemExit) as exit_info:
        main(["sweep", str(path), "--serial", "--no-cache", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 1
    assert err.startswith("Error: bad.yaml: ") and message in err, err
    assert err.count("\n") == 1, err
    assert not (tmp_path / "r").exists()


def _never(task: sweep.Task) -> dict[str, Any]:
    raise AssertionError(f"ran {task.describe()}")


def test_usage_errors_and_show(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["sweep", "--example", "fig99"])
    assert exit_info.value.code == 2
    assert "fig99" in capsys.readouterr().err
    for args in (["sweep"], ["sweep", "--example", "fig14", "--serial", "--workers", "2"],
                 ["sweep", "--example", "fig14", "--scheduler", "tcp://127.0.0.1:9",
                  "--workers", "2"]):
        with pytest.raises(SystemExit) as exit_info:
            main(args)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("Error: ") and err.count("\n") == 1, err
    main(["sweep", "--example", "fig14", "--show"])
    shown = capsys.readouterr().out
    assert "controller.a_t: [1.05, 1.10, 1.15]" in shown


# --------------------------------------------------------------------- Dask and serial
def test_two_worker_local_cluster_equals_serial(tmp_path) -> None:
    spec = sweep.parse_spec(SMALL)
    serial = sweep.run_tasks(spec.tasks, serial=True)
    on_dask = sweep.run_tasks(spec.tasks, workers=2)
    assert [o.task for o in on_dask] == list(spec.tasks)
    assert _deterministic(on_dask) == _deterministic(serial)
    assert all(o.attempts == 1 and not o.cached for o in on_dask)
    # the swept threshold is used: readjustments are more frequent at A_T = 105 %
    count = {1.05: 0, 1.15: 0}
    for o in serial:
        if o.task.policy == "metronome":
            count[dict(o.task.params)["controller.a_t"]] += o.metrics["readjustments"]
    assert count[1.05] > count[1.15]


def test_an_existing_scheduler_is_used_after_a_version_check(monkeypatch) -> None:
    import logging

    from distributed import LocalCluster

    spec = sweep.parse_spec({**SMALL, "groups": ["S2"], "seeds": [0]})
    serial = sweep.run_tasks(spec.tasks, serial=True)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None,  # its routes on a free port: no warning
                      scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                      silence_logs=logging.CRITICAL) as cluster:
        remote = sweep.run_tasks(spec.tasks, scheduler=cluster.scheduler_address)
        assert _deterministic(remote) == _deterministic(serial)
        monkeypatch.setattr(execute, "tdmcore_version", lambda: "0.0.0-other")
        with pytest.raises(ValueError, match=r"^scheduler: workers of tcp://127\.0\.0\.1:"
                                             r"\d+ run tdmcore .*, this is 0\.0\.0-other"):
            sweep.run_tasks(spec.tasks, scheduler=cluster.scheduler_address)
    monkeypatch.setattr(execute, "CONNECT_TIMEOUT_S", 1)
    with pytest.raises(ValueError, match=r"^scheduler: cannot reach tcp://127\.0\.0\.1:9"):
        sweep.run_tasks(spec.tasks, scheduler="tcp://127.0.0.1:9")


@pytest.mark.parametrize("address", ["notanaddress", "tcp://host", "tcp://:8786",
                                     "http://x", "tcp://127.0.0.1:99999", "tcp://h:0",
                                     "inproc://x"])
def test_a_malformed_scheduler_address_is_refused_before_any_client(address, capsys,
                                                                     tmp_path) -> None:
    # A Client that failed in its constructor closed itself when collected: 40 s of
    # waiting, then a TimeoutError traceback after the Error: line.
    import time

    tic = time.monotonic()
    with pytest.raises(SystemExit) as exit_info:
        main(["sweep", "--example", "fig14", "--no-cache", "--scheduler", address,
              "--out", str(tmp_path / "r")])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"Error: --scheduler: {address!r} is not a "
                                               "Dask scheduler address"), err
    assert time.monotonic() - tic < 10
    assert not (tmp_path / "r").exists()



def test_a_malformed_scheduler_address_is_refused_when_every_task_is_cached(
        capsys, tmp_path) -> None:
    # docs/sweeps.md: refused at once, before any connection -- even when the
    # cache answers every task and no scheduler would be needed
    spec = _write(tmp_path / "s.yaml", {**SMALL, "groups": ["S2"], "seeds": [0]})
    cache = tmp_path / "cache"
    main_args = ["sweep", str(spec), "--cache", str(cache), "--no-plots"]
    main([*main_args, "--serial", "--out", str(tmp_path / "a")])
    assert "3 tasks: 0 from the cache" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        main([*main_args, "--scheduler", "inproc://x", "--out", str(tmp_path / "b")])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"Error: --scheduler: {'inproc://x'!r} is not a Dask scheduler address"
                   + err[0].split("address", 1)[1]], err
    assert not (tmp_path / "b").exists()

FLAKY = '''
from pathlib import Path
from tdmcore.metronome.policies import DefaultPolicy

COUNT = Path(__file__).with_name("flaky-calls.txt")


class Flaky(DefaultPolicy):
    """Fails its first run anywhere: an "x" per run (one object each) in a file, as
    the workers are processes."""

    name = "flaky"

    def pre_filter(self, state, cycle):
        if not getattr(self, "counted", False):
            self.counted = True
            with COUNT.open("a") as fh:
                fh.write("x")
            if COUNT.read_text() == "x":
                raise RuntimeError("flaky: first run")
        return super().pre_filter(state, cycle)


class Broken(DefaultPolicy):
    name = "broken"

    def pre_filter(self, state, cycle):
        raise RuntimeError("broken on purpose")
'''


@pytest.mark.parametrize("mode", ["serial", "dask"])
def test_a_failing_task_is_reported_with_its_parameters_and_retried_once(
        mode, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "flakymod.py").write_text(textwrap.dedent(FLAKY), "utf-8")
    spec = _write(tmp_path / "fail.yaml", {
        "scenario": "metronome-snapshots", "groups": ["S1"], "seeds": [3],
        "policies": ["flakymod:Flaky", "flakymod:Broken"],
        "set": {"scenario.window_s": 20, "run.noise_sigma": 0.02}})
    args = ["sweep", str(spec), "--no-cache", "--out", str(tmp_path / "r")]
    args += ["--serial"] if mode == "serial" else ["--workers", "2"]
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    err = capsys.readouterr().err
    assert exit_info.value.code == 1
    lines = err.strip().splitlines()
    assert lines[-1] == "Error: 1 of 2 tasks failed twice (status and error in " \
                        "sweep-fail.csv)"
    where = "S1 / flakymod:Broken / seed 3 / run.noise_sigma=0.02, scenario.window_s=20"
    # a user's policy that raises is named, with the extension point (PolicyError)
    why = "PolicyError: policy 'broken': pre_filter raised RuntimeError: broken on purpose"
    assert f"task failed, retrying once: {where}: {why}" in err
    assert f"task failed twice: {where}: {why}" in err
    assert "retrying once: S1 / flakymod:Flaky / seed 3" in err
    assert (tmp_path / "flaky-calls.txt").read_text() == "xx"  # one failure, one retry
    with (tmp_path / "r" / "sweep-fail.csv").open() as fh:
        rows = {r["policy"]: r for r in csv.DictReader(fh)}
    assert rows["flakymod:Flaky"]["status"] == "ok" and rows["flakymod:Flaky"]["attempts"] \
        == "2" and float(rows["flakymod:Flaky"]["jct_s"]) > 0
    assert rows["flakymod:Broken"]["status"] == "failed"
    assert rows["flakymod:Broken"]["attempts"] == "2"
    assert rows["flakymod:Broken"]["error"] == why
    assert rows["flakymod:Broken"]["jct_s"] in ("nan", "")


INTERRUPTED = '''
import os
import signal
from tdmcore.metronome.policies import DefaultPolicy


class Interrupted(DefaultPolicy):
    """Sends its own process a SIGINT (as Ctrl-C does to the whole process group)
    at its first pod, then schedules as the default scheduler."""

    name = "interrupted"

    def pre_filter(self, state, cycle):
        if not getattr(self, "sent", False):
            self.sent = True
            os.kill(os.getpid(), signal.SIGINT)
        return super().pre_filter(state, cycle)
'''


def test_local_workers_leave_ctrl_c_to_the_sweep(tmp_path, monkeypatch, capfd) -> None:
    # Ctrl-C reaches every process of the group; each worker used to die with its
    # own KeyboardInterrupt traceback.  A worker ignores SIGINT (its preload), so a
    # task whose worker gets one finishes at its first attempt.
    monkeypatch.chdir(tmp_path)  # the workers start here and import intmod from it
    (tmp_path / "intmod.py").write_text(textwrap.dedent(INTERRUPTED), "utf-8")
    spec = sweep.parse_spec({"scenario": "metronome-snapshots", "groups": ["S1"],
                             "seeds": [0], "policies": ["intmod:Interrupted"],
                             "set": {"scenario.window_s": 20}})
    import threading

    found: list[Any] = []
    runner = threading.Thread(target=lambda: found.extend(
        sweep.run_tasks(spec.tasks, workers=1)), daemon=True)
    runner.start()
    runner.join(120)  # a worker that dies of the SIGINT is restarted and dies again
    assert found, "the task did not finish: its worker took the SIGINT"
    [outcome] = found
    assert outcome.ok and outcome.attempts == 1, outcome.error
    assert outcome.metrics["jct_s"] > 0
    assert "KeyboardInterrupt" not in capfd.readouterr().err  # nothing from the worker



def test_workers_are_started_with_sigint_ignored(monkeypatch) -> None:
    # A worker still importing its modules when Ctrl-C reaches the process group
    # printed a traceback (its preload had not run yet).  The cluster is started
    # with SIGINT ignored, a disposition the worker processes inherit; the sweep's
    # own handler is back once the cluster is up.
    import signal

    import distributed

    seen: list[Any] = []

    class Started(Exception):
        pass

    def fake_cluster(**kw: Any) -> Any:
        seen.append(signal.getsignal(signal.SIGINT))
        raise Started

    monkeypatch.setattr(distributed, "LocalCluster", fake_cluster)
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(Started), execute._client(None, 1):
        pass
    assert seen == [signal.SIG_IGN]
    assert signal.getsignal(signal.SIGINT) is before

# ------------------------------------------------------------------------------- cache
def test_the_cache_skips_finished_tasks(tmp_path, monkeypatch) -> None:
    spec = sweep.parse_spec(SMALL)
    cache = sweep.ResultCache(tmp_path / "cache")
    first = sweep.run_tasks(spec.tasks, cache=cache, serial=True)
    assert not any(o.cached for o in first)
    assert len(list((tmp_path / "cache").glob("*.json"))) == len(spec.tasks)
    monkeypatch.setattr(execute, "run_task", _never)  # a cached task must not run
    again = sweep.run_tasks(spec.tasks, cache=cache, serial=True)
    assert all(o.cached for o in again)
    assert [o.metrics for o in again] == [o.metrics for o in first]
    # one more value: only its tasks run
    more = sweep.parse_spec({**SMALL, "grid": {**SMALL["grid"],
                                               "controller.a_t": [1.05, 1.15, 1.10]}})
    ran: list[sweep.Task] = []
    monkeypatch.setattr(execute, "run_task", lambda t: ran.append(t) or {"x": 1.0})
    sweep.run_tasks(more.tasks, cache=cache, serial=True)
    assert ran and {dict(t.params)["controller.a_t"] for t in ran} == {1.10}
    # another tdmcore version is another key
    ran.clear()
    sweep.run_tasks(spec.tasks, cache=sweep.ResultCache(tmp_path / "cache", "0.0.0"),
                    serial=True)
    assert len(ran) == len(spec.tasks)


def test_a_damaged_cache_entry_runs_again(tmp_path) -> None:
    spec = sweep.parse_spec({**SMALL, "groups": ["S2"], "policies": ["default"],
                             "seeds": [0], "grid": {}})
    cache = sweep.ResultCache(tmp_path)
    (task,) = spec.tasks
    cache.folder.mkdir(exist_ok=True)
    cache.path(task).write_text("{not json", "utf-8")
    (outcome,) = sweep.run_tasks(spec.tasks, cache=cache, serial=True)
    assert not outcome.cached and outcome.ok
    assert cache.get(task) == outcome.metrics


def test_the_command_reuses_the_cache_and_writes_the_report(tmp_path, capsys) -> None:
    path = _write(tmp_path / "small.yaml", {**SMALL, "compare": ["default"]})
    args = ["sweep", str(path), "--serial", "--cache", str(tmp_path / "c"), "--out",
            str(tmp_path / "r")]
    main(args)
    assert "12 tasks: 0 from the cache, 12 run (0 retried), 0 failed" in capsys.readouterr().out
    main(args)
    assert "12 tasks: 12 from the cache, 0 run" in capsys.readouterr().out
    rows = json.loads((tmp_path / "r" / "sweep-small.json").read_text())
    assert len(rows) == 12 and {r["status"] for r in rows} == {"ok"}
    assert {"group", "policy", "seed", "scenario.window_s", "controller.a_t",
            "controller.o_t", "jct_s", "per_1000_low_s_vs_default_pct"} <= set(rows[0])
    pngs = sorted(p.name for p in (tmp_path / "r").glob("*.png"))
    assert pngs == ["sweep-small-per_1000_low_s-vs-controller-a_t.png",
                    "sweep-small-readjustments-vs-controller-a_t.png"]
    record = json.loads((tmp_path / "r" / "sweep-small-run.json").read_text())
    assert record["command"] == "tdmcore sweep"


# ---------------------------------------------------------------------------- compare
def test_compare_is_the_change_against_the_reference_run() -> None:
    spec = sweep.parse_spec({**SMALL, "policies": ["metronome", "ideal"],
                             "groups": ["S3"], "seeds": [0], "compare": ["ideal"]})
    outcomes = sweep.run_tasks(spec.tasks, serial=True)
    rows = sweep.result_rows(spec, outcomes)
    (ideal,) = [r for r in rows if r["policy"] == "ideal"]
    assert ideal["controller.a_t"] is None and ideal["per_1000_low_s_vs_ideal_pct"] == 0.0
    for row in rows:
        if row["policy"] == "metronome":
            want = 100 * (row["per_1000_low_s"] - ideal["per_1000_low_s"]) \
                / ideal["per_1000_low_s"]
            assert row["per_1000_low_s_vs_ideal_pct"] == pytest.approx(want, abs=1e-3)
            assert row["per_1000_low_s_vs_ideal_pct"] > 0
    # a task runs one policy: its metrics are the declared ones, each compared once
    # (no in-run "vs ideal" column, always NaN, and none compared a second time)
    metrics = set(run_metric_names())
    for row in rows:
        compared = {k for k in row if k.endswith("_vs_ideal_pct")}
        assert {k[:-len("_vs_ideal_pct")] for k in compared} <= metrics
        assert not any("_pct_vs_" in k for k in row)


# ------------------------------------------------------------------ the run's options
def test_run_cluster_takes_the_controller_thresholds() -> None:
    s2 = metronome_snapshots(60.0)["S2"]
    loose = run_cluster(s2.sim, s2.jobs, "metronome", controller=ControllerConfig(
        o_t=3, a_t=1.15))
    eager = run_cluster(s2.sim, s2.jobs, "metronome", controller=ControllerConfig(
        o_t=3, a_t=1.05))
    assert eager.readjustments > loose.readjustments
    s3 = metronome_snapshots(60.0)["S3"]
    default = run_cluster(s3.sim, s3.jobs, "metronome")
    same = run_cluster(s3.sim, s3.jobs, "metronome", controller=ControllerConfig())
    assert same.readjustments == default.readjustments
    assert same.mean_jct_s() == default.mean_jct_s()
    with pytest.raises(ValueError, match="^controller: policy 'default' runs no controller"):
        run_cluster(s3.sim, s3.jobs, "default", controller=ControllerConfig())
    with pytest.raises(ValueError, match="^controller: its scheduler config differs"):
        run_cluster(s3.sim, s3.jobs, MetronomePolicy(MetronomeConfig(gt_ms=9.0)),
                    controller=ControllerConfig())
    with pytest.raises(ValueError, match="^controller: expected a ControllerConfig"):
        run_cluster(s3.sim, s3.jobs, "metronome", controller={"o_t": 3})


def test_period_gap_keeps_the_communication_and_injects_idle() -> None:
    s3 = metronome_snapshots(60.0)["S3"]
    high, low = s3.jobs
    for gap in (S3_PERIOD_GAP_MS, 20.0, 0.0):
        scenario = period_gap(gap, 60.0)
        new_high, new_low = scenario.jobs
        assert new_high == high
        assert new_low.pattern.period_ms == pytest.approx(2 * high.pattern.period_ms - gap)
        assert new_low.pattern.period_ms * new_low.pattern.duty_cycle == pytest.approx(
            low.pattern.period_ms * low.pattern.duty_cycle)
        assert new_low.pattern.bandwidth_gbps == low.pattern.bandwidth_gbps
    for bad in (-1.0, 35.5, math.nan, "5"):
        with pytest.raises(ValueError, match="^gap_ms: "):
            period_gap(bad)
    with pytest.raises(ValueError, match="^window_s: "):
        period_gap(5.0, window_s=0.0)


def test_the_period_gap_study_shares_every_gap_on_the_mean() -> None:
    """Its G_T unifies each gap of its grid 2:1 on the mean, without idle, as the
    paper's Fig. 15 does.  With G_T pairwise (spec §4, revised 2026-11-28) the old
    17.5 ms, half the widest gap, unified 35 and 30 ms 5:3 and left 20 ms
    incompatible."""
    from tdmcore import unify_periods

    spec = yaml.safe_load(Path(sweep.example_path("period-gap")).read_text())
    gt_ms = spec["set"]["metronome.gt_ms"]
    for gap in spec["grid"]["scenario.gap_ms"]:
        high, low = (j.pattern for j in period_gap(float(gap), 60.0).jobs)
        base = unify_periods([high.period_ms, low.period_ms], ["high", "low"], gt_ms=gt_ms)
        assert base.compatible and base.multiples.tolist() == [2, 1], gap
        assert base.idle_ms.tolist() == [0.0, 0.0]
        assert base.period_ms == pytest.approx((2 * high.period_ms + low.period_ms) / 2)


@pytest.mark.parametrize("kwargs, name", [
    (dict(window_s=0.0), "window_s"), (dict(window_s=-5.0), "window_s"),
    (dict(window_s=math.nan), "window_s"), (dict(window_s="60"), "window_s"),
    (dict(window_s=1e8), "window_s"), (dict(workers=0), "workers"),
    (dict(workers=5), "workers"), (dict(workers=2.0), "workers"),
    (dict(workers=True), "workers"),
])
def test_snapshot_builder_refuses_bad_arguments(kwargs, name) -> None:
    with pytest.raises(ValueError, match=f"^{name}: "):
        metronome_snapshots(**kwargs)


def test_scheduler_time_shares_the_hub_link() -> None:
    state, pod = sharing_state(3, seed=1)
    hub = state.cluster.nodes[0]
    assert hub.name == "hub" and len(state.job_members) == 3
    assert all(p.node == 0 for name, p in state.placed.items() if name.endswith("-w0"))
    for name in ("default", "diktyo", "metronome"):
        result = scheduler_time(make_policy(name), jobs=3, seed=1, repeat=3)
        assert result.node == "hub" and result.scheduler_ms > 0
        assert math.isnan(result.controller_ms) == (name != "metronome")
    with pytest.raises(ValueError, match="^jobs: expected an integer >= 0"):
        scheduler_time(make_policy("default"), jobs=-1)
    with pytest.raises(ValueError, match="^repeat: expected an integer >= 1"):
        scheduler_time(make_policy("default"), jobs=1, repeat=0)


# ----------------------------------------------------------------------- shipped specs
def test_every_shipped_spec_loads_and_a_few_of_its_tasks_run() -> None:
    assert set(sweep.EXAMPLES) == {"fig14", "monitor-window", "period-gap", "scheduler-time"}
    shown = " ".join(CliRunner().invoke(cli, ["sweep", "--help"]).output.split())
    assert all(name in shown for name in sweep.EXAMPLES)  # --example's help lists them
    for name in sweep.EXAMPLES:
        spec = sweep.load_spec(sweep.example_path(name))
        assert spec.name == name and spec.tasks and spec.swept
        # one task per policy, with the lightest values, runs (reduced grid)
        picked: dict[str, sweep.Task] = {}
        for task in spec.tasks:
            if task.policy not in picked and dict(task.params).get("scenario.jobs", 0) <= 2:
                picked[task.policy] = task
        outcomes = sweep.run_tasks(list(picked.values()), serial=True)
        assert all(o.ok for o in outcomes), [o.error for o in outcomes]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(sweep.EXAMPLES))
def test_every_shipped_spec_runs_whole_on_a_local_cluster(name, tmp_path, capsys) -> None:
    main(["sweep", "--example", name, "--workers", "2", "--no-cache", "--out",
          str(tmp_path)])
    out = capsys.readouterr().out
    assert " 0 failed" in out
    rows = json.loads((tmp_path / f"sweep-{name}.json").read_text())
    assert rows and {r["status"] for r in rows} == {"ok"}


# ------------------------------------------------------------- defects of a review
def test_bool_fields_refuse_strings_and_numbers() -> None:
    # read by their truth, 'off' was true: the configs and run_cluster own the rule
    for bad in ("off", 1, 0, None):
        with pytest.raises(ValueError, match="^monitor: expected a bool"):
            MetronomeConfig(monitor=bad)
        with pytest.raises(ValueError, match="^phase_three: expected a bool"):
            ControllerConfig(phase_three=bad)
        with pytest.raises(ValueError, match="^skip_ahead: expected a bool"):
            check_run_options(skip_ahead=bad)
    with pytest.raises(ValueError, match="^exact_scores: expected a bool"):
        MetronomeConfig(exact_scores="yes")
    s1 = metronome_snapshots(20.0)["S1"]
    with pytest.raises(ValueError, match="^skip_ahead: expected a bool, got 'no'"):
        run_cluster(s1.sim, s1.jobs, "default", skip_ahead="no")
    assert MetronomeConfig(monitor=False).monitor is False


POLICY_V1 = '''
from tdmcore.metronome.policies import DefaultPolicy


class Mine(DefaultPolicy):
    name = "mine"
'''


def test_an_edited_policy_module_is_another_cache_key(tmp_path, monkeypatch, caplog) -> None:
    monkeypatch.chdir(tmp_path)
    module = tmp_path / "editedpol.py"
    module.write_text(POLICY_V1, "utf-8")
    spec = sweep.parse_spec({"scenario": "metronome-snapshots", "groups": ["S1"],
                             "policies": ["editedpol:Mine", "default"],
                             "set": {"scenario.window_s": 20}})
    ran: list[str] = []
    monkeypatch.setattr(execute, "run_task", lambda t: ran.append(t.policy) or {"x": 1.0})
    sweep.run_tasks(spec.tasks, cache=sweep.ResultCache(tmp_path / "c"), serial=True)
    sweep.run_tasks(spec.tasks, cache=sweep.ResultCache(tmp_path / "c"), serial=True)
    assert ran == ["editedpol:Mine", "default"]  # the second run: all cached
    module.write_text(POLICY_V1 + "\n# a change of the policy's code\n", "utf-8")
    sweep.run_tasks(spec.tasks, cache=sweep.ResultCache(tmp_path / "c"), serial=True)
    assert ran[2:] == ["editedpol:Mine"]  # only the edited policy's task runs again
    # a policy whose module has no file: never cached, and a warning says so
    import sys
    import types

    nofile = types.ModuleType("nofilepol")
    exec(POLICY_V1, nofile.__dict__)
    nofile.Mine.__module__ = "nofilepol"
    monkeypatch.setitem(sys.modules, "nofilepol", nofile)
    spec = sweep.parse_spec({**SMALL, "policies": ["nofilepol:Mine"], "grid": {},
                             "groups": ["S1"], "seeds": [0]})
    cache = sweep.ResultCache(tmp_path / "c")
    with caplog.at_level("WARNING", logger="tdmcore"):
        for _ in range(2):
            sweep.run_tasks(spec.tasks, cache=cache, serial=True)
    assert ran[3:] == ["nofilepol:Mine"] * 2
    assert cache.key(spec.tasks[0]) is None and cache.get(spec.tasks[0]) is None
    assert "nofilepol:Mine: the file of its module cannot be read: its tasks are not " \
           "cached" in caplog.text


def _outcome(policy: str, params: dict[str, Any], value: float, seed: int = 0
             ) -> sweep.Outcome:
    task = sweep.Task("simulate", "period-gap", "", "S3", policy, seed,
                      tuple(sorted(params.items())))
    return sweep.Outcome(task, {"jct_s": value})


def test_compare_against_a_policy_with_a_fixed_parameter() -> None:
    # period-gap compares with metronome, which alone takes metronome.gt_ms: every
    # other policy's column was NaN, as the reference's gt_ms was not the row's
    spec = sweep.parse_spec({"scenario": "period-gap", "policies": ["metronome", "default",
                                                                    "ideal"],
                             "set": {"scenario.window_s": 20, "metronome.gt_ms": 17.5},
                             "grid": {"scenario.gap_ms": [35, 0]},
                             "compare": ["ideal", "metronome"]})
    values = {("metronome", 35): 110.0, ("metronome", 0): 105.0, ("default", 35): 121.0,
              ("default", 0): 126.0, ("ideal", 35): 100.0, ("ideal", 0): 100.0}
    outcomes = [sweep.Outcome(t, {"jct_s": values[t.policy,
                                                  dict(t.params)["scenario.gap_ms"]]})
                for t in spec.tasks]
    rows = sweep.result_rows(spec, outcomes)
    got = {(r["policy"], r["scenario.gap_ms"]): (r["jct_s_vs_ideal_pct"],
                                                 r["jct_s_vs_metronome_pct"]) for r in rows}
    assert got[("default", 35)] == (21.0, 10.0)
    assert got[("default", 0)] == (26.0, 20.0)
    assert got[("metronome", 0)] == (5.0, 0.0)
    assert got[("ideal", 35)] == (0.0, pytest.approx(-9.091))
    # a reference that sweeps a parameter the row's policy does not take has no one
    # run to compare with: NaN, not the first of them
    spec = sweep.parse_spec({**SMALL, "policies": ["metronome", "default"], "seeds": [0],
                             "groups": ["S2"], "compare": ["metronome"]})
    outcomes = [sweep.Outcome(t, {"jct_s": 10.0 + i}) for i, t in enumerate(spec.tasks)]
    rows = sweep.result_rows(spec, outcomes)
    (default,) = [r for r in rows if r["policy"] == "default"]
    assert math.isnan(default["jct_s_vs_metronome_pct"])
    assert [r["jct_s_vs_metronome_pct"] for r in rows if r["policy"] == "metronome"] \
        == [0.0, 0.0]


def test_each_process_warms_the_kernels_up_once_per_policy(monkeypatch) -> None:
    # the first task of a process used to time the loading of the compiled kernels
    # (decision_ms_p99 of 4,333 ms against about 1 ms), and the cache kept it
    from tdmcore.sim.cluster import warm_up

    warmed: list[tuple[str, int]] = []

    def spy(sim, jobs, policy, *, seed=0):
        warmed.append((policy, len(jobs)))
        warm_up(sim, jobs, policy, seed=seed)

    monkeypatch.setattr(sweep_tasks, "_WARMED", set())
    monkeypatch.setattr(sweep_tasks, "warm_up", spy)
    spec = sweep.parse_spec({**SMALL, "seeds": [0], "grid": {}})
    outcomes = sweep.run_tasks(spec.tasks, serial=True)
    assert all(o.ok for o in outcomes)
    assert [p for p, _ in warmed] == ["default", "metronome"]
    # the same warm-up as `tdmcore simulate`'s: the first two jobs, 20 iterations
    calls: list[list[int]] = []
    monkeypatch.setattr("tdmcore.sim.cluster.run_cluster",
                        lambda sim, jobs, policy, seed=0: calls.append(
                            [j.iterations for j in jobs]))
    s2 = metronome_snapshots(60.0)["S2"]
    warm_up(s2.sim, s2.jobs, "metronome")
    assert calls == [[20, 20]]


def test_scalar_network_parameters_fill_every_link_and_pair() -> None:
    spec = sweep.parse_spec({"scenario": "metronome-snapshots", "groups": ["S2"],
                             "policies": ["default"],
                             "set": {"scenario.window_s": 20, "cluster.latency_ms": 2},
                             "grid": {"cluster.background_gbps": [0, 8]}})
    sims = [task_scenario(t).sim for t in spec.tasks]
    assert [list(s.background_gbps) for s in sims] == [[0.0] * 4, [8.0] * 4]
    assert all((s.latency_ms == 2.0).all() for s in sims)
    outcomes = sweep.run_tasks(spec.tasks, serial=True)
    quiet, loaded = (o.metrics["jct_s"] for o in outcomes)
    assert loaded > quiet  # background traffic slows the jobs


def test_an_unwritable_cache_is_refused_before_any_task(tmp_path, capsys,
                                                         monkeypatch) -> None:
    # it used to fail after the tasks ran, as "out: cannot write"
    path = _write(tmp_path / "small.yaml", {**SMALL, "groups": ["S2"], "seeds": [0]})
    (tmp_path / "file").write_text("not a folder", "utf-8")
    monkeypatch.setattr(execute, "run_task", _never)
    with pytest.raises(SystemExit) as exit_info:
        main(["sweep", str(path), "--serial", "--cache", str(tmp_path / "file" / "c"),
              "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 1
    assert err == f"Error: --cache: cannot write to {tmp_path / 'file' / 'c'}: Not a " \
                  "directory\n", err
    assert not (tmp_path / "r").exists()
    with pytest.raises(ValueError, match="^cache: cannot write to "):
        sweep.run_tasks([], cache=sweep.ResultCache(tmp_path / "file" / "c"), serial=True)


def test_a_scenario_file_is_kept_as_an_absolute_path(tmp_path, monkeypatch) -> None:
    # relative, a worker started elsewhere did not find it, and two spellings of one
    # file were two cache keys
    from tdmcore.app.common import example_path as _example_path

    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "scen.yaml").write_text(_example_path().read_text("utf-8"), "utf-8")
    _write(folder / "x.yaml", {"scenario": "scen.yaml", "policies": ["default"]})
    monkeypatch.chdir(tmp_path)
    one = sweep.load_spec("specs/x.yaml")
    two = sweep.load_spec("specs/../specs/x.yaml")
    assert one.scenario.path == str((folder / "scen.yaml").resolve())
    assert one.tasks == two.tasks
    cache = sweep.ResultCache(tmp_path / "c")
    assert cache.key(one.tasks[0]) == cache.key(two.tasks[0])
    monkeypatch.chdir(folder.parent.parent)  # a worker started elsewhere
    assert task_scenario(one.tasks[0]).jobs


EXITS = '''
import sys
from tdmcore.metronome.policies import DefaultPolicy


class Exits(DefaultPolicy):
    name = "exits"

    def pre_filter(self, state, cycle):
        sys.exit(3)
'''


@pytest.mark.parametrize("mode", ["serial", "dask"])
def test_a_task_calling_sys_exit_is_a_failed_task(mode, tmp_path, monkeypatch,
                                                   capsys) -> None:
    # serial: the sweep ended with exit status 3, no Error line and no report;
    # Dask: each attempt killed its worker, 4 times over (KilledWorker)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "exitmod.py").write_text(textwrap.dedent(EXITS), "utf-8")
    spec = _write(tmp_path / "ex.yaml", {
        "scenario": "metronome-snapshots", "groups": ["S1"],
        "policies": ["exitmod:Exits", "default"], "set": {"scenario.window_s": 20}})
    args = ["sweep", str(spec), "--no-cache", "--no-plots", "--out", str(tmp_path / "r")]
    args += ["--serial"] if mode == "serial" else ["--workers", "1"]
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    err = capsys.readouterr().err
    assert exit_info.value.code == 1
    assert err.strip().splitlines()[-1] == "Error: 1 of 2 tasks failed twice (status " \
                                           "and error in sweep-ex.csv)"
    rows = {r["policy"]: r for r in json.loads((tmp_path / "r" / "sweep-ex.json")
                                               .read_text())}
    assert rows["exitmod:Exits"]["error"] == ("PolicyError: policy 'exits': pre_filter "
                                              "raised SystemExit: 3")
    assert rows["default"]["status"] == "ok"
