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
	"github.com/msgexchange/msgexchange/pkg/telemetry"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// outboxRows renders every msg_event row in event_id order without the IDs themselves, so two
// databases can be compared on what AddTo and oneByOne wrote and on the order of their IDs.
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

// oneByOne is the outbox's rule written out one statement per event, the way the events were
// once written: each KAFKA:msg event appended with the next event_id, each KAFKA:schd state
// upserted into its FLID's row when its version is not older, with a new event_id and back to
// PENDING with its error cleared (R-OUTBOX-4). AddTo's one statement must leave what it leaves.
func oneByOne(batch *pgx.Batch, events []outbox.NewEvent, now time.Time) error {
	for _, e := range events {
		var payload any
		if e.Payload != nil {
			payload = string(e.Payload)
		}
		tp, ts := e.Trace.Columns()
		args := []any{e.Target, e.PartitionKey, e.Type, e.Version, payload, e.MsgID, tp, ts, now}
		switch e.Target {
		case outbox.TargetMsg:
			batch.Queue(`INSERT INTO msg_event (target, partition_key, event_type, state_version, payload, msg_id,
				trace_parent, trace_state, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, $9, $9)`, args...)
		case outbox.TargetSchd:
			batch.Queue(`INSERT INTO msg_event (target, partition_key, event_type, state_version, payload, msg_id,
				trace_parent, trace_state, created_at, updated_at, pending_since)
				VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, $9, $9, $9)
				ON CONFLICT (partition_key) WHERE target = 'KAFKA:schd' DO UPDATE SET
					event_id = nextval('msg_event_id_seq'), event_type = excluded.event_type,
					pending_since = CASE WHEN msg_event.state = 'PENDING' THEN coalesce(msg_event.pending_since, excluded.pending_since)
						ELSE excluded.pending_since END,
					state_version = excluded.state_version, payload = excluded.payload, msg_id = excluded.msg_id,
					trace_parent = excluded.trace_parent, trace_state = excluded.trace_state,
					state = 'PENDING', attempts = 0, next_attempt_at = NULL, last_error = NULL, sent_at = NULL,
					updated_at = excluded.updated_at
				WHERE msg_event.state_version <= excluded.state_version`, args...)
		default:
			return fmt.Errorf("unknown target %q", e.Target)
		}
	}
	return nil
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

// TestAddToWritesWhatOneUpsertPerEventWrites: the same events on the same stored outbox leave
// the same rows in the same event_id order through AddTo's one statement as through one
// statement per event (oneByOne), whether a FLID's KAFKA:schd state comes once, twice (newer, older, equal versions)
// or is older than the stored row, and whatever state the stored row is in (R-OUTBOX-4).
func TestAddToWritesWhatOneUpsertPerEventWrites(t *testing.T) {
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
			for i, add := range []func(*pgx.Batch, []outbox.NewEvent, time.Time) error{oneByOne, outbox.AddTo} {
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

// TestAddToTakesIDsInEventOrder: a batch's event_ids follow the order of the events, also
// for one FLID's events among many and across the two targets, since the dispatcher sends
// KAFKA:msg by event_id and a FLID's order on Kafka rests on it (R-OUTBOX-2).
func TestAddToTakesIDsInEventOrder(t *testing.T) {
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
	send(t, d, outbox.AddTo, events, now)
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

// TestAddToRefusesAnUnknownTarget before anything is queued.
func TestAddToRefusesAnUnknownTarget(t *testing.T) {
	t.Parallel()
	b := &pgx.Batch{}
	if err := outbox.AddTo(b, []outbox.NewEvent{ev("KAFKA:other", "A", 1)}, now); err == nil || b.Len() != 0 {
		t.Fatalf("err = %v, %d statements queued", err, b.Len())
	}
}

// TestAddWakesTheDispatcherWhenItCommits: the statement that writes the events notifies the
// dispatcher's channel, which hears it at the commit and not before (a rolled-back write wakes
// nobody), whether the events went in the caller's batch (AddTo, both targets) or on their own
// (Add, KAFKA:schd alone).
func TestAddWakesTheDispatcherWhenItCommits(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	heard := d.Listen(t, outbox.Channel)
	writes := map[string]func(pgx.Tx) error{
		"AddTo": func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			if err := outbox.AddTo(b, []outbox.NewEvent{ev(outbox.TargetMsg, "A", 1), ev(outbox.TargetSchd, "A", 1)}, now); err != nil {
				return err
			}
			return tx.SendBatch(t.Context(), b).Close()
		},
		// KAFKA:schd alone, as the republisher writes
		"Add": func(tx pgx.Tx) error {
			return outbox.Add(t.Context(), tx, []outbox.NewEvent{ev(outbox.TargetSchd, "B", 1)}, now)
		},
	}
	for _, name := range []string{"AddTo", "Add"} {
		tx, err := d.Pool.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := writes[name](tx); err != nil {
			t.Fatal(err)
		}
		if heard(200 * time.Millisecond) {
			t.Fatalf("%s: the dispatcher was woken before the commit", name)
		}
		if err := tx.Rollback(t.Context()); err != nil {
			t.Fatal(err)
		}
		if heard(200 * time.Millisecond) {
			t.Fatalf("%s: a rolled-back write woke the dispatcher", name)
		}
		if err := db.WithTx(t.Context(), d.Pool, writes[name]); err != nil {
			t.Fatal(err)
		}
		if !heard(5 * time.Second) {
			t.Fatalf("%s: no notification on %s after the commit", name, outbox.Channel)
		}
	}
}
