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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// An anonymous /readyz says ready, or not ready with the names of the failing checks
// (R-START-1); why they failed (users, databases, addresses) is in the log only, and only once
// per change.
func TestReadyzTellsNoDetails(t *testing.T) {
	var logs bytes.Buffer
	s := New("127.0.0.1:0", prometheus.NewRegistry(), slog.New(slog.NewTextHandler(&logs, nil)))
	s.ttl = 0 // every request sees the change at once
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
		if code != http.StatusServiceUnavailable || strings.TrimSpace(body) != "not ready: postgres" {
			t.Fatalf("/readyz = %d %q, want 503 \"not ready: postgres\"", code, body)
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

// A flood of /readyz runs one round of checks at a time and serves its verdict for ReadyTTL:
// 500 parallel requests over a slow check run it once.
func TestReadyzChecksOnceAtATime(t *testing.T) {
	s := New("127.0.0.1:0", prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	var running, most, calls atomic.Int32
	s.AddCheck("postgres", func(context.Context) error {
		calls.Add(1)
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(50 * time.Millisecond)
		return nil
	})
	var wg sync.WaitGroup
	for range 500 {
		wg.Go(func() {
			rec := httptest.NewRecorder()
			s.mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			if rec.Code != http.StatusOK {
				t.Errorf("/readyz = %d", rec.Code)
			}
		})
	}
	wg.Wait()
	t.Logf("500 requests: %d rounds of checks, at most %d at once", calls.Load(), most.Load())
	if calls.Load() != 1 || most.Load() != 1 {
		t.Errorf("%d rounds, %d at once; want 1 and 1", calls.Load(), most.Load())
	}
}
