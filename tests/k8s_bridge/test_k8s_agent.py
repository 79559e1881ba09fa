"""The per-node agent over real HTTP: relay, fail-open, backoff, bad input, health, metrics.

The agent is served by waitress on a free loopback port; the controller is a tiny
``http.server`` fake that records what it gets and answers what a test scripted.
"""

from __future__ import annotations

import http.client
import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from werkzeug.test import EnvironBuilder

from k8s_bridge.agent import (
    FAIL_OPEN_REPLY,
    MAX_BODY_BYTES,
    Agent,
    serve,
)
from k8s_bridge.api import TokenFile, validate_report
from k8s_bridge.cli import main
from k8s_bridge.web import Server

ANSWER = {"pause_ms": 12.5, "shift_ms": 3.0, "period_ms": 100.0, "target_phase_ms": 40.0}


def report(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "namespace": "team-a",
        "pod": "resnet-worker-0",
        "iterations": [
            {"start_ms": 1_700_000_000_000.0, "duration_ms": 101.5, "comm_ms": 20.0},
            {"start_ms": 1_700_000_000_101.5, "duration_ms": 99.0, "comm_ms": None},
        ],
    }
    body.update(overrides)
    return body


class FakeController:
    """``POST /v1/report`` on a free loopback port; records bodies, answers ``respond``."""

    def __init__(self, respond: Callable[[int], tuple[int, bytes]] | None = None) -> None:
        self.bodies: list[Any] = []
        self.paths: list[str] = []
        self.authorizations: list[str | None] = []
        self.pod_authorizations: list[str | None] = []
        self.delay_s = 0.0
        self.respond = respond or (lambda n: (200, json.dumps(ANSWER).encode()))
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                with fake._lock:
                    fake.bodies.append(body)
                    fake.paths.append(self.path)
                    fake.authorizations.append(self.headers.get("Authorization"))
                    fake.pod_authorizations.append(
                        self.headers.get("X-Tdmcore-Pod-Authorization"))
                    n = len(fake.bodies)
                time.sleep(fake.delay_s)
                status, payload = fake.respond(n)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the agent gave up waiting

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.bodies)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def closed_port_url() -> str:
    """A loopback URL nobody listens on (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class Running:
    """An agent served on a free port, with a tiny HTTP client."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.server: Server = serve(agent.app(), "127.0.0.1", 0)
        self.server.start()
        self.port = self.server.port

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            conn.close()

    def post(self, payload: Any) -> tuple[int, dict[str, str], Any]:
        raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        status, headers, body = self.request(
            "POST", "/v1/report", raw, {"Content-Type": "application/json"}
        )
        return status, headers, json.loads(body)

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        status, headers, body = self.request("GET", "/metrics")
        assert status == 200
        assert headers["Content-Type"].startswith("text/plain")
        samples = {}
        for family in text_string_to_metric_families(body.decode()):
            for sample in family.samples:
                samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        return samples


@pytest.fixture
def controller() -> Iterator[FakeController]:
    fake = FakeController()
    yield fake
    fake.close()


@pytest.fixture
def start() -> Iterator[Callable[..., Running]]:
    started: list[Running] = []

    def _start(controller_url: str | None, node: str | None = "node-a", **kw: Any) -> Running:
        running = Running(Agent(controller_url, node, **kw))
        started.append(running)
        return running

    yield _start
    for running in started:
        running.server.stop()


# -- relaying -------------------------------------------------------------------------


def test_relays_the_answer_and_adds_the_node(controller, start) -> None:
    agent = start(controller.url, "node-a")
    body = report()
    body["iterations"][1].pop("comm_ms")  # optional: forwarded as null
    body["extra"] = "dropped"
    status, _, answer = agent.post(body)
    assert status == 200
    assert answer == ANSWER  # the controller's answer, as is
    assert controller.paths == ["/v1/report"]
    assert controller.bodies == [
        {
            "namespace": "team-a",
            "pod": "resnet-worker-0",
            "node": "node-a",
            "iterations": [
                {"start_ms": 1_700_000_000_000.0, "duration_ms": 101.5, "comm_ms": 20.0},
                {"start_ms": 1_700_000_000_101.5, "duration_ms": 99.0, "comm_ms": None},
            ],
        }
    ]


