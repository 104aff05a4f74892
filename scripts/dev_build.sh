#!/usr/bin/env bash
# Development build of the HTML book: like `make book`, but notebooks are executed
# only when their code changed (jupyter-cache, shared across builds at
# ${AIM_DEV_CACHE:-/tmp/aim_jcache}), so that editing prose rebuilds in seconds.
# Usage: bash scripts/dev_build.sh OUTPUT_DIR   (the HTML lands in OUTPUT_DIR/_build/html)
# Not for CI: `make test` always builds from scratch with execution forced.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: dev_build.sh OUTPUT_DIR}
cfg=".dev_config_$(basename "$out").yml"
# A chapter whose cell fails is reported, and the others still build.
sed -e "s|execute_notebooks: force|execute_notebooks: cache\n  cache: ${AIM_DEV_CACHE:-/tmp/aim_jcache}|" \
    -e "s|nb_execution_raise_on_error: true|nb_execution_raise_on_error: false|" _config.yml > "$cfg"
trap 'rm -f "$cfg"' EXIT
.venv/bin/jupyter-book build . --builder html --config "$cfg" --path-output "$out" "${@:2}"
