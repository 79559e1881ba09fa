"""What the commands share: options, report folders, progress, tables, errors.

Each command is a module of :mod:`tdmcore.app.commands`; the process around them
(signals, exit status, stdout) is :mod:`tdmcore.app.lifecycle`.  Bad input is one
``Error:`` line: a library ``ValueError`` naming its argument becomes one naming the
option (:func:`option_error`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from .report_dir import ReportDir, json_text

__all__ = [
    "EXAMPLE_SCENARIO",
    "LOG_LEVELS",
    "OPTION_OF_ARGUMENT",
    "PROGRESS_EVERY_S",
    "LineProgress",
    "OutDir",
    "announce",
    "compiling_kernels",
    "configure_logging",
    "csv_list",
    "example_path",
    "given_flag",
    "log",
    "num",
    "option_error",
    "progress",
    "report_dir",
    "write_rows",
]

LOG_LEVELS = ("debug", "info", "warning", "error")

log = logging.getLogger("tdmcore")

#: Seconds between two progress lines on a stderr that is no terminal (a pipe, a
#: log file, CI): long work says where it is at least this often.
PROGRESS_EVERY_S = 30.0
#: Seconds the kernels may take to load before a line says they are compiling:
#: on a terminal (a spinner), and elsewhere (one line: loading from the cache takes
#: well under this even on a loaded machine, compiling 20-60 s).
COMPILE_NOTICE_S = (1.0, 10.0)


class OutDir(click.Path):
    """A report folder: a path, not the empty string (which would be the current
    folder without anyone having asked for it), nor anything that exists and is not
    a folder (a file, ``/dev/null``)."""

    def __init__(self) -> None:
        super().__init__(file_okay=False, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail("an empty folder name (use '.' for the current folder).", param, ctx)
        path = super().convert(value, param, ctx)
        # click refuses a regular file; a device, pipe or socket is no folder either
        if os.path.lexists(path) and not os.path.isdir(path):  # a dangling link too
            self.fail(f"{str(path)!r} exists and is not a folder.", param, ctx)
        return path


#: The example scenario file shipped inside the package (``tdmcore example`` prints it).
EXAMPLE_SCENARIO = "examples/scenario.yaml"


def example_path() -> Path:
    """The shipped example scenario file, as a real path (it is package data)."""
    from importlib import resources

    return Path(str(resources.files("tdmcore").joinpath(EXAMPLE_SCENARIO)))


@contextlib.contextmanager
def compiling_kernels(console: Console) -> Iterator[None]:
    """Say that the kernels are loading when that takes a while.

    Numba compiles the kernels the first time they run after an install (20-60 s
    on 2 cores) and caches them on disk; later runs load them in well under a
    second, before anything is said.  On a terminal a spinner appears after the
    first of :data:`COMPILE_NOTICE_S` ("loading", true either way); elsewhere
    (pipes, CI logs) one line after the second.  When phase B's compile unit is not
    in the cache, a child process compiles it while this one compiles the rest
    (:func:`tdmcore._kernels._unit.prefetch`).  (Ctrl-C while Numba compiles may
    land in a callback of its compiler: :func:`tdmcore.app.signals.redelivered`.)
    The kernels' own announcement of a compile
    (:data:`tdmcore._kernels._jit.COMPILING`) is an INFO record here, since the
    command configures logging: ``--log-level info`` shows it.
    """
    from .._kernels._unit import prefetch
    from .._kernels.lowest_excess import PHASE_B_UNIT

    prefetch([PHASE_B_UNIT])  # phase B compiles in a child meanwhile, if it must
    delay = COMPILE_NOTICE_S[0] if console.is_terminal else COMPILE_NOTICE_S[1]
    if console.is_terminal:
        status = console.status("loading the compiled kernels (compiling them the first "
                                "time only) ...", spinner="dots")
        notice = threading.Timer(delay, status.start)
    else:
        status = None
        notice = threading.Timer(delay, lambda: print(
            "tdmcore: loading the compiled kernels (compiling them the first time only, "
            "20-60 s) ...", file=sys.stderr, flush=True))
    notice.daemon = True
    notice.start()
    try:
        yield
    finally:
        notice.cancel()
        notice.join()
        if status is not None:
            status.stop()


class LineProgress:
    """Progress as lines on stderr, for a stderr that is no terminal.

    The same calls as :class:`rich.progress.Progress` (``add_task``, ``update``,
    ``advance``, a context manager); while the block runs, a thread prints every
    unfinished task as one line every ``every_s`` seconds::

        tdmcore: [0:01:30] trace / metronome: 2.35 h simulated (3/7)
    """

    def __init__(self, every_s: float | None = None) -> None:
        self.every_s = PROGRESS_EVERY_S if every_s is None else every_s
        self.tasks: dict[int, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start = time.monotonic()

    def add_task(self, description: str, total: float | None = None, **_: Any) -> int:
        with self._lock:
            task = len(self.tasks)
            self.tasks[task] = {"description": description, "total": total,
                                "completed": 0.0}
        return task

    def update(self, task: int, *, description: str | None = None,
               completed: float | None = None, total: float | None = None,
               advance: float | None = None, **_: Any) -> None:
        with self._lock:
            state = self.tasks[task]
            if description is not None:
                state["description"] = description
            if total is not None:
                state["total"] = total
            if completed is not None:
                state["completed"] = completed
            if advance is not None:
                state["completed"] += advance

    def advance(self, task: int, advance: float = 1) -> None:
        self.update(task, advance=advance)

    def lines(self) -> list[str]:
        """One line per unfinished task, as the thread prints them."""
        seconds = int(time.monotonic() - self._start)
        elapsed = f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
        out = []
        with self._lock:
            for state in self.tasks.values():
                total, completed = state["total"], state["completed"]
                if total is not None and completed >= total:
                    continue
                count = f" ({completed:g}/{total:g})" if total is not None else ""
                out.append(f"tdmcore: [{elapsed}] {state['description']}{count}")
        return out

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            for line in self.lines():
                print(line, file=sys.stderr, flush=True)

    def __enter__(self) -> LineProgress:
        self._start = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def progress(*columns: Any) -> Any:
    """Progress on stderr (stdout keeps the tables): a transient bar on a terminal,
    a line every :data:`PROGRESS_EVERY_S` seconds elsewhere (:class:`LineProgress`)."""
    from rich.progress import Progress

    console = Console(stderr=True)
    if not console.is_terminal:
        return LineProgress()
    return Progress(*columns, transient=True, console=console)


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Log to whatever ``sys.stderr`` is when a record is emitted (tests swap it)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def configure_logging(level: str) -> None:
    """Route tdmcore's log records to stderr at ``level`` (once per process)."""
    log.setLevel(level.upper())
    if not any(isinstance(h, _StderrHandler) for h in log.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
        log.addHandler(handler)
        log.propagate = False


@contextlib.contextmanager
def report_dir(out_dir: Path, stem: str,
               parameters: dict[str, Any] | None = None) -> Iterator[ReportDir]:
    """The current command's report folder, written all or nothing (:class:`ReportDir`).

    A folder that cannot be written is a one-line error before any work; so is a
    write that fails later (the staged files are removed then, as on Ctrl-C).
    """
    ctx = click.get_current_context()
    # the command that writes the report: `simulate dragon-testbed` runs `elastic`
    # (ctx.command_path would carry simulate's usage pieces before it)
    command = f"tdmcore {ctx.command.name}"
    report = ReportDir(out_dir, stem, command, ctx.params if parameters is None else parameters)
    try:
        report.__enter__()
    except OSError as exc:
        raise click.ClickException(f"--out: cannot write to {out_dir}: {exc.strerror}") \
            from None
    try:
        yield report
    except BaseException as exc:
        report.__exit__(type(exc), exc, exc.__traceback__)
        if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):
            raise click.ClickException(f"--out: cannot write to {out_dir}: {exc.strerror}") \
                from None
        raise
    try:
        report.__exit__(None, None, None)
    except OSError as exc:  # the file in the way, when the OS names one
        raise click.ClickException(f"--out: cannot write to {exc.filename or out_dir}: "
                                   f"{exc.strerror}") from None


