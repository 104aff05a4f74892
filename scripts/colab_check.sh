#!/usr/bin/env bash
# Run the Colab notebooks (book/NN_*.ipynb) top to bottom as Colab would: a fresh
# Python 3.12 virtual environment with only the newest JAX, a Jupyter kernel and a
# notebook runner; each notebook's own first cell installs the package, here from
# this checkout (AIM_INSTALL_SOURCE), at AIM_SCALE=smoke.
#
#   make colab-run                  # or: JOBS=2 bash scripts/colab_check.sh [NOTEBOOK...]
#
# JOBS notebooks run at a time (default: the CPUs), each worker in its own fresh
# environment ($OUT/venv1, $OUT/venv2, ...), the slowest notebooks first.
# COLAB_STAGE=prepare only creates the environments (make test starts that first, in the
# background, as it is mostly downloading); COLAB_STAGE=run waits for them and runs.
# Outputs (executed notebooks, logs, timings) go to $OUT (default /tmp/aim_colab).
# Needs the package index; exit status non-zero if any notebook fails.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/aim_colab}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
source scripts/find_py312.sh
STAGE=${COLAB_STAGE:-all}
case "$STAGE" in all|prepare|run) ;; *) echo "COLAB_STAGE must be all, prepare or run, got $STAGE"; exit 2;; esac
mkdir -p "$OUT"
[ "$STAGE" = run ] || rm -f "$OUT/venvs.ready" "$OUT/venvs.failed"
[ "$STAGE" = prepare ] || rm -rf "$OUT"/[0-9]*.ipynb "$OUT"/[0-9]*.log "$OUT"/work_*
start_all=$(date +%s)

notebooks=("$@")
[ ${#notebooks[@]} -eq 0 ] && notebooks=(book/[0-9]*.ipynb)
[ -f "${notebooks[0]}" ] || { echo "no Colab notebooks (book/NN_*.ipynb): make colab"; exit 1; }
order=$(python3 scripts/slowest_first.py "${notebooks[@]}") || { echo "scripts/slowest_first.py failed"; exit 1; }
mapfile -t notebooks <<< "$order"
echo "${#notebooks[@]} notebooks: ${notebooks[*]}"
(( JOBS > ${#notebooks[@]} )) && JOBS=${#notebooks[@]}
(( JOBS < 1 )) && JOBS=1

# always fresh environments: the notebooks must install what they need themselves
make_venv() {
    rm -rf "$1" && "$PY312" -m venv "$1" &&
        "$1/bin/python" -m pip install --quiet --upgrade pip &&
        "$1/bin/python" -m pip install --quiet --upgrade jax jaxlib ipykernel nbclient nbformat
}
if [ "$STAGE" != run ]; then
    pids=()
    for k in $(seq 1 "$JOBS"); do
        make_venv "$OUT/venv$k" > "$OUT/venv$k.log" 2>&1 & pids+=($!)
    done
    for k in "${!pids[@]}"; do
        wait "${pids[$k]}" || { echo "environment $((k + 1)) failed; see $OUT/venv$((k + 1)).log";
                                tail -n 5 "$OUT/venv$((k + 1)).log"; touch "$OUT/venvs.failed"; exit 1; }
    done
    echo "$JOBS" > "$OUT/venvs.ready"
    echo "environments ($JOBS): $(( $(date +%s) - start_all )) s"
    [ "$STAGE" = prepare ] && exit 0
else
    # made by COLAB_STAGE=prepare, started earlier: wait for it (at most 20 minutes)
    for _ in $(seq 1 600); do
        [ -f "$OUT/venvs.ready" ] || [ -f "$OUT/venvs.failed" ] && break
        sleep 2
    done
    [ -f "$OUT/venvs.ready" ] || { echo "the environments were not made (COLAB_STAGE=prepare): see $OUT/venv*.log";
                                   tail -n 5 "$OUT"/venv*.log; exit 1; }
    (( $(cat "$OUT/venvs.ready") >= JOBS )) || { echo "fewer environments than JOBS = $JOBS"; exit 1; }
    echo "environments: made earlier, waited $(( $(date +%s) - start_all )) s"
fi
"$OUT/venv1/bin/python" -c "import sys, jax; print(f'python {sys.version.split()[0]}, jax {jax.__version__}')"

# The notebooks install the package from one wheel built here once: JOBS notebooks installing from
# the checkout at the same moment raced in its build/ folder ("File exists: build/bdist...").
if [ -z "${AIM_INSTALL_SOURCE:-}" ]; then
    rm -rf "$OUT/dist"
    "$OUT/venv1/bin/python" -m pip wheel --quiet --no-deps -w "$OUT/dist" "$PWD" > "$OUT/wheel.log" 2>&1 ||
        { echo "could not build the package's wheel; see $OUT/wheel.log"; tail -n 5 "$OUT/wheel.log"; exit 1; }
    AIM_INSTALL_SOURCE=$(ls "$OUT"/dist/aim_tutorial-*.whl)
fi
export AIM_INSTALL_SOURCE
export AIM_SCALE=${AIM_SCALE:-smoke}
export MPLBACKEND=Agg
# the notebooks keep their compiled programs (aim_tutorial.config.compilation_cache): in a
# cache that starts empty, as in a fresh Colab runtime
unset JAX_COMPILATION_CACHE_DIR
export XDG_CACHE_HOME="$OUT/xdg_cache"
rm -rf "$XDG_CACHE_HOME"

run_one() {  # run_one VENV NOTEBOOK: execute it in an empty directory, as Colab does
    local venv=$1 nb=$2 name start
    name=$(basename "$nb" .ipynb)
    start=$(date +%s)
    if "$venv/bin/python" - "$nb" "$OUT/$name.ipynb" > "$OUT/$name.log" 2>&1 <<'PY'
import sys
import nbformat
from nbclient import NotebookClient
import os
nb = nbformat.read(sys.argv[1], as_version=4)
# run where Colab runs, an empty directory (not the checkout, whose aim_tutorial/ would import)
work = os.path.join(os.path.dirname(os.path.abspath(sys.argv[2])), "work_" + os.path.basename(sys.argv[2]))
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
        return 1
    fi
}

# worker k takes notebooks k, k + JOBS, k + 2 JOBS, ... of the slowest-first list
pids=()
for k in $(seq 1 "$JOBS"); do
    (
        s=0
        for ((i = k - 1; i < ${#notebooks[@]}; i += JOBS)); do
            run_one "$OUT/venv$k" "${notebooks[$i]}" || s=1
        done
        exit $s
    ) & pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
ran=$(ls "$OUT"/[0-9]*.ipynb 2>/dev/null | wc -l)
[ "$ran" -ge "${#notebooks[@]}" ] || { echo "only $ran of ${#notebooks[@]} notebooks were executed"; status=1; }
echo "colab notebooks: ${#notebooks[@]} in $(( $(date +%s) - start_all )) s in all ($JOBS at a time)"
# The notebooks ran with the newest JAX; outside the tested range (aim_tutorial.config.TESTED_JAX),
# each printed the install cell's warning. Said here once, with what to do when all passed.
warning=$(cd "$OUT" && "$OUT/venv1/bin/python" -c \
    "from aim_tutorial.config import check_runtime_jax; print(check_runtime_jax() or '')" 2>/dev/null)
if [ -n "$warning" ]; then
    echo "colab-run: $warning"
    [ $status -eq 0 ] && echo "colab-run: every notebook passed with it: raise TESTED_JAX in aim_tutorial/config.py"
fi
exit $status
