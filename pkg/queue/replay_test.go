package queue_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

var replayNow = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// replayRow inserts a row in a shape the pump leaves behind. Terminal rows get finished_at and
// their backfill intent; marked rows get backfill_at too.
func replayRow(t *testing.T, db *pgtest.DB, id int64, state queue.State, class queue.ErrorClass, marked bool) {
	t.Helper()
	enq := replayNow.Add(-time.Hour)
	var finished, intent, backfillAt *time.Time
	if state.Terminal() {
		finished, intent = &enq, &enq
		if marked {
			backfillAt, intent = &enq, nil
		}
	}
	var next *time.Time
	if state == queue.Failed {
		n := replayNow.Add(time.Hour)
		next = &n
	}
	db.Exec(t, `INSERT INTO proc_state (msg_id, state, error_class, last_error, attempts, next_attempt_at, identity_key,
		enqueued_at, processing_started_at, finished_at, backfill_next_at, backfill_at, updated_at)
		VALUES ($1::bigint, $2, nullif($3, ''), 'boom', 3, $4, 'AODB|FLOP|ESTT|' || $1::bigint, $5, $5, $6, $7, $8, $5)`,
		id, state, string(class), next, enq, finished, intent, backfillAt)
}

func ids(rs []queue.Replayed) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.MsgID
	}
	return out
}

func TestReplay(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) *pgtest.DB {
		db := pgtest.New(t)
		replayRow(t, db, 1, queue.Dead, queue.Exhausted, true)
		replayRow(t, db, 2, queue.Failed, queue.Infra, false)
		replayRow(t, db, 3, queue.Dead, queue.Malformed, false)
		replayRow(t, db, 4, queue.Dead, queue.Protocol, false)
		replayRow(t, db, 5, queue.Succeeded, "", true)
		replayRow(t, db, 6, queue.Failed, queue.CodecError, false)
		replayRow(t, db, 7, queue.Skipped, queue.Unsupported, false)
		replayRow(t, db, 8, queue.Dead, queue.Exhausted, false)
		replayRow(t, db, 9, queue.Skipped, "", false) // a duplicate: final
		return db
	}

	t.Run("by ids: whitelist, MALFORMED ignored and reported, the rest reported", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		res, err := queue.Replay(t.Context(), db.Pool, queue.ReplayRequest{MsgIDs: []int64{1, 2, 3, 4, 5, 7, 9, 99}}, replayNow)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(res.Replayed); !slices.Equal(got, []int64{1, 2, 7}) {
			t.Errorf("replayed %v, want [1 2 7] (SKIPPED(UNSUPPORTED) included, R-REPLAY-1)", got)
		}
		if !slices.Equal(res.Malformed, []int64{3}) {
			t.Errorf("malformed %v, want [3]", res.Malformed)
		}
		if !slices.Equal(res.NotReplayable, []int64{4, 5, 9, 99}) {
			t.Errorf("not replayable %v, want [4 5 9 99]", res.NotReplayable)
		}
		if r := res.Replayed[2]; r.State != queue.Skipped || r.Class != queue.Unsupported {
			t.Errorf("replayed[2] = %+v, want the SKIPPED(UNSUPPORTED) row", r)
		}
		if !res.Replayed[0].Marked || res.Replayed[0].State != queue.Dead || res.Replayed[0].Class != queue.Exhausted {
			t.Errorf("replayed[0] = %+v, want the DEAD(EXHAUSTED) row reported as already marked", res.Replayed[0])
		}
		for _, id := range []int64{1, 2, 7} {
			m, err := queue.Get(t.Context(), db.Pool, id)
			if err != nil {
				t.Fatal(err)
			}
			if m.State != queue.Pending || m.Attempts != 0 || m.NextAttemptAt != nil {
				t.Errorf("%d: %s attempts %d next %v, want PENDING, 0, NULL", id, m.State, m.Attempts, m.NextAttemptAt)
			}
			if m.ErrorClass == nil || m.LastError == nil || *m.LastError != "boom" || m.IdentityKey == nil {
				t.Errorf("%d: class %v error %v identity %v, want all kept", id, m.ErrorClass, m.LastError, m.IdentityKey)
			}
			if m.FinishedAt != nil || m.BackfillNextAt != nil || m.BackfillAt != nil {
				t.Errorf("%d: terminal fields left on an unfinished row: %v %v %v", id, m.FinishedAt, m.BackfillNextAt, m.BackfillAt)
			}
			if m.ProcessingStartedAt == nil || !m.UpdatedAt.Equal(replayNow) {
				t.Errorf("%d: started %v updated %v", id, m.ProcessingStartedAt, m.UpdatedAt)
			}
		}
		for _, id := range []int64{3, 4, 5, 9} {
			if m, _ := queue.Get(t.Context(), db.Pool, id); m.State == queue.Pending {
				t.Errorf("%d was replayed", id)
			}
		}
	})

	t.Run("by class", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		res, err := queue.Replay(t.Context(), db.Pool, queue.ReplayRequest{Class: queue.Exhausted}, replayNow)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(res.Replayed); !slices.Equal(got, []int64{1, 8}) {
			t.Errorf("replayed %v, want [1 8]", got)
		}
		res, err = queue.Replay(t.Context(), db.Pool, queue.ReplayRequest{Class: queue.Unsupported}, replayNow)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(res.Replayed); !slices.Equal(got, []int64{7}) {
			t.Errorf("UNSUPPORTED replayed %v, want the SKIPPED row [7]", got)
		}
		res, err = queue.Replay(t.Context(), db.Pool, queue.ReplayRequest{Class: queue.Malformed}, replayNow)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Replayed) != 0 || !slices.Equal(res.Malformed, []int64{3}) {
			t.Errorf("MALFORMED selection: replayed %v malformed %v", ids(res.Replayed), res.Malformed)
		}
	})

	t.Run("by range with a limit", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		res, err := queue.Replay(t.Context(), db.Pool, queue.ReplayRequest{FromID: 2, ToID: 8, Limit: 2}, replayNow)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(res.Replayed); !slices.Equal(got, []int64{2, 6}) || !res.More {
			t.Errorf("replayed %v more %v, want [2 6] and more", got, res.More)
		}
		if !slices.Equal(res.Malformed, []int64{3}) || !slices.Equal(res.NotReplayable, []int64{4}) {
			t.Errorf("malformed %v not replayable %v, want [3] [4] (terminal successes are not listed)", res.Malformed, res.NotReplayable)
		}
		res, err = queue.Replay(t.Context(), db.Pool, queue.ReplayRequest{FromID: 2, ToID: 8, Limit: 2}, replayNow)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(res.Replayed); !slices.Equal(got, []int64{7, 8}) || res.More {
			t.Errorf("second round replayed %v more %v, want [7 8]", got, res.More)
		}
	})

	t.Run("dry run changes nothing and sends no wake-up", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		listen := db.Listen(t, queue.Channel)
		res, err := queue.Replay(t.Context(), db.Pool, queue.ReplayRequest{MsgIDs: []int64{1, 2, 3}, DryRun: true}, replayNow)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(res.Replayed); !slices.Equal(got, []int64{1, 2}) || !slices.Equal(res.Malformed, []int64{3}) {
			t.Errorf("dry run reported %v / %v", got, res.Malformed)
		}
		for _, id := range []int64{1, 2} {
			if m, _ := queue.Get(t.Context(), db.Pool, id); m.State == queue.Pending {
				t.Errorf("dry run replayed %d", id)
			}
		}
		if listen(500 * time.Millisecond) {
			t.Error("a dry run notified the pump")
		}
	})

	t.Run("wakes the pump", func(t *testing.T) {
		t.Parallel()
		db := setup(t)
		listen := db.Listen(t, queue.Channel)
		if _, err := queue.Replay(t.Context(), db.Pool, queue.ReplayRequest{MsgIDs: []int64{2}}, replayNow); err != nil {
			t.Fatal(err)
		}
		if !listen(30 * time.Second) {
			t.Error("no notification on the queue channel after a replay")
		}
	})

	t.Run("needs a selector", func(t *testing.T) {
		t.Parallel()
		db := pgtest.New(t)
		if _, err := queue.Replay(t.Context(), db.Pool, queue.ReplayRequest{}, replayNow); !errors.Is(err, queue.ErrReplayNoFilter) {
			t.Errorf("err = %v, want ErrReplayNoFilter", err)
		}
	})
}

