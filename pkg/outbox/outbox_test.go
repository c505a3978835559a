package outbox_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func add(t *testing.T, d *pgtest.DB, events ...outbox.NewEvent) {
	t.Helper()
	if err := db.WithTx(t.Context(), d.Pool, func(tx pgx.Tx) error { return outbox.Add(t.Context(), tx, events, now) }); err != nil {
		t.Fatal(err)
	}
}

func ev(target, flid string, v int64) outbox.NewEvent {
	return outbox.NewEvent{Target: target, PartitionKey: flid, Type: outbox.TypeUpsert, Version: v, Payload: []byte(`{}`)}
}

func ids(events []outbox.Event) []int64 {
	out := make([]int64, len(events))
	for i, e := range events {
		out[i] = e.ID
	}
	return out
}

// TestSchdUpsert: one row per FLID; a state not older replaces it with a new event_id, back to
// PENDING with the error cleared; an older one is ignored (R-OUTBOX-4).
// Guards R-INV-14.
func TestSchdUpsert(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	add(t, d, ev(outbox.TargetSchd, "F1", 2))
	first, err := outbox.Pending(t.Context(), d.Pool, outbox.TargetSchd, 10, now)
	if err != nil || len(first) != 1 {
		t.Fatalf("pending = %v, %v", first, err)
	}
	if _, err := outbox.Fail(t.Context(), d.Pool, outbox.Failure{Event: first[0], Reason: "boom", Next: now.Add(time.Hour), MaxAttempts: 1, Now: now}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name    string
		version int64
		replace bool
	}{
		{"older is ignored", 1, false},
		{"same version replaces", 2, true},
		{"newer replaces", 3, true},
		{"older than the new one is ignored", 2, false},
	}
	prev := first[0].ID
	for _, s := range steps {
		add(t, d, ev(outbox.TargetSchd, "F1", s.version))
		var id, version int64
		var state string
		var attempts int
		var lastError *string
		if err := d.Pool.QueryRow(t.Context(), `SELECT event_id, state_version, state, attempts, last_error FROM msg_event
			WHERE target = 'KAFKA:schd'`).Scan(&id, &version, &state, &attempts, &lastError); err != nil {
			t.Fatal(err)
		}
		if replaced := id != prev; replaced != s.replace {
			t.Errorf("%s: replaced = %v", s.name, replaced)
		}
		if s.replace && (version != s.version || state != "PENDING" || attempts != 0 || lastError != nil) {
			t.Errorf("%s: row v%d %s attempts %d error %v, want v%d PENDING, reset", s.name, version, state, attempts, lastError, s.version)
		}
		if id < prev {
			t.Errorf("%s: event_id went back from %d to %d", s.name, prev, id)
		}
		prev = id
	}
}

