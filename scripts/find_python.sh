# Sourced by scripts/py312_check.sh and scripts/colab_check.sh: `find_python X.Y` prints the first
# pythonX.Y that runs ($PYXY if set, e.g. PY313; pythonX.Y on the PATH; a pyenv or uv installation;
# /usr/bin), or prints a message to stderr and returns 2.
find_python() {
    local ver=$1 var="PY${1//./}" cand
    if [ -n "${!var:-}" ]; then echo "${!var}"; return 0; fi
    for cand in "$(command -v "python$ver" || true)" /root/.pyenv/versions/"$ver"*/bin/python"$ver" \
                "$HOME"/.pyenv/versions/"$ver"*/bin/python"$ver" \
                "$HOME"/.local/share/uv/python/cpython-"$ver"*/bin/python"$ver" /usr/bin/python"$ver"; do
        if [ -n "$cand" ] && "$cand" --version > /dev/null 2>&1; then echo "$cand"; return 0; fi
    done
    echo "no working python$ver found; set $var=/path/to/python$ver" >&2
    return 2
}
