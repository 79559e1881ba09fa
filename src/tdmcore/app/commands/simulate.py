"""``tdmcore simulate``: every applicable policy side by side on a scenario.

The scenarios and policies it takes are the simulator's registry
(:mod:`tdmcore.sim.registry`): a scenario's parameters are set by the options of the
same name (``--window`` sets ``window_s``, ``--jobs`` ``n_jobs``, ...), an option
no parameter of the chosen scenario takes is a usage error, and ``--help`` lists
what the registry holds.  ``dragon-testbed`` and ``oasis`` are handed to ``tdmcore
elastic`` and ``tdmcore oasis``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.console import Console

from ..._click import FiniteFloat
from ..._validation import MAX_SEED, did_you_mean
from ...sim.engine.network import MIN_CONTENTION_EFFICIENCY
from ...sim.policies import import_policy
from ...sim.registry import (
    CLUSTER_POLICIES,
    SCENARIO_FILE_SUFFIXES,
    SCENARIOS,
    ScenarioSource,
    file_source,
    named_source,
    trace_source,
)
from ...sim.scenarios import MAX_WINDOW_S, MIN_WINDOW_S, PHILLY_CLI_START
from ...sim.traces import TIME_UNITS, TRACE_FIELDS
from ..common import (
    OutDir,
    announce,
    compiling_kernels,
    csv_list,
    example_path,
    given_flag,
    option_error,
    progress,
    report_dir,
)
from ..plot_pool import PlotPool
from ..simulate_output import FigurePlan, finish_plots, print_and_write
from .elastic import elastic_cmd
from .oasis import oasis_cmd

__all__ = ["simulate_cmd"]

#: The options that say how to read a trace (not parameters of its scenario).
TRACE_OPTIONS = ("columns", "time_unit")
#: The options of `tdmcore simulate` that only the cluster simulator takes (not
#: dragon-testbed or oasis, which run other simulators).
CLUSTER_ONLY_OPTIONS: tuple[str, ...] = ("queue", "eta", "wide", "plot_format")
#: What runs the scenarios of another simulator: command and its arguments.
OTHER_SIMULATORS: dict[str, tuple[click.Command, tuple[dict[str, Any], ...]]] = {
    "elastic": (elastic_cmd, ({"workload": "table1"}, {"workload": "poisson"})),
    "oasis": (oasis_cmd, ({},)),
}
#: ``--start`` when not given: philly's busy slice (its first jobs run for days).
DEFAULT_START = {"philly": PHILLY_CLI_START}


def _simulated() -> list[Any]:
    """The registry's entries that `tdmcore simulate` runs."""
    return [e for e in SCENARIOS.values() if "simulate" in e.commands]


def _takers(option: str) -> list[str]:
    """The scenarios an option of `tdmcore simulate` applies to (by the registry)."""
    return [e.name for e in _simulated()
            if option in e.parameters() or (option in TRACE_OPTIONS and e.kind == "trace")]


def scenario_options(command: click.Command) -> dict[str, tuple[str, ...]]:
    """Option -> the scenarios it applies to, for every option of ``command`` that
    sets a scenario's parameter or a trace's reading (the registry decides)."""
    out = {}
    for param in command.params:
        takers = _takers(str(param.name))
        if takers:
            out[str(param.name)] = tuple(takers)
    return out


