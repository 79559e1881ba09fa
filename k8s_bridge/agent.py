"""The per-node agent: an HTTP relay between training pods and the controller.

The agent runs as a DaemonSet with a ``hostPort``; the training-side hook
(:mod:`k8s_bridge.hook`) in every pod of the node posts its iteration times to
``POST /v1/report``. The agent validates the report strictly, fills in the node
name, forwards it to the controller's ``POST /v1/report`` and relays the answer
(a pause to apply before the next iteration, the idle to take in every iteration's
compute phase, the pod's time shift, period and target phase).

**[decision]** The agent *fails open*: training must never stall because the
controller is missing, slow, down or confused. Whenever the controller is not
configured, unreachable, times out, answers 5xx, a redirect, or a 200 that is not
a valid answer, the pod gets at once ::

    200 {"pause_ms": 0.0, "shift_ms": null, "idle_ms": null, "period_ms": null,
         "target_phase_ms": null, "controller": "unreachable"}

(with an ``X-Tdmcore-Fail-Open: <reason>`` header for debugging). A 4xx from the
controller (404 unknown pod, 400) is passed through unchanged, status and JSON body
(the controller's ``{"Error": ...}``): the controller is alive and has something to say
to the pod; only a 4xx whose body is not JSON (e.g. a proxy's page) becomes
``{"error": "controller answered <status>"}``.

**[decision]** Backoff: after ``backoff_after`` (3) consecutive failed forwards
the agent stops forwarding for ``backoff_base_s * 2**k`` seconds (capped at
``backoff_cap_s`` = 30 s), answering the fail-open reply immediately; the first
report after the interval is forwarded as a probe (one probe at a time; the other
reports keep failing open) and a success resets the backoff.

**[decision]** Body size: reports over ``max_body_bytes`` (1 MiB) are answered 400.
When ``Content-Length`` announces a larger body the app answers without reading
``wsgi.input`` at all; otherwise it reads at most ``max_body_bytes + 1`` bytes.
Note that the server (:class:`k8s_bridge.web.Server`) buffers a request body before
calling the application (spooling anything over 512 KiB to a temporary file, not
memory); bodies over ``WAITRESS_MAX_BODY_BYTES`` (16 MiB) are refused by the server,
400 before they are read.

**[decision]** Unknown fields of a report are ignored and not forwarded; the
forwarded body is rebuilt from the validated fields, so the controller only ever
sees the documented schema. ``comm_ms`` may be omitted (taken as ``null``). The
node name configured on the agent (``--node``, default ``$NODE_NAME``) overrides
one sent by the pod; a pod's ``node`` is kept only when the agent has none.

**[decision]** Tokens: every forward carries the agent's own ServiceAccount token
(``--token-file``) as ``Authorization: Bearer`` and the training pod's own token --
the ``Authorization`` header the hook sent -- unchanged, as
``X-Tdmcore-Pod-Authorization``.  The agent checks neither (it has no API access);
the controller checks both (:mod:`k8s_bridge.auth`).  A report without the pod's
token is still forwarded, and the controller's 401 reaches the pod.

**[decision]** The controller is called without HTTP proxies (``$HTTP_PROXY`` is
ignored): it is an in-cluster Service. ``timeout_s`` bounds each socket operation
(connect, each read), as in :mod:`urllib`; it is not a total deadline.
"""

from __future__ import annotations

import json
import logging
import math
import re
import signal
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from http.client import HTTPException
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from prometheus_client import Counter, Gauge, Histogram
from werkzeug.wrappers import Request, Response

from .api import (
    POD_AUTHORIZATION,
    REPORT_PATH,
    ReportError,
    TokenFile,
    valid_answer,
    validate_report,
)
from .web import JsonApp, Server

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication

__all__ = [
    "DEFAULT_PORT",
    "FAIL_OPEN_REPLY",
    "MAX_BODY_BYTES",
    "Agent",
    "run_agent",
    "serve",
]

log = logging.getLogger(__name__)

DEFAULT_PORT = 9471
DEFAULT_TIMEOUT_S = 0.5
MAX_BODY_BYTES = 1 << 20
WAITRESS_MAX_BODY_BYTES = 16 << 20
# The controller's answer is a handful of numbers; anything longer is garbage.
MAX_ANSWER_BYTES = 64 << 10
BACKOFF_AFTER = 3
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 30.0

