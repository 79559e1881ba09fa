"""The training-side hook: batching, pauses, fail-safety, DDP comm timing, close().

The hook talks real HTTP on loopback to a fake agent (``http.server`` on a free
port) that records the reports and answers what a test scripted; one test runs the
real agent in between.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from k8s_bridge.api import valid_answer
from k8s_bridge.hook import TrainingHook

FAIL_OPEN = {
    "pause_ms": 0.0,
    "shift_ms": None,
    "idle_ms": None,
    "period_ms": None,
    "target_phase_ms": None,
    "controller": "unreachable",
}
NO_PAUSE = {"pause_ms": 0.0, "shift_ms": None, "period_ms": None, "target_phase_ms": None}


def encode(answer: Any) -> tuple[int, bytes]:
    return 200, answer if isinstance(answer, bytes) else json.dumps(answer).encode()


class FakeAgent:
    """``POST /v1/report`` on a free loopback port; records bodies, answers ``respond(n)``."""

    def __init__(self, respond: Callable[[int], tuple[int, bytes]] | None = None) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []
        self.respond = respond or (lambda n: encode(NO_PAUSE))
        self.answered = 0
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                with fake._lock:
                    fake.bodies.append(body)
                    fake.authorizations.append(self.headers.get("Authorization"))
                    n = len(fake.bodies)
                status, payload = fake.respond(n)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                self.wfile.flush()
                with fake._lock:
                    fake.answered += 1

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    @property
    def iterations(self) -> list[dict[str, Any]]:
        with self._lock:
            return [item for body in self.bodies for item in body["iterations"]]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class HangingAgent:
    """Accepts connections and never answers, or (``trickle``) answers a byte every 50 ms.

    A trickling answer defeats a socket timeout, which bounds each read, not the total.
    """

    def __init__(self, trickle: bool = False) -> None:
        self.trickle = trickle
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections.append(conn)
            if self.trickle:
                threading.Thread(target=self._dribble, args=(conn,), daemon=True).start()

    def _dribble(self, conn: socket.socket) -> None:
        try:
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            while True:
                conn.sendall(b"X")  # one endless header line
                time.sleep(0.05)
        except OSError:
            return

    def close(self) -> None:
        self.sock.close()
        for conn in self.connections:
            conn.close()


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def wait_for(condition: Callable[[], bool], timeout_s: float = 3.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.005)


@pytest.fixture
def fake() -> Iterator[FakeAgent]:
    agent = FakeAgent()
    yield agent
    agent.close()


@pytest.fixture
def make_hook() -> Iterator[Callable[..., TrainingHook]]:
    hooks: list[TrainingHook] = []

    def _make(url: str, **kw: Any) -> TrainingHook:
        kw.setdefault("register_atexit", False)
        hook = TrainingHook(url, "resnet-worker-0", "team-a", **kw)
        hooks.append(hook)
        return hook

    yield _make
    for hook in hooks:
        hook.close(timeout_s=0.5)


def timed_step(hook: TrainingHook, work_s: float = 0.0) -> float:
    t0 = time.perf_counter()
    with hook.step():
        if work_s:
            time.sleep(work_s)
    return time.perf_counter() - t0


# -- disabled --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"POD_NAME": "p", "POD_NAMESPACE": "ns"},
        {"TDMCORE_AGENT_URL": "http://10.0.0.1:9471", "POD_NAME": "p"},
        {"TDMCORE_AGENT_URL": "", "POD_NAME": "p", "POD_NAMESPACE": "ns"},
        {"TDMCORE_AGENT_URL": "10.0.0.1:9471", "POD_NAME": "p", "POD_NAMESPACE": "ns"},
        # what Kubernetes leaves of an undefined $(HOST_IP), no host, a port not a number
        {"TDMCORE_AGENT_URL": "http://$(HOST_IP):9471", "POD_NAME": "p", "POD_NAMESPACE": "ns"},
        {"TDMCORE_AGENT_URL": "http://:9471", "POD_NAME": "p", "POD_NAMESPACE": "ns"},
        {"TDMCORE_AGENT_URL": "http://host:port", "POD_NAME": "p", "POD_NAMESPACE": "ns"},
        {"TDMCORE_AGENT_URL": "http://host:0", "POD_NAME": "p", "POD_NAMESPACE": "ns"},
    ],
)
def test_disabled_without_configuration_and_never_touches_the_network(environ, monkeypatch) -> None:
    def no_network(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the disabled hook used the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    hook = TrainingHook.from_env(environ)
    assert not hook.enabled
    for _ in range(50):
        with hook.step():
            pass
    hook.begin()
    hook.end(comm_ms=3.0)
    assert hook.ddp_comm_hook(inner=len) is len  # a disabled hook adds nothing to DDP
    hook.close()
    assert hook._thread is None
    assert (hook.sent_iterations, hook.dropped_iterations) == (0, 0)


def test_from_env_reads_the_three_variables() -> None:
    hook = TrainingHook.from_env(
        {"TDMCORE_AGENT_URL": "http://10.0.0.1:9471/", "POD_NAME": "p", "POD_NAMESPACE": "ns"},
        register_atexit=False,
    )
    try:
        assert hook.enabled
        assert (hook.agent_url, hook.pod, hook.namespace) == ("http://10.0.0.1:9471", "p", "ns")
    finally:
        hook.close(timeout_s=0.1)


@pytest.mark.parametrize("url", ["http://10.0.0.1:9471", "https://agent.ns.svc:9471",
                                 "http://[::1]:9471", "http://localhost"])
def test_well_formed_urls_enable_the_hook(url) -> None:
    hook = TrainingHook.from_env({"TDMCORE_AGENT_URL": url, "POD_NAME": "p",
                                  "POD_NAMESPACE": "ns"}, register_atexit=False)
    try:
        assert hook.enabled and hook.agent_url == url
    finally:
        hook.close(timeout_s=0.1)


def test_a_disabled_step_costs_about_a_microsecond() -> None:
    hook = TrainingHook.from_env({})
    step = hook.step
    n = 100_000
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            with step():
                pass
        best = min(best, (time.perf_counter() - t0) / n)
    assert best < 2e-6, f"{best * 1e6:.2f} us per disabled step"


# -- reporting ------------------------------------------------------------------------


def test_iterations_arrive_in_batches_with_the_right_fields(fake, make_hook) -> None:
    hook = make_hook(fake.url, flush_every=5, flush_interval_s=30.0)
    t_before_ms = time.time() * 1000.0
    for _ in range(12):
        timed_step(hook, 0.003)
    wait_for(lambda: len(fake.bodies) >= 2)
    time.sleep(0.05)
    # a post waits for 5 pending iterations (the 30 s interval never fires); it takes
    # all that are pending, which is 6 when the machine is slow to wake the thread
    sizes = [len(body["iterations"]) for body in fake.bodies]
    assert all(size >= 5 for size in sizes) and sum(sizes) <= 12, sizes
    body = fake.bodies[0]
    assert set(body) == {"namespace", "pod", "iterations"}
    assert (body["namespace"], body["pod"]) == ("team-a", "resnet-worker-0")
    hook.close()
    items = fake.iterations
    assert len(items) == 12  # close() flushed the last two
    assert hook.sent_iterations == 12
    starts = [item["start_ms"] for item in items]
    assert starts == sorted(starts)
    assert t_before_ms <= starts[0] <= time.time() * 1000.0  # wall clock, epoch ms
    for item in items:
        assert set(item) == {"start_ms", "duration_ms", "comm_ms"}
        assert 3.0 <= item["duration_ms"] < 100.0
        assert item["comm_ms"] is None
    # consecutive starts are at least one step apart
    assert all(b - a >= 3.0 for a, b in zip(starts, starts[1:], strict=False))


def test_a_partial_batch_is_sent_after_the_flush_interval(fake, make_hook) -> None:
    hook = make_hook(fake.url, flush_every=100, flush_interval_s=0.2)
    for _ in range(3):
        timed_step(hook)
    t0 = time.monotonic()
    wait_for(lambda: len(fake.iterations) == 3, timeout_s=2.0)
    assert time.monotonic() - t0 < 1.0


def test_through_the_real_agent_to_a_controller(make_hook) -> None:
    from k8s_bridge.agent import Agent, serve

    controller = FakeAgent(lambda n: encode({**NO_PAUSE, "shift_ms": 7.0, "period_ms": 300.0}))
    server = serve(Agent(controller.url, "gpu-node-3").app(), "127.0.0.1", 0)
    server.start()
    try:
        hook = make_hook(f"http://127.0.0.1:{server.port}", flush_every=4)
        for _ in range(4):
            timed_step(hook, 0.001)
        wait_for(lambda: hook.period_ms is not None)
        assert (hook.shift_ms, hook.period_ms, hook.target_phase_ms) == (7.0, 300.0, None)
        body = controller.bodies[0]
        assert (body["node"], body["pod"], len(body["iterations"])) == (
            "gpu-node-3",
            "resnet-worker-0",
            4,
        )
    finally:
        server.stop()
        controller.close()


# -- pauses ---------------------------------------------------------------------------


def test_a_pause_is_slept_once_before_the_next_step(make_hook) -> None:
    # First answer: pause 150 ms; later ones: the agent's fail-open reply (no instruction).
    agent = FakeAgent(lambda n: encode({**NO_PAUSE, "pause_ms": 150.0} if n == 1 else FAIL_OPEN))
    try:
        hook = make_hook(agent.url, flush_every=1)
        assert timed_step(hook) < 0.05
        wait_for(lambda: hook.pending_pause_ms > 0)
        assert hook.pending_pause_ms == pytest.approx(150.0)
        paused = timed_step(hook, 0.001)
        assert 0.145 <= paused < 0.35
        wait_for(lambda: agent.answered >= 2)
        time.sleep(0.02)
        assert timed_step(hook) < 0.05  # applied once only
        assert timed_step(hook) < 0.05
        hook.close()
        durations = [item["duration_ms"] for item in agent.iterations]
        assert len(durations) == 4
        assert durations[1] < 100.0  # the pause is not part of the iteration
    finally:
        agent.close()


@pytest.mark.parametrize("key, held", [("pause_ms", "pending_pause_ms"),
                                       ("idle_ms", "idle_ms")])
def test_a_sleep_the_controller_asks_for_is_capped(make_hook, key, held) -> None:
    agent = FakeAgent(lambda n: encode({**NO_PAUSE, key: 60_000.0}))
    try:
        hook = make_hook(agent.url, flush_every=1, max_pause_ms=80.0)
        timed_step(hook)
        wait_for(lambda: getattr(hook, held) > 0)
        assert getattr(hook, held) == 80.0
        assert 0.075 <= timed_step(hook) < 0.3
    finally:
        agent.close()


# -- injected idle ----------------------------------------------------------------------


def test_idle_is_slept_in_every_step_and_counted_in_its_iteration(make_hook) -> None:
    """spec §7 "Idle reaches the training loop": the answer's idle_ms is slept once
    per iteration, inside it (after its start time), until an answer changes it; the
    fail-open reply keeps it, garbage leaves it, 0 ends it."""
    answers = [{**NO_PAUSE, "idle_ms": 40.0}, FAIL_OPEN, {**NO_PAUSE, "idle_ms": -5.0},
               {**NO_PAUSE, "idle_ms": "40"}, {**NO_PAUSE, "idle_ms": 0.0}]
    agent = FakeAgent(lambda n: encode(answers[min(n, len(answers)) - 1]))
    try:
        hook = make_hook(agent.url, flush_every=1)
        steps = []
        for n in range(1, len(answers) + 2):
            steps.append(timed_step(hook, 0.001))
            if n <= len(answers):
                wait_for(lambda n=n: hook.sent_iterations == n)
        hook.close()
        durations = [item["duration_ms"] for item in agent.iterations]
        # step 1 knew no idle; steps 2-5 slept 40 ms (fail-open and garbage kept it);
        # step 6 came after the answer of 0
        assert durations[0] < 30.0 and steps[0] < 0.03
        for k in (1, 2, 3, 4):
            assert 40.0 <= durations[k] < 150.0, durations
            assert steps[k] >= 0.04
        assert durations[5] < 30.0 and steps[5] < 0.03
        assert hook.idle_ms == 0.0
    finally:
        agent.close()


def test_an_answer_with_a_negative_idle_is_no_answer() -> None:
    assert valid_answer(json.dumps({**NO_PAUSE, "idle_ms": 13.68}).encode())
    assert valid_answer(json.dumps({**NO_PAUSE, "idle_ms": None}).encode())
    for bad in (-0.5, "1", True):
        assert not valid_answer(json.dumps({**NO_PAUSE, "idle_ms": bad}).encode())


def test_the_default_cap_is_ten_seconds() -> None:
    assert TrainingHook(None, None, None).max_pause_ms == 10_000.0


@pytest.mark.parametrize(
    "answer",
    [
        b"not json",
        b"[1, 2]",
        b'{"pause_ms": -50}',
        b'{"pause_ms": NaN}',
        b'{"pause_ms": Infinity}',
        b'{"pause_ms": 1e999}',
        b'{"pause_ms": 1' + b"0" * 400 + b"}",  # an integer beyond a double
        b'{"pause_ms": 0, "shift_ms": 1' + b"0" * 400 + b"}",
        b'{"pause_ms": "100"}',
        b'{"pause_ms": true}',
        b'{"pause_ms": null}',
        b"{}",
        json.dumps({**FAIL_OPEN, "pause_ms": 500.0}).encode(),  # fail-open: no instruction
    ],
)
def test_garbage_answers_are_ignored(make_hook, answer) -> None:
    agent = FakeAgent(lambda n: encode(answer))
    try:
        hook = make_hook(agent.url, flush_every=1)
        timed_step(hook)
        wait_for(lambda: hook.sent_iterations == 1)
        assert hook.pending_pause_ms == 0.0
        assert timed_step(hook) < 0.05
        assert (hook.shift_ms, hook.period_ms, hook.target_phase_ms) == (None, None, None)
    finally:
        agent.close()


def test_a_huge_integer_answer_does_not_stop_reporting(make_hook) -> None:
    huge = b'{"pause_ms": 1' + b"0" * 400 + b"}"
    agent = FakeAgent(lambda n: (200, huge) if n == 1 else encode(NO_PAUSE))
    try:
        hook = make_hook(agent.url, flush_every=1)
        for _ in range(3):
            timed_step(hook)
            time.sleep(0.02)
        wait_for(lambda: hook.sent_iterations == 3)
        assert hook._thread is not None and hook._thread.is_alive()
    finally:
        agent.close()


def test_a_comm_time_over_the_step_is_capped_not_the_batch_refused(make_hook) -> None:
    # through the real agent, which refuses comm_ms > duration_ms (400)
    from k8s_bridge.agent import Agent, serve

    agent = serve(Agent(None, "node-a").app(), "127.0.0.1", 0)
    agent.start()
    try:
        hook = make_hook(agent.url, flush_every=3)
        for comm in (1.0, 10_000.0, 1.0):  # one measured on another clock, too long
            hook.begin()
            time.sleep(0.005)
            hook.end(comm_ms=comm)
        wait_for(lambda: hook.sent_iterations == 3)
        assert hook.dropped_iterations == 0
    finally:
        agent.stop()


def test_shift_is_kept_until_a_valid_answer_changes_it(make_hook) -> None:
    answers = [
        {"pause_ms": 0.0, "shift_ms": 12.5, "period_ms": 400.0, "target_phase_ms": 30.0},
        FAIL_OPEN,  # the controller is gone: keep the last assignment
        {"pause_ms": 0.0, "shift_ms": "garbage", "period_ms": 410.0, "target_phase_ms": None},
    ]
    agent = FakeAgent(lambda n: encode(answers[min(n, 3) - 1]))
    try:
        hook = make_hook(agent.url, flush_every=1)
        timed_step(hook)
        wait_for(lambda: hook.sent_iterations == 1)
        assert (hook.shift_ms, hook.period_ms, hook.target_phase_ms) == (12.5, 400.0, 30.0)
        timed_step(hook)
        wait_for(lambda: hook.sent_iterations == 2)
        assert (hook.shift_ms, hook.period_ms, hook.target_phase_ms) == (12.5, 400.0, 30.0)
        timed_step(hook)
        wait_for(lambda: hook.sent_iterations == 3)
        assert (hook.shift_ms, hook.period_ms, hook.target_phase_ms) == (12.5, 410.0, None)
        with pytest.raises(AttributeError):
            hook.shift_ms = 1.0  # type: ignore[misc]
    finally:
        agent.close()


def test_a_period_of_zero_or_less_is_garbage(make_hook) -> None:
    """A start is taken modulo the period: one <= 0 would give negative pauses."""
    answers = [
        {"pause_ms": 0.0, "period_ms": 400.0, "phase_period_ms": 200.0, "target_phase_ms": 30.0},
        {"pause_ms": 0.0, "period_ms": -400.0, "phase_period_ms": 0.0, "target_phase_ms": 10.0},
    ]
    agent = FakeAgent(lambda n: encode(answers[min(n, 2) - 1]))
    try:
        hook = make_hook(agent.url, flush_every=1)
        for n in (1, 2):
            timed_step(hook)
            wait_for(lambda n=n: hook.sent_iterations == n)
        assert (hook.period_ms, hook.phase_period_ms, hook.target_phase_ms) == \
            (400.0, 200.0, 10.0)
    finally:
        agent.close()
    for key in ("period_ms", "phase_period_ms"):
        for bad in (0, -1.0):
            assert not valid_answer(json.dumps({"pause_ms": 0.0, key: bad}).encode())
        assert valid_answer(json.dumps({"pause_ms": 0.0, key: 0.5}).encode())


# -- never stall, never crash ---------------------------------------------------------


def training_loop(hook: TrainingHook, steps: int = 200, work_s: float = 0.001) -> float:
    t0 = time.perf_counter()
    for _ in range(steps):
        with hook.step():
            time.sleep(work_s)
    return time.perf_counter() - t0


@pytest.mark.parametrize("kind", ["closed_port", "hanging", "server_error"])
def test_an_unreachable_agent_does_not_stall_training(kind, make_hook, caplog) -> None:
    if kind == "closed_port":
        url, stop = closed_port_url(), None
    elif kind == "hanging":
        hanging = HangingAgent()
        url, stop = hanging.url, hanging.close
    else:
        failing = FakeAgent(lambda n: (500, b'{"error": "boom"}'))
        url, stop = failing.url, failing.close
    try:
        baseline = training_loop(TrainingHook.from_env({}))
        hook = make_hook(url, flush_every=10, timeout_s=0.2)
        with caplog.at_level(logging.DEBUG, logger="k8s_bridge.hook"):
            with_hook = training_loop(hook)
        assert with_hook < 1.5 * baseline + 0.1, (baseline, with_hook)
        t0 = time.monotonic()
        hook.close(timeout_s=0.3)
        assert time.monotonic() - t0 < 0.6
        assert hook.sent_iterations == 0
        warnings = [r for r in caplog.records
                    if r.levelno >= logging.WARNING and r.name.startswith("k8s_bridge.hook")]
        if kind != "hanging":  # a hanging post may still be waiting for its timeout
            assert len(warnings) == 1
        assert len(warnings) <= 1
    finally:
        if stop is not None:
            stop()


def test_failures_back_off_and_drop_data(make_hook) -> None:
    agent = FakeAgent(lambda n: (503, b'{"error": "down"}'))
    try:
        hook = make_hook(agent.url, flush_every=1, max_pending=5)
        for _ in range(40):  # ~0.1 s of steps, well inside the first 1 s backoff
            timed_step(hook, 0.002)
        assert len(agent.bodies) == 1  # one post, then silence
        assert hook.dropped_iterations >= 1 + (40 - 1 - 5)  # the failed batch, the overflow
    finally:
        agent.close()


def test_a_4xx_answer_drops_the_batch_without_backoff(make_hook) -> None:
    agent = FakeAgent(lambda n: (404, b'{"error": "unknown pod"}'))
    try:
        hook = make_hook(agent.url, flush_every=1)
        for _ in range(3):
            timed_step(hook)
            wait_for(lambda: agent.answered == len(agent.bodies) and agent.bodies)
            time.sleep(0.02)
        wait_for(lambda: len(agent.bodies) == 3)
        assert hook.sent_iterations == 0
    finally:
        agent.close()


def test_the_hook_sends_its_pods_token_and_reads_a_renewed_one(fake, tmp_path) -> None:
    """Issue 40's review: the controller could not tell which pod sent a report.  The
    hook sends the pod's own projected token (TDMCORE_TOKEN_FILE) with every post and
    reads the kubelet's renewal; the token is never logged."""
    token = tmp_path / "token"
    token.write_text("pod-token-1\n")
    hook = TrainingHook.from_env({"TDMCORE_AGENT_URL": fake.url, "POD_NAME": "p",
                                  "POD_NAMESPACE": "ns", "TDMCORE_TOKEN_FILE": str(token)},
                                 register_atexit=False, flush_every=1)
    try:
        timed_step(hook)
        wait_for(lambda: hook.sent_iterations == 1)
        token.write_text("pod-token-2\n")  # renewed: another size, mtime and content
        timed_step(hook)
        wait_for(lambda: hook.sent_iterations == 2)
    finally:
        hook.close(timeout_s=0.5)
    assert fake.authorizations == ["Bearer pod-token-1", "Bearer pod-token-2"]


