package outbox_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/pkg/pgtest"
	"github.com/msgexchange/msgexchange/pkg/telemetry"
)

// outboxRows renders every msg_event row in event_id order without the IDs themselves, so two
// databases can be compared on what AddTo and AddBulkTo wrote and on the order of their IDs.
func outboxRows(t *testing.T, d *pgtest.DB) []string {
	t.Helper()
	rows, err := d.Pool.Query(t.Context(), `SELECT target, partition_key, event_type, state_version, coalesce(payload::text, 'NULL'),
		coalesce(msg_id, 0), state, attempts, coalesce(last_error, ''), coalesce(trace_parent, 'NULL'), coalesce(trace_state, 'NULL'),
		created_at, updated_at, coalesce(pending_since::text, 'NULL'), sent_at IS NULL
		FROM msg_event ORDER BY event_id`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		vals, err := r.Values()
		return fmt.Sprint(vals...), err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func send(t *testing.T, d *pgtest.DB, add func(*pgx.Batch, []outbox.NewEvent, time.Time) error, events []outbox.NewEvent, at time.Time) {
	t.Helper()
	err := db.WithTx(t.Context(), d.Pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		if err := add(b, events, at); err != nil {
			return err
		}
		return tx.SendBatch(t.Context(), b).Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAddBulkToWritesWhatAddToWrites: the same events on the same stored outbox leave the same
// rows in the same event_id order through the one-statement path as through one statement per
// event, whether a FLID's KAFKA:schd state comes once, twice (newer, older, equal versions)
// or is older than the stored row, and whatever state the stored row is in (R-OUTBOX-4).
func TestAddBulkToWritesWhatAddToWrites(t *testing.T) {
	t.Parallel()
	later := now.Add(time.Minute)
	tomb := outbox.NewEvent{Target: outbox.TargetMsg, PartitionKey: "D1", Type: outbox.TypeTombstone, Version: 4, MsgID: 9}
	traced := ev(outbox.TargetMsg, "T1", 1)
	traced.Trace = telemetry.TraceContext{Parent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", State: "vendor=x"}
	cases := []struct {
		name   string
		stored []outbox.NewEvent
		// sent marks the stored KAFKA:schd row of F1 SENT, dead makes F2's DEAD.
		sent, dead bool
		events     []outbox.NewEvent
	}{
		{name: "one flight's two events", events: []outbox.NewEvent{ev(outbox.TargetMsg, "A", 1), ev(outbox.TargetSchd, "A", 1)}},
		{name: "a deletion's tombstones", events: []outbox.NewEvent{tomb,
			{Target: outbox.TargetSchd, PartitionKey: "D1", Type: outbox.TypeTombstone, Version: 4, MsgID: 9}}},
		{name: "trace kept", events: []outbox.NewEvent{traced, ev(outbox.TargetSchd, "T1", 1)}},
		{name: "a FLID twice in the batch, newer second", events: []outbox.NewEvent{
			ev(outbox.TargetMsg, "M", 1), ev(outbox.TargetSchd, "M", 1), ev(outbox.TargetMsg, "C", 1), ev(outbox.TargetSchd, "C", 1),
			ev(outbox.TargetMsg, "M", 2), ev(outbox.TargetSchd, "M", 2)}},
		{name: "a FLID twice, older second", events: []outbox.NewEvent{
			ev(outbox.TargetSchd, "M", 3), ev(outbox.TargetSchd, "X", 1), ev(outbox.TargetSchd, "M", 2)}},
		{name: "a FLID three times, equal versions", events: []outbox.NewEvent{
			ev(outbox.TargetSchd, "M", 2), ev(outbox.TargetMsg, "M", 2), ev(outbox.TargetSchd, "M", 2), ev(outbox.TargetSchd, "M", 2)}},
		{name: "stored rows: replaced, kept, sent, dead",
			stored: []outbox.NewEvent{ev(outbox.TargetSchd, "F1", 2), ev(outbox.TargetSchd, "F2", 5), ev(outbox.TargetSchd, "F3", 7),
				ev(outbox.TargetMsg, "F1", 2)},
			sent: true, dead: true,
			events: []outbox.NewEvent{ev(outbox.TargetMsg, "F1", 3), ev(outbox.TargetSchd, "F1", 3), ev(outbox.TargetSchd, "F2", 5),
				ev(outbox.TargetSchd, "F3", 6), ev(outbox.TargetSchd, "F3", 7), ev(outbox.TargetSchd, "F3", 6), ev(outbox.TargetSchd, "N", 1)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var got [2][]string
			for i, add := range []func(*pgx.Batch, []outbox.NewEvent, time.Time) error{outbox.AddTo, outbox.AddBulkTo} {
				d := pgtest.New(t)
				if len(c.stored) > 0 {
					send(t, d, outbox.AddTo, c.stored, now)
				}
				if c.sent {
					d.Exec(t, `UPDATE msg_event SET state = 'SENT', sent_at = $1 WHERE target = 'KAFKA:schd' AND partition_key = 'F1'`, now)
				}
				if c.dead {
					d.Exec(t, `UPDATE msg_event SET state = 'DEAD', attempts = 3, last_error = 'refused' WHERE target = 'KAFKA:schd' AND partition_key = 'F2'`)
				}
				send(t, d, add, c.events, later)
				got[i] = outboxRows(t, d)
			}
			if !slices.Equal(got[0], got[1]) {
				t.Fatalf("one statement per event left\n  %s\none statement left\n  %s",
					strings.Join(got[0], "\n  "), strings.Join(got[1], "\n  "))
			}
		})
	}
}

// TestAddBulkToTakesIDsInEventOrder: a batch's event_ids follow the order of the events, also
// for one FLID's events among many and across the two targets, since the dispatcher sends
// KAFKA:msg by event_id and a FLID's order on Kafka rests on it (R-OUTBOX-2).
func TestAddBulkToTakesIDsInEventOrder(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	var events []outbox.NewEvent
	var want []string
	for i := range 600 {
		flid := fmt.Sprintf("F%03d", (i*7919)%37) // FLIDs recur, out of sorted order
		e := ev(outbox.TargetMsg, flid, int64(i+1))
		e.MsgID = int64(i)
		events = append(events, e)
		want = append(want, fmt.Sprintf("%s/%d", flid, i))
	}
	send(t, d, outbox.AddBulkTo, events, now)
	rows, err := d.Pool.Query(t.Context(), `SELECT partition_key || '/' || msg_id FROM msg_event ORDER BY event_id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("event_id order differs from the events' order: first %v, want %v", got[:5], want[:5])
	}
}

// TestAddBulkToRefusesAnUnknownTarget as AddTo does, before anything is queued.
func TestAddBulkToRefusesAnUnknownTarget(t *testing.T) {
	t.Parallel()
	b := &pgx.Batch{}
	if err := outbox.AddBulkTo(b, []outbox.NewEvent{ev("KAFKA:other", "A", 1)}, now); err == nil || b.Len() != 0 {
		t.Fatalf("err = %v, %d statements queued", err, b.Len())
	}
}
