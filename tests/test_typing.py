"""The public API is typed, and what the docs show a user type-checks.

``mypy --strict`` (the project's settings in ``pyproject.toml``) over the package
and, in the same run, over every Python example of the README and ``docs/``, one
module per page (a page's examples build on each other).  A page whose examples
are fragments of the user's own code is named in :data:`FRAGMENTS` with why.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

api = pytest.importorskip("mypy.api", reason="mypy is part of the test extra")

ROOT = Path(__file__).resolve().parents[1]

#: Pages whose Python blocks are fragments that name the user's own objects.
FRAGMENTS = {
    "docs/kubernetes.md": "a training loop's hook: loader and train_step are the user's",
}


def doc_examples() -> dict[str, str]:
    """Page (relative path) -> its Python blocks joined, for every page that has any."""
    out = {}
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        blocks = re.findall(r"^[ \t]*```python[ \t]*\n(.*?)^[ \t]*```",
                            page.read_text(encoding="utf-8"), flags=re.S | re.M)
        if blocks:
            out[page.relative_to(ROOT).as_posix()] = "\n\n".join(blocks)
    return out


def test_the_fragment_list_names_pages_with_examples() -> None:
    assert set(FRAGMENTS) <= set(doc_examples())


def test_package_and_doc_examples_pass_mypy_strict(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    examples = {page: code for page, code in doc_examples().items() if page not in FRAGMENTS}
    assert {"README.md", "docs/scheduler.md", "docs/custom-policy.md"} <= set(examples)
    files = []
    for page, code in examples.items():
        path = tmp_path / ("example_" + re.sub(r"\W", "_", page.removesuffix(".md")) + ".py")
        path.write_text(f"# {page}\n{code}", encoding="utf-8")
        files.append(str(path))
    monkeypatch.chdir(ROOT)  # the project's [tool.mypy] settings
    out, err, status = api.run(["--config-file", "pyproject.toml", "--cache-dir",
                                str(tmp_path / "cache"), "--no-error-summary",
                                "src/tdmcore", "k8s_bridge", *files])
    assert status == 0, out + err


def test_pods_typed_init_is_the_dataclass_fields() -> None:
    """``Pod``'s ``__init__`` for type checkers (it reads ``"high"``/``"low"`` as
    priorities) restates the fields: the same names, order and defaults."""
    import ast
    import dataclasses

    from tdmcore.model import Pod

    tree = ast.parse((ROOT / "src" / "tdmcore" / "model.py").read_text(encoding="utf-8"))
    pod = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Pod")
    stub = next(f for block in pod.body if isinstance(block, ast.If)
                for f in block.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
    args = stub.args.args[1:]  # without self
    defaults = ["(none)"] * (len(args) - len(stub.args.defaults)) + [
        ast.literal_eval(d) for d in stub.args.defaults]
    fields = dataclasses.fields(Pod)
    assert [a.arg for a in args] == [f.name for f in fields]
    assert defaults == ["(none)" if f.default is dataclasses.MISSING else f.default
                        for f in fields]
