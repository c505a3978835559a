// Package requests is the dispatcher's third lane: it writes the upstream requests control
// registered (req_track PENDING; RQFD, RQRD) into the shared MySQL COUTMSGS table, marks them
// SENT with the COUTMSGS_ID once the insert committed, and expires the ones left unanswered
// past req.timeout (R-REQ-1, R-REQ-3, docs/dispatcher.md "COUTMSGS: upstream requests").
//
// It runs under the dispatcher's role like the Kafka lanes: every req_track write is on the
// role's lock connection, so a deposed dispatcher cannot mark anything; and COUTMSGS receives
// DML only.
package requests

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/config"
	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/outage"
	"github.com/msgexchange/msgexchange/pkg/request"
	"github.com/msgexchange/msgexchange/pkg/retry"
)

// Target is the lane's name in logs and metrics, spelled like the outbox targets.
const Target = "COUTMSGS"

// Session gives exclusive use of the dispatcher role's lock connection (leader.Session).
type Session = db.Doer

// Outbound is what the lane needs of the shared MySQL's outbound table COUTMSGS (aodb.Inbox),
// not PostgreSQL's msg_event outbox: the COUTMSGS insert, the look-up that keeps a retry from
// writing a request twice, and a probe that tells an outage from a failed statement.
type Outbound interface {
	InsertOutbound(ctx context.Context, routingID, text string, now time.Time) (int64, error)
	FindOutbound(ctx context.Context, routingID, text string, since time.Time) (int64, bool, error)
	Probe(ctx context.Context) error
}

// Config is what the lane needs of the configuration.
type Config struct {
	// Period is how often a round runs (pipeline.poll-interval).
	Period time.Duration
	// Timeout is req.timeout: a SENT request unanswered this long becomes EXPIRED.
	Timeout time.Duration
	// Shadow forbids writing COUTMSGS: the lane does nothing.
	Shadow bool
	// Retry paces the rounds after a COUTMSGS write the server refused for itself; a wait
	// shorter than Period is Period.
	Retry retry.Policy
}

// FromConfig is the lane's configuration from the service's (pkg/config's registry).
func FromConfig(c config.Config) Config {
	return Config{Period: c.Pipeline.PollInterval, Timeout: c.Req.Timeout, Shadow: c.Shadow, Retry: c.Pipeline.Retry()}
}

const (
	// batch bounds the requests one round writes: requests come a few a minute (R-REQ-6 caps
	// each caller), so a round never needs more, and a round's writes stay short.
	batch = 100
	// dbTimeout bounds each req_track statement on the lock connection: below the leader lease
	// (inbox.timeout's bound), so a stuck statement cannot outlive the term.
	dbTimeout = 5 * time.Second
)

// Lane writes the requests to COUTMSGS.
type Lane struct {
	cfg     Config
	out     Outbound
	clock   clock.Clock
	logger  *slog.Logger
	metrics *metrics
	// blocked is the outage policy, with the shared-MySQL outage the lane is waiting out, if any.
	blocked *outage.Policy
	// failures counts the rounds in a row that ended on a refused COUTMSGS write.
	failures int
	// afterInsert runs between a committed COUTMSGS insert and MarkSent: the crash window the
	// tests stop the lane in.
	afterInsert func(ctx context.Context, req request.Request, coutmsgsID int64) error
}

// errOutage ends a round: the shared MySQL does not answer, which is no request's failure.
var errOutage = errors.New("requests: shared MySQL outage")

