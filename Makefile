# Two commands do all the set-up on a fresh machine (both create and reuse .venv):
#   make example   score the bundled example rollouts with `judger score`
#   make test      run the whole test suite (what CI runs)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: example test test-fast lint bench clean sandbox-deps

$(STAMP): pyproject.toml | sandbox-deps
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[all,dev]'
	touch $(STAMP)

example: $(STAMP)
	$(BIN)/judger score src/judger/data/math_rollouts_dev.jsonl --examples 1

test: $(STAMP)
	$(BIN)/pytest -q

test-fast: $(STAMP)
	$(BIN)/pytest -q -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

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
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .ruff_cache
