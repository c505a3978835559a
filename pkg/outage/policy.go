package outage

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// State is an outage a loop is waiting out. A State is never changed once published, so the
// metric and GetStatus read it without a lock.
type State struct {
	Dependency string
	Since      time.Time
	// MsgID is the message the loop keeps its place at (0 when none).
	MsgID     int64
	LastError string
	// Probes counts the failed probes since the outage began.
	Probes int
}

// Loop is what a component supplies to its Policy on each call, bound to the term it runs in:
// how to probe a dependency (a bounded call that succeeds when the dependency answers), and
// where to report the outage for GetStatus (st nil once it is over). Report is best effort:
// with PostgreSQL itself down it cannot be written, and the outage is still handled in memory
// and in the metric.
type Loop interface {
	Probe(ctx context.Context, dependency string) error
	Report(ctx context.Context, st *State) error
}

// Config configures a Policy.
type Config struct {
	// Gauge and Help name and describe the metric: how long the loop has been blocked on each
	// of Dependencies, in seconds (0 when it is not).
	Gauge, Help  string
	Dependencies []string
	// Blocked is the ERROR line logged once when an outage begins, Resumed the INFO line logged
	// once when the dependency answers again.
	Blocked, Resumed string
	Logger           *slog.Logger
	Now              func() time.Time
}

// Policy is one loop's whole handling of outages (docs/architecture.md, "An outage is not an
// attempt"): a failure its store classified (Verdict) is an outage when the dependency is Down,
// or Unsure and a probe of the same dependency fails too (Outage); the loop then keeps its
// place, charges nothing and is blocked (Block) until a probe answers (Resume). The Policy logs
// the start and the end once each, exports how long the loop is blocked and reports every
// change through the Loop. Its methods are called by the loop alone; Current and the metric
// may be read from anywhere.
type Policy struct {
	cfg Config
	cur atomic.Pointer[State]
}

// NewPolicy builds the policy and registers its metric with reg.
func NewPolicy(cfg Config, reg prometheus.Registerer) *Policy {
	p := &Policy{cfg: cfg}
	for _, dep := range cfg.Dependencies {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: cfg.Gauge, Help: cfg.Help,
			ConstLabels: prometheus.Labels{"dependency": dep}}, func() float64 { return p.BlockedFor(dep).Seconds() }))
	}
	return p
}

// Current returns the outage being waited out, or nil.
func (p *Policy) Current() *State { return p.cur.Load() }

// BlockedFor is how long the loop has been blocked on dependency (0 when it is not).
func (p *Policy) BlockedFor(dependency string) time.Duration {
	s := p.cur.Load()
	if s == nil || s.Dependency != dependency {
		return 0
	}
	return max(p.cfg.Now().Sub(s.Since), 0)
}

// Outage decides whether a failed call to dependency, classified v by its store, is an outage
// rather than the attempt of what the loop was doing: Down is; Unsure is when a probe of the
// dependency fails too; Attempt is not. A probe that failed because ctx ended decides nothing:
// stopping is neither an outage nor an attempt, and Outage reports false.
func (p *Policy) Outage(ctx context.Context, l Loop, dependency string, v Verdict) bool {
	switch v {
	case Down:
		return true
	case Unsure:
		if ctx.Err() != nil {
			return false
		}
		err := l.Probe(ctx, dependency)
		if err != nil && ctx.Err() == nil {
			p.cfg.Logger.DebugContext(ctx, "probe after an unsure failure failed too: an outage", "dependency", dependency, "err", err)
			return true
		}
	}
	return false
}

// Block starts (or goes on with) waiting out an outage of dependency, with the loop's place at
// msgID (0 for none) and reason the failure. The first failure of an outage is logged at
// ERROR, with attrs after the policy's own; a failure of the dependency already blocking keeps
// the outage's start and its probe count. Every failure is reported.
func (p *Policy) Block(ctx context.Context, l Loop, dependency string, msgID int64, reason string, attrs ...any) {
	s := &State{Dependency: dependency, Since: p.cfg.Now(), MsgID: msgID, LastError: reason}
	prev := p.cur.Load()
	if prev != nil && prev.Dependency == dependency {
		s.Since, s.Probes = prev.Since, prev.Probes
	}
	p.cur.Store(s)
	if prev == nil || prev.Dependency != dependency {
		args := []any{"dependency", dependency}
		if msgID != 0 {
			args = append(args, "msg_id", msgID)
		}
		p.cfg.Logger.ErrorContext(ctx, p.cfg.Blocked, append(append(args, "err", reason), attrs...)...)
	}
	p.report(ctx, l, s)
}

// Resume reports whether the loop may go on: at once when no outage is being waited out;
// otherwise it probes the dependency, and the outage ends (logged once at INFO, reported) when
// it answers. A probe that fails counts against the outage and is reported; one that fails
// because ctx ended counts nothing. Pace the calls: each is one probe.
func (p *Policy) Resume(ctx context.Context, l Loop) bool {
	cur := p.cur.Load()
	if cur == nil {
		return true
	}
	err := l.Probe(ctx, cur.Dependency)
	if ctx.Err() != nil {
		return false
	}
	if err != nil {
		next := *cur
		next.Probes++
		next.LastError = err.Error()
		p.cur.Store(&next)
		p.cfg.Logger.DebugContext(ctx, "dependency still does not answer", "dependency", next.Dependency, "probes", next.Probes, "err", err)
		p.report(ctx, l, &next)
		return false
	}
	p.cur.Store(nil)
	args := []any{"dependency", cur.Dependency}
	if cur.MsgID != 0 {
		args = append(args, "msg_id", cur.MsgID)
	}
	p.cfg.Logger.InfoContext(ctx, p.cfg.Resumed, append(args, "blocked_for", p.cfg.Now().Sub(cur.Since), "probes", cur.Probes)...)
	p.report(ctx, l, nil)
	return true
}

func (p *Policy) report(ctx context.Context, l Loop, st *State) {
	if err := l.Report(ctx, st); err != nil && ctx.Err() == nil {
		p.cfg.Logger.DebugContext(ctx, "could not record the blocked state", "err", err)
	}
}