// New builds the lane and registers its metrics; cfg comes from FromConfig.
func New(cfg Config, out Outbound, clk clock.Clock, logger *slog.Logger, reg prometheus.Registerer) *Lane {
	l := &Lane{cfg: cfg, out: out, clock: clk, logger: logger.With("target", Target), metrics: newMetrics(reg)}
	l.blocked = outage.NewPolicy(outage.Config{
		Gauge:        "msgx_dispatcher_requests_blocked_seconds",
		Help:         "How long the COUTMSGS lane has been waiting for the shared MySQL to answer, charging no request (0 when not blocked).",
		Dependencies: []string{outage.Inbox},
		Blocked:      "shared MySQL does not answer: COUTMSGS lane pauses, no request is charged",
		Resumed:      "shared MySQL answers again: COUTMSGS lane resumes",
		Logger:       l.logger,
		Now:          clk.Now,
	}, reg)
	if cfg.Shadow {
		// At construction, before any request: no trace to carry.
		l.logger.WarnContext(context.Background(), "SHADOW MODE: no upstream request is written to COUTMSGS; registered requests stay PENDING")
	}
	return l
}

// Run runs a round at once and then every period until ctx ends.
func (l *Lane) Run(ctx context.Context, s Session) error {
	for {
		_, err := l.Round(ctx, s)
		wait := l.cfg.Period
		switch {
		case err != nil && ctx.Err() != nil:
		case errors.Is(err, errOutage):
		case err != nil:
			l.failures++
			wait = max(wait, l.cfg.Retry.After(l.failures))
			l.logger.ErrorContext(ctx, "request round failed", "err", err, "failures_in_a_row", l.failures, "next_in", wait)
		default:
			l.failures = 0
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Round writes the PENDING requests in req_id order and then expires the unanswered SENT ones.
// It returns how many requests became SENT. A shared-MySQL outage ends the round with errOutage
// before anything more is written and charges nothing: the requests stay PENDING in their
// order, and the next rounds probe before they go on.
func (l *Lane) Round(ctx context.Context, s Session) (sent int, err error) {
	if l.cfg.Shadow {
		return 0, nil
	}
	if !l.blocked.Resume(ctx, lane{l}) {
		return 0, errOutage
	}
	var pending []request.Request
	if err := l.do(ctx, s, func(conn *pgx.Conn, ctx context.Context) error {
		var err error
		pending, err = request.PendingForSend(ctx, conn, batch)
		return err
	}); err != nil {
		return 0, err
	}
	for _, r := range pending {
		ok, err := l.send(ctx, s, r)
		if err != nil {
			return sent, err
		}
		if ok {
			sent++
		}
	}
	var expired []int64
	if err := l.do(ctx, s, func(conn *pgx.Conn, ctx context.Context) error {
		var err error
		expired, err = request.Expire(ctx, conn, l.clock.Now(), l.cfg.Timeout)
		return err
	}); err != nil {
		return sent, err
	}
	for _, id := range expired {
		l.metrics.expired.Inc()
		l.logger.WarnContext(ctx, "request unanswered past req.timeout: EXPIRED; a late answer will be skipped", "req_id", id, "timeout", l.cfg.Timeout)
	}
	return sent, nil
}

// send writes one request to COUTMSGS unless an earlier try already did, then marks it SENT.
// ok is false when the request was no longer PENDING (a newer registration expired it).
func (l *Lane) send(ctx context.Context, s Session, r request.Request) (ok bool, err error) {
	log := l.logger.With("req_id", r.ID, "req_type", r.Type, "scope", r.Scope)
	var coutID int64
	found := false
	if r.AttemptedAt != nil {
		// An earlier try began an insert whose outcome is unknown (a crash, a lost term, an
		// unanswered statement): the row may be there, and must not be written twice.
		coutID, found, err = l.out.FindOutbound(ctx, r.RoutingID, r.Payload, *r.AttemptedAt)
		if err != nil {
			return false, l.mysqlFailure(ctx, r, "look up", err)
		}
		if found {
			l.metrics.recovered.Inc()
			log.WarnContext(ctx, "request found in COUTMSGS from an earlier try; marking it SENT without writing it again", "coutmsgs_id", coutID)
		}
	}
	if !found {
		err := l.do(ctx, s, func(conn *pgx.Conn, ctx context.Context) error {
			return request.MarkAttempted(ctx, conn, r.ID, l.clock.Now())
		})
		if errors.Is(err, request.ErrNotPending) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		coutID, err = l.out.InsertOutbound(ctx, r.RoutingID, r.Payload, l.clock.Now())
		if err != nil {
			return false, l.mysqlFailure(ctx, r, "insert", err)
		}
		if l.afterInsert != nil {
			if err := l.afterInsert(ctx, r, coutID); err != nil {
				return false, err
			}
		}
	}
	err = l.do(ctx, s, func(conn *pgx.Conn, ctx context.Context) error {
		return request.MarkSent(ctx, conn, r.ID, coutID, l.clock.Now())
	})
	if errors.Is(err, request.ErrNotPending) {
		// The row stays in COUTMSGS (the outbound promise ends at the mailbox, R-REQ-4);
		// its answer, if any, is matched against the newer request.
		log.WarnContext(ctx, "request was expired by a newer registration while its COUTMSGS row was written", "coutmsgs_id", coutID)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	l.metrics.sent.Inc()
	log.InfoContext(ctx, "request written to COUTMSGS: SENT", "coutmsgs_id", coutID, "seqn", r.SEQN)
	return true, nil
}

// mysqlFailure classifies a failed COUTMSGS statement: an outage blocks the lane and charges
// nothing; anything else is the statement's own failure, and the lane backs off.
func (l *Lane) mysqlFailure(ctx context.Context, r request.Request, op string, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if l.blocked.Outage(ctx, lane{l}, outage.Inbox, aodb.Classify(err)) {
		l.blocked.Block(ctx, lane{l}, outage.Inbox, 0, err.Error(), "req_id", r.ID, "op", op)
		return fmt.Errorf("%w: %s request %d: %w", errOutage, op, r.ID, err)
	}
	if ctx.Err() != nil { // the probe was cut short by the lane stopping
		return context.Cause(ctx)
	}
	l.metrics.failures.Inc()
	return fmt.Errorf("%s request %d in COUTMSGS: %w", op, r.ID, err)
}

// lane is what the outage policy asks of the lane: the shared-MySQL probe. The lane reports
// its outage in its gauge and its log only, not in role_holder: the dispatcher's role is not
// blocked by it, the Kafka lanes go on.
type lane struct{ l *Lane }

func (t lane) Probe(ctx context.Context, _ string) error { return t.l.out.Probe(ctx) }

func (lane) Report(context.Context, *outage.State) error { return nil }

// do runs fn on the lock connection with its statement bounded: a timeout cancels the query
// and keeps the lock. A PostgreSQL outage there ends the term (leader.ErrLost); the next term
// starts from req_track as it was committed.
func (l *Lane) do(ctx context.Context, s Session, fn func(conn *pgx.Conn, ctx context.Context) error) error {
	return s.Do(ctx, func(conn *pgx.Conn) error {
		ctx, cancel := context.WithTimeout(ctx, dbTimeout)
		defer cancel()
		err := fn(conn, ctx)
		if err != nil && db.Classify(err) != outage.Attempt && ctx.Err() == nil {
			return fmt.Errorf("req_track (PostgreSQL %s): %w", db.Classify(err), err)
		}
		return err
	})
}

type metrics struct {
	sent, expired, recovered, failures prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		sent: prometheus.NewCounter(prometheus.CounterOpts{Name: "msgx_dispatcher_requests_sent_total",
			Help: "Upstream requests written to COUTMSGS and marked SENT."}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{Name: "msgx_dispatcher_requests_expired_total",
			Help: "SENT requests that went unanswered past req.timeout and became EXPIRED."}),
		recovered: prometheus.NewCounter(prometheus.CounterOpts{Name: "msgx_dispatcher_requests_recovered_total",
			Help: "Requests found already in COUTMSGS after an interrupted try, marked SENT without a second insert."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "msgx_dispatcher_requests_failures_total",
			Help: "COUTMSGS statements the server refused for themselves (not outages); the lane backs off."}),
	}
	reg.MustRegister(m.sent, m.expired, m.recovered, m.failures)
	return m
}
