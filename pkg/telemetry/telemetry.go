// Package telemetry sets up OpenTelemetry tracing and carries a message's W3C trace context
// through the stores, so that one inbox message yields one trace across the five services.
package telemetry

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// Telemetry is a service's tracer and its propagator.
type Telemetry struct {
	Provider   *sdktrace.TracerProvider
	Tracer     trace.Tracer
	Propagator propagation.TextMapPropagator
}

// New builds the tracer provider. Spans always get real trace and span IDs, so the trace
// context stored with a message is valid even when nothing exports; an OTLP gRPC exporter is
// added when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (the
// exporter reads the other standard OTEL_* variables itself).
func New(ctx context.Context, service string) (*Telemetry, error) {
	name := service
	if v := os.Getenv("OTEL_SERVICE_NAME"); v != "" {
		name = v
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(name)))
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
		exp, err := otlptracegrpc.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("telemetry exporter: %w", err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	return &Telemetry{
		Provider:   tp,
		Tracer:     tp.Tracer("github.com/msgexchange/msgexchange/" + service),
		Propagator: propagation.TraceContext{},
	}, nil
}

// Shutdown flushes pending spans.
func (t *Telemetry) Shutdown(ctx context.Context) error { return t.Provider.Shutdown(ctx) }

// Carrier is a trace context as stored in a row: the W3C traceparent and tracestate headers.
type Carrier struct {
	Parent string
	State  string
}

// Inject returns the trace context of ctx's span.
func (t *Telemetry) Inject(ctx context.Context) Carrier {
	m := propagation.MapCarrier{}
	t.Propagator.Inject(ctx, m)
	return Carrier{Parent: m.Get("traceparent"), State: m.Get("tracestate")}
}

// Extract returns ctx continued from a stored trace context; an empty carrier leaves ctx as is.
func (t *Telemetry) Extract(ctx context.Context, c Carrier) context.Context {
	if c.Parent == "" {
		return ctx
	}
	return t.Propagator.Extract(ctx, propagation.MapCarrier{"traceparent": c.Parent, "tracestate": c.State})
}
