# syntax=docker/dockerfile:1
#
# One image recipe for the five services. Pick the service with --build-arg SERVICE:
#
#   docker build --build-arg SERVICE=pump -t msgexchange/msgx-pump .
#
# SERVICE is one of ingest, pump, dispatcher, backfill, control. The image runs that binary as
# its entrypoint; `docker run msgexchange/msgx-control migrate` applies the PostgreSQL schema.

# The builder's Go matches go.work's `go` line exactly: the golang images set GOTOOLCHAIN=local,
# so an older patch release would refuse the workspace rather than download a toolchain.
ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION} AS build
ARG SERVICE
# What --version and msgx_build_info report (the build context has no .git):
# --build-arg VERSION=1.4.2 --build-arg COMMIT=$(git rev-parse HEAD).
ARG VERSION=devel
ARG COMMIT=unknown
WORKDIR /src
# The whole workspace is copied because every service module replaces pkg (and pkg replaces
# migrations and testkit) with a sibling directory; the cache mounts below keep rebuilds fast anyway.
COPY . .
# CGO_ENABLED=0 gives a static binary for the distroless static base (no libc there).
# -tags timetzdata embeds the zone database, so airport.time-zone never depends on the image.
# -trimpath and -buildvcs=false keep builds reproducible and free of the builder's paths
# (.git is not in the build context).
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    set -eu; \
    case "${SERVICE:-}" in \
      ingest|pump|dispatcher|backfill|control) ;; \
      *) echo "build with --build-arg SERVICE=<ingest|pump|dispatcher|backfill|control>, got '${SERVICE:-}'" >&2; exit 1 ;; \
    esac; \
    CGO_ENABLED=0 go build -trimpath -buildvcs=false -tags timetzdata \
      -ldflags="-s -w -X github.com/msgexchange/msgexchange/pkg/buildinfo.version=${VERSION} -X github.com/msgexchange/msgexchange/pkg/buildinfo.commit=${COMMIT}" \
      -o /out/msgx "./services/${SERVICE}/cmd/msgx-${SERVICE}"

# distroless/static: no shell, no package manager, CA certificates and tzdata only, and the
# :nonroot tag runs as uid/gid 65532. Nothing in the image can be used to change it at run time.
FROM gcr.io/distroless/static-debian12:nonroot
ARG SERVICE
LABEL org.opencontainers.image.title="msgx-${SERVICE}" \
      org.opencontainers.image.source="https://github.com/msgexchange/msgexchange" \
      org.opencontainers.image.description="msgexchange ${SERVICE} service"
# Spans carry the right service name even where the deployment sets no OTEL_SERVICE_NAME.
ENV OTEL_SERVICE_NAME=msgx-${SERVICE}
# The binary has one fixed path because ENTRYPOINT cannot expand build arguments; the image
# title and OTEL_SERVICE_NAME say which service it is.
COPY --from=build /out/msgx /usr/local/bin/msgx
# Numeric, so Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
USER 65532:65532
# 9090: admin (/metrics, /healthz, /readyz) on every service; 8080: ingest's compat HTTP;
# 9000: control's gRPC. Only the listeners a service opens are in use.
EXPOSE 9090 8080 9000
ENTRYPOINT ["/usr/local/bin/msgx"]
