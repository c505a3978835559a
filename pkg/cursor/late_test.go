package cursor_test

import (
	"slices"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/cursor"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

func TestWatchedHolesAndLateRecords(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	ctx := t.Context()
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	for _, h := range []cursor.Hole{{First: 10, Last: 12, ReleasedAt: t0.Add(-48 * time.Hour)}, {First: 3, Last: 3, ReleasedAt: t0},
		{First: 20, Last: 29, ReleasedAt: t0.Add(-time.Hour)}} {
		if err := cursor.ReleaseHole(ctx, pg.Pool, h.First, h.Last, h.ReleasedAt); err != nil {
			t.Fatal(err)
		}
	}
	// Released again (a round retried after its commit was lost): no second record.
	if err := cursor.ReleaseHole(ctx, pg.Pool, 3, 3, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	holes, err := cursor.WatchedHoles(ctx, pg.Pool, t0.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var firsts []int64
	for _, h := range holes {
		firsts = append(firsts, h.First)
	}
	if !slices.Equal(firsts, []int64{3, 20}) {
		t.Errorf("watched holes = %v, want [3 20] (10-12 is older than the retention)", firsts)
	}

	fresh, err := cursor.RecordLate(ctx, pg.Pool, []cursor.Late{{MsgID: 25, HoleFirst: 20}, {MsgID: 3, HoleFirst: 3}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fresh, []int64{3, 25}) {
		t.Errorf("fresh = %v, want [3 25]", fresh)
	}
	fresh, err = cursor.RecordLate(ctx, pg.Pool, []cursor.Late{{MsgID: 25, HoleFirst: 20}, {MsgID: 27, HoleFirst: 20}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fresh, []int64{27}) {
		t.Errorf("fresh = %v, want [27]: 25 was recorded before", fresh)
	}
	s, err := cursor.Holes(ctx, pg.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if s != (cursor.HoleStats{Holes: 3, HoleIDs: 14, LateDetected: 3, LateEnqueued: 3}) {
		t.Errorf("stats = %+v", s)
	}
}
