package jobs_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/db"
	"github.com/msgexchange/msgexchange/pkg/jobs"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// A cancel keeps who asked and why on the row, the first one only; its preview says the same
// and changes nothing; a request's preview returns the open job or the one it would register.
func TestCancelKeepsWhoAndPreviewsChangeNothing(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	ctx, q := t.Context(), pg.Pool
	t1 := t0.Add(time.Minute)

	want, existing, err := jobs.PreviewRepublish(ctx, q, jobs.RepublishSpec{FLIDs: []string{"B", "A"}, RequestedBy: "op", Comment: "c"}, t0)
	if err != nil || existing || want.ID != 0 || want.State != jobs.StatePending || !slices.Equal(want.FLIDs, []string{"A", "B"}) ||
		want.RequestedBy != "op" || want.Comment != "c" {
		t.Fatalf("preview without an open job: %+v, %v, %v", want, existing, err)
	}
	if _, _, err := jobs.PreviewRepublish(ctx, q, jobs.RepublishSpec{FLIDs: []string{""}}, t0); !errors.Is(err, jobs.ErrRepublishInvalid) {
		t.Errorf("preview of an empty FLID: %v, want ErrRepublishInvalid", err)
	}
	if list, _ := jobs.Republishes.List(ctx, q, 0, 10); len(list) != 0 {
		t.Fatalf("a preview registered %d jobs", len(list))
	}
	j, _, err := jobs.RequestRepublish(ctx, q, jobs.RepublishSpec{RequestedBy: "op"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if got, existing, err := jobs.PreviewRepublish(ctx, q, jobs.RepublishSpec{FLIDs: []string{"A"}, RequestedBy: "other"}, t0); err != nil ||
		!existing || got.ID != j.ID || !got.All() {
		t.Fatalf("preview with an open job: %+v, %v, %v; want job %d", got, existing, err, j.ID)
	}

	// The preview of a pending job's cancel: CANCELLED at once, by whom and why.
	pre, err := jobs.Republishes.PreviewCancel(ctx, q, j.ID, jobs.Cancellation{By: "op-a", Comment: "INC-1"}, t1)
	if err != nil || pre.State != jobs.StateCancelled || !pre.CancelRequested || pre.CancelledBy != "op-a" || pre.CancelComment != "INC-1" ||
		pre.CancelRequestedAt == nil || !pre.CancelRequestedAt.Equal(t1) || pre.FinishedAt == nil {
		t.Fatalf("preview of a pending job's cancel: %+v, %v", pre, err)
	}
	if got, _ := jobs.Republishes.Get(ctx, q, j.ID); got.State != jobs.StatePending || got.CancelRequested || got.CancelledBy != "" {
		t.Fatalf("a cancel preview changed the job: %+v", got)
	}

	// A running job: cancel requested, the first cancel's who and why kept.
	if err := jobs.Republishes.Start(ctx, q, j.ID, 5, t0); err != nil {
		t.Fatal(err)
	}
	pre, err = jobs.Republishes.PreviewCancel(ctx, q, j.ID, jobs.Cancellation{By: "op-a", Comment: "INC-1"}, t1)
	if err != nil || pre.State != jobs.StateRunning || !pre.CancelRequested || pre.FinishedAt != nil || pre.CancelledBy != "op-a" {
		t.Fatalf("preview of a running job's cancel: %+v, %v", pre, err)
	}
	c, err := jobs.Republishes.Cancel(ctx, q, j.ID, jobs.Cancellation{By: "op-a", Comment: "INC-1"}, t1)
	if err != nil || c.State != jobs.StateRunning || c.CancelledBy != "op-a" || c.CancelComment != "INC-1" || !c.CancelRequestedAt.Equal(t1) {
		t.Fatalf("cancel running: %+v, %v", c, err)
	}
	c, err = jobs.Republishes.Cancel(ctx, q, j.ID, jobs.Cancellation{By: "op-b", Comment: "again"}, t1.Add(time.Minute))
	if err != nil || c.CancelledBy != "op-a" || c.CancelComment != "INC-1" || !c.CancelRequestedAt.Equal(t1) {
		t.Fatalf("a second cancel replaced the first's who and why: %+v, %v", c, err)
	}
	if pre, err = jobs.Republishes.PreviewCancel(ctx, q, j.ID, jobs.Cancellation{By: "op-b"}, t1); err != nil || pre.CancelledBy != "op-a" {
		t.Fatalf("preview of a second cancel: %+v, %v", pre, err)
	}
	if err := jobs.Republishes.Finish(ctx, q, j.ID, jobs.StateCancelled, t1); err != nil {
		t.Fatal(err)
	}
	if got, err := jobs.Republishes.Get(ctx, q, j.ID); err != nil || got.CancelledBy != "op-a" || got.CancelComment != "INC-1" {
		t.Fatalf("the ended job lost who cancelled it: %+v, %v", got, err)
	}
	if _, err := jobs.Republishes.PreviewCancel(ctx, q, j.ID, jobs.Cancellation{By: "op"}, t1); !errors.Is(err, jobs.ErrRepublishFinished) {
		t.Errorf("preview of an ended job's cancel: %v, want ErrRepublishFinished", err)
	}
	if _, err := jobs.Rebuilds.PreviewCancel(ctx, q, 999, jobs.Cancellation{By: "op"}, t1); !errors.Is(err, jobs.ErrRebuildNotFound) {
		t.Errorf("preview of no job's cancel: %v, want ErrRebuildNotFound", err)
	}
}

// The retention sweep of each job table deletes the jobs that ended before the cutoff, oldest
// first and at most limit at a time, and never an open job however old.
func TestDeleteFinishedJobs(t *testing.T) {
	t.Parallel()
	pg := pgtest.New(t)
	ctx, q := t.Context(), pg.Pool
	day := 24 * time.Hour
	// Five republishes and rebuilds requested a day apart, each ended the same day but the last,
	// which stays open.
	var repIDs, rebIDs []int64
	for i := range 5 {
		at := t0.Add(time.Duration(i) * day)
		r, _, err := jobs.RequestRepublish(ctx, q, jobs.RepublishSpec{RequestedBy: "op"}, at)
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := jobs.RequestRebuild(ctx, q, jobs.RebuildSpec{RequestedBy: "op"}, at)
		if err != nil {
			t.Fatal(err)
		}
		repIDs, rebIDs = append(repIDs, r.ID), append(rebIDs, b.ID)
		if i == 4 {
			break
		}
		state := []string{jobs.StateDone, jobs.StateCancelled}[i%2]
		if err := jobs.Republishes.Finish(ctx, q, r.ID, state, at.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := jobs.Rebuilds.Finish(ctx, q, b.ID, state, at.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	// Cutoff after the third job ended: jobs 0..2 go, two per batch.
	cutoff := t0.Add(2*day + 2*time.Hour)
	for _, tc := range []struct {
		name string
		del  func(limit int) (int64, error)
		list func() []int64
		all  []int64
	}{
		{"republish", func(n int) (int64, error) { return jobs.Republishes.DeleteFinished(ctx, q, cutoff, n) },
			func() []int64 { return listIDs(t, jobs.Republishes, q) }, repIDs},
		{"rebuild", func(n int) (int64, error) { return jobs.Rebuilds.DeleteFinished(ctx, q, cutoff, n) },
			func() []int64 { return listIDs(t, jobs.Rebuilds, q) }, rebIDs},
	} {
		if n, err := tc.del(2); err != nil || n != 2 {
			t.Fatalf("%s: first batch deleted %d, %v; want 2", tc.name, n, err)
		}
		if got, want := tc.list(), []int64{tc.all[4], tc.all[3], tc.all[2]}; !slices.Equal(got, want) {
			t.Fatalf("%s after the first batch: %v, want %v (the oldest go first)", tc.name, got, want)
		}
		if n, err := tc.del(2); err != nil || n != 1 {
			t.Fatalf("%s: second batch deleted %d, %v; want 1", tc.name, n, err)
		}
		// However old, the open job stays.
		if n, err := tc.del(100); err != nil || n != 0 {
			t.Fatalf("%s: third batch deleted %d, %v; want 0", tc.name, n, err)
		}
		if got, want := tc.list(), []int64{tc.all[4], tc.all[3]}; !slices.Equal(got, want) {
			t.Fatalf("%s at the end: %v, want %v", tc.name, got, want)
		}
	}
	if n, err := jobs.Republishes.DeleteFinished(ctx, q, t0.Add(100*day), 100); err != nil || n != 1 {
		t.Fatalf("a cutoff past every job: deleted %d, %v; want 1 (the open job stays)", n, err)
	}
}

// listIDs lists the IDs of table's jobs, newest first.
func listIDs[J any](t *testing.T, table *jobs.Table[J], q db.Executor) []int64 {
	t.Helper()
	list, err := table.List(t.Context(), q, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for i := range list {
		out = append(out, table.Row(&list[i]).ID)
	}
	return out
}