FAIL_OPEN_REPLY: Mapping[str, Any] = MappingProxyType(
    {
        "pause_ms": 0.0,
        "shift_ms": None,
        "idle_ms": None,
        "period_ms": None,
        "target_phase_ms": None,
        "controller": "unreachable",
    }
)
_FAIL_OPEN_BODY = json.dumps(dict(FAIL_OPEN_REPLY)).encode()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are not followed: urllib would re-send a POST as a bodiless GET to
    wherever ``Location`` points and relay that answer; a 3xx fails open instead."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class _ForwardFailed(Exception):
    """A forward that must fail open; ``reason`` is a metrics label."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def _error(status: int, message: str) -> Response:
    return Response(json.dumps({"error": message}), status=status, mimetype="application/json")


class Agent:
    """Configuration, state and WSGI application of one node's agent.

    Parameters
    ----------
    controller_url : str or None
        Base URL of the controller (``http://tdmcore-controller.tdmcore-system.svc:8890``);
        ``/v1/report`` is appended. ``None``: every report fails open.
    node : str or None
        The node this agent runs on, added to every forwarded report.
    timeout_s : float
        Socket timeout of each forward to the controller, seconds.
    max_body_bytes : int
        Largest accepted report body.
    backoff_after : int
        Consecutive failed forwards before the agent backs off.
    backoff_base_s, backoff_cap_s : float
        First and largest backoff interval, seconds; the interval doubles with each
        further failure.
    token_file : str or None
        The agent's ServiceAccount token (a projected token, audience
        ``tdmcore-controller``; the kubelet refreshes the file), sent to the controller
        as ``Authorization: Bearer``; re-read when the file changes
        (:class:`~k8s_bridge.api.TokenFile`).  ``None``, or a file that cannot be read
        (said once, and once when it can be read again), sends no token (the
        controller then answers 401, passed on to the pod).

    Raises
    ------
    ValueError
        For a controller URL that is not ``http(s)://host...`` or bad numbers.
    """

    def __init__(
        self,
        controller_url: str | None,
        node: str | None = None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_body_bytes: int = MAX_BODY_BYTES,
        backoff_after: int = BACKOFF_AFTER,
        backoff_base_s: float = BACKOFF_BASE_S,
        backoff_cap_s: float = BACKOFF_CAP_S,
        token_file: str | None = None,
    ) -> None:
        if controller_url is not None:
            controller_url = controller_url.strip().rstrip("/")
            if not re.match(r"https?://[^/\s]+", controller_url):
                raise ValueError(f"controller_url: not an http(s) URL: {controller_url!r}")
        if not (math.isfinite(timeout_s) and timeout_s > 0):
            raise ValueError(f"timeout_s: must be finite and > 0, got {timeout_s}")
        if max_body_bytes < 1:
            raise ValueError(f"max_body_bytes: must be >= 1, got {max_body_bytes}")
        if backoff_after < 1:
            raise ValueError(f"backoff_after: must be >= 1, got {backoff_after}")
        if not (0 < backoff_base_s <= backoff_cap_s and math.isfinite(backoff_cap_s)):
            raise ValueError("backoff_base_s, backoff_cap_s: need 0 < base <= cap < inf")
        self.controller_url = controller_url
        self.node = node or None
        self.timeout_s = float(timeout_s)
        self.max_body_bytes = int(max_body_bytes)
        self.backoff_after = int(backoff_after)
        self.backoff_base_s = float(backoff_base_s)
        self.backoff_cap_s = float(backoff_cap_s)
        # Set by run_agent on SIGTERM so that /readyz drops the agent from service.
        self.draining = False
        self.token_file = token_file
        self._token = TokenFile(token_file, log, "the agent's token") \
            if token_file is not None else None

        self._lock = threading.Lock()
        self._failures = 0
        self._retry_at = 0.0  # time.monotonic() before which nothing is forwarded
        # No proxies: the controller is an in-cluster Service (see module docstring).
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                                   _NoRedirect())

        # the bridge's one web stack: health, readiness (503 while draining), metrics,
        # JSON errors (``{"error": ...}``, the agent's documented shape)
        self.web = JsonApp("tdmcore_agent", ready=lambda: not self.draining,
                           max_body=self.max_body_bytes, error_key="error")
        self.web.route(REPORT_PATH, self._report)
        self.registry = self.web.registry
        self._m_reports = Counter(
            "tdmcore_agent_reports",
            "Reports received from training pods (valid or not).",
            registry=self.registry,
        )
        self._m_invalid = Counter(
            "tdmcore_agent_invalid_reports",
            "Reports answered 400 by the agent (not forwarded).",
            registry=self.registry,
        )
        self._m_forwarded = Counter(
            "tdmcore_agent_forwarded",
            "Reports forwarded to the controller and answered (200 or 4xx).",
            ["outcome"],
            registry=self.registry,
        )
        self._m_failed = Counter(
            "tdmcore_agent_forward_failures",
            "Forwards to the controller that failed; the pod got the fail-open reply.",
            ["reason"],
            registry=self.registry,
        )
        self._m_skipped = Counter(
            "tdmcore_agent_skipped",
            "Reports answered fail-open without forwarding (no controller, backoff).",
            ["reason"],
            registry=self.registry,
        )
        self._m_latency = Histogram(
            "tdmcore_agent_forward_latency_seconds",
            "Latency of forwards to the controller, failed ones included.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
            registry=self.registry,
        )
        self._m_consecutive = Gauge(
            "tdmcore_agent_consecutive_failures",
            "Consecutive failed forwards (0 when the controller answers).",
            registry=self.registry,
        )
        for reason in ("unreachable", "timeout", "server_error", "bad_answer"):
            self._m_failed.labels(reason=reason)
        for reason in ("not_configured", "backoff"):
            self._m_skipped.labels(reason=reason)
        for outcome in ("ok", "client_error"):
            self._m_forwarded.labels(outcome=outcome)

    # -- WSGI -------------------------------------------------------------------------

    def app(self) -> WSGIApplication:
        """The WSGI application serving this agent's routes."""
        return self.web

    # -- POST /v1/report ---------------------------------------------------------------

    def _read_body(self, request: Request) -> bytes:
        limit = self.max_body_bytes
        length = request.content_length
        if length is not None and length > limit:
            # Answer from the header alone: the body is never read.
            raise ReportError("body", f"larger than {limit} bytes ({length})")
        data = request.stream.read(limit + 1)
        if len(data) > limit:
            raise ReportError("body", f"larger than {limit} bytes")
        return data

    def _report(self, request: Request) -> Response:
        self._m_reports.inc()
        try:
            raw = self._read_body(request)
            try:
                # NaN/Infinity literals decode to floats and are caught, naming the
                # field, by validate_report.
                decoded = json.loads(raw)
            except RecursionError:
                raise ReportError("body", "JSON nested too deeply") from None
            except UnicodeDecodeError:
                raise ReportError("body", "not UTF-8") from None
            except ValueError as exc:  # JSONDecodeError, or an integer over 4300 digits
                raise ReportError("body", f"malformed JSON: {exc}") from None
            report = validate_report(decoded)
        except ReportError as exc:
            self._m_invalid.inc()
            return _error(400, str(exc))
        if self.node is not None:
            report["node"] = self.node
        # the pod's own token (the hook's Authorization), passed on for the controller
        # to check; the agent cannot check it, and sends its own as Authorization
        return self._forward(report, request.headers.get("Authorization"))

    def _fail_open(self, reason: str) -> Response:
        response = Response(_FAIL_OPEN_BODY, mimetype="application/json")
        response.headers["X-Tdmcore-Fail-Open"] = reason
        return response

    def _may_forward(self) -> bool:
        """Whether to forward now; while backed off, lets one probe through per interval."""
        with self._lock:
            if self._failures < self.backoff_after:
                return True
            now = time.monotonic()
            if now < self._retry_at:
                return False
            # This request probes; the others keep failing open until it is answered.
            self._retry_at = now + self._interval_s()
            return True

    def _interval_s(self) -> float:
        exponent = min(self._failures - self.backoff_after, 32)
        return float(min(self.backoff_cap_s, self.backoff_base_s * 2.0**exponent))

    def _record(self, ok: bool) -> None:
        with self._lock:
            if ok:
                self._failures = 0
                self._retry_at = 0.0
            else:
                self._failures += 1
                if self._failures >= self.backoff_after:
                    self._retry_at = time.monotonic() + self._interval_s()
            self._m_consecutive.set(self._failures)

    def _forward(self, report: dict[str, Any], pod_token: str | None = None) -> Response:
        if self.controller_url is None:
            self._m_skipped.labels(reason="not_configured").inc()
            return self._fail_open("not_configured")
        if not self._may_forward():
            self._m_skipped.labels(reason="backoff").inc()
            return self._fail_open("backoff")
        started = time.perf_counter()
        try:
            status, body = self._post(report, pod_token)
        except _ForwardFailed as exc:
            self._m_latency.observe(time.perf_counter() - started)
            self._m_failed.labels(reason=exc.reason).inc()
            self._record(ok=False)
            log.debug("forward failed open: %s", exc)
            return self._fail_open(exc.reason)
        self._m_latency.observe(time.perf_counter() - started)
        self._record(ok=True)
        if status == 200:
            self._m_forwarded.labels(outcome="ok").inc()
            return Response(body, status=200, mimetype="application/json")
        self._m_forwarded.labels(outcome="client_error").inc()
        try:
            json.loads(body)
        except (ValueError, RecursionError):  # not JSON (e.g. a proxy's HTML page)
            return _error(status, f"controller answered {status}")
        # the controller's own answer, status and body unchanged ({"Error": ...})
        return Response(body, status=status, mimetype="application/json")

    def _authorization(self, pod_token: str | None) -> dict[str, str]:
        """The token headers of a forward: the agent's (``Authorization``, none without
        a readable token) and the pod's, as the pod sent it."""
        token = self._token.read() if self._token is not None else None
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if pod_token:
            headers[POD_AUTHORIZATION] = pod_token
        return headers

    def _post(self, report: dict[str, Any], pod_token: str | None = None
              ) -> tuple[int, bytes]:
        """POST to the controller; returns (200 or 4xx, body) or raises _ForwardFailed."""
        assert self.controller_url is not None
        request = urllib.request.Request(
            self.controller_url + REPORT_PATH,
            data=json.dumps(report, allow_nan=False).encode(),
            headers={"Content-Type": "application/json", "Accept": "application/json",
                     **self._authorization(pod_token)},
            method="POST",
        )
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:
                status = int(response.status)
                body = bytes(response.read(MAX_ANSWER_BYTES + 1))
        except urllib.error.HTTPError as exc:
            with exc:
                if 400 <= exc.code < 500:
                    try:
                        return exc.code, bytes(exc.read(MAX_ANSWER_BYTES))
                    except (OSError, HTTPException):
                        return exc.code, b""
            if exc.code >= 500:
                raise _ForwardFailed("server_error", f"HTTP {exc.code}") from None
            raise _ForwardFailed("bad_answer", f"HTTP {exc.code}") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError | socket.timeout):
                raise _ForwardFailed("timeout", str(exc.reason)) from None
            raise _ForwardFailed("unreachable", str(exc.reason)) from None
        except TimeoutError as exc:
            raise _ForwardFailed("timeout", str(exc) or "read timed out") from None
        except (OSError, HTTPException, ValueError) as exc:
            raise _ForwardFailed("unreachable", f"{type(exc).__name__}: {exc}") from None
        if status != 200 or len(body) > MAX_ANSWER_BYTES or not valid_answer(body):
            raise _ForwardFailed("bad_answer", f"HTTP {status}, {len(body)} bytes")
        return status, body


