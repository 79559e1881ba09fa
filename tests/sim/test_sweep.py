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

from tdmcore.app.cli import cli, main
from tdmcore.metronome.controller import ControllerConfig
from tdmcore.metronome.policies import MetronomeConfig, MetronomePolicy, make_policy
from tdmcore.sim import sweep
from tdmcore.sim.cluster import run_cluster
from tdmcore.sim.scenarios import S3_PERIOD_GAP_MS, metronome_snapshots, period_gap
from tdmcore.sim.scheduler_time import scheduler_time, sharing_state
from tdmcore.sim.sweep import execute
from tdmcore.sim.sweep import tasks as sweep_tasks
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
    ({"grid": {"controller.a_t": [1.1, 1.1]}}, "grid.controller.a_t: a value is listed"),
    ({"set": {"metronome.gt_ms": -1}}, "set.metronome.gt_ms: must be >= 0"),
    ({"policies": ["default"], "grid": {"metronome.bins": [72, 144]}},
     "grid.metronome.bins: no policy of the sweep takes metronome.*"),
    ({"policies": ["metronme"]}, "policies[0]: unknown policy 'metronme' (did you mean"),
    ({"groups": ["S9"]}, "groups[0]: unknown group 'S9'"),
    ({"metrics": ["jct"]}, "metrics[0]: unknown metric 'jct'"),
    ({"seeds": [0, -1]}, "seeds[1]: expected an integer >= 0"),
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
                      dashboard_address=None, silence_logs=logging.CRITICAL) as cluster:
        remote = sweep.run_tasks(spec.tasks, scheduler=cluster.scheduler_address)
        assert _deterministic(remote) == _deterministic(serial)
        monkeypatch.setattr(execute, "tdmcore_version", lambda: "0.0.0-other")
        with pytest.raises(ValueError, match=r"^scheduler: workers of tcp://127\.0\.0\.1:"
                                             r"\d+ run tdmcore .*, this is 0\.0\.0-other"):
            sweep.run_tasks(spec.tasks, scheduler=cluster.scheduler_address)
    monkeypatch.setattr(execute, "CONNECT_TIMEOUT_S", 1)
    with pytest.raises(ValueError, match=r"^scheduler: cannot reach tcp://127\.0\.0\.1:9"):
        sweep.run_tasks(spec.tasks, scheduler="tcp://127.0.0.1:9")


@pytest.mark.parametrize("address", ["notanaddress", "tcp://host", "tcp://:8786"])
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
    assert len(err) == 1 and err[0].startswith(f"Error: scheduler: {address!r} is not a "
                                               "Dask scheduler address"), err
    assert time.monotonic() - tic < 10
    assert not (tmp_path / "r").exists()


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
    metrics = set(sweep_tasks.simulate_metric_names())
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
