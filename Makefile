# aim-tutorial: two commands from a fresh clone (Python 3.11 on the PATH).
#   make book   install everything into .venv and build the HTML book (_build/html)
#   make test   install everything and run every test: unit tests, the book built
#               from scratch with execution forced, nbval over the executed
#               chapters, and the .md/.ipynb pairing check.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN     = $(VENV)/bin
CELL_TIMEOUT ?= 600
# MathJax is served from the build itself (offline maths): the npm package,
# unpacked once into _vendor/mathjax (not tracked; copied into _build/html/mathjax
# by html_extra_path; not under _static, whose every .js Jupyter Book would add to
# each page), pinned here.
MATHJAX_VERSION ?= 3.2.2
MATHJAX = _vendor/mathjax/tex-mml-chtml.js

.PHONY: install book test unit build-strict browser nbval sync-check sync clean mathjax

install: $(VENV)/.installed $(MATHJAX)

mathjax: $(MATHJAX)

# Only the parts the book loads: the TeX-to-CHTML bundle, its fonts, and the
# extensions, menu and accessibility components it loads on demand.
$(MATHJAX):
	@command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq npm; }
	rm -rf _vendor/mathjax .mathjax-pack && mkdir -p .mathjax-pack _vendor/mathjax
	cd .mathjax-pack && npm pack --silent mathjax@$(MATHJAX_VERSION) >/dev/null && tar xzf mathjax-$(MATHJAX_VERSION).tgz
	cd .mathjax-pack/package && cp -r LICENSE es5/tex-mml-chtml.js es5/input es5/output es5/ui es5/a11y es5/sre ../../_vendor/mathjax/
	rm -rf .mathjax-pack

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

test: install unit build-strict browser nbval sync-check
	@echo "make test: every step passed"

unit:
	$(BIN)/python -m pytest tests -q --ignore=tests/browser

# Every page of the built book in headless Chromium (Debian's), offline:
# maths rendered, no raw MyST, no broken link or image, no equation wider than
# its column, no console error, no network request. Screenshots: _build/screenshots.
browser:
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; }
	$(BIN)/python -m pytest tests/browser -q -p no:cacheprovider

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