def serve(app: WSGIApplication, host: str, port: int) -> Server:
    """Bind the bridge's waitress server (4 threads) for ``app`` without starting it.

    Parameters
    ----------
    app : WSGI application
        Usually ``Agent(...).app()``.
    host : str
        Address to listen on.
    port : int
        Port; 0 picks a free one (read it back from ``.port``).

    Returns
    -------
    k8s_bridge.web.Server
        Call ``.run()`` (or ``.start()``) to serve, ``.stop()`` to stop.
    """
    return Server(app, host, port, threads=4, ident="tdmcore-agent",
                  max_request_body_size=WAITRESS_MAX_BODY_BYTES)


def run_agent(
    host: str,
    port: int,
    controller: str | None,
    node: str | None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    token_file: str | None = None,
) -> None:
    """Run the agent until SIGTERM or SIGINT.

    On SIGTERM or SIGINT ``/readyz`` starts answering 503 and the server stops (a
    report in flight may be cut off: its hook counts one failed post).

    Parameters
    ----------
    host, port : str, int
        Where to listen (the DaemonSet's ``hostPort``).
    controller : str or None
        The controller's base URL; ``None`` runs the agent in fail-open mode only.
    node : str or None
        This node's name (the Downward API's ``spec.nodeName``).
    timeout_s : float
        Socket timeout of forwards to the controller, seconds.
    token_file : str or None
        The agent's ServiceAccount token, sent with every forward (see :class:`Agent`).
    """
    agent = Agent(controller, node, timeout_s=timeout_s, token_file=token_file)
    server = serve(agent.app(), host, port)

    def stop(signum: int, frame: object) -> None:
        log.info("signal %d: stopping", signum)
        agent.draining = True
        threading.Thread(target=server.stop, daemon=True).start()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
    log.info(
        "tdmcore agent on %s:%d for node %s, controller %s (timeout %.3f s)",
        server.host,
        server.port,
        node or "<unknown>",
        controller or "<none: fail-open only>",
        timeout_s,
    )
    server.run()
