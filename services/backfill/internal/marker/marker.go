// Package marker writes the processed marker back to the shared inbox for every terminal
// message (the R-BACKFILL rules). The marker tells the database team which rows may be purged, so it is
// written only for terminal rows, never overwritten and never reverted.
package marker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/clock"
	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/outage"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/pkg/retry"
	"github.com/msgexchange/msgexchange/pkg/telemetry"
)

// Session gives exclusive use of the backfill role's lock connection (leader.Session). Tx
// never commits on a cancelled context, which would make pgx close the connection and with it
// the lock. SetBlocked records the inbox outage the sweep waits out (nil once it is over) for
// GetStatus, under the session's own role.
type Session interface {
	db.Doer
	db.Txer
	SetBlocked(ctx context.Context, b *outage.State) error
}

// Marker writes markers to the inbox. Probe tells whether the inbox table answers at all, to
// tell an outage from a marker write that failed.
type Marker interface {
	Mark(ctx context.Context, id int64, at time.Time, status string) (aodb.MarkResult, error)
	MarkMany(ctx context.Context, ids []int64, at time.Time, status string) (map[int64]aodb.MarkResult, error)
	Probe(ctx context.Context) error
}

// errOutage ends a round: the inbox does not answer, which is no row's failure.
var errOutage = errors.New("inbox outage")

// unsure is a marker write whose failure does not tell whether the inbox answers (a timeout,
// a lock wait). It ends the gate's transaction with nothing recorded, and the inbox is probed
// only then (inboxDown): the lock connection never idles in a transaction through a failed
// write and a probe, each up to inbox.timeout, which together could outlast its 10 s lease.
type unsure struct {
	err   error
	at    time.Time         // when the write was tried: the failure is judged against R as of then
	trace trace.SpanContext // the write's span, for the failure's log lines
}

func (u unsure) Error() string { return u.err.Error() }
func (u unsure) Unwrap() error { return u.err }

// Config is what the sweep needs.
type Config struct {
	Period  time.Duration // pipeline.backfill-period
	Batch   int           // pipeline.backfill-batch
	Retry   retry.Policy  // paces a failed marker's next attempt (config.Pipeline.BackfillRetry)
	Overdue time.Duration // R
	Status  string        // the CMINMSGS_STATUS value written with the marker
	Shadow  bool          // never write to the shared MySQL
	// MaxAttempts is pipeline.backfill-max-attempts: rows at or over it are counted in a gauge
	// for alerting, and nothing else happens to them (R-BACKFILL-5: abandonment is by R only).
	MaxAttempts int
}

// breakAfter is how many transient failures in a row end a batch early: with the inbox down,
// each try costs a full inbox timeout, and the untried rows lose nothing by waiting for the
// next round (they are still due, and fair rotation puts them first).
const breakAfter = 3

// Sweeper runs the backfill sweep.
type Sweeper struct {
	cfg       Config
	inbox     Marker
	clock     clock.Clock
	logger    *slog.Logger
	telemetry *telemetry.Telemetry
	metrics   *metrics
	// blocked is the outage policy, with the inbox outage the sweep is waiting out, if any.
	blocked *outage.Policy
	// afterRead, set by tests only, runs after a round's candidate read and its flush wait,
	// before any gate is taken.
	afterRead func()
}

