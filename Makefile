# Two commands do all the set-up on a fresh machine (both create and reuse .venv):
#   make example   score the bundled example rollouts with `judger score`
#   make test      run the whole test suite (what CI runs)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: example test test-fast test-py310 lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[all,dev]'
	touch $(STAMP)

example: $(STAMP)
	$(BIN)/judger score src/judger/data/math_rollouts_dev.jsonl --examples 1

test: $(STAMP)
	$(BIN)/pytest -q
	$(MAKE) test-py310

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

test-fast: $(STAMP)
	$(BIN)/pytest -q -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) $(VENV310) build dist src/*.egg-info .pytest_cache .ruff_cache
