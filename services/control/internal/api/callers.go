package api

import (
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/msgexchange/msgexchange/pkg/request"
)

// RequestLimits bounds what callers register through RequestSchedule and RequestReference
// (R-REQ-6).
type RequestLimits struct {
	// PerMinute and Burst pace each caller's registrations (req.caller-per-minute,
	// req.caller-burst).
	PerMinute int
	Burst     int
	request.Limits
}

// callerLimits holds one token bucket per caller. Callers are the authenticated identities
// (two token roles and the configured certificate subjects), so the map stays small: an
// unauthenticated call never gets this far.
type callerLimits struct {
	limits RequestLimits
	mu     sync.Mutex
	byName map[string]*rate.Limiter
}

func newCallerLimits(l RequestLimits) *callerLimits {
	return &callerLimits{limits: l, byName: map[string]*rate.Limiter{}}
}

// take spends one of caller's registrations at now; when none is left it returns how long
// until the next one.
func (c *callerLimits) take(caller string, now time.Time) (bool, time.Duration) {
	c.mu.Lock()
	lim, ok := c.byName[caller]
	if !ok {
		lim = rate.NewLimiter(rate.Limit(float64(c.limits.PerMinute)/60), c.limits.Burst)
		c.byName[caller] = lim
	}
	c.mu.Unlock()
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}
