package logging_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/msgexchange/msgexchange/pkg/logging"
)

func TestParseLevel(t *testing.T) {
	for _, c := range []struct {
		in   string
		want slog.Level
		ok   bool
	}{
		{"debug", slog.LevelDebug, true}, {"INFO", slog.LevelInfo, true}, {" warn ", slog.LevelWarn, true},
		{"error", slog.LevelError, true}, {"", 0, false}, {"warning", 0, false}, {"verbose", 0, false}, {"3", 0, false},
	} {
		got, err := logging.ParseLevel(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v, ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

// TestTraceIDs: a line logged inside a span names the span, one logged outside names none,
// and loggers derived with With or WithGroup keep doing it.
func TestTraceIDs(t *testing.T) {
	var buf bytes.Buffer
	logger := logging.New(&buf, "msgx-test", "debug").With("role", "test")
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("test").Start(context.Background(), "step")
	sc := span.SpanContext()

	logger.InfoContext(ctx, "inside", "msg_id", 7)
	logger.WithGroup("g").DebugContext(ctx, "grouped")
	span.End()
	logger.InfoContext(context.Background(), "outside")
	logger.Info("no context")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4:\n%s", len(lines), buf.String())
	}
	for i, want := range []bool{true, true, false, false} {
		var m map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &m); err != nil {
			t.Fatalf("line %d is not JSON: %v", i, err)
		}
		if m["service"] != "msgx-test" || m["role"] != "test" {
			t.Errorf("line %d lost the logger's attributes: %v", i, m)
		}
		tid, sid := m["trace_id"], m["span_id"]
		if i == 1 {
			g, _ := m["g"].(map[string]any)
			tid, sid = g["trace_id"], g["span_id"]
		}
		if want && (tid != sc.TraceID().String() || sid != sc.SpanID().String()) {
			t.Errorf("line %d: trace_id %v span_id %v, want %s %s", i, tid, sid, sc.TraceID(), sc.SpanID())
		}
		if !want && (tid != nil || sid != nil) {
			t.Errorf("line %d is outside any span but names one: %v", i, m)
		}
	}
}

// TestDurationsAreDurationStrings: a duration attribute is written as Go writes it ("1.5s"),
// with secrets configured or not, in groups and in derived loggers too, never as the JSON
// handler's integer nanoseconds.
func TestDurationsAreDurationStrings(t *testing.T) {
	for _, secrets := range [][]string{nil, {"a-secret-token-0123456789abcdef0123"}} {
		var buf bytes.Buffer
		logger := logging.New(&buf, "msgx-test", "info", secrets...).With("backoff", 500*time.Millisecond)
		logger.Info("blocked", "blocked_for", 7238697300*time.Nanosecond, slog.Group("probe", "took", 2*time.Minute))
		var line map[string]any
		if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
			t.Fatalf("%v: %s", err, buf.String())
		}
		probe, _ := line["probe"].(map[string]any)
		for k, want := range map[string]any{"blocked_for": "7.2386973s", "backoff": "500ms"} {
			if line[k] != want {
				t.Errorf("secrets %v: %s = %#v, want %q", secrets, k, line[k], want)
			}
		}
		if probe["took"] != "2m0s" {
			t.Errorf("secrets %v: probe.took = %#v, want \"2m0s\"", secrets, probe["took"])
		}
	}
}
