package api

import (
	"testing"
	"time"
)

// Each caller has its own allowance (R-REQ-6): a burst is granted at once, then one
// registration per 60/PerMinute seconds, and another caller's flood does not spend it.
func TestCallerLimitsPaceEachCaller(t *testing.T) {
	t.Parallel()
	c := newCallerLimits(RequestLimits{PerMinute: 6, Burst: 3})
	t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	steps := []struct {
		caller string
		at     time.Duration
		ok     bool
		wait   time.Duration // when refused
	}{
		{"operator-token", 0, true, 0},
		{"operator-token", 0, true, 0},
		{"operator-token", 0, true, 0},
		{"operator-token", 0, false, 10 * time.Second},
		{"operator-token", 5 * time.Second, false, 5 * time.Second},
		{"CN=ops,O=Airport", 5 * time.Second, true, 0},
		{"operator-token", 10 * time.Second, true, 0},
		{"operator-token", 10 * time.Second, false, 10 * time.Second},
		{"operator-token", 2 * time.Minute, true, 0},
	}
	for i, st := range steps {
		ok, wait := c.take(st.caller, t0.Add(st.at))
		if ok != st.ok || (!ok && (wait <= st.wait-time.Second || wait > st.wait)) {
			t.Errorf("step %d (%s at +%s): take = %t, wait %s; want %t, wait %s", i, st.caller, st.at, ok, wait, st.ok, st.wait)
		}
	}
}
