package outbox_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/outbox"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// deadFixture writes events of both targets and makes some of them DEAD; it returns the
// event IDs by name.
func deadFixture(t *testing.T, d *pgtest.DB) map[string]int64 {
	t.Helper()
	withMsg := func(e outbox.NewEvent, msgID int64) outbox.NewEvent { e.MsgID = msgID; return e }
	add(t, d,
		withMsg(ev(outbox.TargetMsg, "A", 1), 10),  // msgA1: DEAD
		withMsg(ev(outbox.TargetMsg, "A", 2), 11),  // msgA2: PENDING behind it
		withMsg(ev(outbox.TargetMsg, "B", 1), 11),  // msgB1: DEAD
		withMsg(ev(outbox.TargetMsg, "C", 1), 12),  // msgC1: SENT
		withMsg(ev(outbox.TargetSchd, "A", 2), 11), // schdA: DEAD
		withMsg(ev(outbox.TargetSchd, "B", 1), 11), // schdB: PENDING
	)
	rows, err := d.Pool.Query(t.Context(), `SELECT event_id, target, partition_key, state_version FROM msg_event`)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]int64{}
	var id, v int64
	var target, flid string
	if _, err := pgx.ForEachRow(rows, []any{&id, &target, &flid, &v}, func() error {
		name := "schd" + flid
		if target == outbox.TargetMsg {
			name = "msg" + flid + string(rune('0'+v))
		}
		byName[name] = id
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	d.Exec(t, `UPDATE msg_event SET state = 'DEAD', attempts = 5, last_error = 'broker down'
		WHERE event_id = ANY($1)`, []int64{byName["msgA1"], byName["msgB1"], byName["schdA"]})
	d.Exec(t, `UPDATE msg_event SET state = 'SENT', sent_at = now() WHERE event_id = $1`, byName["msgC1"])
	return byName
}

func deadIDs(ds []outbox.Dead) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

func TestDeadEvents(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	id := deadFixture(t, d)

	tests := []struct {
		name  string
		f     outbox.DeadFilter
		limit int
		want  []int64
	}{
		{"target msg", outbox.DeadFilter{Target: outbox.TargetMsg}, 10, []int64{id["msgA1"], id["msgB1"]}},
		{"target schd", outbox.DeadFilter{Target: outbox.TargetSchd}, 10, []int64{id["schdA"]}},
		{"target and FLID", outbox.DeadFilter{Target: outbox.TargetMsg, PartitionKey: "B"}, 10, []int64{id["msgB1"]}},
		{"target and message", outbox.DeadFilter{Target: outbox.TargetMsg, MsgID: 11}, 10, []int64{id["msgB1"]}},
		{"FLID without DEAD events", outbox.DeadFilter{Target: outbox.TargetMsg, PartitionKey: "C"}, 10, nil},
		{"IDs: only the DEAD ones", outbox.DeadFilter{EventIDs: []int64{id["msgA2"], id["msgC1"], id["schdA"], id["schdB"], 999}}, 10,
			[]int64{id["schdA"]}},
		{"IDs and target combine", outbox.DeadFilter{EventIDs: []int64{id["msgA1"], id["schdA"]}, Target: outbox.TargetSchd}, 10,
			[]int64{id["schdA"]}},
		{"limit", outbox.DeadFilter{Target: outbox.TargetMsg}, 1, []int64{id["msgA1"]}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := outbox.DeadEvents(t.Context(), d.Pool, tc.f, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if ids := deadIDs(got); !slices.Equal(ids, tc.want) {
				t.Errorf("DeadEvents = %v, want %v", ids, tc.want)
			}
		})
	}

	t.Run("fields", func(t *testing.T) {
		got, err := outbox.DeadEvents(t.Context(), d.Pool, outbox.DeadFilter{EventIDs: []int64{id["msgA1"]}}, 1)
		if err != nil || len(got) != 1 {
			t.Fatalf("DeadEvents = %v, %v", got, err)
		}
		e := got[0]
		if e.Target != outbox.TargetMsg || e.PartitionKey != "A" || e.Version != 1 || e.MsgID == nil || *e.MsgID != 10 ||
			e.Attempts != 5 || e.LastError == nil || *e.LastError != "broker down" || e.Type != outbox.TypeUpsert || !e.DeadAt.Equal(now) {
			t.Errorf("dead event = %+v", e)
		}
	})
	t.Run("refused without IDs or target", func(t *testing.T) {
		if _, err := outbox.DeadEvents(t.Context(), d.Pool, outbox.DeadFilter{PartitionKey: "A"}, 10); !errors.Is(err, outbox.ErrDeadNoFilter) {
			t.Errorf("DeadEvents(FLID only) = %v, want ErrDeadNoFilter", err)
		}
		if _, err := outbox.DeadEvents(t.Context(), d.Pool, outbox.DeadFilter{Target: outbox.TargetMsg}, 0); err == nil {
			t.Error("DeadEvents(limit 0) succeeded, want an error")
		}
	})
}

// TestDeadEventsForUpdate: the selected rows stay locked until the transaction ends, so the
// pump's schedule upsert cannot replace a dead row between the selection and the requeue.
func TestDeadEventsForUpdate(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	id := deadFixture(t, d)
	ctx := t.Context()
	err := db.WithTx(ctx, d.Pool, func(tx pgx.Tx) error {
		got, err := outbox.DeadEvents(ctx, tx, outbox.DeadFilter{Target: outbox.TargetSchd, ForUpdate: true}, 10)
		if err != nil {
			return err
		}
		if ids := deadIDs(got); !slices.Equal(ids, []int64{id["schdA"]}) {
			t.Errorf("locked selection = %v, want [schdA]", ids)
		}
		// Another session's write of the row waits on the lock (here: gives up at once).
		other, err := d.Pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = other.Rollback(context.WithoutCancel(ctx)) }()
		if _, err := other.Exec(ctx, `SET LOCAL lock_timeout = '50ms'`); err != nil {
			return err
		}
		_, err = other.Exec(ctx, `UPDATE msg_event SET updated_at = now() WHERE event_id = $1`, id["schdA"])
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
			t.Errorf("update of the locked row = %v, want lock_not_available", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
