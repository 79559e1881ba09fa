"""The code examples of the README and of the docs run and say what the text says.

Each example is found by the heading it sits under (in README.md or a page of
``docs/``), never by its position, so pages can be reordered and grow freely.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

_HEADING = re.compile(r"(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _label(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def section(path: Path, heading: str) -> str:
    """The text under the one heading of ``path`` titled ``heading`` (else the one
    whose title starts with it), any level, up to the next heading of the same or a
    higher level.

    Lines inside fenced code blocks are never taken for headings.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    headings: list[tuple[int, int, str]] = []  # (line index, level, title)
    in_code = False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            in_code = not in_code
            continue
        match = None if in_code else _HEADING.fullmatch(line)
        if match:
            headings.append((i, len(match.group(1)), match.group(2)))
    found = [h for h in headings if h[2] == heading] or \
        [h for h in headings if h[2].startswith(heading)]
    assert len(found) == 1, (f"{_label(path)}: expected one heading {heading!r} (or "
                             f"starting with it), found {[h[2] for h in found]}")
    start, level, _ = found[0]
    end = next((i for i, lvl, _ in headings if i > start and lvl <= level), len(lines))
    return "\n".join(lines[start:end]) + "\n"


def code_blocks(path: Path, heading: str, lang: str) -> list[str]:
    """The fenced ``lang`` code blocks under ``heading`` in ``path``, in order."""
    text = section(path, heading)
    return re.findall(rf"^[ \t]*```{re.escape(lang)}[ \t]*\n(.*?)^[ \t]*```", text,
                      flags=re.S | re.M)


def code_block(path: Path, heading: str, lang: str = "python") -> str:
    """The one fenced ``lang`` block under ``heading`` (fails if there are several)."""
    blocks = code_blocks(path, heading, lang)
    assert len(blocks) == 1, (f"{_label(path)} under {heading!r}: expected one "
                              f"{lang} block, found {len(blocks)}")
    return blocks[0]


def run_example(path: Path, heading: str) -> dict[str, Any]:
    """Execute the Python example under ``heading`` and return its namespace."""
    namespace: dict[str, Any] = {"__name__": f"example:{path.name}:{heading}"}
    source = code_block(path, heading)
    exec(compile(source, f"{_label(path)} ({heading})", "exec"), namespace)
    return namespace


# -- the helper itself ----------------------------------------------------------------------


def test_section_is_found_by_heading_and_ignores_code(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## A\n\n```python\n# not a heading\nx = 1\n```\n\n"
                    "### A.1\n\n```bash\necho a1\n```\n\n## B\n\n```python\ny = 2\n```\n",
                    encoding="utf-8")
    assert code_block(page, "A", "python") == "# not a heading\nx = 1\n"
    assert code_blocks(page, "A", "bash") == ["echo a1\n"]  # subsections belong to A
    assert code_block(page, "B") == "y = 2\n"
    with pytest.raises(AssertionError):
        section(page, "C")


# -- the README -----------------------------------------------------------------------------


def _check_circle_example(namespace: dict[str, Any]) -> None:
    base = namespace["base"]
    assert base.period_ms == 400.0 and base.multiples.tolist() == [1, 2, 1]
    assert namespace["best"].perfect and namespace["first"].perfect
    assert 0.0 < namespace["gamma"] <= 1.0
    assert len(namespace["shifts_ms"]) == 3



def test_readme_table_is_the_simulator_s_output(tmp_path: Path) -> None:
    """Every row of the README's excerpt is a row the main command prints (seed 0,
    default window); docs/simulator.md's excerpt too."""
    from click.testing import CliRunner

    from tdmcore.app.cli import cli

    result = CliRunner().invoke(cli, ["simulate", "metronome-snapshots", "--no-plots",
                                      "--out", str(tmp_path)], terminal_width=200)
    assert result.exit_code == 0, result.output
    printed = {line.rstrip() for line in result.output.splitlines()}
    for page, heading in ((README, "What the main command shows"),
                          (DOCS / "simulator.md", "What the main command shows")):
        block = code_blocks(page, heading, "")[0]
        rows = [ln.rstrip() for ln in block.splitlines() if re.match(r"S\d  ", ln)]
        assert len(rows) >= 8, (page.name, block)
        for row in rows:
            assert row in printed, f"{page.name}: {row!r} is not in the output"

