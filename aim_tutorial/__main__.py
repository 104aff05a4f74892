"""``python -m aim_tutorial reproduce FIGURE --scale smoke|book|paper [--out DIR] [--seed N] [--force]``.

See :mod:`aim_tutorial.reproduce` (the arguments are checked before computing; the files of a
figure are replaced together, or not at all; another run's files are kept unless ``--force``).
"""

import sys

from .reproduce import main

if __name__ == "__main__":
    sys.exit(main())
