# make demo / make test create or refresh .venv from PyPI, then run.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-test
PEERS  := $(VENV)/.installed-peers

.PHONY: demo test bench venv clean

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

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
