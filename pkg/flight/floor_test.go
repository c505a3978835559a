package flight_test

import (
	"slices"
	"testing"

	"github.com/msgexchange/msgexchange/pkg/flight"
)

// A FLID the history sweep archived (its last version v, the sweep's tombstone v+1) comes back
// above the tombstone; the floor is an input, so the rule stays pure.
func TestVersionFloor(t *testing.T) {
	days := flight.DayRule{Zone: shanghai}
	rec := adft(t, `<FLID>77</FLID><ALCD>CA</ALCD><FLNO>CA77</FLNO><SODT>01DEC261030</SODT>`)
	cur := flt("77", "CA77", "", 3)
	for _, tc := range []struct {
		name  string
		cur   *flight.Flight
		floor int64
		want  int64
	}{
		{"new FLID, never archived", nil, 0, 1},
		{"new FLID after an archive at v7 and its tombstone v8", nil, 8, 9},
		{"existing flight above the floor keeps counting", &cur, 2, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := flight.Input{MsgID: 5, STYP: "ADFT", Now: now, Record: rec, VersionFloor: tc.floor}
			o := flight.Decide(flight.KindADFT, tc.cur, in, flight.Group{}, days)
			if len(o.Writes) != 1 || o.Writes[0].Version != tc.want {
				t.Fatalf("writes %+v, want version %d", o.Writes, tc.want)
			}
			if len(o.Events) != 2 || o.Events[0].Version != tc.want || o.Events[1].Version != tc.want {
				t.Errorf("events %+v, want version %d", o.Events, tc.want)
			}
		})
	}
}

func TestPublished(t *testing.T) {
	master := flt("M", "CA100", "", 5)
	kids := []flight.Flight{flt("C2", "MU100", "M", 2), flt("C1", "ZH100", "M", 2), flt("X", "HU1", "OTHER", 1)}
	deleted := flt("C3", "3U1", "M", 4)
	deleted.State = flight.Deleted
	kids = append(kids, deleted)
	p := flight.Published(master, kids)
	if want := []flight.Share{{"C1", "ZH100"}, {"C2", "MU100"}}; !slices.Equal(p.MAFL, want) {
		t.Errorf("master MAFL = %v, want %v", p.MAFL, want)
	}
	if master.MAFL != nil || p.Version != master.Version {
		t.Errorf("Published must not change the stored state: %+v", master)
	}
	if c := flight.Published(kids[0], nil); c.MAFL != nil {
		t.Errorf("a child carries no MAFL: %v", c.MAFL)
	}
	gone := master.Clone()
	gone.State = flight.Deleted
	if d := flight.Published(gone, kids); d.MAFL != nil {
		t.Errorf("a deleted master carries no MAFL: %v", d.MAFL)
	}
}
