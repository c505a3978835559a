package queue_test

import (
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// statsRow inserts one proc_state row in the given shape; the columns not named keep their
// defaults. finished is nil for unfinished rows.
func statsRow(t *testing.T, db *pgtest.DB, id int64, state, class string, enqueued time.Time, finished *time.Time,
	backfillAt *time.Time, abandonReason string) {
	t.Helper()
	var abandonedAt *time.Time
	if abandonReason != "" {
		abandonedAt = finished
	}
	db.Exec(t, `INSERT INTO proc_state (msg_id, state, error_class, enqueued_at, finished_at, backfill_at,
		backfill_abandoned_at, backfill_abandon_reason, updated_at)
		VALUES ($1, $2, nullif($3, ''), $4, $5, $6, $7, nullif($8, ''), $4)`,
		id, state, class, enqueued, finished, backfillAt, abandonedAt, abandonReason)
}

func TestStats(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *time.Time { v := now.Add(-ago); return &v }

	t.Run("empty", func(t *testing.T) {
		t.Parallel()
		db := pgtest.New(t)
		s, err := queue.Stats(t.Context(), db.Pool, now)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.ByState) != 5 {
			t.Errorf("ByState = %v, want all five states at zero", s.ByState)
		}
		for st, n := range s.ByState {
			if n != 0 {
				t.Errorf("ByState[%s] = %d, want 0", st, n)
			}
		}
		if s.Unfinished != 0 || s.OldestUnfinishedEnqueuedAt != nil || s.OldestUnfinishedAge != 0 {
			t.Errorf("unfinished = %d oldest %v age %s, want none", s.Unfinished, s.OldestUnfinishedEnqueuedAt, s.OldestUnfinishedAge)
		}
		// Nothing to drain is a known zero, not "unknown".
		if s.EstimatedDrain == nil || *s.EstimatedDrain != 0 {
			t.Errorf("EstimatedDrain = %v, want 0", s.EstimatedDrain)
		}
	})

	t.Run("mixed", func(t *testing.T) {
		t.Parallel()
		db := pgtest.New(t)
		// Unfinished: three rows, the oldest enqueued 20 minutes ago.
		statsRow(t, db, 10, "PENDING", "", *at(20 * time.Minute), nil, nil, "")
		statsRow(t, db, 11, "FAILED", "INFRA", *at(10 * time.Minute), nil, nil, "")
		statsRow(t, db, 12, "PENDING", "", *at(time.Minute), nil, nil, "")
		// Finished inside the window (6 rows): SUCCEEDED awaiting its marker, marked, DEAD.
		statsRow(t, db, 1, "SUCCEEDED", "", *at(time.Hour), at(4*time.Minute), nil, "")
		statsRow(t, db, 2, "SUCCEEDED", "", *at(time.Hour), at(3*time.Minute), at(time.Minute), "")
		statsRow(t, db, 3, "SKIPPED", "UNSUPPORTED", *at(time.Hour), at(2*time.Minute), at(time.Minute), "")
		statsRow(t, db, 4, "DEAD", "MALFORMED", *at(time.Hour), at(time.Minute), nil, "")
		statsRow(t, db, 5, "DEAD", "EXHAUSTED", *at(time.Hour), at(30*time.Second), nil, "MISSING_ROW")
		statsRow(t, db, 6, "SUCCEEDED", "", *at(time.Hour), at(0), nil, "")
		// Finished outside the window, one abandoned after R, one exactly at the window's edge.
		statsRow(t, db, 7, "SUCCEEDED", "", *at(48 * time.Hour), at(47*time.Hour), nil, "TRANSIENT_DEADLINE")
		statsRow(t, db, 8, "SUCCEEDED", "", *at(48 * time.Hour), at(queue.StatsRateWindow), nil, "TRANSIENT_DEADLINE")
		statsRow(t, db, 9, "SUCCEEDED", "", *at(48 * time.Hour), at(47*time.Hour), at(46*time.Hour), "")

		s, err := queue.Stats(t.Context(), db.Pool, now)
		if err != nil {
			t.Fatal(err)
		}
		wantStates := map[queue.State]int64{queue.Pending: 2, queue.Failed: 1, queue.Succeeded: 6, queue.Skipped: 1, queue.Dead: 2}
		for st, n := range wantStates {
			if s.ByState[st] != n {
				t.Errorf("ByState[%s] = %d, want %d", st, s.ByState[st], n)
			}
		}
		wantClasses := map[queue.ErrorClass]int64{queue.Infra: 1, queue.Unsupported: 1, queue.Malformed: 1, queue.Exhausted: 1}
		if len(s.ByErrorClass) != len(wantClasses) {
			t.Errorf("ByErrorClass = %v, want %v", s.ByErrorClass, wantClasses)
		}
		for c, n := range wantClasses {
			if s.ByErrorClass[c] != n {
				t.Errorf("ByErrorClass[%s] = %d, want %d", c, s.ByErrorClass[c], n)
			}
		}
		wantDead := map[queue.ErrorClass]int64{queue.Malformed: 1, queue.Exhausted: 1}
		if len(s.DeadByErrorClass) != len(wantDead) || s.DeadByErrorClass[queue.Malformed] != 1 || s.DeadByErrorClass[queue.Exhausted] != 1 {
			t.Errorf("DeadByErrorClass = %v, want %v", s.DeadByErrorClass, wantDead)
		}
		if s.Unfinished != 3 {
			t.Errorf("Unfinished = %d, want 3", s.Unfinished)
		}
		if s.OldestUnfinishedEnqueuedAt == nil || !s.OldestUnfinishedEnqueuedAt.Equal(*at(20 * time.Minute)) {
			t.Errorf("OldestUnfinishedEnqueuedAt = %v, want %v", s.OldestUnfinishedEnqueuedAt, *at(20 * time.Minute))
		}
		if s.OldestUnfinishedAge != 20*time.Minute {
			t.Errorf("OldestUnfinishedAge = %s, want 20m", s.OldestUnfinishedAge)
		}
		// Rows 1-6: the window is (now-5m, now], so row 8 at exactly now-5m is outside.
		if s.FinishedInWindow != 6 {
			t.Errorf("FinishedInWindow = %d, want 6", s.FinishedInWindow)
		}
		if want := 6.0 / 300; s.FinishedPerSecond != want {
			t.Errorf("FinishedPerSecond = %v, want %v", s.FinishedPerSecond, want)
		}
		// 3 unfinished at 0.02/s.
		if s.EstimatedDrain == nil || *s.EstimatedDrain != 150*time.Second {
			t.Errorf("EstimatedDrain = %v, want 2m30s", s.EstimatedDrain)
		}
		// Terminal, not marked, not abandoned: rows 1, 4, 6.
		if s.BackfillPending != 3 {
			t.Errorf("BackfillPending = %d, want 3", s.BackfillPending)
		}
		if s.BackfillAbandoned != 3 || s.BackfillAbandonedByReason["MISSING_ROW"] != 1 ||
			s.BackfillAbandonedByReason["TRANSIENT_DEADLINE"] != 2 || len(s.BackfillAbandonedByReason) != 2 {
			t.Errorf("abandoned = %d by reason %v, want 3 (MISSING_ROW 1, TRANSIENT_DEADLINE 2)",
				s.BackfillAbandoned, s.BackfillAbandonedByReason)
		}
	})

	t.Run("bulk states estimated past ExactCountBelow", func(t *testing.T) {
		t.Parallel()
		db := pgtest.New(t)
		bulk := int64(queue.ExactCountBelow * 3 / 2)
		db.Exec(t, `INSERT INTO proc_state (msg_id, state, enqueued_at, finished_at, backfill_at, updated_at)
			SELECT i, 'SUCCEEDED', $2, $2, $2, $2 FROM generate_series(1, $1::bigint) AS i`, bulk, *at(time.Hour))
		for i := range int64(40) {
			statsRow(t, db, bulk+1+i, "SKIPPED", "", *at(time.Hour), at(time.Hour), at(time.Hour), "")
		}
		statsRow(t, db, bulk+100, "PENDING", "", *at(time.Minute), nil, nil, "")
		statsRow(t, db, bulk+101, "FAILED", "INFRA", *at(time.Minute), nil, nil, "")
		statsRow(t, db, bulk+102, "DEAD", "MALFORMED", *at(time.Hour), at(time.Hour), nil, "")
		db.Exec(t, `ANALYZE proc_state`)

		check := func(t *testing.T, succeeded int64) {
			t.Helper()
			s, err := queue.Stats(t.Context(), db.Pool, now)
			if err != nil {
				t.Fatal(err)
			}
			// ANALYZE's sample of 30,000 rows puts SUCCEEDED within a few per cent; its pages
			// scale the estimate to rows added since.
			if n := s.ByState[queue.Succeeded]; !s.Estimated[queue.Succeeded] || n < succeeded*95/100 || n > succeeded*105/100 {
				t.Errorf("SUCCEEDED = %d (estimated %t), want an estimate within 5%% of %d", n, s.Estimated[queue.Succeeded], succeeded)
			}
			// Rarer than ExactCountBelow (and than the sample sees): counted.
			want := map[queue.State]int64{queue.Skipped: 40, queue.Pending: 1, queue.Failed: 1, queue.Dead: 1}
			for st, n := range want {
				if s.ByState[st] != n || s.Estimated[st] {
					t.Errorf("%s = %d (estimated %t), want exactly %d", st, s.ByState[st], s.Estimated[st], n)
				}
			}
			if len(s.Estimated) != 1 {
				t.Errorf("Estimated = %v, want SUCCEEDED only", s.Estimated)
			}
		}
		check(t, bulk)
		db.Exec(t, `INSERT INTO proc_state (msg_id, state, enqueued_at, finished_at, backfill_at, updated_at)
			SELECT i, 'SUCCEEDED', $3, $3, $3, $3 FROM generate_series($1::bigint, $2::bigint) AS i`,
			bulk+1000, bulk+1000+bulk/2-1, *at(time.Hour))
		check(t, bulk+bulk/2)
	})

	t.Run("unknown drain when nothing finished recently", func(t *testing.T) {
		t.Parallel()
		db := pgtest.New(t)
		statsRow(t, db, 1, "SUCCEEDED", "", *at(time.Hour), at(time.Hour), nil, "")
		statsRow(t, db, 2, "PENDING", "", *at(time.Hour), nil, nil, "")
		s, err := queue.Stats(t.Context(), db.Pool, now)
		if err != nil {
			t.Fatal(err)
		}
		if s.FinishedPerSecond != 0 || s.EstimatedDrain != nil {
			t.Errorf("rate %v drain %v, want 0 and unknown (nil)", s.FinishedPerSecond, s.EstimatedDrain)
		}
	})

	t.Run("drain rounds up to the second", func(t *testing.T) {
		t.Parallel()
		db := pgtest.New(t)
		for i := range int64(9) {
			statsRow(t, db, i+1, "SUCCEEDED", "", *at(time.Hour), at(time.Minute), nil, "")
		}
		statsRow(t, db, 100, "PENDING", "", *at(time.Hour), nil, nil, "")
		s, err := queue.Stats(t.Context(), db.Pool, now)
		if err != nil {
			t.Fatal(err)
		}
		// 1 ÷ (9/300 per second) = 33.3s, rounded up.
		if s.EstimatedDrain == nil || *s.EstimatedDrain != 34*time.Second {
			t.Errorf("EstimatedDrain = %v, want 34s", s.EstimatedDrain)
		}
	})
}