// TestPendingBlocking: a FLID's events are returned as a prefix up to its first DEAD or
// backing-off event; other FLIDs are unaffected.
// Guards R-INV-13.
func TestPendingBlocking(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	ctx := t.Context()
	add(t, d, ev(outbox.TargetMsg, "A", 1), ev(outbox.TargetMsg, "B", 1), ev(outbox.TargetMsg, "C", 1),
		ev(outbox.TargetMsg, "A", 2), ev(outbox.TargetMsg, "B", 2), ev(outbox.TargetMsg, "C", 2))
	all, err := outbox.Pending(ctx, d.Pool, outbox.TargetMsg, 100, now)
	if err != nil || len(all) != 6 {
		t.Fatalf("pending = %v, %v", all, err)
	}
	a1, b1, c1, a2, b2, c2 := all[0], all[1], all[2], all[3], all[4], all[5]

	// A's head backs off; B's head is DEAD; C's head was sent.
	if _, err := outbox.Fail(ctx, d.Pool, outbox.Failure{Event: a1, Reason: "x", Next: now.Add(time.Minute), MaxAttempts: 5, Now: now}); err != nil {
		t.Fatal(err)
	}
	if dead, err := outbox.Fail(ctx, d.Pool, outbox.Failure{Event: b1, Reason: "x", Next: now, MaxAttempts: 1, Now: now}); err != nil || !dead {
		t.Fatalf("B's head: dead %v, %v", dead, err)
	}
	if n, err := outbox.MarkSent(ctx, d.Pool, []outbox.Event{c1}, now); err != nil || n.Count != 1 {
		t.Fatalf("mark C1: %d, %v", n.Count, err)
	}
	cases := []struct {
		name  string
		at    time.Time
		limit int
		want  []int64
	}{
		{"A backs off, B is dead", now, 100, []int64{c2.ID}},
		{"A is due again", now.Add(time.Minute), 100, []int64{a1.ID, a2.ID, c2.ID}},
		{"limit keeps event order", now.Add(time.Minute), 2, []int64{a1.ID, a2.ID}},
	}
	for _, c := range cases {
		got, err := outbox.Pending(ctx, d.Pool, outbox.TargetMsg, c.limit, c.at)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(got), c.want) {
			t.Errorf("%s: pending %v, want %v", c.name, ids(got), c.want)
		}
	}

	// Requeueing the dead letter releases B, in order.
	if err := outbox.Requeue(ctx, d.Pool, b1.ID, now); err != nil {
		t.Fatal(err)
	}
	if err := outbox.Requeue(ctx, d.Pool, b1.ID, now); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("second requeue: %v, want ErrNotFound", err)
	}
	got, err := outbox.Pending(ctx, d.Pool, outbox.TargetMsg, 100, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{b1.ID, b2.ID, c2.ID}; !slices.Equal(ids(got), want) {
		t.Errorf("after requeue: pending %v, want %v", ids(got), want)
	}
}

// TestMarkSentConditional: only the version read is marked, with sent_at.
func TestMarkSentConditional(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	ctx := context.Background()
	add(t, d, ev(outbox.TargetSchd, "F1", 1))
	read, err := outbox.Pending(ctx, d.Pool, outbox.TargetSchd, 10, now)
	if err != nil {
		t.Fatal(err)
	}
	add(t, d, ev(outbox.TargetSchd, "F1", 2))
	if n, err := outbox.MarkSent(ctx, d.Pool, read, now); err != nil || n.Count != 0 {
		t.Fatalf("marking a replaced row: %d, %v", n.Count, err)
	}
	read, _ = outbox.Pending(ctx, d.Pool, outbox.TargetSchd, 10, now)
	if n, err := outbox.MarkSent(ctx, d.Pool, read, now); err != nil || n.Count != 1 {
		t.Fatalf("marking the current row: %d, %v", n.Count, err)
	}
	var sentAt *time.Time
	if err := d.Pool.QueryRow(ctx, `SELECT sent_at FROM msg_event WHERE state = 'SENT' AND state_version = 2`).Scan(&sentAt); err != nil ||
		sentAt == nil || !sentAt.Equal(now) {
		t.Fatalf("sent_at = %v, %v", sentAt, err)
	}
}

// TestRefuse: a refused event is DEAD at once, whatever its attempts, with the reason and one
// attempt counted; a KAFKA:schd row replaced during the send is left to its new state.
func TestRefuse(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	ctx := t.Context()
	add(t, d, ev(outbox.TargetMsg, "F1", 1), ev(outbox.TargetSchd, "F2", 1))
	msg, err := outbox.Pending(ctx, d.Pool, outbox.TargetMsg, 10, now)
	if err != nil || len(msg) != 1 {
		t.Fatalf("pending msg = %v, %v", msg, err)
	}
	if dead, err := outbox.Refuse(ctx, d.Pool, msg[0], "too large", now); err != nil || !dead {
		t.Fatalf("Refuse = %v, %v; want DEAD", dead, err)
	}
	var state, lastError string
	var attempts int
	var next *time.Time
	if err := d.Pool.QueryRow(ctx, `SELECT state, attempts, last_error, next_attempt_at FROM msg_event WHERE event_id = $1`,
		msg[0].ID).Scan(&state, &attempts, &lastError, &next); err != nil {
		t.Fatal(err)
	}
	if state != "DEAD" || attempts != 1 || lastError != "too large" || next != nil {
		t.Errorf("refused event: %s, %d attempts, %q, next %v", state, attempts, lastError, next)
	}
	if dead, err := outbox.Refuse(ctx, d.Pool, msg[0], "again", now); err != nil || dead {
		t.Errorf("Refuse of a DEAD event = %v, %v; want false, untouched", dead, err)
	}

	schd, err := outbox.Pending(ctx, d.Pool, outbox.TargetSchd, 10, now)
	if err != nil || len(schd) != 1 {
		t.Fatalf("pending schd = %v, %v", schd, err)
	}
	add(t, d, ev(outbox.TargetSchd, "F2", 2)) // replaced while the old state was being sent
	if dead, err := outbox.Refuse(ctx, d.Pool, schd[0], "too large", now); err != nil || dead {
		t.Fatalf("Refuse of a replaced state = %v, %v; want false", dead, err)
	}
	if again, err := outbox.Pending(ctx, d.Pool, outbox.TargetSchd, 10, now); err != nil || len(again) != 1 || again[0].Version != 2 {
		t.Errorf("after the refusal of the replaced state, pending = %v, %v; want version 2", again, err)
	}
}

