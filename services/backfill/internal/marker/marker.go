// Package marker writes the processed marker back to the shared inbox for every terminal
// message (seed 003 §6). The marker tells the database team which rows may be purged, so it is
// written only for terminal rows, never overwritten and never reverted.
package marker

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/inbox"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/pkg/telemetry"
)

// Session gives exclusive use of the backfill role's lock connection (leader.Session).
type Session interface {
	Do(ctx context.Context, fn func(conn *pgx.Conn) error) error
}

// Marker writes markers to the inbox.
type Marker interface {
	Mark(ctx context.Context, id int64, at time.Time, status string) (inbox.MarkResult, error)
}

// Config is what the sweep needs.
type Config struct {
	Period     time.Duration // pipeline.backfill-period
	Batch      int           // pipeline.backfill-batch
	Backoff    time.Duration // pipeline.backfill-backoff, doubling
	BackoffCap time.Duration // pipeline.backfill-backoff-cap
	Overdue    time.Duration // R
	Status     string        // the CMINMSGS_STATUS value written with the marker
	Shadow     bool          // never write to the shared MySQL
}

// Sweeper runs the backfill sweep.
type Sweeper struct {
	cfg       Config
	inbox     Marker
	clock     clock.Clock
	logger    *slog.Logger
	telemetry *telemetry.Telemetry
	metrics   *metrics
}

// New builds a sweeper and registers its metrics.
func New(cfg Config, in Marker, clk clock.Clock, logger *slog.Logger, tel *telemetry.Telemetry, reg prometheus.Registerer) *Sweeper {
	s := &Sweeper{cfg: cfg, inbox: in, clock: clk, logger: logger, telemetry: tel, metrics: newMetrics(reg)}
	if cfg.Shadow {
		s.metrics.shadow.Set(1)
		logger.Warn("SHADOW MODE: no processed markers and no COUTMSGS rows are written to the shared MySQL")
	}
	return s
}

// Run sweeps at once and then every period until ctx ends.
func (s *Sweeper) Run(ctx context.Context, sess Session) error {
	t := time.NewTicker(s.cfg.Period)
	defer t.Stop()
	for {
		for {
			n, err := s.Sweep(ctx, sess)
			if err != nil && ctx.Err() == nil {
				s.logger.Error("backfill sweep failed", "err", err)
			}
			if err != nil || n < s.cfg.Batch {
				break // a full batch means more may be due: go on without waiting
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Sweep handles one batch and returns how many candidates it read.
func (s *Sweeper) Sweep(ctx context.Context, sess Session) (int, error) {
	if s.cfg.Shadow {
		return 0, nil
	}
	now := s.clock.Now()
	var ids []int64
	if err := sess.Do(ctx, func(conn *pgx.Conn) error {
		var err error
		ids, err = queue.BackfillDue(ctx, conn, now, s.cfg.Overdue, s.cfg.Batch)
		return err
	}); err != nil {
		return 0, err
	}
	for _, id := range ids {
		if err := sess.Do(ctx, func(conn *pgx.Conn) error {
			return db.WithTx(ctx, conn, func(tx pgx.Tx) error { return s.markOne(ctx, tx, id) })
		}); err != nil {
			return len(ids), err
		}
	}
	return len(ids), nil
}

// markOne writes one marker under the per-message gate, so a replay cannot slip between
// "the message is terminal" and "its marker is written" (DECISIONS 6).
func (s *Sweeper) markOne(ctx context.Context, tx pgx.Tx, id int64) error {
	t, ok, err := queue.LockForBackfill(ctx, tx, id)
	if err != nil || !ok {
		return err
	}
	ctx = s.telemetry.Extract(ctx, telemetry.Carrier{Parent: t.Trace[0], State: t.Trace[1]})
	ctx, span := s.telemetry.Tracer.Start(ctx, "backfill.mark", trace.WithAttributes(attribute.Int64("msg_id", id)))
	defer span.End()
	now := s.clock.Now()
	res, err := s.inbox.Mark(ctx, id, now, s.cfg.Status)
	switch {
	case err != nil:
		if t.EnqueuedAt.Before(now.Add(-s.cfg.Overdue)) {
			s.metrics.abandoned.WithLabelValues(queue.AbandonTransientDeadline).Inc()
			s.logger.Error("marker still failing after R; automatic retries stop (reopen to retry)", "msg_id", id,
				"reason", queue.AbandonTransientDeadline, "err", err)
			return queue.BackfillAbandon(ctx, tx, id, queue.AbandonTransientDeadline, err.Error(), now)
		}
		s.metrics.outcomes.WithLabelValues("transient").Inc()
		next := now.Add(s.backoff(t.Attempts + 1))
		s.logger.Warn("marker write failed; will retry", "msg_id", id, "attempt", t.Attempts+1, "next", next, "err", err)
		return queue.BackfillFailed(ctx, tx, id, err.Error(), next, now)
	case res == inbox.Missing:
		s.metrics.abandoned.WithLabelValues(queue.AbandonMissingRow).Inc()
		s.logger.Error("inbox row is gone; its marker can never be written", "msg_id", id, "reason", queue.AbandonMissingRow)
		return queue.BackfillAbandon(ctx, tx, id, queue.AbandonMissingRow, "inbox row missing", now)
	default:
		outcome := "marked"
		if res == inbox.AlreadyMarked {
			outcome = "already_marked"
		}
		s.metrics.outcomes.WithLabelValues(outcome).Inc()
		s.metrics.latency.Observe(now.Sub(t.FinishedAt).Seconds())
		return queue.Backfilled(ctx, tx, id, now)
	}
}

// backoff is 30 s doubling per failed attempt, capped at 15 min (seed 000 §3).
func (s *Sweeper) backoff(attempt int) time.Duration {
	d := s.cfg.Backoff
	for i := 1; i < attempt && d < s.cfg.BackoffCap; i++ {
		d *= 2
	}
	return min(d, s.cfg.BackoffCap)
}

type metrics struct {
	outcomes  *prometheus.CounterVec
	abandoned *prometheus.CounterVec
	latency   prometheus.Histogram
	shadow    prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgx_backfill_outcomes_total",
			Help: "Marker writes by outcome: marked, already_marked, transient."}, []string{"outcome"}),
		abandoned: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgx_backfill_abandoned_total",
			Help: "Markers whose automatic retries stopped, by reason."}, []string{"reason"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "msgx_backfill_marker_latency_seconds",
			Help: "Time from the terminal state to the confirmed marker.", Buckets: prometheus.ExponentialBuckets(0.05, 4, 10)}),
		shadow: prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgx_shadow_mode",
			Help: "1 when this instance never writes to the shared MySQL."}),
	}
	reg.MustRegister(m.outcomes, m.abandoned, m.latency, m.shadow)
	return m
}
