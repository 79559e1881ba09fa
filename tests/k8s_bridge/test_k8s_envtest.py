"""k8s_bridge.envtest without the binaries: discovery, waits, process handling."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from k8s_bridge.envtest import (
    ASSETS_ENV,
    EnvtestUnavailable,
    Proc,
    ProcessExited,
    assets_dir,
    wait_until,
)


def test_assets_dir_says_how_to_get_the_binaries(monkeypatch, tmp_path):
    monkeypatch.delenv(ASSETS_ENV, raising=False)
    with pytest.raises(EnvtestUnavailable, match="setup-envtest use"):
        assets_dir()
    (tmp_path / "etcd").write_text("#!/bin/sh\n")
    (tmp_path / "etcd").chmod(0o755)
    monkeypatch.setenv(ASSETS_ENV, str(tmp_path))
    with pytest.raises(EnvtestUnavailable, match="lacks executable kube-apiserver, "
                                                 "kube-scheduler"):
        assets_dir()
    assert assets_dir(("etcd",)) == tmp_path


def test_without_the_binaries_the_e2e_suite_skips_and_says_how_once(tmp_path):
    # one short reason per test, and how to get the binaries once at the end
    import subprocess

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != ASSETS_ENV}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-rs", str(root / "tests" / "e2e")], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:]
    out = done.stdout
    assert " passed" not in out and " skipped" in out
    assert out.count("setup-envtest use") == 1
    how = next(line for line in out.splitlines() if "setup-envtest use" in line)
    assert how.startswith("e2e tests skipped: KUBEBUILDER_ASSETS is not set")
    reasons = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert reasons and all(len(line) < 160 for line in reasons)
    # nothing to say when no e2e test was asked for
    quiet = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "-m", "not e2e", str(root / "tests" / "e2e")], cwd=root, env=env,
                           capture_output=True, text=True, timeout=300)
    assert "deselected" in quiet.stdout and "setup-envtest" not in quiet.stdout


def test_wait_until_deadline_last_error_and_exited_process():
    calls = []

    def failing() -> bool:
        calls.append(1)
        raise ValueError("not yet")

    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match="last error: not yet"):
        wait_until(failing, 0.3, "nothing")
    assert time.monotonic() - t0 >= 0.3 and len(calls) > 1

    def exited() -> bool:
        raise ProcessExited("gone")

    t0 = time.monotonic()
    with pytest.raises(ProcessExited):
        wait_until(exited, 30, "a dead process")
    assert time.monotonic() - t0 < 5
    assert wait_until(lambda: 42, 1, "a value") == 42


def test_proc_stops_its_whole_process_group(tmp_path: Path):
    script = ("import subprocess, sys, time\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
              "print(child.pid, flush=True)\n"
              "time.sleep(60)\n")
    proc = Proc("sleeper", [sys.executable, "-c", script], tmp_path)
    pid = int(wait_until(lambda: proc.log().strip(), 20, "the child's pid"))
    assert proc.alive()
    proc.stop(5.0)
    assert not proc.alive()

    def child_gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # a zombie until its parent (init) reaps it counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] == "Z"

    wait_until(child_gone, 10, "the grandchild killed with the group")
