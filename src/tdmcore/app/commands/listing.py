"""``tdmcore list``: the scenarios, policies and models the commands take.

Every row comes from the simulator's registry (:mod:`tdmcore.sim.registry`) and
model table (:mod:`tdmcore.sim.models`): a scenario or policy added there is
listed here.
"""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = ["list_group", "scenarios_cmd"]

#: What each kind of policy is run by, as the listing says it.
_POLICY_USERS = {"cluster": "simulate (cluster scenarios), sweep",
                 "elastic": "simulate dragon-testbed, elastic",
                 "admission": "simulate oasis, oasis"}


def scenario_rows() -> list[tuple[str, str, str]]:
    """(name, commands, title) of every scenario a command takes by name."""
    from ...sim.registry import SCENARIOS, link_entries

    rows = []
    for entry in (*SCENARIOS.values(), *link_entries().values()):
        used = ", ".join(f"tdmcore {c}" for c in entry.commands)
        rows.append((entry.name, used, entry.title))
    return rows


def policy_rows() -> list[tuple[str, str, str]]:
    """(name, commands, summary) of every policy a command takes by name."""
    from ...sim.registry import NAMED_POLICIES

    return [(p.name, _POLICY_USERS[p.kind], p.summary) for p in NAMED_POLICIES.values()]


def model_rows() -> list[tuple[str, str, str]]:
    """(model, other names, where its period comes from) of the 13 models."""
    from ...sim.models import known_names, model_pattern

    rows = []
    for model, others in known_names().items():
        source = model_pattern(model, 2).sources["period_ms"]
        rows.append((model, ", ".join(others), source))
    return rows


def _print_listing(title: str, columns: tuple[str, str, str],
                   rows: list[tuple[str, str, str]]) -> None:
    table = Table(title=title)
    for col in columns:
        table.add_column(col)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))  # "[decision]" is text, not markup
    Console().print(table)


@click.group("list")
def list_group() -> None:
    """List what the commands accept: scenarios, policies or models."""


@list_group.command("scenarios")
def list_scenarios_cmd() -> None:
    """Every scenario and the commands that run it."""
    _print_listing("scenarios", ("name", "used by", "what"), scenario_rows())


@list_group.command("policies")
def list_policies_cmd() -> None:
    """Every policy and the commands that take it (--policies)."""
    _print_listing("policies", ("name", "used by", "what"), policy_rows())


@list_group.command("models")
def list_models_cmd() -> None:
    """The 13 models a trace or scenario file may name, with the other names
    tdmcore takes for them (any case and separators: gpt2 is GPT-2)."""
    _print_listing("models (any case or separators; period at 2 workers)",
                   ("model", "also", "period from"), model_rows())


@click.command("scenarios", hidden=True)
@click.pass_context
def scenarios_cmd(ctx: click.Context) -> None:
    """The same as `tdmcore list scenarios`."""
    ctx.invoke(list_scenarios_cmd)