@pytest.mark.parametrize("with_token", [False, True])
def test_a_refused_report_is_said_once_with_the_controllers_reason(make_hook, tmp_path, caplog,
                                                                   with_token) -> None:
    """A controller that checks reporters refuses a report without the pod's token
    (an old hook, no TDMCORE_TOKEN_FILE): the hook says so once, with the controller's
    reason and what to set, and goes on dropping refused batches without backing off."""
    reason = "a report needs X-Tdmcore-Pod-Authorization: Bearer <the training pod's own token>"
    agent = FakeAgent(lambda n: (401, json.dumps({"Error": reason}).encode()))
    token = tmp_path / "token"
    token.write_text("pod-token\n")
    try:
        hook = make_hook(agent.url, flush_every=1,
                         token_file=str(token) if with_token else None)
        with caplog.at_level(logging.WARNING, logger="k8s_bridge.hook"):
            for _ in range(4):
                timed_step(hook)
                wait_for(lambda: agent.answered == len(agent.bodies) and agent.bodies)
                time.sleep(0.02)
            wait_for(lambda: len(agent.bodies) == 4)  # no backoff
    finally:
        agent.close()
    said = [r.getMessage() for r in caplog.records if "refuses" in r.getMessage()]
    assert len(said) == 1 and reason in said[0] and "HTTP 401" in said[0], said
    assert ("TDMCORE_TOKEN_FILE" in said[0]) is not with_token
    assert not any("pod-token" in r.getMessage() for r in caplog.records)


