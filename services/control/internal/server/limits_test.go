package server

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/testkit/testclock"
)

// A flood of refusals is one line per interval with the count of the rest, not a line each.
func TestRefusalLogIsRateLimited(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	clk := testclock.New(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	r := newRefusalLog(slog.New(slog.NewJSONHandler(&buf, nil)), clk, nil)
	for range 1000 {
		r.note(context.Background(), "unauthenticated", "/x/Y")
	}
	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Fatalf("%d lines for 1000 refusals in one interval, want 1", n)
	}
	clk.Advance(RefusalLogInterval)
	r.note(context.Background(), "throttled", "/x/Y")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `"suppressed_unauthenticated":999`) {
		t.Errorf("second line %q, want it to count the 999 suppressed refusals", lines[len(lines)-1])
	}
}
