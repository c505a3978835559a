package queue

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/msgexchange/msgexchange/pkg/db"
)

// StatsRateWindow is how far back Stats looks to measure the finishing rate (R-PUMP-13).
const StatsRateWindow = 5 * time.Minute

// Backlog is what the pump's backlog gauges read every backlog interval, in every instance
// (R-PUMP-13): each figure is an index scan of the rows it counts (unfinished, DEAD, finished
// in the window), so it costs the same on a proc_state of a week's million rows as on an empty
// one.
type Backlog struct {
	// DeadByErrorClass counts the DEAD rows no operator acknowledged, by their error class:
	// they stay DEAD until an operator replays or acknowledges them, which is what the DEAD
	// alert watches. DeadAcknowledgedByErrorClass counts the acknowledged ones.
	DeadByErrorClass             map[ErrorClass]int64
	DeadAcknowledgedByErrorClass map[ErrorClass]int64

	// Unfinished counts PENDING and FAILED rows.
	Unfinished int64
	// OldestUnfinishedEnqueuedAt is when the oldest unfinished row was enqueued (nil when there
	// is none) and OldestUnfinishedAge its age at now. Ingest's enqueued_at is used, not the
	// inbox's received_at: it is our clock and never NULL.
	OldestUnfinishedEnqueuedAt *time.Time
	OldestUnfinishedAge        time.Duration

	// FinishedInWindow counts rows that became terminal in (now-StatsRateWindow, now], and
	// FinishedPerSecond is that over the window's length.
	FinishedInWindow  int64
	FinishedPerSecond float64
	// EstimatedDrain is Unfinished ÷ FinishedPerSecond (R-PUMP-13). It is zero when nothing is
	// unfinished and nil when rows are unfinished but none finished in the window: the drain
	// time is then unknown, not infinite (the pump may have just started or be stalled).
	EstimatedDrain *time.Duration
}

// Statistics summarises proc_state for the status RPC: the Backlog and the breakdowns an
// operator reads on demand.
type Statistics struct {
	Backlog
	// ByState has an entry for every state, zero included, so callers can print a stable table.
	ByState map[State]int64
	// ByErrorClass counts the rows that carry each class, whatever their state (a FAILED row's
	// class is its last transient failure); classes that occur on no row are absent.
	ByErrorClass map[ErrorClass]int64

	// BackfillPending counts terminal rows whose marker is neither written nor abandoned: the
	// backfill's remaining work (R-BACKFILL-2).
	BackfillPending int64
	// BackfillAbandoned counts abandoned rows, in total and by backfill_abandon_reason.
	BackfillAbandoned         int64
	BackfillAbandonedByReason map[string]int64
}

// backlogColumns and backlogFrom are Backlog's part of a statement; the predicates repeat the
// partial indexes' ones verbatim (proc_state_unfinished, proc_state_finished, and
// proc_state_dead, whose columns make the DEAD counts index-only scans), so every count reads
// only the index entries of the rows it counts.
const (
	backlogColumns = `(SELECT coalesce(jsonb_object_agg(error_class, n), '{}') FROM
			(SELECT coalesce(error_class, '') AS error_class, count(*) AS n FROM proc_state
			 WHERE state = 'DEAD' AND acknowledged_at IS NULL GROUP BY 1) AS g),
		(SELECT coalesce(jsonb_object_agg(error_class, n), '{}') FROM
			(SELECT coalesce(error_class, '') AS error_class, count(*) AS n FROM proc_state
			 WHERE state = 'DEAD' AND acknowledged_at IS NOT NULL GROUP BY 1) AS g),
		u.n, u.oldest,
		(SELECT count(*) FROM proc_state WHERE finished_at IS NOT NULL AND finished_at > $1 AND finished_at <= $2)`
	backlogFrom = `FROM (SELECT count(*) AS n, min(enqueued_at) AS oldest FROM proc_state
			WHERE state IN ('PENDING', 'FAILED')) AS u`
)

// backlogScan holds what backlogColumns scan into until finish turns it into b's fields.
type backlogScan struct {
	b                  *Backlog
	deadByClass, acked map[string]int64
}

func (sc *backlogScan) dest() []any {
	return []any{&sc.deadByClass, &sc.acked, &sc.b.Unfinished, &sc.b.OldestUnfinishedEnqueuedAt, &sc.b.FinishedInWindow}
}