def test_the_oldest_iterations_are_dropped_when_the_queue_is_full(fake, make_hook) -> None:
    hook = make_hook(fake.url, flush_every=1000, flush_interval_s=60.0, max_pending=5)
    for _ in range(8):
        timed_step(hook, 0.001)
    assert hook.dropped_iterations == 3
    hook.close()
    items = fake.iterations
    assert len(items) == 5
    assert hook.sent_iterations == 5


def test_an_exception_in_the_step_propagates_and_is_not_reported(fake, make_hook) -> None:
    hook = make_hook(fake.url, flush_every=1000, flush_interval_s=60.0)
    error = ValueError("boom")
    with pytest.raises(ValueError) as raised:
        with hook.step():
            raise error
    assert raised.value is error
    with pytest.raises(KeyboardInterrupt):
        with hook.step():
            raise KeyboardInterrupt
    timed_step(hook, 0.002)
    hook.close()
    assert len(fake.iterations) == 1
    assert fake.iterations[0]["duration_ms"] >= 2.0


def test_begin_end_without_with(fake, make_hook) -> None:
    hook = make_hook(fake.url, flush_every=1000, flush_interval_s=60.0)
    hook.end()  # without begin: ignored, no exception
    hook.begin()
    time.sleep(0.002)
    hook.end(comm_ms=1.5)
    hook.begin()
    hook.end(comm_ms=float("nan"))  # garbage comm time: reported as null
    hook.close()
    assert [item["comm_ms"] for item in fake.iterations] == [1.5, None]


