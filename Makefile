# Two commands matter on a fresh machine with only Python 3.11: `make demo` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STACK_VENV := .venv-stack
OLDEST_VENV := .venv-oldest
CHDB_VENV := .venv-chdb
DEMO_OUT ?= .demo

.PHONY: demo test go-interop-deps lint typecheck unit e2e bench bench-quick stack stack-status stack-down stack-install clean collector witness chromium chdb

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,newest]'
	touch $@

# The oldest OpenTelemetry SDK (and cryptography) the package claims, pinned by pyproject's `oldest` extra:
# `make test` runs the tests that touch the SDK (marker `sdk`, set by tests/conftest.py) here too.
$(OLDEST_VENV)/.installed: pyproject.toml
	test -x $(OLDEST_VENV)/bin/python || $(PYTHON) -m venv $(OLDEST_VENV)
	$(OLDEST_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(OLDEST_VENV)/bin/python -m pip install --quiet -e '.[test,oldest]'
	touch $@

# chDB (ClickHouse's embedded engine) in its own environment: tests/e2e/test_collector_clickhouse.py runs
# collector-config/clickhouse-report-counts.sql in it. Only the engine (chdb-core, no dependencies: pandas
# and pyarrow serve its DataFrame interface, which the test does not use): a 182 MB wheel, 534 MB installed,
# 5 s with the wheel in pip's cache (docs/building.md).
CHDB_CORE_RELEASE := 26.9.0
$(CHDB_VENV)/.installed: | $(BIN)/python
	test -x $(CHDB_VENV)/bin/python || $(PYTHON) -m venv --without-pip $(CHDB_VENV)
	$(BIN)/python -m pip --python $(CHDB_VENV)/bin/python install --quiet --no-deps chdb-core==$(CHDB_CORE_RELEASE)
	touch $@

chdb: $(CHDB_VENV)/.installed

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

# Two C2SP witnesses for the tests: torchwood's `litewitness` (tlog-witness over SQLite, its key in an ssh-agent)
# and `witnessctl` (registers our log with it), built from the Go module proxy into .witness/bin/ (git-ignored)
# once, and reused while present. v0.6.1 is the release the design names for the witness (v0.7.0-v0.9.0 build
# with Go 1.26 too; v0.10.0 needs Go 1.27). GOTOOLCHAIN=local: never download another Go.
TORCHWOOD_RELEASE := 0.6.1
WITNESS_DIR := .witness
LITEWITNESS := $(WITNESS_DIR)/bin/litewitness
WITNESSCTL := $(WITNESS_DIR)/bin/witnessctl

$(LITEWITNESS) $(WITNESSCTL) &:
	mkdir -p $(WITNESS_DIR)/bin
	$(GO_PATH_ENV) GOBIN=$(abspath $(WITNESS_DIR)/bin) GOTOOLCHAIN=local nice -n 10 $(GO) install \
		filippo.io/torchwood/cmd/litewitness@v$(TORCHWOOD_RELEASE) filippo.io/torchwood/cmd/witnessctl@v$(TORCHWOOD_RELEASE)

witness: $(LITEWITNESS) $(WITNESSCTL)

# Every test target gets the built collector: tests/test_collector_config.py runs `otelcol validate` on each
# configuration and the e2e stack runs it (a failed build fails here with the builder's own error).
test e2e: $(OTELCOL)
test e2e: export ROUTE_SHADOW_OTELCOL := $(abspath $(OTELCOL))

# The witness tests (marker `witness`) run the two binaries above on loopback; `make test` builds them first.
test: $(LITEWITNESS) $(WITNESSCTL)
test: export ROUTE_SHADOW_LITEWITNESS := $(abspath $(LITEWITNESS))
test: export ROUTE_SHADOW_WITNESSCTL := $(abspath $(WITNESSCTL))

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

e2e: $(VENV)/.installed $(STACK_VENV)/.installed $(CHDB_VENV)/.installed
	ROUTE_SHADOW_STACK_VENV=$(abspath $(STACK_VENV)) ROUTE_SHADOW_CHDB_VENV=$(abspath $(CHDB_VENV)) \
		$(BIN)/python -m pytest -m e2e -q

# The Go interop tests check our checkpoints with golang.org/x/mod/sumdb (tests/test_tlog_interop.py) and our
# cosignatures, policies and receipts with filippo.io/torchwood v0.9.0 (tests/test_witness_interop.py), and
# read a live `serve` with torchwood's Client and x/mod's TileHashReader over HTTP (tests/test_serve_interop.py):
# the Client of v0.9.0 (tests/interop) and of v0.6.1, the release litewitness is built from
# (tests/interop/torchwood-v0.6.1, a module of its own: one module holds one version). ML-DSA-44 cosignatures
# are checked with torchwood v0.10.0 (tests/interop/torchwood-v0.10.0), which needs Go 1.27: for that module
# only, the go command takes go$(GO_1_27) from the Go module proxy (tests/go_interop.py sets the same).
GO_1_27 := 1.27.3
go-interop-deps:
	if command -v go >/dev/null; then \
		for module in tests/interop tests/interop/torchwood-v0.6.1; do \
			(cd $$module && GOFLAGS=-mod=mod go mod download) || exit 1; \
		done; \
		(cd tests/interop/torchwood-v0.10.0 && GOTOOLCHAIN=go$(GO_1_27) GOFLAGS=-mod=mod go mod download) || exit 1; \
	fi

# The whole suite on the newest SDK pyproject states, then the tests marked `sdk` (end-to-end ones aside) on the
# oldest (about a seventh of the suite: `pytest --collect-only -m "sdk and not e2e"` counts them).
test: $(VENV)/.installed $(STACK_VENV)/.installed $(OLDEST_VENV)/.installed $(CHDB_VENV)/.installed lint typecheck go-interop-deps
	ROUTE_SHADOW_STACK_VENV=$(abspath $(STACK_VENV)) ROUTE_SHADOW_CHDB_VENV=$(abspath $(CHDB_VENV)) \
		$(BIN)/python -m pytest -q
	$(OLDEST_VENV)/bin/python -m pytest -q -m "sdk and not e2e"

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
	rm -rf $(VENV) $(OLDEST_VENV) $(STACK_VENV) $(CHDB_VENV) $(DEMO_OUT) $(OTELCOL_DIR) $(WITNESS_DIR) .mypy_cache .pytest_cache .ruff_cache build *.egg-info
