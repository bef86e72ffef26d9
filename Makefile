# gpurtl: two commands on a fresh machine.
#   make demo  - create .venv, install from PyPI, run every experiment on its built-in default
#   make test  - create .venv, install from PyPI, run the default test suite (no C++ compiler
#                needed: the tests that build a Verilator model are the next tier); a few
#                minutes: the heavy tests run here at a smaller size
#   make test-full - the default suite with those tests at their full size too (what CI runs)
#   make test-verilator - the tests that build Verilator models (cocotb and the fast backend),
#                every registered block among them; needs a C++ compiler and make
#   make test-slow - the long runs (million-vector checks, full sweeps)
#   make lint  - ruff check, ruff format --check and mypy on the typed public API (pyproject's
#                [tool.mypy] files; run by .ci/run before the tests)
#   make clean - remove this checkout's build products: .venv, gpurtl-out, test caches, and the
#                build cache too when $GPURTL_CACHE names a folder inside the checkout
#   make clean-cache - remove gpurtl's build cache (Verilator models, exports, synthesis runs):
#                $GPURTL_CACHE, or the per-user cache folder that every checkout of this user shares
#   make mmasim - also install MMA-Sim (`gpurtl[mmasim]`, brings PyTorch), the reference of the
#                 matrix core's `cdna3` preset; its tests skip without it
#   make scenes - also install the optional real scenes (`gpurtl[scenes]`, ~540 MB from PyPI:
#                 pymeshlab's 56k bunny, sionna-rt's cities) that `experiment traversal` uses
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
JOBS   ?= 2
# setuptools prints a boxed "Editable installation" warning for every editable install (a
# reminder that folders named like the package may shadow it; here the package folders are
# mapped, so nothing does). The build runs in a pip subprocess, which inherits this filter.
QUIET_EDITABLE := PYTHONWARNINGS="ignore:Editable installation"

.PHONY: all demo test test-full test-verilator test-slow lint install scenes mmasim clean clean-cache

all: test

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(QUIET_EDITABLE) $(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

scenes: $(STAMP)
	$(QUIET_EDITABLE) $(BIN)/python -m pip install --quiet -e '.[dev,scenes]'

mmasim: $(STAMP)
	$(QUIET_EDITABLE) $(BIN)/python -m pip install --quiet -e '.[dev,mmasim]'

demo: $(STAMP)
	$(BIN)/gpurtl demo --out gpurtl-out

# pytest's progress: a count of the tests done, then the slowest ones; idle workers take tests
# queued for the others (worksteal), so a long test does not end the run on one core.
PROGRESS := -o console_output_style=count --durations=10 --dist worksteal

test: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) $(PROGRESS) -m "not slow and not verilator and not full"

test-full: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) $(PROGRESS) -m "not slow and not verilator"

test-verilator: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) $(PROGRESS) -m "verilator and not slow"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test-slow: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) $(PROGRESS) -m slow

# The cache is removed only when it lies inside this checkout (the per-user one is shared).
CACHE_HERE = $(filter $(abspath .)/%,$(abspath $(GPURTL_CACHE)))

clean:
	rm -rf $(VENV) gpurtl-out .pytest_cache .hypothesis *.egg-info $(CACHE_HERE)

clean-cache: $(STAMP)
	$(BIN)/python -c 'import shutil; from gpurtl.sim.core.export import cache_dir; \
	path = cache_dir(); shutil.rmtree(path); print(f"removed {path}")'

