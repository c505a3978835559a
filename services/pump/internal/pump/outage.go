package pump

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/leader"
	"github.com/msgexchange/msgexchange/pkg/outage"
)

// isOutage decides whether a failed call is an outage rather than the message's attempt: a
// dependency that is down is; an unsure failure (a timeout) is when a probe of the same
// dependency fails too.
func (p *Pump) isOutage(ctx context.Context, s Session, o outcome) bool {
	switch o.verdict {
	case outage.Down:
		return true
	case outage.Unsure:
		err := p.probe(ctx, s, o.dependency)
		if err != nil && ctx.Err() == nil {
			p.logger.DebugContext(ctx, "probe after an unsure failure failed too: an outage", "dependency", o.dependency, "err", err)
			return true
		}
	}
	return false
}

// probe checks that a dependency answers. PostgreSQL is probed on the lock connection, which
// is the connection every write of the pump needs.
func (p *Pump) probe(ctx context.Context, s Session, dependency string) error {
	switch dependency {
	case outage.Inbox:
		return p.inbox.Probe(ctx)
	case outage.Redis:
		return p.project.Probe(ctx)
	}
	return s.Do(ctx, func(conn *pgx.Conn) error {
		ctx, cancel := context.WithTimeout(ctx, p.cfg.RecordTimeout)
		defer cancel()
		_, err := conn.Exec(ctx, "SELECT 1")
		return err
	})
}

// block starts (or goes on with) waiting out an outage: the first failure of an outage is
// logged at ERROR, and the state is reported in role_holder for GetStatus.
func (p *Pump) block(ctx context.Context, s Session, dependency string, msgID int64, reason string) {
	st, first := p.blocked.Begin(dependency, msgID, reason, p.clock.Now())
	if first {
		p.logger.ErrorContext(ctx, "dependency does not answer: the pump keeps the head and waits, nothing is charged to the message",
			"dependency", dependency, "msg_id", msgID, "err", reason)
	}
	p.report(ctx, s, st)
}

// probeBlocked probes the dependency of the current outage. still reports that it still does
// not answer, with the wait before the next probe (the retry backoff of that step, capped by
// pipeline.backoff-cap); otherwise the outage is over and the head runs.
func (p *Pump) probeBlocked(ctx context.Context, s Session, cur *outage.State) (wait time.Duration, still bool) {
	err := p.probe(ctx, s, cur.Dependency)
	if ctx.Err() != nil {
		return 0, true
	}
	if err != nil {
		st := p.blocked.ProbeFailed(err)
		p.logger.DebugContext(ctx, "dependency still does not answer", "dependency", st.Dependency, "probes", st.Probes, "err", err)
		p.report(ctx, s, st)
		return p.outageWait(), true
	}
	p.blocked.End()
	p.logger.InfoContext(ctx, "dependency answers again: the pump resumes at the head", "dependency", cur.Dependency,
		"msg_id", cur.MsgID, "blocked_for", p.clock.Now().Sub(cur.Since), "probes", cur.Probes)
	p.report(ctx, s, nil)
	return 0, false
}

// outageWait is the wait before the next probe of the current outage.
func (p *Pump) outageWait() time.Duration {
	if st := p.blocked.Current(); st != nil {
		return p.cfg.Retry.After(st.Probes + 1)
	}
	return 0
}

// report records the blocked state for GetStatus. It is best effort: with PostgreSQL itself
// down it cannot be written, and the outage is still handled in memory and in the metrics.
func (p *Pump) report(ctx context.Context, s Session, st *outage.State) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.RecordTimeout)
	defer cancel()
	err := s.SetBlocked(ctx, st)
	if err != nil && ctx.Err() == nil && !errors.Is(err, leader.ErrLost) {
		p.logger.DebugContext(ctx, "could not record the blocked state", "err", err)
	}
}
