"""The ``tdmcore`` command group: one module per command (:mod:`tdmcore.app.commands`).

``tdmcore link s1`` interleaves the pods of a shipped link and prints the chosen
rotations, shifts, score and utilization, then draws the traffic circle; ``tdmcore
simulate`` runs every policy side by side on a scenario; ``tdmcore list`` says what
the commands take.  The process around a command (Ctrl-C, SIGTERM, exit status,
one ``Error:`` line) is :mod:`tdmcore.app.lifecycle`, whose :func:`main
<tdmcore.app.lifecycle.main>` is the console script.
"""

from __future__ import annotations

import click

from .commands.calibrate import calibrate_cmd
from .commands.elastic import elastic_cmd
from .commands.example import example_cmd
from .commands.fidelity import fidelity_cmd
from .commands.link import link_cmd
from .commands.listing import list_group, scenarios_cmd
from .commands.oasis import oasis_cmd
from .commands.oasis_ratio import oasis_ratio_cmd
from .commands.simulate import simulate_cmd
from .commands.sweep import sweep_cmd
from .common import LOG_LEVELS, configure_logging

__all__ = ["cli"]


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
    configure_logging(log_level)


for _command in (list_group, scenarios_cmd, link_cmd, fidelity_cmd, calibrate_cmd, oasis_cmd,
                 oasis_ratio_cmd, elastic_cmd, sweep_cmd, example_cmd, simulate_cmd):
    cli.add_command(_command)
