package outbox_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

func TestDeleteSentDeletesExactlyTheEligible(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	now := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
	old, recent := now.Add(-8*24*time.Hour), now.Add(-6*24*time.Hour)
	insert := func(id int64, target, flid, state string, at time.Time) {
		var sent *time.Time
		if state == "SENT" {
			sent = &at
		}
		pg.Exec(t, `INSERT INTO msg_event (event_id, target, partition_key, event_type, state_version, state, created_at, updated_at, sent_at)
			VALUES ($1, $2, $3, 'UPSERT', 1, $4, $5, $5, $6)`, id, target, flid, state, at, sent)
	}
	insert(1, outbox.TargetMsg, "F1", "SENT", old)     // eligible
	insert(2, outbox.TargetSchd, "F1", "SENT", old)    // eligible
	insert(3, outbox.TargetMsg, "F2", "SENT", old)     // eligible
	insert(4, outbox.TargetMsg, "F2", "SENT", recent)  // within retention
	insert(5, outbox.TargetMsg, "F3", "DEAD", old)     // dead letter: kept until handled
	insert(6, outbox.TargetSchd, "F3", "DEAD", old)    // kept until a newer state replaces it
	insert(7, outbox.TargetMsg, "F4", "PENDING", old)  // not delivered
	insert(8, outbox.TargetSchd, "F4", "PENDING", old) // not delivered

	cutoff := now.Add(-7 * 24 * time.Hour)
	for _, want := range []int64{2, 1, 0} {
		n, err := outbox.DeleteSent(t.Context(), pg.Pool, cutoff, 2)
		if err != nil || n != want {
			t.Fatalf("batch deleted %d, %v; want %d", n, err, want)
		}

	}
	rows, err := pg.Pool.Query(t.Context(), `SELECT event_id FROM msg_event ORDER BY event_id`)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if got := fmt.Sprint(ids); got != "[4 5 6 7 8]" {
		t.Errorf("remaining = %s, want [4 5 6 7 8]", got)
	}
}