class _SimulateCommand(click.Command):
    """`simulate --help` ends with the scenarios and policies it accepts (the
    registry's)."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Scenarios"):
            formatter.write_dl([*((e.name, e.title) for e in _simulated()),
                                ("FILE.yaml|FILE.json", "your own scenario file "
                                 "(`tdmcore example` prints one)")])
        with formatter.section("Policies (cluster scenarios; the others: "
                               "`tdmcore list policies`)"):
            line = ""
            for name in CLUSTER_POLICIES:  # wrap between names, never inside one
                if line and len(line) + len(name) + 2 > formatter.width - 4:
                    formatter.write_text(line + ",")
                    line = ""
                line = f"{line}, {name}" if line else name
            formatter.write_text(line)


def _refuse_options_that_do_not_apply(ctx: click.Context, scenario: str, kind: str) -> None:
    """An option given for another scenario is a usage error, not silently ignored."""
    shown = Path(scenario).name
    for name, takers in scenario_options(ctx.command).items():
        flag = None if scenario in takers else given_flag(ctx, [name])
        if flag is not None:
            raise click.UsageError(f"{flag} applies to {' and '.join(takers)} only, not to "
                                   f"{shown}")
    flag = given_flag(ctx, CLUSTER_ONLY_OPTIONS) if kind in OTHER_SIMULATORS else None
    if flag is not None:
        cluster = [e.name for e in _simulated() if e.kind not in OTHER_SIMULATORS]
        raise click.UsageError(f"{flag} applies to the cluster scenarios "
                               f"({', '.join(cluster)}) and scenario files only, not to "
                               f"{scenario}")


@click.command("simulate", cls=_SimulateCommand)
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
              help="trace: the CSV header holding a field (repeat): "
                   f"{', '.join(TRACE_FIELDS)}.")
@click.option("--time-unit", type=click.Choice(list(TIME_UNITS)), default="s",
              show_default=True,
              help="trace: the unit of numeric submit times and durations (Muri's "
                   "traces: ms).")
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
                 time_unit: str, plot_format: str, queue: str, eta: float | None,
                 wide: bool) -> None:
    """Run every applicable policy side by side on a scenario and write the report.

    SCENARIO: a name below (`tdmcore list scenarios`), `trace TRACE.csv` (your own
    trace), or a YAML/JSON scenario file (`tdmcore example` prints one; --example
    runs it).

    Prints one row per policy with its change relative to default and to ideal
    (negative = faster), and writes simulate-<name>.csv/.json (the table),
    simulate-<name>-jobs.csv/.json (every job) and plots to --out.  dragon-testbed
    and oasis run other simulators and write their reports instead: those of
    `tdmcore elastic table1` and `tdmcore elastic poisson`, and of `tdmcore oasis`.
    """
    if example == (scenario is not None):
        raise click.UsageError("give exactly one of SCENARIO or --example")
    if scenario is None:
        scenario = str(example_path())
    is_file = Path(scenario).suffix.lower() in SCENARIO_FILE_SUFFIXES
    entry = None if is_file else SCENARIOS.get(scenario)
    kind = "file" if is_file else entry.kind if entry is not None else ""
    _refuse_options_that_do_not_apply(ctx, scenario, kind)
    if trace_file is not None and kind != "trace":
        raise click.UsageError(f"a second argument ({trace_file}) goes with the trace "
                               "scenario only: tdmcore simulate trace TRACE.csv")
    if start is None:  # the slice the run takes, in its run record too
        start = ctx.params["start"] = DEFAULT_START.get(scenario, 0)
    if kind in OTHER_SIMULATORS:
        command, invocations = OTHER_SIMULATORS[kind]
        for args in invocations:
            kwargs: dict[str, Any] = {**args, "seed": seed, "out_dir": out_dir}
            if policies is not None:
                kwargs["policies"] = policies
            ctx.invoke(command, **kwargs)
        return
    source = _source(scenario, is_file, trace_file, _column_mapping(columns), time_unit)
    specs = list(CLUSTER_POLICIES) if policies is None else csv_list(policies, str,
                                                                     "--policies")
    if not specs:
        raise click.ClickException("--policies: name at least one policy")
    names = _policy_factories(specs, Path(scenario).name)
    # the parameters the command line gives; the others keep the builder's defaults
    # (a trace replays all its rows unless --jobs says otherwise), but philly's start
    given = [k for k in source.parameters() if k in ctx.params and (
        given_flag(ctx, [k]) is not None or (k == "start" and scenario in DEFAULT_START))]
    parameters = {k: ctx.params[k] for k in given}
    try:
        groups = source.build(seed, **parameters)
    except ValueError as exc:
        raise _build_error(scenario, source, exc) from None
    stem = (f"trace-{Path(source.path).stem}" if kind == "trace"
            else next(iter(groups)) if kind == "file" else scenario)
    console = Console()
    applies = {k: v for k, v in ctx.params.items()  # the run record: what ran
               if scenario in scenario_options(ctx.command).get(k, (scenario,))}
    if source.entry is not None:
        applies.update({k: v for k, v in source.entry.defaults().items() if k in applies},
                       **parameters)
    with report_dir(out_dir, f"simulate-{stem}", applies) as report, \
            PlotPool(enabled=not no_plots) as pool:  # forked before any thread starts
        figures = FigurePlan(stem, report, plot_format, several=len(groups) > 1)
        runs = _run_groups(groups, names, seed, queue, eta,
                           on_group=lambda group, by_policy: figures.group(
                               pool, group, by_policy))
        print_and_write(console, runs, groups, stem, report, wide)
        if not no_plots:
            figures.summary(pool, runs)
            finish_plots(pool)
    announce(console, report)


#: What a trace's reading errors name (the CLI's argument and options).
_TRACE_NAMES = {"trace": "TRACE.csv", "columns": "--column", "time_unit": "--time-unit"}


def _source(scenario: str, is_file: bool, trace_file: Path | None,
            columns: dict[str, str], time_unit: str) -> ScenarioSource:
    """The run's scenario from the registry: a name, a scenario file, a trace."""
    try:
        if is_file:
            return file_source(scenario, where=scenario)
        if scenario == "trace":
            if trace_file is None:
                raise click.UsageError("give the trace file: tdmcore simulate trace "
                                       "TRACE.csv")
            return trace_source(trace_file, columns, time_unit, where="")
        return named_source(scenario, commands=("simulate",), where="SCENARIO")
    except ValueError as exc:
        head, sep, rest = str(exc).partition(": ")
        flag = _TRACE_NAMES.get(head.split(".")[0]) if sep else None
        raise click.ClickException(f"{flag}: {rest}" if flag else str(exc)) from None


