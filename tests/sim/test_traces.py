"""Traces from CSV files (tdmcore.sim.traces): the schema, its errors, and Philly as a
preset of the same reader."""

from __future__ import annotations

import csv
import json
import logging
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from tdmcore.app.cli import cli
from tdmcore.app.lifecycle import main
from tdmcore.data import open_data
from tdmcore.sim.scenarios import philly
from tdmcore.sim.traces import DEFAULT_MODEL, read_trace, trace_scenario

TRACE = """job,submitted,gpus,seconds,net,prio
a,2024-01-01T00:00:00,4,3600,resnet50,high
b,2024-01-01T00:05:00,2,1800,MyModel,low
c,2024-01-01T00:02:00,1,600,VGG19,
"""
MAPPING = {"submit": "submitted", "duration_s": "seconds", "model": "net",
           "priority": "prio"}


def _write(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_rows_are_replayed_in_submit_order_with_relative_arrivals(tmp_path: Path) -> None:
    rows = read_trace(_write(tmp_path, TRACE), MAPPING)
    assert [r.line for r in rows] == [2, 3, 4] and rows[0].workers == 4  # 'gpus' alias
    records = _Records()
    logger = logging.getLogger("tdmcore.sim.traces")
    logger.addHandler(records)
    try:
        sc = trace_scenario(rows, name="t", n_nodes=2)
    finally:
        logger.removeHandler(records)
    # a (0 s), c (120 s), b (300 s): submit order, not file order
    assert [(j.name, j.arrival_s) for j in sc.jobs] == [
        ("t00000-resnet50", 0.0), ("t00001-vgg19", 120.0),
        (f"t00002-{DEFAULT_MODEL.lower()}", 300.0)]
    assert [j.priority for j in sc.jobs] == [1, 0, 0]
    assert sc.jobs[2].model == f"MyModel (as {DEFAULT_MODEL})"  # the trace's name is kept
    assert sc.jobs[1].pattern is None  # one worker: LowComm
    assert records.messages == [f"t: 1 model name(s) tdmcore does not know ('MyModel'): "
                                f"those jobs train {DEFAULT_MODEL}'s traffic pattern; "
                                "tdmcore knows AlexNet, VGG11, VGG16, VGG19, ResNet18, "
                                "ResNet50, ResNet152, WideResNet101, GoogLeNet, "
                                "DenseNet201, GPT-1, GPT-2, BERT (any case or separators; "
                                "`tdmcore list models`)"]


def test_iterations_instead_of_durations_and_seconds_as_submit(tmp_path: Path) -> None:
    path = _write(tmp_path, "submit,workers,iterations,model\n10,2,300,VGG19\n0,4,50,BERT\n")
    sc = trace_scenario(read_trace(path), n_nodes=1, start=0, n_jobs=2)
    assert [(j.model, j.iterations, j.arrival_s) for j in sc.jobs] == [
        ("BERT", 50, 0.0), ("VGG19", 300, 10.0)]


@pytest.mark.parametrize("text, columns, message", [
    ("", {}, "t.csv: empty file"),
    ("a,b\n1,2\n", {}, "t.csv: no submit column: the header has 'a', 'b'"),
    ("submit,workers\n0,1\n", {}, "give exactly one of a duration_s or an iterations"),
    ("submit,workers,duration_s,iterations\n0,1,5,5\n", {}, "got both"),
    ("submit,workers,duration_s\n0,x,5\n", {},
     "t.csv: line 2, column 'workers': expected a number, got 'x'"),
    ("submit,workers,duration_s\n0,1,5\n1,1.5,5\n", {},
     "t.csv: line 3, column 'workers': expected an integer in 1..100000, got '1.5'"),
    ("submit,workers,duration_s\nyesterday,1,5\n", {},
     "line 2, column 'submit': expected seconds or an ISO-8601 timestamp"),
    ("submit,workers,duration_s\n0,1,5\n2024-01-01,1,5\n", {}, "mixes seconds and"),
    ("submit,workers,duration_s,priority\n0,1,5,urgent\n", {},
     "line 2, column 'priority': expected high, low or an integer"),
    ("submit,workers,duration_s\n0,1\n", {}, "t.csv: line 2: 2 cells, the header has 3"),
    ("submit,workers,duration_s\n", {}, "t.csv: no jobs"),
    ("submit,workers,submit,duration_s\n0,1,5,60\n", {}, "t.csv: the header repeats 'submit'"),
    ("submit,workers,duration_s,note,note\n0,1,5,a\n", {}, "t.csv: line 2: 4 cells"),
    ("s,workers,duration_s\n0,1,5\n", {"submit": "when"}, "no column 'when' (mapped to"),
    ("s,workers,duration_s\n0,1,5\n", {"arrival": "s"}, "columns: unknown field(s)"),
    # out of range: the message names the cell, cut short
    ("submit,workers,duration_s\n0,2,1e300\n", {},
     "t.csv: line 2, column 'duration_s': expected a duration of at most 1e+09 s, got '1e300' s"),
    ("submit,workers,iterations\n0,2,1" + "0" * 300 + "\n", {},
     "line 2, column 'iterations': expected an integer in 1..1e+09, got '1000000000"),
])
def test_bad_traces_name_the_line_and_column(text, columns, message, tmp_path) -> None:
    with pytest.raises(ValueError, match=None) as err:
        read_trace(_write(tmp_path, text), columns)
    assert message in str(err.value)


def test_a_missing_file_is_a_value_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^file: cannot read .*nope.csv"):
        read_trace(tmp_path / "nope.csv")


def test_philly_is_the_reader_with_a_preset() -> None:
    # re-derived from the raw file, independently of the reader
    with open_data("traces/philly_pollux.csv") as fh:
        raw = sorted(csv.DictReader(fh), key=lambda r: r["timestamp"])[40:60]
    sc = philly(20, 4, 40, 5)
    t0 = datetime.fromisoformat(raw[0]["timestamp"])
    assert [j.arrival_s for j in sc.jobs] == [
        (datetime.fromisoformat(r["timestamp"]) - t0).total_seconds() for r in raw]
    assert [j.workers for j in sc.jobs] == [min(int(float(r["num_gpus"])), 32) for r in raw]
    assert all(j.name.startswith(f"p{40 + k:05d}-") for k, j in enumerate(sc.jobs))


def test_cli_replays_a_trace(tmp_path: Path) -> None:
    path = _write(tmp_path, TRACE)
    args = ["simulate", "trace", str(path), "--nodes", "2", "--policies",
            "default,metronome", "--no-plots", "--out", str(tmp_path / "r")]
    for field, header in MAPPING.items():
        args += ["--column", f"{field}={header}"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    rows = json.loads((tmp_path / "r" / "simulate-trace-t.json").read_text())
    assert {r["policy"] for r in rows} == {"default", "metronome"}
    assert all(r["jobs"] == 3 for r in rows)  # every row by default


@pytest.mark.parametrize("args, status, message", [
    (["simulate", "trace"], 2, "give the trace file"),
    (["simulate", "philly", "x.csv"], 2, "goes with the trace scenario only"),
    (["simulate", "trace", "t.csv", "--column", "submit"], 2, "expected FIELD=HEADER"),
    (["simulate", "philly", "--column", "submit=x"], 2, "--column applies to trace"),
    (["simulate", "trace", "t.csv"], 1, "t.csv: no submit column"),
])
def test_cli_trace_errors_are_one_line(args, status, message, tmp_path, capsys,
                                       monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, TRACE)
    with pytest.raises(SystemExit) as done:
        main([*args, "--out", str(tmp_path / "out")])
    assert done.value.code == status
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("Error: ") and message in err[0], err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("workers", [1, 2])
def test_a_duration_of_overflowing_iterations_is_a_value_error(workers) -> None:
    # duration_s x 1000 / period is inf: was an OverflowError from round()
    from tdmcore.sim.scenarios import trace_job
    with pytest.raises(ValueError, match="^duration_s: "):
        trace_job("j", "VGG19", workers, 25.0, 1e306)


def test_a_job_the_rows_cannot_make_names_the_file_and_line(tmp_path: Path) -> None:
    # the second job arrives 1e12 s after the first: beyond the simulator's clock
    path = _write(tmp_path, "submit,workers,duration_s\n0,2,100\n1e12,2,100\n")
    with pytest.raises(ValueError, match=r"t\.csv: line 3: arrival_s: must lie in"):
        trace_scenario(read_trace(path), n_nodes=1, source=str(path))


def test_a_repeated_column_tdmcore_does_not_read_is_no_error(tmp_path) -> None:
    # Only a repeated column that holds a field is ambiguous.
    rows = read_trace(_write(tmp_path, "submit,workers,duration_s,note,note\n0,1,60,a,b\n"))
    assert len(rows) == 1


# ------------------------------------------------------------ a researcher's own trace
# A trace shaped like Muri's (tests/muri_like.py): times in ms, names as Muri writes
# them.  Issue 41: gpt2 fell back to ResNet50 with an "unknown model" warning, and
# the ms were read as seconds until a bound error on some row, without a word.
def test_model_names_match_in_any_case_or_spelling() -> None:
    from tdmcore.sim.models import MODELS, model_name

    assert model_name("gpt2") == model_name("GPT-2") == model_name("Gpt_2") == "GPT-2"
    assert model_name("vgg19") == "VGG19" and model_name("bert") == "BERT"
    assert model_name("resnet-18") == "ResNet18" and model_name("wide_resnet101_2") == \
        "WideResNet101"
    assert all(model_name(m) == m for m in MODELS)
    assert model_name("resnet1") is None and model_name("dqn") is None


def test_a_muri_like_trace_in_ms_with_its_own_names(tmp_path: Path) -> None:
    from tdmcore.sim.traces import load_trace
    from tests.muri_like import COLUMNS, write_muri_like

    path = write_muri_like(tmp_path / "muri.csv", jobs=10)
    records = _Records()
    logger = logging.getLogger("tdmcore.sim.traces")
    logger.addHandler(records)
    try:
        sc = load_trace(path, COLUMNS, time_unit="ms", n_nodes=4)
    finally:
        logger.removeHandler(records)
    models = [j.model for j in sc.jobs]
    assert models[:4] == ["GPT-2", "VGG19", "BERT", "ResNet18"]
    assert models[4] == f"dqn (as {DEFAULT_MODEL})"  # not tdmcore's: named as such
    rows = list(csv.DictReader(path.open()))
    assert [j.arrival_s for j in sc.jobs] == [int(r["submit_time"]) / 1e3 for r in rows]
    assert [j.iterations for j in sc.jobs] == [int(r["iterations"]) for r in rows]
    (warning,) = records.messages  # one: dqn; the times are plausible in ms
    assert "'dqn'" in warning and "tdmcore knows AlexNet" in warning \
        and "GPT-2" in warning and "`tdmcore list models`" in warning


def test_times_in_the_wrong_unit_get_a_hint(tmp_path: Path) -> None:
    from tdmcore.sim.traces import load_trace, unit_hint
    from tests.muri_like import COLUMNS, write_muri_like

    # Muri's real spans: submit times days apart in ms read as s overflow the clock
    path = tmp_path / "muri.csv"
    write_muri_like(path, jobs=4)
    text = path.read_text().splitlines()
    text[-1] = text[-1].replace(text[-1].split(",")[2], "2000000000", 1)  # 23 days in ms
    path.write_text("\n".join(text) + "\n")
    with pytest.raises(ValueError) as err:
        load_trace(path, COLUMNS, n_nodes=4)  # seconds by default
    assert "line 5: arrival_s: must lie in" in str(err.value)
    assert "they look like ms (give the time unit ms: --time-unit ms" in str(err.value)
    # durations an hour long in ms, read as s: no bound error, a warning says so
    plain = _write(tmp_path, "submit,workers,duration_s\n0,2,3600000\n60000,2,3600000\n")
    rows = read_trace(plain, time_unit="s")
    assert "the median job runs 41.7 days with the times in s: they look like ms" in \
        unit_hint(rows, "s")
    assert unit_hint(read_trace(plain, time_unit="ms"), "ms") == ""
    assert [r.duration_s for r in read_trace(plain, time_unit="ms")] == [3600.0, 3600.0]
    with pytest.raises(ValueError, match="^time_unit: expected one of us, ms, s, min, h"):
        read_trace(plain, time_unit="sec")


def test_a_mapped_duration_wins_over_an_iterations_column(tmp_path: Path) -> None:
    # Muri has both: mapping one of them is a choice, not an ambiguity
    path = _write(tmp_path, "submit,workers,duration,iterations\n0,2,600,5\n")
    (row,) = read_trace(path, {"duration_s": "duration"})
    assert row.duration_s == 600.0 and row.iterations is None


def test_cli_lists_models_and_replays_a_muri_like_trace(tmp_path: Path) -> None:
    from tests.muri_like import COLUMNS, write_muri_like

    listing = CliRunner().invoke(cli, ["list", "models"])
    assert listing.exit_code == 0 and "GPT-2" in listing.output and "gpt2" in listing.output
    assert "[decision]" in listing.output  # the sources' text, not taken for markup
    path = write_muri_like(tmp_path / "muri.csv", jobs=6)
    args = ["simulate", "trace", str(path), "--time-unit", "ms", "--nodes", "4",
            "--policies", "default,metronome", "--no-plots", "--out", str(tmp_path / "r")]
    for field, header in COLUMNS.items():
        args += ["--column", f"{field}={header}"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    jobs = json.loads((tmp_path / "r" / "simulate-trace-muri-jobs.json").read_text())
    assert {j["model"] for j in jobs} >= {"GPT-2", "VGG19", "BERT", "ResNet18"}
    record = json.loads((tmp_path / "r" / "simulate-trace-muri-run.json").read_text())
    assert record["parameters"]["time_unit"] == "ms"


def test_max_duration_truncates_a_trace_of_iterations_too(tmp_path: Path) -> None:
    # a Muri-like trace gives iterations: --max-duration used to leave them whole
    path = _write(tmp_path, "submit,workers,iterations,model\n0,2,100000,VGG19\n")
    (job,) = trace_scenario(read_trace(path), n_nodes=1, max_duration_s=60).jobs
    assert job.iterations == round(60_000 / job.period_ms)
    (whole,) = trace_scenario(read_trace(path), n_nodes=1).jobs
    assert whole.iterations == 100_000
