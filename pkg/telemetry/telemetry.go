// Package telemetry sets up OpenTelemetry tracing and carries a message's W3C trace context
// through the stores, so that one inbox message yields one trace across the five services.
package telemetry

import (
	"context"
	"database/sql"
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

// TraceContext is a message's W3C trace context as it travels through the stores (proc_state,
// msg_event) and the Kafka headers: the traceparent and tracestate headers, empty when absent.
type TraceContext struct {
	Parent string
	State  string
}

// Inject returns the trace context of ctx's span.
func (t *Telemetry) Inject(ctx context.Context) TraceContext {
	m := propagation.MapCarrier{}
	t.Propagator.Inject(ctx, m)
	return TraceContext{Parent: m.Get("traceparent"), State: m.Get("tracestate")}
}

// Extract returns ctx continued from a stored trace context; one without a traceparent leaves
// ctx as is.
func (t *Telemetry) Extract(ctx context.Context, tc TraceContext) context.Context {
	if tc.Parent == "" {
		return ctx
	}
	return t.Propagator.Extract(ctx, propagation.MapCarrier{"traceparent": tc.Parent, "tracestate": tc.State})
}

// Columns returns the values to store in the nullable trace_parent and trace_state columns: an
// empty header is stored as NULL, so a row without a trace context holds no empty strings.
func (tc TraceContext) Columns() (parent, state *string) {
	return nullable(tc.Parent), nullable(tc.State)
}

// ScanColumns returns the destinations to scan the nullable trace_parent and trace_state
// columns into, in that order: NULL reads as an empty header, as Columns stored it.
func (tc *TraceContext) ScanColumns() (parent, state sql.Scanner) {
	return (*nullText)(&tc.Parent), (*nullText)(&tc.State)
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// nullText scans a nullable text column into a string, NULL as "".
type nullText string

func (n *nullText) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*n = ""
	case string:
		*n = nullText(v)
	case []byte:
		*n = nullText(v)
	default:
		return fmt.Errorf("trace context column: cannot scan %T", src)
	}
	return nil
}
