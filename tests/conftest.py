from __future__ import annotations

# ``tests`` is a package (so is ``benchmarks``): pytest puts the repository's root on
# the path, and the tests and the benchmarks import the oracles as
# ``tests.oracles`` and the shared generators as ``tests.instances`` /
# ``tests.clusters``, with no path of their own.


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
