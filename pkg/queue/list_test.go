package queue_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/queue"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

func TestList(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	done := &now
	statsRow(t, db, 1, "PENDING", "", now, nil, nil, "")
	statsRow(t, db, 2, "FAILED", "INFRA", now, nil, nil, "")
	statsRow(t, db, 3, "DEAD", "EXHAUSTED", now, done, nil, "MISSING_ROW")
	statsRow(t, db, 4, "DEAD", "MALFORMED", now, done, nil, "")
	statsRow(t, db, 5, "SUCCEEDED", "", now, done, done, "")

	tests := []struct {
		name  string
		f     queue.Filter
		limit int
		want  []int64
	}{
		{"all", queue.Filter{}, 10, []int64{1, 2, 3, 4, 5}},
		{"limit", queue.Filter{}, 2, []int64{1, 2}},
		{"after", queue.Filter{After: 2}, 10, []int64{3, 4, 5}},
		{"states", queue.Filter{States: []queue.State{queue.Dead, queue.Failed}}, 10, []int64{2, 3, 4}},
		{"classes", queue.Filter{ErrorClasses: []queue.ErrorClass{queue.Exhausted, queue.Infra}}, 10, []int64{2, 3}},
		{"range", queue.Filter{FirstID: 2, LastID: 4}, 10, []int64{2, 3, 4}},
		{"abandoned", queue.Filter{Abandoned: true}, 10, []int64{3}},
		{"combined", queue.Filter{States: []queue.State{queue.Dead}, FirstID: 4, After: 3}, 10, []int64{4}},
		{"nothing", queue.Filter{States: []queue.State{queue.Skipped}}, 10, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msgs, err := queue.List(t.Context(), db.Pool, tc.f, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			var ids []int64
			for _, m := range msgs {
				ids = append(ids, m.MsgID)
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("List(%+v) = %v, want %v", tc.f, ids, tc.want)
			}
		})
	}
}

func TestListByFlightAndWindow(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// 1..3 enqueued a minute apart; 1 and 3 are about F1 (3 by its events only, as a schedule
	// is), 2 about F2.
	for i, flid := range []string{"F1", "F2", ""} {
		db.Exec(t, `INSERT INTO proc_state (msg_id, state, enqueued_at, updated_at, flid) VALUES ($1, 'PENDING', $2, $2, nullif($3, ''))`,
			i+1, t0.Add(time.Duration(i)*time.Minute), flid)
	}
	db.Exec(t, `INSERT INTO msg_event (target, partition_key, event_type, state_version, msg_id, state, created_at, updated_at, sent_at)
		VALUES ('KAFKA:msg', 'F1', 'UPSERT', 2, 3, 'SENT', $1, $1, $1)`, t0)
	from, to := t0.Add(time.Minute), t0.Add(3*time.Minute)
	tests := []struct {
		name string
		f    queue.Filter
		want []int64
	}{
		{"flid", queue.Filter{FLIDs: []string{"F1"}}, []int64{1, 3}},
		{"flids", queue.Filter{FLIDs: []string{"F1", "F2"}}, []int64{1, 2, 3}},
		{"flid newest first", queue.Filter{FLIDs: []string{"F1"}, Newest: true}, []int64{3, 1}},
		{"window", queue.Filter{EnqueuedFrom: &from, EnqueuedTo: &to}, []int64{2, 3}},
		{"window end exclusive", queue.Filter{EnqueuedTo: &from}, []int64{1}},
		{"flid and window", queue.Filter{FLIDs: []string{"F1"}, EnqueuedFrom: &from}, []int64{3}},
		{"unknown flid", queue.Filter{FLIDs: []string{"F9"}}, nil},
	}
	for _, tc := range tests {
		msgs, err := queue.List(t.Context(), db.Pool, tc.f, 10)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, m := range msgs {
			ids = append(ids, m.MsgID)
		}
		if !slices.Equal(ids, tc.want) {
			t.Errorf("%s: List = %v, want %v", tc.name, ids, tc.want)
		}
	}
}

// TestListFiltersUseIndexes EXPLAINs the flight and window filters over a day's worth of rows:
// neither may read the whole of proc_state or msg_event.
func TestListFiltersUseIndexes(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	db.Exec(t, `INSERT INTO proc_state (msg_id, state, enqueued_at, finished_at, updated_at, flid)
		SELECT i, 'SUCCEEDED', $1::timestamptz + i * interval '1 second', $1, $1, 'F' || (i % 2000)
		FROM generate_series(1, 50000) i`, t0)
	db.Exec(t, `INSERT INTO msg_event (target, partition_key, event_type, state_version, msg_id, state, created_at, updated_at, sent_at)
		SELECT 'KAFKA:msg', 'F' || (i % 2000), 'UPSERT', i, i, 'SENT', $1, $1, $1 FROM generate_series(1, 50000) i`, t0)
	db.Exec(t, `ANALYZE proc_state`)
	db.Exec(t, `ANALYZE msg_event`)
	from, to := t0.Add(10*time.Hour), t0.Add(11*time.Hour)
	for name, f := range map[string]queue.Filter{
		"flid":        {FLIDs: []string{"F17"}},
		"flid newest": {FLIDs: []string{"F17"}, Newest: true},
		"window":      {EnqueuedFrom: &from, EnqueuedTo: &to},
	} {
		want := map[string]string{"flid": "msg_event_key", "flid newest": "proc_state_flid", "window": "proc_state_enqueued"}
		sql, args := queue.ListQuery(f, 101)
		rows, err := db.Pool.Query(t.Context(), "EXPLAIN "+sql, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		text := strings.Join(plan, "\n")
		t.Logf("%s:\n%s", name, text)
		if strings.Contains(text, "Seq Scan") || !strings.Contains(text, want[name]) {
			t.Errorf("%s: the plan reads a whole table:\n%s", name, text)
		}
	}
}
