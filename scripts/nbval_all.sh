#!/usr/bin/env bash
# nbval over the notebooks the build executed (_build/jupyter_execute/book/*.ipynb):
# every notebook re-executed in its own pytest, JOBS at a time (default: the CPUs),
# the slowest first; each log is printed when its notebook ends. Exit status non-zero
# if any notebook fails.   Usage: JOBS=2 bash scripts/nbval_all.sh [NOTEBOOK...]
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
CELL_TIMEOUT=${CELL_TIMEOUT:-600}
notebooks=("$@")
[ ${#notebooks[@]} -eq 0 ] && notebooks=(_build/jupyter_execute/book/*.ipynb)
[ -f "${notebooks[0]}" ] || { echo "no executed notebooks: build the book first"; exit 1; }
export BIN CELL_TIMEOUT
start=$(date +%s)
python3 scripts/slowest_first.py "${notebooks[@]}" | xargs -P "$JOBS" -I{} bash -c '
    log=$(mktemp); t0=$(date +%s)
    "$BIN/python" -m pytest -q -p no:cacheprovider --nbval --nbval-current-env \
        --nbval-cell-timeout="$CELL_TIMEOUT" --nbval-sanitize-with .ci/nbval_sanitize.cfg \
        -o filterwarnings= -o addopts= "$1" > "$log" 2>&1
    s=$?
    echo "nbval $(basename "$1"): $(tail -n 1 "$log") ($(( $(date +%s) - t0 )) s)"
    [ $s -eq 0 ] || cat "$log"
    rm -f "$log"; [ $s -eq 0 ] || exit 255' _ {}
status=$?
echo "nbval: ${#notebooks[@]} notebooks, $JOBS at a time, $(( $(date +%s) - start )) s"
exit $status
