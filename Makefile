# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast venv clean bench

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# torch first, pinned: an unpinned torch pulled in by another package would be a multi-GB CUDA build.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[dev,llm,ray]"
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/arena demo

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 tests

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 -m "not slow" tests

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_match.py

clean:
	rm -rf $(VENV)
