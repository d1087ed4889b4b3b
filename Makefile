# kexpr — the two set-up commands are `make run` and `make test` (README).
# Each creates .venv if missing and installs what it needs from this repo's files.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATA_ROOT ?= ./var/korean-expression-v1

.PHONY: run test bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# The worker extra pulls openai==2.24.0; the gateway-side base install never does.
$(VENV)/.installed-run: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[worker]'
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@ $(VENV)/.installed-run

run: $(VENV)/.installed-run
	$(BIN)/kexpr run --data-root $(DATA_ROOT)

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest

# Benchmarks print figures; they are never timed unit tests (shared, noisy machines).
# `make bench QUICK=1` is the ~1 minute profile.
bench: $(VENV)/.installed-test
	$(BIN)/python bench/run.py $(if $(QUICK),--quick,)

clean:
	rm -rf $(VENV) var .pytest_cache .hypothesis
