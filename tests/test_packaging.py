"""The package carries what it needs: data, examples, licences, and extras that keep the
library install free of the Kubernetes stack."""

from __future__ import annotations

import fnmatch
import gzip
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from tdmcore.data import data_dir, data_files, open_data

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PACKAGE = ROOT / "src" / "tdmcore"
K8S_MODULES = ("kubernetes", "prometheus_client", "werkzeug", "waitress")


def _run(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=env, cwd=ROOT / "tests")


def _blocking(modules: tuple[str, ...]) -> str:
    """Python source that makes ``modules`` unimportable, as if not installed."""
    return "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in modules)


# ----------------------------------------------------------------------------- extras
def test_the_core_install_has_no_kubernetes_stack() -> None:
    core = " ".join(PYPROJECT["project"]["dependencies"])
    extras = PYPROJECT["project"]["optional-dependencies"]
    for dist in ("kubernetes", "prometheus-client", "werkzeug", "waitress"):
        assert dist not in core
        assert any(req.startswith(dist) for req in extras["k8s"]), dist
    assert {"k8s", "test", "bench", "docs", "sweep"} <= set(extras)
    assert "tdmcore[k8s,docs,sweep]" in extras["test"]
    assert "dask" not in core and any(req.startswith("dask[distributed]")
                                      for req in extras["sweep"])


def test_torch_comes_only_with_the_train_extra() -> None:
    """The hook's real training loop needs torch (tests/k8s_bridge/test_k8s_train.py);
    neither the core nor the test extra (with the extras it names) pulls it in."""
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert any(req.startswith("torch>=") for req in extras["train"])
    pulled = list(PYPROJECT["project"]["dependencies"])
    for name in ("test", "k8s", "docs", "sweep"):
        pulled += extras[name]
    assert not [req for req in pulled if req.startswith("torch")], pulled


def test_library_and_simulator_import_without_the_k8s_extra() -> None:
    code = _blocking(K8S_MODULES) + (
        "import tdmcore, tdmcore.app.cli, tdmcore.sim.cluster, tdmcore.sim.scenarios\n"
        "from click.testing import CliRunner\n"
        "r = CliRunner().invoke(tdmcore.app.cli.cli, ['simulate', '--help'])\n"
        "assert r.exit_code == 0, r.output\n"
        f"assert not any(m in sys.modules and sys.modules[m] for m in {K8S_MODULES!r})\n"
        "print('ok')\n")
    done = _run(code)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_bridge_without_the_k8s_extra_names_the_extra() -> None:
    code = _blocking(("kubernetes", "waitress")) + (
        "from k8s_bridge._entry import main\n"
        "raise SystemExit(main(['--help']))\n")
    done = _run(code)
    assert done.returncode == 1 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("Error: ") and "pip install 'tdmcore[k8s]'" in line
    assert "kubernetes" in line and "waitress" in line


def test_bridge_with_the_k8s_extra_runs() -> None:
    from k8s_bridge._entry import main, missing_k8s_modules

    assert missing_k8s_modules() == []
    assert main(["--help"]) == 0


# ------------------------------------------------------------------------ package data
def _package_data_patterns() -> dict[str, list[str]]:
    return PYPROJECT["tool"]["setuptools"]["package-data"]


def _shipped(path: Path) -> bool:
    """Whether pyproject's package-data globs put ``path`` in the wheel."""
    for package, patterns in _package_data_patterns().items():
        base = ROOT / "src" / Path(*package.split("."))
        try:
            rel = path.relative_to(base).as_posix()
        except ValueError:
            continue
        if any(fnmatch.fnmatch(rel, pat) and rel.count("/") == pat.count("/")
               for pat in patterns):
            return True
    return False


def test_every_data_file_and_example_is_package_data() -> None:
    files = [p for p in (PACKAGE / "data").rglob("*")
             if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts]
    files += list((PACKAGE / "examples").glob("*"))
    assert len(files) >= 20
    missing = [str(p.relative_to(ROOT)) for p in files if not _shipped(p)]
    assert not missing, f"not in the wheel (pyproject package-data): {missing}"


