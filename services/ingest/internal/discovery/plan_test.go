package discovery

import (
	"slices"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/inbox"
)

func ids(rows []inbox.Row) []int64 {
	out := []int64{}
	for _, r := range rows {
		out = append(out, r.ID)
	}
	return out
}

func rowsOf(ids ...int64) []inbox.Row {
	out := make([]inbox.Row, len(ids))
	for i, id := range ids {
		out[i] = inbox.Row{ID: id}
	}
	return out
}

func TestPlan(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	delay := 5 * time.Minute
	old := t0.Add(-delay)
	recent := t0.Add(-delay + time.Second)
	tests := []struct {
		name         string
		w            int64
		holeSince    *time.Time
		rows         []inbox.Row
		wantW        int64
		wantEnqueue  []int64
		wantHole     *time.Time
		wantReleased *[2]int64
	}{
		{name: "empty inbox", w: 0, rows: nil, wantW: 0, wantEnqueue: []int64{}},
		{name: "contiguous rows", w: 3, rows: rowsOf(4, 5, 6), wantW: 6, wantEnqueue: []int64{4, 5, 6}},
		{name: "first observation of a hole starts its clock", w: 3, rows: rowsOf(5, 6), wantW: 3,
			wantEnqueue: []int64{}, wantHole: &t0},
		{name: "rows before a hole are enqueued, rows after wait", w: 3, rows: rowsOf(4, 6, 7), wantW: 4,
			wantEnqueue: []int64{4}, wantHole: &t0},
		{name: "a hole within the delay keeps its clock", w: 3, holeSince: &recent, rows: rowsOf(5, 6), wantW: 3,
			wantEnqueue: []int64{}, wantHole: &recent},
		{name: "a filled hole lets W pass and clears the clock", w: 3, holeSince: &recent, rows: rowsOf(4, 5, 6),
			wantW: 6, wantEnqueue: []int64{4, 5, 6}},
		{name: "a new hole after W moved starts a new clock", w: 3, holeSince: &old, rows: rowsOf(4, 6), wantW: 4,
			wantEnqueue: []int64{4}, wantHole: &t0},
		{name: "an aged hole is released, skipping only the missing IDs", w: 3, holeSince: &old, rows: rowsOf(7, 8),
			wantW: 8, wantEnqueue: []int64{7, 8}, wantReleased: &[2]int64{4, 6}},
		{name: "two holes: one released per round, the next gets a new clock", w: 3, holeSince: &old,
			rows: rowsOf(5, 6, 8, 9), wantW: 6, wantEnqueue: []int64{5, 6}, wantHole: &t0, wantReleased: &[2]int64{4, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := plan(tt.w, tt.holeSince, tt.rows, t0, delay)
			if p.W != tt.wantW {
				t.Errorf("W = %d, want %d", p.W, tt.wantW)
			}
			if got := ids(p.Enqueue); !slices.Equal(got, tt.wantEnqueue) {
				t.Errorf("enqueue = %v, want %v", got, tt.wantEnqueue)
			}
			if (p.HoleSince == nil) != (tt.wantHole == nil) || (p.HoleSince != nil && !p.HoleSince.Equal(*tt.wantHole)) {
				t.Errorf("holeSince = %v, want %v", p.HoleSince, tt.wantHole)
			}
			if (p.Released == nil) != (tt.wantReleased == nil) || (p.Released != nil && *p.Released != *tt.wantReleased) {
				t.Errorf("released = %v, want %v", p.Released, tt.wantReleased)
			}
		})
	}
}

func TestPlanStopBefore(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	released := &[2]int64{13, 14}
	full := Plan{W: 16, Enqueue: rowsOf(11, 12, 15, 16), Released: released, HoleSince: &t0}
	tests := []struct {
		name         string
		id           int64
		wantW        int64
		wantEnqueue  []int64
		wantReleased *[2]int64
		wantHole     bool
	}{
		{name: "beyond the plan: unchanged", id: 20, wantW: 16, wantEnqueue: []int64{11, 12, 15, 16}, wantReleased: released, wantHole: true},
		{name: "after the released hole", id: 16, wantW: 15, wantEnqueue: []int64{11, 12, 15}, wantReleased: released},
		{name: "right after the released hole", id: 15, wantW: 14, wantEnqueue: []int64{11, 12}, wantReleased: released},
		{name: "before the released hole", id: 12, wantW: 11, wantEnqueue: []int64{11}},
		{name: "the first row", id: 11, wantW: 10, wantEnqueue: []int64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := full.stopBefore(tt.id)
			if got.W != tt.wantW || !slices.Equal(ids(got.Enqueue), tt.wantEnqueue) || (got.HoleSince != nil) != tt.wantHole ||
				(got.Released == nil) != (tt.wantReleased == nil) || (got.Released != nil && *got.Released != *tt.wantReleased) {
				t.Errorf("stopBefore(%d) = W %d enqueue %v released %v hole %v; want W %d enqueue %v released %v hole %v",
					tt.id, got.W, ids(got.Enqueue), got.Released, got.HoleSince, tt.wantW, tt.wantEnqueue, tt.wantReleased, tt.wantHole)
			}
		})
	}
}
