package outbox_test

import (
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

func TestByMessage(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	err := outbox.Add(t.Context(), db.Pool, []outbox.NewEvent{
		{Target: outbox.TargetMsg, PartitionKey: "F1", Type: "UPSERT", Version: 1, Payload: []byte(`{"v":1}`), MsgID: 7},
		{Target: outbox.TargetSchd, PartitionKey: "F1", Type: "UPSERT", Version: 1, Payload: []byte(`{"v":1}`), MsgID: 7},
		{Target: outbox.TargetMsg, PartitionKey: "F2", Type: "TOMBSTONE", Version: 3, MsgID: 7},
		{Target: outbox.TargetMsg, PartitionKey: "F1", Type: "UPSERT", Version: 2, Payload: []byte(`{"v":2}`), MsgID: 8},
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := outbox.ByMessage(t.Context(), db.Pool, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0].ID >= rows[1].ID || rows[1].ID >= rows[2].ID {
		t.Fatalf("events of 7 = %+v, want 3 in event_id order", rows)
	}
	if r := rows[0]; r.Target != outbox.TargetMsg || r.State != "PENDING" || r.Payload == nil || *r.Payload != `{"v": 1}` ||
		!r.CreatedAt.Equal(now) || r.SentAt != nil {
		t.Errorf("first event = %+v", r)
	}
	if r := rows[2]; r.Type != "TOMBSTONE" || r.Payload != nil || r.Version != 3 {
		t.Errorf("tombstone = %+v, want no payload", r)
	}
	// A newer state of F1's schedule row moves it to the message that wrote it.
	err = outbox.Add(t.Context(), db.Pool, []outbox.NewEvent{
		{Target: outbox.TargetSchd, PartitionKey: "F1", Type: "UPSERT", Version: 2, Payload: []byte(`{"v":2}`), MsgID: 8},
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	if rows, err = outbox.ByMessage(t.Context(), db.Pool, 7); err != nil || len(rows) != 2 {
		t.Errorf("after the schedule row moved, events of 7 = %+v (%v), want 2", rows, err)
	}
	if rows, err = outbox.ByMessage(t.Context(), db.Pool, 99); err != nil || len(rows) != 0 {
		t.Errorf("events of an unknown message = %+v (%v), want none", rows, err)
	}
}