# -- the DDP comm hook ----------------------------------------------------------------


class FakeFuture:
    """What the hook needs of ``torch.futures.Future``: ``then`` and completion."""

    def __init__(self) -> None:
        self.callbacks: list[Callable[[FakeFuture], Any]] = []

    def then(self, callback: Callable[[FakeFuture], Any]) -> FakeFuture:
        self.callbacks.append(callback)
        return FakeFuture()

    def complete(self) -> None:
        for callback in self.callbacks:
            callback(self)


def test_ddp_comm_hook_adds_the_time_until_the_future_completes(fake, make_hook) -> None:
    hook = make_hook(fake.url, flush_every=1000, flush_interval_s=60.0)
    calls: list[tuple[Any, Any]] = []

    def inner(state: Any, bucket: Any) -> FakeFuture:
        calls.append((state, bucket))
        return FakeFuture()

    comm_hook = hook.ddp_comm_hook(inner)
    state = object()

    # Iteration 1: two overlapping buckets, [0, 40] and [10, 50] ms -> union 50 ms.
    with hook.step():
        first = comm_hook(state, "bucket-0")
        time.sleep(0.010)
        second = comm_hook(state, "bucket-1")
        time.sleep(0.030)
        first.complete()
        time.sleep(0.010)
        second.complete()
        time.sleep(0.010)
    assert calls == [(state, "bucket-0"), (state, "bucket-1")]
    assert isinstance(first, FakeFuture) and first.callbacks  # DDP gets inner's own future

    # Iteration 2: a bucket that has not completed by the end of the step: no comm time.
    with hook.step():
        late = comm_hook(state, "bucket-2")
    # Iteration 3: that bucket completes now; it belongs to iteration 2 and is ignored.
    with hook.step():
        time.sleep(0.005)
        late.complete()

    # Iteration 4: an explicit comm_ms wins over what was measured.
    hook.begin()
    comm_hook(state, "bucket-3").complete()
    time.sleep(0.006)  # comm_ms must not exceed the step (the agent refuses that)
    hook.end(comm_ms=5.0)

    hook.close()
    comm = [item["comm_ms"] for item in fake.iterations]
    duration = fake.iterations[0]["duration_ms"]
    assert 48.0 <= comm[0] < min(duration, 80.0)  # a sum would give 40 + 40 = 80 ms
    assert comm[1:] == [None, None, 5.0]


