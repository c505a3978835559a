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

// /readyz/active (issue #56, finding 5): ready only while the dependencies answer and the
// instance holds its role; /readyz does not care about the role; without ServeActive the path
// is not served.
func TestReadyzActive(t *testing.T) {
	s := New("127.0.0.1:0", prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.ttl = 0
	var held atomic.Bool
	var down atomic.Bool
	s.AddCheck("postgres", func(context.Context) error {
		if down.Load() {
			return errors.New("down")
		}
		return nil
	})
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, strings.TrimSpace(rec.Body.String())
	}
	if code, _ := get("/readyz/active"); code != http.StatusNotFound {
		t.Errorf("/readyz/active without ServeActive = %d, want 404", code)
	}
	s.ServeActive(held.Load)
	for _, tc := range []struct {
		held, down bool
		path       string
		code       int
		body       string
	}{
		{false, false, "/readyz/active", http.StatusServiceUnavailable, "standby"},
		{false, false, "/readyz", http.StatusOK, "ready"},
		{true, false, "/readyz/active", http.StatusOK, "active"},
		{true, true, "/readyz/active", http.StatusServiceUnavailable, "not ready: postgres"},
	} {
		held.Store(tc.held)
		down.Store(tc.down)
		if code, body := get(tc.path); code != tc.code || body != tc.body {
			t.Errorf("held %v down %v: %s = %d %q, want %d %q", tc.held, tc.down, tc.path, code, body, tc.code, tc.body)
		}
	}
}