@pytest.mark.parametrize(
    ("agent_node", "pod_node", "forwarded"),
    [
        ("node-a", "node-b", "node-a"),  # the agent knows where it runs
        (None, "node-b", "node-b"),  # kept when the agent has no name
        (None, None, None),  # then absent
    ],
)
def test_node_name_precedence(controller, start, agent_node, pod_node, forwarded) -> None:
    agent = start(controller.url, agent_node)
    status, _, _ = agent.post(report(node=pod_node))
    assert status == 200
    assert controller.bodies[0].get("node") == forwarded


def test_controller_down_fails_open_within_the_timeout(start) -> None:
    agent = start(closed_port_url(), timeout_s=0.3)
    t0 = time.perf_counter()
    status, headers, answer = agent.post(report())
    assert time.perf_counter() - t0 < 0.3 + 0.5
    assert status == 200
    assert answer == FAIL_OPEN_REPLY
    assert headers["X-Tdmcore-Fail-Open"] == "unreachable"


def test_slow_controller_fails_open_after_the_timeout(controller, start) -> None:
    controller.delay_s = 1.5
    agent = start(controller.url, timeout_s=0.2)
    t0 = time.perf_counter()
    status, headers, answer = agent.post(report())
    elapsed = time.perf_counter() - t0
    assert 0.15 < elapsed < 0.2 + 0.6
    assert (status, answer) == (200, FAIL_OPEN_REPLY)
    assert headers["X-Tdmcore-Fail-Open"] == "timeout"
    assert controller.count == 1  # it was forwarded, just not answered in time


def test_not_configured_fails_open_without_network(start) -> None:
    agent = start(None)
    status, headers, answer = agent.post(report())
    assert (status, answer) == (200, FAIL_OPEN_REPLY)
    assert headers["X-Tdmcore-Fail-Open"] == "not_configured"


@pytest.mark.parametrize(
    ("status", "payload", "relayed"),
    [
        (
            404,
            b'{"error": "pod team-a/resnet-worker-0: unknown"}',
            {"error": "pod team-a/resnet-worker-0: unknown"},
        ),
        (
            400,
            b'{"error": "iterations[0].duration_ms: must be > 0"}',
            {"error": "iterations[0].duration_ms: must be > 0"},
        ),
        # the controller's own errors (JsonApp) say "Error": unchanged, not rewrapped
        (
            404,
            b'{"Error": "pod team-a/resnet-worker-0 is unknown to the controller"}',
            {"Error": "pod team-a/resnet-worker-0 is unknown to the controller"},
        ),
        (422, b'{"Error": "x", "detail": [1, 2]}', {"Error": "x", "detail": [1, 2]}),
        (409, b"<html>conflict</html>", {"error": "controller answered 409"}),
    ],
)
def test_controller_4xx_is_passed_through(start, status, payload, relayed) -> None:
    fake = FakeController(lambda n: (status, payload))
    try:
        agent = start(fake.url)
        got_status, headers, answer = agent.post(report())
        assert (got_status, answer) == (status, relayed)
        assert "X-Tdmcore-Fail-Open" not in headers
    finally:
        fake.close()


@pytest.mark.parametrize(
    ("status", "payload", "reason"),
    [
        (500, b'{"error": "boom"}', "server_error"),
        (503, b'{"error": "not the leader"}', "server_error"),
        (200, b"not json", "bad_answer"),
        (200, b"[1, 2]", "bad_answer"),
        (200, b'{"shift_ms": 1.0}', "bad_answer"),  # no pause_ms
        (200, b'{"pause_ms": -1.0}', "bad_answer"),
        (200, b'{"pause_ms": NaN}', "bad_answer"),
        (200, b'{"pause_ms": "5"}', "bad_answer"),
        (200, b'{"pause_ms": 1.0, "shift_ms": "x"}', "bad_answer"),
        (302, b"", "bad_answer"),
    ],
)
def test_controller_errors_and_garbage_fail_open(start, status, payload, reason) -> None:
    fake = FakeController(lambda n: (status, payload))
    try:
        agent = start(fake.url)
        got_status, headers, answer = agent.post(report())
        assert (got_status, answer) == (200, FAIL_OPEN_REPLY)
        assert headers["X-Tdmcore-Fail-Open"] == reason
    finally:
        fake.close()


