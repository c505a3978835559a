// Package fataltest observes a test helper that is expected to fail its test: the harnesses
// (pgtest, mysqltest, redistest) must fail with a message naming the variable to fix when a
// server is unreachable, and their own tests check that message.
package fataltest

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// recorder stands in for a test: Fatalf records the message and ends the goroutine the way
// testing.T does.
type recorder struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.msg = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

// Message runs fn with a stand-in for t and returns what fn passed to Fatalf. It fails t when
// fn returns without calling Fatalf.
func Message(t testing.TB, fn func(tb testing.TB)) string {
	t.Helper()
	rec := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(rec)
		t.Error("the helper returned instead of failing the test")
	}()
	<-done
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.msg
}
