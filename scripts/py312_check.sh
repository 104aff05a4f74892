#!/usr/bin/env bash
# Does the book run on Python 3.12 with the newest JAX (what Google Colab has)?
#
#   make test-py312                       # or: bash scripts/py312_check.sh
#   AIM_SCALE=book make test-py312        # the book's sizes instead of smoke
#   bash scripts/py312_check.sh --install-only
#
# Creates a Python 3.12 virtual environment (default $OUT/venv), installs the
# package (not editable, as `pip install git+...` does in Colab) with the NEWEST
# jax/jaxlib and the other runtime dependencies unpinned, then
#   1. runs the fast unit tests (pytest -m "not slow"),
#   2. executes every chapter book/NN_*.md (jupytext --execute, AIM_SCALE=smoke
#      by default) and reports which ones fail,
#   3. runs `python -m aim_tutorial reproduce softmax-se --scale smoke`.
# Outputs go to $OUT (default /tmp/aim_py312); the exit status is non-zero if
# any step failed. Needs network access to the package index.
set -uo pipefail

cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/aim_py312}
VENV=${VENV312:-$OUT/venv}
source scripts/find_python.sh
PY312=$(find_python 3.12) || exit 2
echo "using $PY312 ($("$PY312" --version)), venv $VENV, outputs in $OUT"
export AIM_SCALE=${AIM_SCALE:-smoke}
mkdir -p "$OUT"

if [ ! -x "$VENV/bin/python" ]; then
    "$PY312" -m venv "$VENV" || exit 1
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip || exit 1
# unpinned: the newest releases, as in Colab (the package itself has floors only)
"$VENV/bin/python" -m pip install --quiet --upgrade jax jaxlib numpy scipy matplotlib optax tqdm altair \
    ipykernel nbclient nbconvert nbformat jupytext pytest || exit 1
"$VENV/bin/python" -m pip install --quiet --upgrade --force-reinstall --no-deps . || exit 1
"$VENV/bin/python" - <<'PY'
import sys, jax, numpy, scipy, optax
print(f"python {sys.version.split()[0]}, jax {jax.__version__}, numpy {numpy.__version__}, "
      f"scipy {scipy.__version__}, optax {optax.__version__}")
PY
if [ "${1:-}" = "--install-only" ]; then exit 0; fi

status=0
echo "== unit tests (not slow)"
if "$VENV/bin/python" -m pytest tests -q -m "not slow" -p no:cacheprovider > "$OUT/pytest.log" 2>&1; then
    echo "unit tests: ok ($(tail -n 1 "$OUT/pytest.log"))"
else
    echo "unit tests: FAILED ($(tail -n 1 "$OUT/pytest.log")); see $OUT/pytest.log"; status=1
fi

echo "== chapters at AIM_SCALE=$AIM_SCALE"
for md in book/[0-9]*.md; do
    name=$(basename "$md" .md)
    start=$(date +%s)
    if "$VENV/bin/jupytext" --to ipynb --execute --output "$OUT/$name.ipynb" "$md" > "$OUT/$name.log" 2>&1; then
        echo "$name: ok ($(( $(date +%s) - start )) s)"
    else
        echo "$name: FAILED ($(( $(date +%s) - start )) s); see $OUT/$name.log"
        grep -E "Error|error:" "$OUT/$name.log" | tail -n 3
        status=1
    fi
done

echo "== python -m aim_tutorial reproduce"
if "$VENV/bin/python" -m aim_tutorial reproduce softmax-se --scale smoke --out "$OUT/reproduced" --no-progress \
        > "$OUT/reproduce.log" 2>&1; then
    echo "reproduce: ok"
else
    echo "reproduce: FAILED; see $OUT/reproduce.log"; status=1
fi
exit $status
