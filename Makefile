# Two commands matter on a fresh machine with only Python 3.11: `make demo` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STACK_VENV := .venv-stack
DEMO_OUT ?= .demo

.PHONY: demo test go-interop-deps lint typecheck unit e2e bench bench-quick stack stack-down stack-install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

# The collector (rotel) and the backend (Arize Phoenix) live in their own environment: Phoenix pins
# versions of its own, and the plugin must never depend on them.
$(STACK_VENV)/.installed: collector-config/stack-requirements.txt
	test -x $(STACK_VENV)/bin/python || $(PYTHON) -m venv $(STACK_VENV)
	$(STACK_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(STACK_VENV)/bin/python -m pip install --quiet -r collector-config/stack-requirements.txt
	touch $@

stack-install: $(STACK_VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/otel-route-shadow demo --out $(DEMO_OUT)

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check otel_route_shadow

typecheck: $(VENV)/.installed
	$(BIN)/mypy

unit: $(VENV)/.installed
	$(BIN)/python -m pytest -m "not e2e" -q

e2e: $(VENV)/.installed $(STACK_VENV)/.installed
	ROUTE_SHADOW_STACK_VENV=$(abspath $(STACK_VENV)) $(BIN)/python -m pytest -m e2e -q

# The Go interop test (tests/test_tlog_interop.py) checks our checkpoints with golang.org/x/mod/sumdb.
go-interop-deps:
	if command -v go >/dev/null; then cd tests/interop && GOFLAGS=-mod=mod go mod download; fi

test: $(VENV)/.installed $(STACK_VENV)/.installed lint typecheck go-interop-deps
	ROUTE_SHADOW_STACK_VENV=$(abspath $(STACK_VENV)) $(BIN)/python -m pytest -q

bench: $(VENV)/.installed
	$(BIN)/python -m benchmarks

bench-quick: $(VENV)/.installed
	$(BIN)/python -m benchmarks --quick

stack: $(STACK_VENV)/.installed
	$(STACK_VENV)/bin/python collector-config/stack.py up

stack-down:
	test ! -x $(STACK_VENV)/bin/python || $(STACK_VENV)/bin/python collector-config/stack.py down

clean:
	rm -rf $(VENV) $(STACK_VENV) $(DEMO_OUT) .mypy_cache .pytest_cache .ruff_cache build *.egg-info
