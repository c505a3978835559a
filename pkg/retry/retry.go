// Package retry is the retry policy handed to the workers that retry what failed (the pump's
// messages, the dispatcher's events and requests, the backfill's markers): a value built once
// from the configuration, so the workers do not read pkg/config at run time.
package retry

import "time"

// Policy says how long to wait after a failed attempt and when to stop.
type Policy struct {
	// MaxAttempts is how many attempts a unit gets before it is given up; 0 means no limit.
	MaxAttempts int
	// Backoff is the wait after the n-th failed attempt (1-based); the last step repeats.
	Backoff []time.Duration
	// Cap bounds every wait; with no steps it is the wait. 0 means no cap.
	Cap time.Duration
}

// After returns the wait after the given failed attempt (1-based; lower counts as the first).
func (p Policy) After(attempt int) time.Duration {
	if len(p.Backoff) == 0 {
		return p.Cap
	}
	d := p.Backoff[min(max(attempt, 1), len(p.Backoff))-1]
	if p.Cap > 0 {
		d = min(d, p.Cap)
	}
	return d
}

// Exhausted reports whether a unit that has had attempts attempts gets no more.
func (p Policy) Exhausted(attempts int) bool {
	return p.MaxAttempts > 0 && attempts >= p.MaxAttempts
}

// Doubling returns the steps base, 2·base, 4·base, … up to and including limit, for a policy
// that doubles its wait until the cap.
func Doubling(base, limit time.Duration) []time.Duration {
	if base <= 0 {
		return nil
	}
	var steps []time.Duration
	for d := base; ; d *= 2 {
		if limit > 0 && d >= limit {
			return append(steps, limit)
		}
		steps = append(steps, d)
		if limit <= 0 || len(steps) > 62 {
			return steps
		}
	}
}