def test_ddp_comm_hook_passes_ddps_signature_check(fake, make_hook) -> None:
    """DistributedDataParallel.register_comm_hook (torch 2.x ``_check_comm_hook``)
    refuses a hook whose ``bucket`` or return annotation is not dist.GradBucket /
    Future[Tensor]: the timed hook carries none (it carried the strings "Any", and
    real DDP refused it)."""
    import inspect

    hook = make_hook(fake.url)
    signature = inspect.signature(hook.ddp_comm_hook(lambda state, bucket: None))
    assert signature.parameters["bucket"].annotation is inspect.Parameter.empty
    assert signature.return_annotation is inspect.Signature.empty


def test_ddp_comm_hook_survives_a_future_without_then(fake, make_hook) -> None:
    hook = make_hook(fake.url)
    sentinel = object()
    comm_hook = hook.ddp_comm_hook(lambda state, bucket: sentinel)
    with hook.step():
        assert comm_hook(None, None) is sentinel


def test_ddp_comm_hook_default_needs_torch_only_when_asked() -> None:
    import importlib.util

    hook = TrainingHook(None, None, None)
    with hook.step():  # no torch needed to run
        pass
    if importlib.util.find_spec("torch") is not None:  # pragma: no cover
        assert callable(hook.ddp_comm_hook())  # torch's allreduce is the inner hook
        return
    with pytest.raises(ImportError):
        hook.ddp_comm_hook()  # the default inner hook is torch's allreduce


