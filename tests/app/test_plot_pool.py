"""The plot pool: figures drawn in forked workers beside the simulation."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from tdmcore.app import plots
from tdmcore.app.plot_pool import PlotPool
from tdmcore.sim.cluster import RunResult, run_cluster
from tdmcore.sim.scenarios import metronome_snapshots

FORK = "fork" in multiprocessing.get_all_start_methods()


@pytest.fixture(scope="module")
def s1() -> dict[str, RunResult]:
    sc = metronome_snapshots(window_s=20)["S1"]
    return {p: run_cluster(sc.sim, sc.jobs, p) for p in ("default", "metronome")}


def _record(monkeypatch: pytest.MonkeyPatch, log: Path) -> None:
    """A ``plots.plot_record(tag)`` that appends ``tag`` to ``log`` (any process)."""
    def plot_record(tag: str) -> None:
        with log.open("a") as f:
            f.write(tag + "\n")
    monkeypatch.setattr(plots, "plot_record", plot_record, raising=False)


def test_serial_pool_draws_in_order_and_first_overtakes(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    log = tmp_path / "log"
    _record(monkeypatch, log)
    seen: list[tuple[int, int]] = []
    with PlotPool(workers=1) as pool:
        assert not pool.parallel
        for tag in ("a", "b"):
            pool.submit("plot_record", (tag,))
        pool.submit("plot_record", ("c",), first=True)
        assert not log.exists()  # drawn at finish, in this process
        pool.finish(lambda done, total: seen.append((done, total)))
    assert log.read_text().split() == ["c", "a", "b"]
    assert seen == [(1, 3), (2, 3), (3, 3)]


@pytest.mark.skipif(not FORK, reason="the workers are forked")
def test_parallel_pool_writes_every_figure(tmp_path: Path, s1: dict[str, RunResult]
                                           ) -> None:
    with PlotPool(workers=2) as pool:
        assert pool.parallel
        pool.submit("plot_link_utilization", (s1, tmp_path / "links.png"), {"title": "S1"})
        pool.submit("plot_shared_links", (s1["metronome"], tmp_path / "circle.png"))
        pool.submit("plot_jct", ({"S1": s1}, tmp_path / "jct.png"), first=True)
        counts: list[int] = []
        pool.finish(lambda done, total: counts.append(total))
    assert counts and counts[-1] == 3
    for name in ("links.png", "circle.png", "jct.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(not FORK, reason="the workers are forked")
def test_a_workers_error_is_raised_by_finish(tmp_path: Path, s1: dict[str, RunResult]
                                             ) -> None:
    with PlotPool(workers=2) as pool:
        pool.submit("plot_link_utilization", (s1, tmp_path / "links.bmp"))
        with pytest.raises(ValueError, match="^path: "):
            pool.finish()


def test_disabled_pool_draws_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                     ) -> None:
    log = tmp_path / "log"
    _record(monkeypatch, log)
    with PlotPool(enabled=False) as pool:
        assert not pool.parallel
        pool.submit("plot_record", ("a",))
        pool.finish()
    assert not log.exists()


@pytest.mark.parametrize("make, match", [
    (lambda: PlotPool(workers=0), "^workers: "),
    (lambda: PlotPool(workers=1).submit("figure_jct", ({},)), "^name: "),
])
def test_bad_input(make: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make()


# Ctrl-C, or SIGTERM through the command line's own handler, right after the fork of
# the workers and before the thread that manages them starts: raised there, the
# workers were left waiting for work and the interpreter waited for them at exit
# for ever (the signal test of tests/app/test_cli_daily.py timed out so under load).
_SIGNAL_IN_THE_FORK = """
import os, signal, sys
import concurrent.futures.process as cfp
from tdmcore.app.signals import Terminated, raise_terminated
from tdmcore.app.plot_pool import PlotPool

sig = signal.Signals[sys.argv[1]]
if sig == signal.SIGTERM:
    signal.signal(sig, raise_terminated)
start = cfp._ExecutorManagerThread.start
def signal_then_start(self):
    os.kill(os.getpid(), sig)
    return start(self)
cfp._ExecutorManagerThread.start = signal_then_start
try:
    with PlotPool(workers=2) as pool:
        print("entered", flush=True)
except (KeyboardInterrupt, Terminated) as exc:
    print(type(exc).__name__, flush=True)
"""


@pytest.mark.skipif(not FORK, reason="the pool forks its workers")
@pytest.mark.parametrize(("sig", "raised"), [("SIGINT", "KeyboardInterrupt"),
                                             ("SIGTERM", "Terminated")])
def test_a_signal_while_the_workers_fork_stops_them(sig: str, raised: str) -> None:
    import subprocess
    import sys

    from tests.processes import alive_in_group, reaped

    proc = subprocess.Popen([sys.executable, "-c", _SIGNAL_IN_THE_FORK, sig], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    with reaped(proc):
        out, err = proc.communicate(timeout=120)  # for ever before the fix
        assert proc.returncode == 0 and out == f"{raised}\n", err
        assert alive_in_group(proc.pid) == []  # the workers went with it
