# aim-tutorial: two commands from a fresh clone (Python 3.11 on the PATH).
#   make book   install everything into .venv and build the HTML book (_build/html)
#   make test   install everything and run every test: unit tests, the book built
#               from scratch with execution forced, nbval over the executed
#               chapters, and the .md/.ipynb pairing check.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN     = $(VENV)/bin
CELL_TIMEOUT ?= 600

.PHONY: install book test unit build-strict nbval sync-check sync clean

install: $(VENV)/.installed

$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -m pip check
	touch $@

book: install
	$(BIN)/jupyter-book build . --builder html
	@echo "book: open _build/html/index.html"

test: install unit build-strict nbval sync-check
	@echo "make test: every step passed"

unit:
	$(BIN)/python -m pytest tests -q

# From a clean _build, execution forced, warnings as errors, nitpicky.
build-strict:
	rm -rf _build
	$(BIN)/jupyter-book build . --builder html -W -n --keep-going

# Re-execute the notebooks the build executed and compare their outputs.
nbval:
	$(BIN)/python -m pytest -p no:cacheprovider --nbval --nbval-current-env \
	    --nbval-cell-timeout=$(CELL_TIMEOUT) --nbval-sanitize-with .ci/nbval_sanitize.cfg \
	    -o filterwarnings= -o addopts= $$(ls _build/jupyter_execute/book/*.ipynb)

# Every book/*.ipynb is the output-free pair of its .md.
sync-check:
	$(BIN)/jupytext --quiet --update --to ipynb book/[0-9]*.md
	git diff --exit-code -- book/
	@test -z "$$(git status --porcelain --untracked-files=all -- book/ | grep '\.ipynb')" || \
	    (echo "untracked or modified paired notebooks:"; git status --porcelain -- book/; exit 1)

# Regenerate the paired notebooks after editing a chapter.
sync:
	$(BIN)/jupytext --quiet --set-formats ipynb,md:myst book/[0-9]*.md
	$(BIN)/jupytext --quiet --update --to ipynb book/[0-9]*.md

clean:
	rm -rf _build

# Python 3.12 with the newest, unpinned JAX (what Colab has): installs into $OUT/venv
# (default /tmp/aim_py312), runs the fast tests and executes every chapter at AIM_SCALE=smoke.
.PHONY: test-py312
test-py312:
	bash scripts/py312_check.sh
