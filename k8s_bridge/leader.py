"""Leader election over a coordination.k8s.io Lease (the official client's).

Replicas of the controller (or of the standalone scheduler) run
:func:`start_election`; the returned :class:`Election`'s ``leading`` event is set
while this replica holds the Lease.  The election itself is the official client's
``kubernetes.leaderelection`` (acquire, renew before ``renew_deadline_s``, give up
when renewal fails); this module wires it to the bridge's API client, keeps
campaigning after a lost term and can stop.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from typing import Any

import kubernetes
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from .kube import Kube

__all__ = ["Election", "default_identity", "start_election"]

log = logging.getLogger(__name__)


def default_identity() -> str:
    """The pod's name (``POD_NAME``, set from the downward API) or the host name."""
    return os.environ.get("POD_NAME") or socket.gethostname()


class _Stopped(Exception):
    """Raised inside the election loop once :meth:`Election.stop` was called."""


class _Lock(LeaseLock):
    """The client's LeaseLock over our ApiClient, which can end the election loop
    (the library's loop has no stop of its own)."""

    def __init__(self, kube: Kube, name: str, namespace: str, identity: str,
                 stopped: threading.Event) -> None:
        super().__init__(name, namespace, identity)
        self.api_instance = kubernetes.client.CoordinationV1Api(kube.api_client)
        self._stopped = stopped

    def get(self, name: str, namespace: str) -> Any:
        if self._stopped.is_set():
            raise _Stopped()
        return super().get(name, namespace)


class Election:
    """A running campaign: :attr:`leading` is set while this replica holds the Lease."""

    def __init__(self, leading: threading.Event, stopped: threading.Event,
                 thread: threading.Thread) -> None:
        self.leading = leading
        self._stopped = stopped
        self._thread = thread

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop campaigning (at the next renewal or retry) and stop leading."""
        self._stopped.set()
        self.leading.clear()
        self._thread.join(timeout_s)


def start_election(kube: Kube, name: str, namespace: str, identity: str, *,
                   lease_s: int = 15, renew_deadline_s: int = 10, retry_s: int = 2
                   ) -> Election:
    """Campaign for Lease ``namespace/name`` in a daemon thread.

    Raises ValueError for timings the election would reject.
    """
    if not lease_s > renew_deadline_s > 1.2 * retry_s >= 1.2:
        raise ValueError("lease_s, renew_deadline_s, retry_s: need lease > renew deadline "
                         "> 1.2 x retry >= 1.2 (seconds)")
    leading = threading.Event()
    stopped = threading.Event()
    lock = _Lock(kube, name, namespace, identity, stopped)
    config = electionconfig.Config(lock, lease_duration=lease_s,
                                   renew_deadline=renew_deadline_s, retry_period=retry_s,
                                   onstarted_leading=leading.set,
                                   onstopped_leading=leading.clear)

    def campaign() -> None:
        while not stopped.is_set():
            try:
                leaderelection.LeaderElection(config).run()
            except _Stopped:
                break
            except Exception:  # the API was unreachable: campaign again
                log.exception("leader election failed")
            if leading.is_set():
                log.warning("%s lost the lease %s/%s", identity, namespace, name)
            leading.clear()
            stopped.wait(retry_s)
        leading.clear()

    thread = threading.Thread(target=campaign, name="leader-election", daemon=True)
    thread.start()
    return Election(leading, stopped, thread)