// waitBlocked waits until the backend pid waits for a lock: the deterministic way to know a
// statement has reached the gate.
func waitBlocked(t *testing.T, db *pgtest.DB, pid uint32) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting bool
		if err := db.Pool.QueryRow(t.Context(), `SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1`,
			int32(pid)).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend %d never waited for the row lock", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func dedicated(t *testing.T, db *pgtest.DB) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// The gate of R-GATE-1: "marked DEAD and backfilled, then replayed to
// PENDING" cannot interleave. A replay that arrives while the backfill holds the row (between
// "still terminal?" and backfill_at) waits, then replays a row whose marker is recorded, and
// reports it as already marked.
// Guards R-INV-11.
func TestReplayWaitsForBackfillGate(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	replayRow(t, db, 1, queue.Dead, queue.Exhausted, false)

	backfill, err := db.Pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = backfill.Rollback(context.Background()) }()
	if _, ok, err := queue.LockForBackfill(t.Context(), backfill, 1); err != nil || !ok {
		t.Fatalf("lock for backfill: ok %v err %v", ok, err)
	}

	replayConn := dedicated(t, db)
	done := make(chan error, 1)
	var res queue.ReplayResult
	go func() {
		var err error
		res, err = queue.Replay(context.Background(), replayConn, queue.ReplayRequest{MsgIDs: []int64{1}}, replayNow)
		done <- err
	}()
	waitBlocked(t, db, replayConn.PgConn().PID())
	// The marker is written while the row is held; then backfill_at.
	if err := queue.Backfilled(t.Context(), backfill, replayNow, 1); err != nil {
		t.Fatalf("backfilled under the gate: %v", err)
	}
	if err := backfill.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("replay: %v", err)
	}
	if len(res.Replayed) != 1 || !res.Replayed[0].Marked {
		t.Fatalf("replay result %+v, want message 1 replayed and reported as already marked", res)
	}
	m, err := queue.Get(t.Context(), db.Pool, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.State != queue.Pending || m.BackfillAt != nil || m.BackfillNextAt != nil {
		t.Errorf("after the replay: %s backfill_at %v intent %v", m.State, m.BackfillAt, m.BackfillNextAt)
	}
}

