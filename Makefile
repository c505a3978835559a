# msgexchange — build, test, demo and benchmark from the workspace root.
# Every Go module of the workspace is listed once here.
MODULES := pkg migrations proto testkit tools services/ingest services/pump services/dispatcher services/backfill services/control
PKGS    := $(foreach m,$(MODULES),./$(m)/...)
SERVICE_CMDS := ./services/ingest/cmd/msgx-ingest ./services/pump/cmd/msgx-pump \
           ./services/dispatcher/cmd/msgx-dispatcher ./services/backfill/cmd/msgx-backfill \
           ./services/control/cmd/msgx-control ./services/control/cmd/msgxctl
CMDS    := $(SERVICE_CMDS) ./tools/cmd/msgx-demo
GOTEST_FLAGS ?= -count=1 -timeout 30m
# --version and msgx_build_info name the build (pkg/buildinfo).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/msgexchange/msgexchange/pkg/buildinfo.version=$(VERSION) \
           -X github.com/msgexchange/msgexchange/pkg/buildinfo.commit=$(COMMIT)
# The chart checks use this helm, installed into bin/ by `go install` (the stamp file records
# the version, since a helm built that way reports only major.minor).
HELM_VERSION := v4.3.1
HELM         := bin/helm
HELM_STAMP   := bin/.helm-$(HELM_VERSION)
# Jaeger v2 for `make demo` and the tracing test, built from tools/jaeger, a module of its own
# outside go.work (its dependencies would otherwise join the workspace's), pinned there with
# `go get -tool github.com/jaegertracing/jaeger/cmd/jaeger@v1.76.0`.
JAEGER       := bin/jaeger
# The dead-code check uses this deadcode (golang.org/x/tools), installed into bin/ like helm.
DEADCODE_VERSION := v0.52.0
DEADCODE         := bin/deadcode
DEADCODE_STAMP   := bin/.deadcode-$(DEADCODE_VERSION)
CHART        := deploy/helm/msgexchange
CHART_PROD   := $(CHART)/ci/production-values.yaml

.PHONY: all deps build test vet mod-check fmt-check deadcode chart-check helm promtool jaeger bench demo run stop chaos drill-restore proto clean

all: build

## build: the binaries into bin/
build:
	@mkdir -p bin
	go build -ldflags '$(LDFLAGS)' -o bin/ $(CMDS)

## deps: PostgreSQL, MariaDB, Redis and Kafka on this machine, each started (and installed, as
## root on Debian) only when it does not answer already (tools/deps/up, docs/dependencies.md)
deps:
	@tools/deps/up

# The tests and the tools find the pinned Kafka's jars here, for the private brokers they start
# and kill (tools/deps/up fetches them), and the shared local broker at this address.
export MSGX_TEST_KAFKA_HOME ?= $(CURDIR)/.cache/kafka/current
export MSGX_TEST_KAFKA_BROKERS ?= 127.0.0.1:9092
# The oldest release the dispatcher supports (Kafka 3.9), which tools/deps/up also starts: make
# test runs the dispatcher's contract tests against it too (docs/dispatcher.md, "Kafka versions").
KAFKA_OLDEST_HOME    ?= $(CURDIR)/.cache/kafka/oldest
KAFKA_OLDEST_BROKERS ?= 127.0.0.1:9094
KAFKA_CONTRACT_PKGS  := ./services/dispatcher/internal/kafka/... ./services/dispatcher/internal/delivery/... \
                        ./services/dispatcher/internal/floor/...

## test: formatting, vet, the chart checks and every test of every module, against the local
## PostgreSQL, MariaDB, Redis and Kafka (make deps); tools/chartcheck decodes the rendered chart
test: deps fmt-check vet mod-check deadcode chart-check promtool $(JAEGER)
	MSGX_PROMTOOL=$$(command -v promtool >/dev/null 2>&1 || echo skip) go test $(GOTEST_FLAGS) $(PKGS)
	MSGX_TEST_KAFKA_HOME=$(KAFKA_OLDEST_HOME) MSGX_TEST_KAFKA_BROKERS=$(KAFKA_OLDEST_BROKERS) go test $(GOTEST_FLAGS) $(KAFKA_CONTRACT_PKGS)

vet:
	go vet $(PKGS)

