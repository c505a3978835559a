// Package clock provides the time source every component reads. Production code never calls
// time.Now directly, so tests can move time instead of sleeping.
package clock

import (
	"context"
	"sync"
	"time"
)

// Clock tells the current time.
type Clock interface {
	Now() time.Time
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// Mutable is a clock for tests: it stands still until Set or Advance moves it.
type Mutable struct {
	mu  sync.Mutex
	now time.Time
}

// NewMutable returns a clock that reads start.
func NewMutable(start time.Time) *Mutable { return &Mutable{now: start} }

// Now returns the clock's current reading.
func (m *Mutable) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// Set moves the clock to t.
func (m *Mutable) Set(t time.Time) {
	m.mu.Lock()
	m.now = t
	m.mu.Unlock()
}

// Advance moves the clock forward by d.
func (m *Mutable) Advance(d time.Duration) {
	m.mu.Lock()
	m.now = m.now.Add(d)
	m.mu.Unlock()
}

// Sleep waits d or until ctx ends, and reports whether the full wait passed. Waits are real
// time whatever the Clock: a worker paces itself by the wall clock, and tests shorten the
// durations instead.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