func (sc *backlogScan) finish(now time.Time) {
	b := sc.b
	b.DeadByErrorClass, b.DeadAcknowledgedByErrorClass = classes(sc.deadByClass), classes(sc.acked)
	if b.OldestUnfinishedEnqueuedAt != nil {
		// An enqueued_at ahead of now (another instance's clock) reads as zero, not negative.
		b.OldestUnfinishedAge = max(now.Sub(*b.OldestUnfinishedEnqueuedAt), 0)
	}
	b.FinishedPerSecond = float64(b.FinishedInWindow) / StatsRateWindow.Seconds()
	b.EstimatedDrain = estimateDrain(b.Unfinished, b.FinishedPerSecond)
}

func classes(m map[string]int64) map[ErrorClass]int64 {
	out := make(map[ErrorClass]int64, len(m))
	for k, n := range m {
		out[ErrorClass(k)] = n
	}
	return out
}

// ReadBacklog reads the backlog figures at now (the caller's clock; the rate window and the
// ages are measured from it, never from the database's now()), in one statement, so they come
// from one snapshot.
func ReadBacklog(ctx context.Context, q db.Executor, now time.Time) (Backlog, error) {
	var b Backlog
	sc := backlogScan{b: &b}
	if err := q.QueryRow(ctx, `SELECT `+backlogColumns+` `+backlogFrom, now.Add(-StatsRateWindow), now).Scan(sc.dest()...); err != nil {
		return b, fmt.Errorf("queue backlog: %w", err)
	}
	sc.finish(now)
	return b, nil
}

// Stats reads the queue's statistics at now, as ReadBacklog does, with the breakdowns.
//
// Everything is read in one statement so the numbers come from one snapshot and add up (in
// READ COMMITTED every subquery of a statement sees the statement's snapshot). The group-bys by
// state and class read the whole table, which retention keeps to a week of traffic (about a
// second at a million rows): that is the status RPC's, an operator's question, never a gauge's
// (ReadBacklog).
func Stats(ctx context.Context, q db.Executor, now time.Time) (Statistics, error) {
	s := Statistics{
		ByState:                   map[State]int64{Pending: 0, Failed: 0, Succeeded: 0, Skipped: 0, Dead: 0},
		BackfillAbandonedByReason: map[string]int64{},
	}
	sc := backlogScan{b: &s.Backlog}
	var byState, byClass, byReason map[string]int64
	err := q.QueryRow(ctx, `SELECT `+backlogColumns+`,
		(SELECT coalesce(jsonb_object_agg(state, n), '{}') FROM
			(SELECT state, count(*) AS n FROM proc_state GROUP BY state) AS g),
		(SELECT coalesce(jsonb_object_agg(error_class, n), '{}') FROM
			(SELECT error_class, count(*) AS n FROM proc_state WHERE error_class IS NOT NULL GROUP BY error_class) AS g),
		(SELECT coalesce(jsonb_object_agg(backfill_abandon_reason, n), '{}') FROM
			(SELECT coalesce(backfill_abandon_reason, 'UNKNOWN') AS backfill_abandon_reason, count(*) AS n
			 FROM proc_state WHERE backfill_abandoned_at IS NOT NULL GROUP BY 1) AS g),
		(SELECT count(*) FROM proc_state
			WHERE backfill_at IS NULL AND backfill_abandoned_at IS NULL AND state IN ('SUCCEEDED', 'SKIPPED', 'DEAD'))
		`+backlogFrom, now.Add(-StatsRateWindow), now).
		Scan(append(sc.dest(), &byState, &byClass, &byReason, &s.BackfillPending)...)
	if err != nil {
		return s, fmt.Errorf("queue statistics: %w", err)
	}
	sc.finish(now)
	for k, n := range byState {
		s.ByState[State(k)] = n
	}
	s.ByErrorClass = classes(byClass)
	for k, n := range byReason {
		s.BackfillAbandonedByReason[k] = n
		s.BackfillAbandoned += n
	}
	return s, nil
}

// estimateDrain is unfinished ÷ rate, rounded up to the second: an estimate has no sub-second
// precision, and rounding up keeps a non-empty backlog from reading as "drained in 0s". A
// result too large for a Duration (a huge backlog at a trickle) is capped rather than wrapped.
func estimateDrain(unfinished int64, perSecond float64) *time.Duration {
	var d time.Duration
	switch {
	case unfinished == 0:
	case perSecond <= 0:
		return nil
	default:
		secs := math.Ceil(float64(unfinished) / perSecond)
		if secs >= float64(math.MaxInt64/int64(time.Second)) {
			d = time.Duration(math.MaxInt64/int64(time.Second)) * time.Second
		} else {
			d = time.Duration(secs) * time.Second
		}
	}
	return &d
}
