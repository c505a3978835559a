package chaos

import (
	"context"
	"testing"
	"time"
)

// The wait for a held message's exhaustion does not count the time a long outage holds the
// pump's head, and still ends after its budget of the rest.
func TestWaitUnstalledSkipsTheOutages(t *testing.T) {
	ctx := context.Background()
	stalledUntil := time.Now().Add(time.Second)
	d := &disorder{stalled: func() bool { return time.Now().Before(stalledUntil) }}
	began := time.Now()
	if d.waitUnstalled(ctx, 400*time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition that never holds was met")
	}
	if took := time.Since(began); took < 1150*time.Millisecond || took > 5*time.Second {
		t.Errorf("waited %s: want the 1s stall plus the 400ms budget (less a 200ms poll)", took)
	}
	d.stalled = nil
	began = time.Now()
	d.waitUnstalled(ctx, 400*time.Millisecond, func() bool { return false })
	if took := time.Since(began); took > time.Second {
		t.Errorf("waited %s without a stall: want about the 400ms budget", took)
	}
}
