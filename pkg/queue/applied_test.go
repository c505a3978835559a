package queue_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// applied_at is written only on an unfinished message and survives a replay.
func TestMarkAppliedKeptByReplay(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	now := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	if _, err := queue.Enqueue(t.Context(), d.Pool, []queue.NewMessage{{MsgID: 1}, {MsgID: 2}}, now); err != nil {
		t.Fatal(err)
	}
	mark := func(id int64) error {
		return db.WithTx(t.Context(), d.Pool, func(tx pgx.Tx) error { return queue.MarkApplied(t.Context(), tx, id, now) })
	}
	if err := mark(1); err != nil {
		t.Fatal(err)
	}
	if err := queue.Finish(t.Context(), d.Pool, queue.Outcome{MsgID: 2, State: queue.Skipped, Started: now, Now: now}); err != nil {
		t.Fatal(err)
	}
	if err := mark(2); !errors.Is(err, queue.ErrNotUnfinished) {
		t.Fatalf("MarkApplied on a terminal message = %v, want ErrNotUnfinished", err)
	}
	if err := queue.Fail(t.Context(), d.Pool, queue.Outcome{MsgID: 1, Class: queue.Infra, Reason: "redis down", Next: now, Started: now, Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := queue.Exhaust(t.Context(), d.Pool, 1, 1, now); err != nil {
		t.Fatal(err)
	}
	res, err := queue.Replay(t.Context(), d.Pool, queue.ReplayRequest{MsgIDs: []int64{1}}, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Replayed) != 1 || !res.Replayed[0].Applied {
		t.Fatalf("replayed %+v, want message 1 flagged applied", res.Replayed)
	}
	m, err := queue.Get(t.Context(), d.Pool, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.State != queue.Pending || m.AppliedAt == nil || !m.AppliedAt.Equal(now) {
		t.Errorf("after replay: %s applied_at %v", m.State, m.AppliedAt)
	}
	// Unfinished again, but applied: a run that would apply it again works from a stale view.
	if err := mark(1); !errors.Is(err, queue.ErrNotUnfinished) {
		t.Fatalf("MarkApplied on an applied message = %v, want ErrNotUnfinished", err)
	}
	if m2, _ := queue.Get(t.Context(), d.Pool, 2); m2.AppliedAt != nil {
		t.Errorf("message 2 has applied_at %v", m2.AppliedAt)
	}
}

// Deferred to a pipelined transaction's COMMIT, MarkApplied on a message that is no longer
// unfinished stops that COMMIT: nothing of the transaction is committed, although the server
// received the COMMIT in the same round trip.
func TestMarkAppliedStopsThePipelinedCommit(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	ctx := t.Context()
	now := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	if _, err := queue.Enqueue(ctx, d.Pool, []queue.NewMessage{{MsgID: 1}, {MsgID: 2}}, now); err != nil {
		t.Fatal(err)
	}
	if err := queue.Finish(ctx, d.Pool, queue.Outcome{MsgID: 2, State: queue.Skipped, Started: now, Now: now}); err != nil {
		t.Fatal(err)
	}
	c, err := d.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	for _, tc := range []struct {
		msg  int64
		want error
	}{{2, queue.ErrNotUnfinished}, {1, nil}} {
		err := db.WithTx(ctx, db.Pipelined(c.Conn(), nil), func(tx pgx.Tx) error {
			// a write of ① before the mark, as the processor's
			if _, err := tx.Exec(ctx, `UPDATE proc_state SET last_error = 'written by ①' WHERE msg_id = $1`, tc.msg); err != nil {
				return err
			}
			return queue.MarkApplied(ctx, tx, tc.msg, now)
		})
		if !errors.Is(err, tc.want) && err != tc.want {
			t.Fatalf("message %d: %v, want %v", tc.msg, err, tc.want)
		}
		m, err := queue.Get(ctx, d.Pool, tc.msg)
		if err != nil {
			t.Fatal(err)
		}
		written := m.LastError != nil && *m.LastError == "written by ①"
		if committed := tc.want == nil; written != committed || (m.AppliedAt != nil) != committed {
			t.Errorf("message %d: ①'s write committed %v, applied_at %v; want committed %v", tc.msg, written, m.AppliedAt, committed)
		}
	}
	if status := c.Conn().PgConn().TxStatus(); status != 'I' {
		t.Errorf("connection left in transaction status %c", status)
	}
}
