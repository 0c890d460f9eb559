# Two commands for a new user: `make demo` and `make test`. Both set up .venv
# from nothing; a stamp file makes the set-up a no-op when nothing changed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False

.PHONY: install test test-unit lint typecheck pytest demo clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# torch first, from the CPU wheel, then everything else under the same pin.
$(STAMP): $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/pip install --quiet "torch==2.13.0"
	$(BIN)/pip install --quiet -c constraints.txt -e ".[dev,server,http,agent,bench,cluster]"
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/pyright

pytest: $(STAMP)
	$(BIN)/pytest

test: lint typecheck pytest

# The fast unit tests alone (seconds): pure code and the planner over test doubles.
test-unit: $(STAMP)
	$(BIN)/pytest -m unit -q

demo: $(STAMP)
	$(BIN)/python -m uda.demo

# Benchmarks (not part of `make test`; a smoke run of the harness is): reports go to
# benchmarks/results/<preset>/. `bench` runs for hours, `bench-quick` for an hour or more
# (most of it embedding the corpora).
.PHONY: bench bench-quick
bench: $(STAMP)
	$(BIN)/python -m benchmarks --preset full

bench-quick: $(STAMP)
	$(BIN)/python -m benchmarks --preset quick

clean:
	rm -rf $(VENV) .uda .cache .pytest_cache .ruff_cache
