"""Figures drawn beside the simulation, in worker processes.

Matplotlib is single-threaded and a report's figures are independent, so the
command line draws them in processes of their own.  The workers are forked
*before* the simulation starts (and before any progress-bar thread): they import
matplotlib while the simulation runs, and each group's figures are drawn as soon as
that group's runs are finished, while the next group simulates.  The parent process
never imports matplotlib; it sends each figure as the name of a function of
:mod:`tdmcore.app.plots` and its arguments (pickled
:class:`~tdmcore.sim.cluster.RunResult` objects, about 100 kB for a snapshot).

Where the platform cannot fork, or on one core, the figures are drawn in this
process, one after the other, when :meth:`PlotPool.finish` is called; a disabled
pool (``--no-plots``) draws nothing.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from .signals import held

__all__ = ["PlotPool"]

_Task = tuple[str, tuple[Any, ...], dict[str, Any]]


def _worker_start() -> None:
    """A worker's start: Ctrl-C is the parent's to handle, and SIGTERM (the pool's
    own way to stop a worker) ends it plainly, not through the parent's handler
    inherited at fork; load matplotlib, its fonts and the Agg renderer while the
    parent simulates."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from . import plots  # noqa: F401  (the drawing functions, imported once per worker)

    fig = Figure(figsize=(1.0, 1.0))
    FigureCanvasAgg(fig)
    fig.add_subplot().set_title("warm")
    fig.canvas.draw()  # the font cache and the Agg renderer, off the critical path


def _draw(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    from . import plots

    getattr(plots, name)(*args, **kwargs)


@dataclass
class PlotPool:
    """Draw figures in forked workers while the caller goes on (see the module).

    Parameters
    ----------
    enabled : bool
        False: :meth:`submit` is ignored (``--no-plots``).
    workers : int, optional
        Worker processes; default: the number of cores.  1, or a platform without
        ``fork``, draws in this process at :meth:`finish`.

    Notes
    -----
    Create the pool before any thread is started (a progress bar's refresh thread,
    for instance): the workers are forked at creation.
    """

    enabled: bool = True
    workers: int | None = None
    _pool: ProcessPoolExecutor | None = field(default=None, init=False, repr=False)
    _warmup: Future[None] | None = field(default=None, init=False, repr=False)
    _running: set[Future[None]] = field(default_factory=set, init=False, repr=False)
    _pending: deque[_Task] = field(default_factory=deque, init=False, repr=False)
    _done: int = field(default=0, init=False, repr=False)
    _n: int = field(default=1, init=False, repr=False)

    def __post_init__(self) -> None:
        n = self.workers if self.workers is not None else (os.cpu_count() or 1)
        if n < 1:
            raise ValueError(f"workers: expected at least 1, got {n}")
        self._n = n
        if self.enabled and n > 1 and "fork" in multiprocessing.get_all_start_methods():
            try:
                with held():  # a signal in the fork would leave workers no one stops
                    pool = ProcessPoolExecutor(
                        n, mp_context=multiprocessing.get_context("fork"),
                        initializer=_worker_start)
                    # the first submit forks every worker now, before the caller
                    # starts threads
                    self._warmup = pool.submit(_noop)
                    self._pool = pool  # whole
            except BaseException:  # Ctrl-C or SIGTERM, held until the pool was whole
                self.close()
                raise

    @property
    def parallel(self) -> bool:
        """Whether figures are drawn in worker processes."""
        return self._pool is not None

    def submit(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None,
               *, first: bool = False) -> None:
        """Draw ``tdmcore.app.plots.<name>(*args, **kwargs)`` (a ``plot_*`` function
        that writes its file); ``first``: before the figures still waiting."""
        if not self.enabled:
            return
        if not name.startswith("plot_"):
            raise ValueError(f"name: expected a plot_* function of tdmcore.app.plots, "
                             f"got {name!r}")
        task = (name, args, kwargs or {})
        if first:
            self._pending.appendleft(task)
        else:
            self._pending.append(task)
        self._pump()

    def _pump(self) -> None:
        """Keep two figures per worker in the pool, the rest here (so that a figure
        submitted ``first`` overtakes them); collect the finished ones."""
        if self._pool is None:
            return
        for future in [f for f in self._running if f.done()]:
            future.result()  # a worker's error is raised here
            self._running.discard(future)
            self._done += 1
        while self._pending and len(self._running) < 2 * self._n:
            self._running.add(self._pool.submit(_draw, *self._pending.popleft()))

    def finish(self, progress: Any = None) -> None:
        """Wait for every figure; ``progress(done, total)`` after each one.

        A worker's error is raised here (:meth:`close` then drops the rest).
        """
        if self._pool is None:
            total = len(self._pending)
            while self._pending:
                _draw(*self._pending.popleft())
                self._done += 1
                if progress is not None:
                    progress(self._done, total)
            return
        if self._warmup is not None:
            self._warmup.result()  # the workers' start: its error first
        self._pump()
        while self._running:
            wait(self._running, return_when=FIRST_COMPLETED)
            self._pump()
            if progress is not None:
                progress(self._done, self._done + len(self._running) + len(self._pending))

    def close(self) -> None:
        """Stop the workers; figures not yet started are dropped."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> PlotPool:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _noop() -> None:
    return None

