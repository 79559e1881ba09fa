"""The public data tdmcore ships: model sizes, profiles, traces and a topology.

Every file a shipped scenario, an example, the test suite or a benchmark reads lives
in this folder, inside the package (its ``README.md`` gives each file's source,
licence and derivation).  Large tables are gzip-compressed (``.csv.gz``,
``.json.gz``); :func:`open_data` reads a file under either name, so a folder of
uncompressed copies works as well.

``TDMCORE_DATA`` optionally names another folder with the same layout (for example
an updated copy of the upstream files); it must hold ``models.csv``.
"""

from __future__ import annotations

import gzip
import io
import os
from pathlib import Path
from typing import TextIO

__all__ = ["data_dir", "data_files", "open_data"]

#: The folder of this module: the data shipped in the package.
_PACKAGE_DATA = Path(__file__).resolve().parent


def data_dir() -> Path:
    """The data folder: ``TDMCORE_DATA`` if set, else the data shipped in the package.

    Returns
    -------
    Path
        A folder holding ``models.csv``, ``snapshots.json``, ``traces/``,
        ``profiles/``, ``throughputs/`` and ``topology/``.

    Raises
    ------
    ValueError
        If ``TDMCORE_DATA`` is set to a folder without ``models.csv``.
    """
    env = os.environ.get("TDMCORE_DATA")
    if env:
        if not (Path(env) / "models.csv").is_file():
            raise ValueError(f"TDMCORE_DATA: {env} has no models.csv (expected a folder "
                             "laid out like tdmcore's own data: models.csv, "
                             "snapshots.json, traces/, profiles/, throughputs/, "
                             "topology/); unset it to use the "
                             "data shipped with tdmcore")
        return Path(env)
    return _PACKAGE_DATA


def _resolve(relpath: str) -> Path:
    base = data_dir()
    for candidate in (base / relpath, base / f"{relpath}.gz"):
        if candidate.is_file():
            return candidate
    raise ValueError(f"relpath: no {relpath} (nor {relpath}.gz) in the data folder {base}")


def open_data(relpath: str) -> TextIO:
    """Open a data file as UTF-8 text, compressed (``relpath + ".gz"``) or not.

    Parameters
    ----------
    relpath : str
        The file's path inside the data folder, without ``.gz``
        (``"traces/philly_pollux.csv"``).

    Returns
    -------
    TextIO
        An open text stream (use it in a ``with`` block); CSV readers get
        universal newlines switched off, as the :mod:`csv` module wants.

    Raises
    ------
    ValueError
        If neither ``relpath`` nor ``relpath.gz`` exists in :func:`data_dir`.
    """
    path = _resolve(relpath)
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return path.open(encoding="utf-8", newline="")


def data_files(folder: str, suffix: str) -> list[str]:
    """The files of ``folder`` ending in ``suffix`` (compressed or not), sorted.

    Parameters
    ----------
    folder : str
        A folder inside the data folder (``"profiles/muri"``).
    suffix : str
        The uncompressed ending (``".csv"``).

    Returns
    -------
    list of str
        Paths relative to the data folder, without ``.gz``, each once, for
        :func:`open_data`.
    """
    base = data_dir() / folder
    names = {p.name.removesuffix(".gz") for p in base.glob(f"*{suffix}*")}
    return sorted(f"{folder}/{n}" for n in names if n.endswith(suffix))
