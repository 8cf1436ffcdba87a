# Two set-up commands: `make run` (web + worker + beat on the embedded defaults, demo data)
# and `make test` (the whole suite). Both need only Python 3.11+ and make.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python

.PHONY: run test lint typecheck fmt clean-db bench

$(PY):
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is needed"'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.installed-run: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@ $(VENV)/.installed-run

$(VENV)/.installed-bench: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[bench]'
	touch $@ $(VENV)/.installed-run

run: $(VENV)/.installed-run
	scripts/run.sh

test: $(VENV)/.installed-test
	scripts/test.sh $(PYTEST_ARGS)

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: $(VENV)/.installed-test
	DJANGO_ENV=test $(BIN)/mypy

fmt: $(VENV)/.installed-test
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Every benchmark of bench/ on DATABASE_URL (else the embedded server), then docs/benchmarks.md.
# BENCH_ARGS=--quick for smaller sizes; BENCH_ARGS='--only load' re-runs one into the document.
bench: $(VENV)/.installed-bench
	@if [ -z "$$DATABASE_URL" ]; then $(PY) -m config.embedded_db start >/dev/null || exit 1; fi; \
	$(PY) bench/run_all.py $(BENCH_ARGS); status=$$?; \
	if [ -z "$$DATABASE_URL" ]; then $(PY) -m config.embedded_db stop; fi; exit $$status

# The schema fuzz tests (tests/fuzz) with a large, random budget: FUZZ_MAX_EXAMPLES examples per
# operation and role, the coverage phase, longer stateful runs. `make test` runs them small.
.PHONY: fuzz
FUZZ_MAX_EXAMPLES ?= 200
fuzz: $(VENV)/.installed-test
	FUZZ_MAX_EXAMPLES=$(FUZZ_MAX_EXAMPLES) scripts/test.sh tests/fuzz -m fuzz $(PYTEST_ARGS)

clean-db:
	-$(PY) -m config.embedded_db stop
	rm -rf var/pgdata
