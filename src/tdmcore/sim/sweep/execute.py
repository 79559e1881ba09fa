"""Running a sweep's tasks: on Dask, or one after the other here; a results cache.

:func:`run_tasks` takes the tasks of a :class:`~.spec.SweepSpec`, answers those
the cache already holds, and runs the rest:

* on a ``dask.distributed`` cluster: a :class:`distributed.LocalCluster` of
  worker *processes* on the loopback interface (one thread each, all cores by
  default; no dashboard, and its scheduler's HTTP routes on a free port, so a
  busy 8787 is no warning), closed at the end; or an existing cluster's scheduler
  (``tcp://HOST:PORT``), which must answer as a Dask scheduler
  (:func:`check_scheduler`) and whose workers must run the same tdmcore version;
* or serially in this process (``serial=True``), the reference the Dask run must
  equal.

A task that raises is reported (``on_retry``, with its parameters and the error)
and submitted once more; if it fails again its :class:`Outcome` carries the error.
No task is dropped: there is one outcome per task, in the tasks' order.  Each
finished task is written to the cache as it arrives, so an interrupted sweep keeps
what it had done.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import socket
import struct
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import _validation as v
from ..policies import policy_source
from . import tasks as _tasks
from .spec import Task, canonical
from .tasks import code_digest, run_task, tdmcore_version

__all__ = ["Outcome", "ResultCache", "check_scheduler", "default_cache_dir", "run_tasks"]

log = logging.getLogger("tdmcore")

#: Attempts per task: the first run and one retry.
ATTEMPTS = 2
#: Seconds to wait for an existing scheduler to answer.
CONNECT_TIMEOUT_S = 20
#: Seconds a Dask scheduler may take to send its handshake on a new connection (it
#: sends it at once, before reading anything): a service that stays silent longer
#: (an HTTP server, a dashboard) is no scheduler.
HANDSHAKE_TIMEOUT_S = 5.0
#: The most bytes a Dask handshake takes (it is about 60).
MAX_HANDSHAKE_BYTES = 1 << 16
#: The largest TCP port.
MAX_PORT = 65535


@dataclass(frozen=True)
class Outcome:
    """What became of one task: its metrics, or the error of its last attempt."""

    task: Task
    metrics: dict[str, Any] | None
    error: str | None = None
    attempts: int = 1
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.metrics is not None


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/tdmcore/sweeps`` (``~/.cache/tdmcore/sweeps``)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "tdmcore" / "sweeps"


class ResultCache:
    """Finished tasks on disk, one JSON file per task.

    The key is the sha256 of the task (:meth:`Task.as_dict`: run, scenario and a
    scenario file's content, group, policy, seed, parameters), the tdmcore
    version, a digest of tdmcore's own code and data (:func:`code_digest`:
    a development checkout changes without a new version) and, for a policy of
    your own (``MODULE:CALLABLE``), the content of the file of the module that
    defines ``CALLABLE`` (:func:`~tdmcore.sim.policies.policy_source`), so a new version, a
    changed file or any changed parameter runs again.  A task of a policy whose
    module file cannot be read is not cached (a warning says so); only successful
    tasks are kept.  Files are written atomically.

    Raises
    ------
    ValueError
        ``cache: cannot write to FOLDER: ...`` from :meth:`check_writable` and
        :meth:`put`.
    """

    def __init__(self, folder: Path, version: str | None = None) -> None:
        self.folder = Path(folder)
        self.version = version if version is not None else tdmcore_version()
        self.code = code_digest()
        self._sources: dict[str, str | None] = {}

    def _policy_source(self, policy: str) -> str | None:
        """The policy's module digest ('' for a built-in policy), once per policy."""
        if policy not in self._sources:
            source = policy_source(policy)
            if source is None:
                log.warning("%s: the file of its module cannot be read: its tasks are "
                            "not cached", policy)
            self._sources[policy] = source
        return self._sources[policy]

    def key(self, task: Task) -> str | None:
        """The task's key, or None when it is not cached (its policy's module file
        cannot be read)."""
        source = self._policy_source(task.policy)
        if source is None:
            return None
        data: dict[str, Any] = {"tdmcore": self.version, "code": self.code,
                                "task": task.as_dict()}
        if source:
            data["policy_source"] = source
        return hashlib.sha256(canonical(data).encode("utf-8")).hexdigest()

    def path(self, task: Task) -> Path | None:
        """The task's file, or None when it is not cached."""
        key = self.key(task)
        return None if key is None else self.folder / f"{key}.json"

    def check_writable(self) -> None:
        """Create the folder if missing and write (and remove) a file in it.

        Raises
        ------
        ValueError
            ``cache: cannot write to FOLDER: ...`` when that fails.
        """
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".json")
            os.close(fd)
            os.unlink(tmp)
        except OSError as exc:
            raise self._cannot_write(exc) from None

    def _cannot_write(self, exc: OSError) -> ValueError:
        return ValueError(f"cache: cannot write to {self.folder}: {exc.strerror or exc}")

    def get(self, task: Task) -> dict[str, Any] | None:
        """The task's cached metrics, or None (a damaged entry counts as none)."""
        path = self.path(task)
        if path is None:
            return None
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("task") != task.as_dict() \
                or not isinstance(data.get("metrics"), dict):
            return None
        return data["metrics"]  # type: ignore[no-any-return]

    def put(self, task: Task, metrics: dict[str, Any]) -> None:
        """Keep the task's metrics (nothing for a task that is not cached)."""
        path = self.path(task)
        if path is None:
            return
        body = json.dumps({"tdmcore": self.version, "task": task.as_dict(),
                           "metrics": metrics}, indent=1, allow_nan=True)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".json")
        except OSError as exc:
            raise self._cannot_write(exc) from None
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(body)
            os.replace(tmp, path)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(exc, OSError):
                raise self._cannot_write(exc) from None
            raise


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def run_tasks(tasks: Sequence[Task], *, cache: ResultCache | None = None,
              serial: bool = False, scheduler: str | None = None,
              workers: int | None = None,
              on_done: Callable[[Outcome], None] | None = None,
              on_retry: Callable[[Task, str], None] | None = None) -> list[Outcome]:
    """Run ``tasks`` (cached ones are not run again) and return one outcome each.

    Parameters
    ----------
    tasks : sequence of Task
        From :attr:`SweepSpec.tasks`.
    cache : ResultCache, optional
        Finished tasks are read from and written to it.
    serial : bool
        Run here, one task after the other, instead of on Dask.
    scheduler : str, optional
        An existing Dask scheduler's address (``tcp://HOST:PORT``); default: a
        :class:`distributed.LocalCluster` on 127.0.0.1, closed at the end.
    workers : int, optional
        The local cluster's worker processes (default: every core).
    on_done : callable, optional
        Called with each outcome as it arrives (cached ones first).
    on_retry : callable, optional
        Called with a task and its error when its first attempt failed.

    Returns
    -------
    list of Outcome
        In the order of ``tasks``.

    Raises
    ------
    ValueError
        ``scheduler``: malformed, unreachable, not a Dask scheduler
        (:func:`check_scheduler`), or its workers run another tdmcore version;
        ``workers`` below 1; ``cache``: its folder cannot be written (checked
        before any task runs).

    Notes
    -----
    The local cluster's workers are spawned processes, which import the calling
    script's main module again: a script that calls this must do so under
    ``if __name__ == "__main__":`` (the ``tdmcore`` command does).

    A task that raises :class:`SystemExit` (a policy that calls ``sys.exit``) has
    failed, here and on Dask alike (:func:`~.tasks.run_task`); Ctrl-C
    (:class:`KeyboardInterrupt`) stops the sweep.
    """
    if workers is not None:
        workers = v.whole("workers", workers)
    if scheduler is not None:  # refused whether or not a task needs it (all cached)
        _check_address(scheduler)
    if cache is not None:
        cache.check_writable()
    done: dict[int, Outcome] = {}
    todo: list[int] = []
    for i, task in enumerate(tasks):
        hit = cache.get(task) if cache is not None else None
        if hit is not None:
            done[i] = Outcome(task, hit, cached=True)
            if on_done is not None:
                on_done(done[i])
        else:
            todo.append(i)

    def finish(i: int, metrics: dict[str, Any] | None, error: str | None,
               attempts: int) -> None:
        outcome = Outcome(tasks[i], metrics, error, attempts)
        if metrics is not None and cache is not None:
            cache.put(tasks[i], metrics)
        done[i] = outcome
        if on_done is not None:
            on_done(outcome)

    def failed(i: int, exc: BaseException, attempt: int) -> bool:
        """Report a failed attempt; True when the task gets another one."""
        if attempt < ATTEMPTS:
            if on_retry is not None:
                on_retry(tasks[i], _error(exc))
            return True
        finish(i, None, _error(exc), attempt)
        return False

    if todo:
        if serial:
            for i in todo:
                for attempt in range(1, ATTEMPTS + 1):
                    try:
                        metrics = run_task(tasks[i])
                    except Exception as exc:  # a task's failure is its outcome
                        if failed(i, exc, attempt):
                            continue
                    else:
                        finish(i, metrics, None, attempt)
                    break
        else:
            _run_on_dask(tasks, todo, scheduler, workers, finish, failed)
    return [done[i] for i in range(len(tasks))]


