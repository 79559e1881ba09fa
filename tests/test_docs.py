"""The documentation site builds with ``mkdocs build --strict`` and stands on its own.

A broken link or anchor, a page missing from the navigation or a docstring the
numpy parser cannot read is a warning, and ``--strict`` makes it an error, so CI
fails on it.  The docs tools come with the ``docs`` extra (the ``test`` extra
includes it); without them this test fails rather than skips.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

# Import names of the packages the build needs (the ``docs`` extra).
DOCS_MODULES = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")

#: Paths outside the repository the product must never depend on.
OUTSIDE = re.compile(r"\.\./share[d]|(?<![\w-])share[d]/")  # [d]: no match on itself


def _pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "mkdocs.yml", *sorted(DOCS.rglob("*.md"))]


def test_docs_tools_are_installed() -> None:
    missing = [m for m in DOCS_MODULES if importlib.util.find_spec(m.split(".")[0]) is None
               or importlib.util.find_spec(m) is None]
    if missing:
        pytest.fail(f"the docs tools are missing ({', '.join(missing)}): install the "
                    "[docs] extra, pip install -e \".[docs]\" (the [test] extra includes it)")


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    test_docs_tools_are_installed()
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=env, check=False)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{log}"
    assert (site / "index.html").is_file()
    for page in ("getting-started", "traffic-circle", "scheduler", "oasis", "elastic",
                 "simulator", "kubernetes", "benchmarks", "glossary", "references",
                 "data", "development", "api/tdmcore"):
        assert (site / page / "index.html").is_file(), page
    # The API pages really hold the docstrings (mkdocstrings ran).
    api = (site / "api" / "tdmcore" / "index.html").read_text(encoding="utf-8")
    assert "search_rotations" in api and "Parameters" in api
    for html in site.rglob("*.html"):
        text = html.read_text(encoding="utf-8")
        assert not OUTSIDE.search(text), f"{html.relative_to(site)} mentions a path outside"


def test_no_page_depends_on_files_outside_the_repository() -> None:
    for page in _pages():
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            assert not OUTSIDE.search(line), f"{page.relative_to(ROOT)}:{n}: {line.strip()}"


def test_every_page_is_in_the_nav_and_every_image_exists() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in sorted(DOCS.rglob("*.md")):
        rel = page.relative_to(DOCS).as_posix()
        if rel in {"fidelity.md", "kubernetes-e2e.md"}:
            continue  # added to the nav by their authors
        assert rel in config, f"docs/{rel} is not in mkdocs.yml's nav"
    for page in sorted(DOCS.rglob("*.md")):
        for image in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            assert (page.parent / image).is_file(), f"{page.name}: {image}"