# -- close ----------------------------------------------------------------------------


def close_time(hook: TrainingHook, timeout_s: float) -> float:
    """How long ``hook.close(timeout_s)`` takes; a hang fails the test instead of pytest."""
    t0 = time.monotonic()
    closer = threading.Thread(target=hook.close, args=(timeout_s,), daemon=True)
    closer.start()
    closer.join(timeout_s + 2.0)
    assert not closer.is_alive(), "close() hung"
    return time.monotonic() - t0


@pytest.mark.parametrize("trickle", [False, True], ids=["silent", "trickling"])
def test_close_returns_within_its_deadline_when_the_agent_hangs(trickle) -> None:
    hanging = HangingAgent(trickle)
    try:
        # A post in flight, stuck for up to 5 s:
        hook = TrainingHook(hanging.url, "p", "ns", flush_every=1, timeout_s=5.0)
        timed_step(hook)
        wait_for(lambda: len(hanging.connections) == 1)
        assert close_time(hook, 0.3) < 0.5
        # Idle thread, iterations pending, the final flush hangs:
        hook = TrainingHook(hanging.url, "p", "ns", flush_every=100, timeout_s=5.0)
        for _ in range(3):
            timed_step(hook)
        assert close_time(hook, 0.3) < 0.5
        assert not hook.enabled
        hook.close()  # idempotent
    finally:
        hanging.close()


