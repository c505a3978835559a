package queue_test

import (
	"slices"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/pgtest"
	"github.com/msgexchange/msgexchange/pkg/queue"
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
