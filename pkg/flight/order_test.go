package flight_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/msgexchange/msgexchange/pkg/flight"
	"github.com/msgexchange/msgexchange/pkg/sis"
)

// The golden cases of the R-ORDER rules: a message applied after a newer one, against the state
// the newer one left, must leave what in-order application leaves.

// created is flight 15 as an ADFT at msg 100 created it: its life and every part it wrote say
// msg 100.
func created(t *testing.T) flight.Flight {
	t.Helper()
	rec := adft(t, `<FLID>15</FLID><FLNO>CA101</FLNO><MVIN>D</MVIN><SODT>30NOV260900</SODT><ACFT>320</ACFT>`)
	d := flight.ApplyADFT(nil, flight.Input{MsgID: 100, STYP: "ADFT", Now: now, Record: rec}, snapDays)
	if !d.Changed {
		t.Fatal("the ADFT created nothing")
	}
	return d.Next
}

func flop(t *testing.T, cur flight.Flight, msgID int64, styp, body string) flight.Decision {
	t.Helper()
	rec, s := decode(t, cur.FLID, styp, body)
	return flight.ApplyFLOP(&cur, flight.Input{MsgID: msgID, STYP: s, Now: now, Record: rec})
}

// TestOrderGolden pins the R-ORDER rules for FLOP, ADFT and FDEL: each case applies a newer
// message, then an older one late, and checks the older one's outcome and the final state.
// Guards R-INV-24.
func TestOrderGolden(t *testing.T) {
	cases := []struct {
		name string
		// newer is applied first (msg 300), then older (msg 200); each is "STYP body" for a
		// FLOP, "ADFT body", or "FDEL".
		newer, older string
		skip         string            // the older message's skip reason prefix; "" = applied
		superseded   []string          // parts the older message reports superseded
		want         map[string]string // scalars after both ("" = absent)
		wantColl     map[string]int    // collection sizes after both
		state        string            // state after both ("" = ACTIVE)
	}{
		{name: "an older ESTT leaves the newer estimate", newer: "ESTT <ESTT>30NOV261030</ESTT>", older: "ESTT <ESTT>30NOV261000</ESTT>",
			skip: "superseded: ESTT newer at msg 300", superseded: []string{"ESTT"}, want: map[string]string{"ESTT": "30NOV261030"}},
		{name: "an older GTDT leaves the newer gates", newer: `GTDT <GTDT GTNO="1"><GATE>B2</GATE></GTDT>`,
			older: `GTDT <GTDT GTNO="1"><GATE>A1</GATE></GTDT><GTDT GTNO="2"><GATE>A2</GATE></GTDT>`,
			skip:  "superseded: GTDT newer at msg 300", superseded: []string{"GTDT"}, wantColl: map[string]int{"GTDT": 1}},
		{name: "an older empty tag does not clear a newer value", newer: "ACTT <ACTT>30NOV260912</ACTT>", older: "ACTT <ACTT/>",
			skip: "superseded: ACTT", superseded: []string{"ACTT"}, want: map[string]string{"ACTT": "30NOV260912"}},
		{name: "an older message of another part still applies", newer: "ESTT <ESTT>30NOV261030</ESTT>", older: "ACTT <ACTT>30NOV260912</ACTT>",
			want: map[string]string{"ESTT": "30NOV261030", "ACTT": "30NOV260912"}},
		{name: "HNAG: each tag is its own part", newer: "HNAG <FHAG>H2</FHAG>", older: "HNAG <FHAG>H1</FHAG><PHAG>P1</PHAG>",
			superseded: []string{"FHAG"}, want: map[string]string{"FHAG": "H2", "PHAG": "P1"}},
		{name: "FDIV: the newer element is taken whole, its cleared attribute too", newer: "FDIV <FDIV DDES=\"SHA\">fog</FDIV>",
			older: `FDIV <FDIV DDES="CAN" DDIR="1">weather</FDIV>`, skip: "superseded: FDIV,FDIV_DDES,FDIV_DDIR newer at msg 300",
			superseded: []string{"FDIV", "FDIV_DDES", "FDIV_DDIR"}, want: map[string]string{"FDIV": "fog", "FDIV_DDES": "SHA", "FDIV_DDIR": ""}},
		{name: "FDIV: an older element keeps what the newer ADFT set, takes the rest", newer: "ADFT <FLID>15</FLID><FDIV DDES=\"SHA\"/>",
			older: `FDIV <FDIV DDES="CAN" DDIR="1">weather</FDIV>`, superseded: []string{"FDIV_DDES"},
			want: map[string]string{"FDIV": "weather", "FDIV_DDES": "SHA", "FDIV_DDIR": "1"}},
		{name: "BOTM: the status follows the newer time", newer: "BOTM <BOTM/>", older: "BOTM <BOTM>30NOV260825</BOTM>",
			skip: "superseded: BOTM", superseded: []string{"BOTM"}, want: map[string]string{"BOTM": "", flight.BoardingStatus: ""}},
		{name: "a FLOP older than the deletion goes to the kept details, publishes nothing", newer: "FDEL",
			older: "ESTT <ESTT>30NOV261000</ESTT>", superseded: []string{flight.PartState}, want: map[string]string{"ESTT": "30NOV261000"},
			state: flight.Deleted},
		{name: "a deletion stays one: an older ADFT does not bring the flight back", newer: "FDEL",
			older: "ADFT <FLID>15</FLID><ACFT>330</ACFT>", superseded: []string{flight.PartState}, want: map[string]string{"ACFT": "330"},
			state: flight.Deleted},
		{name: "an older FDEL does not delete what a newer ADFT re-added", newer: "ADFT <FLID>15</FLID><ACFT>330</ACFT>", older: "FDEL",
			superseded: []string{flight.PartState}, want: map[string]string{"ACFT": "330"}},
		{name: "an older ADFT sets only what nobody newer wrote", newer: "ADFT <FLID>15</FLID><ACFT>330</ACFT>",
			older: "ADFT <FLID>15</FLID><ACFT>359</ACFT><RENO>B1234</RENO>", superseded: []string{"ACFT"},
			want: map[string]string{"ACFT": "330", "RENO": "B1234"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cur := created(t)
			apply := func(spec string, msgID int64) flight.Decision {
				kind, body, _ := strings.Cut(spec, " ")
				switch kind {
				case "FDEL":
					return flight.ApplyFDEL(&cur, flight.Input{MsgID: msgID, STYP: "FDEL", Now: now, Record: sis.FlightRecord{FLID: cur.FLID}})
				case "ADFT":
					return flight.ApplyADFT(&cur, flight.Input{MsgID: msgID, STYP: "ADFT", Now: now, Record: adft(t, body)}, snapDays)
				}
				return flop(t, cur, msgID, kind, body)
			}
			newer := apply(tc.newer, 300)
			if newer.Skip != "" || !newer.Changed {
				t.Fatalf("the newer message: skip %q, changed %v", newer.Skip, newer.Changed)
			}
			cur = newer.Next
			older := apply(tc.older, 200)
			if tc.skip != "" {
				if !strings.HasPrefix(older.Skip, tc.skip) {
					t.Fatalf("older message: skip %q, want %q", older.Skip, tc.skip)
				}
			} else if older.Skip != "" {
				t.Fatalf("older message skipped: %s", older.Skip)
			}
			if got := slices.Sorted(maps.Keys(older.Superseded)); !slices.Equal(got, tc.superseded) {
				t.Errorf("superseded %v, want %v", got, tc.superseded)
			}
			for part, by := range older.Superseded {
				if by != 300 {
					t.Errorf("%s superseded by msg %d, want 300", part, by)
				}
			}
			final := cur
			if older.Skip == "" {
				final = older.Next
			}
			for tag, v := range tc.want {
				if got := final.Scalars[tag]; got != v {
					t.Errorf("%s = %q, want %q", tag, got, v)
				}
			}
			for tag, n := range tc.wantColl {
				if got := len(final.Collections[tag]); got != n {
					t.Errorf("%s has %d items, want %d", tag, got, n)
				}
			}
			if want := cmpOr(tc.state, flight.Active); final.State != want {
				t.Errorf("state %s, want %s", final.State, want)
			}
			if final.State == flight.Deleted && older.Skip == "" && (older.Changed || len(older.Events) > 0) {
				t.Errorf("a message older than the deletion published: changed %v, %d events", older.Changed, len(older.Events))
			}
			if older.Skip == "" && older.Changed && final.Version != cur.Version+1 {
				t.Errorf("version %d after a change of version %d", final.Version, cur.Version)
			}
		})
	}
}

