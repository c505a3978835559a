// Package testwait is the one way tests wait for a condition that another goroutine or process
// makes true: poll it until it holds or a deadline passes, then fail the test saying what was
// awaited and, where the condition can tell, the last state seen.
package testwait

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Interval is how often a condition is polled: short enough that a test does not idle, long
// enough that polling a database does not load it.
const Interval = 20 * time.Millisecond

// For waits up to within for cond to hold, and fails the test naming what otherwise.
func For(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	ForState(t, within, what, func() (bool, string) { return cond(), "" })
}

// ForState is For for a condition that also describes the state it saw, which the failure
// reports: "timed out after 5s waiting for 3 rows marked; last state: 2 marked".
func ForState(t testing.TB, within time.Duration, what string, cond func() (done bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for {
		done, state := cond()
		if done {
			return
		}
		last = state
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(Interval)
	}
	msg := fmt.Sprintf("timed out after %s waiting for %s", within, what)
	if last != "" {
		msg += "; last state: " + last
	}
	t.Fatalf("%s", msg)
}

// Until calls probe, each call bounded by perTry, until it succeeds or ctx ends, and then
// returns an error naming what was awaited with probe's last error. It is for the harnesses
// that start servers of their own, which report to their caller rather than fail a test, and
// for probes that are themselves calls to a server that may hang.
func Until(ctx context.Context, what string, perTry time.Duration, probe func(context.Context) error) error {
	for {
		pctx, cancel := context.WithTimeout(ctx, perTry)
		err := probe(pctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
