#!/usr/bin/env bash
# Run the Colab notebooks (book/NN_*.ipynb) top to bottom as Colab would: a fresh
# Python 3.12 virtual environment with only the newest JAX, a Jupyter kernel and a
# notebook runner; each notebook's own first cell installs the package, here from
# this checkout (AIM_INSTALL_SOURCE), at AIM_SCALE=smoke.
#
#   make colab-run                  # or: bash scripts/colab_check.sh [NOTEBOOK...]
#
# Outputs (executed notebooks, logs, timings) go to $OUT (default /tmp/aim_colab).
# Needs the package index; exit status non-zero if any notebook fails.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/aim_colab}
VENV=${VENV_COLAB:-$OUT/venv}
source scripts/find_py312.sh
mkdir -p "$OUT"
start_all=$(date +%s)
# always a fresh environment: the notebooks must install what they need themselves
rm -rf "$VENV"
"$PY312" -m venv "$VENV" || exit 1
"$VENV/bin/python" -m pip install --quiet --upgrade pip || exit 1
"$VENV/bin/python" -m pip install --quiet --upgrade jax jaxlib ipykernel nbclient nbformat || exit 1
"$VENV/bin/python" -c "import sys, jax; print(f'python {sys.version.split()[0]}, jax {jax.__version__}')"
echo "environment: $(( $(date +%s) - start_all )) s"

export AIM_INSTALL_SOURCE=${AIM_INSTALL_SOURCE:-$PWD}
export AIM_SCALE=${AIM_SCALE:-smoke}
export MPLBACKEND=Agg
notebooks=("$@")
[ ${#notebooks[@]} -eq 0 ] && notebooks=(book/[0-9]*.ipynb)
status=0
for nb in "${notebooks[@]}"; do
    name=$(basename "$nb" .ipynb)
    start=$(date +%s)
    if "$VENV/bin/python" - "$nb" "$OUT/$name.ipynb" > "$OUT/$name.log" 2>&1 <<'PY'
import sys
import nbformat
from nbclient import NotebookClient
import os
nb = nbformat.read(sys.argv[1], as_version=4)
# run where Colab runs, an empty directory (not the checkout, whose aim_tutorial/ would import)
work = os.path.join(os.path.dirname(os.path.abspath(sys.argv[2])), "work")
os.makedirs(work, exist_ok=True)
NotebookClient(nb, timeout=900, kernel_name="python3",
               resources={"metadata": {"path": work}}).execute()
nbformat.write(nb, sys.argv[2])
PY
    then
        echo "$name: ok ($(( $(date +%s) - start )) s)"
    else
        echo "$name: FAILED ($(( $(date +%s) - start )) s); see $OUT/$name.log"
        grep -E "Error|error:" "$OUT/$name.log" | tail -n 5
        status=1
    fi
done
echo "colab notebooks: $(( $(date +%s) - start_all )) s in all"
exit $status
