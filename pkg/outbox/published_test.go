package outbox_test

import (
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// After a restore the unsent events Kafka already holds are SENT, the rest stay to be sent,
// and the sequence moves past the largest published ID (R-RESTORE-1).
// CatchUpSchd takes its FLIDs a statement of batch at a time.
func TestCatchUp(t *testing.T) {
	d := pgtest.New(t)
	ctx := t.Context()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if err := outbox.Add(ctx, d.Pool, []outbox.NewEvent{
		{Target: outbox.TargetMsg, PartitionKey: "A", Type: outbox.TypeUpsert, Version: 1, Payload: []byte("{}"), MsgID: 1},
		{Target: outbox.TargetMsg, PartitionKey: "A", Type: outbox.TypeUpsert, Version: 2, Payload: []byte("{}"), MsgID: 2},
		{Target: outbox.TargetSchd, PartitionKey: "A", Type: outbox.TypeUpsert, Version: 2, Payload: []byte("{}"), MsgID: 2},
		{Target: outbox.TargetSchd, PartitionKey: "B", Type: outbox.TypeUpsert, Version: 5, Payload: []byte("{}"), MsgID: 3},
	}, now); err != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{}
	rows, err := d.Pool.Query(ctx, `SELECT target || ' ' || partition_key || ' v' || state_version, event_id FROM msg_event`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		var id int64
		if err := rows.Scan(&k, &id); err != nil {
			t.Fatal(err)
		}
		ids[k] = id
	}
	rows.Close()
	// Kafka holds A's first msg event (and, under a reused ID, another FLID's), and schd A at
	// v3 from the lost timeline, B only at v4.
	msg := map[int64]outbox.Published{ids["KAFKA:msg A v1"]: {FLID: "A", Version: 1}, ids["KAFKA:msg A v2"]: {FLID: "Z", Version: 2}}
	var c outbox.Caught
	if c.Msg, err = outbox.CatchUpMsg(ctx, d.Pool, msg, now); err != nil {
		t.Fatal(err)
	}
	if c.Schd, err = outbox.CatchUpSchd(ctx, d.Pool, map[string]int64{"A": 3, "B": 4, "C": 1}, 1, now); err != nil {
		t.Fatal(err)
	}
	if c.Sequence, err = outbox.MoveSequencePast(ctx, d.Pool, 900); err != nil {
		t.Fatal(err)
	}
	if c.Msg != 1 || c.Schd != 1 || c.Sequence != 901 {
		t.Errorf("caught up %+v, want 1 msg, 1 schd, next event ID 901", c)
	}
	var sent []string
	if err := d.Pool.QueryRow(ctx, `SELECT array_agg(target || ' ' || partition_key || ' v' || state_version ORDER BY event_id)
		FROM msg_event WHERE state = 'SENT'`).Scan(&sent); err != nil {
		t.Fatal(err)
	}
	if len(sent) != 2 || sent[0] != "KAFKA:msg A v1" || sent[1] != "KAFKA:schd A v2" {
		t.Errorf("SENT %v, want A's first msg event and its schd row", sent)
	}
	var next int64
	if err := d.Pool.QueryRow(ctx, `SELECT nextval('msg_event_id_seq')`).Scan(&next); err != nil || next != 901 {
		t.Errorf("next event ID %d (%v), want 901", next, err)
	}
	if next, err := outbox.MoveSequencePast(ctx, d.Pool, 10); err != nil || next != 902 {
		t.Errorf("a sequence already past the largest ID: next %d (%v), want it left (next 902)", next, err)
	}
}
