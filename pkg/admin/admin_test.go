package admin

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// An anonymous /readyz says ready or not ready; which dependency failed and why (users,
// databases, addresses) is in the log only, and only once per change.
func TestReadyzTellsNoDetails(t *testing.T) {
	var logs bytes.Buffer
	s := New("127.0.0.1:0", prometheus.NewRegistry(), slog.New(slog.NewTextHandler(&logs, nil)))
	fail := errors.New(`failed to connect to user=msgx database=msgx host=10.1.2.3`)
	s.AddCheck("postgres", func(context.Context) error { return fail })
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		s.mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		b, _ := io.ReadAll(rec.Body)
		return rec.Code, string(b)
	}
	for range 3 {
		code, body := get()
		if code != http.StatusServiceUnavailable || strings.TrimSpace(body) != "not ready" {
			t.Fatalf("/readyz = %d %q, want 503 \"not ready\"", code, body)
		}
	}
	if n := strings.Count(logs.String(), "10.1.2.3"); n != 1 {
		t.Errorf("the failure was logged %d times, want once: %s", n, logs.String())
	}
	fail = nil
	s.checks["postgres"] = func(context.Context) error { return nil }
	if code, body := get(); code != http.StatusOK || body != "ready\n" {
		t.Errorf("/readyz = %d %q, want 200 ready", code, body)
	}
}