def test_close_is_registered_with_atexit(fake, monkeypatch) -> None:
    import atexit

    registered: list[Callable[[], None]] = []
    monkeypatch.setattr(atexit, "register", registered.append)
    monkeypatch.setattr(atexit, "unregister", registered.remove)
    hook = TrainingHook(fake.url, "p", "ns", flush_every=100)
    timed_step(hook)
    assert len(registered) == 1
    registered[0]()  # what the interpreter does at exit
    assert len(fake.iterations) == 1
    assert registered == []


# -- shifts: starting on the target phase ------------------------------------------------


def test_a_new_assignment_aligns_the_next_step_on_the_target_phase_once(make_hook) -> None:
    period = 400.0
    target = (time.time() * 1000.0 + 150.0) % period  # 150 ms from now, on the circle
    answer = {"pause_ms": 0.0, "shift_ms": 50.0, "period_ms": period,
              "target_phase_ms": target, "align": "default/a@50.000"}
    agent = FakeAgent(lambda n: (200, json.dumps(answer).encode()))
    try:
        hook = make_hook(agent.url, flush_every=1)
        timed_step(hook)
        wait_for(lambda: hook.target_phase_ms is not None, 3.0)
        t0 = time.time() * 1000.0
        with hook.step():
            started = time.time() * 1000.0
        # the step began on the target phase: (started - target) mod period ~ 0
        lag = (started - target) % period
        assert min(lag, period - lag) < 25.0, (lag, started - t0)
        assert started - t0 <= period
        # the same assignment again: no further alignment
        wait_for(lambda: agent.answered >= 2, 3.0)
        assert timed_step(hook) < 0.1
    finally:
        agent.close()


