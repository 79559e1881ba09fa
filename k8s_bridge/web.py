"""What every bridge server shares: JSON in and out, size limits, health, metrics.

Applications are WSGI (werkzeug for requests, responses and routing) served by
waitress (a production WSGI server).  A handler raises :class:`HttpError` (or a
:class:`~k8s_bridge.pipeline.BadRequest`) for a client's mistake; anything else
is logged and answered 500 with a one-line message -- never a traceback.
"""

from __future__ import annotations

import errno
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import waitress
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from waitress.channel import HTTPChannel
from waitress.task import ErrorTask
from waitress.utilities import RequestEntityTooLarge
from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request, Response

from .metrics import HttpMetrics

__all__ = ["DEFAULT_MAX_BODY", "HttpError", "JsonApp", "RawJson", "Server", "read_json", "serve"]

log = logging.getLogger(__name__)

#: Largest request body accepted (bytes).  A nodeCacheCapable extender gets node
#: names only (about 20 kB for 1,000 nodes); without the node cache kube-scheduler
#: sends whole Node objects and this needs raising (``--max-body-bytes``).
DEFAULT_MAX_BODY = 4 << 20

Handler = Callable[[Request], Any]


class HttpError(Exception):
    """Answer ``status`` with ``{"Error": message}`` (or the handler's own body)."""

    def __init__(self, status: int, message: str, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.body = body


class RawJson(str):
    """A handler's answer already encoded as JSON text (sent as it is)."""


def _no_constants(token: str) -> Any:
    raise ValueError(f"{token} is not valid JSON")


def read_json(request: Request, max_body: int) -> Any:
    """The request's JSON body, or :class:`HttpError` 400 (too large, malformed)."""
    length = request.content_length
    if length is not None and length > max_body:
        raise HttpError(400, f"request body of {length} bytes exceeds the limit of "
                             f"{max_body} bytes")
    data = request.stream.read(max_body + 1)
    if len(data) > max_body:
        raise HttpError(400, f"request body exceeds the limit of {max_body} bytes")
    if not data:
        raise HttpError(400, "request body is empty; expected JSON")
    try:
        # NaN / Infinity are not JSON (Go's decoder rejects them too).
        return json.loads(data, parse_constant=_no_constants)
    except (ValueError, UnicodeDecodeError) as exc:
        raise HttpError(400, f"malformed JSON: {exc}") from exc
    except RecursionError as exc:
        raise HttpError(400, "malformed JSON: nested too deeply") from exc


class JsonApp:
    """A WSGI app: routes to handlers returning JSON-able values, plus
    ``/healthz``, ``/readyz`` and ``/metrics``."""

    def __init__(self, name: str, *, ready: Callable[[], bool] | None = None,
                 max_body: int = DEFAULT_MAX_BODY,
                 registry: CollectorRegistry | None = None, error_key: str = "Error") -> None:
        self.name = name
        self.ready = ready or (lambda: True)
        self.max_body = max_body
        #: the key of an error answer's message (the agent's is ``error``)
        self.error_key = error_key
        self.registry = registry or CollectorRegistry()
        http = HttpMetrics(name, self.registry)
        self.requests = http.requests
        self.latency = http.latency
        self.url_map = Map([Rule("/healthz", endpoint="healthz", methods=["GET"]),
                            Rule("/readyz", endpoint="readyz", methods=["GET"]),
                            Rule("/metrics", endpoint="metrics", methods=["GET"])])
        self.handlers: dict[str, Handler] = {}

    def route(self, path: str, handler: Handler, methods: Iterable[str] = ("POST",)) -> None:
        endpoint = path.strip("/") or "root"
        self.url_map.add(Rule(path, endpoint=endpoint, methods=list(methods)))
        self.handlers[endpoint] = handler

    # --------------------------------------------------------------- WSGI
    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        request = Request(environ)
        response = self.dispatch(request)
        return response(environ, start_response)

    def dispatch(self, request: Request) -> Response:
        adapter = self.url_map.bind_to_environ(request.environ)
        route = "unknown"
        start = time.perf_counter()
        try:
            endpoint, _ = adapter.match()
            route = str(endpoint)
            if endpoint == "healthz":
                response = Response("ok\n", mimetype="text/plain")
            elif endpoint == "readyz":
                ok = bool(self.ready())
                response = Response("ready\n" if ok else "not ready\n",
                                    status=200 if ok else 503, mimetype="text/plain")
            elif endpoint == "metrics":
                response = Response(generate_latest(self.registry),
                                    content_type=CONTENT_TYPE_LATEST)
            else:
                answer = self.handlers[endpoint](request)
                # a handler may answer with its own Response (status, headers, raw body)
                response = answer if isinstance(answer, Response) else self._json(200, answer)
        except HttpError as exc:
            body = exc.body if exc.body is not None else {self.error_key: exc.message}
            response = self._json(exc.status, body)
        except MethodNotAllowed as exc:
            response = self._json(405, {self.error_key: exc.description or exc.name})
            response.headers["Allow"] = ", ".join(exc.valid_methods or [])
        except NotFound as exc:
            response = self._json(404, {self.error_key: exc.description or exc.name})
        except HTTPException as exc:  # pragma: no cover - werkzeug's other 4xx
            response = self._json(exc.code or 400, {self.error_key: exc.description or exc.name})
        except Exception as exc:
            log.exception("%s: internal error on %s", self.name, request.path)
            response = self._json(500, {self.error_key: f"internal error: "
                                                         f"{type(exc).__name__}"})
        self.requests.labels(route, str(response.status_code)).inc()
        self.latency.labels(route).observe(time.perf_counter() - start)
        return response

    @staticmethod
    def _json(status: int, body: Any) -> Response:
        text = body if isinstance(body, RawJson) else json.dumps(body, allow_nan=False,
                                                                 default=_default)
        return Response(text, status=status, mimetype="application/json")


def _default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        item = value.item()
        if isinstance(item, float) and not math.isfinite(item):
            return None
        return item
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


class _JsonErrorTask(ErrorTask):  # type: ignore[misc]
    """waitress's own error answers, except that a body over its limit is answered like
    one over the application's: 400 with ``{"Error": ...}`` (not waitress's text 413)."""

    def execute(self) -> None:
        error = self.request.error
        if not isinstance(error, RequestEntityTooLarge):
            super().execute()
            return
        limit = self.channel.server.adj.max_request_body_size
        body = json.dumps({"Error": f"request body exceeds the limit of {limit} bytes"}
                          ).encode()
        self.status = "400 Bad Request"
        self.response_headers.append(("Content-Type", "application/json"))
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class _Channel(HTTPChannel):  # type: ignore[misc]
    error_task_class = _JsonErrorTask


_GONE = (errno.EBADF, errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.ESHUTDOWN)


class _ConnectionGone(logging.Filter):
    """waitress logs a traceback when a worker thread's response meets a closed socket
    ("Exception when servicing"): the client went away, or our own :meth:`Server.stop`
    closed the connection while a response was being finished.  Neither is a fault of
    the application: one DEBUG line instead (a bridge never logs such a traceback)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, OSError) and exc.errno in _GONE \
                and str(record.msg).startswith("Exception when servicing"):
            log.debug("connection gone while answering: %s", exc)
            return False
        return True


_CONNECTION_GONE = _ConnectionGone()


class Server:
    """A waitress server, served from a background thread (:meth:`start`) or the
    calling one (:meth:`run`); :meth:`stop` is safe from any thread, a signal
    handler included, and more than once.  Every bridge server (extender,
    standalone scheduler, controller, agent) is one of these."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, threads: int = 8,
                 *, ident: str = "tdmcore", max_request_body_size: int = 64 << 20) -> None:
        try:
            self._server: Any = waitress.create_server(
                app, host=host, port=port, threads=threads,
                clear_untrusted_proxy_headers=True,
                max_request_body_size=max_request_body_size, ident=ident)
        except OSError as exc:  # a busy port: say which (the CLI prints it on one line)
            busy = OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
            busy.errno = exc.errno
            raise busy from exc
        except ValueError as exc:  # waitress: "Invalid host/port specified." (no names)
            raise OSError(f"cannot listen on {host}:{port}: the host does not resolve "
                          f"to an address here") from exc
        # [decision] waitress refuses a body over max_request_body_size from its
        # Content-Length (or while reading a chunked one) before the application runs;
        # that refusal, too, is the documented 400 with a JSON message
        self._server.channel_class = _Channel
        waitress_log = logging.getLogger("waitress")
        if _CONNECTION_GONE not in waitress_log.filters:
            waitress_log.addFilter(_CONNECTION_GONE)
        self.port = int(self._server.effective_port)
        self.host = str(self._server.effective_host)
        #: the serving thread of :meth:`start` (None when served by :meth:`run`)
        self.thread: threading.Thread | None = None
        self._loop_done = threading.Event()
        self._running = False
        self._stopped = False
        self._stopping = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> Server:
        """Serve in a daemon thread (:attr:`thread`); a second call returns the
        same server (one loop only: two threads polling one waitress map race
        on its sockets and its trigger)."""
        with self._stopping:
            if self.thread is None:
                self.thread = threading.Thread(target=self.run, name="waitress",
                                               daemon=True)
                self.thread.start()
        return self

    def run(self) -> None:
        """Serve in this thread until :meth:`stop`."""
        self._running = True
        try:
            self._server.run()
        except OSError as exc:
            if not self._stopped:
                raise
            # stop() closed the sockets from another thread (its trigger was gone):
            # the loop's next poll finds a closed descriptor, which ends it
            log.debug("serving loop ended by stop(): %s", exc)
        finally:
            self._running = False
            self._loop_done.set()
            # waitress stops its worker threads only on KeyboardInterrupt/SystemExit
            self._server.task_dispatcher.shutdown()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Close the listening socket and every connection from inside the server's
        own loop (which then ends), and stop its worker threads."""
        with self._stopping:
            if self._stopped:
                return
            self._stopped = True
        server = self._server

        def close_all() -> None:
            for channel in list(server._map.values()):
                try:
                    channel.close()
                except OSError:  # pragma: no cover - already closed
                    pass

        if not self._running:
            close_all()
            server.task_dispatcher.shutdown(timeout=timeout_s)
            return
        try:
            server.trigger.pull_trigger(close_all)
        except OSError:
            # the trigger's pipe is already closed (seen once on CI): the loop
            # can no longer be woken, so close from here; it ends at its next poll
            log.warning("waitress trigger closed before stop; closing from %s",
                        threading.current_thread().name)
            close_all()
        if self.thread is not None and self.thread is not threading.current_thread():
            self._loop_done.wait(timeout_s)


def serve(app: Any, host: str = "127.0.0.1", port: int = 0, threads: int = 8) -> Server:
    """Start ``app`` on ``host:port`` in a background thread."""
    return Server(app, host, port, threads).start()
