"""The flow-level network model's event engine (docs/simulator.md), compiled.

The engine itself is the Cython module :mod:`tdmcore.sim.engine._flow` (its
docstring describes the model, the event loop, the in-loop monitor and the
counter-based noise); this module is its import point, with the constants the
Python side reads: job, pod and link field indices, phases, stop reasons and
report outcomes, and the closed-form stretch walkers that share the engine's
noise.
"""

from __future__ import annotations

from ._flow import *  # noqa: F403
from ._flow import (  # noqa: F401  (named for readers and type checkers)
    DONE_GBIT,
    advance,
    flush_links,
    monitor_apply,
    monitor_outcome,
    noise_factor,
    noise_normal,
    rebuild_heap,
    relink,
    schedule,
    stretch_commit,
    stretch_locate,
    stretch_summary,
)
