"""``python -m aim_tutorial reproduce FIGURE --scale smoke|book|paper [--out DIR]``.

See :mod:`aim_tutorial.reproduce`.
"""

import sys

from .reproduce import main

if __name__ == "__main__":
    sys.exit(main())
