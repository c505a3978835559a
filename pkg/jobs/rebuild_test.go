package jobs_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/jobs"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

func TestRebuildNormalizeAndNextFLIDs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		flids   []string
		want    []string
		invalid bool
	}{
		{name: "all", flids: nil, want: []string{}},
		{name: "sorted and unique", flids: []string{"B", "A", "B", "C"}, want: []string{"A", "B", "C"}},
		{name: "empty FLID", flids: []string{"A", ""}, invalid: true},
		{name: "too many", flids: make([]string, jobs.MaxFLIDs+1), invalid: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := jobs.RebuildSpec{FLIDs: tc.flids}.Normalize()
			if tc.invalid {
				if !errors.Is(err, jobs.ErrRebuildInvalid) {
					t.Fatalf("err %v, want ErrInvalid", err)
				}
				return
			}
			if err != nil || !slices.Equal(s.FLIDs, tc.want) {
				t.Fatalf("got %v, %v; want %v", s.FLIDs, err, tc.want)
			}
		})
	}
	j := jobs.RebuildJob{Row: jobs.Row{FLIDs: []string{"A", "B", "C", "D", "E"}}}
	for _, tc := range []struct {
		cursor string
		want   []string
	}{{"", []string{"A", "B"}}, {"A", []string{"B", "C"}}, {"BB", []string{"C", "D"}}, {"D", []string{"E"}}, {"E", []string{}}} {
		j.Cursor = tc.cursor
		if got := j.NextFLIDs(2); !slices.Equal(got, tc.want) {
			t.Errorf("after %q: %v, want %v", tc.cursor, got, tc.want)
		}
	}
}

// One job at a time: a second request returns the open one; a finished job makes room; cancel
// ends a pending job at once and marks a running one.
func TestRebuildStoreLifecycle(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	ctx, q := t.Context(), pg.Pool
	j1, existing, err := jobs.RequestRebuild(ctx, q, jobs.RebuildSpec{FLIDs: []string{"B", "A"}, DryRun: true, RequestedBy: "op"}, t0)
	if err != nil || existing || j1.State != jobs.StatePending || !slices.Equal(j1.FLIDs, []string{"A", "B"}) {
		t.Fatalf("first request: %+v, %v, %v", j1, existing, err)
	}
	j2, existing, err := jobs.RequestRebuild(ctx, q, jobs.RebuildSpec{RequestedBy: "other"}, t0)
	if err != nil || !existing || j2.ID != j1.ID {
		t.Fatalf("second request: %+v, existing %v, %v; want job %d back", j2, existing, err, j1.ID)
	}
	if err := jobs.Rebuilds.Start(ctx, q, j1.ID, 2, t0); err != nil {
		t.Fatal(err)
	}
	if err := jobs.AdvanceRebuild(ctx, q, j1.ID, jobs.RebuildProgress{Phase: jobs.RebuildPhaseFlights, Cursor: "A", Done: 1,
		Counts: jobs.RebuildCounts{Missing: 1}}, t0); err != nil {
		t.Fatal(err)
	}
	if err := jobs.AdvanceRebuild(ctx, q, j1.ID, jobs.RebuildProgress{Phase: jobs.RebuildPhaseFlights, Cursor: "B", Done: 1,
		Counts: jobs.RebuildCounts{Stale: 1, Repaired: 1}}, t0); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Rebuilds.Finish(ctx, q, j1.ID, jobs.StateDone, t0); err != nil {
		t.Fatal(err)
	}
	got, err := jobs.Rebuilds.Get(ctx, q, j1.ID)
	if err != nil || got.State != jobs.StateDone || got.Done != 2 || got.Total != 2 ||
		got.Counts != (jobs.RebuildCounts{Missing: 1, Stale: 1, Repaired: 1}) || got.FinishedAt == nil {
		t.Fatalf("finished job: %+v, %v", got, err)
	}
	if _, err := jobs.Rebuilds.Cancel(ctx, q, j1.ID, jobs.Cancellation{By: "op"}, t0); !errors.Is(err, jobs.ErrRebuildFinished) {
		t.Errorf("cancel of a finished job: %v, want ErrFinished", err)
	}
	if _, err := jobs.Rebuilds.Get(ctx, q, 999); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("get of no job: %v, want db.ErrNotFound", err)
	}

	j3, existing, err := jobs.RequestRebuild(ctx, q, jobs.RebuildSpec{RequestedBy: "op"}, t0)
	if err != nil || existing || j3.ID == j1.ID || !j3.All() {
		t.Fatalf("request after the first ended: %+v, %v, %v", j3, existing, err)
	}
	c, err := jobs.Rebuilds.Cancel(ctx, q, j3.ID, jobs.Cancellation{By: "op-c", Comment: "INC-1"}, t0)
	if err != nil || c.State != jobs.StateCancelled {
		t.Fatalf("cancel pending: %+v, %v", c, err)
	}
	j4, _, err := jobs.RequestRebuild(ctx, q, jobs.RebuildSpec{RequestedBy: "op"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := jobs.Rebuilds.Start(ctx, q, j4.ID, 10, t0); err != nil {
		t.Fatal(err)
	}
	if c, err := jobs.Rebuilds.Cancel(ctx, q, j4.ID, jobs.Cancellation{By: "op-c", Comment: "INC-2"}, t0); err != nil || c.State != jobs.StateRunning || !c.CancelRequested {
		t.Fatalf("cancel running: %+v, %v", c, err)
	}
	open, err := jobs.Rebuilds.LockOpen(ctx, q)
	if err != nil || open == nil || open.ID != j4.ID {
		t.Fatalf("open job: %+v, %v", open, err)
	}
	list, err := jobs.Rebuilds.List(ctx, q, 0, 2)
	if err != nil || len(list) != 2 || list[0].ID != j4.ID || list[1].ID != j3.ID {
		t.Fatalf("list: %v, %v", list, err)
	}
	if list, err = jobs.Rebuilds.List(ctx, q, j3.ID, 10); err != nil || len(list) != 1 || list[0].ID != j1.ID {
		t.Fatalf("second page: %v, %v", list, err)
	}
}