## mod-check: every module builds on its own, outside the workspace (docs/architecture.md,
## "Modules"): its go.mod and go.sum are tidy and go vet passes with GOWORK=off
mod-check:
	@set -e; for m in $(MODULES); do \
		echo "mod-check $$m"; \
		(cd $$m && GOWORK=off go mod tidy -diff && GOWORK=off go vet ./...) || \
			{ echo "module $$m does not build on its own: run 'cd $$m && GOWORK=off go mod tidy' and see docs/architecture.md, \"Modules\""; exit 1; }; \
	done

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## deadcode: no function that no program or test of the workspace reaches (deadcode -test over
## every module), and no function of a production package that only tests reach (deadcode over
## the service mains), except those kept on purpose in tools/deadcode/allow-{test,prod}.txt;
## an entry there that deadcode no longer reports fails too (tools/deadcode/check)
deadcode: $(DEADCODE_STAMP)
	tools/deadcode/check tools/deadcode/allow-test.txt $(DEADCODE) -test $(PKGS)
	tools/deadcode/check tools/deadcode/allow-prod.txt $(DEADCODE) -filter '^github.com/msgexchange/msgexchange/' $(SERVICE_CMDS)

$(DEADCODE_STAMP):
	@mkdir -p bin
	GOBIN=$(CURDIR)/bin go install golang.org/x/tools/cmd/deadcode@$(DEADCODE_VERSION)
	@touch $@

## chart-check: helm lint --strict and helm template, with the default and production-like values
chart-check: $(HELM_STAMP)
	$(HELM) lint --strict $(CHART) -f $(CHART)/ci/tokens-values.yaml
	$(HELM) lint --strict $(CHART) -f $(CHART_PROD)
	$(HELM) template msgx $(CHART) -f $(CHART)/ci/tokens-values.yaml >/dev/null
	$(HELM) template msgx $(CHART) -f $(CHART_PROD) >/dev/null

## helm: the pinned helm into bin/
helm: $(HELM_STAMP)

$(HELM_STAMP):
	@mkdir -p bin
	GOBIN=$(CURDIR)/bin go install helm.sh/helm/v4/cmd/helm@$(HELM_VERSION)
	@touch $@

## jaeger: Jaeger v2 into bin/ (a few minutes the first time; rebuilt when its pin changes)
jaeger: $(JAEGER)

$(JAEGER): tools/jaeger/go.mod tools/jaeger/go.sum
	@mkdir -p bin
	cd tools/jaeger && GOWORK=off go build -o $(CURDIR)/$(JAEGER) github.com/jaegertracing/jaeger/cmd/jaeger

## promtool: the alert rules' checker (Debian package prometheus), installed when missing. Only
## where apt cannot install it do the rule checks skip, and they say so loudly.
promtool:
	@if command -v promtool >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		echo "installing promtool (Debian package prometheus)"; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; } || true; \
	fi; \
	if ! command -v promtool >/dev/null 2>&1; then \
		echo; echo "!!!!!!!! promtool is missing and apt cannot install it here (apt-get install -y prometheus):"; \
		echo "!!!!!!!! THE CHART'S ALERT RULES ARE NOT CHECKED (TestAlertRulesWithPromtool skips)"; echo; \
	fi

## bench: throughput and latency benchmarks (figures are printed, never asserted), then one
## report of every target against the anchors measured in the same run (docs/performance.md).
## MSGX_BENCH_BACKLOG=100000 makes the backlog bench the long RSS run. The pump's benches run
## first: after the production-sized tables the server is still writing back their pages, and
## the pump's short benches ran slower there than alone (docs/performance.md, "A schedule snapshot").
BENCH_FIGURES := $(CURDIR)/bin/bench-figures.jsonl
bench: export MSGX_BENCH_REPORT = $(BENCH_FIGURES)
bench: deps
	@mkdir -p bin && rm -f $(BENCH_FIGURES)
	go test -run '^$$' -bench 'FIFO|ScheduleDNLD' -benchtime 1x ./services/pump/internal/pump/
	go test -run '^$$' -bench . -benchmem -benchtime 1x -timeout 60m ./tools/e2e/
	go test -run '^$$' -bench . -benchmem ./pkg/sis/
	go test -run '^$$' -bench . -benchtime 1x ./services/dispatcher/...
	go test -run '^$$' -bench . -benchtime 1x ./services/ingest/internal/discovery/
	go test -run '^$$' -bench . -benchtime 1x ./services/pump/internal/processor/
	@go run ./tools/cmd/msgx-benchreport $(BENCH_FIGURES)

## demo: the whole system end to end on this machine with a generated day of SIS traffic, on the
## local broker (MSGX_KAFKA_BROKERS for another); exits 1 when a row ends otherwise than the
## generator expects (DEMO_FLAGS=-keep keeps its databases and topics)
demo: deps build
	bin/msgx-demo -bin bin $(DEMO_FLAGS)

