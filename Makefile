# msgexchange — build, test, demo and benchmark from the workspace root.
# Every Go module of the workspace is listed once here.
MODULES := pkg migrations proto tools services/ingest services/pump services/dispatcher services/backfill services/control
PKGS    := $(foreach m,$(MODULES),./$(m)/...)
CMDS    := ./services/ingest/cmd/msgx-ingest ./services/pump/cmd/msgx-pump \
           ./services/dispatcher/cmd/msgx-dispatcher ./services/backfill/cmd/msgx-backfill \
           ./services/control/cmd/msgx-control ./tools/cmd/msgx-devkafka ./tools/cmd/msgx-demo
GOTEST_FLAGS ?= -count=1 -timeout 30m

.PHONY: all build test vet fmt-check bench demo proto clean

all: build

## build: the binaries into bin/
build:
	@mkdir -p bin
	go build -o bin/ $(CMDS)

## test: formatting, vet and every test of every module, against the local PostgreSQL,
## MariaDB and Redis (see README)
test: fmt-check vet
	go test $(GOTEST_FLAGS) $(PKGS)

vet:
	go vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## bench: throughput and latency benchmarks (figures are printed, never asserted)
bench:
	go test -run '^$$' -bench . -benchmem -benchtime 1x ./tools/e2e/
	go test -run '^$$' -bench . -benchmem ./pkg/sis/

## demo: the whole system end to end on this machine with a generated day of SIS traffic
demo: build
	bin/msgx-demo -bin bin

## proto: regenerate the gRPC code after editing proto/
proto:
	proto/generate.sh

clean:
	rm -rf bin
