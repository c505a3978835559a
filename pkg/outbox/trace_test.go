package outbox_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/pkg/telemetry"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// TestTraceContextRoundTrips: the trace context an event is written with, in the caller's batch
// (AddTo) or on its own (Add), is the one the dispatcher and the control service read back;
// an event written without one has NULL columns, not empty strings, and reads back as none.
func TestTraceContextRoundTrips(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	traced := telemetry.TraceContext{Parent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", State: "vendor=x"}
	want := map[string]telemetry.TraceContext{"A": traced, "B": {}, "C": traced, "D": {Parent: traced.Parent}}
	events := func(flids ...string) []outbox.NewEvent {
		var out []outbox.NewEvent
		for _, f := range flids {
			for _, target := range []string{outbox.TargetMsg, outbox.TargetSchd} {
				e := ev(target, f, 1)
				e.MsgID, e.Trace = 7, want[f]
				out = append(out, e)
			}
		}
		return out
	}
	err := db.WithTx(t.Context(), d.Pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		if err := outbox.AddTo(b, events("A", "B"), now); err != nil {
			return err
		}
		if err := tx.SendBatch(t.Context(), b).Close(); err != nil {
			return err
		}
		return outbox.Add(t.Context(), tx, events("C", "D"), now)
	})
	if err != nil {
		t.Fatal(err)
	}
	var empty int
	if err := d.Pool.QueryRow(t.Context(), `SELECT count(*) FROM msg_event WHERE trace_parent = '' OR trace_state = ''`).Scan(&empty); err != nil || empty != 0 {
		t.Fatalf("%d events with an empty trace column (%v), want NULL for every empty header", empty, err)
	}
	for _, target := range []string{outbox.TargetMsg, outbox.TargetSchd} {
		pending, err := outbox.Pending(t.Context(), d.Pool, target, 10, now)
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) != len(want) {
			t.Fatalf("%d pending %s events, want %d", len(pending), target, len(want))
		}
		for _, e := range pending {
			if e.Trace != want[e.PartitionKey] {
				t.Errorf("pending %s event of %s reads %+v, want %+v", target, e.PartitionKey, e.Trace, want[e.PartitionKey])
			}
		}
	}
	rows, err := outbox.ByMessage(t.Context(), d.Pool, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2*len(want) {
		t.Fatalf("%d events of message 7, want %d", len(rows), 2*len(want))
	}
	for _, r := range rows {
		if r.Trace != want[r.PartitionKey] {
			t.Errorf("listed %s event of %s reads %+v, want %+v", r.Target, r.PartitionKey, r.Trace, want[r.PartitionKey])
		}
	}
}
