"""The ``tdmcore`` command line.

``tdmcore link s1`` interleaves the pods of a shipped snapshot on their shared link
and prints the chosen rotations, shifts, score and utilization, then draws the
traffic circle.  Bad input gets a one-line error and a non-zero exit status.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import click
import numpy as np
from rich.console import Console
from rich.table import Table

from .._click import FiniteFloat
from .._validation import MAX_BINS, MAX_JOBS, MAX_SEED, MIN_BINS, did_you_mean, read_error
from ..framework import PolicyError
from ..metronome.link import LinkPlan, LinkPod, plan_link
from ..metronome.scoring import average_bandwidth_utilization
from ..sim.elastic_workloads import MAX_GAP_S
from ..sim.engine.network import MIN_CONTENTION_EFFICIENCY
from ..sim.oasis_setting import MAX_SERVERS, MAX_SLOTS
from ..sim.oasis_study import RATIO_MAX, RATIO_MAX_PRIORITY
from ..sim.scenarios import MAX_WINDOW_S, MIN_WINDOW_S, PHILLY_CLI_START
from .catalog import link_scenarios, load_link_file, parse_pod
from .plot_pool import PlotPool
from .report_dir import ReportDir, json_text

EXIT_INTERNAL = 70
#: Exit status after Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130
#: Exit status after SIGTERM (128 + SIGTERM).
EXIT_TERMINATED = 143
LOG_LEVELS = ("debug", "info", "warning", "error")

log = logging.getLogger("tdmcore")


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


def _example_path() -> Path:
    """The shipped example scenario file, as a real path (it is package data)."""
    from importlib import resources

    return Path(str(resources.files("tdmcore").joinpath(EXAMPLE_SCENARIO)))


@contextlib.contextmanager
def _compiling_kernels(console: Console, delay_s: float = 1.0) -> Iterator[None]:
    """A one-line spinner while the kernels load, if that takes longer than ``delay_s``.

    Numba compiles the kernels the first time they run after an install (about
    30-60 s on 2 cores) and caches them on disk; later runs load them in well under
    a second, before the status line would appear (on a loaded machine they may not,
    so the line says "loading", true either way).  On a terminal the line says
    what is happening instead of leaving the screen blank; elsewhere (pipes, CI
    logs) nothing is printed.
    """
    if not console.is_terminal:
        yield
        return
    import threading

    status = console.status("loading the compiled kernels (compiling them the first "
                            "time only) ...",
                            spinner="dots")
    timer = threading.Timer(delay_s, status.start)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        timer.join()
        status.stop()


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Log to whatever ``sys.stderr`` is when a record is emitted (tests swap it)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def _configure_logging(level: str) -> None:
    """Route tdmcore's log records to stderr at ``level`` (once per process)."""
    log.setLevel(level.upper())
    if not any(isinstance(h, _StderrHandler) for h in log.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
        log.addHandler(handler)
        log.propagate = False


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tdmcore")
@click.option("--log-level", type=click.Choice(LOG_LEVELS, case_sensitive=False),
              default="warning", show_default=True,
              help="Messages at this level and above go to stderr.")
def cli(log_level: str) -> None:
    """tdmcore: time-division multiplexing of distributed-training traffic.

    Start with `tdmcore simulate metronome-snapshots` (every policy side by side
    on the Metronome paper's snapshots), `tdmcore link s1` (one shared link by
    hand) or `tdmcore list scenarios`.
    """
    _configure_logging(log_level)


@cli.group("list")
def list_group() -> None:
    """List what the commands accept: scenarios or policies."""


def _scenario_rows() -> list[tuple[str, str, str]]:
    from ..sim.sweep import SWEEP_ONLY_SCENARIOS

    rows = [(name, "tdmcore simulate", title) for name, title in CLUSTER_SCENARIO_TITLES.items()]
    rows += [(name, "tdmcore sweep (a spec's scenario)", title)
             for name, title in SWEEP_ONLY_SCENARIOS.items()]
    rows += [(name, "tdmcore link", sc.title) for name, sc in link_scenarios().items()]
    return rows


def _policy_rows() -> list[tuple[str, str, str]]:
    from ..elastic import ELASTIC_POLICIES
    from ..metronome.policies import POLICIES, SUMMARIES
    from ..oasis.admission import ADMISSION_POLICIES

    def summary(make: Any) -> str:  # the first line of the policy class's docstring
        lines = (make.__doc__ or "").strip().splitlines()
        return lines[0].replace("``", "") if lines else ""

    rows = [(name, "simulate (cluster scenarios)", SUMMARIES[name]) for name in POLICIES]
    rows.append(("ideal", "simulate (cluster scenarios)",
                 "Every job alone on the network: the bound."))
    rows += [(name, "simulate dragon-testbed, elastic", f"Elastic gangs. {summary(make)}")
             for name, make in ELASTIC_POLICIES.items()]
    rows += [(name, "simulate oasis, oasis", f"Admission. {summary(make)}")
             for name, make in ADMISSION_POLICIES.items()]
    return rows


def _print_listing(title: str, rows: list[tuple[str, str, str]]) -> None:
    table = Table(title=title)
    for col in ("name", "used by", "what"):
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    Console().print(table)


@list_group.command("scenarios")
def list_scenarios_cmd() -> None:
    """Every shipped scenario and the command that runs it."""
    _print_listing("shipped scenarios", _scenario_rows())


@list_group.command("policies")
def list_policies_cmd() -> None:
    """Every policy and the commands that take it (--policies)."""
    _print_listing("policies", _policy_rows())


@cli.command("scenarios", hidden=True)
@click.pass_context
def scenarios_cmd(ctx: click.Context) -> None:
    """The same as `tdmcore list scenarios`."""
    ctx.invoke(list_scenarios_cmd)


@cli.command("link")
@click.argument("scenario", required=False)
@click.option("--pod", "pod_specs", multiple=True, metavar="NAME:PERIOD_MS:DUTY:GBPS[:PRIO[:JOB]]",
              help="A pod on the link (repeat); earlier pods count as deployed earlier.")
@click.option("--file", "pod_file", type=click.Path(dir_okay=False, path_type=Path),
              help='JSON or YAML file: {"capacity_gbps": B, "pods": [{"name", '
                   '"period_ms", "duty_cycle", "bandwidth_gbps", "priority", "job"}]}.')
@click.option("--capacity", "capacity_gbps", type=FiniteFloat(min=0, min_open=True),
              default=None,
              help="Link capacity in Gbps (default: the scenario's, or 25 with --pod).")
@click.option("--bins", type=click.IntRange(MIN_BINS, MAX_BINS), default=72,
              show_default=True,
              help=f"Di-Pre: bins on the traffic circle ({MIN_BINS} to {MAX_BINS:,}; "
                   "the search is exact, so its time grows fast with the bins).")
@click.option("--out", "out_dir", type=OutDir(),
              default=Path("report"), show_default=True,
              help="Folder for the PNG and JSON report.")
@click.option("--no-plot", is_flag=True, help="Skip the PNG.")
def link_cmd(scenario: str | None, pod_specs: tuple[str, ...], pod_file: Path | None,
             capacity_gbps: float | None, bins: int, out_dir: Path, no_plot: bool) -> None:
    """Interleave the pods sharing one link (SCENARIO: see `tdmcore list scenarios`).

    Runs the scheduler's search (first perfect interval, Score phase) and the
    controller's (maximum Psi, phase three) and compares both with the
    link left unshifted.
    """
    sources = sum(x is not None and x != () for x in (scenario, pod_file, pod_specs or None))
    if sources != 1:
        raise click.UsageError("give exactly one of SCENARIO, --file or --pod")
    name, title = "custom", "pods given on the command line"
    try:
        if scenario is not None:
            known = link_scenarios()
            if scenario not in known:
                raise click.BadParameter(f"unknown scenario {scenario!r}"
                                         f"{did_you_mean(scenario, known)}; "
                                         f"choose from {', '.join(known)}",
                                         param_hint="SCENARIO")
            sc = known[scenario]
            name, title, cap, pods = sc.name, sc.title, sc.capacity_gbps, sc.pods
        elif pod_file is not None:
            cap, pods = load_link_file(pod_file)
            name, title = pod_file.stem, str(pod_file)
        else:
            pods = tuple(parse_pod(text, i) for i, text in enumerate(pod_specs))
            cap = 25.0
        if capacity_gbps is not None:
            cap = capacity_gbps
        plans = {}
        timings = {}
        with _compiling_kernels(Console(stderr=True)):
            plan_link(pods, cap, bins=bins, mode="first")  # load the compiled kernels first
        for mode in ("first", "optimal"):
            start = time.perf_counter()
            plans[mode] = plan_link(pods, cap, bins=bins, mode=mode)
            timings[mode] = (time.perf_counter() - start) * 1e3
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    console = Console()
    with _report_dir(out_dir, f"link-{name}") as report:
        report.path(f"link-{name}.json").write_text(json_text(_report(plans, timings)), "utf-8")
        _print_plans(console, name, title, plans, timings)
        if not no_plot:
            from .circle_plot import plot_traffic_circle

            plot_traffic_circle(plans["optimal"], report.path(f"link-{name}.png"))
    _announce(console, report)


@contextlib.contextmanager
def _report_dir(out_dir: Path, stem: str,
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


def _announce(console: Console, report: ReportDir) -> None:
    console.print(f"report: {report.out_dir}/ " + ", ".join(report.files))


class _PipeSafeStdout(io.TextIOBase):
    """stdout that keeps the command going when its reader goes away (`| head`).

    The first broken pipe points the descriptor at /dev/null, so the rest of the
    output is discarded and the report is still written.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.broken = False

    def _break(self) -> None:
        self.broken = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        with contextlib.suppress(OSError, ValueError):
            os.dup2(devnull, self._stream.fileno())
        os.close(devnull)

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                self._stream.write(text)
            except BrokenPipeError:
                self._break()
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._break()

    def isatty(self) -> bool:
        # a stream closed after the command (an embedding program's, a test's
        # capture) is no terminal: asked at exit (colorama's atexit) it must not raise
        try:
            return bool(self._stream.isatty())
        except ValueError:
            return False

    def fileno(self) -> int:
        return int(self._stream.fileno())

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self._stream, "encoding", "utf-8"))


def _progress(*columns: Any) -> Any:
    """A transient progress bar on stderr, on a terminal only (stdout keeps the tables)."""
    from rich.progress import Progress

    console = Console(stderr=True)
    return Progress(*columns, transient=True, console=console,
                    disable=not console.is_terminal)


def _csv_list(text: str, kind: type, name: str, *, low: float | None = None,
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
#: :func:`_option_error`).
OPTION_OF_ARGUMENT = {
    "n_jobs": "--jobs", "n_nodes": "--nodes", "window_s": "--window", "columns": "--column",
    "seeds": "--seeds", "n_slots": "--slots", "n_worker_servers": "--worker-servers",
    "n_ps_servers": "--ps-servers", "mean_gap_s": "--gap", "start": "--start",
    "hours": "--hours", "load": "--load", "max_duration_s": "--max-duration",
    "fit": "--fit", "check": "--check", "scheduler": "--scheduler", "policies": "--policies",
    "cache": "--cache",
}


def _option_error(exc: ValueError) -> click.ClickException:
    """``exc`` as the command's one error line, its leading argument name (``n_jobs:``,
    ``seeds[2]:``) replaced by the option that sets it (``--jobs:``)."""
    text = str(exc)
    name, sep, rest = text.partition(": ")
    base, bracket, index = name.partition("[")
    flag = OPTION_OF_ARGUMENT.get(base) if sep else None
    if flag is not None:
        text = f"{flag}{bracket}{index}: {rest}"
    return click.ClickException(text)


def _write_rows(report: ReportDir, stem: str, rows: list[dict[str, Any]]) -> None:
    """The table as ``<stem>.csv`` and ``<stem>.json`` in the report folder."""
    import csv

    with report.path(f"{stem}.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    report.path(f"{stem}.json").write_text(json_text(rows), "utf-8")


def _num(value: Any, digits: int = 1) -> str:
    """A table cell: thousands separators, ``-`` for a figure that does not exist
    (NaN, or the infinite mean time of jobs that never finished), never ``-0.0``."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        text = f"{value:,.{digits}f}"
        return text[1:] if text.startswith("-") and not text.strip("-0.,") else text
    return str(value)


@cli.command("fidelity")
@click.option("--window", "window_s", type=FiniteFloat(min=MIN_WINDOW_S, max=MAX_WINDOW_S),
              default=600.0,
              show_default=True, help="Seconds each snapshot job trains at its ideal speed.")
@click.option("--seed", type=click.IntRange(min=0, max=MAX_SEED), default=0, show_default=True,
              help="Compute noise and the trace.")
@click.option("--out", "out_dir", type=OutDir(),
              default=Path("report"), show_default=True)
@click.option("--contention-efficiency", "eta", type=FiniteFloat(MIN_CONTENTION_EFFICIENCY, 1.0),
              default=None, help="Share of a link that contending transfers get together "
              "(default: the calibrated value, `tdmcore calibrate`).")
def fidelity_cmd(window_s: float, seed: int, out_dir: Path, eta: float | None) -> None:
    """The Metronome paper's evaluation figures beside the simulator's.

    Runs the snapshots S1-S5 under default, diktyo, metronome, its ablations and
    ideal, and the 4-hour trace; prints every compared figure with the paper's
    value, ours and the difference, and writes fidelity.csv, fidelity.json and
    fidelity.md (a Markdown table) to --out.
    """
    from ..sim.engine.network import CONTENTION_EFFICIENCY
    from ..sim.fidelity import fidelity_rows

    console = Console()
    with _report_dir(out_dir, "fidelity") as report:
        rows = fidelity_rows(window_s, seed,
                             contention_efficiency=CONTENTION_EFFICIENCY if eta is None else eta)
        table = Table(title=f"Metronome paper vs tdmcore (seed {seed}, {window_s:g} s "
                            "windows; sources in fidelity.md)")
        for column in ("section", "figure", "paper", "ours", "ours - paper", "unit"):
            table.add_column(column, justify="right" if column in (
                "paper", "ours", "ours - paper") else "left")
        records = []
        lines = ["| section | figure | paper | ours | ours - paper | unit | source |",
                 "|---|---|---:|---:|---:|---|---|"]
        for row in rows:
            cells = (row.section, row.metric, _num(row.paper, 2), _num(row.ours, 2),
                     _num(row.difference, 2), row.unit, row.source)
            table.add_row(*cells[:-1])
            lines.append("| " + " | ".join(cells) + " |")
            records.append({"section": row.section, "figure": row.metric,
                            "paper": None if math.isnan(row.paper) else row.paper,
                            "ours": None if math.isnan(row.ours) else row.ours,
                            "unit": row.unit, "source": row.source, "note": row.note})
        _write_rows(report, "fidelity", records)
        report.path("fidelity.md").write_text("\n".join(lines) + "\n", "utf-8")
        console.print(table)
    _announce(console, report)


@cli.command("calibrate")
@click.option("--fit", default="S1,S2,S3", show_default=True,
              help="Snapshots the contention efficiency is fitted on.")
@click.option("--check", default="S4,S5", show_default=True,
              help="Held-out snapshots, run at the fitted value.")
@click.option("--seeds", default="0,1,2", show_default=True,
              help="Compute noise seeds averaged (the paper ran each experiment 3 times).")
@click.option("--window", "window_s", type=FiniteFloat(min=MIN_WINDOW_S, max=MAX_WINDOW_S),
              default=600.0,
              show_default=True, help="Seconds each snapshot job trains at its ideal speed.")
@click.option("--out", "out_dir", type=OutDir(),
              default=Path("report"), show_default=True)
def calibrate_cmd(fit: str, check: str, seeds: str, window_s: float, out_dir: Path) -> None:
    """Fit the contention efficiency on the Metronome paper's baselines.

    For every efficiency from 0.30 to 1.00 (step 0.01), runs default and diktyo
    on the --fit snapshots and compares each one's slowdown against ideal with the
    paper's (its Table V); keeps the efficiency with the smallest RMS error and
    reports the --check snapshots at it.  Writes calibrate.csv/.json (the figures)
    and calibrate-curve.csv (the error of every efficiency) to --out.
    """
    from ..sim.calibration import calibrate

    fit_ids = [x.strip() for x in fit.split(",") if x.strip()]
    check_ids = [x.strip() for x in check.split(",") if x.strip()]
    seed_list = _csv_list(seeds, int, "--seeds", low=0, high=MAX_SEED)
    if not seed_list:
        raise click.BadParameter("expected at least one seed", param_hint="--seeds")
    console = Console()
    with _report_dir(out_dir, "calibrate") as report:
        try:
            from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

            with _progress(TextColumn("{task.description}"), BarColumn(),
                           TimeElapsedColumn()) as bar:
                task = bar.add_task("fitting the contention efficiency", total=None)

                def tick(done: int, total: int) -> None:
                    bar.update(task, completed=done, total=total)

                result = calibrate(fit_ids, check_ids, seeds=seed_list, window_s=window_s,
                                   progress=tick)
        except ValueError as exc:
            raise _option_error(exc) from None
        table = Table(title=f"contention efficiency eta = {result.eta:.2f} (fitted on "
                            f"{', '.join(fit_ids)}; seeds {', '.join(map(str, seed_list))})")
        for column in ("snapshot", "scheduler", "paper", "ours", "error", "role"):
            table.add_column(column, justify="right" if column in (
                "paper", "ours", "error") else "left")
        records = []
        for row in result.rows:
            role = "fitted" if row.fitted else "held out"
            table.add_row(row.snapshot, row.policy, f"{row.paper:.3f}", f"{row.ours:.3f}",
                          f"{100 * row.error:+.1f} %", role)
            records.append({"snapshot": row.snapshot, "scheduler": row.policy,
                            "paper_slowdown": row.paper, "our_slowdown": row.ours,
                            "log_error": row.error, "role": role, "eta": result.eta})
        _write_rows(report, "calibrate", records)
        with report.path("calibrate-curve.csv").open("w", encoding="utf-8") as fh:
            fh.write("eta,rms_log_error\n")
            fh.writelines(f"{e:.2f},{r:.6f}\n" for e, r in result.curve)
        console.print(table)
        console.print(f"RMS error: fitted {100 * result.rms(True):.1f} %, held out "
                      f"{100 * result.rms(False):.1f} %")
    _announce(console, report)


@cli.command("oasis")
@click.option("--jobs", "n_jobs", type=click.IntRange(1, MAX_JOBS), default=250,
              show_default=True)
@click.option("--worker-servers", type=click.IntRange(1, MAX_SERVERS), default=20,
              show_default=True)
@click.option("--ps-servers", type=click.IntRange(1, MAX_SERVERS), default=20,
              show_default=True)
@click.option("--slots", "n_slots", type=click.IntRange(1, MAX_SLOTS), default=200,
              show_default=True)
@click.option("--seed", type=click.IntRange(min=0, max=MAX_SEED), default=0, show_default=True)
@click.option("--policies", default="oasis,fifo,drf,rrh,dorm", show_default=True,
              help="Comma-separated policy names.")
@click.option("--l-quantile", type=FiniteFloat(0.0, 1.0, max_open=True), default=None,
              help="Also run OASiS with L from this quantile of the jobs' values "
                   "(PriceBounds.from_jobs(quantile=...)) as 'oasis-L<q>'.")
@click.option("--out", "out_dir", type=OutDir(),
              default=Path("report"), show_default=True)
def oasis_cmd(n_jobs: int, worker_servers: int, ps_servers: int, n_slots: int, seed: int,
              policies: str, l_quantile: float | None, out_dir: Path) -> None:
    """OASiS and its baselines on the paper's simulation setting (§V-A, Fig. 4-5).

    Columns: total utility, relative to oasis, share of jobs admitted, jobs done,
    utility of the time-critical jobs, their median completion delay minus target
    (slots), median decision time.  oasis-compare.csv/.json in --out has every class.
    """

    from ..oasis.admission import AdmissionPolicy, OasisPolicy
    from ..sim.oasis_setting import oasis_setting
    from ..sim.oasis_study import compare_admission, summarize

    names: list[str | AdmissionPolicy] = list(_csv_list(policies, str, "--policies"))
    if not names:
        raise click.ClickException("--policies: name at least one policy")
    console = Console()
    with _report_dir(out_dir, "oasis-compare") as report:
        try:
            if l_quantile is not None:
                names.append(OasisPolicy(l_quantile=l_quantile,
                                         name=f"oasis-L{l_quantile:g}"))
            setting = oasis_setting(n_jobs, worker_servers, ps_servers, n_slots, seed)
            with _progress() as bar:
                task = bar.add_task("policies", total=len(names))
                runs = compare_admission(setting, names,
                                         progress=lambda _name: bar.advance(task))
        except ValueError as exc:
            raise _option_error(exc) from None
        rows = summarize(runs)
        _write_rows(report, "oasis-compare", rows)
        _oasis_table(console, rows, n_jobs, worker_servers, ps_servers, n_slots, seed)
    _announce(console, report)


def _oasis_table(console: Console, rows: list[dict[str, Any]], n_jobs: int,
                 worker_servers: int, ps_servers: int, n_slots: int, seed: int) -> None:
    from rich import box

    table = Table(title=f"OASiS setting: {n_jobs} jobs, {worker_servers}+{ps_servers} "
                        f"servers, {n_slots} slots, seed {seed}", box=box.SIMPLE_HEAD,
                  show_edge=False, collapse_padding=True, pad_edge=False)
    table.add_column("policy", no_wrap=True)
    for col in ("total\nutility", "vs\noasis", "share\nadmitted", "jobs\ndone",
                "critical\nutility", "critical late\np50, slots", "decision\nms p50"):
        table.add_column(col, justify="right")
    for row in rows:
        table.add_row(str(row["policy"]), _num(row["total_utility"]), _num(row["vs_oasis"], 3),
                      _num(row["accepted"], 2), str(row["finished"]),
                      _num(row["utility_critical"]), _num(row["lateness_critical_p50"]),
                      _num(row["decision_ms_p50"], 2))
    console.print(table)


@cli.command("oasis-ratio")
@click.option("--servers", default="4,6,8", show_default=True,
              help="Total servers: servers // 2 worker servers, the rest PS servers.")
@click.option("--priorities", default="10,50,100", show_default=True,
              help="Upper ends of the priority range g1 in [1, high].")
@click.option("--scales", default="0.25,0.5,1,2,4", show_default=True,
              help="Estimates of U and L as fractions of their values.")
@click.option("--seeds", default="0,1,2", show_default=True)
@click.option("--jobs", "n_jobs", type=click.IntRange(1, RATIO_MAX), default=10,
              show_default=True)
@click.option("--slots", "n_slots", type=click.IntRange(1, RATIO_MAX), default=15,
              show_default=True)
@click.option("--out", "out_dir", type=OutDir(),
              default=Path("report"), show_default=True)
def oasis_ratio_cmd(servers: str, priorities: str, scales: str, seeds: str, n_jobs: int,
                    n_slots: int, out_dir: Path) -> None:
    """Offline optimum / OASiS utility with estimated U and L (the paper's Fig. 6).

    Writes oasis-ratio.csv/.json (one row per instance and scale) to --out.
    """

    from ..sim.oasis_study import performance_ratio_study

    server_list = _csv_list(servers, int, "--servers", low=2, high=RATIO_MAX)
    prio_list = _csv_list(priorities, float, "--priorities", low=1, high=RATIO_MAX_PRIORITY)
    scale_list = _csv_list(scales, float, "--scales", low=0, low_open=True)
    seed_list = _csv_list(seeds, int, "--seeds", low=0, high=MAX_SEED)
    for flag, values in (("--servers", server_list), ("--priorities", prio_list),
                         ("--scales", scale_list), ("--seeds", seed_list)):
        if not values:
            raise click.BadParameter("expected at least one value", param_hint=flag)
    total = len(server_list) * len(prio_list) * len(scale_list) * len(seed_list)
    console = Console()
    with _report_dir(out_dir, "oasis-ratio") as report:
        try:
            with _progress() as bar:
                task = bar.add_task("instances", total=total)
                rows = performance_ratio_study(server_list, prio_list, scale_list,
                                               seed_list, n_jobs=n_jobs, n_slots=n_slots,
                                               progress=lambda: bar.advance(task))
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
        out_rows = [{"servers": r.servers, "priority_high": r.priority_high,
                     "scale": r.scale, "seed": r.seed, "offline": round(r.offline, 6),
                     "online": round(r.online, 6), "ratio": round(r.ratio, 6),
                     "offline_optimal": r.offline_optimal} for r in rows]
        _write_rows(report, "oasis-ratio", out_rows)
        table = Table(title=f"offline optimum / OASiS ({n_jobs} jobs, {n_slots} slots, "
                            f"mean over seeds {','.join(map(str, seed_list))})")
        table.add_column("servers", justify="right")
        table.add_column("g1 range", justify="right")
        for scale in scale_list:
            table.add_column(f"U,L x{scale:g}", justify="right")
        for srv in server_list:
            for high in prio_list:
                cells = []
                for scale in scale_list:
                    ratios = [r.ratio for r in rows if r.servers == srv
                              and r.priority_high == high and r.scale == scale]
                    cells.append(f"{sum(ratios) / len(ratios):.3f}")
                table.add_row(str(srv), f"[1, {high:g}]", *cells)
        console.print(table)
        unproven = sum(not r.offline_optimal for r in rows) // max(1, len(scale_list))
        if unproven:
            log.warning("the MILP hit its time limit on %d instance(s): their ratios are "
                        "lower bounds", unproven)
    _announce(console, report)


@cli.command("elastic")
@click.argument("workload", type=click.Choice(["table1", "poisson", "deadlock"]),
                default="table1")
@click.option("--policies", default="dragon,locality,kubeflow,kod2,weighted",
              show_default=True, help="Comma-separated policy names.")
@click.option("--jobs", "n_jobs", type=click.IntRange(1, MAX_JOBS), default=100,
              show_default=True, help="poisson: number of jobs.")
@click.option("--gap", "mean_gap_s", type=FiniteFloat(0, MAX_GAP_S, min_open=True),
              default=200.0, show_default=True, help="poisson: mean inter-arrival gap, s.")
@click.option("--seed", type=click.IntRange(min=0, max=MAX_SEED), default=0, show_default=True)
@click.option("--rescale", "rescale_s", type=FiniteFloat(0, 1e9), default=45.0,
              show_default=True, help="Checkpoint-restart time of a rescale, s.")
@click.option("--out", "out_dir", type=OutDir(),
              default=Path("report"), show_default=True)
def elastic_cmd(workload: str, policies: str, n_jobs: int, mean_gap_s: float, seed: int,
                rescale_s: float, out_dir: Path) -> None:
    """DRAGON, KOD2, the weighted scheduler and the baselines on DRAGON's workloads.

    WORKLOAD: table1 (DRAGON Table 1 on its 2 x 4-GPU testbed), poisson (its
    4 x 8-GPU simulation), deadlock (four 4-worker jobs at once on the testbed).
    Times are means over jobs; a policy that leaves jobs unfinished shows -
    (inf in the CSV, null in the JSON).
    Writes elastic-<workload>.csv/.json to --out.
    """
    from ..elastic import ELASTIC_POLICIES
    from ..sim.elastic_workloads import dragon_poisson, dragon_table1, kubeflow_deadlock

    flag = None if workload == "poisson" else _given_flag(
        click.get_current_context(), ("n_jobs", "mean_gap_s", "seed"))
    if flag is not None:
        raise click.UsageError(f"{flag} applies to the poisson workload only, not to "
                               f"{workload}")
    names = _csv_list(policies, str, "--policies")
    if not names:
        raise click.ClickException("--policies: name at least one policy")
    for i, name in enumerate(names):
        if name in names[:i]:
            raise click.ClickException(f"--policies: two policies named {name!r}")
        if name not in ELASTIC_POLICIES:
            raise click.ClickException(f"--policies: unknown policy {name!r}"
                                       f"{did_you_mean(name, ELASTIC_POLICIES)}; choose from "
                                       f"{', '.join(ELASTIC_POLICIES)}")
    try:
        if workload == "table1":
            cluster, jobs = dragon_table1()
        elif workload == "poisson":
            cluster, jobs = dragon_poisson(n_jobs, mean_gap_s, seed)
        else:
            cluster, jobs = kubeflow_deadlock()
    except ValueError as exc:
        raise _option_error(exc) from None
    with _report_dir(out_dir, f"elastic-{workload}") as report:
        _elastic_report(report, workload, names, cluster, jobs, n_jobs, mean_gap_s, seed,
                        rescale_s)
    _announce(Console(), report)


def _elastic_report(report: ReportDir, workload: str, names: list[str], cluster: Any,
                    jobs: Any, n_jobs: int, mean_gap_s: float, seed: int,
                    rescale_s: float) -> None:

    from ..elastic import make_elastic_policy
    from ..sim.elastic import run_elastic

    runs = {}
    with _progress() as bar:
        task = bar.add_task("policies", total=len(names))
        for name in names:
            try:
                runs[name] = run_elastic(make_elastic_policy(name), cluster, jobs,
                                         rescale_s=rescale_s)
            except ValueError as exc:
                raise click.ClickException(str(exc)) from None
            bar.advance(task)
    base = runs["kubeflow"].mean("elapsed_s") if "kubeflow" in runs else math.nan
    rows: list[dict[str, Any]] = []
    for name, run in runs.items():
        elapsed = run.mean("elapsed_s")
        rows.append({
            "policy": name, "jobs": len(run.outcomes), "finished": run.finished,
            "deadlocked": len(run.deadlocked),
            "elapsed_s": round(elapsed, 2), "wait_s": round(run.mean("wait_s"), 2),
            "running_s": round(run.mean("running_s"), 2),
            "scaling_s": round(run.mean("scaling_s"), 2),
            "vs_kubeflow": (round(elapsed / base, 4) if math.isfinite(elapsed)
                            and math.isfinite(base) and base > 0 else math.nan),
            "gpu_utilization": round(run.gpu_utilization, 4),
            "makespan_s": round(run.makespan_s, 2),
            "decision_ms_p50": round(float(np.median(run.decision_s)) * 1e3, 4)
            if run.decision_s.size else math.nan,
        })
    console = Console()
    title = {"table1": "DRAGON Table 1, 2 x 4 GPUs",
             "poisson": f"Poisson, {n_jobs} jobs, mean gap {mean_gap_s:g} s, seed {seed}, "
                        "4 x 8 GPUs",
             "deadlock": "four 4-worker jobs at once, 2 x 4 GPUs"}[workload]
    table = Table(title=title)
    for col in ("policy", "done", "elapsed s", "wait s", "run s", "scaling s",
                "vs kubeflow", "GPU util"):
        if col == "policy":  # the row labels are never cut; the numbers' columns wrap
            table.add_column(col, no_wrap=True, min_width=max(len(n) for n in runs))
        else:
            table.add_column(col, justify="right")
    for row in rows:
        table.add_row(row["policy"], f"{row['finished']}/{row['jobs']}",
                      _num(row["elapsed_s"], 0), _num(row["wait_s"], 0),
                      _num(row["running_s"], 0), _num(row["scaling_s"], 0),
                      _num(row["vs_kubeflow"], 2), _num(row["gpu_utilization"], 2))
    _write_rows(report, f"elastic-{workload}", rows)
    console.print(table)
    for name, run in runs.items():
        if run.deadlocked:
            console.print(f"{name}: {len(run.deadlocked)} job(s) deadlocked, holding pods "
                          f"of partial gangs: {', '.join(run.deadlocked)}")


#: The options of `tdmcore simulate` that only some scenarios take.
SCENARIO_OPTIONS: dict[str, tuple[str, ...]] = {
    "window_s": ("metronome-snapshots",),
    "hours": ("metronome-trace",),
    "load": ("metronome-trace",),
    "n_jobs": ("philly", "trace"),
    "n_nodes": ("philly", "trace"),
    "start": ("philly", "trace"),
    "max_duration_s": ("philly", "trace"),
    "columns": ("trace",),
}

def _given_flag(ctx: click.Context, names: Iterable[str]) -> str | None:
    """The flag of the first of the options ``names`` given on the command line."""
    from click.core import ParameterSource

    for name in names:
        if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE:
            return next(p.opts[0] for p in ctx.command.params if p.name == name)
    return None


#: The options of `tdmcore simulate` that only cluster scenarios and scenario files
#: take (not dragon-testbed or oasis, which run other simulators).
CLUSTER_ONLY_OPTIONS: tuple[str, ...] = ("queue", "eta", "wide", "plot_format")


def _refuse_options_that_do_not_apply(ctx: click.Context, scenario: str) -> None:
    """An option given for another scenario is a usage error, not silently ignored."""
    for name, takers in SCENARIO_OPTIONS.items():
        flag = None if scenario in takers else _given_flag(ctx, [name])
        if flag is not None:
            raise click.UsageError(f"{flag} applies to {' and '.join(takers)} only, not to "
                                   f"{Path(scenario).name}")
    flag = _given_flag(ctx, CLUSTER_ONLY_OPTIONS) if scenario in OTHER_SCENARIOS else None
    if flag is not None:
        raise click.UsageError(f"{flag} applies to the cluster scenarios "
                               f"({', '.join(CLUSTER_SCENARIOS)}, trace) and scenario "
                               f"files only, not to {scenario}")


#: The scenarios `tdmcore simulate` knows by name, with what each one is.
CLUSTER_SCENARIO_TITLES = {
    "metronome-snapshots": "S0-S5 on the Metronome paper's 4-node testbed (Table IV)",
    "metronome-trace": "a Gavel-style trace on the testbed (--hours, --load, --seed)",
    "philly": "a slice of the real Philly trace (--jobs, --nodes, --start)",
    "trace": "your own trace: `simulate trace TRACE.csv` (--column, --jobs, --nodes)",
    "dragon-testbed": "DRAGON's Table 1 and Poisson workloads (elastic policies)",
    "oasis": "the OASiS paper's simulation setting (admission policies)",
}
CLUSTER_SCENARIOS = ("metronome-snapshots", "metronome-trace", "philly")
OTHER_SCENARIOS = ("dragon-testbed", "oasis")


class _SimulateCommand(click.Command):
    """`simulate --help` ends with the scenarios and policies it accepts."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from ..metronome.policies import POLICIES

        with formatter.section("Scenarios"):
            formatter.write_dl([*CLUSTER_SCENARIO_TITLES.items(),
                                ("FILE.yaml|FILE.json", "your own scenario file "
                                 "(`tdmcore example` prints one)")])
        with formatter.section("Policies (cluster scenarios; the others: "
                               "`tdmcore list policies`)"):
            line = ""
            for name in [*POLICIES, "ideal"]:  # wrap between names, never inside one
                if line and len(line) + len(name) + 2 > formatter.width - 4:
                    formatter.write_text(line + ",")
                    line = ""
                line = f"{line}, {name}" if line else name
            formatter.write_text(line)




@cli.command("sweep")
@click.argument("spec_file", metavar="SPEC.yaml", required=False,
                type=click.Path(dir_okay=False, path_type=Path))
@click.option("--example", "example_name", metavar="NAME",
              help="Run a shipped spec: fig14, monitor-window, period-gap or "
                   "scheduler-time.")
@click.option("--show", is_flag=True, help="Print the spec instead of running it.")
@click.option("--scheduler", metavar="tcp://HOST:PORT",
              help="Run on this Dask cluster (default: a local one on 127.0.0.1).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Worker processes of the local cluster (default: every core).")
@click.option("--serial", is_flag=True, help="Run the tasks here, one after the other.")
@click.option("--cache", "cache_dir", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="Finished tasks are kept here "
                                 "(default: ~/.cache/tdmcore/sweeps).")
@click.option("--no-cache", is_flag=True, help="Run every task, keep nothing.")
@click.option("--out", "out_dir", type=OutDir(),
              default=Path("report"), show_default=True)
@click.option("--no-plots", "--no-plot", "no_plots", is_flag=True, help="Skip the plots.")
@click.option("--plot-format", type=click.Choice(["png", "svg", "pdf"]), default="png",
              show_default=True)
def sweep_cmd(spec_file: Path | None, example_name: str | None, show: bool,
              scheduler: str | None, workers: int | None, serial: bool,
              cache_dir: Path | None, no_cache: bool, out_dir: Path, no_plots: bool,
              plot_format: str) -> None:
    """Run a grid of simulations (scenario x policy x seed x parameters) on Dask.

    SPEC.yaml names the scenario, policies, seeds, fixed and swept parameters and
    metrics (docs/sweeps.md).  Each task runs once: finished ones come from the
    cache; a failed one is reported and retried once.  Writes sweep-<name>.csv/.json
    (one row per task) and a plot per metric and swept parameter to --out; exits 1
    if a task failed twice.
    """
    from ..sim import sweep
    from .sweep_plots import plot_sweep

    if (spec_file is None) == (example_name is None):
        raise click.UsageError("give exactly one of SPEC.yaml or --example NAME")
    if serial and (scheduler or workers):
        raise click.UsageError("--serial runs here: drop --scheduler/--workers")
    if scheduler and workers:
        raise click.UsageError("--workers sizes the local cluster: drop it with --scheduler")
    try:
        path = Path(sweep.example_path(example_name)) if example_name else spec_file
    except ValueError as exc:
        raise click.BadParameter(str(exc).partition(": ")[2],
                                 param_hint="'--example'") from None
    assert path is not None
    try:
        if show:
            click.echo(path.read_text("utf-8"), nl=False)
            return
        spec = sweep.load_spec(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise click.ClickException(read_error(path, exc)) from None
    except ValueError as exc:
        text = str(exc)  # a read error names the file already
        raise click.ClickException(text if path.name in text
                                   else f"{path.name}: {text}") from None
    if not serial:
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise click.ClickException("sweep needs dask.distributed: pip install "
                                       "'tdmcore[sweep]' (or run with --serial)") from None
    cache = None if no_cache else sweep.ResultCache(cache_dir or sweep.default_cache_dir())
    console = Console()
    counts = {"cached": 0, "retried": 0}

    def retry(task: Any, error: str) -> None:
        counts["retried"] += 1
        log.warning("task failed, retrying once: %s: %s", task.describe(), error)

    with _report_dir(out_dir, f"sweep-{spec.name}") as report:
        from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

        with _progress(TextColumn("{task.description}"), BarColumn(),
                       TextColumn("{task.completed}/{task.total}"),
                       TimeElapsedColumn()) as bar:
            progress = bar.add_task(f"sweep {spec.name}", total=len(spec.tasks))

            def done(outcome: Any) -> None:
                counts["cached"] += outcome.cached
                bar.advance(progress)

            try:
                outcomes = sweep.run_tasks(spec.tasks, cache=cache, serial=serial,
                                           scheduler=scheduler, workers=workers,
                                           on_done=done, on_retry=retry)
            except ValueError as exc:
                raise _option_error(exc) from None
        rows = sweep.result_rows(spec, outcomes)
        _write_rows(report, f"sweep-{spec.name}", rows)
        _sweep_table(console, spec, sweep.summary_rows(spec, rows))
        if not no_plots:
            plot_sweep(spec, rows, report.path, plot_format)
    failed = [o for o in outcomes if not o.ok]
    console.print(f"{len(outcomes)} tasks: {counts['cached']} from the cache, "
                  f"{len(outcomes) - counts['cached']} run ({counts['retried']} retried), "
                  f"{len(failed)} failed", highlight=False)
    _announce(console, report)
    if failed:
        for outcome in failed:
            log.error("task failed twice: %s: %s", outcome.task.describe(), outcome.error)
        raise click.ClickException(f"{len(failed)} of {len(outcomes)} tasks failed twice "
                                   f"(status and error in sweep-{spec.name}.csv)")


def _sweep_table(console: Console, spec: Any, rows: list[dict[str, Any]]) -> None:
    """The sweep's means over seeds: the swept parameters and the spec's metrics
    (the fixed parameters are in the CSV and the run record)."""
    from rich import box

    if not rows:
        return
    keys = [k for k in rows[0] if k not in spec.fixed
            and not (k == "group" and len(spec.groups) < 2)]
    table = Table(title=spec.title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for key in keys:
        table.add_column(key.rpartition(".")[2], no_wrap=True,
                         justify="left" if key in ("group", "policy") else "right")
    for row in rows:
        table.add_row(*("" if row[k] is None else _num(row[k], 3)
                        if isinstance(row[k], float) else str(row[k]) for k in keys))
    # Printed at its natural width, whatever the terminal's: a metric's name has no
    # space to wrap at and a number must never be split, so a narrow terminal wraps
    # whole lines rather than rich cutting headers and values into pieces.
    natural = Console(width=100_000, file=io.StringIO()).measure(table).maximum
    wide = Console(width=max(natural, 80), height=console.height, file=console.file,
                   force_terminal=console.is_terminal, no_color=console.no_color,
                   color_system=console.color_system)  # type: ignore[arg-type]
    wide.print(table)


@cli.command("example")
@click.option("--path", "show_path", is_flag=True,
              help="Print where the file is instead of its contents.")
def example_cmd(show_path: bool) -> None:
    """Print the example scenario file shipped with tdmcore.

    Start your own scenario from it: `tdmcore example > my.yaml`, edit, then
    `tdmcore simulate my.yaml`.  `tdmcore simulate --example` runs it as shipped.
    """
    path = _example_path()
    click.echo(str(path) if show_path else path.read_text("utf-8"), nl=show_path)


@cli.command("simulate", cls=_SimulateCommand)
@click.argument("scenario", metavar="SCENARIO|FILE", required=False)
@click.argument("trace_file", metavar="[TRACE.csv]", required=False,
                type=click.Path(dir_okay=False, path_type=Path))
@click.option("--example", is_flag=True,
              help="Run the example scenario file shipped with tdmcore "
                   "(`tdmcore example` prints it).")
@click.option("--policies", default=None,
              help="Comma-separated policy names, or MODULE:CALLABLE for a policy of "
                   "your own (docs/custom-policy.md); default: every applicable policy.")
@click.option("--seed", type=click.IntRange(min=0, max=MAX_SEED), default=0, show_default=True,
              help="Compute noise and generated workloads.")
@click.option("--out", "out_dir", type=OutDir(),
              default=Path("report"), show_default=True)
@click.option("--window", "window_s", type=FiniteFloat(min=MIN_WINDOW_S, max=MAX_WINDOW_S),
              default=600.0,
              show_default=True,
              help="metronome-snapshots: seconds each job trains at its ideal speed.")
@click.option("--hours", type=FiniteFloat(0.0, 48.0, min_open=True), default=4.0,
              show_default=True, help="metronome-trace: length of the trace.")
@click.option("--load", type=FiniteFloat(0.0, 1.0, min_open=True), default=0.7,
              show_default=True, help="metronome-trace: expected GPU load.")
@click.option("--jobs", "n_jobs", type=click.IntRange(min=1), default=200, show_default=True,
              help="philly, trace: jobs in the slice (trace: every row from --start "
                   "unless given).")
@click.option("--nodes", "n_nodes", type=click.IntRange(1, 4096), default=16,
              show_default=True, help="philly, trace: nodes of 8 GPUs.")
@click.option("--start", type=click.IntRange(min=0), default=None,
              help="philly, trace: index of the slice's first job (in submit order).  "
                   f"[default: philly {PHILLY_CLI_START}, a busy slice that runs in seconds "
                   "(the trace's first jobs run for days); trace 0; x>=0]")
@click.option("--max-duration", "max_duration_s",
              type=FiniteFloat(min=0.0, min_open=True), default=None,
              help="philly, trace: truncate jobs to this many seconds.")
@click.option("--no-plots", "--no-plot", "no_plots", is_flag=True,
              help="Skip the plots (tables only).")
@click.option("--column", "columns", multiple=True, metavar="FIELD=HEADER",
              help="trace: the CSV header holding a field (repeat): submit, workers, "
                   "duration_s, iterations, model, priority.")
@click.option("--plot-format", type=click.Choice(["png", "svg", "pdf"]), default="png",
              show_default=True, help="File format of the plots.")
@click.option("--queue", type=click.Choice(["backoff", "fifo"]), default="backoff",
              show_default=True,
              help="Waiting gangs: kube-scheduler back-off (the others are tried "
                   "meanwhile) or strict head-of-line FIFO.")
@click.option("--contention-efficiency", "eta", type=FiniteFloat(MIN_CONTENTION_EFFICIENCY, 1.0),
              default=None, help="Share of a link that contending transfers get together "
              "(default: the calibrated value, `tdmcore calibrate`).")
@click.option("--wide", is_flag=True,
              help="Print every column of the table (the default fits 80 columns).")
@click.pass_context
def simulate_cmd(ctx: click.Context, scenario: str | None, trace_file: Path | None,
                 example: bool,
                 policies: str | None, seed: int, out_dir: Path, window_s: float,
                 hours: float, load: float, n_jobs: int, n_nodes: int, start: int | None,
                 max_duration_s: float | None, no_plots: bool, columns: tuple[str, ...],
                 plot_format: str, queue: str, eta: float | None, wide: bool) -> None:
    """Run every applicable policy side by side on a scenario and write the report.

    SCENARIO: metronome-snapshots (S0-S5 on the paper's testbed), metronome-trace
    (a Gavel-style 4 h trace), philly (a slice of the real Philly trace),
    dragon-testbed (DRAGON's Table 1 and Poisson workloads), oasis (the OASiS
    setting), or a YAML/JSON scenario file (`tdmcore example` prints one;
    --example runs it).

    Prints one row per policy with its change relative to default and to ideal
    (negative = faster), and writes simulate-<name>.csv/.json (the table),
    simulate-<name>-jobs.csv/.json (every job) and plots to --out.  dragon-testbed
    and oasis run other simulators and write their reports instead: those of
    `tdmcore elastic table1` and `tdmcore elastic poisson`, and of `tdmcore oasis`.
    """
    if example == (scenario is not None):
        raise click.UsageError("give exactly one of SCENARIO or --example")
    if scenario is None:
        scenario = str(_example_path())
    _refuse_options_that_do_not_apply(ctx, scenario)
    if start is None:  # the slice the run takes, in its run record too
        start = ctx.params["start"] = PHILLY_CLI_START if scenario == "philly" else 0
    if scenario == "dragon-testbed":
        for workload in ("table1", "poisson"):
            kwargs: dict[str, Any] = {"workload": workload, "seed": seed, "out_dir": out_dir}
            if policies is not None:
                kwargs["policies"] = policies
            ctx.invoke(elastic_cmd, **kwargs)
        return
    if scenario == "oasis":
        kwargs = {"seed": seed, "out_dir": out_dir}
        if policies is not None:
            kwargs["policies"] = policies
        ctx.invoke(oasis_cmd, **kwargs)
        return
    from ..sim.cluster import CLUSTER_POLICIES

    specs = list(CLUSTER_POLICIES) if policies is None else _csv_list(policies, str,
                                                                       "--policies")
    if not specs:
        raise click.ClickException("--policies: name at least one policy")
    names = _policy_factories(specs, scenario)
    from click.core import ParameterSource

    if trace_file is not None and scenario != "trace":
        raise click.UsageError(f"a second argument ({trace_file}) goes with the trace "
                               "scenario only: tdmcore simulate trace TRACE.csv")
    mapping = _column_mapping(columns)
    # a trace replays all its rows unless --jobs says otherwise
    all_rows = ctx.get_parameter_source("n_jobs") is not ParameterSource.COMMANDLINE
    try:
        groups, stem = _cluster_scenarios(scenario, seed, window_s, hours, load, n_jobs,
                                          n_nodes, start, max_duration_s, trace_file,
                                          mapping, all_rows)
    except ValueError as exc:
        raise _option_error(exc) from None
    console = Console()
    applies = {k: v for k, v in ctx.params.items()
               if scenario in SCENARIO_OPTIONS.get(k, (scenario,))}
    with _report_dir(out_dir, f"simulate-{stem}", applies) as report, \
            PlotPool(enabled=not no_plots) as pool:  # forked before any thread starts
        figures = _FigurePlan(stem, report, plot_format, several=len(groups) > 1)
        runs = _run_groups(groups, names, seed, queue, eta,
                           on_group=lambda group, by_policy: figures.group(
                               pool, group, by_policy))
        _print_and_write(console, runs, groups, stem, report, wide)
        if not no_plots:
            figures.summary(pool, runs)
            _finish_plots(pool)
    _announce(console, report)


def _cluster_scenarios(scenario: str, seed: int, window_s: float, hours: float, load: float,
                       n_jobs: int, n_nodes: int, start: int,
                       max_duration_s: float | None, trace_file: Path | None = None,
                       columns: dict[str, str] | None = None, all_rows: bool = False
                       ) -> tuple[dict[str, Any], str]:
    from ..sim import scenarios as sc

    if scenario == "trace":
        from ..sim.traces import read_trace, trace_scenario

        if trace_file is None:
            raise ValueError("trace: give the trace file: tdmcore simulate trace TRACE.csv")
        rows = read_trace(trace_file, columns)
        loaded = trace_scenario(rows, name=trace_file.stem, n_nodes=n_nodes, start=start,
                                n_jobs=None if all_rows else n_jobs, seed=seed,
                                max_duration_s=max_duration_s,
                                notes={"trace": str(trace_file)}, source=str(trace_file))
        return {loaded.name: loaded}, f"trace-{trace_file.stem}"
    if scenario == "metronome-snapshots":
        return dict(sc.metronome_snapshots(window_s)), scenario
    if scenario == "metronome-trace":
        trace = sc.metronome_trace(seed, hours, load)
        return {"trace": trace}, scenario
    if scenario == "philly":
        slice_ = sc.philly(n_jobs, n_nodes, start, seed, max_duration_s)
        return {"philly": slice_}, scenario
    path = Path(scenario)
    if path.suffix.lower() in (".yaml", ".yml", ".json"):
        from ..sim.scenario_file import load_scenario_file

        try:
            loaded = load_scenario_file(path)
        except ValueError as exc:  # name the file (a field's path alone is ambiguous)
            if str(path) in str(exc):
                raise
            raise ValueError(f"{path}: {str(exc).removeprefix('file: ')}") from exc
        return {loaded.name: loaded}, loaded.name
    from ..sim.sweep import SWEEP_ONLY_SCENARIOS

    if scenario in SWEEP_ONLY_SCENARIOS:
        raise ValueError(f"scenario: {scenario!r} is a sweep's scenario: run it with "
                         f"`tdmcore sweep --example {scenario}` or a spec that names it")
    raise ValueError(f"scenario: unknown scenario {scenario!r}"
                     f"{did_you_mean(scenario, (*CLUSTER_SCENARIOS, *OTHER_SCENARIOS))}; "
                     f"choose from {', '.join(CLUSTER_SCENARIOS + OTHER_SCENARIOS)}, "
                     "trace TRACE.csv, "
                     "or give a .yaml/.yml/.json file")


def _column_mapping(pairs: tuple[str, ...]) -> dict[str, str]:
    """``--column FIELD=HEADER`` options as a mapping (checked against the file later)."""
    out: dict[str, str] = {}
    for pair in pairs:
        field, sep, header = pair.partition("=")
        if not sep or not field.strip() or not header.strip():
            raise click.BadParameter(f"expected FIELD=HEADER, got {pair!r}",
                                     param_hint="'--column'")
        out[field.strip()] = header.strip()
    return out


def _policy_factories(specs: list[str], scenario: str) -> dict[str, Any]:
    """``--policies`` entries as label -> a built-in name or a factory of fresh objects.

    An entry ``module:callable`` imports ``module`` (the current folder is searched
    too) and calls ``callable()`` for each run: a policy class, or a function that
    returns a policy object (:class:`tdmcore.framework.Policy`).
    """
    from ..framework import check_policy
    from ..sim.cluster import CLUSTER_POLICIES
    from ..sim.sweep.spec import import_policy

    out: dict[str, Any] = {}
    for spec in specs:
        factory: Any
        if ":" not in spec:
            if spec not in CLUSTER_POLICIES:
                raise click.ClickException(
                    f"--policies: unknown policy {spec!r}{did_you_mean(spec, CLUSTER_POLICIES)}"
                    f" for {scenario}; choose from "
                    f"{', '.join(CLUSTER_POLICIES)}, or give MODULE:CALLABLE")
            label, factory = spec, spec
        else:
            try:
                factory = import_policy(spec)
            except ValueError as exc:
                raise click.ClickException(f"--policies: {exc}") from None
            try:
                made = factory()
            except Exception as exc:  # the user's code (arguments it needs, too): theirs
                raise click.ClickException(f"--policies: {spec}() failed: "
                                           f"{type(exc).__name__}: {exc}") from None
            try:
                label = check_policy(made, f"--policies: {spec}()").name
            except (ValueError, TypeError) as exc:
                raise click.ClickException(str(exc)) from None
        if label in out:
            raise click.ClickException(f"--policies: two policies named {label!r}")
        out[label] = factory
    return out


def _run_groups(groups: dict[str, Any], names: dict[str, Any], seed: int,
                queue: str = "backoff", eta: float | None = None,
                on_group: Any = None) -> dict[str, dict[str, Any]]:
    """Every group under every policy (``names``: label -> name or factory);
    ``eta``: the contention efficiency (None: the calibrated default);
    ``on_group(group, runs_by_policy)`` as each group's runs are complete."""
    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

    from ..sim.cluster import run_cluster, warm_up
    from ..sim.engine.network import CONTENTION_EFFICIENCY

    efficiency = CONTENTION_EFFICIENCY if eta is None else eta

    runs: dict[str, dict[str, Any]] = {}
    first = next(iter(groups.values()))
    with _compiling_kernels(Console(stderr=True)):
        for policy in names.values():  # compile first: decision latencies exclude it
            warm_up(first.sim, first.jobs, policy if isinstance(policy, str) else policy(),
                    seed=seed)
    columns = (TextColumn("{task.description}"), BarColumn(),
               TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn())
    with _progress(*columns) as bar:
        task = bar.add_task("simulating", total=len(groups) * len(names))
        for group, scenario in groups.items():
            runs[group] = {}
            for name, policy in names.items():
                label = f"{group} / {name}"
                bar.update(task, description=label)

                def tick(t_ms: float, label: str = label) -> None:
                    bar.update(task, description=f"{label}: {t_ms / 3.6e6:.2f} h simulated")

                runs[group][name] = run_cluster(
                    scenario.sim, scenario.jobs,
                    policy if isinstance(policy, str) else policy(),  # fresh per run
                    seed=seed, queue=queue, progress=tick,
                    contention_efficiency=efficiency)
                bar.advance(task)
            if on_group is not None:
                on_group(group, runs[group])
    return runs


def _print_and_write(console: Console, runs: dict[str, dict[str, Any]],
                     groups: dict[str, Any], stem: str, report: ReportDir,
                     wide: bool) -> None:
    from ..sim.report import job_rows, summary_rows

    rows = summary_rows(runs)
    jobs = job_rows(runs)
    _write_rows(report, f"simulate-{stem}", rows)
    _write_rows(report, f"simulate-{stem}-jobs", jobs)
    _simulate_table(console, rows, stem, wide)
    for scenario in groups.values():
        console.print(scenario.title, style="dim", highlight=False, markup=False)
    _warn_unfinished(rows, jobs)


def _warn_unfinished(rows: list[dict[str, Any]], jobs: list[dict[str, Any]]) -> None:
    """Say which jobs never finished: their JCT is missing from the table's means."""
    for row in rows:
        if row["finished"] < row["jobs"]:
            names = [j["job"] for j in jobs if j["group"] == row["group"]
                     and j["policy"] == row["policy"] and j["jct_s"] != j["jct_s"]]
            shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5
                                            else "")
            log.warning("%s / %s: %d of %d job(s) never finished (%s): the cluster never "
                        "had room for them, or the run ended first; their JCT is not in "
                        "the means", row["group"], row["policy"],
                        row["jobs"] - row["finished"], row["jobs"], shown)


def _simulate_table(console: Console, rows: list[dict[str, Any]], stem: str,
                    wide: bool) -> None:
    """The comparison table: 80 columns by default, every column with ``wide``.

    JCTs are in hours when the longest is over two hours; every header names its
    unit; ``±`` columns are the change in % (negative = faster).
    """
    from rich import box

    if not console.is_terminal:  # piped or CI: a known width
        console = Console(width=160 if wide else 80, file=console.file)
    finite = [r["jct_s"] for r in rows if r["jct_s"] == r["jct_s"]]
    hours = bool(finite) and max(finite) > 7200.0
    unit, scale = ("h", 1 / 3600.0) if hours else ("s", 1.0)
    several = len({r["group"] for r in rows}) > 1
    # (header, value of a row, digits, shown by default)
    columns: list[tuple[str, Any, int, bool]] = [
        (f"JCT\n{unit}", lambda r: r["jct_s"] * scale, 2 if hours else 1, True),
        ("JCT\n±def %", lambda r: r.get("jct_vs_default_pct", math.nan), 1, True),
        ("JCT\n±ideal %", lambda r: r.get("jct_vs_ideal_pct", math.nan), 1, False),
        ("high\ns/1k it", lambda r: r["per_1000_high_s"], 1, True),
        ("high\n±ideal %", lambda r: r.get("high_vs_ideal_pct", math.nan), 1, True),
        ("low\ns/1k it", lambda r: r["per_1000_low_s"], 1, False),
        ("low\n±def %", lambda r: r.get("low_vs_default_pct", math.nan), 1, True),
        ("Γ", lambda r: r["gamma"], 3, True),
        ("placed on\narrival", lambda r: r["acceptance"], 2, False),
        ("readj", lambda r: r["readjustments"], 0, False),
    ]
    shown = [c for c in columns if wide or c[3]]
    table = Table(title=f"{stem}: ± = change in % vs default / ideal (negative = faster)",
                  box=box.SIMPLE_HEAD, pad_edge=False,
                  show_edge=False, collapse_padding=True)
    if several:
        table.add_column("", justify="left")
    table.add_column("policy", justify="left", no_wrap=True)
    for header, _, _, _ in shown:
        table.add_column(header, justify="right")
    last_group = None
    for row in rows:
        if last_group is not None and row["group"] != last_group:
            table.add_section()
        last_group = row["group"]
        cells = [_num(value(row), digits) if isinstance(value(row), float)
                 else str(value(row)) for _, value, digits, _ in shown]
        table.add_row(*([str(row["group"])] if several else []), str(row["policy"]), *cells)
    console.print(table)


@dataclasses.dataclass(frozen=True)
class _FigurePlan:
    """The figures of a ``simulate`` report and their file names: per group, the
    link utilisation and the shared links' circles (drawn as soon as the group's
    runs are done); for the whole run, JCT and iteration times."""

    stem: str
    report: ReportDir
    fmt: str
    several: bool  # more than one group: the group is in the names and titles

    def group(self, pool: PlotPool, group: str, by_policy: dict[str, Any]) -> None:
        tag = f"-{group}" if self.several else ""
        title = f"{self.stem} {group}" if self.several and group != self.stem else self.stem
        pool.submit("plot_link_utilization",
                    (by_policy, self.report.path(f"{self.stem}{tag}-links.{self.fmt}")),
                    {"title": title})
        for name in ("metronome", *by_policy):  # metronome's plans when it ran
            run = by_policy.get(name)
            if run is not None and run.link_plans:
                pool.submit("plot_shared_links",
                            (run, self.report.path(f"{self.stem}{tag}-circle.{self.fmt}")),
                            {"title": title})
                break

    def summary(self, pool: PlotPool, runs: dict[str, dict[str, Any]]) -> None:
        # the slowest figures, drawn before the groups' figures still waiting
        pool.submit("plot_jct", (runs, self.report.path(f"{self.stem}-jct.{self.fmt}")),
                    {"title": self.stem}, first=True)
        pool.submit("plot_iteration_boxes",
                    (runs, self.report.path(f"{self.stem}-iterations.{self.fmt}")),
                    first=True)


def _finish_plots(pool: PlotPool) -> None:
    """Wait for the figures, with a progress bar on stderr."""
    with _progress() as bar:
        task = bar.add_task("plotting", total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        pool.finish(advance)


def _fmt_psi(value: float | None) -> str:
    if value is None:
        return "-"
    return "inf" if value == float("inf") else f"{value:.2f}"


def _print_plans(console: Console, name: str, title: str, plans: dict[str, LinkPlan],
                 timings: dict[str, float]) -> None:
    first, optimal = plans["first"], plans["optimal"]
    base = first.base
    console.print(title if title.lower().startswith(name.lower()) else f"{name}: {title}",
                  style="bold", highlight=False)
    idle = ", ".join(f"{p.name} +{i:.2f} ms" for p, i in zip(first.pods, base.idle_ms,
                                                              strict=True) if i > 0)
    status = "compatible" if base.compatible else "INCOMPATIBLE"
    console.print(f"base period T = {base.period_ms:.2f} ms, multiples "
                  f"{base.multiples.tolist()}, {status}"
                  + (f", idle injected: {idle}" if idle else ""))
    pods = Table(title=f"pods on the {first.capacity_gbps:g} Gbps link ({first.bins} bins); "
                       "shift in ms (rotation in bins)")
    for col in ("pod", "job", "prio", "period ms", "duty", "Gbps", "first", "optimal"):
        pods.add_column(col, justify="right" if col not in ("pod", "job") else "left")
    rf, ro = first.job_rotations, optimal.job_rotations
    for p in first.pods:
        pods.add_row(p.name, p.job_name, str(p.priority), f"{p.period_ms:g}",
                     f"{p.duty_cycle:.3f}", f"{p.bandwidth_gbps:g}",
                     f"{first.shifts_ms[p.name]:.2f} ({rf[p.job_name]})",
                     f"{optimal.shifts_ms[p.name]:.2f} ({ro[p.job_name]})")
    console.print(pods)
    summary = Table(title="the link: unshifted vs. the scheduler's and the controller's search")
    for col in ("", "unshifted", "first", "optimal"):
        summary.add_column(col, justify="right")
    summary.add_row("score (Eq. 18)", f"{first.unshifted_score:.2f}", f"{first.result.score:.2f}",
                    f"{optimal.result.score:.2f}")
    summary.add_row("perfect", "yes" if first.unshifted_score == 100.0 else "no",
                    "yes" if first.result.perfect else "no",
                    "yes" if optimal.result.perfect else "no")
    summary.add_row("psi, bins (Eq. 9)", "-", "-", _fmt_psi(optimal.result.psi))
    gammas = [_gamma(first, first.unshifted_utilization), _gamma(first, first.utilization),
              _gamma(optimal, optimal.utilization)]
    summary.add_row("link utilization xi", f"{first.unshifted_utilization:.3f}",
                    f"{first.utilization:.3f}", f"{optimal.utilization:.3f}")
    summary.add_row("Gamma (Eq. 5)", *(f"{g:.3f}" for g in gammas))
    summary.add_row("vectors evaluated", "1", str(first.result.evaluated),
                    str(optimal.result.evaluated))
    summary.add_row("time, ms", "-", f"{timings['first']:.2f}", f"{timings['optimal']:.2f}")
    console.print(summary)


def _gamma(plan: LinkPlan, xi: float) -> float:
    return average_bandwidth_utilization([plan.capacity_gbps], [xi])


def _pod_json(p: LinkPod) -> dict[str, Any]:
    return {"name": p.name, "job": p.job_name, "priority": p.priority, "period_ms": p.period_ms,
            "duty_cycle": p.duty_cycle, "bandwidth_gbps": p.bandwidth_gbps}


def _report(plans: dict[str, LinkPlan], timings: dict[str, float]) -> dict[str, Any]:
    first = plans["first"]
    out: dict[str, Any] = {
        "capacity_gbps": first.capacity_gbps,
        "bins": first.bins,
        "base_period_ms": first.base.period_ms,
        "multiples": first.base.multiples.tolist(),
        "idle_ms": first.base.idle_ms.tolist(),
        "compatible": first.base.compatible,
        "pods": [_pod_json(p) for p in first.pods],
        "unshifted": {"score": first.unshifted_score,
                      "link_utilization": first.unshifted_utilization},
    }
    for mode, plan in plans.items():
        out[mode] = {
            "rotations": plan.job_rotations,
            "shifts_ms": plan.shifts_ms,
            "score": plan.result.score,
            "perfect": plan.result.perfect,
            "psi_bins": plan.result.psi if plan.result.psi != float("inf") else "inf",
            "link_utilization": plan.utilization,
            "gamma": _gamma(plan, plan.utilization),
            "evaluated": plan.result.evaluated,
            "time_ms": timings[mode],
        }
    return out


class Terminated(BaseException):
    """SIGTERM arrived: the command unwinds as after Ctrl-C (a ``BaseException``, so
    no ``except Exception`` on the way takes it for an error of its own)."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated


def _catch_sigterm() -> bool:
    """Turn SIGTERM into :class:`Terminated` while the command runs (main thread
    only, and only over the default disposition: an embedding program's own handler
    is left alone); True when the default is to be put back afterwards."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return False
    signal.signal(signal.SIGTERM, _raise_terminated)
    return True


def main(argv: list[str] | None = None) -> None:
    """Console entry point.

    Exit status: 0 on success (and after ``--help``); 2 for a usage error, 1 for bad
    input, each with one ``Error: ...`` line on stderr and no traceback; 130 after
    Ctrl-C and 143 after SIGTERM (the report being written is removed either way);
    70 for an internal error.  A closed stdout (``| head``) does not stop the
    command: the rest of the output is discarded and the report is still written.
    """
    real_stdout = sys.stdout
    sys.stdout = _PipeSafeStdout(real_stdout)
    restore_sigterm = _catch_sigterm()
    try:
        cli.main(args=argv, prog_name="tdmcore", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # bare `tdmcore`: the help
        click.echo(exc.ctx.get_help() if exc.ctx is not None else cli.get_help(
            click.Context(cli, info_name="tdmcore")))
        sys.exit(0)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        print("Error: interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except Terminated:
        print("Error: terminated", file=sys.stderr)
        sys.exit(EXIT_TERMINATED)
    except click.UsageError as exc:
        hint = f" (see: {exc.ctx.command_path} --help)" if exc.ctx is not None else ""
        print(f"Error: {exc.format_message()}{hint}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        print(f"Error: {exc.format_message()}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except PolicyError as exc:  # a user's policy failed: its mistake, named
        if os.environ.get("TDMCORE_DEBUG"):
            raise
        print(f"Error: {exc} (set TDMCORE_DEBUG=1 for the traceback)", file=sys.stderr)
        sys.exit(1)
    except Exception as exc:  # a bug: say so in one line, keep the traceback for debugging
        if os.environ.get("TDMCORE_DEBUG"):
            raise
        print(f"tdmcore: internal error: {type(exc).__name__}: {exc} "
              "(set TDMCORE_DEBUG=1 for the traceback)", file=sys.stderr)
        sys.exit(EXIT_INTERNAL)
    finally:
        if restore_sigterm:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        with contextlib.suppress(BrokenPipeError, ValueError):
            sys.stdout.flush()
        sys.stdout = real_stdout


if __name__ == "__main__":
    main()
