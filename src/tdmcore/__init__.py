"""tdmcore: time-division multiplexing of distributed-training traffic on shared links.

The stable public API (docs/api/index.md) is re-exported here; everything else is private
or lives in its own module.
"""

from __future__ import annotations

from .metronome.base_period import BasePeriod, unify_periods
from .metronome.rotation import RotationResult, search_rotations
from .metronome.scoring import average_bandwidth_utilization, excess, link_utilization, score
from .metronome.traffic import (
    CircleRows,
    comm_midpoints,
    discretize,
    discretize_unified,
    rotations_to_shifts,
)

__version__ = "0.1.0"

__all__ = [
    "BasePeriod",
    "CircleRows",
    "RotationResult",
    "average_bandwidth_utilization",
    "comm_midpoints",
    "discretize",
    "discretize_unified",
    "excess",
    "link_utilization",
    "rotations_to_shifts",
    "score",
    "search_rotations",
    "unify_periods",
]