def test_backoff_skips_forwarding_then_probes(start) -> None:
    outcome = {"status": 500}
    fake = FakeController(
        lambda n: (
            outcome["status"],
            b'{"error": "down"}' if outcome["status"] != 200 else json.dumps(ANSWER).encode(),
        )
    )
    try:
        agent = start(fake.url, backoff_after=3, backoff_base_s=0.4, backoff_cap_s=30.0)
        for _ in range(3):  # three failures in a row...
            assert agent.post(report())[2] == FAIL_OPEN_REPLY
        assert fake.count == 3
        t0 = time.perf_counter()
        for _ in range(5):  # ...then nothing is forwarded for 0.4 s
            _, headers, answer = agent.post(report())
            assert answer == FAIL_OPEN_REPLY
            assert headers["X-Tdmcore-Fail-Open"] == "backoff"
        assert time.perf_counter() - t0 < 0.35
        assert fake.count == 3
        time.sleep(0.45)
        agent.post(report())  # the probe: forwarded, fails again -> next interval 0.8 s
        assert fake.count == 4
        time.sleep(0.45)
        assert agent.post(report())[1]["X-Tdmcore-Fail-Open"] == "backoff"
        assert fake.count == 4
        outcome["status"] = 200
        time.sleep(0.45)
        assert agent.post(report())[2] == ANSWER  # the probe succeeds: backoff reset
        assert agent.post(report())[2] == ANSWER
        assert fake.count == 6
    finally:
        fake.close()


def test_backoff_interval_doubles_up_to_the_cap() -> None:
    agent = Agent("http://controller:8080", backoff_after=3, backoff_base_s=0.5)
    intervals = []
    for failures in (3, 4, 5, 9, 10, 1000):
        agent._failures = failures
        intervals.append(agent._interval_s())
    # 0.5 x 2^(failures - 3), capped at 30 s
    assert intervals == [0.5, 1.0, 2.0, 30.0, 30.0, 30.0]


# -- bad input ------------------------------------------------------------------------


def one_iteration(**fields: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"start_ms": 1_700_000_000_000.0, "duration_ms": 100.0}
    item.update(fields)
    return report(iterations=[item])


def without(key: str) -> dict[str, Any]:
    body = report()
    del body[key]
    return body


BAD_INPUTS = [
    (b"{not json", "body"),
    (b"", "body"),
    (b"\xff\xfe\xfa", "body"),
    (b"[" * 100_000, "body"),
    ([1, 2], "body"),
    ("a string", "body"),
    (without("namespace"), "namespace"),
    (report(namespace=5), "namespace"),
    (report(namespace=""), "namespace"),
    (report(namespace="Not_A_Namespace"), "namespace"),
    (without("pod"), "pod"),
    (report(pod=None), "pod"),
    (report(pod="x" * 300), "pod"),
    (report(node=7), "node"),
    (without("iterations"), "iterations"),
    (report(iterations={"start_ms": 1.0}), "iterations"),
    (report(iterations=[]), "iterations"),
    (report(iterations=[{"start_ms": 1.0, "duration_ms": 1.0}] * 1025), "iterations"),
    (report(iterations=[5]), "iterations[0]"),
    (report(iterations=[{"duration_ms": 1.0}]), "iterations[0].start_ms"),
    (report(iterations=[{"start_ms": 1.0}]), "iterations[0].duration_ms"),
    (one_iteration(start_ms="1"), "iterations[0].start_ms"),
    (one_iteration(start_ms=-5.0), "iterations[0].start_ms"),
    (one_iteration(duration_ms=True), "iterations[0].duration_ms"),
    (one_iteration(duration_ms=0), "iterations[0].duration_ms"),
    (one_iteration(duration_ms=-1.0), "iterations[0].duration_ms"),
    (json.dumps(one_iteration(duration_ms=float("nan"))).encode(), "iterations[0].duration_ms"),
    (json.dumps(one_iteration(start_ms=float("inf"))).encode(), "iterations[0].start_ms"),
    (
        b'{"namespace": "a", "pod": "b", "iterations": [{"start_ms": 1, "duration_ms": 1e999}]}',
        "iterations[0].duration_ms",
    ),
    (one_iteration(comm_ms=-1.0), "iterations[0].comm_ms"),
    (one_iteration(comm_ms="x"), "iterations[0].comm_ms"),
    (
        report(
            iterations=[
                {"start_ms": 1.0, "duration_ms": 1.0},
                {"start_ms": 2.0, "duration_ms": 0.0},
            ]
        ),
        "iterations[1].duration_ms",
    ),
]


