"""Print the given notebook or page paths, the slowest to execute first (for parallel runs).

    python scripts/slowest_first.py PATH...

The order comes from the seconds each page took to execute in CI (2 cores), below;
unlisted pages go last. Standard library only (the Colab check runs it with the
system Python). Exit status 2 when no path is given.
"""

import sys
from pathlib import Path

MEASURED_S = {"06_gradient_descent": 110, "03_replica": 81, "05_amp": 75, "07_deep_attention": 62,
              "08_attention_in_practice": 60,  # measured here (dev build, 2 shared cores), not yet on CI
              "04_bayes_optimal_error": 125, "01_model": 50, "02_random_matrices": 23, "09_explore": 50,
              "intro": 11, "benchmarks": 4}


def slowest_first(paths):
    return sorted(paths, key=lambda p: -MEASURED_S.get(Path(p).stem.split(".")[0], 0))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: slowest_first.py PATH...")
    for p in slowest_first(sys.argv[1:]):
        print(p)
