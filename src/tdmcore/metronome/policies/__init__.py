"""Scheduling policies over the same framework, by name.

``metronome`` is the paper's scheduler; ``metronome-no-phase3`` and
``metronome-no-monitor`` are its ablations (§IV-C: compact rotations instead of the
third stage's optimal ones / no continuous regulation); ``default``, ``diktyo`` and
``exclusive`` are the baselines of §IV-A.  :data:`SUMMARIES` says each in a line
(``tdmcore list policies``).
"""

from __future__ import annotations

from collections.abc import Callable

from ... import _validation as v
from ...framework import Policy
from .default import DefaultPolicy
from .diktyo import DiktyoPolicy
from .exclusive import ExclusivePolicy
from .metronome import LinkReservation, MetronomeConfig, MetronomeCycle, MetronomePolicy

__all__ = [
    "POLICIES",
    "SUMMARIES",
    "DefaultPolicy",
    "DiktyoPolicy",
    "ExclusivePolicy",
    "LinkReservation",
    "MetronomeConfig",
    "MetronomeCycle",
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


#: One line per policy of :data:`POLICIES`, for listings.
SUMMARIES: dict[str, str] = {
    "default": "Kube-scheduler's default, network-unaware (§IV-A De).",
    "diktyo": "Latency to the pod's deployed dependencies: scheduler-plugins' "
              "NetworkOverhead (§IV-A Di).",
    "exclusive": "Bandwidth as an exclusive resource: pods wait rather than share a "
                 "link (§IV-A).",
    "metronome": "The paper's scheduler: traffic patterns interleaved on shared links, "
                 "its controller regulating their phases.",
    "metronome-no-phase3": "Ablation: compact rotations instead of the third stage's "
                           "optimal ones (§IV-C).",
    "metronome-no-monitor": "Ablation: no continuous regulation, so no pauses (§IV-C).",
}


def make_policy(name: str) -> Policy:
    """A fresh policy object by name (see :data:`POLICIES`)."""
    if not isinstance(name, str) or name not in POLICIES:
        raise ValueError(f"name: unknown policy {name!r}{v.did_you_mean(name, POLICIES)}; "
                         f"choose from {', '.join(POLICIES)}")
    return POLICIES[name]()
