"""Parameter sweeps: a grid of independent simulator runs on Dask (docs/sweeps.md).

``tdmcore sweep SPEC.yaml`` reads a spec (:mod:`.spec`), expands it into tasks,
runs them on a ``dask.distributed`` cluster (a local one by default) or in this
process (:mod:`.execute`), keeps each finished task in a cache keyed by its
parameters and the tdmcore version, and gives one tidy table (:mod:`.output`;
the plots are the command line's, :mod:`tdmcore.app.sweep_plots`).  Shipped specs
reproduce the Metronome paper's sensitivity studies (§IV-D, §IV-E):
:data:`EXAMPLES`.
"""

from __future__ import annotations

from ... import _validation as v
from .execute import Outcome, ResultCache, default_cache_dir, run_tasks
from .output import result_rows, summary_rows
from .spec import RUNS, SweepSpec, Task, load_spec, parse_spec
from .tasks import run_task

__all__ = [
    "EXAMPLES",
    "RUNS",
    "Outcome",
    "ResultCache",
    "SweepSpec",
    "Task",
    "default_cache_dir",
    "example_path",
    "load_spec",
    "parse_spec",
    "result_rows",
    "run_task",
    "run_tasks",
    "summary_rows",
]

#: The shipped specs (``tdmcore sweep --example NAME``): name -> what it reproduces.
EXAMPLES: dict[str, str] = {
    "fig14": "O_T x A_T on the snapshots S1-S5 (Metronome §IV-D, Fig. 14)",
    "monitor-window": "the monitor's window as 10 iterations or about 10 s on S1-S3 (§III-C)",
    "period-gap": "period gaps 35/30/20/10/5/0 ms on S3: G_T and E_T (§IV-D, Fig. 15)",
    "scheduler-time": "scheduler time vs jobs sharing a link (§IV-E, Fig. 16)",
}


def example_path(name: str) -> str:
    """The shipped spec ``name`` (:data:`EXAMPLES`) as a file path (package data)."""
    from importlib import resources

    if not isinstance(name, str) or name not in EXAMPLES:
        raise ValueError(f"example: unknown sweep {name!r}{v.did_you_mean(name, EXAMPLES)}; "
                         f"choose from {', '.join(EXAMPLES)}")
    return str(resources.files("tdmcore").joinpath(f"examples/sweep-{name}.yaml"))
