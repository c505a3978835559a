package cursor_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/cursor"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

func marks(spec ...any) []aodb.MarkState {
	var out []aodb.MarkState
	for i := 0; i < len(spec); i += 2 {
		out = append(out, aodb.MarkState{ID: int64(spec[i].(int)), Marked: spec[i+1].(bool)})
	}
	return out
}

func TestPlanResolution(t *testing.T) {
	t.Parallel()
	behind := cursor.Cursor{W: 100, Violation: &cursor.Violation{Kind: cursor.KindInboxBehind}}
	marked := cursor.Cursor{W: 10, Violation: &cursor.Violation{Kind: cursor.KindMarkedAbove}}
	resume := func(kind string) cursor.Resolution { return cursor.Resolution{Kind: kind, Action: cursor.ActionResume} }
	skip := func(through int64, limit int) cursor.Resolution {
		return cursor.Resolution{Kind: cursor.KindMarkedAbove, Action: cursor.ActionSkipMarked, Through: through, Limit: limit}
	}
	tests := []struct {
		name    string
		r       cursor.Resolution
		v       cursor.ResolutionView
		want    cursor.Resolved
		wantErr error
	}{
		{name: "resume while the inbox is behind", r: resume(cursor.KindInboxBehind),
			v: cursor.ResolutionView{Cursor: behind, InboxMax: 99}, wantErr: cursor.ErrStillBehind},
		{name: "resume once the inbox reaches W", r: resume(cursor.KindInboxBehind),
			v: cursor.ResolutionView{Cursor: behind, InboxMax: 100}, want: cursor.Resolved{Before: 100, W: 100, InboxMax: 100}},
		{name: "resume marked keeps W", r: resume(cursor.KindMarkedAbove),
			v: cursor.ResolutionView{Cursor: marked, InboxMax: 20}, want: cursor.Resolved{Before: 10, W: 10, InboxMax: 20}},
		{name: "skip the run up to the first unmarked row, gaps become holes", r: skip(0, 0),
			v:    cursor.ResolutionView{Cursor: marked, InboxMax: 20, Rows: marks(12, true, 13, true, 16, true, 17, false, 18, true)},
			want: cursor.Resolved{Before: 10, W: 16, Skipped: 3, FirstUnmarked: 17, Holes: [][2]int64{{11, 11}, {14, 15}}, InboxMax: 20}},
		{name: "skip through a bound", r: skip(13, 0),
			v:    cursor.ResolutionView{Cursor: marked, Rows: marks(11, true, 13, true)},
			want: cursor.Resolved{Before: 10, W: 13, Skipped: 2, Holes: [][2]int64{{12, 12}}}},
		{name: "skip through an unmarked row is refused", r: skip(14, 0),
			v: cursor.ResolutionView{Cursor: marked, Rows: marks(11, true, 12, false, 13, true)}, wantErr: cursor.ErrNotMarked},
		{name: "skip with the first row unmarked", r: skip(0, 0),
			v: cursor.ResolutionView{Cursor: marked, Rows: marks(11, false, 12, true)}, wantErr: cursor.ErrNothingToSkip},
		{name: "skip with no row above W", r: skip(0, 0),
			v: cursor.ResolutionView{Cursor: marked}, wantErr: cursor.ErrNothingToSkip},
		{name: "a full batch of marked rows may go on", r: skip(0, 2),
			v:    cursor.ResolutionView{Cursor: marked, Rows: marks(11, true, 12, true)},
			want: cursor.Resolved{Before: 10, W: 12, Skipped: 2, More: true}},
		{name: "a full batch ended by an unmarked row is complete", r: skip(0, 2),
			v:    cursor.ResolutionView{Cursor: marked, Rows: marks(11, true, 12, false)},
			want: cursor.Resolved{Before: 10, W: 11, Skipped: 1, FirstUnmarked: 12}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cursor.PlanResolution(tt.r, tt.v)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !errors.Is(err, cursor.ErrResolveRefused) {
					t.Fatalf("err = %v, want %v (a refusal)", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Before != tt.want.Before || got.W != tt.want.W || got.Skipped != tt.want.Skipped || got.More != tt.want.More ||
				got.FirstUnmarked != tt.want.FirstUnmarked || got.InboxMax != tt.want.InboxMax || !slices.Equal(got.Holes, tt.want.Holes) {
				t.Errorf("plan = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestReadResolutionRefusals(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cur := cursor.Cursor{W: 10, Violation: &cursor.Violation{Kind: cursor.KindInboxBehind, Since: since}}
	earlier := since.Add(-time.Second)
	tests := []struct {
		name string
		cur  cursor.Cursor
		r    cursor.Resolution
		want error
	}{
		{"none stands", cursor.Cursor{W: 10}, cursor.Resolution{Kind: cursor.KindInboxBehind, Action: cursor.ActionResume}, cursor.ErrNoViolation},
		{"another kind stands", cur, cursor.Resolution{Kind: cursor.KindMarkedAbove, Action: cursor.ActionResume}, cursor.ErrNoViolation},
		{"skip of inbox-behind", cur, cursor.Resolution{Kind: cursor.KindInboxBehind, Action: cursor.ActionSkipMarked}, cursor.ErrWrongAction},
		{"unknown action", cur, cursor.Resolution{Kind: cursor.KindInboxBehind, Action: "rewind"}, cursor.ErrResolveRefused},
		{"a newer one stands", cur, cursor.Resolution{Kind: cursor.KindInboxBehind, Action: cursor.ActionResume, Since: &earlier}, cursor.ErrNoViolation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The refusals come before the inbox is read: a nil reader would panic otherwise.
			if _, err := cursor.ReadResolution(t.Context(), nil, tt.cur, tt.r); !errors.Is(err, tt.want) {
				t.Errorf("ReadResolution = %v, want %v", err, tt.want)
			}
		})
	}
}

// Resolve writes the decision with one guarded UPDATE: a second resolution of the same
// observation, or one racing a round, changes nothing; a dry run writes nothing.
func TestResolve(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := t.Context()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	hole := now.Add(-time.Minute)
	if err := cursor.Save(ctx, db.Pool, 10, &hole, now); err != nil {
		t.Fatal(err)
	}
	if err := cursor.StartMarkerWatch(ctx, db.Pool, now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := cursor.StartMarkerWatch(ctx, db.Pool, now); err != nil { // set once
		t.Fatal(err)
	}
	v := cursor.Violation{Kind: cursor.KindMarkedAbove, Since: now, Detail: "row 12 above W 10"}
	if err := cursor.RecordViolation(ctx, db.Pool, v); err != nil {
		t.Fatal(err)
	}
	// A later observation does not replace the standing one.
	if err := cursor.RecordViolation(ctx, db.Pool, cursor.Violation{Kind: cursor.KindInboxBehind, Since: now.Add(time.Minute), Detail: "x"}); err != nil {
		t.Fatal(err)
	}
	cur, err := cursor.Load(ctx, db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Violation == nil || cur.Violation.Kind != v.Kind || !cur.Violation.Since.Equal(v.Since) || cur.Violation.Detail != v.Detail ||
		cur.MarkerSince == nil || !cur.MarkerSince.Equal(now.Add(-time.Hour)) {
		t.Fatalf("cursor = %+v (violation %+v), want %+v and marker_since %v", cur, cur.Violation, v, now.Add(-time.Hour))
	}
	skip := cursor.Resolution{Kind: cursor.KindMarkedAbove, Action: cursor.ActionSkipMarked}
	view := cursor.ResolutionView{Cursor: cur, InboxMax: 20, Rows: marks(12, true, 13, true, 15, true, 16, false)}

	res, err := cursor.Resolve(ctx, db.Pool, skip, view, true, now)
	if err != nil || res.W != 15 {
		t.Fatalf("dry run = %+v, %v; want W 15", res, err)
	}
	if again, _ := cursor.Load(ctx, db.Pool); again.W != 10 || again.Violation == nil {
		t.Fatalf("after a dry run the cursor is %+v, want it unchanged", again)
	}

	later := now.Add(time.Minute)
	if res, err = cursor.Resolve(ctx, db.Pool, skip, view, false, later); err != nil || res.W != 15 || res.Skipped != 3 {
		t.Fatalf("skip = %+v, %v; want W 15 over 3 rows", res, err)
	}
	after, err := cursor.Load(ctx, db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if after.W != 15 || after.Violation != nil || after.HoleSince != nil || !after.MarkerSince.Equal(now.Add(-time.Hour)) {
		t.Errorf("cursor after the skip = %+v, want W 15, no violation, no hole clock, marker_since kept", after)
	}
	holes, err := cursor.WatchedHoles(ctx, db.Pool, now)
	if err != nil || len(holes) != 2 || holes[0].First != 11 || holes[0].Last != 11 || holes[1].First != 14 || holes[1].Last != 14 {
		t.Errorf("holes = %+v, %v; want 11 and 14", holes, err)
	}
	// The same decision again: the violation it was taken for is gone.
	if _, err := cursor.Resolve(ctx, db.Pool, skip, view, false, later); !errors.Is(err, cursor.ErrResolveRaced) {
		t.Errorf("second skip = %v, want ErrResolveRaced", err)
	}
	if _, err := cursor.Resolve(ctx, db.Pool, skip, view, true, later); !errors.Is(err, cursor.ErrResolveRaced) {
		t.Errorf("dry run of a resolved violation = %v, want ErrResolveRaced", err)
	}

	// Resuming marked-above-watermark moves marker_since to the resolution's time.
	v2 := cursor.Violation{Kind: cursor.KindMarkedAbove, Since: later, Detail: "row 17 above W 16"}
	if err := cursor.RecordViolation(ctx, db.Pool, v2); err != nil {
		t.Fatal(err)
	}
	cur, err = cursor.Load(ctx, db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	resumeAt := later.Add(time.Minute)
	if _, err := cursor.Resolve(ctx, db.Pool, cursor.Resolution{Kind: cursor.KindMarkedAbove, Action: cursor.ActionResume},
		cursor.ResolutionView{Cursor: cur}, false, resumeAt); err != nil {
		t.Fatal(err)
	}
	if after, _ := cursor.Load(ctx, db.Pool); after.Violation != nil || after.W != 15 || !after.MarkerSince.Equal(resumeAt) {
		t.Errorf("cursor after resume = %+v, want W 15, no violation, marker_since %v", after, resumeAt)
	}
}
