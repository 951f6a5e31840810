# Two commands on a fresh machine: `make demo` (the main job on the bundled examples: cpu backend, offline
# judge) and `make test` (the test suite). Each creates the virtual environment it needs; where no torch is
# installed it takes the CPU build, torch==2.13.0 (a GPU machine keeps the CUDA torch it has).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TRAIN_STAMP := $(VENV)/.installed-train
DEMO_OUT ?= runs/demo
PYTEST_ARGS ?=

.PHONY: demo test lint browser gpu-check clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $(STAMP)

# The tests also exercise the verl integration (reward loop, recipes, datasets): verl 0.9.1 on CPU, ~5 min.
$(TRAIN_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e ".[dev,train]"
	touch $(TRAIN_STAMP)

demo: $(STAMP)
	$(BIN)/rubric-rl verify-batch --tasks examples/tasks.jsonl --candidates examples/candidates.jsonl \
		--out $(DEMO_OUT) --device cpu --judge offline

test: lint $(TRAIN_STAMP) browser
	$(BIN)/python -m pytest -m "not gpu" $(PYTEST_ARGS)

# The rollout report's HTML is opened in headless Chromium by its test (skipped where there is none). Debian's
# package, where this machine can install it; never fatal.
browser:
	@command -v chromium-headless-shell >/dev/null || command -v chromium >/dev/null || \
		{ [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		  (apt-get install -y -q chromium-headless-shell >/dev/null 2>&1 || \
		   (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium-headless-shell >/dev/null 2>&1)); } || \
		echo "no headless Chromium: the report's browser test will skip"

lint: $(STAMP)
	$(BIN)/ruff check rubric_rl tests scripts
	$(BIN)/ruff format --check rubric_rl tests scripts
	$(BIN)/mypy

gpu-check:
	bash scripts/gpu_check.sh

clean:
	rm -rf $(VENV) runs .pytest_cache