@contextlib.contextmanager
def _client(scheduler: str | None, workers: int | None) -> Iterator[Any]:
    """A Dask client: to ``scheduler``, or to a loopback LocalCluster closed after."""
    from distributed import Client, LocalCluster

    if scheduler is not None:
        check_scheduler(scheduler)
        try:
            client = Client(scheduler, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            raise ValueError(f"scheduler: cannot reach {scheduler}: {exc}") from None
        try:
            _check_versions(client, scheduler)
            yield client
        finally:
            client.close()
        return
    # Ctrl-C reaches the whole process group, and this process closes the workers.
    # A worker process that took it while still importing its modules would print a
    # traceback, so SIGINT is ignored while the cluster starts: processes inherit
    # that disposition (not a handler, nor a blocked mask), so the workers start
    # ignoring it.  A Ctrl-C in those 1-3 s is lost; one after them stops the
    # sweep here.  A worker started later ignores SIGINT by its preload
    # (tdmcore.sim.sweep.worker_setup) once its modules are imported.
    with _sigint_ignored():
        cluster = LocalCluster(n_workers=workers or os.cpu_count() or 1,
                               threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address=None,  # and its routes on a free port:
                               scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                               silence_logs=logging.CRITICAL,  # failures: on_retry, Outcome
                               preload=["tdmcore.sim.sweep.worker_setup"])
    try:
        client = Client(cluster, set_as_default=False)
        try:
            yield client
        finally:
            client.close()
    finally:
        cluster.close()


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Ignore SIGINT in this process for the block (the main thread only: elsewhere
    Python cannot change a signal's disposition, and nothing is changed)."""
    import signal
    import threading

    # off the main thread Python cannot change it; a handler installed outside
    # Python (getsignal() None) could not be put back: leave both alone
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is None:
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def _network_schemes() -> tuple[str, ...]:
    """Dask's protocols that reach a scheduler at HOST:PORT (not ``inproc``, which
    stays in one process)."""
    from distributed.comm.registry import backends

    return tuple(sorted(set(backends) - {"inproc"}))


def _check_address(scheduler: str) -> None:
    """A ValueError naming ``scheduler`` unless it is ``PROTOCOL://HOST:PORT`` with
    a protocol of :func:`_network_schemes` and a port in 1-65535.

    Checked before any Client exists: a Client that fails inside its constructor
    still closes itself when collected, which waits 40 s and prints a traceback.
    """
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, location = parse_address(scheduler)
        schemes = _network_schemes()
        if scheme not in schemes:
            raise ValueError(f"unknown protocol {scheme!r}; Dask takes "
                             f"{', '.join(schemes)}")
        host, port = parse_host_port(location)
        if not host:
            raise ValueError("missing host")
        if not 1 <= port <= MAX_PORT:
            raise ValueError(f"port {port} is outside 1-{MAX_PORT}")
    except (ValueError, TypeError) as exc:
        raise ValueError(f"scheduler: {scheduler!r} is not a Dask scheduler address "
                         f"(e.g. tcp://HOST:8786): {exc}") from None


def _not_a_scheduler(scheduler: str, why: str) -> ValueError:
    return ValueError(f"scheduler: {scheduler} is not a Dask scheduler ({why}); a "
                      "scheduler's address is tcp://HOST:8786 by default (8787 is its "
                      "dashboard)")


def _recv(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _handshake(scheduler: str, host: str, port: int) -> None:
    """Read the first bytes a ``tcp://`` service sends on a new connection and
    refuse it unless they are a Dask handshake: an 8-byte length, then frames that
    hold its ``compression`` and ``python`` fields.  Read here, not by Dask's own
    reader, which takes any first 8 bytes for a length and allocates it (``HTTP/1.1``
    is 3 EiB) or waits forever on a service that waits for a request."""
    try:
        sock = socket.create_connection((host, port), timeout=HANDSHAKE_TIMEOUT_S)
    except OSError as exc:
        raise ValueError(f"scheduler: cannot reach {scheduler}: "
                         f"{exc.strerror or exc}") from None
    with sock:
        try:
            head = _recv(sock, 8)
            size = struct.unpack("<Q", head)[0] if len(head) == 8 else 0
            body = _recv(sock, size) if 0 < size <= MAX_HANDSHAKE_BYTES else b""
        except TimeoutError:
            raise _not_a_scheduler(scheduler, f"it sent nothing in {HANDSHAKE_TIMEOUT_S:g} "
                                              "s, a Dask scheduler speaks first") from None
        except OSError as exc:
            raise _not_a_scheduler(scheduler, f"reading from it failed: "
                                              f"{exc.strerror or exc}") from None
    if not head:
        raise _not_a_scheduler(scheduler, "it closed the connection at once")
    if not (b"compression" in body and b"python" in body):
        shown = head.decode("ascii", "replace")
        shown = "".join(c if c.isprintable() else "." for c in shown)
        raise _not_a_scheduler(scheduler, f"it answered {shown!r}, not a Dask handshake")


def _identity(scheduler: str) -> dict[str, Any]:
    """The server's ``identity``, over Dask's own protocol (its handshake checked)."""
    from distributed.comm.core import connect

    async def ask() -> Any:
        comm = await connect(scheduler, timeout=CONNECT_TIMEOUT_S)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await asyncio.wait_for(comm.read(), CONNECT_TIMEOUT_S)
        finally:
            await comm.close()

    try:
        answer = asyncio.run(ask())
    except (OSError, TimeoutError, ValueError) as exc:
        raise ValueError(f"scheduler: cannot reach {scheduler}: {exc}") from None
    return answer if isinstance(answer, dict) else {}


def check_scheduler(scheduler: str) -> None:
    """Refuse, in seconds, an address that is no Dask scheduler.

    A malformed address (:func:`_check_address`); for ``tcp://``, a service that
    does not open with Dask's handshake within :data:`HANDSHAKE_TIMEOUT_S` (the
    dashboard's port 8787, any other TCP service), and a Dask server that is not a
    scheduler (a worker, a nanny: its ``identity``).  Other protocols (``tls``,
    ``ws``, ...) are checked by connecting.

    Raises
    ------
    ValueError
        ``scheduler: ADDRESS is not a Dask scheduler (...)`` or ``scheduler: cannot
        reach ADDRESS: ...``.
    """
    from distributed.comm.addressing import parse_address, parse_host_port

    _check_address(scheduler)
    scheme, location = parse_address(scheduler)
    if scheme != "tcp":
        return
    host, port = parse_host_port(location)
    _handshake(scheduler, host, port)
    kind = _identity(scheduler).get("type")
    if kind != "Scheduler":
        raise _not_a_scheduler(scheduler, f"it is a Dask {kind or 'server'}")


def _check_versions(client: Any, scheduler: str) -> None:
    mine = tdmcore_version()
    try:
        theirs = client.run(_tasks.tdmcore_version)  # each worker's own
    except Exception as exc:  # a worker without tdmcore: ModuleNotFoundError inside
        raise ValueError(f"scheduler: the workers of {scheduler} cannot run tdmcore "
                         f"({_error(exc)}); install tdmcore {mine} there") from None
    if not theirs:
        raise ValueError(f"scheduler: {scheduler} has no workers")
    other = sorted({v for v in theirs.values() if v != mine})
    if other:
        raise ValueError(f"scheduler: workers of {scheduler} run tdmcore "
                         f"{', '.join(other)}, this is {mine}")


def _run_on_dask(tasks: Sequence[Task], todo: list[int], scheduler: str | None,
                 workers: int | None, finish: Callable[..., None],
                 failed: Callable[[int, BaseException, int], bool]) -> None:
    from distributed import as_completed

    with _client(scheduler, workers) as client:
        pending: dict[Any, tuple[int, int]] = {}

        def submit(i: int, attempt: int) -> Any:
            future = client.submit(run_task, tasks[i], pure=False,
                                   key=f"tdmcore-sweep-{i}-{attempt}-{os.getpid()}")
            pending[future] = (i, attempt)
            return future

        queue = as_completed([submit(i, 1) for i in todo], loop=client.loop)
        try:
            for future in queue:
                i, attempt = pending.pop(future)
                try:
                    metrics = future.result()
                except Exception as exc:  # raised by the task on its worker
                    if failed(i, exc, attempt):
                        queue.add(submit(i, attempt + 1))
                    continue
                finish(i, metrics, None, attempt)
        finally:
            if pending:
                client.cancel(list(pending))
