"""A report folder holds one run of each report: a new run replaces the previous
run's files whole, and leaves every other file alone."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tdmcore.app.report_dir import ReportDir


def _run(out: Path, stem: str, files: dict[str, str]) -> ReportDir:
    with ReportDir(out, stem, "test", {"seed": 0}) as report:
        for name, text in files.items():
            report.path(name).write_text(text)
    return report


def _age(folder: Path, seconds: float) -> None:
    """Every file of ``folder`` dated ``seconds`` ago (one instant for all)."""
    stamp = time.time() - seconds
    for path in folder.iterdir():
        if path.is_file():
            os.utime(path, (stamp, stamp))


def test_a_new_run_replaces_the_previous_run_of_the_report_whole(tmp_path: Path) -> None:
    _run(tmp_path, "r", {"r.csv": "1", "r-a.png": "a", "r-b.png": "b"})
    (tmp_path / "notes.txt").write_text("mine")  # not a report's file
    _age(tmp_path, 10)
    report = _run(tmp_path, "r", {"r.csv": "2", "r-c.png": "c"})  # policies a, b gone
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "notes.txt", "r-c.png", "r-run.json", "r.csv"]
    assert (tmp_path / "r.csv").read_text() == "2"
    assert report.files == ["r.csv", "r-c.png", "r-run.json"]
    assert json.loads((tmp_path / "r-run.json").read_text())["files"] == ["r.csv", "r-c.png"]


def test_files_of_other_reports_and_rewritten_files_stay(tmp_path: Path) -> None:
    _run(tmp_path, "r", {"r.csv": "1", "shared.png": "r"})
    _run(tmp_path, "s", {"s.csv": "1"})
    _age(tmp_path, 10)
    (tmp_path / "shared.png").write_text("rewritten since by someone else")
    _run(tmp_path, "r", {"r.csv": "2"})
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["r-run.json", "r.csv", "s-run.json", "s.csv", "shared.png"]
    assert (tmp_path / "shared.png").read_text() == "rewritten since by someone else"


def test_a_record_that_cannot_be_trusted_removes_nothing(tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "x.png").write_text("x")
    outside = tmp_path / "outside.png"
    outside.write_text("o")
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.png").write_text("k")
    for record in ("not json", json.dumps(["keep.png"]), json.dumps({"files": "keep.png"}),
                   json.dumps({"files": ["../outside.png", "sub/x.png", "", ".", 3,
                                         "r-run.json"]})):
        (out / "r-run.json").write_text(record)
        _age(out, 10)
        _run(out, "r", {"r.csv": "1"})
        assert (out / "keep.png").exists() and outside.exists() and (sub / "x.png").exists()
        assert (out / "r-run.json").exists()


def test_a_failed_run_leaves_the_previous_run_in_place(tmp_path: Path) -> None:
    _run(tmp_path, "r", {"r.csv": "1", "r-a.png": "a"})
    try:
        with ReportDir(tmp_path, "r", "test", {}) as report:
            report.path("r.csv").write_text("2")
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert (tmp_path / "r.csv").read_text() == "1" and (tmp_path / "r-a.png").exists()
