"""The benchmark scripts refuse bad arguments before they run anything (one usage line)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("script", "argv", "said"), [
    # a review (2026-11-24): a traceback from argmax of nothing
    ("report", ["--heavy", "--heavy-count", "0"], "--heavy-count: expected at least 1, got 0"),
    # ... and a misspelt policy failed only after the first policy had run for minutes
    ("report", ["--philly", "10", "8", "--philly-policies", "default,metronmoe"],
     "--philly-policies: unknown policy 'metronmoe' (did you mean 'metronome'?)"),
    ("contended", ["--rounds", "0"], "--rounds: must be at least 1, got 0"),
    ("contended", ["--policies", "ideal,defualt"], "--policies: unknown policy 'defualt'"),
    ("stationarity", ["--seeds", "0"], "--seeds: must be at least 1, got 0"),
])
def test_bad_arguments_are_one_usage_line(script: str, argv: list[str], said: str) -> None:
    r = subprocess.run([sys.executable, "-m", f"benchmarks.{script}", *argv], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].endswith(said), r.stderr
