package queue_test

import (
	"errors"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/pgtest"
	"github.com/msgexchange/msgexchange/pkg/queue"
)

// applied_at is written only on an unfinished message and survives a replay.
func TestMarkAppliedKeptByReplay(t *testing.T) {
	t.Parallel()
	d := pgtest.New(t)
	now := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	if _, err := queue.Enqueue(t.Context(), d.Pool, []queue.NewMessage{{MsgID: 1}, {MsgID: 2}}, now); err != nil {
		t.Fatal(err)
	}
	if err := queue.MarkApplied(t.Context(), d.Pool, 1, now); err != nil {
		t.Fatal(err)
	}
	if err := queue.Finish(t.Context(), d.Pool, queue.Outcome{MsgID: 2, State: queue.Skipped, Started: now, Now: now}); err != nil {
		t.Fatal(err)
	}
	if err := queue.MarkApplied(t.Context(), d.Pool, 2, now); !errors.Is(err, queue.ErrNotUnfinished) {
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
	if m2, _ := queue.Get(t.Context(), d.Pool, 2); m2.AppliedAt != nil {
		t.Errorf("message 2 has applied_at %v", m2.AppliedAt)
	}
}
