"""A researcher's own trace swept on Dask: serially, on a LocalCluster and on a
``dask scheduler`` started here; and a Dask address that is no scheduler refused
in seconds."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import socket
import socketserver
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tdmcore.sim import sweep
from tdmcore.sim.sweep.execute import check_scheduler
from tdmcore.sim.sweep.tasks import TIMED
from tests.muri_like import COLUMNS, write_muri_like

BIN = Path(sys.executable).parent


def _spec(folder: Path) -> Path:
    """A sweep over a Muri-like trace: its columns and unit in the spec, the
    cluster's size swept, two policies (4 tasks)."""
    write_muri_like(folder / "muri.csv", jobs=6)
    spec = {"name": "muri", "scenario": {"trace": "muri.csv", "columns": COLUMNS,
                                         "time_unit": "ms"},
            "policies": ["default", "metronome"], "seeds": [3],
            "set": {"scenario.max_duration_s": 60},
            "grid": {"scenario.n_nodes": [2, 4]},
            "metrics": ["jct_s", "per_1000_low_s"]}
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec), "utf-8")
    return path


def _values(outcomes: list[sweep.Outcome]) -> list[dict[str, object]]:
    assert all(o.ok for o in outcomes), [o.error for o in outcomes if not o.ok]
    return [{k: v for k, v in (o.metrics or {}).items() if k not in TIMED}
            for o in outcomes]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _dask_cluster() -> Iterator[str]:
    """A ``dask scheduler`` and one ``dask worker`` process, as docs/sweeps.md starts
    them; stopped after."""
    from distributed import Client

    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [subprocess.Popen([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1",
                               "--port", str(port), "--no-dashboard"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                check_scheduler(address)
                break
            except ValueError:
                assert time.monotonic() < deadline, "the scheduler did not start"
                time.sleep(0.5)
        procs.append(subprocess.Popen([str(BIN / "dask"), "worker", address, "--nworkers",
                                       "1", "--nthreads", "1", "--no-dashboard"], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        with Client(address, timeout=60, set_as_default=False) as client:
            client.wait_for_workers(1, timeout=120)
        yield address
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def _port_8787_free() -> bool:
    with socket.socket() as s:
        try:
            s.bind(("", 8787))
        except OSError:
            return False
    return True


def test_a_trace_sweeps_serially_on_a_local_cluster_and_on_a_dask_scheduler(
        tmp_path: Path) -> None:
    spec = sweep.load_spec(_spec(tmp_path))
    assert len(spec.tasks) == 4 and spec.groups == ("muri",)
    assert {t.scenario.time_unit for t in spec.tasks} == {"ms"}
    serial = _values(sweep.run_tasks(spec.tasks, serial=True))
    # the local cluster's HTTP routes take a free port: 8787 taken is no warning
    blocker = socket.socket()
    taken = _port_8787_free()
    if taken:
        blocker.bind(("", 8787))
        blocker.listen()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            local = _values(sweep.run_tasks(spec.tasks, workers=1))
    finally:
        blocker.close()
    if taken:
        assert not [w for w in caught if "8787" in str(w.message)], \
            [str(w.message) for w in caught]
    with _dask_cluster() as address:
        remote = _values(sweep.run_tasks(spec.tasks, scheduler=address))
        from distributed import Client

        with Client(address, set_as_default=False) as client:
            worker = next(iter(client.scheduler_info()["workers"]))
        with pytest.raises(ValueError, match=r"^scheduler: .* is not a Dask scheduler \(it "
                                             r"is a Dask Worker\)"):
            check_scheduler(worker)
    assert serial == local == remote
    by_nodes = {t.namespace("scenario")["n_nodes"] for t in spec.tasks}
    assert by_nodes == {2, 4}


def test_the_command_sweeps_a_trace_and_writes_its_table(tmp_path: Path) -> None:
    from tdmcore.app.lifecycle import main

    path = _spec(tmp_path)
    main(["sweep", str(path), "--serial", "--no-cache", "--no-plots", "--out",
          str(tmp_path / "r")])
    rows = json.loads((tmp_path / "r" / "sweep-muri.json").read_text())
    assert len(rows) == 4 and {r["status"] for r in rows} == {"ok"}
    assert {r["scenario.n_nodes"] for r in rows} == {2, 4}


class _Quiet(socketserver.BaseRequestHandler):
    def handle(self) -> None:  # waits for a request that never comes
        self.request.settimeout(30)
        with contextlib.suppress(OSError):
            self.request.recv(1 << 16)


class _Banner(socketserver.BaseRequestHandler):
    def handle(self) -> None:  # an SSH server's greeting
        self.request.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")


@contextlib.contextmanager
def _serving(handler: type[socketserver.BaseRequestHandler]) -> Iterator[str]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


SILENT = "it sent nothing in 5 s, a Dask scheduler speaks first"


@pytest.mark.parametrize("handler, why", [
    (http.server.SimpleHTTPRequestHandler, SILENT),  # a web server, as the dashboard
    (_Banner, "it answered 'SSH-2.0-', not a Dask handshake"),
])
def test_an_address_that_is_no_dask_scheduler_is_one_error_in_seconds(
        handler: type[socketserver.BaseRequestHandler], why: str, tmp_path: Path) -> None:
    # issue 41: the dashboard's port hung for 10+ minutes; another TCP service gave a
    # MemoryError (3 EiB) and a Client.__del__ traceback after 43 s, exit 70
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"scenario": "metronome-snapshots", "groups": ["S1"],
                                    "policies": ["default"],
                                    "set": {"scenario.window_s": 10}}))
    with _serving(handler) as address:
        start = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "tdmcore", "sweep", str(spec),
                               "--no-cache", "--scheduler", address, "--out",
                               str(tmp_path / "r")], capture_output=True, text=True,
                              timeout=120, cwd=tmp_path)
        took = time.monotonic() - start
    err = done.stderr.strip().splitlines()
    assert done.returncode == 1, done.stderr
    assert err == [f"Error: --scheduler: {address} is not a Dask scheduler ({why}); a "
                   "scheduler's address is tcp://HOST:8786 by default (8787 is its "
                   "dashboard)"], err
    assert took < 60  # the imports and the 5 s wait, on a loaded machine
    assert not (tmp_path / "r").exists()


def test_a_silent_service_is_no_scheduler_after_the_handshake_wait(monkeypatch) -> None:
    from tdmcore.sim.sweep import execute

    monkeypatch.setattr(execute, "HANDSHAKE_TIMEOUT_S", 0.5)
    with _serving(_Quiet) as address:
        start = time.monotonic()
        with pytest.raises(ValueError, match=r"^scheduler: tcp://127\.0\.0\.1:\d+ is not a "
                                             r"Dask scheduler \(it sent nothing in 0\.5 s"):
            check_scheduler(address)
        assert time.monotonic() - start < 10
    with pytest.raises(ValueError, match=r"^scheduler: cannot reach tcp://127\.0\.0\.1:"):
        check_scheduler(f"tcp://127.0.0.1:{_free_port()}")  # nothing listens there
