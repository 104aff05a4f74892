"""Is the release that the Colab notebooks install the package of this commit?

Every notebook's install cell installs aim-tutorial from the repository's tag ``v<version>``
(``pyproject.toml``'s version, ``_ext/aim_colab.py``). Before the book is published (the
workflow's ``pages`` job), this checks that the tag exists and that the package has not
changed since it: ``aim_tutorial/`` and ``pyproject.toml``'s ``[project]`` table (its
dependencies) are the tag's. Otherwise a reader's notebook would install a package without
the code that the published chapters call.

    python3 scripts/release_check.py [--repo DIR]

Exit status 0 when they match; 1, with what to do, when not. Needs the tags (a clone with
``fetch-depth: 0`` in the workflow).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
from pathlib import Path


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)


def check(repo: Path) -> list[str]:
    """What does not match (empty when the release is this commit's package)."""
    project = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    tag = f"v{project['version']}"
    if _git(repo, "rev-parse", "--verify", "--quiet", f"refs/tags/{tag}^{{commit}}").returncode != 0:
        return [f"no tag {tag}: the notebooks install aim-tutorial from it. Push the tag "
                f"(git tag {tag} && git push origin {tag}), then run this workflow again"]
    problems = []
    changed = _git(repo, "diff", "--name-only", tag, "HEAD", "--", "aim_tutorial").stdout.split()
    if changed:
        problems.append(f"the package changed since {tag}: {', '.join(changed[:10])}"
                        + (" ..." if len(changed) > 10 else ""))
    tagged = _git(repo, "show", f"{tag}:pyproject.toml")
    if tagged.returncode != 0 or tomllib.loads(tagged.stdout)["project"] != project:
        problems.append(f"pyproject.toml's [project] table (dependencies, metadata) changed since {tag}")
    if problems:
        problems.append(f"raise the version in pyproject.toml, tag the commit v<version> and push the tag: "
                        f"the notebooks of this commit would install {tag}")
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args(argv)
    problems = check(args.repo)
    for line in problems:
        print(f"release_check: {line}", file=sys.stderr)
    if not problems:
        version = tomllib.loads((args.repo / "pyproject.toml").read_text())["project"]["version"]
        print(f"release_check: the notebooks install v{version}, the package of this commit")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
