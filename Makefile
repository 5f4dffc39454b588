# Two commands on a fresh machine: `make run` (the walkthrough) and `make test` (what CI runs).
# Every target first makes the virtual environment; a stamp file makes that idempotent and
# re-runs the install only when the packaging files change.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PAIRS ?= 5

.PHONY: venv run test bench clean

venv: $(STAMP)

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -e '.[test,bench]'
	touch $@

run: venv
	$(PY) examples/walkthrough.py

test: venv
	$(PY) -m pytest -q
	$(VENV)/bin/ruff check ngraph_core examples notebooks benchmarks tests/test_walkthrough.py

bench: venv
	$(PY) benchmarks/run.py mlp_step --pairs $(PAIRS)

clean:
	rm -rf $(VENV)
