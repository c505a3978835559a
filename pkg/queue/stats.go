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

// Statistics summarises proc_state for the status RPC and for alerting.
type Statistics struct {
	// ByState has an entry for every state, zero included, so callers can print a stable table.
	ByState map[State]int64
	// ByErrorClass counts the rows that carry each class, whatever their state (a FAILED row's
	// class is its last transient failure); classes that occur on no row are absent.
	ByErrorClass map[ErrorClass]int64
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

	// BackfillPending counts terminal rows whose marker is neither written nor abandoned: the
	// backfill's remaining work (R-BACKFILL-2).
	BackfillPending int64
	// BackfillAbandoned counts abandoned rows, in total and by backfill_abandon_reason.
	BackfillAbandoned         int64
	BackfillAbandonedByReason map[string]int64
}

// Stats reads the queue's statistics at now (the caller's clock; the rate window and the ages
// are measured from it, never from the database's now()).
//
// Everything is read in one statement so the numbers come from one snapshot and add up (in
// READ COMMITTED every subquery of a statement sees the statement's snapshot). The predicates
// repeat the partial indexes' ones verbatim (proc_state_unfinished, proc_state_backfill,
// proc_state_finished) so those counts stay index scans on a large table; the group-bys by
// state, class and reason scan the table, which retention keeps to a few days of traffic.
func Stats(ctx context.Context, q db.Executor, now time.Time) (Statistics, error) {
	s := Statistics{
		ByState:                      map[State]int64{Pending: 0, Failed: 0, Succeeded: 0, Skipped: 0, Dead: 0},
		ByErrorClass:                 map[ErrorClass]int64{},
		DeadByErrorClass:             map[ErrorClass]int64{},
		DeadAcknowledgedByErrorClass: map[ErrorClass]int64{},
		BackfillAbandonedByReason:    map[string]int64{},
	}
	var byState, byClass, deadByClass, ackedByClass, byReason map[string]int64
	err := q.QueryRow(ctx, `SELECT
		(SELECT coalesce(jsonb_object_agg(state, n), '{}') FROM
			(SELECT state, count(*) AS n FROM proc_state GROUP BY state) AS g),
		(SELECT coalesce(jsonb_object_agg(error_class, n), '{}') FROM
			(SELECT error_class, count(*) AS n FROM proc_state WHERE error_class IS NOT NULL GROUP BY error_class) AS g),
		(SELECT coalesce(jsonb_object_agg(error_class, n), '{}') FROM
			(SELECT coalesce(error_class, '') AS error_class, count(*) AS n FROM proc_state
			 WHERE state = 'DEAD' AND acknowledged_at IS NULL GROUP BY 1) AS g),
		(SELECT coalesce(jsonb_object_agg(error_class, n), '{}') FROM
			(SELECT coalesce(error_class, '') AS error_class, count(*) AS n FROM proc_state
			 WHERE state = 'DEAD' AND acknowledged_at IS NOT NULL GROUP BY 1) AS g),
		(SELECT coalesce(jsonb_object_agg(backfill_abandon_reason, n), '{}') FROM
			(SELECT coalesce(backfill_abandon_reason, 'UNKNOWN') AS backfill_abandon_reason, count(*) AS n
			 FROM proc_state WHERE backfill_abandoned_at IS NOT NULL GROUP BY 1) AS g),
		u.n, u.oldest,
		(SELECT count(*) FROM proc_state WHERE finished_at IS NOT NULL AND finished_at > $1 AND finished_at <= $2),
		(SELECT count(*) FROM proc_state
			WHERE backfill_at IS NULL AND backfill_abandoned_at IS NULL AND state IN ('SUCCEEDED', 'SKIPPED', 'DEAD'))
		FROM (SELECT count(*) AS n, min(enqueued_at) AS oldest FROM proc_state
			WHERE state IN ('PENDING', 'FAILED')) AS u`,
		now.Add(-StatsRateWindow), now).
		Scan(&byState, &byClass, &deadByClass, &ackedByClass, &byReason, &s.Unfinished, &s.OldestUnfinishedEnqueuedAt,
			&s.FinishedInWindow, &s.BackfillPending)
	if err != nil {
		return s, fmt.Errorf("queue statistics: %w", err)
	}
	for k, n := range byState {
		s.ByState[State(k)] = n
	}
	for k, n := range byClass {
		s.ByErrorClass[ErrorClass(k)] = n
	}
	for k, n := range deadByClass {
		s.DeadByErrorClass[ErrorClass(k)] = n
	}
	for k, n := range ackedByClass {
		s.DeadAcknowledgedByErrorClass[ErrorClass(k)] = n
	}
	for k, n := range byReason {
		s.BackfillAbandonedByReason[k] = n
		s.BackfillAbandoned += n
	}
	if s.OldestUnfinishedEnqueuedAt != nil {
		// An enqueued_at ahead of now (another instance's clock) reads as zero, not negative.
		s.OldestUnfinishedAge = max(now.Sub(*s.OldestUnfinishedEnqueuedAt), 0)
	}
	s.FinishedPerSecond = float64(s.FinishedInWindow) / StatsRateWindow.Seconds()
	s.EstimatedDrain = estimateDrain(s.Unfinished, s.FinishedPerSecond)
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
