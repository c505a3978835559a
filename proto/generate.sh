#!/bin/sh
# Regenerates the Go code of every .proto in this module with pinned tools.
#
# The tools are built from source through the Go module proxy into ./bin (GOBIN), once per
# version: no prebuilt binaries are downloaded, and a tool of another version found in ./bin is
# replaced, so the generated files depend only on the versions below. The protoc-gen-go version
# matches the google.golang.org/protobuf runtime in go.mod.
#
# Usage: proto/generate.sh (from anywhere). Then commit the changed *.pb.go files; the
# staleness test (go test ./... in proto/) fails until they match the .proto files.
set -eu

BUF_VERSION=v1.75.0
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2

cd "$(dirname "$0")"
mkdir -p bin
BIN="$(pwd)/bin"

# install <binary> <package> <version> <version-output>: builds the tool into ./bin unless the
# binary there already reports the pinned version.
install() {
	if [ -x "$BIN/$1" ] && [ "$("$BIN/$1" --version 2>/dev/null || true)" = "$4" ]; then
		return
	fi
	echo "installing $2@$3 into $BIN" >&2
	GOBIN="$BIN" GOWORK=off GOFLAGS= go install "$2@$3"
}

install buf github.com/bufbuild/buf/cmd/buf "$BUF_VERSION" "${BUF_VERSION#v}"
install protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOC_GEN_GO_VERSION" "protoc-gen-go $PROTOC_GEN_GO_VERSION"
install protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION" "protoc-gen-go-grpc ${PROTOC_GEN_GO_GRPC_VERSION#v}"

"$BIN/buf" lint
"$BIN/buf" generate
echo "generated; run: cd $(pwd) && go test ./..." >&2
