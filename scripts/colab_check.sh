#!/usr/bin/env bash
# Run the Colab notebooks (book/NN_*.ipynb) top to bottom as Colab would, in fresh virtual
# environments of the Python Colab runs (the snapshot's, 3.13), one run per environment:
#   shipped  the versions Colab's GPU runtime ships: every package the notebooks use, and all
#            their dependencies, pinned by .ci/colab_runtime_gpu.txt (pip constraints: the
#            vendored pip freeze of googlecolab/backend-info, refreshed by scripts/colab_snapshot.py).
#            The package's floors (pyproject.toml) are these versions (tests/test_colab_runtime.py),
#            so this is also the run at the declared floors.
#   newest   only the newest jax, jaxlib and the kernel installed; everything else the newest
#            release, installed by the notebook's own install cell.
# Each notebook's first cell installs the package, here from a wheel of this checkout
# (AIM_INSTALL_SOURCE), at AIM_SCALE=smoke.
#
#   make colab-run                  # or: JOBS=2 bash scripts/colab_check.sh [NOTEBOOK...]
#   COLAB_ENVS=shipped make colab-run
#
# JOBS notebooks run at a time (default: the CPUs), each worker in its own fresh environment
# ($OUT/ENV/venv1, $OUT/ENV/venv2, ...), the slowest notebooks first.
# COLAB_STAGE=prepare only creates the environments (make test starts that first, in the
# background, as it is mostly downloading); COLAB_STAGE=run waits for them and runs.
# Outputs (executed notebooks, logs, timings) go to $OUT/ENV (default OUT: /tmp/aim_colab).
# Needs the package index; exit status non-zero if any notebook fails in any environment.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/aim_colab}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
ENVS=${COLAB_ENVS:-shipped newest}
SNAPSHOT=.ci/colab_runtime_gpu.txt
STAGE=${COLAB_STAGE:-all}
case "$STAGE" in all|prepare|run) ;; *) echo "COLAB_STAGE must be all, prepare or run, got $STAGE"; exit 2;; esac
for env in $ENVS; do
    case "$env" in shipped|newest) ;; *) echo "COLAB_ENVS: each must be shipped or newest, got $env"; exit 2;; esac
done
[ -f "$SNAPSHOT" ] || { echo "no $SNAPSHOT: python scripts/colab_snapshot.py"; exit 1; }
# Colab's Python, major.minor, from the snapshot's header ("# python: 3.13.15")
COLAB_PY=$(sed -n 's/^# python: \([0-9]*\.[0-9]*\).*/\1/p' "$SNAPSHOT")
[ -n "$COLAB_PY" ] || { echo "$SNAPSHOT has no '# python:' header line"; exit 1; }
source scripts/find_python.sh
PY=$(find_python "$COLAB_PY") || exit 2
mkdir -p "$OUT"
start_all=$(date +%s)

