"""Refresh the vendored snapshot of what Colab's GPU runtime ships (.ci/colab_runtime_gpu.txt).

Google publishes the package list of its Colab runtimes in googlecolab/backend-info:
``pip-freeze.gpu.txt`` (``pip freeze`` of the GPU runtime) and ``os-info-gpu.txt`` (its Ubuntu and
Python). The snapshot keeps every ``name==version`` line of the first (the pip constraints of the
Colab-as-shipped run of ``make test``: scripts/colab_check.sh, COLAB_ENV=shipped) and, in its
header, the source, its commit date and the runtime's Python. Lines that name a URL (``pkg @ https://``,
NVIDIA's and Colab's own wheels) cannot be pip constraints and are counted, not kept.

The package's floors (pyproject.toml) are the snapshot's versions of its dependencies: the run at
the floors and the Colab-as-shipped run are one and the same (tests/test_colab_runtime.py checks it).
With ``--update-floors`` this script rewrites the floors to the new snapshot.

Usage (when Colab's runtime changes: its release notes, or backend-info's commit log, say when;
about every few months):
    python scripts/colab_snapshot.py --from /path/to/backend-info        # a clone of the repository
    python scripts/colab_snapshot.py --url https://raw.githubusercontent.com/googlecolab/backend-info/main \\
        --date 2026-08-19 --commit a72407924822ea377410b69f0a290150bcb5c9c2
    python scripts/colab_snapshot.py --from DIR --update-floors
then run ``make colab-run`` (both runs) and raise aim_tutorial.config.TESTED_JAX if it asks.
"""

import argparse
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / ".ci" / "colab_runtime_gpu.txt"
PYPROJECT = ROOT / "pyproject.toml"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)==(\S+)$")


def canonical(name: str) -> str:
    """PEP 503 name: lower case, runs of ``-_.`` as one ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_snapshot(text: str) -> dict:
    """``{canonical name: version}`` of the ``name==version`` lines; ``#`` lines are skipped."""
    pins = {}
    for line in text.splitlines():
        m = PIN.match(line.strip())
        if m:
            pins[canonical(m.group(1))] = m.group(2)
    return pins


def header_value(text: str, key: str) -> str:
    """The value of a ``# key: value`` header line of the snapshot (ValueError if absent)."""
    for line in text.splitlines():
        if line.startswith(f"# {key}: "):
            return line.split(": ", 1)[1].strip()
    raise ValueError(f"the snapshot has no '# {key}:' header line")


def _read_source(args):
    if args.source_dir:
        repo = Path(args.source_dir)
        freeze = (repo / "pip-freeze.gpu.txt").read_text()
        os_info = (repo / "os-info-gpu.txt").read_text()
        date = args.date
        commit = args.commit
        if (repo / ".git").exists() and not (date and commit):
            out = subprocess.run(["git", "-C", str(repo), "log", "-1", "--format=%H %cs"],
                                 capture_output=True, text=True, check=True).stdout.split()
            commit, date = commit or out[0], date or out[1]
        where = "googlecolab/backend-info (a clone)"
    else:
        def get(name):
            with urllib.request.urlopen(f"{args.url.rstrip('/')}/{name}", timeout=60) as r:
                return r.read().decode()
        freeze, os_info = get("pip-freeze.gpu.txt"), get("os-info-gpu.txt")
        date, commit = args.date, args.commit
        where = args.url
    if not date:
        raise SystemExit("--date is needed (the commit date of the files in backend-info)")
    return freeze, os_info, date, commit or "unknown", where


def write_snapshot(freeze: str, os_info: str, date: str, commit: str, where: str) -> dict:
    pins, skipped = [], 0
    for line in freeze.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if PIN.match(s):
            pins.append(s)
        else:
            skipped += 1
    info = [ln.strip() for ln in os_info.splitlines() if ln.strip() and not ln.startswith("#")]
    python = next((ln.split()[1] for ln in info if ln.startswith("Python ")), None)
    if python is None:
        raise SystemExit("os-info-gpu.txt names no 'Python X.Y.Z' line")
    ubuntu = next((ln for ln in info if ln.startswith("Ubuntu")), "unknown")
    header = [
        "# What Colab's GPU runtime ships: the name==version lines of pip-freeze.gpu.txt of",
        "# googlecolab/backend-info (https://github.com/googlecolab/backend-info), vendored as pip",
        "# constraints for the Colab-as-shipped run of make test (scripts/colab_check.sh).",
        f"# source: {where}",
        f"# commit: {commit}",
        f"# date: {date}",
        f"# python: {python}",
        f"# os: {ubuntu}",
        f"# lines naming a URL instead of a version (not usable as constraints), left out: {skipped}",
        "# refreshed by: python scripts/colab_snapshot.py (its docstring says how and when)",
    ]
    SNAPSHOT.parent.mkdir(exist_ok=True)
    SNAPSHOT.write_text("\n".join(header + sorted(pins, key=str.lower)) + "\n")
    return parse_snapshot("\n".join(pins))


def dependencies(pyproject_text: str) -> list:
    """The ``dependencies = [...]`` entries of pyproject.toml as (name, operator, version)."""
    block = re.search(r"^dependencies = \[(.*?)^\]", pyproject_text, re.S | re.M)
    if block is None:
        raise ValueError("pyproject.toml: no dependencies = [...] block")
    return [(m.group(1), m.group(2), m.group(3))
            for m in re.finditer(r'"([A-Za-z0-9_.-]+)\s*(>=|==|~=)\s*([^"]+)"', block.group(1))]


def update_floors(pins: dict) -> list:
    text = PYPROJECT.read_text()
    changed = []
    for name, op, version in dependencies(text):
        new = pins.get(canonical(name))
        if new is None:
            raise SystemExit(f"{name}: not in Colab's runtime; choose its floor by hand")
        if op == ">=" and new != version:
            text = text.replace(f'"{name}>={version}"', f'"{name}>={new}"')
            changed.append(f"{name}: {version} -> {new}")
    PYPROJECT.write_text(text)
    return changed


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--from", dest="source_dir", help="a clone of googlecolab/backend-info")
    src.add_argument("--url", help="where pip-freeze.gpu.txt and os-info-gpu.txt are served")
    p.add_argument("--date", help="the files' commit date, YYYY-MM-DD (read from the clone's git log)")
    p.add_argument("--commit", help="the files' commit (read from the clone's git log)")
    p.add_argument("--update-floors", action="store_true", help="rewrite pyproject.toml's floors")
    args = p.parse_args(argv)
    old = parse_snapshot(SNAPSHOT.read_text()) if SNAPSHOT.exists() else {}
    pins = write_snapshot(*_read_source(args))
    names = [canonical(n) for n, _, _ in dependencies(PYPROJECT.read_text())]
    names += ["jaxlib", "ipython", "ipykernel", "nbclient"]
    for n in names:
        if old.get(n) != pins.get(n):
            print(f"{n}: {old.get(n)} -> {pins.get(n)}")
    print(f"wrote {SNAPSHOT.relative_to(ROOT)} ({len(pins)} pins)")
    if args.update_floors:
        for line in update_floors(pins):
            print(f"floor {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
