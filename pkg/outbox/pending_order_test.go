package outbox_test

import (
	"slices"
	"testing"

	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// TestSchdPendingWithoutPendingSinceFirst: a KAFKA:schd row without pending_since (written
// before the column existed, or by hand) has waited longest; with a limit below the backlog it
// must still be read, not starve behind every row that has a timestamp.
func TestSchdPendingWithoutPendingSinceFirst(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	add(t, d, ev(outbox.TargetSchd, "F1", 1), ev(outbox.TargetSchd, "F2", 1), ev(outbox.TargetSchd, "F3", 1))
	var nullID int64
	if err := d.Pool.QueryRow(t.Context(), `UPDATE msg_event SET pending_since = NULL
		WHERE target = $1 AND partition_key = 'F3' RETURNING event_id`, outbox.TargetSchd).Scan(&nullID); err != nil {
		t.Fatal(err)
	}
	got, err := outbox.Pending(t.Context(), d.Pool, outbox.TargetSchd, 2, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != nullID || !slices.IsSorted(ids(got[1:])) {
		t.Fatalf("pending = %v, want event %d (no pending_since) first", ids(got), nullID)
	}
}
