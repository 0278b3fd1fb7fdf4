# Two commands do all the set-up: `make serve` and `make test`. Both create .venv from nothing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install serve test lint unit bench clean browser

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

serve: $(STAMP)
	$(BIN)/omnivox serve $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check --no-cache src tests
	$(BIN)/ruff format --no-cache --check src tests
	$(BIN)/lint-imports

test: lint browser
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

# The browser tests drive Debian's Chromium; install it when it is missing and we may (root).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && apt-get install -y -qq chromium >/dev/null; \
	  else echo "the browser tests need Chromium: sudo apt-get install chromium"; exit 1; fi; }

bench: $(STAMP)
	$(BIN)/omnivox bench pool
	$(BIN)/omnivox bench kv
	$(BIN)/omnivox bench voice
	$(BIN)/omnivox bench realtime

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .ruff_cache