@pytest.fixture(scope="module")
def shared() -> Iterator[tuple[Running, FakeController]]:
    fake = FakeController()
    running = Running(Agent(fake.url, "node-a"))
    yield running, fake
    running.server.stop()
    fake.close()


@pytest.mark.parametrize(("payload", "field"), BAD_INPUTS)
def test_bad_input_is_400_naming_the_field_and_not_forwarded(shared, payload, field) -> None:
    agent, fake = shared
    before = fake.count
    status, _, answer = agent.post(payload)
    assert status == 400
    assert set(answer) == {"error"}
    assert answer["error"].startswith(f"{field}: "), answer["error"]
    assert fake.count == before


def test_validate_report_raises_naming_the_field() -> None:
    with pytest.raises(ValueError,
                       match=r"^iterations\[0\]\.duration_ms: must be > 0 and at most 1e\+09$"):
        validate_report(one_iteration(duration_ms=0.0))
    # finite but so large that start + duration overflows: refused, not a 500 later
    with pytest.raises(ValueError, match=r"^iterations\[0\]\.start_ms: must lie in "):
        validate_report(one_iteration(start_ms=1.7e308))
    with pytest.raises(ValueError, match=r"^iterations\[0\]\.duration_ms: must be > 0 "):
        validate_report(one_iteration(duration_ms=1.7e308))
    assert validate_report(report(node="n1"))["node"] == "n1"


def test_a_10_mb_body_is_refused_quickly(shared) -> None:
    agent, fake = shared
    before = fake.count
    t0 = time.perf_counter()
    status, _, answer = agent.post(b"x" * (10 << 20))
    assert time.perf_counter() - t0 < 3.0
    assert status == 400
    assert answer["error"].startswith("body: larger than 1048576 bytes")
    assert fake.count == before


def test_a_chunked_body_over_the_limit_is_refused(shared) -> None:
    agent, fake = shared
    before = fake.count
    chunks = iter([b"y" * (64 << 10)] * 20)  # 1.25 MiB, no Content-Length
    conn = http.client.HTTPConnection("127.0.0.1", agent.port, timeout=10)
    try:
        conn.request(
            "POST",
            "/v1/report",
            body=chunks,
            encode_chunked=True,
            headers={"Transfer-Encoding": "chunked"},
        )
        response = conn.getresponse()
        assert response.status == 400
        assert json.loads(response.read())["error"].startswith("body: larger than")
    finally:
        conn.close()
    assert fake.count == before


def test_a_huge_content_length_is_answered_without_reading_the_body() -> None:
    class Untouchable(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, buffer: Any) -> int:
            raise AssertionError("the body was read")

    environ = EnvironBuilder(
        path="/v1/report", method="POST", content_type="application/json"
    ).get_environ()
    environ["wsgi.input"] = Untouchable()
    environ["CONTENT_LENGTH"] = str(10 << 30)
    seen = []
    body = b"".join(
        Agent(None).app()(environ, lambda status, headers, exc_info=None: seen.append(status))
    )
    assert seen == ["400 BAD REQUEST"]
    assert json.loads(body)["error"] == f"body: larger than {MAX_BODY_BYTES} bytes ({10 << 30})"


def test_a_body_without_length_is_read_only_up_to_the_limit() -> None:
    class Endless(io.RawIOBase):
        served = 0

        def readable(self) -> bool:
            return True

        def readinto(self, buffer: Any) -> int:
            n = len(buffer)
            buffer[:n] = b"x" * n
            self.served += n
            return n

    stream = Endless()
    environ = EnvironBuilder(path="/v1/report", method="POST").get_environ()
    environ.pop("CONTENT_LENGTH", None)
    environ["wsgi.input"] = stream
    environ["wsgi.input_terminated"] = True  # the server delimits the body (chunked)
    seen = []
    body = b"".join(
        Agent(None).app()(environ, lambda status, headers, exc_info=None: seen.append(status))
    )
    assert seen == ["400 BAD REQUEST"]
    assert json.loads(body)["error"] == f"body: larger than {MAX_BODY_BYTES} bytes"
    assert stream.served <= 2 * MAX_BODY_BYTES


