// Package clock provides the time source every component reads. Production code never calls
// time.Now directly, so tests can move time instead of sleeping (testkit/testclock).
package clock

import (
	"context"
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