// New builds a sweeper and registers its metrics.
func New(cfg Config, in Marker, clk clock.Clock, logger *slog.Logger, tel *telemetry.Telemetry, reg prometheus.Registerer) *Sweeper {
	s := &Sweeper{cfg: cfg, inbox: in, clock: clk, logger: logger, telemetry: tel}
	s.metrics = newMetrics(reg)
	s.blocked = outage.NewPolicy(outage.Config{
		Gauge:        "msgx_backfill_blocked_seconds",
		Help:         "How long the backfill has been waiting for the inbox to answer, charging no marker (0 when not blocked).",
		Dependencies: []string{outage.Inbox},
		Blocked:      "inbox does not answer: backfill rounds pause, no marker attempt is charged",
		Resumed:      "inbox answers again: backfill resumes",
		Logger:       logger,
		Now:          clk.Now,
	}, reg)
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
		start := s.clock.Now()
		for {
			more, err := s.Sweep(ctx, sess)
			if err != nil && ctx.Err() == nil {
				s.logger.ErrorContext(ctx, "backfill sweep failed", "err", err)
			}
			if err != nil || !more {
				break
			}
		}
		s.metrics.duration.Observe(s.clock.Now().Sub(start).Seconds())
		if err := s.RefreshHealth(ctx, sess); err != nil && ctx.Err() == nil {
			s.logger.WarnContext(ctx, "backfill health not refreshed", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Sweep handles one batch of at most Config.Batch candidates: all in one transaction
// (markBatch), or each in its own (markOne) when there is one or the batch failed on its own
// account. more reports that another batch may be due at once: the batch was full and
// was not cut short by failing writes. In shadow mode it does nothing: no marker may be
// written, so none can be confirmed either.
func (s *Sweeper) Sweep(ctx context.Context, sess Session) (more bool, err error) {
	if s.cfg.Shadow {
		return false, nil
	}
	if !s.blocked.Resume(ctx, term{s, sess}) {
		return false, nil
	}
	now := s.clock.Now()
	due, err := db.DoV(ctx, sess, func(conn *pgx.Conn) ([]queue.BackfillCandidate, error) {
		due, err := queue.BackfillDue(ctx, conn, now, s.cfg.Overdue, s.cfg.Batch)
		if err != nil || len(due) == 0 {
			return due, err
		}
		// R-BACKFILL-10: ③ commits without waiting for its flush (R-TX-9), so a marker waits
		// until every state this read saw is durable.
		lsn, err := db.InsertLSN(ctx, conn)
		if err != nil {
			return nil, err
		}
		wctx, cancel := context.WithTimeout(ctx, flushWait)
		defer cancel()
		return due, db.WaitFlushed(wctx, conn, lsn, flushPatience)
	})
	if err != nil {
		return false, err
	}
	if s.afterRead != nil {
		s.afterRead()
	}
	if len(due) > 1 {
		written, err := s.markBatch(ctx, sess, due)
		if s.inboxDown(ctx, sess, err) {
			err = fmt.Errorf("%w: %w", errOutage, err)
		}
		switch {
		case err == nil:
			return len(due) == s.cfg.Batch, nil
		case errors.Is(err, errOutage):
			s.block(ctx, sess, due[0].MsgID, err)
			return false, nil
		case ctx.Err() != nil, written:
			// The markers are in the inbox and only their outcome was lost: the next round
			// finds them already marked, and nothing is charged or logged twice.
			return false, err
		}
		// A failure of the batch is no row's: each row gets its own try, its own verdict.
		s.logger.WarnContext(ctx, "batch marker write failed; marking the batch row by row", "rows", len(due), "err", err)
	}
	failures := 0
	for _, c := range due {
		transient, err := s.markRow(ctx, sess, c)
		if errors.Is(err, errOutage) {
			s.block(ctx, sess, c.MsgID, err)
			return false, nil
		} else if err != nil {
			return false, err
		}
		if !transient {
			failures = 0
			continue
		}
		if failures++; failures >= breakAfter {
			s.logger.WarnContext(ctx, "inbox keeps failing; ending this backfill round early", "failures_in_a_row", failures)
			return false, nil
		}
	}
	return len(due) == s.cfg.Batch, nil
}

// flushPatience is how long a round waits for someone else's flush before it forces one: in
// a backlog the pump's next commit flushes within milliseconds, and a round that forces its
// own costs the server one flush per batch.
const flushPatience = 50 * time.Millisecond

// flushWait bounds the whole wait, the forced flush included: longer is a server in trouble
// (a synchronous standby gone, say), and the round fails and is retried next period.
const flushWait = 5 * time.Second

// markRow marks c in a gate transaction of its own (markOne). A write that failed unsure is
// decided after that transaction ended: an outage when the inbox does not answer a probe
// either, else the row's failure, recorded in a second gate transaction.
func (s *Sweeper) markRow(ctx context.Context, sess Session, c queue.BackfillCandidate) (transient bool, err error) {
	transient, err = db.TxV(ctx, sess, func(tx pgx.Tx) (bool, error) { return s.markOne(ctx, tx, c) })
	var u unsure
	if !errors.As(err, &u) || ctx.Err() != nil {
		return transient, err
	}
	if s.inboxDown(ctx, sess, err) {
		return false, fmt.Errorf("%w: %w", errOutage, err)
	}
	if ctx.Err() != nil {
		return false, err
	}
	return db.TxV(ctx, sess, func(tx pgx.Tx) (bool, error) {
		t, ok, err := queue.LockForBackfill(ctx, tx, c.MsgID)
		if err != nil || !ok || t.Version != c.Version {
			return false, err // changed since the read: the next round reads it again, as in markOne
		}
		if err := db.CommitAsync(ctx, tx); err != nil { // R-BACKFILL-11, as in markOne
			return false, err
		}
		return true, s.failed(trace.ContextWithSpanContext(ctx, u.trace), tx, t, u.err, u.at)
	})
}

// markOne writes c's marker under the per-message gate, so a replay cannot slip between
// "the message is terminal" and "its marker is written" (R-GATE-1). transient reports a
// failed marker write that was recorded for a later retry.
func (s *Sweeper) markOne(ctx context.Context, tx pgx.Tx, c queue.BackfillCandidate) (transient bool, err error) {
	id := c.MsgID
	t, ok, err := queue.LockForBackfill(ctx, tx, id)
	if err != nil || !ok || t.Version != c.Version {
		// Changed since the read whose flush was awaited (a replay and a new run, say): its
		// state may not be durable yet, and the next round reads it again (R-BACKFILL-10).
		return false, err
	}
	// What this transaction records is rebuilt by the next round if a server crash takes it
	// back (R-BACKFILL-11): it need not wait for its flush.
	if err := db.CommitAsync(ctx, tx); err != nil {
		return false, err
	}
	ctx = s.telemetry.Extract(ctx, t.Trace)
	ctx, span := s.telemetry.Tracer.Start(ctx, "backfill.mark", trace.WithAttributes(attribute.Int64("msg_id", id)))
	defer span.End()
	now := s.clock.Now()
	res, err := s.inbox.Mark(ctx, id, now, s.cfg.Status)
	switch {
	case err != nil && ctx.Err() != nil:
		// Stopping is not a failure of the inbox: nothing is counted, the row stays due.
		return false, context.Cause(ctx)
	case err != nil:
		span.RecordError(err)
		switch aodb.Classify(err) {
		case outage.Down:
			// Nothing is written: the row stays due, uncharged, and the round ends.
			return false, fmt.Errorf("%w: %w", errOutage, err)
		case outage.Unsure:
			return false, unsure{err: err, at: now, trace: span.SpanContext()} // decided by markRow once this transaction has ended
		}
		return true, s.failed(ctx, tx, t, err, now)
	}
	confirmed, err := s.settle(ctx, tx, t, res, now)
	if err != nil || !confirmed {
		return false, err
	}
	return false, queue.Backfilled(ctx, tx, now, id)
}

// failed records t's failed marker write, in its gate's transaction: retried later, or
// abandoned once the message is overdue (R-BACKFILL-3).
func (s *Sweeper) failed(ctx context.Context, tx pgx.Tx, t queue.BackfillTarget, err error, now time.Time) error {
	// Overdue is judged on the local enqueued_at, never the inbox clock (R-BACKFILL-3).
	if t.EnqueuedAt.Before(now.Add(-s.cfg.Overdue)) {
		s.metrics.abandoned.WithLabelValues(queue.AbandonTransientDeadline).Inc()
		s.logger.ErrorContext(ctx, "marker still failing after R; automatic retries stop (reopen to retry)", "msg_id", t.MsgID,
			"reason", queue.AbandonTransientDeadline, "attempts", t.Attempts+1, "err", err)
		return queue.BackfillAbandon(ctx, tx, t.MsgID, queue.AbandonTransientDeadline, err.Error(), now)
	}
	s.metrics.outcomes.WithLabelValues("transient").Inc()
	next := now.Add(s.cfg.Retry.After(t.Attempts + 1))
	s.logger.WarnContext(ctx, "marker write failed; will retry", "msg_id", t.MsgID, "attempt", t.Attempts+1, "next", next, "err", err)
	return queue.BackfillFailed(ctx, tx, t.MsgID, err.Error(), next, now)
}

// settle counts the outcome of t's marker write (R-BACKFILL-4) and reports whether the marker
// is confirmed, for the caller to record with queue.Backfilled. A row gone is abandoned at
// once.
func (s *Sweeper) settle(ctx context.Context, tx pgx.Tx, t queue.BackfillTarget, res aodb.MarkResult, now time.Time) (confirmed bool, err error) {
	if res == aodb.Missing {
		// A terminal row whose inbox row is gone can only mean the row was deleted after it
		// was enqueued: a certain conclusion, so no retry and no R (R-BACKFILL-4).
		s.metrics.outcomes.WithLabelValues("missing_row").Inc()
		s.metrics.abandoned.WithLabelValues(queue.AbandonMissingRow).Inc()
		s.logger.ErrorContext(ctx, "inbox row is gone; its marker can never be written", "msg_id", t.MsgID, "reason", queue.AbandonMissingRow)
		return false, queue.BackfillAbandon(ctx, tx, t.MsgID, queue.AbandonMissingRow, "inbox row missing", now)
	}
	outcome := "marked"
	if res == aodb.AlreadyMarked {
		outcome = "already_marked"
	}
	s.metrics.outcomes.WithLabelValues(outcome).Inc()
	s.metrics.latency.Observe(max(now.Sub(t.FinishedAt), 0).Seconds())
	return true, nil
}

// markBatch writes the markers of due in one inbox transaction (aodb.MarkMany) under all
// their gates, held by one PostgreSQL transaction, so a batch costs each database one commit
// instead of one per row (R-BACKFILL-12). Rows changed since the read are left to the next
// round as in markOne. An error means nothing was recorded in PostgreSQL: errOutage when the
// inbox is down, unsure when the write's failure does not tell (Sweep probes once the gates
// are released); written tells that the markers were committed in the inbox before
// the error, so the rows must not be tried again in this round.
func (s *Sweeper) markBatch(ctx context.Context, sess Session, due []queue.BackfillCandidate) (written bool, err error) {
	seen := make(map[int64]string, len(due))
	ids := make([]int64, len(due))
	for k, c := range due {
		seen[c.MsgID], ids[k] = c.Version, c.MsgID
	}
	err = sess.Tx(ctx, func(tx pgx.Tx) (failed error) {
		locked, err := queue.LockManyForBackfill(ctx, tx, ids)
		if err != nil {
			return err
		}
		var held []queue.BackfillTarget
		for _, t := range locked {
			if t.Version == seen[t.MsgID] {
				held = append(held, t)
			}
		}
		if len(held) == 0 {
			return nil
		}
		rows := make([]context.Context, len(held))
		spans := make([]trace.Span, len(held))
		marking := make([]int64, len(held))
		for k, t := range held {
			rows[k], spans[k] = s.telemetry.Tracer.Start(s.telemetry.Extract(ctx, t.Trace),
				"backfill.mark", trace.WithAttributes(attribute.Int64("msg_id", t.MsgID), attribute.Int("batch", len(held))))
			marking[k] = t.MsgID
		}
		defer func() {
			for _, sp := range spans {
				if failed != nil {
					sp.RecordError(failed)
				}
				sp.End()
			}
		}()
		now := s.clock.Now()
		res, err := s.inbox.MarkMany(ctx, marking, now, s.cfg.Status)
		switch {
		case err != nil && ctx.Err() != nil:
			return context.Cause(ctx)
		case err != nil && aodb.Classify(err) == outage.Down:
			return fmt.Errorf("%w: %w", errOutage, err)
		case err != nil && aodb.Classify(err) == outage.Unsure:
			return unsure{err: err} // decided by Sweep once this transaction has ended
		case err != nil:
			return err
		}
		written = true
		var confirmed []int64
		for k, t := range held {
			ok, err := s.settle(rows[k], tx, t, res[t.MsgID], now)
			if err != nil {
				return err
			}
			if ok {
				confirmed = append(confirmed, t.MsgID)
			}
		}
		if err := queue.Backfilled(ctx, tx, now, confirmed...); err != nil {
			return err
		}
		return db.CommitAsync(ctx, tx) // R-BACKFILL-11
	})
	return written, err
}

// inboxDown decides a marker write that failed unsure, with no gate held: an outage when a
// probe of the table fails too, unless the probe failed because the sweep is stopping.
func (s *Sweeper) inboxDown(ctx context.Context, sess Session, err error) bool {
	return errors.As(err, new(unsure)) && s.blocked.Outage(ctx, term{s, sess}, outage.Inbox, outage.Unsure)
}

// block records an inbox outage: logged once at ERROR, reported for GetStatus.
func (s *Sweeper) block(ctx context.Context, sess Session, id int64, err error) {
	s.blocked.Block(ctx, term{s, sess}, outage.Inbox, id, err.Error())
}

// term is what the outage policy asks of the sweep within a term: the inbox probe, and the
// report on the role's session.
type term struct {
	s    *Sweeper
	sess Session
}

func (t term) Probe(ctx context.Context, _ string) error { return t.s.inbox.Probe(ctx) }

// Report records the blocked state in role_holder for GetStatus (leader.Session.SetBlocked).
func (t term) Report(ctx context.Context, st *outage.State) error { return t.sess.SetBlocked(ctx, st) }

// RefreshHealth reads what the backfill still owes and sets the gauges.
func (s *Sweeper) RefreshHealth(ctx context.Context, sess Session) error {
	h, err := db.DoV(ctx, sess, func(conn *pgx.Conn) (queue.BackfillHealth, error) {
		return queue.ReadBackfillHealth(ctx, conn, s.cfg.MaxAttempts)
	})
	if err != nil {
		return err
	}
	s.metrics.unmarked.Set(float64(h.Unmarked))
	age := 0.0
	if h.OldestUnmarkedFinishedAt != nil {
		age = max(s.clock.Now().Sub(*h.OldestUnmarkedFinishedAt), 0).Seconds()
	}
	s.metrics.oldest.Set(age)
	s.metrics.overMax.Set(float64(h.OverMaxAttempts))
	for reason, n := range h.AbandonedByReason {
		s.metrics.abandonedNow.WithLabelValues(reason).Set(float64(n))
	}
	if h.OverMaxAttempts > 0 {
		s.logger.WarnContext(ctx, "markers over the attempt alert threshold (still retried until R)",
			"rows", h.OverMaxAttempts, "threshold", s.cfg.MaxAttempts)
	}
	return nil
}

type metrics struct {
	outcomes     *prometheus.CounterVec
	abandoned    *prometheus.CounterVec
	latency      prometheus.Histogram
	shadow       prometheus.Gauge
	duration     prometheus.Histogram
	unmarked     prometheus.Gauge
	oldest       prometheus.Gauge
	overMax      prometheus.Gauge
	abandonedNow *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgx_backfill_outcomes_total",
			Help: "Marker writes by outcome: marked, already_marked, missing_row, transient."}, []string{"outcome"}),
		abandoned: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgx_backfill_abandoned_total",
			Help: "Markers whose automatic retries stopped, by reason."}, []string{"reason"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "msgx_backfill_marker_latency_seconds",
			Help: "Time from the terminal state to the confirmed marker.", Buckets: telemetry.Buckets(0.05, 10000)}),
		shadow: prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgx_shadow_mode",
			Help: "1 when this instance never writes to the shared MySQL."}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "msgx_backfill_sweep_duration_seconds",
			Help: "Duration of one backfill round (all its batches).", Buckets: telemetry.Buckets(0.01, 2500)}),
		unmarked: prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgx_backfill_unmarked",
			Help: "Terminal messages whose marker is neither confirmed nor abandoned."}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgx_backfill_oldest_unmarked_seconds",
			Help: "Age since its terminal state of the oldest terminal, unmarked, unabandoned message."}),
		overMax: prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgx_backfill_over_max_attempts",
			Help: "Unmarked messages whose marker attempts reached pipeline.backfill-max-attempts (alert only)."}),
		abandonedNow: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "msgx_backfill_abandoned_rows",
			Help: "Messages whose marker is abandoned now, by reason (reopen clears them)."}, []string{"reason"}),
	}
	for _, r := range []string{queue.AbandonMissingRow, queue.AbandonTransientDeadline} {
		m.abandoned.WithLabelValues(r)
		m.abandonedNow.WithLabelValues(r)
	}
	reg.MustRegister(m.outcomes, m.abandoned, m.latency, m.shadow, m.duration, m.unmarked, m.oldest, m.overMax, m.abandonedNow)
	return m
}