def test_readme_library_example_runs() -> None:
    _check_circle_example(run_example(README, "The library"))


def test_readme_quick_start_runs_the_simulator() -> None:
    command = code_block(README, "Run the simulator", "bash").strip()
    assert command.startswith("python3 -m venv .venv && .venv/bin/pip install -e . && ")
    assert command.endswith("tdmcore simulate metronome-snapshots --out report")


def test_ci_runs_the_readme_test_command() -> None:
    """``.ci/run``'s last command is exactly the README's second Quick start command."""
    command = code_block(README, "Run the tests", "bash").strip()
    assert command == ('python3 -m venv .venv && .venv/bin/pip install -e ".[test]" '
                       "&& .venv/bin/python -m pytest")
    lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    commands = [ln for ln in lines if ln and not ln.startswith("#")]
    assert commands[-1] == command


def test_readme_quick_start_has_both_commands_in_order() -> None:
    quick = section(README, "Quick start")
    assert quick.index("### Run the simulator") < quick.index("### Run the tests")


def test_readme_stays_short_and_links_into_the_docs() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 260
    assert len(code_block(README, "The library").strip().splitlines()) <= 15
    assert len(code_block(README, "Kubernetes", "sh").strip().splitlines()) <= 10
    for target in re.findall(r"\]\((docs/[^)#\s]+)", text):
        assert (ROOT / target).exists(), target
    for page in sorted(DOCS.glob("*.md")):
        if page.name not in {"fidelity.md", "kubernetes-e2e.md"}:
            assert f"docs/{page.name}" in text, f"README does not link docs/{page.name}"
    for image in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text):
        assert (ROOT / image).is_file(), image


# -- the docs' examples ---------------------------------------------------------------------


def test_traffic_circle_example_runs() -> None:
    _check_circle_example(run_example(DOCS / "traffic-circle.md", "The model"))


def test_getting_started_library_example_runs() -> None:
    namespace = run_example(DOCS / "getting-started.md", "Use the library")
    assert namespace["base"].period_ms == 400.0
    assert namespace["best"].perfect


def test_getting_started_commands_are_the_readme_quick_start() -> None:
    page = DOCS / "getting-started.md"
    assert (code_block(page, "Run the simulator", "bash")
            == code_block(README, "Run the simulator", "bash"))
    assert (code_block(page, "Run the tests", "bash")
            == code_block(README, "Run the tests", "bash"))


def test_scheduler_example_runs() -> None:
    namespace = run_example(DOCS / "scheduler.md", "The pipeline")
    state = namespace["state"]
    assert len(state.placed) == 6
    assert set(namespace["shifts_ms"]) == set(state.placed)
    assert namespace["actions"] == []  # one normal iteration: nothing to do


def test_oasis_best_schedule_example_runs() -> None:
    namespace = run_example(DOCS / "oasis.md", "A job's best schedule")
    schedule = namespace["schedule"]
    assert schedule is not None and schedule.workers.sum() > 0


def test_oasis_comparison_example_runs() -> None:
    namespace = run_example(DOCS / "oasis.md", "What it shows, and one finding")
    utility = namespace["utility"]
    assert set(utility) == {"oasis", "fifo", "drf", "oasis-L0.9"}
    assert all(u >= 0 for u in utility.values()) and utility["oasis"] > 0


def test_elastic_example_runs() -> None:
    namespace = run_example(DOCS / "elastic.md", "Commands and results")
    assert round(namespace["ratio"], 2) == 0.23  # the page's figure
    assert namespace["scaled"]  # DRAGON resized some job


def test_simulator_example_runs() -> None:
    namespace = run_example(DOCS / "simulator.md", "Your own scenario")
    runs = namespace["runs"]
    assert set(runs) == {"default", "metronome"}
    assert all(len(r.jobs) == 3 and r.tct_ms > 0 for r in runs.values())


