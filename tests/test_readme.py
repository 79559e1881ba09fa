"""The README's Python example runs and says what the README says it does."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_runs() -> None:
    text = README.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "the README lost its Python example"
    namespace: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), namespace)
    base = namespace["base"]
    assert base.period_ms == 400.0 and base.multiples.tolist() == [1, 2, 1]
    assert namespace["best"].perfect and namespace["first"].perfect
    assert 0.0 < namespace["gamma"] <= 1.0


def test_readme_scheduler_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 2, "the README lost its scheduler example"
    namespace: dict = {}
    exec(compile(blocks[1], "README.md", "exec"), namespace)
    state = namespace["state"]
    assert len(state.placed) == 6
    assert set(namespace["shifts_ms"]) == set(state.placed)
    assert namespace["actions"] == []  # one normal iteration: nothing to do


def test_ci_runs_the_readme_test_command() -> None:
    text = README.read_text()
    start = text.index("## Quick start")
    commands = re.findall(r"```bash\n(.*?)\n```", text[start:], flags=re.S)
    ci = (README.parent / ".ci" / "run").read_text()
    assert commands[1].strip() in ci


def test_readme_oasis_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    namespace: dict = {}
    exec(compile(blocks[2], "README.md", "exec"), namespace)
    schedule = namespace["schedule"]
    assert schedule is not None and schedule.workers.sum() > 0


def test_readme_oasis_comparison_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    namespace: dict = {}
    exec(compile(blocks[3], "README.md", "exec"), namespace)
    utility = namespace["utility"]
    assert set(utility) == {"oasis", "fifo", "drf", "oasis-L0.9"}
    assert all(u >= 0 for u in utility.values()) and utility["oasis"] > 0


def test_readme_elastic_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    namespace: dict = {}
    exec(compile(blocks[4], "README.md", "exec"), namespace)
    assert round(namespace["ratio"], 2) == 0.23  # the README's figure
    assert namespace["scaled"]  # DRAGON resized some job


def test_readme_simulator_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    namespace: dict = {}
    exec(compile(blocks[5], "README.md", "exec"), namespace)
    runs = namespace["runs"]
    assert set(runs) == {"default", "metronome"}
    assert all(len(r.jobs) == 3 and r.tct_ms > 0 for r in runs.values())


def test_readme_quick_start_is_what_ci_runs() -> None:
    text = README.read_text()
    commands = re.findall(r"```bash\n(.*?)\n```", text.split("## Quick start")[1],
                          flags=re.S)
    assert commands[0].endswith("tdmcore simulate metronome-snapshots --out report")
    ci = (README.parent / ".ci" / "run").read_text()
    assert commands[1] in ci