def test_the_data_readme_names_every_file() -> None:
    readme = (PACKAGE / "data" / "README.md").read_text(encoding="utf-8")
    for folder in ("traces", "throughputs", "topology", "profiles/muri", "profiles/pollux"):
        for rel in data_files(folder, ".csv") + data_files(folder, ".json"):
            name = rel.rsplit("/", 1)[1].removesuffix(".csv").removesuffix(".json")
            assert name.split("_placements")[0] in readme, rel
    for licence in ("Apache-2.0.txt", "MIT-gavel.txt", "CC-BY-4.0.md"):
        assert (PACKAGE / "data" / "LICENSES" / licence).is_file()
        assert licence in readme


def test_compressed_tables_read_like_the_plain_ones(tmp_path: Path, monkeypatch) -> None:
    # TDMCORE_DATA may point at uncompressed copies with the same layout
    shipped = data_dir()
    for rel in ("models.csv", "traces/philly_gavel_distribution.csv"):
        target = tmp_path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        source = shipped / rel
        if source.is_file():
            shutil.copy(source, target)
        else:
            with gzip.open(f"{source}.gz", "rb") as fh:
                target.write_bytes(fh.read())
    with open_data("traces/philly_gavel_distribution.csv") as fh:
        packed = fh.read()
    monkeypatch.setenv("TDMCORE_DATA", str(tmp_path))
    assert data_dir() == tmp_path
    with open_data("traces/philly_gavel_distribution.csv") as fh:
        assert fh.read() == packed
    with pytest.raises(ValueError, match=r"^relpath: no traces/nope.csv"):
        open_data("traces/nope.csv")


def test_a_bad_tdmcore_data_is_a_clear_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TDMCORE_DATA", str(tmp_path))
    with pytest.raises(ValueError, match=r"^TDMCORE_DATA: .* has no models.csv"):
        data_dir()


def test_the_link_scenarios_come_from_tdmcore_data_too(tmp_path: Path, monkeypatch) -> None:
    # snapshots.json was read from the package whatever TDMCORE_DATA said
    from tdmcore.sim.catalog import link_scenarios

    shutil.copy(data_dir() / "models.csv", tmp_path / "models.csv")
    with open_data("snapshots.json") as fh:
        raw = json.load(fh)
    raw["links"] = {"mine": raw["links"]["s1"]}
    (tmp_path / "snapshots.json").write_text(json.dumps(raw))
    monkeypatch.setenv("TDMCORE_DATA", str(tmp_path))
    assert list(link_scenarios()) == ["mine"]
    (tmp_path / "models.csv").unlink()
    with pytest.raises(ValueError, match=r"^TDMCORE_DATA: .* has no models.csv"):
        link_scenarios()


def test_simulate_runs_from_an_unrelated_folder(tmp_path: Path) -> None:
    # the data and the example come from the package, not from the working directory
    env = {**os.environ, "PYTHONPATH": ""}
    env.pop("TDMCORE_DATA", None)
    done = subprocess.run(
        [sys.executable, "-m", "tdmcore", "simulate", "--example", "--policies",
         "default", "--no-plots", "--out", str(tmp_path / "r")],
        capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "r" / "simulate-example.csv").is_file()


# ----------------------------------------------------------- nothing outside the repo
def test_no_file_reaches_outside_the_repository() -> None:
    needle = "../" + "shared"  # spelled apart so this file does not match itself
    hits = []
    for top in ("src", "k8s_bridge", "tests", "benchmarks", "docs"):
        for path in (ROOT / top).rglob("*"):
            if (path.is_file() and path.suffix in (".py", ".pyx", ".pyi", ".md", ".yaml",
                                                   ".yml", ".json", ".toml", ".cfg")
                    and needle in path.read_text(encoding="utf-8", errors="replace")):
                hits.append(str(path.relative_to(ROOT)))
    for name in ("README.md", "pyproject.toml", "setup.py", "mkdocs.yml"):
        path = ROOT / name
        if path.is_file() and needle in path.read_text(encoding="utf-8"):
            hits.append(name)
    assert not hits


# ------------------------------------------------------------------ project metadata
def test_licence_citation_changelog_and_urls() -> None:
    project = PYPROJECT["project"]
    assert project["license"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"].startswith("1.2") and cff["license"] == "Apache-2.0"
    assert cff["version"] == project["version"]
    assert {"references"} <= set(cff) and len(cff["references"]) == 5
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"## [{project['version']}]" in changelog
    assert {"Homepage", "Documentation", "Source", "Changelog", "Issues"} <= set(
        project["urls"])
