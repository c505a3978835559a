package pump

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/msgexchange/msgexchange/pkg/outage"
)

// newOutages is the pump's outage policy: the inbox, Redis or PostgreSQL not answering keeps
// the head, uncharged, until a probe answers.
func newOutages(now func() time.Time, logger *slog.Logger, reg prometheus.Registerer) *outage.Policy {
	return outage.NewPolicy(outage.Config{
		Gauge:        "msgx_pump_blocked_seconds",
		Help:         "How long the pump has been waiting for this dependency to answer, keeping the head (0 when not blocked).",
		Dependencies: []string{outage.Inbox, outage.Redis, outage.Postgres},
		Blocked:      "dependency does not answer: the pump keeps the head and waits, nothing is charged to the message",
		Resumed:      "dependency answers again: the pump resumes at the head",
		Logger:       logger,
		Now:          now,
	}, reg)
}

// term is what the outage policy asks of the pump within a term: probes and reports on its
// session.
type term struct {
	p *Pump
	s Session
}

// Probe checks that a dependency answers. PostgreSQL is probed on the lock connection, which
// is the connection every write of the pump needs.
func (t term) Probe(ctx context.Context, dependency string) error {
	switch dependency {
	case outage.Inbox:
		return t.p.inbox.Probe(ctx)
	case outage.Redis:
		return t.p.project.Probe(ctx)
	}
	return t.s.Do(ctx, func(conn *pgx.Conn) error {
		ctx, cancel := context.WithTimeout(ctx, t.p.cfg.RecordTimeout)
		defer cancel()
		_, err := conn.Exec(ctx, "SELECT 1")
		return err
	})
}

// Report records the blocked state in role_holder for GetStatus (leader.Session.SetBlocked).
func (t term) Report(ctx context.Context, st *outage.State) error { return t.s.SetBlocked(ctx, st) }

// outageWait is the wait before the next probe of the current outage: the retry backoff of
// that probe, capped by pipeline.backoff-cap.
func (p *Pump) outageWait() time.Duration {
	if st := p.blocked.Current(); st != nil {
		return p.cfg.Retry.After(st.Probes + 1)
	}
	return 0
}
