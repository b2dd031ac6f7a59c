# Two commands matter on a fresh machine with only Python 3.11: `make demo` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STACK_VENV := .venv-stack
DEMO_OUT ?= .demo

.PHONY: demo test go-interop-deps lint typecheck unit e2e bench bench-quick stack stack-status stack-down stack-install clean collector chromium

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

# The OpenTelemetry Collector, built from the Go module proxy by the OpenTelemetry Collector Builder with exactly
# the components collector-config/builder-config.yaml names (one release for every module). Built once into
# .otelcol/ (git-ignored) and reused until builder-config.yaml changes. Go's module and build caches stay in
# $HOME (GOMODCACHE, GOCACHE). nice: the build takes both cores for minutes.
OTELCOL_RELEASE := 0.161.0
GO ?= $(shell command -v go || echo /usr/local/go/bin/go)
GO_PATH_ENV := PATH="$(dir $(GO)):$$PATH"
OTELCOL_DIR := .otelcol
OTELCOL := $(OTELCOL_DIR)/otelcol-route-shadow
OTELCOL_BUILDER := $(OTELCOL_DIR)/bin/builder

$(OTELCOL_BUILDER):
	mkdir -p $(OTELCOL_DIR)/bin
	$(GO_PATH_ENV) GOBIN=$(abspath $(OTELCOL_DIR)/bin) nice -n 10 $(GO) install go.opentelemetry.io/collector/cmd/builder@v$(OTELCOL_RELEASE)

$(OTELCOL): collector-config/builder-config.yaml | $(OTELCOL_BUILDER)
	rm -rf $(OTELCOL_DIR)/build
	$(GO_PATH_ENV) nice -n 10 $(OTELCOL_BUILDER) --config collector-config/builder-config.yaml
	mv $(OTELCOL_DIR)/build/otelcol-route-shadow $@
	touch $@

collector: $(OTELCOL)

# Every test target gets the built collector: tests/test_collector_config.py runs `otelcol validate` on each
# configuration and the e2e stack runs it (a failed build fails here with the builder's own error).
test e2e: $(OTELCOL)
test e2e: export ROUTE_SHADOW_OTELCOL := $(abspath $(OTELCOL))

# Headless Chromium from Debian's packages renders the HTML report in tests/test_report_browser.py (issue 27).
# Installed when missing (CI runs as root with Debian's mirrors reachable); `make test` sets
# ROUTE_SHADOW_CHROMIUM so that the test fails, rather than skips, when the browser is not there.
CHROMIUM := /usr/bin/chromium
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

$(CHROMIUM):
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y --no-install-recommends chromium chromium-driver \
	  || (DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get update \
	      && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y --no-install-recommends chromium chromium-driver)

chromium: $(CHROMIUM)

test: $(CHROMIUM)
test: export ROUTE_SHADOW_CHROMIUM := $(CHROMIUM)

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

# `make stack` runs the OpenTelemetry Collector built above; STACK_COLLECTOR=rotel runs the lighter rotel.
# Run again, it keeps the ports and restarts whatever died.
STACK_COLLECTOR ?= otelcol
stack: $(STACK_VENV)/.installed $(if $(filter otelcol,$(STACK_COLLECTOR)),$(OTELCOL))
	$(STACK_VENV)/bin/python collector-config/stack.py up --collector $(STACK_COLLECTOR)

stack-status:
	$(STACK_VENV)/bin/python collector-config/stack.py status

stack-down:
	test ! -x $(STACK_VENV)/bin/python || $(STACK_VENV)/bin/python collector-config/stack.py down

clean:
	rm -rf $(VENV) $(STACK_VENV) $(DEMO_OUT) $(OTELCOL_DIR) .mypy_cache .pytest_cache .ruff_cache build *.egg-info
