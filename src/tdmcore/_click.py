"""Command-line option types shared by the two front doors (``tdmcore``, ``tdmcore-bridge``).

click's ``FloatRange`` lets ``nan`` and ``inf`` through (every comparison with NaN is
false), and an option read as NaN silently turns a check such as ``wait > 0`` off;
:class:`FiniteFloat` is the one rule both command lines use.
"""

from __future__ import annotations

import math
from typing import Any

import click

__all__ = ["FiniteFloat"]


class FiniteFloat(click.FloatRange):
    """A float option in a range that also refuses NaN and infinities."""

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number