def test_only_one_probe_at_a_time_while_backed_off(start) -> None:
    fake = FakeController(lambda n: (500, b'{"error": "down"}'))
    fake.delay_s = 0.3
    try:
        agent = start(fake.url, timeout_s=2.0, backoff_after=1, backoff_base_s=0.2)
        agent.post(report())  # fails after 0.3 s -> backed off for 0.2 s
        time.sleep(0.25)
        probe = threading.Thread(target=agent.post, args=(report(),))
        probe.start()  # forwarded, in flight for 0.3 s
        wait_for_count(fake, 2)
        for _ in range(3):  # meanwhile the others fail open at once
            t0 = time.perf_counter()
            assert agent.post(report())[1]["X-Tdmcore-Fail-Open"] == "backoff"
            assert time.perf_counter() - t0 < 0.2
        probe.join()
        assert fake.count == 2
    finally:
        fake.close()


def wait_for_count(fake: FakeController, n: int, timeout_s: float = 3.0) -> None:
    deadline = time.monotonic() + timeout_s
    while fake.count < n:
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_unknown_routes_and_methods(start) -> None:
    agent = start(None)
    status, headers, body = agent.request("GET", "/v1/report")
    assert status == 405 and "POST" in headers["Allow"]
    assert "error" in json.loads(body)
    status, _, body = agent.request("GET", "/nope")
    assert status == 404 and "error" in json.loads(body)


# -- health and metrics ---------------------------------------------------------------


def test_healthz_and_readyz(start) -> None:
    agent = start(None)
    assert agent.request("GET", "/healthz")[::2] == (200, b"ok\n")
    assert agent.request("GET", "/readyz")[::2] == (200, b"ready\n")
    agent.agent.draining = True
    assert agent.request("GET", "/readyz")[0] == 503
    assert agent.request("GET", "/healthz")[0] == 200  # alive, just leaving


def test_metrics_count_reports_forwards_and_failures(controller, start) -> None:
    agent = start(controller.url)
    m = agent.metrics()
    assert m[("tdmcore_agent_reports_total", ())] == 0
    assert m[("tdmcore_agent_forward_latency_seconds_count", ())] == 0

    agent.post(report())  # forwarded, 200
    agent.post(report(pod=None))  # 400
    controller.respond = lambda n: (404, b'{"error": "unknown pod"}')
    agent.post(report())  # forwarded, 404
    controller.close()
    agent.post(report())  # unreachable
    m = agent.metrics()
    assert m[("tdmcore_agent_reports_total", ())] == 4
    assert m[("tdmcore_agent_invalid_reports_total", ())] == 1
    assert m[("tdmcore_agent_forwarded_total", (("outcome", "ok"),))] == 1
    assert m[("tdmcore_agent_forwarded_total", (("outcome", "client_error"),))] == 1
    assert m[("tdmcore_agent_forward_failures_total", (("reason", "unreachable"),))] == 1
    assert m[("tdmcore_agent_forward_failures_total", (("reason", "timeout"),))] == 0
    assert m[("tdmcore_agent_forward_latency_seconds_count", ())] == 3
    assert m[("tdmcore_agent_consecutive_failures", ())] == 1


def test_each_agent_has_its_own_registry(start) -> None:
    first, second = start(None), start(None)
    first.post(report())
    assert first.metrics()[("tdmcore_agent_skipped_total", (("reason", "not_configured"),))] == 1
    assert second.metrics()[("tdmcore_agent_reports_total", ())] == 0


# -- configuration --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"controller_url": "controller:8080"}, "controller_url"),
        ({"controller_url": "ftp://x"}, "controller_url"),
        ({"controller_url": None, "timeout_s": 0.0}, "timeout_s"),
        ({"controller_url": None, "timeout_s": float("nan")}, "timeout_s"),
        ({"controller_url": None, "backoff_after": 0}, "backoff_after"),
    ],
)
def test_bad_configuration_is_refused(kwargs, field) -> None:
    with pytest.raises(ValueError, match=f"^{field}"):
        Agent(**kwargs)


def test_the_agent_command_parses_its_options(monkeypatch) -> None:
    import k8s_bridge.agent as agent_module

    calls = []
    monkeypatch.setattr(agent_module, "run_agent", lambda *args: calls.append(args))
    monkeypatch.setenv("NODE_NAME", "gpu-node-7")
    monkeypatch.delenv("TDMCORE_CONTROLLER_URL", raising=False)
    assert main(["agent", "--controller", "http://ctl:8080", "--timeout", "0.25"]) == 0
    monkeypatch.setenv("TDMCORE_CONTROLLER_URL", "http://env-ctl:8890")
    assert main(["agent"]) == 0
    monkeypatch.setenv("TDMCORE_AGENT_TOKEN_FILE", "/run/token")
    assert main(["agent"]) == 0
    assert calls == [("0.0.0.0", 9471, "http://ctl:8080", "gpu-node-7", 0.25, None),
                     ("0.0.0.0", 9471, "http://env-ctl:8890", "gpu-node-7", 0.5, None),
                     ("0.0.0.0", 9471, "http://env-ctl:8890", "gpu-node-7", 0.5,
                      "/run/token")]


