# spookat: `make run` starts the product on embedded defaults, `make test` runs every test.
SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/bin
DATA ?= $(CURDIR)/data
# make run listens on loopback only: it prints a demo login. ADDR=:8080 make run opens it to the
# network. Every listener has its variable, so a second edge on the box is
# make run DATA=data2 ADDR=127.0.0.1:8081 METRICS_ADDR=127.0.0.1:9103 NATS_ADDR=127.0.0.1:4223 NATS_MONITOR=
ADDR ?= 127.0.0.1:8080
METRICS_ADDR ?= 127.0.0.1:9102
NATS_ADDR ?= 127.0.0.1:4222
NATS_MONITOR ?= 127.0.0.1:8222
# The URL browsers use, when not the address itself (a proxy in front): PUBLIC_URL=https://chat.example
PUBLIC_URL ?=
MODULES := schema edge worker loadgen
export CGO_ENABLED := 0
# The translated SQLite without bounds checks (README "Building"): each connection reserves
# its whole address space (edge/internal/store/conn.go), so a stray address faults there.
# Tests are built the same way, so they test what runs.
export GOFLAGS := -gcflags=github.com/ncruces/go-sqlite3-wasm/v6/...=-B

.PHONY: build run test vet fmt nats litestream bench clean chromium

# nats-server is the version the edge embeds (go.mod), as a binary for clusters and the
# cluster test.
build:
	@mkdir -p $(BIN)
	$(GO) build -trimpath -o $(BIN)/ ./edge/cmd/edge ./worker/cmd/worker ./loadgen/cmd/loadgen
	$(GO) build -trimpath -o $(BIN)/nats-server github.com/nats-io/nats-server/v2

# One process: the edge with embedded NATS and the worker in-process. Creates data/, a demo
# site and a demo operator on first run, and prints them with the addresses it bound once it
# serves. The edge stays make's child: make passes SIGTERM on, and -follow-parent stops the
# edge on the other stop signals sent to make alone (INT, HUP, QUIT), which make does not.
run: build
	exec $(BIN)/edge -demo -follow-parent -data=$(DATA) -addr=$(ADDR) -metrics-addr=$(METRICS_ADDR) \
		-nats-listen=$(NATS_ADDR) -nats-monitor=$(NATS_MONITOR) $(if $(PUBLIC_URL),-public-url=$(PUBLIC_URL))

# Tests use the binaries (crash tests run bin/edge as a subprocess, the cluster test three
# bin/nats-server), so build first; a real browser (Debian's chromium) for the widget and
# inbox tests; the nats CLI for the ops identity's test, as an SRE runs it; Litestream for the
# RUNBOOK's disaster drill.
test: build chromium nats litestream
	$(GO) vet $(addprefix ./,$(addsuffix /...,$(MODULES)))
	set -o pipefail; SPOOKAT_BIN=$(BIN) $(GO) test -count=1 -v -timeout 15m $(addprefix ./,$(addsuffix /...,$(MODULES))) 2>&1 \
		| tee $(BIN)/test.log | awk -f .ci/testsummary.awk

vet:
	$(GO) vet $(addprefix ./,$(addsuffix /...,$(MODULES)))

fmt:
	gofmt -l -w $(MODULES)

# A short comparison (one- vs two-process, without and with the Slack mock, and the Bun peer of
# ../shared/peers, installed with npm into bench/tmp; five stairs, about 6 minutes). The report
# goes to bench/tmp/ (not committed); copy it over bench/report.* to publish it.
bench: build
	@mkdir -p bench/tmp
	$(BIN)/loadgen compare -edge-bin $(BIN)/edge -worker-bin $(BIN)/worker \
		-stairs 1000,5000,10000,15000,20000 -step 5s -warmup 2s -drain 10s \
		-dir bench/tmp -out bench/tmp/report.json -md bench/tmp/report.md -svg bench/tmp/p99.svg
	@echo "report: bench/tmp/report.md (cp bench/tmp/report.* bench/tmp/p99.svg bench/ to publish it)"

# The nats CLI, for `nats stream report` and friends (see ops/RUNBOOK.md).
nats: $(BIN)/nats
$(BIN)/nats:
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install github.com/nats-io/natscli/nats@v0.5.0

# Litestream, the version the RUNBOOK's drill is tested with (pure Go: its SQLite is modernc's).
LITESTREAM_VERSION := v0.5.18
litestream: $(BIN)/litestream
$(BIN)/litestream:
	@mkdir -p $(BIN)
	GOTOOLCHAIN=local GOBIN=$(BIN) $(GO) install github.com/benbjohnson/litestream/cmd/litestream@$(LITESTREAM_VERSION)

# Debian's chromium for the browser tests, installed when missing (CI runs as root).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "installing Debian's chromium for the browser tests"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium >/dev/null; }

clean:
	rm -rf $(BIN)
