"""The training-side hook: report iteration times to the node's agent, apply pauses,
shifts and injected idle.

::

    from k8s_bridge.hook import TrainingHook

    hook = TrainingHook.from_env()  # TDMCORE_AGENT_URL, POD_NAME, POD_NAMESPACE,
                                    # TDMCORE_TOKEN_FILE
    for batch in loader:
        with hook.step():           # pending pause, then time the step (idle included)
            loss = train_step(batch)
    hook.close()                    # also registered with atexit

or ``hook.begin()`` / ``hook.end()`` around the step, and for PyTorch DDP
``model.register_comm_hook(None, hook.ddp_comm_hook())`` to report the time spent
in gradient all-reduce as ``comm_ms``.

**[decision]** The hook never stalls or crashes training:

- with any of ``TDMCORE_AGENT_URL``, ``POD_NAME``, ``POD_NAMESPACE`` missing (or a bad
  URL) the hook is disabled: ``step()`` is a shared no-op context manager (well under a
  microsecond), nothing touches the network, no thread is started;
- iterations go into a bounded deque (``max_pending``; the oldest are dropped when it
  is full) and a daemon thread posts them in batches (every ``flush_every``
  iterations or ``flush_interval_s`` seconds) with a short timeout (``timeout_s``);
- after a failed post the batch is dropped (not retried) and the thread backs off
  exponentially (1 s, 2 s, ... capped at ``backoff_cap_s`` = 30 s), letting the deque
  drop old iterations meanwhile; a 4xx answer (e.g. 404: the controller does not know
  the pod yet) drops the batch without backoff, except 429;
- any exception of the hook's own is caught and logged once at WARNING (later ones at
  DEBUG); an exception raised by the user's step propagates unchanged and that
  iteration is not reported.

**[decision]** Who sends: every post carries ``Authorization: Bearer`` with this
pod's own projected ServiceAccount token, audience ``tdmcore-controller``, read from
``TDMCORE_TOKEN_FILE`` (``token_file``; re-read when the kubelet renews it,
:class:`~k8s_bridge.api.TokenFile`).  The agent passes it on and the controller takes
the report only if the token is bound to the pod the report names
(:mod:`k8s_bridge.auth`).  Without it (no variable, an unreadable file: said once) the
hook still posts, and a controller that checks reporters answers 401: the first such
refusal is said once at WARNING with the controller's reason; the hook drops refused
batches without backing off, so training is never slowed.

**[decision]** Shifts: when the controller assigns this (low-priority) job an offset,
its answer carries ``target_phase_ms`` (where iterations should start, modulo
``phase_period_ms``, the spacing of the start times that keep the job's place beside
the job it follows; ``period_ms`` when an answer has no ``phase_period_ms``) and an
``align`` key; each new key is applied once: the next step first sleeps until the
target phase, ``(target_phase_ms - now) mod phase_period_ms`` (as the simulator starts
a job on its target phase).

**[decision]** Pauses: the answer's ``pause_ms`` (Metronome's continuous regulation)
becomes a pending pause, slept at the start of the next step, before its start time is
taken, so it is not counted in the iteration; when the target phase is known the
pause is recomputed against it at that moment (the answer is a flush old). It is
capped at ``max_pause_ms`` (10 s), ignored when negative, non-finite or not a number,
and applied at most once;
a newer answer replaces a pending pause (pauses are not summed; ``0`` cancels one).
``shift_ms``, ``period_ms``, ``phase_period_ms`` and ``target_phase_ms`` of the last
answer are kept as
read-only attributes (a garbage value leaves the old one). The agent's fail-open reply
(``"controller": "unreachable"``) is no instruction and changes nothing: the last
assignment is still the best one known.

**[decision]** Idle (Metronome's idle injection, spec §7 "Idle reaches the training
loop"): the answer's ``idle_ms`` is the idle the controller's plan injects into this
pod's compute phase, slept once per iteration, at the start of every step after its
start time is taken (so the iteration's duration includes it, as the controller's
baseline of ``period + idle`` does, and it precedes the step's communication, as in
the simulator, whose compute phase grows by it).  It holds until an answer changes
it (``0`` or ``null``: none), is capped at ``max_pause_ms``, and a negative or
non-finite value leaves the old one; the fail-open reply changes nothing.

**[decision]** Clocks: ``start_ms`` is wall-clock epoch milliseconds from
:func:`time.time` so that the controller can compare iteration starts across nodes;
the nodes' clocks must therefore be synchronised (NTP/chrony; phase errors are of the
order of the clock offset). Durations come from :func:`time.perf_counter`, which
is monotonic and immune to clock steps.

**[decision]** ``comm_ms`` from the DDP comm hook is the length of the union of the
intervals [hook called, future completed] of the iteration's buckets (buckets overlap,
so their sum would double count); a future that completes after ``end()`` is ignored.
An explicit ``end(comm_ms=...)`` overrides it; either is capped at the iteration's
duration (the report protocol's bound).
"""

