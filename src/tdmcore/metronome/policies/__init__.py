"""Scheduling policies over the same framework, by name.

``metronome`` is the paper's scheduler; ``metronome-no-phase3`` and
``metronome-no-monitor`` are its ablations (the controller skips the offline
recalculation / the continuous regulation; the scheduler itself is the same);
``default``, ``diktyo`` and ``exclusive`` are the baselines of §IV-A.
"""

from __future__ import annotations

from collections.abc import Callable

from ... import _validation as v
from ...framework import Policy
from .default import DefaultPolicy
from .diktyo import DiktyoPolicy
from .exclusive import ExclusivePolicy
from .metronome import MetronomeConfig, MetronomePolicy

__all__ = [
    "POLICIES",
    "DefaultPolicy",
    "DiktyoPolicy",
    "ExclusivePolicy",
    "MetronomeConfig",
    "MetronomePolicy",
    "make_policy",
]

POLICIES: dict[str, Callable[[], Policy]] = {
    "default": DefaultPolicy,
    "diktyo": DiktyoPolicy,
    "exclusive": ExclusivePolicy,
    "metronome": lambda: MetronomePolicy(MetronomeConfig()),
    "metronome-no-phase3": lambda: MetronomePolicy(MetronomeConfig(phase_three=False),
                                                   name="metronome-no-phase3"),
    "metronome-no-monitor": lambda: MetronomePolicy(MetronomeConfig(monitor=False),
                                                    name="metronome-no-monitor"),
}


def make_policy(name: str) -> Policy:
    """A fresh policy object by name (see :data:`POLICIES`)."""
    if not isinstance(name, str) or name not in POLICIES:
        raise ValueError(f"name: unknown policy {name!r}{v.did_you_mean(name, POLICIES)}; "
                         f"choose from {', '.join(POLICIES)}")
    return POLICIES[name]()
