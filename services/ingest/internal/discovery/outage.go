package discovery

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/outage"
)

// Session is the term discovery runs in: transactions on the connection that holds the
// ingest role's lock, and the role's blocked state for GetStatus (leader.Session implements
// it).
type Session interface {
	Txer
	SetBlocked(ctx context.Context, b *outage.State) error
}

// newOutages is discovery's outage policy, the one the pump and the backfill use
// (docs/architecture.md, "An outage is not an attempt"): an inbox or PostgreSQL that does not
// answer keeps the watermark where it is, is logged once when it begins and once when it ends
// rather than once per round, and is shown in GetStatus and a gauge while it lasts.
func newOutages(now func() time.Time, logger *slog.Logger, reg prometheus.Registerer) *outage.Policy {
	return outage.NewPolicy(outage.Config{
		Gauge:        "msgx_ingest_blocked_seconds",
		Help:         "How long discovery has been waiting for this dependency to answer, keeping the watermark (0 when not blocked).",
		Dependencies: []string{outage.Inbox, outage.Postgres},
		Blocked:      "dependency does not answer: discovery keeps the watermark and waits",
		Resumed:      "dependency answers again: discovery resumes from the watermark",
		Logger:       logger,
		Now:          now,
	}, reg)
}

// term is what the outage policy asks of discovery within a term.
type term struct {
	p *Poller
	s Session
}

// Probe checks that a dependency answers: the inbox table a read, PostgreSQL a statement on
// the lock connection, which every write of discovery needs.
func (t term) Probe(ctx context.Context, dependency string) error {
	if dependency == outage.Inbox {
		return t.p.inbox.Probe(ctx)
	}
	return t.s.Tx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "SELECT 1")
		return err
	})
}

// Report records the blocked state in role_holder for GetStatus (leader.Session.SetBlocked).
func (t term) Report(ctx context.Context, st *outage.State) error { return t.s.SetBlocked(ctx, st) }

// outageOf decides whether a failed round met an outage, and of which dependency. A round
// reads the inbox and writes PostgreSQL, and a transport error (a refused dial, a reset) says
// nothing about which of the two it came from, so a failure either store's rules call an
// outage (or may be one) is settled by probing each: the first that does not answer is the
// outage. A failure both answer after is the round's own, logged as such and retried at the
// next poll.
func (t term) outageOf(ctx context.Context, err error) (string, bool) {
	if aodb.Classify(err) == outage.Attempt && db.Classify(err) == outage.Attempt {
		return "", false
	}
	for _, dep := range []string{outage.Inbox, outage.Postgres} {
		if perr := t.Probe(ctx, dep); perr != nil && ctx.Err() == nil {
			return dep, true
		}
	}
	return "", false
}