// TestOrderRecordsUnchangedParts: a message that writes a part with the value it already has
// changes nothing to publish but records itself as the part's writer, so an older message
// arriving later cannot take the part (R-ORDER-2).
func TestOrderRecordsUnchangedParts(t *testing.T) {
	cur := created(t)
	a := flop(t, cur, 300, "ESTT", `<ESTT>30NOV261000</ESTT>`)
	b := flop(t, a.Next, 400, "ESTT", `<ESTT>30NOV261000</ESTT>`)
	if b.Changed || !b.Recorded || len(b.Events) != 0 || b.Next.Version != a.Next.Version {
		t.Fatalf("same value again: changed %v, recorded %v, %d events, version %d", b.Changed, b.Recorded, len(b.Events), b.Next.Version)
	}
	if w := b.Next.Prov.Of("ESTT"); w != 400 {
		t.Fatalf("ESTT written by %d, want 400", w)
	}
	late := flop(t, b.Next, 350, "ESTT", `<ESTT>30NOV261100</ESTT>`)
	if !strings.HasPrefix(late.Skip, "superseded: ESTT newer at msg 400") {
		t.Fatalf("a message between the two: skip %q", late.Skip)
	}
	// The same message again (a re-run) is not newer than itself: it applies, and changes
	// nothing.
	again := flop(t, b.Next, 400, "ESTT", `<ESTT>30NOV261000</ESTT>`)
	if again.Skip != "" || again.Changed || again.Recorded {
		t.Fatalf("re-run: skip %q, changed %v, recorded %v", again.Skip, again.Changed, again.Recorded)
	}
}