def announce(console: Console, report: ReportDir) -> None:
    console.print(f"report: {report.out_dir}/ " + ", ".join(report.files))


def csv_list(text: str, kind: type, name: str, *, low: float | None = None,
              low_open: bool = False, high: float | None = None) -> list[Any]:
    """A comma-separated option as a list of ``kind``; a usage error (exit 2) naming
    the option for an empty item, a value that is not a ``kind``, a non-finite number
    or one outside ``[low, high]`` (``(low, high]`` with ``low_open``)."""
    items = [x.strip() for x in text.split(",")]
    if not any(items):
        return []  # nothing at all: each caller says what it needs
    if any(not x for x in items):
        raise click.BadParameter(f"expected comma-separated {kind.__name__}s with no empty "
                                 f"item, got {text!r}", param_hint=name)
    try:
        values = [kind(x) for x in items]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated {kind.__name__}s, got {text!r}",
                                 param_hint=name) from None
    for x in values:
        if isinstance(x, float) and not math.isfinite(x):
            raise click.BadParameter(f"expected finite numbers, got {text!r}", param_hint=name)
        if low is not None and (x < low or (low_open and x == low)):
            raise click.BadParameter(f"expected values {'>' if low_open else '>='} {low:g}, "
                                     f"got {x!r}", param_hint=name)
        if high is not None and x > high:
            raise click.BadParameter(f"expected values <= {high:g}, got {x!r}",
                                     param_hint=name)
    return values


