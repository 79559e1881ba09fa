"""Who may report to the controller: the agent's ServiceAccount token, checked with
TokenReview.

The controller's ``POST /v1/report`` moves cluster state: a report's iteration times
can change a job's observed pattern (written to its PodBandwidth, which then overrides
``spec`` everywhere) and order pauses.  Until issue 40 any pod could post one.  Now
every report carries ``Authorization: Bearer <token>``, a projected ServiceAccount
token of the agent (``agent.yaml``: audience ``tdmcore-controller``, refreshed by the
kubelet), and the controller asks the API server whose it is
(``authentication.k8s.io/v1`` TokenReview, the way kube-apiserver's delegated
authentication and every aggregated API server check a caller):

* no token, or one the API server does not authenticate for the audience -> **401**
  (an answer whose ``audiences`` do not name ours, or that names none, fails closed);
* a token of anyone but the allowed users (by default the ServiceAccount
  ``tdmcore-system/tdmcore-agent``) -> **403**;
* a token bound to a pod (the kubelet's projected tokens are;
  ``authentication.kubernetes.io/pod-name`` in the review's ``extra``) speaks for that
  pod's node only: a report about a pod on another node -> **403**
  (:meth:`ReportAuth.node_of`);
* the API server cannot be asked -> **503** (the agent fails open: training goes on).

**[decision]** A review is remembered for :attr:`ReportAuth.cache_s` (60 s) by the
token's SHA-256, as kube-apiserver's webhook authenticator caches its answers (its
default is 2 minutes); a refused token for 10 s, so a flood of forged reports costs the
API server one review per token and 10 s.  A token is never logged.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from .kube import ApiError, Kube
from .web import HttpError

__all__ = ["AGENT_USER", "AUDIENCE", "Caller", "ReportAuth"]

log = logging.getLogger(__name__)

#: the audience of the agent's projected token (``agent.yaml``)
AUDIENCE = "tdmcore-controller"
#: the user the agent's token authenticates as
AGENT_USER = "system:serviceaccount:tdmcore-system:tdmcore-agent"
#: the TokenReview ``extra`` key naming the pod a bound token belongs to
POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"


@dataclass(frozen=True)
class Caller:
    """An authenticated reporter: its user name and, for a pod-bound token, its pod."""

    user: str
    pod: str | None = None  # namespace/name


@dataclass(frozen=True)
class _Review:
    at: float
    caller: Caller | None  # None: refused
    status: int = 0
    reason: str = ""


class ReportAuth:
    """Authenticates and authorizes the callers of ``/v1/report`` (module docstring).

    Parameters
    ----------
    kube : Kube
        The controller's API client (its ServiceAccount may create TokenReviews:
        ``rbac.yaml``).
    users : collection of str
        The user names allowed to report.
    audience : str
        The audience the token must have been issued for.
    cache_s, refused_cache_s : float
        How long a review is remembered, accepted or refused.
    """

    def __init__(self, kube: Kube, users: Collection[str] = (AGENT_USER,),
                 audience: str = AUDIENCE, *, cache_s: float = 60.0,
                 refused_cache_s: float = 10.0, capacity: int = 1024) -> None:
        if not users:
            raise ValueError("users: at least one user must be allowed to report")
        self.kube = kube.with_timeout(5.0)
        self.users = frozenset(users)
        self.audience = audience
        self.cache_s = cache_s
        self.refused_cache_s = refused_cache_s
        self.capacity = capacity
        self.reviews = 0  # TokenReviews asked (the rest answered from the cache)
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, _Review] = OrderedDict()

    def check(self, authorization: str | None) -> Caller:
        """The caller of a request with this ``Authorization`` header, or
        :class:`HttpError` 401, 403, 503."""
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise HttpError(401, "a report needs Authorization: Bearer <the agent's "
                                 "ServiceAccount token>")
        digest = hashlib.sha256(token.encode()).hexdigest()
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(digest)
        if hit is None or now - hit.at > (self.cache_s if hit.caller else self.refused_cache_s):
            hit = self._review(token, now)
            if hit.status != 503:
                with self._lock:
                    self._cache.pop(digest, None)
                    self._cache[digest] = hit
                    while len(self._cache) > self.capacity:
                        self._cache.popitem(last=False)
        if hit.caller is None:
            raise HttpError(hit.status, hit.reason)
        return hit.caller

    def _review(self, token: str, now: float) -> _Review:
        self.reviews += 1
        try:
            answer = self.kube.create("TokenReview", {
                "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                "spec": {"token": token, "audiences": [self.audience]}})
        except ApiError as exc:
            log.warning("cannot review a reporter's token (answering 503): %s", exc)
            return _Review(now, None, 503, f"cannot check the caller's token now: {exc}")
        status: dict[str, Any] = answer.get("status") or {}
        # an answer that does not say the token is for our audience is a refusal (an
        # authenticator that ignores audiences would accept a token for anyone's)
        audiences = status.get("audiences")
        if not status.get("authenticated") or not isinstance(audiences, list) \
                or self.audience not in audiences:
            why = status.get("error") or ("not authenticated" if not status.get(
                "authenticated") else f"the review names audiences {audiences!r}")
            return _Review(now, None, 401, f"the caller's token was refused by the API "
                                           f"server for audience {self.audience!r}: {why}")
        user = status.get("user") or {}
        name = str(user.get("username") or "")
        if name not in self.users:
            return _Review(now, None, 403, f"{name!r} may not report to the controller "
                                           f"(allowed: {', '.join(sorted(self.users))})")
        pods = (user.get("extra") or {}).get(POD_NAME_EXTRA) or []
        namespace = name.split(":")[2] if name.count(":") == 3 else None
        pod = f"{namespace}/{pods[0]}" if pods and namespace else None
        return _Review(now, Caller(name, pod))

    @staticmethod
    def node_of(caller: Caller, pods: Mapping[str, Mapping[str, Any]]) -> str | None:
        """The node of the caller's own pod (a pod-bound token), if known."""
        if caller.pod is None:
            return None
        pod = pods.get(caller.pod) or {}
        return (pod.get("spec") or {}).get("nodeName") or None
