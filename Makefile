# make demo / make test create or refresh .venv from PyPI, then run.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-test
PEERS  := $(VENV)/.installed-peers

.PHONY: demo test bench venv clean autograd-suite

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test]"
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

demo: $(STAMP)
	$(PY) -m tapestry.cli demo all --quick

$(PEERS): $(STAMP)
	$(PY) -m pip install -q -e ".[peers]"
	touch $(PEERS)

# Benchmarks side by side with PyTorch, JAX and HIPS autograd.
bench: $(PEERS)
	$(PY) -m tapestry.cli bench $(BENCH_ARGS)

# HIPS autograd's own tests/ run against tapestry.autograd (not part of `make test`).
# The tests are not in this repository: `git clone https://github.com/HIPS/autograd`, then
#   make autograd-suite AUTOGRAD_TESTS=autograd/tests   (a tests/ folder), or
#   make autograd-suite AUTOGRAD_REPO=autograd          (a git repository: tests/ at HEAD).
# Nothing is downloaded or installed. Failures grouped by cause: AUTOGRAD_NOTES=file.md
AUTOGRAD_TESTS ?=
AUTOGRAD_REPO ?=
AUTOGRAD_NOTES ?=
autograd-suite: $(STAMP)
	PYTHONPATH=src $(PY) tools/run_autograd_suite.py $(AUTOGRAD_TESTS) \
		$(if $(AUTOGRAD_REPO),--repo $(AUTOGRAD_REPO)) \
		$(if $(AUTOGRAD_NOTES),--notes $(AUTOGRAD_NOTES))

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
