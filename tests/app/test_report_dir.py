"""A report folder holds one run of each report: a new run replaces the previous
run's files whole, and leaves every other file alone."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tdmcore.app import report_dir
from tdmcore.app.report_dir import PARTIAL_PREFIX, ReportDir


def _run(out: Path, stem: str, files: dict[str, str]) -> ReportDir:
    with ReportDir(out, stem, "test", {"seed": 0}) as report:
        for name, text in files.items():
            report.path(name).write_text(text)
    return report


def test_a_new_run_replaces_the_previous_run_of_the_report_whole(tmp_path: Path) -> None:
    _run(tmp_path, "r", {"r.csv": "1", "r-a.png": "a", "r-b.png": "b"})
    (tmp_path / "notes.txt").write_text("mine")  # not a report's file
    report = _run(tmp_path, "r", {"r.csv": "2", "r-c.png": "c"})  # policies a, b gone
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "notes.txt", "r-c.png", "r-run.json", "r.csv"]
    assert (tmp_path / "r.csv").read_text() == "2"
    assert report.files == ["r.csv", "r-c.png", "r-run.json"]
    record = json.loads((tmp_path / "r-run.json").read_text())
    assert record["files"] == ["r.csv", "r-c.png"]
    assert sorted(record["file_stamps"]) == ["r-c.png", "r.csv"]


def test_files_of_other_reports_and_changed_files_stay(tmp_path: Path) -> None:
    _run(tmp_path, "r", {"r.csv": "1", "shared.png": "r", "r-a.png": "a"})
    _run(tmp_path, "s", {"s.csv": "1"})
    (tmp_path / "shared.png").write_text("rewritten since by someone else")
    # a user's file moved over a listed name, keeping an old modification time
    mine = tmp_path / "mine.png"
    mine.write_text("b")  # the same size as the report's "a"
    os.utime(mine, (0, 0))
    os.replace(mine, tmp_path / "r-a.png")
    _run(tmp_path, "r", {"r.csv": "2"})
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["r-a.png", "r-run.json", "r.csv", "s-run.json", "s.csv", "shared.png"]
    assert (tmp_path / "shared.png").read_text() == "rewritten since by someone else"
    assert (tmp_path / "r-a.png").read_text() == "b"


def test_a_record_that_cannot_be_trusted_removes_nothing(tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "x.png").write_text("x")
    outside = tmp_path / "outside.png"
    outside.write_text("o")
    out = tmp_path / "out"
    out.mkdir()
    keep = out / "keep.png"
    keep.write_text("k")
    st = keep.stat()
    stamp = [st.st_size, st.st_mtime_ns]
    for record in ("not json", json.dumps(["keep.png"]),
                   json.dumps({"files": ["keep.png"]}),  # an older record: no stamps
                   json.dumps({"file_stamps": ["keep.png"]}),
                   json.dumps({"file_stamps": {"keep.png": "x"}}),
                   json.dumps({"file_stamps": {"../outside.png": stamp, "sub/x.png": stamp,
                                               "": stamp, ".": stamp, "r-run.json": stamp,
                                               "keep.png": [stamp[0], stamp[1] + 1]}})):
        (out / "r-run.json").write_text(record)
        _run(out, "r", {"r.csv": "1"})
        assert keep.exists() and outside.exists() and (sub / "x.png").exists()
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


def _contents(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in folder.iterdir() if p.is_file()}


def test_a_folder_in_the_way_moves_nothing(tmp_path: Path) -> None:
    # A review found the report's CSV moved in before the JSON met a folder of its
    # name: half a report.
    _run(tmp_path, "r", {"r.csv": "1", "r.json": "1"})
    before = _contents(tmp_path)
    (tmp_path / "r.json").unlink()
    (tmp_path / "r.json").mkdir()
    del before["r.json"]
    with pytest.raises(IsADirectoryError):
        _run(tmp_path, "r", {"r.csv": "2", "r.json": "2"})
    assert _contents(tmp_path) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(PARTIAL_PREFIX)]


def test_a_failed_move_puts_the_previous_run_back(tmp_path: Path, monkeypatch) -> None:
    _run(tmp_path, "r", {"r.csv": "1", "r.json": "1"})
    before = _contents(tmp_path)
    real = os.replace

    def failing(src: object, dst: object) -> None:
        # the new r.json's move in fails (putting the old one back does not)
        if Path(str(dst)) == tmp_path / "r.json" and ".previous" not in str(src):
            raise OSError(28, "No space left on device")
        real(src, dst)

    monkeypatch.setattr(report_dir.os, "replace", failing)
    with pytest.raises(OSError, match="No space"):
        _run(tmp_path, "r", {"r.csv": "2", "r.json": "2", "r-new.png": "n"})
    assert _contents(tmp_path) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(PARTIAL_PREFIX)]


def test_a_failed_move_leaves_no_folder_it_created(tmp_path: Path, monkeypatch) -> None:
    real = os.replace

    def failing(src: object, dst: object) -> None:
        if Path(str(dst)).name == "r.json":
            raise OSError(28, "No space left on device")
        real(src, dst)

    monkeypatch.setattr(report_dir.os, "replace", failing)
    with pytest.raises(OSError, match="No space"):
        _run(tmp_path / "new" / "deeper", "r", {"r.csv": "1", "r.json": "1"})
    assert list(tmp_path.iterdir()) == []
