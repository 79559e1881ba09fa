"""``tdmcore example``: print the example scenario file shipped with tdmcore."""

from __future__ import annotations

import click

from ..common import (
    example_path,
)

__all__ = ["example_cmd"]


@click.command("example")
@click.option("--path", "show_path", is_flag=True,
              help="Print where the file is instead of its contents.")
def example_cmd(show_path: bool) -> None:
    """Print the example scenario file shipped with tdmcore.

    Start your own scenario from it: `tdmcore example > my.yaml`, edit, then
    `tdmcore simulate my.yaml`.  `tdmcore simulate --example` runs it as shipped.
    """
    path = example_path()
    click.echo(str(path) if show_path else path.read_text("utf-8"), nl=show_path)