// TestOrderFLOPBeforeTheFlightExisted: a FLOP older than the schedule that created its flight
// changed nothing in ID order (the flight was unknown then), so applied late it is superseded
// by the flight's life (R-ORDER-3).
func TestOrderFLOPBeforeTheFlightExisted(t *testing.T) {
	d := flop(t, created(t), 50, "ESTT", `<ESTT>30NOV261000</ESTT>`)
	if d.Skip != "superseded: STATE newer at msg 100" {
		t.Fatalf("skip %q", d.Skip)
	}
}

// TestOrderConservativeProvenance: a flight stored before provenance existed counts every part
// as written by its last message, so every older message is superseded and a newer one applies.
func TestOrderConservativeProvenance(t *testing.T) {
	cur := base() // last applied message 100
	cur.Prov = flight.Conservative(cur.LastMsgID, cur.State)
	if d := flop(t, cur, 90, "ACFT", `<ACFT>359</ACFT>`); !strings.HasPrefix(d.Skip, "superseded: STATE") {
		t.Fatalf("older than the last message: skip %q", d.Skip)
	}
	if d := flop(t, cur, 110, "ACFT", `<ACFT>359</ACFT>`); d.Skip != "" || !d.Changed {
		t.Fatalf("newer than the last message: skip %q, changed %v", d.Skip, d.Changed)
	}
}

// TestOrderSnapshot: a snapshot applied after newer messages clears only what no newer message
// wrote, and deletes by omission only a flight that existed at its ID (R-ORDER-5).
func TestOrderSnapshot(t *testing.T) {
	old := stored(t, fltr("A", "CA1", d1, "", `<ACFT>320</ACFT><ESTT>30NOV260930</ESTT>`), 1) // created at msg 1
	// A newer FLOP sets ESTT and REMC.
	rec, styp := decode(t, "A", "ESTT", `<ESTT>30NOV261000</ESTT>`)
	d := flight.ApplyFLOP(&old, flight.Input{MsgID: 600, STYP: styp, Now: now, Record: rec})
	a := d.Next
	// B was created after the snapshot's ID, by an ADFT at 700.
	bd := flight.ApplyADFT(nil, flight.Input{MsgID: 700, STYP: "ADFT", Now: now, Record: adft(t, `<FLID>B</FLID><FLNO>CA2</FLNO><SODT>`+sodt(d1)+`</SODT>`)}, snapDays)
	// The snapshot at 500 carries A without ESTT and ACFT 330, and omits B.
	p := pkg(t, "DNLD", fltr("A", "CA1", d1, "", `<ACFT>330</ACFT>`))
	scope, err := p.Scope(nil)
	if err != nil {
		t.Fatal(err)
	}
	pl, r := flight.PlanSnapshot(flight.SnapshotInput{MsgID: 500, Now: now, Package: p, Scope: scope, Stored: []flight.Flight{a, bd.Next}})
	if r != nil {
		t.Fatal(r)
	}
	got := byFLID(pl)
	na := got["A"].Decision
	if na.Next.Scalars["ESTT"] != "30NOV261000" || na.Next.Scalars["ACFT"] != "330" {
		t.Errorf("A after the late snapshot: ESTT %q (the newer FLOP's), ACFT %q (the snapshot's)", na.Next.Scalars["ESTT"], na.Next.Scalars["ACFT"])
	}
	if na.Superseded["ESTT"] != 600 {
		t.Errorf("A's superseded %v, want ESTT by 600", na.Superseded)
	}
	if b := got["B"].Decision; b.Next.State != flight.Active || b.Changed {
		t.Errorf("B, created after the snapshot, was deleted by it: state %s, changed %v", b.Next.State, b.Changed)
	}
}