from __future__ import annotations

import atexit
import functools
import importlib
import json
import logging
import math
import os
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from http.client import HTTPException
from types import TracebackType
from typing import Any

from .api import ANSWER_PERIODS, MAX_ITERATIONS, REPORT_PATH, TokenFile, finite_number

__all__ = ["TrainingHook"]

log = logging.getLogger(__name__)

ENV_AGENT_URL = "TDMCORE_AGENT_URL"
ENV_POD_NAME = "POD_NAME"
ENV_POD_NAMESPACE = "POD_NAMESPACE"
ENV_TOKEN_FILE = "TDMCORE_TOKEN_FILE"
MAX_ANSWER_BYTES = 64 << 10
BACKOFF_BASE_S = 1.0

CommHook = Callable[[Any, Any], Any]


class _NullStep:
    """The step of a disabled hook: does nothing, shared by all disabled hooks."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None


_NULL_STEP = _NullStep()


class _Step:
    """The reusable step context of an enabled hook."""

    __slots__ = ("_hook",)

    def __init__(self, hook: TrainingHook) -> None:
        self._hook = hook

    def __enter__(self) -> None:
        self._hook.begin()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self._hook.end()
        else:
            self._hook.abort()
        # Returning None lets the user's exception propagate unchanged.


#: a host name or IPv4 address (an IPv6 address comes in brackets, urlsplit strips them)
_HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|[0-9A-Fa-f:.]+")


def _url_problem(url: str) -> str | None:
    """Why ``url`` cannot be the agent's base URL (None: it can).  An unset variable
    that Kubernetes left unexpanded (``http://$(HOST_IP):9471``), an empty host or a
    port that is not a number would otherwise make every flush fail at run time."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # raises on a port that is not a number in 0..65535
    except ValueError:
        return "is not a valid URL"
    if parts.scheme not in ("http", "https"):
        return "is not an http(s) URL"
    if not parts.hostname or not _HOST.fullmatch(parts.hostname):
        return "has no valid host name"
    if port == 0:
        return "has port 0"
    return None


def _reason(exc: urllib.error.HTTPError) -> str:
    """The ``Error`` (the controller's) or ``error`` (the agent's) of a refusal."""
    try:
        answer = json.loads(exc.read(MAX_ANSWER_BYTES))
    except (OSError, ValueError, RecursionError, HTTPException):
        return "no reason given"
    if isinstance(answer, dict):
        return str(answer.get("Error") or answer.get("error") or "no reason given")[:300]
    return "no reason given"


def _union_ms(intervals: list[tuple[float, float]]) -> float:
    """Total length, in ms, of the union of (start_s, end_s) intervals."""
    total = 0.0
    current_start = current_end = -math.inf
    for start, end in sorted(intervals):
        if start > current_end:
            total += max(0.0, current_end - current_start)
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    total += max(0.0, current_end - current_start)
    return total * 1000.0


def _close_weak(ref: weakref.ref[TrainingHook]) -> None:
    hook = ref()
    if hook is not None:
        hook.close()


class TrainingHook:
    """Reports a training loop's iterations to the node's agent and applies its pauses.

    Parameters
    ----------
    agent_url : str or None
        The agent's base URL (``http://$HOST_IP:9471``); ``None`` disables the hook.
    pod, namespace : str or None
        This pod's name and namespace; either ``None`` disables the hook.
    flush_every : int
        Post once this many iterations are pending.
    flush_interval_s : float
        ...or once this long has passed since the last post (and one is pending).
    timeout_s : float
        Socket timeout of a post to the agent, seconds.
    max_pause_ms : float
        Largest pause applied; longer ones are cut to it.
    max_pending : int
        Capacity of the queue of unsent iterations (oldest dropped first).
    backoff_cap_s : float
        Longest wait after repeated failed posts, seconds.
    close_timeout_s : float
        Default deadline of :meth:`close`, seconds.
    register_atexit : bool
        Call :meth:`close` at interpreter exit.
    token_file : str or None
        This pod's projected ServiceAccount token (audience ``tdmcore-controller``),
        sent with every post (module docstring); ``None`` sends none.

    Raises
    ------
    ValueError
        For non-positive or non-finite tuning numbers (a programming error, raised at
        construction, never during training).
    """

    def __init__(
        self,
        agent_url: str | None,
        pod: str | None,
        namespace: str | None,
        *,
        flush_every: int = 10,
        flush_interval_s: float = 2.0,
        timeout_s: float = 1.0,
        max_pause_ms: float = 10_000.0,
        max_pending: int = 1024,
        backoff_cap_s: float = 30.0,
        close_timeout_s: float = 1.0,
        register_atexit: bool = True,
        token_file: str | None = None,
    ) -> None:
        if flush_every < 1:
            raise ValueError(f"flush_every: must be >= 1, got {flush_every}")
        if max_pending < 1:
            raise ValueError(f"max_pending: must be >= 1, got {max_pending}")
        for name, value in (
            ("flush_interval_s", flush_interval_s),
            ("timeout_s", timeout_s),
            ("backoff_cap_s", backoff_cap_s),
            ("close_timeout_s", close_timeout_s),
        ):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name}: must be finite and > 0, got {value}")
        if not (math.isfinite(max_pause_ms) and max_pause_ms >= 0):
            raise ValueError(f"max_pause_ms: must be finite and >= 0, got {max_pause_ms}")

        url = (agent_url or "").strip().rstrip("/")
        problem = _url_problem(url) if url else None
        if problem is not None:
            log.warning("tdmcore hook disabled: %s=%r %s", ENV_AGENT_URL, url, problem)
            url = ""
        self._enabled = bool(url and pod and namespace)
        self.agent_url: str | None = url if self._enabled else None
        self.pod = pod
        self.namespace = namespace
        self.flush_every = int(flush_every)
        self.flush_interval_s = float(flush_interval_s)
        self.timeout_s = float(timeout_s)
        self.max_pause_ms = float(max_pause_ms)
        self.backoff_cap_s = float(backoff_cap_s)
        self.close_timeout_s = float(close_timeout_s)

        self._step_ctx = _Step(self)
        # (start_ms, duration_ms, comm_ms) of finished iterations, not yet sent.
        self._pending: deque[tuple[float, float, float | None]] = deque(maxlen=max_pending)
        self._lock = threading.Lock()
        self._pause_s = 0.0  # pending pause, taken (and zeroed) by the next begin()
        self._idle_s = 0.0  # idle slept in every step's compute phase
        self._shift_ms: float | None = None
        self._period_ms: float | None = None
        self._phase_period_ms: float | None = None
        self._target_phase_ms: float | None = None
        # the controller's key of this job's assigned offset; a new key is applied
        # once (the iteration starts on the target phase), then remembered
        self._align_key: str | None = None
        self._aligned_key: str | None = None
        # The open iteration, if any.
        self._open = False
        self._generation = 0
        self._start_ms = 0.0
        self._t0 = 0.0
        self._comm: list[tuple[float, float]] = []

        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._closed = False
        self._warned = False
        self._failures = 0
        self._retry_at = 0.0
        self._sent = 0
        self._dropped = 0
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self._token = TokenFile(token_file, log, "this pod's token for the controller") \
            if token_file and self._enabled else None
        self._refusal_said = False
        self._atexit: Callable[[], None] | None = None
        if self._enabled and register_atexit:
            self._atexit = functools.partial(_close_weak, weakref.ref(self))
            atexit.register(self._atexit)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **kwargs: Any) -> TrainingHook:
        """A hook configured from ``TDMCORE_AGENT_URL``, ``POD_NAME``, ``POD_NAMESPACE``
        and ``TDMCORE_TOKEN_FILE``.

        Parameters
        ----------
        environ : mapping, optional
            Defaults to :data:`os.environ`.
        **kwargs
            Passed on to the constructor (``flush_every``, ``timeout_s``...).

        Returns
        -------
        TrainingHook
            Disabled (a no-op) if any of the first three variables is missing or
            empty; without ``TDMCORE_TOKEN_FILE`` it sends no token.
        """
        env = os.environ if environ is None else environ
        kwargs.setdefault("token_file", env.get(ENV_TOKEN_FILE) or None)
        return cls(
            env.get(ENV_AGENT_URL) or None,
            env.get(ENV_POD_NAME) or None,
            env.get(ENV_POD_NAMESPACE) or None,
            **kwargs,
        )

    # -- read-only state ---------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        """Whether the hook reports (configured and not closed)."""
        return self._enabled

    @property
    def shift_ms(self) -> float | None:
        """The pod's global time shift modulo its period, from the last answer."""
        return self._shift_ms

    @property
    def period_ms(self) -> float | None:
        """The pod's period, from the last answer."""
        return self._period_ms

    @property
    def phase_period_ms(self) -> float | None:
        """The spacing of the start times that keep the pod's place (the
        controller's phase lattice), from the last answer."""
        return self._phase_period_ms

    @property
    def target_phase_ms(self) -> float | None:
        """Where iterations should start modulo :attr:`phase_period_ms` (else the
        period), from the last answer."""
        return self._target_phase_ms

    @property
    def idle_ms(self) -> float:
        """The idle every step sleeps in its compute phase, from the last answer."""
        return self._idle_s * 1000.0

    @property
    def pending_pause_ms(self) -> float:
        """The pause the next step will sleep before it starts."""
        return self._pause_s * 1000.0

    @property
    def sent_iterations(self) -> int:
        """Iterations the agent accepted (answered 200)."""
        return self._sent

    @property
    def dropped_iterations(self) -> int:
        """Iterations lost to a full queue or a failed post."""
        return self._dropped

    # -- the training thread -----------------------------------------------------------

    def step(self) -> AbstractContextManager[None]:
        """A context manager around one training step (see the module docstring)."""
        if not self._enabled:
            return _NULL_STEP
        return self._step_ctx

    def begin(self) -> None:
        """Start an iteration: sleep the pending pause, take the start time, then
        sleep the injected idle (part of the iteration's compute phase)."""
        if not self._enabled:
            return
        try:
            pause_s = self._take_pause()
            if pause_s > 0.0:
                time.sleep(pause_s)
            with self._lock:
                self._generation += 1
                self._comm = []
                self._open = True
                self._start_ms = time.time() * 1000.0
                self._t0 = time.perf_counter()
                idle_s = self._idle_s
            if idle_s > 0.0:
                time.sleep(idle_s)
        except Exception as exc:  # never raise into training
            self._warn("could not start an iteration", exc)

    def end(self, comm_ms: float | None = None) -> None:
        """Finish the iteration started by :meth:`begin` and queue it for reporting.

        Parameters
        ----------
        comm_ms : float, optional
            Communication time of the iteration; by default what the DDP comm hook
            measured, or ``null`` if it did not run.
        """
        if not self._enabled:
            return
        t1 = time.perf_counter()
        try:
            with self._lock:
                if not self._open:
                    return
                self._open = False
                intervals = self._comm
                self._comm = []
                start_ms, t0 = self._start_ms, self._t0
            duration_ms = (t1 - t0) * 1000.0
            if duration_ms <= 0.0:
                return  # cannot happen with perf_counter; the agent would refuse it
            if comm_ms is not None:
                comm = finite_number(comm_ms)
                comm = comm if comm is not None and comm >= 0.0 else None
            else:
                comm = _union_ms(intervals) if intervals else None
            if comm is not None:
                # the report protocol wants comm_ms in [0, duration_ms]: one value a
                # hair over (measured on another clock) would get the whole batch
                # refused
                comm = min(comm, duration_ms)
            pending = self._pending
            with self._lock:  # with _take_batch: the drop count stays exact
                if len(pending) == pending.maxlen:
                    self._dropped += 1
                pending.append((start_ms, duration_ms, comm))
            if self._thread is None:
                self._start_thread()
            if len(pending) >= self.flush_every and not self._wake.is_set():
                self._wake.set()
        except Exception as exc:  # never raise into training
            self._warn("could not record an iteration", exc)

    def abort(self) -> None:
        """Forget the open iteration (the step raised); it is not reported."""
        with self._lock:
            self._open = False
            self._comm = []

    def ddp_comm_hook(self, inner: CommHook | None = None) -> CommHook:
        """A PyTorch DDP communication hook that times ``inner``.

        Register it with ``ddp_model.register_comm_hook(state, hook.ddp_comm_hook())``.

        Parameters
        ----------
        inner : callable, optional
            ``(state, bucket) -> torch.futures.Future``; by default
            ``torch.distributed.algorithms.ddp_comm_hooks.default_hooks.allreduce_hook``
            (imported here, so torch is needed only when this default is used).

        Returns
        -------
        callable
            ``(state, bucket) -> future``: calls ``inner`` and returns its future
            unchanged; the time until that future completes is added to the open
            iteration's ``comm_ms``. A disabled hook returns ``inner`` itself.
        """
        if inner is None:
            # Imported here, and by name so that type checkers without torch pass.
            default_hooks = importlib.import_module(
                "torch.distributed.algorithms.ddp_comm_hooks.default_hooks"
            )
            inner = default_hooks.allreduce_hook
        if not self._enabled:
            return inner
        wrapped = inner

        def timed_comm_hook(state: Any, bucket: Any) -> Any:
            started = time.perf_counter()
            generation = self._generation
            future = wrapped(state, bucket)
            try:

                def record(done: Any) -> None:
                    finished = time.perf_counter()
                    with self._lock:
                        if self._open and self._generation == generation:
                            self._comm.append((started, finished))

                # The chained future is dropped: DDP keeps the original one, whose
                # value and errors stay exactly what ``inner`` produced.
                future.then(record)
            except Exception as exc:
                self._warn("could not time a DDP bucket", exc)
            return future

        # DDP's register_comm_hook refuses a hook whose ``bucket`` or return is
        # annotated with anything but dist.GradBucket / Future[Tensor]; this module's
        # annotations are strings (postponed), so the hook carries none (found by the
        # real training loop of tests/k8s_bridge/test_k8s_train.py)
        timed_comm_hook.__annotations__ = {}
        return timed_comm_hook

    # -- the background thread ---------------------------------------------------------

    def _start_thread(self) -> None:
        thread = threading.Thread(target=self._run, name="tdmcore-hook", daemon=True)
        self._thread = thread
        thread.start()

    def _run(self) -> None:
        try:
            last_post = time.monotonic()
            while not self._closing.is_set():
                now = time.monotonic()
                if now < self._retry_at:
                    # Backing off: only close() interrupts; the deque drops old data.
                    self._closing.wait(self._retry_at - now)
                    continue
                due = last_post + self.flush_interval_s
                if len(self._pending) < self.flush_every and now < due:
                    self._wake.wait(due - now)
                    self._wake.clear()
                    continue
                last_post = time.monotonic()
                if self._pending:
                    self._post_batch(self.timeout_s)
        except Exception as exc:  # pragma: no cover - a bug; stop reporting, never crash
            self._warn("the reporting thread stopped", exc)

    def _take_batch(self) -> list[dict[str, float | None]]:
        pending = self._pending
        with self._lock:
            taken = [pending.popleft() for _ in range(min(len(pending), MAX_ITERATIONS))]
        return [
            {"start_ms": start_ms, "duration_ms": duration_ms, "comm_ms": comm_ms}
            for start_ms, duration_ms, comm_ms in taken
        ]

    def _drop(self, count: int) -> None:
        with self._lock:
            self._dropped += count

    def _post_batch(self, timeout_s: float) -> None:
        batch = self._take_batch()
        if not batch:
            return
        body = json.dumps(
            {"namespace": self.namespace, "pod": self.pod, "iterations": batch}, allow_nan=False
        ).encode()
        headers = {"Content-Type": "application/json"}
        token = self._token.read() if self._token is not None else None
        if token:
            headers["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(
            f"{self.agent_url}{REPORT_PATH}", data=body, headers=headers, method="POST")
        try:
            with self._opener.open(request, timeout=timeout_s) as response:
                raw = response.read(MAX_ANSWER_BYTES + 1)
        except urllib.error.HTTPError as exc:
            with exc:
                why = _reason(exc) if exc.code in (401, 403) else ""
            self._drop(len(batch))
            if exc.code in (401, 403) and not self._refusal_said:
                self._refusal_said = True
                log.warning("tdmcore hook: the controller refuses this pod's reports "
                            "(HTTP %d: %s)%s; training goes on unregulated", exc.code, why,
                            "" if token else f" -- no token was sent: set {ENV_TOKEN_FILE} "
                            "to the pod's projected token (docs/kubernetes.md)")
            if 400 <= exc.code < 500 and exc.code != 429:
                log.debug("agent refused a report: HTTP %d", exc.code)
                self._failures = 0
                return
            self._failed(f"HTTP {exc.code}")
            return
        except (OSError, HTTPException, ValueError) as exc:
            self._drop(len(batch))
            self._failed(f"{type(exc).__name__}: {exc}")
            return
        self._failures = 0
        self._apply_answer(raw)
        self._sent += len(batch)  # after the answer is applied: tests wait on this count

    def _failed(self, why: str) -> None:
        self._failures += 1
        delay = min(self.backoff_cap_s, BACKOFF_BASE_S * 2.0 ** min(self._failures - 1, 32))
        self._retry_at = time.monotonic() + delay
        self._warn(f"cannot reach the tdmcore agent at {self.agent_url} ({why})", None)

    def _take_pause(self) -> float:
        """The pause (s) to sleep before this iteration: an alignment to a new target
        phase, else a pending regulation pause, recomputed against the target phase
        when one is known (the answer is one flush old; the phase is not)."""
        if not self._pause_s and (self._align_key is None
                                  or self._align_key == self._aligned_key):
            return 0.0
        with self._lock:
            target = self._target_phase_ms
            period = self._phase_period_ms or self._period_ms
            align = self._align_key is not None and self._align_key != self._aligned_key
            pending, self._pause_s = self._pause_s, 0.0
            if align:
                self._aligned_key = self._align_key
        if target is not None and period and (align or pending > 0.0):
            pause_ms = (target - time.time() * 1000.0) % period
            return min(pause_ms, self.max_pause_ms) / 1000.0
        return pending

    def _apply_answer(self, raw: bytes) -> None:
        try:
            answer = json.loads(raw)
        except (ValueError, RecursionError):
            return
        if not isinstance(answer, dict) or answer.get("controller") == "unreachable":
            return  # the agent's fail-open reply carries no instruction
        pause_ms = finite_number(answer.get("pause_ms"))
        if pause_ms is not None and pause_ms >= 0.0:
            with self._lock:
                self._pause_s = min(pause_ms, self.max_pause_ms) / 1000.0
        if "idle_ms" in answer:
            raw_idle = answer["idle_ms"]
            idle_ms = 0.0 if raw_idle is None else finite_number(raw_idle)
            if idle_ms is not None and idle_ms >= 0.0:
                with self._lock:
                    self._idle_s = min(idle_ms, self.max_pause_ms) / 1000.0
        for key in ("shift_ms", "period_ms", "phase_period_ms", "target_phase_ms"):
            if key not in answer:
                continue
            value = answer[key]
            number = finite_number(value)
            if number is not None and key in ANSWER_PERIODS and number <= 0.0:
                continue  # a period <= 0 is garbage: the old value stands
            if value is None or number is not None:
                setattr(self, f"_{key}", number)
        align = answer.get("align")
        if align is None or isinstance(align, str):
            with self._lock:
                self._align_key = align

    def _warn(self, what: str, exc: BaseException | None) -> None:
        detail = f"{what}: {exc!r}" if exc is not None else what
        if not self._warned:
            self._warned = True
            log.warning("tdmcore hook: %s (further problems are logged at DEBUG)", detail)
        else:
            log.debug("tdmcore hook: %s", detail)

    # -- shutting down -----------------------------------------------------------------

    def close(self, timeout_s: float | None = None) -> None:
        """Send what is pending (unless backing off) and stop, within ``timeout_s``.

        Parameters
        ----------
        timeout_s : float, optional
            Deadline, seconds; defaults to ``close_timeout_s``. The call returns by then
            even if the agent hangs (the daemon thread is then abandoned).
        """
        if self._closed:
            return
        self._closed = True
        was_enabled, self._enabled = self._enabled, False
        if self._atexit is not None:
            atexit.unregister(self._atexit)
            self._atexit = None
        if not was_enabled:
            return
        deadline = time.monotonic() + (self.close_timeout_s if timeout_s is None else timeout_s)
        self._closing.set()
        self._wake.set()
        thread = self._thread
        try:
            if thread is not None:
                thread.join(max(0.0, deadline - time.monotonic()))
                if thread.is_alive():
                    return  # stuck in a post; its socket timeout ends it later
            remaining = deadline - time.monotonic()
            if self._pending and remaining > 0.0 and time.monotonic() >= self._retry_at:
                self._flush_within(deadline)
        except Exception as exc:
            self._warn("could not flush on close", exc)

    def _flush_within(self, deadline: float) -> None:
        """Post what is pending from a helper thread, waiting no later than ``deadline``."""

        def flush() -> None:
            try:
                while self._pending and time.monotonic() < deadline:
                    timeout = min(self.timeout_s, deadline - time.monotonic())
                    if timeout <= 0.0:
                        break
                    self._post_batch(timeout)
                    if time.monotonic() < self._retry_at:
                        break  # it failed: do not try again
            except Exception as exc:  # pragma: no cover - a bug
                self._warn("could not flush on close", exc)

        flusher = threading.Thread(target=flush, name="tdmcore-hook-flush", daemon=True)
        flusher.start()
        flusher.join(max(0.0, deadline - time.monotonic()))
