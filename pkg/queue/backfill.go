package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/telemetry"
)

// Abandon reasons of the backfill (R-BACKFILL-4, R-BACKFILL-5).
const (
	AbandonMissingRow        = "MISSING_ROW"
	AbandonTransientDeadline = "TRANSIENT_DEADLINE"
)

// BackfillCandidate is a message that owes its marker, with the row version the candidate
// read saw (R-BACKFILL-10).
type BackfillCandidate struct {
	MsgID   int64
	Version string
}

// BackfillDue returns up to limit messages that owe a processed marker, with exactly the
// predicate of R-BACKFILL-2: terminal, not marked, not abandoned, and (no next time, or due,
// or enqueued before now − R, which overrides the backoff), in fair rotation by attempts then
// msg_id so that permanently failing rows never fill the batch. Overdue is judged on the
// local enqueued_at, never the inbox clock.
func BackfillDue(ctx context.Context, q db.Executor, now time.Time, overdue time.Duration, limit int) ([]BackfillCandidate, error) {
	rows, err := q.Query(ctx, `SELECT msg_id, xmin::text FROM proc_state
		WHERE state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')
		  AND backfill_at IS NULL
		  AND backfill_abandoned_at IS NULL
		  AND (backfill_next_at IS NULL OR backfill_next_at <= $1 OR enqueued_at < $2)
		ORDER BY backfill_attempts, msg_id
		LIMIT $3`, now, now.Add(-overdue), limit)
	if err != nil {
		return nil, fmt.Errorf("backfill candidates: %w", err)
	}
	due, err := pgx.CollectRows(rows, pgx.RowToStructByPos[BackfillCandidate])
	if err != nil {
		return nil, fmt.Errorf("backfill candidates: %w", err)
	}
	return due, nil
}

// BackfillTarget is a candidate re-read under the per-message gate.
type BackfillTarget struct {
	MsgID int64
	// Version is the row version the gate holds: the one the candidate read saw unless the row
	// changed since (R-BACKFILL-10).
	Version    string
	EnqueuedAt time.Time
	FinishedAt time.Time
	Attempts   int
	Trace      telemetry.TraceContext
}

// LockForBackfill takes the per-message gate (R-GATE-1): a row lock held for the caller's
// transaction, which replay and reopen also need, and re-checks that the message still owes
// its marker. ok is false when it no longer does (replayed, marked or abandoned meanwhile).
func LockForBackfill(ctx context.Context, tx pgx.Tx, msgID int64) (t BackfillTarget, ok bool, err error) {
	got, err := LockManyForBackfill(ctx, tx, []int64{msgID})
	if err != nil || len(got) == 0 {
		return t, false, err
	}
	return got[0], true, nil
}

// LockManyForBackfill is LockForBackfill for several messages in one statement: it takes the
// gate of each of msgIDs that still owes its marker, in msg_id order, and returns those in
// that order.
func LockManyForBackfill(ctx context.Context, tx pgx.Tx, msgIDs []int64) ([]BackfillTarget, error) {
	rows, err := tx.Query(ctx, `SELECT msg_id, xmin::text, enqueued_at, finished_at, backfill_attempts,
			trace_parent, trace_state
		FROM proc_state WHERE msg_id = ANY($1) AND state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')
		  AND backfill_at IS NULL AND backfill_abandoned_at IS NULL
		ORDER BY msg_id FOR UPDATE`, msgIDs)
	if err != nil {
		return nil, fmt.Errorf("lock %d messages for backfill: %w", len(msgIDs), err)
	}
	got, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (BackfillTarget, error) {
		var t BackfillTarget
		traceParent, traceState := t.Trace.ScanColumns()
		err := row.Scan(&t.MsgID, &t.Version, &t.EnqueuedAt, &t.FinishedAt, &t.Attempts, traceParent, traceState)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("lock %d messages for backfill: %w", len(msgIDs), err)
	}
	return got, nil
}

