// Package testclock is the clock tests set: a clock.Clock that stands still until the test moves
// it, so a test decides what "now" is instead of sleeping (R-FACT-4: every stored or deciding
// time is read from the injected clock).
package testclock

import (
	"sync"
	"time"
)

// Clock stands still until Set or Advance moves it. It satisfies clock.Clock.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock that reads start.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's current reading.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
