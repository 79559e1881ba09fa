"""Leader election over a coordination.k8s.io Lease, as client-go's ``leaderelection``.

Replicas of the controller (or of the standalone scheduler) run
:func:`start_election`; the returned :class:`Election`'s ``leading`` event is set
while this replica holds the Lease.

Semantics (client-go's, which kube-scheduler and kube-controller-manager use):

* a candidate takes the Lease when it does not exist, has no holder, or its holder
  has not renewed it for ``leaseDurationSeconds`` -- measured on the candidate's own
  monotonic clock from when it last saw the record change, so clock skew between
  nodes does not matter; taking it over sets ``acquireTime`` and increments
  ``leaseTransitions``;
* every write is a PUT carrying the ``resourceVersion`` read (409: someone else won);
* the leader renews every ``retry_s``; a failed renewal (API unreachable, 5xx,
  conflict) is retried every ``retry_s``, and leadership is given up only when no
  renewal has succeeded for ``renew_deadline_s`` -- before any other replica may
  take the Lease (``lease_s`` > ``renew_deadline_s``);
* :meth:`Election.stop` releases a held Lease (empty holder), so a standby takes
  over at its next retry instead of after the lease duration.

**[decision]** Our own loop instead of the official client's
``kubernetes.leaderelection``: that one gave up leadership on the first failed call
(a connection error escapes its renew loop), never incremented ``leaseTransitions``
and logs at INFO on every renewal.  Logging here: INFO when leadership is won or
released, WARNING once when the API starts failing (one line, no traceback) and when
leadership is lost, INFO when the API answers again; per-attempt details at DEBUG.
An unexpected error (not an API error: an answer that is not a Lease, say) is a
failed attempt too, logged once with its traceback; whatever ends the loop clears
``leading``.
"""

from __future__ import annotations

import datetime
import logging
import os
import socket
import threading
import time
from typing import Any

from .kube import ApiError, Conflict, Kube, NotFound

__all__ = ["Election", "default_identity", "start_election"]

log = logging.getLogger(__name__)


def default_identity() -> str:
    """The pod's name (``POD_NAME``, set from the downward API) or the host name."""
    return os.environ.get("POD_NAME") or socket.gethostname()