// TestMarkSentFirstDelivery: only a message's first acknowledged event ends its end-to-end
// latency, with the times it was received and enqueued; later events of the same message, in
// the same call or a later one, and events of messages without a proc_state row do not.
func TestMarkSentFirstDelivery(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	ctx := t.Context()
	received, enqueued := now.Add(-time.Minute), now.Add(-50*time.Second)
	for _, id := range []int64{1, 2} {
		if _, err := d.Pool.Exec(ctx, `INSERT INTO proc_state (msg_id, state, received_at, enqueued_at, updated_at)
			VALUES ($1, 'PENDING', $2, $3, $3)`, id, received, enqueued); err != nil {
			t.Fatal(err)
		}
	}
	withMsg := func(e outbox.NewEvent, msg int64) outbox.NewEvent { e.MsgID = msg; return e }
	add(t, d, withMsg(ev(outbox.TargetMsg, "F1", 1), 1), withMsg(ev(outbox.TargetMsg, "F2", 1), 1),
		withMsg(ev(outbox.TargetMsg, "F1", 2), 2), withMsg(ev(outbox.TargetMsg, "F3", 1), 9))
	read, err := outbox.Pending(ctx, d.Pool, outbox.TargetMsg, 10, now)
	if err != nil || len(read) != 4 {
		t.Fatalf("pending: %d, %v", len(read), err)
	}
	// Message 1's two events in one call, message 2's first event alone, then message 9's
	// (no proc_state row: retention removed it).
	sent, err := outbox.MarkSent(ctx, d.Pool, read[:2], now)
	if err != nil || sent.Count != 2 {
		t.Fatalf("mark message 1: %+v, %v", sent, err)
	}
	if len(sent.First) != 1 || sent.First[0].MsgID != 1 || !sent.First[0].EnqueuedAt.Equal(enqueued) ||
		sent.First[0].ReceivedAt == nil || !sent.First[0].ReceivedAt.Equal(received) {
		t.Errorf("first deliveries %+v, want message 1 once with its received and enqueued times", sent.First)
	}
	if sent, err = outbox.MarkSent(ctx, d.Pool, read[2:], now); err != nil || sent.Count != 2 {
		t.Fatalf("mark the rest: %+v, %v", sent, err)
	}
	if len(sent.First) != 1 || sent.First[0].MsgID != 2 {
		t.Errorf("first deliveries %+v, want message 2 only", sent.First)
	}
	// A message with an event already SENT gets no second observation.
	add(t, d, withMsg(ev(outbox.TargetMsg, "F1", 3), 1))
	read, _ = outbox.Pending(ctx, d.Pool, outbox.TargetMsg, 10, now)
	if sent, err = outbox.MarkSent(ctx, d.Pool, read, now); err != nil || sent.Count != 1 || len(sent.First) != 0 {
		t.Errorf("a later event of message 1: %+v, %v; want it marked without a first delivery", sent, err)
	}
}