def _build_error(scenario: str, source: ScenarioSource,
                 exc: ValueError) -> click.ClickException:
    """A builder's error as one line: a file's names the file as given (a field's
    path alone is ambiguous), a parameter's the option that sets it."""
    text = str(exc)
    if source.name == "file":
        text = text.replace(source.path, scenario)
        if scenario in text:
            return click.ClickException(text)
        return click.ClickException(f"{scenario}: {text.removeprefix('file: ')}")
    return option_error(exc)


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
    from ...framework import check_policy

    out: dict[str, Any] = {}
    for spec in specs:
        factory: Any
        if ":" not in spec:
            if spec not in CLUSTER_POLICIES:
                raise click.ClickException(
                    f"--policies: unknown policy {spec!r}{did_you_mean(spec, CLUSTER_POLICIES)}"
                    f" for {scenario}; choose from "
                    f"{', '.join(CLUSTER_POLICIES)}, or give MODULE:CALLABLE "
                    "(`tdmcore list policies`)")
            label, factory = spec, spec
        else:
            try:
                factory = import_policy(spec)
            except ValueError as exc:
                raise click.ClickException(f"--policies: {exc}") from None
            try:
                made = factory()
            except (Exception, SystemExit) as exc:  # the user's code: any error is theirs
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

    from ...sim.cluster import run_cluster, warm_up
    from ...sim.engine.network import CONTENTION_EFFICIENCY

    efficiency = CONTENTION_EFFICIENCY if eta is None else eta

    runs: dict[str, dict[str, Any]] = {}
    first = next(iter(groups.values()))
    with compiling_kernels(Console(stderr=True)):
        for policy in names.values():  # compile first: decision latencies exclude it
            warm_up(first.sim, first.jobs, policy if isinstance(policy, str) else policy(),
                    seed=seed)
    columns = (TextColumn("{task.description}"), BarColumn(),
               TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn())
    with progress(*columns) as bar:
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
