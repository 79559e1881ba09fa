"""Extender mode: PodGroup gangs placed whole at Filter, their nodes held until bound.

kube-scheduler places pods one at a time, so an extender alone would bind a gang in
part.  Coscheduling (scheduler-plugins) solves it inside kube-scheduler: PreFilter
turns a gang away while it is incomplete or backing off, Permit holds each member
until ``minMember`` have a node, PostFilter and Unreserve reject the waiting members
together when one fails, and a rejected gang backs off.  The extender cannot hold a
pod at Permit, and holding its bind instead (as it did until 2026-11) cost a web
server thread per waiting member and let gangs that fit alone but not together
reserve part of the room each, release it at their deadline and try again, for tens
of seconds.

**[decision]** Admission, the gang's claim, and back-off (:class:`GangBook`; the
pipeline, :class:`~k8s_bridge.pipeline.Pipeline`, does the placing):

* **Admission at the first member's Filter.**  The whole gang (its pending members,
  at least ``minMember`` less the members already bound) is placed on a copy of the
  state, one member after the other as :meth:`tdmcore.framework.Scheduler.schedule_gang`
  does (Eqs. 11-12), over the nodes kube-scheduler offered for that member.  If the
  gang fits, every member's node is reserved in the model at once: a *claim*.  If it
  does not, nothing is reserved and the gang backs off.
* **Claims.**  A claimed member's Filter keeps its claimed node only, and its bind
  binds it there at once: no bind waits, so no thread is held and no pool caps a
  gang.  The claims of the members not bound within ``--gang-wait-seconds`` are
  released together.
* **Who goes first.**  The gang admitted first holds its claims; a gang whose
  members reach Filter later is placed on what those claims leave, and backs off if
  it does not fit.  kube-scheduler's queue takes pods by priority, then age, so the
  older gang is admitted first, and the others wait for it instead of holding part
  of the room each.
* **Back-off.**  A gang refused for want of room is refused again at once, with
  the same reason (so kube-scheduler's events about it aggregate), for 1, 2, 4, ...
  up to 60 s after its successive refusals, unless room may have been made
  meanwhile (:attr:`ClusterModel.releases <k8s_bridge.cache.ClusterModel.releases>`:
  a placed pod gone, a Node added): then it is tried again at once.  When its
  back-off ends, the requeuer has kube-scheduler retry its members once.
* **Status.**  The PodGroup's ``status`` says where the gang is: ``Pending`` (with
  the reason), ``Scheduling`` (claimed, binding), ``Scheduled`` (``minMember``
  bound), how many members are bound (``scheduled``) and since when the gang was
  first tried (``scheduleStartTime``).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

from tdmcore.framework import ReserveResult

__all__ = ["BACKOFF_BASE_S", "BACKOFF_MAX_S", "OWN_PHASES", "Backoff", "Claim", "GangBook"]

#: A refused gang's back-off: this long after its first refusal, doubling with each
#: further one, at most :data:`BACKOFF_MAX_S`.
BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 60.0

#: PodGroup phases the extender sets (scheduler-plugins' v1alpha1 names); a phase set
#: by someone else (Running, Finished, Failed: what the pods did later) is kept.
OWN_PHASES = ("", "Pending", "Scheduling", "Scheduled")


@dataclass
class Claim:
    """A node reserved in the model at Filter for a pod not bound yet."""

    #: the pod's gang (``namespace/group``); None: one pod's own pick (Filter decides)
    gang: str | None
    node: str
    uid: str | None
    #: release the reservation at this time (monotonic s) unless bound
    deadline: float
    #: the nodes whose NodeBandwidth status its bind writes
    statuses: list[str] = field(default_factory=list)
    #: its Reserve
    result: ReserveResult | None = None


@dataclass
class Backoff:
    """A gang refused for want of room."""

    failures: int
    until: float
    reason: str
    #: :attr:`ClusterModel.releases` at the refusal
    releases: int
    #: the requeuer has had its members retried since ``until``
    announced: bool = False


class GangBook:
    """The claims, back-offs and PodGroup statuses of the gangs (the pipeline's locks
    guard it)."""

    def __init__(self) -> None:
        #: pod key -> its claim
        self.claims: dict[str, Claim] = {}
        #: gang key -> its back-off
        self.backoffs: dict[str, Backoff] = {}
        # gang key -> the status last computed, and the ones not written yet
        self._status: dict[str, dict[str, Any]] = {}
        self._dirty: set[str] = set()
        self._started: dict[str, str] = {}
        #: refusals for want of room so far (a gang in back-off refused again counts)
        self.refusals = 0
        #: gangs admitted so far
        self.admissions = 0
        #: gang key -> the member whose Filter admitted it (kube-scheduler is placing it)
        self.admitted_by: dict[str, str] = {}
        #: gang key -> when it was admitted (monotonic s), until it is bound or released
        self.admitted_at: dict[str, float] = {}

    # ----------------------------------------------------------- back-off
    def blocked(self, gang: str, releases: int, now: float) -> str | None:
        """The reason the gang is still backing off, or None (try it now)."""
        b = self.backoffs.get(gang)
        if b is None or releases != b.releases or now >= b.until:
            return None
        self.refusals += 1
        return b.reason

    def refuse(self, gang: str, reason: str, releases: int, now: float) -> Backoff:
        """Record a refusal: the gang backs off (exponentially)."""
        b = self.backoffs.get(gang)
        failures = 1 if b is None else b.failures + 1
        delay = min(BACKOFF_BASE_S * 2.0 ** (failures - 1), BACKOFF_MAX_S)
        self.backoffs[gang] = out = Backoff(failures, now + delay, reason, releases)
        self.refusals += 1
        return out

    def admit(self, gang: str, by: str, now: float) -> None:
        self.backoffs.pop(gang, None)
        self.admissions += 1
        self.admitted_by[gang] = by
        self.admitted_at.setdefault(gang, now)
        if len(self.admitted_by) > 10_000:
            self.admitted_by.clear()
            self.admitted_at.clear()

    def settled(self, gang: str, now: float) -> float | None:
        """Seconds since the gang was admitted, once: it is bound or released now
        (None if it was not admitted)."""
        at = self.admitted_at.pop(gang, None)
        return None if at is None else now - at

    def due(self, now: float) -> list[str]:
        """The gangs whose back-off has just ended (each once per back-off)."""
        out = []
        for gang, b in self.backoffs.items():
            if not b.announced and now >= b.until:
                b.announced = True
                out.append(gang)
        return out

    # ------------------------------------------------------------- claims
    def gang_claims(self, gang: str) -> list[str]:
        return [k for k, c in self.claims.items() if c.gang == gang]

    def expired(self, now: float) -> list[str]:
        """Keys of the claims past their deadline."""
        return [k for k, c in self.claims.items() if now >= c.deadline]

    # ------------------------------------------------------------- status
    def set_status(self, gang: str, phase: str, scheduled: int, reason: str = "") -> None:
        """The gang's PodGroup status now (written by the requeuer if it changed)."""
        if gang not in self._started:
            self._started[gang] = datetime.datetime.now(datetime.UTC).strftime(
                "%Y-%m-%dT%H:%M:%SZ")
        status = {"phase": phase, "scheduled": scheduled, "reason": reason,
                  "scheduleStartTime": self._started[gang]}
        if self._status.get(gang) != status:
            self._status[gang] = status
            self._dirty.add(gang)

    def take_statuses(self) -> dict[str, dict[str, Any]]:
        """The statuses that changed since the last call."""
        out = {g: dict(self._status[g]) for g in sorted(self._dirty) if g in self._status}
        self._dirty.clear()
        if len(self._status) > 10_000:  # forget the gangs long gone
            self._status.clear()
            self._started.clear()
        return out

    def status(self, gang: str) -> dict[str, Any] | None:
        return self._status.get(gang)
