"""The command line as a researcher uses it every day: help, listings, errors that never
trace back, Ctrl-C, pipes, logging, and the record a report keeps of its run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tdmcore.app.cli import cli
from tdmcore.app.common import configure_logging as _configure_logging
from tdmcore.app.lifecycle import main
from tdmcore.app.simulate_output import _warn_unfinished

SNAPSHOT = "metronome-snapshots"


def _tdmcore(*args: str, cwd: Path, **kwargs: object) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tdmcore", *args], cwd=cwd, text=True,
                            stderr=subprocess.PIPE, **kwargs)  # type: ignore[call-overload]


def _one_error_line(err: str, *needles: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


# ------------------------------------------------------------------------ entry points
@pytest.mark.parametrize("argv", [[], ["--help"]])
def test_bare_command_and_python_m_print_the_help(argv: list[str], tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "tdmcore", *argv], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith("Usage: tdmcore ") and "simulate" in done.stdout


def test_list_scenarios_and_policies() -> None:
    scenarios = CliRunner().invoke(cli, ["list", "scenarios"])
    assert scenarios.exit_code == 0
    for name in (SNAPSHOT, "metronome-trace", "philly", "dragon-testbed", "oasis", "s1"):
        assert name in scenarios.output
    assert CliRunner().invoke(cli, ["scenarios"]).output == scenarios.output
    # a scenario only a sweep runs is listed with the command that runs it, and
    # `simulate` names that command instead of calling the name unknown
    row = next(line for line in scenarios.output.splitlines() if "period-gap" in line)
    assert "tdmcore sweep" in row
    refused = CliRunner().invoke(cli, ["simulate", "period-gap"])
    assert refused.exit_code == 1
    assert "scenario of tdmcore sweep (in a sweep spec: scenario: period-gap)" in refused.output
    policies = CliRunner().invoke(cli, ["list", "policies"])
    assert policies.exit_code == 0
    for name in ("metronome-no-monitor", "ideal", "dragon", "kod2", "oasis", "dorm"):
        assert name in policies.output


def test_simulate_help_lists_scenarios_and_policies() -> None:
    text = CliRunner().invoke(cli, ["simulate", "--help"]).output
    assert "Scenarios:" in text and "Policies" in text
    for name in (SNAPSHOT, "philly", "FILE.yaml", "metronome-no-phase3", "ideal"):
        assert name in text
    assert "metronome-no-\n" not in text  # names are never broken across lines


# ---------------------------------------------------------------------------- errors
@pytest.mark.parametrize("args, needles", [
    (["simulate", SNAPSHOT, "--window", "nan"], ["--window", "'nan' is not a finite"]),
    (["simulate", "metronome-trace", "--load", "inf"], ["--load"]),
    (["elastic", "poisson", "--gap", "nan"], ["--gap", "not a finite"]),
    (["elastic", "table1", "--rescale", "inf"], ["--rescale"]),
])
def test_non_finite_numbers_are_usage_errors(args, needles, tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main([*args, "--out", str(tmp_path / "out")])
    assert done.value.code == 2
    _one_error_line(capsys.readouterr().err, *needles)
    assert not (tmp_path / "out").exists()


def test_a_gap_too_large_for_the_clock_is_a_usage_error(tmp_path, capsys) -> None:
    # the library's own bound (MAX_GAP_S), checked by the option: exit 2, naming --gap
    with pytest.raises(SystemExit) as done:
        main(["elastic", "poisson", "--gap", "1e308", "--out", str(tmp_path / "out")])
    assert done.value.code == 2
    _one_error_line(capsys.readouterr().err, "--gap", "1000000000")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args, needles", [
    # every bound the library enforces is the option's, shown in its --help
    (["simulate", SNAPSHOT, "--window", "1e8"], ["--window", "10000000"]),
    (["simulate", SNAPSHOT, "--contention-efficiency", "1e-300"],
     ["--contention-efficiency", "0.01<=x<=1.0"]),
    (["fidelity", "--contention-efficiency", "0.001"], ["--contention-efficiency"]),
])
def test_numbers_beyond_the_librarys_bounds_are_usage_errors(args, needles, tmp_path,
                                                              capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main([*args, "--out", str(tmp_path / "out")])
    assert done.value.code == 2
    _one_error_line(capsys.readouterr().err, *needles)
    assert not (tmp_path / "out").exists()


def test_the_smallest_contention_efficiency_is_the_librarys_bound() -> None:
    from tdmcore.sim.cluster import run_cluster
    from tdmcore.sim.engine.network import MIN_CONTENTION_EFFICIENCY
    from tdmcore.sim.scenarios import metronome_snapshots

    sc = metronome_snapshots(5.0)["S1"]
    with pytest.raises(ValueError, match=r"^contention_efficiency: expected 0.01 <= eta"):
        run_cluster(sc.sim, sc.jobs, "default", contention_efficiency=0.005)
    run = run_cluster(sc.sim, sc.jobs, "default",
                      contention_efficiency=MIN_CONTENTION_EFFICIENCY)
    assert all(j.end_ms is not None for j in run.jobs.values())


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="needs /dev/null")
def test_an_out_that_is_no_folder_is_a_usage_error(capsys) -> None:
    # click refuses a regular file itself; a device is no folder either
    with pytest.raises(SystemExit) as done:
        main(["simulate", SNAPSHOT, "--window", "5", "--no-plots", "--out", "/dev/null"])
    assert done.value.code == 2
    _one_error_line(capsys.readouterr().err, "--out", "exists and is not a folder")


def test_the_library_names_a_gap_too_large_for_time() -> None:
    from tdmcore.sim.elastic_workloads import dragon_poisson

    with pytest.raises(ValueError, match=r"^mean_gap_s: "):
        dragon_poisson(10, 1e308, 0)


SCENARIO = """
name: {name}
cluster:
  nodes:
    - {{name: a, cpu: 32, mem_gib: 256, gpu: 4, link_gbps: 25}}
