package queue_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

var bt0 = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)

// backfillRow inserts a terminal row with the given backfill situation: reason "" = still owed,
// "marked" = confirmed, otherwise abandoned for that reason.
func backfillRow(t *testing.T, pg *pgtest.DB, id int64, state string, situation string, updated time.Time) {
	t.Helper()
	var nextAt, backfillAt, abandonedAt *time.Time
	var reason, lastErr *string
	switch situation {
	case "":
		nextAt = &bt0
	case "marked":
		backfillAt = &updated
	default:
		boom := "boom"
		abandonedAt, reason, lastErr = &updated, &situation, &boom
	}
	pg.Exec(t, `INSERT INTO proc_state (msg_id, state, enqueued_at, finished_at, backfill_next_at, backfill_at,
		backfill_attempts, backfill_last_error, backfill_abandoned_at, backfill_abandon_reason, updated_at)
		VALUES ($1, $2, $3, $3, $4, $5, 3, $6, $7, $8, $9)`,
		id, state, bt0, nextAt, backfillAt, lastErr, abandonedAt, reason, updated)
}

// TestReopenBackfill guards R-INV-12.
func TestReopenBackfill(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	backfillRow(t, pg, 1, "SUCCEEDED", queue.AbandonMissingRow, bt0)
	backfillRow(t, pg, 2, "DEAD", queue.AbandonTransientDeadline, bt0)
	backfillRow(t, pg, 3, "SKIPPED", queue.AbandonMissingRow, bt0)
	backfillRow(t, pg, 4, "SUCCEEDED", "marked", bt0)
	backfillRow(t, pg, 5, "SUCCEEDED", "", bt0)
	now := bt0.Add(time.Hour)
	ids := func(rs []queue.Reopened) string {
		var out []int64
		for _, r := range rs {
			out = append(out, r.MsgID)
		}
		return fmt.Sprint(out)
	}

	if _, err := queue.ReopenBackfill(t.Context(), pg.Pool, queue.ReopenRequest{}, now); !errors.Is(err, queue.ErrReopenNoFilter) {
		t.Errorf("no filter: %v, want ErrReopenNoFilter", err)
	}
	if _, err := queue.ReopenBackfill(t.Context(), pg.Pool, queue.ReopenRequest{Reason: "NOPE"}, now); err == nil {
		t.Error("unknown reason accepted")
	}
	// Dry run: lists, changes nothing.
	got, err := queue.ReopenBackfill(t.Context(), pg.Pool, queue.ReopenRequest{Reason: queue.AbandonMissingRow, DryRun: true}, now)
	if err != nil || ids(got) != "[1 3]" {
		t.Fatalf("dry run by reason = %s, %v; want [1 3]", ids(got), err)
	}
	if got[0].Reason != queue.AbandonMissingRow || got[0].Attempts != 3 || got[0].LastError != "boom" || !got[0].AbandonedAt.Equal(bt0) {
		t.Errorf("dry run row = %+v", got[0])
	}
	if m, _ := queue.Get(t.Context(), pg.Pool, 1); m.BackfillAbandonedAt == nil {
		t.Fatal("dry run reopened a row")
	}
	// By IDs: only abandoned rows among them; a marked or still-owed row is not touched.
	got, err = queue.ReopenBackfill(t.Context(), pg.Pool, queue.ReopenRequest{MsgIDs: []int64{2, 4, 5, 99}}, now)
	if err != nil || ids(got) != "[2]" || got[0].Reason != queue.AbandonTransientDeadline {
		t.Fatalf("reopen by ids = %+v, %v; want only 2", got, err)
	}
	m, _ := queue.Get(t.Context(), pg.Pool, 2)
	if m.BackfillAbandonedAt != nil || m.BackfillReason != nil || m.BackfillNextAt == nil || !m.BackfillNextAt.Equal(now) ||
		m.BackfillAttempts != 3 || m.BackfillAt != nil {
		t.Errorf("reopened row = %+v; want abandonment cleared, due now, attempts kept", m)
	}
	due, err := queue.BackfillDue(t.Context(), pg.Pool, now, 30*24*time.Hour, 10)
	var dueIDs []int64
	for _, c := range due {
		dueIDs = append(dueIDs, c.MsgID)
	}
	if err != nil || fmt.Sprint(dueIDs) != "[2 5]" {
		t.Errorf("due after reopen = %v, %v; want [2 5]", dueIDs, err)
	}
	// By reason and IDs together: both must match.
	got, err = queue.ReopenBackfill(t.Context(), pg.Pool, queue.ReopenRequest{MsgIDs: []int64{1, 2}, Reason: queue.AbandonMissingRow, Limit: 5}, now)
	if err != nil || ids(got) != "[1]" {
		t.Errorf("reopen by ids and reason = %s, %v; want [1]", ids(got), err)
	}
}

// Reopen goes through the per-message gate: while another transaction holds the row lock
// (the backfill writing a marker, a replay), it waits.
// Guards R-INV-11.
func TestReopenWaitsForTheGate(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	backfillRow(t, pg, 1, "DEAD", queue.AbandonMissingRow, bt0)
	ctx := t.Context()
	holder, err := pg.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(context.Background()) }()
	if _, err := holder.Exec(ctx, `SELECT 1 FROM proc_state WHERE msg_id = 1 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	err = db.WithTx(ctx, pg.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '200ms'`); err != nil {
			return err
		}
		_, err := queue.ReopenBackfill(ctx, tx, queue.ReopenRequest{MsgIDs: []int64{1}}, bt0)
		return err
	})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
		t.Fatalf("reopen while the row is locked: %v; want a lock timeout", err)
	}
	// The holder was a replay: it moves the row back to PENDING. The reopen then finds nothing.
	if _, err := holder.Exec(ctx, `UPDATE proc_state SET state = 'PENDING', finished_at = NULL, backfill_next_at = NULL WHERE msg_id = 1`); err != nil {
		t.Fatal(err)
	}
	done := make(chan []queue.Reopened, 1)
	go func() {
		got, err := queue.ReopenBackfill(context.Background(), pg.Pool, queue.ReopenRequest{MsgIDs: []int64{1}}, bt0)
		if err != nil {
			t.Error(err)
		}
		done <- got
	}()
	pg.WaitForLockWait(t) // the reopen is queued behind the holder
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := <-done; len(got) != 0 {
		t.Errorf("reopen after a replay = %+v, want nothing", got)
	}
}
