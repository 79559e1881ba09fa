from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# ``tests`` is a package (so is ``benchmarks``): pytest puts the repository's root on
# the path, and the tests and the benchmarks import the oracles as
# ``tests.oracles`` and the shared generators as ``tests.instances`` /
# ``tests.clusters``, with no path of their own.


def pytest_configure(config: object) -> None:
    """The suite reads the data shipped in the package, or ``TDMCORE_DATA`` when it is
    set: a ``TDMCORE_DATA`` without the data stops the run at once with the fix,
    instead of failing module by module."""
    from tdmcore.data import data_dir

    # The signal tests send SIGINT to the commands they start, as a terminal's Ctrl-C
    # does.  A suite started in the background (``nohup ... &``, a non-interactive
    # shell's ``&``) inherits SIGINT ignored, every child with it, and Python then
    # installs no KeyboardInterrupt handler (so a background job ignores Ctrl-C, as it
    # should): undo it here, for this process and so for what it starts (a handler is
    # reset to the default on exec).
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)

    try:
        data_dir()
    except ValueError as exc:
        pytest.exit(str(exc), returncode=4)


@pytest.fixture(scope="session")
def warm_kernel_cache(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    """The image's warm kernel cache, built once per run as the Dockerfile builds it
    (``tdmcore-bridge warm-cache`` in a fresh folder, ``NUMBA_CPU_NAME=generic``), for
    the tests that start from it; (its folder, seconds the build took).  Minutes of
    compiling: only ``slow`` tests use it."""
    folder = tmp_path_factory.mktemp("image") / "warm-cache"
    env = {**os.environ, "NUMBA_CPU_NAME": "generic"}
    env.pop("NUMBA_CACHE_DIR", None)
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "k8s_bridge.cli", "warm-cache", "--dir",
                    str(folder)], env=env, check=True, capture_output=True, timeout=1800)
    return folder, time.monotonic() - t0
