package queue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

func remaining(t *testing.T, pg *pgtest.DB) string {
	t.Helper()
	var ids []int64
	rows, err := pg.Pool.Query(t.Context(), `SELECT msg_id FROM proc_state ORDER BY msg_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return fmt.Sprint(ids)
}

func TestDeleteFinishedDeletesExactlyTheEligible(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	now := bt0.Add(10 * 24 * time.Hour)
	old, recent := now.Add(-25*time.Hour), now.Add(-23*time.Hour)
	backfillRow(t, pg, 1, "SUCCEEDED", "marked", old)                  // eligible
	backfillRow(t, pg, 2, "SKIPPED", "marked", old)                    // eligible
	backfillRow(t, pg, 3, "DEAD", "marked", old)                       // eligible
	backfillRow(t, pg, 4, "SUCCEEDED", "marked", recent)               // within retention
	backfillRow(t, pg, 5, "SUCCEEDED", "", old)                        // marker still owed
	backfillRow(t, pg, 6, "DEAD", queue.AbandonMissingRow, old)        // abandoned is not done
	backfillRow(t, pg, 7, "DEAD", queue.AbandonTransientDeadline, old) // abandoned is not done
	pg.Exec(t, `INSERT INTO proc_state (msg_id, state, enqueued_at, updated_at) VALUES (8, 'PENDING', $1, $1), (9, 'FAILED', $1, $1)`, old)

	cutoff := now.Add(-24 * time.Hour)
	n, err := queue.DeleteFinished(t.Context(), pg.Pool, cutoff, 2)
	if err != nil || n != 2 {
		t.Fatalf("first batch deleted %d, %v; want 2 (the limit)", n, err)
	}
	n, err = queue.DeleteFinished(t.Context(), pg.Pool, cutoff, 2)
	if err != nil || n != 1 {
		t.Fatalf("second batch deleted %d, %v; want 1", n, err)
	}
	if n, _ := queue.DeleteFinished(t.Context(), pg.Pool, cutoff, 2); n != 0 {
		t.Fatalf("third batch deleted %d, want 0", n)
	}
	if got := remaining(t, pg); got != "[4 5 6 7 8 9]" {
		t.Errorf("remaining = %s, want [4 5 6 7 8 9]", got)
	}
}

// A message's flight history goes with its processing record, and only with it (R-ORDER-8).
func TestDeleteFinishedTakesTheMessagesFlightHistory(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	now := bt0.Add(10 * 24 * time.Hour)
	old, recent := now.Add(-25*time.Hour), now.Add(-23*time.Hour)
	backfillRow(t, pg, 1, "SUCCEEDED", "marked", old)
	backfillRow(t, pg, 2, "SUCCEEDED", "marked", recent)
	pg.Exec(t, `INSERT INTO flight_change (msg_id, flid, msg_type, styp, cause, state, version, written_at) VALUES
		(1, 'A', 'FLOP', 'ESTT', 'target', 'ACTIVE', 2, $1), (1, 'B', 'FLOP', 'ESTT', 'code-share', 'ACTIVE', 5, $1),
		(2, 'A', 'FLOP', 'ESTT', 'target', 'ACTIVE', 3, $1)`, old)
	if n, err := queue.DeleteFinished(t.Context(), pg.Pool, now.Add(-24*time.Hour), 10); err != nil || n != 1 {
		t.Fatalf("deleted %d, %v; want message 1", n, err)
	}
	var left string
	if err := pg.Pool.QueryRow(t.Context(), `SELECT string_agg(msg_id || flid, ',' ORDER BY msg_id, flid) FROM flight_change`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != "2A" {
		t.Errorf("history left = %s, want only message 2's (2A)", left)
	}
}

// A replay that holds the row (moving a DEAD, marked row back to PENDING) wins over the
// cleanup: the row is skipped while locked, and after the replay commits it no longer matches.
func TestDeleteFinishedLosesToAConcurrentReplay(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	now := bt0.Add(10 * 24 * time.Hour)
	old := now.Add(-48 * time.Hour)
	backfillRow(t, pg, 1, "DEAD", "marked", old)
	backfillRow(t, pg, 2, "DEAD", "marked", old)
	ctx := t.Context()
	replay, err := pg.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = replay.Rollback(context.Background()) }()
	if _, err := replay.Exec(ctx, `UPDATE proc_state SET state = 'PENDING', finished_at = NULL, backfill_next_at = NULL,
		backfill_at = NULL, updated_at = $1 WHERE msg_id = 1`, old); err != nil {
		t.Fatal(err)
	}
	n, err := queue.DeleteFinished(ctx, pg.Pool, now.Add(-24*time.Hour), 10)
	if err != nil || n != 1 {
		t.Fatalf("cleanup during the replay deleted %d, %v; want 1 (only the row not being replayed)", n, err)
	}
	if err := replay.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := queue.DeleteFinished(ctx, pg.Pool, now.Add(-24*time.Hour), 10); err != nil || n != 0 {
		t.Fatalf("cleanup after the replay deleted %d, %v; want 0", n, err)
	}
	m, err := queue.Get(ctx, pg.Pool, 1)
	if err != nil || m.State != queue.Pending {
		t.Errorf("replayed row = %+v, %v; want it kept as PENDING", m.State, err)
	}
}
