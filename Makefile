# Two commands do everything on a fresh machine with python3 (>= 3.11) and make:
#   make demo   - set up .venv and run the offline demo
#   make test   - set up .venv, lint, and run the tests
VENV := .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SHARED_TIKTOKEN := $(abspath ../shared/tiktoken-cache)

# tiktoken cannot download encodings on machines without internet; use the shared cache there.
ifneq ($(wildcard $(SHARED_TIKTOKEN)),)
export TIKTOKEN_CACHE_DIR ?= $(SHARED_TIKTOKEN)
endif

.PHONY: demo test test-quick test-browser bench drawings format notebooks

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet -e ".[dev,bench,draw]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/reactgraph demo

test: $(STAMP)
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m pytest -m "not browser"

# Agent Chat UI in headless Chromium against `langgraph dev` (needs chromium and npm; a few
# minutes, most of it compiling the client's page).
test-browser: $(STAMP)
	$(PYTHON) -m pytest -m browser

# The inner loop while coding: everything but the subprocess, server and fault tests.
test-quick: $(STAMP)
	$(PYTHON) -m pytest -m "not slow"

bench: $(STAMP)
	$(PYTHON) bench/bench.py

drawings: $(STAMP)
	for variant in $$($(PYTHON) -c "from reactgraph import VARIANTS; print(*VARIANTS)"); do \
		$(VENV)/bin/reactgraph graph $$variant --png notebooks/drawings/$$variant.png; done

# Opens JupyterLab on the notebooks (jupyterlab comes with the dev extra).
notebooks: $(STAMP)
	$(VENV)/bin/jupyter lab notebooks/

format: $(STAMP)
	$(PYTHON) -m ruff format .
	$(PYTHON) -m ruff check --fix .