#: Library argument -> the option that sets it: a ValueError the library raises
#: names its argument; the command line names the option instead (see
#: :func:`option_error`).
OPTION_OF_ARGUMENT = {
    "n_jobs": "--jobs", "n_nodes": "--nodes", "window_s": "--window", "columns": "--column",
    "time_unit": "--time-unit",
    "seeds": "--seeds", "n_slots": "--slots", "n_worker_servers": "--worker-servers",
    "n_ps_servers": "--ps-servers", "mean_gap_s": "--gap", "start": "--start",
    "hours": "--hours", "load": "--load", "max_duration_s": "--max-duration",
    "fit": "--fit", "check": "--check", "scheduler": "--scheduler", "policies": "--policies",
    "cache": "--cache",
}


def option_error(exc: ValueError) -> click.ClickException:
    """``exc`` as the command's one error line, its leading argument name (``n_jobs:``,
    ``seeds[2]:``) replaced by the option that sets it (``--jobs:``)."""
    text = str(exc)
    name, sep, rest = text.partition(": ")
    base, bracket, index = name.partition("[")
    flag = OPTION_OF_ARGUMENT.get(base) if sep else None
    if flag is not None:
        text = f"{flag}{bracket}{index}: {rest}"
    return click.ClickException(text)


def write_rows(report: ReportDir, stem: str, rows: list[dict[str, Any]]) -> None:
    """The table as ``<stem>.csv`` and ``<stem>.json`` in the report folder."""
    import csv

    with report.path(f"{stem}.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    report.path(f"{stem}.json").write_text(json_text(rows), "utf-8")


def num(value: Any, digits: int = 1) -> str:
    """A table cell: thousands separators, ``-`` for a figure that does not exist
    (NaN, or the infinite mean time of jobs that never finished), never ``-0.0``."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        text = f"{value:,.{digits}f}"
        return text[1:] if text.startswith("-") and not text.strip("-0.,") else text
    return str(value)


def given_flag(ctx: click.Context, names: Iterable[str]) -> str | None:
    """The flag of the first of the options ``names`` given on the command line."""
    from click.core import ParameterSource

    for name in names:
        if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE:
            return next(p.opts[0] for p in ctx.command.params if p.name == name)
    return None