def test_high_priority_answers_carry_no_alignment(make_hook) -> None:
    answer = {"pause_ms": 0.0, "shift_ms": 0.0, "period_ms": 400.0,
              "target_phase_ms": None, "align": None}
    agent = FakeAgent(lambda n: (200, json.dumps(answer).encode()))
    try:
        hook = make_hook(agent.url, flush_every=1)
        timed_step(hook)
        wait_for(lambda: agent.answered >= 1, 3.0)
        time.sleep(0.05)
        assert timed_step(hook) < 0.05
    finally:
        agent.close()


def test_alignment_is_modulo_the_phase_period_when_the_answer_has_one(make_hook) -> None:
    # a 400 ms job whose place beside its reference repeats every 100 ms: the step
    # waits at most 100 ms for the target phase, not up to 400
    lattice = 100.0
    target = (time.time() * 1000.0 + 60.0) % lattice
    answer = {"pause_ms": 0.0, "shift_ms": 10.0, "period_ms": 400.0,
              "phase_period_ms": lattice, "target_phase_ms": target,
              "align": "default/a@10.000"}
    agent = FakeAgent(lambda n: (200, json.dumps(answer).encode()))
    try:
        hook = make_hook(agent.url, flush_every=1)
        timed_step(hook)
        wait_for(lambda: hook.phase_period_ms == lattice, 3.0)
        t0 = time.time() * 1000.0
        with hook.step():
            started = time.time() * 1000.0
        lag = (started - target) % lattice
        assert min(lag, lattice - lag) < 25.0, (lag, started - t0)
        assert started - t0 <= lattice + 25.0
    finally:
        agent.close()
