package queue_test

import (
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

func TestAttemptHistory(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	enqueue := func(t *testing.T, db *pgtest.DB, id int64) {
		t.Helper()
		if _, err := queue.Enqueue(t.Context(), db.Pool, []queue.NewMessage{{MsgID: id}}, t0); err != nil {
			t.Fatal(err)
		}
	}
	history := func(t *testing.T, db *pgtest.DB, id int64) []queue.Attempt {
		t.Helper()
		a, err := queue.Attempts(t.Context(), db.Pool, id)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}

	t.Run("a first attempt that ends the message writes no row", func(t *testing.T) {
		t.Parallel()
		db := pgtest.New(t)
		enqueue(t, db, 1)
		if err := queue.Finish(t.Context(), db.Pool, queue.Outcome{MsgID: 1, State: queue.Succeeded, Started: at(1), Now: at(2)}); err != nil {
			t.Fatal(err)
		}
		if a := history(t, db, 1); len(a) != 0 {
			t.Errorf("history = %+v, want none", a)
		}
	})
	t.Run("failures, then the attempt that ends it", func(t *testing.T) {
		t.Parallel()
		db := pgtest.New(t)
		enqueue(t, db, 1)
		if err := queue.Fail(t.Context(), db.Pool, queue.Outcome{MsgID: 1, Class: queue.CodecError, Reason: "bad date", Next: at(10), Started: at(1), Now: at(2)}); err != nil {
			t.Fatal(err)
		}
		if err := queue.Fail(t.Context(), db.Pool, queue.Outcome{MsgID: 1, Class: queue.Infra, Reason: "redis: refused", Next: at(20), Started: at(11), Now: at(12)}); err != nil {
			t.Fatal(err)
		}
		if err := queue.Finish(t.Context(), db.Pool, queue.Outcome{MsgID: 1, State: queue.Succeeded, Started: at(21), Now: at(23)}); err != nil {
			t.Fatal(err)
		}
		a := history(t, db, 1)
		if len(a) != 3 {
			t.Fatalf("history = %+v, want 3 attempts", a)
		}
		if a[0].No != 1 || a[0].Outcome != queue.Failed || *a[0].ErrorClass != queue.CodecError || *a[0].Error != "bad date" ||
			!a[0].Started.Equal(at(1)) || !a[0].Ended.Equal(at(2)) {
			t.Errorf("attempt 1 = %+v", a[0])
		}
		if a[1].No != 2 || *a[1].ErrorClass != queue.Infra {
			t.Errorf("attempt 2 = %+v", a[1])
		}
		if a[2].No != 3 || a[2].Outcome != queue.Succeeded || a[2].ErrorClass != nil || !a[2].Started.Equal(at(21)) {
			t.Errorf("attempt 3 = %+v", a[2])
		}
	})
	t.Run("bounded to the last AttemptHistory", func(t *testing.T) {
		t.Parallel()
		db := pgtest.New(t)
		enqueue(t, db, 1)
		n := queue.AttemptHistory + 3
		for i := range n {
			if err := queue.Fail(t.Context(), db.Pool, queue.Outcome{MsgID: 1, Class: queue.Infra, Reason: "try", Next: at(i + 1), Started: at(i), Now: at(i)}); err != nil {
				t.Fatal(err)
			}
		}
		a := history(t, db, 1)
		if len(a) != queue.AttemptHistory || a[0].No != n-queue.AttemptHistory+1 || a[len(a)-1].No != n {
			t.Errorf("history holds %d attempts from %d, want the last %d up to %d", len(a), a[0].No, queue.AttemptHistory, n)
		}
	})
	t.Run("a failure of a finished message writes nothing", func(t *testing.T) {
		t.Parallel()
		db := pgtest.New(t)
		enqueue(t, db, 1)
		if err := queue.Finish(t.Context(), db.Pool, queue.Outcome{MsgID: 1, State: queue.Skipped, Class: queue.Unsupported, Reason: "x", Started: at(1), Now: at(2)}); err != nil {
			t.Fatal(err)
		}
		if err := queue.Fail(t.Context(), db.Pool, queue.Outcome{MsgID: 1, Class: queue.Infra, Reason: "late", Next: at(5), Started: at(3), Now: at(4)}); err == nil {
			t.Fatal("Fail of a SKIPPED message succeeded")
		}
		if a := history(t, db, 1); len(a) != 0 {
			t.Errorf("history = %+v, want none", a)
		}
	})
	t.Run("a replay keeps the ended first attempt, and the history goes with the row", func(t *testing.T) {
		t.Parallel()
		db := pgtest.New(t)
		enqueue(t, db, 1)
		if err := queue.Finish(t.Context(), db.Pool, queue.Outcome{MsgID: 1, State: queue.Skipped, Class: queue.Unsupported, Reason: "unsupported: RSTA", Started: at(1), Now: at(2)}); err != nil {
			t.Fatal(err)
		}
		if _, err := queue.Replay(t.Context(), db.Pool, queue.ReplayRequest{MsgIDs: []int64{1}}, at(3)); err != nil {
			t.Fatal(err)
		}
		if err := queue.Finish(t.Context(), db.Pool, queue.Outcome{MsgID: 1, State: queue.Succeeded, Started: at(4), Now: at(5)}); err != nil {
			t.Fatal(err)
		}
		a := history(t, db, 1)
		if len(a) != 2 || a[0].Outcome != queue.Skipped || *a[0].Error != "unsupported: RSTA" || a[1].No != 2 ||
			a[1].Outcome != queue.Succeeded || !a[1].Started.Equal(at(4)) {
			t.Fatalf("history = %+v, want the SKIPPED first attempt and the replayed one", a)
		}
		db.Exec(t, `DELETE FROM proc_state WHERE msg_id = 1`)
		if a := history(t, db, 1); len(a) != 0 {
			t.Errorf("after the row was deleted the history = %+v", a)
		}
	})
}
