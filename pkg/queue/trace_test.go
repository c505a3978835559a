package queue_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/pkg/telemetry"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// TestTraceContextRoundTrips: the trace context Enqueue stores is the one the pump's head and
// the backfill's gate read back, and a message enqueued without one has NULL columns, not
// empty strings, and reads back as none.
func TestTraceContextRoundTrips(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	traced := telemetry.TraceContext{Parent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", State: "vendor=x"}
	want := map[int64]telemetry.TraceContext{1: traced, 2: {}, 3: {Parent: traced.Parent}}
	var rows []queue.NewMessage
	for id := int64(1); id <= 3; id++ {
		rows = append(rows, queue.NewMessage{MsgID: id, Trace: want[id]})
	}
	if _, err := queue.Enqueue(t.Context(), d.Pool, rows, now); err != nil {
		t.Fatal(err)
	}
	var nulls int
	if err := d.Pool.QueryRow(t.Context(), `SELECT count(*) FROM proc_state WHERE trace_parent = '' OR trace_state = ''`).Scan(&nulls); err != nil || nulls != 0 {
		t.Fatalf("%d rows with an empty trace column (%v), want NULL for every empty header", nulls, err)
	}
	for id, tc := range want {
		m, err := queue.Get(t.Context(), d.Pool, id)
		if err != nil {
			t.Fatal(err)
		}
		if m.Trace != tc {
			t.Errorf("message %d read back with %+v, want %+v", id, m.Trace, tc)
		}
		if err := queue.Finish(t.Context(), d.Pool, queue.Outcome{MsgID: id, State: queue.Succeeded, Started: now, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	err := db.WithTx(t.Context(), d.Pool, func(tx pgx.Tx) error {
		got, err := queue.LockManyForBackfill(t.Context(), tx, []int64{1, 2, 3})
		if err != nil {
			return err
		}
		if len(got) != 3 {
			t.Fatalf("gates of %d messages, want 3", len(got))
		}
		for _, g := range got {
			if g.Trace != want[g.MsgID] {
				t.Errorf("the gate of message %d reads %+v, want %+v", g.MsgID, g.Trace, want[g.MsgID])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
