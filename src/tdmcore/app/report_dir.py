"""A report folder written all or nothing, with a record of the run that made it.

The command line writes its tables and plots through :class:`ReportDir`: files go to
a hidden staging folder inside the report folder (``.tdmcore-partial-*``) and are
moved into place together when the command succeeds, beside ``<stem>-run.json``
(the tdmcore version, the command, its arguments, the seed and the wall time).  An
error, Ctrl-C or SIGTERM (which the command line turns into an exception) removes
the staging folder, so a report folder never holds half a report; a run killed
outright (SIGKILL) leaves only the staging folder, whose name says what it is.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["PARTIAL_PREFIX", "ReportDir", "json_text"]

#: The name prefix of a staging folder: a report that was never finished.
PARTIAL_PREFIX = ".tdmcore-partial-"


def _jsonable(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, tuple | list):
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value


def json_text(value: Any) -> str:
    """``value`` as standard JSON (RFC 8259), indented, with a final newline.

    A report's tables hold NaN where a figure does not exist (a ratio to a missing
    baseline) and infinity where it is unbounded; JSON has neither, so both are
    written ``null`` (the terminal table shows ``-``), and any JSON parser reads
    the file.  Anything else JSON cannot hold raises ``TypeError`` (a bug).
    """
    return json.dumps(_finite(value), indent=2, allow_nan=False) + "\n"


def _stamp(path: Path) -> list[int]:
    """A file's size and modification time (ns): what says it is unchanged."""
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


class ReportDir:
    """Stage a command's report files and move them into ``out_dir`` on success.

    Parameters
    ----------
    out_dir : Path
        The report folder (created if missing).  The report replaces the previous
        run of the same ``stem`` there whole: the files that run wrote and this one
        does not are removed (:meth:`_previous_files`); files of other reports stay.
    stem : str
        The report's name: the run record is ``<stem>-run.json``.
    command : str
        The command that writes the report (for the run record).
    parameters : dict
        The command's arguments after parsing (for the run record).

    Raises
    ------
    OSError
        From ``__enter__`` when the folder cannot be created or written; nothing is
        left behind then.
    """

    def __init__(self, out_dir: Path, stem: str, command: str,
                 parameters: dict[str, Any]) -> None:
        self.out_dir = Path(out_dir)
        self.stem = stem
        self.command = command
        self.parameters = dict(parameters)
        self.files: list[str] = []
        self._staging: Path | None = None
        self._created: list[Path] = []
        self._started = time.time()

    def __enter__(self) -> ReportDir:
        self._created = [d for d in (self.out_dir, *self.out_dir.parents) if not d.exists()]
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            self._staging = Path(tempfile.mkdtemp(prefix=PARTIAL_PREFIX, dir=self.out_dir))
        except OSError:
            self._remove_created()
            raise
        return self

    def path(self, name: str) -> Path:
        """Where to write the report file ``name`` now (inside the staging folder)."""
        if self._staging is None:
            raise RuntimeError("ReportDir.path outside its with-block")
        if name not in self.files:
            self.files.append(name)
        return self._staging / name

    def final(self, name: str) -> Path:
        """Where ``name`` will be once the report is complete."""
        return self.out_dir / name

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        staging, self._staging = self._staging, None
        if staging is None:
            return
        if exc_type is not None:
            shutil.rmtree(staging, ignore_errors=True)
            self._remove_created()
            return
        try:
            written = [n for n in self.files if (staging / n).exists()]
            record = self.record(written)
            # each file's size and modification time (os.replace keeps both): the
            # next run of this report removes a file it does not write only if it is
            # still exactly this one
            record["file_stamps"] = {n: _stamp(staging / n) for n in written}
            (staging / f"{self.stem}-run.json").write_text(
                json_text(record), "utf-8")
            stale = self._previous_files()
            try:
                self._commit(staging, [*written, f"{self.stem}-run.json"])
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                self._remove_created()  # the folders this report made, now empty
                raise
            for path in stale:
                if path.name not in written:
                    with contextlib.suppress(OSError):
                        path.unlink()
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        self.files = [*written, f"{self.stem}-run.json"]

    def _commit(self, staging: Path, names: list[str]) -> None:
        """Move the staged files ``names`` into the report folder, all or none.

        A folder in the way of one of them is refused before anything moves; any
        other failure part-way puts back what was there (each replaced file waits in
        the staging folder until every move has succeeded) and removes what had
        moved in, then raises.
        """
        for name in names:
            dest = self.out_dir / name
            if dest.is_dir() and not dest.is_symlink():
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(dest))
        backup = staging / ".previous"
        backup.mkdir()
        moved: list[str] = []
        saved: list[str] = []
        try:
            for name in names:
                dest = self.out_dir / name
                if dest.exists() or dest.is_symlink():
                    os.replace(dest, backup / name)
                    saved.append(name)
                os.replace(staging / name, dest)
                moved.append(name)
        except BaseException:
            for name in moved:
                with contextlib.suppress(OSError):
                    (self.out_dir / name).unlink()
            for name in saved:
                with contextlib.suppress(OSError):
                    os.replace(backup / name, self.out_dir / name)
            raise

    def _previous_files(self) -> list[Path]:
        """The files the previous run of this report wrote that are still exactly as
        it wrote them: those its ``<stem>-run.json`` lists with their size and
        modification time (``file_stamps``), regular files of the folder with the
        same size and time to the nanosecond.  A report replaces its previous run
        whole, so a folder does not mix two runs of one report (plots of policies
        the new run did not ask for, say); any other file stays: other reports',
        the user's, and one rewritten or moved there since.  Nothing when there is
        no readable record with stamps (a record of an older tdmcore has none)."""
        record_path = self.out_dir / f"{self.stem}-run.json"
        try:
            recorded = json.loads(record_path.read_text("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            return []
        stamps = recorded.get("file_stamps") if isinstance(recorded, dict) else None
        if not isinstance(stamps, dict):
            return []
        out = []
        for name, stamp in stamps.items():
            if not name or name != Path(name).name or name in (".", "..") \
                    or name == record_path.name or not isinstance(stamp, list):
                continue
            path = self.out_dir / name
            try:
                if path.is_file() and not path.is_symlink() and _stamp(path) == stamp:
                    out.append(path)
            except (OSError, ValueError):
                continue
        return out

    def record(self, files: list[str]) -> dict[str, Any]:
        """The run record: what made this report."""
        from importlib.metadata import PackageNotFoundError, version

        try:
            tdmcore_version = version("tdmcore")
        except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
            tdmcore_version = "unknown"
        return {
            "tdmcore_version": tdmcore_version,
            "command": self.command,
            "argv": [Path(sys.argv[0]).name, *sys.argv[1:]],
            "parameters": _jsonable(self.parameters),
            "seed": self.parameters.get("seed"),
            "started_utc": datetime.fromtimestamp(self._started, UTC).isoformat(
                timespec="seconds"),
            "wall_s": round(time.time() - self._started, 3),
            "python": sys.version.split()[0],
            "files": files,
        }

    def _remove_created(self) -> None:
        for d in self._created:  # deepest first
            with contextlib.suppress(OSError):
                d.rmdir()