// Backfilled records, in the transaction that holds the messages' gates (LockForBackfill,
// LockManyForBackfill), that their markers are confirmed (written now, or found already
// written). The statement goes out with tx's COMMIT (db.Defer): it only writes rows the gates
// hold.
func Backfilled(ctx context.Context, tx pgx.Tx, now time.Time, msgIDs ...int64) error {
	if len(msgIDs) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	b.Queue(`UPDATE proc_state SET backfill_at = $2, backfill_next_at = NULL, backfill_last_error = NULL,
		updated_at = $2 WHERE msg_id = ANY($1)`, msgIDs, now)
	if err := db.Defer(ctx, tx, b); err != nil {
		return fmt.Errorf("record backfill of %d messages from %d: %w", len(msgIDs), msgIDs[0], err)
	}
	return nil
}

// BackfillFailed counts a transient failure and schedules the next try.
func BackfillFailed(ctx context.Context, q db.Executor, msgID int64, reason string, next, now time.Time) error {
	_, err := q.Exec(ctx, `UPDATE proc_state SET backfill_attempts = backfill_attempts + 1, backfill_last_error = $2,
		backfill_next_at = $3, updated_at = $4 WHERE msg_id = $1`, msgID, reason, next, now)
	if err != nil {
		return fmt.Errorf("record backfill failure of %d: %w", msgID, err)
	}
	return nil
}

// BackfillAbandon stops automatic retries of a marker. Abandoned is not marked: backfill_at
// stays NULL, and an operator can reopen the row.
func BackfillAbandon(ctx context.Context, q db.Executor, msgID int64, reason, lastError string, now time.Time) error {
	_, err := q.Exec(ctx, `UPDATE proc_state SET backfill_abandoned_at = $3, backfill_abandon_reason = $2,
		backfill_attempts = backfill_attempts + 1, backfill_last_error = $4, backfill_next_at = NULL, updated_at = $3
		WHERE msg_id = $1`, msgID, reason, now, lastError)
	if err != nil {
		return fmt.Errorf("abandon backfill of %d: %w", msgID, err)
	}
	return nil
}

// BackfillHealth is what the backfill's gauges show: the work still owed and what is stuck.
type BackfillHealth struct {
	// Unmarked counts terminal rows whose marker is neither confirmed nor abandoned, and
	// OldestUnmarkedFinishedAt is the earliest finished_at among them (nil when none).
	Unmarked                 int64
	OldestUnmarkedFinishedAt *time.Time
	// OverMaxAttempts counts unmarked, unabandoned rows whose attempts reached the alert
	// threshold pipeline.backfill-max-attempts (alert only: they keep being retried until R).
	OverMaxAttempts int64
	// AbandonedByReason counts abandoned rows by reason; both reasons are always present.
	AbandonedByReason map[string]int64
}

// ReadBackfillHealth reads BackfillHealth in one statement (one snapshot). The unmarked
// predicate repeats the proc_state_backfill index's one, so it stays an index scan.
func ReadBackfillHealth(ctx context.Context, q db.Executor, maxAttempts int) (BackfillHealth, error) {
	h := BackfillHealth{AbandonedByReason: map[string]int64{AbandonMissingRow: 0, AbandonTransientDeadline: 0}}
	var missing, deadline int64
	err := q.QueryRow(ctx, `SELECT u.n, u.oldest, u.over,
		(SELECT count(*) FROM proc_state WHERE backfill_abandoned_at IS NOT NULL AND backfill_abandon_reason = 'MISSING_ROW'),
		(SELECT count(*) FROM proc_state WHERE backfill_abandoned_at IS NOT NULL AND backfill_abandon_reason = 'TRANSIENT_DEADLINE')
		FROM (SELECT count(*) AS n, min(finished_at) AS oldest, count(*) FILTER (WHERE backfill_attempts >= $1) AS over
			FROM proc_state WHERE backfill_at IS NULL AND backfill_abandoned_at IS NULL
			  AND state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')) AS u`, maxAttempts).
		Scan(&h.Unmarked, &h.OldestUnmarkedFinishedAt, &h.OverMaxAttempts, &missing, &deadline)
	if err != nil {
		return h, fmt.Errorf("backfill health: %w", err)
	}
	h.AbandonedByReason[AbandonMissingRow] = missing
	h.AbandonedByReason[AbandonTransientDeadline] = deadline
	return h, nil
}
