# kexpr — the two set-up commands are `make run` and `make test` (README).
# Each creates .venv if missing and installs what it needs from this repo's files.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATA_ROOT ?= ./var/korean-expression-v1

.PHONY: run test worker supervise clean

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

clean:
	rm -rf $(VENV) var .pytest_cache .hypothesis