notebooks=("$@")
[ ${#notebooks[@]} -eq 0 ] && notebooks=(book/[0-9]*.ipynb)
[ -f "${notebooks[0]}" ] || { echo "no Colab notebooks (book/NN_*.ipynb): make colab"; exit 1; }
order=$(python3 scripts/slowest_first.py "${notebooks[@]}") || { echo "scripts/slowest_first.py failed"; exit 1; }
mapfile -t notebooks <<< "$order"
echo "${#notebooks[@]} notebooks: ${notebooks[*]}"
(( JOBS > ${#notebooks[@]} )) && JOBS=${#notebooks[@]}
(( JOBS < 1 )) && JOBS=1

# The packages of Colab's runtime that the notebooks import (with the kernel and the notebook
# runner): installed at the snapshot's versions, their dependencies too (pip constraints).
SHIPPED_PACKAGES="jax jaxlib numpy scipy matplotlib altair optax tqdm threadpoolctl ipython ipykernel nbclient nbformat"
# always fresh environments: the notebooks must install what they need themselves
make_venv() {  # make_venv ENV DIR
    rm -rf "$2" && "$PY" -m venv "$2" && "$2/bin/python" -m pip install --quiet --upgrade pip || return 1
    case "$1" in
        shipped) "$2/bin/python" -m pip install --quiet -c "$SNAPSHOT" $SHIPPED_PACKAGES ;;
        newest) "$2/bin/python" -m pip install --quiet --upgrade jax jaxlib ipykernel nbclient nbformat ;;
    esac
}
if [ "$STAGE" != run ]; then
    pids=(); names=()
    for env in $ENVS; do
        mkdir -p "$OUT/$env"; rm -f "$OUT/$env/venvs.ready" "$OUT/$env/venvs.failed"
        for k in $(seq 1 "$JOBS"); do
            make_venv "$env" "$OUT/$env/venv$k" > "$OUT/$env/venv$k.log" 2>&1 & pids+=($!); names+=("$env/venv$k")
        done
    done
    failed=0
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}" || { echo "environment ${names[$i]} failed; see $OUT/${names[$i]}.log"
                                tail -n 5 "$OUT/${names[$i]}.log"; touch "$OUT/${names[$i]%/*}/venvs.failed"; failed=1; }
    done
    [ $failed -eq 0 ] || exit 1
    for env in $ENVS; do echo "$JOBS" > "$OUT/$env/venvs.ready"; done
    echo "environments ($ENVS; $JOBS each, python $COLAB_PY): $(( $(date +%s) - start_all )) s"
    [ "$STAGE" = prepare ] && exit 0
else
    # made by COLAB_STAGE=prepare, started earlier: wait for it (at most 20 minutes)
    for env in $ENVS; do
        for _ in $(seq 1 600); do
            [ -f "$OUT/$env/venvs.ready" ] || [ -f "$OUT/$env/venvs.failed" ] && break
            sleep 2
        done
        [ -f "$OUT/$env/venvs.ready" ] || { echo "the $env environments were not made (COLAB_STAGE=prepare): see $OUT/$env/venv*.log"
                                            tail -n 5 "$OUT/$env"/venv*.log; exit 1; }
        (( $(cat "$OUT/$env/venvs.ready") >= JOBS )) || { echo "$env: fewer environments than JOBS = $JOBS"; exit 1; }
    done
    echo "environments: made earlier, waited $(( $(date +%s) - start_all )) s"
fi
first=${ENVS%% *}
# The notebooks install the package from one wheel built here once: JOBS notebooks installing from
# the checkout at the same moment raced in its build/ folder ("File exists: build/bdist...").
if [ -z "${AIM_INSTALL_SOURCE:-}" ]; then
    rm -rf "$OUT/dist"
    "$OUT/$first/venv1/bin/python" -m pip wheel --quiet --no-deps -w "$OUT/dist" "$PWD" > "$OUT/wheel.log" 2>&1 ||
        { echo "could not build the package's wheel; see $OUT/wheel.log"; tail -n 5 "$OUT/wheel.log"; exit 1; }
    AIM_INSTALL_SOURCE=$(ls "$OUT"/dist/aim_tutorial-*.whl)
fi
export AIM_INSTALL_SOURCE
export AIM_SCALE=${AIM_SCALE:-smoke}
export MPLBACKEND=Agg
# the notebooks keep their compiled programs (aim_tutorial.config.compilation_cache): in a
# cache that starts empty, as in a fresh Colab runtime
unset JAX_COMPILATION_CACHE_DIR

run_one() {  # run_one VENV NOTEBOOK: execute it in an empty directory, as Colab does
    local venv=$1 nb=$2 name start
    name=$(basename "$nb" .ipynb)
    start=$(date +%s)
    if "$venv/bin/python" - "$nb" "$RUN_OUT/$name.ipynb" > "$RUN_OUT/$name.log" 2>&1 <<'PY'
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
        echo "$name: FAILED ($(( $(date +%s) - start )) s); see $RUN_OUT/$name.log"
        grep -E "Error|error:" "$RUN_OUT/$name.log" | tail -n 5
        return 1
    fi
}

status=0
for env in $ENVS; do
    RUN_OUT="$OUT/$env"
    rm -rf "$RUN_OUT"/[0-9]*.ipynb "$RUN_OUT"/[0-9]*.log "$RUN_OUT"/work_*
    export XDG_CACHE_HOME="$RUN_OUT/xdg_cache"
    rm -rf "$XDG_CACHE_HOME"
    start_env=$(date +%s)
    echo "$env: $("$RUN_OUT/venv1/bin/python" -c "import sys, jax, numpy, scipy; print(f'python {sys.version.split()[0]}, jax {jax.__version__}, numpy {numpy.__version__}, scipy {scipy.__version__}')")"
    # worker k takes notebooks k, k + JOBS, k + 2 JOBS, ... of the slowest-first list
    pids=()
    for k in $(seq 1 "$JOBS"); do
        (
            s=0
            for ((i = k - 1; i < ${#notebooks[@]}; i += JOBS)); do
                run_one "$RUN_OUT/venv$k" "${notebooks[$i]}" || s=1
            done
            exit $s
        ) & pids+=($!)
    done
    env_status=0
    for p in "${pids[@]}"; do wait "$p" || env_status=1; done
    ran=$(ls "$RUN_OUT"/[0-9]*.ipynb 2>/dev/null | wc -l)
    [ "$ran" -ge "${#notebooks[@]}" ] || { echo "$env: only $ran of ${#notebooks[@]} notebooks were executed"; env_status=1; }
    echo "$env: ${#notebooks[@]} notebooks in $(( $(date +%s) - start_env )) s ($JOBS at a time)$([ $env_status -eq 0 ] || echo ', FAILED')"
    # The install cell printed a warning where the runtime's JAX lies outside aim_tutorial.config.TESTED_JAX:
    # said here once, with what to do when all passed.
    warning=$(cd "$RUN_OUT" && "$RUN_OUT/venv1/bin/python" -c \
        "from aim_tutorial.config import check_runtime_jax; print(check_runtime_jax() or '')" 2>/dev/null)
    if [ -n "$warning" ]; then
        echo "colab-run ($env): $warning"
        [ $env_status -eq 0 ] && echo "colab-run ($env): every notebook passed with it: widen TESTED_JAX in aim_tutorial/config.py"
    fi
    [ $env_status -eq 0 ] || status=1
done
echo "colab notebooks: $(( $(date +%s) - start_all )) s in all ($ENVS)"
exit $status
