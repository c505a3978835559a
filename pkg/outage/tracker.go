package outage

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// State is an outage a loop is waiting out. A State is never changed once published, so the
// metrics read it without a lock.
type State struct {
	Dependency string
	Since      time.Time
	// MsgID is the message the loop keeps its place at (0 when none).
	MsgID     int64
	LastError string
	// Probes counts the failed probes since the outage began.
	Probes int
}

// Tracker holds the outage one loop is waiting out, if any. Its methods are called by the
// loop alone; Current and the gauges may be read from anywhere.
type Tracker struct {
	cur atomic.Pointer[State]
}

// Current returns the outage being waited out, or nil.
func (t *Tracker) Current() *State { return t.cur.Load() }

// Begin records a failure that is an outage of dependency. first reports that it starts a new
// outage (the caller logs it once); a failure of the dependency already blocking keeps its
// start and its probe count.
func (t *Tracker) Begin(dependency string, msgID int64, reason string, now time.Time) (s *State, first bool) {
	s = &State{Dependency: dependency, Since: now, MsgID: msgID, LastError: reason}
	prev := t.cur.Load()
	if prev != nil && prev.Dependency == dependency {
		s.Since, s.Probes = prev.Since, prev.Probes
	}
	t.cur.Store(s)
	return s, prev == nil || prev.Dependency != dependency
}

// ProbeFailed counts a failed probe of the current outage.
func (t *Tracker) ProbeFailed(err error) *State {
	next := *t.cur.Load()
	next.Probes++
	next.LastError = err.Error()
	t.cur.Store(&next)
	return &next
}

// End clears the outage and returns what it was.
func (t *Tracker) End() *State { return t.cur.Swap(nil) }

// Gauges returns one gauge per dependency, named name, reading how long the loop has been
// blocked on it (0 when it is not).
func (t *Tracker) Gauges(name, help string, now func() time.Time, dependencies ...string) []prometheus.Collector {
	out := make([]prometheus.Collector, 0, len(dependencies))
	for _, dep := range dependencies {
		out = append(out, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help,
			ConstLabels: prometheus.Labels{"dependency": dep}}, func() float64 {
			s := t.cur.Load()
			if s == nil || s.Dependency != dep {
				return 0
			}
			return max(now().Sub(s.Since), 0).Seconds()
		}))
	}
	return out
}
