from __future__ import annotations

import sys
from pathlib import Path

# The oracle and instance generator live beside the tests, importable as modules;
# the benchmarks' cluster generator and brute-force cycle check are shared too.
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def pytest_configure(config: object) -> None:
    """The suite checks the simulator against ``../shared/data``: without it, stop
    at once with the fix instead of failing module by module."""
    import pytest

    from tdmcore.sim.models import data_dir

    try:
        data_dir()
    except ValueError as exc:
        pytest.exit(f"{exc}: the tests need the shared data", returncode=4)
