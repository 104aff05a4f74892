# Sourced by scripts/py312_check.sh and scripts/colab_check.sh: sets PY312 to the first
# python3.12 that runs ($PY312 if set, python3.12 on the PATH, a pyenv installation),
# or exits with status 2 and a message.
if [ -z "${PY312:-}" ]; then
    for cand in "$(command -v python3.12 || true)" /root/.pyenv/versions/3.12*/bin/python3.12 \
                "$HOME"/.pyenv/versions/3.12*/bin/python3.12 /usr/bin/python3.12; do
        if [ -n "$cand" ] && "$cand" --version > /dev/null 2>&1; then PY312=$cand; break; fi
    done
fi
if [ -z "${PY312:-}" ]; then echo "no working python3.12 found; set PY312=/path/to/python3.12"; exit 2; fi
