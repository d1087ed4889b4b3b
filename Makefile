# kexpr — the two set-up commands are `make run` and `make test` (README).
# Each creates .venv if missing and installs what it needs from this repo's files.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATA_ROOT ?= ./var/korean-expression-v1

.PHONY: run test check bench clean

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

# `make test` never installs system packages. Without systemd-analyze the unit
# tests (tests/ops_tests/test_systemd.py) skip and say so; `make test-tools` installs it.
# Lint first (seconds), then the suite; mypy --strict runs inside the suite.
# The suite runs on parallel workers (pytest-xdist): JOBS=auto is one per CPU this
# process may use, 1 to 8 (tests/conftest.py); JOBS=N sets it; JOBS=0 runs serially.
# --dist loadgroup keeps each module of tests/conftest.py ONE_WORKER_MODULES on one
# worker (its scheduler hook; the file says why).
JOBS ?= auto
PYTEST_PARALLEL = -n $(JOBS) --dist loadgroup
test: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest $(PYTEST_PARALLEL)

# The inner loop (README): the same lint, then the fast tests only, on the same
# workers. `slow` is set by tests/conftest.py (SLOW_MODULES says what and why).
check: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest $(PYTEST_PARALLEL) -m "not slow"

# System tools some tests use (systemd-analyze, libfaketime), installed with
# apt (as root) only if missing; elsewhere the script says why the test skips.
.PHONY: test-tools
test-tools:
	@sh tests/ops_tests/ensure-systemd-analyze.sh

# Lint alone: ruff's checks and its formatter, as configured in pyproject.toml
# (`make test` runs the same two first).
.PHONY: lint
lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# mypy alone: --strict over the product packages, mypy-tests.ini over tests/ and
# mypy-scripts.ini (--strict) over bench/ and fuzz/
# (both also run inside `make test`: tests/packaging_tests/test_typecheck.py).
.PHONY: typecheck
typecheck: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/packaging_tests/test_typecheck.py

# Benchmarks print figures; they are never timed unit tests (shared, noisy machines).
# `make bench QUICK=1` is the ~1.5 minute profile (its time-budget phase ~40 s of it).
bench: $(VENV)/.installed-test
	$(BIN)/python bench/run.py $(if $(QUICK),--quick,)

# The shim as a guest of an asyncio host: 2,000 concurrent apresent_*
# with the worker down and with a 2 s provider, while the host's own
# getaddrinfo/to_thread run; `BASELINE=1` adds the old to_thread shape.
.PHONY: bench-guest
bench-guest: $(VENV)/.installed-test
	$(BIN)/python bench/guest.py $(if $(BASELINE),--baseline,)

# Fuzzing: the generative properties at 10**5 examples each and the
# end-to-end redaction proofs at 500 per surface (Hypothesis profile `fuzz`,
# tests/adversarial/hypothesis_profiles.py; about an hour on two shared cores), then
# coverage-guided fuzzing of judge() with atheris for FUZZ_SECONDS (fuzz/fuzz_judge.py).
# Both run under `nice`. New corpus entries and crashes go to var/fuzz, never to
# fuzz/corpus.
FUZZ_SECONDS ?= 300
.PHONY: fuzz
$(VENV)/.installed-fuzz: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test,fuzz]'
	touch $@ $(VENV)/.installed-test $(VENV)/.installed-run

fuzz: $(VENV)/.installed-fuzz
	KEXPR_HYPOTHESIS_PROFILE=fuzz nice $(BIN)/python -m pytest -q tests/adversarial tests/redaction
	mkdir -p var/fuzz/corpus var/fuzz/artifacts
	nice $(BIN)/python fuzz/fuzz_judge.py var/fuzz/corpus fuzz/corpus/judge -dict=fuzz/judge.dict \
		-max_len=17408 -max_total_time=$(FUZZ_SECONDS) -artifact_prefix=var/fuzz/artifacts/ -print_final_stats=1

# Crash campaign: real supervisor/worker/shim processes, SIGKILLed at
# random phases, invariants after every round; the counts are the last line.
# `make test` runs a short one (tests/crash/test_crash_campaign.py).
# MAX_SECONDS=1800 starts no round after that (the counts say how many ran).
N ?= 1000
.PHONY: crash
crash: $(VENV)/.installed-test
	$(BIN)/python tests/crash/campaign.py --rounds $(N) $(if $(SEED),--seed $(SEED),) $(if $(MAX_SECONDS),--max-seconds $(MAX_SECONDS),)

clean:
	rm -rf $(VENV) var .pytest_cache .hypothesis