def _now() -> str:
    """A MicroTime (RFC 3339, microseconds, UTC)."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Election:
    """A running campaign: :attr:`leading` is set while this replica holds the Lease."""

    def __init__(self, kube: Kube, name: str, namespace: str, identity: str, *,
                 lease_s: int, renew_deadline_s: int, retry_s: int) -> None:
        # each call bounded by the retry period (a hung API server must not hold a
        # renewal past the renew deadline)
        self.kube = kube.with_timeout(float(retry_s))
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_s = lease_s
        self.renew_deadline_s = renew_deadline_s
        self.retry_s = retry_s
        self.leading = threading.Event()
        self._stopped = threading.Event()
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._lease: dict[str, Any] | None = None  # the last one read or written
        self._thread = threading.Thread(target=self._run, name="leader-election",
                                        daemon=True)

    # ------------------------------------------------------------------ api
    def start(self) -> Election:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop campaigning; release the Lease if held; stop leading."""
        self._stopped.set()
        self._thread.join(timeout_s)
        self.leading.clear()

    # ----------------------------------------------------------------- loop
    def _run(self) -> None:
        try:
            self._campaign()
        finally:  # however the loop ends, this replica no longer knows it leads
            if self.leading.is_set():
                self.leading.clear()
                self._release()

    def _campaign(self) -> None:
        failing = False
        last_renew = 0.0
        while not self._stopped.is_set():
            error: Exception | None = None
            try:
                ok = self._try_acquire_or_renew()
            except ApiError as exc:
                ok, error = False, exc
            except Exception as exc:  # noqa: BLE001 - e.g. an answer not shaped as a Lease
                # a failed attempt like any other, not the end of the loop: a dead
                # loop would keep ``leading`` set while the Lease expires and another
                # replica takes it (two leaders); the one WARNING of the spell carries
                # the traceback
                ok, error = False, exc
                if not failing:
                    failing = True
                    log.warning("lease %s/%s: unexpected error (retrying every %d s)",
                                self.namespace, self.name, self.retry_s, exc_info=True)
            now = time.monotonic()
            if error is None and failing:
                failing = False
                log.info("lease %s/%s: the API server answers again", self.namespace,
                         self.name)
            elif error is not None:
                if not failing:
                    failing = True
                    log.warning("lease %s/%s: %s (retrying every %d s)", self.namespace,
                                self.name, error, self.retry_s)
                else:
                    log.debug("lease %s/%s: %s", self.namespace, self.name, error)
            if ok:
                last_renew = now
                if not self.leading.is_set():
                    log.info("%s now leads (lease %s/%s)", self.identity, self.namespace,
                             self.name)
                    self.leading.set()
            elif self.leading.is_set() and now - last_renew >= self.renew_deadline_s:
                self.leading.clear()
                log.warning("%s lost the lease %s/%s: no renewal for %d s", self.identity,
                            self.namespace, self.name, self.renew_deadline_s)
            self._stopped.wait(self.retry_s)

    def _observe(self, spec: dict[str, Any]) -> None:
        record = (spec.get("holderIdentity"), spec.get("renewTime"),
                  spec.get("acquireTime"), spec.get("leaseDurationSeconds"),
                  spec.get("leaseTransitions"))
        if record != self._observed:
            self._observed = record
            self._observed_at = time.monotonic()

    def _try_acquire_or_renew(self) -> bool:
        now = _now()
        try:
            lease = self.kube.get("Lease", self.name, self.namespace)
        except NotFound:
            spec = {"holderIdentity": self.identity, "leaseDurationSeconds": self.lease_s,
                    "acquireTime": now, "renewTime": now, "leaseTransitions": 0}
            try:
                created = self.kube.create("Lease", {
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": spec}, self.namespace)
            except Conflict:
                return False  # another replica created it first
            self._observe(created.get("spec") or {})
            self._lease = created
            return True
        spec = dict(lease.get("spec") or {})
        self._observe(spec)
        holder = spec.get("holderIdentity") or ""
        duration = spec.get("leaseDurationSeconds")
        duration = duration if isinstance(duration, int) and duration > 0 else self.lease_s
        if holder and holder != self.identity \
                and time.monotonic() < self._observed_at + duration:
            return False  # held by another replica that renews it
        if holder != self.identity:
            spec["acquireTime"] = now
            transitions = spec.get("leaseTransitions")
            spec["leaseTransitions"] = (transitions if isinstance(transitions, int) else 0) + 1
        spec.update(holderIdentity=self.identity, leaseDurationSeconds=self.lease_s,
                    renewTime=now)
        body = dict(lease)
        body["spec"] = spec
        try:
            written = self.kube.replace("Lease", body)  # carries the resourceVersion read
        except Conflict:
            return False
        self._observe(written.get("spec") or {})
        self._lease = written
        return True

    def _release(self) -> None:
        """Give a held Lease up (empty holder), so that a standby need not wait."""
        lease = self._lease
        if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
            return
        body = dict(lease)
        body["spec"] = {**(lease.get("spec") or {}), "holderIdentity": "",
                        "leaseDurationSeconds": 1, "renewTime": _now()}
        try:
            self.kube.replace("Lease", body)
            log.info("%s released the lease %s/%s", self.identity, self.namespace, self.name)
        except Exception as exc:  # noqa: BLE001 - it expires on its own
            log.warning("releasing the lease %s/%s failed: %s", self.namespace, self.name, exc)


def start_election(kube: Kube, name: str, namespace: str, identity: str, *,
                   lease_s: int = 15, renew_deadline_s: int = 10, retry_s: int = 2
                   ) -> Election:
    """Campaign for Lease ``namespace/name`` in a daemon thread.

    Raises ValueError for timings the election would reject.
    """
    if not lease_s > renew_deadline_s > 1.2 * retry_s >= 1.2:
        raise ValueError("lease_s, renew_deadline_s, retry_s: need lease > renew deadline "
                         "> 1.2 x retry >= 1.2 (seconds)")
    return Election(kube, name, namespace, identity, lease_s=lease_s,
                    renew_deadline_s=renew_deadline_s, retry_s=retry_s).start()
