# spookat: `make run` starts the product on embedded defaults, `make test` runs every test.
SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/bin
DATA ?= $(CURDIR)/data
# make run listens on loopback only: it prints a demo login. ADDR=:8080 make run opens it to the network.
ADDR ?= 127.0.0.1:8080
MODULES := schema edge worker loadgen
export CGO_ENABLED := 0

.PHONY: build run test vet fmt nats bench clean chromium

# nats-server is the version the edge embeds (go.mod), as a binary for clusters and the
# cluster test.
build:
	@mkdir -p $(BIN)
	$(GO) build -trimpath -o $(BIN)/ ./edge/cmd/edge ./worker/cmd/worker ./loadgen/cmd/loadgen
	$(GO) build -trimpath -o $(BIN)/nats-server github.com/nats-io/nats-server/v2

# One process: the edge with embedded NATS and the worker in-process. Creates data/, a demo
# site and a demo operator on first run, prints the URLs.
run: build
	@mkdir -p $(DATA)
	$(BIN)/edge demo -data $(DATA)
	exec $(BIN)/edge -data $(DATA) -addr $(ADDR)

# Tests use the binaries (crash tests run bin/edge as a subprocess, the cluster test three
# bin/nats-server), so build first; a real browser (Debian's chromium) for the widget and
# inbox tests; the nats CLI for the ops identity's test, as an SRE runs it.
test: build chromium nats
	$(GO) vet $(addprefix ./,$(addsuffix /...,$(MODULES)))
	set -o pipefail; SPOOKAT_BIN=$(BIN) $(GO) test -count=1 -v -timeout 15m $(addprefix ./,$(addsuffix /...,$(MODULES))) 2>&1 \
		| tee $(BIN)/test.log | awk -f .ci/testsummary.awk

vet:
	$(GO) vet $(addprefix ./,$(addsuffix /...,$(MODULES)))

fmt:
	gofmt -l -w $(MODULES)

# A short comparison (one- vs two-process, without and with the Slack mock, and the Bun peer of
# ../shared/peers, installed with npm into bench/tmp; five stairs, about 6 minutes) whose report
# is committed under bench/: report.md, report.json and p99.svg.
bench: build
	@mkdir -p bench
	$(BIN)/loadgen compare -edge-bin $(BIN)/edge -worker-bin $(BIN)/worker \
		-stairs 1000,5000,10000,15000,20000 -step 5s -warmup 2s -drain 10s \
		-dir bench/tmp -out bench/report.json -md bench/report.md -svg bench/p99.svg

# The nats CLI, for `nats stream report` and friends (see ops/RUNBOOK.md).
nats: $(BIN)/nats
$(BIN)/nats:
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install github.com/nats-io/natscli/nats@v0.5.0

# Debian's chromium for the browser tests, installed when missing (CI runs as root).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "installing Debian's chromium for the browser tests"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium >/dev/null; }

clean:
	rm -rf $(BIN)