def test_the_agent_sends_its_token_and_reads_a_renewed_one(controller, start, tmp_path,
                                                           caplog) -> None:
    """Issue 40: the controller takes reports from the agent's ServiceAccount only; the
    agent sends the projected token the kubelet keeps in its file (renewed before it
    expires: re-read when the file changes).  Without the file it sends none, says so,
    and the controller's 401 reaches the pod."""
    import os

    token = tmp_path / "token"
    token.write_text("first-token\n")
    agent = start(controller.url, "node-a", token_file=str(token))
    assert agent.post(report())[0] == 200
    token.write_text("renewed-token\n")
    os.utime(token, (1_000_000, 1_000_000))  # a new mtime, as the kubelet's rename gives
    assert agent.post(report())[0] == 200
    token.unlink()
    with caplog.at_level("INFO", logger="k8s_bridge.agent"):
        for _ in range(3):
            assert agent.post(report())[0] == 200
        token.write_text("third-token\n")
        assert agent.post(report())[0] == 200
    assert controller.authorizations == ["Bearer first-token", "Bearer renewed-token",
                                         None, None, None, "Bearer third-token"]
    # an unreadable token is said once, not on every forward, and so is its recovery;
    # the token itself is never logged
    said = [r for r in caplog.records if str(token) in r.getMessage()]
    assert [r.levelname for r in said] == ["WARNING", "INFO"], [r.getMessage() for r in said]
    assert "cannot read the agent's token" in said[0].getMessage()
    assert not any("token" in r.getMessage() and "-token" in r.getMessage()
                   for r in caplog.records)


def test_the_agent_passes_the_pods_token_on_beside_its_own(controller, start,
                                                          tmp_path) -> None:
    """Issue 40's review: the agent forwarded any POST with its own token, and the
    controller could not tell which pod sent it.  The pod's own token (the hook's
    Authorization) goes on unchanged as X-Tdmcore-Pod-Authorization, the agent's own
    as Authorization; a pod that sends none is forwarded without one (the controller
    refuses it, and its answer reaches the pod)."""
    token = tmp_path / "token"
    token.write_text("agent-token\n")
    agent = start(controller.url, "node-a", token_file=str(token))
    status, _, body = agent.request("POST", "/v1/report", json.dumps(report()).encode(),
                                    {"Content-Type": "application/json",
                                     "Authorization": "Bearer pod-token"})
    assert status == 200, body
    assert agent.post(report())[0] == 200
    assert controller.authorizations == ["Bearer agent-token"] * 2
    assert controller.pod_authorizations == ["Bearer pod-token", None]


def test_a_token_file_follows_the_kubelets_swap(tmp_path) -> None:
    """The kubelet renews a projected token by pointing the ``..data`` symlink at a
    new folder: the path's inode changes even where the mtime does not."""
    import logging

    def version(name: str, token: str) -> None:
        (tmp_path / name).mkdir()
        (tmp_path / name / "token").write_text(token)
        os.utime(tmp_path / name / "token", ns=(0, 0))  # the same mtime for both
        os.symlink(name, tmp_path / "..data_new")
        os.replace(tmp_path / "..data_new", tmp_path / "..data")

    version("..v1", "token-1")
    os.symlink("..data/token", tmp_path / "token")
    tokens = TokenFile(str(tmp_path / "token"), logging.getLogger("test"))
    assert tokens.read() == "token-1"
    version("..v2", "token-2")  # same size, same mtime
    assert tokens.read() == "token-2"


