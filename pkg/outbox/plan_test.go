package outbox_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// MarkSent finds the events it marks by their key, and its "first event of its message" check
// reads only the message's own events, even when msg_event has no statistics (a fresh
// deployment, or a server whose autovacuum has not run since the table filled): a plan that
// scans a partial index of one state whole costs a scan of every event ever sent, per event
// marked, and made the mark the costliest statement of a backlog (docs/performance.md, "Changes
// and their cost").
func TestMarkSentPlanReadsOnlyTheMessagesEvents(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	ctx := t.Context()
	// No ANALYZE: the planner sees the table as the first rounds after a deployment do.
	insert := func(from, to int, state string) {
		d.Exec(t, fmt.Sprintf(`INSERT INTO msg_event (target, partition_key, event_type, state_version, payload,
			msg_id, state, created_at, updated_at, sent_at)
			SELECT 'KAFKA:msg', 'F' || (i %% 100), 'UPSERT', i, '{}', i, '%[1]s', now(), now(),
				CASE WHEN '%[1]s' = 'SENT' THEN now() END
			FROM generate_series(%[2]d, %[3]d) AS i`, state, from, to))
	}
	insert(1, 20000, "SENT")
	insert(20001, 20005, "PENDING")
	ids := []int64{20001, 20002, 20003, 20004, 20005}
	rows, err := d.Pool.Query(ctx, `EXPLAIN (COSTS OFF) `+outbox.MarkSentSQL, ids, ids, now)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(plan, "\n")
	if strings.Contains(all, "msg_event_sent") || strings.Contains(all, "msg_event_flid") {
		t.Errorf("MarkSent's plan scans a partial index of one state whole:\n%s", all)
	}
	if !strings.Contains(all, "msg_event_pkey") {
		t.Errorf("MarkSent's plan finds the events marked without their key:\n%s", all)
	}
}