jobs:
  - {{name: big, model: VGG19, workers: {workers}, iterations: 20}}
"""


@pytest.mark.parametrize("name, workers, needles", [
    ("x/y", 2, ["name:", "'x/y'"]),
    ("ok", 64, ["jobs[0].workers", "can never be placed", "room for 4"]),
])
def test_scenario_errors_before_any_simulation(name, workers, needles, tmp_path,
                                               capsys) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(name=name, workers=workers))
    start = time.perf_counter()
    with pytest.raises(SystemExit) as done:
        main(["simulate", str(path), "--out", str(tmp_path / "out")])
    assert done.value.code == 1
    _one_error_line(capsys.readouterr().err, *needles)
    assert time.perf_counter() - start < 20  # refused up front, not after a run
    assert not (tmp_path / "out").exists()


def test_link_reads_yaml(tmp_path: Path) -> None:
    (tmp_path / "pods.yaml").write_text(
        "capacity_gbps: 12\npods:\n"
        "  - {name: a, period_ms: 100, duty_cycle: 0.3, bandwidth_gbps: 10, priority: high}\n"
        "  - {name: b, period_ms: 50, duty_cycle: 0.2, bandwidth_gbps: 10}\n")
    (tmp_path / "pods.json").write_text(json.dumps({"capacity_gbps": 12, "pods": [
        {"name": "a", "period_ms": 100, "duty_cycle": 0.3, "bandwidth_gbps": 10,
         "priority": "high"},
        {"name": "b", "period_ms": 50, "duty_cycle": 0.2, "bandwidth_gbps": 10}]}))
    for name in ("pods.yaml", "pods.json"):
        result = CliRunner().invoke(cli, ["link", "--file", str(tmp_path / name), "--out",
                                          str(tmp_path / name.replace(".", "-")),
                                          "--no-plot"])
        assert result.exit_code == 0, result.output
    from_yaml = json.loads((tmp_path / "pods-yaml" / "link-pods.json").read_text())
    from_json = json.loads((tmp_path / "pods-json" / "link-pods.json").read_text())
    assert from_yaml["optimal"]["rotations"] == from_json["optimal"]["rotations"]
    record = json.loads((tmp_path / "pods-yaml" / "link-pods-run.json").read_text())
    assert record["command"] == "tdmcore link" and record["files"][0] == "link-pods.json"


def test_bad_yaml_link_file_is_one_line(tmp_path: Path, capsys) -> None:
    (tmp_path / "bad.yml").write_text("capacity_gbps: [1,\n")
    with pytest.raises(SystemExit) as done:
        main(["link", "--file", str(tmp_path / "bad.yml"), "--out", str(tmp_path / "o")])
    assert done.value.code == 1
    _one_error_line(capsys.readouterr().err, "invalid YAML at line 2")


# ------------------------------------------------------------ Ctrl-C, pipes, logging
@pytest.mark.parametrize(("sig", "code", "line"), [
    (signal.SIGINT, 130, "Error: interrupted"),  # Ctrl-C
    # what `kill`, a batch system's time limit or `timeout` sends
    (signal.SIGTERM, 143, "Error: terminated"),
])
def test_a_signal_exits_with_its_code_and_leaves_no_partial_report(
        sig: signal.Signals, code: int, line: str, tmp_path: Path) -> None:
    from tests.processes import alive_in_group, reaped

    out = tmp_path / "report"
    # the signal's default disposition in the child: a shell runs background jobs
    # (and so, maybe, this test) with SIGINT ignored, and Python then never raises
    # KeyboardInterrupt.  A session of its own: the command and its plot workers are
    # one process group, checked empty at the end and killed whatever happens.
    # (the trace's first jobs: a long run, whose first of 7 policies alone is not
    # done after 150 s on the shared 2 cores)
    proc = _tdmcore("simulate", "philly", "--start", "0", "--jobs", "300", "--nodes", "16",
                    "--out", str(out), cwd=tmp_path, stdout=subprocess.PIPE,
                    preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL),
                    start_new_session=True)
    with reaped(proc):
        deadline = time.monotonic() + 300  # the imports and the trace, under load
        while not list(out.glob(".tdmcore-partial-*")):  # the run has begun writing
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"no report was begun: {proc.communicate()[1]}")
            time.sleep(0.05)
        # anywhere in the run's start: the plot workers' fork (Ctrl-C there left them
        # running and the command waiting for them), the kernels, the first events
        time.sleep(0.5)
        proc.send_signal(sig)
        start = time.monotonic()
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == code, err
        # answered within a slice of events, not at the end (2-6 s at load 9)
        assert time.monotonic() - start < 60
        assert err.strip().splitlines()[-1] == line and "Traceback" not in err
        assert not out.exists()  # the folder it created is gone with the staged files
        assert alive_in_group(proc.pid) == []  # no plot worker left behind


def test_sigterm_handler_is_the_commands_only_while_it_runs() -> None:
    before = signal.getsignal(signal.SIGTERM)
    main(["--version"])
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_closed_pipe_does_not_lose_the_report(tmp_path: Path) -> None:
    out = tmp_path / "report"
    proc = _tdmcore("simulate", "--example", "--policies", "default,metronome",
                    "--no-plots", "--out", str(out), cwd=tmp_path, stdout=subprocess.PIPE)
    proc.stdout.close()  # as `| head -0` would: every write to stdout fails
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err
    names = {p.name for p in out.iterdir()}
    assert {"simulate-example.csv", "simulate-example.json", "simulate-example-jobs.csv",
            "simulate-example-jobs.json", "simulate-example-run.json"} == names


def test_log_level_filters_warnings(capsys) -> None:
    rows = [{"group": "g", "policy": "p", "jobs": 2, "finished": 1}]
    jobs = [{"group": "g", "policy": "p", "job": "a", "jct_s": 1.0},
            {"group": "g", "policy": "p", "job": "stuck", "jct_s": float("nan")}]
    try:
        _configure_logging("warning")
        _warn_unfinished(rows, jobs)
        err = capsys.readouterr().err
        assert err.startswith("WARNING: g / p: 1 of 2 job(s) never finished (stuck)")
        _configure_logging("error")
        _warn_unfinished(rows, jobs)
        assert capsys.readouterr().err == ""
    finally:
        _configure_logging("warning")


def test_log_level_option_is_checked(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--log-level", "loud", "list", "scenarios"])
    assert done.value.code == 2
    _one_error_line(capsys.readouterr().err, "--log-level")


def test_run_record_names_version_seed_and_arguments(tmp_path: Path) -> None:
    env = {**os.environ}
    done = subprocess.run([sys.executable, "-m", "tdmcore", "simulate", "--example",
                           "--policies", "default", "--no-plots", "--seed", "3", "--out",
                           str(tmp_path)], capture_output=True, text=True, timeout=300,
                          env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "simulate-example-run.json").read_text())
    assert record["seed"] == 3 and record["parameters"]["policies"] == "default"
    assert record["argv"][1:] == ["simulate", "--example", "--policies", "default",
                                  "--no-plots", "--seed", "3", "--out", str(tmp_path)]
    from importlib.metadata import version

    assert record["tdmcore_version"] == version("tdmcore") and record["wall_s"] > 0


@pytest.mark.parametrize("args, flag", [
    ([SNAPSHOT, "--hours", "2"], "--hours"),
    (["metronome-trace", "--window", "30"], "--window"),
    (["--example", "--jobs", "5"], "--jobs"),
])
def test_an_option_for_another_scenario_is_refused(args, flag, tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main(["simulate", *args, "--out", str(tmp_path / "out")])
    assert done.value.code == 2
    _one_error_line(capsys.readouterr().err, f"{flag} applies to")
    assert not (tmp_path / "out").exists()


def test_oasis_table_fits_80_columns(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "tdmcore", "oasis", "--jobs", "20",
                           "--worker-servers", "4", "--ps-servers", "4", "--slots", "40",
                           "--l-quantile", "0.9", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    table = done.stdout.split("report:")[0]
    assert max(len(line) for line in table.splitlines()) <= 80
    assert "oasis-L0.9" in table  # never cut to "oasis-L…"


def test_plots_as_svg_and_a_jct_figure_in_every_run(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["simulate", "--example", "--policies",
                                      "default,metronome", "--plot-format", "svg",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    figures = sorted(p.name for p in tmp_path.glob("*.svg"))
    assert "example-jct.svg" in figures and "example-iterations.svg" in figures
    assert not list(tmp_path.glob("*.png"))
    assert (tmp_path / "example-jct.svg").read_text().lstrip().startswith("<?xml")
