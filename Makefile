# gpu-engine developer entry points.  `make demo` and `make test` are the two README commands:
# each bootstraps .venv from PyPI on first use (and again whenever pyproject.toml changes).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
SRC    := gpu_engine kernels tests bench

.DEFAULT_GOAL := help
.PHONY: help .venv lint typecheck imports test test-main test-cudasim test-gpu demo bench device-kit clean distclean

help:
	@echo "make demo        run the demo (bootstraps .venv from PyPI on first use)"
	@echo "make test        lint, typecheck, imports, pytest (CPU pass + CUDA-simulator pass)"
	@echo "make test-gpu    pytest -m gpu (needs a real CUDA device)"
	@echo "make bench       kernel benchmarks -> bench/results/ (JSON + PNG)"
	@echo "make device-kit  wheels + fixtures in parts for a lent GPU machine; calls in .device/CALLS.md"
	@echo "make lint | typecheck | imports | test-main | test-cudasim"
	@echo "make .venv       create/refresh the virtual environment only"
	@echo "make clean       remove caches and build output; make distclean also removes .venv"
	@echo "PYTHON=...       interpreter used to create .venv (default python3, needs >= 3.11)"

.venv: $(STAMP)

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { \
	  echo "error: '$(PYTHON)' not found. Install Python >= 3.11 (Debian: apt-get install python3 python3-venv)" \
	       "or run: make PYTHON=/path/to/python3.11 ..." >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || { \
	  echo "error: gpu-engine needs Python >= 3.11, but $(PYTHON) is $$($(PYTHON) -V 2>&1)." \
	       "Install a newer one and run: make PYTHON=python3.11 (or python3.12) ..." >&2; exit 1; }
	@if [ -x $(BIN)/python ] && ! $(BIN)/python -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then \
	  echo "existing $(VENV) is broken or too old: recreating it"; rm -rf $(VENV); fi
	@if [ ! -x $(BIN)/python ]; then \
	  echo "creating $(VENV) with $$($(PYTHON) -V 2>&1)"; \
	  $(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); \
	    echo "error: '$(PYTHON) -m venv' failed. On Debian/Ubuntu: apt-get install python3-venv" >&2; exit 1; }; \
	fi
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install -e '.[dev]'
	@touch $@

lint: $(STAMP)
	$(BIN)/ruff check $(SRC)
	$(BIN)/ruff format --check $(SRC)

typecheck: $(STAMP)
	$(BIN)/mypy

imports: $(STAMP)
	$(BIN)/lint-imports

# Main pass on the CPU; then the CUDA-simulator pass in its own process (NUMBA_ENABLE_CUDASIM must be
# set before numba is imported).  pytest's exit code 5 ("no tests collected") is a failure here.
test: lint typecheck imports test-main test-cudasim

test-main: $(STAMP)
	$(BIN)/python -m pytest -q

# The gpu-marked variants (backend="cuda") again, with kernels run by numba's CUDA simulator.
test-cudasim: $(STAMP)
	NUMBA_ENABLE_CUDASIM=1 $(BIN)/python -m pytest -q -m gpu

test-gpu: $(STAMP)
	$(BIN)/python -m pytest -q -m gpu

demo: $(STAMP)
	$(BIN)/python -m gpu_engine.demo

bench: $(STAMP)
	@$(BIN)/python -c 'import daft' 2>/dev/null || $(BIN)/python -m pip install -e '.[dev,bench]'
	$(BIN)/python bench/kernels.py
	$(BIN)/python bench/scan.py
	$(BIN)/python bench/write.py
	$(BIN)/python bench/row_updates.py
	$(BIN)/python bench/changes.py

device-kit: $(STAMP)
	$(BIN)/python bench/device_kit.py pack

clean:
	rm -rf build dist *.egg-info .mypy_cache .ruff_cache .pytest_cache .hypothesis bench/results/*.tmp
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) .device