def test_simulator_trace_example_runs() -> None:
    namespace = run_example(DOCS / "simulator.md", "Adding a scenario or a trace")
    runs = namespace["runs"]
    assert set(runs) == {"default", "metronome"}
    for run in runs.values():
        assert len(run.jobs) == 3 and run.tct_ms > 0
        assert all(j.end_ms is not None for j in run.jobs.values())  # every job finished


def test_simulator_trace_walkthrough_runs_as_written(tmp_path: Path) -> None:
    """docs/simulator.md walks a trace from CSV to a sweep: the page's trace is the
    file tests/muri_like.py writes, and its commands run here as written."""
    import shlex
    import subprocess
    import sys

    from tests.muri_like import write_muri_like

    page, heading = DOCS / "simulator.md", "Your own trace, from CSV to sweep"
    trace = write_muri_like(tmp_path / "muri.csv", jobs=8)
    shown = code_blocks(page, heading, "text")[0]  # the trace (the last: a measurement)
    assert trace.read_text("utf-8").startswith(shown)
    (tmp_path / "muri-sweep.yaml").write_text(code_block(page, heading, "yaml"), "utf-8")
    commands = [shlex.split(line) for block in code_blocks(page, heading, "bash")
                for line in block.splitlines() if line.strip()]
    assert [c[:2] for c in commands] == [["tdmcore", "list"], ["tdmcore", "simulate"],
                                         ["tdmcore", "sweep"]]
    outputs = []
    for command in commands:
        done = subprocess.run([sys.executable, "-m", "tdmcore", *command[1:], *(
            ["--no-plots"] if command[1] == "sweep" else [])], cwd=tmp_path,
            capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr
        outputs.append(done)
    assert "gpt2" in outputs[0].stdout and "GPT-2" in outputs[0].stdout
    assert "'dqn'" in outputs[1].stderr  # the one name it does not know, said
    rows = json.loads((tmp_path / "report" / "simulate-trace-muri.json").read_text())
    assert [r["policy"] for r in rows] == ["default", "metronome", "ideal"]
    jobs = json.loads((tmp_path / "report" / "simulate-trace-muri-jobs.json").read_text())
    assert {j["model"] for j in jobs} == {"GPT-2", "VGG19", "BERT", "ResNet18",
                                          "dqn (as ResNet50)"}
    swept = json.loads((tmp_path / "report" / "sweep-muri.json").read_text())
    assert len(swept) == 16 and {r["status"] for r in swept} == {"ok"}
    assert {(r["scenario.n_nodes"], r["run.network"]) for r in swept} == {
        (2, "shared"), (2, "ideal"), (4, "shared"), (4, "ideal")}


def test_the_readme_says_the_overlay_is_yours_to_write() -> None:
    # issue 41: `kubectl apply -k tdmcore-overlay` read as a folder of the repository
    lines = code_block(README, "Kubernetes", "sh").splitlines()
    first = next(i for i, line in enumerate(lines) if "tdmcore-overlay" in line)
    assert lines[first].startswith("#") and "yours to write" in lines[first]
    assert "docs/kubernetes.md" in " ".join(lines[first:first + 2])
    assert "tdmcore-overlay/kustomization.yaml" in code_blocks(DOCS / "kubernetes.md",
                                                               "2. Install", "sh")[0]


def test_the_suite_s_duration_is_stated_the_same_everywhere() -> None:
    pattern = re.compile(r"about (\d+) minutes on 2 cores")
    found = {path.name: pattern.findall(path.read_text("utf-8"))
             for path in (README, DOCS / "getting-started.md", DOCS / "development.md")}
    assert all(len(f) == 1 for f in found.values()), found
    assert len({f[0] for f in found.values()}) == 1, found


def test_getting_started_says_how_mypy_sees_an_editable_install() -> None:
    # issue 41: mypy users of an editable install saw every tdmcore type as Any
    text = section(DOCS / "getting-started.md", "Type checking your code against tdmcore")
    assert "`Any`" in text and "editable_mode=compat" in code_block(
        DOCS / "getting-started.md", "Type checking your code against tdmcore", "bash")
