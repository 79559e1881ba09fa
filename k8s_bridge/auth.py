"""Who may report to the controller: the agent that relays a report and the training
pod that sent it, each proven by its own ServiceAccount token, checked with TokenReview.

The controller's ``POST /v1/report`` moves cluster state: a report's iteration times
can change a job's observed pattern (written to its PodBandwidth, which then overrides
``spec`` everywhere) and order pauses.  Until issue 40 any pod could post one; then
the agent's token alone was asked for, and since the agent relays whatever reaches
its hostPort, any pod on a GPU node could still report for any pod of that node.  Now
a report carries two projected ServiceAccount tokens, both for the audience
``tdmcore-controller`` (which the API server does not accept for itself), refreshed
by the kubelet, and the controller asks the API server whose each is
(``authentication.k8s.io/v1`` TokenReview, the way kube-apiserver's delegated
authentication and every aggregated API server check a caller):

* ``Authorization: Bearer``: **the agent's** token (``agent.yaml``).  None, or one
  the API server does not authenticate for the audience -> **401** (an answer whose
  ``audiences`` do not name ours, or that names none, fails closed); a token of anyone
  but the allowed users (by default the ServiceAccount ``tdmcore-system/tdmcore-agent``)
  -> **403**; a pod-bound token (``authentication.kubernetes.io/pod-name`` in the
  review's ``extra``) speaks for its pod's node only: a report about a pod on another
  node -> **403** (:meth:`ReportAuth.node_of`).
* :data:`POD_AUTHORIZATION` (``X-Tdmcore-Pod-Authorization: Bearer``): **the
  training pod's** own token, which the hook reads from its projected volume and the
  agent passes on unchanged (:meth:`ReportAuth.check_pod`).  It must be bound to a
  pod, and that pod -- its namespace (the ServiceAccount's), name, and UID where the
  controller knows the pod -- must be the report's; a report about another pod ->
  **403**; none, or one not authenticated -> **401**.  **[decision]** A report
  without it (a hook older than 2026-11-28, or one without ``TDMCORE_TOKEN_FILE``) is
  refused, 401, and the controller logs the refusal once per pod: the pod trains on,
  unregulated, and its hook drops the report without backing off.
* the API server cannot be asked -> **503** (the agent fails open: training goes on).

**[decision]** A review is remembered for :attr:`ReportAuth.cache_s` (60 s) by the
token's SHA-256, as kube-apiserver's webhook authenticator caches its answers (its
default is 2 minutes); a refused token for 10 s, so a flood of forged reports costs the
API server one review per token and 10 s.  What a review proved (user, pod) is
remembered; whom it allows is checked on every call.  A token is never logged.
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

from .api import POD_AUTHORIZATION
from .kube import ApiError, Kube
from .web import HttpError

__all__ = ["AGENT_USER", "AUDIENCE", "POD_AUTHORIZATION", "Caller", "ReportAuth"]

log = logging.getLogger(__name__)

#: the audience of the agent's projected token (``agent.yaml``)
AUDIENCE = "tdmcore-controller"
#: the user the agent's token authenticates as
AGENT_USER = "system:serviceaccount:tdmcore-system:tdmcore-agent"
#: the TokenReview ``extra`` keys naming the pod a bound token belongs to
POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
POD_UID_EXTRA = "authentication.kubernetes.io/pod-uid"


@dataclass(frozen=True)
class Caller:
    """An authenticated token's owner: its user name and, for a pod-bound token, its
    pod (``namespace/name``) and the pod's UID."""

    user: str
    pod: str | None = None  # namespace/name
    pod_uid: str | None = None

    def __str__(self) -> str:
        return self.user + (f" (pod {self.pod})" if self.pod else "")


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
        """The agent relaying a request with this ``Authorization`` header, or
        :class:`HttpError` 401, 403, 503."""
        caller = self._authenticate(authorization, "Authorization: Bearer <the agent's "
                                                   "ServiceAccount token>")
        if caller.user not in self.users:
            raise HttpError(403, f"{caller.user!r} may not report to the controller "
                                 f"(allowed: {', '.join(sorted(self.users))})")
        return caller

    def check_pod(self, authorization: str | None, namespace: str, pod: str,
                  uid: str | None = None) -> Caller:
        """The training pod ``namespace/pod`` (UID ``uid``, when known), proven by the
        pod-bound token in ``authorization`` (the :data:`POD_AUTHORIZATION` header), or
        :class:`HttpError` 401, 403, 503."""
        key = f"{namespace}/{pod}"
        sender = self._authenticate(authorization, f"{POD_AUTHORIZATION}: Bearer <the "
                                    f"training pod's own token> (pod {key} sent none: a "
                                    f"hook older than 2026-11-28, or no TDMCORE_TOKEN_FILE)")
        if sender.pod is None:
            raise HttpError(403, f"the token of {sender.user!r} is not bound to a pod, so "
                                 f"it cannot speak for pod {key}")
        if sender.pod != key or (uid and sender.pod_uid and sender.pod_uid != uid):
            raise HttpError(403, f"pod {sender.pod!r} may report for itself only, not "
                                 f"for pod {key!r}")
        return sender

    def _authenticate(self, authorization: str | None, needed: str) -> Caller:
        """Whose token is in ``authorization`` (remembered, module docstring), or
        :class:`HttpError` 401 (``needed`` says what was expected), 503."""
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise HttpError(401, f"a report needs {needed}")
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
        extra = user.get("extra") or {}
        pods = extra.get(POD_NAME_EXTRA) or []
        uids = extra.get(POD_UID_EXTRA) or []
        # a ServiceAccount's token: system:serviceaccount:<namespace>:<name>, and its
        # pod runs in the ServiceAccount's namespace
        namespace = name.split(":")[2] if name.startswith("system:serviceaccount:") \
            and name.count(":") == 3 else None
        pod = f"{namespace}/{pods[0]}" if pods and namespace else None
        return _Review(now, Caller(name, pod, str(uids[0]) if pod and uids else None))

    @staticmethod
    def node_of(caller: Caller, pods: Mapping[str, Mapping[str, Any]]) -> str | None:
        """The node of the caller's own pod (a pod-bound token), if known."""
        if caller.pod is None:
            return None
        pod = pods.get(caller.pod) or {}
        return (pod.get("spec") or {}).get("nodeName") or None