def test_the_agent_command_rejects_a_bad_controller_url(capsys) -> None:
    assert main(["agent", "--controller", "not-a-url", "--port", "0",
                 "--host", "127.0.0.1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: controller_url") and len(err.splitlines()) == 1


def test_the_command_serves_and_stops_on_sigterm() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "TDMCORE_CONTROLLER_URL"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "k8s_bridge.cli", "agent", "--host", "127.0.0.1",
         "--port", str(port)],
        cwd=Path(__file__).resolve().parents[2],
        env={**env, "NODE_NAME": "gpu-node-1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 15.0
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
                conn.request("GET", "/readyz")
                assert conn.getresponse().status == 200
                conn.close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "the agent did not come up"
                time.sleep(0.05)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("POST", "/v1/report", body=json.dumps(report()))
        response = conn.getresponse()
        assert (response.status, json.loads(response.read())) == (200, FAIL_OPEN_REPLY)
        conn.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert proc.stderr is not None
        log = proc.stderr.read().decode()
        assert "gpu-node-1" in log and "fail-open only" in log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_shutdown_stops_serving() -> None:
    server = serve(Agent(None).app(), "127.0.0.1", 0)
    thread = server.start().thread
    assert thread is not None
    port = server.port
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("GET", "/healthz")  # a kept-alive connection is closed too
    assert conn.getresponse().read() == b"ok\n"
    server.stop()
    thread.join(2.0)
    assert not thread.is_alive()
    conn.close()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass


def test_stop_with_the_trigger_already_closed_still_stops() -> None:
    """CI once saw ``OSError: Bad file descriptor`` from waitress's trigger in
    stop(); stop must then close from the calling thread, not raise."""
    server = serve(Agent(None).app(), "127.0.0.1", 0)
    thread = server.start().thread
    assert thread is not None
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    conn.request("GET", "/healthz")
    assert conn.getresponse().read() == b"ok\n"
    trigger = server._server.trigger
    os.close(trigger.trigger)  # the pipe's write end, as if closed elsewhere
    trigger.trigger = -1
    server.stop()
    thread.join(5.0)
    assert not thread.is_alive()
    conn.close()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", server.port),
                                                          timeout=1):
        pass


def test_a_loop_that_fails_under_stop_ends_quietly() -> None:
    """When stop() had to close the sockets from its own thread, the serving loop's
    next poll meets a closed descriptor: that OSError ends the loop without an
    unhandled exception in the thread; before stop() it is still raised."""
    import errno

    def closed() -> None:
        raise OSError(errno.EBADF, "Bad file descriptor")

    server = Server(Agent(None).app(), "127.0.0.1", 0)
    server._server.run = closed
    with pytest.raises(OSError):
        server.run()
    server._stopped = True
    server.run()  # no exception: stop() is under way
    server.stop()


# -- review: integers beyond a double, redirects ------------------------------------------


@pytest.mark.parametrize("field", ["start_ms", "duration_ms", "comm_ms"])
def test_an_integer_beyond_a_double_is_a_400_naming_the_field(controller, start, field) -> None:
    agent = start(controller.url)
    item = {"start_ms": 1.0, "duration_ms": 5.0, "comm_ms": 1.0}
    raw = json.dumps(report(iterations=[item])).encode()
    raw = raw.replace(f'"{field}": {item[field]}'.encode(), f'"{field}": 1{"0" * 400}'.encode())
    status, _, answer = agent.post(raw)
    assert status == 400 and field in answer["error"]
    status, _, answer = agent.post(raw.replace(f'1{"0" * 400}'.encode(), b"1" * 5000))
    assert status == 400 and "error" in answer
    assert controller.count == 0


def test_a_controller_answer_with_an_integer_beyond_a_double_fails_open(start) -> None:
    fake = FakeController(lambda n: (200, b'{"pause_ms": 1' + b"0" * 400 + b"}"))
    try:
        agent = start(fake.url)
        status, headers, answer = agent.post(report())
        assert (status, answer) == (200, FAIL_OPEN_REPLY)
        assert headers["X-Tdmcore-Fail-Open"] == "bad_answer"
    finally:
        fake.close()


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_a_redirect_fails_open_and_is_not_followed(start, code) -> None:
    target = FakeController()  # would answer a valid 200 to whatever reaches it

    class Redirect(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(code)
            self.send_header("Location", target.url + "/v1/report")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    try:
        agent = start(f"http://127.0.0.1:{httpd.server_address[1]}")
        status, headers, answer = agent.post(report())
        assert (status, answer) == (200, FAIL_OPEN_REPLY)
        assert headers["X-Tdmcore-Fail-Open"] == "bad_answer"
    finally:
        httpd.shutdown()
        httpd.server_close()
        target.close()
