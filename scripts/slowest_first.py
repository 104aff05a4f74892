"""Print the given notebook or page paths, the slowest to execute first (for parallel runs).

    python scripts/slowest_first.py PATH...

The order comes from the measured times in scripts/execute_chapters.py; unlisted pages last.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from execute_chapters import MEASURED_S  # noqa: E402

for p in sorted(sys.argv[1:], key=lambda p: -MEASURED_S.get(Path(p).stem.split(".")[0], 0)):
    print(p)
