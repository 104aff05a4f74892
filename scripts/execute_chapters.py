"""Execute the book's pages into a fresh jupyter-cache, several at a time.

    python scripts/execute_chapters.py --cache DIR [--jobs N] [--timeout S]

Every page of ``_toc.yml`` is read by myst-nb's own reader (the jupyter-cache plug-in
``myst_nb_md``), executed top to bottom in its own directory by jupyter-cache's worker
(what myst-nb's ``cache`` mode runs, one page at a time), and stored in the cache at
DIR, which must not exist yet. A build with ``execute_notebooks: cache`` pointed at DIR
then takes every page's outputs from it: each page is executed exactly once, from
scratch, and ``N`` pages run at the same time (default: the number of CPUs). The
slowest pages are started first. A page that fails is reported here and left out of
the cache, so the build executes it again itself and fails on it with its traceback.

``AIM_BOOK_BUILD`` is set as the build's extension sets it (``_ext/aim_book.py``), so
the kernels draw the explorers as the build does.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from pathlib import Path

import yaml
from jupyter_cache import get_cache
from jupyter_cache.executors.basic import ExecutionWorkerLocalMProc, ProcessData

ROOT = Path(__file__).resolve().parent.parent
READER = {"name": "myst_nb_md", "type": "plugin"}
sys.path.insert(0, str(ROOT / "scripts"))
from slowest_first import slowest_first  # noqa: E402  (the measured order)


def toc_pages() -> list[Path]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [c["file"] for c in part.get("chapters", [])]
    return [ROOT / f"{f}.md" for f in files]


def is_executable(path: Path) -> bool:
    """A MyST notebook page: its front matter names a Jupyter kernel."""
    head = path.read_text().split("\n---", 1)[0]
    return "kernelspec" in head


def _run(data: ProcessData):
    start = time.time()
    status, uri = ExecutionWorkerLocalMProc()(data)
    return status, uri, time.time() - start


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", required=True, type=Path, help="the cache to create (must not exist)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="pages executed at once")
    ap.add_argument("--timeout", type=int, default=None, help="per-cell timeout, s (default: _config.yml's)")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error(f"--jobs must be >= 1, got {args.jobs}")
    if args.cache.exists():
        ap.error(f"--cache {args.cache} exists: give a new directory (every page is executed afresh)")
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    timeout = args.timeout or int(config.get("execute", {}).get("timeout", 600))
    allow_errors = bool(config.get("execute", {}).get("allow_errors", False))
    os.environ["AIM_BOOK_BUILD"] = "1"

    pages = slowest_first([p for p in toc_pages() if is_executable(p)])
    cache = get_cache(str(args.cache))
    records = [cache.add_nb_to_project(str(p), read_data=READER) for p in pages]
    work = [ProcessData(r.pk, r.uri, cache, timeout, allow_errors) for r in records]
    start = time.time()
    failed = []
    with multiprocessing.get_context("fork").Pool(min(args.jobs, len(work))) as pool:
        for status, uri, seconds in pool.imap_unordered(_run, work, chunksize=1):
            name = Path(uri).name
            print(f"{name}: {'executed' if status == 0 else 'FAILED'} in {seconds:.1f} s", flush=True)
            if status != 0:
                failed.append(name)
    print(f"{len(work)} pages, {args.jobs} at a time: {time.time() - start:.0f} s", flush=True)
    if failed:
        print("failed (the build will execute them again and show why): " + ", ".join(failed), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