// The other order: a replay holding the row makes the backfill's re-check fail, so no marker
// is written for a message that is unfinished again.
// Guards R-INV-11.
func TestBackfillWaitsForReplay(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	replayRow(t, db, 1, queue.Dead, queue.Exhausted, false)
	replay, err := db.Pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = replay.Rollback(context.Background()) }()
	if _, err := replay.Exec(t.Context(), `SELECT 1 FROM proc_state WHERE msg_id = 1 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	if _, err := replay.Exec(t.Context(), `UPDATE proc_state SET state = 'PENDING', attempts = 0, finished_at = NULL,
		backfill_next_at = NULL WHERE msg_id = 1`); err != nil {
		t.Fatal(err)
	}
	backfillConn := dedicated(t, db)
	type locked struct {
		ok  bool
		err error
	}
	done := make(chan locked, 1)
	go func() {
		var l locked
		l.err = pgx.BeginFunc(context.Background(), backfillConn, func(tx pgx.Tx) error {
			_, l.ok, l.err = queue.LockForBackfill(context.Background(), tx, 1)
			return l.err
		})
		done <- l
	}()
	waitBlocked(t, db, backfillConn.PgConn().PID())
	if err := replay.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if l := <-done; l.err != nil || l.ok {
		t.Fatalf("backfill after the replay: ok %v err %v, want the row no longer owing a marker", l.ok, l.err)
	}
}

// The exhaustion path goes through the same gate: an exhaustion that meets a replay holding
// the row re-checks on the replayed version and does nothing.
// Guards R-INV-11.
func TestExhaustWaitsForReplay(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	replayRow(t, db, 1, queue.Failed, queue.Infra, false)
	db.Exec(t, `UPDATE proc_state SET attempts = 5 WHERE msg_id = 1`)
	replay, err := db.Pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = replay.Rollback(context.Background()) }()
	if _, err := replay.Exec(t.Context(), `UPDATE proc_state SET state = 'PENDING', attempts = 0, next_attempt_at = NULL
		WHERE msg_id IN (SELECT msg_id FROM proc_state WHERE msg_id = 1 FOR UPDATE)`); err != nil {
		t.Fatal(err)
	}
	pumpConn := dedicated(t, db)
	type result struct {
		changed bool
		err     error
	}
	done := make(chan result, 1)
	go func() {
		changed, err := queue.Exhaust(context.Background(), pumpConn, 1, 5, replayNow)
		done <- result{changed, err}
	}()
	waitBlocked(t, db, pumpConn.PgConn().PID())
	if err := replay.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.changed {
		t.Fatalf("exhaust after a replay: changed %v err %v, want no change", r.changed, r.err)
	}
	m, err := queue.Get(t.Context(), db.Pool, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.State != queue.Pending {
		t.Errorf("state %s, want the replay's PENDING", m.State)
	}
}

// A race of the three actors on one message, many times: the pump exhausting it, the backfill
// marking it, a replay putting it back. Whatever the interleaving, no statement may fail (a
// marker recorded on an unfinished row would violate the proc_state CHECK) and the row ends in
// a consistent shape.
// Guards R-INV-11.
func TestGateRace(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	conns := [3]*pgx.Conn{dedicated(t, db), dedicated(t, db), dedicated(t, db)}
	for round := range 40 {
		id := int64(round + 1)
		replayRow(t, db, id, queue.Failed, queue.Infra, false)
		db.Exec(t, `UPDATE proc_state SET attempts = 5 WHERE msg_id = $1`, id)
		errs := make(chan error, 3)
		go func() {
			_, err := queue.Exhaust(context.Background(), conns[0], id, 5, replayNow)
			errs <- err
		}()
		go func() {
			errs <- pgx.BeginFunc(context.Background(), conns[1], func(tx pgx.Tx) error {
				_, ok, err := queue.LockForBackfill(context.Background(), tx, id)
				if err != nil || !ok {
					return err
				}
				return queue.Backfilled(context.Background(), tx, replayNow, id)
			})
		}()
		go func() {
			_, err := queue.Replay(context.Background(), conns[2], queue.ReplayRequest{MsgIDs: []int64{id}}, replayNow)
			errs <- err
		}()
		for range 3 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		m, err := queue.Get(t.Context(), db.Pool, id)
		if err != nil {
			t.Fatal(err)
		}
		if !m.State.Terminal() && (m.BackfillAt != nil || m.BackfillNextAt != nil || m.FinishedAt != nil) {
			t.Fatalf("round %d: unfinished row with terminal fields: %+v", round, m)
		}
	}
}
