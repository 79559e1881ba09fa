from __future__ import annotations

import sys
from pathlib import Path

# The oracle and instance generator live beside the tests, importable as modules;
# the benchmarks' cluster generator and brute-force cycle check are shared too.
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def pytest_configure(config: object) -> None:
    """The suite reads the data shipped in the package, or ``TDMCORE_DATA`` when it is
    set: a ``TDMCORE_DATA`` without the data stops the run at once with the fix,
    instead of failing module by module."""
    import pytest

    from tdmcore.data import data_dir

    try:
        data_dir()
    except ValueError as exc:
        pytest.exit(str(exc), returncode=4)
