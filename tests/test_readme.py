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


def test_ci_runs_the_readme_test_command() -> None:
    text = README.read_text()
    start = text.index("## Quick start")
    commands = re.findall(r"```bash\n(.*?)\n```", text[start:], flags=re.S)
    ci = (README.parent / ".ci" / "run").read_text()
    assert commands[1].strip() in ci
