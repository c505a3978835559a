// Package logging builds the JSON slog logger every service writes to stdout.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/msgexchange/msgexchange/pkg/secret"
)

// ParseLevel reads a log-level value: debug, info, warn or error, in any case. Anything else
// is refused, so that a misspelt level fails the start-up instead of logging at a level nobody
// asked for.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("log level %q: want debug, info, warn or error", s)
}

// New returns a JSON logger at the level named by level, tagged with the service name. Lines
// logged with a context that holds a span carry its trace_id and span_id. A level that does
// not parse logs at info: the configuration has refused it already (config.Load), and the
// refusal itself must still be logged. Every secret given (tokens, connection strings: only
// their password) is masked wherever it would appear in a line, the message and errors
// included, so no code path can log a credential by accident.
func New(w io.Writer, service, level string, secrets ...string) *slog.Logger {
	l, err := ParseLevel(level)
	if err != nil {
		l = slog.LevelInfo
	}
	var red *secret.Redactor
	if len(secrets) > 0 {
		red = secret.NewRedactor(secrets...)
	}
	opts := &slog.HandlerOptions{Level: l, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		switch a.Value.Kind() {
		case slog.KindDuration:
			// One convention for every duration in every line (docs/operations.md, "Logs"): a
			// Go duration string ("1.5s", "250ms"), as the settings are written, never the
			// JSON handler's integer nanoseconds.
			a.Value = slog.StringValue(a.Value.Duration().String())
		case slog.KindString:
			if red != nil {
				a.Value = slog.StringValue(red.String(a.Value.String()))
			}
		case slog.KindAny:
			if red == nil {
				break
			}
			if err, ok := a.Value.Any().(error); ok {
				a.Value = slog.StringValue(red.String(err.Error()))
			} else if s, ok := a.Value.Any().(fmt.Stringer); ok {
				a.Value = slog.StringValue(red.String(s.String()))
			}
		}
		return a
	}}
	return slog.New(TraceHandler{slog.NewJSONHandler(w, opts)}).With("service", service)
}

// TraceHandler adds the trace_id and span_id of the record's span, when its context holds a
// valid one, so that a log line can be joined to its trace in Jaeger.
type TraceHandler struct{ slog.Handler }

// Handle adds the span's IDs and passes the record on.
func (h TraceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs keeps the wrapper around the derived handler.
func (h TraceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return TraceHandler{h.Handler.WithAttrs(attrs)}
}

// WithGroup keeps the wrapper around the derived handler.
func (h TraceHandler) WithGroup(name string) slog.Handler {
	return TraceHandler{h.Handler.WithGroup(name)}
}
