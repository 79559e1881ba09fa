"""Test helpers shared by the slotted-policy tests."""

from __future__ import annotations

from tdmcore.oasis.admission import SlotDecision


class Recorder:
    """Wraps a policy; keeps each slot's view and a copy of its allocations."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.name = inner.name

    def reset(self, cluster, jobs) -> None:
        self.views, self.runs, self.rejects = [], [], []
        self.inner.reset(cluster, jobs)

    def step(self, view) -> SlotDecision:
        decision = self.inner.step(view)
        self.views.append(view)
        self.runs.append({i: (a.workers.copy(), a.ps.copy()) for i, a in decision.run.items()})
        self.rejects.append(dict(decision.reject))
        return decision

    def workers(self, i: int) -> list[int]:
        """Job i's worker count in every slot (0 when it does not run)."""
        return [int(r[i][0].sum()) if i in r else 0 for r in self.runs]