## run: the demo (DEMO_FLAGS too), then its five services left running on its data, each on
## admin ports of its own; prints msgxctl's environment (also in .cache/run/env), the inbox's
## credentials and commands to look around. The demo's log is .cache/run/demo.log, the
## services' .cache/run/services.log. `make stop` ends it and drops its data.
RUN_DIR := .cache/run
run: deps build
	@mkdir -p $(RUN_DIR)
	@if [ -f $(RUN_DIR)/demo.pid ] && kill -0 $$(cat $(RUN_DIR)/demo.pid) 2>/dev/null; then \
		echo "a stack is running already (pid $$(cat $(RUN_DIR)/demo.pid)): make stop ends it"; exit 1; fi
	@rm -f $(RUN_DIR)/env
	@nohup bin/msgx-demo -bin bin -serve $(RUN_DIR) $(DEMO_FLAGS) >$(RUN_DIR)/demo.log 2>&1 </dev/null & echo $$! >$(RUN_DIR)/demo.pid
	@echo "==> starting the demo (pid $$(cat $(RUN_DIR)/demo.pid)); its log: $(RUN_DIR)/demo.log"
	@until [ -f $(RUN_DIR)/env ]; do \
		if ! kill -0 $$(cat $(RUN_DIR)/demo.pid) 2>/dev/null; then cat $(RUN_DIR)/demo.log; rm -f $(RUN_DIR)/demo.pid; exit 1; fi; \
		sleep 1; done
	@cat $(RUN_DIR)/demo.log

## stop: ends the stack of `make run` (SIGTERM to the demo, which stops the services and drops
## the run's databases, inbox account, Redis keys and topics; DEMO_FLAGS=-keep at run keeps them)
stop:
	@if [ ! -f $(RUN_DIR)/demo.pid ]; then echo "no stack of make run ($(RUN_DIR)/demo.pid)"; exit 0; fi; \
	pid=$$(cat $(RUN_DIR)/demo.pid); \
	if kill -TERM $$pid 2>/dev/null; then \
		while kill -0 $$pid 2>/dev/null; do sleep 0.5; done; tail -n 3 $(RUN_DIR)/demo.log; \
	else echo "pid $$pid is gone already"; fi; \
	rm -f $(RUN_DIR)/demo.pid $(RUN_DIR)/env

## chaos: the chaos run of docs/chaos.md: faults of every kind while a generated day drains
## through the five services, then the checks and the comparison with a clean run. Bounded:
## CHAOS_DURATION is the fault window (grown to fit the long outages), CHAOS_LONG the
## dependencies that get an outage longer than the retry budget (all, none, or a list of
## inbox,redis,pg,kafka), CHAOS_SEED replays a run's plan, CHAOS_FAILOVERS the dependencies
## failed over to a standby under traffic (all by default; `make test`'s one-minute run makes
## none unless MSGX_CHAOS_FAILOVERS is set).
CHAOS_DURATION  ?= 5m
CHAOS_LONG      ?= all
CHAOS_SEED      ?=
CHAOS_FAILOVERS ?= all
chaos: deps build
	MSGX_CHAOS_DURATION=$(CHAOS_DURATION) MSGX_CHAOS_LONG=$(CHAOS_LONG) MSGX_CHAOS_SEED=$(CHAOS_SEED) \
	MSGX_CHAOS_FAILOVERS=$(CHAOS_FAILOVERS) \
	MSGX_CHAOS_BIN=$(CURDIR)/bin go test -count=1 -v -timeout 60m -run '^TestChaos$$' ./tools/chaos/

## drill-restore: the restore drill of docs/runbooks.md ("The restore drill"): a pg_dump under
## traffic, the traffic drained, the backup restored with pg_restore, the runbook followed
## (msgx-dispatcher version-floor, resume), then PASS/FAIL per check against a clean in-order
## run; exits non-zero when one fails. DRILL_DURATION spreads the inserts, DRILL_FLIGHTS sizes
## the day, DRILL_SEED replays one. `make test` runs a 20-second one.
DRILL_DURATION ?= 60s
DRILL_FLIGHTS  ?= 150
DRILL_SEED     ?=
drill-restore: deps build
	MSGX_CHAOS_DURATION=$(DRILL_DURATION) MSGX_CHAOS_FLIGHTS=$(DRILL_FLIGHTS) MSGX_CHAOS_SEED=$(DRILL_SEED) \
	MSGX_CHAOS_BIN=$(CURDIR)/bin go test -count=1 -v -timeout 30m -run '^TestRestoreDrill$$' ./tools/chaos/

## proto: regenerate the gRPC code after editing proto/
proto:
	proto/generate.sh

clean:
	rm -rf bin
