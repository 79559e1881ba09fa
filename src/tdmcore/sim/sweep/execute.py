"""Running a sweep's tasks: on Dask, or one after the other here; a results cache.

:func:`run_tasks` takes the tasks of a :class:`~.spec.SweepSpec`, answers those
the cache already holds, and runs the rest:

* on a ``dask.distributed`` cluster: a :class:`distributed.LocalCluster` of
  worker *processes* on the loopback interface (one thread each, all cores by
  default; no dashboard), closed at the end; or an existing cluster's scheduler
  (``tcp://HOST:PORT``), whose workers must run the same tdmcore version;
* or serially in this process (``serial=True``), the reference the Dask run must
  equal.

A task that raises is reported (``on_retry``, with its parameters and the error)
and submitted once more; if it fails again its :class:`Outcome` carries the error.
No task is dropped: there is one outcome per task, in the tasks' order.  Each
finished task is written to the cache as it arrives, so an interrupted sweep keeps
what it had done.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import tasks as _tasks
from .spec import Task, canonical
from .tasks import code_digest, run_task, tdmcore_version

__all__ = ["Outcome", "ResultCache", "default_cache_dir", "run_tasks"]

log = logging.getLogger("tdmcore")

#: Attempts per task: the first run and one retry.
ATTEMPTS = 2
#: Seconds to wait for an existing scheduler to answer.
CONNECT_TIMEOUT_S = 20


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
    version and a digest of tdmcore's own code and data (:func:`code_digest`:
    a development checkout changes without a new version), so a new version, a
    changed file or any changed parameter runs again; only successful tasks are
    kept.  Files are written atomically.
    """

    def __init__(self, folder: Path, version: str | None = None) -> None:
        self.folder = Path(folder)
        self.version = version if version is not None else tdmcore_version()
        self.code = code_digest()

    def key(self, task: Task) -> str:
        text = canonical({"tdmcore": self.version, "code": self.code,
                          "task": task.as_dict()})
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def path(self, task: Task) -> Path:
        return self.folder / f"{self.key(task)}.json"

    def get(self, task: Task) -> dict[str, Any] | None:
        """The task's cached metrics, or None (a damaged entry counts as none)."""
        try:
            data = json.loads(self.path(task).read_text("utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("task") != task.as_dict() \
                or not isinstance(data.get("metrics"), dict):
            return None
        return data["metrics"]  # type: ignore[no-any-return]

    def put(self, task: Task, metrics: dict[str, Any]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        body = json.dumps({"tdmcore": self.version, "task": task.as_dict(),
                           "metrics": metrics}, indent=1, allow_nan=True)
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(body)
            os.replace(tmp, self.path(task))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
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

    Notes
    -----
    The local cluster's workers are spawned processes, which import the calling
    script's main module again: a script that calls this must do so under
    ``if __name__ == "__main__":`` (the ``tdmcore`` command does).

    Raises
    ------
    ValueError
        ``scheduler``: unreachable, or its workers run another tdmcore version;
        ``workers`` below 1.
    """
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 1):
        raise ValueError(f"workers: expected an integer >= 1, got {workers!r}")
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
        _check_address(scheduler)
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
    # Ctrl-C reaches the whole process group: the workers ignore it (their preload,
    # tdmcore.sim.sweep.worker_setup) and this process closes them.
    cluster = LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1,
                           processes=True, host="127.0.0.1", dashboard_address=None,
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


def _check_address(scheduler: str) -> None:
    """A ValueError naming ``scheduler`` unless Dask can read it as an address.

    Checked before any Client exists: a Client that fails inside its constructor
    still closes itself when collected, which waits 40 s and prints a traceback.
    """
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, location = parse_address(scheduler)
        if scheme in ("tcp", "tls"):
            host, _ = parse_host_port(location)
            if not host:
                raise ValueError("missing host")
    except (ValueError, TypeError) as exc:
        raise ValueError(f"scheduler: {scheduler!r} is not a Dask scheduler address "
                         f"(e.g. tcp://HOST:8786): {exc}") from None


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
