package flightstore_test

import (
	"testing"
	"time"

	"github.com/msgexchange/msgexchange/pkg/flightstore"
	"github.com/msgexchange/msgexchange/testkit/pgtest"
)

// After a restore the stored flights below the published high-water are raised to it, a FLID
// absent from the restored state starts above it, and a floor never goes down (R-RESTORE-1).
func TestRaiseVersions(t *testing.T) {
	d := pgtest.New(t)
	ctx := t.Context()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for flid, v := range map[string]int{"A": 10, "B": 5, "D": 1, "E": 1, "F": 1} {
		if _, err := d.Pool.Exec(ctx, `INSERT INTO flight_schd (flid, state_version, created_at, updated_at) VALUES ($1, $2, $3, $3)`, flid, v, now); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name                   string
		floors                 map[string]int64
		wantFloors, wantRaised int64
		want                   map[string]int64
	}{
		{"published above the backup", map[string]int64{"A": 15, "B": 3, "C": 9, "D": 2, "E": 3, "F": 4}, 6, 4,
			map[string]int64{"A": 15, "B": 5, "D": 2, "E": 3, "F": 4}},
		{"a lower floor is recorded again, lowers nothing", map[string]int64{"A": 12, "C": 2}, 2, 0, map[string]int64{"A": 15, "B": 5}},
		{"nothing read", nil, 0, 0, map[string]int64{"A": 15, "B": 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := flightstore.RaiseVersions(ctx, d.Pool, tc.floors, 2, now) // several statements
			if err != nil {
				t.Fatal(err)
			}
			if r.Floors != tc.wantFloors || r.Flights != tc.wantRaised {
				t.Errorf("raised %+v, want %d floors and %d flights", r, tc.wantFloors, tc.wantRaised)
			}
			for flid, v := range tc.want {
				var got int64
				if err := d.Pool.QueryRow(ctx, `SELECT state_version FROM flight_schd WHERE flid = $1`, flid).Scan(&got); err != nil || got != v {
					t.Errorf("%s at version %d (%v), want %d", flid, got, err, v)
				}
			}
		})
	}
	if at, err := flightstore.FloorRecordedAt(ctx, d.Pool); err != nil || at == nil || !at.Equal(now) {
		t.Errorf("floor recorded at %v (%v), want %v", at, err, now)
	}
	// A flight a later restore took below a floor this run did not read is raised all the same.
	if _, err := d.Pool.Exec(ctx, `UPDATE flight_schd SET state_version = 1 WHERE flid = 'F'`); err != nil {
		t.Fatal(err)
	}
	if r, err := flightstore.RaiseVersions(ctx, d.Pool, map[string]int64{"A": 1}, 2, now); err != nil || r.Flights != 1 {
		t.Errorf("raised %+v (%v), want F back at its floor", r, err)
	}
	a, err := flightstore.ArchivedOf(ctx, d.Pool, "C")
	if err != nil || a.Floor != 9 || a.LastMsg != 0 {
		t.Errorf("the absent FLID C: %+v (%v), want floor 9", a, err)
	}
}
