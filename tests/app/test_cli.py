"""The command line: the main job's output, the report, and one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tdmcore.app.cli import cli
from tdmcore.app.lifecycle import main


def test_link_s1_prints_table_and_writes_report(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["link", "s1", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "base period T = 422.26 ms" in result.output
    assert "score (Eq. 18)" in result.output
    report = json.loads((tmp_path / "link-s1.json").read_text())
    # Three 20 % arcs on one circle: both searches find a perfect interleaving.
    assert report["first"]["perfect"] and report["optimal"]["perfect"]
    assert report["optimal"]["rotations"] == {"vgg19-a": 0, "vgg19-b": 24, "vgg19-c": 48}
    assert report["optimal"]["shifts_ms"]["vgg19-b"] == pytest.approx(24 / 72 * 422.26)
    assert report["unshifted"]["score"] < 100
    png = tmp_path / "link-s1.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_over_subscribed_link_reports_best_score(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["link", "s1-4w", "--out", str(tmp_path), "--no-plot"])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "link-s1-4w.json").read_text())
    assert not report["optimal"]["perfect"]
    assert report["unshifted"]["score"] < report["first"]["score"] < 100
    assert not (tmp_path / "link-s1-4w.png").exists()


def test_pods_from_command_line_and_file(tmp_path: Path) -> None:
    args = ["link", "--pod", "a:100:0.3:10:high", "--pod", "b:50:0.2:10", "--capacity", "12",
            "--out", str(tmp_path), "--no-plot"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    spec = {"capacity_gbps": 12, "pods": [
        {"name": "a", "period_ms": 100, "duty_cycle": 0.3, "bandwidth_gbps": 10,
         "priority": "high"},
        {"name": "b", "period_ms": 50, "duty_cycle": 0.2, "bandwidth_gbps": 10}]}
    path = tmp_path / "pods.json"
    path.write_text(json.dumps(spec))
    result2 = CliRunner().invoke(cli, ["link", "--file", str(path), "--out", str(tmp_path),
                                       "--no-plot"])
    assert result2.exit_code == 0, result2.output
    from_cli = json.loads((tmp_path / "link-custom.json").read_text())
    from_file = json.loads((tmp_path / "link-pods.json").read_text())
    assert from_cli["optimal"]["rotations"] == from_file["optimal"]["rotations"]


@pytest.mark.parametrize(
    ("args", "message", "status"),
    [
        (["link", "nope"], "unknown scenario", 2),
        (["link"], "exactly one of", 2),
        (["link", "s1", "--pod", "a:1:0.1:1"], "exactly one of", 2),
        (["link", "s1", "--bins", "abc"], "'abc' is not a valid integer", 2),
        (["bogus"], "No such command", 2),
        # a malformed --pod value is a usage error, as click's own checks of a value
        (["link", "--pod", "a:100:1.5:10"],
         "--pod[1].duty_cycle: expected a number in [0, 1], got 1.5", 2),
        (["link", "--pod", "a:100:0.5"], "expected NAME:PERIOD_MS", 2),
        (["link", "--pod", "a:x:0.5:1"], "--pod[1].period_ms: expected a number", 2),
        (["link", "--pod", "a:100:0.5:40"], "above the link's 25.0 Gbps", 1),
        (["link", "--pod", "a:100:0.5:4", "--pod", "a:100:0.5:4"], "unique", 1),
        (["link", "s1", "--bins", "4"], "4 is not in the range 8<=x<=3600", 2),
        # a newcomer's review (2026-11-24): a million bins ran for minutes and gigabytes
        (["link", "s1", "--bins", "1000000"], "1000000 is not in the range 8<=x<=3600", 2),
        (["link", "s1", "--capacity", "-1"], "Invalid value for '--capacity'", 2),
        (["link", "s1", "--capacity", "nan"], "'nan' is not a finite number", 2),
        (["link", "--file", "/nonexistent/pods.json"], "cannot read", 1),
        (["link", "s1", "--out", "/proc/forbidden"], "--out: cannot write", 1),
    ],
)
def test_bad_input_is_one_line_error(args, message, status, tmp_path, capsys) -> None:
    if "--out" not in args:
        args = [*args, "--out", str(tmp_path)] if args[0] == "link" else args
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    captured = capsys.readouterr()
    assert exit_info.value.code == status
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), captured.err
    assert message in lines[0]
    assert captured.out == ""  # nothing printed as if it had worked
    assert not list(tmp_path.glob("link-*"))  # nothing written


def test_bad_json_file_points_at_field(tmp_path: Path) -> None:
    path = tmp_path / "pods.json"
    path.write_text(json.dumps({"capacity_gbps": 10, "pods": [{"name": "a", "period_ms": 100,
                                                                "duty_cycle": "half",
                                                                "bandwidth_gbps": 1}]}))
    result = CliRunner().invoke(cli, ["link", "--file", str(path), "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert f"{path}: $.pods[0].duty_cycle: expected a number in [0, 1], got 'half'" \
        in result.output
    path.write_text("{not json")
    result = CliRunner().invoke(cli, ["link", "--file", str(path), "--out", str(tmp_path)])
    assert f"file: {path}: invalid JSON at line 1" in result.output
    # read as scenario files are (one reader): a duplicated key is refused, not the
    # last one taken
    dup = tmp_path / "dup.yaml"
    dup.write_text("capacity_gbps: 25\ncapacity_gbps: 10\npods: []\n")
    result = CliRunner().invoke(cli, ["link", "--file", str(dup), "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert f"file: {dup}: invalid YAML at line 2" in result.output
    assert "duplicate key 'capacity_gbps'" in result.output


def test_console_script_exit_status() -> None:
    exe = Path(sys.executable).with_name("tdmcore")
    if not exe.exists():
        pytest.skip("the tdmcore console script is not installed in this environment")
    out = subprocess.run([str(exe), "link", "--pod", "a:100:2:1"], capture_output=True,
                         text=True, timeout=300, env=dict(os.environ))
    assert out.returncode == 2  # a malformed option value: a usage error
    assert out.stderr.strip().splitlines()[-1].startswith("Error: ")
    assert "Traceback" not in out.stderr


def test_oasis_compare_writes_table_and_report(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, [
        "oasis", "--jobs", "20", "--worker-servers", "4", "--ps-servers", "4", "--slots", "40",
        "--policies", "oasis,fifo,drf", "--l-quantile", "0.5", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    rows = json.loads((tmp_path / "oasis-compare.json").read_text())
    assert [r["policy"] for r in rows] == ["oasis", "fifo", "drf", "oasis-L0.5"]
    assert rows[0]["vs_oasis"] == 1.0 and all(r["jobs"] == 20 for r in rows)
    header = (tmp_path / "oasis-compare.csv").read_text().splitlines()[0]
    assert header.startswith("policy,total_utility,vs_oasis,accepted,finished")


def test_oasis_ratio_offline_bounds_online(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, [
        "oasis-ratio", "--servers", "4", "--priorities", "10", "--scales", "0.5,2",
        "--seeds", "0", "--jobs", "6", "--slots", "10", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    rows = json.loads((tmp_path / "oasis-ratio.json").read_text())
    assert [r["scale"] for r in rows] == [0.5, 2.0]
    assert all(r["ratio"] >= 1 - 1e-6 for r in rows)  # the offline optimum bounds OASiS


@pytest.mark.parametrize("args, message", [
    (["oasis", "--policies", "oasis,nope"], "--policies: unknown policy 'nope'"),
    (["oasis", "--jobs", "0"], "Invalid value for '--jobs'"),
    (["oasis", "--l-quantile", "1"], "Invalid value for '--l-quantile'"),
    (["oasis-ratio", "--scales", "x"], "expected comma-separated floats"),
    (["oasis-ratio", "--servers", "1"], "--servers: expected values >= 2"),
])
def test_oasis_bad_input_is_one_line_error(args, message, tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--out", str(tmp_path / "out")])
    assert exit_info.value.code in (1, 2)
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_elastic_table1_ranks_dragon_ahead_of_kubeflow(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["elastic", "table1", "--policies",
                                      "dragon,locality,kubeflow", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    rows = {r["policy"]: r for r in json.loads((tmp_path / "elastic-table1.json").read_text())}
    assert all(r["finished"] == 12 for r in rows.values())
    # DRAGON's Fig. 7: DRAGON < locality-aware < Kubeflow in average elapsed time
    assert rows["dragon"]["elapsed_s"] < rows["locality"]["elapsed_s"] \
        < rows["kubeflow"]["elapsed_s"]
    assert rows["kubeflow"]["vs_kubeflow"] == 1.0


def _not_json(token: str) -> None:
    raise AssertionError(f"{token} is not JSON")


def test_elastic_deadlock_is_reported(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["elastic", "deadlock", "--policies", "dragon,kubeflow",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    # standard JSON: a figure that does not exist (kubeflow's elapsed time, every
    # ratio to it) is null, not NaN or Infinity, which other parsers refuse
    text = (tmp_path / "elastic-deadlock.json").read_text()
    rows = {r["policy"]: r for r in json.loads(text, parse_constant=_not_json)}
    assert rows["kubeflow"]["deadlocked"] == 4 and rows["kubeflow"]["finished"] == 0
    assert rows["kubeflow"]["elapsed_s"] is None and rows["dragon"]["vs_kubeflow"] is None
    assert rows["dragon"]["finished"] == 4
    assert "deadlocked" in result.output
    # in the terminal's table too, a figure that does not exist is "-", not inf
    kubeflow = next(line for line in result.output.splitlines() if "kubeflow" in line
                    and "0/4" in line)
    assert "inf" not in kubeflow and kubeflow.count(" - ") + kubeflow.count("│ -") >= 3


@pytest.mark.parametrize("args, message", [
    (["elastic", "--policies", "dragon,nope"], "--policies: unknown policy 'nope'"),
    (["elastic", "poisson", "--gap", "0"], "Invalid value for '--gap'"),
    (["elastic", "bogus"], "'bogus' is not one of 'table1', 'poisson', 'deadlock'"),
])
def test_elastic_bad_input_is_one_line_error(args, message, tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--out", str(tmp_path / "out")])
    assert exit_info.value.code in (1, 2)
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_simulate_snapshots_writes_table_jobs_and_plots(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["simulate", "metronome-snapshots", "--window", "20",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    rows = json.loads((tmp_path / "simulate-metronome-snapshots.json").read_text())
    groups = {r["group"] for r in rows}
    assert groups == {"S0", "S1", "S2", "S3", "S4", "S5"}
    assert {r["policy"] for r in rows} == {"default", "diktyo", "exclusive", "metronome",
                                           "metronome-no-phase3", "metronome-no-monitor",
                                           "ideal"}
    by = {(r["group"], r["policy"]): r for r in rows}
    assert by[("S1", "default")]["jct_vs_default_pct"] == 0.0
    assert by[("S1", "ideal")]["jct_vs_ideal_pct"] == 0.0
    jobs = json.loads((tmp_path / "simulate-metronome-snapshots-jobs.json").read_text())
    assert len(jobs) == 7 * 13  # 13 jobs in S0-S5, under each of the 7 policies
    assert all(j["p5_ms"] <= j["p50_ms"] <= j["p95_ms"] for j in jobs)
    for name in ("metronome-snapshots-iterations.png", "metronome-snapshots-S1-links.png",
                 "metronome-snapshots-S1-circle.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    assert "change in % vs default / ideal" in result.output
    # stdout only: with cold kernel caches a non-terminal run also says on stderr
    # that it is compiling (a line of its own, not the table's)
    table = result.stdout.split("report:")[0]
    assert max(len(line) for line in table.splitlines()) <= 80  # fits a terminal
    assert "s/1k it" in table and "-0.0" not in table  # units in headers, no negative zero
    assert "metronome-no-monitor" in table  # policy names are never cut
    record = json.loads((tmp_path / "simulate-metronome-snapshots-run.json").read_text())
    assert record["seed"] == 0 and record["parameters"]["window_s"] == 20.0
    assert record["tdmcore_version"] and record["wall_s"] > 0
    assert "simulate-metronome-snapshots.csv" in record["files"]
    assert not list(tmp_path.glob(".tdmcore-partial-*"))  # the staging folder is gone


def test_simulate_passes_the_queue_discipline(tmp_path: Path, monkeypatch) -> None:
    import tdmcore.sim.cluster as sim_cluster

    seen: list[str] = []
    real = sim_cluster.run_cluster

    def spy(*args, **kwargs):
        seen.append(kwargs.get("queue", "backoff"))
        return real(*args, **kwargs)

    monkeypatch.setattr(sim_cluster, "run_cluster", spy)
    for queue in ("fifo", None):
        args = ["simulate", "metronome-trace", "--hours", "0.5", "--policies", "default",
                "--no-plots", "--out", str(tmp_path / str(queue))]
        if queue is not None:
            args += ["--queue", queue]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
    # warm-up runs use the default; the simulated runs get what was asked
    assert seen[-1] == "backoff" and "fifo" in seen


@pytest.mark.parametrize("how", ["file", "--example"])
def test_simulate_a_scenario_file(how: str, tmp_path: Path) -> None:
    # the example ships inside the package: `tdmcore example --path` finds it
    example = CliRunner().invoke(cli, ["example", "--path"]).output.strip()
    assert Path(example).is_file() and Path(example).parts[-3:] == (
        "tdmcore", "examples", "scenario.yaml")
    source = [example] if how == "file" else ["--example"]
    result = CliRunner().invoke(cli, ["simulate", *source, "--policies",
                                      "default,metronome", "--no-plots", "--out",
                                      str(tmp_path)])
    assert result.exit_code == 0, result.output
    (table,) = tmp_path.glob("simulate-example.json")
    assert {r["policy"] for r in json.loads(table.read_text())} == {"default", "metronome"}
    assert not list(tmp_path.glob("*.png"))


def test_example_prints_the_shipped_scenario_file(tmp_path: Path) -> None:
    from tdmcore.sim.scenario_file import load_scenario_file

    result = CliRunner().invoke(cli, ["example"])
    assert result.exit_code == 0
    copy = tmp_path / "mine.yaml"
    copy.write_text(result.output)
    assert load_scenario_file(copy).name == "example"  # a user's copy loads as is


@pytest.mark.parametrize("args", [["simulate"], ["simulate", "philly", "--example"]])
def test_simulate_needs_exactly_one_scenario(args, tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--out", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "give exactly one of SCENARIO or --example" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


@pytest.mark.parametrize("args, message", [
    (["simulate", "nowhere"], "SCENARIO: unknown scenario 'nowhere'"),
    (["simulate", "metronome-snapshots", "--policies", "default,nope"],
     "--policies: unknown policy 'nope'"),
    (["simulate", "metronome-snapshots", "--policies", ","],
     "Error: --policies: name at least one"),
    (["simulate", "metronome-trace", "--hours", "0"], "Invalid value for '--hours'"),
    (["simulate", "philly", "--jobs", "999999"], "--jobs: the trace has"),
    (["simulate", "metronome-trace", "--queue", "lifo"], "Invalid value for '--queue'"),
])
def test_simulate_bad_input_is_one_line_error(args, message, tmp_path, capsys) -> None:
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--out", str(out)])
    assert exit_info.value.code != 0
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_simulate_bad_scenario_file_points_at_the_field(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster:\n  nodes: []\njobs: []\n")
    with pytest.raises(SystemExit):
        main(["simulate", str(bad), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert "cluster.nodes" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("terminal", [True, False])
def test_compile_status_says_so_on_a_terminal_and_in_a_log(terminal: bool, monkeypatch,
                                                           capsys) -> None:
    # a spinner on a terminal; elsewhere one line on stderr, which a log keeps
    import io
    import time

    from rich.console import Console

    from tdmcore.app import common

    out = io.StringIO()
    console = Console(file=out, force_terminal=terminal, width=100)
    monkeypatch.setattr(common, "COMPILE_NOTICE_S", (0.0, 0.0))
    with common.compiling_kernels(console):
        time.sleep(0.3)  # long enough for the spinner to draw
    said = out.getvalue() if terminal else capsys.readouterr().err
    assert "loading the compiled kernels" in said
    monkeypatch.setattr(common, "COMPILE_NOTICE_S", (5.0, 5.0))
    quick = io.StringIO()  # a warm cache loads within the delay: nothing at all
    with common.compiling_kernels(Console(file=quick, force_terminal=terminal)):
        time.sleep(0.05)
    assert "kernels" not in quick.getvalue() + capsys.readouterr().err


@pytest.mark.parametrize("terminal, term", [(True, "xterm"), (True, "dumb"), (False, "xterm")])
def test_sweep_summary_never_splits_a_name_or_a_number(terminal: bool, term: str,
                                                       monkeypatch) -> None:
    # in an 80-column terminal the summary (55-146 columns for the shipped
    # examples) is printed whole: the terminal wraps whole lines, rich never folds
    # a metric's name or a number across rows
    import io
    from types import SimpleNamespace

    from rich.console import Console

    from tdmcore.app.commands.sweep import _sweep_table

    monkeypatch.setenv("TERM", term)  # rich keeps a dumb terminal at 80 x 25
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=terminal, color_system=None)
    spec = SimpleNamespace(fixed={}, groups=[], title="Fig. 14: O_T x A_T on S1-S5")
    names = ["policy", "grid.controller.a_t", "per_1000_low_s", "readjustments",
             "per_1000_low_s_vs_ideal_pct", "per_1000_high_s_vs_ideal_pct", "gamma"]
    values = [["metronome", 1.05, 422.50123, 109.333, 4.429, 4.39, 0.261],
              ["metronome-no-phase3", 1.1, 12345.678, 0.0, 0.06, 0.071, 0.233]]
    rows = [dict(zip(names, row, strict=True)) for row in values]
    _sweep_table(console, spec, rows)
    lines = out.getvalue().splitlines()
    header = next(line for line in lines if "policy" in line)
    for name in names:
        assert name.rpartition(".")[2] in header
    assert any("422.501" in line and "109.333" in line for line in lines)
    assert any("metronome-no-phase3" in line and "12,345.678" in line for line in lines)
    assert console.width == 80  # the console is left as it was


def test_every_policy_is_listed_with_what_it_does() -> None:
    from tdmcore.metronome.policies import POLICIES, SUMMARIES

    assert set(SUMMARIES) == set(POLICIES)
    listing = CliRunner().invoke(cli, ["list", "policies"], env={"COLUMNS": "250"})
    assert listing.exit_code == 0
    assert "placement policy" not in listing.output
    for needle in ("compact rotations", "NetworkOverhead", "Elastic gangs. Scale-down",
                   "Admission. Online admission with dual prices"):
        assert needle in listing.output, needle


def test_philly_defaults_to_a_busy_slice_that_runs_in_seconds(tmp_path: Path) -> None:
    # the trace's first jobs run for days (4.5 minutes of simulation per policy);
    # the command's default slice starts at the busy stretch docs/fidelity.md uses
    from tdmcore.sim.scenarios import PHILLY_CLI_START

    result = CliRunner().invoke(cli, ["simulate", "philly", "--jobs", "20", "--policies",
                                      "default", "--no-plots", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert f"Philly jobs {PHILLY_CLI_START}-{PHILLY_CLI_START + 19}" in result.output
    record = json.loads((tmp_path / "simulate-philly-run.json").read_text())
    assert record["parameters"]["start"] == PHILLY_CLI_START  # the slice that ran
    given = CliRunner().invoke(cli, ["simulate", "philly", "--jobs", "20", "--start", "0",
                                     "--max-duration", "600", "--policies", "default",
                                     "--no-plots", "--out", str(tmp_path / "zero")])
    assert given.exit_code == 0 and "Philly jobs 0-19" in given.output
