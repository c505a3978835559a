package discovery

import (
	"slices"
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/aodb"
	"github.com/msgexchange/msgexchange/pkg/cursor"
)

func ids(rows []aodb.Row) []int64 {
	out := []int64{}
	for _, r := range rows {
		out = append(out, r.ID)
	}
	return out
}

func rowsOf(ids ...int64) []aodb.Row {
	out := make([]aodb.Row, len(ids))
	for i, id := range ids {
		out[i] = aodb.Row{ID: id}
	}
	return out
}

func hole(first, last int64, seen time.Time) cursor.OpenHole {
	return cursor.OpenHole{First: first, Last: last, SeenAt: seen}
}

// The watermark rule with a clock per hole (R-INGEST-4 to R-INGEST-6, D-15).
func TestPlan(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	delay := 5 * time.Minute
	old := t0.Add(-delay)
	recent := t0.Add(-delay + time.Second)
	tests := []struct {
		name         string
		in           Input
		wantW        int64
		wantEnqueue  []int64
		wantHoles    []cursor.OpenHole
		wantReleased [][2]int64
		wantWaiting  int64
		wantFills    int
	}{
		{name: "empty inbox", in: Input{W: 0}, wantW: 0, wantEnqueue: []int64{}},
		{name: "contiguous rows", in: Input{W: 3, Rows: rowsOf(4, 5, 6)}, wantW: 6, wantEnqueue: []int64{4, 5, 6}},
		{name: "first observation of a hole starts its clock", in: Input{W: 3, Rows: rowsOf(5, 6)}, wantW: 3,
			wantEnqueue: []int64{}, wantHoles: []cursor.OpenHole{hole(4, 4, t0)}, wantWaiting: 2},
		{name: "rows before a hole are enqueued, rows after wait", in: Input{W: 3, Rows: rowsOf(4, 6, 7)}, wantW: 4,
			wantEnqueue: []int64{4}, wantHoles: []cursor.OpenHole{hole(5, 5, t0)}, wantWaiting: 2},
		{name: "a hole within the delay keeps its clock", in: Input{W: 3, Holes: []cursor.OpenHole{hole(4, 4, recent)}, ScannedTo: 6,
			Rows: rowsOf(5, 6)}, wantW: 3, wantEnqueue: []int64{}, wantHoles: []cursor.OpenHole{hole(4, 4, recent)}, wantWaiting: 2},
		{name: "a filled hole lets W pass and is measured", in: Input{W: 3, Holes: []cursor.OpenHole{hole(4, 4, recent)}, ScannedTo: 6,
			Rows: rowsOf(4, 5, 6)}, wantW: 6, wantEnqueue: []int64{4, 5, 6}, wantFills: 1},
		{name: "an aged hole is released, skipping only the missing IDs", in: Input{W: 3, Holes: []cursor.OpenHole{hole(4, 6, old)},
			ScannedTo: 8, Rows: rowsOf(7, 8)}, wantW: 8, wantEnqueue: []int64{7, 8}, wantReleased: [][2]int64{{4, 6}}},
		{name: "holes seen in the same round are released together", in: Input{W: 3,
			Holes: []cursor.OpenHole{hole(4, 4, old), hole(7, 7, old), hole(9, 10, old)}, ScannedTo: 11, Rows: rowsOf(5, 6, 8, 11)},
			wantW: 11, wantEnqueue: []int64{5, 6, 8, 11}, wantReleased: [][2]int64{{4, 4}, {7, 7}, {9, 10}}},
		{name: "a younger hole stops W; the older ones before it go", in: Input{W: 3,
			Holes: []cursor.OpenHole{hole(4, 4, old), hole(7, 7, recent)}, ScannedTo: 8, Rows: rowsOf(5, 6, 8, 10)},
			wantW: 6, wantEnqueue: []int64{5, 6}, wantReleased: [][2]int64{{4, 4}},
			wantHoles: []cursor.OpenHole{hole(7, 7, recent), hole(9, 9, t0)}, wantWaiting: 2},
		{name: "a gap partly seen before: the new part gets a new clock", in: Input{W: 3,
			Holes: []cursor.OpenHole{hole(4, 5, old)}, ScannedTo: 6, Rows: rowsOf(6, 9)},
			wantW: 6, wantEnqueue: []int64{6}, wantReleased: [][2]int64{{4, 5}},
			wantHoles: []cursor.OpenHole{hole(7, 8, t0)}, wantWaiting: 1},
		{name: "a range half filled keeps its clock on both sides", in: Input{W: 3,
			Holes: []cursor.OpenHole{hole(4, 8, recent)}, ScannedTo: 9, Rows: rowsOf(6, 9)},
			wantW: 3, wantEnqueue: []int64{}, wantHoles: []cursor.OpenHole{hole(4, 5, recent), hole(7, 8, recent)}, wantWaiting: 2, wantFills: 1},
		{name: "a stale hole at or below W is dropped", in: Input{W: 5, Holes: []cursor.OpenHole{hole(4, 4, old)}, ScannedTo: 5,
			Rows: rowsOf(6)}, wantW: 6, wantEnqueue: []int64{6}},
		{name: "the single clock of an older cursor stays with the hole at W+1", in: Input{W: 3, LegacyHoleSince: &old,
			Rows: rowsOf(5, 7)}, wantW: 5, wantEnqueue: []int64{5}, wantReleased: [][2]int64{{4, 4}},
			wantHoles: []cursor.OpenHole{hole(6, 6, t0)}, wantWaiting: 1},
		{name: "a full batch: the window beyond it is scanned, its holes only watched", in: Input{W: 3, Rows: rowsOf(5, 6), Full: true,
			Beyond: []int64{7, 9, 10}}, wantW: 3, wantEnqueue: []int64{},
			wantHoles: []cursor.OpenHole{hole(4, 4, t0), hole(8, 8, t0)}, wantWaiting: 5},
		{name: "an aged hole beyond the batch is not released: the batch must prove it", in: Input{W: 3,
			Holes: []cursor.OpenHole{hole(4, 4, old), hole(8, 8, old)}, ScannedTo: 10, Rows: rowsOf(5, 6), Full: true},
			wantW: 6, wantEnqueue: []int64{5, 6}, wantReleased: [][2]int64{{4, 4}}, wantHoles: []cursor.OpenHole{hole(8, 8, old)}, wantWaiting: 3},
		{name: "a hole beyond the batch that filled is measured and gone", in: Input{W: 3,
			Holes: []cursor.OpenHole{hole(4, 4, recent), hole(8, 8, recent)}, ScannedTo: 10, Rows: rowsOf(5, 6), Full: true, Filled: []int64{8}},
			wantW: 3, wantEnqueue: []int64{}, wantHoles: []cursor.OpenHole{hole(4, 4, recent)}, wantWaiting: 6, wantFills: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.Now, in.Delay = t0, delay
			p := plan(in)
			if p.W != tt.wantW {
				t.Errorf("W = %d, want %d", p.W, tt.wantW)
			}
			if got := ids(p.Enqueue); !slices.Equal(got, tt.wantEnqueue) {
				t.Errorf("enqueue = %v, want %v", got, tt.wantEnqueue)
			}
			if !slices.EqualFunc(p.Holes, tt.wantHoles, func(a, b cursor.OpenHole) bool {
				return a.First == b.First && a.Last == b.Last && a.SeenAt.Equal(b.SeenAt)
			}) {
				t.Errorf("holes = %v, want %v", p.Holes, tt.wantHoles)
			}
			if !slices.Equal(p.Released, tt.wantReleased) {
				t.Errorf("released = %v, want %v", p.Released, tt.wantReleased)
			}
			if p.WaitingRows != tt.wantWaiting {
				t.Errorf("waiting rows = %d, want %d", p.WaitingRows, tt.wantWaiting)
			}
			if len(p.Fills) != tt.wantFills {
				t.Errorf("fills = %v, want %d", p.Fills, tt.wantFills)
			}
			wantSince := len(tt.wantHoles) > 0 && tt.wantHoles[0].First == tt.wantW+1
			if (p.HoleSince != nil) != wantSince || (wantSince && !p.HoleSince.Equal(tt.wantHoles[0].SeenAt)) {
				t.Errorf("hole_since = %v, want the clock of the hole at W+1 (%v)", p.HoleSince, wantSince)
			}
		})
	}
}

func TestPlanStopBefore(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	released := [][2]int64{{13, 14}}
	full := Plan{W: 16, Enqueue: rowsOf(11, 12, 15, 16), Released: released, HoleSince: &t0}
	tests := []struct {
		name         string
		id           int64
		wantW        int64
		wantEnqueue  []int64
		wantReleased [][2]int64
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
				!slices.Equal(got.Released, tt.wantReleased) {
				t.Errorf("stopBefore(%d) = W %d enqueue %v released %v hole %v; want W %d enqueue %v released %v hole %v",
					tt.id, got.W, ids(got.Enqueue), got.Released, got.HoleSince, tt.wantW, tt.wantEnqueue, tt.wantReleased, tt.wantHole)
			}
		})
	}
}
